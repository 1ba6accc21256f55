//===- Elementwise.cpp - Elementwise kernels ------------------------------===//
//
// Every op is a small functor inlined into a loop over contiguous rows of
// the broadcast plan (Internal.h); the row loops are specialised for the
// stride patterns broadcasting produces (both operands contiguous, one of
// them a scalar) so the compiler can vectorise them.
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/Elementwise.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <string>

#include "tm/ir/Strings.h"

#include <cmath>
#include <limits>

#include "ElementwiseProgram.h"
#include "Internal.h"
#include "VecMath.h"

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

/// The NumPy broadcast of shapes a and b, or nullopt with `badDim` set to
/// the first dimension (counted from the end) where they disagree.
static std::optional<Shape> broadcastOrNot(llvm::ArrayRef<int64_t> a,
                                           llvm::ArrayRef<int64_t> b,
                                           size_t *badDim = nullptr) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank, 1);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1) {
      if (badDim)
        *badDim = k;
      return std::nullopt;
    }
    out[rank - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcastShapes(llvm::StringRef op, llvm::ArrayRef<int64_t> a,
                      llvm::ArrayRef<int64_t> b) {
  size_t k = 0;
  if (std::optional<Shape> out = broadcastOrNot(a, b, &k))
    return std::move(*out);
  raise("{}: shapes {} and {} do not broadcast (dimension {} from the "
        "end: {} vs {})",
        op.str(), shapeStr(a), shapeStr(b), k, a[a.size() - 1 - k],
        b[b.size() - 1 - k]);
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

template <DType From, DType To>
static inline StorageT<To> convertElem(StorageT<From> v) {
  if constexpr (From == To) {
    return v;
  } else if constexpr (isHalfLike<From>) {
    return convertElem<DType::Float32, To>(float(toDouble<From>(v)));
  } else if constexpr (isHalfLike<To>) {
    float f = From == DType::Bool ? (v ? 1.0f : 0.0f) : float(v);
    return To == DType::Float16 ? floatToHalf(f) : floatToBFloat16(f);
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

/// Element `v` of dtype D as text: the shortest decimal that reads back
/// as the same value (NumPy's str of a float32 / float64), "NaN", "INF",
/// "-INF"; integers in decimal; bool as "True" / "False".
template <DType D> static std::string numberText(StorageT<D> v) {
  if constexpr (D == DType::Bool) {
    return v ? "True" : "False";
  } else if constexpr (std::is_floating_point_v<StorageT<D>> || isHalfLike<D>) {
    double d = toDouble<D>(v);
    if (std::isnan(d))
      return "NaN";
    if (std::isinf(d))
      return d > 0 ? "INF" : "-INF";
    char buf[64];
    std::to_chars_result r;
    if constexpr (D == DType::Float64)
      r = std::to_chars(buf, buf + sizeof buf, d);
    else
      r = std::to_chars(buf, buf + sizeof buf, float(d));
    return std::string(buf, r.ptr);
  } else {
    return std::to_string(v);
  }
}

/// Text `s` as dtype D: floats as strtod reads them ("NaN", "INF", "+INF",
/// "-INF", "1e-3", ...; float32 rounded once), integers in decimal (or as
/// a float truncated toward zero), bool from "True" / "False" or a number.
template <DType D> static StorageT<D> parseNumber(llvm::StringRef text) {
  std::string s = text.trim().str();
  auto bad = [&]() -> StorageT<D> {
    raise("cast: string \"{}\" is not a number ({})", text.str(), dtypeName(D).str());
  };
  if (s.empty())
    return bad();
  if constexpr (D == DType::Bool) {
    if (s == "True" || s == "true")
      return 1;
    if (s == "False" || s == "false")
      return 0;
  }
  const char *b = s.c_str();
  char *end = nullptr;
  if constexpr (std::is_integral_v<StorageT<D>> && !isHalfLike<D> && D != DType::Bool) {
    errno = 0;
    if constexpr (std::is_unsigned_v<StorageT<D>>) {
      if (s[0] != '-') {
        unsigned long long u = std::strtoull(b, &end, 10);
        if (*end == 0 && errno == 0)
          return StorageT<D>(u);
      }
    } else {
      long long i = std::strtoll(b, &end, 10);
      if (*end == 0 && errno == 0)
        return StorageT<D>(i);
    }
  }
  if constexpr (D == DType::Float32 || isHalfLike<D>) {
    float f = std::strtof(b, &end);
    if (*end != 0)
      return bad();
    if constexpr (D == DType::Float32)
      return f;
    else
      return D == DType::Float16 ? floatToHalf(f) : floatToBFloat16(f);
  } else {
    double d = std::strtod(b, &end);
    if (*end != 0)
      return bad();
    return fromDouble<D>(d);
  }
}

/// Casts to and from the string dtype (ONNX Cast, astype): numbers are
/// formatted or parsed element by element. Declared in
/// runtime/ops/KernelUtil.h: only the explicit cast calls it.
Tensor castText(const Tensor &x, DType to);
Tensor castText(const Tensor &x, DType to) {
  requireDefined("cast", x, "input");
  if (!isString(x.dtype()) && !isString(to))
    return cast(x, to);
  if (isString(x.dtype()) && isString(to))
    return x.contiguous();
  Tensor in = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), to);
  int64_t n = x.numel();
  if (isString(to)) {
    int64_t *o = out.data<int64_t>();
    visitDType(x.dtype(), [&](auto tag) {
      constexpr DType D = decltype(tag)::value;
      const StorageT<D> *p = in.data<StorageT<D>>();
      for (int64_t i = 0; i < n; ++i)
        o[i] = intern(numberText<D>(p[i]));
    });
    return out;
  }
  const int64_t *p = in.data<int64_t>();
  visitDType(to, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    StorageT<D> *o = out.data<StorageT<D>>();
    for (int64_t i = 0; i < n; ++i)
      o[i] = parseNumber<D>(text(p[i]));
  });
  return out;
}

Tensor cast(const Tensor &x, DType to) {
  requireDefined("cast", x, "input");
  if (isString(x.dtype()) && isString(to))
    return x;
  // Kernels convert their operands with cast() / asDType(): text is never
  // parsed or written behind an op's back.
  if (isString(x.dtype()) || isString(to))
    raise("cast: {} to {}: strings convert to and from numbers only by an explicit "
          "astype (ONNX Cast)",
          dtypeName(x.dtype()).str(), dtypeName(to).str());
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

/// po[i] = f(pa[i * sa], pb[i * sb]) for i in [0, n), with the stride
/// patterns broadcasting produces (dense, one side a scalar) as loops the
/// compiler vectorises.
template <typename A, typename B, typename Out, typename F>
static inline void binaryRow(const A *__restrict pa, int64_t sa,
                             const B *__restrict pb, int64_t sb,
                             Out *__restrict po, int64_t n, F f) {
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
}

/// Evaluates f over a two-input broadcast plan into `o`.
template <typename A, typename B, typename Out, typename F>
static void runBinary(const BroadcastPlan<2> &p, const A *a, const B *b, Out *o,
                      F f) {
  int64_t n = p.inner();
  int64_t sa = p.innerStride(0), sb = p.innerStride(1);
  parallelRows(p, [&](int64_t oo, const std::array<int64_t, 2> &off) {
    binaryRow(a + off[0], sa, b + off[1], sb, o + oo, n, f);
  });
}

/// One row of a float binary op (see binaryRow). `oneExponent`: b holds
/// one pow exponent for every element of the op, and the exponents
/// PyTorch and ONNX Runtime compute without pow (2, 3, -1, -2, 0.5, -0.5)
/// take those forms, as products, reciprocals and square roots: x * x and
/// 1 / x are pow's correctly rounded result, the others round twice
/// (within an ulp of pow). The one definition of float binary arithmetic:
/// binary() and fused elementwise loops (runFusedElementwise) both run
/// it, so they agree bit for bit.
template <typename T>
[[gnu::always_inline]] static inline void
binaryFloatRowT(BinaryOp op, bool oneExponent, const T *a, int64_t sa,
                const T *b, int64_t sb, T *o, int64_t n) {
  switch (op) {
  case BinaryOp::Add:
    return binaryRow(a, sa, b, sb, o, n, [](T x, T y) { return x + y; });
  case BinaryOp::Sub:
    return binaryRow(a, sa, b, sb, o, n, [](T x, T y) { return x - y; });
  case BinaryOp::Mul:
    return binaryRow(a, sa, b, sb, o, n, [](T x, T y) { return x * y; });
  case BinaryOp::Div:
    return binaryRow(a, sa, b, sb, o, n, [](T x, T y) { return x / y; });
  case BinaryOp::Pow:
    if (oneExponent) {
      T e = *b;
      if (e == T(2))
        return binaryRow(a, sa, b, sb, o, n, [](T x, T) { return x * x; });
      if (e == T(3))
        return binaryRow(a, sa, b, sb, o, n, [](T x, T) { return x * x * x; });
      if (e == T(-1))
        return binaryRow(a, sa, b, sb, o, n, [](T x, T) { return T(1) / x; });
      if (e == T(-2))
        return binaryRow(a, sa, b, sb, o, n,
                         [](T x, T) { return T(1) / (x * x); });
      if (e == T(0.5))
        return binaryRow(a, sa, b, sb, o, n,
                         [](T x, T) { return std::sqrt(x); });
      if (e == T(-0.5))
        return binaryRow(a, sa, b, sb, o, n,
                         [](T x, T) { return T(1) / std::sqrt(x); });
    }
    return binaryRow(a, sa, b, sb, o, n,
                     [](T x, T y) { return std::pow(x, y); });
  case BinaryOp::Maximum:
    // NaN propagates from either side, as NumPy's maximum.
    return binaryRow(a, sa, b, sb, o, n,
                     [](T x, T y) { return (x > y || x != x) ? x : y; });
  case BinaryOp::Minimum:
    return binaryRow(a, sa, b, sb, o, n,
                     [](T x, T y) { return (x < y || x != x) ? x : y; });
  }
}

/// binaryFloatRowT over float32, cloned for AVX-512 and AVX2: every op is
/// one IEEE operation per element (nothing to contract into an FMA), so
/// the clones agree bit for bit with each other and the scalar code.
TM_VECTOR_CLONES
static void binaryFloatRow(BinaryOp op, bool oneExponent, const float *a,
                           int64_t sa, const float *b, int64_t sb, float *o,
                           int64_t n) {
  binaryFloatRowT(op, oneExponent, a, sa, b, sb, o, n);
}
static void binaryFloatRow(BinaryOp op, bool oneExponent, const double *a,
                           int64_t sa, const double *b, int64_t sb, double *o,
                           int64_t n) {
  binaryFloatRowT(op, oneExponent, a, sa, b, sb, o, n);
}

template <typename T>
static void integerBinaryTyped(BinaryOp op, const BroadcastPlan<2> &p,
                               const T *a, const T *b, T *o) {
  switch (op) {
  case BinaryOp::Add:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapAdd(x, y); });
  case BinaryOp::Sub:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapSub(x, y); });
  case BinaryOp::Mul:
    return runBinary(p, a, b, o, [](T x, T y) { return wrapMul(x, y); });
  case BinaryOp::Div:
    // Integer true division is computed by the caller.
    return runBinary(p, a, b, o, [](T x, T y) { return T(x / y); });
  case BinaryOp::Pow:
    return runBinary(p, a, b, o, [](T x, T y) { return intPow(x, y); });
  case BinaryOp::Maximum:
    return runBinary(p, a, b, o, [](T x, T y) { return x > y ? x : y; });
  case BinaryOp::Minimum:
    return runBinary(p, a, b, o, [](T x, T y) { return x < y ? x : y; });
  }
}

template <typename T>
static void binaryTyped(BinaryOp op, const BroadcastPlan<2> &p, const T *a,
                        const T *b, T *o) {
  if constexpr (std::is_floating_point_v<T>) {
    bool oneExponent = true; // b broadcast over every element
    for (int64_t s : p.strides[1])
      oneExponent &= s == 0;
    int64_t n = p.inner(), sa = p.innerStride(0), sb = p.innerStride(1);
    parallelRows(p, [&](int64_t oo, const std::array<int64_t, 2> &off) {
      binaryFloatRow(op, oneExponent, a + off[0], sa, b + off[1], sb, o + oo,
                     n);
    });
  } else {
    integerBinaryTyped(op, p, a, b, o);
  }
}

/// Throws for an integer pow with a negative exponent (no integer result).
static void requireNonNegativeExponent(const Tensor &a, const Tensor &b, const Tensor &exp) {
  bool negative = false;
  visitDType(exp.dtype(), [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_signed_v<T>) {
      Tensor dense = exp.contiguous();
      const T *e = dense.data<T>();
      for (int64_t i = 0; i < dense.numel() && !negative; ++i)
        negative = e[i] < 0;
    }
  });
  if (negative)
    raise("pow: integer base {} with a negative integer exponent in {} "
          "(cast to float first)",
          describe("a", a), describe("b", b));
}

Tensor binary(BinaryOp op, const Tensor &a, const Tensor &b) {
  llvm::StringRef name = opName(op);
  requireDefined(name, a, "a");
  requireDefined(name, b, "b");
  Shape shape = broadcastShapes(name, a.shape(), b.shape());
  DType t = promoteTypes(a.dtype(), b.dtype());
  // 16-bit floats compute in float32 and round back.
  if (t == DType::Float16 || t == DType::BFloat16)
    return cast(binary(op, asDType(a, DType::Float32), asDType(b, DType::Float32)), t);
  Tensor ca = asDType(a, t), cb = asDType(b, t);
  if (op == BinaryOp::Pow && isInteger(t))
    requireNonNegativeExponent(a, b, cb);
  // A channels-last first operand of the result's shape gives a
  // channels-last result: computed in (N, H, W, C) order over views, so
  // neither it nor the result is transposed in memory.
  if (ca.shape() == llvm::ArrayRef<int64_t>(shape) && isChannelsLast(ca))
    return binary(op, ca.permuted(NchwToChannelsLast),
                  cb.expanded(shape).permuted(NchwToChannelsLast))
        .permuted(ChannelsLastToNchw);

  // Integer true division gives float32.
  DType outType = op == BinaryOp::Div && !isFloat(t) ? DType::Float32 : t;
  Tensor out = Tensor::empty(shape, outType);
  if (out.numel() == 0)
    return out;
  auto plan = makeBroadcastPlan<2>(shape, {&ca, &cb});
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    if constexpr (isHalfLike<D> || D == DType::Bool) {
      raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str()); // promoted away
    } else if constexpr (std::is_integral_v<T>) {
      if (op == BinaryOp::Div)
        runBinary(plan, viewElems<T>(ca), viewElems<T>(cb), out.data<float>(),
                  [](T x, T y) { return float(double(x) / double(y)); });
      else
        binaryTyped(op, plan, viewElems<T>(ca), viewElems<T>(cb), out.data<T>());
    } else {
      binaryTyped(op, plan, viewElems<T>(ca), viewElems<T>(cb), out.data<T>());
    }
  });
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
  if (t == DType::Float16 || t == DType::BFloat16)
    t = DType::Float32; // exact: every 16-bit float is a float
  Tensor ca = asDType(a, t), cb = asDType(b, t);
  Tensor out = Tensor::empty(shape, DType::Bool);
  if (out.numel() == 0)
    return out;
  auto plan = makeBroadcastPlan<2>(shape, {&ca, &cb});
  if (isString(t)) {
    // Equal texts have equal ids.
    if (op != CompareOp::Equal && op != CompareOp::NotEqual)
      raise("{}: dtype string supports only equal and not_equal", name.str());
    compareTyped(op, plan, viewElems<int64_t>(ca), viewElems<int64_t>(cb), out.data<uint8_t>());
    return out;
  }
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    if constexpr (isHalfLike<D>)
      raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str()); // promoted away
    else
      compareTyped(op, plan, viewElems<T>(ca), viewElems<T>(cb), out.data<uint8_t>());
  });
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
  Tensor cx = asDType(x, t), cy = asDType(y, t);
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

/// The float32 ops VecMath computes in SIMD registers.
static std::optional<VecFn> vecFnOf(UnaryOp op) {
  switch (op) {
  case UnaryOp::Exp:
    return VecFn::Exp;
  case UnaryOp::Erf:
    return VecFn::Erf;
  case UnaryOp::Sigmoid:
    return VecFn::Sigmoid;
  case UnaryOp::Silu:
    return VecFn::Silu;
  case UnaryOp::Gelu:
    return VecFn::Gelu;
  default:
    return std::nullopt;
  }
}

/// Float unary op `op` on x[0, n) into o, on the calling thread. The one
/// definition of float unary math: unary() runs it on parts of the tensor,
/// fused elementwise loops (runFusedElementwise) on chunks of rows, and
/// the results agree bit for bit (no element depends on its position).
template <typename T>
static void unaryFloatSpan(UnaryOp op, const T *x, T *o, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (auto f = vecFnOf(op))
      return vecMath(*f, x, o, n);
  }
  auto each = [&](auto f) {
    const T *__restrict px = x;
    T *__restrict po = o;
    for (int64_t i = 0; i < n; ++i)
      po[i] = f(px[i]);
  };
  const T zero = 0, one = 1, half = 0.5, three = 3, six = 6;
  switch (op) {
  case UnaryOp::Neg:
    return each([](T v) { return -v; });
  case UnaryOp::Abs:
    return each([](T v) { return std::fabs(v); });
  case UnaryOp::Exp:
    return each([](T v) { return std::exp(v); });
  case UnaryOp::Log:
    return each([](T v) { return std::log(v); });
  case UnaryOp::Sqrt:
    return each([](T v) { return std::sqrt(v); });
  case UnaryOp::Rsqrt:
    return each([one](T v) { return one / std::sqrt(v); });
  case UnaryOp::Erf:
    return each([](T v) { return std::erf(v); });
  case UnaryOp::Tanh:
    return each([](T v) { return std::tanh(v); });
  case UnaryOp::Sigmoid:
    return each([one](T v) { return one / (one + std::exp(-v)); });
  case UnaryOp::Relu:
    return each([zero](T v) { return v < zero ? zero : v; });
  case UnaryOp::Relu6:
    return each(
        [zero, six](T v) { return v < zero ? zero : (v > six ? six : v); });
  case UnaryOp::Gelu:
    return each([half, one](T v) {
      return half * v * (one + std::erf(v * T(M_SQRT1_2)));
    });
  case UnaryOp::GeluTanh:
    return each([half, one](T v) {
      const T k = T(0.7978845608028654), c = T(0.044715); // sqrt(2 / pi)
      return half * v * (one + std::tanh(k * (v + c * v * v * v)));
    });
  case UnaryOp::Silu:
    return each([one](T v) { return v / (one + std::exp(-v)); });
  case UnaryOp::Hardswish:
    return each([zero, three, six](T v) {
      T r = v + three;
      r = r < zero ? zero : (r > six ? six : r);
      return v * r * (T(1) / six);
    });
  case UnaryOp::Hardsigmoid:
    return each([zero, one, half, six](T v) {
      T r = v * (one / six) + half;
      return r < zero ? zero : (r > one ? one : r);
    });
  }
}

/// Elements per thread below which a float unary op stays serial:
/// transcendental functions cost tens of cycles.
static int64_t unaryGrain(UnaryOp op, bool vectorised) {
  if (vectorised)
    return ElementwiseGrain / 4;
  switch (op) {
  case UnaryOp::Exp:
  case UnaryOp::Log:
  case UnaryOp::Erf:
  case UnaryOp::Tanh:
  case UnaryOp::Sigmoid:
  case UnaryOp::Gelu:
  case UnaryOp::GeluTanh:
  case UnaryOp::Silu:
    return ElementwiseGrain / 16;
  default:
    return ElementwiseGrain;
  }
}

template <typename T>
static void unaryFloat(UnaryOp op, const T *x, T *o, int64_t n) {
  bool vectorised = std::is_same_v<T, float> && vecFnOf(op);
  parallelFor(n, unaryGrain(op, vectorised), [&](int64_t b, int64_t e) {
    unaryFloatSpan(op, x + b, o + b, e - b);
  });
}

Tensor unary(UnaryOp op, const Tensor &x) {
  llvm::StringRef name = opName(op);
  requireDefined(name, x, "input");
  DType t = x.dtype();
  if (t == DType::Float16 || t == DType::BFloat16)
    return cast(unary(op, cast(x, DType::Float32)), t);
  // Integers keep their dtype where the op does (bool counts as int32);
  // the other ops compute on them in float32.
  if (!isFloat(t))
    t = !isIntegerPreserving(op) ? DType::Float32 : t == DType::Bool ? DType::Int32 : t;
  Tensor cx = asDType(x, t);
  Tensor out = Tensor::empty(x.shape(), t);
  int64_t n = x.numel();
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    if constexpr (isHalfLike<D> || D == DType::Bool)
      raise("{}: unsupported dtype {}", name.str(), dtypeName(t).str()); // converted away
    else if constexpr (std::is_floating_point_v<T>)
      unaryFloat(op, cx.data<T>(), out.data<T>(), n);
    else
      unaryInteger(op, cx.data<T>(), out.data<T>(), n);
  });
  return out;
}

Tensor leakyRelu(const Tensor &x, double negativeSlope) {
  requireDefined("leaky_relu", x, "input");
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)
    return cast(leakyRelu(cast(x, DType::Float32), negativeSlope), x.dtype());
  DType t = floatComputeType(x.dtype());
  Tensor cx = asDType(x, t);
  Tensor out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T>) {
      T s = T(negativeSlope);
      runUnary(cx.data<T>(), out.data<T>(), x.numel(), ElementwiseGrain,
               [s](T v) { return v >= T(0) ? v : v * s; });
    }
  });
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
  if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16)
    return cast(clip(cast(x, DType::Float32), lower, upper), x.dtype());
  DType t = x.dtype() == DType::Bool ? DType::Int32 : x.dtype();
  Tensor cx = asDType(x, t);
  Tensor out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (!isHalfLike<D> && D != DType::Bool) {
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

//===----------------------------------------------------------------------===//
// Fused elementwise programs
//===----------------------------------------------------------------------===//

/// The shapes of a program's values: the output's, and whether each
/// instruction's result is a row value (the output's shape with the last
/// axis 1) rather than of the output's shape.
struct ProgramShape {
  Shape out;
  std::vector<bool> rowValue; ///< per instruction
  bool rows = false;          ///< the program runs row by row
};

/// The program's shapes, or nullopt when a leaf is not float32, some
/// instruction's result has neither the output's shape nor a row value's,
/// a reduction is not over the last axis of a value of the output's
/// shape, or rows are longer than MaxFusedRow.
static std::optional<ProgramShape> programShape(const ElementwiseProgram &p,
                                                llvm::ArrayRef<Tensor> leaves) {
  std::vector<Shape> shapes;
  for (const Tensor &t : leaves) {
    if (!t.defined() || t.dtype() != DType::Float32)
      return std::nullopt;
    shapes.emplace_back(t.shape().begin(), t.shape().end());
  }
  bool reduces = false;
  for (const ElementwiseProgram::Instr &in : p.instrs) {
    if (in.unary) {
      shapes.push_back(shapes[in.a]);
    } else if (in.reduce) {
      Shape s = shapes[in.a];
      int64_t rank = int64_t(s.size());
      if (rank == 0 || (in.axis != -1 && in.axis != rank - 1))
        return std::nullopt; // another axis: the op runs on its own
      s.back() = 1;
      shapes.push_back(std::move(s));
      reduces = true;
    } else {
      std::optional<Shape> s = broadcastOrNot(shapes[in.a], shapes[in.b]);
      if (!s)
        return std::nullopt; // the op reports it
      shapes.push_back(std::move(*s));
    }
  }
  ProgramShape ps;
  ps.out = shapes.back();
  Shape row = ps.out;
  if (!row.empty())
    row.back() = 1;
  size_t numLeaves = leaves.size();
  for (size_t k = numLeaves; k < shapes.size(); ++k) {
    bool isRow = shapes[k] != ps.out;
    if (isRow && (ps.out.empty() || shapes[k] != row))
      return std::nullopt;
    ps.rowValue.push_back(isRow);
    ps.rows |= isRow;
  }
  for (const ElementwiseProgram::Instr &in : p.instrs)
    if (in.reduce && (in.a < numLeaves ? shapes[in.a] != ps.out
                                       : bool(ps.rowValue[in.a - numLeaves])))
      return std::nullopt; // a reduction of a row value
  ps.rows |= reduces;
  if (ps.rows && ps.out.back() > MaxFusedRow)
    return std::nullopt;
  return ps;
}

/// How every leaf broadcasts to the output: a BroadcastPlan with any
/// number of inputs. With `rows`, the last axis stays a dimension of its
/// own (a chunk is one whole row).
struct LeafPlan {
  llvm::SmallVector<int64_t, 6> dims;
  std::vector<llvm::SmallVector<int64_t, 6>> strides; ///< per leaf, per dim
};
static LeafPlan leafPlan(llvm::ArrayRef<int64_t> out,
                         llvm::ArrayRef<Tensor> leaves, bool rows) {
  LeafPlan lp;
  for (const Tensor &t : leaves) {
    llvm::ArrayRef<int64_t> st = t.strides();
    lp.strides.push_back(alignedStrides(out.size(), t.shape(), &st));
  }
  if (!rows) {
    lp.dims = mergeBroadcastDims(out, lp.strides);
    return lp;
  }
  llvm::SmallVector<int64_t, 8> last;
  for (auto &st : lp.strides) {
    last.push_back(st.back());
    st.pop_back();
  }
  lp.dims = mergeBroadcastDims(out.drop_back(), lp.strides);
  lp.dims.push_back(out.back());
  for (size_t i = 0; i < lp.strides.size(); ++i)
    lp.strides[i].push_back(last[i]);
  return lp;
}

Tensor runFusedElementwise(const ElementwiseProgram &p,
                           llvm::ArrayRef<Tensor> leaves) {
  using Instr = ElementwiseProgram::Instr;
  size_t numLeaves = p.numLeaves, numInstrs = p.instrs.size();
  if (leaves.size() != numLeaves || numInstrs == 0)
    return Tensor();
  std::optional<ProgramShape> ps = programShape(p, leaves);
  if (!ps)
    return Tensor();
  // As binary(): the first leaf of the output's shape decides the result's
  // layout; a channels-last one gives a channels-last result, the program
  // running over (N, H, W, C) views of every leaf.
  if (!ps->rows)
    for (const Tensor &t : leaves) {
      if (t.shape() != llvm::ArrayRef<int64_t>(ps->out))
        continue;
      if (!isChannelsLast(t))
        break;
      llvm::SmallVector<Tensor, 8> nhwc;
      for (const Tensor &l : leaves)
        nhwc.push_back(l.expanded(ps->out).permuted(NchwToChannelsLast));
      Tensor r = runFusedElementwise(p, nhwc);
      return r.defined() ? r.permuted(ChannelsLastToNchw) : r;
    }
  Tensor result = Tensor::empty(ps->out, DType::Float32);
  int64_t n = result.numel();
  if (n == 0)
    return result;
  const LeafPlan lp = leafPlan(ps->out, leaves, ps->rows);
  const auto &dims = lp.dims;
  const auto &strides = lp.strides;
  size_t outer = dims.size() - 1;
  int64_t inner = dims.back(), rows = n / inner;

  // Per leaf: its data, whether it is the same element everywhere (pow's
  // one exponent, as binary() decides it), and whether chunks of it are
  // gathered into a dense buffer first (a unary op or a reduction reads
  // it, or its inner stride is neither 0 nor 1).
  std::vector<const float *> base(numLeaves);
  std::vector<int64_t> innerStride(numLeaves);
  std::vector<bool> uniform(numLeaves), gather(numLeaves);
  for (size_t i = 0; i < numLeaves; ++i) {
    base[i] = viewElems<float>(leaves[i]);
    innerStride[i] = strides[i].back();
    uniform[i] = std::all_of(strides[i].begin(), strides[i].end(),
                             [](int64_t s) { return s == 0; });
    gather[i] = innerStride[i] != 0 && innerStride[i] != 1;
  }
  for (const Instr &in : p.instrs)
    if ((in.unary || in.reduce) && in.a < numLeaves && innerStride[in.a] != 1)
      gather[in.a] = true;
  // A row value is one element per row: instructions computing one run on
  // that element, others read it broadcast along the row.
  const std::vector<bool> &rowValue = ps->rowValue;
  auto isRow = [&](uint32_t v) {
    return v >= numLeaves && rowValue[v - numLeaves];
  };
  int64_t rowNumel = ps->rows ? n / ps->out.back() : n;

  // Chunks of at most Chunk elements of one row (a whole row when the
  // program has row values); every intermediate value of a chunk lives in
  // a per-thread buffer (Chunk floats per instruction and gathered leaf),
  // in L1 or L2.
  const int64_t Chunk = ps->rows ? inner : std::min<int64_t>(inner, 512);
  int64_t perRow = (inner + Chunk - 1) / Chunk;
  int64_t chunks = rows * perRow;
  int64_t grain =
      std::max<int64_t>(1, ElementwiseGrain / (Chunk * int64_t(numInstrs)));
  parallelFor(chunks, grain, [&](int64_t cb, int64_t ce) {
    static thread_local std::vector<float> scratch;
    size_t need = size_t(Chunk) * (numInstrs + numLeaves);
    if (scratch.size() < need)
      scratch.resize(need);
    float *reg = scratch.data();                     // per instruction
    float *gat = scratch.data() + Chunk * numInstrs; // per gathered leaf
    // The odometer of the first chunk's row.
    int64_t row = cb / perRow;
    llvm::SmallVector<int64_t, 6> idx(outer, 0);
    llvm::SmallVector<int64_t, 8> off(numLeaves, 0);
    for (int64_t rem = row, d = int64_t(outer); d-- > 0;) {
      idx[d] = rem % dims[d];
      rem /= dims[d];
      for (size_t i = 0; i < numLeaves; ++i)
        off[i] += idx[d] * strides[i][d];
    }
    llvm::SmallVector<const float *, 16> ptr(numLeaves + numInstrs);
    llvm::SmallVector<int64_t, 16> step(numLeaves + numInstrs, 1);
    for (int64_t c = cb; c < ce; ++c) {
      int64_t col = (c % perRow) * Chunk, len = std::min(Chunk, inner - col);
      for (size_t i = 0; i < numLeaves; ++i) {
        const float *src = base[i] + off[i] + col * innerStride[i];
        if (gather[i]) {
          float *g = gat + Chunk * i;
          for (int64_t j = 0; j < len; ++j)
            g[j] = src[j * innerStride[i]];
          ptr[i] = g;
          step[i] = 1;
        } else {
          ptr[i] = src;
          step[i] = innerStride[i];
        }
      }
      float *dst = result.data<float>() + row * inner + col;
      for (size_t k = 0; k < numInstrs; ++k) {
        const Instr &in = p.instrs[k];
        bool rowK = rowValue[k];
        float *o = k + 1 == numInstrs ? dst : reg + Chunk * k;
        int64_t m = rowK ? 1 : len;
        if (in.reduce) {
          *o = reduceRowF32(*in.reduce, ptr[in.a], len);
        } else if (in.unary) {
          unaryFloatSpan(*in.unary, ptr[in.a], o, m);
        } else {
          bool oneExponent = in.b < numLeaves ? bool(uniform[in.b])
                             : isRow(in.b)    ? rowNumel == 1
                                              : n == 1;
          binaryFloatRow(in.binary, oneExponent, ptr[in.a], step[in.a],
                         ptr[in.b], step[in.b], o, m);
        }
        ptr[numLeaves + k] = o;
        step[numLeaves + k] = rowK ? 0 : 1; // a row value, broadcast
      }
      if (c % perRow == perRow - 1 && c + 1 < ce) { // next row
        ++row;
        for (size_t d = outer; d-- > 0;) {
          for (size_t i = 0; i < numLeaves; ++i)
            off[i] += strides[i][d];
          if (++idx[d] < dims[d])
            break;
          for (size_t i = 0; i < numLeaves; ++i)
            off[i] -= strides[i][d] * dims[d];
          idx[d] = 0;
        }
      }
    }
  });
  return result;
}

} // namespace tmg::rt
