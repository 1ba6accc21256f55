//===- Reduce.cpp - Reductions --------------------------------------------===//
//
// Every reduction is brought to the layout (outer, r, inner) of a
// contiguous buffer, reducing the middle axis: the reduced axes either
// already form one contiguous group after dropping size-1 axes, or the
// input is transposed so that they come last. The (outer, r, inner) space
// is cut into tasks of fixed size (r chunks x column chunks) that depend on
// the shape only; partial results are merged in chunk order, so the result
// is the same for every thread count.
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/Reduce.h"

#include <cmath>
#include <limits>

#include "Internal.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
using namespace detail;

llvm::StringRef opName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Mean:
    return "mean";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Prod:
    return "prod";
  }
  return "?";
}

namespace {

struct ReduceLayout {
  int64_t outer, r, inner;
};

/// A validated reduction: the (possibly transposed) input and its layout.
struct Prepared {
  Tensor data;
  ReduceLayout layout;
  Shape outShape;
  int64_t reducedCount; ///< product of the reduced axes' sizes
};

//===-- Reducer policies: Acc init(), step(Acc, T), merge(Acc, Acc)
//--------===//

template <typename T> inline T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) + std::make_unsigned_t<T>(b));
  else
    return a + b;
}
template <typename T> inline T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>)
    return T(std::make_unsigned_t<T>(a) * std::make_unsigned_t<T>(b));
  else
    return a * b;
}

template <typename T, typename AccT> struct SumOp {
  using Acc = AccT;
  static Acc init() { return Acc(0); }
  static Acc step(Acc a, T v) { return wrapAdd(a, Acc(v)); }
  static Acc merge(Acc a, Acc b) { return wrapAdd(a, b); }
};
template <typename T, typename AccT> struct ProdOp {
  using Acc = AccT;
  static Acc init() { return Acc(1); }
  static Acc step(Acc a, T v) { return wrapMul(a, Acc(v)); }
  static Acc merge(Acc a, Acc b) { return wrapMul(a, b); }
};
/// Max/min that propagate NaN (v != v is false for integers).
template <typename T> struct MaxOp {
  using Acc = T;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>)
      return -std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::lowest();
  }
  static Acc step(Acc a, T v) { return (v > a || v != v) ? v : a; }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
};
template <typename T> struct MinOp {
  using Acc = T;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>)
      return std::numeric_limits<T>::infinity();
    else
      return std::numeric_limits<T>::max();
  }
  static Acc step(Acc a, T v) { return (v < a || v != v) ? v : a; }
  static Acc merge(Acc a, Acc b) { return step(a, b); }
};

/// Task sizes: a task covers up to `rChunk` reduced rows of up to `jChunk`
/// columns.
struct Tiling {
  int64_t rChunk, rChunks, jChunk, jChunks;
};

Tiling tileFor(const ReduceLayout &l) {
  constexpr int64_t TaskElems = WholeRowReduce, ColChunk = 512;
  Tiling t;
  t.jChunk = std::min(std::max<int64_t>(l.inner, 1), ColChunk);
  t.jChunks = (l.inner + t.jChunk - 1) / t.jChunk;
  t.rChunk = std::max<int64_t>(1, TaskElems / t.jChunk);
  t.rChunks = std::max<int64_t>(1, (l.r + t.rChunk - 1) / t.rChunk);
  return t;
}

/// Reduces n contiguous values with 8 independent lanes (so the compiler
/// can vectorise without reassociating), merged in a fixed order.
template <class Op, typename T>
typename Op::Acc reduceRow(const T *x, int64_t n) {
  using Acc = typename Op::Acc;
  constexpr int Lanes = 8;
  Acc lane[Lanes];
  for (int k = 0; k < Lanes; ++k)
    lane[k] = Op::init();
  int64_t i = 0;
  for (; i + Lanes <= n; i += Lanes)
    for (int k = 0; k < Lanes; ++k)
      lane[k] = Op::step(lane[k], x[i + k]);
  Acc acc = Op::init();
  for (int k = 0; k < Lanes; ++k)
    acc = Op::merge(acc, lane[k]);
  for (; i < n; ++i)
    acc = Op::step(acc, x[i]);
  return acc;
}

/// Runs Op over the layout and calls finish(outIndex, Acc) once per output.
template <class Op, typename T, typename Finish>
void runReduce(const T *x, const ReduceLayout &l, Finish finish) {
  using Acc = typename Op::Acc;
  Tiling t = tileFor(l);
  int64_t outputs = l.outer * l.inner;
  llvm::SmallVector<Acc, 0> partial(size_t(outputs * t.rChunks));
  int64_t tasks = l.outer * t.rChunks * t.jChunks;
  parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      int64_t o = task / (t.rChunks * t.jChunks);
      int64_t rc = (task / t.jChunks) % t.rChunks, jc = task % t.jChunks;
      int64_t r0 = rc * t.rChunk, r1 = std::min(l.r, r0 + t.rChunk);
      int64_t j0 = jc * t.jChunk, nj = std::min(l.inner - j0, t.jChunk);
      Acc *acc = partial.data() + (o * t.rChunks + rc) * l.inner + j0;
      if (l.inner == 1) {
        acc[0] = reduceRow<Op>(x + o * l.r + r0, r1 - r0);
        continue;
      }
      for (int64_t j = 0; j < nj; ++j)
        acc[j] = Op::init();
      for (int64_t r = r0; r < r1; ++r) {
        const T *row = x + (o * l.r + r) * l.inner + j0;
        for (int64_t j = 0; j < nj; ++j)
          acc[j] = Op::step(acc[j], row[j]);
      }
    }
  });
  parallelFor(outputs, ElementwiseGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      int64_t o = i / l.inner, j = i % l.inner;
      const Acc *p = partial.data() + o * t.rChunks * l.inner + j;
      Acc acc = p[0];
      for (int64_t c = 1; c < t.rChunks; ++c)
        acc = Op::merge(acc, p[c * l.inner]);
      finish(i, acc);
    }
  });
}

} // namespace

/// Validates and brings x to an (outer, r, inner) layout.
static Prepared prepare(llvm::StringRef op, const Tensor &x,
                        llvm::ArrayRef<int64_t> axes, bool keepdims) {
  requireDefined(op, x, "input");
  auto red = normalizeAxes(op, axes, x.shape());
  llvm::SmallVector<bool, 8> isRed(x.rank(), false);
  for (int64_t d : red)
    isRed[d] = true;
  Prepared p;
  p.reducedCount = 1;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (isRed[d]) {
      p.reducedCount *= x.dim(d);
      if (keepdims)
        p.outShape.push_back(1);
    } else {
      p.outShape.push_back(x.dim(d));
    }
  }
  // Runs of reduced / kept axes, ignoring size-1 axes.
  struct Run {
    int64_t size;
    bool reduced;
  };
  llvm::SmallVector<Run, 8> runs;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (x.dim(d) == 1)
      continue;
    if (!runs.empty() && runs.back().reduced == isRed[d])
      runs.back().size *= x.dim(d);
    else
      runs.push_back({x.dim(d), bool(isRed[d])});
  }
  int reducedRuns = 0;
  for (const Run &r : runs)
    reducedRuns += r.reduced;
  if (reducedRuns <= 1) {
    p.data = x;
    p.layout = {1, 1, 1};
    bool after = false;
    for (const Run &r : runs) {
      if (r.reduced) {
        p.layout.r = r.size;
        after = true;
      } else if (after) {
        p.layout.inner *= r.size;
      } else {
        p.layout.outer *= r.size;
      }
    }
    return p;
  }
  // Several separate reduced groups: move the reduced axes last (in
  // ascending order, so arg indices are row-major over them).
  llvm::SmallVector<int64_t, 8> perm;
  for (size_t d = 0; d < x.rank(); ++d)
    if (!isRed[d])
      perm.push_back(int64_t(d));
  for (int64_t d : red)
    perm.push_back(d);
  p.data = contiguous(transpose(x, perm)); // a view: copy it dense, tiled
  // One row per output element (not numel / reducedCount: a reduced axis
  // may have size 0).
  p.layout = {shapeNumel(p.outShape), p.reducedCount, 1};
  return p;
}

/// The dtype a reduction computes in: 16-bit floats via float32, bool as
/// int32, every other dtype in itself.
static DType computeType(DType t) {
  if (t == DType::Float16 || t == DType::BFloat16)
    return DType::Float32;
  return t == DType::Bool ? DType::Int32 : t;
}

Tensor reduce(ReduceOp op, const Tensor &x, llvm::ArrayRef<int64_t> axes,
              bool keepdims) {
  llvm::StringRef name = opName(op);
  requireDefined(name, x, "input");
  DType ct = computeType(x.dtype());
  if (ct != x.dtype()) {
    Tensor r = reduce(op, cast(x, ct), axes, keepdims);
    return (isFloat(x.dtype()) && op != ReduceOp::Mean) ? cast(r, x.dtype()) : r;
  }
  Prepared p = prepare(name, x, axes, keepdims);
  DType outType = op == ReduceOp::Mean && ct != DType::Float64 ? DType::Float32 : ct;
  Tensor out = Tensor::empty(p.outShape, outType);
  if (out.numel() == 0)
    return out;
  if (p.reducedCount == 0) {
    if (op == ReduceOp::Max || op == ReduceOp::Min)
      raise("{}: cannot reduce input {} over a size-0 axis (axes {})",
            name.str(), shapeStr(x.shape()), shapeStr(axes));
    double v = op == ReduceOp::Sum    ? 0.0
               : op == ReduceOp::Prod ? 1.0
                                      : std::nan("");
    return full(p.outShape, v, outType);
  }
  visitDType(ct, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (!isHalfLike<D> && D != DType::Bool) {
      using T = StorageT<D>;
      using Wide = std::conditional_t<std::is_floating_point_v<T>, double, T>;
      const T *px = p.data.template data<T>();
      const ReduceLayout &l = p.layout;
      switch (op) {
      case ReduceOp::Sum: {
        T *po = out.data<T>();
        runReduce<SumOp<T, Wide>>(px, l,
                                  [&](int64_t i, Wide a) { po[i] = T(a); });
        break;
      }
      case ReduceOp::Mean: {
        using Out = std::conditional_t<D == DType::Float64, double, float>;
        Out *po = out.data<Out>();
        double n = double(p.reducedCount);
        runReduce<SumOp<T, double>>(
            px, l, [&](int64_t i, double a) { po[i] = Out(a / n); });
        break;
      }
      case ReduceOp::Prod: {
        T *po = out.data<T>();
        runReduce<ProdOp<T, Wide>>(px, l,
                                   [&](int64_t i, Wide a) { po[i] = T(a); });
        break;
      }
      case ReduceOp::Max: {
        T *po = out.data<T>();
        runReduce<MaxOp<T>>(px, l, [&](int64_t i, T a) { po[i] = a; });
        break;
      }
      case ReduceOp::Min: {
        T *po = out.data<T>();
        runReduce<MinOp<T>>(px, l, [&](int64_t i, T a) { po[i] = a; });
        break;
      }
      }
    }
  });
  return out;
}

float detail::reduceRowF32(ReduceOp op, const float *x, int64_t n) {
  // reduce()'s float32 arithmetic for one task of the (outer, r, 1)
  // layout: reduceRow over the whole row, then the finish of each op.
  switch (op) {
  case ReduceOp::Sum:
    return float(reduceRow<SumOp<float, double>>(x, n));
  case ReduceOp::Mean:
    return float(reduceRow<SumOp<float, double>>(x, n) / double(n));
  case ReduceOp::Prod:
    return float(reduceRow<ProdOp<float, double>>(x, n));
  case ReduceOp::Max:
    return reduceRow<MaxOp<float>>(x, n);
  case ReduceOp::Min:
    return reduceRow<MinOp<float>>(x, n);
  }
  return 0.0f;
}

//===----------------------------------------------------------------------===//
// argmax / argmin
//===----------------------------------------------------------------------===//

namespace {
/// A candidate extreme: value and index along r.
template <typename T> struct Arg {
  T v;
  int64_t i;
};

/// True when v beats the current extreme cur (a NaN beats everything but
/// an earlier NaN).
template <bool IsMax, typename T> inline bool beats(T v, T cur) {
  if (cur != cur)
    return false;
  if (v != v)
    return true;
  return IsMax ? v > cur : v < cur;
}
} // namespace

template <bool IsMax>
static Tensor argReduce(llvm::StringRef op, const Tensor &x,
                        llvm::ArrayRef<int64_t> axes, bool keepdims) {
  requireDefined(op, x, "input");
  DType ct = computeType(x.dtype());
  if (ct != x.dtype())
    return argReduce<IsMax>(op, cast(x, ct), axes, keepdims);
  Prepared p = prepare(op, x, axes, keepdims);
  Tensor out = Tensor::empty(p.outShape, DType::Int64);
  if (out.numel() == 0)
    return out;
  if (p.reducedCount == 0)
    raise("{}: cannot reduce input {} over a size-0 axis (axes {})", op.str(),
          shapeStr(x.shape()), shapeStr(axes));
  int64_t *po = out.data<int64_t>();
  visitDType(ct, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (!isHalfLike<D> && D != DType::Bool) {
      using T = StorageT<D>;
      const T *px = p.data.template data<T>();
      const ReduceLayout l = p.layout;
      Tiling t = tileFor(l);
      int64_t outputs = l.outer * l.inner;
      llvm::SmallVector<Arg<T>, 0> partial(size_t(outputs * t.rChunks));
      int64_t tasks = l.outer * t.rChunks * t.jChunks;
      parallelFor(tasks, 1, [&](int64_t t0, int64_t t1) {
        for (int64_t task = t0; task < t1; ++task) {
          int64_t o = task / (t.rChunks * t.jChunks);
          int64_t rc = (task / t.jChunks) % t.rChunks, jc = task % t.jChunks;
          int64_t r0 = rc * t.rChunk, r1 = std::min(l.r, r0 + t.rChunk);
          int64_t j0 = jc * t.jChunk, nj = std::min(l.inner - j0, t.jChunk);
          Arg<T> *acc = partial.data() + (o * t.rChunks + rc) * l.inner + j0;
          const T *first = px + (o * l.r + r0) * l.inner + j0;
          for (int64_t j = 0; j < nj; ++j)
            acc[j] = {first[j], r0};
          for (int64_t r = r0 + 1; r < r1; ++r) {
            const T *row = px + (o * l.r + r) * l.inner + j0;
            for (int64_t j = 0; j < nj; ++j)
              if (beats<IsMax>(row[j], acc[j].v))
                acc[j] = {row[j], r};
          }
        }
      });
      for (int64_t i = 0; i < outputs; ++i) {
        int64_t o = i / l.inner, j = i % l.inner;
        const Arg<T> *pc = partial.data() + o * t.rChunks * l.inner + j;
        Arg<T> best = pc[0];
        // Later chunks hold later indices: only a strict win replaces.
        for (int64_t c = 1; c < t.rChunks; ++c)
          if (beats<IsMax>(pc[c * l.inner].v, best.v))
            best = pc[c * l.inner];
        po[i] = best.i;
      }
    }
  });
  return out;
}

Tensor argmax(const Tensor &x, llvm::ArrayRef<int64_t> axes, bool keepdims) {
  return argReduce<true>("argmax", x, axes, keepdims);
}

Tensor argmin(const Tensor &x, llvm::ArrayRef<int64_t> axes, bool keepdims) {
  return argReduce<false>("argmin", x, axes, keepdims);
}

} // namespace tmg::rt
