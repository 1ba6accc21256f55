//===- resize.cpp - ONNX mapping of resizing --------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the resize family: Resize and
// Upsample as resize_nd: with their scales or sizes known at import time,
// to the output size resolved; with either read at run time, to that input.
// GridSample as grid_sample; RoiAlign as roi_align on rois with their batch
// index as a first column.
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
  if (coord == "tf_crop_and_resize")
    c.fail("coordinate_transformation_mode 'tf_crop_and_resize' (roi and extrapolation_value) "
           "is not supported");
  ResizeTo to = resizeTo(c, upsample, r);
  c.out(0, c.call("nn.resize_nd", {c.node(0), to.size},
                  {{"scales", to.scales}, {"mode", mode},
                   {"coordinate_transformation_mode", coord},
                   {"nearest_mode", nearest},
                   {"cubic_coeff_a", c.af("cubic_coeff_a", -0.75)},
                   {"exclude_outside", bool(c.ai("exclude_outside", 0))}}));
}

/// RoiAlign: the batch indices joined to the boxes as MegEngine's rois.
void importRoiAlign(NodeCx &c) {
  if (c.as("mode", "avg") != "avg")
    c.fail(fmt::format("mode '{}' is not supported (only 'avg')", c.as("mode", "avg")));
  std::string ct = c.as("coordinate_transformation_mode",
                        c.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ct != "half_pixel" && ct != "output_half_pixel")
    c.fail(fmt::format("unknown coordinate_transformation_mode '{}'", ct));
  Node *bi = c.call("tensor.expand_dims", {c.astype(c.node(2), DType::Float32), 1});
  Node *boxes = c.dtype(1) == DType::Float32 ? c.node(1) : c.astype(c.node(1), DType::Float32);
  Node *rois = c.call("tensor.concat", {Arg::list({bi, boxes})}, {{"axis", 1}});
  int64_t sr = c.ai("sampling_ratio", 0);
  if (sr < 0)
    c.fail(fmt::format("sampling_ratio {} is negative", sr));
  c.out(0, c.call("vision.roi_align",
                  {c.node(0), rois, tupleOf({c.ai("output_height", 1), c.ai("output_width", 1)})},
                  {{"spatial_scale", c.af("spatial_scale", 1.0)},
                   {"sample_points", sr},
                   {"aligned", ct == "half_pixel"}}));
}

} // namespace

void registerResizeOnnxImport(OnnxImportTable &t) {
  t.add("RoiAlign", 10, kMaxOpset, importRoiAlign);
  t.add("Resize", 1, kMaxOpset, [](NodeCx &c) { importResize(c, false); });
  t.add("Upsample", 1, kMaxOpset, [](NodeCx &c) { importResize(c, true); });
  t.add("GridSample", 16, kMaxOpset, [](NodeCx &c) {
    std::string m = c.as("mode", "bilinear"), p = c.as("padding_mode", "zeros");
    if (m != "bilinear" && m != "nearest" && m != "bicubic")
      c.fail(fmt::format("unknown mode '{}'", m));
    if (p != "zeros" && p != "border" && p != "reflection")
      c.fail(fmt::format("unknown padding_mode '{}'", p));
    c.out(0, c.call("nn.grid_sample", {c.node(0), c.node(1)},
                    {{"mode", m}, {"padding_mode", p},
                     {"align_corners", bool(c.ai("align_corners", 0))}}));
  });
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

/// roi_align: RoiAlign on the boxes and the batch column as int64.
void exportRoiAlign(ExportCall &c) {
  if (c.string("mode") != "average")
    c.fail("mode 'max' has no ONNX form (ONNX's max mode is another computation)");
  std::vector<int64_t> o = c.intsN("output_shape", 2), sp = c.intsN("sample_points", 2);
  if (sp[0] != sp[1])
    c.fail("ONNX RoiAlign has one sampling_ratio for both axes");
  std::string r = c.operand("rois");
  std::string boxes = c.emit("Slice", {r, c.intsInit({1}, c.out + "_b0"),
                                       c.intsInit({5}, c.out + "_b1"),
                                       c.intsInit({1}, c.out + "_ax")}, c.out + "_boxes");
  std::string col = c.emit("Slice", {r, c.intsInit({0}, c.out + "_i0"),
                                     c.intsInit({1}, c.out + "_i1"),
                                     c.intsInit({1}, c.out + "_iax")}, c.out + "_col");
  col = c.emit("Squeeze", {col, c.intsInit({1}, c.out + "_sq")}, c.out + "_batch");
  c.simple("RoiAlign", {c.operand("inp"), boxes, c.cast(col, DType::Int64)});
  Exporter::attrI(c.n, "output_height", o[0]);
  Exporter::attrI(c.n, "output_width", o[1]);
  Exporter::attrI(c.n, "sampling_ratio", sp[0]);
  Exporter::attrF(c.n, "spatial_scale", c.number("spatial_scale"));
  Exporter::attrS(c.n, "coordinate_transformation_mode",
                  c.boolean("aligned") ? "half_pixel" : "output_half_pixel");
}

} // namespace

void registerResizeOnnxExport(OnnxExportTable &t) {
  t.add("resize", {OpKind::RoiAlign}, exportRoiAlign);
  t.add("resize", {OpKind::ResizeNd}, exportResize);
  t.add("resize", {OpKind::GridSample}, [](ExportCall &c) {
    c.simple("GridSample", {c.operand("inp"), c.operand("grid")});
    Exporter::attrS(c.n, "mode", c.string("mode"));
    Exporter::attrS(c.n, "padding_mode", c.string("padding_mode"));
    Exporter::attrI(c.n, "align_corners", c.boolean("align_corners"));
  });
}

} // namespace tmg::io::onnxdetail
