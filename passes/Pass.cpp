//===- Pass.cpp - Passes, options, registry, plugins ----------------------===//
#include "tm/passes/Pass.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "tm/ir/TreeDef.h"

namespace tmg {

Pass::~Pass() = default;

PassOptionBase *Pass::findOption(llvm::StringRef name) const {
  for (PassOptionBase *o : options_)
    if (o->name() == name)
      return o;
  return nullptr;
}

FailureOr<void> Pass::setOption(llvm::StringRef name, const OptionValue &v) {
  if (PassOptionBase *o = findOption(name)) {
    if (std::optional<std::string> err = o->assign(v))
      return Diagnostic(Location(), fmt::format("option '{}' of pass '{}' {}", name.str(),
                                                this->name().str(), *err));
    return {};
  }
  std::vector<std::string> names;
  for (const PassOptionBase *o : options_)
    names.push_back(o->name());
  std::string msg = fmt::format("pass '{}' has no option '{}'", this->name().str(), name.str());
  std::string c = closestName(name, names);
  if (!c.empty())
    msg += fmt::format("; did you mean '{}'?", c);
  else
    msg += " (it takes no options)";
  return Diagnostic(Location(), msg);
}

void PassStatistics::add(llvm::StringRef pass, llvm::StringRef counter, int64_t n) {
  std::lock_guard l(mu_);
  c_[pass.str()][counter.str()] += n;
}

static void collectGraphs(Module &x, std::vector<InternalGraph *> &graphs) {
  if (auto *t = llvm::dyn_cast<TracedModule>(&x))
    for (const auto &s : t->signatures())
      graphs.push_back(s.graph.get());
  for (const ModuleAttr &a : x.attrs())
    if (a.kind == ModuleAttr::Kind::Submodule)
      collectGraphs(*a.module, graphs);
}

std::vector<InternalGraph *> graphsOf(TracedModule &m) {
  // Declaration order (the .tmir file's).
  std::vector<InternalGraph *> graphs;
  collectGraphs(m, graphs);
  return graphs;
}

FailureOr<bool> runOnEachGraph(
    TracedModule &m, PassContext &ctx,
    const std::function<FailureOr<bool>(InternalGraph &, PassContext &)> &fn) {
  std::vector<InternalGraph *> graphs = graphsOf(m);
  std::vector<std::optional<FailureOr<bool>>> results(graphs.size());
  auto work = [&](size_t i) {
    try {
      results[i] = fn(*graphs[i], ctx);
    } catch (const Error &e) {
      results[i] = FailureOr<bool>(e.diagnostic());
    }
  };
  size_t threads = std::min<size_t>(std::max(ctx.threads, 1), graphs.size());
  if (threads <= 1) {
    for (size_t i = 0; i < graphs.size(); ++i)
      work(i);
  } else {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    for (size_t t = 0; t < threads; ++t)
      pool.emplace_back([&] {
        for (size_t i; (i = next++) < graphs.size();)
          work(i);
      });
    for (auto &th : pool)
      th.join();
  }
  bool changed = false;
  for (auto &r : results) {
    if (r->failed())
      return r->diagnostic();
    changed |= **r;
  }
  return changed;
}

std::string PassStatistics::str() const {
  std::string out = "=== statistics ===\n";
  for (const auto &[p, cs] : c_)
    for (const auto &[c, v] : cs)
      out += fmt::format("{:>10}  {} - {}\n", v, p, c);
  return out;
}

void PassContext::count(llvm::StringRef counter, int64_t n) {
  stats_.add(current_.empty() ? "<none>" : current_, counter, n);
}

void PassRegistry::add(const std::string &name, Factory f) {
  if (name.empty())
    raise("a pass needs a name");
  if (presets_.count(name))
    raise("'{}' is already a pipeline preset", name);
  if (!factories_.emplace(name, std::move(f)).second)
    raise("a pass named '{}' is already registered", name);
}

bool PassRegistry::contains(llvm::StringRef name) const {
  return factories_.count(name.str()) != 0;
}

std::unique_ptr<Pass> PassRegistry::create(llvm::StringRef name) const {
  auto it = factories_.find(name.str());
  return it == factories_.end() ? nullptr : it->second();
}

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &[n, f] : factories_)
    out.push_back(n);
  return out;
}

std::string PassRegistry::closest(llvm::StringRef name) const {
  std::vector<std::string> all = names();
  for (const auto &[n, p] : presets_)
    all.push_back(n);
  return closestName(name, all);
}

void PassRegistry::addPreset(const std::string &name, std::string text,
                             std::string description) {
  if (name.empty() || name == "fixpoint")
    raise("a pipeline preset needs a name other than 'fixpoint'");
  if (factories_.count(name))
    raise("'{}' is already a pass", name);
  if (!presets_.emplace(name, Preset{name, std::move(text), std::move(description)}).second)
    raise("a pipeline preset named '{}' is already registered", name);
}

const PassRegistry::Preset *PassRegistry::preset(llvm::StringRef name) const {
  auto it = presets_.find(name.str());
  return it == presets_.end() ? nullptr : &it->second;
}

std::vector<const PassRegistry::Preset *> PassRegistry::presets() const {
  std::vector<const Preset *> out;
  for (const auto &[n, p] : presets_)
    out.push_back(&p);
  return out;
}

FailureOr<void> loadPassPlugin(const std::string &path, PassRegistry &r) {
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot load pass plugin: {}", dlerror()));
  using Entry = void (*)(PassRegistry &);
  auto entry = reinterpret_cast<Entry>(dlsym(h, "tmgRegisterPasses"));
  if (!entry) {
    dlclose(h);
    return Diagnostic(Location::inFile(path),
                      "not a pass plugin: it does not export tmgRegisterPasses");
  }
  // The plugin's registration code is outside the library: a tmg::Error it
  // throws becomes the returned diagnostic, located at the plugin.
  try {
    entry(r);
  } catch (const Error &e) {
    Diagnostic d = e.diagnostic();
    d.loc.file = path;
    return d;
  }
  // The library stays loaded: its passes live in the registry.
  return {};
}

} // namespace tmg
