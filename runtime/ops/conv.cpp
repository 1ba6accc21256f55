//===- conv.cpp - Lowering of the convolution family ------------*- C++ -*-===//
//
// conv1d, conv2d and conv_transpose2d decode into a ConvCall and share
// convStep (which fuses a following batch norm or activation and packs a
// stable weight once); conv2d_act is lowered in FusedOps.cpp; the N-d
// convolutions of ONNX import take per-axis strides, dilations and
// (before..., after...) paddings.
//
//===----------------------------------------------------------------------===//
#include "../FusedOps.h"
#include "Lowering.h"

namespace tmg::rt {
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
WindowNd convWindow(const Args &a, size_t &nd) {
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
  WindowNd p = convWindow(a, nd);
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
  WindowNd p = convWindow(a, nd);
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
