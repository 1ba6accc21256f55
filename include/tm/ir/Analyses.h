//===- Analyses.h - Graph analyses on the Boost.Graph view ------*- C++ -*-===//
//
// Dependence analyses of one InternalGraph, each a stock Boost.Graph
// algorithm run on a GraphView (tm/ir/GraphView.h). V is the number of
// vertices (inputs + body exprs), E the number of edges (uses inside the
// graph). Every function reads the graph only; sub-graphs are not entered.
//
// Each analysis takes a GraphView, so a caller running several of them
// builds the view once; the InternalGraph overloads build one (O(V)) per
// call.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include <llvm/ADT/DenseMap.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/GraphView.h"

namespace tmg {

/// The vertices ordered so that every producer precedes its users: the
/// reverse DFS finish order of boost::topological_sort. The order is
/// deterministic (DFS roots in vertex order, out-edges in use order) but in
/// general differs from graph order. On a cyclic graph, a Diagnostic at an
/// expr of a cycle whose message names that cycle ("%4 -> %6 -> %4"), with
/// the cycle's exprs as notes and a note listing every expr on a cycle.
/// O(V + E); O(V + E) more on failure.
FailureOr<std::vector<const Expr *>> topologicalOrder(const GraphView &view);
inline FailureOr<std::vector<const Expr *>>
topologicalOrder(const InternalGraph &graph) {
  return topologicalOrder(GraphView(graph));
}

/// One dependency cycle: exprs such that each uses an output of the one
/// before it and the first uses an output of the last (one expr for an expr
/// using its own output), starting at the one earliest in vertex order;
/// empty when the view is acyclic. Found as the first back edge of
/// boost::depth_first_search. O(V + E).
std::vector<const Expr *> findCycle(const GraphView &view);

/// True when every producer comes before its users in graph order (Inputs
/// before the body), the order invariant the verifier checks. Inputs
/// produced outside the graph are not edges and are not checked here.
/// O(V + E), no allocation.
bool isTopologicallyOrdered(const GraphView &view);
inline bool isTopologicallyOrdered(const InternalGraph &graph) {
  return isTopologicallyOrdered(GraphView(graph));
}

/// The exprs the graph outputs depend on, outputs' producers included, in
/// vertex order: the same set as `graph.getDepExprs(graph.outputs())`,
/// found by boost::breadth_first_visit on the reversed view from the
/// outputs' producers. O(V + E).
std::vector<const Expr *> reachableFromOutputs(const GraphView &view);
inline std::vector<const Expr *>
reachableFromOutputs(const InternalGraph &graph) {
  return reachableFromOutputs(GraphView(graph));
}

/// True when rewiring the uses of `oldNode` by exprs of the view to
/// `newNode` would create a cycle, whatever the expr order: some user of
/// `oldNode` is `newNode`'s producer or one of its ancestors. False when
/// the nodes are equal or `newNode` is not produced in the view. A reverse
/// breadth-first search from `newNode`'s producer: O(V + E + uses of
/// `oldNode`).
bool wouldCreateCycle(const GraphView &view, const Node *oldNode,
                      const Node *newNode);
inline bool wouldCreateCycle(const InternalGraph &graph, const Node *oldNode,
                             const Node *newNode) {
  return wouldCreateCycle(GraphView(graph), oldNode, newNode);
}

/// The immediate dominator of every expr reachable from `entry` other than
/// `entry` itself: the last expr that every dependence path from `entry`
/// to it goes through. Exprs `entry` does not reach are absent; paths
/// through them do not count. boost::lengauer_tarjan_dominator_tree,
/// O((V + E) log V), run on a helper thread whose stack is sized to V
/// (Boost's implementation recurses up to V deep). Throws tmg::Error when
/// `entry` is not a vertex.
llvm::DenseMap<const Expr *, const Expr *>
immediateDominators(const GraphView &view, const Expr *entry);

/// The strongly connected components (boost::strong_components), each in
/// vertex order, the components in dependence order: every edge between
/// two components goes from an earlier one to a later one. An acyclic
/// graph has one component per expr; a component of several exprs, or of
/// one expr using its own output, is a cycle. O(V + E).
std::vector<std::vector<const Expr *>>
stronglyConnectedComponents(const GraphView &view);

} // namespace tmg
