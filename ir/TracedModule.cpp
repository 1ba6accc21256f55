//===- TracedModule.cpp - Graphs per call signature, clone, flatten -------===//
#include "tm/ir/TracedModule.h"

#include <llvm/ADT/DenseMap.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

TracedModule::TracedModule(std::string typeName, bool isTop)
    : Module(Kind::Traced, moduleBaseType(), std::move(typeName)),
      isTop_(isTop) {}

TracedModule::~TracedModule() = default;

std::unique_ptr<TracedModule>
TracedModule::fromModule(std::unique_ptr<Module> m, bool isTop) {
  if (!m)
    raise("fromModule: module is null");
  if (auto *t = llvm::dyn_cast<TracedModule>(m.get())) {
    t->setTop(isTop);
    m.release();
    return std::unique_ptr<TracedModule>(t);
  }
  if (m->isBuiltin())
    raise("module '{}' is builtin: only plain modules become TracedModules",
          m->typeName().str());
  auto t = std::make_unique<TracedModule>(m->typeName().str(), isTop);
  t->setName(m->name());
  // `m` is consumed: submodules are released from it in O(1) each.
  for (const ModuleAttr &attr : m->attrs()) {
    const ModuleAttr *a = &attr;
    const std::string &n = attr.name;
    switch (a->kind) {
    case ModuleAttr::Kind::Parameter: t->registerParameter(n, a->tensor); break;
    case ModuleAttr::Kind::Buffer: t->registerBuffer(n, a->tensor); break;
    case ModuleAttr::Kind::Value: t->setValue(n, a->value); break;
    case ModuleAttr::Kind::Submodule: {
      std::unique_ptr<Module> child = m->releaseModule(n);
      if (child->isBuiltin())
        t->registerModule(n, std::move(child));
      else
        t->registerModule(n, fromModule(std::move(child), false));
      break;
    }
    }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Signatures
//===----------------------------------------------------------------------===//

std::string TracedModule::signaturesStr() const {
  std::string out;
  for (const auto &s : sigs_) {
    // Drop the leading self leaf from the positional tuple.
    std::string txt = s.argDef.str();
    out += "  forward" + txt + "\n";
  }
  return out;
}

InternalGraph &TracedModule::graph() const {
  if (sigs_.size() != 1)
    raise("module '{}' has {} graphs (one per call signature); use the "
          "graph of a specific call instead:\n{}",
          typeName().str(), sigs_.size(), signaturesStr());
  return *sigs_[0].graph;
}

InternalGraph *TracedModule::graphFor(const TreeDef &argDef) const {
  auto it = sigIndex_.find(argDef);
  return it == sigIndex_.end() ? nullptr : sigs_[it->second].graph.get();
}

const TreeDef *TracedModule::outDefFor(const TreeDef &argDef) const {
  auto it = sigIndex_.find(argDef);
  return it == sigIndex_.end() ? nullptr : &sigs_[it->second].outDef;
}

const TracedModule::Signature *
TracedModule::signatureOf(const InternalGraph &g) const {
  for (const auto &s : sigs_)
    if (s.graph.get() == &g)
      return &s;
  return nullptr;
}

InternalGraph &TracedModule::addGraph(TreeDef argDef, std::string name,
                                      std::string qualname) {
  if (sigIndex_.count(argDef))
    raise("module '{}' already has a graph for signature {}",
          typeName().str(), argDef.str());
  auto g = std::make_unique<InternalGraph>(std::move(name), std::move(qualname));
  g->setOwnerInternal(this);
  sigIndex_[argDef] = sigs_.size();
  sigs_.push_back(Signature{argDef, TreeDef::tuple({}), std::move(g)});
  return *sigs_.back().graph;
}

void TracedModule::setOutDef(const TreeDef &argDef, TreeDef outDef) {
  auto it = sigIndex_.find(argDef);
  if (it == sigIndex_.end())
    raise("module '{}' has no graph for signature {}", typeName().str(),
          argDef.str());
  sigs_[it->second].outDef = std::move(outDef);
}

void TracedModule::rekey(const TreeDef &oldArgDef, TreeDef newArgDef) {
  auto it = sigIndex_.find(oldArgDef);
  if (it == sigIndex_.end())
    raise("module '{}' has no graph for signature {}", typeName().str(),
          oldArgDef.str());
  size_t i = it->second;
  if (oldArgDef == newArgDef)
    return;
  if (sigIndex_.count(newArgDef))
    raise("module '{}' already has a graph for signature {}",
          typeName().str(), newArgDef.str());
  sigIndex_.erase(it);
  sigIndex_[newArgDef] = i;
  sigs_[i].argDef = std::move(newArgDef);
}

TracedModule &TracedModule::root() {
  TracedModule *r = this;
  for (Module *p = parent(); p; p = p->parent())
    if (auto *t = llvm::dyn_cast<TracedModule>(p))
      r = t;
  return *r;
}
const TracedModule &TracedModule::root() const {
  return const_cast<TracedModule *>(this)->root();
}

//===----------------------------------------------------------------------===//
// References
//===----------------------------------------------------------------------===//

/// The module an attribute path names, starting from `base`.
static Module *resolveAttrModule(Module *base, llvm::StringRef path) {
  return base ? base->resolveModule(path) : nullptr;
}

void TracedModule::updateRefs() {
  llvm::DenseSet<const TracedModule *> visited;
  updateRefsImpl(nullptr, visited);
}

void TracedModule::updateRefsImpl(InternalGraph *parentGraph,
                                  llvm::DenseSet<const TracedModule *> &visited) {
  if (!visited.insert(this).second)
    return;
  for (auto &sig : sigs_) {
    InternalGraph &g = *sig.graph;
    g.setOwnerInternal(this);
    g.setParentInternal(parentGraph);
    if (!g.inputs().empty())
      if (auto *self = llvm::dyn_cast<ModuleNode>(g.input(0)))
        self->setOwner(this);
    for (Expr *e : g) {
      if (auto *ga = llvm::dyn_cast<GetAttr>(e)) {
        if (auto *out = llvm::dyn_cast<ModuleNode>(ga->output(0))) {
          auto *base = llvm::dyn_cast<ModuleNode>(ga->input(0));
          Module *obj = resolveAttrModule(base ? base->owner() : nullptr,
                                          ga->attrName());
          out->setOwner(obj);
          if (obj)
            out->setModuleType(obj->isBuiltin() ? obj->type()
                                                : moduleBaseType());
        }
      } else if (auto *c = llvm::dyn_cast<Constant>(e)) {
        if (auto *out = llvm::dyn_cast<ModuleNode>(c->output(0))) {
          out->setOwner(c->module());
          if (c->module())
            out->setModuleType(c->module()->type());
        }
      } else if (auto *cm = llvm::dyn_cast<CallMethod>(e)) {
        if (ModuleNode *mn = cm->moduleNode())
          if (auto *callee = llvm::dyn_cast_or_null<TracedModule>(mn->owner()))
            callee->updateRefsImpl(&g, visited);
      }
    }
  }
  // Traced submodules never called still get their owners fixed, also
  // those below plain submodules.
  auto visitSubmodules = [&](const Module &m, auto &self) -> void {
    for (const auto &a : m.attrs()) {
      if (a.kind != ModuleAttr::Kind::Submodule)
        continue;
      if (auto *t = llvm::dyn_cast<TracedModule>(a.module.get()))
        t->updateRefsImpl(nullptr, visited);
      else
        self(*a.module, self);
    }
  };
  visitSubmodules(*this, visitSubmodules);
}

//===----------------------------------------------------------------------===//
// Cloning
//===----------------------------------------------------------------------===//

/// A copy of `n` without names.
static std::unique_ptr<Node> cloneNodeUnnamed(const Node &n, int64_t id) {
  std::unique_ptr<Node> c;
  if (auto *t = llvm::dyn_cast<TensorNode>(&n)) {
    auto tn = std::make_unique<TensorNode>(nullptr, id);
    tn->setShape(t->shape());
    tn->setDType(t->dtype());
    tn->setHasDType(t->hasDType());
    c = std::move(tn);
  } else {
    auto *m = llvm::cast<ModuleNode>(&n);
    auto mn = std::make_unique<ModuleNode>(nullptr, id);
    mn->setModuleType(m->moduleType());
    mn->setOwner(m->owner());
    c = std::move(mn);
  }
  return c;
}

std::unique_ptr<Node> cloneNodeShallow(const Node &n, int64_t id) {
  auto c = cloneNodeUnnamed(n, id);
  c->copyNamesFrom(n);
  return c;
}

std::unique_ptr<Node> cloneNodeShallow(const Node &n, int64_t id,
                                       llvm::StringRef name) {
  auto c = cloneNodeUnnamed(n, id);
  c->setNamesInternal(name, n.qualname());
  return c;
}

std::unique_ptr<Expr> cloneExprShallow(const Expr &e, int64_t id) {
  std::unique_ptr<Expr> c;
  switch (e.kind()) {
  case Expr::Kind::Input:
    c = std::make_unique<Input>(id, llvm::cast<Input>(e).name());
    break;
  case Expr::Kind::GetAttr:
    c = std::make_unique<GetAttr>(id, llvm::cast<GetAttr>(e).attrName());
    break;
  case Expr::Kind::CallMethod: {
    auto &cm = llvm::cast<CallMethod>(e);
    if (cm.isModuleCall())
      c = std::make_unique<CallMethod>(id);
    else
      c = std::make_unique<CallMethod>(id, *cm.methodSchema());
    break;
  }
  case Expr::Kind::CallFunction:
    c = std::make_unique<CallFunction>(id, llvm::cast<CallFunction>(e).func());
    break;
  case Expr::Kind::Constant: {
    auto &k = llvm::cast<Constant>(e);
    if (k.isTensor())
      c = std::make_unique<Constant>(id, k.tensor(), k.name());
    else
      c = std::make_unique<Constant>(id, k.module()->clone(), k.name());
    break;
  }
  case Expr::Kind::Apply: {
    auto &a = llvm::cast<Apply>(e);
    c = std::make_unique<Apply>(id, a.opdef(), a.attrs());
    break;
  }
  }
  c->setArgDef(e.argDef());
  c->setOutDef(e.outDef());
  if (e.removeDisabled())
    c->disableRemove();
  return c;
}

void cloneGraphInto(const InternalGraph &src, InternalGraph &dst,
                    llvm::DenseMap<const Node *, Node *> *nodeMapOut) {
  if (!dst.empty() || !dst.inputs_.empty())
    raise("cloneGraphInto: destination graph '{}' is not empty", dst.name());
  llvm::DenseMap<const Node *, Node *> local;
  auto &map = nodeMapOut ? *nodeMapOut : local;
  // One entry per node; sized up front so the map never rehashes.
  map.reserve(map.size() + src.inputExprs_.size() + 2 * src.size());
  auto cloneOutputs = [&](const Expr &from, Expr &to) {
    for (Node *o : from.outputs()) {
      Node *n = to.addOutput(cloneNodeShallow(*o, o->id()));
      map[o] = n;
    }
  };
  for (const auto &in : src.inputExprs_) {
    auto c = cloneExprShallow(*in, in->id());
    c->setGraphInternal(&dst);
    cloneOutputs(*in, *c);
    dst.inputExprs_.push_back(std::move(c));
  }
  for (Node *n : src.inputs_)
    dst.inputs_.push_back(map.lookup(n));
  detail::forEachCopied(src, map, [&](Expr *e) {
    auto c = cloneExprShallow(*e, e->id());
    for (size_t i = 0; i < e->numInputs(); ++i) {
      auto it = map.find(e->input(i));
      if (it == map.end())
        raiseAt(Location::atExpr(e->id()),
                "clone: input '{}' of expr is not defined in graph '{}'",
                e->input(i)->str(), src.name());
      c->addInput(it->second);
    }
    cloneOutputs(*e, *c);
    dst.insertExpr(std::move(c), nullptr);
  });
  std::vector<Node *> outs = dst.outputs_;
  outs.reserve(outs.size() + src.outputs_.size());
  for (Node *n : src.outputs_) {
    auto it = map.find(n);
    if (it == map.end())
      raise("clone: output '{}' is not defined in graph '{}'", n->str(),
            src.name());
    outs.push_back(it->second);
  }
  dst.setOutputList(std::move(outs));
  dst.ns_ = src.ns_;
  dst.name_ = src.name_;
  dst.qualname_ = src.qualname_;
}

std::unique_ptr<TracedModule> TracedModule::cloneImpl() const {
  auto c = std::make_unique<TracedModule>(typeName().str(), isTop_);
  cloneAttrsInto(*c);
  for (const auto &s : sigs_) {
    InternalGraph &g = c->addGraph(s.argDef, s.graph->name(), s.graph->qualname());
    cloneGraphInto(*s.graph, g, nullptr);
    c->setOutDef(s.argDef, s.outDef);
  }
  c->nextNodeId_ = nextNodeId_;
  c->nextExprId_ = nextExprId_;
  return c;
}

std::unique_ptr<TracedModule> TracedModule::cloneTraced() const {
  auto c = cloneImpl();
  c->fixClonedRefs();
  return c;
}

void TracedModule::fixClonedRefs() { updateRefs(); }

void TracedModule::restoreFrom(TracedModule &snapshot) {
  if (&snapshot == this)
    return;
  adoptAttrsFrom(snapshot);
  isTop_ = snapshot.isTop_;
  sigs_ = std::move(snapshot.sigs_);
  sigIndex_ = std::move(snapshot.sigIndex_);
  snapshot.sigs_.clear();
  snapshot.sigIndex_.clear();
  nextNodeId_ = snapshot.nextNodeId_;
  nextExprId_ = snapshot.nextExprId_;
  for (auto &s : sigs_)
    s.graph->setOwnerInternal(this);
  // Module nodes of the moved graphs still name `snapshot` (their `self`);
  // updateRefs re-derives every module node's owner from the tree.
  for (auto &s : sigs_)
    for (Node *n : s.graph->inputs())
      if (auto *mn = llvm::dyn_cast<ModuleNode>(n); mn && mn->owner() == &snapshot)
        mn->setOwner(this);
  updateRefs();
}

//===----------------------------------------------------------------------===//
// Flatten
//===----------------------------------------------------------------------===//

namespace {
/// Inlines calls of traced submodules into one top graph.
class Inliner {
public:
  /// With `prune` false every expr is copied (the plain algorithm, for
  /// tests; see deadExprs()).
  Inliner(TracedModule &root, InternalGraph &top, bool prune)
      : root_(root), top_(top), prune_(prune) {}

  /// The callee graph when `e` is a call to inline: a module call whose
  /// module node comes from a GetAttr and whose owner is a TracedModule
  /// with a graph for the call's signature.
  static InternalGraph *inlinable(Expr *e) {
    auto *cm = llvm::dyn_cast<CallMethod>(e);
    if (!cm || !cm->isModuleCall())
      return nullptr;
    ModuleNode *mn = cm->moduleNode();
    if (!mn || !llvm::isa<GetAttr>(mn->expr()))
      return nullptr;
    return cm->calleeGraph();
  }

  /// Returns, per output of `call`, the node now carrying its value (a
  /// nested inlining may replace a node the caller mapped to: the caller
  /// re-maps with this).
  llvm::SmallVector<Node *, 2> inlineCall(CallMethod *call, InternalGraph &sub) {
    if (sub.inputs().size() != call->numInputs())
      raiseAt(Location::atExpr(call->id()),
              "flatten: call passes {} values but graph '{}' takes {}",
              call->numInputs(), sub.name(), sub.inputs().size());
    if (sub.outputs().size() != call->numOutputs())
      raiseAt(Location::atExpr(call->id()),
              "flatten: call has {} outputs but graph '{}' returns {}",
              call->numOutputs(), sub.name(), sub.outputs().size());
    std::string prefix = call->input(0)->name().str();
    // "<call>_<name>" of an inlined node, built and made unique in stack
    // buffers; valid until the next call.
    llvm::SmallString<64> nameBuf, uniqueBuf;
    auto inlinedName = [&](const Node *o) {
      nameBuf.assign(prefix.begin(), prefix.end());
      nameBuf.push_back('_');
      nameBuf.append(o->name().begin(), o->name().end());
      return top_.ns().createUniqueName(nameBuf, uniqueBuf);
    };
    llvm::DenseMap<const Node *, Node *> vmap;
    // Every input and (about) one output per expr: sized once, not grown.
    vmap.reserve(sub.inputs().size() + sub.size() + sub.size() / 4);
    for (size_t i = 0; i < sub.inputs().size(); ++i)
      vmap[sub.input(i)] = call->input(i);
    // Sub-graph outputs: pass-through inputs are rewired now; the others
    // become the call's output nodes, adopted by their new producers.
    llvm::DenseMap<const Node *, size_t> adopt;
    for (size_t k = 0; k < sub.outputs().size(); ++k) {
      Node *so = sub.output(k);
      Node *co = call->output(k);
      Node *target = nullptr;
      if (!so->expr()->inBody())
        target = vmap.lookup(so);
      else if (adopt.count(so))
        target = call->output(adopt[so]);
      if (target) {
        redirect(co, target);
        continue;
      }
      adopt[so] = k;
      if (llvm::isa<TensorNode>(co))
        co->setQualname(so->qualname());
    }
    llvm::ArrayRef<const Expr *> dead = deadExprs(sub);
    size_t nextDead = 0;
    detail::forEachCopied(sub, vmap, [&](Expr *e) {
      if (nextDead < dead.size() && dead[nextDead] == e) {
        ++nextDead;
        // Dead in every inlined copy: compile would delete it. Its output
        // names are taken all the same, so that the names of what stays
        // are the ones a full inlining gives.
        for (Node *o : e->outputs())
          inlinedName(o);
        return;
      }
      auto ne = cloneExprShallow(*e, root_.nextExprId());
      for (size_t i = 0; i < e->numInputs(); ++i) {
        Node *m = vmap.lookup(e->input(i));
        if (!m)
          raiseAt(Location::atExpr(e->id()),
                  "flatten: input '{}' is not defined in graph '{}'",
                  e->input(i)->str(), sub.name());
        ne->addInput(m);
      }
      Expr *raw = ne.get();
      for (Node *o : e->outputs()) {
        auto it = adopt.find(o);
        Node *n;
        if (it != adopt.end()) {
          // Move the call's output node to its new producer; the call keeps
          // an unused placeholder until it is erased.
          std::unique_ptr<Node> owned = call->swapOutput(
              it->second, cloneNodeShallow(*call->output(it->second), -1));
          n = raw->addOutput(std::move(owned));
        } else {
          n = raw->addOutput(cloneNodeShallow(*o, root_.nextNodeId(), inlinedName(o)));
        }
        vmap[o] = n;
      }
      top_.insertExpr(std::move(ne), call);
      if (InternalGraph *inner = inlinable(raw)) {
        // `raw` goes away; its outputs may be replaced (pass-through
        // outputs of the nested graph): map e's outputs to the survivors.
        auto res = inlineCall(llvm::cast<CallMethod>(raw), *inner);
        for (size_t j = 0; j < e->numOutputs(); ++j)
          vmap[e->output(j)] = res[j];
      }
    });
    llvm::SmallVector<Node *, 2> result;
    for (Node *so : sub.outputs())
      result.push_back(vmap.lookup(so));
    call->dropAllInputs();
    top_.removeExpr(call).reset();
    return result;
  }

private:
  /// The body exprs of `sub` that no inlined copy needs, in body order:
  /// those no graph output and no disable_remove expr depends on, GetAttrs
  /// and module calls aside. They are dead wherever `sub` is inlined
  /// (compile, which flatten ends with, would delete each copy), so they
  /// are not copied: creating and then deleting them was most of
  /// flattening a graph with dead code. GetAttrs stay because the getattr
  /// merge keeps the first GetAttr of a path even when unused, and module
  /// calls because inlining one names the nodes of its callee. Nothing else
  /// of a copy depends on its dead exprs: ids are renumbered after flatten,
  /// use lists keep their order, and the dead nodes' names are taken all
  /// the same.
  ///
  /// Found from the graph's unused list (a dead expr's users are all dead,
  /// so the dead exprs are what repeatedly taking unused ones gives, as in
  /// compile), counting down the uses of each producer met: the cost is
  /// the dead exprs and their producers, nothing for a graph without dead
  /// code. Computed once per graph. (The array stays valid while nested
  /// inlinings add entries: a growing map moves the vectors, whose
  /// buffers stay where they are.)
  llvm::ArrayRef<const Expr *> deadExprs(const InternalGraph &sub) {
    auto [it, inserted] = dead_.try_emplace(&sub);
    std::vector<const Expr *> &dead = it->second;
    if (!inserted || !prune_)
      return dead;
    auto kept = [](const Expr *e) {
      if (e->removeDisabled() || llvm::isa<GetAttr>(e))
        return true;
      auto *cm = llvm::dyn_cast<CallMethod>(e);
      return cm && cm->isModuleCall();
    };
    std::vector<const Expr *> work;
    for (const Expr *e : sub.unusedExprs())
      if (!kept(e))
        work.push_back(e);
    // Uses of a producer's outputs not yet known to be dead; a graph
    // output never goes.
    constexpr uint32_t Forever = ~uint32_t(0);
    llvm::DenseMap<const Expr *, uint32_t> pending;
    while (!work.empty()) {
      const Expr *e = work.back();
      work.pop_back();
      dead.push_back(e);
      for (size_t i = 0; i < e->numInputs(); ++i) {
        const Expr *p = e->input(i)->expr();
        if (!p->inBody() || kept(p))
          continue;
        auto [pit, first] = pending.try_emplace(p, 0);
        uint32_t &left = pit->second;
        if (first)
          for (const Node *o : p->outputs())
            left = o->graphOutputRefs() || left == Forever
                       ? Forever
                       : left + uint32_t(o->numUsers());
        if (left != Forever && --left == 0)
          work.push_back(p);
      }
    }
    std::sort(dead.begin(), dead.end(), [](const Expr *a, const Expr *b) {
      return a->orderKey() < b->orderKey();
    });
    return dead;
  }

  /// Moves every use of `from` (and graph outputs) to `to`.
  void redirect(Node *from, Node *to) {
    std::vector<Use *> uses;
    for (Use *u = from->firstUse(); u; u = u->nextUse())
      uses.push_back(u);
    for (Use *u : uses)
      u->user()->replaceUse(u, to);
    std::vector<Node *> outs(top_.outputs().begin(), top_.outputs().end());
    bool changed = false;
    for (Node *&o : outs)
      if (o == from) {
        o = to;
        changed = true;
      }
    if (changed)
      top_.setOutputsInternal(std::move(outs));
  }

  TracedModule &root_;
  InternalGraph &top_;
  bool prune_;
  llvm::DenseMap<const InternalGraph *, std::vector<const Expr *>> dead_;
};
} // namespace

/// Inlines every call of `top` (a graph of `root`) to a traced sub-module,
/// nested calls included, then removes what became dead.
static void inlineAllCalls(TracedModule &root, InternalGraph &top,
                           bool prune = true) {
  Inliner inl(root, top, prune);
  std::vector<Expr *> calls;
  for (Expr *e : top)
    if (Inliner::inlinable(e))
      calls.push_back(e);
  for (Expr *e : calls)
    inl.inlineCall(llvm::cast<CallMethod>(e), *Inliner::inlinable(e));
  top.compile();
}

std::unique_ptr<TracedModule> TracedModule::flattenImpl(bool prune) const {
  // The copy's module nodes still name this module tree until
  // fixClonedRefs: the calls are inlined from the original sub-graphs
  // (read only, equal to the copies), and the refs are fixed once, after.
  auto nm = cloneImpl();
  InternalGraph &top = nm->graph();
  inlineAllCalls(*nm, top, prune);
  // Inlining inserted in the middle of the body, which drops the index
  // that whole-body walks prefetch through: the refs walk gets it back.
  top.rebuildBodyIndex();
  nm->fixClonedRefs();
  top.resetIds();
  return nm;
}

std::unique_ptr<TracedModule> TracedModule::flatten() const {
  return flattenImpl(true);
}

std::unique_ptr<TracedModule> TracedModule::flattenCopyingDeadExprsForTesting() const {
  return flattenImpl(false);
}

bool TracedModule::flattenInPlace() {
  bool any = false;
  InternalGraph &old = graph();
  for (Expr *e : old)
    any |= Inliner::inlinable(e) != nullptr;
  if (!any)
    return false;
  // Inline into a copy of the top graph only: the sub-modules' graphs are
  // read, never changed, so unlike flatten() nothing else is copied (that
  // was a clone of the whole hierarchy, most of it destroyed again). A
  // failure part-way leaves the module as it was.
  auto fresh = std::make_unique<InternalGraph>(old.name(), old.qualname());
  fresh->setOwnerInternal(this);
  auto ids = totalIds();
  try {
    cloneGraphInto(old, *fresh, nullptr);
    inlineAllCalls(*this, *fresh);
  } catch (...) {
    setTotalIds(ids.first, ids.second);
    throw;
  }
  sigs_.front().graph = std::move(fresh);
  // Renumbering walks the body in order, which re-creates the body index
  // that inlining in the middle of it dropped, before the refs walk. (The
  // module nodes of the flat graph are the tree's already: renumbering
  // may follow calls before the refs are fixed.)
  graph().resetIds();
  updateRefs();
  return true;
}

std::string TracedModule::str() const {
  std::string out;
  bool first = true;
  const_cast<TracedModule *>(this)->namedModules(
      [&](const std::string &, Module &m) {
        auto *t = llvm::dyn_cast<TracedModule>(&m);
        if (!t)
          return;
        for (const auto &s : t->sigs_) {
          if (!first)
            out += "\n";
          out += s.graph->str();
          first = false;
        }
      });
  return out;
}

} // namespace tmg
