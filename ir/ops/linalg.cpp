//===- linalg.cpp - Shape rules of linear and matmul ----------------------===//
//
// Output types of the linalg family: linear (plain and fused with an
// activation) and matmul with NumPy batch broadcasting, vector operands and
// transposed operands; einsum from its equation; det drops the matrix axes;
// scaled dot-product attention.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <llvm/ADT/STLExtras.h>

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
  c.checkDim(x.back(), y[y.size() - 2],
             fmt::format("{} @ {}: inner dimensions {} and {} differ",
                         dim::dimsStr(*a->shape), dim::dimsStr(*b->shape), x.back(),
                         y[y.size() - 2]));
  auto batch = broadcastShapes(llvm::ArrayRef<int64_t>(x).drop_back(2),
                               llvm::ArrayRef<int64_t>(y).drop_back(2));
  if (!batch)
    c.fail(fmt::format("batch dimensions of {} and {} do not broadcast",
                       dim::dimsStr(*a->shape), dim::dimsStr(*b->shape)));
  Shape out = *batch;
  if (!vx)
    out.push_back(x[x.size() - 2]);
  if (!vy)
    out.push_back(y.back());
  return c.one(out, a->dtype && b->dtype ? std::optional<DType>(promote(*a, *b))
                                         : a->dtype);
}

/// linear and linear_act: the last dim of inp becomes weight's out dim.
Types linear(const ShapeContext &c, OpKind) {
  auto x = c.operand(c.arg("inp")), w = c.operand(c.arg("weight"));
  if (!x || !w || !x->shape || !w->shape)
    return std::nullopt;
  if (w->shape->size() != 2 || x->shape->empty())
    c.fail(fmt::format("input {} does not fit weight {} (out, in)",
                       dim::dimsStr(*x->shape), dim::dimsStr(*w->shape)));
  c.checkDim(x->shape->back(), (*w->shape)[1],
             fmt::format("input {} does not fit weight {} (out, in)",
                         dim::dimsStr(*x->shape), dim::dimsStr(*w->shape)));
  Shape out = *x->shape;
  out.back() = (*w->shape)[0];
  return c.one(out, x->dtype && w->dtype ? std::optional<DType>(promote(*x, *w))
                                         : x->dtype);
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

/// The size of each axis of an einsum term: letters by label, "..." by
/// the broadcast shape of the axes it stands for (`ell`).
bool einsumSizes(const ShapeContext &c, llvm::StringRef term, const Shape &s,
                 std::map<char, int64_t> &sizes, Shape &ell) {
  int64_t letters = llvm::count_if(term, [](char ch) { return std::isalpha(ch); });
  int64_t ne = int64_t(s.size()) - letters;
  if (ne < 0 || (ne && !term.contains("...")))
    c.fail(fmt::format("term '{}' does not fit operand {}", term.str(), dim::dimsStr(s)));
  if (ne) {
    auto b = broadcastShapes(ell, llvm::ArrayRef<int64_t>(s).slice(term.find("..."), size_t(ne)));
    if (!b)
      c.fail(fmt::format("the '...' axes of {} do not broadcast", dim::dimsStr(s)));
    ell = *b;
  }
  size_t d = 0;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term.substr(i).startswith("...")) {
      d += size_t(ne);
      i += 2;
      continue;
    }
    if (!std::isalpha(term[i]) || d >= s.size())
      return false;
    int64_t &v = sizes.try_emplace(term[i], s[d]).first->second;
    v = v == 1 ? s[d] : v;
    ++d;
  }
  return true;
}

Types einsum(const ShapeContext &c, OpKind) {
  auto eqd = c.constArg("equation");
  auto xs = c.listOperands("operands");
  if (!eqd || !eqd->isConst() || !eqd->value().isString() || !xs || xs->empty())
    return std::nullopt;
  std::string eq = eqd->value().getString();
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  auto [lhs, rhs] = llvm::StringRef(eq).split("->");
  llvm::SmallVector<llvm::StringRef, 4> terms;
  lhs.split(terms, ',');
  if (terms.size() != xs->size())
    c.fail(fmt::format("equation '{}' has {} operands, got {}", eq, terms.size(), xs->size()));
  std::map<char, int64_t> sizes, count;
  Shape ell;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (!(*xs)[i].shape)
      return c.one(std::nullopt, (*xs)[0].dtype);
    if (!einsumSizes(c, terms[i], *(*xs)[i].shape, sizes, ell))
      c.fail(fmt::format("equation '{}' is not an einsum equation", eq));
    for (char ch : terms[i])
      count[ch] += std::isalpha(ch) ? 1 : 0;
  }
  std::string out = rhs.str();
  if (!llvm::StringRef(eq).contains("->")) {
    out = "...";
    for (auto [ch, n] : count)
      if (n == 1)
        out += ch;
  }
  std::optional<DType> dt = (*xs)[0].dtype;
  for (const Operand &x : *xs)
    dt = dt && x.dtype ? std::optional<DType>(promoteTypes(*dt, *x.dtype)) : std::nullopt;
  Shape shape;
  for (size_t i = 0; i < out.size(); ++i) {
    if (llvm::StringRef(out).substr(i).startswith("...")) {
      shape.append(ell.begin(), ell.end());
      i += 2;
    } else if (!sizes.count(out[i])) {
      c.fail(fmt::format("output label '{}' is in no operand of '{}'", out[i], eq));
    } else {
      shape.push_back(sizes[out[i]]);
    }
  }
  return c.one(shape, dt);
}

/// scaled_dot_product_attention: query (..., L, E), key (..., S, E),
/// value (..., S, Ev) -> (..., L, Ev), the batch dimensions broadcast.
Types attention(const ShapeContext &c, OpKind) {
  auto q = c.operand(c.arg("query")), k = c.operand(c.arg("key")),
       v = c.operand(c.arg("value"));
  if (!q || !k || !v || !q->shape || !k->shape || !v->shape)
    return std::nullopt;
  const Shape &qs = *q->shape, &ks = *k->shape, &vs = *v->shape;
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2)
    c.fail(fmt::format(
        "query {}, key {} and value {} must have at least 2 dimensions",
        dim::dimsStr(qs), dim::dimsStr(ks), dim::dimsStr(vs)));
  c.checkDim(qs.back(), ks.back(),
             fmt::format("query {} and key {} have different feature sizes",
                         dim::dimsStr(qs), dim::dimsStr(ks)));
  c.checkDim(ks[ks.size() - 2], vs[vs.size() - 2],
             fmt::format("key {} and value {} have different numbers of keys",
                         dim::dimsStr(ks), dim::dimsStr(vs)));
  auto qk = broadcastShapes(llvm::ArrayRef<int64_t>(qs).drop_back(2),
                            llvm::ArrayRef<int64_t>(ks).drop_back(2));
  auto batch =
      qk ? broadcastShapes(*qk, llvm::ArrayRef<int64_t>(vs).drop_back(2))
         : std::nullopt;
  if (!batch)
    c.fail(fmt::format("batch dimensions of {}, {} and {} do not broadcast",
                       dim::dimsStr(qs), dim::dimsStr(ks), dim::dimsStr(vs)));
  Shape out = *batch;
  out.push_back(qs[qs.size() - 2]);
  out.push_back(vs.back());
  return c.one(out, q->dtype);
}

Types det(const ShapeContext &c, OpKind) {
  auto x = c.first();
  if (!x || !x->shape)
    return std::nullopt;
  const Shape &s = *x->shape;
  if (s.size() < 2 || s[s.size() - 1] != s[s.size() - 2])
    c.fail(fmt::format("input {} does not hold square matrices", dim::dimsStr(s)));
  return c.one(Shape(s.begin(), s.end() - 2), x->dtype);
}

} // namespace

void registerLinalgShapeRules(ShapeRuleTable &t) {
  t.add("linalg", {OpKind::Linear, OpKind::LinearAct}, symbolic(linear));
  t.add("linalg", {OpKind::Matmul}, symbolic(matmul));
  t.add("linalg", {OpKind::MMatmul}, symbolic(matmulMethod));
  t.add("linalg", {OpKind::Einsum}, einsum);
  t.add("linalg", {OpKind::Det}, det);
  t.add("linalg", {OpKind::ScaledDotProductAttention}, symbolic(attention));
}

} // namespace tmg::shapes
