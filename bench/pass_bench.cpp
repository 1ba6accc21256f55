//===- pass_bench.cpp - Pipeline throughput and pass-manager overhead ----===//
//
// Runs `flatten,merge-getattr,compile` with the PassManager over generated
// modules of 1e4, 1e5 and 1e6 exprs (two hierarchy levels: the top graph
// calls blocks of ~100 exprs; half of every block is dead code and every
// block reads its parameter twice, so merge-getattr and compile have work),
// and reports ns per expr for each pass and the growth per 10x. Targets:
// compile and merge-getattr under 50 ns per expr, growth at most 11x. Then
// measures the pass-manager overhead: an empty pass on a 10-expr graph
// (target under 2 us).
//
//   tm-pass-bench [--max-size N]
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "BenchHeap.h"
#include "tm/ir/IR.h"
#include "tm/passes/PassManager.h"

using namespace tmg;

namespace {

constexpr size_t BlockSize = 100;

/// A block: half live (a chain of relu/add), half dead (negs of the input).
void blockBody(GraphBuilder &b) {
  Node *x = b.arg(0);
  for (size_t i = 0; i < BlockSize / 4; ++i) {
    Node *w = b.getAttr(b.self(), "w");
    x = b.callMethod(b.callFunction("relu", {x}), "__add__", {w});
  }
  for (size_t i = 0; i < BlockSize / 2; ++i)
    b.callFunction("neg", {b.arg(0)});
  b.setOutputs(x);
}

std::unique_ptr<TracedModule> makeModule(size_t n) {
  size_t blocks = std::max<size_t>(1, n / (BlockSize + 2));
  auto top = std::make_unique<Module>("Net");
  for (size_t i = 0; i < blocks; ++i) {
    auto blk = std::make_unique<Module>("Block");
    blk->registerParameter("w", Tensor::zeros({8}));
    top->registerModule("b" + std::to_string(i), std::move(blk));
  }
  auto tm = TracedModule::fromModule(std::move(top));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{8}}});
  Node *x = b.arg(0);
  for (size_t i = 0; i < blocks; ++i)
    x = b.callModule(b.getAttr(b.self(), "b" + std::to_string(i)), {x}, {}, blockBody, {"x"});
  b.setOutputs(x); // not finish(): keep the dead code for the passes
  tm->updateRefs();
  return tm;
}

size_t totalExprs(TracedModule &m) { return m.graph().exprs(true).asCount(); }

struct NoOp : PassWrapper<NoOp> {
  static constexpr const char *Name = "no-op";
  static constexpr const char *Description = "does nothing (overhead measurement)";
  FailureOr<bool> run(TracedModule &, PassContext &) override { return false; }
};

} // namespace

int main(int argc, char **argv) {
  size_t maxSize = 1000000;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--max-size" && i + 1 < argc)
      maxSize = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: tm-pass-bench [--max-size N]\n");
      return 2;
    }
  }
  // Pre-fault the heap (see BenchHeap.h): ~3 KiB per expr at the largest size.
  if (!reserveHeap(maxSize * 3072)) {
    std::fprintf(stderr, "tm-pass-bench: cannot reserve the heap\n");
    return 2;
  }
  const char *passes[] = {"flatten", "merge-getattr", "compile"};
  std::printf("%-9s %9s %14s %14s %14s\n", "exprs", "total", "flatten ns/e",
              "merge ns/e", "compile ns/e");
  std::vector<std::array<double, 3>> rows;
  bool ok = true;
  for (size_t n = 10000; n <= maxSize; n *= 10) {
    auto m = makeModule(n);
    size_t total = totalExprs(*m);
    std::array<double, 3> secs{};
    for (int p = 0; p < 3; ++p) {
      auto pipe = Pipeline::parse(passes[p], PassRegistry::global());
      PassManager pm(std::move(*pipe), {});
      auto t0 = std::chrono::steady_clock::now();
      Diagnostic d;
      if (failed(pm.run(*m, &d))) {
        std::fprintf(stderr, "%s\n", d.str().c_str());
        return 1;
      }
      secs[p] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::printf("%-9zu %9zu %14.1f %14.1f %14.1f\n", n, total, secs[0] / total * 1e9,
                secs[1] / total * 1e9, secs[2] / total * 1e9);
    ok &= secs[1] / total * 1e9 < 50 && secs[2] / total * 1e9 < 50;
    rows.push_back(secs);
  }
  for (size_t i = 1; i < rows.size(); ++i) {
    std::printf("growth x10 step %zu:", i);
    for (int p = 0; p < 3; ++p) {
      double g = rows[i][p] / rows[i - 1][p];
      std::printf(" %s %.1fx", passes[p], g);
      ok &= g <= 11.0;
    }
    std::printf("\n");
  }
  // Overhead: an empty pass on a 10-expr graph, through the pass manager.
  auto small = TracedModule::fromModule(std::make_unique<Module>("Small"));
  GraphBuilder b = GraphBuilder::top(*small, {{"x", Shape{4}}});
  Node *x = b.arg(0);
  for (int i = 0; i < 10; ++i)
    x = b.callFunction("relu", {x});
  b.finish(x);
  Pipeline p;
  PipelineElement e;
  e.pass = std::make_unique<NoOp>();
  p.elements.push_back(std::move(e));
  PassManager pm(std::move(p), {});
  const int reps = 100000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i)
    (void)pm.run(*small);
  double us = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
              reps * 1e6;
  std::printf("pass-manager overhead (empty pass, 10 exprs): %.3f us\n", us);
  ok &= us < 2.0;
  std::printf("%s: merge-getattr and compile < 50 ns/expr, growth <= 11x, overhead < 2 us\n",
              ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
