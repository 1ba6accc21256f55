//===- activation.cpp - Kernels and lowering: activation family -*- C++ -*-===//
//
// The nn activations: one elementwise kernel call each, with their
// constant parameters (slopes, alphas) decoded when the plan is built.
// Dropout is the identity at inference. The kernels of the parameterised
// activations (elu, selu, celu, hard_sigmoid, thresholded_relu, prelu) live
// here, the others in Elementwise.cpp.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Lowering.h"

#include <algorithm>
#include <cmath>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

Tensor elu(const Tensor &x, double alpha) {
  return mapFloat("elu", x, false, [alpha](auto v) {
    using T = decltype(v);
    return v > 0 ? v : T(alpha) * std::expm1(v);
  });
}

Tensor selu(const Tensor &x, double alpha, double scale) {
  return mapFloat("selu", x, false, [alpha, scale](auto v) {
    using T = decltype(v);
    return v > 0 ? T(scale) * v : T(scale) * T(alpha) * std::expm1(v);
  });
}

Tensor celu(const Tensor &x, double alpha) {
  if (alpha == 0)
    raise("celu: alpha must not be 0");
  return mapFloat("celu", x, false, [alpha](auto v) {
    using T = decltype(v);
    T a = T(alpha);
    return std::max(T(0), v) + std::min(T(0), a * std::expm1(v / a));
  });
}

Tensor hardSigmoid(const Tensor &x, double alpha, double beta) {
  return mapFloat("hard_sigmoid", x, false, [alpha, beta](auto v) {
    using T = decltype(v);
    return std::max(T(0), std::min(T(1), T(alpha) * v + T(beta)));
  });
}

Tensor thresholdedRelu(const Tensor &x, double alpha) {
  return mapFloat("thresholded_relu", x, false, [alpha](auto v) {
    using T = decltype(v);
    return v > T(alpha) ? v : T(0);
  });
}

Tensor prelu(const Tensor &x, const Tensor &slope) {
  auto [a, s] = broadcastPair("prelu", x, slope);
  DType t = floatComputeType(x.dtype());
  Tensor af = asDType(a, t), sf = asDType(s, t);
  Tensor out = Tensor::empty(af.shape(), t);
  visitDType(t, [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T>) {
      const T *p = af.data<T>(), *q = sf.data<T>();
      T *o = out.data<T>();
      int64_t n = out.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
      for (int64_t i = 0; i < n; ++i)
        o[i] = p[i] < 0 ? q[i] * p[i] : p[i];
    }
  });
  return isFloat(x.dtype()) && x.dtype() != t ? cast(out, x.dtype()) : out;
}

// ---- Lowering -----------------------------------------------------------------

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
  t.add("activation", {K::Relu}, unaryEntry<U::Relu>());
  t.add("activation", {K::Relu6}, unaryEntry<U::Relu6>());
  t.add("activation", {K::Gelu}, unaryEntry<U::Gelu>());
  t.add("activation", {K::GeluTanh}, unaryEntry<U::GeluTanh>());
  t.add("activation", {K::Sigmoid}, unaryEntry<U::Sigmoid>());
  t.add("activation", {K::Silu}, unaryEntry<U::Silu>());
  t.add("activation", {K::Hswish}, unaryEntry<U::Hardswish>());
  t.add("activation", {K::Hsigmoid}, unaryEntry<U::Hardsigmoid>());
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
