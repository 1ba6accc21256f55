//===- FoldNegNeg.cpp - An example pass plugin ----------------------------===//
//
// A pass written and compiled outside tmgraph: `neg(neg(x)) => x`. Build it
// with the meson.build beside it against an installed tmgraph (or from the
// tmgraph build, as its test does) and load it with
//   tm-opt model.tmir --load-pass-plugin libfold_neg_neg.so -p fold-neg-neg,compile
// Its option: `fold-neg-neg{max-folds=1}`.
//
//===----------------------------------------------------------------------===//
#include "tm/ir/IR.h"
#include "tm/passes/Pass.h"

using namespace tmg;

namespace {
struct FoldNegNeg : GraphPass<FoldNegNeg> {
  static constexpr const char *Name = "fold-neg-neg";
  static constexpr const char *Description = "neg(neg(x)) => x";
  Option<int64_t> maxFolds{*this, "max-folds",
                           llvm::cl::desc("fold at most this many pairs per graph (-1: all)"),
                           llvm::cl::init(-1)};

  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    const OpSchema &neg = functionOp("neg");
    bool changed = false;
    int64_t folds = 0;
    for (Expr *outer : g.getFunctionByType(&neg, false)) {
      if (maxFolds >= 0 && folds++ >= maxFolds)
        break;
      Node *in = outer->input(0);
      if (!isCallFunction(in->expr(), &neg))
        continue;
      ReplaceReport r = g.replaceNode({{outer->output(0), in->expr()->input(0)}});
      changed |= r.rewired > 0 || r.complete();
      ctx.count("folded");
    }
    return changed;
  }
};
} // namespace

TMG_PASS_PLUGIN_ENTRY { registry.add<FoldNegNeg>(); }
