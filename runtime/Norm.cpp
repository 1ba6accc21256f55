//===- Norm.cpp - Normalisation and softmax -------------------------------===//
#include "tm/runtime/Norm.h"

#include <cmath>
#include <limits>
#include <memory>

#include "Internal.h"
#include "Simd512.h"
#include "VecMath.h"

namespace tmg::rt {
using namespace detail;

/// Reads a per-channel parameter (C elements, any shape) as doubles.
static llvm::SmallVector<double, 64> channelParam(const Tensor &t,
                                                  llvm::StringRef what,
                                                  int64_t c,
                                                  llvm::ArrayRef<int64_t> xShape,
                                                  double dflt) {
  llvm::SmallVector<double, 64> v(c, dflt);
  if (!t.defined())
    return v;
  requireFloat32("batch_norm", t, what);
  if (t.numel() != c)
    raise("batch_norm: {} has {} elements but input {} has {} channels",
          describe(what, t), t.numel(), shapeStr(xShape), c);
  const float *p = t.data<float>();
  for (int64_t i = 0; i < c; ++i)
    v[i] = p[i];
  return v;
}

/// dst[i] = act(src[i] * s + b) over n floats.
TM_VECTOR_CLONES
static void scaleShiftActivate(const float *src, float *dst, int64_t n, float s, float b,
                               Activation act) {
  switch (act) {
  case Activation::None:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = src[i] * s + b;
    return;
  case Activation::Relu:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = activate(Activation::Relu, src[i] * s + b);
    return;
  case Activation::Relu6:
    for (int64_t i = 0; i < n; ++i)
      dst[i] = activate(Activation::Relu6, src[i] * s + b);
    return;
  }
}

Tensor batchNorm(const Tensor &x, const Tensor &mean, const Tensor &var,
                 const Tensor &weight, const Tensor &bias, double eps) {
  return batchNormAct({x}, mean, var, weight, bias, eps, Activation::None);
}

Shape detail::channelConcatShape(llvm::ArrayRef<Tensor> parts) {
  if (parts.empty())
    raise("batch_norm: no input");
  for (const Tensor &p : parts) {
    requireFloat32("batch_norm", p, "input");
    if (p.rank() < 2)
      raise("batch_norm: input must be at least 2-D (N, C, ...), got {}", shapeStr(p.shape()));
  }
  Shape shape(parts[0].shape().begin(), parts[0].shape().end());
  shape[1] = 0;
  for (const Tensor &p : parts) {
    Shape other(p.shape().begin(), p.shape().end());
    other[1] = 0;
    if (other != shape)
      raise("batch_norm: the concatenated inputs {} and {} differ outside axis 1",
            shapeStr(parts[0].shape()), shapeStr(p.shape()));
  }
  for (const Tensor &p : parts)
    shape[1] += p.dim(1);
  return shape;
}

namespace detail {
ChannelAffine batchNormAffine(const Tensor &mean, const Tensor &var,
                              const Tensor &weight, const Tensor &bias,
                              double eps, llvm::ArrayRef<int64_t> shape) {
  requireDefined("batch_norm", mean, "running mean");
  requireDefined("batch_norm", var, "running var");
  if (!(eps >= 0.0))
    raise("batch_norm: eps must be >= 0, got {}", eps);
  int64_t c = shape[1];
  auto mu = channelParam(mean, "running mean", c, shape, 0.0);
  auto var2 = channelParam(var, "running var", c, shape, 1.0);
  auto gamma = channelParam(weight, "weight", c, shape, 1.0);
  auto beta = channelParam(bias, "bias", c, shape, 0.0);
  // y = x * scale + shift, folded per channel in double.
  ChannelAffine a;
  a.scale.resize(size_t(c));
  a.shift.resize(size_t(c));
  for (int64_t i = 0; i < c; ++i) {
    double s = gamma[i] / std::sqrt(var2[i] + eps);
    a.scale[i] = float(s);
    a.shift[i] = float(beta[i] - mu[i] * s);
  }
  return a;
}

Tensor scaleShiftChannels(llvm::ArrayRef<Tensor> parts, const ChannelAffine &a,
                          Activation act) {
  Shape shape = channelConcatShape(parts);
  int64_t n = shape[0], c = shape[1];
  if (int64_t(a.scale.size()) != c || int64_t(a.shift.size()) != c)
    raise("batch_norm: {} scales and {} shifts for {} channels", a.scale.size(),
          a.shift.size(), c);
  int64_t inner = shapeNumel(llvm::ArrayRef<int64_t>(shape).drop_front(2));
  // Where channel ch of image i is: part[ch], at plane (i * its C + local[ch]).
  llvm::SmallVector<Tensor, 8> dense;
  llvm::SmallVector<uint32_t, 64> part(c);
  llvm::SmallVector<int64_t, 64> local(c);
  for (int64_t base = 0; const Tensor &p : parts) {
    for (int64_t j = 0; j < p.dim(1); ++j) {
      part[base + j] = uint32_t(dense.size());
      local[base + j] = j;
    }
    base += p.dim(1);
    dense.push_back(p.contiguous());
  }
  Tensor out = Tensor::empty(shape, DType::Float32);
  float *po = out.data<float>();
  int64_t grain =
      std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(inner, 1));
  parallelFor(n * c, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      int64_t ch = p % c;
      const Tensor &t = dense[part[ch]];
      const float *src = t.data<float>() + ((p / c) * t.dim(1) + local[ch]) * inner;
      scaleShiftActivate(src, po + p * inner, inner, a.scale[ch], a.shift[ch],
                         act);
    }
  });
  return out;
}
} // namespace detail

Tensor batchNormAct(llvm::ArrayRef<Tensor> parts, const Tensor &mean,
                    const Tensor &var, const Tensor &weight, const Tensor &bias,
                    double eps, Activation act) {
  Shape shape = channelConcatShape(parts);
  return scaleShiftChannels(
      parts, batchNormAffine(mean, var, weight, bias, eps, shape), act);
}

Tensor layerNorm(const Tensor &x, llvm::ArrayRef<int64_t> normalizedShape,
                 const Tensor &weight, const Tensor &bias, double eps) {
  llvm::StringRef op = "layer_norm";
  requireFloat32(op, x, "input");
  size_t k = normalizedShape.size();
  if (k == 0 || k > x.rank() || x.shape().take_back(k) != normalizedShape)
    raise("{}: normalized shape {} must be the trailing dimensions of input "
          "{}",
          op.str(), shapeStr(normalizedShape), shapeStr(x.shape()));
  if (!(eps >= 0.0))
    raise("{}: eps must be >= 0, got {}", op.str(), eps);
  for (const auto &[t, what] :
       {std::pair{&weight, "weight"}, std::pair{&bias, "bias"}}) {
    if (!t->defined())
      continue;
    requireFloat32(op, *t, what);
    if (t->shape() != normalizedShape)
      raise("{}: {} must have the normalized shape {}", op.str(),
            describe(what, *t), shapeStr(normalizedShape));
  }
  int64_t d = shapeNumel(normalizedShape);
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  if (out.numel() == 0)
    return out;
  int64_t rows = x.numel() / d;
  const float *px = x.data<float>();
  const float *pw = weight.defined() ? weight.data<float>() : nullptr;
  const float *pb = bias.defined() ? bias.data<float>() : nullptr;
  float *po = out.data<float>();
  parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / d),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  const float *src = px + r * d;
                  float *dst = po + r * d;
                  // Sums in double, in SIMD lanes.
                  double s = 0.0;
#pragma omp simd reduction(+ : s)
                  for (int64_t i = 0; i < d; ++i)
                    s += src[i];
                  double mu = s / double(d);
                  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
                  for (int64_t i = 0; i < d; ++i) {
                    double c = src[i] - mu;
                    ss += c * c;
                  }
                  float rstd = float(1.0 / std::sqrt(ss / double(d) + eps));
                  float m = float(mu);
                  for (int64_t i = 0; i < d; ++i) {
                    float v = (src[i] - m) * rstd;
                    if (pw)
                      v *= pw[i];
                    if (pb)
                      v += pb[i];
                    dst[i] = v;
                  }
                }
              });
  return out;
}

/// The maximum of x[0, n) with NaN winning (-inf for n == 0): 16 lanes
/// at a time where the CPU has AVX-512, the scalar loop's latency chain
/// otherwise. (Among equal zeros either sign may be returned; x - max is
/// then the same.)
#if TM_HAVE_SIMD512
TM_AVX512F static float rowMax512(const float *x, int64_t n) {
  using namespace simd512;
  __m512 m = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n; i += 16)
    m = nanMax(m, _mm512_mask_loadu_ps(m, headMask(n - i), x + i));
  if (__mmask16 nan = _mm512_cmp_ps_mask(m, m, _CMP_UNORD_Q))
    return _mm512_cvtss_f32(_mm512_maskz_compress_ps(nan, m));
  return _mm512_reduce_max_ps(m);
}
#endif

static float rowMax(const float *x, int64_t n) {
#if TM_HAVE_SIMD512
  if (simd512::available())
    return rowMax512(x, n);
#endif
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t l = 0; l < n; ++l)
    m = (x[l] > m || x[l] != x[l]) ? x[l] : m;
  return m;
}

/// Softmax or log-softmax along the middle axis of (outer, len, inner).
template <bool Log>
static Tensor softmaxImpl(llvm::StringRef op, const Tensor &x, int64_t axis) {
  requireFloat32(op, x, "input");
  if (x.rank() == 0)
    raise("{}: input must have at least one dimension, got ()", op.str());
  int64_t ax = normalizeAxis(op, axis, x.shape());
  int64_t len = x.dim(ax);
  int64_t outer = shapeNumel(x.shape().take_front(ax));
  int64_t inner = shapeNumel(x.shape().drop_front(ax + 1));
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  if (out.numel() == 0)
    return out;
  const float *px = x.data<float>();
  float *po = out.data<float>();
  // Columns of one outer block processed together (vectorised across the
  // inner axis); a task is (outer index, column chunk).
  constexpr int64_t Chunk = 256;
  int64_t chunks = (inner + Chunk - 1) / Chunk;
  int64_t tasks = outer * chunks;
  int64_t grain = std::max<int64_t>(
      1, (1 << 13) / std::max<int64_t>(1, len * std::min(inner, Chunk)));
  parallelFor(tasks, grain, [&](int64_t t0, int64_t t1) {
    float mx[Chunk];
    double sum[Chunk];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t o = t / chunks, j0 = (t % chunks) * Chunk;
      int64_t nj = std::min(Chunk, inner - j0);
      const float *src = px + o * len * inner + j0;
      float *dst = po + o * len * inner + j0;
      if (inner == 1) {
        // The common case (last axis): one contiguous row.
        float m = rowMax(src, len);
        // exp(x - max) into dst (log-softmax overwrites it below), summed
        // in double.
        for (int64_t l = 0; l < len; ++l)
          dst[l] = src[l] - m;
        detail::vecMath(detail::VecFn::Exp, dst, dst, len);
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t l = 0; l < len; ++l)
          s += dst[l];
        if constexpr (Log) {
          // (x - max) - log(sum) keeps the precision of small results when
          // max is large; x - (max + log(sum)) would not.
          float ls = float(std::log(s));
          for (int64_t l = 0; l < len; ++l)
            dst[l] = (src[l] - m) - ls;
        } else {
          float r = float(1.0 / s);
          for (int64_t l = 0; l < len; ++l)
            dst[l] *= r;
        }
        continue;
      }
      for (int64_t j = 0; j < nj; ++j) {
        mx[j] = -std::numeric_limits<float>::infinity();
        sum[j] = 0.0;
      }
      for (int64_t l = 0; l < len; ++l)
        for (int64_t j = 0; j < nj; ++j) {
          float v = src[l * inner + j];
          mx[j] = (v > mx[j] || v != v) ? v : mx[j];
        }
      for (int64_t l = 0; l < len; ++l) {
        float *d = dst + l * inner;
        for (int64_t j = 0; j < nj; ++j)
          d[j] = src[l * inner + j] - mx[j];
        detail::vecMath(detail::VecFn::Exp, d, d, nj);
        for (int64_t j = 0; j < nj; ++j)
          sum[j] += d[j];
      }
      if constexpr (Log) {
        float ls[Chunk];
        for (int64_t j = 0; j < nj; ++j)
          ls[j] = float(std::log(sum[j]));
        for (int64_t l = 0; l < len; ++l)
          for (int64_t j = 0; j < nj; ++j)
            dst[l * inner + j] = (src[l * inner + j] - mx[j]) - ls[j];
      } else {
        for (int64_t j = 0; j < nj; ++j)
          mx[j] = float(1.0 / sum[j]);
        for (int64_t l = 0; l < len; ++l)
          for (int64_t j = 0; j < nj; ++j)
            dst[l * inner + j] *= mx[j];
      }
    }
  });
  return out;
}

Tensor softmax(const Tensor &x, int64_t axis) {
  return softmaxImpl<false>("softmax", x, axis);
}

Tensor logSoftmax(const Tensor &x, int64_t axis) {
  return softmaxImpl<true>("log_softmax", x, axis);
}

} // namespace tmg::rt
