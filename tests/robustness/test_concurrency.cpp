//===- test_concurrency.cpp - One model, many threads ---------------------===//
//
// A model loaded from .tmir is run by 8 threads at once for many iterations;
// every result must equal the single-threaded one bit for bit. Pipelines run
// on separate copies of a module in separate threads must give the same
// printed graphs as one after the other. Built also under ThreadSanitizer by
// scripts/sanitize.sh.
//
//===----------------------------------------------------------------------===//
#include <atomic>
#include <filesystem>
#include <thread>

#include "../TestPasses.h"
#include "../ir/Fixtures.h"
#include "tm/io/Tmir.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
using namespace fixtures;

namespace {

constexpr int Threads = 8;

Tensor input(int seed) {
  Tensor t = Tensor::empty({1, 3, 3, 3});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(((i + 1) * (seed + 3) * 7919) % 1000) / 500.0f - 1.0f;
  return t;
}

std::unique_ptr<TracedModule> loadedModel() {
  auto dir = std::filesystem::temp_directory_path() /
             ("tmgraph-concurrency-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "model.tmir").string();
  REQUIRE(succeeded(saveTmir(*tracedMyModule(), path)));
  auto m = loadTmir(path);
  std::filesystem::remove_all(dir);
  REQUIRE(m.succeeded());
  return std::move(*m);
}

} // namespace

TEST_CASE("a loaded model run by 8 threads at once matches the serial run",
          "[robustness][threads]") {
  auto tm = loadedModel();
  rt::Interpreter interp(*tm);
  const int Iterations = 200;
  std::vector<Tensor> inputs, serial;
  for (int s = 0; s < Threads; ++s) {
    inputs.push_back(input(s));
    serial.push_back(interp.run({inputs.back()}).outputs.at(0));
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < Threads; ++t)
    pool.emplace_back([&, t] {
      for (int i = 0; i < Iterations; ++i) {
        int s = (t + i) % Threads; // every thread sees every input
        try {
          Tensor y = interp.run({inputs[s]}).outputs.at(0);
          if (!y.bitwiseEqual(serial[s]))
            ++mismatches;
        } catch (...) {
          ++errors;
        }
      }
    });
  for (auto &th : pool)
    th.join();
  CHECK(errors == 0);
  CHECK(mismatches == 0);
}

TEST_CASE("pipelines on separate modules in separate threads do not interfere",
          "[robustness][threads]") {
  const PassRegistry &r = test::testPasses();
  auto pipeline = Pipeline::parse("flatten,merge-getattr,compile,verify", r);
  REQUIRE(pipeline.succeeded());
  // Serial reference.
  auto ref = loadedModel();
  {
    PassManager pm(pipeline->clone(), {});
    REQUIRE(succeeded(pm.run(*ref)));
  }
  std::string want = printTmir(*ref);
  std::vector<std::unique_ptr<TracedModule>> models;
  for (int t = 0; t < Threads; ++t)
    models.push_back(loadedModel());
  std::vector<std::string> got(Threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < Threads; ++t)
    pool.emplace_back([&, t] {
      for (int rep = 0; rep < 10; ++rep) {
        auto m = models[t]->cloneTraced();
        PipelineOptions o;
        o.threads = 2; // graph-local passes fan out inside each thread too
        PassManager pm(pipeline->clone(), o);
        if (auto r = pm.run(*m); r.failed()) {
          got[t] = "error: " + r.diagnostic().str();
          return;
        }
        got[t] = printTmir(*m);
      }
    });
  for (auto &th : pool)
    th.join();
  for (int t = 0; t < Threads; ++t)
    CHECK(got[t] == want);
}
