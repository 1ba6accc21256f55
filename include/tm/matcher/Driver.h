//===- Driver.h - Rewrite patterns and the greedy driver --------*- C++ -*-===//
//
// A RewritePattern is a compiled Pattern plus a rewrite, a benefit and a
// name. A PatternSet collects them; freezing it indexes the patterns by
// root op (schema or module type) and orders each bucket by benefit, so the
// driver looks at one bucket per expr. The greedy driver (MLIR's) keeps a
// worklist of exprs: every expr of the graph first, in order, then the
// exprs an applied rewrite touched (created, rewired, producers of erased
// exprs) that the current round has already visited or will not visit
// (the others see the edit when their turn comes), until nothing is left,
// at most `maxIterations` rounds, `maxRewrites` rewrites and `timeLimit`
// of wall-clock time. Each rewrite runs in a Rewriter transaction: a
// rewrite that fails or throws leaves the graph unchanged. The result says
// whether the driver converged and, when it did not, which patterns kept
// firing.
//
//   PatternSet set;
//   set.add("fold-double-relu", Pattern(fn("relu")(fn("relu")(var("x")).bind("inner"))),
//           [](const Match &m, Rewriter &rw) {
//             return rw.replaceAllUsesWith(m.rootExpr()->output(0), m.node("inner"));
//           });
//   FrozenPatternSet frozen(std::move(set));
//   GreedyResult r = applyPatternsGreedily(graph, frozen);
//
// A frozen set is immutable: several threads may run it on different graphs
// at once (each run has its own Match and worklist).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/matcher/Matcher.h"
#include "tm/matcher/Rewriter.h"

namespace tmg {

/// A pattern and what to do with its matches.
class RewritePattern {
public:
  RewritePattern(std::string name, Pattern pattern, int benefit = 1)
      : name_(std::move(name)), pattern_(std::move(pattern)), benefit_(benefit) {}
  virtual ~RewritePattern();

  const std::string &name() const { return name_; }
  const Pattern &pattern() const { return pattern_; }
  int benefit() const { return benefit_; }

  /// Rewrites a match (new exprs go before the root by default). Return
  /// failure() to decline (the driver then rolls back whatever was done).
  virtual LogicalResult rewrite(const Match &m, Rewriter &rw) const = 0;

private:
  std::string name_;
  Pattern pattern_;
  int benefit_;
};

using RewriteFn = std::function<LogicalResult(const Match &, Rewriter &)>;

/// A set of patterns being assembled.
class PatternSet {
public:
  PatternSet &add(std::unique_ptr<RewritePattern> p);
  /// A pattern with a rewrite function.
  PatternSet &add(std::string name, Pattern pattern, RewriteFn rewrite, int benefit = 1);
  template <typename P, typename... Args> PatternSet &add(Args &&...args) {
    return add(std::make_unique<P>(std::forward<Args>(args)...));
  }
  size_t size() const { return patterns_.size(); }

private:
  friend class FrozenPatternSet;
  std::vector<std::unique_ptr<RewritePattern>> patterns_;
};

/// An immutable pattern set indexed by root op, buckets by descending
/// benefit (insertion order among equals).
class FrozenPatternSet {
public:
  FrozenPatternSet() = default;
  explicit FrozenPatternSet(PatternSet set);

  size_t size() const { return all_.size(); }
  const RewritePattern &pattern(size_t i) const { return *all_[i]; }
  /// Index of pattern `p` of this set (as `pattern(i)`).
  size_t indexOf(const RewritePattern *p) const { return order_.lookup(p); }
  /// Candidate patterns for `e`, best first (appended to `out`).
  void candidates(const Expr *e, llvm::SmallVectorImpl<const RewritePattern *> &out) const;
  /// The candidates of `e` without a copy when one bucket holds them all
  /// (a function, method or Apply: its op's patterns); otherwise they are
  /// gathered in `scratch` (cleared first), which is returned.
  llvm::ArrayRef<const RewritePattern *>
  candidatesOf(const Expr *e, llvm::SmallVectorImpl<const RewritePattern *> &scratch) const;

private:
  std::vector<std::unique_ptr<RewritePattern>> all_;
  llvm::DenseMap<RootKey, llvm::SmallVector<const RewritePattern *, 2>> byRoot_;
  llvm::DenseMap<const RewritePattern *, size_t> order_;
};

struct GreedyConfig {
  /// Rounds of the worklist (round 1 visits every expr, round k+1 what
  /// round k's rewrites touched and round k did not visit after them).
  int64_t maxIterations = 10;
  /// Rewrites at most (-1: no limit).
  int64_t maxRewrites = -1;
  /// Wall-clock limit of the whole run (0: none). When it is hit the driver
  /// stops after the rewrite in progress (the graph is valid: every
  /// committed rewrite is complete) and the result says `timedOut`.
  std::chrono::nanoseconds timeLimit{0};
  /// The graph may grow to at most maxGrowth times its expr count at the
  /// start, plus 4096 exprs (0: no limit). Rewrites that keep expanding the
  /// graph (a replacement that contains what it matches grows it
  /// exponentially round by round) stop there; the result says
  /// `grewTooLarge`, and the pattern passes report it as an error.
  int64_t maxGrowth = 16;
  /// Erase exprs a rewrite left dead (and their producers that became dead).
  bool eraseDeadExprs = true;
  /// With a listener, the driver reports each committed rewrite.
  std::function<void(const RewritePattern &, Expr *root)> onRewrite;
  /// With explain on, a debug stream gets every failed match's explanation.
  std::function<void(const RewritePattern &, const std::string &)> onMatchFailure;
};

struct GreedyResult {
  bool converged = true;
  /// Stopped by GreedyConfig::timeLimit (then not converged).
  bool timedOut = false;
  std::chrono::nanoseconds timeLimit{0};
  /// Stopped by GreedyConfig::maxGrowth (then not converged): the graph had
  /// startSize exprs and reached endSize.
  bool grewTooLarge = false;
  int64_t startSize = 0, endSize = 0;
  int64_t iterations = 0;
  int64_t rewrites = 0;
  int64_t erased = 0;
  /// Rewrites per pattern name over the whole run (sorted by name).
  std::vector<std::pair<std::string, int64_t>> applied;
  /// Successful matches per pattern name (sorted by name), whether or not
  /// the rewrite then applied; patterns that never matched are absent.
  std::vector<std::pair<std::string, int64_t>> matched;
  /// When not converged: the patterns that fired in the last two rounds
  /// (two, so both sides of a ping-pong show), with counts, sorted by
  /// count, then name.
  std::vector<std::pair<std::string, int64_t>> stillFiring;
  /// "converged after 2 rounds, 12 rewrites" or "did not converge after 10
  /// rounds (12 rewrites); still firing: a (5), b (5)".
  std::string str() const;
};

/// Runs the greedy driver on one graph.
GreedyResult applyPatternsGreedily(InternalGraph &g, const FrozenPatternSet &patterns,
                                   const GreedyConfig &config = {});

} // namespace tmg
