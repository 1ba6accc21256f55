//===- Utils.cpp - Helpers shared by the optimisation passes --------------===//
#include "Utils.h"

namespace tmg::xf {

const Tensor *constantTensor(const Node *n) {
  if (!n || !llvm::isa<TensorNode>(n))
    return nullptr;
  if (auto *c = llvm::dyn_cast_or_null<Constant>(n->expr()))
    if (c->isTensor() && c->tensor().defined())
      return &c->tensor();
  return nullptr;
}

const Tensor *staticTensor(const Node *n) {
  if (const Tensor *t = constantTensor(n))
    return t;
  if (!n || !llvm::isa<TensorNode>(n))
    return nullptr;
  auto *ga = llvm::dyn_cast_or_null<GetAttr>(n->expr());
  if (!ga || ga->numInputs() != 1)
    return nullptr;
  auto *base = llvm::dyn_cast<ModuleNode>(ga->input(0));
  if (!base || !base->owner())
    return nullptr;
  const Tensor *t = base->owner()->resolveTensor(ga->attrName());
  return t && t->defined() ? t : nullptr;
}

Constant *moveToConstant(InternalGraph &g, Node *n, Tensor t, llvm::StringRef constName) {
  Expr *producer = n->expr();
  Constant *c = withInsertionPoint(g, producer, [&] {
    return g.create<Constant>(t, constName.str());
  });
  size_t i = 0;
  while (producer->output(i) != n)
    ++i;
  std::unique_ptr<Node> owned = producer->releaseOutput(i);
  c->addOutput(std::move(owned));
  if (auto *tn = llvm::dyn_cast<TensorNode>(n)) {
    tn->setShape(Shape(t.shape().begin(), t.shape().end()));
    tn->setDType(t.dtype());
    tn->setHasDType(true);
  }
  g.touch();
  return c;
}

Node *newConstant(InternalGraph &g, Expr *before, Tensor t, llvm::StringRef name) {
  return withInsertionPoint(g, before, [&] {
    GraphBuilder b = GraphBuilder::into(g);
    g.setInsertionPoint(before);
    return b.constant(std::move(t), name);
  });
}

llvm::DenseSet<const Node *> outputSet(const InternalGraph &g) {
  llvm::DenseSet<const Node *> s;
  for (Node *o : g.outputs())
    s.insert(o);
  return s;
}

bool isDead(const Expr *e, const llvm::DenseSet<const Node *> &outs) {
  if (!e->inBody() || e->removeDisabled())
    return false;
  for (Node *o : e->outputs())
    if (o->hasUsers() || outs.count(o))
      return false;
  return true;
}

size_t eraseDeadFrom(InternalGraph &g, llvm::ArrayRef<Expr *> seeds) {
  auto outs = outputSet(g);
  size_t n = 0;
  std::vector<Expr *> work(seeds.begin(), seeds.end());
  llvm::DenseSet<const Expr *> erased;
  while (!work.empty()) {
    Expr *x = work.back();
    work.pop_back();
    if (!x || erased.count(x) || x->graph() != &g || !isDead(x, outs))
      continue;
    erased.insert(x);
    llvm::SmallVector<Expr *, 4> producers;
    for (Node *in : x->inputs())
      producers.push_back(in->expr());
    g.eraseExpr(x);
    ++n;
    for (Expr *p : producers)
      work.push_back(p);
  }
  return n;
}

bool replaceAll(InternalGraph &g, Node *old, Node *nw) {
  if (old == nw)
    return true;
  ReplaceReport r = g.replaceNode({{old, nw}});
  return r.complete();
}

std::vector<double> toDoubles(const Tensor &t) {
  std::vector<double> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i)
    v[size_t(i)] = t.at(i);
  return v;
}

Tensor fromDoubles(llvm::ArrayRef<int64_t> shape, const std::vector<double> &v) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  float *p = t.data<float>();
  for (size_t i = 0; i < v.size(); ++i)
    p[i] = float(v[i]);
  return t;
}

Module *calledModule(const Expr *e) {
  auto *cm = llvm::dyn_cast_or_null<CallMethod>(e);
  if (!cm || !cm->isModuleCall())
    return nullptr;
  auto *mn = cm->moduleNode();
  return mn ? mn->owner() : nullptr;
}

bool isExactly(const Module *m, const ModuleType &t) { return m && &m->type() == &t; }

} // namespace tmg::xf

namespace tmg::xf {

void replacePositional(Expr *e, size_t i, TreeDef slot, Node *node) {
  const TreeDef &d = *e->argDef();
  const TreeDef &pos = d.child(0), &kw = d.child(1);
  std::vector<TreeDef> children;
  std::vector<Node *> nodes;
  size_t leaf = 0;
  for (size_t k = 0; k < pos.numChildren(); ++k) {
    const TreeDef &c = pos.child(k);
    size_t nl = c.numLeaves();
    if (k == i) {
      children.push_back(std::move(slot));
      if (node)
        nodes.push_back(node);
    } else {
      children.push_back(c);
      for (size_t j = 0; j < nl; ++j)
        nodes.push_back(e->input(leaf + j));
    }
    leaf += nl;
  }
  std::vector<std::pair<Scalar, TreeDef>> kws;
  for (size_t k = 0; k < kw.numChildren(); ++k) {
    const TreeDef &c = kw.child(k);
    kws.emplace_back(kw.key(k), c);
    for (size_t j = 0; j < c.numLeaves(); ++j)
      nodes.push_back(e->input(leaf + j));
    leaf += c.numLeaves();
  }
  e->setArgs(makeArgDef(std::move(children), std::move(kws)), nodes);
}

void setPositionalArg(Expr *e, size_t i, Node *n) {
  replacePositional(e, i, TreeDef::leaf(), n);
}

std::vector<InternalGraph *> allGraphs(TracedModule &m) {
  std::vector<InternalGraph *> out;
  llvm::DenseSet<const InternalGraph *> seen;
  m.namedModules([&](const std::string &, Module &sub) {
    if (auto *tm = llvm::dyn_cast<TracedModule>(&sub))
      for (const auto &s : tm->signatures())
        if (s.graph && seen.insert(s.graph.get()).second)
          out.push_back(s.graph.get());
  });
  return out;
}

} // namespace tmg::xf
