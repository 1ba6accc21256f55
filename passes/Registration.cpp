//===- Registration.cpp - The builtin passes ------------------------------===//
#include "StructuralPasses.h"

namespace tmg {

void registerBuiltinPasses(PassRegistry &r) {
  r.add<MergeGetAttrPass>();
  r.add<CompilePass>();
  r.add<ReplaceNodePass>();
  r.add<FlattenPass>();
  r.add<VerifyPass>();
}

} // namespace tmg
