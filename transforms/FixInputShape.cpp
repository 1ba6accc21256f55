//===- FixInputShape.cpp - Static shapes become Constants -----------------===//
//
// The reference's FixInputShape: `GetVarShape(x)` (what `x.shape` records)
// becomes an int32 Constant of x's recorded static shape. Nodes without a
// known shape are left alone (the reference would read a stale value).
//
// With `shape=[x:1x3x224x224]`, the named graph inputs first get those
// sizes: their symbols are bound, every node's symbolic dims are rewritten
// with the bindings, and shapes are inferred again where dims stay unknown.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include "tm/ir/ShapeInference.h"

namespace tmg {

FailureOr<bool> FixInputShapePass::fixInputs(InternalGraph &g) {
  ShapeBinder binder;
  bool changed = false;
  for (const std::string &entry : *shape) {
    auto [name, dims] = llvm::StringRef(entry).split(':');
    Shape want;
    llvm::SmallVector<llvm::StringRef, 4> parts;
    if (!dims.empty())
      dims.split(parts, 'x');
    for (llvm::StringRef p : parts) {
      int64_t d;
      if (p.trim().getAsInteger(10, d) || d < 0)
        return Diagnostic(Location(), fmt::format("fix-input-shape: '{}' is not NAME:DIMxDIM... "
                                                  "with sizes, e.g. x:1x3x224x224",
                                                  entry));
      want.push_back(d);
    }
    TensorNode *in = nullptr;
    for (Node *n : g.inputs().drop_front())
      if (n->name() == name)
        in = llvm::dyn_cast<TensorNode>(n);
    if (!in)
      return Diagnostic(Location(), fmt::format("fix-input-shape: graph '{}' has no tensor input "
                                                "'{}'",
                                                g.name(), name.str()));
    if (in->shape()) {
      std::string err = binder.bind(fmt::format("input '{}'", name.str()), *in->shape(), want);
      if (!err.empty())
        return Diagnostic(Location(), "fix-input-shape: " + err);
    }
    in->setShape(want);
    changed = true;
  }
  if (std::string err = binder.finish(); !err.empty())
    return Diagnostic(Location(), "fix-input-shape: " + err);
  if (!changed)
    return false;
  const auto &env = binder.bindings();
  for (Expr *e : g.body()) {
    bool unknown = false;
    for (Node *n : e->outputs())
      if (auto *t = llvm::dyn_cast<TensorNode>(n); t && t->shape()) {
        Shape s = *t->shape();
        for (int64_t &d : s)
          d = dim::substitute(d, env);
        unknown |= !isStaticShape(s);
        t->setShape(std::move(s));
      } else if (t) {
        unknown = true;
      }
    if (!unknown)
      continue;
    if (auto types = inferTypes(*e); types && types->size() == e->numOutputs())
      for (size_t i = 0; i < e->numOutputs(); ++i)
        if (auto *t = llvm::dyn_cast<TensorNode>(e->output(i)); t && (*types)[i].shape)
          t->setShape((*types)[i].shape);
  }
  return true;
}

FailureOr<bool> FixInputShapePass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  bool fixed = false;
  if (!shape->empty() && g.owner() && g.owner()->isTop() && &g == &g.owner()->graph()) {
    auto r = fixInputs(g);
    if (r.failed())
      return r;
    fixed = *r;
    if (fixed)
      ctx.count("inputs-fixed");
  }
  std::vector<Expr *> todo;
  for (Expr *e : g.body())
    if (auto *ap = llvm::dyn_cast<Apply>(e))
      if (ap->opdef().kind() == OpKind::GetVarShape && ap->numInputs() == 1 &&
          ap->numOutputs() == 1 && !ap->removeDisabled())
        todo.push_back(ap);
  bool changed = false;
  for (Expr *e : todo) {
    auto *tn = llvm::dyn_cast<TensorNode>(e->input(0));
    if (!tn || !tn->shape())
      continue;
    const Shape &s = *tn->shape();
    std::vector<int64_t> dims(s.begin(), s.end());
    bool known = true;
    for (int64_t d : dims)
      known &= d >= 0;
    if (!known)
      continue;
    Tensor t = Tensor::fromInts({int64_t(dims.size())}, dims, DType::Int32);
    Node *out = e->output(0);
    xf::moveToConstant(g, out, t, out->name());
    xf::eraseDeadFrom(g, {e});
    ctx.count("shapes-fixed");
    changed = true;
  }
  return changed || fixed;
}

} // namespace tmg
