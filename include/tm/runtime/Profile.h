//===- Profile.h - Time per expr and per op kind ----------------*- C++ -*-===//
//
// A run with RunOptions::profile set records the wall time of every step of
// the plan (one expr; a plan-time fused chain is timed on its head). The
// profile aggregates over any number of runs and reports, as ONNX Runtime's
// and PyTorch's profilers do:
//  * per op kind: exprs per run, time per run, share, GFLOP/s where the op
//    has a FLOP count (convolutions, linear layers, matrix products);
//  * the slowest exprs;
//  * a Chrome trace (chrome://tracing, Perfetto) of the last run.
// Calls of traced submodules are nested events in the trace and are left
// out of the aggregates (their exprs are counted instead).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <llvm/ADT/DenseMap.h>

#include "tm/ir/Expr.h"

namespace tmg::rt {

class Profile {
public:
  using Clock = std::chrono::steady_clock;

  /// Called by the interpreter: `e` ran from `start` to `end`, `depth`
  /// graphs deep (0: the run's graph).
  void record(const Expr *e, Clock::time_point start, Clock::time_point end, int depth);
  /// Called by the interpreter when a run starts.
  void beginRun();

  struct ExprStats {
    const Expr *expr = nullptr;
    std::string kind;
    int64_t calls = 0;
    double seconds = 0;
    /// Floating-point operations of one call (0: not counted).
    double flops = 0;
  };
  struct KindStats {
    std::string kind;
    int64_t exprs = 0, calls = 0;
    double seconds = 0, flops = 0;
  };

  int64_t runs() const { return runs_; }
  /// Leaf exprs (no calls of traced submodules), in first-run order.
  std::vector<ExprStats> exprs() const;
  /// Per op kind, slowest first.
  std::vector<KindStats> kinds() const;
  /// Time of the leaf exprs over all runs.
  double totalSeconds() const;

  /// The per-kind table and the `topExprs` slowest exprs, per run.
  std::string report(size_t topExprs = 10) const;
  /// The last run as Chrome trace events (JSON).
  std::string chromeTrace() const;

  /// The op kind of `e`: "conv2d", "Linear", "__add__", "getattr", ...
  static std::string kindOf(const Expr *e);
  /// The FLOPs of one run of `e` from its static shapes (0 when unknown or
  /// not a compute-bound op).
  static double flopsOf(const Expr *e);

private:
  struct Event {
    const Expr *expr;
    int64_t startNs, endNs;
    int depth;
  };
  llvm::DenseMap<const Expr *, size_t> index_;
  std::vector<ExprStats> stats_;
  std::vector<bool> isCall_;
  std::vector<Event> lastRun_;
  Clock::time_point runStart_;
  int64_t runs_ = 0;
};

} // namespace tmg::rt
