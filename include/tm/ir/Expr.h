//===- Expr.h - The expression kinds of a graph -----------------*- C++ -*-===//
//
// An Expr is one operation of an InternalGraph: Input, GetAttr, CallMethod
// (a module's `__call__` or a tensor method), CallFunction, Constant or
// Apply. It has input nodes (uses), output nodes (which it owns), an id, the
// argument TreeDef (where its inputs and constant arguments sit in
// `((self, *args), kwargs)`), the output TreeDef, and `disable_remove`.
//
// Exprs of a graph form an intrusive list with order keys, so "comes before"
// is O(1) and insertion/removal are O(1) (DESIGN.md, performance rules).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Casting.h>

#include "tm/ir/Node.h"
#include "tm/ir/OpSchema.h"
#include "tm/ir/Tensor.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class InternalGraph;
class Module;

/// Appends `n.str(f)` to `out` without temporaries (expr and .tmir printing).
void printNodeRef(std::string &out, const Node &n, NodeFormat f = {});

/// A view of one argument of a call: its TreeDef and the index of its first
/// node leaf among the expr's inputs.
struct ArgRef {
  const Expr *expr = nullptr;
  TreeDef def;
  size_t firstLeaf = 0;
  /// The node when the argument is a single node leaf, else nullptr.
  Node *node() const;
  /// True for a constant leaf.
  bool isConst() const { return def.isConst(); }
  const Scalar &scalar() const { return def.value(); }
  /// Python-style text of the argument (as printed in the graph).
  std::string str() const;
};

class Expr {
public:
  enum class Kind : uint8_t {
    Input,
    GetAttr,
    CallMethod,
    CallFunction,
    Constant,
    Apply
  };
  /// From the IR's size-class pool (ir/Pool.h).
  static void *operator new(size_t size);
  static void operator delete(void *p, size_t size) noexcept;
  virtual ~Expr();
  Expr(const Expr &) = delete;
  Expr &operator=(const Expr &) = delete;

  Kind kind() const { return kind_; }
  /// The op a CallFunction calls, a tensor-method CallMethod calls or an
  /// Apply applies; nullptr for module calls and the other kinds. Kept next
  /// to the kind: the rewrite driver reads both for every expr it visits.
  const OpSchema *opSchema() const { return op_; }
  /// "Input", "GetAttr", ...
  llvm::StringRef kindName() const;
  int64_t id() const { return id_; }
  InternalGraph *graph() const { return graph_; }

  // -- Inputs ----------------------------------------------------------------
  size_t numInputs() const { return uses_.size(); }
  Node *input(size_t i) const { return uses_[i].get(); }
  llvm::SmallVector<Node *, 4> inputs() const;
  /// Appends an input use (keeps the relative use order of other nodes).
  void addInput(Node *n);
  /// Replaces input `i` (the use moves to the end of `n`'s users, as the
  /// reference's `users.append`).
  void setInput(size_t i, Node *n);
  /// Replaces all inputs.
  void setInputs(llvm::ArrayRef<Node *> nodes);
  /// Drops every input use.
  void dropAllInputs();

  // -- Outputs ---------------------------------------------------------------
  size_t numOutputs() const { return outputs_.size(); }
  Node *output(size_t i) const { return outputs_[i]; }
  llvm::ArrayRef<Node *> outputs() const { return outputs_; }
  /// Takes ownership of `n` as the last output and sets its producer.
  Node *addOutput(std::unique_ptr<Node> n);
  /// Releases ownership of output `i` (the caller re-homes it).
  std::unique_ptr<Node> releaseOutput(size_t i);
  /// Replaces the owned output `i` by `n`, returning the old one.
  std::unique_ptr<Node> swapOutput(size_t i, std::unique_ptr<Node> n);

  // -- Call structure ----------------------------------------------------------
  /// TreeDef of the arguments (`((self, *args), kwargs)` for CallMethod,
  /// `(args, kwargs)` for CallFunction); absent for Input, GetAttr, Constant
  /// and Apply. Its node leaves correspond to the inputs in order.
  const std::optional<TreeDef> &argDef() const { return argDef_; }
  void setArgDef(std::optional<TreeDef> d) { argDef_ = std::move(d); }
  /// TreeDef of the outputs; absent means a flat list.
  const std::optional<TreeDef> &outDef() const { return outDef_; }
  void setOutDef(std::optional<TreeDef> d) { outDef_ = std::move(d); }
  /// Replaces inputs and arg TreeDef at once (the reference's
  /// `set_args_kwargs`). Throws tmg::Error when the leaf count differs from
  /// the node count.
  void setArgs(TreeDef argDef, llvm::ArrayRef<Node *> nodes);

  /// Positional arguments as written (for CallMethod, index 0 is the
  /// receiver). arg(i) past them binds positional parameter i of the
  /// op's schema, passed by keyword or left to its default (namedArg).
  size_t numArgs() const;
  ArgRef arg(size_t i) const;
  /// Keyword argument by name.
  std::optional<ArgRef> kwarg(llvm::StringRef name) const;
  std::vector<std::string> kwargNames() const;
  /// Argument bound to parameter `name` of the op's schema (positional or
  /// keyword), or its default when the call did not pass it, like the
  /// reference's `named_args` (`inspect.getcallargs`); nullopt for an
  /// unknown or variadic parameter.
  std::optional<ArgRef> namedArg(llvm::StringRef name) const;

  // -- Removal control --------------------------------------------------------
  bool removeDisabled() const { return disableRemove_; }
  void disableRemove() { disableRemove_ = true; }
  void enableRemove() { disableRemove_ = false; }

  // -- Position in the graph ----------------------------------------------------
  Expr *prevInGraph() const { return prev_; }
  Expr *nextInGraph() const { return next_; }
  /// True when this expr comes before `o` in the same graph's body. Input
  /// exprs come before every body expr. O(1).
  bool isBefore(const Expr *o) const;

  // -- Scratch bits for the algorithm running on the graph --------------------------
  /// Two flags an algorithm may keep on the exprs it works on, as GCC's
  /// pass-local flags on statements: a flag in the expr's first line costs
  /// no side-table lookup (a cache miss per query on a large graph). What
  /// they hold when an algorithm starts is unspecified (an earlier one may
  /// have left them set): it sets the flag of every expr it will test
  /// first. A new expr starts with both clear. One algorithm at a time per
  /// graph; the greedy rewrite driver keeps its worklist membership there.
  bool scratchFlag(unsigned i) const { return scratch_ >> i & 1; }
  void setScratchFlag(unsigned i, bool on) {
    scratch_ = uint8_t((scratch_ & ~(1u << i)) | (unsigned(on) << i));
  }

  /// The reference's `__repr__`: "%5:\tlinear_out = linear(add_out, )".
  std::string str(NodeFormat f = {}) const;
  /// Appends str(f) to `out` (printers reuse one buffer).
  void print(std::string &out, NodeFormat f = {}) const;

  // Internal.
  /// Rewires the use `u` (one of this expr's input slots) to `n`.
  void replaceUse(Use *u, Node *n);
  /// Index of use `u` among this expr's inputs.
  size_t useIndex(const Use *u) const { return size_t(u - uses_.data()); }
  /// Forgets input uses without touching their nodes (graph teardown).
  void forgetInputsInternal();
  bool inBody() const { return inBody_; }
  void setIdInternal(int64_t id) { id_ = id; }
  void setGraphInternal(InternalGraph *g) { graph_ = g; }
  uint64_t orderKey() const { return order_; }
  /// True when no output is needed (Node::isNeeded; no outputs included).
  /// O(1).
  bool outputsUnused() const { return usedOutputs_ == 0; }
  static constexpr uint32_t NoUnusedIndex = ~uint32_t(0);

protected:
  Expr(Kind k, int64_t id, const OpSchema *op = nullptr) : kind_(k), op_(op), id_(id) {}
  /// Text after "= " for call-like exprs; each subclass prints itself.
  virtual void printBody(std::string &out, NodeFormat f) const = 0;
  /// Prints outputs as the reference's `str(out_def.unflatten(outputs))`.
  void printOutputs(std::string &out, NodeFormat f) const;
  /// Prints "args, kwargs" of a call; `skipFirst` drops the receiver.
  void printCallArgs(std::string &out, NodeFormat f, bool skipFirst) const;

private:
  friend class InternalGraph;
  friend class Node;
  void relocateUses(Use *oldBegin, Use *oldEnd);
  /// Counts an output becoming needed (`gained`) or unneeded, keeping the
  /// graph's unused list.
  void noteOutputNeeded(bool gained) {
    if (gained) {
      if (usedOutputs_++ == 0 && unusedIndex_ != NoUnusedIndex)
        removeFromUnusedList();
    } else if (--usedOutputs_ == 0 && inBody_) {
      addToUnusedList();
    }
  }
  void removeFromUnusedList();
  void addToUnusedList();

  Kind kind_;
  bool disableRemove_ : 1 = false;
  bool inBody_ : 1 = false;
  uint8_t scratch_ : 2 = 0;
  /// How many outputs are needed (used by an expr or a graph output; the
  /// node's use-list and output-list edits count the changes to and from
  /// zero), so that an edit learns whether the producer became unused from
  /// this line alone.
  uint16_t usedOutputs_ = 0;
  /// Position in the graph's list of unused exprs (InternalGraph::unused_)
  /// while this expr is in the body and no output is needed;
  /// NoUnusedIndex otherwise.
  uint32_t unusedIndex_ = NoUnusedIndex;
  // The first cache line holds what walks and the rewrite driver read of
  // every expr they visit (kind, flags, op, graph, list links, order); the
  // uses start right after it. The id, read by printers, comes later.
  const OpSchema *op_;
  InternalGraph *graph_ = nullptr;
  Expr *prev_ = nullptr;
  Expr *next_ = nullptr;
  uint64_t order_ = 0;
  llvm::SmallVector<Use, 3> uses_;
  llvm::SmallVector<Node *, 1> outputs_; ///< owned
  int64_t id_;
  std::optional<TreeDef> argDef_;
  std::optional<TreeDef> outDef_;
};

/// A graph input placeholder (not in the body list; reached through
/// `graph.inputs()[i]->expr()`).
class Input : public Expr {
public:
  Input(int64_t id, std::string name) : Expr(Kind::Input, id), name_(std::move(name)) {}
  static bool classof(const Expr *e) { return e->kind() == Kind::Input; }
  const std::string &name() const { return name_; }

private:
  void printBody(std::string &out, NodeFormat f) const override;
  std::string name_;
};

/// `out = getattr(module, "a.b")`: fetches an attribute (dotted path) of the
/// module input; the output is a TensorNode or ModuleNode.
class GetAttr : public Expr {
public:
  GetAttr(int64_t id, std::string attr) : Expr(Kind::GetAttr, id), attr_(std::move(attr)) {}
  static bool classof(const Expr *e) { return e->kind() == Kind::GetAttr; }
  /// The (possibly dotted) attribute path: the reference's `GetAttr.name`.
  const std::string &attrName() const { return attr_; }
  void setAttrName(std::string a);

private:
  friend class InternalGraph;
  void printBody(std::string &out, NodeFormat f) const override;
  std::string attr_;
  /// Index in the body's GetAttr list (InternalGraph::getAttrs_).
  size_t indexInGraph_ = 0;
};

/// A module call (`method == "__call__"` on a ModuleNode) or a tensor method
/// call (`x.__add__(y)`, `x.reshape(...)`).
class CallMethod : public Expr {
public:
  /// Module call.
  explicit CallMethod(int64_t id) : Expr(Kind::CallMethod, id) {}
  /// Tensor method call.
  CallMethod(int64_t id, const OpSchema &method) : Expr(Kind::CallMethod, id, &method) {}
  static bool classof(const Expr *e) { return e->kind() == Kind::CallMethod; }

  /// "__call__" for module calls, else the tensor method's name.
  llvm::StringRef method() const;
  /// The tensor method schema; nullptr for module calls.
  const OpSchema *methodSchema() const { return opSchema(); }
  bool isModuleCall() const { return opSchema() == nullptr; }
  /// The called module's node (input 0) for module calls.
  ModuleNode *moduleNode() const;
  /// The callee's graph for this call's signature when the callee is a
  /// TracedModule (the reference's `CallMethod.graph`), else nullptr.
  InternalGraph *calleeGraph() const;

private:
  void printBody(std::string &out, NodeFormat f) const override;
};

/// `out = module.func(args, kwargs)` for a builtin or registered function.
class CallFunction : public Expr {
public:
  CallFunction(int64_t id, const OpSchema &fn) : Expr(Kind::CallFunction, id, &fn) {}
  static bool classof(const Expr *e) { return e->kind() == Kind::CallFunction; }
  const OpSchema &func() const { return *opSchema(); }

private:
  void printBody(std::string &out, NodeFormat f) const override;
};

/// A constant Tensor or builtin Module that is not an attribute.
class Constant : public Expr {
public:
  Constant(int64_t id, Tensor t, std::string name);
  Constant(int64_t id, std::unique_ptr<Module> m, std::string name);
  ~Constant() override;
  static bool classof(const Expr *e) { return e->kind() == Kind::Constant; }
  const std::string &name() const { return name_; }
  bool isTensor() const { return module_ == nullptr; }
  const Tensor &tensor() const { return tensor_; }
  void setTensor(Tensor t) { tensor_ = std::move(t); }
  Module *module() const { return module_.get(); }

private:
  void printBody(std::string &out, NodeFormat f) const override;
  std::string name_;
  Tensor tensor_;
  std::unique_ptr<Module> module_;
};

/// `outs = OpDef(inputs)`: a raw op application with op-def attributes.
class Apply : public Expr {
public:
  Apply(int64_t id, const OpSchema &opdef, TreeDef attrs)
      : Expr(Kind::Apply, id, &opdef), attrs_(std::move(attrs)) {}
  static bool classof(const Expr *e) { return e->kind() == Kind::Apply; }
  const OpSchema &opdef() const { return *opSchema(); }
  /// Op-def attributes (a dict TreeDef of constants).
  const TreeDef &attrs() const { return attrs_; }

private:
  void printBody(std::string &out, NodeFormat f) const override;
  TreeDef attrs_;
};

/// Predicates of the reference (`is_call_module`, ...).
bool isCallModule(const Expr *e);
bool isCallTensorMethod(const Expr *e, llvm::StringRef method = {});
bool isCallFunction(const Expr *e, const OpSchema *fn = nullptr);

} // namespace tmg
