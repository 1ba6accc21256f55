//===- State.h - Per-thread tracing state (internal) ----------------------===//
#pragma once

#include <memory>
#include <typeindex>
#include <vector>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringSet.h>

#include "tm/ir/Builder.h"
#include "tm/trace/Trace.h"

namespace tmg::trace {

/// One forward being traced: the graph it builds and its module.
struct Scope {
  Scope(GraphBuilder b, Module *user, Module *traced)
      : b(std::move(b)), user(user), traced(traced) {}
  GraphBuilder b;
  Module *user;   ///< the module whose forward runs (null: insertion scope)
  Module *traced; ///< its counterpart in the traced module tree
  /// Constants already recorded in this scope: (nullptr, tensor data) -> node
  /// (a tensor used twice is one Constant, as the reference's mark_constant).
  llvm::DenseMap<std::pair<const Node *, const void *>, Node *> attrs;
};

struct State {
  TracedModule *top = nullptr;
  /// User module -> the module standing for it in the traced tree.
  llvm::DenseMap<const Module *, Module *> counterpart;
  /// The attribute names each user module's forward reached (`mod`, `attr`).
  llvm::DenseMap<const Module *, llvm::StringSet<>> reached;
  std::vector<std::unique_ptr<Scope>> scopes;
  bool computeValues = false;
  /// TraceOptions::checkExprs and its tolerance.
  bool checkExprs = false;
  double checkRtol = 0, checkAtol = 0;
  llvm::DenseMap<const Node *, Tensor> values;
  /// Insertion scope: the graph edited and the exprs recorded in it.
  InternalGraph *insertGraph = nullptr;
  std::vector<Expr *> newExprs;
  /// Layers attached to the traced tree replaced by their TracedModule:
  /// (owner, attribute, the layer) so a rollback can restore them.
  struct Attached {
    Module *owner;
    std::string name;
    std::unique_ptr<Module> layer;
  };
  std::vector<Attached> attached;
  /// Graphs created in the edited graph's namespace: (name, module).
  std::vector<std::pair<std::string, const Module *>> subGraphNames;

  Scope &scope() { return *scopes.back(); }
  /// Records that `e` was created (insertion scopes track their exprs).
  void created(Expr *e) {
    if (insertGraph && e->graph() == insertGraph)
      newExprs.push_back(e);
  }
};

/// The values of `e`'s inputs in `st.values` (an empty tensor for a module
/// input), or false when one is missing.
inline bool inputValues(const State &st, const Expr &e, std::vector<Tensor> &ins) {
  ins.clear();
  for (size_t i = 0; i < e.numInputs(); ++i) {
    const Node *n = e.input(i);
    if (llvm::isa<ModuleNode>(n)) {
      ins.emplace_back();
      continue;
    }
    auto it = st.values.find(n);
    if (it == st.values.end())
      return false;
    ins.push_back(it->second);
  }
  return true;
}

/// The expr checker (trace/Checker.cpp). Interprets `e` on the values of
/// its inputs and compares each output with the value forward saw (in
/// `st.values`); throws tmg::Error at %id with the printed expr and the max
/// error. Does nothing unless checking, or when a value is missing.
void checkExpr(State &st, const Expr &e);
/// Compares `got` (interpreted) with `want` (eager), output by output, for
/// `e`.
void checkValues(State &st, const Expr &e, llvm::ArrayRef<Tensor> got,
                 llvm::ArrayRef<Tensor> want);
/// Interprets the traced module `tm` on `inputs` and compares its outputs
/// with forward's (`want`).
void checkOutputs(State &st, const TracedModule &tm, llvm::ArrayRef<Tensor> inputs,
                  llvm::ArrayRef<Tensor> want);

/// The state of this thread (nullptr when not tracing).
State *current();
/// Installs `s` for this thread; returns the previous one.
State *install(State *s);

/// RAII: installs a state, restores the previous one.
class StateGuard {
public:
  explicit StateGuard(State *s) : prev_(install(s)) {}
  ~StateGuard() { install(prev_); }

private:
  State *prev_;
};

/// RAII: marks this thread as probing (isProbing(): running a forward for
/// output types or check values, where observers record nothing).
struct ProbeGuard {
  bool prev;
  ProbeGuard();
  ~ProbeGuard();
};

/// The module type of a Layer class registered as builtin (registerAsBuiltin):
/// builtin, made by the .tmir reader, run by the Layer's forward on a fresh
/// instance (when the class has a factory). Registered once per name.
const ModuleType &registerBuiltinLayerType(llvm::StringRef typeName, std::type_index layer);

/// Converts a user module tree into the traced tree (TracedModules for
/// plain modules and Layers, builtins cloned, registered builtin Layers as
/// BuiltinModules, traced submodules copied), filling `st.counterpart`.
std::unique_ptr<Module> convertTree(Module &m, bool top, State &st);

/// Removes from every module traced from a user module the tensors and
/// submodules its forward never reached, as the reference's builder copies
/// only the attributes the forward read. Builtin modules, registered builtin
/// Layers and nested TracedModules keep all of theirs.
void dropUnreached(State &st, TracedModule &top);

/// A Value whose node leaves are `nodes` (from `next`), shaped as `def`.
Value fromTree(const TreeDef &def, llvm::ArrayRef<Node *> nodes, size_t &next);

/// The Vars of a value in flatten order (dict values by sorted key).
void collectVars(const Value &v, std::vector<const Var *> &out);

/// The node of `v` in the current scope: its own node, or a Constant for a
/// tensor no graph produced (the reference's mark_constant).
Node *traceLeaf(State &st, const Var &v);
/// With value computation on, interprets `e` on the values of its inputs
/// (when all are known) and records its outputs' values.
void computeValues(State &st, Expr &e);

/// Eager helpers.
Value eagerOp(const OpSchema &schema, const CallArgs &args, size_t numOutputs);
Value eagerModuleCall(Module &m, const CallArgs &args);

} // namespace tmg::trace
