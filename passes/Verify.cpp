//===- Verify.cpp - The verify pass ---------------------------------------===//
#include "StructuralPasses.h"

#include "tm/ir/Verifier.h"

namespace tmg {

FailureOr<bool> VerifyPass::run(TracedModule &m, PassContext &) {
  Diagnostic d;
  if (failed(verifyOrReport(m, &d)))
    return d;
  return false;
}

} // namespace tmg
