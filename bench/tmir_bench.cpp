//===- tmir_bench.cpp - Throughput of the .tmir printer and parser -------===//
//
// Prints and parses chain graphs of 1e4, 1e5 and 1e6 exprs (alternating
// relu and `x + 1`, with weights inline-free: tensors by reference) and
// reports MB/s and the growth of the time per 10x size, which must stay
// linear (at most 13x).
//
//   tm-tmir-bench [--max-size N]
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tm/io/Tmir.h"
#include "BenchHeap.h"
#include "tm/ir/IR.h"

using namespace tmg;

static std::unique_ptr<TracedModule> chain(size_t n) {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Chain"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 16}}});
  Node *x = b.arg(0);
  for (size_t i = 0; i < n; ++i)
    x = i % 2 ? b.callFunction("relu", {x}) : b.callMethod(x, "__add__", {1});
  b.finish(x);
  return tm;
}

template <typename F> static double best(int reps, F &&f) {
  double t = 1e30;
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t;
}

int main(int argc, char **argv) {
  size_t maxSize = 1000000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--max-size" && i + 1 < argc)
      maxSize = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: tm-tmir-bench [--max-size N]\n");
      return 2;
    }
  }
  // Page faults and TLB misses of fresh memory grow faster than the graph
  // (see BenchHeap.h): pre-fault what the largest size needs (~2.3 KiB per
  // expr for the module, its text and the parsed copy).
  if (!reserveHeap(maxSize * 2400)) {
    std::fprintf(stderr, "tm-tmir-bench: cannot reserve the heap\n");
    return 2;
  }
  std::printf("%-8s %10s %12s %10s %12s %10s\n", "exprs", "MB", "print ms", "MB/s",
              "parse ms", "MB/s");
  std::vector<double> printT, parseT;
  for (size_t n = 10000; n <= maxSize; n *= 10) {
    auto tm = chain(n);
    std::string text;
    int reps = n >= 1000000 ? 1 : 3;
    double tp = best(reps, [&] { text = printTmir(*tm); });
    double tq = best(reps, [&] {
      auto r = parseTmir(text, "bench.tmir");
      if (r.failed()) {
        std::fprintf(stderr, "%s\n", r.diagnostic().str().c_str());
        std::exit(1);
      }
    });
    double mb = double(text.size()) / 1e6;
    std::printf("%-8zu %10.1f %12.1f %10.1f %12.1f %10.1f\n", n, mb, tp * 1e3, mb / tp,
                tq * 1e3, mb / tq);
    printT.push_back(tp);
    parseT.push_back(tq);
  }
  bool ok = true;
  for (size_t i = 1; i < printT.size(); ++i) {
    double gp = printT[i] / printT[i - 1], gq = parseT[i] / parseT[i - 1];
    std::printf("growth x10 step %zu: print %.1fx, parse %.1fx\n", i, gp, gq);
    ok &= gp <= 13.0 && gq <= 13.0;
  }
  std::printf("%s: growth per 10x at most 13x\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
