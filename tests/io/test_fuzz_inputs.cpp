// Replays fuzz/corpus/<target>/* and fuzz/regressions/<target>/* through the
// properties of fuzz/Targets.h. A violated property aborts (the test then
// fails as crashed, naming the file in its log).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "Targets.h"
#include "tm/io/Npy.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/matcher/Rules.h"

namespace fs = std::filesystem;

static std::vector<fs::path> filesIn(const fs::path &dir) {
  std::vector<fs::path> out;
  if (fs::is_directory(dir))
    for (const auto &e : fs::directory_iterator(dir))
      if (e.is_regular_file())
        out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("fuzz inputs: seed corpora and minimised findings keep the readers' contracts",
          "[io][fuzz]") {
  for (const auto &t : tmg::fuzz::targets()) {
    auto corpus = filesIn(fs::path(TM_FUZZ_DIR) / "corpus" / t.name);
    INFO(t.name);
    CHECK(!corpus.empty()); // every target has a seed corpus in the repo
    auto regressions = filesIn(fs::path(TM_FUZZ_DIR) / "regressions" / t.name);
    corpus.insert(corpus.end(), regressions.begin(), regressions.end());
    for (const auto &f : corpus) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      UNSCOPED_INFO(f.string());
      CHECK(t.fn(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()) == 0);
    }
  }
}

TEST_CASE("fuzz inputs: the npy reader refuses a huge shape before allocating",
          "[io][fuzz]") {
  // Minimised from a libFuzzer finding: a header promising ~3e11 elements
  // made the reader allocate before checking the data size.
  std::string b("\x93NUMPY\x01\x00", 8);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (299999999999,), }";
  b += char(dict.size());
  b += char(0);
  b += dict;
  b += std::string(8, '\0');
  auto t = tmg::parseNpy(b, "huge.npy");
  REQUIRE(t.failed());
  CHECK_THAT(t.diagnostic().str(),
             Catch::Contains("needs 1199999999996 bytes of data, the file has 8"));
}

TEST_CASE("fuzz inputs: a JSON number overflowing a double is a diagnosed header error",
          "[io][fuzz]") {
  // Minimised from a libFuzzer finding: nlohmann::json throws out_of_range
  // (not parse_error) for such a literal, and it escaped the reader.
  std::string header = "{\"__metadata__\": 1e99999}";
  std::string b(8, '\0');
  b[0] = char(header.size());
  b += header;
  auto w = tmg::parseSafetensors(b, "big.safetensors");
  REQUIRE(w.failed());
  CHECK_THAT(w.diagnostic().str(), Catch::Contains("malformed JSON header"));
}

TEST_CASE("fuzz inputs: a getattr line without an output is a parse error",
          "[io][fuzz]") {
  // Minimised from a libFuzzer finding: `outs=[]` on a getattr line made the
  // reader print the expr (to check the line) with no output to name.
  std::ifstream in(fs::path(TM_FUZZ_DIR) / "regressions" / "fuzz_tmir" /
                       "getattr-without-output.tmir",
                   std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(!text.empty());
  tmg::TmirReadOptions opts;
  opts.missingWeightsAsZeros = true;
  auto m = tmg::parseTmir(text, "g.tmir", opts);
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(),
             Catch::StartsWith("g.tmir:9:") &&
                 Catch::Contains("a getattr has exactly one output, not 0"));
}

TEST_CASE("fuzz inputs: deeply nested values are an error, not a stack overflow",
          "[io][fuzz]") {
  // An args annotation nesting 100,000 tuples deep.
  std::string text = "tmir 1\nids 3 3\nmodule Net traced top {\n"
                     "graph name='Net' qualname='Net' argdef=" +
                     std::string(100000, '(') + "\n";
  auto m = tmg::parseTmir(text, "deep.tmir");
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(), Catch::StartsWith("deep.tmir:4:") &&
                                       Catch::Contains("values nest deeper than 200 levels"));
}

TEST_CASE("fuzz inputs: a deeply nested rule pattern is an error, not a stack overflow",
          "[io][fuzz]") {
  // Minimised from a fuzz_rules finding: 10^4 '(' overflowed the stack of
  // the rule parser's recursive descent.
  std::string text(10000, '(');
  try {
    tmg::parsePattern(text, tmg::Location::inFile("deep.toml", 3, 9));
    FAIL("expected an error");
  } catch (const tmg::Error &e) {
    CHECK_THAT(e.diagnostic().str(), Catch::StartsWith("deep.toml:3:") &&
                                         Catch::Contains("nests deeper than 200 levels"));
  }
}

TEST_CASE("fuzz inputs: a capture nested directly in another one is a rule error",
          "[io][fuzz]") {
  // Minimised from a fuzz_rules finding: `$c` in `($x= $c) * $b` had no slot
  // in the compiled pattern, and a replacement using it read past the
  // match's slots.
  tmg::RuleDecl r;
  r.name = "nested";
  r.match = "($x= $c) * $b";
  r.replace = "$x * $c";
  r.loc = r.matchLoc = r.replaceLoc = tmg::Location::inFile("rules.toml", 2, 10);
  auto set = tmg::compileRuleSet({r});
  REQUIRE(set.failed());
  CHECK_THAT(set.diagnostic().str(),
             Catch::StartsWith("rules.toml:2:") &&
                 Catch::Contains("capture '$c' cannot be referenced"));
}

#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"

TEST_CASE("fuzz inputs: a zero Conv stride is an import error, not a SIGFPE", "[io][fuzz]") {
  // Minimised from a fuzz_onnx finding (strides [0, 1] on a Conv): libonnx
  // 1.12's shape inference divides by the stride unchecked.
  std::ifstream in(fs::path(TM_FUZZ_DIR) / "regressions" / "fuzz_onnx" /
                       "conv-zero-stride.onnx",
                   std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(!bytes.empty());
  auto m = tmg::io::importOnnxBytes(bytes, "z.onnx", tmg::io::OnnxImportOptions());
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(),
             Catch::Contains("node #0 (Conv): attribute 'strides' must be positive, got 0"));
}

TEST_CASE("fuzz inputs: a Reshape target whose size overflows is an import error",
          "[io][fuzz]") {
  // Minimised from a fuzz_onnx finding: the importer multiplied the target
  // shape's entries (here 2^32 * 2^32 * 4) without overflow checks.
  std::ifstream in(fs::path(TM_FUZZ_DIR) / "regressions" / "fuzz_onnx" /
                       "reshape-shape-overflow.onnx",
                   std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(!bytes.empty());
  auto m = tmg::io::importOnnxBytes(bytes, "r.onnx", tmg::io::OnnxImportOptions());
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(), Catch::Contains("the shape's element count overflows int64"));
}

TEST_CASE("fuzz inputs: initializer dims without the data are an error before allocating",
          "[io][fuzz]") {
  // Minimised from a fuzz_onnx out-of-memory finding: dims 10^5 x 10^5 with
  // one float made the reader allocate 40 GB before counting the values.
  std::ifstream in(fs::path(TM_FUZZ_DIR) / "regressions" / "fuzz_onnx" /
                       "initializer-dims-without-data.onnx",
                   std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(!bytes.empty());
  auto m = tmg::io::importOnnxBytes(bytes, "w.onnx", tmg::io::OnnxImportOptions());
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(),
             Catch::Contains("tensor 'w' of shape (100000, 100000) holds 1 values"));
}
#endif
