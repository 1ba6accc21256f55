//===- resize.cpp - ONNX mapping of resizing --------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the resize family: Resize and
// Upsample, with their scales or sizes known at import time, as resize_nd
// with the output size resolved.
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

void importResize(NodeCx &c, bool upsample) {
  const Shape &s = c.shape(0);
  int64_t r = int64_t(s.size());
  bool legacy = c.opset < 11 || upsample;
  std::string mode = c.as("mode", "nearest");
  std::string coord = c.as("coordinate_transformation_mode", legacy ? "asymmetric" : "half_pixel");
  std::string nearest = c.as("nearest_mode", legacy ? "floor" : "round_prefer_floor");
  if (mode == "bilinear" || mode == "trilinear")
    mode = "linear";
  if (coord == "tf_crop_and_resize" || coord == "tf_half_pixel_for_nn")
    c.fail(fmt::format("coordinate_transformation_mode '{}' is not supported", coord));
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
  c.out(0, c.call("nn.resize_nd", {c.node(0), tupleOf(sizes)},
                  {{"scales", sc}, {"mode", mode},
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
  std::vector<int64_t> size = c.ints("size");
  std::string x = c.operand("inp");
  if (!c.isNone("scales")) {
    TreeDef t = c.constant("scales");
    std::vector<float> s;
    for (size_t i = 0; i < t.numChildren(); ++i)
      s.push_back(float(t.child(i).value().toDouble()));
    c.simple("Resize",
             {x, "", c.init(Tensor::fromFloats({int64_t(s.size())}, s), c.out + "_scales")});
  } else {
    c.simple("Resize", {x, "", "", c.intsInit(size, c.out + "_sizes")});
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
