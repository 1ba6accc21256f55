//===- norm.cpp - Lowering of the normalisation family ----------*- C++ -*-===//
//
// softmax and log-softmax (MegEngine's default axis when none is given),
// inference batch norm (running statistics required) and layer norm.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

template <bool Log> StepFn lowerSoftmax(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp");
  std::optional<int64_t> axis;
  if (!a.isNone("axis"))
    axis = a.integer("axis");
  return unaryStep(x, outSlot(e, ctx), [axis](const Tensor &t) {
    int64_t ax = axis ? *axis : defaultSoftmaxAxis(t.rank());
    return Log ? logSoftmax(t, ax) : softmax(t, ax);
  });
}

StepFn lowerBatchNorm(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  if (a.boolean("training"))
    a.fail("batch_norm with training=True is not supported by the inference "
           "runtime");
  Src x = a.tensor("inp"), m = a.optTensor("running_mean"), v = a.optTensor("running_var"),
      w = a.optTensor("weight"), b = a.optTensor("bias");
  if (!m.defined() || !v.defined())
    a.fail("batch_norm needs running_mean and running_var at inference");
  double eps = a.number("eps");
  uint32_t o = outSlot(e, ctx);
  return [x, m, v, w, b, eps, o](Value *s, RunState &) {
    s[o].tensor = batchNorm(x.get(s), m.get(s), v.get(s), w.defined() ? w.get(s) : Tensor(),
                            b.defined() ? b.get(s) : Tensor(), eps);
  };
}

StepFn lowerLayerNorm(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> shape = a.ints("normalized_shape");
  bool affine = a.boolean("affine");
  Src x = a.tensor("inp"), w = a.optTensor("weight"), b = a.optTensor("bias");
  double eps = a.number("eps");
  uint32_t o = outSlot(e, ctx);
  return [x, w, b, shape, affine, eps, o](Value *s, RunState &) {
    s[o].tensor = layerNorm(x.get(s), shape, affine && w.defined() ? w.get(s) : Tensor(),
                            affine && b.defined() ? b.get(s) : Tensor(), eps);
  };
}

} // namespace

void registerNormLowering(LowerTable &t) {
  t.add("norm", {OpKind::Softmax}, lowerSoftmax<false>);
  t.add("norm", {OpKind::LogSoftmax}, lowerSoftmax<true>);
  t.add("norm", {OpKind::BatchNorm}, lowerBatchNorm);
  t.add("norm", {OpKind::LayerNorm}, lowerLayerNorm);
}

} // namespace tmg::rt
