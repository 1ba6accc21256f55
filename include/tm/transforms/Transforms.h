//===- Transforms.h - Optimisation passes -----------------------*- C++ -*-===//
//
// libtmgraph-transforms: the optimisation passes of the reference's
// `_passes` (without its bugs) and a few more, registered by name:
//
//   attr-to-constant      tensor GetAttrs become Constants
//   fix-input-shape       GetVarShape of a statically shaped node => Constant
//   fold-constant         subgraphs of constants evaluated with the runtime
//   norm-elemwise         sub/div/F.add/... normalised into + and *
//   fuse-add-mul          (x + c1) + c2, (x * c1) * c2, neg, pow chains folded
//   fuse-conv-bn          conv (module or F.conv2d) + batch norm folded
//   fuse-linear-bn        linear (module or F.linear) + batch norm folded
//   backward-fold-scale   `* c` pushed back into the producing convolution
//   cse                   common subexpressions merged (commutative-aware)
//   canonicalize          identity, eval dropout, reshape/transpose chains
//   fuse-conv-activation  conv/linear + activation => one fused op
//   prune-attributes      parameters and buffers no graph reads removed
//
// and the pipeline preset `optimize` (see README, "Optimisation passes").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tm/passes/Pass.h"

namespace tmg {

/// Registers the optimisation passes and the `optimize` preset (each only
/// when its name is still free, so calling it twice is harmless).
void registerTransformPasses(PassRegistry &r);

/// The pipeline the `optimize` preset expands to.
const char *optimizePipelineText();

} // namespace tmg
