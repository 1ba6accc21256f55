//===- resize.cpp - Shape rules of the resize ops -------------------------===//
//
// Output types of the resize family: resize_nd to a constant full output
// size keeps its input's dtype; grid_sample gives (N, C) of its input and
// the grid's (Ho, Wo); roi_align (K, C, *output_shape) for K rois.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {
namespace {

Types resizeNd(const ShapeContext &c, OpKind) {
  auto x = c.first();
  auto sz = c.constArg("size");
  auto v = sz ? intsOf(*sz) : std::nullopt;
  if (!x)
    return std::nullopt;
  if (!v) // sizes or scales read at run time
    return c.one(std::nullopt, x->dtype);
  return c.one(Shape(v->begin(), v->end()), x->dtype);
}

Types gridSample(const ShapeContext &c, OpKind) {
  auto x = c.first(), g = c.operand(c.arg("grid"));
  if (!x || !g || !x->shape || !g->shape)
    return std::nullopt;
  const Shape &xs = *x->shape, &gs = *g->shape;
  if (xs.size() != 4 || gs.size() != 4 || gs[0] != xs[0] || gs[3] != 2)
    c.fail(fmt::format("input {} must be (N, C, H, W) and grid {} (N, Ho, Wo, 2)",
                       dim::dimsStr(xs), dim::dimsStr(gs)));
  return c.one(Shape{xs[0], xs[1], gs[1], gs[2]}, x->dtype);
}

Types roiAlign(const ShapeContext &c, OpKind) {
  auto x = c.first(), r = c.operand(c.arg("rois"));
  auto o = c.constArg("output_shape");
  auto hw = o ? pairOf(*o) : std::nullopt;
  if (!x || !r || !x->shape || !r->shape || !hw)
    return std::nullopt;
  const Shape &xs = *x->shape, &rs = *r->shape;
  if (xs.size() != 4 || rs.size() != 2 || rs[1] != 5)
    c.fail(fmt::format("input {} must be (N, C, H, W) and rois {} (K, 5)", dim::dimsStr(xs),
                       dim::dimsStr(rs)));
  return c.one(Shape{rs[0], xs[1], hw->first, hw->second}, x->dtype);
}

} // namespace

void registerResizeShapeRules(ShapeRuleTable &t) {
  t.add("resize", {OpKind::RoiAlign}, roiAlign);
  t.add("resize", {OpKind::GridSample}, gridSample);
  t.add("resize", {OpKind::ResizeNd}, symbolic(resizeNd));
}

} // namespace tmg::shapes
