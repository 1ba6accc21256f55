//===- FoldNegNeg.cpp - An example pass plugin ----------------------------===//
//
// A pass written and compiled outside tmgraph: `neg(neg(x)) => x`. Build it
// with the meson.build beside it against an installed tmgraph (or from the
// tmgraph build, as its test does) and load it with
//   tm-opt model.tmir --load-pass-plugin libfold_neg_neg.so -p fold-neg-neg,compile
//
//===----------------------------------------------------------------------===//
#include "tm/ir/IR.h"
#include "tm/passes/Pass.h"

using namespace tmg;

namespace {
struct FoldNegNeg : GraphPass<FoldNegNeg> {
  static constexpr const char *Name = "fold-neg-neg";
  static constexpr const char *Description = "neg(neg(x)) => x";

  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    const OpSchema &neg = functionOp("neg");
    bool changed = false;
    for (Expr *outer : g.getFunctionByType(&neg, false)) {
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
