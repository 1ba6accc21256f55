//===- tmir_bench.cpp - Throughput of the .tmir printer and parser -------===//
//
// Prints and parses chain graphs of 1e4, 1e5 and 1e6 exprs (alternating
// relu and `x + 1`, with weights inline-free: tensors by reference) and
// reports MB/s and the growth of the time per 10x size, which must stay
// linear (at most 13x).
//
// Times are the process's CPU time (the machine is shared: wall time
// includes waiting for a core); wall-clock rates are printed beside them.
// Parsing is timed up to the returned module; destroying it is timed
// apart ("free ms", the IR's teardown, not the parser's work).
//
//   tm-tmir-bench [--max-size N]
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
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

static double cpuNow() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + double(t.tv_nsec) * 1e-9;
}

struct Time {
  double cpu = 1e30, wall = 1e30;
};

/// Best of `reps` runs (CPU and wall time, each its own minimum), each
/// starting with cold caches (see BenchHeap.h).
/// `reset()` runs before each run, untimed (it frees the previous result).
template <typename F, typename R> static Time best(int reps, F &&f, R &&reset) {
  Time t;
  for (int r = 0; r < reps; ++r) {
    reset();
    flushCaches();
    auto w0 = std::chrono::steady_clock::now();
    double c0 = cpuNow();
    f();
    t.cpu = std::min(t.cpu, cpuNow() - c0);
    t.wall = std::min(
        t.wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count());
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
  std::printf("%-8s %7s | %9s %7s %7s | %9s %7s %7s | %8s\n", "exprs", "MB",
              "print ms", "MB/s", "wall", "parse ms", "MB/s", "wall", "free ms");
  std::vector<double> printT, parseT;
  for (size_t n = 10000; n <= maxSize; n *= 10) {
    auto tm = chain(n);
    std::string text;
    int reps = n >= 1000000 ? 3 : 9; // as tm-ir-bench: equal counts below 1e6
    // Each run's result is freed before the next run, outside the timed
    // region (no run frees the previous one's text or module inside it,
    // and the heap holds at most one result at a time).
    Time tp = best(
        reps, [&] { text = printTmir(*tm); }, [&] { text = std::string(); });
    tm.reset();
    std::unique_ptr<TracedModule> parsed;
    Time tq = best(
        reps,
        [&] {
          auto r = parseTmir(text, "bench.tmir");
          if (r.failed()) {
            std::fprintf(stderr, "%s\n", r.diagnostic().str().c_str());
            std::exit(1);
          }
          parsed = std::move(*r);
        },
        [&] { parsed.reset(); });
    double c0 = cpuNow();
    parsed.reset();
    double freeMs = (cpuNow() - c0) * 1e3;
    double mb = double(text.size()) / 1e6;
    std::printf("%-8zu %7.1f | %9.1f %7.1f %7.1f | %9.1f %7.1f %7.1f | %8.1f\n", n, mb,
                tp.cpu * 1e3, mb / tp.cpu, mb / tp.wall, tq.cpu * 1e3, mb / tq.cpu,
                mb / tq.wall, freeMs);
    printT.push_back(tp.cpu);
    parseT.push_back(tq.cpu);
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
