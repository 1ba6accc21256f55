//===- Index.cpp - Slicing, indexing, padding and resizing ----------------===//
//
// The Shape.h kernels that select or synthesise elements by position:
// slice and getitem (strided views copied out), gather and take (index
// tensors), pad (per-axis source maps) and resize (NCHW interpolation).
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <cstring>

#include "Internal.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
using namespace detail;

namespace {
/// A resolved slice of one axis: `count` elements from `start` by `step`.
struct AxisRange {
  int64_t start, step, count;
};
} // namespace

/// Python's slice.indices() followed by the length computation.
static AxisRange resolveSlice(std::optional<int64_t> start,
                              std::optional<int64_t> stop, int64_t step,
                              int64_t n) {
  int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;
  auto clampIndex = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v)
      return dflt;
    int64_t i = *v < 0 ? *v + n : *v;
    return std::clamp(i, lower, upper);
  };
  int64_t s = clampIndex(start, step > 0 ? lower : upper);
  int64_t e = clampIndex(stop, step > 0 ? upper : lower);
  int64_t count = step > 0 ? (e > s ? (e - s + step - 1) / step : 0)
                           : (s > e ? (s - e - step - 1) / -step : 0);
  return {s, step, count};
}

/// A strided view of x: per output dimension a size and an element stride,
/// `base` the element offset of the first element from x's first element.
/// Shares x's storage unless a stride is negative (a reversed slice), which
/// is copied.
static Tensor stridedView(const Tensor &x, int64_t base,
                          llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<int64_t> strides) {
  if (shapeNumel(shape) == 0)
    return Tensor::empty(shape, x.dtype());
  if (std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s >= 0; }))
    return x.asStrided(shape, strides, x.storageOffset() + base);
  Tensor out = Tensor::empty(shape, x.dtype());
  stridedCopy(dtypeSize(x.dtype()), x.viewData(), base, shape, strides,
              out.rawData());
  return out;
}

Tensor slice(const Tensor &x, llvm::ArrayRef<AxisSlice> slices) {
  requireDefined("slice", x, "input");
  llvm::ArrayRef<int64_t> xs = x.strides();
  Shape shape(x.shape().begin(), x.shape().end());
  llvm::SmallVector<int64_t, 6> strides(xs.begin(), xs.end());
  llvm::SmallVector<bool, 8> done(x.rank(), false);
  int64_t base = 0;
  for (const AxisSlice &s : slices) {
    int64_t ax = normalizeAxis("slice", s.axis, x.shape());
    if (done[ax])
      raise("slice: axis {} is sliced twice for input {}", ax,
            shapeStr(x.shape()));
    done[ax] = true;
    if (s.step == 0)
      raise("slice: step of axis {} must not be 0 for input {}", ax,
            shapeStr(x.shape()));
    AxisRange r = resolveSlice(s.start, s.stop, s.step, x.dim(ax));
    shape[ax] = r.count;
    strides[ax] = xs[ax] * r.step;
    if (r.count > 0)
      base += r.start * xs[ax];
  }
  return stridedView(x, base, shape, strides);
}

Tensor getitem(const Tensor &x, llvm::ArrayRef<IndexItem> items) {
  requireDefined("getitem", x, "input");
  int64_t consumed = 0, ellipses = 0;
  for (const IndexItem &it : items) {
    if (it.kind == IndexItem::Kind::Index || it.kind == IndexItem::Kind::Slice)
      ++consumed;
    else if (it.kind == IndexItem::Kind::Ellipsis)
      ++ellipses;
  }
  if (ellipses > 1)
    raise("getitem: an index can only have a single ellipsis, got {}",
          ellipses);
  if (consumed > int64_t(x.rank()))
    raise("getitem: too many indices for input {}: {} were given",
          shapeStr(x.shape()), consumed);
  llvm::ArrayRef<int64_t> xs = x.strides();
  Shape shape;
  llvm::SmallVector<int64_t, 6> strides;
  int64_t base = 0;
  size_t axis = 0;
  auto keepAxis = [&](size_t d) {
    shape.push_back(x.dim(d));
    strides.push_back(xs[d]);
  };
  for (const IndexItem &it : items) {
    switch (it.kind) {
    case IndexItem::Kind::Index: {
      int64_t n = x.dim(axis), i = it.index < 0 ? it.index + n : it.index;
      if (i < 0 || i >= n)
        raise("getitem: index {} is out of range for axis {} of input {}",
              it.index, axis, shapeStr(x.shape()));
      base += i * xs[axis];
      ++axis;
      break;
    }
    case IndexItem::Kind::Slice: {
      if (it.step == 0)
        raise("getitem: slice step of axis {} must not be 0 for input {}", axis,
              shapeStr(x.shape()));
      AxisRange r = resolveSlice(it.start, it.stop, it.step, x.dim(axis));
      shape.push_back(r.count);
      strides.push_back(xs[axis] * r.step);
      if (r.count > 0)
        base += r.start * xs[axis];
      ++axis;
      break;
    }
    case IndexItem::Kind::Ellipsis: {
      size_t skip = x.rank() - size_t(consumed);
      for (size_t k = 0; k < skip; ++k)
        keepAxis(axis++);
      break;
    }
    case IndexItem::Kind::NewAxis:
      shape.push_back(1);
      strides.push_back(0);
      break;
    }
  }
  while (axis < x.rank())
    keepAxis(axis++);
  // An empty result has nothing to read; `base` may point past the end.
  return stridedView(x, shapeNumel(shape) == 0 ? 0 : base, shape, strides);
}

/// Reads index tensor values as int64 and range-checks them against n
/// (negative values count from the end).
static llvm::SmallVector<int64_t, 0> readIndices(llvm::StringRef op,
                                                 const Tensor &index, int64_t n,
                                                 int64_t axis,
                                                 const Tensor &x) {
  requireDefined(op, index, "index");
  if (index.dtype() != DType::Int32 && index.dtype() != DType::Int64)
    raise("{}: {} must be int32 or int64, got {}", op.str(),
          describe("index", index), dtypeName(index.dtype()).str());
  llvm::SmallVector<int64_t, 0> v(size_t(index.numel()));
  for (int64_t i = 0; i < index.numel(); ++i) {
    int64_t k = index.dtype() == DType::Int32 ? index.data<int32_t>()[i]
                                              : index.data<int64_t>()[i];
    if (k < -n || k >= n)
      raise("{}: index {} is out of range for axis {} of input {} (size {})",
            op.str(), k, axis, shapeStr(x.shape()), n);
    v[i] = k < 0 ? k + n : k;
  }
  return v;
}

Tensor gather(const Tensor &x, int64_t axis, const Tensor &index) {
  requireDefined("gather", x, "input");
  requireDefined("gather", index, "index");
  if (x.rank() == 0)
    raise("gather: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("gather", axis, x.shape());
  bool ok = index.rank() == x.rank();
  for (size_t d = 0; ok && d < x.rank(); ++d)
    ok = int64_t(d) == ax || index.dim(d) <= x.dim(d);
  if (!ok)
    raise("gather: index {} must have the rank of input {} and no larger "
          "sizes outside axis {}",
          shapeStr(index.shape()), shapeStr(x.shape()), ax);
  auto idx = readIndices("gather", index, x.dim(ax), ax, x);
  Tensor out = Tensor::empty(index.shape(), x.dtype());
  if (out.numel() == 0)
    return out;
  auto xs = contiguousStrides(x.shape());
  size_t r = x.rank();
  int64_t inner = index.dim(r - 1);
  int64_t rows = out.numel() / inner;
  visitBySize(dtypeSize(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    const T *px = x.data<T>();
    T *po = out.data<T>();
    parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / inner),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t row = r0; row < r1; ++row) {
                    // Input offset of the row's prefix, except along axis.
                    int64_t off = 0, rem = row;
                    for (size_t d = r - 1; d-- > 0;) {
                      int64_t i = rem % index.dim(d);
                      rem /= index.dim(d);
                      if (int64_t(d) != ax)
                        off += i * xs[d];
                    }
                    const int64_t *ir = idx.data() + row * inner;
                    T *dst = po + row * inner;
                    if (int64_t(r - 1) == ax)
                      for (int64_t j = 0; j < inner; ++j)
                        dst[j] = px[off + ir[j]];
                    else
                      for (int64_t j = 0; j < inner; ++j)
                        dst[j] = px[off + j + ir[j] * xs[ax]];
                  }
                });
  });
  return out;
}

Tensor take(const Tensor &x, const Tensor &index, int64_t axis) {
  requireDefined("take", x, "input");
  if (x.rank() == 0)
    raise("take: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("take", axis, x.shape());
  auto idx = readIndices("take", index, x.dim(ax), ax, x);
  Shape shape(x.shape().begin(), x.shape().begin() + ax);
  shape.append(index.shape().begin(), index.shape().end());
  shape.append(x.shape().begin() + ax + 1, x.shape().end());
  Tensor out = Tensor::empty(shape, x.dtype());
  if (out.numel() == 0)
    return out;
  int64_t outer = shapeNumel(x.shape().take_front(ax));
  int64_t inner = shapeNumel(x.shape().drop_front(ax + 1));
  int64_t k = int64_t(idx.size()), n = x.dim(ax);
  size_t es = dtypeSize(x.dtype());
  auto *src = static_cast<const char *>(x.rawData());
  auto *dst = static_cast<char *>(out.rawData());
  parallelFor(outer * k, std::max<int64_t>(1, ElementwiseGrain / inner),
              [&](int64_t t0, int64_t t1) {
                for (int64_t t = t0; t < t1; ++t) {
                  int64_t o = t / k, j = t % k;
                  std::memcpy(dst + t * inner * es,
                              src + ((o * n + idx[j]) * inner) * es,
                              size_t(inner) * es);
                }
              });
  return out;
}

//===----------------------------------------------------------------------===//
// Scatter
//===----------------------------------------------------------------------===//

std::optional<ScatterReduce> parseScatterReduce(llvm::StringRef s) {
  if (s == "none")
    return ScatterReduce::None;
  if (s == "add")
    return ScatterReduce::Add;
  if (s == "mul")
    return ScatterReduce::Mul;
  if (s == "max")
    return ScatterReduce::Max;
  if (s == "min")
    return ScatterReduce::Min;
  return std::nullopt;
}

namespace {

/// Writes `src` into `dst` under the reduction: elements are combined as
/// the dtype's own arithmetic (none is a copy).
template <typename T> inline void combine(T &dst, T src, ScatterReduce r) {
  switch (r) {
  case ScatterReduce::None:
    dst = src;
    break;
  case ScatterReduce::Add:
    dst = T(dst + src);
    break;
  case ScatterReduce::Mul:
    dst = T(dst * src);
    break;
  case ScatterReduce::Max:
    dst = std::max(dst, src);
    break;
  case ScatterReduce::Min:
    dst = std::min(dst, src);
    break;
  }
}

/// Calls f(T{}) with the arithmetic type of `t` for a scatter with
/// reduction `r`: a plain copy works on any dtype (by size), arithmetic
/// reductions on the numeric dtypes other than float16.
template <typename F>
void visitScatter(llvm::StringRef op, DType t, ScatterReduce r, F &&f) {
  if (r == ScatterReduce::None)
    return visitBySize(dtypeSize(t), f);
  visitDType(t, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    if constexpr (isHalfLike<D> || D == DType::Bool)
      raise("{}: a reduction needs a float32, float64 or integer input, got {}", op.str(),
            dtypeName(t).str());
    else
      f(StorageT<D>{});
  });
}

void requireSameDType(llvm::StringRef op, const Tensor &x, const Tensor &u) {
  if (x.dtype() != u.dtype())
    raise("{}: updates have dtype {} but the input has {}", op.str(),
          dtypeName(u.dtype()).str(), dtypeName(x.dtype()).str());
}

} // namespace

Tensor scatter(const Tensor &x, int64_t axis, const Tensor &index,
               const Tensor &updates, ScatterReduce reduce) {
  requireDefined("scatter", x, "input");
  requireDefined("scatter", index, "index");
  requireDefined("scatter", updates, "updates");
  requireSameDType("scatter", x, updates);
  if (x.rank() == 0)
    raise("scatter: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("scatter", axis, x.shape());
  bool ok = index.rank() == x.rank() && index.shape() == updates.shape();
  for (size_t d = 0; ok && d < x.rank(); ++d)
    ok = int64_t(d) == ax || index.dim(d) <= x.dim(d);
  if (!ok)
    raise("scatter: index {} and updates {} must have one shape, the rank of "
          "input {} and no larger sizes outside axis {}",
          shapeStr(index.shape()), shapeStr(updates.shape()),
          shapeStr(x.shape()), ax);
  auto idx = readIndices("scatter", index, x.dim(ax), ax, x);
  Tensor out = x.contiguous().clone();
  if (index.numel() == 0)
    return out;
  Tensor u = updates.contiguous();
  auto xs = contiguousStrides(x.shape());
  size_t r = x.rank();
  visitScatter("scatter", x.dtype(), reduce, [&](auto tag) {
    using T = decltype(tag);
    const T *pu = static_cast<const T *>(u.rawData());
    T *po = static_cast<T *>(out.rawData());
    // In index order, so that with duplicate indices the last update wins
    // (reduction none) as in torch and ONNX's reference.
    for (int64_t i = 0, n = index.numel(); i < n; ++i) {
      int64_t off = 0, rem = i;
      for (size_t d = r; d-- > 0;) {
        int64_t c = rem % index.dim(d);
        rem /= index.dim(d);
        off += (int64_t(d) == ax ? idx[i] : c) * xs[d];
      }
      combine(po[off], pu[i], reduce);
    }
  });
  return out;
}

Tensor scatterNd(const Tensor &x, const Tensor &indices, const Tensor &updates,
                 ScatterReduce reduce) {
  requireDefined("scatter_nd", x, "input");
  requireDefined("scatter_nd", indices, "indices");
  requireDefined("scatter_nd", updates, "updates");
  requireSameDType("scatter_nd", x, updates);
  if (indices.dtype() != DType::Int32 && indices.dtype() != DType::Int64)
    raise("scatter_nd: indices must be int32 or int64, got {}",
          dtypeName(indices.dtype()).str());
  if (indices.rank() == 0)
    raise("scatter_nd: indices must have at least one dimension, got ()");
  int64_t k = indices.shape().back();
  if (k > int64_t(x.rank()))
    raise("scatter_nd: indices {} index {} axes of input {} of rank {}",
          shapeStr(indices.shape()), k, shapeStr(x.shape()), x.rank());
  // updates.shape == indices.shape[:-1] + x.shape[k:]
  Shape want(indices.shape().begin(), indices.shape().end() - 1);
  want.append(x.shape().begin() + k, x.shape().end());
  if (updates.shape() != llvm::ArrayRef<int64_t>(want))
    raise("scatter_nd: updates {} must have shape {} (indices {} into input {})",
          shapeStr(updates.shape()), shapeStr(want), shapeStr(indices.shape()),
          shapeStr(x.shape()));
  Tensor out = x.contiguous().clone();
  int64_t count = shapeNumel(indices.shape().drop_back());
  int64_t inner = shapeNumel(x.shape().drop_front(k));
  if (count == 0 || inner == 0)
    return out;
  Tensor ic = indices.contiguous(), u = updates.contiguous();
  auto xs = contiguousStrides(x.shape());
  visitScatter("scatter_nd", x.dtype(), reduce, [&](auto tag) {
    using T = decltype(tag);
    const T *pu = static_cast<const T *>(u.rawData());
    T *po = static_cast<T *>(out.rawData());
    for (int64_t i = 0; i < count; ++i) {
      int64_t off = 0;
      for (int64_t d = 0; d < k; ++d) {
        int64_t j = ic.dtype() == DType::Int32 ? ic.data<int32_t>()[i * k + d]
                                               : ic.data<int64_t>()[i * k + d];
        int64_t n = x.dim(size_t(d));
        if (j < -n || j >= n)
          raise("scatter_nd: index {} is out of range for axis {} of input {} "
                "(size {})",
                j, d, shapeStr(x.shape()), n);
        off += (j < 0 ? j + n : j) * xs[size_t(d)];
      }
      const T *src = pu + i * inner;
      T *dst = po + off;
      for (int64_t e = 0; e < inner; ++e)
        combine(dst[e], src[e], reduce);
    }
  });
  return out;
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

Tensor pad(const Tensor &x,
           llvm::ArrayRef<std::pair<int64_t, int64_t>> padWidth, PadMode mode,
           double value) {
  requireDefined("pad", x, "input");
  if (padWidth.size() != x.rank())
    raise("pad: {} (before, after) pairs given for input {} of rank {}",
          padWidth.size(), shapeStr(x.shape()), x.rank());
  size_t r = x.rank();
  Shape shape;
  for (size_t d = 0; d < r; ++d) {
    auto [before, after] = padWidth[d];
    int64_t n = x.dim(d), o = n + before + after;
    if (o < 0)
      raise("pad: padding ({}, {}) of axis {} makes input {} negative", before,
            after, d, shapeStr(x.shape()));
    if (mode == PadMode::Reflect && (before >= n || after >= n) &&
        (before > 0 || after > 0))
      raise("pad: reflect padding ({}, {}) of axis {} must be smaller than "
            "its size {} in input {}",
            before, after, d, n, shapeStr(x.shape()));
    if (mode == PadMode::Edge && n == 0 && (before > 0 || after > 0))
      raise("pad: edge padding of the empty axis {} of input {}", d,
            shapeStr(x.shape()));
    shape.push_back(o);
  }
  Tensor out = Tensor::empty(shape, x.dtype());
  if (out.numel() == 0)
    return out;
  if (r == 0) {
    std::memcpy(out.rawData(), x.rawData(), x.nbytes());
    return out;
  }
  // Per axis, the source index of each output index (-1: the constant).
  std::vector<llvm::SmallVector<int64_t, 0>> src(r);
  for (size_t d = 0; d < r; ++d) {
    int64_t n = x.dim(d), before = padWidth[d].first;
    src[d].resize(size_t(shape[d]));
    for (int64_t o = 0; o < shape[d]; ++o) {
      int64_t i = o - before;
      if (i < 0 || i >= n) {
        switch (mode) {
        case PadMode::Constant:
          i = -1;
          break;
        case PadMode::Edge:
          i = i < 0 ? 0 : n - 1;
          break;
        case PadMode::Reflect:
          i = i < 0 ? -i : 2 * (n - 1) - i;
          break;
        }
      }
      src[d][o] = i;
    }
  }
  auto xs = contiguousStrides(x.shape());
  int64_t inner = shape[r - 1];
  int64_t rows = out.numel() / inner;
  Tensor fill = full({1}, value, x.dtype());
  visitBySize(dtypeSize(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    const T *px = x.data<T>();
    T *po = out.data<T>();
    T cv = fill.data<T>()[0];
    const int64_t *last = src[r - 1].data();
    int64_t lastStride = xs[r - 1];
    parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / inner),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t row = r0; row < r1; ++row) {
                    T *dst = po + row * inner;
                    int64_t off = 0, rem = row;
                    bool constant = false;
                    for (size_t d = r - 1; d-- > 0;) {
                      int64_t i = src[d][rem % shape[d]];
                      rem /= shape[d];
                      constant |= i < 0;
                      off += i * xs[d];
                    }
                    if (constant) {
                      for (int64_t j = 0; j < inner; ++j)
                        dst[j] = cv;
                      continue;
                    }
                    for (int64_t j = 0; j < inner; ++j)
                      dst[j] =
                          last[j] < 0 ? cv : px[off + last[j] * lastStride];
                  }
                });
  });
  return out;
}

//===----------------------------------------------------------------------===//
// Resize
//===----------------------------------------------------------------------===//

namespace {
/// Source taps of one output coordinate for linear interpolation.
struct Taps {
  int64_t i0, i1;
  float w0, w1;
};
} // namespace

/// Interpolation taps along one axis. `scale` is in / out (or 1 / factor).
static llvm::SmallVector<Taps, 0> linearTaps(int64_t in, int64_t out,
                                             double scale, bool alignCorners) {
  llvm::SmallVector<Taps, 0> taps(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    double s;
    if (alignCorners)
      s = out > 1 ? double(o) * double(in - 1) / double(out - 1) : 0.0;
    else
      s = std::max(0.0, (double(o) + 0.5) * scale - 0.5);
    int64_t i0 = std::min<int64_t>(int64_t(s), in - 1);
    int64_t i1 = std::min<int64_t>(i0 + 1, in - 1);
    float l = float(s - double(i0));
    taps[o] = {i0, i1, 1.0f - l, l};
  }
  return taps;
}

static Tensor resizeImpl(llvm::StringRef op, const Tensor &x, int64_t oh,
                         int64_t ow, double scaleH, double scaleW,
                         ResizeMode mode, bool alignCorners) {
  int64_t planes = x.dim(0) * x.dim(1), h = x.dim(2), w = x.dim(3);
  if (oh <= 0 || ow <= 0)
    raise("{}: output size {}x{} must be positive for input {}", op.str(), oh,
          ow, shapeStr(x.shape()));
  if (h <= 0 || w <= 0)
    raise("{}: input {} has an empty spatial size", op.str(),
          shapeStr(x.shape()));
  Tensor out = Tensor::empty({x.dim(0), x.dim(1), oh, ow}, DType::Float32);
  if (out.numel() == 0)
    return out;
  const float *px = x.data<float>();
  float *po = out.data<float>();
  int64_t grain = std::max<int64_t>(1, (1 << 14) / (oh * ow));
  if (mode == ResizeMode::Nearest) {
    llvm::SmallVector<int64_t, 0> sy(static_cast<size_t>(oh)),
        sx(static_cast<size_t>(ow));
    for (int64_t o = 0; o < oh; ++o)
      sy[o] = std::min<int64_t>(int64_t(std::floor(double(o) * scaleH)), h - 1);
    for (int64_t o = 0; o < ow; ++o)
      sx[o] = std::min<int64_t>(int64_t(std::floor(double(o) * scaleW)), w - 1);
    parallelFor(planes, grain, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        for (int64_t y = 0; y < oh; ++y) {
          const float *row = px + (p * h + sy[y]) * w;
          float *dst = po + (p * oh + y) * ow;
          for (int64_t xx = 0; xx < ow; ++xx)
            dst[xx] = row[sx[xx]];
        }
    });
    return out;
  }
  auto ty = linearTaps(h, oh, scaleH, alignCorners);
  auto tx = linearTaps(w, ow, scaleW, alignCorners);
  parallelFor(planes, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      for (int64_t y = 0; y < oh; ++y) {
        const float *r0 = px + (p * h + ty[y].i0) * w;
        const float *r1 = px + (p * h + ty[y].i1) * w;
        float a = ty[y].w0, b = ty[y].w1;
        float *dst = po + (p * oh + y) * ow;
        for (int64_t xx = 0; xx < ow; ++xx) {
          const Taps &t = tx[xx];
          dst[xx] = a * (t.w0 * r0[t.i0] + t.w1 * r0[t.i1]) +
                    b * (t.w0 * r1[t.i0] + t.w1 * r1[t.i1]);
        }
      }
  });
  return out;
}

Tensor resize(const Tensor &x, Int2 size, ResizeMode mode, bool alignCorners) {
  requireFloat32("resize", x, "input");
  requireRank("resize", x, "input", 4, "(N, C, H, W)");
  return resizeImpl("resize", x, size.h, size.w,
                    double(x.dim(2)) / double(std::max<int64_t>(size.h, 1)),
                    double(x.dim(3)) / double(std::max<int64_t>(size.w, 1)),
                    mode, alignCorners);
}

Tensor upsample(const Tensor &x, double factorH, double factorW,
                ResizeMode mode, bool alignCorners) {
  requireFloat32("upsample", x, "input");
  requireRank("upsample", x, "input", 4, "(N, C, H, W)");
  if (!(factorH > 0.0) || !(factorW > 0.0) || std::isinf(factorH) ||
      std::isinf(factorW))
    raise("upsample: scale factors {}x{} must be positive and finite", factorH,
          factorW);
  int64_t oh = int64_t(std::floor(double(x.dim(2)) * factorH));
  int64_t ow = int64_t(std::floor(double(x.dim(3)) * factorW));
  return resizeImpl("upsample", x, oh, ow, 1.0 / factorH, 1.0 / factorW, mode,
                    alignCorners);
}

} // namespace tmg::rt
