//===- test_safetensors.cpp - Weights files: layout and malformed input --===//
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <iterator>
#include <fstream>

#include <sys/wait.h>
#include <unistd.h>

#include "tm/io/MappedFile.h"
#include "tm/io/Safetensors.h"

using namespace tmg;

namespace {
/// A file with header `json` and `data` bytes.
std::string file(const std::string &json, const std::string &data = "") {
  std::string out;
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i)
    out += char((n >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string error(const std::string &bytes) {
  auto r = parseSafetensors(bytes, "w.safetensors");
  REQUIRE(r.failed());
  return r.diagnostic().str();
}
} // namespace

TEST_CASE("safetensors: the standard layout", "[io][safetensors]") {
  WeightFile w;
  w.tensors.emplace_back("b", Tensor::fromFloats({2}, {1.5f, -2.0f}));
  w.tensors.emplace_back("a", Tensor::fromInts({2, 2}, {1, 2, 3, 4}, DType::Int64));
  w.tensors.emplace_back("empty", Tensor::zeros({0, 3}));
  w.metadata["format"] = "pt";
  auto bytes = serializeSafetensors(w);
  REQUIRE(bytes.succeeded());
  // 8-byte little-endian length, JSON, 8-aligned data start.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | uint8_t((*bytes)[i]);
  CHECK((8 + n) % 8 == 0);
  std::string header = bytes->substr(8, n);
  CHECK(header.find("\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}") !=
        std::string::npos);
  CHECK(header.find("\"__metadata__\":{\"format\":\"pt\"}") != std::string::npos);
  CHECK(bytes->size() == 8 + n + 8 + 32);
  auto back = parseSafetensors(*bytes);
  REQUIRE(back.succeeded());
  REQUIRE(back->tensors.size() == 3);
  CHECK(back->tensors[0].first == "b"); // data order is kept
  CHECK(back->find("a")->at(3) == 4.0);
  CHECK(back->find("a")->dtype() == DType::Int64);
  CHECK(back->metadata.at("format") == "pt");
  WeightFile dup;
  dup.tensors.emplace_back("x", Tensor::zeros({1}));
  dup.tensors.emplace_back("x", Tensor::zeros({1}));
  CHECK(serializeSafetensors(dup).failed());
}

TEST_CASE("safetensors: every dtype round-trips under its standard code", "[io][safetensors]") {
  const char *codes[] = {"F32", "F16", "I8", "U8", "I32", "I64", "BOOL",
                         "F64", "BF16", "I16", "U16", "U32", "U64"};
  WeightFile w;
  for (DType t : allDTypes())
    if (!isString(t)) // safetensors has no string dtype: checked below
      w.tensors.emplace_back(dtypeName(t).str(), Tensor::fromInts({3}, {0, 1, 1}, t));
  auto bytes = serializeSafetensors(w);
  REQUIRE(bytes.succeeded());
  for (size_t i = 0; i < std::size(codes); ++i)
    CHECK(bytes->find(fmt::format("\"dtype\":\"{}\"", codes[i])) != std::string::npos);
  auto back = parseSafetensors(*bytes);
  REQUIRE(back.succeeded());
  for (DType t : allDTypes())
    if (!isString(t))
      CHECK(back->find(dtypeName(t))->bitwiseEqual(Tensor::fromInts({3}, {0, 1, 1}, t)));
  WeightFile s;
  s.tensors.emplace_back("words", Tensor::zeros({2}, DType::String));
  auto refused = serializeSafetensors(s);
  REQUIRE(refused.failed());
  CHECK(refused.diagnostic().message ==
        "tensor 'words' has dtype string, which safetensors cannot hold (write .npy or ONNX)");
}

TEST_CASE("safetensors: every malformed input names the byte offset", "[io][safetensors]") {
  CHECK(error("abc") == "w.safetensors@byte 0: error: truncated safetensors file: 3 "
                        "bytes, the header length alone needs 8");
  CHECK(error(file("{}").substr(0, 9)).find("header length 2 exceeds the file") !=
        std::string::npos);
  CHECK(error(file("{\"a\": ")).find("w.safetensors@byte 14: error: malformed JSON header") == 0);
  CHECK(error(file("[]")).find("must be an object") != std::string::npos);
  CHECK(error(file(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})",
                   std::string(8, '\0')))
            .find("unsupported dtype 'C64'") != std::string::npos);
  CHECK(error(file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",
                   std::string(4, '\0')))
            .find("shape entries must be non-negative") != std::string::npos);
  std::string e = error(file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                             std::string(8, '\0')));
  CHECK(e.find("data offsets [0, 16) are out of range (the data section has 8 bytes)") !=
        std::string::npos);
  e = error(file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                 std::string(8, '\0')));
  CHECK(e.find("float32 (3,) needs 12 bytes but its data offsets span 8") != std::string::npos);
  CHECK(e.find("@byte 62:") != std::string::npos); // the data start: 8 + header
  e = error(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 std::string(8, '\0')));
  CHECK(e.find("overlap") != std::string::npos);
  CHECK(error(file(R"({"a":{"dtype":"F32"}})")).find("needs dtype, shape and data_offsets") !=
        std::string::npos);
  CHECK(readSafetensors("/nonexistent/x.safetensors").diagnostic().str().find(
            "/nonexistent/x.safetensors: error: cannot open file") == 0);
}

TEST_CASE("safetensors: a read file is mapped; its tensors are private views of it",
          "[io][safetensors]") {
  auto dir = std::filesystem::temp_directory_path() /
             ("tmgraph-safetensors-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "w.safetensors").string();
  WeightFile w;
  w.tensors.emplace_back("d", Tensor::fromInts({2}, {5, 6}, DType::Int64));
  w.tensors.emplace_back("odd", Tensor::fromInts({3}, {1, 2, 3}, DType::Int8));
  w.tensors.emplace_back("f", Tensor::fromFloats({2, 2}, {1, 2, 3, 4}));
  // Unaligned and above 2 MiB: copied into huge-page memory.
  w.tensors.emplace_back("big", Tensor::randn({3, 200001}, 7));
  REQUIRE(writeSafetensors(path, w).succeeded());
  auto bytes = [&] {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  std::string before = bytes();
  auto r = readSafetensors(path);
  REQUIRE(r.succeeded());
  // "f" starts 19 bytes into the data: not aligned to a float, so a copy;
  // "d" and "odd" are views. Either way every value is right.
  for (const auto &[name, t] : r->tensors)
    CHECK(t.bitwiseEqual(*w.find(name)));
  Tensor f = *r->find("f");
  f.data<float>()[0] = 9;
  Tensor d = *r->find("d");
  d.data<int64_t>()[0] = 9;
  CHECK(bytes() == before); // copy-on-write: the file is unchanged
  // Written over while mapped (a new file renamed over it), and removed:
  // the tensors read what they were loaded with.
  REQUIRE(writeSafetensors(path, w).succeeded());
  std::filesystem::remove_all(dir);
  CHECK(r->find("odd")->bitwiseEqual(*w.find("odd")));
  CHECK(r->find("big")->bitwiseEqual(*w.find("big")));
  CHECK(d.at(0) == 9);
  CHECK(d.at(1) == 6);
  CHECK(f.at(3) == 4);
}

TEST_CASE("writeFileWith: a failed write leaves the old file and no temporary",
          "[io][files]") {
  namespace fs = std::filesystem;
  fs::path dir =
      fs::temp_directory_path() / fmt::format("tm-writewith-{}", ::getpid());
  fs::create_directories(dir);
  std::string path = (dir / "out.txt").string();
  REQUIRE(
      succeeded(writeFileWith(path, [](std::ostream &o) { o << "first"; })));
  auto r = writeFileWith(path, [](std::ostream &o) {
    o << "half of the second";
    throw Error(Diagnostic(Location::inFile("out.txt"), "printing failed"));
  });
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().message, Catch::Contains("printing failed"));
  auto kept = readFileBytes(path);
  REQUIRE(succeeded(kept));
  CHECK(*kept == "first");
  CHECK(!fs::exists(path + ".tmp"));
  REQUIRE(
      succeeded(writeFileWith(path, [](std::ostream &o) { o << "second"; })));
  CHECK(*readFileBytes(path) == "second");
  fs::remove_all(dir);
}

TEST_CASE(
    "FileBytes: a regular file is mapped, a pipe read, a missing file named",
    "[io][files]") {
  namespace fs = std::filesystem;
  fs::path dir =
      fs::temp_directory_path() / fmt::format("tm-filebytes-{}", ::getpid());
  fs::create_directories(dir);
  std::string path = (dir / "model.tmir").string();
  std::string text = "tmir 4\n# some text\n";
  REQUIRE(succeeded(writeFileBytes(path, text)));
  auto f = FileBytes::open(path);
  REQUIRE(succeeded(f));
  CHECK(f->mapping() != nullptr);
  CHECK(f->bytes() == text);
  CHECK(f->take() == text);

  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  REQUIRE(::write(fds[1], text.data(), text.size()) == ssize_t(text.size()));
  ::close(fds[1]);
  auto p = FileBytes::open(fmt::format("/proc/self/fd/{}", fds[0]));
  ::close(fds[0]);
  REQUIRE(succeeded(p));
  CHECK(p->mapping() == nullptr);
  CHECK(p->bytes() == text);

  auto missing = FileBytes::open((dir / "missing.tmir").string());
  REQUIRE(missing.failed());
  CHECK_THAT(missing.diagnostic().str(),
             Catch::Contains("missing.tmir: error: cannot open file"));
  fs::remove_all(dir);
}

TEST_CASE("readFileBytes: whole files, pipes, and errors naming the file", "[io][files]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / fmt::format("tm-readfile-{}", ::getpid());
  fs::create_directories(dir);
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = char(i * 131 + (i >> 9));
  std::string path = (dir / "big.bin").string();
  REQUIRE(succeeded(writeFileBytes(path, big)));
  auto r = readFileBytes(path);
  REQUIRE(succeeded(r));
  CHECK(*r == big);

  std::string empty = (dir / "empty").string();
  REQUIRE(succeeded(writeFileBytes(empty, "")));
  auto e = readFileBytes(empty);
  REQUIRE(succeeded(e));
  CHECK(e->empty());

  // A pipe has no size: read in chunks until its end.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::string piped(200000, 'x');
  piped[12345] = 'y';
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    size_t done = 0;
    while (done < piped.size()) {
      ssize_t n = ::write(fds[1], piped.data() + done, piped.size() - done);
      if (n <= 0)
        _exit(1);
      done += size_t(n);
    }
    _exit(0);
  }
  ::close(fds[1]);
  auto p = readFileBytes(fmt::format("/proc/self/fd/{}", fds[0]));
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  REQUIRE(succeeded(p));
  CHECK(*p == piped);

  auto missing = readFileBytes((dir / "missing").string());
  REQUIRE(missing.failed());
  CHECK_THAT(missing.diagnostic().str(), Catch::Contains("missing: error: cannot open file"));
  auto directory = readFileBytes(dir.string());
  REQUIRE(directory.failed());
  CHECK_THAT(directory.diagnostic().str(), Catch::Contains("is a directory"));
  fs::remove_all(dir);
}
