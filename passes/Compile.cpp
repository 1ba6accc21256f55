//===- Compile.cpp - The compile (dead-expr removal) pass -----------------===//
#include "StructuralPasses.h"

namespace tmg {

FailureOr<bool> CompilePass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  uint64_t v = g.version();
  size_t removed = g.compile();
  if (removed)
    ctx.count("exprs-removed", int64_t(removed));
  // compile() also merges getattrs, which may change the graph without
  // removing anything.
  return removed > 0 || g.version() != v;
}

FailureOr<bool> CompilePass::run(TracedModule &m, PassContext &ctx) {
  if (ctx.threads > 1) {
    if (FailureOr<bool> c = checkAllGetAttrs(m, ctx); c.failed())
      return c;
    return GraphPass::run(m, ctx);
  }
  // Sequentially the getattr merge of all the graphs is one walk (checked
  // in full before any change: the only way compile fails); each graph's
  // compile then finds its GetAttrs merged.
  FailureOr<size_t> merged = mergeAllGetAttrs(m);
  if (merged.failed())
    return merged.diagnostic();
  FailureOr<bool> removed = GraphPass::run(m, ctx);
  if (removed.failed())
    return removed;
  return *removed || *merged != 0;
}

} // namespace tmg
