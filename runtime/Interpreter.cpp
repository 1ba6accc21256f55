//===- Interpreter.cpp - Plans, reference counting, watch and end points --===//
#include "Plan.h"

#include <llvm/ADT/DenseSet.h>

namespace tmg::rt {

bool ExecutionPlan::valid() const {
  if (graph->version() != graphVersion)
    return false;
  for (const auto &[m, v] : modules)
    if (m->version() != v)
      return false;
  for (const auto &c : callees)
    if (!c->valid())
      return false;
  return true;
}

void LowerContext::readsModule(const Module *m) const {
  for (const auto &[x, v] : plan.modules)
    if (x == m)
      return;
  plan.modules.emplace_back(m, m->version());
}

static std::shared_ptr<ExecutionPlan> buildPlan(const Interpreter &interp,
                                                const InternalGraph &g) {
  auto p = std::make_shared<ExecutionPlan>();
  p->graph = &g;
  p->graphVersion = g.version();
  uint32_t next = 0;
  for (Node *n : g.inputs()) {
    auto [it, fresh] = p->slotOf.try_emplace(n, next);
    if (fresh)
      ++next;
    p->inputSlots.push_back(it->second);
  }
  for (Expr *e : g)
    for (Node *n : e->outputs())
      p->slotOf[n] = next++;
  p->numSlots = next;
  // Reference counts: one per use, plus one per graph-output occurrence.
  std::vector<int64_t> refs(next, 0);
  for (Expr *e : g)
    for (size_t i = 0; i < e->numInputs(); ++i) {
      auto it = p->slotOf.find(e->input(i));
      if (it == p->slotOf.end())
        raiseAt(Location::atExpr(e->id()),
                "cannot run graph '{}': input '{}' of the expr is not defined in it",
                g.name(), e->input(i)->str());
      ++refs[it->second];
    }
  for (Node *o : g.outputs()) {
    auto it = p->slotOf.find(o);
    if (it == p->slotOf.end())
      raise("cannot run graph '{}': output '{}' is not defined in it", g.name(),
            o->str());
    ++refs[it->second];
    p->outputSlots.push_back(it->second);
  }
  for (uint32_t s : p->inputSlots)
    p->inputLive.push_back(refs[s] > 0);
  LowerContext ctx(interp, *p);
  planFusions(g, ctx);
  std::vector<int64_t> left = refs;
  // Inputs of deferred exprs, released by the step that reads them.
  llvm::DenseMap<const Expr *, llvm::SmallVector<uint32_t, 8>> pending;
  for (Expr *e : g) {
    Step st;
    st.expr = e;
    try {
      st.fn = lowerExpr(*e, ctx);
    } catch (const Error &err) {
      Diagnostic d = err.diagnostic();
      if (d.loc.exprId < 0)
        d.loc.exprId = e->id();
      d.note("in " + e->str());
      throw Error(d);
    }
    for (Node *o : e->outputs()) {
      uint32_t s = p->slotOf[o];
      st.outs.push_back(s);
      if (refs[s] == 0)
        st.frees.push_back(s); // an unused output: drop it right away
    }
    auto later = ctx.deferred.find(e);
    for (size_t i = 0; i < e->numInputs(); ++i) {
      uint32_t s = p->slotOf[e->input(i)];
      if (later != ctx.deferred.end())
        pending[later->second].push_back(s);
      else if (--left[s] == 0)
        st.frees.push_back(s);
    }
    if (auto it = pending.find(e); it != pending.end()) {
      llvm::SmallVector<uint32_t, 8> held = std::move(it->second);
      pending.erase(it);
      // A deferred expr's own deferred inputs wait for its reader too.
      if (later != ctx.deferred.end())
        pending[later->second].append(held.begin(), held.end());
      else
        for (uint32_t s : held)
          if (--left[s] == 0)
            st.frees.push_back(s);
    }
    p->steps.push_back(std::move(st));
  }
  return p;
}

Error errorInStep(const Error &err, const Expr &e, const InternalGraph &g) {
  Diagnostic d = err.diagnostic();
  if (d.loc.exprId < 0) {
    d.loc.exprId = e.id();
    d.message = "graph '" + g.name() + "': " + d.message;
    d.note("in " + e.str());
  }
  return Error(d);
}

std::vector<Value> execute(const ExecutionPlan &p, llvm::ArrayRef<Value> args,
                           RunState &st, const std::vector<uint32_t> *endSlots,
                           bool *stopped) {
  const InternalGraph &g = *p.graph;
  if (args.size() != p.inputSlots.size())
    raise("graph '{}' takes {} inputs (self included) but {} were given",
          g.name(), p.inputSlots.size(), args.size());
  std::vector<Value> slots(p.numSlots);
  const std::vector<const Node *> *watchSlots = nullptr;
  if (st.watching) {
    auto [it, fresh] = st.watchSlots.try_emplace(&p);
    if (fresh) {
      it->second.assign(p.numSlots, nullptr);
      for (const auto &[n, s] : p.slotOf)
        if (st.watch.count(n))
          it->second[s] = n;
    }
    watchSlots = &it->second;
  }
  auto record = [&](uint32_t s) {
    if (watchSlots && (*watchSlots)[s])
      st.result->watched[(*watchSlots)[s]].push_back(slots[s].tensor);
  };
  // End points: how many are still missing.
  size_t missing = endSlots ? endSlots->size() : 0;
  std::vector<bool> isEnd, keep;
  if (endSlots) {
    isEnd.assign(p.numSlots, false);
    for (uint32_t s : *endSlots)
      isEnd[s] = true;
    keep = isEnd; // end-point values must survive until the run stops
  }
  auto endResult = [&]() {
    std::vector<Value> out;
    for (uint32_t s : *endSlots)
      out.push_back(slots[s]);
    *stopped = true;
    return out;
  };
  auto reached = [&](uint32_t s) {
    if (endSlots && isEnd[s]) {
      isEnd[s] = false;
      --missing;
    }
    return endSlots && missing == 0;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    uint32_t s = p.inputSlots[i];
    if (p.inputLive[i] || (watchSlots && (*watchSlots)[s]) || (endSlots && isEnd[s]))
      slots[s] = args[i];
    record(s);
    if (reached(s))
      return endResult();
  }
  struct Depth {
    int &d;
    explicit Depth(int &d) : d(++d) {}
    ~Depth() { --d; }
  } depth(st.depth);
  for (const Step &step : p.steps) {
    try {
      if (st.profile) {
        auto t0 = Profile::Clock::now();
        step.fn(slots.data(), st);
        st.profile->record(step.expr, t0, Profile::Clock::now(), st.depth);
      } else {
        step.fn(slots.data(), st);
      }
    } catch (const Error &err) {
      throw errorInStep(err, *step.expr, g);
    }
    bool done = false;
    for (uint32_t s : step.outs) {
      record(s);
      done |= reached(s);
    }
    if (done)
      return endResult();
    for (uint32_t s : step.frees)
      if (keep.empty() || !keep[s])
        slots[s] = Value();
  }
  std::vector<Value> out;
  out.reserve(p.outputSlots.size());
  for (uint32_t s : p.outputSlots)
    out.push_back(slots[s]);
  return out;
}

Interpreter::Interpreter(const TracedModule &m, InterpreterOptions opts)
    : module_(m), opts_(opts) {}
Interpreter::~Interpreter() = default;

std::shared_ptr<const ExecutionPlan> Interpreter::planFor(const InternalGraph &g) const {
  {
    std::lock_guard l(mu_);
    auto it = plans_.find(&g);
    if (it != plans_.end() && it->second->valid())
      return it->second;
  }
  // Built outside the lock: lowering asks for callee plans.
  std::shared_ptr<const ExecutionPlan> p = buildPlan(*this, g);
  std::lock_guard l(mu_);
  plans_[&g] = p;
  return p;
}

void Interpreter::prepare(const InternalGraph &g) const { (void)planFor(g); }

/// The inputs' shapes against the graph's: the same rank, each symbol one
/// size throughout, expressions of symbols holding and, for a model whose
/// input types are declarations (an imported ONNX model), the same sizes. A
/// traced module's sizes are what the trace saw, not constraints: it runs
/// at other sizes where its ops allow. The plan does not depend on the
/// shapes (kernels size their outputs from their inputs), so one plan
/// serves every shape that fits.
static void checkInputShapes(const TracedModule &m, const InternalGraph &g,
                             llvm::ArrayRef<Tensor> inputs) {
  bool declared = m.value("onnx_inputs") != nullptr;
  ShapeBinder b;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto *t = llvm::cast<TensorNode>(g.input(i + 1));
    if (!t->shape())
      continue;
    std::string err = b.bind(fmt::format("input '{}'", t->name().str()), *t->shape(),
                             inputs[i].shape(), declared);
    if (!err.empty())
      raise("graph '{}': {}", g.name(), err);
  }
  if (std::string err = b.finish(); !err.empty())
    raise("graph '{}': {}", g.name(), err);
}

RunResult Interpreter::run(llvm::ArrayRef<Tensor> inputs, const RunOptions &opts) const {
  return run(module_.graph(), inputs, opts);
}

RunResult Interpreter::run(const InternalGraph &g, llvm::ArrayRef<Tensor> inputs,
                           const RunOptions &opts) const {
  if (g.owner() != &module_)
    raise("graph '{}' does not belong to the interpreted module '{}'", g.name(),
          module_.typeName().str());
  if (inputs.size() + 1 != g.inputs().size())
    raise("graph '{}' takes {} inputs but {} were given", g.name(),
          g.inputs().size() - 1, inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto *t = llvm::dyn_cast<TensorNode>(g.input(i + 1));
    if (!t)
      raise("graph '{}': input {} is a module, not a tensor", g.name(), i);
    if (!inputs[i].defined())
      raise("graph '{}': input '{}' is undefined", g.name(), t->str());
    if (t->hasDType() && t->dtype() != inputs[i].dtype())
      raise("graph '{}': input '{}' expects {} but got {}", g.name(), t->str(),
            dtypeName(t->dtype()).str(), inputs[i].str());
  }
  checkInputShapes(module_, g, inputs);
  auto plan = planFor(g);
  RunResult result;
  RunState st;
  st.interp = this;
  st.result = &result;
  for (const Node *n : opts.watch)
    st.watch[n] = true;
  st.watching = !opts.watch.empty();
  st.observable = st.watching || !opts.endPoints.empty();
  st.profile = opts.profile;
  if (st.profile)
    st.profile->beginRun();
  std::vector<uint32_t> endSlots;
  for (const Node *n : opts.endPoints) {
    auto it = plan->slotOf.find(n);
    if (it == plan->slotOf.end())
      raise("end point '{}' is not a node of graph '{}'", n->str(), g.name());
    endSlots.push_back(it->second);
  }
  std::vector<Value> args;
  args.push_back(Value{Tensor(), const_cast<TracedModule *>(&module_)});
  for (const Tensor &t : inputs)
    args.push_back(Value{t, nullptr});
  std::shared_ptr<StorageArena> arena;
  {
    std::lock_guard l(mu_);
    if (!arenas_.empty()) {
      arena = std::move(arenas_.back());
      arenas_.pop_back();
    }
  }
  if (!arena)
    arena = std::make_shared<StorageArena>();
  int64_t base = arena->liveBytes(); // outputs of earlier runs still held
  arena->resetCounters();
  arena->setLimits(opts_.maxTensorBytes, opts_.maxLiveBytes);
  auto previous = StorageArena::install(arena);
  auto giveBack = [&] {
    StorageArena::install(previous);
    std::lock_guard l(mu_);
    arenas_.push_back(arena);
  };
  try {
    bool stopped = false;
    std::vector<Value> out = execute(*plan, args, st, endSlots.empty() ? nullptr : &endSlots,
                                     &stopped);
    // Outputs are dense: views of intermediates become copies here.
    for (Value &v : out)
      result.outputs.push_back(v.tensor.contiguous());
    for (auto &[n, values] : result.watched)
      for (Tensor &t : values)
        t = t.contiguous();
    giveBack();
    result.stoppedAtEndPoints = stopped;
  } catch (...) {
    giveBack();
    throw;
  }
  result.peakBytes = std::max<int64_t>(0, arena->peakBytes() - base);
  result.reusedBlocks = arena->reusedBlocks();
  return result;
}

void Interpreter::clearWatchPoints() {
  watch_.clear();
  watchValue_.clear();
}

std::vector<Tensor> Interpreter::forward(llvm::ArrayRef<Tensor> inputs) {
  RunOptions o;
  o.watch = watch_;
  o.endPoints = end_;
  RunResult r = run(inputs, o);
  watchValue_.clear();
  for (auto &[n, values] : r.watched)
    if (!values.empty())
      watchValue_[n] = values.back();
  return std::move(r.outputs);
}

} // namespace tmg::rt
