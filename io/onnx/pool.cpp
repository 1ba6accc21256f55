//===- pool.cpp - ONNX mapping of pooling ops -------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the pool family: MaxPool and
// AveragePool of any spatial rank (the 2-D ops where their kernels apply,
// the N-d ops otherwise), the global poolings and MaxUnpool.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

#include <limits>

#include "tm/runtime/Extra.h"

namespace tmg::io::onnxdetail {
namespace {

/// A max pooling's window geometry: spatial input, kernel, strides,
/// dilations, (begin..., end...) pads and output size.
struct PoolGeom {
  std::vector<int64_t> in, k, s, d, p, out;
  size_t nd() const { return in.size(); }
};

/// The flat index of each spatial position of the padded input (-1 in the
/// padding), row-major or, for storage_order 1, column-major.
Tensor paddedRamp(const PoolGeom &g, const std::vector<int64_t> &padEnd, bool colMajor) {
  size_t nd = g.nd();
  Shape ps;
  for (size_t i = 0; i < nd; ++i)
    ps.push_back(g.in[i] + g.p[i] + padEnd[i]);
  Tensor r = Tensor::full(ps, -1.0, DType::Int64);
  int64_t *pr = r.data<int64_t>();
  for (int64_t f = 0; f < r.numel(); ++f) {
    int64_t rest = f, idx = 0, inside = 1;
    for (size_t j = nd; j-- > 0;) {
      int64_t pos = rest % ps[j] - g.p[j];
      rest /= ps[j];
      inside &= pos >= 0 && pos < g.in[j];
      int64_t stride = 1;
      for (size_t m = 0; m < nd; ++m)
        if (colMajor ? m < j : m > j)
          stride *= g.in[m];
      idx += pos * stride;
    }
    if (inside)
      pr[f] = idx;
  }
  return r;
}

/// Window offset `o` of every output position: x[..., o0 * d0 : ... : s0, ...]
/// over the last `nd` axes of `x`.
Node *windowSlice(NodeCx &c, Node *x, size_t lead, const PoolGeom &g,
                  const std::vector<int64_t> &o) {
  std::vector<Arg> idx(lead, Arg::slice(Arg::none(), Arg::none(), Arg::none()));
  for (size_t i = 0; i < g.nd(); ++i) {
    int64_t b = o[i] * g.d[i];
    idx.push_back(Arg::slice(b, b + (g.out[i] - 1) * g.s[i] + 1, g.s[i]));
  }
  return c.method(x, "__getitem__", {Arg::tuple(idx)});
}

/// MaxPool's Indices output, composed: the windows' K offsets stacked on a
/// new last axis of the -inf padded input and of its flat index ramp, the
/// first maximum's offset chosen by argmax and its index gathered, plus
/// each (n, c) plane's base n * C + c times the plane size.
Node *maxPoolIndices(NodeCx &c, const PoolGeom &g) {
  const Shape &xs = c.shape(0);
  if (!c.dtype(0) || !isFloat(*c.dtype(0)))
    c.fail("the Indices output of MaxPool needs a float input");
  size_t nd = g.nd();
  std::vector<int64_t> padEnd(nd);
  std::vector<Arg> pw = {tupleOf({0, 0}), tupleOf({0, 0})};
  for (size_t i = 0; i < nd; ++i) {
    int64_t need = (g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] + 1;
    padEnd[i] = std::max(g.p[i + nd], need - g.in[i] - g.p[i]);
    pw.push_back(tupleOf({g.p[i], padEnd[i]}));
  }
  Node *xp = c.call("nn.pad", {c.node(0), Arg::tuple(pw)},
                    {{"constant_value", -std::numeric_limits<double>::infinity()}});
  Node *ramp = c.constant(paddedRamp(g, padEnd, c.ai("storage_order", 0) == 1));
  std::vector<Arg> xw, rw;
  std::vector<int64_t> o(nd, 0);
  for (bool more = true; more;) {
    xw.push_back(windowSlice(c, xp, 2, g, o));
    rw.push_back(windowSlice(c, ramp, 0, g, o));
    more = false;
    for (size_t i = nd; i-- > 0 && !more;)
      more = ++o[i] < g.k[i] || (o[i] = 0, false);
  }
  int64_t last = int64_t(nd) + 2;
  Node *arg = c.call("math.argmax", {c.call("tensor.stack", {Arg::list(xw)}, {{"axis", last}})},
                     {{"axis", last}, {"keepdims", true}});
  Shape full(xs.begin(), xs.begin() + 2);
  full.append(g.out.begin(), g.out.end());
  full.push_back(int64_t(xw.size()));
  Node *rs = c.call("tensor.stack", {Arg::list(rw)}, {{"axis", int64_t(nd)}});
  rs = c.call("tensor.broadcast_to", {rs, tupleOf(full)});
  Node *idx = c.call("tensor.gather", {rs, last, arg});
  full.back() = 1;
  Shape bs(xs.begin(), xs.begin() + 2);
  bs.append(nd + 1, 1);
  int64_t plane = shapeNumel(Shape(xs.begin() + 2, xs.end()));
  std::vector<int64_t> base(size_t(xs[0] * xs[1]));
  for (size_t i = 0; i < base.size(); ++i)
    base[i] = int64_t(i) * plane;
  idx = c.call("elemwise.add", {idx, c.constant(Tensor::fromInts(bs, base))});
  full.pop_back();
  return c.call("tensor.reshape", {idx, tupleOf(full)});
}

void importPool(NodeCx &c, bool isMax) {
  const Shape &xs = c.dims(0);
  if (xs.size() < 3)
    c.fail(fmt::format("input {} needs spatial axes", dim::dimsStr(xs)));
  size_t nd = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end());
  auto k = c.ais("kernel_shape");
  if (!k || k->size() != nd)
    c.fail("kernel_shape is missing or does not match the input rank");
  std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> d = c.ais("dilations").value_or(std::vector<int64_t>(nd, 1));
  checkWindow(c, in, *k, s, d);
  checkSamePads(c, c.as("auto_pad", "NOTSET"), in, s);
  std::vector<int64_t> p = windowPads(c.as("auto_pad", "NOTSET"), c.ais("pads"), in, *k, s, d);
  checkWindowValues(c, "pads", p);
  bool ceil = c.ai("ceil_mode", 0);
  if (c.wants(1)) {
    c.shape(0); // the indices are computed from the sizes
    std::vector<int64_t> out;
    for (size_t i = 0; i < nd; ++i)
      out.push_back(rt::poolOutputSize(in[i], (*k)[i], s[i], p[i], p[i + nd], d[i], ceil));
    c.out(1, maxPoolIndices(c, PoolGeom{in, *k, s, d, p, out}));
  }
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

/// MaxUnpool's output_shape read at run time: the unpooled tensor padded at
/// the end of each axis by output_shape - its shape (at least 0), then
/// reshaped to output_shape, which fails when output_shape is smaller.
Node *unpoolPadRuntime(NodeCx &c, Node *y, const Shape &inferred) {
  int64_t r = int64_t(inferred.size());
  if (c.length(2) != r)
    c.fail(fmt::format("output_shape has {} entries for an input of rank {}", c.length(2), r));
  Node *o = c.intsNode(2);
  Node *after = c.call("elemwise.sub", {o, intsConst(c, {inferred.begin(), inferred.end()})});
  after = c.call("elemwise.maximum", {after, c.constant(Tensor::fromInts({}, {0}))});
  Node *zero = intsConst(c, std::vector<int64_t>(size_t(r), 0));
  Node *pw = c.call("tensor.stack", {Arg::list({zero, after})}, {{"axis", int64_t(1)}});
  y = c.call("nn.pad", {y, c.call("tensor.reshape", {pw, tupleOf({-1})})});
  return c.call("tensor.reshape", {y, o});
}

/// MaxUnpool's output_shape known at import: the unpooled tensor padded at
/// the end of each axis to it.
Node *unpoolPad(NodeCx &c, Node *y, const Shape &inferred) {
  std::vector<int64_t> o = c.ints(2);
  if (o.size() != inferred.size())
    c.fail(fmt::format("output_shape has {} entries for an input of rank {}", o.size(),
                       inferred.size()));
  std::vector<Arg> pw;
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] < inferred[i])
      c.fail(fmt::format("output_shape {} is smaller than the unpooled shape {}", shapeStr(o),
                         shapeStr(inferred)));
    pw.push_back(tupleOf({0, o[i] - inferred[i]}));
  }
  return o == std::vector<int64_t>(inferred.begin(), inferred.end())
             ? y
             : c.call("nn.pad", {y, Arg::tuple(pw)});
}

/// MaxUnpool as ONNX's reference implementation defines it: the indices
/// address the shape the pooling formula gives, (in - 1) * stride + kernel -
/// pads; an output_shape pads that result with zeros at the end of each axis.
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
  Shape inferred(xs.begin(), xs.begin() + 2);
  for (size_t i = 0; i < nd; ++i)
    inferred.push_back((xs[i + 2] - 1) * s[i] + (*k)[i] - p[i] - p[i + nd]);
  Node *y = c.call("nn.max_unpool_nd", {c.node(0), c.node(1), tupleOf(*k)},
                   {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                    {"output_size", tupleOf({inferred.begin() + 2, inferred.end()})}});
  if (c.has(2))
    y = c.runtime(2) ? unpoolPadRuntime(c, y, inferred) : unpoolPad(c, y, inferred);
  c.out(0, y);
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
    std::vector<int64_t> st = c.isNone("stride") ? ks : c.intsN("stride", nd);
    const Shape &in = c.staticShapeOf(c.e.input(0)), &out = c.staticShapeOf(c.e.output(0));
    for (size_t i = 0; i < nd; ++i)
      if (out[i + 2] != (in[i + 2] - 1) * st[i] + ks[i] - pads[i] - pads[i + nd])
        c.fail("ONNX's MaxUnpool indexes the shape the pooling formula gives; an "
               "output_size other than it has no ONNX form");
    c.simple("MaxUnpool", {c.operand("inp"), c.operand("indices")});
    Exporter::attrIs(c.n, "kernel_shape", ks);
    Exporter::attrIs(c.n, "strides", st);
    Exporter::attrIs(c.n, "pads", pads);
  });
}

} // namespace tmg::io::onnxdetail
