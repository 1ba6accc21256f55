//===- Pass.h - Passes, options and the pass registry -----------*- C++ -*-===//
//
// A pass has a kebab-case name, a one-line description, typed options
// declared as members (tm/passes/PassOption.h), declared prerequisites, and
// `run(TracedModule&, PassContext&)` which reports whether it changed
// anything (or a Diagnostic). Passes are registered by explicit functions
// (registerBuiltinPasses) or by plugins; the pass manager creates them by
// name from pipelines.
//
//   struct FoldNegNeg : tmg::PassWrapper<FoldNegNeg> {
//     static constexpr const char *Name = "fold-neg-neg";
//     static constexpr const char *Description = "neg(neg(x)) => x";
//     FailureOr<bool> run(TracedModule &m, PassContext &ctx) override;
//   };
//   registry.add<FoldNegNeg>();
//
//===----------------------------------------------------------------------===//
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Suggest.h"
#include "tm/ir/TracedModule.h"
#include "tm/passes/PassOption.h"

namespace tmg {

class PassContext;

class Pass {
public:
  virtual ~Pass();
  virtual llvm::StringRef name() const = 0;
  virtual llvm::StringRef description() const = 0;
  /// Passes that must run first (by name); the pass manager runs them.
  virtual std::vector<std::string> prerequisites() const { return {}; }
  /// Runs on `m`; returns whether anything changed, or a Diagnostic.
  virtual FailureOr<bool> run(TracedModule &m, PassContext &ctx) = 0;
  /// True when the pass, whenever it fails (returns a Diagnostic or throws
  /// tmg::Error), leaves the module exactly as it found it: it checks
  /// everything before it changes anything. The pass manager then takes no
  /// transactional snapshot for it (a module copy per pass), unless
  /// verify-each or a failure callback needs the module's earlier state.
  /// Memory exhaustion part-way is not covered. Default: false.
  virtual bool isAtomic() const { return false; }
  virtual std::unique_ptr<Pass> clone() const = 0;

  /// The options the pass declares (Option/ListOption members), in
  /// declaration order.
  llvm::ArrayRef<PassOptionBase *> options() const { return options_; }
  /// The option named `name`, or nullptr.
  PassOptionBase *findOption(llvm::StringRef name) const;
  /// Sets an option from a value as written (type-checked by the option).
  /// Returns a Diagnostic naming the pass, the option and the expected
  /// type, or the closest option name for an unknown one.
  FailureOr<void> setOption(llvm::StringRef name, const OptionValue &v);

protected:
  Pass() = default;
  /// A copy starts without options: the copied Option members attach
  /// themselves to it.
  Pass(const Pass &) {}
  Pass &operator=(const Pass &) { return *this; }

private:
  friend class PassOptionBase;
  std::vector<PassOptionBase *> options_;
};

/// CRTP helper: name, description and cloning from the derived class's
/// `Name` and `Description` constants.
template <typename Derived> class PassWrapper : public Pass {
public:
  llvm::StringRef name() const override { return Derived::Name; }
  llvm::StringRef description() const override { return Derived::Description; }
  std::unique_ptr<Pass> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived &>(*this));
  }
};

/// Counters a pass reports (`--stats`): "exprs-removed", ... Thread-safe.
class PassStatistics {
public:
  void add(llvm::StringRef pass, llvm::StringRef counter, int64_t n);
  /// pass -> counter -> value, sorted.
  const std::map<std::string, std::map<std::string, int64_t>> &all() const { return c_; }
  std::string str() const;

private:
  std::mutex mu_;
  std::map<std::string, std::map<std::string, int64_t>> c_;
};

/// State shared by the passes of one pipeline run.
class PassContext {
public:
  /// Analysis `A` (constructible from `const InternalGraph &`) of `g`,
  /// computed on first use and reused until the graph changes (its version
  /// moves), so passes that change nothing keep analyses valid.
  template <typename A> const A &analysis(const InternalGraph &g) {
    std::lock_guard l(analysesMu_);
    auto &slot = analyses_[{std::type_index(typeid(A)), &g}];
    if (!slot.value || slot.version != g.version()) {
      slot.value = std::make_shared<A>(g);
      slot.version = g.version();
      ++analysisComputations_;
    }
    return *static_cast<const A *>(slot.value.get());
  }
  /// Drops every cached analysis (after a rollback replaced the graphs).
  void invalidateAnalyses() {
    std::lock_guard l(analysesMu_);
    analyses_.clear();
  }
  /// How many analyses were (re)computed (for tests and --stats).
  int64_t analysisComputations() const { return analysisComputations_; }

  PassStatistics &stats() { return stats_; }
  /// Counts `n` under the running pass's name.
  void count(llvm::StringRef counter, int64_t n = 1);
  void setCurrentPass(std::string p) { current_ = std::move(p); }
  const std::string &currentPass() const { return current_; }
  /// Adds a remark for `--debug`-style output (e.g. skipped uses); safe
  /// from the threads of a graph-local pass.
  void remark(Diagnostic d) {
    std::lock_guard l(remarksMu_);
    remarks_.push_back(std::move(d));
  }
  /// The remarks so far, in the order they were added.
  const std::vector<Diagnostic> &remarks() const { return remarks_; }
  /// Threads graph-local passes may use (1: sequential).
  int threads = 1;

private:
  struct CachedAnalysis {
    uint64_t version = 0;
    std::shared_ptr<void> value;
  };
  std::mutex analysesMu_;
  std::map<std::pair<std::type_index, const InternalGraph *>, CachedAnalysis> analyses_;
  int64_t analysisComputations_ = 0;
  PassStatistics stats_;
  std::mutex remarksMu_;
  std::vector<Diagnostic> remarks_;
  std::string current_;
};

/// A pass that works on each graph independently (every graph of every
/// module of the hierarchy): with `PassContext::threads > 1` the graphs are
/// processed in parallel, with the same result as sequentially. Graph-local
/// passes must not create exprs or nodes in other graphs, nor touch module
/// attributes.
template <typename Derived> class GraphPass : public PassWrapper<Derived> {
public:
  virtual FailureOr<bool> runOnGraph(InternalGraph &g, PassContext &ctx) = 0;
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override {
    return runOnEachGraph(m, ctx, [this](InternalGraph &g, PassContext &c) {
      return runOnGraph(g, c);
    });
  }
};

/// Every graph of `m`'s hierarchy (each call signature's of each traced
/// module), in declaration order (the .tmir file's).
std::vector<InternalGraph *> graphsOf(TracedModule &m);

/// Runs `fn` on every graph of `m`'s hierarchy, on `ctx.threads` threads;
/// returns whether any changed, or the first failure in graph order.
FailureOr<bool> runOnEachGraph(
    TracedModule &m, PassContext &ctx,
    const std::function<FailureOr<bool>(InternalGraph &, PassContext &)> &fn);

/// Registry of pass factories by name.
class PassRegistry {
public:
  using Factory = std::function<std::unique_ptr<Pass>()>;

  /// Registers `f` under `name`; throws tmg::Error when the name is taken.
  void add(const std::string &name, Factory f);
  template <typename P> void add() {
    add(P::Name, [] { return std::make_unique<P>(); });
  }
  bool contains(llvm::StringRef name) const;
  /// A new instance, or nullptr.
  std::unique_ptr<Pass> create(llvm::StringRef name) const;
  /// Registered names, sorted.
  std::vector<std::string> names() const;
  /// The registered name closest to `name` (for "did you mean"); presets
  /// count as names.
  std::string closest(llvm::StringRef name) const;

  /// A pipeline preset: a name the pipeline parser expands into `text`
  /// (e.g. `optimize`), so `-p optimize,compile` works and
  /// `--dump-pipeline` shows the expansion. Throws tmg::Error when the name
  /// is taken by a pass or another preset.
  struct Preset {
    std::string name, text, description;
  };
  void addPreset(const std::string &name, std::string text, std::string description);
  /// nullptr when `name` is no preset.
  const Preset *preset(llvm::StringRef name) const;
  /// Presets by name.
  std::vector<const Preset *> presets() const;

private:
  std::map<std::string, Factory> factories_;
  std::map<std::string, Preset> presets_;
};

/// Registers the structural passes of this library (flatten, compile,
/// merge-getattr, replace-node, verify); safe to call more than once.
/// `registerAllPasses` (tm/InitAllPasses.h) registers every pass tmgraph has.
void registerBuiltinPasses(PassRegistry &r);

/// Loads a pass plugin: a shared library exporting
/// `extern "C" void tmgRegisterPasses(tmg::PassRegistry &)`.
FailureOr<void> loadPassPlugin(const std::string &path, PassRegistry &r);

} // namespace tmg

/// Plugins define this function (see examples/plugin).
#define TMG_PASS_PLUGIN_ENTRY extern "C" void tmgRegisterPasses(tmg::PassRegistry &registry)
