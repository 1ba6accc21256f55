//===- PassManager.cpp - Running pipelines with instrumentation -----------===//
#include "tm/passes/PassManager.h"

#include <chrono>
#include <cstdio>

#include "tm/ir/Verifier.h"

namespace tmg {

namespace {
void collectPasses(std::vector<PipelineElement> &els, std::vector<const Pass *> &out) {
  for (PipelineElement &e : els) {
    if (e.kind == PipelineElement::Kind::Pass)
      out.push_back(e.pass.get());
    else
      collectPasses(e.children, out);
  }
}
} // namespace

PassManager::PassManager(Pipeline p, PipelineOptions o)
    : pipeline_(std::move(p)), opts_(std::move(o)) {
  ctx_.threads = std::max(1, opts_.threads);
  // Statistics are kept per pass instance: a pass that occurs more than
  // once in the pipeline is counted as "name #1", "name #2", ... in
  // pipeline order.
  std::vector<const Pass *> passes;
  collectPasses(pipeline_.elements, passes);
  std::map<std::string, int> total, seen;
  for (const Pass *q : passes)
    ++total[q->name().str()];
  for (const Pass *q : passes) {
    std::string n = q->name().str();
    instanceName_[q] = total[n] > 1 ? fmt::format("{} #{}", n, ++seen[n]) : n;
  }
}

void PassManager::emit(const std::string &s) {
  if (opts_.output)
    opts_.output(s);
  else
    std::fputs(s.c_str(), stderr);
}

FailureOr<void> PassManager::run(TracedModule &m) {
  auto t0 = std::chrono::steady_clock::now();
  FailureOr<bool> r = runElements(pipeline_.elements, m);
  total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opts_.timePasses)
    emit(timingReport());
  if (opts_.stats)
    emit(ctx_.stats().str());
  if (r.failed())
    return r.diagnostic();
  return {};
}

FailureOr<bool> PassManager::runElements(std::vector<PipelineElement> &els, TracedModule &m) {
  bool changed = false;
  for (PipelineElement &e : els) {
    if (e.kind == PipelineElement::Kind::Pass) {
      if (opts_.disabled.count(e.pass->name().str()))
        continue;
      FailureOr<bool> r = runPass(*e.pass, m, e.loc);
      if (r.failed())
        return r;
      changed |= *r;
      continue;
    }
    // fixpoint(...): repeat until nothing changes, at most maxIterations.
    int64_t it = 0;
    for (; it < e.maxIterations; ++it) {
      FailureOr<bool> r = runElements(e.children, m);
      if (r.failed())
        return r;
      if (!*r)
        break;
      changed = true;
    }
    if (it == e.maxIterations) {
      Diagnostic d(e.loc,
                   fmt::format("fixpoint did not converge within {} iteration{}",
                               e.maxIterations, e.maxIterations == 1 ? "" : "s"),
                   Diagnostic::Severity::Warning);
      ctx_.remark(d);
      emit(d.str() + "\n");
    }
  }
  return changed;
}

FailureOr<bool> PassManager::runPass(Pass &p, TracedModule &m, const Location &loc) {
  std::string name = p.name().str();
  for (const std::string &pre : p.prerequisites()) {
    if (ran_.count(pre))
      continue;
    std::unique_ptr<Pass> q =
        pipeline_.registry ? pipeline_.registry->create(pre) : nullptr;
    if (!q)
      return Diagnostic(loc, fmt::format("pass '{}' requires pass '{}', which {}", name, pre,
                                         pipeline_.registry
                                             ? "its registry does not have"
                                             : "a pipeline without a registry cannot create"));
    FailureOr<bool> r = runPass(*q, m, loc);
    if (r.failed())
      return r;
  }
  // A snapshot for the rollback and the reproducer; a module too broken to
  // copy is reported (and left) as it is when the pass fails.
  // An atomic pass leaves the module unchanged when it fails: it needs the
  // copy only when its result may still be rejected (verify-each) or the
  // failure callback wants the module from before it.
  std::unique_ptr<TracedModule> before;
  if (opts_.onFailure || (opts_.transactional && (!p.isAtomic() || opts_.verifyEach))) {
    try {
      before = m.cloneTraced();
    } catch (const Error &) {
    }
  }
  std::string beforeText;
  if (opts_.printChanged)
    beforeText = m.str();
  auto inst = instanceName_.find(&p);
  ctx_.setCurrentPass(inst == instanceName_.end() ? name : inst->second);
  size_t remarks = ctx_.remarks().size();
  auto t0 = std::chrono::steady_clock::now();
  FailureOr<bool> r = Diagnostic();
  try {
    r = p.run(m, ctx_);
  } catch (const Error &e) {
    r = e.diagnostic();
  } catch (const std::exception &e) {
    // A pass's bug or resource exhaustion (bad_alloc, out_of_range, ...):
    // reported as the pass's failure, never escaping into the caller.
    r = Diagnostic(loc, fmt::format("pass '{}' failed: {}", name, e.what()));
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto it = std::find_if(timings_.begin(), timings_.end(),
                         [&](const Timing &t) { return t.name == name; });
  if (it == timings_.end()) {
    timings_.push_back({name, 0, 0});
    it = timings_.end() - 1;
  }
  it->seconds += secs;
  ++it->runs;
  auto fail = [&](Diagnostic d) -> FailureOr<bool> {
    if (d.loc.pass.empty())
      d.loc.pass = name;
    if (opts_.onFailure)
      opts_.onFailure(before ? *before : m, pipeline_);
    if (opts_.transactional && before) {
      m.restoreFrom(*before);
      ctx_.invalidateAnalyses();
      d.note(fmt::format("the module was restored to its state before pass '{}'", name));
    } else if (p.isAtomic()) {
      d.note(fmt::format("pass '{}' is atomic: it left the module unchanged", name));
    }
    return d;
  };
  for (size_t i = remarks; i < ctx_.remarks().size(); ++i)
    emit(ctx_.remarks()[i].str() + "\n");
  if (r.failed())
    return fail(r.diagnostic());
  ran_.insert(name);
  if (opts_.verifyEach) {
    std::vector<Diagnostic> diags = verify(m);
    if (!diags.empty()) {
      Diagnostic d = diags[0];
      d.message = fmt::format("the module does not verify after pass '{}': {}", name, d.message);
      for (size_t i = 1; i < diags.size(); ++i)
        d.note(diags[i].str());
      return fail(d);
    }
  }
  bool show = opts_.printAfterAll || opts_.printAfter.count(name) ||
              (opts_.printChanged && *r && m.str() != beforeText);
  if (show)
    emit(fmt::format("// ----- IR after {} ----- //\n{}\n", name, m.str()));
  return r;
}

std::string PassManager::timingReport() const {
  std::string out = "=== pass execution timing report ===\n";
  out += fmt::format("  total: {:.6f} s\n", total_);
  out += "  wall time (s)    %     runs  pass\n";
  double sum = 0;
  for (const auto &t : timings_) {
    out += fmt::format("  {:>12.6f}  {:>5.1f}%  {:>5}  {}\n", t.seconds,
                       total_ > 0 ? 100.0 * t.seconds / total_ : 0.0, t.runs, t.name);
    sum += t.seconds;
  }
  out += fmt::format("  {:>12.6f}  {:>5.1f}%         (passes)\n", sum,
                     total_ > 0 ? 100.0 * sum / total_ : 0.0);
  return out;
}

} // namespace tmg
