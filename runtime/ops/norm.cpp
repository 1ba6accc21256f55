//===- norm.cpp - Lowering of the normalisation family ----------*- C++ -*-===//
//
// softmax and log-softmax (MegEngine's default axis when none is given),
// inference batch norm (running statistics required), layer norm, and
// local response norm, whose kernel lives here.
//
//===----------------------------------------------------------------------===//
#include "../Internal.h"
#include "KernelUtil.h"
#include "Lowering.h"

#include <cmath>

namespace tmg::rt {

using namespace detail;

Tensor localResponseNorm(const Tensor &x0, int64_t size, double k, double alpha, double beta) {
  requireDef("local_response_norm", x0);
  if (x0.rank() < 2 || size < 1)
    raise("local_response_norm: input {} needs a channel axis and size {} must be positive",
          shapeStr(x0.shape()), size);
  if (!isFloat(x0.dtype()))
    raise("local_response_norm: input must be floating point, got {}",
          dtypeName(x0.dtype()).str());
  Tensor x = x0.dtype() == DType::Float32 ? x0.contiguous() : cast(x0, DType::Float32);
  int64_t nc = x.dim(0) * x.dim(1), ch = x.dim(1), inner = shapeNumel(x.shape().drop_front(2));
  Tensor y = Tensor::empty(x.shape(), DType::Float32);
  const float *px = x.data<float>();
  float *py = y.data<float>();
  int64_t lo = (size - 1) / 2, hi = size / 2;
  parallelFor(nc, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(inner * size, 1)),
              [&](int64_t p0, int64_t p1) {
                for (int64_t p = p0; p < p1; ++p) {
                  int64_t c = p % ch, base = p - c;
                  int64_t c0 = std::max<int64_t>(0, c - lo), c1 = std::min(ch - 1, c + hi);
                  for (int64_t i = 0; i < inner; ++i) {
                    double sq = 0;
                    for (int64_t j = c0; j <= c1; ++j) {
                      double v = px[(base + j) * inner + i];
                      sq += v * v;
                    }
                    py[p * inner + i] = float(px[p * inner + i] /
                                              std::pow(k + alpha / double(size) * sq, beta));
                  }
                }
              });
  return x0.dtype() == DType::Float32 ? y : cast(y, x0.dtype());
}

namespace {

StepFn lowerLrn(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t size = a.integer("kernel_size");
  double k = a.number("k"), alpha = a.number("alpha"), beta = a.number("beta");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [=](const Tensor &x) {
    return localResponseNorm(x, size, k, alpha, beta);
  });
}

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
  t.add("norm", {OpKind::LocalResponseNorm}, lowerLrn);
}

} // namespace tmg::rt
