//===- reduce.cpp - Kernels and lowering: reduction family ------*- C++ -*-===//
//
// sum, mean, max, min and prod (functions and tensor methods; axis None
// reduces every axis), argmax/argmin, and cumsum, whose kernel lives here
// (the others are in Reduce.cpp).
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Lowering.h"

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive, bool reverse) {
  requireDef("cumsum", x);
  int64_t r = int64_t(x.rank());
  if (r == 0 || axis < -r || axis >= r)
    raise("cumsum: axis {} is out of range for {}", axis, shapeStr(x.shape()));
  if (axis < 0)
    axis += r;
  int64_t outer = 1, n = x.dim(size_t(axis)), inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= x.dim(size_t(i));
  for (int64_t i = axis + 1; i < r; ++i)
    inner *= x.dim(size_t(i));
  // 16-bit floats sum in float32 and bool in int64; the result has x's dtype.
  DType t = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16 ? DType::Float32
            : x.dtype() == DType::Bool                                   ? DType::Int64
                                                                          : x.dtype();
  Tensor in = (t == x.dtype() ? x : cast(x, t)).contiguous();
  Tensor out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    if constexpr (!isHalfLike<D> && D != DType::Bool) {
      // Floats accumulate in double; integers wrap as their dtype does.
      using Acc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
      const T *px = in.data<T>();
      T *po = out.data<T>();
#pragma omp parallel for if (outer * inner > 4096) schedule(static)
      for (int64_t oi = 0; oi < outer * inner; ++oi) {
        int64_t o = oi / inner, i = oi % inner;
        Acc acc = 0;
        for (int64_t k = 0; k < n; ++k) {
          int64_t idx = (o * n + (reverse ? n - 1 - k : k)) * inner + i;
          Acc v = Acc(px[idx]);
          if (exclusive)
            po[idx] = T(acc);
          acc += v;
          if (!exclusive)
            po[idx] = T(acc);
        }
      }
    }
  });
  return out.dtype() == x.dtype() ? out : cast(out, x.dtype());
}

// ---- Lowering -----------------------------------------------------------------

namespace {

/// A reduction over constant axes or over a tensor of axes read at run
/// time (empty: every axis).
template <ReduceOp Op> StepFn lowerReduce(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg axes = a.axesArg("axis");
  bool keep = a.boolean("keepdims");
  Src x = a.first();
  return [x, axes, keep, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = reduce(Op, x.get(s), axes.get(s), keep);
  };
}

template <bool Max> StepFn lowerArgReduce(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> axes = a.axes("axis");
  bool keep = a.boolean("keepdims");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [axes, keep](const Tensor &x) {
    return Max ? argmax(x, axes, keep) : argmin(x, axes, keep);
  });
}

StepFn lowerCumsum(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg axis = a.intsArg("axis");
  bool ex = a.boolean("exclusive"), rev = a.boolean("reverse");
  Src x = a.tensor("inp");
  return [x, axis, ex, rev, o = outSlot(e, ctx)](Value *s, RunState &) {
    std::vector<int64_t> ax = axis.get(s);
    if (ax.size() != 1)
      raise("cumsum: the axis must be one integer, got {}", ax.size());
    s[o].tensor = cumsum(x.get(s), ax[0], ex, rev);
  };
}

} // namespace

void registerReduceLowering(LowerTable &t) {
  using K = OpKind;
  t.add("reduce", {K::Sum, K::MSum}, lowerReduce<ReduceOp::Sum>);
  t.add("reduce", {K::Mean, K::MMean}, lowerReduce<ReduceOp::Mean>);
  t.add("reduce", {K::Max, K::MMax}, lowerReduce<ReduceOp::Max>);
  t.add("reduce", {K::Min, K::MMin}, lowerReduce<ReduceOp::Min>);
  t.add("reduce", {K::Prod, K::MProd}, lowerReduce<ReduceOp::Prod>);
  t.add("reduce", {K::Argmax}, lowerArgReduce<true>);
  t.add("reduce", {K::Argmin}, lowerArgReduce<false>);
  t.add("reduce", {K::Cumsum}, lowerCumsum);
}

} // namespace tmg::rt
