//===- FuseAddMul.cpp - Fold chains of constant adds and muls -------------===//
//
// The reference's FuseAddMul, in one forward walk (after norm-elemwise):
//   (x + c1) + c2  => x + (c1 + c2)      (x * c1) * c2  => x * (c1 * c2)
//   neg(x) * c     => x * (-c)
// when the inner result has no other use; c1, c2 are literal numbers or
// one-element Constants (the result is a literal when both are literals,
// else a Constant shaped like the tensor one). A result of `+ 0` / `* 1`
// with literal constants on a float32 value is removed. Chains fold left to
// right in the same walk. pow(pow(x, a), b) is NOT folded: (x^2)^0.5 is
// |x|, not x (the reference folds it, and then keeps a `pow(x, 1)` by a
// bug).
//
//===----------------------------------------------------------------------===//
#include "Elemwise.h"
#include "Passes.h"

namespace tmg {

namespace {

using xf::Arith;
using xf::Operand;

/// The normal form `x op c`: x a variable node at argument 0.
bool normal(const Expr *e, Arith want, Operand &x, Operand &c, size_t &ic) {
  size_t ia;
  auto *cm = llvm::dyn_cast<CallMethod>(e);
  if (!cm || cm->isModuleCall() || xf::arithOf(e) != want)
    return false;
  OpKind k = cm->methodSchema()->kind();
  if (k != OpKind::MAdd && k != OpKind::MMul)
    return false;
  if (!xf::operandsOf(e, x, c, ia, ic) || !x.node || x.isConst() || !c.scalar())
    return false;
  return true;
}

bool isNeg(const Expr *e) {
  return isCallFunction(e, &op(OpKind::Neg)) || isCallTensorMethod(e, "__neg__");
}

} // namespace

FailureOr<bool> FuseAddMulPass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  std::vector<Expr *> body;
  for (Expr *e : g.body())
    body.push_back(e);
  llvm::DenseSet<const Expr *> erased;
  bool changed = false;
  for (Expr *e : body) {
    if (erased.count(e))
      continue;
    for (Arith ar : {Arith::Add, Arith::Mul}) {
      Operand x, c;
      size_t ic;
      if (!normal(e, ar, x, c, ic))
        continue;
      Expr *p = x.node->expr();
      if (x.node->numUsers() != 1 || xf::outputSet(g).count(x.node) || !p->inBody() ||
          p->removeDisabled())
        break;
      Operand x2, c2;
      size_t ic2;
      Node *inner = nullptr;
      double v = 0;
      const Tensor *shapeOf = nullptr;
      bool literal = c.literal.has_value();
      bool intLiteral = c.literalIsInt;
      if (normal(p, ar, x2, c2, ic2)) {
        inner = x2.node;
        v = ar == Arith::Add ? *c.scalar() + *c2.scalar() : *c.scalar() * *c2.scalar();
        literal &= c2.literal.has_value();
        intLiteral &= c2.literalIsInt;
        shapeOf = xf::constantTensor(c.node) ? xf::constantTensor(c.node)
                                               : xf::constantTensor(c2.node);
        if (xf::constantTensor(c.node) && xf::constantTensor(c2.node) &&
            xf::constantTensor(c.node)->shape() != xf::constantTensor(c2.node)->shape())
          break;
      } else if (ar == Arith::Mul && isNeg(p) && p->numInputs() == 1) {
        inner = p->input(0);
        v = -*c.scalar();
        shapeOf = xf::constantTensor(c.node);
      } else {
        break;
      }
      if (!llvm::isa<TensorNode>(inner))
        break;
      // Rewrite e in place: receiver := inner, constant := v.
      xf::setPositionalArg(e, 0, inner);
      Expr *oldConst = c.node ? c.node->expr() : nullptr;
      if (literal) {
        // Integer literals stay integers (x + 2.0 would turn an int x into float).
        xf::setPositionalLiteral(e, ic, intLiteral ? Scalar(int64_t(v)) : Scalar(v));
      } else {
        Tensor t = xf::fromDoubles(shapeOf ? shapeOf->shape() : llvm::ArrayRef<int64_t>{},
                                   std::vector<double>(1, v));
        xf::setPositionalArg(e, ic, xf::newConstant(g, e, t, c.node ? c.node->name() : "c"));
      }
      std::vector<Expr *> dead{p};
      if (oldConst)
        dead.push_back(oldConst);
      for (Expr *d : dead)
        erased.insert(d);
      xf::eraseDeadFrom(g, dead);
      ctx.count("ops-fused");
      changed = true;
      // x + 0 / x * 1 with literals on float32: gone.
      auto *tn = llvm::dyn_cast<TensorNode>(inner);
      if (literal && v == (ar == Arith::Add ? 0.0 : 1.0) && tn->hasDType() &&
          tn->dtype() == DType::Float32 && tn->shape() &&
          llvm::cast<TensorNode>(e->output(0))->shape() &&
          provablySameShape(*llvm::cast<TensorNode>(e->output(0))->shape(), *tn->shape()) &&
          xf::replaceAll(g, e->output(0), inner)) {
        g.eraseExpr(e);
        erased.insert(e);
        ctx.count("identities-removed");
      }
      break;
    }
  }
  return changed;
}

} // namespace tmg
