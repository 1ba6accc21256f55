//===- InternalGraph.cpp - One graph of a traced module -------------------===//
#include "tm/ir/InternalGraph.h"

#include <algorithm>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringMap.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Module.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

std::string ReplaceReport::str() const {
  std::string out;
  for (const auto &s : skipped)
    out += fmt::format(
        "expr %{} keeps using {}: rewiring it to {} would {}\n", s.user->id(),
        s.oldNode->str(), s.newNode->str(),
        s.cycle ? "create a cycle" : "use it before its definition");
  return out;
}

/// Deletes the exprs of a graph being destroyed, in the given order; each
/// forgets its input uses unread (their nodes may be gone already).
static void deleteGraphExprs(llvm::ArrayRef<Expr *> exprs) {
  for (Expr *e : exprs) {
    e->forgetInputsInternal();
    delete e;
  }
}

InternalGraph::InternalGraph(std::string name, std::string qualname)
    : name_(name), qualname_(qualname), ns_(std::move(name), std::move(qualname)) {}

InternalGraph::~InternalGraph() {
  // One walk: each expr forgets its input uses (whose nodes may belong to
  // exprs destroyed earlier in the walk) and is destroyed; no expr
  // dereferences the nodes it used.
  std::vector<Expr *> body;
  body.reserve(size_);
  for (Expr *e = first_; e; e = e->next_)
    body.push_back(e);
  deleteGraphExprs(body);
  for (auto &e : inputExprs_)
    e->forgetInputsInternal();
}

void InternalGraph::setQualnameInternal(std::string q) {
  touch(); // GetAttr paths are relative to it
  qualname_ = q;
  ns_.setQualname(std::move(q));
}

void InternalGraph::setName(llvm::StringRef newName) {
  if (newName.empty())
    raise("graph '{}': the new name must not be empty", name_);
  if (parent_) {
    // The reference checks and reserves the name in the graph's own
    // namespace: a sub-graph may not take the name of one of its nodes.
    if (ns().isUsed(newName))
      raise("The name({}) is already in use. Please try a different one "
            "again.",
            newName.str());
    name_ = ns().createUniqueName(newName);
    return;
  }
  if (!owner_ || !owner_->isTop())
    raise("graph '{}': the parent graph cannot be None (only a top graph "
          "may be renamed without a parent)",
          name_);
  name_ = newName.str();
}

ModuleNode *InternalGraph::self() const {
  if (inputs_.empty())
    raise("graph '{}' has no inputs (input 0 must be self)", name_);
  auto *m = llvm::dyn_cast<ModuleNode>(inputs_[0]);
  if (!m)
    raise("graph '{}': input 0 is not a ModuleNode", name_);
  return m;
}

int64_t InternalGraph::nextNodeId() {
  return owner_ ? owner_->nextNodeId() : orphanNodeIds_++;
}
int64_t InternalGraph::nextExprId() {
  return owner_ ? owner_->nextExprId() : orphanExprIds_++;
}

//===----------------------------------------------------------------------===//
// The body list
//===----------------------------------------------------------------------===//

static constexpr uint64_t OrderGap = uint64_t(1) << 20;
static constexpr uint64_t MinSpacing = 16;

void InternalGraph::renumberOrder() {
  uint64_t k = 0;
  for (Expr *e = first_; e; e = e->next_)
    e->order_ = (k += OrderGap);
}

void InternalGraph::linkBefore(Expr *e, Expr *before) {
  Expr *prev = before ? before->prev_ : last_;
  e->prev_ = prev;
  e->next_ = before;
  if (prev)
    prev->next_ = e;
  else
    first_ = e;
  if (before)
    before->prev_ = e;
  else
    last_ = e;
  e->inBody_ = true;
  e->graph_ = this;
  ++size_;
  if (e->outputsUnused())
    addUnused(e);
  if (auto *ga = llvm::dyn_cast<GetAttr>(e)) {
    ga->indexInGraph_ = getAttrs_.size();
    getAttrs_.push_back(ga);
    // Appended to the body, it comes after every other GetAttr.
    getAttrsSorted_ &= before == nullptr;
  }
  touch();
  uint64_t lo = prev ? prev->order_ : 0;
  if (!before) {
    e->order_ = lo + OrderGap;
    return;
  }
  uint64_t hi = before->order_;
  if (hi - lo >= 2) {
    e->order_ = lo + (hi - lo) / 2;
    return;
  }
  // No room: respread keys over a window around `e` that is sparse enough,
  // doubling it each time (an order-maintenance list; amortised cheap).
  Expr *a = e, *b = e;
  size_t count = 1;
  for (size_t k = 1;; k *= 2) {
    for (size_t i = 0; i < k && a->prev_; ++i, ++count)
      a = a->prev_;
    for (size_t i = 0; i < k && b->next_; ++i, ++count)
      b = b->next_;
    uint64_t low = a->prev_ ? a->prev_->order_ : 0;
    if (!b->next_ && !a->prev_) {
      renumberOrder();
      return;
    }
    uint64_t high = b->next_ ? b->next_->order_
                             : low + (count + 1) * OrderGap;
    if ((high - low) / (count + 1) >= MinSpacing) {
      uint64_t step = (high - low) / (count + 1), key = low;
      for (Expr *x = a;; x = x->next_) {
        x->order_ = (key += step);
        if (x == b)
          break;
      }
      return;
    }
  }
}

void InternalGraph::setInsertionPointAfter(Expr *e) {
  if (e && e->graph_ != this)
    raise("expr %{} is not in graph '{}'", e->id(), name_);
  if (e && !e->inBody_)
    e = nullptr; // after an Input: the beginning of the body
  insertBefore_ = e ? e->next_ : first_;
}

void InternalGraph::insertExpr(std::unique_ptr<Expr> e, Expr *before) {
  if (before && (before->graph_ != this || !before->inBody_))
    raise("cannot insert before expr %{}: it is not in graph '{}'",
          before->id(), name_);
  Expr *raw = e.release();
  linkBefore(raw, before);
}

void InternalGraph::unlinkFromBody(Expr *e) {
  if (insertBefore_ == e)
    insertBefore_ = e->next_;
  if (e->prev_)
    e->prev_->next_ = e->next_;
  else
    first_ = e->next_;
  if (e->next_)
    e->next_->prev_ = e->prev_;
  else
    last_ = e->prev_;
  e->prev_ = e->next_ = nullptr;
  e->inBody_ = false;
  --size_;
  if (e->unusedIndex_ != Expr::NoUnusedIndex)
    removeUnused(e);
  if (auto *ga = llvm::dyn_cast<GetAttr>(e)) {
    GetAttr *last = getAttrs_.back();
    if (last != ga) {
      last->indexInGraph_ = ga->indexInGraph_;
      getAttrs_[ga->indexInGraph_] = last;
      getAttrsSorted_ = false;
    }
    getAttrs_.pop_back();
  }
}

std::unique_ptr<Expr> InternalGraph::removeExpr(Expr *e) {
  if (!e || e->graph_ != this || !e->inBody_)
    raise("expr is not in the body of graph '{}'", name_);
  unlinkFromBody(e);
  touch();
  return std::unique_ptr<Expr>(e);
}

void InternalGraph::eraseExpr(Expr *e) {
  if (!e || e->graph_ != this || !e->inBody_)
    raise("expr is not in the body of graph '{}'", name_);
  for (Node *n : e->outputs()) {
    if (n->hasUsers())
      raiseAt(Location::atExpr(e->id()),
              "cannot erase expr: its output '{}' is still used by expr %{}",
              n->str(), (*n->users().begin())->id());
    for (Node *o : outputs_)
      if (o == n)
        raiseAt(Location::atExpr(e->id()),
                "cannot erase expr: its output '{}' is a graph output",
                n->str());
  }
  std::unique_ptr<Expr> owned = removeExpr(e);
  owned->dropAllInputs();
}

void InternalGraph::moveBefore(Expr *e, Expr *before) {
  if (e == before)
    return;
  std::unique_ptr<Expr> owned = removeExpr(e);
  insertExpr(std::move(owned), before);
}

TensorNode *InternalGraph::newTensorOutput(Expr &e) {
  auto n = std::make_unique<TensorNode>(&e, nextNodeId());
  return llvm::cast<TensorNode>(e.addOutput(std::move(n)));
}

ModuleNode *InternalGraph::newModuleOutput(Expr &e) {
  auto n = std::make_unique<ModuleNode>(&e, nextNodeId());
  return llvm::cast<ModuleNode>(e.addOutput(std::move(n)));
}

TensorNode *InternalGraph::addTensorInput(llvm::StringRef name,
                                          std::optional<Shape> shape,
                                          DType dtype, std::string qualname) {
  auto in = std::make_unique<Input>(nextExprId(), name.str());
  in->setGraphInternal(this);
  TensorNode *n = newTensorOutput(*in);
  std::string unique = ns_.createUniqueName(name);
  n->setNamesInternal(unique, qualname.empty() ? qualname_ + ".[" + unique + "]" : qualname);
  n->setShape(std::move(shape));
  n->setDType(dtype);
  n->setHasDType(true);
  inputs_.push_back(n);
  inputExprs_.push_back(std::move(in));
  touch();
  return n;
}

ModuleNode *InternalGraph::addModuleInput(llvm::StringRef name,
                                          std::string qualname) {
  auto in = std::make_unique<Input>(nextExprId(), name.str());
  in->setGraphInternal(this);
  ModuleNode *n = newModuleOutput(*in);
  n->setNamesInternal(ns_.createUniqueName(name), qualname.empty() ? qualname_ : qualname);
  inputs_.push_back(n);
  inputExprs_.push_back(std::move(in));
  touch();
  return n;
}

Node *InternalGraph::adoptInputInternal(std::unique_ptr<Expr> input) {
  if (!input || !llvm::isa<Input>(input.get()) || input->numOutputs() != 1)
    raise("graph '{}': an input needs an Input expr with one output", name_);
  input->setGraphInternal(this);
  Node *n = input->output(0);
  inputs_.push_back(n);
  inputExprs_.push_back(std::move(input));
  touch();
  return n;
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

/// Calls `f(graph, expr)` for every expr of `g` in exprs()'s order: its
/// inputs, then its body, each callee graph (when `recursive`) right after
/// its first call; `visited` holds the graphs walked already.
template <typename F>
static void walkExprs(const InternalGraph *g, bool recursive,
                      llvm::DenseSet<const InternalGraph *> &visited, F &&f) {
  for (Node *in : g->inputs())
    f(g, in->expr());
  auto visit = [&](Expr *e) {
    f(g, e);
    if (!recursive)
      return;
    if (auto *cm = llvm::dyn_cast<CallMethod>(e))
      if (InternalGraph *sub = cm->calleeGraph())
        if (visited.insert(sub).second)
          walkExprs(sub, recursive, visited, f);
  };
  for (Expr *e : *g)
    visit(e);
}

ExprFilter InternalGraph::exprs(bool recursive) const {
  std::vector<Expr *> out;
  out.reserve(size_ + inputs_.size());
  llvm::DenseSet<const InternalGraph *> visited;
  visited.insert(this);
  walkExprs(this, recursive, visited,
            [&](const InternalGraph *, Expr *e) { out.push_back(e); });
  return ExprFilter(std::move(out));
}

NodeFilter InternalGraph::nodes(bool recursive) const {
  std::vector<Expr *> ex = exprs(recursive).asList();
  std::vector<Node *> out;
  llvm::DenseSet<const Node *> seen;
  for (Expr *e : ex) {
    for (size_t i = 0; i < e->numInputs(); ++i)
      if (seen.insert(e->input(i)).second)
        out.push_back(e->input(i));
    for (Node *n : e->outputs())
      if (seen.insert(n).second)
        out.push_back(n);
  }
  // Sort contiguous (id, node) pairs: comparing through the node pointers
  // would miss the cache on nearly every comparison in large graphs.
  std::vector<std::pair<int64_t, Node *>> keyed;
  keyed.reserve(out.size());
  for (Node *n : out)
    keyed.emplace_back(n->id(), n);
  std::stable_sort(keyed.begin(), keyed.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (size_t i = 0; i < keyed.size(); ++i)
    out[i] = keyed[i].second;
  return NodeFilter(std::move(out));
}

ExprFilter InternalGraph::getFunctionByType(const OpSchema *fn,
                                            bool recursive) const {
  return exprs(recursive).callFunction(fn);
}
ExprFilter InternalGraph::getMethodByType(llvm::StringRef method,
                                          bool recursive) const {
  return exprs(recursive).callMethod(method);
}
ExprFilter InternalGraph::getExprById(llvm::ArrayRef<int64_t> ids,
                                      bool recursive) const {
  return exprs(recursive).exprId(ids);
}
NodeFilter InternalGraph::getModuleByType(const ModuleType &t,
                                          bool recursive) const {
  return nodes(recursive).type(t);
}
NodeFilter InternalGraph::getNodeById(llvm::ArrayRef<int64_t> ids,
                                      bool recursive) const {
  return nodes(recursive).nodeId(ids);
}
NodeFilter InternalGraph::getNodeByName(llvm::StringRef pattern,
                                        bool ignoreCase, bool recursive) const {
  return nodes(recursive).name(pattern, ignoreCase);
}

std::vector<Expr *> InternalGraph::getDepExprs(llvm::ArrayRef<Node *> nodes) const {
  std::vector<Expr *> ret;
  llvm::DenseSet<const Expr *> inRet;
  std::vector<Node *> queue(nodes.begin(), nodes.end());
  llvm::DenseMap<const Node *, unsigned> inQueue;
  for (Node *n : queue)
    ++inQueue[n];
  llvm::DenseSet<const Node *> visited;
  while (!queue.empty()) {
    Node *node = queue.back();
    queue.pop_back();
    if (--inQueue[node] == 0)
      inQueue.erase(node);
    visited.insert(node);
    Expr *e = node->expr();
    if (!e)
      continue;
    if (inRet.insert(e).second)
      ret.push_back(e);
    for (size_t i = 0; i < e->numInputs(); ++i) {
      Node *in = e->input(i);
      if (!inQueue.count(in) && !visited.count(in)) {
        queue.push_back(in);
        ++inQueue[in];
      }
    }
  }
  return ret;
}

//===----------------------------------------------------------------------===//
// Inputs and outputs
//===----------------------------------------------------------------------===//

TracedModule &InternalGraph::topModule(const char *what) const {
  if (!owner_ || !owner_->isTop() || parent_)
    raise("{} only supports top graph (graph '{}' is not the top graph of a "
          "top module)",
          what, name_);
  return *owner_;
}

std::vector<Node *> InternalGraph::resetInputs(
    llvm::ArrayRef<std::pair<std::optional<Shape>, DType>> specs) {
  TracedModule &m = topModule("reset_inputs");
  const auto *sig = m.signatureOf(*this);
  if (!sig)
    raise("graph '{}' is not registered in its module", name_);
  TreeDef oldDef = sig->argDef;
  std::vector<Node *> fresh;
  std::vector<TreeDef> pos = {TreeDef::leaf(TreeDef::LeafType::Module)};
  inputs_.resize(1);
  for (const auto &[shape, dtype] : specs) {
    TensorNode *n = addTensorInput("args", shape, dtype);
    fresh.push_back(n);
    pos.push_back(TreeDef());
  }
  m.rekey(oldDef, makeArgDef(std::move(pos)));
  return fresh;
}

TensorNode *InternalGraph::addInputNode(std::optional<Shape> shape, DType dtype,
                                        llvm::StringRef name) {
  TracedModule &m = topModule("add_input_node");
  const auto *sig = m.signatureOf(*this);
  if (!sig)
    raise("graph '{}' is not registered in its module", name_);
  TreeDef oldDef = sig->argDef;
  if (oldDef.kind() != TreeDef::Kind::Tuple || oldDef.numChildren() != 2)
    raise("graph '{}': unexpected signature {}", name_, oldDef.str());
  TreeDef pos = oldDef.child(0), kw = oldDef.child(1);
  size_t at = pos.numLeaves();
  TensorNode *n = addTensorInput(name.empty() ? "args" : name, shape, dtype);
  // addTensorInput appended; the new positional leaf goes before kwargs.
  inputs_.pop_back();
  inputs_.insert(inputs_.begin() + at, n);
  touch();
  TreeDef newDef = TreeDef::tuple({pos.appended(TreeDef()), kw});
  m.rekey(oldDef, newDef);
  return n;
}

void InternalGraph::resetOutputs(TreeDef outDef, llvm::ArrayRef<Node *> nodes) {
  TracedModule &m = topModule("reset_outputs");
  if (outDef.numLeaves() != nodes.size())
    raise("reset_outputs: the structure {} has {} leaves but {} nodes were "
          "given",
          outDef.str(), outDef.numLeaves(), nodes.size());
  for (Node *n : nodes)
    if (!n || n->graph() != this)
      raise("reset_outputs: node '{}' is not in graph '{}'",
            n ? n->str() : "null", name_);
  const auto *sig = m.signatureOf(*this);
  setOutputList(std::vector<Node *>(nodes.begin(), nodes.end()));
  touch();
  m.setOutDef(sig->argDef, std::move(outDef));
}

void InternalGraph::addOutputNode(Node *node) {
  TracedModule &m = topModule("add_output_node");
  if (!node || node->graph() != this)
    raise("add_output_node: node '{}' is not in graph '{}'",
          node ? node->str() : "null", name_);
  const auto *sig = m.signatureOf(*this);
  TreeDef newDef = TreeDef::tuple({sig->outDef, TreeDef()});
  node->retainAsOutput();
  outputs_.push_back(node);
  touch();
  m.setOutDef(sig->argDef, std::move(newDef));
}

//===----------------------------------------------------------------------===//
// Rewrites
//===----------------------------------------------------------------------===//

ReplaceReport InternalGraph::replaceNode(
    llvm::ArrayRef<std::pair<Node *, Node *>> repl) {
  ReplaceReport report;
  for (auto it = repl.rbegin(); it != repl.rend(); ++it) {
    Node *old = it->first, *nw = it->second;
    if (!old || !nw)
      raise("replace_node: null node");
    if (old->kind() != nw->kind())
      raise("The type of {}({}) and {}({}) are not the same", old->str(),
            llvm::isa<TensorNode>(old) ? "TensorNode" : "ModuleNode",
            nw->str(), llvm::isa<TensorNode>(nw) ? "TensorNode" : "ModuleNode");
    if (nw->graph() != this)
      raise("replace_node: the replacement '{}' is not a node of graph '{}'",
            nw->str(), name_);
    if (old == nw)
      continue;
    for (Node *&o : outputs_)
      if (o == old) {
        nw->retainAsOutput();
        old->releaseAsOutput();
        o = nw;
      }
    touch();
    Expr *def = nw->expr();
    bool defIsInput = !def->inBody();
    std::vector<Use *> uses;
    uses.reserve(old->numUsers());
    for (Use *u = old->firstUse(); u; u = u->nextUse())
      uses.push_back(u);
    std::vector<Expr *> skippedUsers;
    for (Use *u : uses) {
      Expr *user = u->user();
      bool ok = user->graph() == this &&
                (defIsInput || (user->inBody() && def->isBefore(user)));
      if (!ok) {
        skippedUsers.push_back(user);
        continue;
      }
      user->replaceUse(u, nw);
      ++report.rewired;
    }
    if (skippedUsers.empty())
      continue;
    // Classify: a skipped user is a cycle when it is `def` itself or one of
    // its ancestors. Ancestors of `def` lie between the user and `def`, so
    // the search stops at the earliest skipped user.
    uint64_t minOrder = ~uint64_t(0);
    for (Expr *u : skippedUsers)
      if (u->inBody())
        minOrder = std::min(minOrder, u->orderKey());
    llvm::DenseSet<const Expr *> ancestors;
    std::vector<const Expr *> stack = {def};
    while (!stack.empty()) {
      const Expr *e = stack.back();
      stack.pop_back();
      if (!ancestors.insert(e).second)
        continue;
      for (size_t i = 0; i < e->numInputs(); ++i) {
        const Expr *p = e->input(i)->expr();
        if (p && p->inBody() && p->graph() == this && p->orderKey() >= minOrder)
          stack.push_back(p);
      }
    }
    for (Expr *u : skippedUsers)
      report.skipped.push_back({old, nw, u, ancestors.count(u) != 0});
  }
  return report;
}

/// The attribute path of `ga`: its output's qualname after "<qual>."
/// ("" when the qualname is `qual` itself). Throws tmg::Error naming the
/// expr when the qualname is not under `qual`.
static llvm::StringRef getAttrPath(const GetAttr &ga, llvm::StringRef qual) {
  return detail::attrPathOf(ga.output(0)->qualname(), qual, ga.id(), *ga.output(0));
}

llvm::StringRef detail::attrPathOf(llvm::StringRef oq, llvm::StringRef qual, int64_t exprId,
                                   const Node &out) {
  if (oq == qual)
    return "";
  if (oq.size() > qual.size() + 1 && oq.startswith(qual) && oq[qual.size()] == '.')
    return oq.drop_front(qual.size() + 1);
  raiseAt(Location::atExpr(exprId),
          "\"{}\" is not a prefix of \"{}\": the qualname of '{}' is wrong",
          qual.str(), oq.str(), out.str());
}

void InternalGraph::sortGetAttrs() {
  if (getAttrsSorted_)
    return;
  // Keys read once, in the list's order; the sort then stays in the cache.
  std::vector<std::pair<uint64_t, GetAttr *>> keyed;
  keyed.reserve(getAttrs_.size());
  for (GetAttr *ga : getAttrs_)
    keyed.emplace_back(ga->order_, ga);
  auto byKey = [](const auto &a, const auto &b) { return a.first < b.first; };
  std::sort(keyed.begin(), keyed.end(), byKey);
  for (size_t i = 0; i < keyed.size(); ++i) {
    getAttrs_[i] = keyed[i].second;
    getAttrs_[i]->indexInGraph_ = i;
  }
  getAttrsSorted_ = true;
}

void InternalGraph::planGetAttrMerges(llvm::ArrayRef<InternalGraph *> graphs,
                                      std::vector<GetAttrMergeStep> &steps,
                                      std::vector<size_t> &ends) {
  steps.clear();
  ends.clear();
  if (graphs.empty())
    return;
  ends.reserve(graphs.size());
  // The first GetAttr of each path; its keys view the nodes' qualnames.
  llvm::SmallDenseMap<llvm::StringRef, Node *, 64> seen;
  for (InternalGraph *g : graphs) {
    g->sortGetAttrs();
    seen.clear();
    bool selfChecked = false;
    for (GetAttr *ga : g->getAttrs_) {
      Node *out = ga->output(0);
      llvm::StringRef attr = getAttrPath(*ga, g->qualname_);
      auto [it, inserted] = seen.try_emplace(attr, out);
      if (!inserted) {
        // A duplicate: its users move to the first GetAttr of the path.
        if (it->second != out && out->hasUsers())
          steps.push_back({ga, out, it->second, {}});
        continue;
      }
      if (attr != ga->attrName()) {
        // Re-pointing at self needs self (throws without).
        if (!selfChecked) {
          (void)g->self();
          selfChecked = true;
        }
        steps.push_back({ga, out, nullptr, attr});
      }
    }
    ends.push_back(steps.size()); // its plan is complete
  }
}

void InternalGraph::checkGetAttrs() {
  if (getAttrs_.empty() || mergedVersion_ == version_ || planVersion_ == version_)
    return;
  InternalGraph *g = this;
  checkGetAttrs(llvm::ArrayRef<InternalGraph *>(g));
}

void InternalGraph::checkGetAttrs(llvm::ArrayRef<InternalGraph *> graphs) {
  llvm::SmallVector<InternalGraph *, 1> todo;
  for (InternalGraph *g : graphs)
    if (!g->getAttrs_.empty() && g->mergedVersion_ != g->version_ &&
        g->planVersion_ != g->version_)
      todo.push_back(g);
  std::vector<GetAttrMergeStep> steps;
  std::vector<size_t> ends;
  planGetAttrMerges(todo, steps, ends);
  // Kept for the merge (valid until the graph changes).
  for (size_t k = 0, begin = 0; k < todo.size(); begin = ends[k++]) {
    todo[k]->mergePlan_.assign(steps.begin() + begin, steps.begin() + ends[k]);
    todo[k]->planVersion_ = todo[k]->version_;
  }
}

bool InternalGraph::mergeGetAttrs() {
  if (getAttrs_.empty() || mergedVersion_ == version_) {
    mergedVersion_ = version_;
    return false;
  }
  InternalGraph *g = this;
  return mergeGetAttrs(llvm::ArrayRef<InternalGraph *>(g)) != 0;
}

size_t InternalGraph::mergeGetAttrs(llvm::ArrayRef<InternalGraph *> graphs) {
  llvm::SmallVector<InternalGraph *, 1> todo, unplanned, done;
  for (InternalGraph *g : graphs) {
    if (g->getAttrs_.empty() || g->mergedVersion_ == g->version_) {
      done.push_back(g);
      continue;
    }
    todo.push_back(g);
    if (g->planVersion_ != g->version_)
      unplanned.push_back(g);
  }
  // Plan first (a failure changes nothing), except the graphs that
  // checkGetAttrs planned since their last change.
  std::vector<GetAttrMergeStep> steps;
  std::vector<size_t> ends;
  planGetAttrMerges(unplanned, steps, ends);
  for (InternalGraph *g : done)
    g->mergedVersion_ = g->version_;
  if (todo.empty())
    return 0;
  if (unplanned.size() != todo.size()) {
    // Some plans were kept: the stream in the order of `todo`.
    std::vector<GetAttrMergeStep> fresh = std::move(steps);
    std::vector<size_t> freshEnds = std::move(ends);
    steps.clear();
    ends.clear();
    size_t u = 0;
    for (InternalGraph *g : todo) {
      if (g->planVersion_ == g->version_) {
        steps.insert(steps.end(), g->mergePlan_.begin(), g->mergePlan_.end());
      } else {
        size_t begin = u ? freshEnds[u - 1] : 0;
        steps.insert(steps.end(), fresh.begin() + begin, fresh.begin() + freshEnds[u++]);
      }
      ends.push_back(steps.size());
    }
  }
  // Each duplicate that loses its uses joins its graph's unused list: one
  // growth per graph, made before any graph changes.
  for (size_t j = 0; j < todo.size(); ++j)
    todo[j]->unused_.reserve(todo[j]->unused_.size() + ends[j] - (j ? ends[j - 1] : 0));
  size_t changed = 0, k = 0;
  InternalGraph *g = nullptr;
  ModuleNode *selfNode = nullptr;
  auto nextGraph = [&] {
    if (g) { // done: any kept plan is spent
      g->mergedVersion_ = g->version_;
      g->planVersion_ = ~uint64_t(0);
      if (g->mergePlan_.capacity())
        g->mergePlan_ = {};
    }
    if (k == todo.size())
      return false;
    size_t begin = k ? ends[k - 1] : 0;
    changed += ends[k] != begin;
    g = todo[k++];
    selfNode = nullptr;
    return true;
  };
  nextGraph();
  for (size_t i = 0; i < steps.size(); ++i) {
    while (i == ends[k - 1])
      nextGraph();
    const GetAttrMergeStep &st = steps[i];
    if (st.base) {
      // Rewire every use; replaceUse unlinks the use from `out`.
      while (Use *u = st.out->firstUse())
        u->user()->replaceUse(u, st.base);
    } else {
      if (!selfNode)
        selfNode = g->self();
      st.ga->setAttrName(st.path.str());
      st.ga->setInput(0, selfNode);
    }
  }
  while (nextGraph()) {
  }
  return changed;
}

void InternalGraph::setOutputList(std::vector<Node *> outs) {
  // New first: a node in both lists never looks unneeded on the way.
  for (Node *n : outs)
    n->retainAsOutput();
  for (Node *n : outputs_)
    n->releaseAsOutput();
  outputs_ = std::move(outs);
}

void InternalGraph::addUnused(Expr *e) {
  e->unusedIndex_ = uint32_t(unused_.size());
  unused_.push_back(e);
}

void InternalGraph::removeUnused(Expr *e) {
  uint32_t i = e->unusedIndex_;
  Expr *last = unused_.back();
  unused_[i] = last;
  last->unusedIndex_ = i;
  unused_.pop_back();
  e->unusedIndex_ = Expr::NoUnusedIndex;
}

bool detail::isModuleRefExpr(const Expr *e) {
  if (llvm::isa<GetAttr>(e) || llvm::isa<Constant>(e))
    return e->numOutputs() && llvm::isa<ModuleNode>(e->output(0));
  if (auto *cm = llvm::dyn_cast<CallMethod>(e))
    return cm->moduleNode() != nullptr;
  return false;
}

void InternalGraph::setModuleRefExprsInternal(std::vector<Expr *> exprs) {
  refExprs_ = std::move(exprs);
  refExprsVersion_ = version_;
}

llvm::ArrayRef<Expr *> InternalGraph::moduleRefExprs() {
  if (refExprsVersion_ == version_)
    return refExprs_;
  refExprs_.clear();
  for (Expr *e : *this)
    if (detail::isModuleRefExpr(e))
      refExprs_.push_back(e);
  refExprsVersion_ = version_;
  return refExprs_;
}

size_t InternalGraph::compile() {
  mergeGetAttrs();
  return removeDeadExprs();
}

size_t InternalGraph::removeDeadExprs() {
  bool merged = mergedVersion_ == version_;
  // An expr is dead when no graph output depends on it, nor a
  // disable_remove expr (the reference drops the latter's producers,
  // leaving dangling inputs; we keep them). In a graph without cycles the
  // dead exprs are exactly what repeatedly deleting unused exprs removes:
  // a dead expr's users are all dead, so some dead expr has no users, and
  // deleting it leaves the rest dead. unused_ lists the exprs none of
  // whose outputs is used by an expr or is a graph output, at every moment
  // (the use-list and output-list edits keep it), so compile starts from
  // it and never reads a live expr: its cost is the exprs it deletes plus
  // the unused disable_remove exprs it keeps, and on a graph with nothing
  // to delete it returns at once. A deletion that takes a producer's last
  // use appends the producer to the list, which is consumed from the back,
  // so the cascade follows at once, while the producer's node is in the
  // cache.
  llvm::SmallVector<Expr *, 8> kept;
  size_t removed = 0;
  while (!unused_.empty()) {
    Expr *e = unused_.back();
    if (e->disableRemove_) {
      unused_.pop_back();
      e->unusedIndex_ = Expr::NoUnusedIndex;
      kept.push_back(e);
      continue;
    }
    unlinkFromBody(e); // takes it off unused_
    delete e;          // dropping its inputs may append producers to unused_
    ++removed;
  }
  for (Expr *e : kept)
    addUnused(e);
  if (removed)
    touch();
  // Removing dead exprs keeps the getattrs merged (a merged duplicate has
  // no users; the GetAttr it defers to is live when they had some).
  if (merged)
    mergedVersion_ = version_;
  return removed;
}

/// Sorts (key, value) pairs by key, stably, in linear time: LSD radix sort
/// on 11-bit digits, as many passes as the largest key needs (two for keys
/// below 2^22). Keys must be >= 0.
static void radixSortByKey(std::vector<std::pair<int64_t, Node *>> &v) {
  uint64_t maxKey = 0;
  for (const auto &p : v)
    maxKey |= uint64_t(p.first);
  constexpr unsigned Bits = 11;
  constexpr size_t Buckets = size_t(1) << Bits;
  std::vector<std::pair<int64_t, Node *>> tmp(v.size());
  std::vector<size_t> count(Buckets);
  for (unsigned shift = 0; shift < 64 && (maxKey >> shift) != 0; shift += Bits) {
    std::fill(count.begin(), count.end(), 0);
    for (const auto &p : v)
      ++count[(uint64_t(p.first) >> shift) & (Buckets - 1)];
    size_t sum = 0;
    for (size_t &c : count) {
      size_t n = c;
      c = sum;
      sum += n;
    }
    for (const auto &p : v)
      tmp[count[(uint64_t(p.first) >> shift) & (Buckets - 1)]++] = p;
    v.swap(tmp);
  }
}

/// Sorts (key, value) pairs by key when the keys, in order, are two
/// increasing sequences merged: the nodes an edit kept (numbered in order
/// before it) and those it created (numbered as created), which is what
/// renumbering after flatten or an insertion meets. One pass checks it
/// (each key goes to the sequence with the largest last key below it: the
/// greedy assignment, which succeeds whenever any does), one partitions,
/// one merges: linear and sequential, where the radix sort's scatter
/// passes missed the caches on a large graph. Returns false, changing
/// nothing, for other orders.
static bool sortTwoRuns(std::vector<std::pair<int64_t, Node *>> &v) {
  auto assign = [](int64_t x, int64_t &a, int64_t &b) -> int {
    // 0: sequence A, 1: sequence B, -1: neither.
    if (a >= b) {
      if (x > a) return a = x, 0;
      if (x > b) return b = x, 1;
    } else {
      if (x > b) return b = x, 1;
      if (x > a) return a = x, 0;
    }
    return -1;
  };
  int64_t a = INT64_MIN, b = INT64_MIN;
  size_t inB = 0;
  for (const auto &p : v) {
    int s = assign(p.first, a, b);
    if (s < 0)
      return false;
    inB += size_t(s);
  }
  if (inB == 0)
    return true; // sorted already
  std::vector<std::pair<int64_t, Node *>> seqB;
  seqB.reserve(inB);
  a = b = INT64_MIN;
  size_t w = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (assign(v[i].first, a, b) == 0)
      v[w++] = v[i];
    else
      seqB.push_back(v[i]);
  }
  std::vector<std::pair<int64_t, Node *>> out(v.size());
  auto byKey = [](const auto &x, const auto &y) { return x.first < y.first; };
  std::merge(v.begin(), v.begin() + w, seqB.begin(), seqB.end(), out.begin(), byKey);
  v.swap(out);
  return true;
}

void InternalGraph::resetIds() {
  // One walk in exprs(true)'s order (inputs, then the body, each callee
  // graph after its first call; shared sub-graphs once) numbers the exprs
  // and reads the old ids of their output nodes.
  int64_t eid = 0;
  bool negative = false;
  std::vector<std::pair<int64_t, Node *>> keyed;
  keyed.reserve(size_ + size_ / 4 + inputs_.size());
  llvm::DenseSet<const InternalGraph *> visited;
  visited.insert(this);
  // So is the module-reference list (a walk over the graph's exprs and
  // output nodes less for the updateRefs after a flatten).
  bool refs = refExprsVersion_ != version_;
  if (refs)
    refExprs_.clear();
  walkExprs(this, true, visited, [&](const InternalGraph *g, Expr *e) {
    e->setIdInternal(eid++);
    for (Node *n : e->outputs()) {
      keyed.emplace_back(n->id(), n);
      negative |= n->id() < 0;
    }
    if (g == this && e->inBody() && refs && detail::isModuleRefExpr(e))
      refExprs_.push_back(e);
  });
  if (refs)
    refExprsVersion_ = version_;
  // Nodes are numbered in the order of their old ids, as the reference's
  // nodes() sorts them. In a graph each node has one producer, which
  // exprs() lists (inputs included) exactly once: the outputs of the listed
  // exprs are every node once, with no set to find duplicates, and
  // non-negative ids sort by radix in linear time (nodes() hashes every
  // node and sorts by comparison, which the renumbering after a flatten
  // of a large module felt). Should ids repeat or be negative, the order
  // of equal ids is nodes()'s walk order: nodes() decides.
  int64_t nid = negative ? -1 : detail::renumberNodesByOldId(keyed);
  if (nid < 0) {
    nid = 0;
    for (Node *n : nodes(true).asList())
      n->setIdInternal(nid++);
  }
  if (owner_)
    owner_->setTotalIds(nid, eid);
}

int64_t detail::renumberNodesByOldId(std::vector<std::pair<int64_t, Node *>> &keyed) {
  for (const auto &p : keyed)
    if (p.first < 0)
      return -1;
  if (!sortTwoRuns(keyed))
    radixSortByKey(keyed);
  for (size_t i = 1; i < keyed.size(); ++i)
    if (keyed[i - 1].first == keyed[i].first)
      return -1;
  int64_t nid = 0;
  for (const auto &[id, n] : keyed)
    n->setIdInternal(nid++);
  return nid;
}

std::string InternalGraph::str(NodeFormat f) const {
  std::string out;
  if (!name_.empty())
    out += name_ + ".Graph";
  out += " (";
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (i)
      out += ", ";
    out += inputs_[i]->str(f);
  }
  out += ") {\n\t";
  // Printed into one buffer, sized for typical lines (~60 bytes): no
  // temporary string per expr, and few regrowths of a large graph's text.
  out.reserve(out.size() + size_ * 64 + 64);
  bool first = true;
  for (Expr *e : *this) {
    if (!first)
      out += "\n\t";
    e->print(out, f);
    first = false;
  }
  out += "\n\treturn ";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i)
      out += ", ";
    out += outputs_[i]->str(f);
  }
  out += "\n}";
  return out;
}

bool InternalGraph::ownsNode(const Node *n) const {
  return n && n->graph() == this;
}

} // namespace tmg
