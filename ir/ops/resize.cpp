//===- resize.cpp - Shape rules of the resize ops -------------------------===//
//
// Output types of the resize family: resize_nd to a constant full output
// size keeps its input's dtype.
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

} // namespace

void registerResizeShapeRules(ShapeRuleTable &t) {
  t.add("resize", {OpKind::ResizeNd}, resizeNd);
}

} // namespace tmg::shapes
