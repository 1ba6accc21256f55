//===- reduce.cpp - Kernels and lowering: reduction family ------*- C++ -*-===//
//
// sum, mean, max, min and prod (functions and tensor methods; axis None
// reduces every axis), argmax/argmin, cumsum and topk, whose kernels live
// here (the others are in Reduce.cpp).
//
//===----------------------------------------------------------------------===//
#include "../Internal.h"
#include "KernelUtil.h"
#include "Lowering.h"

#include <algorithm>
#include <numeric>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

/// Orders positions of one row: by value (NaN above everything), ties by
/// position.
template <typename T> struct TopkOrder {
  const T *v;
  bool desc;
  bool operator()(int64_t a, int64_t b) const {
    T x = v[a], y = v[b];
    bool xn = x != x, yn = y != y;
    if (xn != yn)
      return desc ? xn : yn;
    if (!xn && x != y)
      return desc ? x > y : x < y;
    return a < b;
  }
};

namespace {

void checkTopk(const Tensor &x, int64_t k, bool kthOnly) {
  requireDef("topk", x);
  if (x.rank() == 0)
    raise("topk: input must have at least one dimension, got ()");
  int64_t n = x.shape().back();
  if (k < (kthOnly ? 1 : 0) || k > n)
    raise("topk: k = {} is out of range for the last axis of {}", k, shapeStr(x.shape()));
}

} // namespace

std::pair<Tensor, Tensor> topk(const Tensor &x0, int64_t k, bool desc, bool kthOnly, bool) {
  checkTopk(x0, k, kthOnly);
  Tensor x = x0.dtype() == DType::Float16 ? cast(x0, DType::Float32) : x0.contiguous();
  int64_t n = x.shape().back(), rows = n ? x.numel() / n : 0;
  Shape shape(x.shape().begin(), x.shape().end());
  shape.back() = k;
  Tensor vals = Tensor::empty(shape, x.dtype()), idx = Tensor::empty(shape, DType::Int64);
  visitDType(x.dtype(), [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    const T *px = x.data<T>();
    T *pv = vals.data<T>();
    int64_t *pi = idx.data<int64_t>();
    parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(n, 1)),
                [&](int64_t r0, int64_t r1) {
                  std::vector<int64_t> order(static_cast<size_t>(n));
                  for (int64_t r = r0; r < r1; ++r) {
                    std::iota(order.begin(), order.end(), 0);
                    TopkOrder<T> less{px + r * n, desc};
                    std::partial_sort(order.begin(), order.begin() + k, order.end(), less);
                    for (int64_t j = 0; j < k; ++j) {
                      pv[r * k + j] = px[r * n + order[j]];
                      pi[r * k + j] = order[j];
                    }
                  }
                });
  });
  if (x0.dtype() == DType::Float16)
    vals = cast(vals, DType::Float16);
  if (kthOnly) {
    int64_t last = int64_t(shape.size()) - 1;
    return {vals.selected(last, k - 1).contiguous(), idx.selected(last, k - 1).contiguous()};
  }
  return {vals, idx};
}

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
  Tensor in = asDType(x, t).contiguous();
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

/// reduce(Op, x, {axis}, keepdims=True) in a fused elementwise loop.
template <ReduceOp Op>
ElementwiseCall reduceCall(const Expr &e, LowerContext &ctx) {
  Args a(e, ctx);
  ElementwiseCall c;
  c.reduce = Op;
  c.x = a.first();
  IntsArg axes = a.axesArg("axis");
  c.fusable =
      !axes.runtime() && axes.fixed.size() == 1 && a.boolean("keepdims");
  if (c.fusable)
    c.axis = axes.fixed[0];
  return c;
}

/// The table entry of reduction Op: its step and its ElementwiseCall.
template <ReduceOp Op> LowerEntry reduceEntry() {
  return LowerEntry(lowerReduce<Op>, reduceCall<Op>);
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

StepFn lowerTopk(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  if (e.numOutputs() != 2)
    a.fail(fmt::format("topk returns (values, indices), the expr has {} outputs",
                       e.numOutputs()));
  IntsArg k = a.intsArg("k");
  bool desc = a.boolean("descending"), kth = a.boolean("kth_only"),
       noSort = a.boolean("no_sort");
  Src x = a.tensor("inp");
  uint32_t ov = outSlot(e, ctx, 0), oi = outSlot(e, ctx, 1);
  return [x, k, desc, kth, noSort, ov, oi](Value *s, RunState &) {
    std::vector<int64_t> kv = k.get(s);
    if (kv.size() != 1)
      raise("topk: k must be one integer, got {} values", kv.size());
    auto [v, i] = topk(x.get(s), kv[0], desc, kth, noSort);
    s[ov].tensor = std::move(v);
    s[oi].tensor = std::move(i);
  };
}

} // namespace

void registerReduceLowering(LowerTable &t) {
  using K = OpKind;
  t.add("reduce", {K::Sum, K::MSum}, reduceEntry<ReduceOp::Sum>());
  t.add("reduce", {K::Mean, K::MMean}, reduceEntry<ReduceOp::Mean>());
  t.add("reduce", {K::Max, K::MMax}, reduceEntry<ReduceOp::Max>());
  t.add("reduce", {K::Min, K::MMin}, reduceEntry<ReduceOp::Min>());
  t.add("reduce", {K::Prod, K::MProd}, reduceEntry<ReduceOp::Prod>());
  t.add("reduce", {K::Argmax}, lowerArgReduce<true>);
  t.add("reduce", {K::Argmin}, lowerArgReduce<false>);
  t.add("reduce", {K::Cumsum}, lowerCumsum);
  t.add("reduce", {K::Topk}, lowerTopk);
}

} // namespace tmg::rt
