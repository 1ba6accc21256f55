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
  if (FailureOr<bool> c = checkAllGetAttrs(m, ctx); c.failed())
    return c;
  return GraphPass::run(m, ctx);
}

} // namespace tmg
