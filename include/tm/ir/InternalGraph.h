//===- InternalGraph.h - One graph of a traced module -----------*- C++ -*-===//
//
// An InternalGraph is the body of one module for one call signature: input
// nodes (input 0 is the `self` ModuleNode), a topologically ordered list of
// exprs, and output nodes. It owns its exprs (and through them their output
// nodes) and a NameSpace of unique names.
//
// Every operation is linear in what it touches: the expr list is intrusive
// with O(1) order comparison, uses are intrusive lists, membership tests use
// hash sets. Where the reference is quadratic (get_dep_exprs, compile,
// replace_node, insert) this file says what it does instead.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/iterator_range.h>

#include "tm/ir/Expr.h"
#include "tm/ir/Filter.h"
#include "tm/ir/NameSpace.h"
#include "tm/ir/Node.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class TracedModule;
class InternalGraph;

void cloneGraphInto(const InternalGraph &src, InternalGraph &dst,
                    llvm::DenseMap<const Node *, Node *> *nodeMap);
/// The first part of cloneGraphInto: copies `src`'s inputs (Input exprs
/// with their ids), namespace, name and qualname into the empty `dst`,
/// mapping each input node in `map`. For builders of a new body (flatten).
void cloneGraphInputsInto(const InternalGraph &src, InternalGraph &dst,
                          llvm::DenseMap<const Node *, Node *> &map);
/// A copy of `e` without inputs or outputs (same kind, payload, TreeDefs,
/// `disable_remove`), with id `id`.
std::unique_ptr<Expr> cloneExprShallow(const Expr &e, int64_t id);
/// A copy of node `n` (kind, name, qualname, type) with id `id`, no uses.
std::unique_ptr<Node> cloneNodeShallow(const Node &n, int64_t id);
/// The same named `name` (with `n`'s qualname): one new name block, where
/// a copy renamed later shared `n`'s block and released it again (two
/// atomic updates of a line that is a cache miss in a large graph).
std::unique_ptr<Node> cloneNodeShallow(const Node &n, int64_t id,
                                       llvm::StringRef name);

/// Result of `replaceNode`: uses that were deliberately not rewired.
struct ReplaceReport {
  struct Skipped {
    Node *oldNode;
    Node *newNode;
    Expr *user;
    bool cycle; ///< rewiring would make `user` depend on itself
  };
  std::vector<Skipped> skipped;
  size_t rewired = 0;
  bool complete() const { return skipped.empty(); }
  /// One line per skipped use: "expr %7 keeps using relu_out: ...".
  std::string str() const;
};

class InternalGraph {
public:
  InternalGraph(std::string name, std::string qualname);
  ~InternalGraph();
  InternalGraph(const InternalGraph &) = delete;
  InternalGraph &operator=(const InternalGraph &) = delete;

  // -- Identity --------------------------------------------------------------
  const std::string &name() const { return name_; }
  const std::string &qualname() const { return qualname_; }
  /// Renames the graph as the reference: a sub-graph's name must be unused in
  /// its own namespace (no node of it has it) and is then reserved there; a
  /// top graph may take any name. Throws tmg::Error otherwise.
  void setName(llvm::StringRef newName);
  void setQualnameInternal(std::string q);
  void setNameInternal(std::string n) { name_ = std::move(n); }
  NameSpace &ns() { return ns_; }
  const NameSpace &ns() const { return ns_; }

  /// The module whose argdef map holds this graph.
  TracedModule *owner() const { return owner_; }
  void setOwnerInternal(TracedModule *m) { owner_ = m; }
  /// The graph that calls this one (the reference's `top_graph`); nullptr
  /// for a top graph.
  InternalGraph *parent() const { return parent_; }
  void setParentInternal(InternalGraph *g) { parent_ = g; }

  // -- Inputs and outputs ------------------------------------------------------
  llvm::ArrayRef<Node *> inputs() const { return inputs_; }
  llvm::ArrayRef<Node *> outputs() const { return outputs_; }
  Node *input(size_t i) const { return inputs_[i]; }
  Node *output(size_t i) const { return outputs_[i]; }
  /// The `self` ModuleNode (input 0).
  ModuleNode *self() const;

  // -- The body ----------------------------------------------------------------
  class iterator {
  public:
    using iterator_category = std::bidirectional_iterator_tag;
    using value_type = Expr *;
    using difference_type = std::ptrdiff_t;
    using pointer = Expr **;
    using reference = Expr *;
    iterator() = default;
    iterator(Expr *e, const InternalGraph *g) : e_(e), g_(g) {}
    Expr *operator*() const { return e_; }
    iterator &operator++() {
      e_ = e_->nextInGraph();
      return *this;
    }
    iterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    iterator &operator--() {
      e_ = e_ ? e_->prevInGraph() : g_->last_;
      return *this;
    }
    bool operator==(const iterator &o) const { return e_ == o.e_; }
    bool operator!=(const iterator &o) const { return e_ != o.e_; }

  private:
    Expr *e_ = nullptr;
    const InternalGraph *g_ = nullptr;
  };
  /// Body exprs in order (Input exprs excluded, as the reference's `_exprs`).
  iterator begin() const { return iterator(first_, this); }
  iterator end() const { return iterator(nullptr, this); }
  llvm::iterator_range<iterator> body() const { return {begin(), end()}; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Expr *front() const { return first_; }
  Expr *back() const { return last_; }

  // -- Creating exprs (ids from the root module's counters) --------------------
  /// Creates an Input expr and node, appended to the inputs. The name is
  /// made unique; qualname defaults to "<graph qualname>.[<name>]".
  TensorNode *addTensorInput(llvm::StringRef name, std::optional<Shape> shape = {},
                             DType dtype = DType::Float32,
                             std::string qualname = "");
  ModuleNode *addModuleInput(llvm::StringRef name, std::string qualname = "");

  /// Appends an Input expr created by a reader (its output 0 becomes the
  /// next graph input). Ids and names are taken as they are.
  Node *adoptInputInternal(std::unique_ptr<Expr> input);

  /// Where `create` puts new exprs: before `before` (nullptr = at the end).
  void setInsertionPoint(Expr *before) { insertBefore_ = before; }
  /// Insert after `e` (nullptr: at the beginning of the body).
  void setInsertionPointAfter(Expr *e);
  Expr *insertionPoint() const { return insertBefore_; }

  /// Creates a body expr of type T at the insertion point with the next id.
  template <typename T, typename... Args> T *create(Args &&...args) {
    auto e = std::make_unique<T>(nextExprId(), std::forward<Args>(args)...);
    T *raw = e.get();
    insertExpr(std::move(e), insertBefore_);
    return raw;
  }
  /// Creates an output node of `e` with the next node id (not yet named).
  TensorNode *newTensorOutput(Expr &e);
  ModuleNode *newModuleOutput(Expr &e);

  /// Inserts an already created expr before `before` (nullptr = end).
  void insertExpr(std::unique_ptr<Expr> e, Expr *before);
  /// Unlinks `e` from the body and returns it (its uses are kept).
  std::unique_ptr<Expr> removeExpr(Expr *e);
  /// Erases `e`: drops its input uses and destroys it. Throws tmg::Error when
  /// one of its outputs still has users or is a graph output.
  void eraseExpr(Expr *e);
  /// Moves `e` to just before `before` (nullptr = end).
  void moveBefore(Expr *e, Expr *before);

  /// Ids from the owning module's counters; a graph without an owner counts
  /// its own, from 0.
  int64_t nextNodeId();
  int64_t nextExprId();

  // -- Queries (the reference's API) --------------------------------------------
  /// Input exprs, then the body; with `recursive`, after each module call
  /// with a sub-graph, that sub-graph's exprs (each sub-graph once).
  ExprFilter exprs(bool recursive = true) const;
  /// Every node of `exprs(recursive)`, sorted by id.
  NodeFilter nodes(bool recursive = true) const;
  ExprFilter getFunctionByType(const OpSchema *fn = nullptr,
                               bool recursive = true) const;
  ExprFilter getMethodByType(llvm::StringRef method = {},
                             bool recursive = true) const;
  ExprFilter getExprById(llvm::ArrayRef<int64_t> ids,
                         bool recursive = true) const;
  NodeFilter getModuleByType(const ModuleType &t, bool recursive = true) const;
  NodeFilter getNodeById(llvm::ArrayRef<int64_t> ids,
                         bool recursive = true) const;
  NodeFilter getNodeByName(llvm::StringRef pattern, bool ignoreCase = true,
                           bool recursive = true) const;

  /// Producers of `nodes` and, transitively, of their inputs (Input exprs
  /// included; sub-graphs not entered), in the reference's discovery order.
  /// O(exprs and uses reached), with hash sets instead of list scans.
  std::vector<Expr *> getDepExprs(llvm::ArrayRef<Node *> nodes) const;

  // -- Editing inputs and outputs (top graph only, as the reference) ------------
  /// Replaces the tensor inputs by fresh inputs named "args", "args_1", ...
  /// with the given shapes and dtypes; re-keys the module's signature maps.
  /// Users of the old inputs are not rewired (reference semantics); use
  /// replaceNode for that. Returns the new nodes.
  std::vector<Node *> resetInputs(
      llvm::ArrayRef<std::pair<std::optional<Shape>, DType>> inputs);
  /// Appends a positional tensor input; returns it.
  TensorNode *addInputNode(std::optional<Shape> shape,
                           DType dtype = DType::Float32,
                           llvm::StringRef name = "args");
  /// Sets the outputs to `nodes` structured as `outDef` (a TreeDef whose
  /// node leaves are the nodes, e.g. `(a, {"input": b})`).
  void resetOutputs(TreeDef outDef, llvm::ArrayRef<Node *> nodes);
  /// Outputs become `(original_structure, node)`.
  void addOutputNode(Node *node);
  /// Sets outputs without touching the module's out TreeDef (builders).
  void setOutputsInternal(std::vector<Node *> outs) {
    setOutputList(std::move(outs));
    touch();
  }
  void setInputsInternal(std::vector<Node *> ins) {
    inputs_ = std::move(ins);
    touch();
  }

  // -- Rewrites -------------------------------------------------------------------
  /// Replaces nodes, processing pairs last to first as the reference's
  /// `popitem`. For each (old, new): graph outputs equal to old become new;
  /// each use of old by an expr placed after new's producer is rewired;
  /// uses at or before it (rewiring would create a cycle or a use before
  /// definition) are skipped and listed in the report. Throws tmg::Error when
  /// the kinds differ or `new` is not a node of this graph. O(uses of old).
  ReplaceReport replaceNode(llvm::ArrayRef<std::pair<Node *, Node *>> repl);
  /// Canonicalises GetAttrs (the reference's `_merge_getattr_expr`): a chain
  /// `getattr(getattr(self, "a"), "b")` becomes `getattr(self, "a.b")`, and
  /// users of duplicate GetAttrs of the same path move to the first one.
  /// Returns true when something changed. Throws tmg::Error (naming the expr)
  /// when a GetAttr's qualname is not under the graph's qualname. O(1) when
  /// the graph has no GetAttr or did not change since the last merge.
  bool mergeGetAttrs();
  /// Throws the tmg::Error mergeGetAttrs would throw (a GetAttr whose
  /// qualname is not under the graph's), without changing anything: it
  /// plans the merge (one walk of the GetAttrs, not of the body). Passes call
  /// it on every graph before they change any, so that they fail
  /// atomically. A mergeGetAttrs (or compile) before the next structural
  /// change applies the plan, touching only the GetAttrs that change. Free
  /// on a graph without GetAttrs or unchanged since its last merge. (Not
  /// const: it keeps the plan, so it must not run concurrently with other
  /// uses of the graph.)
  void checkGetAttrs();
  /// checkGetAttrs on each of `graphs` (distinct), as one walk over all
  /// their GetAttrs: a hierarchy has many small graphs, each cold, and one
  /// stream keeps the memory fetches running ahead across graph boundaries.
  static void checkGetAttrs(llvm::ArrayRef<InternalGraph *> graphs);
  /// mergeGetAttrs on each of `graphs` (distinct), as one walk (as
  /// checkGetAttrs). Plans every graph before it changes any, so the
  /// tmg::Error of a bad GetAttr in any graph changes none (only running
  /// out of memory while re-pointing a GetAttr can stop it half way, each
  /// graph then consistent and merged again by the next call). Returns the
  /// number of graphs changed.
  static size_t mergeGetAttrs(llvm::ArrayRef<InternalGraph *> graphs);
  /// mergeGetAttrs, then removes every expr that no output depends on,
  /// keeping `disable_remove` exprs and their producers. Returns the number
  /// of exprs removed. Linear in what it removes, not in the graph: the
  /// graph keeps the list of its exprs no output of which is needed
  /// (unusedExprs(); in a graph without cycles a dead expr's users are all
  /// dead, so there is one there whenever there is a dead expr), and
  /// compile deletes from it, adding producers as their last use goes.
  size_t compile();
  /// compile() without the getattr merge: removes the dead exprs only
  /// (flatten, which merges GetAttrs as it copies them).
  size_t removeDeadExprs();
  /// The body exprs no output of which is needed (used by an expr or a
  /// graph output), in no particular order (compile's work list; for tests
  /// and the verifier).
  llvm::ArrayRef<Expr *> unusedExprs() const { return unused_; }
  /// The body exprs whose module references TracedModule::updateRefs
  /// derives, in body order: GetAttrs and Constants with a module output,
  /// and module calls. Kept until the graph changes (version()), so that
  /// refreshing the refs of a hierarchy walks only the graphs that changed.
  llvm::ArrayRef<Expr *> moduleRefExprs();
  /// Sets that list, as of now, from a builder that created the body
  /// (flatten): `exprs` must be what moduleRefExprs() would find.
  void setModuleRefExprsInternal(std::vector<Expr *> exprs);
  /// Renumbers ids of this graph (recursively) in the reference's order and
  /// stores the next free ids on the root module.
  void resetIds();

  // -- Printing ---------------------------------------------------------------------
  /// The reference's text: "Name.Graph (self, x) {\n\t...\n\treturn y\n}".
  std::string str(NodeFormat f = {}) const;

  /// True when `n` is an input or output of some expr of this graph.
  bool ownsNode(const Node *n) const;

  /// A counter bumped by every structural change (exprs inserted, removed
  /// or rewired, inputs or outputs changed): derived data such as execution
  /// plans compare it to know when to rebuild.
  uint64_t version() const { return version_; }
  void touch() { ++version_; }

private:
  friend class iterator;
  friend void cloneGraphInto(const InternalGraph &, InternalGraph &,
                             llvm::DenseMap<const Node *, Node *> *);
  friend void cloneGraphInputsInto(const InternalGraph &, InternalGraph &,
                                   llvm::DenseMap<const Node *, Node *> &);
  void linkBefore(Expr *e, Expr *before);
  /// Takes `e` out of the body list (no version bump, no ownership change).
  void unlinkFromBody(Expr *e);
  void renumberOrder();
  friend class Expr;
  /// Replaces outputs_, keeping the nodes' output counts (a graph output
  /// keeps its producer out of the unused list).
  void setOutputList(std::vector<Node *> outs);
  /// Adds `e` (in the body, outputs unused, not listed) to unused_.
  void addUnused(Expr *e);
  /// Removes `e` from unused_ (O(1): the last entry takes its place).
  void removeUnused(Expr *e);
  TracedModule &topModule(const char *what) const;

  std::string name_, qualname_;
  NameSpace ns_;
  TracedModule *owner_ = nullptr;
  InternalGraph *parent_ = nullptr;
  std::vector<Node *> inputs_, outputs_;
  std::vector<std::unique_ptr<Expr>> inputExprs_; ///< owned Input exprs
  Expr *first_ = nullptr, *last_ = nullptr;
  size_t size_ = 0;
  /// The id counters of a graph without an owner.
  int64_t orphanNodeIds_ = 0, orphanExprIds_ = 0;
  /// Every body expr no output of which is needed (used by an expr or a
  /// graph output); each knows its position, Expr::unusedIndex_. Kept by
  /// every use-list and output-list edit, insertion and removal, so compile
  /// never walks the live body.
  std::vector<Expr *> unused_;
  Expr *insertBefore_ = nullptr;
  uint64_t version_ = 0;
  /// One change of the getattr merge: the users of `out` (the output of a
  /// duplicate GetAttr) move to `base`, or, when `base` is null, `ga` is
  /// re-pointed at self with the attribute path `path` (a view of its
  /// output's qualname).
  struct GetAttrMergeStep {
    GetAttr *ga;
    Node *out;
    Node *base;
    llvm::StringRef path;
  };
  /// Plans the getattr merge of each of `graphs`, as one walk over their
  /// GetAttrs: graph k's steps are steps[ends[k - 1], ends[k]) (throws,
  /// changing nothing, on a bad qualname or a missing self).
  static void planGetAttrMerges(llvm::ArrayRef<InternalGraph *> graphs,
                                std::vector<GetAttrMergeStep> &steps,
                                std::vector<size_t> &ends);
  /// The plan checkGetAttrs made, valid while version_ equals planVersion_
  /// (any structural change, qualnames included, moves version_).
  std::vector<GetAttrMergeStep> mergePlan_;
  uint64_t planVersion_ = ~uint64_t(0);
  /// The GetAttr exprs of the body (each knows its index): the getattr
  /// merge visits them, not the whole body. In body order while
  /// getAttrsSorted_: appending to the body and removing the last GetAttr
  /// keep it, other insertions and removals clear it.
  std::vector<GetAttr *> getAttrs_;
  bool getAttrsSorted_ = true;
  /// Puts getAttrs_ in body order (reads each GetAttr's order key unless
  /// it is already).
  void sortGetAttrs();
  /// version_ when mergeGetAttrs last completed: the merge is idempotent,
  /// so until the graph changes (qualnames and attribute paths included)
  /// there is nothing to check or merge.
  uint64_t mergedVersion_ = ~uint64_t(0);
  /// moduleRefExprs() as of version refExprsVersion_.
  std::vector<Expr *> refExprs_;
  uint64_t refExprsVersion_ = ~uint64_t(0);
};

namespace detail {
/// True for the exprs InternalGraph::moduleRefExprs() lists.
bool isModuleRefExpr(const Expr *e);
/// Numbers the nodes of `keyed` (old id, node; every node of a graph in
/// exprs(true)'s order) 0, 1, ... in the order of their old ids, as
/// resetIds does, and returns how many; -1, numbering nothing, when an old
/// id is negative or repeated (resetIds then takes nodes()'s order).
int64_t renumberNodesByOldId(std::vector<std::pair<int64_t, Node *>> &keyed);

/// The attribute path of a GetAttr (expr `exprId`, output `out`) whose
/// output has qualname `oq`, in a graph with qualname `qual`: `oq` after
/// "<qual>." ("" when equal). Throws tmg::Error naming the expr when `oq`
/// is not under `qual`. (The getattr merge's key; flatten merges as it
/// copies.)
llvm::StringRef attrPathOf(llvm::StringRef oq, llvm::StringRef qual, int64_t exprId,
                           const Node &out);

} // namespace detail

} // namespace tmg
