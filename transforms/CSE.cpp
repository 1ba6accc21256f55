//===- CSE.cpp - Common subexpression elimination -------------------------===//
//
// One walk in graph order with a hash table keyed by (expr kind, op or
// attribute or constant data, input nodes, argument TreeDef with its literal
// arguments, output structure). An expr equal to an earlier one has its
// outputs replaced by the earlier one's and is erased; since later exprs see
// the rewired inputs, chains of duplicates collapse in the same walk.
// Commutative binary ops (trait `Commutative`) hash and compare their two
// tensor operands in a canonical order, so `a + b` and `b + a` merge.
// Never merged: exprs with side effects (`__setitem__`), in-place methods,
// random ops (dropout), `disable_remove` exprs and Input exprs. Constants
// merge when dtype, shape and bytes are equal. O(graph + constant bytes).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <cstring>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/Hashing.h>

namespace tmg {

namespace {

bool eligible(const Expr *e) {
  if (!e->inBody() || e->removeDisabled() || e->numOutputs() == 0)
    return false;
  if (auto *c = llvm::dyn_cast<Constant>(e))
    return c->isTensor() && c->tensor().defined();
  if (const OpSchema *s = e->opSchema())
    if (s->hasTrait(SideEffect) || s->hasTrait(Inplace) || s->kind() == OpKind::Dropout)
      return false;
  return true;
}

/// Inputs in canonical order: the two operands of a commutative binary op
/// sorted by node id.
llvm::SmallVector<Node *, 4> canonicalInputs(const Expr *e) {
  llvm::SmallVector<Node *, 4> in = e->inputs();
  const OpSchema *s = e->opSchema();
  if (s && s->isCommutative() && in.size() == 2 && in[0]->id() > in[1]->id()) {
    // Both operands must be tensor leaves of the two argument slots.
    size_t base = llvm::isa<CallMethod>(e) ? 0 : 0;
    if (e->numArgs() >= base + 2 && e->arg(base).node() && e->arg(base + 1).node())
      std::swap(in[0], in[1]);
  }
  return in;
}

size_t hashExpr(const Expr *e, llvm::ArrayRef<Node *> in) {
  llvm::hash_code h = llvm::hash_combine(unsigned(e->kind()), e->numOutputs());
  if (const OpSchema *s = e->opSchema())
    h = llvm::hash_combine(h, s);
  if (auto *ga = llvm::dyn_cast<GetAttr>(e))
    h = llvm::hash_combine(h, llvm::StringRef(ga->attrName()));
  if (auto *c = llvm::dyn_cast<Constant>(e)) {
    const Tensor &t = c->tensor();
    h = llvm::hash_combine(h, unsigned(t.dtype()),
                           llvm::hash_combine_range(t.shape().begin(), t.shape().end()));
    auto *p = static_cast<const char *>(t.rawData());
    h = llvm::hash_combine(h, llvm::hash_combine_range(p, p + t.nbytes()));
  }
  for (Node *n : in)
    h = llvm::hash_combine(h, n);
  if (e->argDef())
    h = llvm::hash_combine(h, e->argDef()->hash());
  return size_t(h);
}

bool sameExpr(const Expr *a, llvm::ArrayRef<Node *> ina, const Expr *b,
              llvm::ArrayRef<Node *> inb) {
  if (a->kind() != b->kind() || a->numOutputs() != b->numOutputs() || ina != inb)
    return false;
  if (a->opSchema() != b->opSchema())
    return false;
  if (a->argDef() != b->argDef() || a->outDef() != b->outDef())
    return false;
  for (size_t i = 0; i < a->numOutputs(); ++i)
    if (a->output(i)->kind() != b->output(i)->kind())
      return false;
  if (auto *ga = llvm::dyn_cast<GetAttr>(a))
    return ga->attrName() == llvm::cast<GetAttr>(b)->attrName();
  if (auto *ca = llvm::dyn_cast<Constant>(a)) {
    const Tensor &x = ca->tensor(), &y = llvm::cast<Constant>(b)->tensor();
    return x.dtype() == y.dtype() && x.shape() == y.shape() && x.bitwiseEqual(y);
  }
  if (auto *pa = llvm::dyn_cast<Apply>(a))
    return pa->attrs() == llvm::cast<Apply>(b)->attrs();
  return true;
}

} // namespace

FailureOr<bool> CsePass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  llvm::DenseMap<size_t, llvm::SmallVector<std::pair<Expr *, llvm::SmallVector<Node *, 4>>, 1>>
      table;
  std::vector<Expr *> body;
  for (Expr *e : g.body())
    body.push_back(e);
  bool changed = false;
  for (Expr *e : body) {
    if (!eligible(e))
      continue;
    llvm::SmallVector<Node *, 4> in = canonicalInputs(e);
    size_t h = hashExpr(e, in);
    auto &bucket = table[h];
    Expr *same = nullptr;
    for (auto &[p, pin] : bucket)
      if (sameExpr(p, pin, e, in)) {
        same = p;
        break;
      }
    if (!same) {
      bucket.emplace_back(e, std::move(in));
      continue;
    }
    bool all = true;
    for (size_t i = 0; i < e->numOutputs(); ++i)
      all &= xf::replaceAll(g, e->output(i), same->output(i));
    if (all && xf::isDead(e, xf::outputSet(g))) {
      g.eraseExpr(e);
      ctx.count("exprs-merged");
    }
    changed = true;
  }
  return changed;
}

} // namespace tmg
