//===- Simd512.h - Shared AVX-512 helpers (internal) ------------*- C++ -*-===//
//
// Small AVX-512 building blocks used by more than one kernel file. Every
// function carries the `target("avx512f")` attribute (TM_AVX512F) so the
// files that use them are built for the baseline ISA and call them only
// after the run-time check (gemmMicroKernelAvailable). TM_HAVE_SIMD512 is 1
// where they exist (x86-64, GCC or Clang).
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TM_HAVE_SIMD512 1
// GCC 12 warns about the undefined start value of _mm512_undefined_ps in
// its own headers' intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "tm/runtime/Common.h"

#define TM_AVX512F __attribute__((target("avx512f")))

namespace tmg::rt::detail::simd512 {

/// Whether this CPU runs AVX-512F code (checked once).
inline bool available() {
  static const bool avail = [] {
    __builtin_cpu_init();
    return bool(__builtin_cpu_supports("avx512f"));
  }();
  return avail;
}

/// The first min(n, 16) lanes (none for n <= 0).
TM_AVX512F inline __mmask16 headMask(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

/// Lanes l of 16 starting at column x0 whose column x0 + l lies in
/// [0, w): the in-bounds lanes of a row vector that may overhang either
/// end of a row of w floats.
TM_AVX512F inline __mmask16 insideMask(int64_t x0, int64_t w) {
  int64_t lo = std::clamp<int64_t>(-x0, 0, 16),
          hi = std::clamp<int64_t>(w - x0, 0, 16);
  return hi <= lo ? __mmask16(0)
                  : __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/// Lanes N .. 15 of lo, then lanes 0 .. N - 1 of hi (N = 0: lo): a row
/// vector shifted left by N columns (valignd).
template <int N> TM_AVX512F inline __m512 shiftIn(__m512 hi, __m512 lo) {
  if constexpr (N == 0)
    return lo;
  else
    return _mm512_castsi512_ps(_mm512_alignr_epi32(_mm512_castps_si512(hi),
                                                   _mm512_castps_si512(lo), N));
}

/// Lanes 0..15 of the 32 floats lo:hi at even / odd positions.
TM_AVX512F inline __m512 evens(__m512 lo, __m512 hi) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
                                        20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(lo, idx, hi);
}
TM_AVX512F inline __m512 odds(__m512 lo, __m512 hi) {
  const __m512i idx = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19,
                                        21, 23, 25, 27, 29, 31);
  return _mm512_permutex2var_ps(lo, idx, hi);
}

/// relu / relu6 of x as the scalar ops compute them: max_ps(0, x) is
/// `0 > x ? 0 : x`, relu's `x < 0 ? 0 : x` exactly (NaN and -0 included),
/// min_ps(6, x) relu6's `x > 6 ? 6 : x`; None leaves x.
TM_AVX512F inline __m512 activate(__m512 x, Activation act) {
  if (act != Activation::None)
    x = _mm512_max_ps(_mm512_setzero_ps(), x);
  if (act == Activation::Relu6)
    x = _mm512_min_ps(_mm512_set1_ps(6.0f), x);
  return x;
}

/// Lane-wise max(m, v) with PyTorch's NaN rule (a NaN in either wins) and
/// the scalar `(v > m || v != v) ? v : m`'s choice on ties, so vector and
/// scalar loops give identical bits.
TM_AVX512F inline __m512 nanMax(__m512 m, __m512 v) {
  // MAXPS(v, m) is v > m ? v : m, m when either is NaN.
  __m512 r = _mm512_max_ps(v, m);
  return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
}

/// dst[c * ldd + r] = src[r * lds + c] for r, c < 8: an 8 x 8 block of
/// 4-byte elements transposed in registers (unpack, shuffle, lane swap).
/// Always inlined: a call per block (through the PLT, as GCC left it)
/// costs as much as the block.
TM_AVX512F __attribute__((always_inline)) inline void
transpose8x8(const float *src, int64_t lds, float *dst, int64_t ldd) {
  __m256 r[8], t[8], u[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i)
    r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  // u[4h + c]: columns c and c + 4 of rows 4h .. 4h + 3.
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    u[4 * h] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0x44);
    u[4 * h + 1] = _mm256_shuffle_ps(t[4 * h], t[4 * h + 2], 0xEE);
    u[4 * h + 2] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0x44);
    u[4 * h + 3] = _mm256_shuffle_ps(t[4 * h + 1], t[4 * h + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(dst + c * ldd,
                     _mm256_permute2f128_ps(u[c], u[4 + c], 0x20));
    _mm256_storeu_ps(dst + (c + 4) * ldd,
                     _mm256_permute2f128_ps(u[c], u[4 + c], 0x31));
  }
}

} // namespace tmg::rt::detail::simd512

#else
#define TM_HAVE_SIMD512 0
#define TM_AVX512F
namespace tmg::rt::detail::simd512 {
inline bool available() { return false; }
} // namespace tmg::rt::detail::simd512
#endif
