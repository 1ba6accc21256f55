//===- pool.cpp - ONNX mapping of pooling ops -------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the pool family: MaxPool and
// AveragePool of any spatial rank (the 2-D ops where their kernels apply,
// the N-d ops otherwise) and the global poolings.
//
//===----------------------------------------------------------------------===//
#include "Import.h"

namespace tmg::io::onnxdetail {
namespace {

void importPool(NodeCx &c) {
  bool isMax = c.n.op_type() == "MaxPool";
  const Shape &xs = c.shape(0);
  if (xs.size() < 3)
    c.fail(fmt::format("input {} needs spatial axes", shapeStr(xs)));
  size_t nd = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end());
  auto k = c.ais("kernel_shape");
  if (!k || k->size() != nd)
    c.fail("kernel_shape is missing or does not match the input rank");
  std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> d = c.ais("dilations").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> p = windowPads(c.as("auto_pad", "NOTSET"), c.ais("pads"), in, *k, s, d);
  bool ceil = c.ai("ceil_mode", 0);
  if (c.wants(1))
    c.fail("the Indices output of MaxPool is not supported");
  // The 2-D kernels need float32 and paddings of at most half the window.
  bool plain = nd == 2 && symmetric(p) && !ceil && d == std::vector<int64_t>(nd, 1) &&
               p[0] <= (*k)[0] / 2 && p[1] <= (*k)[1] / 2 && c.dtype(0) == DType::Float32;
  if (isMax) {
    if (plain)
      return c.out(0, c.call("nn.max_pool2d", {c.node(0), tupleOf(*k)},
                             {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})}}));
    return c.out(0, c.call("nn.max_pool_nd", {c.node(0), tupleOf(*k)},
                           {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                            {"dilation", tupleOf(d)}, {"ceil_mode", ceil}}));
  }
  if (d != std::vector<int64_t>(nd, 1))
    c.fail("AveragePool with dilations is not supported");
  const char *mode = c.ai("count_include_pad", 0) ? "average" : "average_count_exclude_padding";
  if (plain)
    return c.out(0, c.call("nn.avg_pool2d", {c.node(0), tupleOf(*k)},
                           {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})},
                            {"mode", mode}}));
  c.out(0, c.call("nn.avg_pool_nd", {c.node(0), tupleOf(*k)},
                  {{"stride", tupleOf(s)}, {"padding", tupleOf(p)}, {"ceil_mode", ceil},
                   {"mode", mode}}));
}

void importGlobalPool(NodeCx &c) {
  bool avg = c.n.op_type() == "GlobalAveragePool";
  if (c.rank(0) == 4 && c.dtype(0) == DType::Float32)
    return c.out(0, c.call(avg ? "nn.adaptive_avg_pool2d" : "nn.adaptive_max_pool2d",
                           {c.node(0), tupleOf({1, 1})}));
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < c.rank(0); ++i)
    axes.push_back(i);
  c.out(0, c.call(avg ? "math.mean" : "math.max", {c.node(0)},
                  {{"axis", tupleOf(axes)}, {"keepdims", true}}));
}

} // namespace

void registerPoolOnnxImport(OnnxImportTable &t) {
  t.add("MaxPool", 1, kMaxOpset, importPool);
  t.add("AveragePool", 1, kMaxOpset, importPool);
  t.add("GlobalAveragePool", 1, kMaxOpset, importGlobalPool);
  t.add("GlobalMaxPool", 1, kMaxOpset, importGlobalPool);
}

} // namespace tmg::io::onnxdetail
