//===- Insert.cpp - Insertion scopes (the reference's insert_exprs) -------===//
//
// New exprs are recorded by the same tracer machinery into the edited graph.
// With an insertion point they are created in place, one after the other;
// without one they are appended. On commit they move, in order, right after
// the last producer of the nodes they use when that producer comes after
// the insertion point (the reference's `_InsertExprs.__exit__`). Failure,
// or leaving the scope by an exception, removes the new exprs (last first)
// and restores attached modules, so the graph is as before. Everything is
// linear in the new exprs and their inputs.
//
//===----------------------------------------------------------------------===//
#include <exception>

#include <llvm/ADT/DenseSet.h>

#include "State.h"
#include "tm/ir/Diagnostic.h"

namespace tmg {

struct InsertScope::Impl {
  trace::State st;
  InternalGraph *g = nullptr;
  Expr *after = nullptr;
  Expr *savedInsertion = nullptr;
  trace::State *prev = nullptr;
  bool done = false;
  std::pair<int64_t, int64_t> ids; ///< the root's id counters at the start

  void end() {
    if (done)
      return;
    done = true;
    g->setInsertionPoint(savedInsertion);
    trace::install(prev);
  }
};

InsertScope::InsertScope(InternalGraph &g, Expr *after)
    : impl_(std::make_unique<Impl>()), uncaught_(std::uncaught_exceptions()) {
  if (trace::current())
    raise("insertExprs: this thread is already tracing or editing a graph");
  if (!g.owner())
    raise("insertExprs: graph '{}' has no owning module", g.name());
  if (after && after->graph() != &g)
    raise("insertExprs: the insertion point %{} is not an expr of graph '{}'",
          after->id(), g.name());
  Impl &im = *impl_;
  im.g = &g;
  im.after = after;
  im.savedInsertion = g.insertionPoint();
  im.st.top = &g.owner()->root();
  im.ids = im.st.top->totalIds();
  im.st.insertGraph = &g;
  if (after)
    g.setInsertionPointAfter(after);
  else
    g.setInsertionPoint(nullptr);
  im.st.scopes.push_back(
      std::make_unique<trace::Scope>(GraphBuilder::into(g), nullptr, g.owner()));
  im.prev = trace::install(&im.st);
}

const std::vector<Expr *> &InsertScope::newExprs() const { return impl_->st.newExprs; }

void InsertScope::rollback() {
  Impl &im = *impl_;
  if (im.done)
    return;
  im.end();
  auto &news = im.st.newExprs;
  NameSpace &ns = im.g->ns();
  for (auto it = news.rbegin(); it != news.rend(); ++it) {
    Expr *e = *it;
    // Free the names the exprs took: node names, the qualname tags of
    // calls (".[func_neg]"), and the names of sub-graphs made for them.
    for (Node *o : e->outputs()) {
      ns.release(o->name());
      llvm::StringRef q(o->qualname());
      size_t open = q.rfind(".[");
      if (open != llvm::StringRef::npos && q.endswith("]")) {
        llvm::StringRef tag = q.slice(open + 2, q.size() - 1);
        if (tag.startswith("func_") || tag.startswith("method_") || tag.startswith("def_"))
          ns.release(tag);
      }
    }
    e->dropAllInputs();
    im.g->removeExpr(e).reset();
  }
  news.clear();
  // Sub-graphs of attached modules go with them; their names go too.
  llvm::DenseSet<const Module *> gone;
  for (auto &a : im.st.attached)
    gone.insert(a.owner->module(a.name));
  for (const auto &[name, mod] : im.st.subGraphNames)
    if (gone.count(mod))
      ns.release(name);
  for (auto it = im.st.attached.rbegin(); it != im.st.attached.rend(); ++it) {
    it->owner->releaseModule(it->name);
    it->owner->registerModule(it->name, std::move(it->layer));
  }
  im.st.attached.clear();
  im.st.top->setTotalIds(im.ids.first, im.ids.second);
  im.g->touch();
}

void InsertScope::commit() {
  Impl &im = *impl_;
  if (im.done)
    return;
  auto &news = im.st.newExprs;
  llvm::DenseSet<const Expr *> isNew(news.begin(), news.end());
  // The last producer (outside the new exprs) of a node they use.
  Expr *last = nullptr;
  for (Expr *e : news)
    for (size_t i = 0; i < e->numInputs(); ++i) {
      Node *n = e->input(i);
      Expr *p = n->expr();
      if (!p || isNew.count(p) || llvm::isa<Input>(p))
        continue;
      if (p->graph() != im.g) {
        rollback();
        raise("insertExprs: node '{}' is not in graph '{}'", n->str(), im.g->name());
      }
      if (!last || last->isBefore(p))
        last = p;
    }
  // The reference's rule: the new exprs go, in order, right after `after`
  // but never before the last producer of a node they use (after that
  // producer, or at the front of the body when there is neither).
  Expr *at = im.after;
  if (last && (!at || at->isBefore(last)))
    at = last;
  if (!news.empty() && (!im.after || at != im.after)) {
    Expr *before = at ? at->nextInGraph() : im.g->front();
    for (Expr *e : news)
      if (e != before)
        im.g->moveBefore(e, before);
      else
        before = e->nextInGraph();
  }
  // Modules attached in the scope were built by tracing: compile their
  // graphs as the reference's build() does.
  for (auto &a : im.st.attached)
    if (auto *t = llvm::dyn_cast_or_null<TracedModule>(a.owner->module(a.name)))
      t->namedModules([](const std::string &, Module &m) {
        if (auto *x = llvm::dyn_cast<TracedModule>(&m))
          for (const auto &sig : x->signatures())
            sig.graph->compile();
      });
  im.st.attached.clear();
  im.end();
}

InsertScope::~InsertScope() noexcept(false) {
  if (!impl_ || impl_->done)
    return;
  if (std::uncaught_exceptions() > uncaught_) {
    rollback();
    return;
  }
  commit();
}

} // namespace tmg
