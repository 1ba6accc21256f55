//===- MergeGetAttr.cpp - The merge-getattr pass --------------------------===//
#include "StructuralPasses.h"

namespace tmg {

FailureOr<bool> MergeGetAttrPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  bool changed = g.mergeGetAttrs();
  if (changed)
    ctx.count("graphs-changed");
  return changed;
}

FailureOr<bool> checkAllGetAttrs(TracedModule &m, PassContext &ctx) {
  return runOnEachGraph(m, ctx, [](InternalGraph &g, PassContext &) -> FailureOr<bool> {
    g.checkGetAttrs();
    return false;
  });
}

FailureOr<bool> MergeGetAttrPass::run(TracedModule &m, PassContext &ctx) {
  if (FailureOr<bool> c = checkAllGetAttrs(m, ctx); c.failed())
    return c;
  return GraphPass::run(m, ctx);
}

} // namespace tmg
