//===- Utils.h - Helpers shared by the optimisation passes ------*- C++ -*-===//
#pragma once

#include <llvm/ADT/DenseSet.h>

#include "tm/ir/IR.h"
#include "tm/passes/Pass.h"

namespace tmg::xf {

/// The tensor a node stands for when it is known at compile time: the value
/// of a tensor Constant, or the attribute a tensor GetAttr reads. nullptr
/// otherwise.
const Tensor *staticTensor(const Node *n);
/// The value of a tensor Constant only (the reference's `is_const`).
const Tensor *constantTensor(const Node *n);

/// Moves output node `n` of its producer onto a new Constant expr holding
/// `t`, created just before the producer: the node keeps its name, id,
/// qualname and users. The old producer loses that output. Returns the
/// Constant.
Constant *moveToConstant(InternalGraph &g, Node *n, Tensor t, llvm::StringRef constName);

/// A new Constant holding `t` before `before` (named after `name`).
Node *newConstant(InternalGraph &g, Expr *before, Tensor t, llvm::StringRef name);

/// True when `e` can be erased: no output used, none a graph output, not
/// `disable_remove`.
bool isDead(const Expr *e, const llvm::DenseSet<const Node *> &graphOutputs);
llvm::DenseSet<const Node *> outputSet(const InternalGraph &g);

/// Erases each seed that is dead, then producers that became dead
/// (iteratively; each expr once). Returns how many exprs were erased.
size_t eraseDeadFrom(InternalGraph &g, llvm::ArrayRef<Expr *> seeds);

/// Rewires every use of `old` (and graph outputs) to `nw`; true when all
/// uses moved.
bool replaceAll(InternalGraph &g, Node *old, Node *nw);

/// Float32 copy of `t` as doubles.
std::vector<double> toDoubles(const Tensor &t);
/// A float32 tensor of `shape` from doubles.
Tensor fromDoubles(llvm::ArrayRef<int64_t> shape, const std::vector<double> &v);

/// The module called by a module-call expr (builtin or not), or nullptr.
Module *calledModule(const Expr *e);
/// Exactly this builtin type (subclasses are refused: they may change the
/// semantics, e.g. a fused activation).
bool isExactly(const Module *m, const ModuleType &t);

/// Runs `fn` with the graph's insertion point set to `before`, restoring it.
template <typename F> auto withInsertionPoint(InternalGraph &g, Expr *before, F &&fn) {
  Expr *saved = g.insertionPoint();
  g.setInsertionPoint(before);
  struct Restore {
    InternalGraph &g;
    Expr *saved;
    ~Restore() { g.setInsertionPoint(saved); }
  } r{g, saved};
  return fn();
}

} // namespace tmg::xf

namespace tmg::xf {
/// Rebuilds `e`'s arguments with positional argument `i` replaced by `slot`:
/// a leaf taking `node`, or a literal (then `node` is null); other arguments
/// and kwargs keep their nodes.
void replacePositional(Expr *e, size_t i, TreeDef slot, Node *node);
/// Sets positional argument `i` of call `e` to node `n`.
void setPositionalArg(Expr *e, size_t i, Node *n);
/// Every graph of `m`'s hierarchy (each graph once), top first.
std::vector<InternalGraph *> allGraphs(TracedModule &m);
} // namespace tmg::xf
