//===- RulePasses.h - The passes of declarative rules -----------*- C++ -*-===//
//
// `apply-rules` runs declarative rules (tm/matcher/Rules.h) as a pass;
// `fold-double-relu` is the sample pattern pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tm/matcher/Rules.h"
#include "tm/passes/PassManager.h"
#include "tm/passes/PatternPass.h"

namespace tmg {

/// `apply-rules{file=rules.toml}`: applies declarative rules with the greedy
/// driver. Without `file`, the pass takes the `[[rules]]` of the pipeline
/// config that declares it. With `warn-unused=true`, each rule that matched
/// nothing in the pass's first run is reported as a warning remark at the
/// rule's location. Statistics count "RULE: matched" and "RULE: applied".
class ApplyRulesPass : public GraphPass<ApplyRulesPass>, public RuleConsumer {
public:
  static constexpr const char *Name = "apply-rules";
  static constexpr const char *Description =
      "apply declarative rewrite rules ([[rules]] of the config, or a rules file)";
  Option<std::string> file{*this, "file",
                           llvm::cl::desc("a TOML file of [[rules]] (default: the config's rules)")};
  Option<bool> warnUnused{
      *this, "warn-unused",
      llvm::cl::desc("warn about each rule that matched nothing in the first run of this pass")};
  GreedyOptions greedy{*this};

  FailureOr<void> setRules(std::vector<RuleDecl> rules) override;
  FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) override;
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;

private:
  FailureOr<void> useRules(const std::vector<RuleDecl> &rules);

  /// Which rules matched (shared by the graphs' threads of one run).
  struct Usage {
    std::mutex mu;
    std::vector<std::pair<std::string, Location>> rules;
    std::set<std::string> matched;
    bool reported = false;
  };
  std::shared_ptr<const FrozenPatternSet> rules_;
  std::shared_ptr<Usage> usage_;
  std::string loadedFile_;
};

/// `fold-double-relu`: relu(relu(x)) => relu(x), and the same with relu6 on
/// either side (=> relu6 of x). The sample pattern pass.
struct FoldDoubleReluPass : PatternPass<FoldDoubleReluPass> {
  static constexpr const char *Name = "fold-double-relu";
  static constexpr const char *Description =
      "relu(relu(x)) => relu(x); relu/relu6 chains => relu6(x)";
  void populate(PatternSet &set) const override;
};

/// Registers the matcher's passes (apply-rules, fold-double-relu); safe to
/// call more than once.
void registerMatcherPasses(PassRegistry &r);

} // namespace tmg
