//===- FoldDoubleRelu.cpp - relu(relu(x)) => relu(x) ----------------------===//
//
// The sample pattern pass: a canonicalisation written with the DSL. relu is
// idempotent, and relu6 absorbs a relu on either side:
//   relu(relu(x))   => relu(x)      (the inner relu's output)
//   relu6(relu(x))  => relu6(x)     relu(relu6(x)) => relu6(x)
//
//===----------------------------------------------------------------------===//
#include "tm/passes/RulePasses.h"

namespace tmg {

void FoldDoubleReluPass::populate(PatternSet &set) const {
  using namespace pat;
  Pat relu = fn("relu"), relu6 = fn("relu6");
  // relu(relu(x)): the outer relu's users take the inner relu's output.
  Pat inner = relu(any("x")).bind("inner");
  set.add("relu-relu", Pattern(relu(inner)), [](const Match &m, Rewriter &rw) {
    return rw.replaceAllUsesWith(m.rootExpr()->output(0), m.node("inner"));
  });
  // relu6(relu(x)) and relu(relu6(x)): relu6 of x.
  Pattern mixed(relu6(relu(any("x"))) | relu(relu6(any("x"))));
  set.add("relu-relu6", std::move(mixed), [](const Match &m, Rewriter &rw) {
    Node *y = rw.callFunction(tmg::op(OpKind::Relu6), {m.node("x")});
    return rw.replaceAllUsesWith(m.rootExpr()->output(0), y);
  });
}

} // namespace tmg
