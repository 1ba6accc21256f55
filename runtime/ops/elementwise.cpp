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

#include <algorithm>
#include <memory>

#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringSet.h>

#include "tm/ir/Strings.h"

#include <cmath>

namespace tmg::rt {

using namespace detail;

namespace {

/// A bool per element of x: pred(v) on x's values in float32 or float64
/// (integers and bool are never NaN or infinite: all false).
template <typename Pred> Tensor boolMap(const char *op, const Tensor &x, Pred pred) {
  requireDef(op, x);
  Tensor out = Tensor::zeros(x.shape(), DType::Bool);
  if (!isFloat(x.dtype()))
    return out;
  DType t = floatComputeType(x.dtype());
  Tensor in = asDType(x, t).contiguous();
  visitDType(t, [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T>) {
      const T *p = in.data<T>();
      uint8_t *q = out.data<uint8_t>();
      for (int64_t i = 0; i < x.numel(); ++i)
        q[i] = pred(p[i]) ? 1 : 0;
    }
  });
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
  case MathOp::Floor: return mapFloat(name, x, true, [](auto v) { return std::floor(v); });
  case MathOp::Ceil: return mapFloat(name, x, true, [](auto v) { return std::ceil(v); });
  case MathOp::Round:
    return mapFloat(name, x, true, [](auto v) { return decltype(v)(roundHalfEven(v)); });
  case MathOp::Sign:
    return mapFloat(name, x, true, [](auto v) { using T = decltype(v);
      return v > 0 ? T(1) : v < 0 ? T(-1) : v; });
  case MathOp::Sin: return mapFloat(name, x, false, [](auto v) { return std::sin(v); });
  case MathOp::Cos: return mapFloat(name, x, false, [](auto v) { return std::cos(v); });
  case MathOp::Tan: return mapFloat(name, x, false, [](auto v) { return std::tan(v); });
  case MathOp::Asin: return mapFloat(name, x, false, [](auto v) { return std::asin(v); });
  case MathOp::Acos: return mapFloat(name, x, false, [](auto v) { return std::acos(v); });
  case MathOp::Atan: return mapFloat(name, x, false, [](auto v) { return std::atan(v); });
  case MathOp::Sinh: return mapFloat(name, x, false, [](auto v) { return std::sinh(v); });
  case MathOp::Cosh: return mapFloat(name, x, false, [](auto v) { return std::cosh(v); });
  case MathOp::Asinh: return mapFloat(name, x, false, [](auto v) { return std::asinh(v); });
  case MathOp::Acosh: return mapFloat(name, x, false, [](auto v) { return std::acosh(v); });
  case MathOp::Atanh: return mapFloat(name, x, false, [](auto v) { return std::atanh(v); });
  case MathOp::Reciprocal: return mapFloat(name, x, false, [](auto v) { return decltype(v)(1) / v; });
  case MathOp::Softsign:
    return mapFloat(name, x, false, [](auto v) { return v / (decltype(v)(1) + std::fabs(v)); });
  case MathOp::Softplus:
    return mapFloat(name, x, false, [](auto v) {
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

/// out = f(x, y) over the broadcast of two integer operands, in their
/// promoted dtype.
template <typename F>
static Tensor integerBinary(const char *name, const Tensor &a, const Tensor &b, F f) {
  requireBoolOrInt(name, a);
  requireBoolOrInt(name, b);
  auto [x0, y0] = broadcastPair(name, a, b);
  DType t = promoteTypes(a.dtype(), b.dtype());
  Tensor x = cast(x0, t), y = cast(y0, t), out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_integral_v<T>) {
      const T *px = x.data<T>(), *py = y.data<T>();
      T *o = out.data<T>();
      for (int64_t i = 0; i < out.numel(); ++i)
        o[i] = T(f(px[i], py[i]));
    }
  });
  return out;
}

Tensor bitwise(LogicalOp op, const Tensor &a, const Tensor &b) {
  const char *name = op == LogicalOp::And ? "__and__" : op == LogicalOp::Or ? "__or__" : "__xor__";
  if (a.dtype() == DType::Bool && b.dtype() == DType::Bool)
    return logical(op, a, b);
  return integerBinary(name, a, b, [op](auto p, auto q) {
    return op == LogicalOp::And ? (p & q) : op == LogicalOp::Or ? (p | q) : (p ^ q);
  });
}

Tensor bitShift(const Tensor &a, const Tensor &b, bool left) {
  const char *name = left ? "__lshift__" : "__rshift__";
  bool negative = false;
  Tensor out = integerBinary(name, a, b, [left, &negative](auto p, auto q) {
    using T = decltype(p);
    using U = std::make_unsigned_t<T>;
    constexpr int bits = int(sizeof(T) * 8);
    bool neg = false, negP = false;
    if constexpr (std::is_signed_v<T>) {
      neg = q < 0;
      negP = p < 0;
    }
    negative |= neg;
    if (neg || q >= T(bits))
      return left ? T(0) : (negP ? T(-1) : T(0));
    return left ? T(U(p) << q) : T(p >> q);
  });
  if (negative)
    raise("{}: negative shift count in b {}", name, shapeStr(b.shape()));
  return out;
}

Tensor invert(const Tensor &x) {
  requireBoolOrInt("__invert__", x);
  if (x.dtype() == DType::Bool)
    return logicalNot(x);
  Tensor in = x.contiguous(), out = Tensor::empty(x.shape(), x.dtype());
  visitDType(x.dtype(), [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_integral_v<T>)
      for (int64_t i = 0; i < out.numel(); ++i)
        out.data<T>()[i] = T(~in.data<T>()[i]);
  });
  return out;
}

Tensor isNan(const Tensor &x) {
  return boolMap("isnan", x, [](auto v) { return std::isnan(v); });
}

Tensor isInf(const Tensor &x, bool positive, bool negative) {
  return boolMap("isinf", x, [positive, negative](auto v) {
    return std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative));
  });
}

/// A broadcast binary kernel with one formula for floating-point dtypes
/// (computed in double) and one for integer dtypes (computed in the
/// operands' promoted dtype, which the result has).
template <typename FloatFn, typename IntFn>
static Tensor floatOrIntBinary(const char *name, const Tensor &a, const Tensor &b,
                               FloatFn floatFn, IntFn intFn) {
  auto [x0, y0] = broadcastPair(name, a, b);
  DType t = promoteTypes(a.dtype(), b.dtype());
  Tensor x = cast(x0, t), y = cast(y0, t);
  Tensor out = Tensor::empty(x.shape(), t);
  int64_t n = out.numel();
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    const T *px = x.data<T>(), *py = y.data<T>();
    T *o = out.data<T>();
    if constexpr (std::is_floating_point_v<T> || isHalfLike<D>) {
      for (int64_t i = 0; i < n; ++i)
        o[i] = fromDouble<D>(floatFn(toDouble<D>(px[i]), toDouble<D>(py[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) {
        if (py[i] == 0)
          raise("{}: integer division by zero", name);
        o[i] = T(intFn(px[i], py[i]));
      }
    }
  });
  return out;
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
      [fmodMode](auto p, auto q) {
        // Signed operands widen to int64; x % -1 is 0 (INT64_MIN % -1
        // would overflow). Unsigned ones are never negative.
        using W = std::conditional_t<std::is_signed_v<decltype(p)>, int64_t, uint64_t>;
        W r = std::is_signed_v<W> && W(q) == W(-1) ? W(0) : W(p) % W(q);
        if constexpr (std::is_signed_v<W>)
          if (!fmodMode && r != 0 && ((r < 0) != (q < 0)))
            r += q;
        return r;
      });
}

Tensor floorDiv(const Tensor &a, const Tensor &b) {
  return floatOrIntBinary(
      "floor_div", a, b, [](double p, double q) { return std::floor(p / q); },
      [](auto p, auto q) {
        using W = std::conditional_t<std::is_signed_v<decltype(p)>, int64_t, uint64_t>;
        if (std::is_signed_v<W> && W(q) == W(-1)) // wraps as the dtype does
          return W(uint64_t(0) - uint64_t(p));
        W d = W(p) / W(q);
        if constexpr (std::is_signed_v<W>)
          return (W(p) % W(q) != 0 && ((p < 0) != (q < 0))) ? d - 1 : d;
        return d;
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

/// `binary(Op, x, y)`, the operands swapped for a reflected method.
template <BinaryOp Op, bool Swap>
ElementwiseCall binaryCall(const Expr &e, LowerContext &ctx) {
  Args a(e, ctx);
  ElementwiseCall c;
  c.binary = Op;
  c.x = lhsOperand(a).asView();
  c.y = rhsOperand(a).asView();
  if (Swap)
    std::swap(c.x, c.y);
  return c;
}

template <BinaryOp Op, bool Swap>
StepFn lowerBinary(const Expr &e, OpKind, LowerContext &ctx) {
  ElementwiseCall c = binaryCall<Op, Swap>(e, ctx);
  return binaryStep(
      c.x, c.y, outSlot(e, ctx),
      [](const Tensor &p, const Tensor &q) { return binary(Op, p, q); });
}

template <BinaryOp Op, bool Swap = false> LowerEntry binaryEntry() {
  return LowerEntry(lowerBinary<Op, Swap>, binaryCall<Op, Swap>);
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
                   [to](const Tensor &x) {
                     return isString(x.dtype()) || isString(to) ? castText(x, to) : cast(x, to);
                   });
}

/// ONNX StringNormalizer: stopwords removed (compared after lower-casing
/// both sides unless case sensitive), then the case changed. Letters are
/// changed in the ASCII range; other bytes (UTF-8 included) stay as they
/// are. An empty result is one empty string.
enum class CaseChange { None, Lower, Upper };

std::string changeCase(llvm::StringRef s, CaseChange c) {
  std::string out = s.str();
  if (c == CaseChange::Lower)
    for (char &ch : out)
      ch = llvm::toLower(ch);
  else if (c == CaseChange::Upper)
    for (char &ch : out)
      ch = llvm::toUpper(ch);
  return out;
}

Tensor stringNormalizer(const Tensor &x, CaseChange cc, bool caseSensitive,
                        const llvm::StringSet<> &stopwords) {
  if (!isString(x.dtype()))
    raise("string_normalizer: input must be a string tensor, got {}", dtypeName(x.dtype()).str());
  if (!(x.rank() == 1 || (x.rank() == 2 && x.dim(0) == 1)))
    raise("string_normalizer: input must have shape (C,) or (1, C), got {}", shapeStr(x.shape()));
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < x.numel(); ++i) {
    llvm::StringRef t = stringAt(x, i);
    if (!stopwords.empty() &&
        stopwords.contains(caseSensitive ? t.str() : changeCase(t, CaseChange::Lower)))
      continue;
    ids.push_back(cc == CaseChange::None ? intern(t) : intern(changeCase(t, cc)));
  }
  if (ids.empty())
    ids.push_back(intern(""));
  Shape shape = x.rank() == 1 ? Shape{int64_t(ids.size())} : Shape{1, int64_t(ids.size())};
  Tensor out = Tensor::empty(shape, DType::String);
  std::copy(ids.begin(), ids.end(), out.data<int64_t>());
  return out;
}

StepFn lowerStringNormalizer(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::string action = a.string("case_change_action");
  CaseChange cc = CaseChange::None;
  if (action == "NONE")
    cc = CaseChange::None;
  else if (action == "LOWER")
    cc = CaseChange::Lower;
  else if (action == "UPPER")
    cc = CaseChange::Upper;
  else
    a.fail(fmt::format("case_change_action must be 'LOWER', 'UPPER' or 'NONE', got '{}'", action));
  bool caseSensitive = a.boolean("is_case_sensitive");
  std::string locale = a.string("locale");
  if (!locale.empty() && locale != "en_US" && locale != "en_US.UTF-8" && locale != "C")
    a.fail(fmt::format("locale '{}' is not supported (only the default, en_US and C: "
                       "case changes are ASCII)",
                       locale));
  auto sw = std::make_shared<llvm::StringSet<>>();
  if (!a.isNone("stopwords")) {
    TreeDef t = a.constant("stopwords");
    if (!t.isContainer())
      a.fail("'stopwords' must be a tuple of strings");
    for (size_t i = 0; i < t.numChildren(); ++i) {
      const TreeDef &c = t.child(i);
      if (!c.isConst() || !c.value().isString())
        a.fail("'stopwords' must be a tuple of strings");
      sw->insert(caseSensitive ? c.value().getString()
                               : changeCase(c.value().getString(), CaseChange::Lower));
    }
  }
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [cc, caseSensitive, sw](const Tensor &x) {
    return stringNormalizer(x, cc, caseSensitive, *sw);
  });
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

template <bool Left> StepFn lowerShift(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return binaryStep(lhsOperand(a), rhsOperand(a), outSlot(e, ctx),
                    [](const Tensor &x, const Tensor &y) { return bitShift(x, y, Left); });
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
  t.add("elementwise", {K::Add, K::MAdd, K::MIAdd}, binaryEntry<B::Add>());
  t.add("elementwise", {K::MRAdd}, binaryEntry<B::Add, true>());
  t.add("elementwise", {K::Sub, K::MSub, K::MISub}, binaryEntry<B::Sub>());
  t.add("elementwise", {K::MRSub}, binaryEntry<B::Sub, true>());
  t.add("elementwise", {K::Mul, K::MMul, K::MIMul}, binaryEntry<B::Mul>());
  t.add("elementwise", {K::MRMul}, binaryEntry<B::Mul, true>());
  t.add("elementwise", {K::Div, K::MTrueDiv, K::MITrueDiv},
        binaryEntry<B::Div>());
  t.add("elementwise", {K::MRTrueDiv}, binaryEntry<B::Div, true>());
  t.add("elementwise", {K::Pow, K::MPow}, binaryEntry<B::Pow>());
  t.add("elementwise", {K::MRPow}, binaryEntry<B::Pow, true>());
  t.add("elementwise", {K::Maximum}, binaryEntry<B::Maximum>());
  t.add("elementwise", {K::Minimum}, binaryEntry<B::Minimum>());
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
  t.add("elementwise", {K::MXor}, lowerBitwise<LogicalOp::Xor>);
  t.add("elementwise", {K::MLShift}, lowerShift<true>);
  t.add("elementwise", {K::MRShift}, lowerShift<false>);
  t.add("elementwise", {K::MInvert}, lowerInvert);
  t.add("elementwise", {K::IsNan}, lowerIsNan);
  t.add("elementwise", {K::IsInf}, lowerIsInf);
}

void registerUnary(LowerTable &t) {
  using K = OpKind;
  using U = UnaryOp;
  using M = MathOp;
  t.add("elementwise", {K::Neg, K::MNeg}, unaryEntry<U::Neg>());
  t.add("elementwise", {K::Abs, K::MAbs}, unaryEntry<U::Abs>());
  t.add("elementwise", {K::Exp}, unaryEntry<U::Exp>());
  t.add("elementwise", {K::Log}, unaryEntry<U::Log>());
  t.add("elementwise", {K::Sqrt}, unaryEntry<U::Sqrt>());
  t.add("elementwise", {K::Rsqrt}, unaryEntry<U::Rsqrt>());
  t.add("elementwise", {K::Erf}, unaryEntry<U::Erf>());
  t.add("elementwise", {K::Tanh}, unaryEntry<U::Tanh>());
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
  t.add("elementwise", {OpKind::StringNormalizer}, lowerStringNormalizer);
  t.add("elementwise", {OpKind::CopyDef}, lowerCopyDef);
  t.add("elementwise", {OpKind::ElemwiseDef}, lowerElemwiseDef);
}

} // namespace tmg::rt
