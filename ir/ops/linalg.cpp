//===- linalg.cpp - Shape rules of linear and matmul ----------------------===//
//
// Output types of the linalg family: linear (plain and fused with an
// activation) and matmul with NumPy batch broadcasting, vector operands and
// transposed operands.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {
namespace {

Types matmulShape(const ShapeContext &c, const std::optional<Operand> &a,
                  const std::optional<Operand> &b, bool ta, bool tb) {
  if (!a || !b || !a->shape || !b->shape)
    return std::nullopt;
  Shape x = *a->shape, y = *b->shape;
  if (x.empty() || y.empty())
    c.fail("operands must have rank >= 1");
  bool vx = x.size() == 1, vy = y.size() == 1;
  if (vx)
    x.insert(x.begin(), 1);
  if (vy)
    y.push_back(1);
  if (ta)
    std::swap(x[x.size() - 1], x[x.size() - 2]);
  if (tb)
    std::swap(y[y.size() - 1], y[y.size() - 2]);
  if (x.back() != y[y.size() - 2])
    c.fail(fmt::format("{} @ {}: inner dimensions {} and {} differ",
                       shapeStr(*a->shape), shapeStr(*b->shape), x.back(),
                       y[y.size() - 2]));
  auto batch = broadcastShapes(llvm::ArrayRef<int64_t>(x).drop_back(2),
                               llvm::ArrayRef<int64_t>(y).drop_back(2));
  if (!batch)
    c.fail(fmt::format("batch dimensions of {} and {} do not broadcast",
                       shapeStr(*a->shape), shapeStr(*b->shape)));
  Shape out = *batch;
  if (!vx)
    out.push_back(x[x.size() - 2]);
  if (!vy)
    out.push_back(y.back());
  return c.one(out, a->dtype);
}

/// linear and linear_act: the last dim of inp becomes weight's out dim.
Types linear(const ShapeContext &c, OpKind) {
  auto x = c.operand(c.arg("inp")), w = c.operand(c.arg("weight"));
  if (!x || !w || !x->shape || !w->shape)
    return std::nullopt;
  if (w->shape->size() != 2 || x->shape->empty() ||
      x->shape->back() != (*w->shape)[1])
    c.fail(fmt::format("input {} does not fit weight {} (out, in)",
                       shapeStr(*x->shape), shapeStr(*w->shape)));
  Shape out = *x->shape;
  out.back() = (*w->shape)[0];
  return c.one(out, x->dtype);
}

Types matmul(const ShapeContext &c, OpKind) {
  auto ta = c.constArg("transpose_a"), tb = c.constArg("transpose_b");
  bool a = ta && ta->isConst() && ta->value().isBool() && ta->value().getBool();
  bool b = tb && tb->isConst() && tb->value().isBool() && tb->value().getBool();
  return matmulShape(c, c.operand(c.arg("inp1")), c.operand(c.arg("inp2")), a,
                     b);
}

/// x @ y.
Types matmulMethod(const ShapeContext &c, OpKind) {
  return matmulShape(c, c.operand(c.arg("self")), c.operand(c.arg("value")),
                     false, false);
}

} // namespace

void registerLinalgShapeRules(ShapeRuleTable &t) {
  t.add("linalg", {OpKind::Linear, OpKind::LinearAct}, linear);
  t.add("linalg", {OpKind::Matmul}, matmul);
  t.add("linalg", {OpKind::MMatmul}, matmulMethod);
}

} // namespace tmg::shapes
