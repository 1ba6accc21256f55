//===- TracedModule.h - A module with graphs per call signature -*- C++ -*-===//
//
// A TracedModule is a Module (attributes: parameters, buffers, submodules,
// values) that owns one InternalGraph per distinct call signature: the
// reference's `argdef_graph_map` and `argdef_outdef_map`, keyed by the
// TreeDef of `((self, *args), kwargs)`. Non-builtin submodules are
// TracedModules too; builtin submodules stay builtin.
//
// The top module owns the id counters of the whole hierarchy (the
// reference's `_total_ids`), so two modules never share id state.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/ADT/DenseSet.h>

#include "tm/ir/InternalGraph.h"
#include "tm/ir/Module.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class TracedModule : public Module {
public:
  /// An empty traced module of class `typeName` (e.g. "MyModule").
  explicit TracedModule(std::string typeName, bool isTop = true);
  ~TracedModule() override;
  static bool classof(const Module *m) { return m->kind() == Kind::Traced; }

  /// Converts a plain module tree: every plain module becomes a
  /// TracedModule (without graphs) with the same attributes; builtins are
  /// kept. Used by builders before they add graphs.
  static std::unique_ptr<TracedModule> fromModule(std::unique_ptr<Module> m,
                                                  bool isTop = true);

  bool isTop() const { return isTop_; }
  void setTop(bool t) { isTop_ = t; }

  // -- Graphs per signature -------------------------------------------------------
  struct Signature {
    TreeDef argDef;
    TreeDef outDef;
    std::unique_ptr<InternalGraph> graph;
  };
  size_t numGraphs() const { return sigs_.size(); }
  const std::vector<Signature> &signatures() const { return sigs_; }
  /// The single graph (the reference's `graph` property); throws tmg::Error
  /// listing the signatures when there is not exactly one.
  InternalGraph &graph() const;
  InternalGraph *graphFor(const TreeDef &argDef) const;
  const TreeDef *outDefFor(const TreeDef &argDef) const;
  const Signature *signatureOf(const InternalGraph &g) const;
  /// Creates the graph of signature `argDef` (throws when it exists).
  InternalGraph &addGraph(TreeDef argDef, std::string name, std::string qualname);
  void setOutDef(const TreeDef &argDef, TreeDef outDef);
  /// Changes the key of a graph (reset_inputs / add_input_node).
  void rekey(const TreeDef &oldArgDef, TreeDef newArgDef);
  /// "forward(Tensor)", one line per signature, for error messages.
  std::string signaturesStr() const;

  // -- Ids ----------------------------------------------------------------------
  /// The top-most TracedModule of the hierarchy (this when top).
  TracedModule &root();
  const TracedModule &root() const;
  int64_t nextNodeId() { return root().nextNodeId_++; }
  int64_t nextExprId() { return root().nextExprId_++; }
  /// (next node id, next expr id): the reference's `_total_ids`.
  std::pair<int64_t, int64_t> totalIds() const {
    return {root().nextNodeId_, root().nextExprId_};
  }
  void setTotalIds(int64_t nodeId, int64_t exprId) {
    root().nextNodeId_ = nodeId;
    root().nextExprId_ = exprId;
  }

  /// Recomputes derived references (the reference's `_update_ref`): each
  /// graph's owner and parent graph, ModuleNode owners of `self`, GetAttr
  /// and Constant module nodes, recursively into called sub-graphs and
  /// every traced module of the tree (also below plain submodules).
  /// Linear in the graphs changed since their refs were last derived (the
  /// others' module-reference exprs are cached, see
  /// InternalGraph::moduleRefExprs) plus the module tree.
  void updateRefs();

  /// A copy whose top graph calls no traced submodule: every call of a
  /// TracedModule reached through a GetAttr is inlined (its sub-graph
  /// copied per call site, inputs and outputs substituted, pass-through
  /// outputs rewired), inlined nodes renamed "<module node>_<name>" in the
  /// top namespace; then compile() (GetAttr chains become dotted paths,
  /// dead exprs go) and resetIds(). The module tree is kept.
  std::unique_ptr<TracedModule> flatten() const;
  /// flatten() by the plain algorithm: every expr of every inlined graph
  /// is copied and compile() deletes the dead copies (flatten() does not
  /// copy them). For tests that check the two agree.
  std::unique_ptr<TracedModule> flattenCopyingDeadExprsForTesting() const;
  /// How many times (in this process) flatten() or flattenInPlace() built
  /// the flat graph by the plain algorithm because its one-walk builder
  /// does not build it (a duplicate GetAttr that stays a graph output
  /// through a pass-through; node ids at or above the node id counter).
  /// For tests.
  static uint64_t flattenFallbacksForTesting();
  /// flatten() applied to this module: its graphs become the flat ones.
  /// Returns false (and changes nothing) when no call was inlinable.
  bool flattenInPlace();

  /// clone() as a TracedModule.
  std::unique_ptr<TracedModule> cloneTraced() const;
  /// Makes this module what `snapshot` (a cloneTraced() of it, typically)
  /// is, in place: attributes, submodules, graphs and id counters move over
  /// and every reference to `snapshot` now points here. Pointers into this
  /// module's previous graphs and submodules are invalidated. This is how
  /// the pass manager rolls back a failed pass.
  void restoreFrom(TracedModule &snapshot);

  /// Prints every graph of the hierarchy, top first.
  std::string str() const;

protected:
  std::unique_ptr<Module> cloneTree() const override { return cloneImpl(); }
  void fixClonedRefs() override;

private:
  std::unique_ptr<TracedModule> cloneImpl() const;
  /// Replaces the top graph by its flat version (see flatten()), built by
  /// the plain algorithm when `plain`; then refs and ids. Throws, changing
  /// nothing, on a malformed graph.
  void replaceTopWithFlat(bool plain);
  void updateRefsImpl(InternalGraph *parentGraph,
                      llvm::DenseSet<const TracedModule *> &visited);

  bool isTop_;
  std::vector<Signature> sigs_;
  std::unordered_map<TreeDef, size_t> sigIndex_;
  int64_t nextNodeId_ = 0, nextExprId_ = 0;
};


} // namespace tmg
