//===- Lowering.h - What the family lowering files share --------*- C++ -*-===//
//
// Private to the runtime. Each op family lowers its ops in
// runtime/ops/<family>.cpp: a lowering function decodes an expr's constant
// arguments and argument slots once, when the plan is built, and returns
// the step that calls the family's kernel. The family file's
// register<Family>Lowering adds its functions to the one lowering table
// (lowerTable(), built in Registry.cpp), which Lower.cpp consults for every
// function call, tensor method and op def. This header holds the argument
// decoder (Args) and the step builders every family uses.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "../Plan.h"
#include "tm/ir/OpTable.h"
#include "tm/runtime/Kernels.h"

namespace tmg::rt {

/// Lowers `e`, a call of op `k` (one of the kinds the function was
/// registered for), into its step. Throws tmg::Error at the expr for
/// arguments the kernel cannot take.
using LowerFn = StepFn (*)(const Expr &e, OpKind k, LowerContext &ctx);

/// An op the plan may run inside a fused elementwise loop
/// (ElementwiseProgram.h): unary(op, x), binary(op, x, y), or reduce(op, x,
/// {axis}, keepdims) of one axis, decoded from the expr's arguments
/// exactly as its own step decodes them. `fusable` is false for the op's
/// forms a loop cannot run (a reduction of several axes, without keepdims,
/// or over axes known only at run time).
struct ElementwiseCall {
  std::optional<UnaryOp> unary;
  BinaryOp binary = BinaryOp::Add;
  std::optional<ReduceOp> reduce;
  int64_t axis = -1;
  bool fusable = true;
  Src x, y;
};
using ElementwiseFn = ElementwiseCall (*)(const Expr &e, LowerContext &ctx);

/// An op's lowering and, for the unary and binary arithmetic ops, its
/// ElementwiseCall decoder.
struct LowerEntry {
  LowerEntry() = default;
  LowerEntry(LowerFn f, ElementwiseFn ew = nullptr)
      : lower(f), elementwise(ew) {}
  LowerFn lower = nullptr;
  ElementwiseFn elementwise = nullptr;
};

/// The runtime's lowering of every op it implements, keyed by op kind.
using LowerTable = OpTable<LowerEntry>;

/// The table, filled once by the register functions below.
const LowerTable &lowerTable();

void registerElementwiseLowering(LowerTable &t);
void registerActivationLowering(LowerTable &t);
void registerLinalgLowering(LowerTable &t);
void registerConvLowering(LowerTable &t);
void registerPoolLowering(LowerTable &t);
void registerNormLowering(LowerTable &t);
void registerReduceLowering(LowerTable &t);
void registerShapeLowering(LowerTable &t);
void registerIndexLowering(LowerTable &t);
void registerCreationLowering(LowerTable &t);
void registerResizeLowering(LowerTable &t);
void registerQuantLowering(LowerTable &t);
void registerRnnLowering(LowerTable &t);

/// A 0-d tensor holding `s`, typed after `like` when given (Python scalars
/// in tensor positions follow the reference's weak scalar typing).
Tensor scalarTensor(const Scalar &s, std::optional<DType> like);

/// The tensor argument `name` of `e` holds the same tensor on every run
/// (a module attribute read by getattr, or a constant), so values derived
/// from it may be cached across runs (checked against its identity).
bool stableTensorArg(const Expr &e, llvm::StringRef name);

/// The values of an integer tensor of rank 0 or 1 as int64; a tmg::Error
/// naming `what` for other tensors.
std::vector<int64_t> tensorInts(const Tensor &t, const std::string &what);

/// Integers given as a constant argument, or as a tensor argument whose
/// values the step reads each time it runs (a shape computed by the graph).
struct IntsArg {
  std::vector<int64_t> fixed;
  Src t; ///< defined when the integers are read at run time
  /// Entries of `fixed` read at run time from one-element integer tensors
  /// (a tuple of ints and traced dims: `(x.shape[0], -1)`).
  std::vector<std::pair<size_t, Src>> parts;
  bool runtime() const { return t.defined() || !parts.empty(); }
  std::vector<int64_t> get(const Value *slots) const {
    if (t.defined())
      return tensorInts(t.get(slots), what);
    if (parts.empty())
      return fixed;
    std::vector<int64_t> v = fixed;
    for (const auto &[i, src] : parts) {
      std::vector<int64_t> one = tensorInts(src.get(slots), what);
      if (one.size() != 1)
        raise("{}: entry {} must be one integer, got {} values", what, i, one.size());
      v[i] = one[0];
    }
    return v;
  }
  std::string what;
};

/// The arguments of a function call or tensor method, decoded by name;
/// every malformed argument throws tmg::Error at the expr.
class Args {
public:
  Args(const Expr &e, LowerContext &ctx) : e_(e), ctx_(ctx) {}

  const Expr &expr() const { return e_; }
  /// A tensor method (arguments `self`, `value`, ...), not a function.
  bool isMethod() const { return llvm::isa<CallMethod>(e_); }

  [[noreturn]] void fail(const std::string &msg) const;

  std::optional<ArgRef> ref(llvm::StringRef name) const { return e_.namedArg(name); }

  /// A tensor argument (node) or a scalar constant typed after `like`.
  Src tensor(llvm::StringRef name, std::optional<DType> like = std::nullopt) const;
  Src tensorOf(const ArgRef &a, std::optional<DType> like = std::nullopt) const;
  /// An optional tensor argument (None -> undefined).
  Src optTensor(llvm::StringRef name) const;
  /// The first tensor operand: `self` of a method, argument 0 of a function.
  Src first() const { return isMethod() ? tensor("self") : tensorOf(e_.arg(0)); }
  std::optional<DType> dtypeOf(llvm::StringRef name) const;
  TreeDef constant(llvm::StringRef name) const;
  bool isNone(llvm::StringRef name) const;
  static std::vector<int64_t> ints(const TreeDef &t, const Args &self, llvm::StringRef what);
  std::vector<int64_t> ints(llvm::StringRef name) const {
    return ints(constant(name), *this, name);
  }
  int64_t integer(llvm::StringRef name) const;
  /// Integers (see ints) or, when the argument is a tensor node, its values
  /// at run time.
  IntsArg intsArg(llvm::StringRef name) const;
  /// Axes (see axes) or a tensor of them read at run time.
  IntsArg axesArg(llvm::StringRef name) const;
  Int2 pair(llvm::StringRef name) const { return pairOf(constant(name), name); }
  Int2 pairOf(const TreeDef &t, llvm::StringRef name) const;
  double number(llvm::StringRef name) const;
  bool boolean(llvm::StringRef name) const;
  std::string string(llvm::StringRef name) const;
  /// Axes: None -> {}, an int, or a tuple.
  std::vector<int64_t> axes(llvm::StringRef name) const {
    return isNone(name) ? std::vector<int64_t>{} : ints(name);
  }
  /// Tensor slots of a list argument.
  std::vector<Src> list(llvm::StringRef name) const;
  /// A dtype argument given by name ("float32").
  DType dtype(llvm::StringRef name) const;

private:
  const Expr &e_;
  LowerContext &ctx_;
};

/// The slot of output `i`.
inline uint32_t outSlot(const Expr &e, LowerContext &ctx, size_t i = 0) {
  return ctx.slot(e.output(i));
}

inline StepFn unaryStep(Src x, uint32_t out, std::function<Tensor(const Tensor &)> f) {
  return [x, out, f](Value *s, RunState &) { s[out].tensor = f(x.get(s)); };
}

inline StepFn binaryStep(Src a, Src b, uint32_t out,
                         std::function<Tensor(const Tensor &, const Tensor &)> f) {
  return [a, b, out, f](Value *s, RunState &) { s[out].tensor = f(a.get(s), b.get(s)); };
}

/// `unary(Op, x)`; x is `self` of a method, `x` of a function.
template <UnaryOp Op>
ElementwiseCall unaryCall(const Expr &e, LowerContext &ctx) {
  Args a(e, ctx);
  ElementwiseCall c;
  c.unary = Op;
  c.x = a.isMethod() ? a.tensor("self") : a.tensor("x");
  return c;
}

/// The step of unaryCall<Op>.
template <UnaryOp Op>
StepFn lowerUnary(const Expr &e, OpKind, LowerContext &ctx) {
  return unaryStep(unaryCall<Op>(e, ctx).x, outSlot(e, ctx),
                   [](const Tensor &t) { return unary(Op, t); });
}

/// The table entry of unary op Op: its step and its ElementwiseCall.
template <UnaryOp Op> LowerEntry unaryEntry() {
  return LowerEntry(lowerUnary<Op>, unaryCall<Op>);
}

/// The step of `mathUnary(Op, <arg>)`, the operand named `inp` or `x`.
template <MathOp Op, bool Inp> StepFn lowerMath(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor(Inp ? "inp" : "x"), outSlot(e, ctx),
                   [](const Tensor &t) { return mathUnary(Op, t); });
}

/// MegEngine's softmax default axis: 0 for rank 0, 1 and 3, else 1.
inline int64_t defaultSoftmaxAxis(size_t rank) {
  return (rank == 0 || rank == 1 || rank == 3) ? 0 : 1;
}

/// (before..., after...) paddings of `nd` axes from an int, nd or 2*nd ints.
std::vector<int64_t> ndPadding(const Args &a, llvm::StringRef name, size_t nd);
/// `nd` integers from an int or nd ints.
std::vector<int64_t> ndInts(const Args &a, llvm::StringRef name, size_t nd);

/// The window of `e` when it is a max pool over two spatial axes
/// (max_pool2d, max_pool_nd) whose attributes its kernel takes, for a conv
/// that pools its own output (rt::conv2dMaxPool); nullopt otherwise.
std::optional<WindowNd> maxPoolWindow(const Expr &e, LowerContext &ctx);

} // namespace tmg::rt
