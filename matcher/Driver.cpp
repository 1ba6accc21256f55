//===- Driver.cpp - Pattern sets and the greedy worklist driver -----------===//
#include "tm/matcher/Driver.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace tmg {

RewritePattern::~RewritePattern() = default;

namespace {
struct FnPattern : RewritePattern {
  FnPattern(std::string name, Pattern p, RewriteFn f, int benefit)
      : RewritePattern(std::move(name), std::move(p), benefit), fn(std::move(f)) {}
  LogicalResult rewrite(const Match &m, Rewriter &rw) const override { return fn(m, rw); }
  RewriteFn fn;
};
} // namespace

PatternSet &PatternSet::add(std::unique_ptr<RewritePattern> p) {
  if (!p)
    raise("pattern set: null pattern");
  patterns_.push_back(std::move(p));
  return *this;
}

PatternSet &PatternSet::add(std::string name, Pattern pattern, RewriteFn rewrite, int benefit) {
  if (!rewrite)
    raise("pattern set: pattern '{}' has no rewrite function", name);
  return add(std::make_unique<FnPattern>(std::move(name), std::move(pattern),
                                         std::move(rewrite), benefit));
}

FrozenPatternSet::FrozenPatternSet(PatternSet set) : all_(std::move(set.patterns_)) {
  for (size_t i = 0; i < all_.size(); ++i) {
    const RewritePattern *p = all_[i].get();
    order_[p] = i;
    for (RootKey k : p->pattern().rootKeys())
      byRoot_[k].push_back(p);
  }
  for (auto &[k, bucket] : byRoot_)
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const RewritePattern *a, const RewritePattern *b) {
                       return a->benefit() > b->benefit();
                     });
}

void FrozenPatternSet::candidates(const Expr *e,
                                  llvm::SmallVectorImpl<const RewritePattern *> &out) const {
  size_t start = out.size();
  size_t buckets = 0;
  auto addBucket = [&](RootKey k) {
    auto it = byRoot_.find(k);
    if (it == byRoot_.end())
      return;
    ++buckets;
    out.append(it->second.begin(), it->second.end());
  };
  if (const OpSchema *op = e->opSchema()) {
    // A function, tensor method or Apply: its op is the key.
    addBucket(op);
  } else if (auto *cm = llvm::dyn_cast<CallMethod>(e)) {
    // A module call: its type and base types, then any module.
    if (cm->numInputs())
      if (auto *mn = llvm::dyn_cast<ModuleNode>(cm->input(0)))
        for (const ModuleType *t = &mn->moduleType(); t; t = t->base)
          addBucket(t);
    addBucket(anyModuleRootKey());
  }
  if (buckets > 1) {
    // Several buckets (module base types): merge by benefit, then order.
    std::sort(out.begin() + start, out.end(),
              [&](const RewritePattern *a, const RewritePattern *b) {
                if (a->benefit() != b->benefit())
                  return a->benefit() > b->benefit();
                return order_.lookup(a) < order_.lookup(b);
              });
    out.erase(std::unique(out.begin() + start, out.end()), out.end());
  }
}

llvm::ArrayRef<const RewritePattern *>
FrozenPatternSet::candidatesOf(const Expr *e,
                               llvm::SmallVectorImpl<const RewritePattern *> &scratch) const {
  if (const OpSchema *op = e->opSchema()) {
    auto it = byRoot_.find(op);
    if (it == byRoot_.end())
      return {};
    return it->second;
  }
  scratch.clear();
  candidates(e, scratch);
  return scratch;
}

std::string GreedyResult::str() const {
  if (grewTooLarge) {
    std::string firing;
    for (const auto &[n, c] : stillFiring)
      firing += fmt::format("{}{} ({})", firing.empty() ? "" : ", ", n, c);
    return fmt::format("stopped in round {} ({} rewrite{}): the graph grew from {} to {} exprs, "
                       "past the growth limit (max-growth); patterns that fired in the last two "
                       "rounds: {}",
                       iterations, rewrites, rewrites == 1 ? "" : "s", startSize, endSize,
                       firing.empty() ? std::string("-") : firing);
  }
  if (timedOut) {
    std::string firing;
    for (const auto &[n, c] : stillFiring)
      firing += fmt::format("{}{} ({})", firing.empty() ? "" : ", ", n, c);
    return fmt::format("stopped by the time limit of {} ms in round {} ({} rewrite{}); "
                       "patterns that fired in the last two rounds: {}",
                       std::chrono::duration_cast<std::chrono::milliseconds>(timeLimit).count(),
                       iterations, rewrites, rewrites == 1 ? "" : "s",
                       firing.empty() ? std::string("-") : firing);
  }
  if (converged)
    return fmt::format("converged after {} round{}, {} rewrite{}", iterations,
                       iterations == 1 ? "" : "s", rewrites, rewrites == 1 ? "" : "s");
  std::string firing;
  for (const auto &[n, c] : stillFiring)
    firing += fmt::format("{}{} ({})", firing.empty() ? "" : ", ", n, c);
  return fmt::format("did not converge after {} round{} ({} rewrite{}); still firing: {}",
                     iterations, iterations == 1 ? "" : "s", rewrites, rewrites == 1 ? "" : "s",
                     firing.empty() ? std::string("-") : firing);
}

namespace {

/// The driver's worklist. A round visits `cur` in order; the exprs an edit
/// touches are queued for the next round, except those the current round
/// has still to visit (they see the edit when their turn comes, as with
/// MLIR's single worklist).
///
/// Membership is kept in two scratch flags of the exprs (Expr::scratchFlag),
/// not in maps: on a large graph a map lookup is a cache miss, the expr's
/// first line is usually cached already. InRound: in `cur` and not visited
/// yet (set on every expr of `cur` when the round starts, which also makes
/// the flags of an earlier algorithm irrelevant); Queued: in `next`.
///
/// Entries of `cur` and `next` are raw pointers, and rewrites erase exprs:
/// the rewriter keeps an erased expr allocated while either flag is set
/// (out of the body, `inBody()` false) until the round ends, so that the
/// round skips it and the next one drops it, and its address is not
/// reused meanwhile. Other erased exprs are destroyed at once.
struct Worklist : RewriteListener {
  enum : unsigned { InRound = 0, Queued = 1 };
  std::vector<Expr *> cur, next;
  InternalGraph *g = nullptr;

  /// True when the current round will still visit `e`.
  static bool pending(const Expr *e) { return e->scratchFlag(InRound); }
  static bool keep(const Expr *e) { return e->scratchFlag(InRound) || e->scratchFlag(Queued); }
  void queue(Expr *e) {
    if (!e->scratchFlag(Queued)) {
      e->setScratchFlag(Queued, true);
      next.push_back(e);
    }
  }
  void push(Expr *e) {
    if (e && e->inBody() && e->graph() == g && !pending(e))
      queue(e);
  }
  /// The first round: the whole body.
  void firstRound() {
    cur.clear();
    cur.reserve(g->size());
    for (Expr *e : g->body()) {
      e->setScratchFlag(InRound, true);
      e->setScratchFlag(Queued, false);
      cur.push_back(e);
    }
  }
  /// Makes the queued exprs the next round (dropping those erased since).
  void nextRound() {
    cur.clear();
    for (Expr *e : next)
      if (e->inBody()) {
        e->setScratchFlag(InRound, true);
        e->setScratchFlag(Queued, false);
        cur.push_back(e);
      }
    next.clear();
  }

  void notifyInserted(Expr *e) override {
    // (An expr inserted and erased by the same rewrite is out of the body
    // by now, and destroyed at the end of the commit.)
    if (e->inBody() && e->graph() == g)
      queue(e);
  }
  void notifyInputsChanged(Expr *user) override { push(user); }
  void notifyUseRemoved(Node *n) override {
    // The producer may be dead now; and, as in MLIR, a value left with one
    // use may now satisfy a check_users pattern rooted at that user. (Not
    // every user: a value with many users, such as a graph input, would
    // make each erasure cost O(users).)
    push(n->expr());
    if (n->numUsers() == 1)
      push(*n->users().begin());
  }
};

} // namespace

GreedyResult applyPatternsGreedily(InternalGraph &g, const FrozenPatternSet &patterns,
                                   const GreedyConfig &config) {
  using Clock = std::chrono::steady_clock;
  GreedyResult result;
  Worklist wl;
  wl.g = &g;
  Rewriter rw(g);
  rw.addListener(&wl);
  rw.setKeepErased(&Worklist::keep);
  Match m;
  m.setExplain(bool(config.onMatchFailure));
  wl.firstRound();
  std::vector<int64_t> total(patterns.size(), 0), matches(patterns.size(), 0),
      round(patterns.size(), 0),
      prevRound(patterns.size(), 0), prevRound2(patterns.size(), 0);
  llvm::SmallVector<const RewritePattern *, 8> cands;
  const bool timed = config.timeLimit.count() > 0;
  const Clock::time_point deadline = timed ? Clock::now() + config.timeLimit : Clock::time_point();
  uint32_t sinceClock = 0;
  bool limitHit = false;
  int64_t roundRewrites = 0;
  result.startSize = int64_t(g.size());
  const int64_t sizeLimit =
      config.maxGrowth > 0 ? config.maxGrowth * result.startSize + 4096 : INT64_MAX;
  while (!wl.cur.empty() && !limitHit) {
    if (result.iterations == config.maxIterations) {
      result.converged = false;
      break;
    }
    ++result.iterations;
    prevRound2.swap(prevRound);
    prevRound.swap(round);
    std::fill(round.begin(), round.end(), 0);
    roundRewrites = 0;
    for (size_t i = 0, n = wl.cur.size(); i < n; ++i) {
      Expr *e = wl.cur[i];
      if (!e->inBody())
        continue;
      e->setScratchFlag(Worklist::InRound, false);
      // The clock is read every 64 visits or rewrites.
      if (timed && ++sinceClock >= 64) {
        sinceClock = 0;
        if (Clock::now() >= deadline) {
          result.timedOut = true;
          limitHit = true;
          break;
        }
      }
      for (const RewritePattern *p : patterns.candidatesOf(e, cands)) {
        if (!m.match(p->pattern(), e)) {
          if (config.onMatchFailure)
            config.onMatchFailure(*p, m.explanation());
          continue;
        }
        ++matches[patterns.indexOf(p)];
        if (config.maxRewrites >= 0 && result.rewrites >= config.maxRewrites) {
          limitHit = true;
          break;
        }
        if (int64_t(g.size()) > sizeLimit) {
          result.grewTooLarge = true;
          limitHit = true;
          break;
        }
        rw.setInsertionPoint(e);
        rw.begin();
        bool ok = false;
        try {
          ok = succeeded(p->rewrite(m, rw));
          if (ok && config.eraseDeadExprs)
            for (Expr *x : m.matchedExprs())
              if (x->inBody())
                result.erased += int64_t(rw.eraseIfDead(x));
        } catch (const Error &) {
          ok = false;
        }
        if (!ok) {
          rw.rollback();
          continue;
        }
        // Listeners see `e` erased (if it is) during the commit.
        bool rootErased = !e->inBody();
        rw.commit();
        ++result.rewrites;
        ++roundRewrites;
        size_t pi = patterns.indexOf(p);
        ++round[pi];
        ++total[pi];
        if (config.onRewrite)
          config.onRewrite(*p, rootErased ? nullptr : e);
        if (timed)
          sinceClock += 8;
        break;
      }
      if (limitHit)
        break;
    }
    wl.nextRound();
    rw.releaseErased();
  }
  if (limitHit)
    result.converged = false;
  result.endSize = int64_t(g.size());
  if (timed)
    result.timeLimit = config.timeLimit;
  std::map<std::string, int64_t> applied, matched, firing;
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (total[i])
      applied[patterns.pattern(i).name()] += total[i];
    if (matches[i])
      matched[patterns.pattern(i).name()] += matches[i];
    // A round the time limit cut short before any rewrite does not count.
    int64_t last2 = roundRewrites || !(result.timedOut || result.grewTooLarge)
                        ? round[i] + prevRound[i]
                                                      : prevRound[i] + prevRound2[i];
    if (last2)
      firing[patterns.pattern(i).name()] += last2;
  }
  result.applied.assign(applied.begin(), applied.end());
  result.matched.assign(matched.begin(), matched.end());
  if (!result.converged) {
    result.stillFiring.assign(firing.begin(), firing.end());
    std::stable_sort(result.stillFiring.begin(), result.stillFiring.end(),
                     [](const auto &a, const auto &b) { return a.second > b.second; });
  }
  return result;
}

} // namespace tmg
