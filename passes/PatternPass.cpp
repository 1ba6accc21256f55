//===- PatternPass.cpp - Passes made from rewrite patterns ----------------===//
#include "tm/passes/PatternPass.h"

namespace tmg {

PatternPassBase::~PatternPassBase() = default;

GreedyOptions::GreedyOptions(Pass &pass)
    : maxIterations{pass, "max-iterations", llvm::cl::desc("rounds of the greedy driver"),
                    llvm::cl::init(10)},
      maxRewrites{pass, "max-rewrites", llvm::cl::desc("rewrites at most (-1: no limit)"),
                  llvm::cl::init(-1)},
      maxGrowth{pass, "max-growth",
                llvm::cl::desc("the graph may grow to this many times its size plus 4096 "
                               "exprs (0: no limit); hitting it is an error"),
                llvm::cl::init(16)},
      maxTimeMs{pass, "max-time-ms",
                llvm::cl::desc("wall-clock limit of the driver per graph, in ms (0: none); "
                               "hitting it is an error"),
                llvm::cl::init(0)},
      testConvergence{pass, "test-convergence",
                      llvm::cl::desc("fail when the driver does not converge"),
                      llvm::cl::init(false)} {}

GreedyConfig GreedyOptions::config(llvm::StringRef pass) const {
  GreedyConfig cfg;
  cfg.maxIterations = maxIterations;
  cfg.maxRewrites = maxRewrites;
  cfg.maxGrowth = maxGrowth;
  if (cfg.maxGrowth < 0)
    raiseAt(Location::inPass(pass.str()),
            "option 'max-growth' must be >= 0 (0: no limit), got {}", cfg.maxGrowth);
  if (maxTimeMs < 0)
    raiseAt(Location::inPass(pass.str()),
            "option 'max-time-ms' must be >= 0 (0: no limit), got {}", *maxTimeMs);
  cfg.timeLimit = std::chrono::milliseconds(*maxTimeMs);
  return cfg;
}

FailureOr<bool> reportGreedyRun(const GreedyResult &r, const InternalGraph &g, PassContext &ctx,
                                const Pass &pass, const GreedyOptions &options) {
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
    if (options.testConvergence)
      return d;
    d.severity = Diagnostic::Severity::Warning;
    ctx.remark(std::move(d));
  }
  return r.rewrites > 0;
}

FailureOr<bool> PatternPassBase::runPatterns(InternalGraph &g, PassContext &ctx,
                                             const Pass &self,
                                             const GreedyOptions &options,
                                             const std::function<void(PatternSet &)> &populate) {
  std::call_once(shared_->once, [&] {
    PatternSet set;
    populate(set);
    shared_->frozen = std::make_shared<const FrozenPatternSet>(std::move(set));
  });
  GreedyResult r = applyPatternsGreedily(g, *shared_->frozen, options.config(self.name()));
  return reportGreedyRun(r, g, ctx, self, options);
}

} // namespace tmg
