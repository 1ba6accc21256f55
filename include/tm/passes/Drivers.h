//===- Drivers.h - The reference's ForwardPass and BackwardPass -*- C++ -*-===//
//
// Expr-visiting drivers with the reference's orders, for passes written as
// "look at one expr, maybe rewrite it":
//  * ForwardPass visits the exprs the outputs depend on, producers before
//    consumers (post-order of a depth-first walk from the outputs);
//  * BackwardPass visits consumers before producers (pre-order).
// `transform` returns the expr that replaces the visited one (it is visited
// next) or nullptr when nothing changed. Transforms insert and rewire; they
// must not erase exprs (dead exprs go with a later `compile`), so the walk
// never sees a dangling expr. With runOnce() false the walk repeats until
// nothing changes, at most maxIterations() times (then the pass fails, as
// the reference's 100-iteration cap).
//
// Every visit is O(1) besides the transform: the walk is linear in the
// exprs it reaches (the reference's `in queue` lists make it quadratic).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/DenseSet.h>

#include "tm/passes/Pass.h"

namespace tmg {

namespace detail {
enum class VisitOrder { Forward, Backward };
/// One walk over `g`; returns whether any transform changed something.
FailureOr<bool> visitGraph(InternalGraph &g, VisitOrder order,
                           const std::function<Expr *(Expr &)> &transform);
FailureOr<bool> repeatVisits(InternalGraph &g, VisitOrder order, bool once, int64_t max,
                             llvm::StringRef pass,
                             const std::function<Expr *(Expr &)> &transform);
} // namespace detail

template <typename Derived> class ExprVisitPass : public GraphPass<Derived> {
public:
  /// Rewrites `e`; returns the replacement expr, or nullptr for no change.
  virtual Expr *transform(Expr &e, PassContext &ctx) = 0;
  /// The reference's `run_once`.
  virtual bool runOnce() const { return true; }
  virtual int64_t maxIterations() const { return 100; }

protected:
  FailureOr<bool> visit(InternalGraph &g, PassContext &ctx, detail::VisitOrder order) {
    return detail::repeatVisits(g, order, runOnce(), maxIterations(), this->name(),
                                [&](Expr &e) { return transform(e, ctx); });
  }
};

template <typename Derived> class ForwardPass : public ExprVisitPass<Derived> {
public:
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    return this->visit(g, ctx, detail::VisitOrder::Forward);
  }
};

template <typename Derived> class BackwardPass : public ExprVisitPass<Derived> {
public:
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    return this->visit(g, ctx, detail::VisitOrder::Backward);
  }
};

} // namespace tmg
