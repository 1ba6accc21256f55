//===- resize.cpp - ONNX mapping of resizing --------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the resize family: Resize and
// Upsample as resize_nd: with their scales or sizes known at import time,
// to the output size resolved; with either read at run time, to that input;
// Resize with tf_crop_and_resize as a per-axis composition of take and
// interpolation (its roi may be read at run time).
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

/// Resize with coordinate_transformation_mode tf_crop_and_resize, composed
/// one axis after the other (roi and sizes may be read at run time). Along
/// axis d of input size n and output size m, output index o samples the
/// input at x = start * (n - 1) + o * (end - start) * (n - 1) / (m - 1)
/// (at (start + end) * (n - 1) / 2 when m is 1), with roi = (starts...,
/// ends...): the two neighbours (linear, weights from the fraction) or the
/// nearest by nearest_mode are taken (tensor.take); an output whose x lies
/// outside [0, n - 1] along some axis is extrapolation_value.
void importTfCropAndResize(NodeCx &c, const std::string &mode, const std::string &nearest) {
  if (c.opset < 11)
    c.fail("tf_crop_and_resize needs opset 11 or later");
  if (mode != "linear" && mode != "nearest")
    c.fail(fmt::format("mode '{}' with tf_crop_and_resize is not supported (linear, nearest)",
                       mode));
  if (!c.has(1))
    c.fail("tf_crop_and_resize needs the roi input");
  bool hasSizes = c.has(3) && (c.runtime(3) ? c.length(3) > 0 : c.cst(3).numel() > 0);
  if (!hasSizes)
    c.fail("tf_crop_and_resize is supported with sizes, not scales");
  const Shape &s = c.shape(0);
  int64_t r = int64_t(s.size());
  if (r == 0)
    c.fail("the input needs rank >= 1");
  if (c.length(1) != 2 * r)
    c.fail(fmt::format("roi must have {} values (starts and ends), got {}", 2 * r, c.length(1)));
  if (c.length(3) != r)
    c.fail("sizes need one entry per axis");
  std::optional<DType> dt = c.dtype(0);
  if (!dt || (*dt != DType::Float32 && *dt != DType::Float64))
    c.fail("tf_crop_and_resize needs a float32 or float64 input");
  Node *roi = c.astype(c.node(1), *dt);
  std::optional<std::vector<int64_t>> sizes;
  if (!c.runtime(3))
    sizes = c.ints(3);
  Node *y = c.node(0), *mask = nullptr;
  auto scalarAt = [&](Node *v, int64_t i) {
    return c.call("tensor.take", {v, c.constant(Tensor::fromInts({}, {i}))}, {{"axis", 0}});
  };
  for (int64_t d = 0; d < r; ++d) {
    double n1 = double(s[size_t(d)] - 1);
    Arg m = sizes ? Arg((*sizes)[size_t(d)]) : Arg(scalarAt(c.intsNode(3), d));
    Node *mf = sizes ? c.constant(Tensor::full({}, double((*sizes)[size_t(d)]), *dt))
                     : c.astype(scalarAt(c.intsNode(3), d), *dt);
    Node *start = scalarAt(roi, d), *end = scalarAt(roi, r + d);
    Node *o = c.call("tensor.arange", {int64_t(0), m, int64_t(1)},
                     {{"dtype", dtypeName(*dt).str()}});
    Node *span = c.call("elemwise.mul", {c.call("elemwise.sub", {end, start}), n1});
    Node *step = c.call("elemwise.div", {span, c.call("elemwise.sub", {mf, 1.0})});
    Node *x = c.call("elemwise.add",
                     {c.call("elemwise.mul", {start, n1}), c.call("elemwise.mul", {o, step})});
    Node *mid = c.call("elemwise.mul", {c.call("elemwise.add", {start, end}), 0.5 * n1});
    x = c.call("tensor.where", {c.call("elemwise.greater", {mf, 1.0}), x, mid});
    // Along axis d: unsqueezed (not reshaped with -1, which export needs
    // the size for) to broadcast against the other axes.
    std::vector<int64_t> others;
    for (int64_t i = 0; i < r; ++i)
      if (i != d)
        others.push_back(i);
    auto shaped = [&](Node *v) {
      return others.empty() ? v : c.call("tensor.expand_dims", {v, tupleOf(others)});
    };
    Node *inside = c.call("elemwise.logical_and", {c.call("elemwise.greater_equal", {x, 0.0}),
                                                   c.call("elemwise.less_equal", {x, n1})});
    inside = shaped(inside);
    mask = mask ? c.call("elemwise.logical_and", {mask, inside}) : inside;
    Node *xc = c.call("elemwise.clip", {x}, {{"lower", Arg(0.0)}, {"upper", Arg(n1)}});
    auto index = [&](Node *v) {
      return c.astype(c.call("elemwise.clip", {v}, {{"lower", Arg(0.0)}, {"upper", Arg(n1)}}),
                      DType::Int64);
    };
    if (mode == "nearest") {
      Node *i;
      if (nearest == "round_prefer_floor")
        i = c.call("elemwise.ceil", {c.call("elemwise.sub", {xc, 0.5})});
      else if (nearest == "round_prefer_ceil")
        i = c.call("elemwise.floor", {c.call("elemwise.add", {xc, 0.5})});
      else if (nearest == "floor")
        i = c.call("elemwise.floor", {xc});
      else if (nearest == "ceil")
        i = c.call("elemwise.ceil", {xc});
      else
        c.fail(fmt::format("unknown nearest_mode '{}'", nearest));
      y = c.call("tensor.take", {y, index(i)}, {{"axis", d}});
      continue;
    }
    Node *lo = c.call("elemwise.floor", {xc});
    Node *f = shaped(c.call("elemwise.sub", {xc, lo}));
    Node *a = c.call("tensor.take", {y, index(lo)}, {{"axis", d}});
    Node *b = c.call("tensor.take", {y, index(c.call("elemwise.add", {lo, 1.0}))}, {{"axis", d}});
    y = c.call("elemwise.add", {a, c.call("elemwise.mul", {c.call("elemwise.sub", {b, a}), f})});
  }
  Node *ext = c.constant(Tensor::full({}, c.af("extrapolation_value", 0.0), *dt));
  c.out(0, c.call("tensor.where", {mask, y, ext}));
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
    return importTfCropAndResize(c, mode, nearest);
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
