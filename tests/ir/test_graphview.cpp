//===- test_graphview.cpp - Boost.Graph view and analyses ----------------===//
#include <algorithm>
#include <concepts>
#include <map>
#include <random>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/graph_concepts.hpp>
#include <boost/graph/topological_sort.hpp>
#include <boost/graph/visitors.hpp>
#include <boost/property_map/property_map.hpp>

#include "Fixtures.h"
#include "tm/ir/Analyses.h"
#include "tm/ir/GraphView.h"

using namespace tmg;
using Traits = boost::graph_traits<GraphView>;

// -- Compile-time conformance ---------------------------------------------
BOOST_CONCEPT_ASSERT((boost::VertexListGraphConcept<GraphView>));
BOOST_CONCEPT_ASSERT((boost::IncidenceGraphConcept<GraphView>));
BOOST_CONCEPT_ASSERT((boost::BidirectionalGraphConcept<GraphView>));
BOOST_CONCEPT_ASSERT((boost::AdjacencyGraphConcept<GraphView>));
BOOST_CONCEPT_ASSERT((boost::ReadablePropertyGraphConcept<
                      GraphView, const Expr *, boost::vertex_index_t>));

/// What the analyses rely on, as a C++20 concept.
template <typename G>
concept DependenceGraph =
    requires(const G &g, typename boost::graph_traits<G>::vertex_descriptor v,
             typename boost::graph_traits<G>::edge_descriptor e) {
  { num_vertices(g) } -> std::convertible_to<size_t>;
  { source(e, g) } -> std::same_as<decltype(v)>;
  { target(e, g) } -> std::same_as<decltype(v)>;
  { *out_edges(v, g).first } -> std::convertible_to<decltype(e)>;
  { *in_edges(v, g).first } -> std::convertible_to<decltype(e)>;
  { *adjacent_vertices(v, g).first } -> std::convertible_to<decltype(v)>;
  { get(boost::vertex_index, g, v) } -> std::convertible_to<size_t>;
};
static_assert(DependenceGraph<GraphView>);
static_assert(std::is_same_v<Traits::vertex_descriptor, const Expr *>);
static_assert(std::is_trivially_copyable_v<Traits::edge_descriptor>);
static_assert(std::is_convertible_v<Traits::traversal_category,
                                    boost::bidirectional_graph_tag>);
static_assert(std::is_convertible_v<Traits::traversal_category,
                                    boost::adjacency_graph_tag>);
static_assert(
    std::is_convertible_v<Traits::directed_category, boost::directed_tag>);

namespace {

/// Positions of Inputs then body exprs, as the view numbers them.
std::unordered_map<const Expr *, size_t>
graphPositions(const InternalGraph &g) {
  std::unordered_map<const Expr *, size_t> pos;
  for (const Node *in : g.inputs())
    pos.emplace(in->expr(), pos.size());
  for (const Expr *e : g)
    pos.emplace(e, pos.size());
  return pos;
}

/// Naive check that `order` lists every expr of `g` once and puts each
/// producer (of this graph) before its users.
bool isValidOrder(const InternalGraph &g,
                  const std::vector<const Expr *> &order) {
  auto all = graphPositions(g);
  if (order.size() != all.size())
    return false;
  std::unordered_map<const Expr *, size_t> pos;
  for (const Expr *e : order)
    if (!all.count(e) || !pos.emplace(e, pos.size()).second)
      return false;
  for (const Expr *e : order)
    for (size_t i = 0; i < e->numInputs(); ++i) {
      auto it = pos.find(e->input(i)->expr());
      if (it != pos.end() && it->second >= pos[e])
        return false;
    }
  return true;
}

/// Naive order check over graph positions.
bool naiveOrdered(const InternalGraph &g) {
  auto pos = graphPositions(g);
  for (const Expr *e : g)
    for (size_t i = 0; i < e->numInputs(); ++i) {
      auto it = pos.find(e->input(i)->expr());
      if (it != pos.end() && it->second >= pos[e])
        return false;
    }
  return true;
}

std::set<const Expr *> depExprSet(const InternalGraph &g) {
  auto dep = g.getDepExprs(g.outputs());
  return {dep.begin(), dep.end()};
}

template <typename Range> std::set<const Expr *> asSet(const Range &r) {
  return {r.begin(), r.end()};
}

size_t numEdges(const GraphView &view) {
  size_t n = 0;
  for (const Expr *v : view.exprs())
    n += out_degree(v, view);
  return n;
}

/// A random DAG: inputs x, y, then `n` exprs, each a relu of one earlier
/// node, an add of two (possibly equal) earlier nodes, or a two-way split;
/// outputs are the last two nodes. Shapes are left unknown.
std::unique_ptr<TracedModule> randomDag(std::mt19937 &rng, size_t n) {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Random"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x"), InputSpec("y")});
  std::vector<Node *> nodes = {b.arg(0), b.arg(1)};
  auto pick = [&] {
    return nodes[std::uniform_int_distribution<size_t>(0,
                                                       nodes.size() - 1)(rng)];
  };
  for (size_t i = 0; i < n; ++i) {
    switch (std::uniform_int_distribution<int>(0, 3)(rng)) {
    case 0:
      nodes.push_back(b.callFunction("relu", {pick()}));
      break;
    case 1:
      for (Node *s : b.callFunctionN(functionOp("split"), {pick(), 2}, {}, 2))
        nodes.push_back(s);
      break;
    default:
      nodes.push_back(b.callMethod(pick(), "__add__", {pick()}));
      break;
    }
  }
  b.setOutputs(Arg::tuple({nodes[nodes.size() - 2], nodes.back()}));
  return tm;
}

/// Dominators by definition: d dominates v when v is unreachable from
/// `entry` without passing d. Returns the immediate dominator of each
/// reachable v != entry. O(V * (V + E)), for small graphs.
std::map<const Expr *, const Expr *> naiveIdoms(const GraphView &view,
                                                const Expr *entry) {
  auto reach = [&](const Expr *removed) {
    std::set<const Expr *> seen;
    if (entry == removed)
      return seen;
    std::vector<const Expr *> stack = {entry};
    seen.insert(entry);
    while (!stack.empty()) {
      const Expr *v = stack.back();
      stack.pop_back();
      for (const Expr *w : llvm::make_range(adjacent_vertices(v, view)))
        if (w != removed && seen.insert(w).second)
          stack.push_back(w);
    }
    return seen;
  };
  std::set<const Expr *> reachable = reach(nullptr);
  std::map<const Expr *, std::set<const Expr *>> strictDoms;
  for (const Expr *d : reachable) {
    std::set<const Expr *> without = reach(d);
    for (const Expr *v : reachable)
      if (v != d && !without.count(v))
        strictDoms[v].insert(d);
  }
  // Dominators form a chain: the immediate one is dominated by all others.
  std::map<const Expr *, const Expr *> idom;
  for (const auto &[v, doms] : strictDoms)
    for (const Expr *d : doms) {
      auto it = strictDoms.find(d);
      if ((it == strictDoms.end() ? 0 : it->second.size()) + 1 == doms.size())
        idom[v] = d;
    }
  return idom;
}

} // namespace

TEST_CASE("view: vertices, parallel edges and degrees") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Multi"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x")});
  Node *x = b.arg(0);
  Node *a = b.callFunction("relu", {x});
  Node *twice = b.callMethod(a, "__add__", {a}); // a used twice
  auto parts = b.callFunctionN(functionOp("split"), {x, 2}, {}, 2);
  Node *c = b.callMethod(parts[0], "__add__", {parts[1]}); // two outputs
  b.setOutputs(Arg::tuple({twice, c}));
  InternalGraph &g = tm->graph();
  const Expr *self = g.input(0)->expr(), *in = x->expr(), *relu = a->expr(),
             *add = twice->expr(), *split = parts[0]->expr(), *add2 = c->expr();

  GraphView view(g);
  CHECK(num_vertices(view) == 6);
  std::vector<const Expr *> vs(vertices(view).first, vertices(view).second);
  CHECK(vs == std::vector<const Expr *>{self, in, relu, add, split, add2});
  auto index = get(boost::vertex_index, view);
  for (size_t i = 0; i < vs.size(); ++i) {
    CHECK(get(index, vs[i]) == i);
    CHECK(get(boost::vertex_index, view, vs[i]) == i);
  }

  CHECK(numEdges(view) == 6);
  CHECK(out_degree(self, view) == 0);
  CHECK(out_degree(in, view) == 2);
  CHECK(out_degree(relu, view) == 2);
  CHECK(in_degree(add, view) == 2);
  CHECK(out_degree(split, view) == 2);
  CHECK(in_degree(add2, view) == 2);
  CHECK(degree(split, view) == 3);
  CHECK(in_degree(self, view) == 0);

  std::vector<const Expr *> adj(adjacent_vertices(relu, view).first,
                                adjacent_vertices(relu, view).second);
  CHECK(adj == std::vector<const Expr *>{add, add});

  // Out-edges of split: output 0's use (slot 0 of add2), then output 1's.
  std::vector<DepEdge> outs(out_edges(split, view).first,
                            out_edges(split, view).second);
  REQUIRE(outs.size() == 2);
  CHECK(outs[0] == DepEdge{add2, 0});
  CHECK(outs[1] == DepEdge{add2, 1});
  CHECK(outs[0].node() == parts[0]);
  CHECK(outs[1].node() == parts[1]);
  for (DepEdge e : outs) {
    CHECK(source(e, view) == split);
    CHECK(target(e, view) == add2);
  }
  // In-edges are the same edges seen from the user.
  std::vector<DepEdge> ins(in_edges(add2, view).first,
                           in_edges(add2, view).second);
  CHECK(ins == outs);

  // Every edge appears once from each end.
  size_t inTotal = 0;
  for (const Expr *v : vs)
    inTotal += in_degree(v, view);
  CHECK(inTotal == numEdges(view));
}

TEST_CASE("view: edges stay inside the graph") {
  SECTION("sub-graphs are separate views") {
    auto tm = fixtures::tracedMyModule();
    const InternalGraph &g = tm->graph();
    GraphView top(g);
    size_t uses = 0;
    for (const Expr *e : g)
      uses += e->numInputs();
    CHECK(numEdges(top) == uses);
    auto call = std::find_if(g.begin(), g.end(), [](Expr *e) {
      auto *cm = llvm::dyn_cast<CallMethod>(e);
      return cm && cm->calleeGraph();
    });
    REQUIRE(call != g.end());
    const InternalGraph *sub = llvm::cast<CallMethod>(*call)->calleeGraph();
    REQUIRE(sub);
    GraphView inner(*sub);
    CHECK(num_vertices(inner) == sub->inputs().size() + sub->size());
    for (const Expr *v : inner.exprs()) {
      CHECK_FALSE(top.contains(v));
      for (const Expr *w : llvm::make_range(adjacent_vertices(v, inner)))
        CHECK(inner.contains(w));
    }
  }
  SECTION("inputs dropped by resetInputs are not vertices") {
    auto tm = fixtures::addOneModule();
    InternalGraph &g = tm->graph();
    const Expr *oldInput = g.input(1)->expr();
    g.resetInputs({{Shape{1}, DType::Float32}});
    GraphView view(g);
    CHECK_FALSE(view.contains(oldInput));
    CHECK(num_vertices(view) == 3);
    const Expr *add = g.front();
    CHECK(add->input(0)->expr() == oldInput); // not rewired (reference)
    CHECK(in_degree(add, view) == 0);
    CHECK(numEdges(view) == 0);
  }
  SECTION("a view knows when it is stale") {
    auto tm = fixtures::docstringMyModule();
    InternalGraph &g = tm->graph();
    GraphView view(g);
    CHECK(view.isCurrent());
    GraphBuilder::into(g).callFunction("relu", {g.output(0)});
    CHECK_FALSE(view.isCurrent());
  }
}

TEST_CASE("analyses: topological order of fixtures") {
  std::vector<std::unique_ptr<TracedModule>> mods;
  mods.push_back(fixtures::tracedMyBlock());
  mods.push_back(fixtures::tracedMyModule());
  mods.push_back(fixtures::docstringMyModule());
  mods.push_back(fixtures::addOneModule());
  for (auto &tm : mods) {
    for (const auto &sig : tm->signatures()) {
      const InternalGraph &g = *sig.graph;
      INFO(g.str());
      auto order = topologicalOrder(g);
      REQUIRE(order.succeeded());
      CHECK(isValidOrder(g, *order));
      CHECK(isTopologicallyOrdered(g));
      CHECK(asSet(reachableFromOutputs(g)) == depExprSet(g));
    }
  }
}

TEST_CASE("analyses: random DAGs against naive checks") {
  std::mt19937 rng(20240617);
  int unorderedRounds = 0;
  for (int round = 0; round < 20; ++round) {
    auto tm = randomDag(rng, 120);
    InternalGraph &g = tm->graph();
    {
      GraphView view(g);
      auto order = topologicalOrder(view);
      REQUIRE(order.succeeded());
      CHECK(isValidOrder(g, *order));
      CHECK(isTopologicallyOrdered(view));
      CHECK(findCycle(view).empty());
      auto reached = reachableFromOutputs(view);
      CHECK(asSet(reached) == depExprSet(g));
      CHECK(std::is_sorted(reached.begin(), reached.end(),
                           [&](const Expr *a, const Expr *b) {
                             return view.indexOf(a) < view.indexOf(b);
                           }));
      // An acyclic graph: one component per expr, edges go forwards.
      auto sccs = stronglyConnectedComponents(view);
      CHECK(sccs.size() == num_vertices(view));
      std::unordered_map<const Expr *, size_t> comp;
      for (size_t i = 0; i < sccs.size(); ++i)
        comp[sccs[i].front()] = i;
      for (const Expr *v : view.exprs())
        for (DepEdge e : llvm::make_range(out_edges(v, view)))
          CHECK(comp[source(e, view)] < comp[target(e, view)]);
    }
    // Scramble the body order: still acyclic, usually no longer ordered.
    std::vector<Expr *> body(g.begin(), g.end());
    for (int k = 0; k < 10; ++k) {
      Expr *e =
          body[std::uniform_int_distribution<size_t>(0, body.size() - 1)(rng)];
      Expr *before =
          body[std::uniform_int_distribution<size_t>(0, body.size() - 1)(rng)];
      g.moveBefore(e, before);
    }
    GraphView view(g);
    CHECK(isTopologicallyOrdered(view) == naiveOrdered(g));
    unorderedRounds += !naiveOrdered(g);
    auto order = topologicalOrder(view);
    REQUIRE(order.succeeded());
    CHECK(isValidOrder(g, *order));
  }
  CHECK(unorderedRounds > 0);
}

TEST_CASE("analyses: stock BFS and DFS run on the view") {
  auto tm = fixtures::docstringMyModule();
  const InternalGraph &g = tm->graph();
  GraphView view(g);
  const Expr *x = g.input(1)->expr();
  std::vector<size_t> dist(num_vertices(view), 0);
  auto distMap = boost::make_iterator_property_map(
      dist.begin(), get(boost::vertex_index, view));
  boost::breadth_first_search(
      view, x,
      boost::visitor(boost::make_bfs_visitor(
          boost::record_distances(distMap, boost::on_tree_edge()))));
  // x -> add -> linear call -> relu.
  const Expr *relu = g.output(0)->expr();
  const Expr *call = relu->input(0)->expr();
  const Expr *add = call->input(1)->expr();
  CHECK(get(distMap, add) == 1);
  CHECK(get(distMap, call) == 2);
  CHECK(get(distMap, relu) == 3);

  std::vector<const Expr *> finished;
  boost::topological_sort(view, std::back_inserter(finished));
  std::reverse(finished.begin(), finished.end());
  CHECK(isValidOrder(g, finished));

  struct EdgeCounter : boost::default_dfs_visitor {
    size_t *tree, *back;
    void tree_edge(DepEdge, const GraphView &) const { ++*tree; }
    void back_edge(DepEdge, const GraphView &) const { ++*back; }
  };
  size_t tree = 0, back = 0;
  boost::depth_first_search(view,
                            boost::visitor(EdgeCounter{{}, &tree, &back}));
  // Two DFS trees: from self (everything but x) and x alone.
  CHECK(tree == num_vertices(view) - 2);
  CHECK(back == 0);
}

TEST_CASE("analyses: reachability ignores dead exprs") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Dead"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x"), InputSpec("y")});
  Node *live = b.callFunction("relu", {b.arg(0)});
  Node *dead = b.callFunction("exp", {b.arg(1)});
  b.callMethod(dead, "__add__", {live});
  b.setOutputs(live);
  const InternalGraph &g = tm->graph();
  auto reached = reachableFromOutputs(g);
  CHECK(reached == std::vector<const Expr *>{b.arg(0)->expr(), live->expr()});
  CHECK(asSet(reached) == depExprSet(g));
}

TEST_CASE("analyses: dominators") {
  // x -> relu -> add -> exp -> sub ; x -> neg -> add ; constant k -> sub
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Diamond"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x")});
  Node *x = b.arg(0);
  Node *left = b.callFunction("relu", {x});
  Node *right = b.callFunction("neg", {x});
  Node *join = b.callMethod(left, "__add__", {right});
  Node *tail = b.callFunction("exp", {join});
  Node *k = b.constant(Tensor::zeros({1}), "k");
  Node *out = b.callMethod(tail, "__sub__", {k});
  b.setOutputs(out);
  const InternalGraph &g = tm->graph();
  GraphView view(g);

  auto idom = immediateDominators(view, x->expr());
  CHECK(idom.lookup(left->expr()) == x->expr());
  CHECK(idom.lookup(right->expr()) == x->expr());
  CHECK(idom.lookup(join->expr()) == x->expr());
  CHECK(idom.lookup(tail->expr()) == join->expr());
  // `k` is not reachable from x: `out` still has `tail` as dominator.
  CHECK(idom.lookup(out->expr()) == tail->expr());
  CHECK_FALSE(idom.count(k->expr()));
  CHECK_FALSE(idom.count(x->expr()));
  CHECK_FALSE(idom.count(g.input(0)->expr()));
  CHECK(idom.size() == 5);

  auto fromJoin = immediateDominators(view, join->expr());
  CHECK(fromJoin.size() == 2);
  CHECK(fromJoin.lookup(out->expr()) == tail->expr());

  CHECK_THROWS_AS(immediateDominators(view, nullptr), Error);

  SECTION("random DAGs against the definition") {
    std::mt19937 rng(7);
    for (int round = 0; round < 10; ++round) {
      auto r = randomDag(rng, 30);
      GraphView rv(r->graph());
      for (const Node *in : r->graph().inputs()) {
        auto got = immediateDominators(rv, in->expr());
        auto want = naiveIdoms(rv, in->expr());
        CHECK(got.size() == want.size());
        for (auto [v, d] : want)
          CHECK(got.lookup(v) == d);
      }
    }
  }
}

TEST_CASE("analyses: dominators of a deep graph") {
  // relu, then add(prev, x), alternately: every add uses x directly, which
  // makes Boost's eval recursion as deep as the chain (more than an 8 MiB
  // stack holds).
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Deep"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x")});
  Node *x = b.arg(0), *prev = x;
  for (int i = 0; i < 150000; ++i)
    prev = i % 2 ? b.callMethod(prev, "__add__", {x})
                 : b.callFunction("relu", {prev});
  b.setOutputs(prev);
  GraphView view(tm->graph());
  auto idom = immediateDominators(view, x->expr());
  CHECK(idom.size() == 150000);
  const Expr *add = prev->expr();
  CHECK(idom.lookup(add) == x->expr());
  const Expr *relu = add->input(0)->expr();
  CHECK(idom.lookup(relu) == relu->input(0)->expr());
}

TEST_CASE("analyses: hand-broken graphs") {
  auto tm = fixtures::docstringMyModule();
  InternalGraph &g = tm->graph();
  Expr *relu = g.output(0)->expr();
  Expr *call = relu->input(0)->expr();
  Expr *add = call->input(1)->expr();

  SECTION("an expr using an output of a later one") {
    add->setInput(0, relu->output(0)); // add -> linear -> relu -> add
    GraphView view(g);
    auto order = topologicalOrder(view);
    REQUIRE(order.failed());
    const Diagnostic &d = order.diagnostic();
    std::string want = fmt::format("%{} -> %{} -> %{} -> %{}", add->id(),
                                   call->id(), relu->id(), add->id());
    INFO(d.str());
    CHECK(d.message ==
          "graph '" + g.name() + "' has a dependency cycle: " + want);
    CHECK(d.loc.exprId == add->id());
    REQUIRE(d.notes.size() == 4);
    CHECK(d.notes[0] == add->str());
    CHECK(d.notes[3] == fmt::format("exprs on cycles: %{}, %{}, %{}", add->id(),
                                    call->id(), relu->id()));
    CHECK(findCycle(view) == std::vector<const Expr *>{add, call, relu});
    CHECK_FALSE(isTopologicallyOrdered(view));

    auto sccs = stronglyConnectedComponents(view);
    auto cyclic = std::find_if(sccs.begin(), sccs.end(),
                               [](const auto &c) { return c.size() > 1; });
    REQUIRE(cyclic != sccs.end());
    CHECK(*cyclic == std::vector<const Expr *>{add, call, relu});
    CHECK(sccs.size() == num_vertices(view) - 2);
  }
  SECTION("an expr using its own output") {
    relu->setInput(0, relu->output(0));
    auto order = topologicalOrder(g);
    REQUIRE(order.failed());
    CHECK(order.diagnostic().message ==
          fmt::format("graph '{}' has a dependency cycle: %{} -> %{}", g.name(),
                      relu->id(), relu->id()));
    CHECK(order.diagnostic().notes.back() ==
          fmt::format("exprs on cycles: %{}", relu->id()));
    CHECK(findCycle(GraphView(g)) == std::vector<const Expr *>{relu});
  }
  SECTION("exprs out of order but acyclic") {
    g.moveBefore(relu, add);
    CHECK_FALSE(isTopologicallyOrdered(g));
    std::vector<Diagnostic> diags;
    verifyGraph(g, diags);
    CHECK_FALSE(diags.empty());
    auto order = topologicalOrder(g);
    REQUIRE(order.succeeded());
    CHECK(isValidOrder(g, *order));
  }
}

TEST_CASE("analyses: cycles a node replacement would create") {
  auto tm = fixtures::docstringMyModule();
  InternalGraph &g = tm->graph();
  Node *x = g.input(1);
  Node *reluOut = g.output(0);
  Expr *call = reluOut->expr()->input(0)->expr();
  Node *addOut = call->input(1);
  Node *param = addOut->expr()->input(1);

  CHECK(wouldCreateCycle(g, addOut, reluOut));
  CHECK(wouldCreateCycle(g, x, reluOut));
  CHECK_FALSE(wouldCreateCycle(g, reluOut, addOut)); // relu_out has no users
  CHECK_FALSE(wouldCreateCycle(g, param, x));
  CHECK_FALSE(wouldCreateCycle(g, addOut, addOut));

  // Inserting neg(relu_out) and replacing relu_out by it: the neg's own use
  // would be a cycle, as replaceNode reports.
  GraphBuilder s = GraphBuilder::into(g);
  s.setInsertionPointAfter(reluOut->expr());
  Node *neg = s.callFunction("neg", {reluOut});
  CHECK(wouldCreateCycle(g, reluOut, neg));
  ReplaceReport report = g.replaceNode({{reluOut, neg}});
  REQUIRE(report.skipped.size() == 1);
  CHECK(report.skipped[0].cycle);

  // Replacing add_out by the neg: replaceNode skips linear's use and
  // classifies it as a cycle too.
  CHECK(wouldCreateCycle(g, addOut, neg));
  ReplaceReport r2 = g.replaceNode({{addOut, neg}});
  REQUIRE(r2.skipped.size() == 1);
  CHECK(r2.skipped[0].cycle);
}
