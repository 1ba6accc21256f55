//===- ApplyRules.cpp - The apply-rules pass ------------------------------===//
#include "tm/passes/RulePasses.h"

namespace tmg {

FailureOr<void> ApplyRulesPass::useRules(const std::vector<RuleDecl> &rules) {
  auto set = compileRuleSet(rules);
  if (set.failed())
    return set.diagnostic();
  rules_ = *set;
  usage_ = std::make_shared<Usage>();
  for (const RuleDecl &r : rules)
    usage_->rules.emplace_back(ruleName(r), r.loc);
  return {};
}

FailureOr<void> ApplyRulesPass::setRules(std::vector<RuleDecl> rules) {
  return useRules(rules);
}

FailureOr<bool> ApplyRulesPass::run(TracedModule &m, PassContext &ctx) {
  if (!file->empty() && *file != loadedFile_) {
    auto decls = parseRulesFile(*file);
    if (decls.failed())
      return decls.diagnostic();
    if (auto r = useRules(*decls); r.failed())
      return r.diagnostic();
    loadedFile_ = *file;
  }
  if (!rules_)
    return Diagnostic(Location::inPass(Name),
                      "apply-rules has no rules: give file=... or declare [[rules]] in the "
                      "pipeline config");
  FailureOr<bool> r = GraphPass<ApplyRulesPass>::run(m, ctx);
  if (r.succeeded() && warnUnused && !usage_->reported) {
    usage_->reported = true;
    for (const auto &[name, loc] : usage_->rules)
      if (!usage_->matched.count(name)) {
        Diagnostic d(loc, fmt::format("rule '{}' matched nothing", name),
                     Diagnostic::Severity::Warning);
        d.loc.pass = Name;
        ctx.remark(std::move(d));
      }
  }
  return r;
}

FailureOr<bool> ApplyRulesPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  GreedyResult r = applyPatternsGreedily(g, *rules_, greedy.config(Name));
  {
    std::lock_guard l(usage_->mu);
    for (const auto &[name, n] : r.matched)
      usage_->matched.insert(name);
  }
  return reportGreedyRun(r, g, ctx, *this, greedy);
}

} // namespace tmg
