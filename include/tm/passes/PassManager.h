//===- PassManager.h - Pipelines and their execution ------------*- C++ -*-===//
//
// Pipelines as text, `flatten,merge-getattr,compile,fixpoint(fuse-add-mul,
// compile){max-iterations=10}`, or as TOML config files; a PassManager runs
// them with instrumentation: verification after each pass, timing, IR
// printing, statistics, and reproducers on failure.
//
// Grammar of the text form:
//   pipeline := element (',' element)*
//   element  := NAME options? | 'fixpoint' '(' pipeline ')' options?
//   options  := '{' (NAME '=' value ','?)* '}'   (commas or spaces between)
//   value    := scalar | '[' (scalar (',' scalar)*)? ']'
//   scalar   := true | false | integer | float | bare-word | "quoted string"
// Each pass checks its options' values against their declared types
// (tm/passes/PassOption.h).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "tm/matcher/RuleDecl.h"
#include "tm/passes/Pass.h"

namespace tmg {

struct PipelineElement {
  enum class Kind : uint8_t { Pass, Fixpoint };
  Kind kind = Kind::Pass;
  std::unique_ptr<Pass> pass;            ///< Kind::Pass
  std::vector<PipelineElement> children; ///< Kind::Fixpoint
  int64_t maxIterations = 10;            ///< Kind::Fixpoint
  bool maxIterationsSet = false;
  Location loc; ///< where it was written

  PipelineElement() = default;
  PipelineElement(PipelineElement &&) = default;
  PipelineElement &operator=(PipelineElement &&) = default;
  PipelineElement clone() const;
};

class Pipeline {
public:
  std::vector<PipelineElement> elements;
  /// Where the pass manager creates the passes a pass requires
  /// (Pass::prerequisites); parse() sets the registry it parsed with.
  /// Borrowed: it must outlive the pipeline's runs.
  const PassRegistry *registry = nullptr;

  /// Parses the text form; errors name `file:line:col` (columns counted
  /// from `col`) and suggest the closest pass or option name.
  static FailureOr<Pipeline> parse(llvm::StringRef text, const PassRegistry &r,
                                   llvm::StringRef file = "<pipeline>",
                                   int64_t line = 1, int64_t col = 1);
  /// Canonical text (explicit options sorted by name).
  std::string str() const;
  Pipeline clone() const;
};

/// Switches of a pipeline run (the `tm-opt` flags and config-file keys).
struct PipelineOptions {
  bool verifyEach = false;
  bool timePasses = false;
  bool printAfterAll = false;
  std::set<std::string> printAfter;
  bool printChanged = false;
  bool stats = false;
  /// Passes to skip (config files: `disabled = [...]`).
  std::set<std::string> disabled;
  /// Called when a pass fails or breaks the module, with the module as it
  /// was before that pass and the pipeline (tm-opt writes a reproducer).
  std::function<void(const TracedModule &, const Pipeline &)> onFailure;
  /// Threads for graph-local passes.
  int threads = 1;
  /// Roll back a failing pass: the module is copied before each pass and,
  /// when the pass fails (throws part-way, returns an error, or leaves a
  /// module that does not verify under verifyEach), restored to that copy,
  /// so a failed run leaves the module as the last successful pass left it.
  /// Costs one module copy per pass; off, a failing pass leaves what it did.
  bool transactional = true;
  /// Receives IR printouts and reports (default: stderr).
  std::function<void(const std::string &)> output;
};

/// A pass that takes the rules declared in a config file (`apply-rules`):
/// the config reader hands them over, so rule errors are reported when the
/// file is read.
class RuleConsumer {
public:
  virtual ~RuleConsumer();
  /// Takes `rules`; the diagnostic of the first rule that does not compile.
  virtual FailureOr<void> setRules(std::vector<RuleDecl> rules) = 0;
};

/// A pipeline read from a TOML config file:
///   [pipeline]
///   passes = ["flatten", "compile", "fixpoint(merge-getattr, compile)"]
///   disabled = ["flatten"]
///   verify-each = true
///   print-after-all = false
///   [passes.replace-node]
///   pairs = "Net_relu_out:Net_x"
///   [[rules]]                       # tm/matcher/RuleDecl.h
struct PipelineFile {
  Pipeline pipeline;
  PipelineOptions options;
  /// `[[rules]]`: given to every `apply-rules` element without a `file`
  /// option; when the pipeline has none, one is appended at the end.
  std::vector<RuleDecl> rules;
};
FailureOr<PipelineFile> parsePipelineFile(const std::string &path,
                                          const PassRegistry &r);
FailureOr<PipelineFile> parsePipelineToml(llvm::StringRef text, const std::string &file,
                                          const PassRegistry &r);

class PassManager {
public:
  PassManager(Pipeline p, PipelineOptions o);

  /// Runs the pipeline on `m`. On failure (a pass error or, with
  /// verifyEach, a verifier error) `onFailure` sees the module from before
  /// that pass, the Diagnostic names the pass, and `m` is restored to its
  /// state before that pass (options.transactional, the default) or left as
  /// the failing pass left it.
  FailureOr<void> run(TracedModule &m);

  const PassContext &context() const { return ctx_; }
  /// The `--time-passes` table.
  std::string timingReport() const;

private:
  FailureOr<bool> runElements(std::vector<PipelineElement> &els, TracedModule &m);
  FailureOr<bool> runPass(Pass &p, TracedModule &m, const Location &loc);
  void emit(const std::string &s);

  Pipeline pipeline_;
  PipelineOptions opts_;
  PassContext ctx_;
  /// Statistics label per pass of the pipeline ("cse", or "cse #2" when
  /// the pipeline holds the pass more than once).
  std::map<const Pass *, std::string> instanceName_;
  std::set<std::string> ran_;
  struct Timing {
    std::string name;
    double seconds = 0;
    int64_t runs = 0;
  };
  std::vector<Timing> timings_;
  double total_ = 0;
};

} // namespace tmg
