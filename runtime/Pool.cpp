//===- Pool.cpp - Pooling -------------------------------------------------===//
#include "tm/runtime/Pool.h"

#include <cmath>
#include <limits>

#include "Internal.h"
#include "PoolWindow.h"
#include "Simd512.h"

namespace tmg::rt {
using namespace detail;

namespace {
/// An input seen as `planes` independent H x W images.
struct Planes {
  int64_t planes, h, w;
};
} // namespace

/// Validates a float32 (N, C, H, W) or (C, H, W) input.
static Planes checkPoolInput(llvm::StringRef op, const Tensor &x) {
  requireFloat32(op, x, "input");
  if (x.rank() != 4 && x.rank() != 3)
    raise("{}: input must be 4-D (N, C, H, W) or 3-D (C, H, W), got {}",
          op.str(), shapeStr(x.shape()));
  size_t r = x.rank();
  return {shapeNumel(x.shape().drop_back(2)), x.dim(r - 2), x.dim(r - 1)};
}

/// x's shape with the last two dimensions replaced.
static Shape pooledShape(const Tensor &x, int64_t oh, int64_t ow) {
  Shape s(x.shape().begin(), x.shape().end());
  s[s.size() - 2] = oh;
  s[s.size() - 1] = ow;
  return s;
}

/// Pooled size along one axis, PyTorch's formula: floor (or ceil) of
/// (in + 2 pad - d (k - 1) - 1) / s, plus 1; in ceil mode a last window that
/// would start in the trailing padding is dropped, so every window starts
/// inside the input or its leading padding.
static int64_t poolOutputSize(int64_t in, int64_t k, int64_t s, int64_t pad,
                              int64_t d, bool ceilMode) {
  int64_t span = in + 2 * pad - d * (k - 1) - 1 + (ceilMode ? s - 1 : 0);
  // Floor division: span may be negative.
  int64_t out = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;
  if (ceilMode && (out - 1) * s >= in + pad)
    --out;
  return out;
}

namespace {
/// A 2-D pooling window over `in`: leading paddings ph, pw and trailing
/// paddings phEnd, pwEnd (which only bound average windows; output sizes
/// are computed before).
struct PoolGeom {
  Planes in;
  int64_t oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t phEnd, pwEnd;
  int64_t pitch = 0; ///< floats between input rows; 0: in.w
};
/// Floats between the input rows of pool `g`.
inline int64_t rowPitch(const PoolGeom &g) {
  return g.pitch ? g.pitch : g.in.w;
}
} // namespace

static PoolGeom checkPool(llvm::StringRef op, const Tensor &x,
                          const Pool2dParams &p, bool allowDilation) {
  Planes in = checkPoolInput(op, x);
  Int2 k = p.kernel, s = p.stride.value_or(p.kernel), d = p.dilation;
  if (k.h <= 0 || k.w <= 0)
    raise("{}: kernel size {} must be positive", op.str(), k.str());
  if (s.h <= 0 || s.w <= 0)
    raise("{}: stride {} must be positive", op.str(), s.str());
  if (d.h <= 0 || d.w <= 0)
    raise("{}: dilation {} must be positive", op.str(), d.str());
  if (!allowDilation && !(d == Int2(1)))
    raise("{}: dilation {} is not supported (only 1x1)", op.str(), d.str());
  if (p.padding.h < 0 || p.padding.w < 0 || p.padding.h > k.h / 2 ||
      p.padding.w > k.w / 2)
    raise("{}: padding {} must be between 0 and half the kernel size {}",
          op.str(), p.padding.str(), k.str());
  PoolGeom g{in, 0, 0, k.h, k.w, s.h, s.w, p.padding.h, p.padding.w, d.h, d.w,
             p.padding.h, p.padding.w};
  g.oh = poolOutputSize(in.h, k.h, s.h, g.ph, d.h, p.ceilMode);
  g.ow = poolOutputSize(in.w, k.w, s.w, g.pw, d.w, p.ceilMode);
  if (g.oh <= 0 || g.ow <= 0)
    raise("{}: kernel {} (dilation {}, padding {}) does not fit input {}",
          op.str(), k.str(), d.str(), p.padding.str(), shapeStr(x.shape()));
  return g;
}

/// Grain for per-plane work: about 16K output elements per thread.
static int64_t planeGrain(int64_t planeSize) {
  return std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, planeSize));
}

/// Length of maxPoolPlane's row buffer: the row, its paddings, and room
/// for the horizontal pass's reads past the last window (whole vectors).
static int64_t maxPoolBufLen(const PoolGeom &g) {
  return g.in.w + 2 * g.pw + g.sw * g.ow + g.kw * g.dw + 32;
}

/// max(m, v), NaN winning as in PyTorch; branch-free so loops vectorise.
static inline float nanMax(float m, float v) { return (v > m || v != v) ? v : m; }

/// One plane of max_pool2d. For each output row the window rows are first
/// reduced column-wise into `buf` (contiguous, vectorised), a row padded by
/// -inf on both sides so the horizontal pass needs no bounds checks.
TM_VECTOR_CLONES
static void maxPoolPlane(const PoolGeom &g, const float *src, float *dst,
                         float *buf) {
  constexpr float NegInf = -std::numeric_limits<float>::infinity();
  int64_t w = g.in.w, padded = maxPoolBufLen(g);
  for (int64_t i = 0; i < padded; ++i)
    buf[i] = NegInf;
  float *row = buf + g.pw;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    int64_t y0 = oy * g.sh - g.ph;
    bool first = true;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      int64_t iy = y0 + ki * g.dh;
      if (iy < 0 || iy >= g.in.h)
        continue;
      const float *in = src + iy * rowPitch(g);
      if (first) {
        for (int64_t i = 0; i < w; ++i)
          row[i] = in[i];
        first = false;
      } else {
        for (int64_t i = 0; i < w; ++i)
          row[i] = nanMax(row[i], in[i]);
      }
    }
    if (first) // no window row inside the input (cannot happen for pad <= k/2)
      for (int64_t i = 0; i < w; ++i)
        row[i] = NegInf;
    float *out = dst + oy * g.ow;
    if (g.sw == 2 && g.dw == 1 && g.kw == 3) {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float *b = buf + 2 * ox;
        out[ox] = nanMax(nanMax(b[0], b[1]), b[2]);
      }
    } else if (g.sw == 1) {
      // One tap at a time over the whole output row (vectorises), in the
      // same tap order as one position at a time.
      for (int64_t ox = 0; ox < g.ow; ++ox)
        out[ox] = nanMax(NegInf, buf[ox]);
      for (int64_t kj = 1; kj < g.kw; ++kj) {
        const float *b = buf + kj * g.dw;
        for (int64_t ox = 0; ox < g.ow; ++ox)
          out[ox] = nanMax(out[ox], b[ox]);
      }
    } else {
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        const float *b = buf + ox * g.sw;
        float m = NegInf;
        for (int64_t kj = 0; kj < g.kw; ++kj)
          m = nanMax(m, b[kj * g.dw]);
        out[ox] = m;
      }
    }
  }
}

#if TM_HAVE_SIMD512
/// maxPoolPlane for horizontal strides 1 and 2 on AVX-512, with the same
/// reduction order (hence bits): the window rows are reduced 16 columns at
/// a time straight from the input, then each tap of the row window is one
/// vector of 16 outputs, read at stride 2 as the even or odd lanes of two
/// loads.
TM_AVX512F
static void maxPoolPlane512(const PoolGeom &g, const float *src, float *dst,
                            float *buf) {
  using namespace simd512;
  constexpr float NegInf = -std::numeric_limits<float>::infinity();
  int64_t w = g.in.w, len = maxPoolBufLen(g);
  for (int64_t i = 0; i < len; ++i)
    buf[i] = NegInf;
  float *row = buf + g.pw;
  llvm::SmallVector<const float *, 8> rows;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    rows.clear();
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      int64_t iy = oy * g.sh - g.ph + ki * g.dh;
      if (iy >= 0 && iy < g.in.h)
        rows.push_back(src + iy * rowPitch(g));
    }
    for (int64_t i = 0; i < w; i += 16) {
      __mmask16 m = headMask(w - i);
      __m512 acc = _mm512_set1_ps(NegInf);
      if (!rows.empty()) {
        acc = _mm512_maskz_loadu_ps(m, rows[0] + i);
        for (size_t r = 1; r < rows.size(); ++r)
          acc = nanMax(acc, _mm512_maskz_loadu_ps(m, rows[r] + i));
      }
      _mm512_mask_storeu_ps(row + i, m, acc);
    }
    float *out = dst + oy * g.ow;
    for (int64_t ox = 0; ox < g.ow; ox += 16) {
      __m512 acc = _mm512_undefined_ps();
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        int64_t off = kj * g.dw;
        __m512 v;
        if (g.sw == 1) {
          v = _mm512_loadu_ps(buf + ox + off);
        } else {
          const float *b = buf + 2 * ox + (off & ~int64_t(1));
          __m512 lo = _mm512_loadu_ps(b), hi = _mm512_loadu_ps(b + 16);
          v = (off & 1) ? odds(lo, hi) : evens(lo, hi);
        }
        acc = kj == 0 ? v : nanMax(acc, v);
      }
      _mm512_mask_storeu_ps(out + ox, headMask(g.ow - ox), acc);
    }
  }
}

namespace {
/// Columns [x0, x0 + 16) of K rows (-inf outside [0, w)), reduced.
template <int K>
TM_AVX512F inline __m512 rowsMax(const float *const r[K], int64_t x0, int64_t w) {
  using namespace simd512;
  const __m512 negInf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __mmask16 m = insideMask(x0, w);
  __m512 a = _mm512_mask_loadu_ps(negInf, m, r[0] + x0);
  for (int i = 1; i < K; ++i)
    a = nanMax(a, _mm512_mask_loadu_ps(negInf, m, r[i] + x0));
  return a;
}
} // namespace

/// The KxK undilated windows, K = 2 or 3 (horizontal stride 1 or 2),
/// entirely in registers, no row buffer: 16 columns of the padded row
/// (column j of the input at lane j + pw, -inf outside) are the window
/// rows' maximum read with masked loads; the taps to the right are the
/// next vector's lanes shifted in (valignd), at stride 2 their even and
/// odd lanes. The same reduction order as maxPoolPlane, hence the same
/// bits.
template <int K>
TM_AVX512F static void maxPoolPlaneSmall(const PoolGeom &g, const float *src, float *dst,
                                         float *) {
  using namespace simd512;
  static_assert(K == 2 || K == 3);
  const __m512 negInf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t w = g.in.w;
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    // The window's rows inside the input, in order; a missing one repeats
    // a present one (max(a, a) is a, bit for bit).
    const float *r[K] = {};
    int present = 0;
    for (int64_t ki = 0; ki < K; ++ki) {
      int64_t iy = oy * g.sh - g.ph + ki;
      if (iy >= 0 && iy < g.in.h)
        r[present++] = src + iy * rowPitch(g);
    }
    float *out = dst + oy * g.ow;
    if (present == 0) { // a window in the padding only
      for (int64_t ox = 0; ox < g.ow; ox += 16)
        _mm512_mask_storeu_ps(out + ox, headMask(g.ow - ox), negInf);
      continue;
    }
    for (int i = present; i < K; ++i)
      r[i] = r[present - 1];
    // The rows the next output row adds (past the plane's end, the next
    // plane's first rows), prefetched column by column as this row is
    // read (a prefetch never faults).
    int64_t adds = std::min<int64_t>(g.sh, K);
    // Unsigned arithmetic: the address may be any, never overflows.
    uintptr_t next = reinterpret_cast<uintptr_t>(src) +
                     (uintptr_t(oy + 1) * uintptr_t(g.sh) - uintptr_t(g.ph) +
                      uintptr_t(K - adds)) *
                         uintptr_t(rowPitch(g)) * sizeof(float);
    // Padded columns [j, j + 16) are input columns [j - pw, ...).
    __m512 v0 = rowsMax<K>(r, -g.pw, w);
    for (int64_t ox = 0; ox < g.ow; ox += 16) {
      uintptr_t col = next + uintptr_t(std::max<int64_t>(ox * g.sw - g.pw, 0)) *
                                 sizeof(float);
      for (int64_t t = 0; t < adds; ++t)
        prefetchBytes(col +
                          uintptr_t(t) * uintptr_t(rowPitch(g)) * sizeof(float),
                      64 * g.sw);
      __m512 y;
      if (g.sw == 1) {
        __m512 v1 = rowsMax<K>(r, ox + 16 - g.pw, w);
        y = nanMax(v0, shiftIn<1>(v1, v0));
        if constexpr (K == 3)
          y = nanMax(y, shiftIn<2>(v1, v0));
        v0 = v1;
      } else {
        __m512 v1 = rowsMax<K>(r, 2 * ox + 16 - g.pw, w);
        y = nanMax(evens(v0, v1), odds(v0, v1));
        if constexpr (K == 3) {
          __m512 v2 = rowsMax<K>(r, 2 * ox + 32 - g.pw, w);
          y = nanMax(y, evens(shiftIn<2>(v1, v0), shiftIn<2>(v2, v1)));
          v0 = v2;
        } else {
          v0 = rowsMax<K>(r, 2 * ox + 32 - g.pw, w);
        }
      }
      _mm512_mask_storeu_ps(out + ox, headMask(g.ow - ox), y);
    }
  }
}
#endif

/// The plane kernel of max pool `g` (all compute the same bits).
static auto maxPoolPlaneFor(const PoolGeom &g) {
  auto plane = &maxPoolPlane;
#if TM_HAVE_SIMD512
  if ((g.sw == 1 || g.sw == 2) && simd512::available())
    plane = g.dh != 1 || g.dw != 1 || g.kh != g.kw ? &maxPoolPlane512
            : g.kh == 3                            ? &maxPoolPlaneSmall<3>
            : g.kh == 2                            ? &maxPoolPlaneSmall<2>
                                                   : &maxPoolPlane512;
#endif
  return plane;
}

static Tensor maxPool2dGeom(const Tensor &x, const PoolGeom &g) {
  Tensor out = Tensor::empty(pooledShape(x, g.oh, g.ow), DType::Float32);
  const float *px = x.data<float>();
  float *po = out.data<float>();
  int64_t hw = g.in.h * g.in.w, ohw = g.oh * g.ow;
  int64_t grain = planeGrain(ohw);
  // One padded row buffer per part, allocated before the parallel region.
  int64_t bufLen = maxPoolBufLen(g);
  int parts = parallelParts(g.in.planes, grain);
  Tensor bufs = Tensor::empty({int64_t(parts), bufLen});
  float *pb = bufs.data<float>();
  auto plane = maxPoolPlaneFor(g);
  // Large planes of fewer images than threads: part t computes output
  // rows [t oh / T, (t + 1) oh / T) of every plane instead of whole
  // planes. A conv writes such an input split the same way (by spatial
  // tiles; with more images, by images, as whole planes are), so each
  // thread reads the rows it wrote, from its own cache: 10-25% less time
  // for SqueezeNet's and ResNet's pools. A band is a sub-geometry (fewer
  // rows, the padding shifted), so every plane kernel runs unchanged.
  // Small planes keep whole planes per thread: bands would share cache
  // lines of the output between threads.
  constexpr int64_t BandMinFloats = 1024;
  int64_t images = x.rank() == 4 ? x.dim(0) : 1;
  if (parts > 1 && images < parts && ohw / parts >= BandMinFloats) {
    parallelForParts(parts, 1, [&](int64_t b0, int64_t b1, int part) {
      for (int64_t b = b0; b < b1; ++b) {
        int64_t oy0 = g.oh * b / parts, oy1 = g.oh * (b + 1) / parts;
        PoolGeom band = g;
        band.oh = oy1 - oy0;
        band.ph = g.ph - oy0 * g.sh;
        for (int64_t pl = 0; pl < g.in.planes; ++pl)
          plane(band, px + pl * hw, po + pl * ohw + oy0 * g.ow, pb + part * bufLen);
      }
    });
    return out;
  }
  parallelForParts(g.in.planes, grain, [&](int64_t p0, int64_t p1, int part) {
    for (int64_t pl = p0; pl < p1; ++pl)
      plane(g, px + pl * hw, po + pl * ohw, pb + part * bufLen);
  });
  return out;
}

Tensor maxPool2d(const Tensor &x, const Pool2dParams &p) {
  return maxPool2dGeom(x, checkPool("max_pool2d", x, p, /*allowDilation=*/true));
}

#if TM_HAVE_SIMD512
/// One plane of a 2x2 stride-2 average pool whose windows lie inside the
/// input: 16 outputs from the even and odd lanes of two rows' vectors, in
/// the generic loop's order ((((0 + a) + b) + c) + d) / 4, so the same bits.
TM_AVX512F
static void avgPool2x2Plane512(const PoolGeom &g, const float *src, float *dst) {
  using namespace simd512;
  const __m512 four = _mm512_set1_ps(4.0f);
  for (int64_t oy = 0; oy < g.oh; ++oy) {
    const float *r0 = src + 2 * oy * g.in.w, *r1 = r0 + g.in.w;
    float *out = dst + oy * g.ow;
    for (int64_t ox = 0; ox < g.ow; ox += 16) {
      // Columns 2 ox .. 2 ox + 31, those of this row's windows only.
      int64_t cols = 2 * std::min<int64_t>(16, g.ow - ox);
      __mmask16 mLo = headMask(cols), mHi = headMask(cols - 16);
      __m512 a0 = _mm512_maskz_loadu_ps(mLo, r0 + 2 * ox),
             a1 = _mm512_maskz_loadu_ps(mHi, r0 + 2 * ox + 16),
             b0 = _mm512_maskz_loadu_ps(mLo, r1 + 2 * ox),
             b1 = _mm512_maskz_loadu_ps(mHi, r1 + 2 * ox + 16);
      __m512 sum = _mm512_add_ps(_mm512_setzero_ps(), evens(a0, a1));
      sum = _mm512_add_ps(sum, odds(a0, a1));
      sum = _mm512_add_ps(sum, evens(b0, b1));
      sum = _mm512_add_ps(sum, odds(b0, b1));
      _mm512_mask_storeu_ps(out + ox, headMask(g.ow - ox), _mm512_div_ps(sum, four));
    }
  }
}
#endif

static Tensor avgPool2dGeom(const Tensor &x, const PoolGeom &g, bool includePad) {
  Tensor out = Tensor::empty(pooledShape(x, g.oh, g.ow), DType::Float32);
  const float *px = x.data<float>();
  float *po = out.data<float>();
  int64_t hw = g.in.h * g.in.w, ohw = g.oh * g.ow;
#if TM_HAVE_SIMD512
  if (g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.ph == 0 && g.pw == 0 &&
      2 * g.oh <= g.in.h && 2 * g.ow <= g.in.w && simd512::available()) {
    parallelFor(g.in.planes, planeGrain(ohw), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl)
        avgPool2x2Plane512(g, px + pl * hw, po + pl * ohw);
    });
    return out;
  }
#endif
  parallelFor(g.in.planes, planeGrain(ohw), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float *src = px + pl * hw;
      float *dst = po + pl * ohw;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        int64_t y0 = oy * g.sh - g.ph;
        // The window clipped to the padded input, then to the input.
        int64_t y1 = std::min(y0 + g.kh, g.in.h + g.phEnd);
        int64_t padRows = y1 - y0;
        int64_t ya = std::max<int64_t>(y0, 0), yb = std::min(y1, g.in.h);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          int64_t x0 = ox * g.sw - g.pw;
          int64_t x1 = std::min(x0 + g.kw, g.in.w + g.pwEnd);
          int64_t xa = std::max<int64_t>(x0, 0), xb = std::min(x1, g.in.w);
          float s = 0.0f;
          for (int64_t iy = ya; iy < yb; ++iy)
            for (int64_t ix = xa; ix < xb; ++ix)
              s += src[iy * g.in.w + ix];
          int64_t count = includePad ? padRows * (x1 - x0)
                                     : std::max<int64_t>(0, yb - ya) *
                                           std::max<int64_t>(0, xb - xa);
          dst[oy * g.ow + ox] = count > 0 ? s / float(count) : 0.0f;
        }
      }
    }
  });
  return out;
}

Tensor avgPool2d(const Tensor &x, const Pool2dParams &p) {
  return avgPool2dGeom(x, checkPool("avg_pool2d", x, p, /*allowDilation=*/false),
                       p.countIncludePad);
}

namespace detail {

Tensor pool2dWindow(const Tensor &x, const WindowNd &p, llvm::ArrayRef<int64_t> outSize,
                    bool isMax) {
  Planes in{x.dim(0) * x.dim(1), x.dim(2), x.dim(3)};
  PoolGeom g{.in = in,
             .oh = outSize[0],
             .ow = outSize[1],
             .kh = p.kernel[0],
             .kw = p.kernel[1],
             .sh = p.stride[0],
             .sw = p.stride[1],
             .ph = p.padBegin[0],
             .pw = p.padBegin[1],
             .dh = p.dilation[0],
             .dw = p.dilation[1],
             .phEnd = p.padEnd[0],
             .pwEnd = p.padEnd[1]};
  return isMax ? maxPool2dGeom(x, g) : avgPool2dGeom(x, g, p.countIncludePad);
}

MaxPoolRows::MaxPoolRows(const WindowNd &p, int64_t h, int64_t w, int64_t oh,
                         int64_t ow)
    : oh(oh), ow(ow), h_(h), w_(w), kh_(p.kernel[0]), kw_(p.kernel[1]),
      sh_(p.stride[0]), sw_(p.stride[1]), ph_(p.padBegin[0]),
      pw_(p.padBegin[1]), dh_(p.dilation[0]), dw_(p.dilation[1]) {}

std::pair<int64_t, int64_t> MaxPoolRows::inputRows(int64_t y0,
                                                   int64_t y1) const {
  int64_t lo = y0 * sh_ - ph_, hi = (y1 - 1) * sh_ - ph_ + (kh_ - 1) * dh_ + 1;
  return {std::clamp<int64_t>(lo, 0, h_), std::clamp<int64_t>(hi, 0, h_)};
}

int64_t MaxPoolRows::scratchFloats() const {
  // What maxPoolBufLen reads of pool()'s geometry (the same for every band).
  return maxPoolBufLen(PoolGeom{
      .in = {1, 0, w_}, .ow = ow, .kw = kw_, .sw = sw_, .pw = pw_, .dw = dw_});
}

void MaxPoolRows::pool(const float *rows, int64_t y0, int64_t y1, float *out,
                       float *scratch, int64_t pitch) const {
  // A band is a sub-geometry: the rows held, the padding shifted so that
  // output row y0 + i reads them where the whole plane has them. Rows
  // outside the band are outside the plane (padding) or read by no window.
  auto [lo, hi] = inputRows(y0, y1);
  PoolGeom g{.in = {1, hi - lo, w_},
             .oh = y1 - y0,
             .ow = ow,
             .kh = kh_,
             .kw = kw_,
             .sh = sh_,
             .sw = sw_,
             .ph = ph_ + lo - y0 * sh_,
             .pw = pw_,
             .dh = dh_,
             .dw = dw_,
             .phEnd = 0,
             .pwEnd = pw_,
             .pitch = pitch};
  maxPoolPlaneFor(g)(g, rows, out + y0 * ow, scratch);
}

} // namespace detail

/// Adaptive max (IsMax) or average pooling.
template <bool IsMax>
static Tensor adaptivePool(llvm::StringRef op, const Tensor &x, Int2 size) {
  Planes in = checkPoolInput(op, x);
  if (size.h <= 0 || size.w <= 0)
    raise("{}: output size {} must be positive", op.str(), size.str());
  if (in.h <= 0 || in.w <= 0)
    raise("{}: input {} has an empty spatial size", op.str(),
          shapeStr(x.shape()));
  Tensor out = Tensor::empty(pooledShape(x, size.h, size.w), DType::Float32);
  const float *px = x.data<float>();
  float *po = out.data<float>();
  int64_t hw = in.h * in.w, ohw = size.h * size.w;
  parallelFor(in.planes, planeGrain(ohw), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float *src = px + pl * hw;
      float *dst = po + pl * ohw;
      for (int64_t oy = 0; oy < size.h; ++oy) {
        int64_t y0 = oy * in.h / size.h;
        int64_t y1 = ((oy + 1) * in.h + size.h - 1) / size.h;
        for (int64_t ox = 0; ox < size.w; ++ox) {
          int64_t x0 = ox * in.w / size.w;
          int64_t x1 = ((ox + 1) * in.w + size.w - 1) / size.w;
          float acc = IsMax ? -std::numeric_limits<float>::infinity() : 0.0f;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix) {
              float v = src[iy * in.w + ix];
              if constexpr (IsMax) {
                if (v > acc || v != v)
                  acc = v;
              } else {
                acc += v;
              }
            }
          if constexpr (!IsMax)
            acc /= float((y1 - y0) * (x1 - x0));
          dst[oy * size.w + ox] = acc;
        }
      }
    }
  });
  return out;
}

template <bool IsMax>
static Tensor globalPool(llvm::StringRef op, const Tensor &x);

Tensor adaptiveAvgPool2d(const Tensor &x, Int2 size) {
  // One output per plane is the plane's mean (the classifier heads).
  if (size.h == 1 && size.w == 1)
    return globalPool<false>("adaptive_avg_pool2d", x);
  return adaptivePool<false>("adaptive_avg_pool2d", x, size);
}

Tensor adaptiveMaxPool2d(const Tensor &x, Int2 size) {
  return adaptivePool<true>("adaptive_max_pool2d", x, size);
}

/// The sum of n floats in double, in eight interleaved partial sums (a
/// loop the compiler vectorises without reassociating anything).
TM_VECTOR_CLONES
static double planeSum(const float *src, int64_t n) {
  constexpr int L = 8;
  double part[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int l = 0; l < L; ++l)
      part[l] += double(src[i + l]);
  double s = 0.0;
  for (; i < n; ++i)
    s += double(src[i]);
  for (int l = 0; l < L; ++l)
    s += part[l];
  return s;
}

/// One value per plane; sums accumulate in double.
template <bool IsMax>
static Tensor globalPool(llvm::StringRef op, const Tensor &x) {
  Planes in = checkPoolInput(op, x);
  if (in.h * in.w == 0)
    raise("{}: input {} has an empty spatial size", op.str(),
          shapeStr(x.shape()));
  Tensor out = Tensor::empty(pooledShape(x, 1, 1), DType::Float32);
  const float *px = x.data<float>();
  float *po = out.data<float>();
  int64_t hw = in.h * in.w;
  parallelFor(in.planes, planeGrain(hw), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float *src = px + pl * hw;
      if constexpr (IsMax) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < hw; ++i)
          if (src[i] > m || src[i] != src[i])
            m = src[i];
        po[pl] = m;
      } else {
        po[pl] = float(planeSum(src, hw) / double(hw));
      }
    }
  });
  return out;
}

Tensor globalAvgPool2d(const Tensor &x) {
  return globalPool<false>("global_avg_pool2d", x);
}

Tensor globalMaxPool2d(const Tensor &x) {
  return globalPool<true>("global_max_pool2d", x);
}

} // namespace tmg::rt
