//===- resize.cpp - ONNX mapping of resizing --------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the resize family: Resize and
// Upsample as resize_nd: with their scales or sizes known at import time,
// to the output size resolved; with either read at run time, to that input.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {
namespace {

/// The scales or sizes of a Resize or Upsample, by opset.
void resizeTargets(NodeCx &c, bool upsample, std::vector<double> &scales,
                   std::vector<int64_t> &sizes) {
  if (upsample) {
    if (c.opset < 9)
      scales = c.afs("scales").value_or(std::vector<double>{});
    else
      scales = c.floats(1);
  } else if (c.opset < 11) {
    scales = c.floats(1);
  } else {
    if (c.has(3) && c.cst(3).numel())
      sizes = c.ints(3);
    else if (c.has(2))
      scales = c.floats(2);
  }
}

/// The input holding the sizes (`second` true) or scales of a Resize or
/// Upsample when it is known only at run time.
std::optional<std::pair<size_t, bool>> runtimeTarget(NodeCx &c, bool upsample) {
  if (upsample && c.opset < 9)
    return std::nullopt;
  bool newForm = !upsample && c.opset >= 11;
  if (newForm && c.has(3) && (c.runtime(3) ? c.length(3) > 0 : c.cst(3).numel() > 0))
    return c.runtime(3) ? std::optional(std::pair<size_t, bool>(3, true)) : std::nullopt;
  size_t si = newForm ? 2 : 1;
  if (c.runtime(si))
    return std::pair<size_t, bool>(si, false);
  return std::nullopt;
}

/// Resize to sizes, or by scales, given as a node (`target`) or as
/// constants (`sizes`, with the constant `scales` when given).
struct ResizeTo {
  Arg size, scales;
};

ResizeTo resizeTo(NodeCx &c, bool upsample, int64_t r) {
  if (auto t = runtimeTarget(c, upsample)) {
    if (c.length(t->first) != r)
      c.fail(fmt::format("{} need one entry per axis", t->second ? "sizes" : "scales"));
    if (t->second)
      return {c.intsNode(t->first), Arg::none()};
    return {Arg::none(), c.node(t->first)};
  }
  const Shape &s = c.shape(0);
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  resizeTargets(c, upsample, scales, sizes);
  if (sizes.empty()) {
    if (int64_t(scales.size()) != r)
      c.fail("scales need one entry per axis");
    for (int64_t i = 0; i < r; ++i)
      sizes.push_back(int64_t(std::floor(s[i] * scales[i] + 1e-9)));
  }
  if (int64_t(sizes.size()) != r)
    c.fail("sizes need one entry per axis");
  Arg sc = Arg::none();
  if (!scales.empty()) {
    std::vector<Arg> v;
    for (double x : scales)
      v.push_back(x);
    sc = Arg::tuple(v);
  }
  return {tupleOf(sizes), sc};
}

void importResize(NodeCx &c, bool upsample) {
  int64_t r = c.rank(0);
  bool legacy = c.opset < 11 || upsample;
  std::string mode = c.as("mode", "nearest");
  std::string coord = c.as("coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel");
  std::string nearest = c.as("nearest_mode", legacy ? "floor" : "round_prefer_floor");
  if (mode == "bilinear" || mode == "trilinear")
    mode = "linear";
  if (coord == "tf_crop_and_resize" || coord == "tf_half_pixel_for_nn")
    c.fail(fmt::format("coordinate_transformation_mode '{}' is not supported", coord));
  ResizeTo to = resizeTo(c, upsample, r);
  c.out(0, c.call("nn.resize_nd", {c.node(0), to.size},
                  {{"scales", to.scales}, {"mode", mode},
                   {"coordinate_transformation_mode", coord},
                   {"nearest_mode", nearest},
                   {"cubic_coeff_a", c.af("cubic_coeff_a", -0.75)},
                   {"exclude_outside", bool(c.ai("exclude_outside", 0))}}));
}

} // namespace

void registerResizeOnnxImport(OnnxImportTable &t) {
  t.add("Resize", 1, kMaxOpset, [](NodeCx &c) { importResize(c, false); });
  t.add("Upsample", 1, kMaxOpset, [](NodeCx &c) { importResize(c, true); });
}

// -- Export -------------------------------------------------------------------

namespace {

void exportResize(ExportCall &c) {
  std::string x = c.operand("inp");
  auto sz = c.e.namedArg("size"), sc = c.e.namedArg("scales");
  if (sc && sc->node()) {
    c.simple("Resize", {x, "", c.operand("scales", DType::Float32)});
  } else if (sz && sz->node()) {
    c.simple("Resize", {x, "", "", c.operand("size", DType::Int64)});
  } else if (!c.isNone("scales")) {
    TreeDef t = c.constant("scales");
    std::vector<float> s;
    for (size_t i = 0; i < t.numChildren(); ++i)
      s.push_back(float(t.child(i).value().toDouble()));
    c.simple("Resize",
             {x, "", c.init(Tensor::fromFloats({int64_t(s.size())}, s), c.out + "_scales")});
  } else {
    c.simple("Resize", {x, "", "", c.intsInit(c.ints("size"), c.out + "_sizes")});
  }
  onnx::NodeProto *n = c.n;
  Exporter::attrS(n, "mode", c.string("mode"));
  Exporter::attrS(n, "coordinate_transformation_mode", c.string("coordinate_transformation_mode"));
  Exporter::attrS(n, "nearest_mode", c.string("nearest_mode"));
  Exporter::attrF(n, "cubic_coeff_a", c.number("cubic_coeff_a"));
  Exporter::attrI(n, "exclude_outside", c.boolean("exclude_outside"));
}

} // namespace

void registerResizeOnnxExport(OnnxExportTable &t) {
  t.add("resize", {OpKind::ResizeNd}, exportResize);
}

} // namespace tmg::io::onnxdetail
