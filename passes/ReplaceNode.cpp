//===- ReplaceNode.cpp - The replace-node pass ----------------------------===//
#include "StructuralPasses.h"

#include "tm/ir/InternalGraph.h"

namespace tmg {

FailureOr<bool> ReplaceNodePass::run(TracedModule &m, PassContext &ctx) {
  std::string spec = pairs;
  if (spec.empty())
    return false;
  std::vector<Node *> all = m.graph().nodes(true).asList();
  auto find = [&](llvm::StringRef full) -> Node * {
    for (Node *n : all)
      if (n->graph() && n->graph()->name() + "_" + n->name().str() == full)
        return n;
    return nullptr;
  };
  bool changed = false;
  llvm::SmallVector<llvm::StringRef, 8> pairs;
  llvm::StringRef(spec).split(pairs, ';', -1, false);
  for (llvm::StringRef p : pairs) {
    auto [a, b] = p.trim().split(':');
    Node *from = find(a.trim()), *to = find(b.trim());
    if (!from || !to || b.empty())
      return Diagnostic(Location(),
                        fmt::format("replace-node: '{}' is not a pair of full node names "
                                    "(<graph>_<node>:<graph>_<node>) of the module",
                                    p.str()));
    if (from->graph() != to->graph())
      return Diagnostic(Location(), fmt::format("replace-node: '{}' and '{}' are in different "
                                                "graphs",
                                                a.str(), b.str()));
    ReplaceReport r;
    try {
      r = from->graph()->replaceNode({{from, to}});
    } catch (const Error &e) {
      return e.diagnostic();
    }
    ctx.count("uses-rewired", int64_t(r.rewired));
    for (const auto &s : r.skipped) {
      Diagnostic d(Location::atExpr(s.user->id()),
                   fmt::format("replace-node: expr keeps using '{}': rewiring it to '{}' would {}",
                               s.oldNode->str(), s.newNode->str(),
                               s.cycle ? "create a cycle" : "use it before its definition"),
                   Diagnostic::Severity::Warning);
      d.loc.pass = Name;
      ctx.remark(d);
      ctx.count("uses-skipped");
    }
    changed |= r.rewired > 0;
  }
  return changed;
}

} // namespace tmg
