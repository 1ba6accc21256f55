//===- activation.cpp - Lowering of the activation family -------*- C++ -*-===//
//
// The nn activations: one elementwise kernel call each, with their
// constant parameters (slopes, alphas) decoded when the plan is built.
// Dropout is the identity at inference.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

StepFn lowerLeakyRelu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double slope = a.number("negative_slope");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [slope](const Tensor &t) { return leakyRelu(t, slope); });
}

StepFn lowerDropout(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("inp").asView(), outSlot(e, ctx), [](const Tensor &t) { return t; });
}

StepFn lowerElu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double al = a.number("alpha");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [al](const Tensor &t) { return elu(t, al); });
}

StepFn lowerCelu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double al = a.number("alpha");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [al](const Tensor &t) { return celu(t, al); });
}

StepFn lowerSelu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double al = a.number("alpha"), sc = a.number("scale");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [al, sc](const Tensor &t) { return selu(t, al, sc); });
}

StepFn lowerHardSigmoid(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double al = a.number("alpha"), be = a.number("beta");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [al, be](const Tensor &t) { return hardSigmoid(t, al, be); });
}

StepFn lowerThresholdedRelu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double al = a.number("alpha");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [al](const Tensor &t) { return thresholdedRelu(t, al); });
}

StepFn lowerPrelu(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(a.tensor("inp"), a.tensor("weight", a.dtypeOf("inp")), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &w) { return prelu(x, w); });
}

} // namespace

void registerActivationLowering(LowerTable &t) {
  using K = OpKind;
  using U = UnaryOp;
  t.add("activation", {K::Relu}, lowerUnary<U::Relu>);
  t.add("activation", {K::Relu6}, lowerUnary<U::Relu6>);
  t.add("activation", {K::Gelu}, lowerUnary<U::Gelu>);
  t.add("activation", {K::GeluTanh}, lowerUnary<U::GeluTanh>);
  t.add("activation", {K::Sigmoid}, lowerUnary<U::Sigmoid>);
  t.add("activation", {K::Silu}, lowerUnary<U::Silu>);
  t.add("activation", {K::Hswish}, lowerUnary<U::Hardswish>);
  t.add("activation", {K::Hsigmoid}, lowerUnary<U::Hardsigmoid>);
  t.add("activation", {K::Softsign}, lowerMath<MathOp::Softsign, true>);
  t.add("activation", {K::Softplus}, lowerMath<MathOp::Softplus, true>);
  t.add("activation", {K::LeakyRelu}, lowerLeakyRelu);
  t.add("activation", {K::Dropout}, lowerDropout);
  t.add("activation", {K::Elu}, lowerElu);
  t.add("activation", {K::Celu}, lowerCelu);
  t.add("activation", {K::Selu}, lowerSelu);
  t.add("activation", {K::HardSigmoid}, lowerHardSigmoid);
  t.add("activation", {K::ThresholdedRelu}, lowerThresholdedRelu);
  t.add("activation", {K::Prelu}, lowerPrelu);
}

} // namespace tmg::rt
