//===- PatternPass.h - Passes made from rewrite patterns --------*- C++ -*-===//
//
// The pass side of the matcher: a PatternPass wraps a pattern set into a
// graph pass that runs the greedy driver (tm/matcher/Driver.h) on every
// graph, with the driver's limits as pass options, and reports the run as
// statistics, remarks or errors.
//
//   struct FoldNegNeg : tmg::PatternPass<FoldNegNeg> {
//     static constexpr const char *Name = "fold-neg-neg";
//     static constexpr const char *Description = "neg(neg(x)) => x";
//     void populate(PatternSet &set) const override { ... }
//   };
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "tm/matcher/Driver.h"
#include "tm/passes/Pass.h"

namespace tmg {

/// The options every pattern-driving pass has (`max-iterations`,
/// `max-rewrites`, `max-time-ms`, `test-convergence`).
std::vector<OptionSpec> greedyOptionSpecs();
/// The driver configuration those options of `pass` ask for.
GreedyConfig greedyConfigOf(const Pass &pass);
/// What a pass reports after a driver run on `g`: counts the matches and
/// rewrites per pattern in `ctx` ("NAME: matched", "NAME: applied"); when the time limit
/// was hit, an error naming the pass,
/// the graph and the patterns that kept firing; when the driver did not
/// converge, an error with `test-convergence`, else a warning remark.
/// Returns whether anything changed.
FailureOr<bool> reportGreedyRun(const GreedyResult &r, const InternalGraph &g, PassContext &ctx,
                                const Pass &pass);

/// A graph pass made from patterns: `populate` adds them once (the frozen
/// set is shared by the pass's clones and threads). Options:
/// `max-iterations`, `max-rewrites`, `max-time-ms` (a wall-clock limit per
/// graph: hitting it is an error), `test-convergence` (fail when the
/// driver does not converge; otherwise it is a remark).
class PatternPassBase {
public:
  virtual ~PatternPassBase();

protected:
  FailureOr<bool> runPatterns(InternalGraph &g, PassContext &ctx, const Pass &self,
                              const std::function<void(PatternSet &)> &populate);
  /// Shared by the pass's clones: the set is built once.
  struct Shared {
    std::once_flag once;
    std::shared_ptr<const FrozenPatternSet> frozen;
  };
  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
};

template <typename Derived>
class PatternPass : public GraphPass<Derived>, public PatternPassBase {
public:
  /// Adds the pass's patterns.
  virtual void populate(PatternSet &set) const = 0;
  std::vector<OptionSpec> optionSpecs() const override { return greedyOptionSpecs(); }
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    return runPatterns(g, ctx, *this, [this](PatternSet &s) { populate(s); });
  }
};

} // namespace tmg
