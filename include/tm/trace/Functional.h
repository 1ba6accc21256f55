//===- Functional.h - tmg::F, the functional API of forward -----*- C++ -*-===//
//
// One function per op schema of Ops.def that models use. Each records a
// CallFunction while tracing (printed `nn.relu(x, )`; trailing arguments
// equal to their defaults are left out, as a Python call that does not
// write them) and otherwise runs eagerly on the interpreter's kernels.
// `F::call("name", args...)` reaches every registered function.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <vector>

#include "tm/ir/OpSchema.h"
#include "tm/trace/Var.h"

namespace tmg {

/// Records (tracing) or runs (eager) op `schema` — a function, or a tensor
/// method whose receiver is args.args[0] — with `numOutputs` tensor results
/// (a tuple when more than one).
Value callOp(const OpSchema &schema, CallArgs args, size_t numOutputs = 1);

namespace F {

template <typename... A> Value call(llvm::StringRef fn, A &&...a) {
  CallArgs c;
  (c.add(std::forward<A>(a)), ...);
  return callOp(functionOp(fn), std::move(c));
}

namespace detail {
inline Var one(OpKind k, CallArgs c) { return callOp(op(k), std::move(c)); }
inline Value optInt(std::optional<int64_t> v) { return v ? Value(*v) : Value(); }
inline Value varList(const std::vector<Var> &v) {
  std::vector<Value> items(v.begin(), v.end());
  return Value::list(std::move(items));
}
} // namespace detail

#define TM_F_UNARY(NAME, KIND)                                                 \
  inline Var NAME(const Var &x) { return detail::one(OpKind::KIND, {{x}, {}}); }
TM_F_UNARY(relu, Relu)
TM_F_UNARY(relu6, Relu6)
TM_F_UNARY(sigmoid, Sigmoid)
TM_F_UNARY(gelu, Gelu)
TM_F_UNARY(silu, Silu)
TM_F_UNARY(hswish, Hswish)
TM_F_UNARY(hsigmoid, Hsigmoid)
TM_F_UNARY(tanh, Tanh)
TM_F_UNARY(exp, Exp)
TM_F_UNARY(log, Log)
TM_F_UNARY(sqrt, Sqrt)
TM_F_UNARY(abs, Abs)
TM_F_UNARY(neg, Neg)
#undef TM_F_UNARY

#define TM_F_BINARY(NAME, KIND)                                                \
  inline Var NAME(const Var &x, const Var &y) {                                \
    return detail::one(OpKind::KIND, {{x, y}, {}});                            \
  }
TM_F_BINARY(add, Add)
TM_F_BINARY(sub, Sub)
TM_F_BINARY(mul, Mul)
TM_F_BINARY(div, Div)
TM_F_BINARY(maximum, Maximum)
TM_F_BINARY(minimum, Minimum)
TM_F_BINARY(pow, Pow)
#undef TM_F_BINARY

inline Var leaky_relu(const Var &x, double slope = 0.01) {
  return detail::one(OpKind::LeakyRelu, {{x, slope}, {}});
}
inline Var clip(const Var &x, Value lower, Value upper) {
  return detail::one(OpKind::Clip, {{x, std::move(lower), std::move(upper)}, {}});
}
inline Var softmax(const Var &x, std::optional<int64_t> axis = std::nullopt) {
  return detail::one(OpKind::Softmax, {{x, detail::optInt(axis)}, {}});
}
inline Var logsoftmax(const Var &x, int64_t axis) {
  return detail::one(OpKind::LogSoftmax, {{x, axis}, {}});
}
inline Var linear(const Var &x, const Var &w, const Var &b = Var()) {
  return detail::one(OpKind::Linear, {{x, w, b.defined() ? Value(b) : Value()}, {}});
}
inline Var conv2d(const Var &x, const Var &w, const Var &b = Var(), Value stride = 1,
                  Value padding = 0, Value dilation = 1, int64_t groups = 1) {
  return detail::one(OpKind::Conv2d, {{x, w, b.defined() ? Value(b) : Value(),
                                       std::move(stride), std::move(padding),
                                       std::move(dilation), groups},
                                      {}});
}
inline Var matmul(const Var &a, const Var &b, bool transposeA = false,
                  bool transposeB = false) {
  return detail::one(OpKind::Matmul, {{a, b, transposeA, transposeB}, {}});
}
inline Var max_pool2d(const Var &x, Value kernel, Value stride = Value(), Value padding = 0) {
  return detail::one(OpKind::MaxPool2d,
                     {{x, std::move(kernel), std::move(stride), std::move(padding)}, {}});
}
inline Var avg_pool2d(const Var &x, Value kernel, Value stride = Value(), Value padding = 0) {
  return detail::one(OpKind::AvgPool2d,
                     {{x, std::move(kernel), std::move(stride), std::move(padding)}, {}});
}
inline Var adaptive_avg_pool2d(const Var &x, Value oshp) {
  return detail::one(OpKind::AdaptiveAvgPool2d, {{x, std::move(oshp)}, {}});
}
#define TM_F_REDUCE(NAME, KIND)                                                \
  inline Var NAME(const Var &x, std::optional<int64_t> axis = std::nullopt,    \
                  bool keepdims = false) {                                     \
    return detail::one(OpKind::KIND, {{x, detail::optInt(axis), keepdims}, {}}); \
  }
TM_F_REDUCE(sum, Sum)
TM_F_REDUCE(mean, Mean)
TM_F_REDUCE(max, Max)
TM_F_REDUCE(min, Min)
TM_F_REDUCE(prod, Prod)
TM_F_REDUCE(argmax, Argmax)
TM_F_REDUCE(argmin, Argmin)
#undef TM_F_REDUCE

/// A target of ints, or of ints and traced dims (Var::tracedDim) whose
/// sizes are computed when the traced module runs:
/// `reshape(x, {x.tracedDim(0), -1})`.
inline Var reshape(const Var &x, const ShapeArg &shape) {
  return detail::one(OpKind::Reshape, {{x, shape.value()}, {}});
}
inline Var flatten(const Var &x, int64_t start = 0, int64_t end = -1) {
  return detail::one(OpKind::Flatten, {{x, start, end}, {}});
}
inline Var transpose(const Var &x, std::vector<int64_t> pattern) {
  return detail::one(OpKind::Transpose, {{x, Value::ints(pattern)}, {}});
}
inline Var broadcast_to(const Var &x, const ShapeArg &shape) {
  return detail::one(OpKind::BroadcastTo, {{x, shape.value()}, {}});
}
inline Var expand_dims(const Var &x, int64_t axis) {
  return detail::one(OpKind::ExpandDims, {{x, axis}, {}});
}
inline Var squeeze(const Var &x, std::optional<int64_t> axis = std::nullopt) {
  return detail::one(OpKind::Squeeze, {{x, detail::optInt(axis)}, {}});
}
inline Var concat(const std::vector<Var> &xs, int64_t axis = 0) {
  return detail::one(OpKind::Concat, {{detail::varList(xs), axis}, {}});
}
inline Var stack(const std::vector<Var> &xs, int64_t axis = 0) {
  return detail::one(OpKind::Stack, {{detail::varList(xs), axis}, {}});
}
/// `F.split(x, n, axis)`: n equal parts.
std::vector<Var> split(const Var &x, int64_t sections, int64_t axis = 0);
inline Var where(const Var &mask, const Var &x, const Var &y) {
  return detail::one(OpKind::Where, {{mask, x, y}, {}});
}
inline Var zeros(std::vector<int64_t> shape) {
  return detail::one(OpKind::Zeros, {{Value::ints(shape)}, {}});
}
inline Var ones(std::vector<int64_t> shape) {
  return detail::one(OpKind::Ones, {{Value::ints(shape)}, {}});
}
inline Var full(std::vector<int64_t> shape, double value) {
  return detail::one(OpKind::Full, {{Value::ints(shape), value}, {}});
}
inline Var copy(const Var &x) { return detail::one(OpKind::Copy, {{x}, {}}); }
inline Var fake_quant(const Var &x, double scale, int64_t zeroPoint, int64_t qmin,
                      int64_t qmax) {
  return detail::one(OpKind::FakeQuantize, {{x, scale, zeroPoint, qmin, qmax}, {}});
}

} // namespace F
} // namespace tmg
