//===- FoldConstant.cpp - Evaluate constant subgraphs ---------------------===//
//
// The reference's FlodConstant, as one linear sweep instead of a fixpoint:
//  1. in graph order, an expr is foldable when it is a function, tensor
//     method or op-def call with at least one input, every input is a
//     tensor Constant or an output of a foldable expr, it has no side
//     effect (`__setitem__`), is not random (dropout) and not
//     `disable_remove`;
//  2. the foldable exprs (and the Constants they read) are copied into a
//     scratch module and run once with the interpreter, so every op folds
//     with the same kernels it would run with;
//  3. walking the foldable exprs backwards, each one whose outputs are
//     needed (used by a non-foldable expr, a graph output, or a kept
//     foldable expr) is replaced: ALL its outputs become Constants (the
//     reference replaces only outputs[0]) - unless one of them is bigger
//     than `max-bytes`, in which case the expr stays and its own inputs
//     become needed;
//  4. exprs left dead are erased.
// An op the runtime cannot evaluate is left in place (a remark says why),
// and folding is retried without it.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <llvm/ADT/DenseMap.h>

#include "tm/runtime/Interpreter.h"

namespace tmg {

namespace {

bool candidateOp(const Expr *e) {
  const OpSchema *s = nullptr;
  if (auto *cf = llvm::dyn_cast<CallFunction>(e))
    s = &cf->func();
  else if (auto *cm = llvm::dyn_cast<CallMethod>(e))
    s = cm->methodSchema();
  else if (auto *ap = llvm::dyn_cast<Apply>(e))
    s = &ap->opdef();
  if (!s || e->numInputs() == 0 || e->numOutputs() == 0 || e->removeDisabled())
    return false;
  if (s->hasTrait(SideEffect) || s->kind() == OpKind::Dropout)
    return false;
  return true;
}

/// Evaluates `exprs` (in graph order) in a scratch module. Returns the value
/// of every output, or the id of the expr that failed.
struct EvalResult {
  llvm::DenseMap<const Node *, Tensor> values;
  Expr *failed = nullptr;
  std::string why;
};

EvalResult evaluate(const std::vector<Expr *> &exprs) {
  EvalResult r;
  TracedModule tmp("ConstantFolding");
  GraphBuilder b = GraphBuilder::top(tmp, {});
  InternalGraph &tg = b.graph();
  llvm::DenseMap<const Node *, Node *> map;
  llvm::DenseMap<int64_t, Expr *> origin; // scratch expr id -> original
  std::vector<Node *> outs;
  std::vector<const Node *> outOrig;
  auto copy = [&](const Expr &e) {
    std::unique_ptr<Expr> c = cloneExprShallow(e, tg.nextExprId());
    Expr *raw = c.get();
    tg.insertExpr(std::move(c), nullptr);
    origin[raw->id()] = const_cast<Expr *>(&e);
    for (Node *in : e.inputs())
      raw->addInput(map.lookup(in));
    for (Node *o : e.outputs())
      map[o] = raw->addOutput(cloneNodeShallow(*o, tg.nextNodeId()));
    return raw;
  };
  for (Expr *e : exprs) {
    for (Node *in : e->inputs())
      if (!map.count(in))
        copy(*in->expr()); // a Constant
    copy(*e);
    for (Node *o : e->outputs()) {
      outs.push_back(map[o]);
      outOrig.push_back(o);
    }
  }
  tg.setOutputsInternal(outs);
  try {
    rt::Interpreter interp(tmp);
    rt::RunResult res = interp.run(tg, {});
    for (size_t i = 0; i < outOrig.size() && i < res.outputs.size(); ++i)
      r.values[outOrig[i]] = std::move(res.outputs[i]);
  } catch (const Error &err) {
    r.why = err.diagnostic().message;
    int64_t id = err.diagnostic().loc.exprId;
    r.failed = id >= 0 ? origin.lookup(id) : nullptr;
    if (!r.failed && !exprs.empty())
      r.failed = exprs.front(); // cannot tell: give up on the first one
  }
  return r;
}

} // namespace

FailureOr<bool> FoldConstantPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
    llvm::DenseSet<const Expr *> excluded;
  for (int attempt = 0; attempt < 16; ++attempt) {
    // 1. Foldable exprs, in order.
    llvm::DenseSet<const Node *> constValued;
    std::vector<Expr *> foldable;
    for (Expr *e : g.body()) {
      if (xf::constantTensor(e->numOutputs() == 1 ? e->output(0) : nullptr)) {
        constValued.insert(e->output(0));
        continue;
      }
      if (!candidateOp(e) || excluded.count(e))
        continue;
      bool all = true;
      for (Node *in : e->inputs())
        all &= llvm::isa<TensorNode>(in) && constValued.count(in);
      if (!all)
        continue;
      foldable.push_back(e);
      for (Node *o : e->outputs())
        constValued.insert(o);
    }
    if (foldable.empty())
      return false;
    llvm::DenseSet<const Expr *> isFoldable(foldable.begin(), foldable.end());

    // 3a. Which outputs are needed.
    auto graphOuts = xf::outputSet(g);
    llvm::DenseSet<const Node *> needed;
    for (Expr *e : foldable)
      for (Node *o : e->outputs()) {
        bool need = graphOuts.count(o) != 0;
        for (Expr *u : o->users())
          need |= !isFoldable.count(u);
        if (need)
          needed.insert(o);
      }
    bool anyNeeded = false;
    for (Expr *e : foldable)
      for (Node *o : e->outputs())
        anyNeeded |= needed.count(o) != 0;
    if (!anyNeeded)
      return false;

    // 2. Evaluate.
    EvalResult ev = evaluate(foldable);
    if (ev.failed) {
      ctx.remark(Diagnostic(Location::atExpr(ev.failed->id()),
                                         "fold-constant: not folded: " + ev.why,
                                         Diagnostic::Severity::Remark));
      excluded.insert(ev.failed);
      continue;
    }

    // 3b. Backwards: materialise needed outputs, or keep the expr.
    bool changed = false;
    std::vector<Expr *> replaced;
    for (auto it = foldable.rbegin(); it != foldable.rend(); ++it) {
      Expr *e = *it;
      bool need = false, fits = true;
      for (Node *o : e->outputs()) {
        if (!needed.count(o))
          continue;
        need = true;
        auto v = ev.values.find(o);
        if (v == ev.values.end() || !v->second.defined())
          fits = false;
        else if (maxBytes >= 0 && int64_t(v->second.nbytes()) > maxBytes)
          fits = false;
      }
      if (!need)
        continue;
      if (!fits) {
        for (Node *in : e->inputs())
          needed.insert(in);
        ctx.count("kept-over-size-limit");
        continue;
      }
      for (Node *o : e->outputs())
        if (needed.count(o)) {
          Tensor t = ev.values[o];
          xf::moveToConstant(g, o, std::move(t), o->name());
          ctx.count("values-folded");
        }
      replaced.push_back(e);
      changed = true;
    }
    // 4. Erase what became dead (the replaced exprs and their producers).
    ctx.count("exprs-removed", int64_t(xf::eraseDeadFrom(g, replaced)));
    return changed;
  }
  return false;
}

} // namespace tmg
