//===- elementwise.cpp - Kernels and lowering: elementwise ------*- C++ -*-===//
//
// Arithmetic, comparison, math, logical and cast ops, as functions and as
// tensor methods. Binary operands are (x, y) of a function and (self,
// value) of a method; a Python scalar operand is typed after the other
// operand. Arithmetic, comparison and where read their operands as views.
// Reflected methods (`__radd__`, ...) swap the operands. The Copy and
// Elemwise op defs run like copy and the Elemwise module. The kernels of
// the math (floor, sin, ...), logical, isnan/isinf and modulo ops live
// here, the others in Elementwise.cpp.
//
//===----------------------------------------------------------------------===//
#include "../ElemwiseModule.h"
#include "KernelUtil.h"
#include "Lowering.h"

#include <cmath>

namespace tmg::rt {

using namespace detail;

namespace {

Tensor boolMap(const char *op, const Tensor &x, bool (*f)(float, const void *), const void *ctx) {
  requireDef(op, x);
  Tensor in = x.dtype() == DType::Float32 ? x : cast(x, DType::Float32);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  const float *p = in.data<float>();
  uint8_t *q = out.data<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i)
    q[i] = f(p[i], ctx) ? 1 : 0;
  return out;
}

double roundHalfEven(double v) { return std::nearbyint(v); }

} // namespace

// ---- Kernels ------------------------------------------------------------------

llvm::StringRef opName(MathOp op) {
  static const char *names[] = {"floor", "ceil",  "round", "sign",  "sin",   "cos",
                                "tan",   "asin",  "acos",  "atan",  "sinh",  "cosh",
                                "asinh", "acosh", "atanh", "reciprocal", "softsign",
                                "softplus"};
  return names[size_t(op)];
}

Tensor mathUnary(MathOp op, const Tensor &x) {
  const char *name = opName(op).data();
  switch (op) {
  case MathOp::Floor: return mapFloat(name, x, true, [](float v) { return std::floor(v); });
  case MathOp::Ceil: return mapFloat(name, x, true, [](float v) { return std::ceil(v); });
  case MathOp::Round:
    return mapFloat(name, x, true, [](float v) { return float(roundHalfEven(v)); });
  case MathOp::Sign:
    return mapFloat(name, x, true, [](float v) { return v > 0 ? 1.0f : v < 0 ? -1.0f : v; });
  case MathOp::Sin: return mapFloat(name, x, false, [](float v) { return std::sin(v); });
  case MathOp::Cos: return mapFloat(name, x, false, [](float v) { return std::cos(v); });
  case MathOp::Tan: return mapFloat(name, x, false, [](float v) { return std::tan(v); });
  case MathOp::Asin: return mapFloat(name, x, false, [](float v) { return std::asin(v); });
  case MathOp::Acos: return mapFloat(name, x, false, [](float v) { return std::acos(v); });
  case MathOp::Atan: return mapFloat(name, x, false, [](float v) { return std::atan(v); });
  case MathOp::Sinh: return mapFloat(name, x, false, [](float v) { return std::sinh(v); });
  case MathOp::Cosh: return mapFloat(name, x, false, [](float v) { return std::cosh(v); });
  case MathOp::Asinh: return mapFloat(name, x, false, [](float v) { return std::asinh(v); });
  case MathOp::Acosh: return mapFloat(name, x, false, [](float v) { return std::acosh(v); });
  case MathOp::Atanh: return mapFloat(name, x, false, [](float v) { return std::atanh(v); });
  case MathOp::Reciprocal: return mapFloat(name, x, false, [](float v) { return 1.0f / v; });
  case MathOp::Softsign:
    return mapFloat(name, x, false, [](float v) { return v / (1.0f + std::fabs(v)); });
  case MathOp::Softplus:
    return mapFloat(name, x, false, [](float v) {
      return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
    });
  }
  raise("unknown math op");
}

Tensor logical(LogicalOp op, const Tensor &a, const Tensor &b) {
  const char *name = op == LogicalOp::And ? "logical_and" : op == LogicalOp::Or ? "logical_or"
                                                                                : "logical_xor";
  auto [x, y] = broadcastPair(name, a, b);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  uint8_t *o = out.data<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    bool p = x.at(i) != 0, q = y.at(i) != 0;
    o[i] = op == LogicalOp::And ? (p && q) : op == LogicalOp::Or ? (p || q) : (p != q);
  }
  return out;
}

Tensor logicalNot(const Tensor &x) {
  requireDef("logical_not", x);
  Tensor out = Tensor::empty(x.shape(), DType::Bool);
  uint8_t *o = out.data<uint8_t>();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = x.at(i) == 0;
  return out;
}

static void requireBoolOrInt(const char *name, const Tensor &t) {
  if (isFloat(t.dtype()))
    raise("{}: needs bool or integer tensors, got {}", name, dtypeName(t.dtype()).str());
}

Tensor bitwise(LogicalOp op, const Tensor &a, const Tensor &b) {
  const char *name = op == LogicalOp::And ? "__and__" : op == LogicalOp::Or ? "__or__" : "__xor__";
  requireBoolOrInt(name, a);
  requireBoolOrInt(name, b);
  if (a.dtype() == DType::Bool && b.dtype() == DType::Bool)
    return logical(op, a, b);
  auto [x, y] = broadcastPair(name, a, b);
  Tensor out = Tensor::empty(x.shape(), DType::Int64);
  int64_t *o = out.data<int64_t>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t p = int64_t(x.at(i)), q = int64_t(y.at(i));
    o[i] = op == LogicalOp::And ? (p & q) : op == LogicalOp::Or ? (p | q) : (p ^ q);
  }
  DType t = promoteTypes(a.dtype(), b.dtype());
  return t == DType::Int64 ? out : cast(out, t);
}

Tensor invert(const Tensor &x) {
  requireBoolOrInt("__invert__", x);
  if (x.dtype() == DType::Bool)
    return logicalNot(x);
  Tensor out = Tensor::empty(x.shape(), DType::Int64);
  int64_t *o = out.data<int64_t>();
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = ~int64_t(x.at(i));
  return x.dtype() == DType::Int64 ? out : cast(out, x.dtype());
}

Tensor isNan(const Tensor &x) {
  return boolMap("isnan", x, [](float v, const void *) { return std::isnan(v); }, nullptr);
}

Tensor isInf(const Tensor &x, bool positive, bool negative) {
  bool flags[2] = {positive, negative};
  return boolMap(
      "isinf", x,
      [](float v, const void *c) {
        auto *f = static_cast<const bool *>(c);
        return std::isinf(v) && ((v > 0 && f[0]) || (v < 0 && f[1]));
      },
      flags);
}

/// A broadcast binary kernel with one formula for floating-point dtypes
/// (computed in double, stored as float32) and one for integer dtypes
/// (computed in int64); the result has the promoted dtype.
template <typename FloatFn, typename IntFn>
static Tensor floatOrIntBinary(const char *name, const Tensor &a, const Tensor &b,
                               FloatFn floatFn, IntFn intFn) {
  auto [x, y] = broadcastPair(name, a, b);
  DType t = promoteTypes(a.dtype(), b.dtype());
  bool fl = isFloat(t);
  Tensor out = Tensor::empty(x.shape(), fl ? DType::Float32 : DType::Int64);
  int64_t n = out.numel();
  if (fl) {
    float *o = out.data<float>();
    for (int64_t i = 0; i < n; ++i)
      o[i] = float(floatFn(x.at(i), y.at(i)));
  } else {
    int64_t *o = out.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      int64_t q = int64_t(y.at(i));
      if (q == 0)
        raise("{}: integer division by zero", name);
      o[i] = intFn(int64_t(x.at(i)), q);
    }
  }
  return out.dtype() == t ? out : cast(out, t);
}

Tensor mod(const Tensor &a, const Tensor &b, bool fmodMode) {
  return floatOrIntBinary(
      "mod", a, b,
      [fmodMode](double p, double q) {
        double r = std::fmod(p, q);
        if (!fmodMode && r != 0 && ((r < 0) != (q < 0)))
          r += q;
        return r;
      },
      [fmodMode](int64_t p, int64_t q) {
        int64_t r = p % q;
        if (!fmodMode && r != 0 && ((r < 0) != (q < 0)))
          r += q;
        return r;
      });
}

Tensor floorDiv(const Tensor &a, const Tensor &b) {
  return floatOrIntBinary(
      "floor_div", a, b, [](double p, double q) { return std::floor(p / q); },
      [](int64_t p, int64_t q) {
        int64_t d = p / q;
        return (p % q != 0 && ((p < 0) != (q < 0))) ? d - 1 : d;
      });
}

// ---- Lowering -----------------------------------------------------------------

namespace {

Src lhsOperand(const Args &a) {
  return a.isMethod() ? a.tensor("self") : a.tensor("x", a.dtypeOf("y"));
}

Src rhsOperand(const Args &a) {
  return a.isMethod() ? a.tensor("value", a.dtypeOf("self")) : a.tensor("y", a.dtypeOf("x"));
}

template <BinaryOp Op, bool Swap = false>
StepFn lowerBinary(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = lhsOperand(a).asView(), y = rhsOperand(a).asView();
  if (Swap)
    std::swap(x, y);
  return binaryStep(x, y, outSlot(e, ctx),
                    [](const Tensor &p, const Tensor &q) { return binary(Op, p, q); });
}

template <CompareOp Op> StepFn lowerCompare(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(lhsOperand(a).asView(), rhsOperand(a).asView(), outSlot(e, ctx),
                    [](const Tensor &p, const Tensor &q) { return compare(Op, p, q); });
}

/// `copy`, `+x` and `detach`: the value itself.
StepFn lowerIdentity(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.first().asView(), outSlot(e, ctx), [](const Tensor &t) { return t; });
}

/// The `Copy` op def: its one tensor input, unchanged.
StepFn lowerCopyDef(const Expr &e, OpKind, LowerContext &ctx) {
  if (e.numInputs() != 1 || e.numOutputs() != 1 || !llvm::isa<TensorNode>(e.input(0)))
    raiseAt(Location::atExpr(e.id()), "Copy takes one tensor input and returns one tensor");
  Src x;
  x.slot = ctx.slot(e.input(0));
  return unaryStep(x.asView(), outSlot(e, ctx), [](const Tensor &t) { return t; });
}

StepFn lowerClip(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::optional<double> lo, hi;
  if (!a.isNone("lower"))
    lo = a.number("lower");
  if (!a.isNone("upper"))
    hi = a.number("upper");
  return unaryStep(a.tensor("x"), outSlot(e, ctx),
                   [lo, hi](const Tensor &t) { return clip(t, lo, hi); });
}

StepFn lowerWhere(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src m = a.tensor("mask").asView(), x = a.tensor("x", a.dtypeOf("y")).asView(),
      y = a.tensor("y", a.dtypeOf("x")).asView();
  uint32_t o = outSlot(e, ctx);
  return [m, x, y, o](Value *s, RunState &) { s[o].tensor = where(m.get(s), x.get(s), y.get(s)); };
}

StepFn lowerAstype(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  DType to = a.dtype("dtype");
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [to](const Tensor &x) { return cast(x, to); });
}

template <LogicalOp Op> StepFn lowerLogical(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(a.tensor("x"), a.tensor("y"), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) { return logical(Op, x, y); });
}

template <LogicalOp Op> StepFn lowerBitwise(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(lhsOperand(a), rhsOperand(a), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) { return bitwise(Op, x, y); });
}

StepFn lowerInvert(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("self"), outSlot(e, ctx), [](const Tensor &t) { return invert(t); });
}

StepFn lowerLogicalNot(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("x"), outSlot(e, ctx), [](const Tensor &t) { return logicalNot(t); });
}

StepFn lowerIsNan(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("x"), outSlot(e, ctx), [](const Tensor &t) { return isNan(t); });
}

StepFn lowerIsInf(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  bool pos = a.boolean("detect_positive"), neg = a.boolean("detect_negative");
  return unaryStep(a.tensor("x"), outSlot(e, ctx),
                   [pos, neg](const Tensor &t) { return isInf(t, pos, neg); });
}

/// `mod` (Python's sign convention) and `fmod` (C's).
/// `mod`, `fmod`, `floor_div` and the `%` and `//` methods.
enum class IntDivOp { Mod, Fmod, FloorDiv };
template <IntDivOp Op> StepFn lowerIntDiv(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(lhsOperand(a), rhsOperand(a), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) {
                      return Op == IntDivOp::FloorDiv ? floorDiv(x, y)
                                                      : mod(x, y, Op == IntDivOp::Fmod);
                    });
}

void registerArithmetic(LowerTable &t) {
  using K = OpKind;
  using B = BinaryOp;
  t.add("elementwise", {K::Add, K::MAdd, K::MIAdd}, lowerBinary<B::Add>);
  t.add("elementwise", {K::MRAdd}, lowerBinary<B::Add, true>);
  t.add("elementwise", {K::Sub, K::MSub, K::MISub}, lowerBinary<B::Sub>);
  t.add("elementwise", {K::MRSub}, lowerBinary<B::Sub, true>);
  t.add("elementwise", {K::Mul, K::MMul, K::MIMul}, lowerBinary<B::Mul>);
  t.add("elementwise", {K::MRMul}, lowerBinary<B::Mul, true>);
  t.add("elementwise", {K::Div, K::MTrueDiv, K::MITrueDiv}, lowerBinary<B::Div>);
  t.add("elementwise", {K::MRTrueDiv}, lowerBinary<B::Div, true>);
  t.add("elementwise", {K::Pow, K::MPow}, lowerBinary<B::Pow>);
  t.add("elementwise", {K::MRPow}, lowerBinary<B::Pow, true>);
  t.add("elementwise", {K::Maximum}, lowerBinary<B::Maximum>);
  t.add("elementwise", {K::Minimum}, lowerBinary<B::Minimum>);
  t.add("elementwise", {K::Mod, K::MMod}, lowerIntDiv<IntDivOp::Mod>);
  t.add("elementwise", {K::Fmod}, lowerIntDiv<IntDivOp::Fmod>);
  t.add("elementwise", {K::FloorDiv, K::MFloorDiv}, lowerIntDiv<IntDivOp::FloorDiv>);
}

void registerComparison(LowerTable &t) {
  using K = OpKind;
  using C = CompareOp;
  t.add("elementwise", {K::Equal, K::MEq}, lowerCompare<C::Equal>);
  t.add("elementwise", {K::NotEqual, K::MNe}, lowerCompare<C::NotEqual>);
  t.add("elementwise", {K::Less, K::MLt}, lowerCompare<C::Less>);
  t.add("elementwise", {K::LessEqual, K::MLe}, lowerCompare<C::LessEqual>);
  t.add("elementwise", {K::Greater, K::MGt}, lowerCompare<C::Greater>);
  t.add("elementwise", {K::GreaterEqual, K::MGe}, lowerCompare<C::GreaterEqual>);
  t.add("elementwise", {K::LogicalAnd}, lowerLogical<LogicalOp::And>);
  t.add("elementwise", {K::LogicalOr}, lowerLogical<LogicalOp::Or>);
  t.add("elementwise", {K::LogicalXor}, lowerLogical<LogicalOp::Xor>);
  t.add("elementwise", {K::LogicalNot}, lowerLogicalNot);
  t.add("elementwise", {K::MAnd}, lowerBitwise<LogicalOp::And>);
  t.add("elementwise", {K::MOr}, lowerBitwise<LogicalOp::Or>);
  t.add("elementwise", {K::MInvert}, lowerInvert);
  t.add("elementwise", {K::IsNan}, lowerIsNan);
  t.add("elementwise", {K::IsInf}, lowerIsInf);
}

void registerUnary(LowerTable &t) {
  using K = OpKind;
  using U = UnaryOp;
  using M = MathOp;
  t.add("elementwise", {K::Neg, K::MNeg}, lowerUnary<U::Neg>);
  t.add("elementwise", {K::Abs, K::MAbs}, lowerUnary<U::Abs>);
  t.add("elementwise", {K::Exp}, lowerUnary<U::Exp>);
  t.add("elementwise", {K::Log}, lowerUnary<U::Log>);
  t.add("elementwise", {K::Sqrt}, lowerUnary<U::Sqrt>);
  t.add("elementwise", {K::Rsqrt}, lowerUnary<U::Rsqrt>);
  t.add("elementwise", {K::Erf}, lowerUnary<U::Erf>);
  t.add("elementwise", {K::Tanh}, lowerUnary<U::Tanh>);
  t.add("elementwise", {K::Floor}, lowerMath<M::Floor, false>);
  t.add("elementwise", {K::Ceil}, lowerMath<M::Ceil, false>);
  t.add("elementwise", {K::Round}, lowerMath<M::Round, false>);
  t.add("elementwise", {K::Sin}, lowerMath<M::Sin, false>);
  t.add("elementwise", {K::Cos}, lowerMath<M::Cos, false>);
  t.add("elementwise", {K::Sign}, lowerMath<M::Sign, false>);
  t.add("elementwise", {K::Reciprocal}, lowerMath<M::Reciprocal, false>);
  t.add("elementwise", {K::Tan}, lowerMath<M::Tan, false>);
  t.add("elementwise", {K::Asin}, lowerMath<M::Asin, false>);
  t.add("elementwise", {K::Acos}, lowerMath<M::Acos, false>);
  t.add("elementwise", {K::Atan}, lowerMath<M::Atan, false>);
  t.add("elementwise", {K::Sinh}, lowerMath<M::Sinh, false>);
  t.add("elementwise", {K::Cosh}, lowerMath<M::Cosh, false>);
  t.add("elementwise", {K::Asinh}, lowerMath<M::Asinh, false>);
  t.add("elementwise", {K::Acosh}, lowerMath<M::Acosh, false>);
  t.add("elementwise", {K::Atanh}, lowerMath<M::Atanh, false>);
  t.add("elementwise", {K::Clip}, lowerClip);
}

} // namespace

void registerElementwiseLowering(LowerTable &t) {
  registerArithmetic(t);
  registerComparison(t);
  registerUnary(t);
  t.add("elementwise", {OpKind::Copy, OpKind::MPos, OpKind::MDetach}, lowerIdentity);
  t.add("elementwise", {OpKind::Where}, lowerWhere);
  t.add("elementwise", {OpKind::MAstype}, lowerAstype);
  t.add("elementwise", {OpKind::CopyDef}, lowerCopyDef);
  t.add("elementwise", {OpKind::ElemwiseDef}, lowerElemwiseDef);
}

} // namespace tmg::rt
