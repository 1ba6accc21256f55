//===- Linalg.cpp - Matrix products ---------------------------------------===//
#include "tm/runtime/Linalg.h"

#include <algorithm>
#include <cblas.h>
#include <cstring>
#include <type_traits>

#include "Gemm.h"
#include "Internal.h"
#include "Simd512.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
using namespace detail;

#if TM_HAVE_SIMD512
/// y[j incy] = alpha dot(w[j ldw ..], x[0 .. k)) (+ beta y[j incy] unless
/// beta is 0) for j < n: a matrix-vector product over rows of w, such as a
/// batch-1 linear layer's weight, which is read once and is megabytes.
/// Four rows at a time, two accumulators each, so eight FMA chains are in
/// flight; each row is prefetched 1 KB ahead (the weight comes from
/// memory, in four streams). OpenBLAS's Haswell sgemv reads such a weight
/// at about 60% of this kernel's rate.
TM_AVX512F static void rowDots(const float *w, int64_t ldw, const float *x,
                               int64_t n, int64_t k, float alpha, float beta,
                               float *y, int64_t incy) {
  using namespace simd512;
  int64_t j = 0;
  auto store = [&](int64_t row, float dot) {
    float &out = y[row * incy];
    out = beta == 0.0f ? alpha * dot : alpha * dot + beta * out;
  };
  for (; j + 4 <= n; j += 4) {
    const float *r[4] = {w + j * ldw, w + (j + 1) * ldw, w + (j + 2) * ldw,
                         w + (j + 3) * ldw};
    __m512 acc[4][2];
    for (auto &a : acc)
      a[0] = a[1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);
      for (int q = 0; q < 4; ++q) {
        prefetchBytes(reinterpret_cast<uintptr_t>(r[q] + i) + 1024, 128);
        acc[q][0] = _mm512_fmadd_ps(_mm512_loadu_ps(r[q] + i), x0, acc[q][0]);
        acc[q][1] =
            _mm512_fmadd_ps(_mm512_loadu_ps(r[q] + i + 16), x1, acc[q][1]);
      }
    }
    for (; i < k; i += 16) {
      __mmask16 m = headMask(k - i);
      __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
      for (int q = 0; q < 4; ++q)
        acc[q][0] =
            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, r[q] + i), xv, acc[q][0]);
    }
    for (int q = 0; q < 4; ++q)
      store(j + q, _mm512_reduce_add_ps(_mm512_add_ps(acc[q][0], acc[q][1])));
  }
  for (; j < n; ++j) {
    const float *row = w + j * ldw;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < k; i += 16) {
      __mmask16 m = headMask(k - i);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, row + i),
                            _mm512_maskz_loadu_ps(m, x + i), acc);
    }
    store(j, _mm512_reduce_add_ps(acc));
  }
}
#endif

void detail::sgemmSerial(bool transA, bool transB, int64_t m, int64_t n,
                         int64_t k, float alpha, const float *a, int64_t lda,
                         const float *b, int64_t ldb, float beta, float *c,
                         int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    // C = beta * C; OpenBLAS would read lda >= 1 rows of an empty A.
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    return;
  }
  // One row or one column of C is a matrix-vector product: OpenBLAS's
  // sgemm would pack the whole matrix operand on every call (a batch-1
  // classifier's weight, megabytes, to multiply it once); its sgemv reads
  // it in place.
  if ((m == 1 || n == 1) && beta == 0.0f) // gemv scales y by beta: 0 * NaN
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = 0.0f;
#if TM_HAVE_SIMD512
  // Dot products with rows of a row-major matrix, the vector contiguous.
  if (simd512::available()) {
    if (m == 1 && transB && (!transA || lda == 1)) // B (n x k): c = B a
      return rowDots(b, ldb, a, n, k, alpha, beta, c, 1);
    if (n == 1 && !transA && (transB || ldb == 1)) // A (m x k): c = A b
      return rowDots(a, lda, b, m, k, alpha, beta, c, ldc);
  }
#endif
  if (m == 1) { // c (1 x n) = a (1 x k) * op(B)
    int incA = transA ? int(lda) : 1;
    if (transB) // B (n x k): c = B a
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), alpha, b, int(ldb), a, incA,
                  beta, c, 1);
    else // B (k x n): c = B^T a
      cblas_sgemv(CblasRowMajor, CblasTrans, int(k), int(n), alpha, b, int(ldb), a, incA,
                  beta, c, 1);
    return;
  }
  if (n == 1) { // c (m x 1, stride ldc) = op(A) * b (k x 1)
    int incB = transB ? 1 : int(ldb);
    if (transA) // A (k x m): c = A^T b
      cblas_sgemv(CblasRowMajor, CblasTrans, int(k), int(m), alpha, a, int(lda), b, incB,
                  beta, c, int(ldc));
    else // A (m x k): c = A b
      cblas_sgemv(CblasRowMajor, CblasNoTrans, int(m), int(k), alpha, a, int(lda), b, incB,
                  beta, c, int(ldc));
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

namespace {

/// Whether C = A * B runs on the runtime's own AVX-512 micro-kernel
/// (Gemm.h) rather than the BLAS: the CPU has AVX-512F (checked at run
/// time, whatever BLAS kernel the environment selects), A's rows are
/// contiguous, neither operand is transposed, C is overwritten, and there
/// are enough rows and columns to fill the 8 x 48 tiles.
bool microGemmFits(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   int64_t lda, float alpha, float beta) {
  return !transA && !transB && lda == k && k > 0 && m >= GemmMR && n >= 16 &&
         alpha == 1.0f && beta == 0.0f && gemmMicroKernelAvailable();
}

/// One serial product on the calling thread: the micro-kernel where it
/// fits, else sgemmSerial.
void gemmSerial(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                float alpha, const float *a, int64_t lda, const float *b,
                int64_t ldb, float beta, float *c, int64_t ldc) {
  if (microGemmFits(transA, transB, m, n, k, lda, alpha, beta))
    return microSgemm(m, n, k, a, GemmB{b, GemmNR, ldb}, c, ldc, 1);
  sgemmSerial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// The float64 counterpart of sgemmSerial, on cblas_dgemm.
void gemmSerial(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                double alpha, const double *a, int64_t lda, const double *b,
                int64_t ldb, double beta, double *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Threads for a product of `flops` on the micro-kernel: one inside a
/// parallel region or below ~1 MFLOP, where a fork/join costs more than
/// it saves.
int gemmThreads(double flops) {
  return omp_in_parallel() || flops < 1e6 ? 1 : omp_get_max_threads();
}

/// parallelSgemm over float (sgemm) or double (dgemm) buffers.
template <typename T>
void parallelGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  T alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
                  T beta, T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (!omp_in_parallel())
    ensureSerialBlas();
  int threads = gemmThreads(2.0 * double(m) * double(n) * double(k));
  if (threads <= 1) {
    gemmSerial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (microGemmFits(transA, transB, m, n, k, lda, alpha, beta))
      return microSgemm(m, n, k, a, GemmB{b, GemmNR, ldb}, c, ldc, threads);
  }
  // Split the larger output dimension into one part per thread, in
  // multiples of 16 so every part keeps full micro-kernel tiles. Each part
  // packs its own copy of the shared operand; that is O(K x other dim) per
  // part against O(K x other dim x part size) of arithmetic.
  bool byRows = m >= n;
  int64_t extent = byRows ? m : n;
  int64_t unit = 16;
  int64_t units = (extent + unit - 1) / unit;
  int parts = int(std::min<int64_t>(threads, units));
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; ++p) {
    int64_t u0 = units * p / parts, u1 = units * (p + 1) / parts;
    int64_t lo = std::min(extent, u0 * unit), hi = std::min(extent, u1 * unit);
    if (lo >= hi)
      continue;
    if (byRows) {
      const T *ap = transA ? a + lo : a + lo * lda;
      gemmSerial(transA, transB, hi - lo, n, k, alpha, ap, lda, b, ldb, beta,
                 c + lo * ldc, ldc);
    } else {
      const T *bp = transB ? b + lo * ldb : b + lo;
      gemmSerial(transA, transB, m, hi - lo, k, alpha, a, lda, bp, ldb, beta,
                 c + lo, ldc);
    }
  }
}

/// Throws "<op>: <what> (shape) must be floating point, got int32": the
/// products compute float32 and float64 (16-bit floats in float32), never
/// integers.
void requireFloatOperand(llvm::StringRef op, const Tensor &t,
                         llvm::StringRef what) {
  requireDefined(op, t, what);
  if (!isFloat(t.dtype()))
    raise("{}: {} must be floating point (float32, float64, float16 or "
          "bfloat16), got {}",
          op.str(), describe(what, t), dtypeName(t.dtype()).str());
}

/// The sizes of a matmul, checked: op(a) is (..., M, K), op(b) (..., K, N).
struct MatmulDims {
  bool aVec, bVec, ta, tb;
  int64_t m, n, k;
  Shape batchA, batchB, batch, out;
};

/// M, K and the transposes of `a` (a 1-D `a` is one row).
void rowsOfA(const Tensor &a, bool transposeA, MatmulDims &d, int64_t &ka) {
  d.aVec = a.rank() == 1;
  d.ta = transposeA && !d.aVec;
  if (d.aVec) {
    d.m = 1;
    ka = a.dim(0);
    return;
  }
  int64_t r = a.dim(a.rank() - 2), c = a.dim(a.rank() - 1);
  d.m = d.ta ? c : r;
  ka = d.ta ? r : c;
  d.batchA.assign(a.shape().begin(), a.shape().end() - 2);
}

/// K, N and the transposes of `b` (a 1-D `b` is one column).
void colsOfB(const Tensor &b, bool transposeB, MatmulDims &d, int64_t &kb) {
  d.bVec = b.rank() == 1;
  d.tb = transposeB && !d.bVec;
  if (d.bVec) {
    kb = b.dim(0);
    d.n = 1;
    return;
  }
  int64_t r = b.dim(b.rank() - 2), c = b.dim(b.rank() - 1);
  kb = d.tb ? c : r;
  d.n = d.tb ? r : c;
  d.batchB.assign(b.shape().begin(), b.shape().end() - 2);
}

/// The NumPy broadcast of the batch dimensions of a and b.
Shape matmulBatch(const Tensor &a, const Tensor &b, const MatmulDims &d) {
  size_t rank = std::max(d.batchA.size(), d.batchB.size());
  Shape batch(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < d.batchA.size() ? d.batchA[d.batchA.size() - 1 - i] : 1;
    int64_t db = i < d.batchB.size() ? d.batchB[d.batchB.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      raise("matmul: batch dimensions {} of a {} and {} of b {} do not "
            "broadcast",
            shapeStr(d.batchA), shapeStr(a.shape()), shapeStr(d.batchB),
            shapeStr(b.shape()));
    batch[rank - 1 - i] = da == 1 ? db : da;
  }
  return batch;
}

MatmulDims matmulDims(const Tensor &a, const Tensor &b, bool transposeA,
                      bool transposeB) {
  if (a.rank() == 0 || b.rank() == 0)
    raise("matmul: operands must have at least one dimension, got a {} and "
          "b {}",
          shapeStr(a.shape()), shapeStr(b.shape()));
  MatmulDims d;
  int64_t ka, kb;
  rowsOfA(a, transposeA, d, ka);
  colsOfB(b, transposeB, d, kb);
  if (ka != kb)
    raise("matmul: a {} and b {} have mismatched inner dimensions {} and "
          "{}{}",
          shapeStr(a.shape()), shapeStr(b.shape()), ka, kb,
          (d.ta || d.tb)
              ? fmt::format(" (transpose_a={}, transpose_b={})", d.ta, d.tb)
              : std::string());
  d.k = ka;
  d.batch = matmulBatch(a, b, d);
  for (int64_t v : {d.m, d.n, d.k})
    requireBlasSize("matmul", v, "dimension");
  d.out = d.batch;
  if (!d.aVec)
    d.out.push_back(d.m);
  if (!d.bVec)
    d.out.push_back(d.n);
  return d;
}

/// The batched products of matmul into `out` (non-empty), T = float or
/// double.
template <typename T>
void matmulInto(const Tensor &a, const Tensor &b, const MatmulDims &d,
                Tensor &out) {
  int64_t m = d.m, n = d.n, k = d.k;
  bool ta = d.ta, tb = d.tb;
  int64_t lda = d.aVec ? k : a.dim(a.rank() - 1);
  int64_t ldb = d.bVec ? 1 : b.dim(b.rank() - 1);
  const T *pa = a.data<T>(), *pb = b.data<T>();
  T *pc = out.data<T>();

  // b shared by every batch and a not transposed: the batch folds into M.
  if (d.batchB.empty() && !ta && !d.aVec) {
    int64_t rows = shapeNumel(d.batchA) * m;
    requireBlasSize("matmul", rows, "folded row count");
    parallelGemm<T>(false, tb, rows, n, k, T(1), pa, lda, pb, ldb, T(0), pc, n);
    return;
  }

  // General batched case: matrix offsets through broadcast strides.
  int64_t count = shapeNumel(d.batch);
  auto plan =
      makeBroadcastPlan<2>(d.batch, {llvm::ArrayRef<int64_t>(d.batchA),
                                     llvm::ArrayRef<int64_t>(d.batchB)});
  llvm::SmallVector<int64_t, 0> offA(count), offB(count);
  if (!d.batch.empty()) {
    forEachRow(plan, 0, plan.rows(),
               [&](int64_t o, const std::array<int64_t, 2> &off) {
                 for (int64_t i = 0; i < plan.inner(); ++i) {
                   offA[o + i] = off[0] + i * plan.innerStride(0);
                   offB[o + i] = off[1] + i * plan.innerStride(1);
                 }
               });
  } else {
    offA[0] = offB[0] = 0;
  }
  int64_t sizeA = m * k, sizeB = k * n, sizeC = m * n;
  double flops = 2.0 * double(m) * double(n) * double(k);
  int threads = omp_get_max_threads();
  if (count >= threads && flops < 4e7) {
    // Many small products: one whole product per thread.
    ensureSerialBlas();
#pragma omp parallel for schedule(static) if (count > 1 && threads > 1)
    for (int64_t i = 0; i < count; ++i)
      gemmSerial(ta, tb, m, n, k, T(1), pa + offA[i] * sizeA, lda,
                 pb + offB[i] * sizeB, ldb, T(0), pc + i * sizeC, n);
  } else {
    for (int64_t i = 0; i < count; ++i)
      parallelGemm<T>(ta, tb, m, n, k, T(1), pa + offA[i] * sizeA, lda,
                      pb + offB[i] * sizeB, ldb, T(0), pc + i * sizeC, n);
  }
}

} // namespace

void parallelSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
  parallelGemm<float>(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c,
                      ldc);
}

Tensor detail::matmulPackedB(const Tensor &a, const Tensor &b,
                             LinearWeightPack &pack) {
  // matmulInto's folded case (b one matrix, a not a vector) where
  // parallelGemm takes the micro-kernel.
  if (!a.defined() || !b.defined() || a.dtype() != DType::Float32 ||
      b.dtype() != DType::Float32 || a.rank() < 2 || b.rank() != 2 ||
      !a.isContiguous())
    return Tensor();
  int64_t k = b.dim(0), n = b.dim(1);
  if (k == 0 || a.dim(a.rank() - 1) != k)
    return Tensor();
  int64_t rows = a.numel() / k;
  if (rows > INT32_MAX || n > INT32_MAX || k > INT32_MAX ||
      !microGemmFits(false, false, rows, n, k, k, 1.0f, 0.0f))
    return Tensor();
  std::shared_ptr<const PackedGemmB> packed = pack.get(b.permuted({1, 0}));
  if (!packed)
    return Tensor();
  Shape shape(a.shape().begin(), a.shape().end());
  shape.back() = n;
  Tensor out = Tensor::empty(shape, DType::Float32);
  microSgemm(rows, n, k, a.data<float>(), packed->operand(), out.data<float>(),
             n, gemmThreads(2.0 * double(rows) * double(n) * double(k)));
  return out;
}

Tensor matmul(const Tensor &a, const Tensor &b, bool transposeA,
              bool transposeB) {
  requireFloatOperand("matmul", a, "a");
  requireFloatOperand("matmul", b, "b");
  MatmulDims d = matmulDims(a, b, transposeA, transposeB);
  DType outType = promoteTypes(a.dtype(), b.dtype());
  DType ct = floatComputeType(outType);
  Tensor out = Tensor::empty(d.out, ct);
  if (out.numel() != 0) {
    if (ct == DType::Float64)
      matmulInto<double>(asDType(a, ct), asDType(b, ct), d, out);
    else
      matmulInto<float>(asDType(a, ct), asDType(b, ct), d, out);
  }
  return asDType(out, outType);
}

namespace {

double activated(Activation act, double v) {
  switch (act) {
  case Activation::None:
    return v;
  case Activation::Relu:
    return v < 0.0 ? 0.0 : v;
  case Activation::Relu6:
    return v < 0.0 ? 0.0 : (v > 6.0 ? 6.0 : v);
  }
  return v;
}

/// out[r, j] = act(out[r, j] + bias[j]) for an (rows, cols) matrix.
template <typename T>
void rowBiasActivate(T *out, int64_t rows, int64_t cols, const T *bias,
                     Activation act) {
  if (!bias && act == Activation::None)
    return;
  parallelFor(
      rows, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(cols, 1)),
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T *row = out + r * cols;
          if constexpr (std::is_same_v<T, float>) {
            addActivate(row, bias, cols, act);
          } else {
            for (int64_t j = 0; j < cols; ++j)
              row[j] = activated(act, bias ? row[j] + bias[j] : row[j]);
          }
        }
      });
}

/// x (rows, in) @ weight^T (in, outF) + bias into `out`, all of dtype T,
/// then the activation and (float only) `tail`; through the micro-kernel,
/// which applies them block by block, when `packed` holds weight^T packed
/// for it.
template <typename T>
void linearInto(const Tensor &x, const Tensor &weight, const Tensor &bias,
                Activation act, int64_t rows, int64_t in, Tensor &out,
                const PackedGemmB *packed,
                llvm::function_ref<void(float *, int64_t)> tail,
                const float *addend) {
  int64_t outF = weight.dim(0);
  const T *pb = bias.defined() ? bias.data<T>() : nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (packed && microGemmFits(false, false, rows, outF, in, in, 1.0f, 0.0f)) {
      int threads = gemmThreads(2.0 * double(rows) * double(outF) * double(in));
      microSgemm(rows, outF, in, x.data<float>(), packed->operand(),
                 out.data<float>(), outF, threads,
                 GemmEpilogue{pb, act, tail, addend});
      return;
    }
  }
  parallelGemm<T>(false, true, rows, outF, in, T(1), x.data<T>(), in, weight.data<T>(), in,
                  T(0), out.data<T>(), outF);
  rowBiasActivate<T>(out.data<T>(), rows, outF, pb, act);
  if constexpr (std::is_same_v<T, float>)
    if (tail || addend)
      parallelFor(
          rows,
          std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(outF, 1)),
          [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) {
              float *row = out.data<float>() + r * outF;
              if (tail)
                tail(row, outF);
              if (addend)
                addActivate(row, addend + r * outF, outF, Activation::None);
            }
          });
}

/// Checks linear's operands; returns the dtype of its result.
DType checkLinear(const Tensor &x, const Tensor &weight, const Tensor &bias) {
  requireFloatOperand("linear", x, "input");
  requireFloatOperand("linear", weight, "weight");
  requireRank("linear", weight, "weight", 2, "(out_features, in_features)");
  if (x.rank() == 0)
    raise("linear: input must have at least one dimension, got ()");
  int64_t in = x.dim(x.rank() - 1), outF = weight.dim(0);
  if (weight.dim(1) != in)
    raise("linear: input {} has {} features but weight {} expects {}",
          shapeStr(x.shape()), in, shapeStr(weight.shape()), weight.dim(1));
  DType outType = promoteTypes(x.dtype(), weight.dtype());
  if (!bias.defined())
    return outType;
  requireFloatOperand("linear", bias, "bias");
  if (bias.rank() != 1 || bias.dim(0) != outF)
    raise("linear: bias {} does not match the {} output features of weight "
          "{}",
          shapeStr(bias.shape()), outF, shapeStr(weight.shape()));
  return promoteTypes(outType, bias.dtype());
}

} // namespace

Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias,
              Activation act) {
  return linearWithPack(x, weight, bias, act, nullptr);
}

bool detail::linearAddendFits(const Tensor &x, const Tensor &weight,
                              const Tensor &bias, const Tensor &z) {
  if (!x.defined() || !weight.defined() || !z.defined() ||
      x.dtype() != DType::Float32 || weight.dtype() != DType::Float32 ||
      z.dtype() != DType::Float32 ||
      (bias.defined() && bias.dtype() != DType::Float32) || x.rank() == 0 ||
      weight.rank() != 2 || !z.isContiguous() || z.rank() != x.rank())
    return false;
  for (size_t i = 0; i + 1 < x.rank(); ++i)
    if (z.dim(i) != x.dim(i))
      return false;
  return z.dim(z.rank() - 1) == weight.dim(0);
}

Tensor detail::linearWithPack(const Tensor &x, const Tensor &weight,
                              const Tensor &bias, Activation act,
                              const PackedGemmB *packed,
                              llvm::function_ref<void(float *, int64_t)> tail,
                              const Tensor &addend) {
  DType outType = checkLinear(x, weight, bias);
  const float *pz =
      addend.defined() && linearAddendFits(x, weight, bias, addend)
          ? addend.data<float>()
          : nullptr;
  if (addend.defined() && !pz)
    return binary(BinaryOp::Add,
                  linearWithPack(x, weight, bias, act, packed, tail), addend);
  DType ct = floatComputeType(outType);
  int64_t in = x.dim(x.rank() - 1), outF = weight.dim(0);
  Shape outShape(x.shape().begin(), x.shape().end());
  outShape.back() = outF;
  Tensor out = Tensor::empty(outShape, ct);
  if (out.numel() == 0)
    return asDType(out, outType);
  int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  if (in == 0)
    rows = out.numel() / outF;
  for (int64_t v : {rows, in, outF})
    requireBlasSize("linear", v, "dimension");
  Tensor b = bias.defined() ? asDType(bias, ct) : Tensor();
  if (ct == DType::Float64)
    linearInto<double>(asDType(x, ct), asDType(weight, ct), b, act, rows, in,
                       out, nullptr, {}, nullptr);
  else
    linearInto<float>(asDType(x, ct), asDType(weight, ct), b, act, rows, in,
                      out,
                      weight.dtype() == DType::Float32 && packed &&
                              packed->n == outF && packed->k == in
                          ? packed
                          : nullptr,
                      outType == DType::Float32 ? tail : nullptr, pz);
  return asDType(out, outType);
}

namespace {

/// beta * c broadcast to (m, n), as gemm's output buffer, in dtype `ct`.
Tensor gemmAccumulator(const Tensor &c, const Shape &outShape, DType ct) {
  Shape s = broadcastShapes("gemm", c.shape(), outShape);
  if (s != outShape)
    raise("gemm: c {} does not broadcast to the result shape {}",
          shapeStr(c.shape()), shapeStr(outShape));
  return broadcastTo(asDType(c, ct), outShape).clone(); // written in place
}

} // namespace

Tensor gemm(const Tensor &a, const Tensor &b, const Tensor &c, float alpha,
            float beta, bool transA, bool transB) {
  requireFloatOperand("gemm", a, "a");
  requireFloatOperand("gemm", b, "b");
  requireRank("gemm", a, "a", 2);
  requireRank("gemm", b, "b", 2);
  int64_t m = transA ? a.dim(1) : a.dim(0), ka = transA ? a.dim(0) : a.dim(1);
  int64_t kb = transB ? b.dim(1) : b.dim(0), n = transB ? b.dim(0) : b.dim(1);
  if (ka != kb)
    raise("gemm: a {} and b {} have mismatched inner dimensions {} and {} "
          "(transA={}, transB={})",
          shapeStr(a.shape()), shapeStr(b.shape()), ka, kb, transA, transB);
  for (int64_t v : {m, n, ka})
    requireBlasSize("gemm", v, "dimension");
  bool useC = c.defined() && beta != 0.0f;
  DType outType = promoteTypes(a.dtype(), b.dtype());
  if (useC) {
    requireFloatOperand("gemm", c, "c");
    outType = promoteTypes(outType, c.dtype());
  }
  DType ct = floatComputeType(outType);
  Shape outShape{m, n};
  Tensor out =
      useC ? gemmAccumulator(c, outShape, ct) : Tensor::empty(outShape, ct);
  if (out.numel() == 0)
    return asDType(out, outType);
  Tensor x = asDType(a, ct), y = asDType(b, ct);
  if (ct == DType::Float64)
    parallelGemm<double>(transA, transB, m, n, ka, alpha, x.data<double>(),
                         a.dim(1), y.data<double>(), b.dim(1),
                         useC ? double(beta) : 0.0, out.data<double>(), n);
  else
    parallelGemm<float>(transA, transB, m, n, ka, alpha, x.data<float>(),
                        a.dim(1), y.data<float>(), b.dim(1), useC ? beta : 0.0f,
                        out.data<float>(), n);
  return asDType(out, outType);
}

} // namespace tmg::rt
