//===- elementwise.cpp - Lowering of the elementwise family -----*- C++ -*-===//
//
// Arithmetic, comparison, math, logical and cast ops, as functions and as
// tensor methods. Binary operands are (x, y) of a function and (self,
// value) of a method; a Python scalar operand is typed after the other
// operand. Arithmetic, comparison and where read their operands as views.
// Reflected methods (`__radd__`, ...) swap the operands. The Copy and
// Elemwise op defs run like copy and the Elemwise module.
//
//===----------------------------------------------------------------------===//
#include "../ElemwiseModule.h"
#include "Lowering.h"

namespace tmg::rt {
namespace {

Src lhsOperand(const Args &a) {
  return a.isMethod() ? a.tensor("self") : a.tensor("x", a.dtypeOf("y"));
}

Src rhsOperand(const Args &a) {
  return a.isMethod() ? a.tensor("value", a.dtypeOf("self")) : a.tensor("y", a.dtypeOf("x"));
}

template <BinaryOp Op, bool Swap = false>
StepFn lowerBinary(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = lhsOperand(a).asView(), y = rhsOperand(a).asView();
  if (Swap)
    std::swap(x, y);
  return binaryStep(x, y, outSlot(e, ctx),
                    [](const Tensor &p, const Tensor &q) { return binary(Op, p, q); });
}

template <CompareOp Op> StepFn lowerCompare(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(lhsOperand(a).asView(), rhsOperand(a).asView(), outSlot(e, ctx),
                    [](const Tensor &p, const Tensor &q) { return compare(Op, p, q); });
}

/// `copy`, `+x` and `detach`: the value itself.
StepFn lowerIdentity(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.first().asView(), outSlot(e, ctx), [](const Tensor &t) { return t; });
}

/// The `Copy` op def: its one tensor input, unchanged.
StepFn lowerCopyDef(const Expr &e, OpKind, LowerContext &ctx) {
  if (e.numInputs() != 1 || e.numOutputs() != 1 || !llvm::isa<TensorNode>(e.input(0)))
    raiseAt(Location::atExpr(e.id()), "Copy takes one tensor input and returns one tensor");
  Src x;
  x.slot = ctx.slot(e.input(0));
  return unaryStep(x.asView(), outSlot(e, ctx), [](const Tensor &t) { return t; });
}

StepFn lowerClip(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::optional<double> lo, hi;
  if (!a.isNone("lower"))
    lo = a.number("lower");
  if (!a.isNone("upper"))
    hi = a.number("upper");
  return unaryStep(a.tensor("x"), outSlot(e, ctx),
                   [lo, hi](const Tensor &t) { return clip(t, lo, hi); });
}

StepFn lowerWhere(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src m = a.tensor("mask").asView(), x = a.tensor("x", a.dtypeOf("y")).asView(),
      y = a.tensor("y", a.dtypeOf("x")).asView();
  uint32_t o = outSlot(e, ctx);
  return [m, x, y, o](Value *s, RunState &) { s[o].tensor = where(m.get(s), x.get(s), y.get(s)); };
}

StepFn lowerAstype(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  DType to = a.dtype("dtype");
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [to](const Tensor &x) { return cast(x, to); });
}

template <LogicalOp Op> StepFn lowerLogical(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(a.tensor("x"), a.tensor("y"), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) { return logical(Op, x, y); });
}

StepFn lowerLogicalNot(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("x"), outSlot(e, ctx), [](const Tensor &t) { return logicalNot(t); });
}

StepFn lowerIsNan(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("x"), outSlot(e, ctx), [](const Tensor &t) { return isNan(t); });
}

StepFn lowerIsInf(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  bool pos = a.boolean("detect_positive"), neg = a.boolean("detect_negative");
  return unaryStep(a.tensor("x"), outSlot(e, ctx),
                   [pos, neg](const Tensor &t) { return isInf(t, pos, neg); });
}

/// `mod` (Python's sign convention) and `fmod` (C's).
template <bool Fmod> StepFn lowerMod(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(a.tensor("x", a.dtypeOf("y")), a.tensor("y", a.dtypeOf("x")),
                    outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) { return mod(x, y, Fmod); });
}

void registerArithmetic(LowerTable &t) {
  using K = OpKind;
  using B = BinaryOp;
  t.add("elementwise", {K::Add, K::MAdd, K::MIAdd}, lowerBinary<B::Add>);
  t.add("elementwise", {K::MRAdd}, lowerBinary<B::Add, true>);
  t.add("elementwise", {K::Sub, K::MSub, K::MISub}, lowerBinary<B::Sub>);
  t.add("elementwise", {K::MRSub}, lowerBinary<B::Sub, true>);
  t.add("elementwise", {K::Mul, K::MMul, K::MIMul}, lowerBinary<B::Mul>);
  t.add("elementwise", {K::MRMul}, lowerBinary<B::Mul, true>);
  t.add("elementwise", {K::Div, K::MTrueDiv, K::MITrueDiv}, lowerBinary<B::Div>);
  t.add("elementwise", {K::MRTrueDiv}, lowerBinary<B::Div, true>);
  t.add("elementwise", {K::Pow, K::MPow}, lowerBinary<B::Pow>);
  t.add("elementwise", {K::MRPow}, lowerBinary<B::Pow, true>);
  t.add("elementwise", {K::Maximum}, lowerBinary<B::Maximum>);
  t.add("elementwise", {K::Minimum}, lowerBinary<B::Minimum>);
  t.add("elementwise", {K::Mod}, lowerMod<false>);
  t.add("elementwise", {K::Fmod}, lowerMod<true>);
}

void registerComparison(LowerTable &t) {
  using K = OpKind;
  using C = CompareOp;
  t.add("elementwise", {K::Equal, K::MEq}, lowerCompare<C::Equal>);
  t.add("elementwise", {K::NotEqual, K::MNe}, lowerCompare<C::NotEqual>);
  t.add("elementwise", {K::Less, K::MLt}, lowerCompare<C::Less>);
  t.add("elementwise", {K::LessEqual, K::MLe}, lowerCompare<C::LessEqual>);
  t.add("elementwise", {K::Greater, K::MGt}, lowerCompare<C::Greater>);
  t.add("elementwise", {K::GreaterEqual, K::MGe}, lowerCompare<C::GreaterEqual>);
  t.add("elementwise", {K::LogicalAnd}, lowerLogical<LogicalOp::And>);
  t.add("elementwise", {K::LogicalOr}, lowerLogical<LogicalOp::Or>);
  t.add("elementwise", {K::LogicalXor}, lowerLogical<LogicalOp::Xor>);
  t.add("elementwise", {K::LogicalNot}, lowerLogicalNot);
  t.add("elementwise", {K::IsNan}, lowerIsNan);
  t.add("elementwise", {K::IsInf}, lowerIsInf);
}

void registerUnary(LowerTable &t) {
  using K = OpKind;
  using U = UnaryOp;
  using M = MathOp;
  t.add("elementwise", {K::Neg, K::MNeg}, lowerUnary<U::Neg>);
  t.add("elementwise", {K::Abs, K::MAbs}, lowerUnary<U::Abs>);
  t.add("elementwise", {K::Exp}, lowerUnary<U::Exp>);
  t.add("elementwise", {K::Log}, lowerUnary<U::Log>);
  t.add("elementwise", {K::Sqrt}, lowerUnary<U::Sqrt>);
  t.add("elementwise", {K::Rsqrt}, lowerUnary<U::Rsqrt>);
  t.add("elementwise", {K::Erf}, lowerUnary<U::Erf>);
  t.add("elementwise", {K::Tanh}, lowerUnary<U::Tanh>);
  t.add("elementwise", {K::Floor}, lowerMath<M::Floor, false>);
  t.add("elementwise", {K::Ceil}, lowerMath<M::Ceil, false>);
  t.add("elementwise", {K::Round}, lowerMath<M::Round, false>);
  t.add("elementwise", {K::Sin}, lowerMath<M::Sin, false>);
  t.add("elementwise", {K::Cos}, lowerMath<M::Cos, false>);
  t.add("elementwise", {K::Sign}, lowerMath<M::Sign, false>);
  t.add("elementwise", {K::Reciprocal}, lowerMath<M::Reciprocal, false>);
  t.add("elementwise", {K::Tan}, lowerMath<M::Tan, false>);
  t.add("elementwise", {K::Asin}, lowerMath<M::Asin, false>);
  t.add("elementwise", {K::Acos}, lowerMath<M::Acos, false>);
  t.add("elementwise", {K::Atan}, lowerMath<M::Atan, false>);
  t.add("elementwise", {K::Sinh}, lowerMath<M::Sinh, false>);
  t.add("elementwise", {K::Cosh}, lowerMath<M::Cosh, false>);
  t.add("elementwise", {K::Asinh}, lowerMath<M::Asinh, false>);
  t.add("elementwise", {K::Acosh}, lowerMath<M::Acosh, false>);
  t.add("elementwise", {K::Atanh}, lowerMath<M::Atanh, false>);
  t.add("elementwise", {K::Clip}, lowerClip);
}

} // namespace

void registerElementwiseLowering(LowerTable &t) {
  registerArithmetic(t);
  registerComparison(t);
  registerUnary(t);
  t.add("elementwise", {OpKind::Copy, OpKind::MPos, OpKind::MDetach}, lowerIdentity);
  t.add("elementwise", {OpKind::Where}, lowerWhere);
  t.add("elementwise", {OpKind::MAstype}, lowerAstype);
  t.add("elementwise", {OpKind::CopyDef}, lowerCopyDef);
  t.add("elementwise", {OpKind::ElemwiseDef}, lowerElemwiseDef);
}

} // namespace tmg::rt
