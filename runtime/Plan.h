//===- Plan.h - Execution plans (internal to the runtime) ----------------===//
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/ir/Diagnostic.h"
#include "tm/runtime/Interpreter.h"

namespace tmg::rt {

/// A value in a slot: a tensor, or a module (self, a submodule).
struct Value {
  Tensor tensor;
  Module *module = nullptr;
};

struct RunState;

/// The work of one expr: reads its argument slots, writes its output slots.
using StepFn = std::function<void(Value *slots, RunState &st)>;

struct Step {
  const Expr *expr = nullptr;
  StepFn fn;
  llvm::SmallVector<uint32_t, 2> outs;
  /// Slots whose last use is this step (freed right after it).
  llvm::SmallVector<uint32_t, 4> frees;
};

class ExecutionPlan {
public:
  const InternalGraph *graph = nullptr;
  uint64_t graphVersion = 0;
  /// Modules whose attributes the plan holds pointers into.
  std::vector<std::pair<const Module *, uint64_t>> modules;
  /// Plans of the graphs this one calls.
  std::vector<std::shared_ptr<const ExecutionPlan>> callees;
  uint32_t numSlots = 0;
  std::vector<uint32_t> inputSlots;
  /// Input i has users (or is an output): keep its value.
  std::vector<bool> inputLive;
  std::vector<uint32_t> outputSlots;
  std::vector<Step> steps;
  llvm::DenseMap<const Node *, uint32_t> slotOf;

  /// True while neither the graph, nor a module read, nor a callee changed.
  bool valid() const;
};

struct RunState {
  const Interpreter *interp = nullptr;
  RunResult *result = nullptr;
  /// Watched nodes, and per plan the node watched in each slot.
  llvm::DenseMap<const Node *, bool> watch;
  std::unordered_map<const ExecutionPlan *, std::vector<const Node *>> watchSlots;
  bool watching = false;
};

/// Runs `p` on `args` (one per graph input); returns the output values.
/// With `endSlots` (top graph only), stops once every listed slot has a
/// value and returns those values instead, setting `*stopped`.
std::vector<Value> execute(const ExecutionPlan &p, llvm::ArrayRef<Value> args,
                           RunState &st,
                           const std::vector<uint32_t> *endSlots = nullptr,
                           bool *stopped = nullptr);

/// Everything lowering needs from the plan being built.
struct LowerContext {
  const Interpreter &interp;
  ExecutionPlan &plan;
  /// Slot of a node of the graph.
  uint32_t slot(const Node *n) const { return plan.slotOf.lookup(n); }
  /// Records that the plan holds pointers into `m`'s attributes.
  void readsModule(const Module *m) const;
};

/// The step function of `e` (not Input). Throws tmg::Error naming the expr
/// for ops the runtime does not implement or arguments it cannot take.
StepFn lowerExpr(const Expr &e, LowerContext &ctx);

} // namespace tmg::rt
