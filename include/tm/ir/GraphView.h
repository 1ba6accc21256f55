//===- GraphView.h - Boost.Graph view of an InternalGraph -------*- C++ -*-===//
//
// GraphView exposes an InternalGraph to Boost.Graph algorithms by external
// adaptation: the BGL interface is a set of free functions and a
// `graph_traits` specialisation, so the IR classes stay free of Boost and
// nothing is copied. Only this header (and the `tmgraph-graphview` library)
// includes Boost; the core IR never does.
//
//  * Vertices are the graph's exprs: the Input exprs of `graph.inputs()`, in
//    input order, then the body in order. `vertex_descriptor` is
//    `const tmg::Expr *`.
//  * Edges are data dependencies, producer -> user, one per use: an expr
//    using a node twice, or using two outputs of one producer, gives
//    parallel edges. `edge_descriptor` is a DepEdge (user expr + input slot).
//  * Out-edges of an expr are the uses of its outputs (outputs in order,
//    each output's uses in use order); in-edges are its input slots in
//    order. Uses by exprs that are not vertices (another graph's, removed
//    exprs) and inputs produced outside the view are not edges.
//  * `vertex_index` is dense (0..n-1, in vertex order), so stock algorithms
//    need no user-supplied index or colour maps.
//
// Building a view is O(n) for n vertices and stores only the vertex order
// and the index map; edges are read from the IR's use lists on demand and
// iterating them never allocates. A view is a snapshot of the vertex set:
// it must not be used after the graph changes structurally (isCurrent()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_iterator.hpp>
#include <boost/graph/graph_traits.hpp>
#include <boost/graph/properties.hpp>
#include <boost/iterator/iterator_facade.hpp>
#include <boost/property_map/property_map.hpp>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>

#include "tm/ir/Expr.h"
#include "tm/ir/InternalGraph.h"
#include "tm/ir/Node.h"

namespace tmg {

/// One data dependency: input slot `operand` of `user`. Its source is the
/// producer of that input, its target `user`. Trivially copyable.
struct DepEdge {
  const Expr *user = nullptr;
  uint32_t operand = 0;

  /// The node carried by the edge.
  const Node *node() const { return user->input(operand); }
  /// The expr that defines node().
  const Expr *producer() const { return node()->expr(); }
  friend bool operator==(const DepEdge &, const DepEdge &) = default;
};

class GraphView;

/// Out-edges of one expr: the uses of its outputs that are edges of the
/// view. A forward iterator over the IR's use lists: a step costs O(1) plus
/// the uses it skips; any edit of those uses invalidates it.
class DepOutEdgeIterator
    : public boost::iterator_facade<DepOutEdgeIterator, DepEdge,
                                    std::forward_iterator_tag, DepEdge> {
public:
  DepOutEdgeIterator() = default;
  /// Positions at the first out-edge of `v` (`atEnd`: past the last).
  DepOutEdgeIterator(const GraphView &view, const Expr *v, bool atEnd);

private:
  friend class boost::iterator_core_access;
  DepEdge dereference() const {
    const Expr *user = use_->user();
    return {user, uint32_t(user->useIndex(use_))};
  }
  bool equal(const DepOutEdgeIterator &o) const {
    return use_ == o.use_ && output_ == o.output_;
  }
  void increment() {
    use_ = use_->nextUse();
    settle();
  }
  /// Advances to the next use that is an edge of the view, or to the end.
  void settle();

  const GraphView *view_ = nullptr;
  const Expr *v_ = nullptr;
  size_t output_ = 0;
  const Use *use_ = nullptr;
};

/// In-edges of one expr: its input slots whose producer is a vertex. A
/// forward iterator; a step costs O(1) plus the slots it skips.
class DepInEdgeIterator
    : public boost::iterator_facade<DepInEdgeIterator, DepEdge,
                                    std::forward_iterator_tag, DepEdge> {
public:
  DepInEdgeIterator() = default;
  /// Positions at the first in-edge of `v` (`atEnd`: past the last).
  DepInEdgeIterator(const GraphView &view, const Expr *v, bool atEnd);

private:
  friend class boost::iterator_core_access;
  DepEdge dereference() const { return {v_, slot_}; }
  bool equal(const DepInEdgeIterator &o) const { return slot_ == o.slot_; }
  void increment() {
    ++slot_;
    settle();
  }
  void settle();

  const GraphView *view_ = nullptr;
  const Expr *v_ = nullptr;
  uint32_t slot_ = 0;
};

/// The dense `vertex_index` map of a view: a readable property map from
/// `const Expr *` to 0..n-1. O(1) expected per look-up (a hash probe).
class GraphViewIndexMap
    : public boost::put_get_helper<size_t, GraphViewIndexMap> {
public:
  using key_type = const Expr *;
  using value_type = size_t;
  using reference = size_t;
  using category = boost::readable_property_map_tag;

  GraphViewIndexMap() = default;
  explicit GraphViewIndexMap(const GraphView &view) : view_(&view) {}
  size_t operator[](const Expr *e) const;

private:
  const GraphView *view_ = nullptr;
};

/// A zero-copy Boost.Graph view of one InternalGraph (see the file comment).
/// Borrows the graph, which must outlive the view.
class GraphView {
public:
  /// Numbers the vertices. O(n) time and memory for n = inputs + body exprs.
  explicit GraphView(const InternalGraph &graph);

  const InternalGraph &graph() const { return *graph_; }
  /// The vertices in index order.
  llvm::ArrayRef<const Expr *> exprs() const { return order_; }
  size_t size() const { return order_.size(); }

  /// True when `e` is a vertex. O(1): body exprs of the graph are vertices
  /// by construction; other exprs take a hash probe.
  bool contains(const Expr *e) const {
    if (!e || e->graph() != graph_)
      return false;
    return e->inBody() || index_.count(e);
  }
  /// The index of vertex `e` (asserted to be one). O(1) expected.
  size_t indexOf(const Expr *e) const {
    auto it = index_.find(e);
    assert(it != index_.end() && "expr is not a vertex of this view");
    return it->second;
  }
  /// False once the graph has changed structurally since construction;
  /// the view must then be rebuilt.
  bool isCurrent() const { return version_ == graph_->version(); }

private:
  const InternalGraph *graph_;
  uint64_t version_;
  std::vector<const Expr *> order_;
  llvm::DenseMap<const Expr *, uint32_t> index_;
};

inline size_t GraphViewIndexMap::operator[](const Expr *e) const {
  return view_->indexOf(e);
}

/// Targets of out-edges, one per edge (see adjacent_vertices).
using DepAdjacencyIterator =
    boost::adjacency_iterator_generator<GraphView, const Expr *,
                                        DepOutEdgeIterator>::type;

/// What a GraphView supports: VertexListGraph, IncidenceGraph,
/// BidirectionalGraph and AdjacencyGraph (not EdgeListGraph: edges are
/// reached through their vertices).
struct GraphViewTraversalTag : virtual boost::vertex_list_graph_tag,
                               virtual boost::incidence_graph_tag,
                               virtual boost::bidirectional_graph_tag,
                               virtual boost::adjacency_graph_tag {};

} // namespace tmg

namespace boost {

/// The BGL traits of GraphView, declared before any algorithm can use them.
template <> struct graph_traits<tmg::GraphView> {
  using vertex_descriptor = const tmg::Expr *;
  using edge_descriptor = tmg::DepEdge;
  using directed_category = bidirectional_tag;
  using edge_parallel_category = allow_parallel_edge_tag;
  using traversal_category = tmg::GraphViewTraversalTag;

  using vertex_iterator = const tmg::Expr *const *;
  using out_edge_iterator = tmg::DepOutEdgeIterator;
  using in_edge_iterator = tmg::DepInEdgeIterator;
  using adjacency_iterator = tmg::DepAdjacencyIterator;

  using vertices_size_type = size_t;
  using edges_size_type = size_t;
  using degree_size_type = size_t;

  static vertex_descriptor null_vertex() { return nullptr; }
};

template <> struct property_map<tmg::GraphView, vertex_index_t> {
  using type = tmg::GraphViewIndexMap;
  using const_type = tmg::GraphViewIndexMap;
};

} // namespace boost

namespace tmg {

// -- The Boost.Graph interface --------------------------------------------
// These free functions are found by argument-dependent lookup; their names
// are fixed by the BGL concepts. Complexities are per call.

/// All vertices, in index order. O(1).
inline std::pair<const Expr *const *, const Expr *const *>
vertices(const GraphView &g) {
  return {g.exprs().begin(), g.exprs().end()};
}
/// O(1).
inline size_t num_vertices(const GraphView &g) { return g.size(); }

/// O(1) (the first step skips uses that are not edges).
inline std::pair<DepOutEdgeIterator, DepOutEdgeIterator>
out_edges(const Expr *v, const GraphView &g) {
  return {DepOutEdgeIterator(g, v, false), DepOutEdgeIterator(g, v, true)};
}
/// O(uses of the outputs of `v`).
inline size_t out_degree(const Expr *v, const GraphView &g) {
  auto [b, e] = out_edges(v, g);
  return size_t(std::distance(b, e));
}

/// O(1) (the first step skips inputs produced outside the view).
inline std::pair<DepInEdgeIterator, DepInEdgeIterator>
in_edges(const Expr *v, const GraphView &g) {
  return {DepInEdgeIterator(g, v, false), DepInEdgeIterator(g, v, true)};
}
/// O(inputs of `v`).
inline size_t in_degree(const Expr *v, const GraphView &g) {
  auto [b, e] = in_edges(v, g);
  return size_t(std::distance(b, e));
}
/// in_degree + out_degree.
inline size_t degree(const Expr *v, const GraphView &g) {
  return in_degree(v, g) + out_degree(v, g);
}

/// The producer of the edge's node. O(1).
inline const Expr *source(DepEdge e, const GraphView &) { return e.producer(); }
/// The user. O(1).
inline const Expr *target(DepEdge e, const GraphView &) { return e.user; }

/// Targets of the out-edges of `v`, one per edge (repeated for parallel
/// edges). O(1).
inline std::pair<DepAdjacencyIterator, DepAdjacencyIterator>
adjacent_vertices(const Expr *v, const GraphView &g) {
  auto [b, e] = out_edges(v, g);
  return {DepAdjacencyIterator(b, &g), DepAdjacencyIterator(e, &g)};
}

/// The `vertex_index` property map. O(1).
inline GraphViewIndexMap get(boost::vertex_index_t, const GraphView &g) {
  return GraphViewIndexMap(g);
}
/// The index of `v`. O(1) expected.
inline size_t get(boost::vertex_index_t, const GraphView &g, const Expr *v) {
  return g.indexOf(v);
}

} // namespace tmg
