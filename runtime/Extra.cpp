//===- Extra.cpp - Kernels added for ONNX coverage ------------------------===//
//
// Straightforward OpenMP loops: these ops are rare in the hot path of the
// models tmgraph optimises (the 2-D convolution and pooling kernels of
// Conv.cpp / Pool.cpp stay the fast path; convNd and the N-d pools are the
// general fallback for 1-D/3-D and asymmetric padding). N-d pools with two
// spatial axes (ONNX pools with ceil_mode, as PyTorch exports SqueezeNet's
// and GoogLeNet's) run on the 2-D kernels.
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/Extra.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Shape.h"

#include "PoolWindow.h"

namespace tmg::rt {
namespace {

void requireDef(const char *op, const Tensor &x) {
  if (!x.defined())
    raise("{}: input is undefined", op);
}

/// Applies f elementwise in float32; the result has dtype `out` (float16
/// inputs give float16 back, integer inputs float32 unless keepInt).
template <typename F> Tensor mapFloat(const char *op, const Tensor &x, bool keepInt, F f) {
  requireDef(op, x);
  Tensor in = x.dtype() == DType::Float32 ? x : cast(x, DType::Float32);
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  const float *p = in.data<float>();
  float *q = out.data<float>();
  int64_t n = x.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    q[i] = f(p[i]);
  if (x.dtype() == DType::Float16 || (keepInt && !isFloat(x.dtype()) && x.dtype() != DType::Bool))
    return cast(out, x.dtype());
  return out;
}

Tensor boolMap(const char *op, const Tensor &x, bool (*f)(float, const void *), const void *ctx) {
  requireDef(op, x);
  Tensor in = x.dtype() == DType::Float32 ? x : cast(x, DType::Float32);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  const float *p = in.data<float>();
  uint8_t *q = out.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    q[i] = f(p[i], ctx) ? 1 : 0;
  return out;
}

/// Both operands broadcast to their common shape (copies; these ops are
/// not on a hot path).
std::pair<Tensor, Tensor> broadcastPair(const char *op, const Tensor &a, const Tensor &b) {
  requireDef(op, a);
  requireDef(op, b);
  Shape s = broadcastShapes(op, a.shape(), b.shape());
  // broadcastTo returns a strided view; these kernels read dense data.
  Tensor x = a.shape() == llvm::ArrayRef<int64_t>(s) ? a : broadcastTo(a, s);
  Tensor y = b.shape() == llvm::ArrayRef<int64_t>(s) ? b : broadcastTo(b, s);
  return {x.contiguous(), y.contiguous()};
}

double roundHalfEven(double v) { return std::nearbyint(v); }

/// Multi-index iteration helper: row-major strides of a shape.
std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

void checkWindow(const char *op, const Tensor &x, const WindowNd &p, size_t nd) {
  if (x.rank() < 3 || x.rank() - 2 != nd)
    raise("{}: input {} needs {} spatial axes after (N, C)", op, shapeStr(x.shape()), nd);
  auto sized = [&](const std::vector<int64_t> &v, const char *what) {
    if (v.size() != nd)
      raise("{}: {} has {} entries for {} spatial axes", op, what, v.size(), nd);
  };
  sized(p.stride, "stride");
  sized(p.padBegin, "padding");
  sized(p.padEnd, "padding");
  sized(p.dilation, "dilation");
  for (size_t i = 0; i < nd; ++i)
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padBegin[i] < 0 || p.padEnd[i] < 0)
      raise("{}: strides and dilations must be >= 1 and paddings >= 0", op);
}

} // namespace

llvm::StringRef opName(MathOp op) {
  static const char *names[] = {"floor", "ceil",  "round", "sign",  "sin",   "cos",
                                "tan",   "asin",  "acos",  "atan",  "sinh",  "cosh",
                                "asinh", "acosh", "atanh", "reciprocal", "softsign",
                                "softplus"};
  return names[size_t(op)];
}

Tensor mathUnary(MathOp op, const Tensor &x) {
  const char *name = opName(op).data();
  switch (op) {
  case MathOp::Floor: return mapFloat(name, x, true, [](float v) { return std::floor(v); });
  case MathOp::Ceil: return mapFloat(name, x, true, [](float v) { return std::ceil(v); });
  case MathOp::Round:
    return mapFloat(name, x, true, [](float v) { return float(roundHalfEven(v)); });
  case MathOp::Sign:
    return mapFloat(name, x, true, [](float v) { return v > 0 ? 1.0f : v < 0 ? -1.0f : v; });
  case MathOp::Sin: return mapFloat(name, x, false, [](float v) { return std::sin(v); });
  case MathOp::Cos: return mapFloat(name, x, false, [](float v) { return std::cos(v); });
  case MathOp::Tan: return mapFloat(name, x, false, [](float v) { return std::tan(v); });
  case MathOp::Asin: return mapFloat(name, x, false, [](float v) { return std::asin(v); });
  case MathOp::Acos: return mapFloat(name, x, false, [](float v) { return std::acos(v); });
  case MathOp::Atan: return mapFloat(name, x, false, [](float v) { return std::atan(v); });
  case MathOp::Sinh: return mapFloat(name, x, false, [](float v) { return std::sinh(v); });
  case MathOp::Cosh: return mapFloat(name, x, false, [](float v) { return std::cosh(v); });
  case MathOp::Asinh: return mapFloat(name, x, false, [](float v) { return std::asinh(v); });
  case MathOp::Acosh: return mapFloat(name, x, false, [](float v) { return std::acosh(v); });
  case MathOp::Atanh: return mapFloat(name, x, false, [](float v) { return std::atanh(v); });
  case MathOp::Reciprocal: return mapFloat(name, x, false, [](float v) { return 1.0f / v; });
  case MathOp::Softsign:
    return mapFloat(name, x, false, [](float v) { return v / (1.0f + std::fabs(v)); });
  case MathOp::Softplus:
    return mapFloat(name, x, false, [](float v) {
      return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    });
  }
  raise("unknown math op");
}

Tensor elu(const Tensor &x, double alpha) {
  float a = float(alpha);
  return mapFloat("elu", x, false, [a](float v) { return v > 0 ? v : a * std::expm1(v); });
}

Tensor selu(const Tensor &x, double alpha, double scale) {
  float a = float(alpha), g = float(scale);
  return mapFloat("selu", x, false,
                  [a, g](float v) { return v > 0 ? g * v : g * a * std::expm1(v); });
}

Tensor celu(const Tensor &x, double alpha) {
  if (alpha == 0)
    raise("celu: alpha must not be 0");
  float a = float(alpha);
  return mapFloat("celu", x, false, [a](float v) {
    return std::max(0.0f, v) + std::min(0.0f, a * std::expm1(v / a));
  });
}

Tensor hardSigmoid(const Tensor &x, double alpha, double beta) {
  float a = float(alpha), b = float(beta);
  return mapFloat("hard_sigmoid", x, false,
                  [a, b](float v) { return std::max(0.0f, std::min(1.0f, a * v + b)); });
}

Tensor thresholdedRelu(const Tensor &x, double alpha) {
  float a = float(alpha);
  return mapFloat("thresholded_relu", x, false, [a](float v) { return v > a ? v : 0.0f; });
}

Tensor prelu(const Tensor &x, const Tensor &slope) {
  auto [a, s] = broadcastPair("prelu", x, slope);
  Tensor af = a.dtype() == DType::Float32 ? a : cast(a, DType::Float32);
  Tensor sf = s.dtype() == DType::Float32 ? s : cast(s, DType::Float32);
  Tensor out = Tensor::empty(af.shape(), DType::Float32);
  const float *p = af.data<float>(), *q = sf.data<float>();
  float *o = out.data<float>();
  int64_t n = out.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
  for (int64_t i = 0; i < n; ++i)
    o[i] = p[i] < 0 ? q[i] * p[i] : p[i];
  return x.dtype() == DType::Float16 ? cast(out, DType::Float16) : out;
}

Tensor logical(LogicalOp op, const Tensor &a, const Tensor &b) {
  const char *name = op == LogicalOp::And ? "logical_and" : op == LogicalOp::Or ? "logical_or"
                                                                                : "logical_xor";
  auto [x, y] = broadcastPair(name, a, b);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  uint8_t *o = out.data<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool p = x.at(i) != 0, q = y.at(i) != 0;
    o[i] = op == LogicalOp::And ? (p && q) : op == LogicalOp::Or ? (p || q) : (p != q);
  }
  return out;
}

Tensor logicalNot(const Tensor &x) {
  requireDef("logical_not", x);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  uint8_t *o = out.data<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = x.at(i) == 0;
  return out;
}

Tensor isNan(const Tensor &x) {
  return boolMap("isnan", x, [](float v, const void *) { return std::isnan(v); }, nullptr);
}

Tensor isInf(const Tensor &x, bool positive, bool negative) {
  bool flags[2] = {positive, negative};
  return boolMap(
      "isinf", x,
      [](float v, const void *c) {
        auto *f = static_cast<const bool *>(c);
        return std::isinf(v) && ((v > 0 && f[0]) || (v < 0 && f[1]));
      },
      flags);
}

Tensor mod(const Tensor &a, const Tensor &b, bool fmodMode) {
  auto [x, y] = broadcastPair("mod", a, b);
  DType t = promoteTypes(a.dtype(), b.dtype());
  bool fl = isFloat(t);
  Tensor out = Tensor::empty(x.shape(), fl ? DType::Float32 : DType::Int64);
  int64_t n = out.numel();
  if (fl) {
    float *o = out.data<float>();
    for (int64_t i = 0; i < n; ++i) {
      double p = x.at(i), q = y.at(i);
      double r = std::fmod(p, q);
      if (!fmodMode && r != 0 && ((r < 0) != (q < 0)))
        r += q;
      o[i] = float(r);
    }
  } else {
    int64_t *o = out.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t p = int64_t(x.at(i)), q = int64_t(y.at(i));
      if (q == 0)
        raise("mod: integer division by zero");
      int64_t r = p % q;
      if (!fmodMode && r != 0 && ((r < 0) != (q < 0)))
        r += q;
      o[i] = r;
    }
  }
  return out.dtype() == t ? out : cast(out, t);
}

Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive, bool reverse) {
  requireDef("cumsum", x);
  int64_t r = int64_t(x.rank());
  if (r == 0 || axis < -r || axis >= r)
    raise("cumsum: axis {} is out of range for {}", axis, shapeStr(x.shape()));
  if (axis < 0)
    axis += r;
  int64_t outer = 1, n = x.dim(size_t(axis)), inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.dim(size_t(i));
  for (int64_t i = axis + 1; i < r; ++i)
    inner *= x.dim(size_t(i));
  bool fl = isFloat(x.dtype());
  Tensor out = Tensor::empty(x.shape(), fl ? DType::Float32 : DType::Int64);
#pragma omp parallel for if (outer * inner > 4096) schedule(static)
  for (int64_t oi = 0; oi < outer * inner; ++oi) {
    int64_t o = oi / inner, in = oi % inner;
    double accF = 0;
    int64_t accI = 0;
    for (int64_t k = 0; k < n; ++k) {
      int64_t j = reverse ? n - 1 - k : k;
      int64_t idx = (o * n + j) * inner + in;
      double v = x.at(idx);
      if (exclusive) {
        fl ? (void)(out.data<float>()[idx] = float(accF)) : (void)(out.data<int64_t>()[idx] = accI);
      }
      accF += v;
      accI += int64_t(v);
      if (!exclusive) {
        fl ? (void)(out.data<float>()[idx] = float(accF)) : (void)(out.data<int64_t>()[idx] = accI);
      }
    }
  }
  return out.dtype() == x.dtype() ? out : cast(out, x.dtype());
}

int64_t poolOutputSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                       bool ceilMode) {
  int64_t span = in + pb + pe - (d * (k - 1) + 1);
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? (span + s - 1) / s : span / s) + 1;
  // A last window that would start in the trailing padding is dropped.
  if (ceilMode && (out - 1) * s >= in + pb)
    --out;
  return out;
}

namespace {

/// Shared driver of the N-d pools: calls `f(plane, window offsets...)`.
Tensor poolNd(const char *op, const Tensor &x0, const WindowNd &p, bool isMax) {
  requireDef(op, x0);
  size_t nd = p.kernel.size();
  checkWindow(op, x0, p, nd);
  Tensor x = x0.dtype() == DType::Float32 ? x0 : cast(x0, DType::Float32);
  Shape outShape{x.dim(0), x.dim(1)};
  std::vector<int64_t> in(nd), out(nd);
  for (size_t i = 0; i < nd; ++i) {
    in[i] = x.dim(i + 2);
    out[i] = poolOutputSize(in[i], p.kernel[i], p.stride[i], p.padBegin[i], p.padEnd[i],
                            p.dilation[i], p.ceilMode);
    if (out[i] <= 0)
      raise("{}: window {} does not fit input {}", op, p.kernel[i], shapeStr(x.shape()));
    outShape.push_back(out[i]);
  }
  if (nd == 2) {
    Tensor y = detail::pool2dWindow(x, p, out, isMax);
    return x0.dtype() == DType::Float32 ? y : cast(y, x0.dtype());
  }
  Tensor y = Tensor::empty(outShape, DType::Float32);
  int64_t planes = x.dim(0) * x.dim(1), inPlane = 1, outPlane = 1;
  for (size_t i = 0; i < nd; ++i) {
    inPlane *= in[i];
    outPlane *= out[i];
  }
  std::vector<int64_t> inStr = stridesOf(in);
  const float *src = x.data<float>();
  float *dst = y.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t pl = 0; pl < planes; ++pl) {
    std::vector<int64_t> o(nd, 0), lo(nd), hi(nd), k(nd);
    const float *xp = src + pl * inPlane;
    for (int64_t oi = 0; oi < outPlane; ++oi) {
      // Window bounds per axis (in input coordinates, padding included).
      int64_t padded = 1, valid = 1;
      bool empty = false;
      for (size_t i = 0; i < nd; ++i) {
        lo[i] = o[i] * p.stride[i] - p.padBegin[i];
        int64_t end = std::min(lo[i] + p.dilation[i] * (p.kernel[i] - 1) + 1, in[i] + p.padEnd[i]);
        // Taps of the window inside input + padding, and inside the input.
        int64_t taps = (end - lo[i] + p.dilation[i] - 1) / p.dilation[i];
        int64_t inside = 0;
        for (int64_t t = 0; t < taps; ++t) {
          int64_t c = lo[i] + t * p.dilation[i];
          inside += c >= 0 && c < in[i];
        }
        hi[i] = taps;
        padded *= taps;
        valid *= inside;
        empty |= inside == 0;
      }
      float acc = isMax ? -std::numeric_limits<float>::infinity() : 0.0f;
      if (!empty) {
        std::fill(k.begin(), k.end(), 0);
        for (;;) {
          bool ok = true;
          int64_t off = 0;
          for (size_t i = 0; i < nd && ok; ++i) {
            int64_t c = lo[i] + k[i] * p.dilation[i];
            ok = c >= 0 && c < in[i];
            off += c * inStr[i];
          }
          if (ok) {
            float v = xp[off];
            if (isMax)
              acc = (v > acc || std::isnan(v)) ? v : acc;
            else
              acc += v;
          }
          size_t i = nd;
          while (i > 0) {
            --i;
            if (++k[i] < hi[i])
              break;
            k[i] = 0;
            if (i == 0)
              goto done;
          }
        }
      }
    done:
      if (!isMax)
        acc = (p.countIncludePad ? padded : valid) ? acc / float(p.countIncludePad ? padded : valid)
                                                   : 0.0f;
      dst[pl * outPlane + oi] = acc;
      for (size_t i = nd; i > 0; --i) {
        if (++o[i - 1] < out[i - 1])
          break;
        o[i - 1] = 0;
      }
    }
  }
  return x0.dtype() == DType::Float32 ? y : cast(y, x0.dtype());
}

/// What convNd and convTransposeNd check alike: both tensors defined and of
/// one rank; returns the window with the kernel taken from the weight, and
/// the number of spatial dimensions in `nd`.
WindowNd convWindow(const char *op, const Tensor &x0, const Tensor &w0, const WindowNd &p0,
                    size_t &nd) {
  requireDef(op, x0);
  requireDef(op, w0);
  if (w0.rank() != x0.rank())
    raise("{}: weight {} and input {} differ in rank", op, shapeStr(w0.shape()),
          shapeStr(x0.shape()));
  nd = x0.rank() >= 2 ? x0.rank() - 2 : 0;
  WindowNd p = p0;
  p.kernel.assign(w0.shape().begin() + 2, w0.shape().end());
  checkWindow(op, x0, p, nd);
  return p;
}

/// The optional bias of an N-d conv with `O` output channels, as float32
/// (undefined when absent).
Tensor convBias(const char *op, const Tensor &bias, int64_t O) {
  if (!bias.defined())
    return Tensor();
  if (bias.numel() != O)
    raise("{}: bias {} needs {} elements", op, shapeStr(bias.shape()), O);
  return bias.dtype() == DType::Float32 ? bias : cast(bias, DType::Float32);
}

} // namespace

Tensor maxPoolNd(const Tensor &x, const WindowNd &p) { return poolNd("max_pool_nd", x, p, true); }
Tensor avgPoolNd(const Tensor &x, const WindowNd &p) { return poolNd("avg_pool_nd", x, p, false); }

Tensor convNd(const Tensor &x0, const Tensor &w0, const Tensor &bias, const WindowNd &p0,
              int64_t groups) {
  const char *op = "conv_nd";
  size_t nd;
  WindowNd p = convWindow(op, x0, w0, p0, nd);
  Tensor x = x0.dtype() == DType::Float32 ? x0 : cast(x0, DType::Float32);
  Tensor w = w0.dtype() == DType::Float32 ? w0 : cast(w0, DType::Float32);
  int64_t N = x.dim(0), C = x.dim(1), O = w.dim(0);
  if (groups < 1 || C % groups || O % groups || w.dim(1) * groups != C)
    raise("{}: input {} with {} groups does not fit weight {}", op, shapeStr(x.shape()), groups,
          shapeStr(w.shape()));
  Tensor b = convBias(op, bias, O);
  std::vector<int64_t> in(nd), out(nd), ks(p.kernel);
  Shape outShape{N, O};
  int64_t inPlane = 1, outPlane = 1, kPlane = 1;
  for (size_t i = 0; i < nd; ++i) {
    in[i] = x.dim(i + 2);
    out[i] = poolOutputSize(in[i], ks[i], p.stride[i], p.padBegin[i], p.padEnd[i], p.dilation[i],
                            false);
    if (out[i] <= 0)
      raise("{}: kernel {} does not fit input {}", op, shapeStr(w.shape()), shapeStr(x.shape()));
    outShape.push_back(out[i]);
    inPlane *= in[i];
    outPlane *= out[i];
    kPlane *= ks[i];
  }
  Tensor y = Tensor::empty(outShape, DType::Float32);
  std::vector<int64_t> inStr = stridesOf(in), kStr = stridesOf(ks);
  int64_t cg = C / groups, og = O / groups;
  const float *xs = x.data<float>(), *ws = w.data<float>();
  const float *bs = b.defined() ? b.data<float>() : nullptr;
  float *ys = y.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc) {
      int64_t g = oc / og;
      std::vector<int64_t> o(nd, 0);
      for (int64_t oi = 0; oi < outPlane; ++oi) {
        double acc = bs ? bs[oc] : 0.0;
        for (int64_t ki = 0; ki < kPlane; ++ki) {
          int64_t off = 0;
          bool ok = true;
          for (size_t i = 0; i < nd && ok; ++i) {
            int64_t kk = (ki / kStr[i]) % ks[i];
            int64_t c = o[i] * p.stride[i] - p.padBegin[i] + kk * p.dilation[i];
            ok = c >= 0 && c < in[i];
            off += c * inStr[i];
          }
          if (!ok)
            continue;
          for (int64_t ci = 0; ci < cg; ++ci)
            acc += double(xs[(n * C + g * cg + ci) * inPlane + off]) *
                   ws[(oc * cg + ci) * kPlane + ki];
        }
        ys[(n * O + oc) * outPlane + oi] = float(acc);
        for (size_t i = nd; i > 0; --i) {
          if (++o[i - 1] < out[i - 1])
            break;
          o[i - 1] = 0;
        }
      }
    }
  return y;
}

Tensor convTransposeNd(const Tensor &x0, const Tensor &w0, const Tensor &bias,
                       const WindowNd &p0, llvm::ArrayRef<int64_t> outputPadding,
                       int64_t groups) {
  const char *op = "conv_transpose_nd";
  size_t nd;
  WindowNd p = convWindow(op, x0, w0, p0, nd);
  if (outputPadding.size() != nd)
    raise("{}: output_padding needs {} entries", op, nd);
  Tensor x = x0.dtype() == DType::Float32 ? x0 : cast(x0, DType::Float32);
  Tensor w = w0.dtype() == DType::Float32 ? w0 : cast(w0, DType::Float32);
  int64_t N = x.dim(0), C = x.dim(1);
  if (groups < 1 || C % groups || w.dim(0) != C)
    raise("{}: input {} with {} groups does not fit weight {}", op, shapeStr(x.shape()), groups,
          shapeStr(w.shape()));
  int64_t og = w.dim(1), O = og * groups, cg = C / groups;
  Tensor b = convBias(op, bias, O);
  std::vector<int64_t> in(nd), out(nd), ks(p.kernel);
  Shape outShape{N, O};
  int64_t inPlane = 1, outPlane = 1, kPlane = 1;
  for (size_t i = 0; i < nd; ++i) {
    in[i] = x.dim(i + 2);
    out[i] = (in[i] - 1) * p.stride[i] - p.padBegin[i] - p.padEnd[i] +
             p.dilation[i] * (ks[i] - 1) + outputPadding[i] + 1;
    if (out[i] <= 0)
      raise("{}: output size {} along axis {} is not positive", op, out[i], i + 2);
    outShape.push_back(out[i]);
    inPlane *= in[i];
    outPlane *= out[i];
    kPlane *= ks[i];
  }
  Tensor y = Tensor::empty(outShape, DType::Float32);
  std::vector<int64_t> outStr = stridesOf(out), kStr = stridesOf(ks), inStr = stridesOf(in);
  const float *xs = x.data<float>(), *ws = w.data<float>();
  const float *bs = b.defined() ? b.data<float>() : nullptr;
  float *ys = y.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc) {
      int64_t g = oc / og, ol = oc % og;
      float *yp = ys + (n * O + oc) * outPlane;
      std::fill(yp, yp + outPlane, bs ? bs[oc] : 0.0f);
      for (int64_t ci = 0; ci < cg; ++ci) {
        int64_t c = g * cg + ci;
        const float *xp = xs + (n * C + c) * inPlane;
        const float *wp = ws + (c * og + ol) * kPlane;
        for (int64_t ii = 0; ii < inPlane; ++ii) {
          float v = xp[ii];
          for (int64_t ki = 0; ki < kPlane; ++ki) {
            int64_t off = 0;
            bool ok = true;
            for (size_t d = 0; d < nd && ok; ++d) {
              int64_t iv = (ii / inStr[d]) % in[d], kk = (ki / kStr[d]) % ks[d];
              int64_t pos = iv * p.stride[d] - p.padBegin[d] + kk * p.dilation[d];
              ok = pos >= 0 && pos < out[d];
              off += pos * outStr[d];
            }
            if (ok)
              yp[off] += v * wp[ki];
          }
        }
      }
    }
  return y;
}

Tensor resizeNd(const Tensor &x0, llvm::ArrayRef<int64_t> size, const ResizeParams &p) {
  const char *op = "resize_nd";
  requireDef(op, x0);
  size_t r = x0.rank();
  if (size.size() != r)
    raise("{}: size has {} entries for input {}", op, size.size(), shapeStr(x0.shape()));
  if (!p.scales.empty() && p.scales.size() != r)
    raise("{}: scales has {} entries for input {}", op, p.scales.size(), shapeStr(x0.shape()));
  for (int64_t s : size)
    if (s < 0)
      raise("{}: negative output size", op);
  Tensor x = x0.dtype() == DType::Float32 ? x0 : cast(x0, DType::Float32);
  Tensor y = Tensor::empty(size, DType::Float32);
  std::vector<int64_t> inStr = stridesOf(x.shape());
  // Per axis and output index: source taps and weights.
  struct Taps {
    std::vector<int64_t> idx;
    std::vector<float> w;
    int64_t n = 0;
  };
  std::vector<Taps> taps(r);
  for (size_t a = 0; a < r; ++a) {
    int64_t in = x.dim(a), out = size[a];
    double scale = p.scales.empty() ? (in ? double(out) / double(in) : 1.0) : p.scales[a];
    int64_t per = p.mode == ResizeInterp::Nearest ? 1 : p.mode == ResizeInterp::Linear ? 2 : 4;
    Taps &t = taps[a];
    t.n = per;
    t.idx.resize(out * per);
    t.w.resize(out * per);
    for (int64_t o = 0; o < out; ++o) {
      double c = 0;
      switch (p.coord) {
      case ResizeCoord::HalfPixel: c = (o + 0.5) / scale - 0.5; break;
      case ResizeCoord::PytorchHalfPixel: c = out > 1 ? (o + 0.5) / scale - 0.5 : 0.0; break;
      case ResizeCoord::AlignCorners: {
        // With explicit scales the resized length is in * scale, unrounded.
        double len = p.scales.empty() ? double(out) : in * scale;
        c = len > 1 ? double(o) * (in - 1) / (len - 1) : 0.0;
        break;
      }
      case ResizeCoord::Asymmetric: c = o / scale; break;
      }
      auto clampI = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
      if (p.mode == ResizeInterp::Nearest) {
        int64_t i = 0;
        switch (p.nearest) {
        case NearestRound::RoundPreferFloor: i = int64_t(std::ceil(c - 0.5)); break;
        case NearestRound::RoundPreferCeil: i = int64_t(std::floor(c + 0.5)); break;
        case NearestRound::Floor: i = int64_t(std::floor(c)); break;
        case NearestRound::Ceil: i = int64_t(std::ceil(c)); break;
        }
        t.idx[o] = clampI(i);
        t.w[o] = 1.0f;
      } else if (p.mode == ResizeInterp::Linear) {
        c = std::clamp(c, 0.0, double(in - 1));
        int64_t i0 = int64_t(std::floor(c));
        double f = c - i0;
        t.idx[2 * o] = clampI(i0);
        t.idx[2 * o + 1] = clampI(i0 + 1);
        t.w[2 * o] = float(1 - f);
        t.w[2 * o + 1] = float(f);
      } else {
        int64_t i0 = int64_t(std::floor(c));
        double f = c - i0, A = p.cubicA, ws[4], sum = 0;
        auto k = [A](double d) {
          d = std::fabs(d);
          if (d <= 1)
            return ((A + 2) * d - (A + 3)) * d * d + 1;
          if (d < 2)
            return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
          return 0.0;
        };
        for (int j = 0; j < 4; ++j) {
          int64_t ii = i0 - 1 + j;
          ws[j] = k(f + 1 - j);
          if (p.excludeOutside && (ii < 0 || ii >= in))
            ws[j] = 0;
          sum += ws[j];
        }
        for (int j = 0; j < 4; ++j) {
          t.idx[4 * o + j] = clampI(i0 - 1 + j);
          t.w[4 * o + j] = float(p.excludeOutside && sum != 0 ? ws[j] / sum : ws[j]);
        }
      }
    }
  }
  int64_t n = y.numel();
  std::vector<int64_t> outStr = stridesOf(size);
  const float *xs = x.data<float>();
  float *ys = y.data<float>();
  int64_t combos = 1;
  for (auto &t : taps)
    combos *= t.n;
#pragma omp parallel for if (n > 4096) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int64_t cb = 0; cb < combos; ++cb) {
      int64_t rem = cb, off = 0;
      double w = 1;
      for (size_t a = r; a-- > 0;) {
        int64_t j = rem % taps[a].n;
        rem /= taps[a].n;
        int64_t o = (i / outStr[a]) % size[a];
        w *= taps[a].w[o * taps[a].n + j];
        off += taps[a].idx[o * taps[a].n + j] * inStr[a];
      }
      if (w != 0)
        acc += w * xs[off];
    }
    ys[i] = float(acc);
  }
  return x0.dtype() == DType::Float16 ? cast(y, DType::Float16) : y;
}

} // namespace tmg::rt
