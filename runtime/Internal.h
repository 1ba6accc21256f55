//===- Internal.h - Helpers shared by the kernel sources --------*- C++ -*-===//
//
// Private to runtime/: argument checks that raise the runtime's error
// messages, OpenMP partitioning, dtype dispatch and the broadcasting
// iteration plan. Not installed.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>
#include <omp.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"
#include "tm/runtime/Common.h"
#include "tm/runtime/Conv.h"
#include "tm/runtime/Reduce.h"

/// Put before a hot kernel function (not a lambda) to compile it for
/// AVX-512, AVX2+FMA and the baseline, the best chosen when the library
/// loads (GCC/Clang function multiversioning on x86-64 ELF). The build uses
/// no -march, so everything else is baseline SSE2.
/// Not under ThreadSanitizer: the clones' IFUNC resolvers run while the
/// dynamic loader relocates the library, before the TSan runtime is up, and
/// their instrumented code crashes there.
#if defined(__SANITIZE_THREAD__)
#define TM_NO_VECTOR_CLONES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TM_NO_VECTOR_CLONES 1
#endif
#endif
#if defined(__x86_64__) && defined(__ELF__) && !defined(TM_NO_VECTOR_CLONES)
#define TM_VECTOR_CLONES                                                       \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TM_VECTOR_CLONES
#endif

namespace tmg::rt::detail {

//===-- Prefetch ----------------------------------------------------------===//

/// Prefetches the `bytes` from address `at` into L1, a cache line at a
/// time (for writing when Write). An integer address: it may lie outside
/// any tensor (past a plane or a matrix), where a prefetch does nothing
/// (it never faults).
template <bool Write = false>
inline void prefetchBytes(uintptr_t at, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64)
    __builtin_prefetch(reinterpret_cast<const char *>(at + uintptr_t(b)),
                       Write ? 1 : 0, 3);
}
template <bool Write = false>
inline void prefetchFloats(const float *p, int64_t n) {
  prefetchBytes<Write>(reinterpret_cast<uintptr_t>(p),
                       n * int64_t(sizeof(float)));
}

//===-- Argument checks ---------------------------------------------------===//

/// "input (1, 3, 8, 8)": a role and a shape, as error messages quote them.
std::string describe(llvm::StringRef what, const Tensor &t);

/// Throws "<op>: <what> is undefined" for a default-constructed Tensor.
void requireDefined(llvm::StringRef op, const Tensor &t, llvm::StringRef what);
/// Throws "<op>: <what> (shape) must be <dtype>, got <dtype>".
void requireDType(llvm::StringRef op, const Tensor &t, llvm::StringRef what,
                  DType dtype);
inline void requireFloat32(llvm::StringRef op, const Tensor &t,
                           llvm::StringRef what) {
  requireDType(op, t, what, DType::Float32);
}
/// Throws "<op>: <what> must be <rank>-D <layout>, got (shape)".
void requireRank(llvm::StringRef op, const Tensor &t, llvm::StringRef what,
                 size_t rank, llvm::StringRef layout = "");
/// Maps a possibly negative axis into [0, rank); throws "<op>: axis 3 is out
/// of range for shape (2, 3)" otherwise.
int64_t normalizeAxis(llvm::StringRef op, int64_t axis,
                      llvm::ArrayRef<int64_t> shape);
/// Normalises a list of distinct axes (sorted ascending); an empty list
/// means all axes. Throws on out-of-range or repeated axes.
llvm::SmallVector<int64_t, 4> normalizeAxes(llvm::StringRef op,
                                            llvm::ArrayRef<int64_t> axes,
                                            llvm::ArrayRef<int64_t> shape);
/// Throws when `value` does not fit the `int` of the BLAS interface.
void requireBlasSize(llvm::StringRef op, int64_t value, llvm::StringRef what);

//===-- Parallel loops ----------------------------------------------------===//

/// Elements of cheap elementwise work below which a loop stays serial.
constexpr int64_t ElementwiseGrain = 1 << 15;

/// Number of parts parallelFor splits n iterations of `grain` into: one per
/// OpenMP thread when there are at least two parts of `grain` iterations,
/// otherwise (or inside a parallel region) 1.
inline int parallelParts(int64_t n, int64_t grain) {
  if (n <= 0 || omp_in_parallel())
    return 1;
  int64_t parts = n / std::max<int64_t>(grain, 1);
  return int(
      std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), parts)));
}

/// Runs body(begin, end, part) on contiguous, equal parts of [0, n), part
/// in [0, parallelParts(n, grain)), one part per OpenMP thread; with one
/// part the body runs on the caller. `part` indexes per-thread scratch
/// (omp_get_thread_num() would not: on the serial path it is the caller's
/// number in an enclosing team). The body must not throw: kernels validate
/// and allocate before they loop.
template <typename Body>
void parallelForParts(int64_t n, int64_t grain, Body &&body) {
  if (n <= 0)
    return;
  int threads = parallelParts(n, grain);
  if (threads <= 1) {
    body(int64_t(0), n, 0);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    int64_t q = n / nt, r = n % nt;
    int64_t begin = t * q + std::min(t, r);
    int64_t end = begin + q + (t < r ? 1 : 0);
    if (begin < end)
      body(begin, end, int(t));
  }
}

/// parallelForParts without the part index: body(begin, end).
template <typename Body>
void parallelFor(int64_t n, int64_t grain, Body &&body) {
  parallelForParts(n, grain, [&](int64_t b, int64_t e, int) { body(b, e); });
}

//===-- Memory layouts ----------------------------------------------------===//

/// The channels-last order of an (N, C, H, W) tensor: memory holds
/// (N, H, W, C). permuted(ChannelsLastToNchw) of a dense (N, H, W, C)
/// tensor is a channels-last (N, C, H, W) view, permuted(NchwToChannelsLast)
/// of that view the dense tensor again.
constexpr std::array<int64_t, 4> NchwToChannelsLast = {0, 2, 3, 1};
constexpr std::array<int64_t, 4> ChannelsLastToNchw = {0, 3, 1, 2};

/// True when `t` is a 4-D (N, C, H, W) view whose elements lie dense in
/// (N, H, W, C) order, and not also row-major (a transposed NHWC tensor:
/// what transpose(x, (0, 3, 1, 2)) of a dense x makes). Dimensions of size
/// 1 may have any stride.
inline bool isChannelsLast(const Tensor &t) {
  if (t.rank() != 4 || t.isContiguous())
    return false;
  llvm::ArrayRef<int64_t> sh = t.shape(), st = t.strides();
  int64_t n = sh[0], c = sh[1], h = sh[2], w = sh[3];
  auto fits = [](int64_t size, int64_t stride, int64_t want) {
    return size == 1 || stride == want;
  };
  return fits(c, st[1], 1) && fits(w, st[3], c) && fits(h, st[2], w * c) &&
         fits(n, st[0], h * w * c);
}

//===-- Dtype dispatch ----------------------------------------------------===//

// StorageT, visitDType, fromDouble and toDouble are in tm/ir/Tensor.h.

/// Calls f(T{}) with an unsigned integer type of `bytes` bytes: data
/// movement kernels copy elements without interpreting them.
template <typename F> decltype(auto) visitBySize(size_t bytes, F &&f) {
  switch (bytes) {
  case 1:
    return f(uint8_t{});
  case 2:
    return f(uint16_t{});
  case 4:
    return f(uint32_t{});
  default:
    return f(uint64_t{});
  }
}

//===-- Strided copies ----------------------------------------------------===//

/// Copies the strided view (base offset, shape, strides in elements) of
/// `in` into the contiguous `out`, elements of `elemSize` bytes. Dimensions
/// are coalesced first; transposing views are copied in cache tiles.
/// Parallel. Strides may be negative or 0.
void stridedCopy(size_t elemSize, const void *in, int64_t base,
                 llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
                 void *out);

/// Row-major element strides of a shape.
llvm::SmallVector<int64_t, 6> contiguousStrides(llvm::ArrayRef<int64_t> shape);

//===-- Broadcasting ------------------------------------------------------===//

/// How N inputs broadcast to an output shape, with runs of dimensions that
/// every input traverses with one stride merged into one. Inputs may be
/// strided views: the innermost stride is 0 (broadcast), 1 (dense) or any
/// other step (a transposed or sliced view).
template <size_t N> struct BroadcastPlan {
  llvm::SmallVector<int64_t, 6> shape; ///< coalesced; never empty
  std::array<llvm::SmallVector<int64_t, 6>, N> strides;

  int64_t inner() const { return shape.back(); }
  int64_t rows() const {
    int64_t r = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d)
      r *= shape[d];
    return r;
  }
  int64_t innerStride(size_t i) const { return strides[i].back(); }
};

/// The element strides of an input of shape `in` (strides `st`; dense when
/// null) aligned to an output of `rank` dimensions: 0 where it broadcasts.
inline llvm::SmallVector<int64_t, 6>
alignedStrides(size_t rank, llvm::ArrayRef<int64_t> in,
               const llvm::ArrayRef<int64_t> *st) {
  llvm::SmallVector<int64_t, 6> full(rank, 0);
  int64_t s = 1;
  size_t r = in.size();
  for (size_t k = 0; k < r; ++k) {
    int64_t size = in[r - 1 - k];
    full[rank - 1 - k] = size == 1 ? 0 : st ? (*st)[r - 1 - k] : s;
    s *= size;
  }
  return full;
}

/// Merges the runs of dimensions of `out` that every input traverses with
/// one stride, and drops size-1 dimensions: `strides[i]` holds input i's
/// aligned strides on entry and its stride per merged dimension on return.
/// Returns the merged dimensions (never empty).
inline llvm::SmallVector<int64_t, 6> mergeBroadcastDims(
    llvm::ArrayRef<int64_t> out,
    llvm::MutableArrayRef<llvm::SmallVector<int64_t, 6>> strides) {
  size_t n = strides.size();
  llvm::SmallVector<int64_t, 6> dims;
  llvm::SmallVector<llvm::SmallVector<int64_t, 6>, 4> merged(n);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1)
      continue; // strides are irrelevant for size-1 dimensions
    bool merge = !dims.empty();
    for (size_t i = 0; merge && i < n; ++i)
      merge = merged[i].back() == strides[i][d] * out[d];
    if (merge) {
      dims.back() *= out[d];
      for (size_t i = 0; i < n; ++i)
        merged[i].back() = strides[i][d];
    } else {
      dims.push_back(out[d]);
      for (size_t i = 0; i < n; ++i)
        merged[i].push_back(strides[i][d]);
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    for (size_t i = 0; i < n; ++i)
      merged[i].push_back(0);
  }
  for (size_t i = 0; i < n; ++i)
    strides[i] = std::move(merged[i]);
  return dims;
}

/// Builds the plan; each input shape must broadcast to `out` (checked by the
/// caller). `inStrides` gives each input's element strides (a tensor's
/// strides()); without it the inputs are dense.
template <size_t N>
BroadcastPlan<N> makeBroadcastPlan(
    llvm::ArrayRef<int64_t> out,
    const std::array<llvm::ArrayRef<int64_t>, N> &ins,
    const std::array<llvm::ArrayRef<int64_t>, N> *inStrides = nullptr) {
  BroadcastPlan<N> p;
  for (size_t i = 0; i < N; ++i)
    p.strides[i] = alignedStrides(out.size(), ins[i],
                                  inStrides ? &(*inStrides)[i] : nullptr);
  p.shape = mergeBroadcastDims(out, p.strides);
  return p;
}

/// The plan of tensors (dense or strided views) broadcast to `out`.
template <size_t N>
BroadcastPlan<N> makeBroadcastPlan(llvm::ArrayRef<int64_t> out,
                                   const std::array<const Tensor *, N> &ins) {
  std::array<llvm::ArrayRef<int64_t>, N> shapes, strides;
  for (size_t i = 0; i < N; ++i) {
    shapes[i] = ins[i]->shape();
    strides[i] = ins[i]->strides();
  }
  return makeBroadcastPlan<N>(out, shapes, &strides);
}

/// Typed address of element (0, ..., 0) of a tensor of any layout, for
/// kernels that read through strides (BroadcastPlan).
template <typename T> const T *viewElems(const Tensor &t) {
  return static_cast<const T *>(t.viewData());
}

/// Calls row(outOffset, inOffsets) for rows [rowBegin, rowEnd) of the plan
/// (a row is `inner()` consecutive output elements), keeping the outer
/// multi-index as an odometer so no division happens per row.
template <size_t N, typename RowFn>
void forEachRow(const BroadcastPlan<N> &p, int64_t rowBegin, int64_t rowEnd,
                RowFn &&row) {
  size_t outer = p.shape.size() - 1;
  llvm::SmallVector<int64_t, 6> idx(outer, 0);
  std::array<int64_t, N> off{};
  int64_t rem = rowBegin;
  for (size_t d = outer; d-- > 0;) {
    idx[d] = rem % p.shape[d];
    rem /= p.shape[d];
    for (size_t i = 0; i < N; ++i)
      off[i] += idx[d] * p.strides[i][d];
  }
  int64_t inner = p.inner();
  for (int64_t r = rowBegin; r < rowEnd; ++r) {
    row(r * inner, off);
    for (size_t d = outer; d-- > 0;) {
      for (size_t i = 0; i < N; ++i)
        off[i] += p.strides[i][d];
      if (++idx[d] < p.shape[d])
        break;
      for (size_t i = 0; i < N; ++i)
        off[i] -= p.strides[i][d] * p.shape[d];
      idx[d] = 0;
    }
  }
}

/// Runs a broadcast plan in parallel: rows are split over threads so each
/// part has about ElementwiseGrain elements.
template <size_t N, typename RowFn>
void parallelRows(const BroadcastPlan<N> &p, RowFn &&row) {
  int64_t rows = p.rows(), inner = std::max<int64_t>(p.inner(), 1);
  int64_t grain = std::max<int64_t>(1, ElementwiseGrain / inner);
  parallelFor(rows, grain,
              [&](int64_t b, int64_t e) { forEachRow(p, b, e, row); });
}

//===-- Numeric helpers ---------------------------------------------------===//

/// Applies a fused activation to one value.
inline float activate(Activation act, float v) {
  switch (act) {
  case Activation::None:
    return v;
  case Activation::Relu:
    return v < 0.0f ? 0.0f : v;
  case Activation::Relu6:
    return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
  }
  return v;
}

/// out[i] = act(out[i] + bias) over n contiguous floats, bias may be 0.
void biasActivate(float *out, int64_t n, float bias, Activation act);
/// out[i] = act(out[i] + add[i]) over n contiguous floats: a column bias,
/// or a residual; with `add` null, act(out[i]) (as biasActivate with 0).
void addActivate(float *out, const float *add, int64_t n, Activation act);

/// One sgemm call on the calling thread (row-major, the arguments of
/// parallelSgemm); handles k == 0 (C = beta * C) without calling BLAS.
void sgemmSerial(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *a, int64_t lda, const float *b,
                 int64_t ldb, float beta, float *c, int64_t ldc);

/// Rows of at most this many elements are reduced by one task of reduce(),
/// in one reduceRowF32.
constexpr int64_t WholeRowReduce = 1 << 16;
/// reduce(op) of the n contiguous float32 values at x (0 < n <=
/// WholeRowReduce), bit for bit the value reduce() computes for each row
/// when it reduces the last axis of a tensor whose rows are that long.
float reduceRowF32(ReduceOp op, const float *x, int64_t n);

/// Makes OpenBLAS run every call on the calling thread (see Linalg.h). Call
/// outside parallel regions.
void ensureSerialBlas();

//===-- Normalised conv inputs --------------------------------------------===//

/// An inference batch norm as y = x * scale[c] + shift[c] per channel c
/// (folded in double, rounded to float, as batchNormAct computes it).
struct ChannelAffine {
  llvm::SmallVector<float, 64> scale, shift;
};
/// The shape of the channel concatenation of `parts` (checked: float32,
/// rank >= 2, equal outside axis 1; batch_norm's messages).
Shape channelConcatShape(llvm::ArrayRef<Tensor> parts);
/// The affine of batch_norm over axis 1 of a tensor of `shape` (the
/// statistics checked against its channels; eps >= 0).
ChannelAffine batchNormAffine(const Tensor &mean, const Tensor &var,
                              const Tensor &weight, const Tensor &bias,
                              double eps, llvm::ArrayRef<int64_t> shape);
/// act(x * scale + shift) over the channel concatenation of `parts`
/// (float32, equal outside axis 1): batchNormAct with its affine given.
Tensor scaleShiftChannels(llvm::ArrayRef<Tensor> parts, const ChannelAffine &a,
                          Activation act);

/// The input of a conv2d given as act(x * scale + shift) of the channel
/// concatenation of `parts`: a batch norm, its activation and a concat
/// before the conv (DenseNet's layers, pre-activation blocks).
struct ConvInputNorm {
  llvm::ArrayRef<Tensor> parts;
  const ChannelAffine *affine = nullptr;
  Activation act = Activation::None;
};
/// conv2d(scaleShiftChannels(in.parts, *in.affine, in.act), w, b, p), bit
/// for bit. A pointwise (1x1, stride 1, unpadded) ungrouped conv on the
/// micro-kernel (AVX-512) of 4-d contiguous parts never builds its input:
/// each work item normalises the input columns it multiplies, one depth
/// block at a time, into the patch buffer the kernel reads (as im2col
/// fills it). Other convs build the input first.
Tensor conv2dNormedInput(const ConvInputNorm &in, const Tensor &w,
                         const Tensor &b, const Conv2dParams &p);

} // namespace tmg::rt::detail
