//===- linalg.cpp - Lowering of the linear-algebra family -------*- C++ -*-===//
//
// linear (x @ w^T + b), matmul as a function (with its transpose flags) and
// as the `@` method; linear_act is lowered in FusedOps.cpp.
//
//===----------------------------------------------------------------------===//
#include "../FusedOps.h"
#include "Lowering.h"

namespace tmg::rt {
namespace {

StepFn lowerLinear(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp"), w = a.tensor("weight"), b = a.optTensor("bias");
  uint32_t o = outSlot(e, ctx);
  return [x, w, b, o](Value *s, RunState &) {
    s[o].tensor = linear(x.get(s), w.get(s), b.defined() ? b.get(s) : Tensor());
  };
}

StepFn lowerMatmul(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  bool method = a.isMethod();
  bool ta = !method && a.boolean("transpose_a"), tb = !method && a.boolean("transpose_b");
  Src x = method ? a.tensor("self") : a.tensor("inp1");
  Src y = method ? a.tensor("value") : a.tensor("inp2");
  return binaryStep(x, y, outSlot(e, ctx), [ta, tb](const Tensor &p, const Tensor &q) {
    return matmul(p, q, ta, tb);
  });
}

} // namespace

void registerLinalgLowering(LowerTable &t) {
  t.add("linalg", {OpKind::Linear}, lowerLinear);
  t.add("linalg", {OpKind::LinearAct}, lowerLinearAct);
  t.add("linalg", {OpKind::Matmul, OpKind::MMatmul}, lowerMatmul);
}

} // namespace tmg::rt
