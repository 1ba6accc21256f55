//===- Flatten.cpp - The flatten pass -------------------------------------===//
#include "StructuralPasses.h"

namespace tmg {

FailureOr<bool> FlattenPass::run(TracedModule &m, PassContext &ctx) {
  size_t before = m.graph().size();
  bool changed = m.flattenInPlace();
  if (changed)
    ctx.count("exprs-inlined", int64_t(m.graph().size()) - int64_t(before));
  return changed;
}

} // namespace tmg
