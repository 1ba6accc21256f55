//===- Gemm.cpp - The runtime's own FP32 GEMM micro-kernel ----------------===//
//
// See Gemm.h. The micro-kernel keeps its 8 x 48 tile of C in 24 AVX-512
// registers; per depth step it loads three vectors of B (the last one
// masked to the strip's width, so B is never read past its end) and
// broadcasts eight weights of A, 24 FMAs in all. Tails: rows past M are
// zero in the packed A and never stored; columns past N are masked off.
//
//===----------------------------------------------------------------------===//
#include "Gemm.h"

#include "Internal.h"
#include "Simd512.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns about the undefined start value of _mm512_undefined_ps in
// its own headers' masked intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define TM_HAVE_AVX512_KERNEL 1
#endif

namespace tmg::rt::detail {

int64_t packedPanelFloats(int64_t groups, int64_t m, int64_t k) {
  return groups * ((m + GemmMR - 1) / GemmMR) * k * GemmMR;
}

std::shared_ptr<const PackedGemmB> packTransposedB(const Tensor &w) {
  auto p = std::make_shared<PackedGemmB>();
  p->n = w.dim(0);
  p->k = w.dim(1);
  int64_t strips = (p->n + GemmNR - 1) / GemmNR;
  p->data = Tensor::empty({strips * p->k * GemmNR}, DType::Float32);
  // Element (row, kk) of w, a view of any strides: W^T of a matmul's B
  // reads B's rows, 48 contiguous floats per strip and depth.
  const float *src = static_cast<const float *>(w.viewData());
  int64_t s0 = w.strides()[0], s1 = w.strides()[1];
  float *dst = p->data.data<float>();
  // Once per plan, but a transformer's weights are hundreds of MB: the
  // strips are packed (and their pages first touched) by all threads.
#pragma omp parallel for schedule(static) if (strips * p->k > (1 << 16) && !omp_in_parallel())
  for (int64_t s = 0; s < strips; ++s)
    for (int64_t kk = 0; kk < p->k; ++kk) {
      float *d = dst + (s * p->k + kk) * GemmNR;
      for (int64_t j = 0; j < GemmNR; ++j) {
        int64_t row = s * GemmNR + j;
        d[j] = row < p->n ? src[row * s0 + kk * s1] : 0.0f;
      }
    }
  return p;
}

std::shared_ptr<const PackedGemmB> LinearWeightPack::get(const Tensor &w) {
  if (!gemmMicroKernelAvailable() || !w.defined() || w.dtype() != DType::Float32 ||
      w.rank() != 2 || w.dim(0) < 16 || w.dim(1) == 0)
    return nullptr;
  std::lock_guard l(mu_);
  if (!packed_ || key_.viewData() != w.viewData() ||
      key_.shape() != w.shape() || key_.strides() != w.strides()) {
    packed_ = packTransposedB(w);
    key_ = w;
  }
  return packed_;
}

namespace {
/// C (m x n) = A * B over depth k on the micro-kernel, A read in place
/// (row-major, rows lda apart): no packing. Single-threaded.
void gemmRowsA(const float *a, int64_t lda, int64_t m, int64_t n, int64_t k,
               GemmB b, float *c, int64_t ldc);
} // namespace

void microSgemm(int64_t m, int64_t n, int64_t k, const float *a, GemmB b, float *c,
                int64_t ldc, int threads, const GemmEpilogue &ep) {
  int64_t panels = (m + GemmMR - 1) / GemmMR;
  // Work items are (row block, column tile) pairs; a tile's depth block of
  // B stays in L2 while the block's panels sweep it. Column tiles first:
  // each thread streams its own share of B once, A being the smaller
  // operand to read again, unless rowsFirst (below).
  constexpr int64_t TileCols = 4 * GemmNR, GroupPanels = 12;
  int64_t tiles = (n + TileCols - 1) / TileCols;
  // Rows first where A is the larger operand and all of B stays in L2
  // (the token-wise linears of a conv net's early stages: 3136 x 96 by
  // 96 x 384): each thread takes whole groups of 8-row panels across every
  // column tile, and writes whole rows of C, which the next row-wise op
  // reads on the same thread.
  constexpr int64_t RowsFirstMaxB = 640 << 10;
  bool rowsFirst = m > n && n * k * int64_t(sizeof(float)) <= RowsFirstMaxB;
  // (At least four row blocks per thread, for balance.)
  int64_t mBlocks =
      rowsFirst
          ? std::min(panels, std::max((panels + GroupPanels - 1) / GroupPanels,
                                      int64_t(threads) * 4))
          : std::clamp<int64_t>((int64_t(threads) * 2 + tiles - 1) / tiles, 1,
                                panels);
  int64_t items = mBlocks * tiles;
  bool epilogue =
      ep.colBias || ep.act != Activation::None || ep.tail || ep.addend;
#pragma omp parallel num_threads(threads) if (threads > 1 && items > 1)
  {
#pragma omp for schedule(static)
    for (int64_t item = 0; item < items; ++item) {
      int64_t mb = rowsFirst ? item / tiles : item % mBlocks;
      int64_t tl = rowsFirst ? item % tiles : item / mBlocks;
      int64_t j0 = tl * TileCols, j1 = std::min(n, j0 + TileCols);
      int64_t p0 = panels * mb / mBlocks, p1 = panels * (mb + 1) / mBlocks;
      GemmB bj = b;
      bj.data += (j0 / GemmNR) * b.stripStride;
      // Groups of panels, each block of C finished (epilogue included)
      // while it is in cache.
      for (int64_t g0 = p0; g0 < p1; g0 += epilogue ? GroupPanels : p1 - p0) {
        int64_t g1 = epilogue ? std::min(p1, g0 + GroupPanels) : p1;
        int64_t m0 = g0 * GemmMR, m1 = std::min(m, g1 * GemmMR);
        if (m0 >= m1)
          continue;
        float *cb = c + m0 * ldc + j0;
        gemmRowsA(a + m0 * k, k, m1 - m0, j1 - j0, k, bj, cb, ldc);
        if (!epilogue)
          continue;
        for (int64_t r = 0; r < m1 - m0; ++r) {
          float *row = cb + r * ldc;
          addActivate(row, ep.colBias ? ep.colBias + j0 : nullptr, j1 - j0, ep.act);
          if (ep.tail)
            ep.tail(row, j1 - j0);
          if (ep.addend)
            addActivate(row, ep.addend + (m0 + r) * ldc + j0, j1 - j0,
                        Activation::None);
        }
      }
    }
  }
}

#ifdef TM_HAVE_AVX512_KERNEL
namespace {
void packPanelRows(const float *w, int64_t ld, int64_t kc, float *d);
} // namespace
#endif

void packPanelRange(const float *w, int64_t m, int64_t k, int64_t p0,
                    int64_t p1, float *dst, int64_t ld, int64_t inc) {
  if (ld < 0)
    ld = k;
  int64_t panels = (m + GemmMR - 1) / GemmMR;
  int64_t kb = gemmDepthBlock(k);
  for (int64_t k0 = 0; k0 < k; k0 += kb) {
    int64_t kc = std::min(kb, k - k0);
    for (int64_t p = p0; p < p1; ++p) {
      float *d = dst + k0 * panels * GemmMR + p * kc * GemmMR;
#ifdef TM_HAVE_AVX512_KERNEL
      if (inc == 1 && (p + 1) * GemmMR <= m && gemmMicroKernelAvailable()) {
        packPanelRows(w + p * GemmMR * ld + k0, ld, kc, d);
        continue;
      }
#endif
      if (ld == 1 && (p + 1) * GemmMR <= m) {
        // A transposed source: a panel's 8 rows are contiguous at each kk.
        for (int64_t kk = 0; kk < kc; ++kk)
          std::memcpy(d + kk * GemmMR, w + p * GemmMR + (k0 + kk) * inc,
                      GemmMR * sizeof(float));
        continue;
      }
      for (int64_t r = 0; r < GemmMR; ++r) {
        int64_t row = p * GemmMR + r;
        if (row >= m) {
          for (int64_t kk = 0; kk < kc; ++kk)
            d[kk * GemmMR + r] = 0.0f;
          continue;
        }
        const float *s = w + row * ld + k0 * inc;
        if (inc == 1)
          for (int64_t kk = 0; kk < kc; ++kk)
            d[kk * GemmMR + r] = s[kk];
        else
          for (int64_t kk = 0; kk < kc; ++kk)
            d[kk * GemmMR + r] = s[kk * inc];
      }
    }
  }
}

void packPanels(const float *w, int64_t groups, int64_t m, int64_t k,
                float *dst) {
  int64_t panels = (m + GemmMR - 1) / GemmMR;
  // Large weights (packed once per plan) by all threads, panel by panel.
#pragma omp parallel for collapse(2) schedule(static) if (groups * m * k > (1 << 16) && !omp_in_parallel())
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t p = 0; p < panels; ++p)
      packPanelRange(w + g * m * k, m, k, p, p + 1, dst + g * panels * k * GemmMR);
}

#ifdef TM_HAVE_AVX512_KERNEL

bool gemmMicroKernelAvailable() {
  static const bool avail = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  }();
  return avail;
}

namespace {

#define TM_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

/// Columns [0, kc) of 8 rows of w (`ld` floats apart) as one depth block
/// of a packed panel: d[kk * 8 + r] = w[r * ld + kk], by 8 x 8 transposes
/// in registers rather than a float at a time (attention packs every
/// head's keys per call).
TM_AVX512 void packPanelRows(const float *w, int64_t ld, int64_t kc, float *d) {
  int64_t kk = 0;
  for (; kk + 8 <= kc; kk += 8)
    simd512::transpose8x8(w + kk, ld, d + kk * GemmMR, GemmMR);
  for (; kk < kc; ++kk)
    for (int i = 0; i < 8; ++i)
      d[kk * GemmMR + i] = w[i * ld + kk];
}

/// One 8 x (NV * 16) tile over depth kc: C = (accumulate ? C : 0) + A * B,
/// then, when `last`, + bias, + the addend (row r at `addend + r * ldAdd`,
/// when non-null) and the activation. `rows` <= 8 rows and
/// `cols` in (16 (NV - 1), 16 NV] columns are stored. A non-null
/// `prefetch` is the next A panel (8 x kc floats), and a non-null
/// `prefetchB` the next strip of B (its rows ldb apart), fetched into L1
/// over the depth loop. With Offsets, row k of B (and of the prefetched
/// strip) is at `b + off[k]` instead of `b + k * ldb`. With DirectA, A is
/// not packed: row r of the tile is at `a + r * lda` (rows past `rows`
/// repeat the last one, computed and not stored).
template <int NV, bool Offsets = false, bool DirectA = false>
TM_AVX512 inline void
microKernel(int64_t kc, const float *a, const float *b, int64_t ldb, float *c,
            int64_t ldc, int rows, int cols, bool accumulate, bool last,
            const float *bias, const float *addend, int64_t ldAdd,
            Activation act, const float *prefetch = nullptr,
            const float *prefetchB = nullptr, const int64_t *off = nullptr,
            int64_t lda = 0) {
  __m512 acc[GemmMR][NV];
  const float *arow[GemmMR];
  if constexpr (DirectA)
    for (int r = 0; r < GemmMR; ++r)
      arow[r] = a + std::min(r, rows - 1) * lda;
#pragma GCC unroll 8
  for (int r = 0; r < GemmMR; ++r)
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v)
      acc[r][v] = _mm512_setzero_ps();
  // The addend's lines (a residual written layers ago, from memory)
  // requested now, to arrive while the depth loop runs instead of
  // stalling the final store (ResNet-50's 64 -> 256 residual convs at
  // batch 8 ran 1.4x slower without).
  if (last && addend)
    for (int r = 0; r < rows; ++r)
      for (int v = 0; v < NV; ++v)
        _mm_prefetch(
            reinterpret_cast<const char *>(addend + r * ldAdd + 16 * v),
            _MM_HINT_T0);
  int tail = cols - (NV - 1) * 16;
  __mmask16 lastMask = tail >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << tail) - 1);
  // The depth loop, specialised on whether the last vector is masked and
  // whether anything is prefetched, and unrolled by 4: on an Intel Xeon
  // (Sapphire Rapids) the masked load, the branches around the prefetches
  // and the loop's own counting held the kernel to 65-70% of the FMA peak
  // (ResNet-50's convs at 1x1 to 3x3 shapes, one thread); without them it
  // reaches 72-75% (models run 2-5% faster).
  auto depth = [&](auto masked, auto prefetching) TM_AVX512 {
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; ++k) {
      int64_t bo = Offsets ? off[k] : k * ldb;
      const float *bk = b + bo;
      const float *ak = a + k * GemmMR;
      if constexpr (prefetching()) {
        if (prefetch && k % 2 == 0)
          _mm_prefetch(reinterpret_cast<const char *>(prefetch + k * GemmMR),
                       _MM_HINT_T0);
        if (prefetchB) {
#pragma GCC unroll 3
          for (int v = 0; v < NV; ++v)
            _mm_prefetch(
                reinterpret_cast<const char *>(prefetchB + bo + 16 * v),
                _MM_HINT_T0);
        }
      }
      __m512 bv[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV - 1; ++v)
        bv[v] = _mm512_loadu_ps(bk + 16 * v);
      if constexpr (masked())
        bv[NV - 1] = _mm512_maskz_loadu_ps(lastMask, bk + 16 * (NV - 1));
      else
        bv[NV - 1] = _mm512_loadu_ps(bk + 16 * (NV - 1));
#pragma GCC unroll 8
      for (int r = 0; r < GemmMR; ++r) {
        __m512 ar = _mm512_set1_ps(DirectA ? arow[r][k] : ak[r]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v)
          acc[r][v] = _mm512_fmadd_ps(ar, bv[v], acc[r][v]);
      }
    }
  };
  using Yes = std::true_type;
  using No = std::false_type;
  bool pf = prefetch || prefetchB;
  if (tail < 16)
    pf ? depth(Yes{}, Yes{}) : depth(Yes{}, No{});
  else
    pf ? depth(No{}, Yes{}) : depth(No{}, No{});
  const __m512 zero = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int r = 0; r < GemmMR; ++r) {
    if (r >= rows)
      break;
    float *cr = c + r * ldc;
    __m512 add = last && bias ? _mm512_set1_ps(bias[r]) : zero;
#pragma GCC unroll 3
    for (int v = 0; v < NV; ++v) {
      __mmask16 m = v == NV - 1 ? lastMask : __mmask16(0xFFFF);
      __m512 x = acc[r][v];
      if (accumulate)
        x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, cr + 16 * v));
      if (last) {
        x = _mm512_add_ps(x, add);
        if (addend)
          x = _mm512_add_ps(
              x, _mm512_maskz_loadu_ps(m, addend + r * ldAdd + 16 * v));
        // The relu / relu6 kernels' bits, so a fused activation gives
        // those of the unfused one.
        x = simd512::activate(x, act);
      }
      _mm512_mask_storeu_ps(cr + 16 * v, m, x);
    }
  }
}

/// The same over a narrow tail of C <= 8 columns (a 7x7 output's last
/// column, say): vectors run along the 8 rows instead, one broadcast of B
/// per column, so a 1-column tail costs 1/16 of a full-width kernel.
/// Offsets and DirectA as microKernel's.
template <int C, bool Offsets = false, bool DirectA = false>
TM_AVX512 inline void
microKernelNarrow(int64_t kc, const float *a, const float *b, int64_t ldb,
                  float *c, int64_t ldc, int rows, bool accumulate, bool last,
                  const float *bias, const float *addend, int64_t ldAdd,
                  Activation act, const int64_t *off = nullptr,
                  int64_t lda = 0) {
  const float *arow[GemmMR];
  if constexpr (DirectA) {
    for (int r = 0; r < GemmMR; ++r)
      arow[r] = a + std::min(r, rows - 1) * lda;
  }
  // The 8 rows' weights at depth kk, one vector.
#define aAt(kk)                                                                \
  (DirectA                                                                     \
       ? _mm256_setr_ps(arow[0][kk], arow[1][kk], arow[2][kk], arow[3][kk],    \
                        arow[4][kk], arow[5][kk], arow[6][kk], arow[7][kk])    \
       : _mm256_loadu_ps(a + (kk)*GemmMR))
  // U interleaved sets of accumulators (depth k goes to set k % U), so at
  // least 8 FMA chains are in flight even for one column.
  constexpr int U = C == 1 ? 8 : C == 2 ? 4 : C <= 4 ? 2 : 1;
  __m256 acc[U][C];
#pragma GCC unroll 8
  for (int u = 0; u < U; ++u)
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j)
      acc[u][j] = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + U <= kc; k += U) {
#pragma GCC unroll 8
    for (int u = 0; u < U; ++u) {
      __m256 av = aAt(k + u);
      const float *bk = b + (Offsets ? off[k + u] : (k + u) * ldb);
#pragma GCC unroll 8
      for (int j = 0; j < C; ++j)
        acc[u][j] = _mm256_fmadd_ps(av, _mm256_set1_ps(bk[j]), acc[u][j]);
    }
  }
  for (; k < kc; ++k) {
    __m256 av = aAt(k);
    const float *bk = b + (Offsets ? off[k] : k * ldb);
#pragma GCC unroll 8
    for (int j = 0; j < C; ++j)
      acc[0][j] = _mm256_fmadd_ps(av, _mm256_set1_ps(bk[j]), acc[0][j]);
  }
  alignas(32) float t[C][GemmMR];
#pragma GCC unroll 8
  for (int j = 0; j < C; ++j) {
    __m256 sum = acc[0][j];
#pragma GCC unroll 8
    for (int u = 1; u < U; ++u)
      sum = _mm256_add_ps(sum, acc[u][j]);
    _mm256_store_ps(t[j], sum);
  }
  for (int r = 0; r < rows; ++r) {
    float *cr = c + r * ldc;
    float add = last && bias ? bias[r] : 0.0f;
    for (int j = 0; j < C; ++j) {
      float v = t[j][r];
      if (accumulate)
        v += cr[j];
      if (last) {
        v += add;
        if (addend)
          v += addend[r * ldAdd + j];
        if (act != Activation::None)
          v = v < 0.0f ? 0.0f : v;
        if (act == Activation::Relu6)
          v = v > 6.0f ? 6.0f : v;
      }
      cr[j] = v;
    }
  }
}

#undef aAt

/// One depth block [k0, k0 + kc) of gemmPackedA: B's rows are those of
/// the block (b.data points at its row k0, or b.rowOffsets at its offset).
/// With DirectA, `a` is A itself (rows lda apart; panel p's rows from
/// 8 (p0 + p)) instead of its packed panels.
template <bool Offsets, bool DirectA = false>
TM_AVX512 void gemmAvx512Block(const float *a, int64_t panels, int64_t p0,
                               int64_t m, int64_t n, int64_t k, int64_t k0,
                               int64_t kc, GemmB b, float *c, int64_t ldc,
                               const float *bias, Activation act,
                               GemmAddend addend = {}, int64_t lda = 0) {
  // A's micro-panel of the block (8 x KC floats, 8 KB: packed, or with
  // DirectA 8 row segments) stays in L1 while it meets every strip of B,
  // which streams from L2.
  {
    bool accumulate = k0 > 0, last = k0 + kc == k;
    for (int64_t p = 0; p * GemmMR < m; ++p) {
      const float *ap = DirectA
                            ? a + (p0 + p) * GemmMR * lda + k0
                            : a + k0 * panels * GemmMR + (p0 + p) * kc * GemmMR;
      int rows = int(std::min(GemmMR, m - p * GemmMR));
      float *cp = c + p * GemmMR * ldc;
      const float *bp = bias ? bias + p * GemmMR : nullptr;
      for (int64_t s = 0; s * GemmNR < n; ++s) {
        int cols = int(std::min(GemmNR, n - s * GemmNR));
        int64_t ldb = b.compact ? cols : b.ldb;
        const float *bs = b.data + s * b.stripStride;
        float *cs = cp + s * GemmNR;
        const float *as =
            addend.data && last
                ? addend.data + p * GemmMR * addend.ld + s * GemmNR
                : nullptr;
        switch (cols) {
#define TM_NARROW(C)                                                           \
  case C:                                                                      \
    microKernelNarrow<C, Offsets, DirectA>(kc, ap, bs, ldb, cs, ldc, rows,     \
                                           accumulate, last, bp, as,           \
                                           addend.ld, act, b.rowOffsets, lda); \
    continue;
          TM_NARROW(1) TM_NARROW(2) TM_NARROW(3) TM_NARROW(4)
          TM_NARROW(5) TM_NARROW(6) TM_NARROW(7) TM_NARROW(8)
#undef TM_NARROW
        default:
          break;
        }
        // The first strip prefetches the next panel, which the strips
        // then find in L1 (the weights are read from memory once a run).
        const float *pf = !DirectA && s == 0 && (p + 1) * GemmMR < m
                              ? ap + kc * GemmMR
                              : nullptr;
        // Likewise the first panel prefetches B's next (full) strip: a
        // linear layer's packed weight, read from memory once a run.
        const float *pfb =
            p == 0 && (s + 2) * GemmNR <= n ? bs + b.stripStride : nullptr;
        if (cols > 32)
          microKernel<3, Offsets, DirectA>(kc, ap, bs, ldb, cs, ldc, rows, cols,
                                           accumulate, last, bp, as, addend.ld,
                                           act, pf, pfb, b.rowOffsets, lda);
        else if (cols > 16)
          microKernel<2, Offsets, DirectA>(kc, ap, bs, ldb, cs, ldc, rows, cols,
                                           accumulate, last, bp, as, addend.ld,
                                           act, pf, pfb, b.rowOffsets, lda);
        else
          microKernel<1, Offsets, DirectA>(kc, ap, bs, ldb, cs, ldc, rows, cols,
                                           accumulate, last, bp, as, addend.ld,
                                           act, pf, pfb, b.rowOffsets, lda);
      }
    }
  }
}

void gemmRowsA(const float *a, int64_t lda, int64_t m, int64_t n, int64_t k,
               GemmB b, float *c, int64_t ldc) {
  int64_t panels = (m + GemmMR - 1) / GemmMR, kb = gemmDepthBlock(k);
  for (int64_t k0 = 0; k0 < k; k0 += kb) {
    GemmB bk = b;
    bk.data += k0 * b.ldb;
    gemmAvx512Block<false, true>(a, panels, 0, m, n, k, k0,
                                 std::min(kb, k - k0), bk, c, ldc, nullptr,
                                 Activation::None, {}, lda);
  }
}

} // namespace

#else

bool gemmMicroKernelAvailable() { return false; }

namespace {
void gemmRowsA(const float *, int64_t, int64_t, int64_t, int64_t, GemmB,
               float *, int64_t) {
  __builtin_trap(); // callers check gemmMicroKernelAvailable()
}
} // namespace

#endif

void gemmPackedA(const float *a, int64_t panels, int64_t p0, int64_t m,
                 int64_t n, int64_t k, GemmB b, float *c, int64_t ldc,
                 const float *bias, Activation act, GemmAddend addend) {
  if (m <= 0 || n <= 0)
    return;
  if (k == 0) {
    // An empty sum: C is the bias (+ the addend), activated.
    for (int64_t r = 0; r < m; ++r) {
      float *cr = c + r * ldc;
      for (int64_t j = 0; j < n; ++j)
        cr[j] = 0.0f;
      float add = bias ? bias[r] : 0.0f;
      if (addend.data) {
        biasActivate(cr, n, add, Activation::None);
        for (int64_t j = 0; j < n; ++j)
          cr[j] += addend.data[r * addend.ld + j];
        add = 0.0f;
      }
      biasActivate(cr, n, add, act);
    }
    return;
  }
#ifdef TM_HAVE_AVX512_KERNEL
  int64_t kb = gemmDepthBlock(k);
  for (int64_t k0 = 0; k0 < k; k0 += kb) {
    GemmB bk = b;
    if (b.rowOffsets)
      bk.rowOffsets += k0;
    else
      bk.data += k0 * b.ldb; // plain layout: rows are ldb apart
    gemmPackedABlock(a, panels, p0, m, n, k, k0, std::min(kb, k - k0), bk, c,
                     ldc, bias, act, addend);
  }
#else
  (void)a, (void)panels, (void)p0, (void)b, (void)c, (void)ldc, (void)bias,
      (void)act, (void)addend;
  __builtin_trap(); // callers check gemmMicroKernelAvailable()
#endif
}

} // namespace tmg::rt::detail

namespace tmg::rt::detail {

void gemmPackedABlock(const float *a, int64_t panels, int64_t p0, int64_t m,
                      int64_t n, int64_t k, int64_t k0, int64_t kc, GemmB b,
                      float *c, int64_t ldc, const float *bias, Activation act,
                      GemmAddend addend) {
  if (m <= 0 || n <= 0 || kc <= 0)
    return;
#ifdef TM_HAVE_AVX512_KERNEL
  if (b.rowOffsets)
    gemmAvx512Block<true>(a, panels, p0, m, n, k, k0, kc, b, c, ldc, bias, act,
                          addend);
  else
    gemmAvx512Block<false>(a, panels, p0, m, n, k, k0, kc, b, c, ldc, bias, act,
                           addend);
#else
  (void)a, (void)panels, (void)p0, (void)k, (void)k0, (void)b, (void)c,
      (void)ldc, (void)bias, (void)act, (void)addend;
  __builtin_trap(); // callers check gemmMicroKernelAvailable()
#endif
}

} // namespace tmg::rt::detail
