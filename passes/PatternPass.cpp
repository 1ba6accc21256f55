//===- PatternPass.cpp - Passes made from rewrite patterns ----------------===//
#include "tm/passes/PatternPass.h"

namespace tmg {

PatternPassBase::~PatternPassBase() = default;

std::vector<OptionSpec> greedyOptionSpecs() {
  return {{"max-iterations", int64_t(10), "rounds of the greedy driver"},
          {"max-rewrites", int64_t(-1), "rewrites at most (-1: no limit)"},
          {"max-growth", int64_t(16),
           "the graph may grow to this many times its size plus 4096 exprs (0: no limit); "
           "hitting it is an error"},
          {"max-time-ms", int64_t(0),
           "wall-clock limit of the driver per graph, in ms (0: none); hitting it is an error"},
          {"test-convergence", false, "fail when the driver does not converge"}};
}

GreedyConfig greedyConfigOf(const Pass &pass) {
  GreedyConfig cfg;
  cfg.maxIterations = pass.intOption("max-iterations");
  cfg.maxRewrites = pass.intOption("max-rewrites");
  cfg.maxGrowth = pass.intOption("max-growth");
  if (cfg.maxGrowth < 0)
    raiseAt(Location::inPass(pass.name().str()),
            "option 'max-growth' must be >= 0 (0: no limit), got {}", cfg.maxGrowth);
  int64_t ms = pass.intOption("max-time-ms");
  if (ms < 0)
    raiseAt(Location::inPass(pass.name().str()),
            "option 'max-time-ms' must be >= 0 (0: no limit), got {}", ms);
  cfg.timeLimit = std::chrono::milliseconds(ms);
  return cfg;
}

FailureOr<bool> reportGreedyRun(const GreedyResult &r, const InternalGraph &g, PassContext &ctx,
                                const Pass &pass) {
  for (const auto &[name, n] : r.matched)
    ctx.count(name + ": matched", n);
  for (const auto &[name, n] : r.applied)
    ctx.count(name + ": applied", n);
  if (r.erased)
    ctx.count("exprs-erased", r.erased);
  if (r.timedOut || r.grewTooLarge)
    return Diagnostic(Location::inPass(pass.name().str()),
                      fmt::format("graph '{}': the pattern driver {}", g.name(), r.str()));
  if (!r.converged) {
    Diagnostic d(Location::inPass(pass.name().str()),
                 fmt::format("graph '{}': {}", g.name(), r.str()));
    if (pass.boolOption("test-convergence"))
      return d;
    d.severity = Diagnostic::Severity::Warning;
    static std::mutex mu;
    std::lock_guard l(mu);
    ctx.remarks().push_back(std::move(d));
  }
  return r.rewrites > 0;
}

FailureOr<bool> PatternPassBase::runPatterns(InternalGraph &g, PassContext &ctx,
                                             const Pass &self,
                                             const std::function<void(PatternSet &)> &populate) {
  std::call_once(shared_->once, [&] {
    PatternSet set;
    populate(set);
    shared_->frozen = std::make_shared<const FrozenPatternSet>(std::move(set));
  });
  GreedyResult r = applyPatternsGreedily(g, *shared_->frozen, greedyConfigOf(self));
  return reportGreedyRun(r, g, ctx, self);
}

} // namespace tmg
