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
  /// Checks every graph, then merges: a bad GetAttr changes nothing.
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
  bool isAtomic() const override { return true; }
};

/// Runs InternalGraph::checkGetAttrs on every graph of `m`: the failure of
/// the first bad one, else success (false: nothing changed).
FailureOr<bool> checkAllGetAttrs(TracedModule &m, PassContext &ctx);

/// InternalGraph::mergeGetAttrs over every graph of `m` as one stream: the
/// number of graphs changed, or the failure of the first bad one (then no
/// graph changed).
FailureOr<size_t> mergeAllGetAttrs(TracedModule &m);

/// `compile`: getattr merge, then dead-expr removal (keeping disable_remove).
struct CompilePass : GraphPass<CompilePass> {
  static constexpr const char *Name = "compile";
  static constexpr const char *Description =
      "merge getattrs and remove exprs no output depends on (the reference's compile)";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
  /// Checks every graph's GetAttrs first (the only way compile fails).
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
  bool isAtomic() const override { return true; }
};

/// `replace-node`: replaces nodes named by full name ("Graph_node") pairs.
struct ReplaceNodePass : PassWrapper<ReplaceNodePass> {
  static constexpr const char *Name = "replace-node";
  static constexpr const char *Description =
      "replace uses of nodes by other nodes of the same graph (reference rules)";
  Option<std::string> pairs{
      *this, "pairs",
      llvm::cl::desc("old:new pairs of full node names (<graph>_<node>), separated by ';'")};
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
};

/// `flatten`: the reference's TracedModule.flatten, in place.
struct FlattenPass : PassWrapper<FlattenPass> {
  static constexpr const char *Name = "flatten";
  static constexpr const char *Description =
      "inline every call of a traced submodule into the top graph";
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
  /// flattenInPlace builds the flat module aside and swaps it in at the end.
  bool isAtomic() const override { return true; }
};

/// `verify`: the verifier as a pipeline step.
struct VerifyPass : PassWrapper<VerifyPass> {
  static constexpr const char *Name = "verify";
  static constexpr const char *Description = "check every IR invariant; fail on a violation";
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
  bool isAtomic() const override { return true; } ///< changes nothing
};

} // namespace tmg
