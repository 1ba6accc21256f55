//===- Verifier.cpp - IR invariant checks ---------------------------------===//
#include "tm/ir/Verifier.h"

#include <limits>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringSet.h>

#include "tm/ir/ModuleCheck.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

namespace {
struct GraphVerifier {
  const InternalGraph &g;
  std::vector<Diagnostic> &diags;

  void error(const Expr *e, std::string msg) {
    Location loc;
    if (e)
      loc.exprId = e->id();
    diags.emplace_back(loc, "graph '" + g.name() + "': " + msg);
  }

  void run() {
    if (g.inputs().empty() || !llvm::isa<ModuleNode>(g.input(0)))
      error(nullptr, "input 0 must be the self ModuleNode");
    // Sized up front: growing them rehashes every entry at each doubling,
    // cache misses all, on a graph of a million nodes.
    llvm::DenseSet<const Node *> defined;
    defined.reserve(g.size() + g.inputs().size());
    llvm::StringSet<> names;
    auto define = [&](const Node *n, const Expr *e) {
      if (!defined.insert(n).second)
        error(e, "node '" + n->str() + "' is defined twice");
      if (!n->name().empty()) {
        if (!names.insert(n->name()).second)
          error(e, "node name '" + n->name().str() + "' is not unique");
        if (!g.ns().isUsed(n->name()))
          error(e, "node name '" + n->name().str() + "' is not registered in the "
                   "graph's namespace");
      }
    };
    for (const Node *in : g.inputs()) {
      const Expr *e = in->expr();
      if (!e || !llvm::isa<Input>(e) || e->graph() != &g) {
        error(e, "input '" + in->str() + "' is not produced by an Input of "
                 "this graph");
        continue;
      }
      define(in, e);
    }
    llvm::DenseMap<const Node *, size_t> useCount;
    useCount.reserve(g.size() + g.inputs().size());
    uint64_t lastOrder = 0;
    bool first = true;
    for (const Expr *e : g) {
      if (e->graph() != &g || !e->inBody())
        error(e, "expr is linked into the graph but does not belong to it");
      if (!first && e->orderKey() <= lastOrder)
        error(e, "order keys are not increasing");
      lastOrder = e->orderKey();
      first = false;
      for (size_t i = 0; i < e->numInputs(); ++i) {
        const Node *n = e->input(i);
        ++useCount[n];
        if (!defined.count(n))
          error(e, "input '" + n->str() + "' is used before its definition "
                   "or is not defined in this graph (exprs must be in "
                   "topological order)");
      }
      for (const Node *o : e->outputs()) {
        if (o->expr() != e)
          error(e, "output '" + o->str() + "' names another producer");
        define(o, e);
      }
      if (e->argDef() && e->argDef()->numLeaves() != e->numInputs())
        error(e, "argument structure has " +
                     std::to_string(e->argDef()->numLeaves()) +
                     " node leaves but the expr has " +
                     std::to_string(e->numInputs()) + " inputs");
      if (e->outDef() && e->outDef()->numLeaves() != e->numOutputs())
        error(e, "output structure has " +
                     std::to_string(e->outDef()->numLeaves()) +
                     " leaves but the expr has " +
                     std::to_string(e->numOutputs()) + " outputs");
      if (auto *cm = llvm::dyn_cast<CallMethod>(e)) {
        if (cm->isModuleCall()) {
          if (cm->numInputs() == 0 || !llvm::isa<ModuleNode>(cm->input(0)))
            error(e, "a module call's first input must be a ModuleNode");
          else if (ModuleNode *mn = cm->moduleNode())
            if (llvm::isa_and_nonnull<TracedModule>(mn->owner()) &&
                !cm->calleeGraph())
              error(e, "the called TracedModule has no graph for signature " +
                           (e->argDef() ? e->argDef()->str() : "?"));
        } else if (cm->numInputs() == 0 ||
                   !llvm::isa<TensorNode>(cm->input(0))) {
          error(e, "a tensor method's receiver must be a TensorNode");
        }
      }
      if (auto *ga = llvm::dyn_cast<GetAttr>(e))
        if (ga->numInputs() != 1 || !llvm::isa<ModuleNode>(ga->input(0)))
          error(e, "getattr must take one ModuleNode");
    }
    // The list of unused exprs (compile's work list) holds exactly the
    // body exprs none of whose outputs is used or a graph output; the
    // nodes count their places in the output list.
    {
      llvm::DenseMap<const Node *, size_t> outputRefs;
      for (const Node *o : g.outputs())
        ++outputRefs[o];
      for (const auto &[o, refs] : outputRefs)
        if (o->graphOutputRefs() != refs)
          error(o->expr(), "internal: output '" + o->str() + "' counts " +
                               std::to_string(o->graphOutputRefs()) +
                               " places in the output list, not " + std::to_string(refs));
      auto unneeded = [&](const Expr *x) {
        return llvm::none_of(x->outputs(), [&](const Node *o) {
          return o->hasUsers() || outputRefs.count(o);
        });
      };
      llvm::DenseSet<const Expr *> listed;
      for (const Expr *x : g.unusedExprs()) {
        if (!listed.insert(x).second)
          error(x, "internal: expr listed twice as unused");
        else if (x->graph() != &g || !x->inBody() || !unneeded(x))
          error(x, "internal: expr listed as unused but it is used or not in the body");
      }
      for (const Expr *e : g) {
        if (e->outputsUnused() != unneeded(e))
          error(e, "internal: the expr's count of used outputs is wrong");
        if (unneeded(e) && !listed.count(e))
          error(e, "internal: expr has no users but is missing from the unused list");
      }
    }
    // Users mirror inputs exactly.
    auto checkUsers = [&](const Node *n) {
      size_t expected = useCount.lookup(n);
      if (n->numUsers() != expected)
        error(n->expr(), "node '" + n->str() + "' lists " +
                             std::to_string(n->numUsers()) +
                             " users but is used " + std::to_string(expected) +
                             " times");
      for (Use *u = n->firstUse(); u; u = u->nextUse()) {
        const Expr *user = u->user();
        if (user->graph() != &g)
          error(user, "node '" + n->str() + "' is used by an expr of graph '" +
                          (user->graph() ? user->graph()->name() : "?") + "'");
        else if (user->input(user->useIndex(u)) != n)
          error(user, "use list of '" + n->str() + "' is corrupt");
      }
    };
    for (const Node *n : defined)
      checkUsers(n);
    for (const Node *o : g.outputs())
      if (!defined.count(o))
        error(nullptr, "output '" + o->str() + "' is not a node of the graph");
  }
};
} // namespace

void verifyGraph(const InternalGraph &g, std::vector<Diagnostic> &diags) {
  GraphVerifier{g, diags}.run();
}

std::vector<Diagnostic> verify(const TracedModule &m) {
  std::vector<Diagnostic> diags;
  // Structure: every graph of every TracedModule of the hierarchy.
  const_cast<TracedModule &>(m).namedModules([&](const std::string &,
                                                 Module &x) {
    auto *t = llvm::dyn_cast<TracedModule>(&x);
    if (!t)
      return;
    for (const auto &s : t->signatures()) {
      verifyGraph(*s.graph, diags);
      if (s.outDef.numLeaves() != s.graph->outputs().size())
        diags.emplace_back(Location(),
                           "graph '" + s.graph->name() + "': output structure " +
                               s.outDef.str() + " does not match its " +
                               std::to_string(s.graph->outputs().size()) +
                               " outputs");
    }
  });
  // Builtin modules: the attributes their kernels read.
  verifyBuiltinModules(m, diags);
  // Ids: unique over what the top graphs reach (their recursive exprs),
  // which is the domain of resetIds and of the module's id counters.
  llvm::DenseMap<int64_t, const Expr *> exprIds;
  llvm::DenseMap<int64_t, const Node *> nodeIds;
  auto [nextNode, nextExpr] = m.totalIds();
  for (const auto &s : m.signatures()) {
    std::vector<Expr *> all = s.graph->exprs(true).asList();
    exprIds.reserve(exprIds.size() + all.size());
    nodeIds.reserve(nodeIds.size() + all.size());
    for (Expr *e : all) {
      auto gname = [e] {
        const InternalGraph *g = e->graph();
        return g ? g->name() : std::string("?");
      };
      // INT64_MAX and INT64_MAX - 1 are DenseMap's reserved keys.
      if (e->id() < 0 || e->id() >= std::numeric_limits<int64_t>::max() - 1) {
        diags.emplace_back(Location(), "graph '" + gname() + "': expr id " +
                                           std::to_string(e->id()) + " is out of range");
        continue;
      }
      auto [it, fresh] = exprIds.try_emplace(e->id(), e);
      if (!fresh && it->second != e)
        diags.emplace_back(Location::atExpr(e->id()),
                           "graph '" + gname() + "': expr id %" +
                               std::to_string(e->id()) + " is not unique");
      if (e->id() >= nextExpr)
        diags.emplace_back(Location::atExpr(e->id()),
                           "graph '" + gname() +
                               "': expr id is not below the module's next "
                               "expr id " +
                               std::to_string(nextExpr));
      for (const Node *n : e->outputs()) {
        if (n->id() < 0 || n->id() >= std::numeric_limits<int64_t>::max() - 1) {
          diags.emplace_back(Location::atExpr(e->id()),
                             "graph '" + gname() + "': node id " + std::to_string(n->id()) +
                                 " of '" + n->str() + "' is out of range");
          continue;
        }
        auto [nit, nfresh] = nodeIds.try_emplace(n->id(), n);
        if (!nfresh && nit->second != n)
          diags.emplace_back(Location::atExpr(e->id()),
                             "graph '" + gname() + "': node id " +
                                 std::to_string(n->id()) + " of '" + n->str() +
                                 "' is not unique");
        if (n->id() >= nextNode)
          diags.emplace_back(Location::atExpr(e->id()),
                             "graph '" + gname() + "': node id of '" + n->str() +
                                 "' is not below the module's next node id");
      }
    }
  }
  return diags;
}

FailureOr<void> verifyOrReport(const TracedModule &m) {
  std::vector<Diagnostic> d = verify(m);
  if (d.empty())
    return {};
  Diagnostic first = d[0];
  for (size_t i = 1; i < d.size(); ++i)
    first.note(d[i].str());
  return first;
}

} // namespace tmg
