//===- pool.cpp - Kernels and lowering of the pooling family ----*- C++ -*-===//
//
// 2-D max and average pools (square or per-axis windows), the adaptive
// pools, and the N-d pools of ONNX import with (before..., after...)
// paddings, dilations and ceil_mode. The N-d pool kernels live here (with
// two spatial axes they run on the 2-D plane kernels of Pool.cpp), and
// max_unpool_nd's.
//
//===----------------------------------------------------------------------===//
#include "../PoolWindow.h"
#include "KernelUtil.h"
#include "Lowering.h"

#include <cstring>
#include <limits>

#include "../Internal.h"

namespace tmg::rt {

using namespace detail;

Tensor maxUnpoolNd(const Tensor &x0, const Tensor &ind0, llvm::ArrayRef<int64_t> outSpatial) {
  requireDef("max_unpool_nd", x0);
  requireDef("max_unpool_nd", ind0);
  if (x0.rank() < 3 || x0.rank() - 2 != outSpatial.size() || ind0.shape() != x0.shape())
    raise("max_unpool_nd: input {} needs (N, C, *spatial) with {} spatial axes and indices "
          "of its shape, got {}", shapeStr(x0.shape()), outSpatial.size(),
          shapeStr(ind0.shape()));
  Shape shape{x0.dim(0), x0.dim(1)};
  shape.append(outSpatial.begin(), outSpatial.end());
  Tensor out = Tensor::zeros(shape, x0.dtype());
  Tensor x = x0.contiguous(), ind = ind0.contiguous();
  size_t es = dtypeSize(x.dtype());
  auto *src = static_cast<const char *>(x.rawData());
  auto *dst = static_cast<char *>(out.rawData());
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t j = int64_t(ind.at(i));
    if (j < 0 || j >= out.numel())
      raise("max_unpool_nd: index {} is out of range for output {}", j, shapeStr(shape));
    std::memcpy(dst + j * es, src + i * es, es);
  }
  return out;
}

// ---- Kernels ------------------------------------------------------------------

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
  Tensor x = asFloat32(op, x0);
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

} // namespace

Tensor maxPoolNd(const Tensor &x, const WindowNd &p) { return poolNd("max_pool_nd", x, p, true); }
Tensor avgPoolNd(const Tensor &x, const WindowNd &p) { return poolNd("avg_pool_nd", x, p, false); }

// ---- Lowering -----------------------------------------------------------------

namespace {

/// Whether an average pool counts padding ('average') or not
/// ('average_count_exclude_padding'); `op` names the op in the error.
bool countIncludePad(const Args &a, const char *op) {
  std::string mode = a.string("mode");
  if (mode != "average" && mode != "average_count_exclude_padding")
    a.fail(fmt::format("unsupported {} mode '{}'", op, mode));
  return mode == "average";
}

template <bool Avg> StepFn lowerPool2d(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Pool2dParams p;
  p.kernel = a.pair("kernel_size");
  if (!a.isNone("stride"))
    p.stride = a.pair("stride");
  p.padding = a.pair("padding");
  if (Avg)
    p.countIncludePad = countIncludePad(a, "avg_pool2d");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [p](const Tensor &t) {
    return Avg ? avgPool2d(t, p) : maxPool2d(t, p);
  });
}

template <bool Avg> StepFn lowerAdaptivePool2d(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Int2 o2 = a.pair("oshp");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [o2](const Tensor &t) {
    return Avg ? adaptiveAvgPool2d(t, o2) : adaptiveMaxPool2d(t, o2);
  });
}

template <bool Max> StepFn lowerPoolNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  WindowNd p;
  p.kernel = a.ints("kernel_size");
  size_t nd = p.kernel.size();
  p.stride = a.isNone("stride") ? p.kernel : ndInts(a, "stride", nd);
  std::vector<int64_t> pads = ndPadding(a, "padding", nd);
  p.padBegin.assign(pads.begin(), pads.begin() + nd);
  p.padEnd.assign(pads.begin() + nd, pads.end());
  p.ceilMode = a.boolean("ceil_mode");
  if (Max) {
    p.dilation = ndInts(a, "dilation", nd);
  } else {
    p.dilation.assign(nd, 1);
    p.countIncludePad = countIncludePad(a, "avg_pool_nd");
  }
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [p](const Tensor &t) { return Max ? maxPoolNd(t, p) : avgPoolNd(t, p); });
}

StepFn lowerMaxUnpool(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> k = a.ints("kernel_size");
  size_t nd = k.size();
  std::vector<int64_t> st = a.isNone("stride") ? k : ndInts(a, "stride", nd);
  std::vector<int64_t> pads = ndPadding(a, "padding", nd), size;
  if (!a.isNone("output_size"))
    size = ndInts(a, "output_size", nd);
  return binaryStep(a.tensor("inp"), a.tensor("indices"), outSlot(e, ctx),
                    [=](const Tensor &x, const Tensor &i) {
                      std::vector<int64_t> o = size;
                      for (size_t d = 0; size.empty() && x.rank() == nd + 2 && d < nd; ++d)
                        o.push_back((x.dim(d + 2) - 1) * st[d] + k[d] - pads[d] - pads[d + nd]);
                      return maxUnpoolNd(x, i, o);
                    });
}

} // namespace

std::optional<WindowNd> maxPoolWindow(const Expr &e, LowerContext &ctx) {
  auto *cf = llvm::dyn_cast<CallFunction>(&e);
  if (!cf)
    return std::nullopt;
  OpKind k = cf->func().kind();
  if (k != OpKind::MaxPool2d && k != OpKind::MaxPoolNd)
    return std::nullopt;
  try {
    Args a(e, ctx);
    WindowNd w;
    if (k == OpKind::MaxPool2d) {
      // max_pool2d's own rules (Pool2dParams): a padding of at most half
      // the kernel, no dilation.
      Int2 kernel = a.pair("kernel_size");
      Int2 stride = a.isNone("stride") ? kernel : a.pair("stride");
      Int2 pad = a.pair("padding");
      if (kernel.h <= 0 || kernel.w <= 0 || stride.h <= 0 || stride.w <= 0 ||
          pad.h < 0 || pad.w < 0 || pad.h > kernel.h / 2 ||
          pad.w > kernel.w / 2)
        return std::nullopt;
      w.kernel = {kernel.h, kernel.w};
      w.stride = {stride.h, stride.w};
      w.padBegin = w.padEnd = {pad.h, pad.w};
      w.dilation = {1, 1};
      return w;
    }
    w.kernel = a.ints("kernel_size");
    if (w.kernel.size() != 2)
      return std::nullopt;
    w.stride = a.isNone("stride") ? w.kernel : ndInts(a, "stride", 2);
    std::vector<int64_t> pads = ndPadding(a, "padding", 2);
    w.padBegin = {pads[0], pads[1]};
    w.padEnd = {pads[2], pads[3]};
    w.ceilMode = a.boolean("ceil_mode");
    w.dilation = ndInts(a, "dilation", 2);
    return w;
  } catch (const Error &) {
    return std::nullopt; // the pool's own step reports it
  }
}

void registerPoolLowering(LowerTable &t) {
  t.add("pool", {OpKind::MaxUnpoolNd}, lowerMaxUnpool);
  t.add("pool", {OpKind::MaxPool2d}, lowerPool2d<false>);
  t.add("pool", {OpKind::AvgPool2d}, lowerPool2d<true>);
  t.add("pool", {OpKind::AdaptiveAvgPool2d}, lowerAdaptivePool2d<true>);
  t.add("pool", {OpKind::AdaptiveMaxPool2d}, lowerAdaptivePool2d<false>);
  t.add("pool", {OpKind::MaxPoolNd}, lowerPoolNd<true>);
  t.add("pool", {OpKind::AvgPoolNd}, lowerPoolNd<false>);
}

} // namespace tmg::rt
