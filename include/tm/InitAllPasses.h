//===- InitAllPasses.h - Register every pass tmgraph ships ------*- C++ -*-===//
//
// One call makes every pass and preset of tmgraph known to a registry, so
// that an embedding program's `Pipeline::parse("optimize", registry)` finds
// them (as mlir/InitAllPasses.h does for MLIR):
//
//   tmg::PassRegistry registry;
//   tmg::registerAllPasses(registry);
//   auto pipeline = tmg::Pipeline::parse("flatten,optimize", registry);
//
// Header-only: it calls into the passes, matcher and transforms libraries,
// which a program using it links (pkg-config's `tmgraph` gives all three).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tm/passes/RulePasses.h"
#include "tm/passes/Pass.h"
#include "tm/transforms/Transforms.h"

namespace tmg {

/// Registers the structural passes, the matcher's passes, the optimisation
/// passes and the `optimize` preset; safe to call more than once.
inline void registerAllPasses(PassRegistry &r) {
  registerBuiltinPasses(r);
  registerMatcherPasses(r);
  registerTransformPasses(r);
}

} // namespace tmg
