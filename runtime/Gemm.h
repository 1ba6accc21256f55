//===- Gemm.h - The runtime's own FP32 GEMM (internal) ----------*- C++ -*-===//
//
// C (M x N, row-major) = A (M x K) * B (K x N) with A pre-packed, for
// convolutions: A holds the weights (rows = output channels), B the patch
// matrix, C the NCHW output plane. The micro-kernel computes an 8 x 48
// tile (8 rows; 3 AVX-512 vectors of 16 columns) from
//  * A packed once into panels of 8 rows, K x 8 floats each ([k][row],
//    rows past M zero), so a row's weight at depth k is one broadcast;
//  * B read in strips of up to 48 columns, row k of a strip at
//    `strip + k * ldb`: either the im2col buffer written directly in this
//    strip layout (ldb = the strip's width, strips K x 48 apart) or, for
//    1x1 stride-1 convolutions, the input itself (ldb = N, strips 48
//    floats apart); an implicit GEMM's rows are at per-row offsets into
//    phase planes of the input (GemmB::rowOffsets).
// Matrix products (microSgemm) read A in place instead of packed panels:
// the kernel broadcasts its 8 rows' values from the row-major matrix.
// The bias, a residual (GemmAddend) and the activation are applied in
// the micro-kernel's final store. The depth is split into blocks of <= GemmKC so one A micro-panel
// (8 x KC) stays in L1 while it meets every strip of the tile; columns
// tails of at most 8 use a kernel that runs its vectors along the rows.
//
// Only built for AVX-512 (one `target` function, chosen at run time, no
// IFUNC, so it also runs under ThreadSanitizer); elsewhere the convolution
// keeps its OpenBLAS path (see Conv.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>

#include <llvm/ADT/STLExtras.h>

#include "tm/runtime/Common.h"

namespace tmg::rt::detail {

constexpr int64_t GemmMR = 8;  ///< rows of a micro-tile
constexpr int64_t GemmNR = 48; ///< columns of a micro-tile (one B strip)
constexpr int64_t GemmKC = 256; ///< the largest depth block

/// The depth block for depth k: k cut into ceil(k / GemmKC) blocks of equal
/// size (the last one possibly shorter), so no block is a short remainder.
inline int64_t gemmDepthBlock(int64_t k) {
  int64_t blocks = (k + GemmKC - 1) / GemmKC;
  return blocks ? (k + blocks - 1) / blocks : 1;
}

/// True when this CPU runs the micro-kernel (AVX-512F).
bool gemmMicroKernelAvailable();

/// Packs rows [0, m) of each of `groups` groups of the row-major weight
/// matrix `w` (groups * m rows of k floats) into `dst`, which holds
/// packedPanelFloats(groups, m, k) floats. A group's rows form
/// panels = ceil(m / 8) panels of 8 (rows past m zero); its depth is cut
/// into blocks of gemmDepthBlock(k), and each block holds every panel's slice of it
/// in turn, so the kernel reads one contiguous stream per depth block:
/// group g, depth block at k0 (length kc), panel p at
///   dst + g * panels * k * 8 + k0 * panels * 8 + p * kc * 8,
/// element (k0 + kk, row 8p + r) at + kk * 8 + r.
int64_t packedPanelFloats(int64_t groups, int64_t m, int64_t k);
void packPanels(const float *w, int64_t groups, int64_t m, int64_t k,
                float *dst);
/// Panels [p0, p1) of packPanels' layout for one group (`w` m x k), so
/// threads can pack disjoint ranges of one matrix. Element (row, kk) is
/// read at w[row * ld + kk * inc]; ld defaults to k (row-major), any
/// layout (a transposed view: ld 1, inc the row stride) may be packed.
void packPanelRange(const float *w, int64_t m, int64_t k, int64_t p0,
                    int64_t p1, float *dst, int64_t ld = -1, int64_t inc = 1);

/// The B operand: strip s (columns 48s .. 48s + 47) starts at
/// `data + s * stripStride`; its row k is at `+ k * ldb`, or, when
/// `compact` (the im2col layout), at `+ k * width` with width the strip's
/// column count (48 but for a last, partial strip: a narrow tail's rows
/// then share cache lines), or, with `rowOffsets` (an implicit GEMM whose
/// rows are windows of one buffer, see Conv.cpp), at `+ rowOffsets[k]`.
struct GemmB {
  const float *data;
  int64_t stripStride, ldb;
  bool compact = false;
  const int64_t *rowOffsets = nullptr;
};

/// A matrix added to C where it is stored, after the bias and before the
/// activation (a residual connection): row r of C's rows at
/// `data + r * ld`; none when data is null.
struct GemmAddend {
  const float *data = nullptr;
  int64_t ld = 0;
};
/// C rows [0, m) x columns [0, n) (row stride ldc) = A * B over depth k,
/// then + bias[row] (when non-null), + `addend` and the activation. `a` is one
/// group of packPanels' output (`panels` panels); the rows are those of panels
/// p0, p0 + 1, ... Single-threaded; requires gemmMicroKernelAvailable().
void gemmPackedA(const float *a, int64_t panels, int64_t p0, int64_t m,
                 int64_t n, int64_t k, GemmB b, float *c, int64_t ldc,
                 const float *bias, Activation act, GemmAddend addend = {});

/// One depth block [k0, k0 + kc) of gemmPackedA (the first block writes
/// C, later ones add to it, the last applies bias, addend and activation); `b`
/// holds just the block's kc rows (its rowOffsets, if any, start at the
/// block's first row). Calling it for consecutive blocks
/// covering [0, k) equals one gemmPackedA. Requires k > 0.
void gemmPackedABlock(const float *a, int64_t panels, int64_t p0, int64_t m,
                      int64_t n, int64_t k, int64_t k0, int64_t kc, GemmB b,
                      float *c, int64_t ldc, const float *bias, Activation act,
                      GemmAddend addend = {});

/// B = W^T of a row-major weight W (n x k), as linear layers multiply by,
/// packed once for the micro-kernel: strips of 48 columns (48 rows of W),
/// each k rows of 48 floats (columns past n zero), so every depth block
/// of a strip is one contiguous stream.
struct PackedGemmB {
  Tensor data;
  int64_t n = 0, k = 0;
  GemmB operand() const { return {data.data<float>(), k * GemmNR, GemmNR}; }
};
/// The packed W^T of a float32 2-d `w` (a view of any strides).
std::shared_ptr<const PackedGemmB> packTransposedB(const Tensor &w);

/// What microSgemm applies to each block of C as soon as it is computed:
/// c[i][j] = act(c[i][j] + colBias[j]) (colBias may be null; as
/// biasActivate without it), then `tail` on each row segment of the block
/// (an elementwise function, e.g. GELU), then c[i][j] += addend[i * ldc +
/// j] (a residual of C's shape and layout, when not null).
struct GemmEpilogue {
  const float *colBias = nullptr;
  Activation act = Activation::None;
  llvm::function_ref<void(float *, int64_t)> tail;
  const float *addend = nullptr;
};

/// C (m x n) = A (m x k, row-major, rows contiguous) * B on the
/// micro-kernel with `threads` threads, then the epilogue: A read in place
/// (the kernel broadcasts its 8 rows from the matrix, no packing); `b` is
/// B in place (strips 48 floats apart) or a PackedGemmB. Requires
/// gemmMicroKernelAvailable(), m, n, k > 0.
void microSgemm(int64_t m, int64_t n, int64_t k, const float *a, GemmB b, float *c,
                int64_t ldc, int threads, const GemmEpilogue &epilogue = {});

/// linear() whose weight^T is `packed` for the micro-kernel (nullptr, or a
/// pack of another shape: the BLAS path), then `tail` (an elementwise
/// function over float32 rows, e.g. GELU) on a float32 result, applied to
/// each block of the output as it is computed on the micro-kernel; then,
/// when `addend` fits the result (linearAddendFits), + addend, bit for bit
/// the add op on the result (a residual connection's add).
Tensor linearWithPack(const Tensor &x, const Tensor &weight, const Tensor &bias,
                      Activation act, const PackedGemmB *packed,
                      llvm::function_ref<void(float *, int64_t)> tail = {},
                      const Tensor &addend = {});

/// Whether linear(x, weight, bias) + z can run as one linearWithPack with
/// addend z: all float32, z contiguous and of the result's shape.
bool linearAddendFits(const Tensor &x, const Tensor &weight, const Tensor &bias,
                      const Tensor &z);

/// The packed weight of one linear step, made on first use and remade
/// when another tensor is bound to the weight (one per step, so it lives
/// and dies with the plan).
class LinearWeightPack {
public:
  /// nullptr when `w` cannot use the micro-kernel (the linear then runs
  /// on the BLAS).
  std::shared_ptr<const PackedGemmB> get(const Tensor &w);

private:
  std::mutex mu_;
  Tensor key_;
  std::shared_ptr<const PackedGemmB> packed_;
};

/// matmul(a, b) with b's pack for the micro-kernel made (once) by `pack`
/// from b^T, bit for bit matmul(a, b): where matmul computes the product as
/// one micro-kernel GEMM (a float32 with contiguous rows, b one float32
/// matrix, AVX-512); undefined otherwise (the caller runs matmul()).
Tensor matmulPackedB(const Tensor &a, const Tensor &b, LinearWeightPack &pack);

} // namespace tmg::rt::detail
