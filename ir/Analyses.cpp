//===- Analyses.cpp - Graph analyses on the Boost.Graph view --------------===//
#include "tm/ir/Analyses.h"

#include <algorithm>
#include <cassert>
#include <exception>
#include <iterator>
#include <limits>
#include <optional>
#include <string>

#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <boost/graph/dominator_tree.hpp>
#include <boost/graph/reverse_graph.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/graph/topological_sort.hpp>
#include <boost/pending/queue.hpp>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/iterator_range.h>
#include <llvm/Support/thread.h>

namespace tmg {

namespace {

using Color = boost::default_color_type;
using ColorTraits = boost::color_traits<Color>;

/// Marks (non-white) every vertex from which one of `sources` is reachable,
/// sources included: a breadth-first search on the reversed view.
/// O(V + E).
std::vector<Color> markAncestors(const GraphView &view,
                                 llvm::ArrayRef<const Expr *> sources) {
  std::vector<Color> color(view.size(), ColorTraits::white());
  auto colorMap = boost::make_iterator_property_map(
      color.begin(), get(boost::vertex_index, view));
  boost::reverse_graph<GraphView> reversed(view);
  boost::queue<const Expr *> queue;
  boost::breadth_first_visit(reversed, sources.begin(), sources.end(), queue,
                             boost::default_bfs_visitor(), colorMap);
  return color;
}

/// Records the DFS tree parent of each vertex and the first back edge.
class BackEdgeRecorder : public boost::default_dfs_visitor {
public:
  BackEdgeRecorder(std::vector<const Expr *> &parent,
                   std::optional<DepEdge> &backEdge)
      : parent_(&parent), backEdge_(&backEdge) {}
  void tree_edge(DepEdge e, const GraphView &view) const {
    (*parent_)[view.indexOf(e.user)] = e.producer();
  }
  void back_edge(DepEdge e, const GraphView &) const {
    if (!*backEdge_)
      *backEdge_ = e;
  }

private:
  // Pointers: BGL copies visitors by value.
  std::vector<const Expr *> *parent_;
  std::optional<DepEdge> *backEdge_;
};

bool usesItself(const Expr *e, const GraphView &view) {
  return llvm::any_of(llvm::make_range(in_edges(e, view)),
                      [&](DepEdge d) { return d.producer() == e; });
}

Diagnostic cycleDiagnostic(const GraphView &view,
                           llvm::ArrayRef<const Expr *> cycle) {
  assert(!cycle.empty() && "topological_sort and findCycle disagree");
  std::string path;
  for (const Expr *e : cycle)
    path += "%" + std::to_string(e->id()) + " -> ";
  path += "%" + std::to_string(cycle.front()->id());
  Diagnostic d(Location::atExpr(cycle.front()->id()),
               "graph '" + view.graph().name() +
                   "' has a dependency cycle: " + path);
  for (const Expr *e : cycle)
    d.note(e->str());
  std::string onCycles;
  for (const auto &component : stronglyConnectedComponents(view)) {
    if (component.size() == 1 && !usesItself(component.front(), view))
      continue;
    for (const Expr *e : component)
      onCycles += (onCycles.empty() ? "%" : ", %") + std::to_string(e->id());
  }
  d.note("exprs on cycles: " + onCycles);
  return d;
}

} // namespace

FailureOr<std::vector<const Expr *>> topologicalOrder(const GraphView &view) {
  std::vector<const Expr *> order;
  order.reserve(view.size());
  try {
    boost::topological_sort(view, std::back_inserter(order));
  } catch (const boost::not_a_dag &) {
    return cycleDiagnostic(view, findCycle(view));
  }
  std::reverse(order.begin(), order.end());
  return order;
}

std::vector<const Expr *> findCycle(const GraphView &view) {
  std::vector<const Expr *> parent(view.size(), nullptr);
  std::optional<DepEdge> backEdge;
  boost::depth_first_search(view,
                            boost::visitor(BackEdgeRecorder(parent, backEdge)));
  if (!backEdge)
    return {};
  // The back edge u -> v closes the tree path v -> ... -> u.
  const Expr *v = backEdge->user;
  std::vector<const Expr *> cycle;
  for (const Expr *e = backEdge->producer(); e != v;
       e = parent[view.indexOf(e)])
    cycle.push_back(e);
  cycle.push_back(v);
  std::reverse(cycle.begin(), cycle.end());
  // Start at the earliest expr so the report does not depend on the DFS.
  std::rotate(cycle.begin(),
              std::min_element(cycle.begin(), cycle.end(),
                               [&](const Expr *a, const Expr *b) {
                                 return view.indexOf(a) < view.indexOf(b);
                               }),
              cycle.end());
  return cycle;
}

bool isTopologicallyOrdered(const GraphView &view) {
  for (const Expr *user : view.exprs())
    for (DepEdge e : llvm::make_range(in_edges(user, view)))
      if (!e.producer()->isBefore(user))
        return false;
  return true;
}

std::vector<const Expr *> reachableFromOutputs(const GraphView &view) {
  std::vector<const Expr *> sources;
  llvm::SmallPtrSet<const Expr *, 8> seen;
  for (const Node *out : view.graph().outputs())
    if (view.contains(out->expr()) && seen.insert(out->expr()).second)
      sources.push_back(out->expr());
  std::vector<Color> color = markAncestors(view, sources);
  std::vector<const Expr *> reached;
  for (size_t i = 0; i < view.size(); ++i)
    if (color[i] != ColorTraits::white())
      reached.push_back(view.exprs()[i]);
  return reached;
}

bool wouldCreateCycle(const GraphView &view, const Node *oldNode,
                      const Node *newNode) {
  const Expr *def = newNode->expr();
  if (oldNode == newNode || !view.contains(def))
    return false;
  std::vector<Color> color = markAncestors(view, {def});
  for (const Use *u = oldNode->firstUse(); u; u = u->nextUse())
    if (view.contains(u->user()) &&
        color[view.indexOf(u->user())] != ColorTraits::white())
      return true;
  return false;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kSanitizerStackFactor = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                    \
    __has_feature(memory_sanitizer) || __has_feature(undefined_behavior_sanitizer)
constexpr size_t kSanitizerStackFactor = 4;
#else
constexpr size_t kSanitizerStackFactor = 1;
#endif
#else
constexpr size_t kSanitizerStackFactor = 1;
#endif

llvm::DenseMap<const Expr *, const Expr *>
immediateDominators(const GraphView &view, const Expr *entry) {
  if (!view.contains(entry))
    raise("immediateDominators: the entry is not an expr of graph '{}'",
          view.graph().name());
  const size_t n = view.size();
  GraphViewIndexMap index = get(boost::vertex_index, view);
  // DFS numbers start at the maximum so that predecessors the DFS from
  // `entry` never reaches are skipped. (Boost's short overload starts them
  // at 0, the entry's number, and then computes wrong dominators for exprs
  // that also use unreachable ones.)
  std::vector<size_t> dfnum(n, std::numeric_limits<size_t>::max());
  std::vector<const Expr *> parent(n, nullptr), byDfnum(n, nullptr),
      idom(n, nullptr);
  // Boost's eval step (ancestor_with_lowest_semi_) recurses once per DFS
  // tree ancestor, up to n deep: a chain of 10^5 exprs overflows an 8 MiB
  // stack. Run it on a thread whose stack fits n frames. -fstack-usage
  // gives that frame 160 bytes with GCC 12 -O2 and 208 with
  // -fsanitize=address,undefined -O0, but 472 with clang 14's -O0
  // sanitizer build (more than the 320 allowed): sanitized builds get four
  // times the margin.
  constexpr size_t kFrameBytes = 320 * kSanitizerStackFactor;
  const size_t stackBytes =
      std::min<size_t>(std::numeric_limits<unsigned>::max(),
                       (size_t(8) << 20) + n * kFrameBytes);
  std::exception_ptr error;
  llvm::thread worker(llvm::Optional<unsigned>(stackBytes), [&] {
    try {
      boost::lengauer_tarjan_dominator_tree(
          view, entry, index,
          boost::make_iterator_property_map(dfnum.begin(), index),
          boost::make_iterator_property_map(parent.begin(), index), byDfnum,
          boost::make_iterator_property_map(idom.begin(), index));
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error)
    std::rethrow_exception(error);
  llvm::DenseMap<const Expr *, const Expr *> result;
  for (size_t i = 0; i < n; ++i)
    if (idom[i])
      result[view.exprs()[i]] = idom[i];
  return result;
}

std::vector<std::vector<const Expr *>>
stronglyConnectedComponents(const GraphView &view) {
  std::vector<size_t> component(view.size());
  size_t count = boost::strong_components(
      view, boost::make_iterator_property_map(component.begin(),
                                              get(boost::vertex_index, view)));
  // Tarjan's algorithm numbers a component after every component it
  // reaches; reverse the numbering to list producers first.
  std::vector<std::vector<const Expr *>> result(count);
  for (size_t i = 0; i < view.size(); ++i)
    result[count - 1 - component[i]].push_back(view.exprs()[i]);
  return result;
}

} // namespace tmg
