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
    case ModuleAttr::Kind::Alias: t->registerModuleAlias(n, a->target); break; // after its target
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
    for (Expr *e : g.moduleRefExprs()) {
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

void cloneGraphInputsInto(const InternalGraph &src, InternalGraph &dst,
                          llvm::DenseMap<const Node *, Node *> &map) {
  if (!dst.empty() || !dst.inputs_.empty())
    raise("cloneGraphInto: destination graph '{}' is not empty", dst.name());
  for (const auto &in : src.inputExprs_) {
    auto c = cloneExprShallow(*in, in->id());
    c->setGraphInternal(&dst);
    for (Node *o : in->outputs())
      map[o] = c->addOutput(cloneNodeShallow(*o, o->id()));
    dst.inputExprs_.push_back(std::move(c));
  }
  for (Node *n : src.inputs_)
    dst.inputs_.push_back(map.lookup(n));
  dst.ns_ = src.ns_;
  dst.name_ = src.name_;
  dst.qualname_ = src.qualname_;
}

void cloneGraphInto(const InternalGraph &src, InternalGraph &dst,
                    llvm::DenseMap<const Node *, Node *> *nodeMapOut) {
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
  cloneGraphInputsInto(src, dst, map);
  auto copyOne = [&](Expr *e) {
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
  };
  for (Expr *e : src)
    copyOne(e);
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
