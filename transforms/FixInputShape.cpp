//===- FixInputShape.cpp - Static shapes become Constants -----------------===//
//
// The reference's FixInputShape: `GetVarShape(x)` (what `x.shape` records)
// becomes an int32 Constant of x's recorded static shape. Nodes without a
// known shape are left alone (the reference would read a stale value).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

namespace tmg {

FailureOr<bool> FixInputShapePass::runOnGraph(InternalGraph &g, PassContext &ctx) {
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
  return changed;
}

} // namespace tmg
