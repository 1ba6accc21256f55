//===- elementwise.cpp - Shape rules of the elementwise ops ---------------===//
//
// Output types of the elementwise family: broadcasting binary arithmetic,
// predicates (bool results), unary math that keeps its input's type, where,
// and astype.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {
namespace {

Types arithmetic(const ShapeContext &c, OpKind) {
  return c.binary(false, false);
}
Types trueDivision(const ShapeContext &c, OpKind) {
  return c.binary(false, true);
}
Types predicate(const ShapeContext &c, OpKind) { return c.binary(true, false); }
/// & | ^ : logical (bool) on two bools, bitwise (promoted integer) otherwise.
Types bitwise(const ShapeContext &c, OpKind) {
  auto x = c.operand(c.arg("self")), y = c.operand(c.arg("value"));
  bool bools = x && y && x->dtype == DType::Bool && y->dtype == DType::Bool;
  return c.binary(bools, false);
}
Types sameType(const ShapeContext &c, OpKind) { return c.same(); }

/// Unary predicates: the input's shape, bool.
Types unaryPredicate(const ShapeContext &c, OpKind) {
  auto x = c.first();
  return x ? c.one(std::move(x->shape), DType::Bool) : std::nullopt;
}

/// The broadcast of mask, x and y; the promoted dtype of x and y.
Types where(const ShapeContext &c, OpKind) {
  auto m = c.operand(c.arg("mask")), x = c.operand(c.arg("x")),
       y = c.operand(c.arg("y"));
  if (!m || !x || !y || !m->shape || !x->shape || !y->shape)
    return std::nullopt;
  auto s = broadcastShapes(*m->shape, *x->shape);
  if (s)
    s = broadcastShapes(*s, *y->shape);
  if (!s)
    c.fail(fmt::format("shapes {}, {} and {} do not broadcast",
                       dim::dimsStr(*m->shape), dim::dimsStr(*x->shape),
                       dim::dimsStr(*y->shape)));
  return c.one(s, x->dtype && y->dtype ? std::optional<DType>(promote(*x, *y))
                                       : std::nullopt);
}

/// x.astype(dtype): x's shape, the named dtype.
Types astype(const ShapeContext &c, OpKind) {
  auto x = c.first();
  auto dt = c.constArg("dtype");
  if (!x || !dt || !dt->isConst() || !dt->value().isString())
    return std::nullopt;
  auto t = parseDType(dt->value().getString());
  if (!t)
    c.fail(fmt::format("unknown dtype '{}'", dt->value().getString()));
  return c.one(std::move(x->shape), t);
}

/// string_normalizer: a string tensor of shape (C,) or (1, C); the same
/// rank, the last dim unknown when stopwords may remove elements.
Types stringNormalizer(const ShapeContext &c, OpKind) {
  auto x = c.first();
  if (!x)
    return std::nullopt;
  if (x->dtype && !isString(*x->dtype))
    c.fail(fmt::format("input must be a string tensor, got {}", dtypeName(*x->dtype).str()));
  if (x->shape && !(x->shape->size() == 1 || (x->shape->size() == 2 && (*x->shape)[0] == 1)))
    c.fail(fmt::format("input must have shape (C,) or (1, C), got {}", dim::dimsStr(*x->shape)));
  auto sw = c.constArg("stopwords");
  bool noStopwords = !sw || (sw->isConst() && sw->value().isNone()) ||
                     (sw->isContainer() && sw->numChildren() == 0);
  if (x->shape && !noStopwords)
    x->shape->back() = kUnknownDim;
  return c.one(std::move(x->shape), DType::String);
}

} // namespace

void registerElementwiseShapeRules(ShapeRuleTable &t) {
  t.add("elementwise",
        {OpKind::Add,     OpKind::Sub,     OpKind::Mul,       OpKind::Pow,
         OpKind::Maximum, OpKind::Minimum, OpKind::Mod,       OpKind::FloorDiv,
         OpKind::Fmod,    OpKind::MAdd,    OpKind::MRAdd,     OpKind::MIAdd,
         OpKind::MSub,    OpKind::MRSub,   OpKind::MISub,     OpKind::MMul,
         OpKind::MRMul,   OpKind::MIMul,   OpKind::MFloorDiv, OpKind::MMod,
         OpKind::MPow,    OpKind::MRPow,   OpKind::MLShift,   OpKind::MRShift},
        symbolic(arithmetic));
  t.add("elementwise",
        {OpKind::Div, OpKind::MTrueDiv, OpKind::MRTrueDiv, OpKind::MITrueDiv},
        symbolic(trueDivision));
  t.add("elementwise",
        {OpKind::Equal, OpKind::NotEqual, OpKind::Less, OpKind::LessEqual,
         OpKind::Greater, OpKind::GreaterEqual, OpKind::LogicalAnd,
         OpKind::LogicalOr, OpKind::LogicalXor, OpKind::MEq, OpKind::MNe,
         OpKind::MLt, OpKind::MLe, OpKind::MGt, OpKind::MGe},
        symbolic(predicate));
  t.add("elementwise", {OpKind::MAnd, OpKind::MOr, OpKind::MXor}, symbolic(bitwise));
  t.add("elementwise", {OpKind::LogicalNot, OpKind::IsNan, OpKind::IsInf},
        symbolic(unaryPredicate));
  t.add("elementwise",
        {OpKind::Neg,   OpKind::Abs,        OpKind::Exp,    OpKind::Log,
         OpKind::Sqrt,  OpKind::Rsqrt,      OpKind::Erf,    OpKind::Tanh,
         OpKind::Sin,   OpKind::Cos,        OpKind::Floor,  OpKind::Ceil,
         OpKind::Round, OpKind::Clip,       OpKind::Sign,   OpKind::Tan,
         OpKind::Asin,  OpKind::Reciprocal, OpKind::Acos,   OpKind::Atan,
         OpKind::Sinh,  OpKind::Cosh,       OpKind::Asinh,  OpKind::Acosh,
         OpKind::Atanh, OpKind::Copy,       OpKind::MNeg,   OpKind::MPos,
         OpKind::MAbs,  OpKind::MInvert,    OpKind::MDetach},
        symbolic(sameType));
  t.add("elementwise", {OpKind::Where}, symbolic(where));
  t.add("elementwise", {OpKind::MAstype}, symbolic(astype));
  t.add("elementwise", {OpKind::StringNormalizer}, symbolic(stringNormalizer));
}

} // namespace tmg::shapes
