//===- pool.cpp - ONNX mapping of pooling ops -------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the pool family: MaxPool and
// AveragePool of any spatial rank (the 2-D ops where their kernels apply,
// the N-d ops otherwise), the global poolings and MaxUnpool.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {
namespace {

void importPool(NodeCx &c, bool isMax) {
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

void importGlobalPool(NodeCx &c, bool avg) {
  if (c.rank(0) == 4 && c.dtype(0) == DType::Float32)
    return c.out(0, c.call(avg ? "nn.adaptive_avg_pool2d" : "nn.adaptive_max_pool2d",
                           {c.node(0), tupleOf({1, 1})}));
  std::vector<int64_t> axes;
  for (int64_t i = 2; i < c.rank(0); ++i)
    axes.push_back(i);
  c.out(0, c.call(avg ? "math.mean" : "math.max", {c.node(0)},
                  {{"axis", tupleOf(axes)}, {"keepdims", true}}));
}

/// MaxUnpool: the output size from output_shape or the pooling formula.
void importMaxUnpool(NodeCx &c) {
  const Shape &xs = c.shape(0);
  if (xs.size() < 3)
    c.fail(fmt::format("input {} needs spatial axes", shapeStr(xs)));
  size_t nd = xs.size() - 2;
  auto k = c.ais("kernel_shape");
  if (!k || k->size() != nd)
    c.fail("kernel_shape is missing or does not match the input rank");
  std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> p = c.ais("pads").value_or(std::vector<int64_t>(2 * nd, 0));
  if (s.size() != nd || p.size() != 2 * nd)
    c.fail("strides or pads do not match the input rank");
  std::vector<int64_t> size;
  if (c.has(2)) {
    std::vector<int64_t> o = c.ints(2);
    if (o.size() != nd + 2)
      c.fail(fmt::format("output_shape has {} entries for an input of rank {}", o.size(),
                         xs.size()));
    size.assign(o.begin() + 2, o.end());
  } else {
    for (size_t i = 0; i < nd; ++i)
      size.push_back((xs[i + 2] - 1) * s[i] + (*k)[i] - p[i] - p[i + nd]);
  }
  c.out(0, c.call("nn.max_unpool_nd", {c.node(0), c.node(1), tupleOf(*k)},
                  {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                   {"output_size", tupleOf(size)}}));
}

} // namespace

void registerPoolOnnxImport(OnnxImportTable &t) {
  t.add("MaxUnpool", 9, kMaxOpset, importMaxUnpool);
  t.add("MaxPool", 1, kMaxOpset, [](NodeCx &c) { importPool(c, true); });
  t.add("AveragePool", 1, kMaxOpset, [](NodeCx &c) { importPool(c, false); });
  t.add("GlobalAveragePool", 1, kMaxOpset, [](NodeCx &c) { importGlobalPool(c, true); });
  t.add("GlobalMaxPool", 1, kMaxOpset, [](NodeCx &c) { importGlobalPool(c, false); });
}

// -- Export -------------------------------------------------------------------

namespace {

void exportPool(ExportCall &c) {
  OpKind k = c.k;
  bool avg = k == OpKind::AvgPool2d || k == OpKind::AvgPoolNd;
  std::vector<int64_t> ks = c.ints("kernel_size");
  size_t nd = c.shapeOf(c.e.input(0)).size() - 2;
  if (ks.size() == 1)
    ks.assign(nd, ks[0]);
  onnx::NodeProto *n = c.simple(avg ? "AveragePool" : "MaxPool", {c.operand("inp")});
  std::vector<int64_t> pads = c.ints("padding");
  if (pads.size() == 1)
    pads.assign(2 * nd, pads[0]);
  else if (pads.size() == nd)
    pads.insert(pads.end(), pads.begin(), pads.end());
  Exporter::attrIs(n, "kernel_shape", ks);
  Exporter::attrIs(n, "strides", c.isNone("stride") ? ks : c.intsN("stride", nd));
  Exporter::attrIs(n, "pads", pads);
  if (k == OpKind::MaxPoolNd)
    Exporter::attrIs(n, "dilations", c.intsN("dilation", nd));
  if (k == OpKind::MaxPoolNd || k == OpKind::AvgPoolNd)
    Exporter::attrI(n, "ceil_mode", c.boolean("ceil_mode"));
  if (avg)
    Exporter::attrI(n, "count_include_pad", c.string("mode") == "average");
}

void exportAdaptivePool(ExportCall &c) {
  if (c.ints("oshp") != std::vector<int64_t>{1, 1} && c.ints("oshp") != std::vector<int64_t>{1})
    c.fail("only a (1, 1) adaptive pooling has an ONNX form");
  c.simple(c.k == OpKind::AdaptiveAvgPool2d ? "GlobalAveragePool" : "GlobalMaxPool",
           {c.operand("inp")});
}

} // namespace

void registerPoolOnnxExport(OnnxExportTable &t) {
  t.add("pool", {OpKind::MaxPool2d, OpKind::AvgPool2d, OpKind::MaxPoolNd, OpKind::AvgPoolNd},
        exportPool);
  t.add("pool", {OpKind::AdaptiveAvgPool2d, OpKind::AdaptiveMaxPool2d}, exportAdaptivePool);
  t.add("pool", {OpKind::MaxUnpoolNd}, [](ExportCall &c) {
    std::vector<int64_t> ks = c.ints("kernel_size");
    size_t nd = ks.size();
    std::vector<int64_t> pads = c.ints("padding");
    if (pads.size() == 1)
      pads.assign(2 * nd, pads[0]);
    else if (pads.size() == nd)
      pads.insert(pads.end(), pads.begin(), pads.end());
    const Shape &out = c.shapeOf(c.e.output(0));
    c.simple("MaxUnpool", {c.operand("inp"), c.operand("indices"),
                           c.intsInit(std::vector<int64_t>(out.begin(), out.end()),
                                      c.out + "_shape")});
    Exporter::attrIs(c.n, "kernel_shape", ks);
    Exporter::attrIs(c.n, "strides", c.isNone("stride") ? ks : c.intsN("stride", nd));
    Exporter::attrIs(c.n, "pads", pads);
  });
}

} // namespace tmg::io::onnxdetail
