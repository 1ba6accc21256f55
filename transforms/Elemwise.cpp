//===- Elemwise.cpp - Binary arithmetic operands --------------------------===//
#include "Elemwise.h"

namespace tmg::xf {

Arith arithOf(const Expr *e) {
  const OpSchema *s = nullptr;
  if (auto *cf = llvm::dyn_cast_or_null<CallFunction>(e))
    s = &cf->func();
  else if (auto *cm = llvm::dyn_cast_or_null<CallMethod>(e))
    s = cm->methodSchema();
  if (!s)
    return Arith::None;
  switch (s->kind()) {
  case OpKind::Add:
  case OpKind::MAdd:
  case OpKind::MRAdd:
  case OpKind::MIAdd:
    return Arith::Add;
  case OpKind::Sub:
  case OpKind::MSub:
  case OpKind::MRSub:
  case OpKind::MISub:
    return Arith::Sub;
  case OpKind::Mul:
  case OpKind::MMul:
  case OpKind::MRMul:
  case OpKind::MIMul:
    return Arith::Mul;
  case OpKind::Div:
  case OpKind::MTrueDiv:
  case OpKind::MRTrueDiv:
  case OpKind::MITrueDiv:
    return Arith::Div;
  default:
    return Arith::None;
  }
}

std::optional<double> Operand::scalar() const {
  if (literal)
    return literal;
  const Tensor *t = constantTensor(node);
  if (t && t->numel() == 1)
    return t->at(0);
  return std::nullopt;
}

static bool operandAt(const Expr *e, size_t i, Operand &o) {
  if (i >= e->numArgs())
    return false;
  ArgRef a = e->arg(i);
  if (Node *n = a.node()) {
    if (!llvm::isa<TensorNode>(n))
      return false;
    o.node = n;
    return true;
  }
  if (a.isConst() && a.scalar().isNumber() && !a.scalar().isBool()) {
    o.literal = a.scalar().toDouble();
    o.literalIsInt = a.scalar().isInt();
    return true;
  }
  return false;
}

bool operandsOf(const Expr *e, Operand &a, Operand &b, size_t &argA, size_t &argB) {
  if (arithOf(e) == Arith::None || e->numOutputs() != 1 || e->numArgs() < 2)
    return false;
  argA = 0;
  argB = 1;
  if (auto *cm = llvm::dyn_cast<CallMethod>(e))
    if (cm->methodSchema()->hasTrait(Reflected))
      std::swap(argA, argB);
  return operandAt(e, argA, a) && operandAt(e, argB, b);
}

void setPositionalLiteral(Expr *e, size_t i, Scalar v) {
  replacePositional(e, i, TreeDef::constant(std::move(v)), nullptr);
}

} // namespace tmg::xf
