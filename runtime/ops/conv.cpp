//===- conv.cpp - Kernels and lowering: convolution family ------*- C++ -*-===//
//
// conv1d, conv2d and conv_transpose2d decode into a ConvCall and share
// convStep (which fuses a following batch norm or activation and packs a
// stable weight once); conv2d_act is lowered in FusedOps.cpp; the N-d
// convolutions of ONNX import take per-axis strides, dilations and
// (before..., after...) paddings; their kernels (a direct loop, the general
// fallback for 1-D/3-D and asymmetric padding) live here.
//
//===----------------------------------------------------------------------===//
#include "../FusedOps.h"
#include "KernelUtil.h"
#include "Lowering.h"

namespace tmg::rt {

using namespace detail;

namespace {

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
  return asFloat32(op, bias);
}

} // namespace

// ---- Kernels ------------------------------------------------------------------

namespace {

/// The direct N-d convolution loop in T (float32 or float64), accumulated in
/// double: x (N, C, *in), w (O, C / groups, *ks), bias (O) or null.
template <typename T>
void convNdInto(const T *xs, const T *ws, const T *bs, T *ys, int64_t N, int64_t C, int64_t O,
                int64_t groups, const WindowNd &p, llvm::ArrayRef<int64_t> in,
                llvm::ArrayRef<int64_t> out, llvm::ArrayRef<int64_t> ks) {
  size_t nd = in.size();
  int64_t inPlane = shapeNumel(in), outPlane = shapeNumel(out), kPlane = shapeNumel(ks);
  std::vector<int64_t> inStr = stridesOf(in), kStr = stridesOf(ks);
  int64_t cg = C / groups, og = O / groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oc = 0; oc < O; ++oc) {
      int64_t g = oc / og;
      std::vector<int64_t> o(nd, 0);
      for (int64_t oi = 0; oi < outPlane; ++oi) {
        double acc = bs ? double(bs[oc]) : 0.0;
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
                   double(ws[(oc * cg + ci) * kPlane + ki]);
        }
        ys[(n * O + oc) * outPlane + oi] = T(acc);
        for (size_t i = nd; i > 0; --i) {
          if (++o[i - 1] < out[i - 1])
            break;
          o[i - 1] = 0;
        }
      }
    }
}

} // namespace

Tensor convNd(const Tensor &x0, const Tensor &w0, const Tensor &bias, const WindowNd &p0,
              int64_t groups) {
  const char *op = "conv_nd";
  size_t nd;
  WindowNd p = convWindow(op, x0, w0, p0, nd);
  // float64 operands compute and return float64 (exact for integer-valued
  // operands whose sums stay below 2^53, as ConvInteger's); others float32.
  bool f64 = x0.dtype() == DType::Float64 || w0.dtype() == DType::Float64 ||
             (bias.defined() && bias.dtype() == DType::Float64);
  DType ct = f64 ? DType::Float64 : DType::Float32;
  Tensor x = f64 ? asDType(x0, ct).contiguous() : asFloat32(op, x0);
  Tensor w = f64 ? asDType(w0, ct).contiguous() : asFloat32(op, w0);
  int64_t N = x.dim(0), C = x.dim(1), O = w.dim(0);
  if (groups < 1 || C % groups || O % groups || w.dim(1) * groups != C)
    raise("{}: input {} with {} groups does not fit weight {}", op, shapeStr(x.shape()), groups,
          shapeStr(w.shape()));
  Tensor b;
  if (f64 && bias.defined()) {
    if (bias.numel() != O)
      raise("{}: bias {} needs {} elements", op, shapeStr(bias.shape()), O);
    b = asDType(bias, ct).contiguous();
  } else {
    b = convBias(op, bias, O);
  }
  std::vector<int64_t> in(nd), out(nd), ks(p.kernel);
  Shape outShape{N, O};
  for (size_t i = 0; i < nd; ++i) {
    in[i] = x.dim(i + 2);
    out[i] = poolOutputSize(in[i], ks[i], p.stride[i], p.padBegin[i], p.padEnd[i], p.dilation[i],
                            false);
    if (out[i] <= 0)
      raise("{}: kernel {} does not fit input {}", op, shapeStr(w.shape()), shapeStr(x.shape()));
    outShape.push_back(out[i]);
  }
  Tensor y = Tensor::empty(outShape, ct);
  if (f64)
    convNdInto<double>(x.data<double>(), w.data<double>(),
                       b.defined() ? b.data<double>() : nullptr, y.data<double>(), N, C, O,
                       groups, p, in, out, ks);
  else
    convNdInto<float>(x.data<float>(), w.data<float>(), b.defined() ? b.data<float>() : nullptr,
                      y.data<float>(), N, C, O, groups, p, in, out, ks);
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
  Tensor x = asFloat32(op, x0);
  Tensor w = asFloat32(op, w0);
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

// ---- Lowering -----------------------------------------------------------------

namespace {

ConvCall convArgs(const Args &a) {
  ConvCall c;
  c.x = a.tensor("inp");
  c.w = a.tensor("weight");
  c.b = a.optTensor("bias");
  c.stableWeight = stableTensorArg(a.expr(), "weight");
  return c;
}

StepFn lowerConv1d(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ConvCall c = convArgs(a);
  c.kind = ConvCall::Kind::Conv1d;
  c.p1.stride = a.integer("stride");
  c.p1.padding = a.integer("padding");
  c.p1.dilation = a.integer("dilation");
  c.p1.groups = a.integer("groups");
  return convStep(e, c, ctx);
}

StepFn lowerConv2d(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ConvCall c = convArgs(a);
  if (a.string("conv_mode") != "cross_correlation")
    a.fail("only conv_mode='cross_correlation' is supported");
  c.p2.stride = a.pair("stride");
  c.p2.padding = a.pair("padding");
  c.p2.dilation = a.pair("dilation");
  c.p2.groups = a.integer("groups");
  return convStep(e, c, ctx);
}

StepFn lowerConvTranspose2d(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ConvCall c = convArgs(a);
  c.kind = ConvCall::Kind::ConvTranspose2d;
  c.pt.stride = a.pair("stride");
  c.pt.padding = a.pair("padding");
  c.pt.outputPadding = a.pair("output_padding");
  c.pt.dilation = a.pair("dilation");
  c.pt.groups = a.integer("groups");
  return convStep(e, c, ctx);
}

/// The window of an N-d convolution; `nd` from the weight's known rank.
WindowNd convNdWindow(const Args &a, size_t &nd) {
  const Expr &e = a.expr();
  auto *w = llvm::dyn_cast_or_null<TensorNode>(e.namedArg("weight") ? e.namedArg("weight")->node()
                                                                    : nullptr);
  if (!w || !w->shape() || w->shape()->size() < 3)
    a.fail("conv_nd needs a weight of known rank >= 3");
  nd = w->shape()->size() - 2;
  WindowNd p;
  p.stride = ndInts(a, "stride", nd);
  p.dilation = ndInts(a, "dilation", nd);
  std::vector<int64_t> pads = ndPadding(a, "padding", nd);
  p.padBegin.assign(pads.begin(), pads.begin() + nd);
  p.padEnd.assign(pads.begin() + nd, pads.end());
  return p;
}

StepFn lowerConvNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  size_t nd = 0;
  WindowNd p = convNdWindow(a, nd);
  int64_t groups = a.integer("groups");
  Src x = a.tensor("inp"), wt = a.tensor("weight"), b = a.optTensor("bias");
  uint32_t o = outSlot(e, ctx);
  return [x, wt, b, p, groups, o](Value *s, RunState &) {
    s[o].tensor = convNd(x.get(s), wt.get(s), b.defined() ? b.get(s) : Tensor(), p, groups);
  };
}

StepFn lowerConvTransposeNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  size_t nd = 0;
  WindowNd p = convNdWindow(a, nd);
  int64_t groups = a.integer("groups");
  Src x = a.tensor("inp"), wt = a.tensor("weight"), b = a.optTensor("bias");
  std::vector<int64_t> op = ndInts(a, "output_padding", nd);
  uint32_t o = outSlot(e, ctx);
  return [x, wt, b, p, op, groups, o](Value *s, RunState &) {
    s[o].tensor = convTransposeNd(x.get(s), wt.get(s), b.defined() ? b.get(s) : Tensor(), p,
                                  op, groups);
  };
}

} // namespace

void registerConvLowering(LowerTable &t) {
  t.add("conv", {OpKind::Conv1d}, lowerConv1d);
  t.add("conv", {OpKind::Conv2d}, lowerConv2d);
  t.add("conv", {OpKind::ConvTranspose2d}, lowerConvTranspose2d);
  t.add("conv", {OpKind::Conv2dAct}, lowerConv2dAct);
  t.add("conv", {OpKind::ConvNd}, lowerConvNd);
  t.add("conv", {OpKind::ConvTransposeNd}, lowerConvTransposeNd);
}

} // namespace tmg::rt
