//===- Drivers.cpp - ForwardPass and BackwardPass walks -------------------===//
#include "tm/passes/Drivers.h"

#include <llvm/ADT/DenseSet.h>

namespace tmg::detail {

FailureOr<bool> visitGraph(InternalGraph &g, VisitOrder order,
                           const std::function<Expr *(Expr &)> &transform) {
  bool changed = false;
  llvm::DenseSet<const Expr *> visited;
  // Each stack entry: an expr and how many of its inputs were pushed.
  std::vector<std::pair<Expr *, size_t>> stack;
  auto push = [&](Expr *e) {
    if (e && e->inBody() && e->graph() == &g && !visited.count(e))
      stack.emplace_back(e, 0);
  };
  for (auto it = g.outputs().rbegin(); it != g.outputs().rend(); ++it)
    push((*it)->expr());
  // Pops the top expr, transforms it, and queues its replacement.
  auto visitTop = [&]() {
    Expr *cur = stack.back().first;
    stack.pop_back();
    visited.insert(cur);
    Expr *repl = transform(*cur);
    if (repl && repl != cur) {
      changed = true;
      push(repl);
    }
    return cur;
  };
  while (!stack.empty()) {
    auto &[e, next] = stack.back();
    if (visited.count(e)) {
      stack.pop_back();
      continue;
    }
    if (order == VisitOrder::Backward) {
      // Pre-order: the consumer first, then its producers.
      Expr *cur = visitTop();
      for (size_t i = cur->numInputs(); i-- > 0;)
        push(cur->input(i)->expr());
      continue;
    }
    // Post-order: all producers first.
    if (next < e->numInputs()) {
      push(e->input(next++)->expr());
      continue;
    }
    visitTop();
  }
  return changed;
}

FailureOr<bool> repeatVisits(InternalGraph &g, VisitOrder order, bool once, int64_t max,
                             llvm::StringRef pass,
                             const std::function<Expr *(Expr &)> &transform) {
  bool any = false;
  for (int64_t i = 0; i < max; ++i) {
    FailureOr<bool> r = visitGraph(g, order, transform);
    if (r.failed() || !*r || once)
      return r.failed() ? r : FailureOr<bool>(any || *r);
    any = true;
  }
  Diagnostic d(Location::inPass(pass.str()),
               fmt::format("graph '{}' still changes after {} iterations", g.name(), max));
  return d;
}

} // namespace tmg::detail
