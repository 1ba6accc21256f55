//===- Registration.cpp - The builtin passes ------------------------------===//
#include "StructuralPasses.h"
#include "tm/passes/RulePasses.h"

namespace tmg {

namespace {
template <typename P> void addOnce(PassRegistry &r) {
  if (!r.contains(P::Name))
    r.add<P>();
}
} // namespace

void registerBuiltinPasses(PassRegistry &r) {
  addOnce<MergeGetAttrPass>(r);
  addOnce<CompilePass>(r);
  addOnce<ReplaceNodePass>(r);
  addOnce<FlattenPass>(r);
  addOnce<VerifyPass>(r);
}

void registerMatcherPasses(PassRegistry &r) {
  addOnce<ApplyRulesPass>(r);
  addOnce<FoldDoubleReluPass>(r);
}

} // namespace tmg
