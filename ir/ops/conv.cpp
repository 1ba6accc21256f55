//===- conv.cpp - Shape rules of the convolutions -------------------------===//
//
// Output types of the conv family: 1-d and 2-d convolutions (plain, fused
// with an activation, transposed) with MegEngine-style symmetric padding,
// and the N-d convolutions with ONNX-style paddings. convShape is shared
// with the Conv2d and ConvTranspose2d modules.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

Types convShape(const ShapeContext &c, const std::optional<Operand> &x,
                const std::optional<Operand> &w, size_t spatial, TreeDef stride,
                TreeDef pad, TreeDef dil, int64_t groups, bool transposed,
                TreeDef outPad) {
  if (!x || !w || !x->shape || !w->shape)
    return std::nullopt;
  const Shape &xs = *x->shape, &ws = *w->shape;
  if (xs.size() != spatial + 2 || ws.size() != spatial + 2)
    c.fail(fmt::format("input {} and weight {} must have rank {}", dim::dimsStr(xs),
                       dim::dimsStr(ws), spatial + 2));
  if (groups <= 0)
    c.fail(fmt::format("groups must be positive, got {}", groups));
  if (!isStaticShape(ws)) // a weight computed at run time
    return c.one(std::nullopt, x->dtype);
  // A transposed weight is (in, out / groups, ...), a plain one (out, in / groups, ...).
  int64_t inC = transposed ? ws[0] : dim::mul(ws[1], groups);
  c.checkDim(xs[1], inC,
             fmt::format("input {} has {} channels but weight {} expects {}",
                         dim::dimsStr(xs), dim::str(xs[1]), dim::dimsStr(ws), dim::str(inC)));
  auto st = intsOf(stride), pd = intsOf(pad), dl = intsOf(dil),
       op = intsOf(outPad);
  if (!st || !pd || !dl || !op)
    return std::nullopt;
  auto at = [&](const std::vector<int64_t> &v, size_t i) {
    return v.size() == 1 ? v[0] : v.at(i);
  };
  Shape out = {xs[0], transposed ? dim::mul(ws[1], groups) : ws[0]};
  for (size_t i = 0; i < spatial; ++i) {
    if ((st->size() != 1 && st->size() != spatial) ||
        (pd->size() != 1 && pd->size() != spatial) ||
        (dl->size() != 1 && dl->size() != spatial))
      c.fail(
          "stride, padding and dilation need 1 or one value per spatial dim");
    int64_t k = ws[2 + i];
    if (transposed)
      out.push_back(dim::offset(dim::mul(dim::offset(xs[2 + i], -1), at(*st, i)),
                                -2 * at(*pd, i) + at(*dl, i) * (k - 1) + at(*op, i) + 1));
    else
      out.push_back(
          c.window(xs[2 + i], k, at(*st, i), at(*pd, i), at(*dl, i), "conv"));
  }
  return c.one(out, x->dtype);
}

namespace {

/// conv1d, conv2d, conv2d_act and conv_transpose2d.
Types conv(const ShapeContext &c, OpKind k) {
  auto g = c.constArg("groups");
  auto gi = g ? intOf(*g) : std::nullopt;
  auto s = c.constArg("stride"), p = c.constArg("padding"),
       d = c.constArg("dilation");
  if (!gi || !s || !p || !d)
    return std::nullopt;
  bool tr = k == OpKind::ConvTranspose2d;
  TreeDef op =
      tr ? c.constArg("output_padding").value_or(TreeDef::constant(Scalar(0)))
         : TreeDef::constant(Scalar(0));
  return convShape(c, c.operand(c.arg("inp")), c.operand(c.arg("weight")),
                   k == OpKind::Conv1d ? 1 : 2, *s, *p, *d, *gi, tr, op);
}

} // namespace

void registerConvShapeRules(ShapeRuleTable &t) {
  t.add("conv",
        {OpKind::Conv1d, OpKind::Conv2d, OpKind::Conv2dAct,
         OpKind::ConvTranspose2d},
        symbolic(conv));
  t.add("conv", {OpKind::ConvNd, OpKind::ConvTransposeNd}, symbolic(windowNdShape));
}

} // namespace tmg::shapes
