//===- Canonicalize.cpp - Local simplifications as patterns ---------------===//
//
// Each rule is a matcher pattern run by the greedy driver (dead exprs are
// erased by the driver):
//   Identity module call, Dropout module call (inference), F.dropout with
//   training=False, F.copy, x.detach(), x.__pos__()            => x
//   reshape/flatten (function or method) of a reshape/flatten  => one reshape
//     of the innermost input (the outer call keeps its target shape)
//   transpose(transpose(x, p1), p2)                            => transpose(x,
//     p1[p2]) or x when that is the identity
//   x.astype(t) when x already has dtype t                     => x
//   x + 0, x - 0, x * 1, x / 1 (x float32 of known shape, literal scalar) => x
//   neg(neg(x)), -(-x)                                         => x
//   relu(relu(x)), relu6(relu6(x))                             => the inner one
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include "tm/matcher/Driver.h"

namespace tmg {

namespace {

using namespace pat;

LogicalResult forward(const Match &m, Rewriter &rw, llvm::StringRef to) {
  return rw.replaceAllUsesWith(m.rootExpr()->output(0), m.node(to));
}

std::optional<std::vector<int64_t>> intsOf(const TreeDef *t) {
  if (!t)
    return std::nullopt;
  std::vector<int64_t> out;
  if (t->isConst()) {
    if (!t->value().isInt())
      return std::nullopt;
    out.push_back(t->value().getInt());
    return out;
  }
  for (size_t i = 0; i < t->numChildren(); ++i) {
    const TreeDef &c = t->child(i);
    if (!c.isConst() || !c.value().isInt())
      return std::nullopt;
    out.push_back(c.value().getInt());
  }
  return out;
}

bool isFloatTensor(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  return t && t->hasDType() && t->dtype() == DType::Float32 && t->shape();
}

} // namespace

void CanonicalizePass::populate(PatternSet &set) const {
  Pat anyX = any("x");
  // -- identities -----------------------------------------------------------
  set.add("identity-module", Pattern(module<Identity>()(any("x"))),
          [](const Match &m, Rewriter &rw) { return forward(m, rw, "x"); });
  set.add("dropout-module", Pattern(module<Dropout>()(any("x"))),
          [](const Match &m, Rewriter &rw) -> LogicalResult {
            Module *d = xf::calledModule(m.rootExpr());
            if (const TreeDef *t = d ? d->value("training") : nullptr)
              if (t->isConst() && t->value().isBool() && t->value().getBool())
                return failure();
            return forward(m, rw, "x");
          });
  set.add("dropout-eval", Pattern(fn("dropout")(any("x")).prefix().kwarg("training", false)),
          [](const Match &m, Rewriter &rw) { return forward(m, rw, "x"); });
  set.add("copy", Pattern(fn("copy")(any("x"))),
          [](const Match &m, Rewriter &rw) { return forward(m, rw, "x"); });
  set.add("detach", Pattern(method("detach")(anyX) | method("__pos__")(anyX)),
          [](const Match &m, Rewriter &rw) { return forward(m, rw, "x"); });
  set.add("astype-same",
          Pattern(method("astype")(any("x"), lit().bind("t"))),
          [](const Match &m, Rewriter &rw) -> LogicalResult {
            auto *x = llvm::dyn_cast<TensorNode>(m.node("x"));
            const TreeDef *t = m.literal("t");
            if (!x || !x->hasDType() || !t || !t->isConst() || !t->value().isString() ||
                t->value().getString() != dtypeName(x->dtype()).str())
              return failure();
            return forward(m, rw, "x");
          });
  // -- arithmetic identities ------------------------------------------------------
  auto neutral = [&](const char *name, const OpSchema &s, double v) {
    set.add(name, Pattern(op(s)(any("x"), lit().bind("c")).ordered()),
            [v](const Match &m, Rewriter &rw) -> LogicalResult {
              const TreeDef *c = m.literal("c");
              if (!c || !c->isConst() || !c->value().isNumber() ||
                  c->value().toDouble() != v || !isFloatTensor(m.node("x")))
                return failure();
              return forward(m, rw, "x");
            });
  };
  neutral("add-zero", tmg::op(OpKind::MAdd), 0);
  neutral("sub-zero", tmg::op(OpKind::MSub), 0);
  neutral("mul-one", tmg::op(OpKind::MMul), 1);
  neutral("div-one", tmg::op(OpKind::MTrueDiv), 1);
  neutral("fadd-zero", tmg::op(OpKind::Add), 0);
  neutral("fmul-one", tmg::op(OpKind::Mul), 1);
  // -- involutions and idempotent ops -------------------------------------------------
  set.add("neg-neg",
          Pattern(fn("neg")(fn("neg")(anyX).checkUsers(false)) |
                  method("__neg__")(method("__neg__")(anyX).checkUsers(false))),
          [](const Match &m, Rewriter &rw) { return forward(m, rw, "x"); });
  for (const char *f : {"relu", "relu6"})
    set.add(std::string(f) + "-" + f,
            Pattern(fn(f)(fn(f)(any()).bind("inner").checkUsers(false))),
            [](const Match &m, Rewriter &rw) { return forward(m, rw, "inner"); });
  // -- shape chains ---------------------------------------------------------------------
  // The inner op may be any reshape or flatten (the element order is kept);
  // the outer one must not depend on its input's shape beyond the element
  // count: a reshape, or a flatten of all axes.
  Pat inner = (fn("reshape")(anyX).prefix() | method("reshape")(anyX).prefix() |
               fn("flatten")(anyX).prefix() | method("flatten")(anyX))
                  .checkUsers(false);
  Pat outer = fn("reshape")(inner).prefix() | method("reshape")(inner).prefix() |
              fn("flatten")(inner).kwarg("start_axis", 0).kwarg("end_axis", -1) |
              method("flatten")(inner);
  set.add("reshape-reshape", Pattern(outer), [](const Match &m, Rewriter &rw) -> LogicalResult {
    rw.setInput(m.rootExpr(), 0, m.node("x"));
    return success();
  });
  set.add("transpose-transpose",
          Pattern(fn("transpose")(fn("transpose")(any("x"), lit().bind("p1")).checkUsers(false),
                                  lit().bind("p2"))),
          [](const Match &m, Rewriter &rw) -> LogicalResult {
            auto p1 = intsOf(m.literal("p1")), p2 = intsOf(m.literal("p2"));
            if (!p1 || !p2 || p1->size() != p2->size())
              return failure();
            size_t r = p1->size();
            std::vector<int64_t> p(r);
            bool identity = true;
            for (size_t i = 0; i < r; ++i) {
              int64_t k = (*p2)[i];
              if (k < 0 || size_t(k) >= r || (*p1)[size_t(k)] < 0)
                return failure();
              p[i] = (*p1)[size_t(k)];
              identity &= p[i] == int64_t(i);
            }
            if (identity)
              return forward(m, rw, "x");
            Node *y = rw.callFunction("transpose", {m.node("x"), Arg::ints(p)});
            return rw.replaceAllUsesWith(m.rootExpr()->output(0), y);
          });
}

} // namespace tmg
