//===- Registration.cpp - The matcher's passes ----------------------------===//
#include "tm/matcher/Rules.h"

namespace tmg {

void registerMatcherPasses(PassRegistry &r) {
  if (!r.contains(ApplyRulesPass::Name))
    r.add<ApplyRulesPass>();
  if (!r.contains(FoldDoubleReluPass::Name))
    r.add<FoldDoubleReluPass>();
}

} // namespace tmg
