//===- Rewriter.cpp - Transactional graph edits ---------------------------===//
#include "tm/matcher/Rewriter.h"

namespace tmg {

RewriteListener::~RewriteListener() = default;

Rewriter::Rewriter(InternalGraph &g) : g_(&g), b_(GraphBuilder::into(g)) {}

Rewriter::~Rewriter() {
  if (open_)
    rollback();
}

void Rewriter::begin() {
  if (open_)
    raise("rewriter: a transaction is already open");
  open_ = true;
  journal_.clear();
  deferred_.clear();
}

void Rewriter::commit() {
  if (!open_)
    raise("rewriter: commit() without begin()");
  open_ = false;
  flush(0);
  std::vector<std::function<void()>> fs;
  fs.swap(deferred_);
  for (auto &f : fs)
    f();
}

void Rewriter::onCommit(std::function<void()> f) {
  if (open_)
    deferred_.push_back(std::move(f));
  else
    f();
}

void Rewriter::rollback() {
  if (!open_)
    raise("rewriter: rollback() without begin()");
  open_ = false;
  deferred_.clear();
  for (size_t i = journal_.size(); i-- > 0;)
    undoEntry(journal_[i]);
  journal_.clear();
}

FailureOr<bool> Rewriter::transact(const std::function<LogicalResult()> &f) {
  begin();
  try {
    if (succeeded(f())) {
      commit();
      return true;
    }
  } catch (const Error &e) {
    why_ = e.diagnostic().message;
    rollback();
    return e.diagnostic();
  }
  rollback();
  return false;
}

Rewriter::Entry &Rewriter::record(Entry::Kind kind) {
  // Filled in place: an entry is a few lines (its node list inline), and
  // a rewrite records several.
  Entry &e = journal_.emplace_back();
  e.kind = kind;
  return e;
}

void Rewriter::flush(size_t from) {
  for (size_t i = from; i < journal_.size(); ++i) {
    Entry &e = journal_[i];
    switch (e.kind) {
    case Entry::Insert:
      for (auto *l : listeners_)
        l->notifyInserted(e.expr);
      break;
    case Entry::Rewire:
      for (auto *l : listeners_) {
        l->notifyInputsChanged(e.expr);
        l->notifyUseRemoved(e.node);
      }
      break;
    case Entry::Erase:
      for (auto *l : listeners_) {
        l->notifyErased(e.expr, e.nodes);
        for (Node *n : e.nodes)
          l->notifyUseRemoved(n);
      }
      break;
    case Entry::Outputs:
      break;
    }
  }
  // Erased exprs are destroyed only now (a rollback could still need them),
  // or kept for the caller.
  for (size_t i = from; i < journal_.size(); ++i)
    if (journal_[i].keep)
      erased_.push_back(std::move(journal_[i].owned));
  journal_.clear();
}

void Rewriter::undoEntry(Entry &e) {
  switch (e.kind) {
  case Entry::Insert: {
    // Later entries were undone first, so nothing uses its outputs.
    e.expr->dropAllInputs();
    g_->removeExpr(e.expr).reset();
    break;
  }
  case Entry::Rewire:
    e.expr->setInput(e.index, e.node);
    break;
  case Entry::Outputs:
    g_->setOutputsInternal(std::vector<Node *>(e.nodes.begin(), e.nodes.end()));
    break;
  case Entry::Erase: {
    // Its old successor may itself be erased (and still out of the graph):
    // follow the successors those erasures recorded.
    Expr *next = e.next;
    while (next && !next->inBody()) {
      Expr *found = nullptr;
      for (const Entry &o : journal_)
        if (o.kind == Entry::Erase && o.owned.get() == next) {
          found = o.next;
          break;
        }
      next = found;
    }
    Expr *raw = e.owned.get();
    g_->insertExpr(std::move(e.owned), next);
    raw->setInputs(e.nodes);
    break;
  }
  }
}

void Rewriter::journalCreated(Expr *prevBefore, size_t sizeBefore) {
  size_t created = g_->size() - sizeBefore;
  llvm::SmallVector<Expr *, 4> made;
  Expr *cur = before_ ? before_->prevInGraph() : g_->back();
  while (made.size() < created && cur && cur != prevBefore) {
    made.push_back(cur);
    cur = cur->prevInGraph();
  }
  size_t start = journal_.size();
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    record(Entry::Insert).expr = *it;
  }
  if (!open_)
    flush(start);
}

/// Creation at the insertion point: sets the graph's insertion point for
/// the builder and journals what it created, also when it throws (a
/// rollback then removes it).
struct Rewriter::BuildScope {
  Rewriter &rw;
  Expr *saved, *prevBefore;
  size_t sizeBefore;
  bool done = false;

  explicit BuildScope(Rewriter &r) : rw(r) {
    InternalGraph &g = *rw.g_;
    if (rw.before_ && (!rw.before_->inBody() || rw.before_->graph() != &g))
      raise("rewriter: the insertion point is not in graph '{}'", g.name());
    saved = g.insertionPoint();
    prevBefore = rw.before_ ? rw.before_->prevInGraph() : g.back();
    sizeBefore = g.size();
    g.setInsertionPoint(rw.before_);
  }
  /// The builder returned. (journalCreated finds what it made by walking
  /// back from the insertion point: one step for the usual one expr.)
  void finish() {
    done = true;
    rw.g_->setInsertionPoint(saved);
    rw.journalCreated(prevBefore, sizeBefore);
  }
  ~BuildScope() {
    if (!done) {
      // The builder threw: exprs made before the failure are journaled.
      rw.journalCreated(prevBefore, sizeBefore);
      rw.g_->setInsertionPoint(saved);
    }
  }
};

void Rewriter::build(const std::function<void(GraphBuilder &)> &f) {
  BuildScope scope(*this);
  f(b_);
  scope.finish();
}

Node *Rewriter::callFunction(const OpSchema &fn, std::vector<Arg> args,
                             std::vector<KwArg> kwargs) {
  BuildScope scope(*this);
  Node *out = b_.callFunction(fn, std::move(args), std::move(kwargs));
  scope.finish();
  return out;
}
Node *Rewriter::callFunction(llvm::StringRef fn, std::vector<Arg> args,
                             std::vector<KwArg> kwargs) {
  return callFunction(functionOp(fn), std::move(args), std::move(kwargs));
}
Node *Rewriter::callMethod(Node *self, llvm::StringRef method, std::vector<Arg> args,
                           std::vector<KwArg> kwargs) {
  BuildScope scope(*this);
  Node *out = b_.callMethod(self, method, std::move(args), std::move(kwargs));
  scope.finish();
  return out;
}
Node *Rewriter::constant(Tensor t, llvm::StringRef name) {
  BuildScope scope(*this);
  Node *out = b_.constant(std::move(t), name);
  scope.finish();
  return out;
}
Node *Rewriter::getAttr(Node *base, llvm::StringRef attr) {
  BuildScope scope(*this);
  Node *out = b_.getAttr(base, attr);
  scope.finish();
  return out;
}

bool Rewriter::isGraphOutput(const Node *n) const {
  // Nodes count their places in their graph's output list: O(1), where a
  // scan of the list made every erasure O(outputs).
  return n->graph() == g_ && n->graphOutputRefs() != 0;
}

LogicalResult Rewriter::replaceAllUsesWith(Node *old, Node *nw) {
  if (!old || !nw)
    raise("rewriter: replaceAllUsesWith with a null node");
  if (old == nw)
    return success();
  if (old->kind() != nw->kind()) {
    why_ = fmt::format("cannot replace {} by {}: one is a tensor, the other a module",
                       old->str(), nw->str());
    return failure();
  }
  if (nw->graph() != g_) {
    why_ = fmt::format("cannot replace {} by {}: it is not a node of graph '{}'", old->str(),
                       nw->str(), g_->name());
    return failure();
  }
  Expr *def = nw->expr();
  bool defIsInput = !def->inBody();
  llvm::SmallVector<Use *, 8> uses;
  for (Use *u = old->firstUse(); u; u = u->nextUse()) {
    Expr *user = u->user();
    if (user->graph() != g_ || !user->inBody() || (!defIsInput && !def->isBefore(user))) {
      why_ = fmt::format("cannot replace {} by {}: its user %{} comes before %{}, which "
                         "defines {}",
                         old->str(), nw->str(), user->id(), def->id(), nw->str());
      return failure();
    }
    uses.push_back(u);
  }
  size_t start = journal_.size();
  if (isGraphOutput(old)) {
    std::vector<Node *> outs(g_->outputs().begin(), g_->outputs().end());
    for (Node *&o : outs)
      if (o == old)
        o = nw;
    Entry &e = record(Entry::Outputs);
    e.nodes.assign(g_->outputs().begin(), g_->outputs().end());
    g_->setOutputsInternal(std::move(outs));
  }
  for (Use *u : uses) {
    Expr *user = u->user();
    Entry &e = record(Entry::Rewire);
    e.expr = user;
    e.index = user->useIndex(u);
    e.node = old;
    user->replaceUse(u, nw);
  }
  if (!open_)
    flush(start);
  return success();
}

LogicalResult Rewriter::replaceExpr(Expr *e, llvm::ArrayRef<Node *> nodes) {
  if (nodes.size() > e->numOutputs())
    raise("rewriter: {} replacement nodes for an expr with {} outputs", nodes.size(),
          e->numOutputs());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i] && failed(replaceAllUsesWith(e->output(i), nodes[i])))
      return failure();
  eraseIfDead(e);
  return success();
}

void Rewriter::setInput(Expr *user, size_t i, Node *n) {
  if (i >= user->numInputs())
    raise("rewriter: expr %{} has no input {}", user->id(), i);
  size_t start = journal_.size();
  Node *was = user->input(i);
  user->setInput(i, n);
  Entry &e = record(Entry::Rewire);
  e.expr = user;
  e.index = i;
  e.node = was;
  if (!open_)
    flush(start);
}

void Rewriter::eraseExpr(Expr *e) {
  if (!e || e->graph() != g_ || !e->inBody())
    raise("rewriter: the expr to erase is not in graph '{}'", g_->name());
  for (Node *n : e->outputs()) {
    if (n->hasUsers())
      raiseAt(Location::atExpr(e->id()),
              "cannot erase expr: its output '{}' is still used by expr %{}", n->str(),
              (*n->users().begin())->id());
    if (isGraphOutput(n))
      raiseAt(Location::atExpr(e->id()), "cannot erase expr: its output '{}' is a graph output",
              n->str());
  }
  eraseValid(e);
}

void Rewriter::eraseValid(Expr *e) {
  if (before_ == e)
    before_ = e->nextInGraph();
  size_t start = journal_.size();
  bool keep = keep_ && keep_(e);
  Entry &en = record(Entry::Erase);
  en.expr = e;
  en.next = e->nextInGraph();
  en.keep = keep;
  auto ins = e->inputs();
  en.nodes.assign(ins.begin(), ins.end());
  e->dropAllInputs();
  en.owned = g_->removeExpr(e);
  if (!open_)
    flush(start);
}

bool Rewriter::isDead(const Expr *e) const {
  if (!e->inBody() || e->graph() != g_ || e->removeDisabled() || e->numOutputs() == 0)
    return false;
  if (auto *cm = llvm::dyn_cast<CallMethod>(e))
    if (cm->methodSchema() && cm->methodSchema()->hasTrait(SideEffect))
      return false;
  for (Node *n : e->outputs()) // (nodes of g_: counted in its outputs)
    if (n->isNeeded())
      return false;
  return true;
}

size_t Rewriter::eraseIfDead(Expr *e) {
  size_t n = 0;
  llvm::SmallVector<Expr *, 8> stack = {e};
  while (!stack.empty()) {
    Expr *x = stack.pop_back_val();
    if (!isDead(x))
      continue;
    llvm::SmallVector<Expr *, 4> producers;
    for (size_t i = 0; i < x->numInputs(); ++i)
      if (Expr *p = x->input(i)->expr(); p->inBody() && !llvm::is_contained(producers, p))
        producers.push_back(p);
    eraseValid(x); // (isDead checked what eraseExpr would)
    ++n;
    stack.append(producers.begin(), producers.end());
  }
  return n;
}

} // namespace tmg
