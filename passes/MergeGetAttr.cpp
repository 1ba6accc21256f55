//===- MergeGetAttr.cpp - The merge-getattr pass --------------------------===//
#include "StructuralPasses.h"

namespace tmg {

FailureOr<bool> MergeGetAttrPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  bool changed = g.mergeGetAttrs();
  if (changed)
    ctx.count("graphs-changed");
  return changed;
}

FailureOr<bool> checkAllGetAttrs(TracedModule &m, PassContext &) {
  try {
    InternalGraph::checkGetAttrs(graphsOf(m));
  } catch (const Error &e) {
    return FailureOr<bool>(e.diagnostic());
  }
  return false;
}

FailureOr<size_t> mergeAllGetAttrs(TracedModule &m) {
  try {
    return InternalGraph::mergeGetAttrs(graphsOf(m));
  } catch (const Error &e) {
    return FailureOr<size_t>(e.diagnostic());
  }
}

FailureOr<bool> MergeGetAttrPass::run(TracedModule &m, PassContext &ctx) {
  if (ctx.threads > 1) {
    if (FailureOr<bool> c = checkAllGetAttrs(m, ctx); c.failed())
      return c;
    return GraphPass::run(m, ctx);
  }
  // Sequentially, the graphs' GetAttrs are one stream (see
  // InternalGraph::mergeGetAttrs), checked in full before any change.
  FailureOr<size_t> changed = mergeAllGetAttrs(m);
  if (changed.failed())
    return changed.diagnostic();
  if (*changed)
    ctx.count("graphs-changed", int64_t(*changed));
  return *changed != 0;
}

} // namespace tmg
