//===- Linalg.h - Matrix products -------------------------------*- C++ -*-===//
//
// GEMM-shaped kernels. The products run on OpenBLAS's sgemm (float32) or
// dgemm (float64), one call per OpenMP thread on a fixed partition of the
// output (see `parallelSgemm`), so OpenBLAS's own thread pool is kept at one
// thread and never competes with OpenMP for the cores.
//
// Dtypes: the operands promote by `promoteTypes`; a float64 result computes
// in float64, float32 in float32, float16 and bfloat16 in float32 rounded
// back. Integer and bool operands throw ("matmul: a (2, 2) must be floating
// point ..., got int64").
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "tm/runtime/Common.h"

namespace tmg::rt {

/// NumPy `matmul` with optional transposes of the last two
/// dimensions of either operand.
///  * 2-D and higher: (..., M, K) @ (..., K, N) -> (..., M, N); the batch
///    dimensions broadcast (NumPy rules).
///  * a 1-D `a` (K,) acts as (1, K) and a 1-D `b` (K,) as (K, 1); the added
///    dimension is removed from the result. Transposes do not apply to 1-D
///    operands.
/// Throws when the contracted sizes differ or the batch shapes do not
/// broadcast, e.g. "matmul: a (2, 3) and b (4, 5) have mismatched inner
/// dimensions 3 and 4".
Tensor matmul(const Tensor &a, const Tensor &b, bool transposeA = false,
              bool transposeB = false);

/// y = act(x @ weight^T + bias): x (..., in), weight (out, in), bias (out,)
/// or undefined; result (..., out).
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias = {},
              Activation act = Activation::None);

/// Scaled dot-product attention, softmax((query * scale) @ key^T) @ value,
/// the softmax over the last axis: query (..., L, E), key (..., S, E),
/// value (..., S, Ev) -> (..., L, Ev); the batch dimensions broadcast.
/// `scale` defaults to 1 / sqrt(E). Float32. With equal batch shapes it
/// runs as one kernel that never writes out the (..., L, S) scores.
Tensor scaledDotProductAttention(const Tensor &query, const Tensor &key,
                                 const Tensor &value,
                                 std::optional<double> scale = std::nullopt);

/// ONNX Gemm: y = alpha * op(a) @ op(b) + beta * c, with op = transpose when
/// the flag is set; a and b are 2-D, c (optional) broadcasts
/// unidirectionally to (M, N); alpha and beta apply in the computing dtype.
Tensor gemm(const Tensor &a, const Tensor &b, const Tensor &c = {},
            float alpha = 1.0f, float beta = 1.0f, bool transA = false,
            bool transB = false);

/// Row-major C = alpha * op(A) @ op(B) + beta * C on raw buffers (M x K
/// times K x N, leading dimensions in elements), parallelised over a fixed
/// partition of C's rows or columns with one single-threaded sgemm call per
/// part. Called inside an OpenMP parallel region it runs on the calling
/// thread. For kernel authors (conv and the interpreter's fused ops); sizes
/// must fit an `int` (checked by the public kernels).
void parallelSgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                   float alpha, const float *a, int64_t lda, const float *b,
                   int64_t ldb, float beta, float *c, int64_t ldc);

} // namespace tmg::rt
