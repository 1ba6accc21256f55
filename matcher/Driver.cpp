//===- Driver.cpp - Pattern sets and the greedy worklist driver -----------===//
#include "tm/matcher/Driver.h"

#include <algorithm>
#include <map>

#include <llvm/ADT/DenseSet.h>

namespace tmg {

RewritePattern::~RewritePattern() = default;
PatternPassBase::~PatternPassBase() = default;

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
  switch (e->kind()) {
  case Expr::Kind::CallFunction: addBucket(&llvm::cast<CallFunction>(e)->func()); break;
  case Expr::Kind::Apply: addBucket(&llvm::cast<Apply>(e)->opdef()); break;
  case Expr::Kind::CallMethod: {
    auto *cm = llvm::cast<CallMethod>(e);
    if (!cm->isModuleCall()) {
      addBucket(cm->methodSchema());
      break;
    }
    if (cm->numInputs())
      if (auto *mn = llvm::dyn_cast<ModuleNode>(cm->input(0)))
        for (const ModuleType *t = &mn->moduleType(); t; t = t->base)
          addBucket(t);
    addBucket(anyModuleRootKey());
    break;
  }
  default:
    break;
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

std::string GreedyResult::str() const {
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

/// The driver's worklist: the next round's exprs, and the exprs erased so
/// far (so stale entries of the current round are skipped).
struct Worklist : RewriteListener {
  std::vector<Expr *> next;
  llvm::DenseSet<Expr *> inNext;
  llvm::DenseSet<Expr *> erased;

  void push(Expr *e) {
    if (e && e->inBody() && inNext.insert(e).second)
      next.push_back(e);
  }
  void notifyInserted(Expr *e) override {
    erased.erase(e);
    push(e);
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
  void notifyErased(Expr *e, llvm::ArrayRef<Node *>) override {
    // Entries of `e` already queued stay; they are skipped through `erased`
    // (nulling them here would cost a scan per erasure).
    erased.insert(e);
    inNext.erase(e);
  }
};

} // namespace

GreedyResult applyPatternsGreedily(InternalGraph &g, const FrozenPatternSet &patterns,
                                   const GreedyConfig &config) {
  GreedyResult result;
  Worklist wl;
  Rewriter rw(g);
  rw.addListener(&wl);
  Match m;
  m.setExplain(bool(config.onMatchFailure));
  std::vector<Expr *> cur;
  cur.reserve(g.size());
  for (Expr *e : g.body())
    cur.push_back(e);
  std::vector<int64_t> total(patterns.size(), 0), round(patterns.size(), 0),
      prevRound(patterns.size(), 0);
  llvm::DenseMap<const RewritePattern *, size_t> index;
  for (size_t i = 0; i < patterns.size(); ++i)
    index[&patterns.pattern(i)] = i;
  llvm::SmallVector<const RewritePattern *, 8> cands;
  bool limitHit = false;
  while (!cur.empty() && !limitHit) {
    if (result.iterations == config.maxIterations) {
      result.converged = false;
      break;
    }
    ++result.iterations;
    prevRound.swap(round);
    std::fill(round.begin(), round.end(), 0);
    for (Expr *e : cur) {
      if (!e || (!wl.erased.empty() && wl.erased.count(e)) || !e->inBody())
        continue;
      cands.clear();
      patterns.candidates(e, cands);
      for (const RewritePattern *p : cands) {
        if (!m.match(p->pattern(), e)) {
          if (config.onMatchFailure)
            config.onMatchFailure(*p, m.explanation());
          continue;
        }
        if (config.maxRewrites >= 0 && result.rewrites >= config.maxRewrites) {
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
        Expr *root = e;
        bool rootErased = !root->inBody();
        rw.commit();
        ++result.rewrites;
        size_t pi = index.lookup(p);
        ++round[pi];
        ++total[pi];
        if (config.onRewrite)
          config.onRewrite(*p, rootErased ? nullptr : root);
        break;
      }
      if (limitHit)
        break;
    }
    cur.swap(wl.next);
    wl.next.clear();
    wl.inNext.clear();
  }
  if (limitHit)
    result.converged = false;
  std::map<std::string, int64_t> applied, firing;
  for (size_t i = 0; i < patterns.size(); ++i) {
    if (total[i])
      applied[patterns.pattern(i).name()] += total[i];
    if (round[i] + prevRound[i])
      firing[patterns.pattern(i).name()] += round[i] + prevRound[i];
  }
  result.applied.assign(applied.begin(), applied.end());
  if (!result.converged) {
    result.stillFiring.assign(firing.begin(), firing.end());
    std::stable_sort(result.stillFiring.begin(), result.stillFiring.end(),
                     [](const auto &a, const auto &b) { return a.second > b.second; });
  }
  return result;
}

FailureOr<bool> PatternPassBase::runPatterns(InternalGraph &g, PassContext &ctx,
                                             const Pass &self,
                                             const std::function<void(PatternSet &)> &populate) {
  std::call_once(shared_->once, [&] {
    PatternSet set;
    populate(set);
    shared_->frozen = std::make_shared<const FrozenPatternSet>(std::move(set));
  });
  GreedyConfig cfg;
  cfg.maxIterations = self.intOption("max-iterations");
  cfg.maxRewrites = self.intOption("max-rewrites");
  GreedyResult r = applyPatternsGreedily(g, *shared_->frozen, cfg);
  for (const auto &[name, n] : r.applied)
    ctx.count(name, n);
  if (r.erased)
    ctx.count("exprs-erased", r.erased);
  if (!r.converged) {
    Diagnostic d(Location::inPass(self.name().str()),
                 fmt::format("graph '{}': {}", g.name(), r.str()));
    if (self.boolOption("test-convergence"))
      return d;
    d.severity = Diagnostic::Severity::Warning;
    static std::mutex mu;
    std::lock_guard l(mu);
    ctx.remarks().push_back(std::move(d));
  }
  return r.rewrites > 0;
}

} // namespace tmg
