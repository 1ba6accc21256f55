//===- Interpreter.h - Executing traced modules -----------------*- C++ -*-===//
//
// The graph interpreter of the reference (`InternalGraph.interpret`, `eval`,
// `TracedModule.forward`) on the CPU kernels:
//  * an execution plan is built once per graph (a kernel closure per expr,
//    argument slots and constants resolved, the slots each step frees) and
//    rebuilt only when the graph or a module it reads changes: running does
//    no name or hash-map look-up per expr;
//  * each intermediate is freed when its last user has run (the reference's
//    reference counting: users + 1 per graph-output occurrence), and freed
//    memory is recycled through a per-run StorageArena;
//  * nested graphs (calls of traced submodules) run their own plans;
//  * watch points record the values of chosen nodes; end points stop the
//    run as soon as all of them are computed and return them;
//  * by default every result is bit for bit what eager execution of the
//    same module gives; InterpreterOptions::fastMath allows plan-time
//    rewrites that change float rounding.
//
// run() is const and re-entrant: one Interpreter (and one TracedModule) can
// be run from several threads at once; each run has its own values.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>

#include "tm/ir/TracedModule.h"
#include "tm/runtime/Conv.h"

namespace tmg::rt {

class ExecutionPlan;
class Profile;

struct InterpreterOptions {
  /// Allows plan-time rewrites that change results within float rounding:
  /// an inference BatchNorm2d folded into the conv2d before it (weights and
  /// bias rescaled once). Off, every result is bit for bit that of eager
  /// execution; fusions that do not change a bit (a relu or relu6 applied
  /// in the conv's GEMM epilogue) happen either way.
  bool fastMath = false;
  /// The GEMM of non-depthwise convolutions (tm/runtime/Conv.h).
  ConvGemm convGemm = ConvGemm::Auto;
  /// Largest tensor a run may allocate (an intermediate whose shape is
  /// computed as the graph runs), and largest total of the tensors a run
  /// holds at once; more is a tmg::Error naming the expr. Negative: no
  /// limit (Tensor::empty still refuses more than the physical memory).
  /// tm-run passes its resolved --max-tensor-bytes as maxTensorBytes.
  int64_t maxTensorBytes = -1;
  int64_t maxLiveBytes = -1;
};

struct RunOptions {
  /// Nodes whose values are recorded (any graph of the module).
  std::vector<const Node *> watch;
  /// Nodes of the run graph; the run stops once all are computed.
  std::vector<const Node *> endPoints;
  /// When set, the time of every expr is added to it (tm/runtime/Profile.h);
  /// one profile may gather many runs, of one thread at a time.
  Profile *profile = nullptr;
};

struct RunResult {
  /// The graph outputs, flat; with end points, their values in order.
  std::vector<Tensor> outputs;
  bool stoppedAtEndPoints = false;
  /// Every value a watched node took, in execution order (a sub-graph
  /// called twice records two values).
  std::unordered_map<const Node *, std::vector<Tensor>> watched;
  /// Peak bytes of tensors allocated during the run and still alive.
  int64_t peakBytes = 0;
  /// Allocations served from memory freed earlier in the run or by an
  /// earlier run of the same interpreter (arenas are reused across runs).
  int64_t reusedBlocks = 0;
};

class Interpreter {
public:
  /// Borrows `m`, which must outlive the interpreter.
  explicit Interpreter(const TracedModule &m, InterpreterOptions opts = {});
  ~Interpreter();

  const InterpreterOptions &options() const { return opts_; }

  /// Runs the module's single graph with `inputs` bound to graph.inputs[1:]
  /// (the reference's `graph.eval`). Throws tmg::Error naming the expr, op
  /// and shapes when a kernel rejects its inputs.
  RunResult run(llvm::ArrayRef<Tensor> inputs, const RunOptions &opts = {}) const;
  /// Runs graph `g` of the module (one of its signatures).
  RunResult run(const InternalGraph &g, llvm::ArrayRef<Tensor> inputs,
                const RunOptions &opts = {}) const;

  /// Builds (or validates) the plans of every graph reachable from `g`;
  /// throws for an op the runtime does not implement.
  void prepare(const InternalGraph &g) const;

  // The reference's TracedModule API; configuration is not thread-safe,
  // forward() is as thread-safe as run().
  void setWatchPoints(std::vector<const Node *> nodes) { watch_ = std::move(nodes); }
  void clearWatchPoints();
  void setEndPoints(std::vector<const Node *> nodes) { end_ = std::move(nodes); }
  void clearEndPoints() { end_.clear(); }
  /// Runs with the configured points; records watch values (last value of
  /// each watched node) for watchNodeValue().
  std::vector<Tensor> forward(llvm::ArrayRef<Tensor> inputs);
  const std::unordered_map<const Node *, Tensor> &watchNodeValue() const {
    return watchValue_;
  }

  /// The plan of `g`, rebuilt when stale. Internal.
  std::shared_ptr<const ExecutionPlan> planFor(const InternalGraph &g) const;

private:
  const TracedModule &module_;
  InterpreterOptions opts_;
  mutable std::mutex mu_;
  mutable llvm::DenseMap<const InternalGraph *, std::shared_ptr<const ExecutionPlan>> plans_;
  /// Storage arenas of finished runs, taken by the next runs (one per
  /// concurrent run), so steady-state runs allocate no new memory.
  mutable std::vector<std::shared_ptr<StorageArena>> arenas_;
  std::vector<const Node *> watch_, end_;
  std::unordered_map<const Node *, Tensor> watchValue_;
};

} // namespace tmg::rt
