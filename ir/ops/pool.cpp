//===- pool.cpp - Shape rules of the pooling ops --------------------------===//
//
// Output types of the pool family: 2-d max and average pooling, adaptive
// pooling to a given size, the N-d pools with ONNX-style paddings and
// max_unpool_nd.
// poolShape is shared with the MaxPool2d and AvgPool2d modules,
// adaptivePoolShape with AdaptiveAvgPool2d.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

Types adaptivePoolShape(const ShapeContext &c, const std::optional<Operand> &x,
                        const TreeDef &oshp) {
  auto pr = pairOf(oshp);
  if (!x || !x->shape || !pr)
    return std::nullopt;
  if (x->shape->size() != 4)
    c.fail(fmt::format("input {} must be NCHW", dim::dimsStr(*x->shape)));
  return c.one(Shape{(*x->shape)[0], (*x->shape)[1], pr->first, pr->second}, x->dtype);
}

Types poolShape(const ShapeContext &c, const std::optional<Operand> &x,
                TreeDef kernel, TreeDef stride, TreeDef pad) {
  if (!x || !x->shape)
    return std::nullopt;
  const Shape &xs = *x->shape;
  if (xs.size() != 4)
    c.fail(fmt::format("input {} must be NCHW", dim::dimsStr(xs)));
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
  auto o = c.constArg("oshp");
  return o ? adaptivePoolShape(c, c.operand(c.arg("inp")), *o) : std::nullopt;
}

/// `name` as n ints (an int or n of them; `dflt` when None).
std::optional<std::vector<int64_t>> intsN(const ShapeContext &c, const char *name, size_t n,
                                          std::optional<std::vector<int64_t>> dflt) {
  auto t = c.constArg(name);
  if (!t)
    return std::nullopt;
  if (isNoneDef(*t))
    return dflt;
  auto v = intsOf(*t);
  if (v && v->size() == 1)
    v->assign(n, (*v)[0]);
  return v && v->size() == n ? v : std::nullopt;
}

/// max_unpool_nd: (N, C, *output_size), or the size pooling came from.
Types maxUnpool(const ShapeContext &c, OpKind) {
  auto x = c.first();
  if (!x || !x->shape || x->shape->size() < 3)
    return std::nullopt;
  const Shape &xs = *x->shape;
  size_t nd = xs.size() - 2;
  Shape out(xs.begin(), xs.begin() + 2);
  if (auto o = intsN(c, "output_size", nd, std::nullopt)) {
    out.append(o->begin(), o->end());
    return c.one(out, x->dtype);
  }
  auto k = intsN(c, "kernel_size", nd, std::nullopt);
  auto st = intsN(c, "stride", nd, k);
  auto pd = intsN(c, "padding", 2 * nd, std::nullopt);
  if (!pd)
    if ((pd = intsN(c, "padding", nd, std::nullopt)))
      pd->insert(pd->end(), pd->begin(), pd->end());
  if (!k || !st || !pd)
    return std::nullopt;
  for (size_t i = 0; i < nd; ++i)
    out.push_back((xs[i + 2] - 1) * (*st)[i] + (*k)[i] - (*pd)[i] - (*pd)[i + nd]);
  return c.one(out, x->dtype);
}

} // namespace

void registerPoolShapeRules(ShapeRuleTable &t) {
  t.add("pool", {OpKind::MaxPool2d, OpKind::AvgPool2d}, symbolic(pool2d));
  t.add("pool", {OpKind::AdaptiveAvgPool2d, OpKind::AdaptiveMaxPool2d},
        symbolic(adaptivePool2d));
  t.add("pool", {OpKind::MaxPoolNd, OpKind::AvgPoolNd}, symbolic(windowNdShape));
  t.add("pool", {OpKind::MaxUnpoolNd}, maxUnpool);
}

} // namespace tmg::shapes
