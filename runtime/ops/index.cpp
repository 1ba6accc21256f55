//===- index.cpp - Lowering of the indexing family --------------*- C++ -*-===//
//
// gather, take, embedding (a take along axis 0 of the weight), scatter and
// scatter_nd with their reductions, and `x[...]` with constant ints,
// slices (whose bounds may be tensors, read at run time), None and Ellipsis
// (read as a view; tensor indices are not supported). The kernels of
// gather_nd, one_hot, compress, reverse_sequence, unique and
// non_max_suppression live here.
//
//===----------------------------------------------------------------------===//
#include "../Internal.h"
#include "KernelUtil.h"
#include "Lowering.h"
#include "tm/ir/IndexSpec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

namespace {

/// Element i of an int32 or int64 index tensor (contiguous).
int64_t indexAt(const Tensor &t, int64_t i) {
  return t.dtype() == DType::Int64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

void requireIndexDType(const char *op, const Tensor &t, const char *what) {
  requireDef(op, t);
  if (t.dtype() != DType::Int32 && t.dtype() != DType::Int64)
    raise("{}: {} must be int32 or int64, got {}", op, what, dtypeName(t.dtype()).str());
}

/// gather_nd's checks; the result shape.
Shape gatherNdShape(const Tensor &x, const Tensor &ind, int64_t b) {
  requireDef("gather_nd", x);
  requireIndexDType("gather_nd", ind, "indices");
  int64_t r = int64_t(x.rank()), q = int64_t(ind.rank());
  if (q < 1 || b < 0 || b >= std::min(r, q))
    raise("gather_nd: batch_dims {} must be below the ranks of input {} and indices {}", b,
          shapeStr(x.shape()), shapeStr(ind.shape()));
  int64_t m = ind.shape().back();
  if (m < 1 || m > r - b)
    raise("gather_nd: indices {} address {} axes, input {} has {} after the batch axes",
          shapeStr(ind.shape()), m, shapeStr(x.shape()), r - b);
  for (int64_t d = 0; d < b; ++d)
    if (x.dim(d) != ind.dim(d))
      raise("gather_nd: batch axes of input {} and indices {} differ", shapeStr(x.shape()),
            shapeStr(ind.shape()));
  Shape out(ind.shape().begin(), ind.shape().end() - 1);
  out.append(x.shape().begin() + b + m, x.shape().end());
  return out;
}

} // namespace

Tensor gatherNd(const Tensor &x0, const Tensor &ind0, int64_t b) {
  Shape shape = gatherNdShape(x0, ind0, b);
  Tensor x = x0.contiguous(), ind = ind0.contiguous();
  int64_t m = ind.shape().back();
  int64_t inner = shapeNumel(x.shape().drop_front(b + m));
  int64_t perBatch = shapeNumel(ind.shape().drop_front(b).drop_back());
  int64_t count = shapeNumel(ind.shape().drop_back());
  int64_t xBatch = shapeNumel(x.shape().drop_front(b));
  auto xs = contiguousStrides(x.shape());
  std::vector<int64_t> offs(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = (i / perBatch) * xBatch;
    for (int64_t t = 0; t < m; ++t) {
      int64_t v = indexAt(ind, i * m + t), n = x.dim(b + t);
      if (v < -n || v >= n)
        raise("gather_nd: index {} is out of range for axis {} of size {}", v, b + t, n);
      off += (v < 0 ? v + n : v) * xs[b + t];
    }
    offs[i] = off;
  }
  Tensor out = Tensor::empty(shape, x.dtype());
  size_t es = dtypeSize(x.dtype());
  auto *src = static_cast<const char *>(x.rawData());
  auto *dst = static_cast<char *>(out.rawData());
  parallelFor(count, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(inner, 1)),
              [&](int64_t i0, int64_t i1) {
                for (int64_t i = i0; i < i1; ++i)
                  std::memcpy(dst + i * inner * es, src + offs[i] * es, size_t(inner) * es);
              });
  return out;
}

Tensor oneHot(const Tensor &x0, int64_t n) {
  requireDef("one_hot", x0);
  if (n < 1)
    raise("one_hot: num_classes must be positive, got {}", n);
  Tensor x = x0.contiguous();
  Shape shape(x.shape().begin(), x.shape().end());
  shape.push_back(n);
  Tensor out = Tensor::zeros(shape, x.dtype());
  visitDType(x.dtype(), [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    T one = fromDouble<D>(1.0);
    T *po = out.data<T>();
    int64_t cnt = x.numel();
    parallelFor(cnt, ElementwiseGrain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        double v = std::trunc(x.at(i));
        if (v >= -double(n) && v < double(n))
          po[i * n + int64_t(v < 0 ? v + double(n) : v)] = one;
      }
    });
  });
  return out;
}

Tensor compress(const Tensor &x0, const Tensor &cond0, std::optional<int64_t> axis) {
  requireDef("compress", x0);
  requireDef("compress", cond0);
  if (cond0.rank() != 1)
    raise("compress: condition must be 1-D, got {}", shapeStr(cond0.shape()));
  Tensor x = axis ? x0.contiguous() : reshape(x0.contiguous(), {x0.numel()});
  int64_t ax = axis ? normalizeAxis("compress", *axis, x.shape()) : 0;
  Tensor cond = cond0.contiguous();
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.at(i) != 0) {
      if (i >= x.dim(ax))
        raise("compress: condition {} selects past the end of axis {} of size {}",
              shapeStr(cond.shape()), ax, x.dim(ax));
      keep.push_back(i);
    }
  Tensor idx = Tensor::fromInts({int64_t(keep.size())}, keep);
  return take(x, idx, ax);
}

Tensor reverseSequence(const Tensor &x0, const Tensor &lens0, int64_t batchAxis,
                       int64_t timeAxis) {
  requireDef("reverse_sequence", x0);
  requireDef("reverse_sequence", lens0);
  if (x0.rank() < 2 || batchAxis == timeAxis || std::min(batchAxis, timeAxis) != 0 ||
      std::max(batchAxis, timeAxis) != 1)
    raise("reverse_sequence: batch and time axes must be 0 and 1 of a tensor of rank >= 2, "
          "got {} and {} of {}", batchAxis, timeAxis, shapeStr(x0.shape()));
  Tensor x = x0.contiguous(), lens = lens0.contiguous();
  int64_t nb = x.dim(size_t(batchAxis)), nt = x.dim(size_t(timeAxis));
  if (lens.rank() != 1 || lens.numel() != nb)
    raise("reverse_sequence: sequence_lens {} must have one entry per batch entry ({})",
          shapeStr(lens.shape()), nb);
  auto xs = contiguousStrides(x.shape());
  int64_t sb = xs[size_t(batchAxis)], st = xs[size_t(timeAxis)];
  int64_t inner = shapeNumel(x.shape().drop_front(2));
  Tensor out = x.clone();
  size_t es = dtypeSize(x.dtype());
  auto *src = static_cast<const char *>(x.rawData());
  auto *dst = static_cast<char *>(out.rawData());
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t len = int64_t(lens.at(bi));
    if (len < 0 || len > nt)
      raise("reverse_sequence: length {} is out of range for {} time steps", len, nt);
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(dst + (bi * sb + t * st) * es, src + (bi * sb + (len - 1 - t) * st) * es,
                  size_t(inner) * es);
  }
  return out;
}

namespace {

/// Unique's bookkeeping over n rows: groups of equal rows in output order.
struct UniqueGroups {
  std::vector<int64_t> first, counts, inverse;
};

/// Rows of `len` elements of p grouped: equal rows share a group; groups
/// sorted by value or by first occurrence.
template <typename T>
UniqueGroups groupRows(const T *p, int64_t n, int64_t len, bool sorted) {
  auto less = [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(p + a * len, p + (a + 1) * len, p + b * len,
                                        p + (b + 1) * len);
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  std::vector<int64_t> groupOf(static_cast<size_t>(n));
  UniqueGroups g;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || less(order[i - 1], order[i])) {
      g.first.push_back(order[i]);
      g.counts.push_back(0);
    }
    groupOf[size_t(order[i])] = int64_t(g.first.size()) - 1;
    ++g.counts.back();
  }
  std::vector<int64_t> rank(g.first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> byFirst(g.first.size());
    std::iota(byFirst.begin(), byFirst.end(), 0);
    std::sort(byFirst.begin(), byFirst.end(),
              [&](int64_t a, int64_t b) { return g.first[a] < g.first[b]; });
    UniqueGroups r;
    for (size_t i = 0; i < byFirst.size(); ++i) {
      rank[size_t(byFirst[i])] = int64_t(i);
      r.first.push_back(g.first[size_t(byFirst[i])]);
      r.counts.push_back(g.counts[size_t(byFirst[i])]);
    }
    g.first = std::move(r.first);
    g.counts = std::move(r.counts);
  }
  for (int64_t i = 0; i < n; ++i)
    g.inverse.push_back(rank[size_t(groupOf[size_t(i)])]);
  return g;
}

Tensor int64s(const std::vector<int64_t> &v) {
  return Tensor::fromInts({int64_t(v.size())}, v);
}

} // namespace

std::vector<Tensor> unique(const Tensor &x0, std::optional<int64_t> axis, bool sorted) {
  requireDef("unique", x0);
  Tensor x = x0.dtype() == DType::Float16 ? cast(x0, DType::Float32) : x0.contiguous();
  int64_t ax = 0;
  std::vector<int64_t> perm;
  if (axis) {
    ax = normalizeAxis("unique", *axis, x.shape());
    perm.push_back(ax);
    for (int64_t d = 0; d < int64_t(x.rank()); ++d)
      if (d != ax)
        perm.push_back(d);
    x = x.permuted(perm).contiguous();
  } else {
    x = reshape(x, {x.numel()});
  }
  int64_t n = x.rank() ? x.dim(0) : 1, len = n ? x.numel() / n : 0;
  UniqueGroups g = visitDType(x.dtype(), [&](auto tag) {
    return groupRows(x.data<StorageT<decltype(tag)::value>>(), n, len, sorted);
  });
  Tensor y = take(x, int64s(g.first), 0);
  if (axis) {
    std::vector<int64_t> back(perm.size());
    for (size_t i = 0; i < perm.size(); ++i)
      back[size_t(perm[i])] = int64_t(i);
    y = y.permuted(back).contiguous();
  }
  if (x0.dtype() == DType::Float16)
    y = cast(y, DType::Float16);
  return {y, int64s(g.first), int64s(g.inverse), int64s(g.counts)};
}

namespace {

/// A box as (lo0, lo1, hi0, hi1) corners.
struct Box {
  double a0, a1, b0, b1;
  double area() const { return (b0 - a0) * (b1 - a1); }
};

Box boxAt(const float *p, bool center) {
  if (center)
    return {p[0] - p[2] / 2.0, p[1] - p[3] / 2.0, p[0] + p[2] / 2.0, p[1] + p[3] / 2.0};
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
          std::max(p[1], p[3])};
}

/// Whether a and b overlap by more than `thresh` (intersection over union).
bool overlaps(const Box &a, const Box &b, double thresh) {
  double i0 = std::max(a.a0, b.a0), i1 = std::max(a.a1, b.a1);
  double j0 = std::min(a.b0, b.b0), j1 = std::min(a.b1, b.b1);
  double inter = std::max(0.0, j0 - i0) * std::max(0.0, j1 - i1);
  double uni = a.area() + b.area() - inter;
  if (inter <= 0 || uni <= 0)
    return false;
  return inter / uni > thresh;
}

/// The boxes of one batch and class kept, in selection order.
std::vector<int64_t> nmsOne(const float *boxes, const float *scores, int64_t n, int64_t maxOut,
                            double iou, std::optional<double> scoreTh, bool center) {
  std::vector<int64_t> cand;
  for (int64_t i = 0; i < n; ++i)
    if (!scoreTh || scores[i] > *scoreTh)
      cand.push_back(i);
  std::stable_sort(cand.begin(), cand.end(),
                   [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  std::vector<int64_t> kept;
  std::vector<Box> keptBoxes;
  for (int64_t i : cand) {
    if (int64_t(kept.size()) >= maxOut)
      break;
    Box bi = boxAt(boxes + 4 * i, center);
    if (std::none_of(keptBoxes.begin(), keptBoxes.end(),
                     [&](const Box &k) { return overlaps(k, bi, iou); })) {
      kept.push_back(i);
      keptBoxes.push_back(bi);
    }
  }
  return kept;
}

} // namespace

Tensor nonMaxSuppression(const Tensor &boxes0, const Tensor &scores0, int64_t maxPerClass,
                         double iou, std::optional<double> scoreTh, bool center) {
  requireDef("non_max_suppression", boxes0);
  requireDef("non_max_suppression", scores0);
  if (boxes0.rank() != 3 || boxes0.dim(2) != 4 || scores0.rank() != 3 ||
      scores0.dim(0) != boxes0.dim(0) || scores0.dim(2) != boxes0.dim(1))
    raise("non_max_suppression: boxes {} must be (B, N, 4) and scores {} (B, C, N)",
          shapeStr(boxes0.shape()), shapeStr(scores0.shape()));
  Tensor boxes = cast(boxes0, DType::Float32).contiguous();
  Tensor scores = cast(scores0, DType::Float32).contiguous();
  int64_t nb = boxes.dim(0), n = boxes.dim(1), nc = scores.dim(1);
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nc; ++c)
      for (int64_t i : nmsOne(boxes.data<float>() + b * n * 4,
                              scores.data<float>() + (b * nc + c) * n, n,
                              std::max<int64_t>(maxPerClass, 0), iou, scoreTh, center))
        rows.insert(rows.end(), {b, c, i});
  return Tensor::fromInts({int64_t(rows.size() / 3), 3}, rows);
}

// ---- Lowering -----------------------------------------------------------------

namespace {

/// A slice bound of a `__getitem__` index given as a tensor node (MegEngine
/// takes `x[a:b]` with tensors a and b), read when the step runs: the item,
/// which bound (0 start, 1 stop, 2 step) and the tensor.
struct NodeBound {
  size_t item;
  int which;
  Src t;
};

/// The items of a `__getitem__` index whose slice bounds are constants or
/// tensor nodes (those recorded in `bounds`, the item holding a placeholder).
std::vector<IndexItem> indexItems(const ArgRef &idx, const Args &a,
                                  std::vector<NodeBound> &bounds) {
  auto specs = decodeIndex(idx);
  if (!specs)
    a.fail(fmt::format("unsupported index {}: indices are ints, slices (of ints, None or "
                       "tensors), None and Ellipsis",
                       idx.str()));
  std::vector<IndexItem> out;
  for (const IndexSpec &sp : *specs) {
    auto opt = [&](const IndexBound &b, int which) -> std::optional<int64_t> {
      if (b.leaf)
        bounds.push_back({out.size(), which, a.tensorOf(*b.leaf)});
      return b.value;
    };
    switch (sp.kind) {
    case IndexSpec::Kind::Index:
      out.push_back(IndexItem::at(sp.index));
      break;
    case IndexSpec::Kind::NewAxis:
      out.push_back(IndexItem::newAxis());
      break;
    case IndexSpec::Kind::Ellipsis:
      out.push_back(IndexItem::ellipsis());
      break;
    case IndexSpec::Kind::Slice: {
      auto b = opt(sp.start, 0), e = opt(sp.stop, 1), step = opt(sp.step, 2);
      out.push_back(IndexItem::range(b, e, step.value_or(1)));
      break;
    }
    }
  }
  return out;
}

/// `items` with the bounds read from their tensors.
std::vector<IndexItem> withBounds(std::vector<IndexItem> items,
                                  const std::vector<NodeBound> &bounds, const Value *s) {
  for (const NodeBound &b : bounds) {
    std::vector<int64_t> v = tensorInts(b.t.get(s), "a slice bound");
    if (v.size() != 1)
      raise("getitem: a slice bound must be one integer, got {}", v.size());
    IndexItem &it = items[b.item];
    if (b.which == 0)
      it.start = v[0];
    else if (b.which == 1)
      it.stop = v[0];
    else
      it.step = v[0];
  }
  return items;
}

StepFn lowerGetItem(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  auto idx = a.ref("index");
  if (!idx)
    a.fail("missing argument 'index'");
  std::vector<NodeBound> bounds;
  std::vector<IndexItem> items = indexItems(*idx, a, bounds);
  Src x = a.tensor("self").asView();
  if (bounds.empty())
    return unaryStep(x, outSlot(e, ctx), [items](const Tensor &t) { return getitem(t, items); });
  return [x, items, bounds, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = getitem(x.get(s), withBounds(items, bounds, s));
  };
}

StepFn lowerGather(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t axis = a.integer("axis");
  return binaryStep(a.tensor("inp"), a.tensor("index"), outSlot(e, ctx),
                    [axis](const Tensor &x, const Tensor &i) { return gather(x, axis, i); });
}

StepFn lowerTake(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t axis = a.integer("axis");
  return binaryStep(a.tensor("inp"), a.tensor("indices"), outSlot(e, ctx),
                    [axis](const Tensor &x, const Tensor &i) { return take(x, i, axis); });
}

StepFn lowerEmbedding(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp"), w = a.tensor("weight");
  return binaryStep(x, w, outSlot(e, ctx), [](const Tensor &idx, const Tensor &wt) {
    return take(wt, idx, 0);
  });
}

ScatterReduce scatterReduction(const Args &a) {
  std::string r = a.string("reduction");
  std::optional<ScatterReduce> red = parseScatterReduce(r);
  if (!red)
    a.fail(fmt::format("unknown reduction '{}' (none, add, mul, max or min)", r));
  return *red;
}

StepFn lowerScatter(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ScatterReduce red = scatterReduction(a);
  Src x = a.tensor("inp"), u = a.tensor("source"), i = a.tensor("index");
  int64_t axis = a.integer("axis");
  uint32_t o = outSlot(e, ctx);
  return [x, i, u, axis, red, o](Value *s, RunState &) {
    s[o].tensor = scatter(x.get(s), axis, i.get(s), u.get(s), red);
  };
}

StepFn lowerScatterNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ScatterReduce red = scatterReduction(a);
  Src x = a.tensor("inp"), u = a.tensor("updates"), i = a.tensor("indices");
  uint32_t o = outSlot(e, ctx);
  return [x, i, u, red, o](Value *s, RunState &) {
    s[o].tensor = scatterNd(x.get(s), i.get(s), u.get(s), red);
  };
}

StepFn lowerGatherNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t b = a.integer("batch_dims");
  return binaryStep(a.tensor("inp"), a.tensor("indices"), outSlot(e, ctx),
                    [b](const Tensor &x, const Tensor &i) { return gatherNd(x, i, b); });
}

StepFn lowerOneHot(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg n = a.intsArg("num_classes");
  return [x = a.tensor("inp"), n, o = outSlot(e, ctx)](Value *s, RunState &) {
    std::vector<int64_t> v = n.get(s);
    if (v.size() != 1)
      raise("one_hot: num_classes must be one integer, got {} values", v.size());
    s[o].tensor = oneHot(x.get(s), v[0]);
  };
}

StepFn lowerCompress(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::optional<int64_t> axis;
  if (!a.isNone("axis"))
    axis = a.integer("axis");
  return binaryStep(a.tensor("inp"), a.tensor("condition"), outSlot(e, ctx),
                    [axis](const Tensor &x, const Tensor &c) { return compress(x, c, axis); });
}

StepFn lowerReverseSequence(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t b = a.integer("batch_axis"), t = a.integer("time_axis");
  return binaryStep(a.tensor("inp"), a.tensor("sequence_lens"), outSlot(e, ctx),
                    [b, t](const Tensor &x, const Tensor &l) {
                      return reverseSequence(x, l, b, t);
                    });
}

StepFn lowerUnique(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::optional<int64_t> axis;
  if (!a.isNone("axis"))
    axis = a.integer("axis");
  bool sorted = a.boolean("sorted");
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < e.numOutputs(); ++i)
    outs.push_back(outSlot(e, ctx, i));
  if (outs.size() > 4)
    a.fail(fmt::format("unique has 4 outputs, the expr has {}", outs.size()));
  Src x = a.tensor("inp");
  return [x, axis, sorted, outs](Value *s, RunState &) {
    std::vector<Tensor> r = unique(x.get(s), axis, sorted);
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(r[i]);
  };
}

/// The one value of a limit given as a tensor (ONNX passes 1-element ones).
double limitOf(const Tensor &t, const char *what) {
  if (t.numel() != 1)
    raise("non_max_suppression: {} must hold one value, got {}", what, shapeStr(t.shape()));
  return t.at(0);
}

/// The limits may be tensors computed at run time.
StepFn lowerNms(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src maxOut = a.tensor("max_output_boxes_per_class", DType::Int64);
  Src iou = a.tensor("iou_threshold", DType::Float32);
  Src score = a.optTensor("score_threshold");
  bool center = a.boolean("center_point_box");
  Src b = a.tensor("boxes"), sc = a.tensor("scores");
  uint32_t o = outSlot(e, ctx);
  return [=](Value *s, RunState &) {
    std::optional<double> th;
    if (score.defined())
      th = limitOf(score.get(s), "score_threshold");
    s[o].tensor = nonMaxSuppression(
        b.get(s), sc.get(s), int64_t(limitOf(maxOut.get(s), "max_output_boxes_per_class")),
        limitOf(iou.get(s), "iou_threshold"), th, center);
  };
}

} // namespace

void registerIndexLowering(LowerTable &t) {
  t.add("index", {OpKind::MGetItem}, lowerGetItem);
  t.add("index", {OpKind::Gather}, lowerGather);
  t.add("index", {OpKind::Take}, lowerTake);
  t.add("index", {OpKind::Embedding}, lowerEmbedding);
  t.add("index", {OpKind::Scatter}, lowerScatter);
  t.add("index", {OpKind::ScatterNd}, lowerScatterNd);
  t.add("index", {OpKind::GatherNd}, lowerGatherNd);
  t.add("index", {OpKind::OneHot}, lowerOneHot);
  t.add("index", {OpKind::Compress}, lowerCompress);
  t.add("index", {OpKind::ReverseSequence}, lowerReverseSequence);
  t.add("index", {OpKind::Unique}, lowerUnique);
  t.add("index", {OpKind::NonMaxSuppression}, lowerNms);
}

} // namespace tmg::rt
