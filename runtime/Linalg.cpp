//===- Linalg.cpp - Matrix products ---------------------------------------===//
#include "tm/runtime/Linalg.h"

#include <cblas.h>
#include <cstring>

#include "Internal.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
using namespace detail;

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
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void parallelSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  bool nested = omp_in_parallel();
  if (!nested)
    ensureSerialBlas();
  int threads = nested ? 1 : omp_get_max_threads();
  double flops = 2.0 * double(m) * double(n) * double(k);
  // Below ~1 MFLOP a fork/join costs more than it saves.
  if (threads <= 1 || flops < 1e6) {
    sgemmSerial(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
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
      const float *ap = transA ? a + lo : a + lo * lda;
      sgemmSerial(transA, transB, hi - lo, n, k, alpha, ap, lda, b, ldb, beta,
                  c + lo * ldc, ldc);
    } else {
      const float *bp = transB ? b + lo * ldb : b + lo;
      sgemmSerial(transA, transB, m, hi - lo, k, alpha, a, lda, bp, ldb, beta,
                  c + lo, ldc);
    }
  }
}

Tensor matmul(const Tensor &a, const Tensor &b, bool transposeA,
              bool transposeB) {
  requireFloat32("matmul", a, "a");
  requireFloat32("matmul", b, "b");
  if (a.rank() == 0 || b.rank() == 0)
    raise("matmul: operands must have at least one dimension, got a {} and "
          "b {}",
          shapeStr(a.shape()), shapeStr(b.shape()));
  bool aVec = a.rank() == 1, bVec = b.rank() == 1;
  bool ta = transposeA && !aVec, tb = transposeB && !bVec;
  int64_t m, ka, kb, n;
  if (aVec) {
    m = 1;
    ka = a.dim(0);
  } else {
    int64_t r = a.dim(a.rank() - 2), c = a.dim(a.rank() - 1);
    m = ta ? c : r;
    ka = ta ? r : c;
  }
  if (bVec) {
    kb = b.dim(0);
    n = 1;
  } else {
    int64_t r = b.dim(b.rank() - 2), c = b.dim(b.rank() - 1);
    kb = tb ? c : r;
    n = tb ? r : c;
  }
  if (ka != kb)
    raise("matmul: a {} and b {} have mismatched inner dimensions {} and "
          "{}{}",
          shapeStr(a.shape()), shapeStr(b.shape()), ka, kb,
          (ta || tb) ? fmt::format(" (transpose_a={}, transpose_b={})", ta, tb)
                     : std::string());
  int64_t k = ka;
  llvm::ArrayRef<int64_t> batchA =
      aVec ? llvm::ArrayRef<int64_t>() : a.shape().drop_back(2);
  llvm::ArrayRef<int64_t> batchB =
      bVec ? llvm::ArrayRef<int64_t>() : b.shape().drop_back(2);
  Shape batch;
  {
    size_t rank = std::max(batchA.size(), batchB.size());
    batch.assign(rank, 1);
    for (size_t i = 0; i < rank; ++i) {
      int64_t da = i < batchA.size() ? batchA[batchA.size() - 1 - i] : 1;
      int64_t db = i < batchB.size() ? batchB[batchB.size() - 1 - i] : 1;
      if (da != db && da != 1 && db != 1)
        raise("matmul: batch dimensions {} of a {} and {} of b {} do not "
              "broadcast",
              shapeStr(batchA), shapeStr(a.shape()), shapeStr(batchB),
              shapeStr(b.shape()));
      batch[rank - 1 - i] = da == 1 ? db : da;
    }
  }
  for (int64_t v : {m, n, k})
    requireBlasSize("matmul", v, "dimension");

  Shape outShape = batch;
  if (!aVec)
    outShape.push_back(m);
  if (!bVec)
    outShape.push_back(n);
  Tensor out = Tensor::empty(outShape, DType::Float32);
  if (out.numel() == 0)
    return out;
  int64_t lda = aVec ? k : a.dim(a.rank() - 1);
  int64_t ldb = bVec ? 1 : b.dim(b.rank() - 1);
  const float *pa = a.data<float>(), *pb = b.data<float>();
  float *pc = out.data<float>();

  // b shared by every batch and a not transposed: the batch folds into M.
  if (batchB.empty() && !ta && !aVec) {
    int64_t rows = shapeNumel(batchA) * m;
    requireBlasSize("matmul", rows, "folded row count");
    parallelSgemm(false, tb, rows, n, k, 1.0f, pa, lda, pb, ldb, 0.0f, pc, n);
    return out;
  }

  // General batched case: matrix offsets through broadcast strides.
  int64_t count = shapeNumel(batch);
  auto plan = makeBroadcastPlan<2>(batch, {batchA, batchB});
  llvm::SmallVector<int64_t, 0> offA(count), offB(count);
  if (!batch.empty()) {
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
      sgemmSerial(ta, tb, m, n, k, 1.0f, pa + offA[i] * sizeA, lda,
                  pb + offB[i] * sizeB, ldb, 0.0f, pc + i * sizeC, n);
  } else {
    for (int64_t i = 0; i < count; ++i)
      parallelSgemm(ta, tb, m, n, k, 1.0f, pa + offA[i] * sizeA, lda,
                    pb + offB[i] * sizeB, ldb, 0.0f, pc + i * sizeC, n);
  }
  return out;
}

/// out[r, j] = act(out[r, j] + bias[j]) for an (rows, cols) matrix.
static void rowBiasActivate(float *out, int64_t rows, int64_t cols,
                            const float *bias, Activation act) {
  if (!bias && act == Activation::None)
    return;
  parallelFor(
      rows, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(cols, 1)),
      [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          float *row = out + r * cols;
          if (bias)
            for (int64_t j = 0; j < cols; ++j)
              row[j] = activate(act, row[j] + bias[j]);
          else
            biasActivate(row, cols, 0.0f, act);
        }
      });
}

Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias,
              Activation act) {
  requireFloat32("linear", x, "input");
  requireFloat32("linear", weight, "weight");
  requireRank("linear", weight, "weight", 2, "(out_features, in_features)");
  if (x.rank() == 0)
    raise("linear: input must have at least one dimension, got ()");
  int64_t in = x.dim(x.rank() - 1), outF = weight.dim(0);
  if (weight.dim(1) != in)
    raise("linear: input {} has {} features but weight {} expects {}",
          shapeStr(x.shape()), in, shapeStr(weight.shape()), weight.dim(1));
  if (bias.defined()) {
    requireFloat32("linear", bias, "bias");
    if (bias.rank() != 1 || bias.dim(0) != outF)
      raise("linear: bias {} does not match the {} output features of weight "
            "{}",
            shapeStr(bias.shape()), outF, shapeStr(weight.shape()));
  }
  Shape outShape(x.shape().begin(), x.shape().end());
  outShape.back() = outF;
  Tensor out = Tensor::empty(outShape, DType::Float32);
  if (out.numel() == 0)
    return out;
  int64_t rows = x.numel() / std::max<int64_t>(in, 1);
  if (in == 0)
    rows = out.numel() / outF;
  for (int64_t v : {rows, in, outF})
    requireBlasSize("linear", v, "dimension");
  parallelSgemm(false, true, rows, outF, in, 1.0f, x.data<float>(), in,
                weight.data<float>(), in, 0.0f, out.data<float>(), outF);
  rowBiasActivate(out.data<float>(), rows, outF,
                  bias.defined() ? bias.data<float>() : nullptr, act);
  return out;
}

Tensor gemm(const Tensor &a, const Tensor &b, const Tensor &c, float alpha,
            float beta, bool transA, bool transB) {
  requireFloat32("gemm", a, "a");
  requireFloat32("gemm", b, "b");
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
  Shape outShape{m, n};
  Tensor out;
  float betaEff = 0.0f;
  if (c.defined() && beta != 0.0f) {
    requireFloat32("gemm", c, "c");
    Shape s = broadcastShapes("gemm", c.shape(), outShape);
    if (s != outShape)
      raise("gemm: c {} does not broadcast to the result shape {}",
            shapeStr(c.shape()), shapeStr(outShape));
    out = broadcastTo(c, outShape).clone(); // written in place below
    betaEff = beta;
  } else {
    out = Tensor::empty(outShape, DType::Float32);
  }
  if (out.numel() == 0)
    return out;
  parallelSgemm(transA, transB, m, n, ka, alpha, a.data<float>(), a.dim(1),
                b.data<float>(), b.dim(1), betaEff, out.data<float>(), n);
  return out;
}

} // namespace tmg::rt
