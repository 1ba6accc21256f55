//===- trace_bench.cpp - Tracing throughput -------------------------------===//
//
// Traces a generated C++ module of N ops (N = 1e3, 1e4, 1e5) and reports
// exprs recorded per second and how the cost grows per 10x. The module is a
// chain of blocks; each block reaches a parameter and a builtin Linear by
// attribute, adds, calls the Linear, applies relu, and adds a constant: six
// exprs, the mix of a real model's forward. Reference, measured in the same
// run: building the same graph directly with GraphBuilder (the tracer
// records through it, so the ratio is the tracer's own overhead: Vars,
// Values, argument conversion, the per-thread state). Both include the
// final compile and id reset of `finish`. Each time is the best of R runs.
//
//   tm-trace-bench [--max-size N] [--reps R]
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include <fmt/core.h>

#include "BenchHeap.h"
#include "tm/trace/Trace.h"

using namespace tmg;

namespace {

constexpr int64_t Width = 8;

/// N/6 blocks of: getattr w, getattr lin, add, call, relu, add const.
struct Chain : LayerOf<Chain> {
  size_t blocks;
  explicit Chain(size_t n) : LayerOf("Chain", {"x"}), blocks(n) {
    registerParameter("w", Tensor::randn({Width}));
    addModule<Linear>("lin", Width, Width);
  }
  Var forward(Var x) {
    for (size_t i = 0; i < blocks; ++i) {
      // A fresh attribute access per block, as `self.w` in a Python loop.
      ModuleRef lin = mod("lin");
      Var a = x + attr("w");
      Var y = lin(a);
      x = F::relu(y) + 1;
    }
    return x;
  }
};

/// The same graph with the GraphBuilder.
std::unique_ptr<TracedModule> buildDirect(size_t blocks) {
  auto m = std::make_unique<Module>("Chain");
  m->registerParameter("w", Tensor::randn({Width}));
  m->addModule<Linear>("lin", Width, Width);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4, Width}}});
  Node *x = b.arg(0);
  for (size_t i = 0; i < blocks; ++i) {
    Node *lin = b.getAttr(b.self(), "lin");
    Node *w = b.getAttr(b.self(), "w");
    Node *a = b.callMethod(x, "__add__", {w});
    Node *y = b.callModule(lin, {a});
    x = b.callMethod(b.callFunction("relu", {y}), "__add__", {1});
  }
  b.finish(x);
  return tm;
}

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

} // namespace

int main(int argc, char **argv) {
  size_t maxSize = 100000;
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-size") && i + 1 < argc)
      maxSize = size_t(std::atoll(argv[++i]));
    else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else {
      fmt::print(stderr, "usage: tm-trace-bench [--max-size N] [--reps R]\n");
      return 2;
    }
  }
  reserveHeap(size_t(1) << 30);
  fmt::print("{:>8} {:>10} {:>10} {:>12} {:>12} {:>12} {:>8}\n", "ops", "recorded",
             "kept", "trace ms", "exprs/s", "builder ms", "ratio");
  double prevTrace = 0;
  for (size_t n = 1000; n <= maxSize; n *= 10) {
    size_t blocks = n / 6;
    double bestT = 1e30, bestB = 1e30;
    size_t exprs = 0;
    std::string tracedText, builtText;
    for (int r = 0; r < reps; ++r) {
      Chain net(blocks);
      auto t0 = std::chrono::steady_clock::now();
      auto tm = traceModule(net, Var::meta({4, Width}));
      auto t1 = std::chrono::steady_clock::now();
      bestT = std::min(bestT, seconds(t0, t1));
      exprs = tm->graph().size();
      if (r == 0)
        tracedText = tm->graph().str();
      auto t2 = std::chrono::steady_clock::now();
      auto bm = buildDirect(blocks);
      auto t3 = std::chrono::steady_clock::now();
      bestB = std::min(bestB, seconds(t2, t3));
      if (r == 0)
        builtText = bm->graph().str();
    }
    if (tracedText != builtText) {
      fmt::print(stderr, "tm-trace-bench: traced and built graphs differ at {} ops\n", n);
      return 2;
    }
    // Recorded: every expr the forward records (6 per block); kept: after
    // finish's compile merged the repeated GetAttrs (4 per block remain).
    size_t recorded = 6 * blocks;
    fmt::print("{:>8} {:>10} {:>10} {:>12.2f} {:>12.0f} {:>12.2f} {:>7.2f}x\n", n, recorded,
               exprs, bestT * 1e3, double(recorded) / bestT, bestB * 1e3, bestT / bestB);
    if (prevTrace > 0)
      fmt::print("{:>8} growth per 10x: {:.1f}x\n", "", bestT / prevTrace);
    prevTrace = bestT;
  }
  return 0;
}
