//===- NormElemwise.cpp - Arithmetic in `x + c` / `x * c` form -----------===//
//
// The reference's NormElemWise: binary add/sub/mul/div in any spelling
// (F.add, __add__, __radd__, __iadd__, ...) become `__add__` / `__mul__`
// tensor methods with the variable operand as receiver:
//   c + x, F.add(x, c), x.__radd__(c), x += c   => x + c      (likewise *)
//   x - c => x + (-c)     c - x => neg(x) + c     x - y => x + neg(y)
//   x / c => x * (1 / c)  c / x => pow(x, -1) * c  x / y => x * pow(y, -1)
// where c is a literal number or a tensor Constant. Rewrites that would
// change a dtype are skipped (negating/inverting only float32 constants;
// pow(x, -1) only for float32 x). Linear in the graph.
//
//===----------------------------------------------------------------------===//
#include "Elemwise.h"
#include "Passes.h"

namespace tmg {

namespace {

using xf::Arith;
using xf::Operand;

bool isFloat32(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  return t && t->hasDType() && t->dtype() == DType::Float32;
}

Arg argOf(const Operand &o) {
  if (o.node)
    return o.node;
  return o.literalIsInt ? Arg(int64_t(*o.literal)) : Arg(*o.literal);
}

/// -c or 1/c as an argument; nullopt when that would change the dtype.
std::optional<Arg> mapConst(InternalGraph &g, Expr *before, const Operand &c, bool reciprocal) {
  if (c.literal) {
    if (reciprocal)
      return *c.literal == 0 ? std::nullopt : std::optional<Arg>(Arg(1.0 / *c.literal));
    return c.literalIsInt ? Arg(int64_t(-*c.literal)) : Arg(-*c.literal);
  }
  const Tensor *t = xf::constantTensor(c.node);
  if (!t || t->dtype() != DType::Float32)
    return std::nullopt;
  std::vector<double> v = xf::toDoubles(*t);
  for (double &x : v) {
    if (reciprocal && x == 0)
      return std::nullopt;
    x = reciprocal ? 1.0 / x : -x;
  }
  return Arg(xf::newConstant(g, before, xf::fromDoubles(t->shape(), v), c.node->name()));
}

} // namespace

FailureOr<bool> NormElemwisePass::runOnGraph(InternalGraph &g, PassContext &ctx) {
  std::vector<Expr *> todo;
  for (Expr *e : g.body())
    if (xf::arithOf(e) != Arith::None && !e->removeDisabled())
      todo.push_back(e);
  bool changed = false;
  for (Expr *e : todo) {
    Operand a, b;
    size_t ia, ib;
    if (!xf::operandsOf(e, a, b, ia, ib))
      continue;
    Arith k = xf::arithOf(e);
    bool ac = a.isConst(), bc = b.isConst();
    if (ac && bc)
      continue; // fold-constant's job
    auto *cm = llvm::dyn_cast<CallMethod>(e);
    OpKind sk = cm ? cm->methodSchema()->kind() : OpKind::Custom;
    // Already normal: x.__add__(c), x.__add__(y), x.__mul__(...).
    if ((sk == OpKind::MAdd || sk == OpKind::MMul) && !ac)
      continue;
    Node *out = nullptr;
    xf::withInsertionPoint(g, e, [&] {
      GraphBuilder bld = GraphBuilder::into(g);
      g.setInsertionPoint(e);
      const char *addOrMul = (k == Arith::Add || k == Arith::Sub) ? "__add__" : "__mul__";
      switch (k) {
      case Arith::Add:
      case Arith::Mul:
        out = ac ? bld.callMethod(b.node, addOrMul, {argOf(a)})
                 : bld.callMethod(a.node, addOrMul, {argOf(b)});
        break;
      case Arith::Sub:
        if (bc) {
          if (auto m = mapConst(g, e, b, false))
            out = bld.callMethod(a.node, "__add__", {*m});
        } else {
          Node *n = bld.callFunction("neg", {b.node});
          out = bld.callMethod(n, "__add__", {argOf(a)});
        }
        break;
      case Arith::Div:
        if (bc) {
          if (!isFloat32(a.node))
            break;
          if (auto m = mapConst(g, e, b, true))
            out = bld.callMethod(a.node, "__mul__", {*m});
        } else if (isFloat32(b.node)) {
          Node *p = bld.callFunction("pow", {b.node, -1});
          out = bld.callMethod(p, "__mul__", {argOf(a)});
        }
        break;
      case Arith::None:
        break;
      }
    });
    if (!out)
      continue;
    if (!xf::replaceAll(g, e->output(0), out))
      continue;
    xf::eraseDeadFrom(g, {e});
    ctx.count("exprs-normalised");
    changed = true;
  }
  return changed;
}

} // namespace tmg
