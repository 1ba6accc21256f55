//===- BreakingPlugin.cpp - A pass plugin that breaks the IR ---------------===//
//
// `rename-clash` gives the output of every graph's second expr the name of
// the first expr's output, bypassing the namespace: a module that no longer
// verifies, for the tests of `verify` and --verify-each.
//
//===----------------------------------------------------------------------===//
#include "tm/ir/IR.h"
#include "tm/passes/Pass.h"

using namespace tmg;

namespace {
struct RenameClash : GraphPass<RenameClash> {
  static constexpr const char *Name = "rename-clash";
  static constexpr const char *Description =
      "give the second expr's output the first one's name (breaks the IR)";
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &) override {
    Expr *first = nullptr;
    for (Expr *e : g.body()) {
      if (e->outputs().empty())
        continue;
      if (!first) {
        first = e;
        continue;
      }
      e->output(0)->setNameInternal(first->output(0)->name());
      return true;
    }
    return false;
  }
};
} // namespace

TMG_PASS_PLUGIN_ENTRY { registry.add<RenameClash>(); }
