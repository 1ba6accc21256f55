//===- Verify.cpp - The verify pass ---------------------------------------===//
#include "StructuralPasses.h"

#include "tm/ir/Verifier.h"

namespace tmg {

FailureOr<bool> VerifyPass::run(TracedModule &m, PassContext &) {
  if (auto r = verifyOrReport(m); r.failed())
    return r.diagnostic();
  return false;
}

} // namespace tmg
