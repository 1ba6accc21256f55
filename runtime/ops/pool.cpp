//===- pool.cpp - Lowering of the pooling family ----------------*- C++ -*-===//
//
// 2-D max and average pools (square or per-axis windows), the adaptive
// pools, and the N-d pools of ONNX import with (before..., after...)
// paddings, dilations and ceil_mode.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
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

} // namespace

void registerPoolLowering(LowerTable &t) {
  t.add("pool", {OpKind::MaxPool2d}, lowerPool2d<false>);
  t.add("pool", {OpKind::AvgPool2d}, lowerPool2d<true>);
  t.add("pool", {OpKind::AdaptiveAvgPool2d}, lowerAdaptivePool2d<true>);
  t.add("pool", {OpKind::AdaptiveMaxPool2d}, lowerAdaptivePool2d<false>);
  t.add("pool", {OpKind::MaxPoolNd}, lowerPoolNd<true>);
  t.add("pool", {OpKind::AvgPoolNd}, lowerPoolNd<false>);
}

} // namespace tmg::rt
