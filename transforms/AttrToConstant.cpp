//===- AttrToConstant.cpp - Tensor GetAttrs become Constants --------------===//
//
// The reference's AttrToConstant: every GetAttr producing a tensor becomes a
// Constant holding that tensor; the node keeps its name, id and users. The
// module attribute is left alone (the constant shares its storage; tensors
// are never mutated in place by the passes). Linear in the graph.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

namespace tmg {

FailureOr<bool> AttrToConstantPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  std::vector<GetAttr *> todo;
  for (Expr *e : g.body())
    if (auto *ga = llvm::dyn_cast<GetAttr>(e))
      if (ga->numOutputs() == 1 && llvm::isa<TensorNode>(ga->output(0)) &&
          !ga->removeDisabled())
        todo.push_back(ga);
  bool changed = false;
  for (GetAttr *ga : todo) {
    const Tensor *t = xf::staticTensor(ga->output(0));
    if (!t)
      continue;
    Node *n = ga->output(0);
    xf::moveToConstant(g, n, *t, n->name());
    g.eraseExpr(ga);
    ctx.count("getattrs-to-constants");
    changed = true;
  }
  return changed;
}

} // namespace tmg
