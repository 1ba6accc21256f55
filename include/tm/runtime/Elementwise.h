//===- Elementwise.h - Elementwise kernels ----------------------*- C++ -*-===//
//
// Unary, binary (NumPy broadcasting), comparison, select and cast kernels.
//
// Dtypes. Arithmetic is computed in float32, int32 or int64:
//  * binary ops promote both operands along bool < uint8 < int8 < int32 <
//    int64 < float16 < float32 (int64 with float32 gives float32); bool,
//    int8 and uint8 results are computed and returned as int32;
//  * `div` is true division: integer operands give float32;
//  * float16 tensors are converted to float32, computed, and the result is
//    converted back to float16 (comparisons return bool);
//  * transcendental unary ops (exp, log, sqrt, rsqrt, erf, tanh, sigmoid,
//    gelu, silu, hardswish, hardsigmoid, leaky_relu) turn integer inputs
//    into float32; neg, abs, relu, relu6 and clip keep integer dtypes.
// Comparisons return bool tensors (one byte per element, 0 or 1).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Common.h"

namespace tmg::rt {

enum class UnaryOp : uint8_t {
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Erf,
  Tanh,
  Sigmoid,
  Relu,
  Relu6,
  Gelu,     ///< x * Phi(x) with the exact normal CDF (erf form)
  GeluTanh, ///< the tanh approximation of GELU
  Silu,     ///< x * sigmoid(x)
  Hardswish,
  Hardsigmoid, ///< clamp(x / 6 + 1 / 2, 0, 1), as PyTorch
};

enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Pow, Maximum, Minimum };

enum class CompareOp : uint8_t {
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
};

/// Op names as errors print them: "neg", "gelu_tanh", "maximum", "less".
llvm::StringRef opName(UnaryOp op);
llvm::StringRef opName(BinaryOp op);
llvm::StringRef opName(CompareOp op);

/// The NumPy broadcast of two shapes (align trailing dimensions; sizes must
/// match or one of them be 1). Throws tmg::Error naming `op` and both shapes
/// when they do not broadcast.
Shape broadcastShapes(llvm::StringRef op, llvm::ArrayRef<int64_t> a,
                      llvm::ArrayRef<int64_t> b);

/// The dtype binary arithmetic on `a` and `b` returns (tm/ir/Tensor.h);
/// `div` differs only in returning float32 for integers.
using tmg::promoteTypes;

/// y = op(x), same shape.
Tensor unary(UnaryOp op, const Tensor &x);
/// y = op(a, b) with broadcasting. `pow` of integers throws on a negative
/// exponent (as NumPy does).
Tensor binary(BinaryOp op, const Tensor &a, const Tensor &b);
/// Bool tensor of op(a, b) with broadcasting; operands are promoted first.
Tensor compare(CompareOp op, const Tensor &a, const Tensor &b);

inline Tensor add(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Add, a, b);
}
inline Tensor sub(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Sub, a, b);
}
inline Tensor mul(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Mul, a, b);
}
inline Tensor div(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Div, a, b);
}
inline Tensor pow(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Pow, a, b);
}
inline Tensor maximum(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Maximum, a, b);
}
inline Tensor minimum(const Tensor &a, const Tensor &b) {
  return binary(BinaryOp::Minimum, a, b);
}

inline Tensor neg(const Tensor &x) { return unary(UnaryOp::Neg, x); }
inline Tensor abs(const Tensor &x) { return unary(UnaryOp::Abs, x); }
inline Tensor exp(const Tensor &x) { return unary(UnaryOp::Exp, x); }
inline Tensor log(const Tensor &x) { return unary(UnaryOp::Log, x); }
inline Tensor sqrt(const Tensor &x) { return unary(UnaryOp::Sqrt, x); }
inline Tensor rsqrt(const Tensor &x) { return unary(UnaryOp::Rsqrt, x); }
inline Tensor erf(const Tensor &x) { return unary(UnaryOp::Erf, x); }
inline Tensor tanh(const Tensor &x) { return unary(UnaryOp::Tanh, x); }
inline Tensor sigmoid(const Tensor &x) { return unary(UnaryOp::Sigmoid, x); }
inline Tensor relu(const Tensor &x) { return unary(UnaryOp::Relu, x); }
inline Tensor relu6(const Tensor &x) { return unary(UnaryOp::Relu6, x); }
inline Tensor silu(const Tensor &x) { return unary(UnaryOp::Silu, x); }
inline Tensor hardswish(const Tensor &x) {
  return unary(UnaryOp::Hardswish, x);
}
inline Tensor hardsigmoid(const Tensor &x) {
  return unary(UnaryOp::Hardsigmoid, x);
}

/// Which GELU formula `gelu` uses.
enum class GeluApprox : uint8_t { None, Tanh };
inline Tensor gelu(const Tensor &x, GeluApprox approx = GeluApprox::None) {
  return unary(approx == GeluApprox::None ? UnaryOp::Gelu : UnaryOp::GeluTanh,
               x);
}

/// y = x >= 0 ? x : negativeSlope * x.
Tensor leakyRelu(const Tensor &x, double negativeSlope = 0.01);

/// y = min(max(x, lower), upper); a missing bound is not applied. Keeps the
/// dtype (bounds are converted to it). Throws when lower > upper.
Tensor clip(const Tensor &x, std::optional<double> lower,
            std::optional<double> upper);

/// out = mask ? x : y, broadcasting all three. `mask` must be bool; x and y
/// are promoted to a common dtype.
Tensor where(const Tensor &mask, const Tensor &x, const Tensor &y);

/// Converts to dtype `to` (any of the seven dtypes to any other). Floating
/// to integer truncates toward zero, saturates at the target's range and
/// maps NaN to 0; anything to bool is `x != 0`; integer narrowing wraps;
/// float16 goes through tmg::halfToFloat / floatToHalf. Casting to the same
/// dtype returns a copy.
Tensor cast(const Tensor &x, DType to);
/// `x` itself when it already has dtype `to` (no copy), else cast(x, to).
inline Tensor asDType(const Tensor &x, DType to) { return x.dtype() == to ? x : cast(x, to); }
/// The dtype kernels that compute in floating point compute `t` in:
/// float64 in itself, every other dtype (16-bit floats, integers, bool) in
/// float32.
inline DType floatComputeType(DType t) {
  return t == DType::Float64 ? DType::Float64 : DType::Float32;
}

inline Tensor equal(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::Equal, a, b);
}
inline Tensor notEqual(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::NotEqual, a, b);
}
inline Tensor less(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::Less, a, b);
}
inline Tensor lessEqual(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::LessEqual, a, b);
}
inline Tensor greater(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::Greater, a, b);
}
inline Tensor greaterEqual(const Tensor &a, const Tensor &b) {
  return compare(CompareOp::GreaterEqual, a, b);
}

} // namespace tmg::rt
