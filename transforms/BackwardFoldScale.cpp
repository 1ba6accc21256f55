//===- BackwardFoldScale.cpp - Push `* c` back into convolutions ----------===//
//
// The reference's BackwardFoldScale, as an analysis plus a rewrite:
// walking the graph backwards, each `x * c` (c a literal number or a
// one-element Constant, after norm-elemwise) tries to move its scale k = c
// towards the producers of x:
//   conv (an exact Conv2d module called once in the hierarchy, or F.conv2d
//     with constant weight)          weight and bias multiplied by k (a conv
//                                    without bias needs nothing more: the
//                                    reference crashes there)
//   relu (function or module), max pooling    when k > 0
//   reshape/flatten/transpose/getitem/expand_dims (function or method),
//     average pooling, concat (every input), x + y (both branches),
//     x + c (c becomes c * k)                 pass k on
//   y * c2                                     absorbs: c2 becomes c2 * k
// Every value on the way must have exactly one use (the path), so no other
// consumer sees a scaled value; a DAG is walked without revisiting (the
// reference looped on DAGs). When every branch ends at a conv or an
// absorbing mul, the edits are applied and `x * c` is replaced by x;
// otherwise nothing changes. Each value belongs to the path of at most one
// source, so the pass is linear in the graph.
//
//===----------------------------------------------------------------------===//
#include "Elemwise.h"
#include "Passes.h"

#include <llvm/ADT/DenseMap.h>

namespace tmg {

namespace {

struct Edit {
  enum Kind : uint8_t { ScaleConv, ScaleConst } kind;
  Expr *expr;
  size_t arg = 0; ///< ScaleConst: the constant operand's argument index
  double k;
};

class Folder {
public:
  Folder(TracedModule &m, InternalGraph &g, PassContext &ctx) : g_(g), ctx_(ctx) {
    for (InternalGraph *h : xf::allGraphs(m))
      for (Expr *e : h->body())
        if (Module *mod = xf::calledModule(e))
          ++calls_[mod];
  }

  bool run() {
    std::vector<Expr *> body;
    for (Expr *e : g_.body())
      body.push_back(e);
    llvm::DenseSet<const Expr *> erased;
    bool changed = false;
    for (auto it = body.rbegin(); it != body.rend(); ++it) {
      Expr *e = *it;
      if (erased.count(e) || xf::arithOf(e) != xf::Arith::Mul)
        continue;
      xf::Operand a, b;
      size_t ia, ib;
      if (!xf::operandsOf(e, a, b, ia, ib) || !a.node || a.isConst())
        continue;
      auto k = b.scalar();
      if (!k || *k == 0 || !std::isfinite(*k))
        continue;
      std::vector<Edit> edits;
      if (!push(a.node, *k, edits))
        continue;
      for (const Edit &ed : edits)
        apply(ed);
      if (!xf::replaceAll(g_, e->output(0), a.node))
        continue;
      if (b.node)
        cleanup_.push_back(b.node->expr());
      g_.eraseExpr(e);
      erased.insert(e);
      ctx_.count("scales-folded");
      changed = true;
    }
    // Constants and weights the edits replaced (erasing them during the
    // walk would leave dangling entries in `body`).
    xf::eraseDeadFrom(g_, cleanup_);
    return changed;
  }

private:
  /// Plans scaling the value of `n` by k; false when some branch cannot.
  bool push(Node *n, double k, std::vector<Edit> &edits) {
    if (!llvm::isa<TensorNode>(n) || n->numUsers() != 1 || xf::outputSet(g_).count(n))
      return false;
    Expr *e = n->expr();
    if (!e || !e->inBody() || e->numOutputs() != 1)
      return false;
    if (Module *mod = xf::calledModule(e)) {
      if (xf::isExactly(mod, Conv2d::staticType()))
        return calls_[mod] == 1 && mod->tensor("weight") &&
               (edits.push_back({Edit::ScaleConv, e, 0, k}), true);
      if (xf::isExactly(mod, ReLU::staticType()) || xf::isExactly(mod, MaxPool2d::staticType()))
        return k > 0 && push(e->arg(1).node(), k, edits);
      if (xf::isExactly(mod, AvgPool2d::staticType()) ||
          xf::isExactly(mod, AdaptiveAvgPool2d::staticType()) ||
          xf::isExactly(mod, Flatten::staticType()) || xf::isExactly(mod, Identity::staticType()))
        return push(e->arg(1).node(), k, edits);
      return false;
    }
    xf::Arith ar = xf::arithOf(e);
    if (ar == xf::Arith::Add || ar == xf::Arith::Mul) {
      xf::Operand a, b;
      size_t ia, ib;
      if (!xf::operandsOf(e, a, b, ia, ib))
        return false;
      if (ar == xf::Arith::Mul) { // absorb into the constant
        if (a.isConst() == b.isConst())
          return false;
        const xf::Operand &c = a.isConst() ? a : b;
        if (!c.scalar())
          return false;
        edits.push_back({Edit::ScaleConst, e, a.isConst() ? ia : ib, k});
        return true;
      }
      if (a.isConst() && b.isConst())
        return false;
      if (a.isConst() || b.isConst()) {
        const xf::Operand &c = a.isConst() ? a : b;
        const xf::Operand &v = a.isConst() ? b : a;
        if (!c.scalar())
          return false;
        edits.push_back({Edit::ScaleConst, e, a.isConst() ? ia : ib, k});
        return push(v.node, k, edits);
      }
      return push(a.node, k, edits) && push(b.node, k, edits);
    }
    const OpSchema *s = nullptr;
    if (auto *cf = llvm::dyn_cast<CallFunction>(e))
      s = &cf->func();
    else if (auto *cm = llvm::dyn_cast<CallMethod>(e))
      s = cm->methodSchema();
    if (!s)
      return false;
    switch (s->kind()) {
    case OpKind::Conv2d: {
      auto w = e->namedArg("weight");
      auto bias = e->namedArg("bias");
      if (!w || !xf::staticTensor(w->node()))
        return false;
      if (bias && !(bias->isConst() && bias->scalar().isNone()) &&
          !xf::staticTensor(bias->node()))
        return false;
      edits.push_back({Edit::ScaleConv, e, 0, k});
      return true;
    }
    case OpKind::Relu:
    case OpKind::MaxPool2d:
    case OpKind::AdaptiveMaxPool2d:
      return k > 0 && push(e->input(0), k, edits);
    case OpKind::Reshape:
    case OpKind::Flatten:
    case OpKind::Transpose:
    case OpKind::ExpandDims:
    case OpKind::AvgPool2d:
    case OpKind::AdaptiveAvgPool2d:
    case OpKind::MReshape:
    case OpKind::MFlatten:
    case OpKind::MTranspose:
    case OpKind::MGetItem:
      // Only the first input is data; the others (if any) are shapes/indices.
      return e->numInputs() == 1 && push(e->input(0), k, edits);
    case OpKind::Concat:
      for (Node *in : e->inputs())
        if (!push(in, k, edits))
          return false;
      return true;
    default:
      return false;
    }
  }

  Tensor scaled(const Tensor &t, double k) {
    std::vector<double> v = xf::toDoubles(t);
    for (double &x : v)
      x *= k;
    return xf::fromDoubles(t.shape(), v);
  }

  void apply(const Edit &ed) {
    Expr *e = ed.expr;
    if (ed.kind == Edit::ScaleConst) {
      ArgRef a = e->arg(ed.arg);
      if (Node *n = a.node()) {
        const Tensor *t = xf::constantTensor(n);
        Expr *old = n->expr();
        Node *c = xf::newConstant(g_, e, scaled(*t, ed.k), n->name());
        xf::setPositionalArg(e, ed.arg, c);
        cleanup_.push_back(old);
      } else {
        xf::setPositionalLiteral(e, ed.arg, Scalar(a.scalar().toDouble() * ed.k));
      }
      return;
    }
    if (Module *mod = xf::calledModule(e)) {
      mod->registerParameter("weight", scaled(*mod->tensor("weight"), ed.k));
      if (const Tensor *b = mod->tensor("bias"))
        mod->registerParameter("bias", scaled(*b, ed.k));
      return;
    }
    auto w = e->namedArg("weight");
    Expr *oldW = w->node()->expr();
    Node *wn = xf::newConstant(g_, e, scaled(*xf::staticTensor(w->node()), ed.k), "weight_scaled");
    xf::setPositionalArg(e, 1, wn);
    auto bias = e->namedArg("bias");
    Expr *oldB = nullptr;
    if (bias && bias->node()) {
      oldB = bias->node()->expr();
      Node *bn = xf::newConstant(g_, e, scaled(*xf::staticTensor(bias->node()), ed.k),
                                 "bias_scaled");
      xf::setPositionalArg(e, 2, bn);
    }
    cleanup_.push_back(oldW);
    if (oldB)
      cleanup_.push_back(oldB);
  }

  InternalGraph &g_;
  PassContext &ctx_;
  llvm::DenseMap<const Module *, int64_t> calls_;
  std::vector<Expr *> cleanup_;
};

} // namespace

FailureOr<bool> BackwardFoldScalePass::run(TracedModule &m, PassContext &ctx) {
  bool changed = false;
  for (InternalGraph *g : xf::allGraphs(m))
    changed |= Folder(m, *g, ctx).run();
  return changed;
}

} // namespace tmg
