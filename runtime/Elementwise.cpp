//===- Elementwise.cpp - Elementwise kernels ------------------------------===//
//
// Every op is a small functor inlined into a loop over contiguous rows of
// the broadcast plan (Internal.h); the row loops are specialised for the
// stride patterns broadcasting produces (both operands contiguous, one of
// them a scalar) so the compiler can vectorise them.
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/Elementwise.h"

#include <cmath>
#include <limits>

#include "Internal.h"

namespace tmg::rt {
using namespace detail;

llvm::StringRef opName(UnaryOp op) {
  switch (op) {
  case UnaryOp::Neg:
    return "neg";
  case UnaryOp::Abs:
    return "abs";
  case UnaryOp::Exp:
    return "exp";
  case UnaryOp::Log:
    return "log";
  case UnaryOp::Sqrt:
    return "sqrt";
  case UnaryOp::Rsqrt:
    return "rsqrt";
  case UnaryOp::Erf:
    return "erf";
  case UnaryOp::Tanh:
    return "tanh";
  case UnaryOp::Sigmoid:
    return "sigmoid";
  case UnaryOp::Relu:
    return "relu";
  case UnaryOp::Relu6:
    return "relu6";
  case UnaryOp::Gelu:
    return "gelu";
  case UnaryOp::GeluTanh:
    return "gelu_tanh";
  case UnaryOp::Silu:
    return "silu";
  case UnaryOp::Hardswish:
    return "hardswish";
  case UnaryOp::Hardsigmoid:
    return "hardsigmoid";
  }
  return "?";
}

llvm::StringRef opName(BinaryOp op) {
  switch (op) {
  case BinaryOp::Add:
    return "add";
  case BinaryOp::Sub:
    return "sub";
  case BinaryOp::Mul:
    return "mul";
  case BinaryOp::Div:
    return "div";
  case BinaryOp::Pow:
    return "pow";
  case BinaryOp::Maximum:
    return "maximum";
  case BinaryOp::Minimum:
    return "minimum";
  }
  return "?";
}

llvm::StringRef opName(CompareOp op) {
  switch (op) {
  case CompareOp::Equal:
    return "equal";
  case CompareOp::NotEqual:
    return "not_equal";
  case CompareOp::Less:
    return "less";
  case CompareOp::LessEqual:
    return "less_equal";
  case CompareOp::Greater:
    return "greater";
  case CompareOp::GreaterEqual:
    return "greater_equal";
  }
  return "?";
}

Shape broadcastShapes(llvm::StringRef op, llvm::ArrayRef<int64_t> a,
                      llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      raise("{}: shapes {} and {} do not broadcast (dimension {} from the "
            "end: {} vs {})",
            op.str(), shapeStr(a), shapeStr(b), k, da, db);
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

static int promotionRank(DType t) {
  switch (t) {
  case DType::Bool:
    return 0;
  case DType::UInt8:
    return 1;
  case DType::Int8:
    return 2;
  case DType::Int32:
    return 3;
  case DType::Int64:
    return 4;
  case DType::Float16:
    return 5;
  case DType::Float32:
    return 6;
  }
  return 6;
}

DType promoteTypes(DType a, DType b) {
  DType t = promotionRank(a) >= promotionRank(b) ? a : b;
  if (t == DType::Bool || t == DType::UInt8 || t == DType::Int8)
    return DType::Int32;
  return t;
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <DType From, DType To>
static inline StorageT<To> convertElem(StorageT<From> v) {
  if constexpr (From == To) {
    return v;
  } else if constexpr (From == DType::Float16) {
    return convertElem<DType::Float32, To>(halfToFloat(v));
  } else if constexpr (To == DType::Float16) {
    if constexpr (From == DType::Bool)
      return floatToHalf(v ? 1.0f : 0.0f);
    else
      return floatToHalf(float(v));
  } else if constexpr (To == DType::Bool) {
    return v != 0 ? 1 : 0;
  } else if constexpr (From == DType::Bool) {
    return StorageT<To>(v ? 1 : 0);
  } else if constexpr (std::is_integral_v<StorageT<To>> &&
                       std::is_floating_point_v<StorageT<From>>) {
    return fromDouble<To>(double(v));
  } else {
    // Integer narrowing is modular (C++20); integer -> float rounds.
    return static_cast<StorageT<To>>(v);
  }
}

Tensor cast(const Tensor &x, DType to) {
  requireDefined("cast", x, "input");
  Tensor out = Tensor::empty(x.shape(), to);
  if (out.numel() == 0)
    return out;
  // Strided inputs are read through a one-input broadcast plan.
  auto plan = makeBroadcastPlan<1>(x.shape(), {&x});
  int64_t inner = plan.inner(), stride = plan.innerStride(0);
  visitDType(x.dtype(), [&](auto from) {
    visitDType(to, [&](auto dst) {
      constexpr DType F = decltype(from)::value, T = decltype(dst)::value;
      const StorageT<F> *in = viewElems<StorageT<F>>(x);
      StorageT<T> *o = out.data<StorageT<T>>();
      parallelRows(plan, [&](int64_t oo, const std::array<int64_t, 1> &off) {
        const StorageT<F> *pi = in + off[0];
        StorageT<T> *po = o + oo;
        if (stride == 1)
          for (int64_t i = 0; i < inner; ++i)
            po[i] = convertElem<F, T>(pi[i]);
        else
          for (int64_t i = 0; i < inner; ++i)
            po[i] = convertElem<F, T>(pi[i * stride]);
      });
    });
  });
  return out;
}

/// `x` converted to `t` unless it already has that dtype (no copy then).
static Tensor as(const Tensor &x, DType t) {
  return x.dtype() == t ? x : cast(x, t);
}

//===----------------------------------------------------------------------===//
// Binary
//===----------------------------------------------------------------------===//

template <typename T> static inline T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return a + b;
}
template <typename T> static inline T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) - std::make_unsigned_t<T>(b));
  else
    return a - b;
}
template <typename T> static inline T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
  else
    return a * b;
}
/// Integer power by squaring (exp >= 0, checked by the caller), wrapping.
template <typename T> static inline T intPow(T base, T exp) {
  using U = std::make_unsigned_t<T>;
  U result = 1, b = U(base);
  for (; exp > 0; exp >>= 1) {
    if (exp & 1)
      result *= b;
    b *= b;
  }
  return T(result);
}

/// Evaluates f over a two-input broadcast plan into `o`.
template <typename A, typename B, typename Out, typename F>
static void runBinary(const BroadcastPlan<2> &p, const A *a, const B *b, Out *o,
                      F f) {
  int64_t n = p.inner();
  int64_t sa = p.innerStride(0), sb = p.innerStride(1);
  parallelRows(p, [&](int64_t oo, const std::array<int64_t, 2> &off) {
    const A *__restrict pa = a + off[0];
    const B *__restrict pb = b + off[1];
    Out *__restrict po = o + oo;
    if (sa == 1 && sb == 1) {
      for (int64_t i = 0; i < n; ++i)
        po[i] = f(pa[i], pb[i]);
    } else if (sa == 0 && sb == 1) {
      A va = *pa;
      for (int64_t i = 0; i < n; ++i)
        po[i] = f(va, pb[i]);
    } else if (sa == 1 && sb == 0) {
      B vb = *pb;
      for (int64_t i = 0; i < n; ++i)
        po[i] = f(pa[i], vb);
    } else if (sa == 0 && sb == 0) {
      Out v = f(*pa, *pb);
      for (int64_t i = 0; i < n; ++i)
        po[i] = v;
    } else { // a strided view
      for (int64_t i = 0; i < n; ++i)
        po[i] = f(pa[i * sa], pb[i * sb]);
    }
  });
}

template <typename T>
static void binaryTyped(BinaryOp op, const BroadcastPlan<2> &p, const T *a,
                        const T *b, T *o) {
  switch (op) {
  case BinaryOp::Add:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapAdd(x, y); });
  case BinaryOp::Sub:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapSub(x, y); });
  case BinaryOp::Mul:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapMul(x, y); });
  case BinaryOp::Div:
    // Integer division is lowered to float32 by the caller.
    return runBinary(p, a, b, o, [](T x, T y) { return T(x / y); });
  case BinaryOp::Pow:
    if constexpr (std::is_integral_v<T>)
      return runBinary(p, a, b, o, [](T x, T y) { return intPow(x, y); });
    else
      return runBinary(p, a, b, o, [](T x, T y) { return std::pow(x, y); });
  case BinaryOp::Maximum:
    // NaN propagates from either side, as NumPy's maximum.
    return runBinary(p, a, b, o,
                     [](T x, T y) { return (x > y || x != x) ? x : y; });
  case BinaryOp::Minimum:
    return runBinary(p, a, b, o,
                     [](T x, T y) { return (x < y || x != x) ? x : y; });
  }
}

Tensor binary(BinaryOp op, const Tensor &a, const Tensor &b) {
  llvm::StringRef name = opName(op);
  requireDefined(name, a, "a");
  requireDefined(name, b, "b");
  Shape shape = broadcastShapes(name, a.shape(), b.shape());
  DType t = promoteTypes(a.dtype(), b.dtype());
  if (t == DType::Float16)
    return cast(binary(op, as(a, DType::Float32), as(b, DType::Float32)),
                DType::Float16);
  Tensor ca = as(a, t), cb = as(b, t);

  if (op == BinaryOp::Pow && t != DType::Float32) {
    bool negative = false;
    visitDType(t, [&](auto tag) {
      using T = StorageT<decltype(tag)::value>;
      Tensor dense = cb.contiguous();
      const T *e = dense.data<T>();
      for (int64_t i = 0; i < dense.numel() && !negative; ++i)
        negative = e[i] < 0;
    });
    if (negative)
      raise("pow: integer base {} with a negative integer exponent in {} "
            "(cast to float32 first)",
            describe("a", a), describe("b", b));
  }

  DType outType = op == BinaryOp::Div ? DType::Float32 : t;
  Tensor out = Tensor::empty(shape, outType);
  if (out.numel() == 0)
    return out;
  auto plan = makeBroadcastPlan<2>(shape, {&ca, &cb});
  switch (t) {
  case DType::Float32:
    binaryTyped(op, plan, viewElems<float>(ca), viewElems<float>(cb),
                out.data<float>());
    break;
  case DType::Int32:
  case DType::Int64:
    visitDType(t, [&](auto tag) {
      constexpr DType D = decltype(tag)::value;
      if constexpr (D == DType::Int32 || D == DType::Int64) {
        using T = StorageT<D>;
        if (op == BinaryOp::Div)
          runBinary(plan, viewElems<T>(ca), viewElems<T>(cb), out.data<float>(),
                    [](T x, T y) { return float(double(x) / double(y)); });
        else
          binaryTyped(op, plan, viewElems<T>(ca), viewElems<T>(cb), out.data<T>());
      }
    });
    break;
  default:
    raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str());
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Compare
//===----------------------------------------------------------------------===//

template <typename T>
static void compareTyped(CompareOp op, const BroadcastPlan<2> &p, const T *a,
                         const T *b, uint8_t *o) {
  switch (op) {
  case CompareOp::Equal:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x == y); });
  case CompareOp::NotEqual:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x != y); });
  case CompareOp::Less:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x < y); });
  case CompareOp::LessEqual:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x <= y); });
  case CompareOp::Greater:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x > y); });
  case CompareOp::GreaterEqual:
    return runBinary(p, a, b, o, [](T x, T y) { return uint8_t(x >= y); });
  }
}

Tensor compare(CompareOp op, const Tensor &a, const Tensor &b) {
  llvm::StringRef name = opName(op);
  requireDefined(name, a, "a");
  requireDefined(name, b, "b");
  Shape shape = broadcastShapes(name, a.shape(), b.shape());
  DType t = promoteTypes(a.dtype(), b.dtype());
  if (t == DType::Float16)
    t = DType::Float32; // exact: every half is a float
  Tensor ca = as(a, t), cb = as(b, t);
  Tensor out = Tensor::empty(shape, DType::Bool);
  if (out.numel() == 0)
    return out;
  auto plan = makeBroadcastPlan<2>(shape, {&ca, &cb});
  switch (t) {
  case DType::Float32:
    compareTyped(op, plan, viewElems<float>(ca), viewElems<float>(cb),
                 out.data<uint8_t>());
    break;
  case DType::Int32:
    compareTyped(op, plan, viewElems<int32_t>(ca), viewElems<int32_t>(cb),
                 out.data<uint8_t>());
    break;
  case DType::Int64:
    compareTyped(op, plan, viewElems<int64_t>(ca), viewElems<int64_t>(cb),
                 out.data<uint8_t>());
    break;
  default:
    raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str());
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Where
//===----------------------------------------------------------------------===//

template <typename T>
static void whereTyped(const BroadcastPlan<3> &p, const uint8_t *m, const T *x,
                       const T *y, T *o) {
  int64_t n = p.inner();
  int64_t sm = p.innerStride(0), sx = p.innerStride(1), sy = p.innerStride(2);
  parallelRows(p, [&](int64_t oo, const std::array<int64_t, 3> &off) {
    const uint8_t *pm = m + off[0];
    const T *px = x + off[1], *py = y + off[2];
    T *po = o + oo;
    if (sm == 1 && sx == 1 && sy == 1) {
      for (int64_t i = 0; i < n; ++i)
        po[i] = pm[i] ? px[i] : py[i];
    } else {
      for (int64_t i = 0; i < n; ++i)
        po[i] = pm[i * sm] ? px[i * sx] : py[i * sy];
    }
  });
}

Tensor where(const Tensor &mask, const Tensor &x, const Tensor &y) {
  requireDefined("where", mask, "mask");
  requireDefined("where", x, "x");
  requireDefined("where", y, "y");
  if (mask.dtype() != DType::Bool)
    raise("where: {} must be bool, got {}", describe("mask", mask),
          dtypeName(mask.dtype()).str());
  Shape xy = broadcastShapes("where", x.shape(), y.shape());
  Shape shape = broadcastShapes("where", mask.shape(), xy);
  // Plain selection: keep the operands' dtype when they agree, so where()
  // works on every dtype (including bool, int8 and float16).
  DType t =
      x.dtype() == y.dtype() ? x.dtype() : promoteTypes(x.dtype(), y.dtype());
  Tensor cx = as(x, t), cy = as(y, t);
  Tensor out = Tensor::empty(shape, t);
  if (out.numel() == 0)
    return out;
  auto plan = makeBroadcastPlan<3>(shape, {&mask, &cx, &cy});
  visitBySize(dtypeSize(t), [&](auto tag) {
    using T = decltype(tag);
    whereTyped(plan, viewElems<uint8_t>(mask), viewElems<T>(cx), viewElems<T>(cy),
               out.data<T>());
  });
  return out;
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// True for the ops that keep integer dtypes.
static bool isIntegerPreserving(UnaryOp op) {
  return op == UnaryOp::Neg || op == UnaryOp::Abs || op == UnaryOp::Relu ||
         op == UnaryOp::Relu6;
}

template <typename In, typename Out, typename F>
static void runUnary(const In *x, Out *o, int64_t n, int64_t grain, F f) {
  parallelFor(n, grain, [&](int64_t b, int64_t e) {
    const In *__restrict px = x;
    Out *__restrict po = o;
    for (int64_t i = b; i < e; ++i)
      po[i] = f(px[i]);
  });
}

template <typename T>
static void unaryInteger(UnaryOp op, const T *x, T *o, int64_t n) {
  using U = std::make_unsigned_t<T>;
  switch (op) {
  case UnaryOp::Neg:
    return runUnary(x, o, n, ElementwiseGrain,
                    [](T v) { return T(U(0) - U(v)); });
  case UnaryOp::Abs:
    return runUnary(x, o, n, ElementwiseGrain,
                    [](T v) { return v < 0 ? T(U(0) - U(v)) : v; });
  case UnaryOp::Relu:
    return runUnary(x, o, n, ElementwiseGrain,
                    [](T v) { return v < 0 ? T(0) : v; });
  case UnaryOp::Relu6:
    return runUnary(x, o, n, ElementwiseGrain,
                    [](T v) { return v < 0 ? T(0) : (v > 6 ? T(6) : v); });
  default:
    return; // unreachable: converted to float32 by the caller
  }
}

static void unaryFloat(UnaryOp op, const float *x, float *o, int64_t n) {
  // Transcendental functions cost tens of cycles: a smaller grain.
  constexpr int64_t Cheap = ElementwiseGrain, Costly = ElementwiseGrain / 16;
  switch (op) {
  case UnaryOp::Neg:
    return runUnary(x, o, n, Cheap, [](float v) { return -v; });
  case UnaryOp::Abs:
    return runUnary(x, o, n, Cheap, [](float v) { return std::fabs(v); });
  case UnaryOp::Exp:
    return runUnary(x, o, n, Costly, [](float v) { return std::exp(v); });
  case UnaryOp::Log:
    return runUnary(x, o, n, Costly, [](float v) { return std::log(v); });
  case UnaryOp::Sqrt:
    return runUnary(x, o, n, Cheap, [](float v) { return std::sqrt(v); });
  case UnaryOp::Rsqrt:
    return runUnary(x, o, n, Cheap,
                    [](float v) { return 1.0f / std::sqrt(v); });
  case UnaryOp::Erf:
    return runUnary(x, o, n, Costly, [](float v) { return std::erf(v); });
  case UnaryOp::Tanh:
    return runUnary(x, o, n, Costly, [](float v) { return std::tanh(v); });
  case UnaryOp::Sigmoid:
    return runUnary(x, o, n, Costly,
                    [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  case UnaryOp::Relu:
    return runUnary(x, o, n, Cheap,
                    [](float v) { return v < 0.0f ? 0.0f : v; });
  case UnaryOp::Relu6:
    return runUnary(x, o, n, Cheap, [](float v) {
      return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
    });
  case UnaryOp::Gelu:
    return runUnary(x, o, n, Costly, [](float v) {
      return 0.5f * v * (1.0f + std::erf(v * float(M_SQRT1_2)));
    });
  case UnaryOp::GeluTanh:
    return runUnary(x, o, n, Costly, [](float v) {
      constexpr float K = 0.7978845608028654f; // sqrt(2 / pi)
      return 0.5f * v * (1.0f + std::tanh(K * (v + 0.044715f * v * v * v)));
    });
  case UnaryOp::Silu:
    return runUnary(x, o, n, Costly,
                    [](float v) { return v / (1.0f + std::exp(-v)); });
  case UnaryOp::Hardswish:
    return runUnary(x, o, n, Cheap, [](float v) {
      float r = v + 3.0f;
      r = r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r);
      return v * r * (1.0f / 6.0f);
    });
  case UnaryOp::Hardsigmoid:
    return runUnary(x, o, n, Cheap, [](float v) {
      float r = v * (1.0f / 6.0f) + 0.5f;
      return r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
    });
  }
}

Tensor unary(UnaryOp op, const Tensor &x) {
  llvm::StringRef name = opName(op);
  requireDefined(name, x, "input");
  DType t = x.dtype();
  if (t == DType::Float16)
    return cast(unary(op, cast(x, DType::Float32)), DType::Float16);
  if (t != DType::Float32)
    t = isIntegerPreserving(op) ? promoteTypes(t, DType::Int32)
                                : DType::Float32;
  Tensor cx = as(x, t);
  Tensor out = Tensor::empty(x.shape(), t);
  int64_t n = x.numel();
  switch (t) {
  case DType::Float32:
    unaryFloat(op, cx.data<float>(), out.data<float>(), n);
    break;
  case DType::Int32:
    unaryInteger(op, cx.data<int32_t>(), out.data<int32_t>(), n);
    break;
  case DType::Int64:
    unaryInteger(op, cx.data<int64_t>(), out.data<int64_t>(), n);
    break;
  default:
    raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str());
  }
  return out;
}

Tensor leakyRelu(const Tensor &x, double negativeSlope) {
  requireDefined("leaky_relu", x, "input");
  if (x.dtype() == DType::Float16)
    return cast(leakyRelu(cast(x, DType::Float32), negativeSlope),
                DType::Float16);
  Tensor cx = as(x, DType::Float32);
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  float s = float(negativeSlope);
  runUnary(cx.data<float>(), out.data<float>(), x.numel(), ElementwiseGrain,
           [s](float v) { return v >= 0.0f ? v : v * s; });
  return out;
}

Tensor clip(const Tensor &x, std::optional<double> lower,
            std::optional<double> upper) {
  requireDefined("clip", x, "input");
  if ((lower && std::isnan(*lower)) || (upper && std::isnan(*upper)))
    raise("clip: bounds must not be NaN");
  if (lower && upper && *lower > *upper)
    raise("clip: lower bound {} is greater than upper bound {} for {}", *lower,
          *upper, describe("input", x));
  if (x.dtype() == DType::Float16)
    return cast(clip(cast(x, DType::Float32), lower, upper), DType::Float16);
  DType t = x.dtype() == DType::Float32 ? DType::Float32
                                        : promoteTypes(x.dtype(), x.dtype());
  Tensor cx = as(x, t);
  Tensor out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (D == DType::Float32 || D == DType::Int32 ||
                  D == DType::Int64) {
      using T = StorageT<D>;
      T lo = std::numeric_limits<T>::lowest();
      T hi = std::numeric_limits<T>::max();
      if constexpr (std::is_integral_v<T>) {
        // Clipping integers to [ceil(lower), floor(upper)] is exact.
        if (lower)
          lo = fromDouble<D>(std::ceil(*lower));
        if (upper)
          hi = fromDouble<D>(std::floor(*upper));
      } else {
        if (lower)
          lo = T(*lower);
        if (upper)
          hi = T(*upper);
      }
      // min(max(v, lo), hi) as NumPy; the comparisons keep NaN as NaN.
      runUnary(cx.data<T>(), out.data<T>(), x.numel(), ElementwiseGrain,
               [lo, hi](T v) {
                 T r = v < lo ? lo : v;
                 return r > hi ? hi : r;
               });
    }
  });
  return out;
}

} // namespace tmg::rt
