//===- MergeGetAttr.cpp - The merge-getattr pass --------------------------===//
#include "StructuralPasses.h"

namespace tmg {

FailureOr<bool> MergeGetAttrPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  bool changed = g.mergeGetAttrs();
  if (changed)
    ctx.count("graphs-changed");
  return changed;
}

} // namespace tmg
