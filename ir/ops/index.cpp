//===- index.cpp - Shape rules of the indexing ops ------------------------===//
//
// Output types of the index family: embedding, gather and take (shaped by
// their indices), gather_nd, one_hot, compress, non_max_suppression and
// unique (of data-dependent lengths),
// scatters, reverse_sequence and __setitem__ (their input's type), and
// __getitem__ with ints, slices, Ellipsis and None.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include <algorithm>

#include "tm/ir/IndexSpec.h"

namespace tmg::shapes {
namespace {

/// The indices' shape plus weight's embedding dim; weight's dtype.
Types embedding(const ShapeContext &c, OpKind) {
  auto x = c.operand(c.arg("inp")), w = c.operand(c.arg("weight"));
  if (!x || !w || !x->shape || !w->shape || w->shape->size() != 2)
    return std::nullopt;
  Shape out = *x->shape;
  out.push_back((*w->shape)[1]);
  return c.one(out, w->dtype);
}

Types gather(const ShapeContext &c, OpKind) {
  auto x = c.first(), idx = c.operand(c.arg("index"));
  return x && idx ? c.one(idx->shape, x->dtype) : std::nullopt;
}

/// take: the input's axis replaced by the indices' dims.
Types take(const ShapeContext &c, OpKind) {
  auto x = c.first(), idx = c.operand(c.arg("indices"));
  auto ax = c.constArg("axis");
  std::optional<int64_t> a;
  if (ax)
    a = intOf(*ax);
  if (!x || !idx || !x->shape || !idx->shape || !a)
    return std::nullopt;
  int64_t a0 = a.value(), r = int64_t(x->shape->size()),
          axis = a0 < 0 ? a0 + r : a0;
  if (axis < 0 || axis >= r)
    c.fail(
        fmt::format("axis {} is out of range for {}", a0, dim::dimsStr(*x->shape)));
  Shape out(x->shape->begin(), x->shape->begin() + axis);
  out.append(idx->shape->begin(), idx->shape->end());
  out.append(x->shape->begin() + axis + 1, x->shape->end());
  return c.one(out, x->dtype);
}

/// The length of dim `n` sliced by `it`: unknown when a bound is read at
/// run time.
int64_t sliceLength(const ShapeContext &c, const IndexSpec &it, int64_t n) {
  if (it.start.leaf || it.stop.leaf || it.step.leaf)
    return kUnknownDim;
  const std::optional<int64_t> &b = it.start.value, &en = it.stop.value;
  int64_t step = it.step.value.value_or(1);
  if (step == 0)
    c.fail("slice step cannot be zero");
  if (!isKnownDim(n)) {
    // A symbolic length: kept where the bounds are relative to the start or
    // the end of the dim (x[2:], x[:-1], x[::2]); bounds that would clamp
    // against the unknown size leave it unknown.
    if (step < 0)
      return kUnknownDim;
    int64_t lo = !b ? 0 : *b >= 0 ? *b : dim::offset(n, *b);
    int64_t hi = !en || *en >= (int64_t(1) << 62) ? n
                 : *en < 0                        ? dim::offset(n, *en)
                                                  : kUnknownDim;
    return dim::ceilDiv(dim::sub(hi, lo), step);
  }
  auto clampIdx = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v)
      return dflt;
    int64_t r = *v < 0 ? *v + n : *v;
    return step > 0 ? std::clamp<int64_t>(r, 0, n)
                    : std::clamp<int64_t>(r, -1, n - 1);
  };
  int64_t s0 = clampIdx(b, step > 0 ? 0 : n - 1);
  int64_t s1 = clampIdx(en, step > 0 ? n : -1);
  return step > 0 ? std::max<int64_t>(0, (s1 - s0 + step - 1) / step)
                  : std::max<int64_t>(0, (s0 - s1 - step - 1) / -step);
}

/// Basic indexing with ints, slices, Ellipsis and None; a slice bound read
/// at run time leaves its dim unknown.
Types getitem(const ShapeContext &c, OpKind) {
  auto x = c.first();
  auto a = c.arg("index");
  if (!x || !a)
    return std::nullopt;
  auto items = decodeIndex(*a);
  if (!items)
    return c.one(std::nullopt, x->dtype); // tensor indices: data dependent
  if (!x->shape)
    return std::nullopt;
  const Shape &xs = *x->shape;
  size_t consumed = 0;
  for (const IndexSpec &it : *items)
    if (it.kind == IndexSpec::Kind::Index || it.kind == IndexSpec::Kind::Slice)
      ++consumed;
  if (consumed > xs.size())
    c.fail(fmt::format("too many indices for {}", dim::dimsStr(xs)));
  Shape out;
  size_t dim = 0;
  for (const IndexSpec &it : *items) {
    switch (it.kind) {
    case IndexSpec::Kind::Ellipsis:
      for (size_t skip = xs.size() - consumed; skip; --skip)
        out.push_back(xs[dim++]);
      consumed = xs.size();
      break;
    case IndexSpec::Kind::NewAxis:
      out.push_back(1);
      break;
    case IndexSpec::Kind::Index:
      if (isKnownDim(xs[dim]) && (it.index < -xs[dim] || it.index >= xs[dim]))
        c.fail(fmt::format("index {} is out of range for dim {} of {}", it.index, dim,
                           dim::dimsStr(xs)));
      ++dim;
      break;
    case IndexSpec::Kind::Slice:
      out.push_back(sliceLength(c, it, xs[dim]));
      ++dim;
      break;
    }
  }
  for (; dim < xs.size(); ++dim)
    out.push_back(xs[dim]);
  return c.one(out, x->dtype);
}

/// gather_nd: indices.shape[:-1] + inp.shape[batch_dims + m:].
Types gatherNd(const ShapeContext &c, OpKind) {
  auto x = c.first(), idx = c.operand(c.arg("indices"));
  auto bd = c.constArg("batch_dims");
  std::optional<int64_t> bo;
  if (bd)
    bo = intOf(*bd);
  if (!x || !idx || !x->shape || !idx->shape || !bo)
    return c.one(std::nullopt, x ? x->dtype : std::nullopt);
  const Shape &xs = *x->shape, &is = *idx->shape;
  int64_t b = bo.value_or(0), r = int64_t(xs.size()), q = int64_t(is.size());
  int64_t m = q ? is.back() : 0;
  if (q < 1 || b < 0 || b >= std::min(r, q) || m < 1 || m > r - b)
    c.fail(fmt::format("indices {} with batch_dims {} do not index input {}", dim::dimsStr(is), b,
                       dim::dimsStr(xs)));
  Shape out(is.begin(), is.end() - 1);
  out.append(xs.begin() + b + m, xs.end());
  return c.one(out, x->dtype);
}

/// one_hot: the input's shape plus num_classes, the input's dtype.
Types oneHot(const ShapeContext &c, OpKind) {
  auto x = c.first();
  auto nc = c.constArg("num_classes");
  auto n = nc ? intOf(*nc) : std::nullopt;
  if (auto a = c.arg("num_classes"); x && a && a->node()) // read at run time
    return c.one(std::nullopt, x->dtype);
  if (!x || !x->shape || !n)
    return std::nullopt;
  Shape out = *x->shape;
  out.push_back(*n);
  return c.one(out, x->dtype);
}

/// compress: the selected length depends on the condition's values.
Types compress(const ShapeContext &c, OpKind) {
  auto x = c.first();
  return x ? c.one(std::nullopt, x->dtype) : std::nullopt;
}

/// non_max_suppression: (selected, 3) int64, the count data-dependent.
Types nms(const ShapeContext &c, OpKind) { return c.one(std::nullopt, DType::Int64); }

/// unique: values of the input's dtype, then three int64 index tensors.
Types unique(const ShapeContext &c, OpKind) {
  auto x = c.first();
  if (!x)
    return std::nullopt;
  TensorTypes out;
  out.push_back(TensorType{std::nullopt, x->dtype});
  for (int i = 0; i < 3; ++i)
    out.push_back(TensorType{std::nullopt, DType::Int64});
  return out;
}

} // namespace

void registerIndexShapeRules(ShapeRuleTable &t) {
  t.add("index", {OpKind::Embedding}, symbolic(embedding));
  t.add("index", {OpKind::Gather}, symbolic(gather));
  t.add("index", {OpKind::Take}, symbolic(take));
  t.add("index", {OpKind::MGetItem}, symbolic(getitem));
  t.add("index", {OpKind::GatherNd}, gatherNd);
  t.add("index", {OpKind::OneHot}, symbolic(oneHot));
  t.add("index", {OpKind::Compress}, symbolic(compress));
  t.add("index", {OpKind::NonMaxSuppression}, symbolic(nms));
  t.add("index", {OpKind::Unique}, symbolic(unique));
  t.add("index", {OpKind::Scatter, OpKind::ScatterNd, OpKind::MSetItem,
                  OpKind::ReverseSequence},
        symbolic([](const ShapeContext &c, OpKind) { return c.same(); }));
}

} // namespace tmg::shapes
