//===- Expr.cpp - Nodes, uses and exprs -----------------------------------===//
#include "tm/ir/Expr.h"

#include <algorithm>
#include <limits>

#include "Pool.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/InternalGraph.h"
#include "tm/ir/Module.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// Node
//===----------------------------------------------------------------------===//

NodeFormat NodeFormat::parse(llvm::StringRef spec) {
  NodeFormat f;
  if (spec.empty())
    return f;
  if (spec != "i" && spec != "p" && spec != "ip" && spec != "pi")
    raise("unknown node format spec '{}' (expected '', 'i', 'p' or 'ip')",
          spec.str());
  f.withId = spec.contains('i');
  f.withGraph = spec.contains('p');
  return f;
}

void *Node::operator new(size_t size) { return detail::poolAllocate(size); }
void Node::operator delete(void *p, size_t size) noexcept { detail::poolDeallocate(p, size); }
void *Expr::operator new(size_t size) { return detail::poolAllocate(size); }
void Expr::operator delete(void *p, size_t size) noexcept { detail::poolDeallocate(p, size); }

Node::~Node() = default;

InternalGraph *Node::graph() const { return expr_ ? expr_->graph() : nullptr; }

void Node::setQualname(llvm::StringRef q) {
  setNamesInternal(name(), q);
  if (InternalGraph *g = graph())
    g->touch();
}

void GetAttr::setAttrName(std::string a) {
  attr_ = std::move(a);
  if (InternalGraph *g = graph())
    g->touch();
}

void Node::setName(llvm::StringRef newName) {
  InternalGraph *g = graph();
  if (!g)
    raise("node '{}' is not in a graph; it cannot be renamed", name());
  if (g->ns().isUsed(newName))
    raise("The name({}) is already in use. Please try a different one again.",
          newName.str());
  setNameInternal(g->ns().createUniqueName(newName));
}

std::string Node::str(NodeFormat f) const {
  if (f.withId || f.withGraph) {
    std::string n = name().str();
    if (f.withGraph) {
      InternalGraph *g = graph();
      n = (g ? g->name() : std::string()) + "_" + n;
    }
    if (f.withId)
      n = "%" + std::to_string(id_) + "_" + n;
    return n;
  }
  return nameSize_ == 0 ? "%" + std::to_string(id_) : name().str();
}

std::vector<Expr *> Node::userList() const {
  std::vector<Expr *> out;
  out.reserve(numUses_);
  for (Expr *e : users())
    out.push_back(e);
  return out;
}

void Node::linkUse(Use *u) {
  if (numUses_ == UINT32_MAX)
    raise("node '{}' has too many uses", name());
  u->node_ = this;
  u->prev_ = lastUse_;
  u->next_ = nullptr;
  if (lastUse_)
    lastUse_->next_ = u;
  else
    firstUse_ = u;
  lastUse_ = u;
  if (numUses_++ == 0 && outputRefs_ == 0 && expr_)
    expr_->noteOutputNeeded(true);
}

void Node::reorderUsesInternal(llvm::ArrayRef<Use *> order) {
  if (order.size() != numUses_)
    raise("node '{}': a reordering lists {} of its {} uses", name(), order.size(), numUses_);
  Use *prev = nullptr;
  for (Use *u : order) {
    if (u->node_ != this)
      raise("node '{}': a reordering lists a use of another node", name());
    u->prev_ = prev;
    if (prev)
      prev->next_ = u;
    else
      firstUse_ = u;
    prev = u;
  }
  if (prev)
    prev->next_ = nullptr;
  lastUse_ = prev;
}

void Node::unlinkUse(Use *u) {
  if (u->prev_)
    u->prev_->next_ = u->next_;
  else
    firstUse_ = u->next_;
  if (u->next_)
    u->next_->prev_ = u->prev_;
  else
    lastUse_ = u->prev_;
  u->prev_ = u->next_ = nullptr;
  u->node_ = nullptr;
  if (--numUses_ == 0 && outputRefs_ == 0 && expr_)
    expr_->noteOutputNeeded(false);
}

void Node::retainAsOutput() {
  if (outputRefs_++ == 0 && numUses_ == 0 && expr_)
    expr_->noteOutputNeeded(true);
}

void Node::releaseAsOutput() {
  if (--outputRefs_ == 0 && numUses_ == 0 && expr_)
    expr_->noteOutputNeeded(false);
}

ModuleNode::ModuleNode(Expr *e, int64_t id)
    : Node(Kind::Module, e, id), moduleType_(&moduleBaseType()) {}

//===----------------------------------------------------------------------===//
// Expr: uses
//===----------------------------------------------------------------------===//

Expr::~Expr() {
  dropAllInputs();
  for (Node *o : outputs_)
    delete o;
}

llvm::StringRef Expr::kindName() const {
  switch (kind_) {
  case Kind::Input: return "Input";
  case Kind::GetAttr: return "GetAttr";
  case Kind::CallMethod: return "CallMethod";
  case Kind::CallFunction: return "CallFunction";
  case Kind::Constant: return "Constant";
  case Kind::Apply: return "Apply";
  }
  return "?";
}

llvm::SmallVector<Node *, 4> Expr::inputs() const {
  llvm::SmallVector<Node *, 4> out;
  for (const Use &u : uses_)
    out.push_back(u.get());
  return out;
}

// After the use array moved from [oldBegin, oldEnd) to uses_.data(), fix
// pointers so every node's use list threads through the new addresses and
// keeps its order.
void Expr::relocateUses(Use *oldBegin, Use *oldEnd) {
  Use *nb = uses_.data();
  auto remap = [&](Use *p) -> Use * {
    if (p >= oldBegin && p < oldEnd)
      return nb + (p - oldBegin);
    return p;
  };
  size_t n = uses_.size();
  for (size_t i = 0; i < n; ++i) {
    Use &u = nb[i];
    u.prev_ = remap(u.prev_);
    u.next_ = remap(u.next_);
  }
  for (size_t i = 0; i < n; ++i) {
    Use &u = nb[i];
    if (u.prev_)
      u.prev_->next_ = &u;
    else
      u.node_->firstUse_ = &u;
    if (u.next_)
      u.next_->prev_ = &u;
    else
      u.node_->lastUse_ = &u;
  }
}

void Expr::addInput(Node *n) {
  if (graph_)
    graph_->touch();
  if (!n)
    raise("expr %{}: input node is null", id_);
  if (uses_.size() == uses_.capacity()) {
    // Grow by hand so existing uses keep their place in their nodes' lists;
    // the old addresses are only compared, never dereferenced.
    Use *ob = uses_.data(), *oe = ob + uses_.size();
    llvm::SmallVector<Use, 3> grown;
    grown.reserve(uses_.size() * 2 + 4);
    grown.append(uses_.begin(), uses_.end());
    uses_ = std::move(grown);
    relocateUses(ob, oe);
  }
  uses_.emplace_back();
  Use &u = uses_.back();
  u.user_ = this;
  n->linkUse(&u);
}

void Expr::setInput(size_t i, Node *n) {
  if (graph_)
    graph_->touch();
  if (i >= uses_.size())
    raise("expr %{}: input index {} out of range ({} inputs)", id_, i,
          uses_.size());
  if (!n)
    raise("expr %{}: input node is null", id_);
  Use &u = uses_[i];
  u.node_->unlinkUse(&u);
  n->linkUse(&u);
}

void Expr::replaceUse(Use *u, Node *n) {
  if (graph_)
    graph_->touch();
  if (u->user_ != this)
    raise("expr %{}: use does not belong to this expr", id_);
  if (u->node_)
    u->node_->unlinkUse(u);
  n->linkUse(u);
}

void Expr::forgetInputsInternal() {
  for (Use &u : uses_)
    u.node_ = nullptr;
  uses_.clear();
}

void Expr::dropAllInputs() {
  if (graph_)
    graph_->touch();
  for (Use &u : uses_)
    if (u.node_)
      u.node_->unlinkUse(&u);
  uses_.clear();
}

void Expr::setInputs(llvm::ArrayRef<Node *> nodes) {
  llvm::SmallVector<Node *, 4> copy(nodes.begin(), nodes.end());
  dropAllInputs();
  uses_.reserve(copy.size());
  for (Node *n : copy)
    addInput(n);
}

Node *Expr::addOutput(std::unique_ptr<Node> n) {
  if (outputs_.size() >= std::numeric_limits<uint16_t>::max())
    raise("expr %{}: more than {} outputs", id_, std::numeric_limits<uint16_t>::max() - 1);
  if (graph_)
    graph_->touch();
  n->setExprInternal(this);
  outputs_.push_back(n.release());
  if (outputs_.back()->isNeeded())
    noteOutputNeeded(true);
  return outputs_.back();
}

std::unique_ptr<Node> Expr::releaseOutput(size_t i) {
  if (graph_)
    graph_->touch();
  Node *n = outputs_[i];
  outputs_.erase(outputs_.begin() + i);
  // Unowned until re-homed: its use-list edits must not count here.
  n->setExprInternal(nullptr);
  if (n->isNeeded())
    noteOutputNeeded(false);
  return std::unique_ptr<Node>(n);
}

std::unique_ptr<Node> Expr::swapOutput(size_t i, std::unique_ptr<Node> n) {
  if (graph_)
    graph_->touch();
  std::unique_ptr<Node> old(outputs_[i]);
  n->setExprInternal(this);
  outputs_[i] = n.release();
  old->setExprInternal(nullptr);
  // Gain before loss: the count must not pass through zero needlessly.
  if (outputs_[i]->isNeeded())
    noteOutputNeeded(true);
  if (old->isNeeded())
    noteOutputNeeded(false);
  return old;
}

void Expr::removeFromUnusedList() { graph_->removeUnused(this); }

void Expr::addToUnusedList() { graph_->addUnused(this); }

void Expr::setArgs(TreeDef argDef, llvm::ArrayRef<Node *> nodes) {
  if (argDef.numLeaves() != nodes.size())
    raise("expr %{}: the argument structure {} has {} node leaves but {} "
          "nodes were given",
          id_, argDef.str(), argDef.numLeaves(), nodes.size());
  setInputs(nodes);
  argDef_ = std::move(argDef);
}

bool Expr::isBefore(const Expr *o) const {
  if (graph_ != o->graph_)
    raise("expr %{} and expr %{} are not in the same graph", id_, o->id_);
  if (!inBody_)
    return o->inBody_;
  if (!o->inBody_)
    return false;
  return order_ < o->order_;
}

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

Node *ArgRef::node() const {
  if (!def.isLeaf() || !expr)
    return nullptr;
  return expr->input(firstLeaf);
}

std::string ArgRef::str() const {
  std::string out;
  size_t next = firstLeaf;
  def.print(
      out, [this](size_t i) { return expr->input(i)->str(); }, &next, true);
  return out;
}

/// Positional tuple and kwargs dict of an expr's arg TreeDef.
/// The (positional, keyword) halves of an argument TreeDef, without copies.
static bool splitArgDef(const std::optional<TreeDef> &d, const TreeDef *&pos,
                        const TreeDef *&kw) {
  if (!d || d->kind() != TreeDef::Kind::Tuple || d->numChildren() != 2)
    return false;
  pos = &d->child(0);
  kw = &d->child(1);
  return true;
}

size_t Expr::numArgs() const {
  const TreeDef *pos, *kw;
  if (!splitArgDef(argDef_, pos, kw))
    return numInputs();
  return pos->numChildren();
}

ArgRef Expr::arg(size_t i) const {
  const TreeDef *pos, *kw;
  if (!splitArgDef(argDef_, pos, kw)) {
    if (i >= numInputs())
      raise("expr %{}: argument {} out of range", id_, i);
    return ArgRef{this, TreeDef(), i};
  }
  if (i >= pos->numChildren()) {
    // Positional parameter i passed by keyword, or left to its default.
    const OpSchema *s = nullptr;
    if (auto *cf = llvm::dyn_cast<CallFunction>(this))
      s = &cf->func();
    else if (auto *cm = llvm::dyn_cast<CallMethod>(this))
      s = cm->methodSchema();
    if (s && i < s->positionalParams().size())
      if (std::optional<ArgRef> a = namedArg(s->params()[s->positionalParams()[i]].name))
        return *a;
    raise("expr %{}: argument {} out of range ({} positional arguments)", id_,
          i, pos->numChildren());
  }
  size_t leaf = 0;
  for (size_t j = 0; j < i; ++j)
    leaf += pos->child(j).numLeaves();
  return ArgRef{this, pos->child(i), leaf};
}

std::optional<ArgRef> Expr::kwarg(llvm::StringRef name) const {
  const TreeDef *pos, *kw;
  if (!splitArgDef(argDef_, pos, kw) || kw->numChildren() == 0)
    return std::nullopt;
  int64_t k = kw->findStringKey(name);
  if (k < 0)
    return std::nullopt;
  size_t leaf = pos->numLeaves();
  for (int64_t j = 0; j < k; ++j)
    leaf += kw->child(j).numLeaves();
  return ArgRef{this, kw->child(k), leaf};
}

std::vector<std::string> Expr::kwargNames() const {
  const TreeDef *pos, *kw;
  std::vector<std::string> out;
  if (!splitArgDef(argDef_, pos, kw))
    return out;
  for (size_t i = 0; i < kw->numChildren(); ++i)
    out.push_back(kw->key(i).str());
  return out;
}

std::optional<ArgRef> Expr::namedArg(llvm::StringRef name) const {
  const OpSchema *s = nullptr;
  if (auto *cf = llvm::dyn_cast<CallFunction>(this))
    s = &cf->func();
  else if (auto *cm = llvm::dyn_cast<CallMethod>(this))
    s = cm->methodSchema();
  const TreeDef *pos, *kw;
  if (!splitArgDef(argDef_, pos, kw)) {
    // No argument TreeDef: the inputs are the positional arguments.
    int64_t idx = s ? s->paramIndex(name) : -1;
    if (idx < 0 || s->params()[idx].keywordOnly || s->params()[idx].variadic ||
        size_t(idx) >= numInputs())
      return std::nullopt;
    return ArgRef{this, TreeDef(), size_t(idx)};
  }
  // Shape inference asks for arguments by name on every created expr: one
  // split of the TreeDef, the keyword dict searched only when non-empty.
  if (kw->numChildren() != 0)
    if (int64_t k = kw->findStringKey(name); k >= 0) {
      size_t leaf = pos->numLeaves();
      for (int64_t j = 0; j < k; ++j)
        leaf += kw->child(j).numLeaves();
      return ArgRef{this, kw->child(k), leaf};
    }
  if (!s)
    return std::nullopt;
  int64_t idx = s->paramIndex(name);
  if (idx < 0 || s->params()[idx].variadic)
    return std::nullopt;
  const OpParam &p = s->params()[idx];
  if (p.keywordOnly || size_t(idx) >= pos->numChildren()) {
    // Not passed: the default, as `inspect.getcallargs` binds it.
    if (p.hasDefault)
      return ArgRef{this, p.defaultValue, pos->numLeaves()};
    return std::nullopt;
  }
  size_t leaf = 0;
  for (int64_t j = 0; j < idx; ++j)
    leaf += pos->child(j).numLeaves();
  return ArgRef{this, pos->child(idx), leaf};
}

//===----------------------------------------------------------------------===//
// Printing (the reference's __repr__ of each expr)
//===----------------------------------------------------------------------===//

std::string Expr::str(NodeFormat f) const {
  std::string out;
  print(out, f);
  return out;
}

void printNodeRef(std::string &out, const Node &n, NodeFormat f) {
  if (f.withId || f.withGraph) {
    if (f.withId) {
      out += '%';
      appendInt(out, n.id());
      out += '_';
    }
    if (f.withGraph) {
      if (InternalGraph *g = n.graph())
        out += g->name();
      out += '_';
    }
    out += n.name();
    return;
  }
  if (n.name().empty()) {
    out += '%';
    appendInt(out, n.id());
  } else {
    out += n.name();
  }
}

void Expr::print(std::string &out, NodeFormat f) const {
  out += '%';
  appendInt(out, id_);
  out += ":\t";
  printBody(out, f);
}

void Expr::printOutputs(std::string &out, NodeFormat f) const {
  if (outputs_.empty())
    return;
  if (outDef_) {
    // Python: `str(outputs) + " = " if outputs else ""`; an empty container
    // is falsy.
    if (outDef_->isContainer() && outDef_->numChildren() == 0)
      return;
    size_t next = 0;
    outDef_->printTo(
        out,
        [&](std::string &o, size_t i) { printNodeRef(o, *outputs_[i], f); },
        &next, true);
  } else {
    out += '[';
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (i)
        out += ", ";
      printNodeRef(out, *outputs_[i], f);
    }
    out += ']';
  }
  out += " = ";
}

void Expr::printCallArgs(std::string &out, NodeFormat f, bool skipFirst) const {
  auto leaf = [&](std::string &o, size_t i) { printNodeRef(o, *input(i), f); };
  if (argDef_ && argDef_->kind() == TreeDef::Kind::Tuple &&
      argDef_->numChildren() == 2) {
    const TreeDef &pos = argDef_->child(0), &kw = argDef_->child(1);
    size_t next = 0;
    bool first = true;
    for (size_t i = 0; i < pos.numChildren(); ++i) {
      if (i == 0 && skipFirst) {
        // The receiver is printed before the method name; skip its leaves.
        next += pos.child(0).numLeaves();
        continue;
      }
      if (!first)
        out += ", ";
      pos.child(i).printTo(out, leaf, &next, true);
      first = false;
    }
    out += ", ";
    for (size_t i = 0; i < kw.numChildren(); ++i) {
      if (i)
        out += ", ";
      kw.key(i).appendStr(out);
      out += '=';
      kw.child(i).printTo(out, leaf, &next, true);
    }
  } else {
    for (size_t i = skipFirst ? 1 : 0; i < numInputs(); ++i) {
      if (i > (skipFirst ? 1u : 0u))
        out += ", ";
      printNodeRef(out, *input(i), f);
    }
    out += ", ";
  }
}

void Input::printBody(std::string &out, NodeFormat f) const {
  printNodeRef(out, *output(0), f);
  out += " = Input()";
}

void GetAttr::printBody(std::string &out, NodeFormat f) const {
  printNodeRef(out, *output(0), f);
  out += " = getattr(";
  printNodeRef(out, *input(0), f);
  out += ", \"";
  out += attr_;
  out += "\") -> (";
  if (auto *mn = llvm::dyn_cast<ModuleNode>(output(0)))
    out += mn->moduleType().name;
  else
    out += "Tensor";
  out += ')';
}

llvm::StringRef CallMethod::method() const {
  return opSchema() ? opSchema()->name() : llvm::StringRef("__call__");
}

ModuleNode *CallMethod::moduleNode() const {
  if (!isModuleCall() || numInputs() == 0)
    return nullptr;
  return llvm::dyn_cast<ModuleNode>(input(0));
}

InternalGraph *CallMethod::calleeGraph() const {
  ModuleNode *mn = moduleNode();
  if (!mn || !mn->owner() || !argDef())
    return nullptr;
  auto *tmod = llvm::dyn_cast<TracedModule>(mn->owner());
  if (!tmod)
    return nullptr;
  return tmod->graphFor(*argDef());
}

void CallMethod::printBody(std::string &out, NodeFormat f) const {
  printOutputs(out, f);
  if (numInputs() > 0 && argDef()) {
    // args[0] is the receiver: a node leaf (possibly inside a structure).
    const TreeDef &pos = argDef()->child(0);
    size_t next = 0;
    if (pos.numChildren() > 0)
      pos.child(0).printTo(
          out, [&](std::string &o, size_t i) { printNodeRef(o, *input(i), f); },
          &next, true);
  } else if (numInputs() > 0) {
    printNodeRef(out, *input(0), f);
  }
  if (!isModuleCall()) {
    out += '.';
    out += method();
  }
  out += '(';
  printCallArgs(out, f, /*skipFirst=*/true);
  out += ')';
}

void CallFunction::printBody(std::string &out, NodeFormat f) const {
  printOutputs(out, f);
  out += func().printName();
  out += '(';
  printCallArgs(out, f, /*skipFirst=*/false);
  out += ')';
}

Constant::Constant(int64_t id, Tensor t, std::string name)
    : Expr(Kind::Constant, id), name_(std::move(name)), tensor_(std::move(t)) {}
Constant::Constant(int64_t id, std::unique_ptr<Module> m, std::string name)
    : Expr(Kind::Constant, id), name_(std::move(name)), module_(std::move(m)) {
  if (!module_)
    raise("Constant: module is null");
}
Constant::~Constant() = default;

void Constant::printBody(std::string &out, NodeFormat f) const {
  printNodeRef(out, *output(0), f);
  out += " = Constant(";
  out += name_;
  out += llvm::isa<TensorNode>(output(0)) ? ") -> (Tensor)" : ") -> (Module)";
}

void Apply::printBody(std::string &out, NodeFormat f) const {
  for (size_t i = 0; i < numOutputs(); ++i) {
    if (i)
      out += ", ";
    printNodeRef(out, *output(i), f);
  }
  out += " = ";
  out += opdef().name();
  out += '(';
  for (size_t i = 0; i < numInputs(); ++i) {
    if (i)
      out += ", ";
    printNodeRef(out, *input(i), f);
  }
  out += ')';
}

bool isCallModule(const Expr *e) {
  auto *cm = llvm::dyn_cast<CallMethod>(e);
  return cm && cm->isModuleCall() && cm->numInputs() > 0 &&
         llvm::isa<ModuleNode>(cm->input(0));
}

bool isCallTensorMethod(const Expr *e, llvm::StringRef method) {
  auto *cm = llvm::dyn_cast<CallMethod>(e);
  if (!cm || cm->isModuleCall())
    return false;
  return method.empty() || cm->method() == method;
}

bool isCallFunction(const Expr *e, const OpSchema *fn) {
  auto *cf = llvm::dyn_cast<CallFunction>(e);
  return cf && (!fn || &cf->func() == fn);
}

} // namespace tmg
