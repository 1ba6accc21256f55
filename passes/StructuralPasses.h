//===- StructuralPasses.h - The passes of the reference's graph edits ----===//
#pragma once

#include "tm/passes/Pass.h"

namespace tmg {

/// `merge-getattr`: the reference's `_merge_getattr_expr` on every graph.
struct MergeGetAttrPass : GraphPass<MergeGetAttrPass> {
  static constexpr const char *Name = "merge-getattr";
  static constexpr const char *Description =
      "turn getattr chains into dotted paths and merge duplicate getattrs";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

/// `compile`: getattr merge, then dead-expr removal (keeping disable_remove).
struct CompilePass : GraphPass<CompilePass> {
  static constexpr const char *Name = "compile";
  static constexpr const char *Description =
      "merge getattrs and remove exprs no output depends on (the reference's compile)";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
};

/// `replace-node`: replaces nodes named by full name ("Graph_node") pairs.
struct ReplaceNodePass : PassWrapper<ReplaceNodePass> {
  static constexpr const char *Name = "replace-node";
  static constexpr const char *Description =
      "replace uses of nodes by other nodes of the same graph (reference rules)";
  std::vector<OptionSpec> optionSpecs() const override {
    return {{"pairs", std::string(),
             "old:new pairs of full node names (<graph>_<node>), separated by ';'"}};
  }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

/// `flatten`: the reference's TracedModule.flatten, in place.
struct FlattenPass : PassWrapper<FlattenPass> {
  static constexpr const char *Name = "flatten";
  static constexpr const char *Description =
      "inline every call of a traced submodule into the top graph";
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

/// `verify`: the verifier as a pipeline step.
struct VerifyPass : PassWrapper<VerifyPass> {
  static constexpr const char *Name = "verify";
  static constexpr const char *Description = "check every IR invariant; fail on a violation";
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

} // namespace tmg
