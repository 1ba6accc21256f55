//===- Quant.cpp - Fake quantisation --------------------------------------===//
#include "tm/runtime/Quant.h"

#include <cmath>

#include "Internal.h"

namespace tmg::rt {
using namespace detail;

/// Checks one (scale, zero point) pair against [qmin, qmax].
static void checkQParams(llvm::StringRef op, double scale, double zeroPoint,
                         int64_t qmin, int64_t qmax, const std::string &where) {
  if (!(scale > 0.0) || std::isinf(scale))
    raise("{}: scale {}{} must be positive and finite", op.str(), scale, where);
  if (zeroPoint != std::floor(zeroPoint) || zeroPoint < double(qmin) ||
      zeroPoint > double(qmax))
    raise("{}: zero point {}{} must be an integer in [{}, {}]", op.str(),
          zeroPoint, where, qmin, qmax);
}

/// y = (clamp(round(x / s) + zp, qmin, qmax) - zp) * s over n floats.
static void fakeQuantRow(const float *x, float *y, int64_t n, float s, float zp,
                         float qmin, float qmax) {
  for (int64_t i = 0; i < n; ++i) {
    float q = std::round(x[i] / s) + zp;
    q = q < qmin ? qmin : (q > qmax ? qmax : q);
    y[i] = (q - zp) * s;
  }
}

static void checkRange(llvm::StringRef op, const Tensor &x, int64_t qmin,
                       int64_t qmax) {
  requireFloat32(op, x, "input");
  if (qmin > qmax)
    raise("{}: qmin {} is greater than qmax {}", op.str(), qmin, qmax);
  // Quantised values must be exact in float32.
  constexpr int64_t Exact = int64_t(1) << 24;
  if (qmin < -Exact || qmax > Exact)
    raise("{}: quantisation range [{}, {}] exceeds +-2^24", op.str(), qmin,
          qmax);
}

Tensor fakeQuantize(const Tensor &x, float scale, int64_t zeroPoint,
                    int64_t qmin, int64_t qmax) {
  llvm::StringRef op = "fake_quantize";
  checkRange(op, x, qmin, qmax);
  checkQParams(op, scale, double(zeroPoint), qmin, qmax, "");
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  const float *px = x.data<float>();
  float *po = out.data<float>();
  parallelFor(x.numel(), ElementwiseGrain, [&](int64_t b, int64_t e) {
    fakeQuantRow(px + b, po + b, e - b, scale, float(zeroPoint), float(qmin),
                 float(qmax));
  });
  return out;
}

Tensor fakeQuantizePerChannel(const Tensor &x, const Tensor &scale,
                              const Tensor &zeroPoint, int64_t axis,
                              int64_t qmin, int64_t qmax) {
  llvm::StringRef op = "fake_quantize_per_channel";
  checkRange(op, x, qmin, qmax);
  if (x.rank() == 0)
    raise("{}: input must have at least one dimension, got ()", op.str());
  int64_t ax = normalizeAxis(op, axis, x.shape());
  int64_t c = x.dim(ax);
  requireFloat32(op, scale, "scale");
  requireDefined(op, zeroPoint, "zero point");
  if (scale.numel() != c || zeroPoint.numel() != c)
    raise("{}: scale {} and zero point {} must have {} elements (axis {} of "
          "input {})",
          op.str(), shapeStr(scale.shape()), shapeStr(zeroPoint.shape()), c, ax,
          shapeStr(x.shape()));
  llvm::SmallVector<float, 64> s(c), zp(c);
  for (int64_t i = 0; i < c; ++i) {
    s[i] = scale.data<float>()[i];
    double z = zeroPoint.at(i);
    checkQParams(op, s[i], z, qmin, qmax, fmt::format(" of channel {}", i));
    zp[i] = float(z);
  }
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  int64_t inner = shapeNumel(x.shape().drop_front(ax + 1));
  int64_t planes = shapeNumel(x.shape().take_front(ax)) * c;
  const float *px = x.data<float>();
  float *po = out.data<float>();
  parallelFor(
      planes,
      std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(inner, 1)),
      [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          int64_t ch = p % c;
          fakeQuantRow(px + p * inner, po + p * inner, inner, s[ch], zp[ch],
                       float(qmin), float(qmax));
        }
      });
  return out;
}

} // namespace tmg::rt
