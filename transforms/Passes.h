//===- Passes.h - The optimisation pass classes (internal) ------*- C++ -*-===//
#pragma once

#include "tm/passes/PatternPass.h"
#include "tm/passes/Drivers.h"
#include "tm/passes/Pass.h"
#include "tm/transforms/Transforms.h"

namespace tmg {

struct AttrToConstantPass : GraphPass<AttrToConstantPass> {
  static constexpr const char *Name = "attr-to-constant";
  static constexpr const char *Description =
      "tensor attributes read by GetAttr become Constants (node names kept)";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

struct FixInputShapePass : GraphPass<FixInputShapePass> {
  static constexpr const char *Name = "fix-input-shape";
  static constexpr const char *Description =
      "fix graph inputs to the given sizes (their symbols become sizes through the graph); "
      "then GetVarShape / .shape of a node with a static shape becomes an int32 Constant";
  ListOption<std::string> shape{
      *this, "shape",
      llvm::cl::desc("NAME:DIMxDIMx... per graph input to fix, e.g. x:1x3x224x224")};
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;

private:
  FailureOr<bool> fixInputs(InternalGraph &g);
};

struct FoldConstantPass : GraphPass<FoldConstantPass> {
  static constexpr const char *Name = "fold-constant";
  static constexpr const char *Description =
      "evaluate every subgraph whose inputs are constants with the runtime";
  Option<int64_t> maxBytes{
      *this, "max-bytes",
      llvm::cl::desc("largest folded tensor in bytes (-1: no limit); bigger results stay "
                     "computed"),
      llvm::cl::init(int64_t(16) << 20)};
  std::vector<std::string> prerequisites() const override { return {"attr-to-constant"}; }
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

struct CsePass : GraphPass<CsePass> {
  static constexpr const char *Name = "cse";
  static constexpr const char *Description =
      "merge common subexpressions (same op, inputs and literal arguments; "
      "commutative operands in either order)";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

struct FuseConvBnPass : PassWrapper<FuseConvBnPass> {
  static constexpr const char *Name = "fuse-conv-bn";
  static constexpr const char *Description =
      "fold an eval-mode batch norm into the convolution feeding it (module and "
      "functional forms)";
  std::vector<std::string> prerequisites() const override { return {"attr-to-constant"}; }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

struct PruneAttributesPass : PassWrapper<PruneAttributesPass> {
  static constexpr const char *Name = "prune-attributes";
  static constexpr const char *Description =
      "remove parameters and buffers no graph reads (by getattr, a constant "
      "sharing their storage, or a call of their module)";
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

struct FuseLinearBnPass : PassWrapper<FuseLinearBnPass> {
  static constexpr const char *Name = "fuse-linear-bn";
  static constexpr const char *Description =
      "fold an eval-mode batch norm into the linear layer feeding it";
  std::vector<std::string> prerequisites() const override { return {"attr-to-constant"}; }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

struct CanonicalizePass : PatternPass<CanonicalizePass> {
  static constexpr const char *Name = "canonicalize";
  static constexpr const char *Description =
      "local simplifications: identity/eval-dropout/copy/detach removal, reshape and "
      "transpose chains, neutral arithmetic, double neg/relu";
  void populate(PatternSet &set) const override;
};

struct CanonicalizeOnnxPass : PatternPass<CanonicalizeOnnxPass> {
  static constexpr const char *Name = "canonicalize-onnx";
  static constexpr const char *Description =
      "ONNX export idioms => tmgraph ops: single-element constants => scalar operands, "
      "clip => relu/relu6, x*hard_sigmoid(x) => hswish, x*sigmoid(x) => silu, "
      "matmul(+bias) => linear, erf/tanh GELU => gelu, decomposed layer norm => layer_norm";
  void populate(PatternSet &set) const override;
};

struct FuseConvActivationPass : PatternPass<FuseConvActivationPass> {
  static constexpr const char *Name = "fuse-conv-activation";
  static constexpr const char *Description =
      "conv2d/linear followed by relu, relu6, sigmoid, silu, hardswish, hardsigmoid or gelu "
      "=> one fused "
      "nn.conv2d_act / nn.linear_act call the runtime runs as one step";
  void populate(PatternSet &set) const override;
};

struct FuseAttentionPass : PatternPass<FuseAttentionPass> {
  static constexpr const char *Name = "fuse-attention";
  static constexpr const char *Description =
      "matmul(softmax(matmul(q * c, k^T)), v) => one "
      "nn.scaled_dot_product_attention call "
      "the runtime runs without writing out the scores";
  void populate(PatternSet &set) const override;
};

struct NormElemwisePass : GraphPass<NormElemwisePass> {
  static constexpr const char *Name = "norm-elemwise";
  static constexpr const char *Description =
      "binary add/sub/mul/div in any spelling => x + c / x * c tensor methods";
  std::vector<std::string> prerequisites() const override { return {"fold-constant"}; }
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

struct FuseAddMulPass : GraphPass<FuseAddMulPass> {
  static constexpr const char *Name = "fuse-add-mul";
  static constexpr const char *Description =
      "(x + c1) + c2 => x + (c1 + c2); (x * c1) * c2 => x * (c1 * c2); neg(x) * c => x * -c";
  std::vector<std::string> prerequisites() const override { return {"norm-elemwise"}; }
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

struct BackwardFoldScalePass : PassWrapper<BackwardFoldScalePass> {
  static constexpr const char *Name = "backward-fold-scale";
  static constexpr const char *Description =
      "push `x * c` back through relu/add/reshape/pooling into the producing convolutions";
  std::vector<std::string> prerequisites() const override {
    return {"attr-to-constant", "norm-elemwise"};
  }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

} // namespace tmg
