//===- Elemwise.h - Binary arithmetic operands (internal) -------*- C++ -*-===//
#pragma once

#include "Utils.h"

namespace tmg::xf {

enum class Arith : uint8_t { None, Add, Sub, Mul, Div };

/// The arithmetic family of `e` (F.add, __add__, __radd__, __iadd__, ...).
Arith arithOf(const Expr *e);

/// One operand: a node or a literal number.
struct Operand {
  Node *node = nullptr;
  std::optional<double> literal;
  bool literalIsInt = false;
  /// A literal, or a tensor Constant.
  bool isConst() const { return literal.has_value() || constantTensor(node); }
  /// The value of a literal or of a one-element Constant.
  std::optional<double> scalar() const;
};

/// The two operands of a binary arithmetic call in semantic order (the
/// reflected methods swapped); false when `e` is not one or an operand is
/// neither a node nor a number.
bool operandsOf(const Expr *e, Operand &a, Operand &b, size_t &argA, size_t &argB);

/// Replaces positional argument `i` of call `e` by a literal.
void setPositionalLiteral(Expr *e, size_t i, Scalar v);

} // namespace tmg::xf
