//===- Shape.cpp - Views, permutation, joining and creation ---------------===//
#include "tm/runtime/Shape.h"

#include <cmath>
#include <cstring>

#include "Internal.h"
#include "Simd512.h"
#include "tm/runtime/Elementwise.h"

namespace tmg::rt {
using namespace detail;

//===----------------------------------------------------------------------===//
// Strided copy (shared with Index.cpp)
//===----------------------------------------------------------------------===//

llvm::SmallVector<int64_t, 6>
detail::contiguousStrides(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 6> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    s[d - 1] = s[d] * shape[d];
  return s;
}

/// dst[i * ldd + j] = src[i + j * lds] for i, j < 32 (4-byte elements).
TM_AVX512F static void transposeTile(const void *src, int64_t lds, void *dst,
                                     int64_t ldd) {
#if TM_HAVE_SIMD512
  const float *s = static_cast<const float *>(src);
  float *d = static_cast<float *>(dst);
  for (int64_t j = 0; j < 32; j += 8)
    for (int64_t i = 0; i < 32; i += 8)
      simd512::transpose8x8(s + i + j * lds, lds, d + i * ldd + j, ldd);
#else
  (void)src, (void)lds, (void)dst, (void)ldd;
  __builtin_trap(); // callers check simd512::available()
#endif
}

template <typename T>
static void stridedCopyTyped(const T *in, int64_t base,
                             llvm::ArrayRef<int64_t> shape,
                             llvm::ArrayRef<int64_t> strides, T *out) {
  size_t r = shape.size();
  int64_t b = shape[r - 1], sb = strides[r - 1];
  int64_t a = r >= 2 ? shape[r - 2] : 1, sa = r >= 2 ? strides[r - 2] : 0;
  int64_t outer = 1;
  for (size_t d = 0; d + 2 < r; ++d)
    outer *= shape[d];
  auto outerBase = [&](int64_t o) {
    int64_t off = base;
    for (size_t d = r >= 2 ? r - 2 : 0; d-- > 0;) {
      off += (o % shape[d]) * strides[d];
      o /= shape[d];
    }
    return off;
  };
  if (sb == 1 || b == 1) {
    // Contiguous (or single-element) rows: plain row copies.
    int64_t rows = outer * a;
    parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / b),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t row = r0; row < r1; ++row) {
                    const T *src = in + outerBase(row / a) + (row % a) * sa;
                    T *dst = out + row * b;
                    if (sb == 1)
                      std::memcpy(dst, src, sizeof(T) * size_t(b));
                    else
                      dst[0] = src[0];
                  }
                });
    return;
  }
  // Gathering rows (a transpose when sa == 1): copy Tile x Tile blocks so
  // both the reads and the writes stay within a few cache lines per row;
  // a transpose of 4-byte elements moves whole 8 x 8 blocks in registers.
  constexpr int64_t Tile = 32;
  bool blocks8 = sizeof(T) == 4 && sa == 1 && simd512::available();
  int64_t aTiles = (a + Tile - 1) / Tile;
  parallelFor(outer * aTiles,
              std::max<int64_t>(1, ElementwiseGrain / (Tile * b)),
              [&](int64_t t0, int64_t t1) {
                for (int64_t t = t0; t < t1; ++t) {
                  int64_t o = t / aTiles;
                  int64_t a0 = (t % aTiles) * Tile;
                  int64_t a1 = std::min(a, a0 + Tile);
                  const T *src = in + outerBase(o);
                  T *dst = out + o * a * b;
                  for (int64_t b0 = 0; b0 < b; b0 += Tile) {
                    int64_t b1 = std::min(b, b0 + Tile);
                    if (blocks8 && a1 - a0 == Tile && b1 - b0 == Tile) {
                      transposeTile(src + a0 + b0 * sb, sb, dst + a0 * b + b0,
                                    b);
                      continue;
                    }
                    for (int64_t i = a0; i < a1; ++i)
                      for (int64_t j = b0; j < b1; ++j)
                        dst[i * b + j] = src[i * sa + j * sb];
                  }
                }
              });
}

void detail::stridedCopy(size_t elemSize, const void *in, int64_t base,
                         llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<int64_t> strides, void *out) {
  // Drop size-1 dimensions and merge dimensions that are contiguous with
  // respect to each other in the input.
  llvm::SmallVector<int64_t, 6> cs, cst;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0)
      return;
    if (shape[d] == 1)
      continue;
    if (!cs.empty() && cst.back() == strides[d] * shape[d]) {
      cs.back() *= shape[d];
      cst.back() = strides[d];
    } else {
      cs.push_back(shape[d]);
      cst.push_back(strides[d]);
    }
  }
  if (cs.empty()) {
    cs.push_back(1);
    cst.push_back(1);
  }
  visitBySize(elemSize, [&](auto tag) {
    using T = decltype(tag);
    stridedCopyTyped(static_cast<const T *>(in), base, cs, cst,
                     static_cast<T *>(out));
  });
}

//===----------------------------------------------------------------------===//
// Views
//===----------------------------------------------------------------------===//

Tensor reshape(const Tensor &x, llvm::ArrayRef<int64_t> shape) {
  requireDefined("reshape", x, "input");
  Shape s(shape.begin(), shape.end());
  int64_t inferred = -1, known = 1;
  for (size_t d = 0; d < s.size(); ++d) {
    if (s[d] == -1) {
      if (inferred >= 0)
        raise("reshape: only one dimension can be -1, got {} for input {}",
              shapeStr(shape), shapeStr(x.shape()));
      inferred = int64_t(d);
    } else if (s[d] < 0) {
      raise("reshape: invalid dimension {} in {} for input {}", s[d],
            shapeStr(shape), shapeStr(x.shape()));
    } else if (__builtin_mul_overflow(known, s[d], &known)) {
      raise("reshape: the element count of {} overflows int64", shapeStr(shape));
    }
  }
  if (inferred >= 0) {
    if (known == 0 || x.numel() % known != 0)
      raise("reshape: cannot infer the -1 in {} for input {} ({} elements)",
            shapeStr(shape), shapeStr(x.shape()), x.numel());
    s[inferred] = x.numel() / known;
  }
  if (shapeNumel(s) != x.numel())
    raise("reshape: cannot reshape input {} ({} elements) into {} ({} "
          "elements)",
          shapeStr(x.shape()), x.numel(), shapeStr(s), shapeNumel(s));
  return x.reshaped(s);
}

Tensor flatten(const Tensor &x, int64_t startAxis, int64_t endAxis) {
  requireDefined("flatten", x, "input");
  if (x.rank() == 0)
    return x.reshaped({1});
  int64_t s = normalizeAxis("flatten", startAxis, x.shape());
  int64_t e = normalizeAxis("flatten", endAxis, x.shape());
  if (s > e)
    raise("flatten: start axis {} comes after end axis {} for input {}",
          startAxis, endAxis, shapeStr(x.shape()));
  Shape out(x.shape().begin(), x.shape().begin() + s);
  out.push_back(shapeNumel(x.shape().slice(s, e - s + 1)));
  out.append(x.shape().begin() + e + 1, x.shape().end());
  return x.reshaped(out);
}

Tensor squeeze(const Tensor &x, llvm::ArrayRef<int64_t> axes) {
  requireDefined("squeeze", x, "input");
  llvm::SmallVector<bool, 8> drop(x.rank(), false);
  if (axes.empty()) {
    for (size_t d = 0; d < x.rank(); ++d)
      drop[d] = x.dim(d) == 1;
  } else {
    for (int64_t d : normalizeAxes("squeeze", axes, x.shape())) {
      if (x.dim(d) != 1)
        raise("squeeze: axis {} of input {} has size {}, not 1", d,
              shapeStr(x.shape()), x.dim(d));
      drop[d] = true;
    }
  }
  Shape out;
  for (size_t d = 0; d < x.rank(); ++d)
    if (!drop[d])
      out.push_back(x.dim(d));
  return x.reshaped(out);
}

Tensor unsqueeze(const Tensor &x, llvm::ArrayRef<int64_t> axes) {
  requireDefined("unsqueeze", x, "input");
  int64_t rank = int64_t(x.rank() + axes.size());
  Shape placeholder(rank, 1);
  auto at = normalizeAxes("unsqueeze", axes, placeholder);
  Shape out;
  size_t next = 0, k = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (k < at.size() && at[k] == d) {
      out.push_back(1);
      ++k;
    } else {
      out.push_back(x.dim(next++));
    }
  }
  return x.reshaped(out);
}

//===----------------------------------------------------------------------===//
// Permutation and broadcasting
//===----------------------------------------------------------------------===//

Tensor transpose(const Tensor &x, llvm::ArrayRef<int64_t> perm) {
  requireDefined("transpose", x, "input");
  if (perm.size() != x.rank())
    raise("transpose: permutation {} has {} entries but input {} has rank {}",
          shapeStr(perm), perm.size(), shapeStr(x.shape()), x.rank());
  llvm::SmallVector<bool, 8> seen(x.rank(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(x.rank()) || seen[p])
      raise("transpose: {} is not a permutation of the axes of input {}",
            shapeStr(perm), shapeStr(x.shape()));
    seen[p] = true;
  }
  return x.permuted(perm); // a view: no copy
}

Tensor contiguous(const Tensor &x) {
  if (!x.defined() || x.isContiguous())
    return x;
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  stridedCopy(dtypeSize(x.dtype()), x.viewData(), 0, x.shape(), x.strides(),
              out.rawData());
  return out;
}

Tensor broadcastTo(const Tensor &x, llvm::ArrayRef<int64_t> shape) {
  requireDefined("broadcast_to", x, "input");
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      raise("broadcast_to: invalid target shape {} for input {}", shapeStr(shape),
            shapeStr(x.shape()));
  bool ok = x.rank() <= shape.size();
  for (size_t k = 0; ok && k < x.rank(); ++k) {
    int64_t dx = x.dim(x.rank() - 1 - k), ds = shape[shape.size() - 1 - k];
    ok = dx == ds || dx == 1;
  }
  if (!ok)
    raise("broadcast_to: input {} cannot be broadcast to {}",
          shapeStr(x.shape()), shapeStr(shape));
  return x.expanded(shape); // a view with stride 0 on the expanded axes
}

//===----------------------------------------------------------------------===//
// Joining and splitting
//===----------------------------------------------------------------------===//

Tensor concat(llvm::ArrayRef<Tensor> xs, int64_t axis) {
  if (xs.empty())
    raise("concat: needs at least one input");
  const Tensor &first = xs.front();
  requireDefined("concat", first, "input 0");
  if (first.rank() == 0)
    raise("concat: inputs must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("concat", axis, first.shape());
  Shape outShape(first.shape().begin(), first.shape().end());
  outShape[ax] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor &t = xs[i];
    requireDefined("concat", t, fmt::format("input {}", i));
    if (t.dtype() != first.dtype())
      raise("concat: input {} {} has dtype {} but input 0 has {}", i,
            shapeStr(t.shape()), dtypeName(t.dtype()).str(),
            dtypeName(first.dtype()).str());
    bool same = t.rank() == first.rank();
    for (size_t d = 0; same && d < t.rank(); ++d)
      same = int64_t(d) == ax || t.dim(d) == first.dim(d);
    if (!same)
      raise("concat: input {} {} does not match input 0 {} outside axis {}", i,
            shapeStr(t.shape()), shapeStr(first.shape()), ax);
    outShape[ax] += t.dim(ax);
  }
  Tensor out = Tensor::empty(outShape, first.dtype());
  if (out.numel() == 0)
    return out;
  size_t es = dtypeSize(first.dtype());
  int64_t outer = shapeNumel(first.shape().take_front(ax));
  int64_t inner = shapeNumel(first.shape().drop_front(ax + 1));
  int64_t outRow = outShape[ax] * inner; // elements per outer index
  llvm::SmallVector<int64_t, 8> colOffset(xs.size());
  for (size_t i = 0, c = 0; i < xs.size(); ++i) {
    colOffset[i] = int64_t(c);
    c += size_t(xs[i].dim(ax) * inner);
  }
  // The copy as pieces of at most Piece elements, (outer index, input,
  // piece) in order, split over the threads: at batch 1 a channel concat
  // has one outer index and a few large inputs.
  constexpr int64_t Piece = 1 << 14;
  llvm::SmallVector<int64_t, 8> pieceStart(xs.size() + 1, 0); // per outer index
  for (size_t i = 0; i < xs.size(); ++i)
    pieceStart[i + 1] =
        pieceStart[i] + (xs[i].dim(ax) * inner + Piece - 1) / Piece;
  int64_t perOuter = pieceStart.back();
  // About ElementwiseGrain elements per part of the threads' split.
  int64_t grain = std::max<int64_t>(1, ElementwiseGrain * perOuter /
                                           std::max<int64_t>(outRow, 1));
  auto *dst = static_cast<char *>(out.rawData());
  parallelFor(outer * perOuter, grain, [&](int64_t q0, int64_t q1) {
    // Piece q0's outer index and input, then each next piece in turn
    // (empty inputs have no pieces and are stepped over).
    int64_t o = q0 / perOuter, r = q0 % perOuter;
    size_t i = 0;
    while (pieceStart[i + 1] <= r)
      ++i;
    for (int64_t q = q0; q < q1; ++q) {
      int64_t n = xs[i].dim(ax) * inner;
      int64_t b = (r - pieceStart[i]) * Piece, len = std::min(Piece, n - b);
      std::memcpy(dst + (o * outRow + colOffset[i] + b) * es,
                  static_cast<const char *>(xs[i].rawData()) + (o * n + b) * es,
                  size_t(len) * es);
      if (++r == perOuter) {
        r = 0;
        ++o;
        i = 0;
      }
      while (pieceStart[i + 1] <= r)
        ++i;
    }
  });
  return out;
}

Tensor stack(llvm::ArrayRef<Tensor> xs, int64_t axis) {
  if (xs.empty())
    raise("stack: needs at least one input");
  requireDefined("stack", xs.front(), "input 0");
  Shape outRank(xs.front().rank() + 1, 1);
  int64_t ax = normalizeAxis("stack", axis, outRank);
  llvm::SmallVector<Tensor, 8> parts;
  for (size_t i = 0; i < xs.size(); ++i) {
    requireDefined("stack", xs[i], fmt::format("input {}", i));
    if (xs[i].shape() != xs.front().shape())
      raise("stack: input {} {} does not match input 0 {}", i,
            shapeStr(xs[i].shape()), shapeStr(xs.front().shape()));
    parts.push_back(unsqueeze(xs[i], {ax}));
  }
  return concat(parts, ax);
}

std::vector<Tensor> splitSizes(const Tensor &x, llvm::ArrayRef<int64_t> sizes,
                               int64_t axis) {
  requireDefined("split", x, "input");
  if (x.rank() == 0)
    raise("split: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("split", axis, x.shape());
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0)
      raise("split: negative size {} in {} for input {}", s, shapeStr(sizes),
            shapeStr(x.shape()));
    total += s;
  }
  if (total != x.dim(ax))
    raise("split: sizes {} sum to {} but axis {} of input {} has size {}",
          shapeStr(sizes), total, ax, shapeStr(x.shape()), x.dim(ax));
  size_t es = dtypeSize(x.dtype());
  int64_t outer = shapeNumel(x.shape().take_front(ax));
  int64_t inner = shapeNumel(x.shape().drop_front(ax + 1));
  int64_t inRow = x.dim(ax) * inner;
  std::vector<Tensor> parts;
  int64_t start = 0;
  for (int64_t s : sizes) {
    Shape shape(x.shape().begin(), x.shape().end());
    shape[ax] = s;
    Tensor part = Tensor::empty(shape, x.dtype());
    int64_t n = s * inner;
    if (part.numel() > 0) {
      auto *dst = static_cast<char *>(part.rawData());
      auto *src = static_cast<const char *>(x.rawData());
      parallelFor(outer, std::max<int64_t>(1, ElementwiseGrain / n),
                  [&](int64_t o0, int64_t o1) {
                    for (int64_t o = o0; o < o1; ++o)
                      std::memcpy(dst + o * n * es,
                                  src + (o * inRow + start * inner) * es,
                                  size_t(n) * es);
                  });
    }
    parts.push_back(std::move(part));
    start += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor &x, int64_t sections, int64_t axis) {
  requireDefined("split", x, "input");
  if (x.rank() == 0)
    raise("split: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("split", axis, x.shape());
  if (sections <= 0 || x.dim(ax) % sections != 0)
    raise("split: {} sections do not divide axis {} of input {} (size {})",
          sections, ax, shapeStr(x.shape()), x.dim(ax));
  llvm::SmallVector<int64_t, 8> sizes(sections, x.dim(ax) / sections);
  return splitSizes(x, sizes, ax);
}

std::vector<Tensor> splitAt(const Tensor &x, llvm::ArrayRef<int64_t> indices,
                            int64_t axis) {
  requireDefined("split", x, "input");
  if (x.rank() == 0)
    raise("split: input must have at least one dimension, got ()");
  int64_t ax = normalizeAxis("split", axis, x.shape());
  int64_t n = x.dim(ax), prev = 0;
  llvm::SmallVector<int64_t, 8> sizes;
  for (int64_t i : indices) {
    int64_t c = std::clamp<int64_t>(i < 0 ? i + n : i, 0, n);
    if (c < prev)
      raise("split: indices {} are not ascending for axis {} of input {}",
            shapeStr(indices), ax, shapeStr(x.shape()));
    sizes.push_back(c - prev);
    prev = c;
  }
  sizes.push_back(n - prev);
  return splitSizes(x, sizes, ax);
}

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

Tensor arange(double start, double stop, double step, DType dtype) {
  if (step == 0.0 || std::isnan(step) || std::isnan(start) || std::isnan(stop))
    raise("arange: step must be non-zero and bounds finite, got start={}, "
          "stop={}, step={}",
          start, stop, step);
  double count = std::ceil((stop - start) / step);
  if (!(count < 9.0e15))
    raise("arange: start={}, stop={}, step={} gives too many elements", start,
          stop, step);
  int64_t n = count > 0 ? int64_t(count) : 0;
  Tensor out = Tensor::empty({n}, dtype);
  visitDType(dtype, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    auto *p = out.data<StorageT<D>>();
    for (int64_t i = 0; i < n; ++i)
      p[i] = fromDouble<D>(start + double(i) * step);
  });
  return out;
}

Tensor zeros(llvm::ArrayRef<int64_t> shape, DType dtype) {
  return Tensor::zeros(shape, dtype);
}

Tensor ones(llvm::ArrayRef<int64_t> shape, DType dtype) {
  return full(shape, 1.0, dtype);
}

Tensor full(llvm::ArrayRef<int64_t> shape, double value, DType dtype) {
  Tensor out = Tensor::empty(shape, dtype);
  visitDType(dtype, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    StorageT<D> v = fromDouble<D>(value);
    auto *p = out.data<StorageT<D>>();
    parallelFor(out.numel(), ElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        p[i] = v;
    });
  });
  return out;
}

} // namespace tmg::rt
