//===- conv.cpp - ONNX mapping of convolutions ------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the conv family: Conv and
// ConvTranspose of any spatial rank (conv1d/conv2d where they fit, the N-d
// ops otherwise and for float64 Conv, which only conv_nd computes in float64;
// auto_pad and output_shape resolved to explicit paddings), and the export
// of conv with a fused activation. Also the window padding helpers the pool
// family shares.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {

void checkSamePads(const NodeCx &c, const std::string &autoPad, llvm::ArrayRef<int64_t> in,
                   llvm::ArrayRef<int64_t> s) {
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return;
  for (size_t i = 0; i < in.size() && i < s.size(); ++i)
    if (!isKnownDim(in[i]) && s[i] != 1)
      c.fail(fmt::format("auto_pad {} with stride {} needs the size of spatial dim {}, which is "
                         "{}; give static shapes with --input-shape",
                         autoPad, s[i], i, dim::str(in[i])));
}

namespace {
constexpr int64_t WindowMax = int64_t(1) << 60;

std::string valuesStr(llvm::ArrayRef<int64_t> v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}
} // namespace

void checkWindow(NodeCx &c, llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> k,
                 llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> d) {
  size_t nd = in.size();
  auto what = [&] {
    return fmt::format("kernel {}, strides {} and dilations {}", valuesStr(k), valuesStr(s),
                       valuesStr(d));
  };
  if (k.size() != nd || s.size() != nd || d.size() != nd)
    c.fail(fmt::format("{} must each have {} values, one per spatial axis of the input",
                       what(), nd));
  for (size_t i = 0; i < nd; ++i) {
    bool fits = in[i] < WindowMax && k[i] < WindowMax && s[i] >= 1 && s[i] < WindowMax &&
                d[i] >= 1 && d[i] < WindowMax &&
                (k[i] <= 1 || d[i] < WindowMax / k[i]);
    if (!fits)
      c.fail(fmt::format("{} do not fit spatial size {} (strides and dilations from 1, window "
                         "sizes below 2^60)",
                         what(), in[i]));
  }
}

void checkWindowValues(NodeCx &c, const char *what, llvm::ArrayRef<int64_t> values) {
  for (int64_t v : values)
    if (v <= -WindowMax || v >= WindowMax)
      c.fail(fmt::format("{} {} must lie between -2^60 and 2^60", what, valuesStr(values)));
}

std::vector<int64_t> windowPads(const std::string &autoPad,
                                std::optional<std::vector<int64_t>> pads,
                                llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> k,
                                llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> d) {
  size_t nd = in.size();
  std::vector<int64_t> p(2 * nd, 0);
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      if (!isKnownDim(in[i]) && s[i] == 1) { // the total is the window's extent less one
        int64_t total = (k[i] - 1) * d[i], small = total / 2, big = total - small;
        p[i] = autoPad == "SAME_UPPER" ? small : big;
        p[i + nd] = autoPad == "SAME_UPPER" ? big : small;
        continue;
      }
      int64_t out = (in[i] + s[i] - 1) / s[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i]);
      int64_t small = total / 2, big = total - small;
      p[i] = autoPad == "SAME_UPPER" ? small : big;
      p[i + nd] = autoPad == "SAME_UPPER" ? big : small;
    }
    return p;
  }
  if (autoPad == "VALID" || !pads)
    return p;
  if (pads->size() == 2 * nd)
    return *pads;
  return p;
}

bool symmetric(const std::vector<int64_t> &p) {
  size_t nd = p.size() / 2;
  for (size_t i = 0; i < nd; ++i)
    if (p[i] != p[i + nd])
      return false;
  return true;
}

namespace {

/// What Conv and ConvTranspose read alike.
struct ConvAttrs {
  size_t nd;
  std::vector<int64_t> in, k, s, d;
  int64_t groups;
  std::string autoPad;
  Node *x, *w;
  Arg bias = Arg::none();
};

ConvAttrs convAttrs(NodeCx &c) {
  const Shape &xs = c.dims(0), &ws = c.shape(1);
  if (xs.size() < 3 || ws.size() != xs.size())
    c.fail(fmt::format("input {} and weight {} do not fit", dim::dimsStr(xs), dim::dimsStr(ws)));
  ConvAttrs a;
  a.nd = xs.size() - 2;
  a.in.assign(xs.begin() + 2, xs.end());
  a.k.assign(ws.begin() + 2, ws.end());
  if (auto ks = c.ais("kernel_shape"); ks && *ks != a.k)
    c.fail("kernel_shape does not match the weight");
  a.s = c.ais("strides").value_or(std::vector<int64_t>(a.nd, 1));
  a.d = c.ais("dilations").value_or(std::vector<int64_t>(a.nd, 1));
  a.groups = c.ai("group", 1);
  a.autoPad = c.as("auto_pad", "NOTSET");
  checkSamePads(c, a.autoPad, a.in, a.s);
  a.x = c.node(0);
  a.w = c.node(1);
  a.bias = c.has(2) ? Arg(c.node(2)) : Arg::none();
  checkWindow(c, a.in, a.k, a.s, a.d);
  return a;
}

void importConv(NodeCx &c) {
  ConvAttrs a = convAttrs(c);
  std::vector<int64_t> p = windowPads(a.autoPad, c.ais("pads"), a.in, a.k, a.s, a.d);
  checkWindowValues(c, "pads", p);
  // conv1d and conv2d compute in float32; conv_nd also in float64.
  bool f64 = c.dtype(0) == DType::Float64 || c.dtype(1) == DType::Float64;
  if (a.nd == 2 && symmetric(p) && !f64)
    return c.out(0, c.call("nn.conv2d", {a.x, a.w, a.bias},
                           {{"stride", tupleOf(a.s)}, {"padding", tupleOf({p[0], p[1]})},
                            {"dilation", tupleOf(a.d)}, {"groups", a.groups}}));
  if (a.nd == 1 && symmetric(p) && !f64)
    return c.out(0, c.call("nn.conv1d", {a.x, a.w, a.bias},
                           {{"stride", a.s[0]}, {"padding", p[0]}, {"dilation", a.d[0]},
                            {"groups", a.groups}}));
  c.out(0, c.call("nn.conv_nd", {a.x, a.w, a.bias},
                  {{"stride", tupleOf(a.s)}, {"padding", tupleOf(p)},
                   {"dilation", tupleOf(a.d)}, {"groups", a.groups}}));
}

/// ConvTranspose's paddings (begin..., end...) from pads, auto_pad or
/// output_shape; a negative trailing padding becomes output padding.
std::vector<int64_t> convTransposePads(NodeCx &c, const ConvAttrs &a,
                                       std::vector<int64_t> &op2) {
  size_t nd = a.nd;
  const auto &in = a.in, &k = a.k, &s = a.s, &d = a.d;
  std::vector<int64_t> p(2 * nd, 0);
  auto outShape = c.ais("output_shape");
  if (outShape && outShape->size() == nd + 2)
    outShape = std::vector<int64_t>(outShape->begin() + 2, outShape->end());
  if (!outShape && (a.autoPad == "SAME_UPPER" || a.autoPad == "SAME_LOWER")) {
    outShape = std::vector<int64_t>(nd);
    for (size_t i = 0; i < nd; ++i)
      (*outShape)[i] = in[i] * s[i];
  }
  if (outShape) {
    if (outShape->size() != nd)
      c.fail(fmt::format("output_shape {} must have {} values", valuesStr(*outShape), nd));
    checkWindowValues(c, "output_shape", *outShape);
    for (size_t i = 0; i < nd; ++i) {
      int64_t total = s[i] * (in[i] - 1) + op2[i] + ((k[i] - 1) * d[i] + 1) - (*outShape)[i];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor division
      if (a.autoPad == "SAME_UPPER") {
        p[i] = half;
        p[i + nd] = total - half;
      } else {
        p[i] = total - half;
        p[i + nd] = half;
      }
      if (p[i + nd] < 0) {
        op2[i] += -p[i + nd];
        p[i + nd] = 0;
      }
      if (p[i] < 0)
        c.fail("output_shape needs negative leading padding");
    }
  } else if (a.autoPad != "VALID") {
    if (auto pads = c.ais("pads"); pads && pads->size() == 2 * nd)
      p = *pads;
  }
  checkWindowValues(c, "pads", p);
  return p;
}

void importConvTranspose(NodeCx &c) {
  c.shape(0); // its paddings and output shape are computed from the sizes
  ConvAttrs a = convAttrs(c);
  size_t nd = a.nd;
  std::vector<int64_t> op2 = c.ais("output_padding").value_or(std::vector<int64_t>(nd, 0));
  if (op2.size() != nd)
    c.fail(fmt::format("output_padding {} must have {} values", valuesStr(op2), nd));
  checkWindowValues(c, "output_padding", op2);
  std::vector<int64_t> p = convTransposePads(c, a, op2);
  bool opOk = true;
  for (size_t i = 0; i < nd; ++i)
    opOk &= op2[i] < a.s[i] || op2[i] < a.d[i];
  if (nd == 2 && symmetric(p) && opOk)
    return c.out(0, c.call("nn.conv_transpose2d", {a.x, a.w, a.bias},
                           {{"stride", tupleOf(a.s)}, {"padding", tupleOf({p[0], p[1]})},
                            {"output_padding", tupleOf(op2)}, {"dilation", tupleOf(a.d)},
                            {"groups", a.groups}}));
  c.out(0, c.call("nn.conv_transpose_nd", {a.x, a.w, a.bias},
                  {{"stride", tupleOf(a.s)}, {"padding", tupleOf(p)},
                   {"output_padding", tupleOf(op2)}, {"dilation", tupleOf(a.d)},
                   {"groups", a.groups}}));
}

} // namespace

void registerConvOnnxImport(OnnxImportTable &t) {
  t.add("Conv", 1, kMaxOpset, importConv);
  t.add("ConvTranspose", 1, kMaxOpset, importConvTranspose);
}

// -- Export -------------------------------------------------------------------

namespace {

void exportConv(ExportCall &c) {
  OpKind k = c.k;
  bool tr = k == OpKind::ConvTranspose2d || k == OpKind::ConvTransposeNd;
  const Shape &ws = c.shapeOf(c.e.namedArg("weight")->node());
  size_t nd = ws.size() - 2;
  std::vector<std::string> ins = {c.operand("inp"), c.operand("weight")};
  if (!c.isNone("bias")) {
    std::string b = c.operand("bias");
    const Shape &bs = c.shapeOf(c.e.namedArg("bias")->node());
    if (bs.size() != 1)
      b = c.emit("Reshape", {b, c.intsInit({-1}, c.out + "_bshape")}, c.out + "_bias");
    ins.push_back(b);
  }
  onnx::NodeProto *n = c.simple(tr ? "ConvTranspose" : "Conv", ins);
  std::vector<int64_t> pads = c.ints("padding");
  if (pads.size() == 1)
    pads.assign(2 * nd, pads[0]);
  else if (pads.size() == nd)
    pads.insert(pads.end(), pads.begin(), pads.end());
  Exporter::attrIs(n, "kernel_shape", llvm::ArrayRef<int64_t>(ws).drop_front(2));
  Exporter::attrIs(n, "strides", c.intsN("stride", nd));
  Exporter::attrIs(n, "pads", pads);
  Exporter::attrIs(n, "dilations", c.intsN("dilation", nd));
  Exporter::attrI(n, "group", c.ints("groups")[0]);
  if (tr)
    Exporter::attrIs(n, "output_padding", c.intsN("output_padding", nd));
  if (k == OpKind::Conv2d && c.string("conv_mode") != "cross_correlation")
    c.fail("only cross-correlation convolutions have an ONNX form");
}

} // namespace

void registerConvOnnxExport(OnnxExportTable &t) {
  t.add("conv",
        {OpKind::Conv1d, OpKind::Conv2d, OpKind::ConvNd, OpKind::ConvTranspose2d,
         OpKind::ConvTransposeNd},
        exportConv);
  t.add("conv", {OpKind::Conv2dAct},
        [](ExportCall &c) { exportFusedActivation(c, OpKind::Conv2d); });
}

} // namespace tmg::io::onnxdetail
