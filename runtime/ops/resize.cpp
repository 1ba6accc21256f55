//===- resize.cpp - Lowering of the resize family ---------------*- C++ -*-===//
//
// interpolate (nearest or bilinear, to a size or by scale factors) and the
// N-d resize of ONNX import with its interpolation, coordinate
// transformation and nearest rounding modes.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

StepFn lowerInterpolate(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::string mode = a.string("mode");
  ResizeMode rm = mode == "nearest" ? ResizeMode::Nearest
                  : (mode == "bilinear" || mode == "linear") ? ResizeMode::Bilinear
                                                             : ResizeMode::Nearest;
  if (mode != "nearest" && mode != "bilinear" && mode != "linear")
    a.fail(fmt::format("unsupported interpolate mode '{}'", mode));
  bool align = !a.isNone("align_corners") && a.boolean("align_corners");
  uint32_t o = outSlot(e, ctx);
  if (!a.isNone("size")) {
    Int2 size = a.pair("size");
    return unaryStep(a.tensor("inp"), o, [size, rm, align](const Tensor &x) {
      return resize(x, size, rm, align);
    });
  }
  TreeDef f = a.constant("scale_factor");
  double fh, fw;
  if (f.isConst() && f.value().isNumber()) {
    fh = fw = f.value().toDouble();
  } else if (f.numChildren() == 2 && f.child(0).isConst() && f.child(1).isConst()) {
    fh = f.child(0).value().toDouble();
    fw = f.child(1).value().toDouble();
  } else {
    a.fail("interpolate needs size or scale_factor");
  }
  return unaryStep(a.tensor("inp"), o, [fh, fw, rm, align](const Tensor &x) {
    return upsample(x, fh, fw, rm, align);
  });
}

/// The modes of `resize_nd`, each from its string argument.
void resizeModes(const Args &a, ResizeParams &p) {
  std::string mode = a.string("mode"), coord = a.string("coordinate_transformation_mode"),
              nearest = a.string("nearest_mode");
  if (mode == "nearest") p.mode = ResizeInterp::Nearest;
  else if (mode == "linear") p.mode = ResizeInterp::Linear;
  else if (mode == "cubic") p.mode = ResizeInterp::Cubic;
  else a.fail(fmt::format("unsupported resize mode '{}'", mode));
  if (coord == "half_pixel") p.coord = ResizeCoord::HalfPixel;
  else if (coord == "pytorch_half_pixel") p.coord = ResizeCoord::PytorchHalfPixel;
  else if (coord == "align_corners") p.coord = ResizeCoord::AlignCorners;
  else if (coord == "asymmetric") p.coord = ResizeCoord::Asymmetric;
  else a.fail(fmt::format("unsupported coordinate_transformation_mode '{}'", coord));
  if (nearest == "round_prefer_floor") p.nearest = NearestRound::RoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p.nearest = NearestRound::RoundPreferCeil;
  else if (nearest == "floor") p.nearest = NearestRound::Floor;
  else if (nearest == "ceil") p.nearest = NearestRound::Ceil;
  else a.fail(fmt::format("unsupported nearest_mode '{}'", nearest));
}

StepFn lowerResizeNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> size = a.ints("size");
  ResizeParams p;
  resizeModes(a, p);
  p.cubicA = a.number("cubic_coeff_a");
  p.excludeOutside = a.boolean("exclude_outside");
  if (!a.isNone("scales")) {
    TreeDef t = a.constant("scales");
    for (size_t i = 0; i < t.numChildren(); ++i) {
      if (!t.child(i).isConst() || !t.child(i).value().isNumber())
        a.fail("'scales' must be numbers");
      p.scales.push_back(t.child(i).value().toDouble());
    }
  }
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [size, p](const Tensor &t) { return resizeNd(t, size, p); });
}

} // namespace

void registerResizeLowering(LowerTable &t) {
  t.add("resize", {OpKind::Interpolate}, lowerInterpolate);
  t.add("resize", {OpKind::ResizeNd}, lowerResizeNd);
}

} // namespace tmg::rt
