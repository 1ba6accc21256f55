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

/// The options of every pass that runs the greedy driver, as members of
/// that pass: `GreedyOptions greedy{*this};`.
struct GreedyOptions {
  explicit GreedyOptions(Pass &pass);

  Option<int64_t> maxIterations;
  Option<int64_t> maxRewrites;
  Option<int64_t> maxGrowth;
  Option<int64_t> maxTimeMs;
  Option<bool> testConvergence;

  /// The driver configuration the options ask for. Throws tmg::Error naming
  /// `pass` for a negative growth or time limit.
  GreedyConfig config(llvm::StringRef pass) const;
};

/// What a pass reports after a driver run on `g`: counts the matches and
/// rewrites per pattern in `ctx` ("NAME: matched", "NAME: applied"); when
/// the time or growth limit was hit, an error naming the pass, the graph
/// and the patterns that kept firing; when the driver did not converge, an
/// error with `test-convergence`, else a warning remark. Returns whether
/// anything changed.
FailureOr<bool> reportGreedyRun(const GreedyResult &r, const InternalGraph &g, PassContext &ctx,
                                const Pass &pass, const GreedyOptions &options);

/// A graph pass made from patterns: `populate` adds them once (the frozen
/// set is shared by the pass's clones and threads). Options: those of
/// GreedyOptions.
class PatternPassBase {
public:
  virtual ~PatternPassBase();

protected:
  FailureOr<bool> runPatterns(InternalGraph &g, PassContext &ctx, const Pass &self,
                              const GreedyOptions &options,
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
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override {
    return runPatterns(g, ctx, *this, greedy, [this](PatternSet &s) { populate(s); });
  }

  /// The greedy driver's options (max-iterations, ...).
  GreedyOptions greedy{*this};
};

} // namespace tmg
