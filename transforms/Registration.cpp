//===- Registration.cpp - The optimisation passes and presets -------------===//
#include "Passes.h"

namespace tmg {

const char *optimizePipelineText() {
  // ONNX idioms first (the rules after it are written for tmgraph's ops),
  // then cleanup, then the folds that need constants, arithmetic
  // normalisation and scale folding (the reference's FuseConvBn ->
  // FuseAddMul -> BackwardFoldScale -> FuseAddMul), CSE, and last the
  // fusions into ops of their own: attention, then the activations (they
  // hide relus from the passes before them); last, the weights the folds
  // replaced are dropped.
  return "canonicalize-onnx,canonicalize,attr-to-constant,fuse-conv-bn,fuse-"
         "linear-bn,fold-constant,"
         "norm-elemwise,fuse-add-mul,backward-fold-scale,fuse-add-mul,cse,"
         "canonicalize,"
         "fuse-attention,fuse-conv-activation,compile,prune-attributes";
}

void registerTransformPasses(PassRegistry &r) {
  auto add = [&r]<typename P>() {
    if (!r.contains(P::Name))
      r.add<P>();
  };
  add.operator()<AttrToConstantPass>();
  add.operator()<FixInputShapePass>();
  add.operator()<FoldConstantPass>();
  add.operator()<CsePass>();
  add.operator()<FuseConvBnPass>();
  add.operator()<FuseLinearBnPass>();
  add.operator()<CanonicalizePass>();
  add.operator()<CanonicalizeOnnxPass>();
  add.operator()<FuseConvActivationPass>();
  add.operator()<FuseAttentionPass>();
  add.operator()<NormElemwisePass>();
  add.operator()<BackwardFoldScalePass>();
  add.operator()<FuseAddMulPass>();
  add.operator()<PruneAttributesPass>();
  if (!r.preset("optimize"))
    r.addPreset("optimize", optimizePipelineText(),
                "the optimisation passes in a sensible order (inference)");
}

} // namespace tmg
