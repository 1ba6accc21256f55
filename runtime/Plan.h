//===- Plan.h - Execution plans (internal to the runtime) ----------------===//
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/ir/Diagnostic.h"
#include "tm/runtime/Conv.h"
#include "tm/runtime/Extra.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/Profile.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
namespace detail {
struct ConvInputNorm;
} // namespace detail

/// A value in a slot: a tensor, or a module (self, a submodule).
struct Value {
  Tensor tensor;
  Module *module = nullptr;
};

struct RunState;

/// A tensor argument: a slot, a module attribute (read at run time, so a
/// replaced attribute is seen), or a constant decided at plan time.
///
/// get() is the one place where strided views meet kernels: values in
/// slots may be views (transpose, slicing, broadcast_to and reshape make
/// them), and get() hands a kernel that needs dense data a contiguous()
/// copy, unless the argument is marked `strided` because its kernel reads
/// views natively (elementwise binary ops, compare, where, cast, views).
struct Src {
  int64_t slot = -1;
  const Tensor *attr = nullptr;
  Tensor constant;
  bool strided = false;
  const Tensor &raw(const Value *slots) const {
    return slot >= 0 ? slots[slot].tensor : attr ? *attr : constant;
  }
  Tensor get(const Value *slots) const {
    const Tensor &t = raw(slots);
    return strided || t.isContiguous() ? t : contiguous(t);
  }
  bool defined() const { return slot >= 0 || attr || constant.defined(); }
  /// The tensor, or an undefined one for an absent optional argument.
  Tensor getOr(const Value *slots) const { return defined() ? get(slots) : Tensor(); }
  /// This argument read natively as a view by its kernel.
  Src asView() const {
    Src s = *this;
    s.strided = true;
    return s;
  }
};

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
  /// Every node's own value must be observable (watch or end points):
  /// plan-time fusions run unfused.
  bool observable = false;
  /// RunOptions::profile, and how many graphs deep execute() is.
  Profile *profile = nullptr;
  int depth = -1;
};

/// `err`, raised by the step of `e` in graph `g`, located at `e` unless it
/// already names an expr.
Error errorInStep(const Error &err, const Expr &e, const InternalGraph &g);

/// Runs `p` on `args` (one per graph input); returns the output values.
/// With `endSlots` (top graph only), stops once every listed slot has a
/// value and returns those values instead, setting `*stopped`.
std::vector<Value> execute(const ExecutionPlan &p, llvm::ArrayRef<Value> args,
                           RunState &st,
                           const std::vector<uint32_t> *endSlots = nullptr,
                           bool *stopped = nullptr);

/// A conv2d that absorbs, in this order and each optional, the inference
/// batch norm (with InterpreterOptions::fastMath only), a residual add of a
/// tensor computed before the conv runs, and the activation consuming its
/// result (each the only user of its input, which is no graph output). The
/// head computes the chain's final value into its own slot; each absorbed
/// expr then only moves the value on to its output slot. With
/// RunState::observable every expr of the chain runs on its own instead.
struct FusedChain {
  const Module *batchNorm = nullptr; ///< a BatchNorm2d module
  /// The slot of the residual add's other operand, or -1; whether it was
  /// the add's first operand.
  int64_t residualSlot = -1;
  bool residualFirst = false;
  Activation activation = Activation::None;
};

/// An inference batch norm, its input a concat along axis 1 and / or its
/// result going to a relu / relu6 (DenseNet's layers begin so): the batch
/// norm (the head) computes the chain's value in one pass (batchNormAct),
/// reading the concat's inputs itself; the concat then computes nothing
/// (its inputs live until the head has run) and the activation is
/// absorbed. At least one of the concat and the activation is present.
/// When the chain's value goes only to a conv2d (`conv`) that may read it
/// as a pointwise conv's input, the head is deferred to that conv, which
/// normalises its input as it reads it (detail::conv2dNormedInput) and
/// releases the parts; the head then computes nothing.
struct NormChain {
  const Expr *concat = nullptr;
  Activation activation = Activation::None;
  const Node *value = nullptr; ///< the chain's value (the activation's output)
  const Expr *conv = nullptr;
};

/// A conv2d_act whose output is one part of a channel concat of static
/// shape (1, C, H, W): the conv writes straight into the concat's output
/// at channel `offset`. The first part to run allocates that output in
/// the concat's slot (concatPartView); the concat then only checks that
/// every part is in place (PlacedConcat). Shapes that differ from the
/// static ones at run time leave a part out of place, and the concat
/// copies as usual.
struct ConcatPart {
  uint32_t concatSlot = 0;
  Shape concatShape;
  int64_t offset = 0, channels = 0;
};
struct PlacedConcat {
  Shape shape;                  ///< static (N, C, H, W)
  std::vector<int64_t> offsets; ///< channel offset of each part
};

/// A linear / linear_act whose value goes only to an add with a tensor
/// computed before it (a transformer's residual connection): the linear
/// adds that tensor as it stores each block of its result
/// (linearWithPack's addend), and the add is absorbed. With
/// RunState::observable both run on their own.
struct LinearResidual {
  uint32_t slot = 0;  ///< the add's other operand
  bool first = false; ///< whether it was the add's first operand
};

/// Everything lowering needs from the plan being built.
struct LowerContext {
  LowerContext(const Interpreter &i, ExecutionPlan &p) : interp(i), plan(p) {}
  const Interpreter &interp;
  ExecutionPlan &plan;
  /// Fusion decisions of the graph (planFusions): chain heads, and the
  /// absorbed exprs with the slot their value arrives in.
  llvm::DenseMap<const Expr *, FusedChain> heads;
  llvm::DenseMap<const Expr *, NormChain> normHeads;
  /// Convs reading a NormChain's value, with the chain's head.
  llvm::DenseMap<const Expr *, const Expr *> convInputNorms;
  llvm::DenseMap<const Expr *, LinearResidual> linearResiduals;
  llvm::DenseMap<const Expr *, uint32_t> absorbed;
  /// Exprs whose inputs a later step reads instead (the value): they are
  /// freed after that step, and the expr itself runs only when values
  /// must stay observable.
  llvm::DenseMap<const Expr *, const Expr *> deferred;
  /// Convs (conv2d, a conv chain's head, conv2d_act) whose value, through
  /// their chain, goes only to a max pool over two axes, absorbed: the
  /// conv pools its output itself (rt::conv2dMaxPool), in this window.
  llvm::DenseMap<const Expr *, WindowNd> convPools;
  /// Chains of elementwise ops run as one fused loop
  /// (ElementwiseProgram.h): by the chain's last expr (the root), every
  /// expr of the chain in graph order, the root last. The others are
  /// deferred to the root.
  llvm::DenseMap<const Expr *, std::vector<const Expr *>> elementwiseRoots;
  /// Convs writing into a concat's output, and those concats.
  llvm::DenseMap<const Expr *, ConcatPart> concatParts;
  llvm::DenseMap<const Expr *, PlacedConcat> placedConcats;
  /// Whether a fusion decision above already involves `x`.
  bool claimed(const Expr *x) const {
    return absorbed.count(x) || heads.count(x) || normHeads.count(x) ||
           linearResiduals.count(x) || deferred.count(x) ||
           concatParts.count(x) || placedConcats.count(x) || convPools.count(x);
  }
  /// Slot of a node of the graph.
  uint32_t slot(const Node *n) const { return plan.slotOf.lookup(n); }
  /// Records that the plan holds pointers into `m`'s attributes.
  void readsModule(const Module *m) const;
};

/// Finds the fusable chains of `g` (see FusedChain); call after slots are
/// assigned and before lowering.
void planFusions(const InternalGraph &g, LowerContext &ctx);

/// A convolution call decoded from a function or a builtin module.
struct ConvCall {
  enum class Kind { Conv1d, Conv2d, ConvTranspose2d } kind = Kind::Conv2d;
  Conv1dParams p1;
  Conv2dParams p2;
  ConvTranspose2dParams pt;
  Src x, w, b;
  /// `w` is the same tensor on every run (not computed by the graph): the
  /// step may keep it packed for the GEMM micro-kernel.
  bool stableWeight = false;
};

/// A conv weight packed for the GEMM micro-kernel once per plan step,
/// cached against the identity (storage and shape) of the weight tensor it
/// came from, which it keeps alive so the storage cannot be recycled. Only
/// for weights that are the same tensor on every run (module attributes,
/// constants, batch-norm folds): a weight computed by the graph is a new
/// tensor every run. Thread-safe; the packed weight is immutable.
class WeightPack {
public:
  explicit WeightPack(int64_t groups) : groups_(groups) {}
  /// The packed form of `w`, or null when the conv will not use it (no
  /// micro-kernel, depthwise, or a weight the conv will reject).
  std::shared_ptr<const PackedConvWeight> get(const Tensor &w);

private:
  int64_t groups_;
  std::mutex mu_;
  Tensor key_;
  std::shared_ptr<const PackedConvWeight> packed_;
};

/// The view of the concat's output that part `p`, conv2d(x, w) with
/// params `cp`, is written into, allocated in the concat's slot by the
/// first part to run; undefined (and nothing allocated) when the conv's
/// output would not have the planned shape or the slot holds a tensor of
/// another shape.
Tensor concatPartView(const ConcatPart &p, Value *slots, const Tensor &x,
                      const Tensor &w, const Conv2dParams &cp);
/// What a conv step writes into when its expr is one part of a placed
/// concat: view() is that part's concatPartView, undefined when the expr
/// is no part or values must stay observable (every value its own).
struct ConcatTarget {
  std::optional<ConcatPart> part;
  Tensor view(Value *slots, const RunState &st, const Tensor &x,
              const Tensor &w, const Conv2dParams &cp) const;
};
ConcatTarget concatTargetOf(const LowerContext &ctx, const Expr &e);
/// Whether slot `out` holds concat `c`'s output with every part (`parts`)
/// already written in place.
bool concatInPlace(const PlacedConcat &c, const std::vector<Src> &parts,
                   uint32_t out, const Value *slots);

/// The step of a NormChain's head; `single` is the head's own unfused step,
/// run when values must stay observable.
StepFn normChainStep(const Expr &head, const NormChain &chain, StepFn single,
                     LowerContext &ctx);

/// The step of an elementwise chain's root (ctx.elementwiseRoots); `single`
/// is the root's own unfused step, run when values must stay observable.
StepFn elementwiseChainStep(const Expr &root,
                            llvm::ArrayRef<const Expr *> chain, StepFn single,
                            LowerContext &ctx);

/// The input of conv `e` when it reads a NormChain's value
/// (ctx.convInputNorms), or null.
struct NormInput;
std::shared_ptr<NormInput> normedConvInput(const Expr &e, LowerContext &ctx);
/// In the step of a conv reading `normed`: when no value is observed and
/// the parts fit the kernel (float32, rank 4, equal outside axis 1), calls
/// run(in) with them and the batch norm's affine, and returns true;
/// otherwise computes the chain's value as its ops do into `xSlot` (the
/// conv's input; observed runs ran every expr) and returns false.
bool runNormedConv(NormInput &normed, Value *s, const RunState &st,
                   uint32_t xSlot,
                   llvm::function_ref<void(const detail::ConvInputNorm &)> run);

/// The one step builder of every convolution, fused per ctx.heads.
StepFn convStep(const Expr &e, const ConvCall &c, LowerContext &ctx);

/// The value of a linear step with its absorbed residual add `res`
/// (ctx.linearResiduals; null: none): `linear(addend)` computes the
/// linear of x, w, b plus `addend` when that is defined
/// (detail::linearWithPack); the add runs as its op where the residual
/// needs broadcasting or promotion, and on its own step when values are
/// observed.
Tensor linearWithResidual(const LinearResidual *res, Value *s,
                          const RunState &st, const Tensor &x, const Tensor &w,
                          const Tensor &b,
                          llvm::function_ref<Tensor(const Tensor &)> linear);

/// The step function of `e` (not Input). Throws tmg::Error naming the expr
/// for ops the runtime does not implement or arguments it cannot take.
StepFn lowerExpr(const Expr &e, LowerContext &ctx);

} // namespace tmg::rt
