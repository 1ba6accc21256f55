//===- pool.cpp - Shape rules of the pooling ops --------------------------===//
//
// Output types of the pool family: 2-d max and average pooling, adaptive
// pooling to a given size, and the N-d pools with ONNX-style paddings.
// poolShape is shared with the MaxPool2d and AvgPool2d modules.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

Types poolShape(const ShapeContext &c, const std::optional<Operand> &x,
                TreeDef kernel, TreeDef stride, TreeDef pad) {
  if (!x || !x->shape)
    return std::nullopt;
  const Shape &xs = *x->shape;
  if (xs.size() != 4)
    c.fail(fmt::format("input {} must be NCHW", shapeStr(xs)));
  auto k = pairOf(kernel);
  auto s = isNoneDef(stride) ? k : pairOf(stride);
  auto p = pairOf(pad);
  if (!k || !s || !p)
    return std::nullopt;
  return c.one(
      Shape{xs[0], xs[1],
            c.window(xs[2], k->first, s->first, p->first, 1, "pool"),
            c.window(xs[3], k->second, s->second, p->second, 1, "pool")},
      x->dtype);
}

namespace {

/// max_pool2d and avg_pool2d.
Types pool2d(const ShapeContext &c, OpKind) {
  auto kk = c.constArg("kernel_size"), s = c.constArg("stride"),
       p = c.constArg("padding");
  if (!kk || !s || !p)
    return std::nullopt;
  return poolShape(c, c.operand(c.arg("inp")), *kk, *s, *p);
}

/// adaptive_avg_pool2d and adaptive_max_pool2d: NCHW to N, C, oshp.
Types adaptivePool2d(const ShapeContext &c, OpKind) {
  auto x = c.operand(c.arg("inp"));
  auto o = c.constArg("oshp");
  auto pr = o ? pairOf(*o) : std::nullopt;
  if (!x || !x->shape || !pr)
    return std::nullopt;
  if (x->shape->size() != 4)
    c.fail(fmt::format("input {} must be NCHW", shapeStr(*x->shape)));
  return c.one(Shape{(*x->shape)[0], (*x->shape)[1], pr->first, pr->second},
               x->dtype);
}

} // namespace

void registerPoolShapeRules(ShapeRuleTable &t) {
  t.add("pool", {OpKind::MaxPool2d, OpKind::AvgPool2d}, pool2d);
  t.add("pool", {OpKind::AdaptiveAvgPool2d, OpKind::AdaptiveMaxPool2d},
        adaptivePool2d);
  t.add("pool", {OpKind::MaxPoolNd, OpKind::AvgPoolNd}, windowNdShape);
}

} // namespace tmg::shapes
