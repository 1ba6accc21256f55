//===- test_mutations.cpp - Malformed .tmir and safetensors never crash --===//
//
// Random corruptions of valid files (byte changes, deleted or duplicated
// lines, truncations) must parse or fail with a located Diagnostic; never
// crash, hang or throw anything else. A seeded, bounded smoke test of the
// readers (continuous fuzzing belongs to the robustness work).
//
//===----------------------------------------------------------------------===//
#include <random>

#include "../ir/Fixtures.h"
#include "tm/io/Tmir.h"

using namespace tmg;

TEST_CASE(".tmir readers survive random corruption", "[io][robustness]") {
  auto tm = fixtures::tracedMyModule();
  TmirWriteOptions o;
  o.inlineMaxElements = 64;
  const std::string good = printTmir(*tm, o);
  std::mt19937 rng(1234);
  const char alphabet[] = "%(),:;'\"=[]{}0123456789-.\t\n abcxyz_#@";
  int failures = 0, successes = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string t = good;
    int edits = 1 + int(rng() % 3);
    for (int k = 0; k < edits && !t.empty(); ++k) {
      size_t at = rng() % t.size();
      switch (rng() % 5) {
      case 0: t[at] = alphabet[rng() % (sizeof(alphabet) - 1)]; break;
      case 1: t.erase(at, 1 + rng() % 8); break;
      case 2: t.insert(at, 1, alphabet[rng() % (sizeof(alphabet) - 1)]); break;
      case 3: t.resize(at); break;
      case 4: {
        size_t b = t.rfind('\n', at), e = t.find('\n', at);
        if (b != std::string::npos && e != std::string::npos)
          t.insert(e, t.substr(b, e - b));
        break;
      }
      }
    }
    auto r = parseTmir(t, "fuzz.tmir");
    if (r.failed()) {
      ++failures;
      CHECK(r.diagnostic().str().rfind("fuzz.tmir:", 0) == 0);
    } else {
      ++successes;
      CHECK(verify(**r).empty());
    }
  }
  CHECK(failures > 1000);
  (void)successes;
}

TEST_CASE("safetensors reader survives random corruption", "[io][robustness]") {
  WeightFile w;
  w.tensors.emplace_back("a", Tensor::randn({3, 4}, 1));
  w.tensors.emplace_back("b", Tensor::fromInts({5}, {1, 2, 3, 4, 5}, DType::Int64));
  const std::string good = *serializeSafetensors(w);
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::string t = good;
    size_t at = rng() % t.size();
    if (rng() % 4 == 0)
      t.resize(at);
    else
      t[at] = char(rng() % 256);
    auto r = parseSafetensors(t, "fuzz.safetensors");
    if (r.failed())
      CHECK(r.diagnostic().str().rfind("fuzz.safetensors@byte ", 0) == 0);
  }
}
