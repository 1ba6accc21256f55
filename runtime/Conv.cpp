//===- Conv.cpp - Convolutions --------------------------------------------===//
//
// conv2d is a GEMM per (image, group): out (O_g x Ho*Wo) = weight (O_g x K)
// times the patch matrix (K x Ho*Wo), K = C_g * kh * kw. The patch matrix
// is never materialised whole: work items are (image, group, column tile,
// row block) and each builds the K x tile slice it needs in a per-thread
// buffer sized to stay in L2, runs a single-threaded GEMM into the output,
// and applies bias, a residual and the activation as the tile is stored. The
// GEMM is the micro-kernel of Gemm.h on packed weights where the CPU has
// AVX-512 (convMicro, im2colStrips), OpenBLAS elsewhere (convBlas). 1x1
// stride-1 unpadded convolutions skip the im2col: the input already is the
// patch matrix. Grouped, few-channel and 7x7-stem convolutions read their
// patch rows in place from phase planes of the input instead (an implicit
// GEMM, see Implicit). 3x3 stride-1 convolutions run as Winograd's
// F(2x2, 3x3) on the same kernel (convWinograd). Depthwise convolutions have
// K = kh * kw, far too little work for a GEMM, and use a direct kernel
// over each plane cut by stride phase (depthwisePlane).
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/Conv.h"

#include <cassert>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "Gemm.h"
#include "Internal.h"
#include "PoolWindow.h"
#include "Simd512.h"
#include "tm/runtime/Linalg.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
using namespace detail;

int64_t convOutputSize(int64_t in, int64_t kernel, int64_t stride,
                       int64_t padBegin, int64_t padEnd, int64_t dilation) {
  int64_t span = in + padBegin + padEnd - dilation * (kernel - 1) - 1;
  // Floor division (span may be negative).
  int64_t q = span >= 0 ? span / stride : -((-span + stride - 1) / stride);
  return q + 1;
}

namespace {

struct NormedChannels;

/// Validated geometry of a 2-D convolution (conv1d uses H = kh = 1).
struct ConvGeom {
  int64_t n, c, h, w;     ///< input
  int64_t o, kh, kw;      ///< weight (o, c / groups, kh, kw)
  int64_t oh, ow;         ///< output spatial size
  int64_t sh, sw, ph, pw; ///< stride, leading padding
  int64_t dh, dw;         ///< dilation
  int64_t groups, cg, og; ///< groups, channels per group in and out
  Activation act;         ///< applied by the kernels' epilogues
  const PackedConvWeight *packed = nullptr;
  ConvGemm gemm = ConvGemm::Auto;
  /// Conv2dParams::residual (contiguous, the output's layout), added after
  /// the epilogue, then tailAct (act is None then).
  const float *residual = nullptr;
  Activation tailAct = Activation::None;
  /// Floats between the output's images: o * oh * ow, or more when the
  /// output is a channel slice of a larger tensor (a concat's output).
  /// Each image is contiguous; the residual is contiguous throughout.
  int64_t outImage = 0;
  /// A normalised input (conv2dNormedInput), read from its channels
  /// instead of x; only on pointwise convs through convMicro.
  const NormedChannels *norm = nullptr;

  int64_t k() const { return cg * kh * kw; }
  int64_t spatial() const { return oh * ow; }
  /// Offsets of channel `ch` of image `img` in the output and the residual.
  int64_t outAt(int64_t img, int64_t ch) const {
    return img * outImage + ch * spatial();
  }
  int64_t resAt(int64_t img, int64_t ch) const {
    return (img * o + ch) * spatial();
  }
  bool isPointwise() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 &&
           oh == h && ow == w;
  }
  bool isDepthwise() const { return groups == c && cg == 1 && groups > 1; }
};

/// Conventions of the error messages of one conv op.
struct ConvNames {
  llvm::StringRef op;          ///< "conv2d"
  llvm::StringRef inputLayout; ///< "(N, C, H, W)"
  llvm::StringRef weightLayout;
  size_t rank; ///< of input and weight
};

} // namespace

/// Checks the tensors and attributes shared by conv1d and conv2d and
/// returns the geometry. `x` and `w` are the caller's tensors (for the
/// messages); spatial attributes are given as 2-D (h = 1 for conv1d).
static ConvGeom checkConv(const ConvNames &nm, const Tensor &x, const Tensor &w,
                          const Tensor &bias, Int2 stride, Int2 padBegin,
                          Int2 padEnd, Int2 dilation, int64_t groups,
                          Activation act) {
  llvm::StringRef op = nm.op;
  requireFloat32(op, x, "input");
  requireFloat32(op, w, "weight");
  requireRank(op, x, "input", nm.rank, nm.inputLayout);
  requireRank(op, w, "weight", nm.rank, nm.weightLayout);
  bool is1d = nm.rank == 3;
  auto pairStr = [&](Int2 v) { return is1d ? std::to_string(v.w) : v.str(); };
  if (groups <= 0)
    raise("{}: groups must be positive, got {}", op.str(), groups);
  if (stride.h <= 0 || stride.w <= 0)
    raise("{}: stride {} must be positive", op.str(), pairStr(stride));
  if (dilation.h <= 0 || dilation.w <= 0)
    raise("{}: dilation {} must be positive", op.str(), pairStr(dilation));
  if (padBegin.h < 0 || padBegin.w < 0 || padEnd.h < 0 || padEnd.w < 0)
    raise("{}: padding {} / {} must be non-negative", op.str(),
          pairStr(padBegin), pairStr(padEnd));

  ConvGeom g;
  g.n = x.dim(0);
  g.c = x.dim(1);
  g.h = is1d ? 1 : x.dim(2);
  g.w = x.dim(nm.rank - 1);
  g.o = w.dim(0);
  g.kh = is1d ? 1 : w.dim(2);
  g.kw = w.dim(nm.rank - 1);
  g.groups = groups;
  if (g.c != w.dim(1) * groups)
    raise("{}: input {} has {} channels but weight {} expects {}{}", op.str(),
          shapeStr(x.shape()), g.c, shapeStr(w.shape()), w.dim(1) * groups,
          groups == 1
              ? std::string()
              : fmt::format(" ({} per group, {} groups)", w.dim(1), groups));
  if (g.o % groups != 0)
    raise("{}: groups {} does not divide the {} output channels of weight {}",
          op.str(), groups, g.o, shapeStr(w.shape()));
  if (bias.defined()) {
    requireFloat32(op, bias, "bias");
    if (bias.rank() != 1 || bias.dim(0) != g.o)
      raise("{}: bias {} does not match the {} output channels of weight {}",
            op.str(), shapeStr(bias.shape()), g.o, shapeStr(w.shape()));
  }
  g.cg = g.c / groups;
  g.og = g.o / groups;
  g.sh = stride.h;
  g.sw = stride.w;
  g.ph = padBegin.h;
  g.pw = padBegin.w;
  g.dh = dilation.h;
  g.dw = dilation.w;
  g.oh = convOutputSize(g.h, g.kh, g.sh, padBegin.h, padEnd.h, g.dh);
  g.ow = convOutputSize(g.w, g.kw, g.sw, padBegin.w, padEnd.w, g.dw);
  if (g.kh == 0 || g.kw == 0 || g.oh <= 0 || g.ow <= 0)
    raise("{}: kernel {} with dilation {} does not fit input {} padded by {} "
          "/ {}",
          op.str(), is1d ? std::to_string(g.kw) : Int2(g.kh, g.kw).str(),
          pairStr(dilation), shapeStr(x.shape()), pairStr(padBegin),
          pairStr(padEnd));
  g.act = act;
  requireBlasSize(op, g.k(), "patch size");
  requireBlasSize(op, g.spatial(), "output size");
  g.outImage = g.o * g.spatial();
  return g;
}

/// Builds columns [j0, j1) of the patch matrix of one group: row (ci, ki,
/// kj) holds, for output position j = (oy, ox), the input element under
/// kernel tap (ki, kj) or 0 in the padding. `col` is K x (j1 - j0). Cloned
/// for AVX-512 / AVX2: the stride-2 gathers vectorise there.
TM_VECTOR_CLONES
static void im2colTile(const ConvGeom &g, const float *x, int64_t j0,
                       int64_t j1, float *col) {
  int64_t nt = j1 - j0;
  for (int64_t ci = 0; ci < g.cg; ++ci) {
    const float *plane = x + ci * g.h * g.w;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        float *dst = col + ((ci * g.kh + ki) * g.kw + kj) * nt;
        int64_t shift = kj * g.dw - g.pw; // ix = ox * sw + shift
        // Valid ox: 0 <= ox * sw + shift < w.
        int64_t oxLo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
        int64_t oxHi = g.w - shift <= 0 ? 0 : (g.w - shift + g.sw - 1) / g.sw;
        for (int64_t j = j0; j < j1;) {
          int64_t oy = j / g.ow, ox0 = j % g.ow;
          int64_t ox1 = std::min(g.ow, ox0 + (j1 - j));
          float *d = dst + (j - j0) - ox0;
          int64_t iy = oy * g.sh - g.ph + ki * g.dh;
          if (iy < 0 || iy >= g.h) {
            std::memset(d + ox0, 0, sizeof(float) * (ox1 - ox0));
          } else {
            const float *src = plane + iy * g.w + shift;
            int64_t a = std::clamp(oxLo, ox0, ox1);
            int64_t b = std::clamp(oxHi, a, ox1);
            for (int64_t ox = ox0; ox < a; ++ox)
              d[ox] = 0.0f;
            if (g.sw == 1) {
              std::memcpy(d + a, src + a, sizeof(float) * (b - a));
            } else {
              for (int64_t ox = a; ox < b; ++ox)
                d[ox] = src[ox * g.sw];
            }
            for (int64_t ox = b; ox < ox1; ++ox)
              d[ox] = 0.0f;
          }
          j += ox1 - ox0;
        }
      }
    }
  }
}

/// Applies bias and activation to rows [m0, m1) x columns [j0, j1) of one
/// group's output (row stride `ld`).
static void epilogue(const ConvGeom &g, float *out, int64_t ld, int64_t m0,
                     int64_t m1, int64_t j0, int64_t j1, const float *bias) {
  if (!bias && g.act == Activation::None)
    return;
  for (int64_t m = m0; m < m1; ++m)
    biasActivate(out + m * ld + j0, j1 - j0, bias ? bias[m] : 0.0f, g.act);
}

/// out[outOff + i] = tailAct(out[outOff + i] + residual[resOff + i]) over
/// n floats: the residual add and the activation after it, as the add and
/// activation ops compute them.
static void residualRun(const ConvGeom &g, float *out, int64_t outOff,
                        int64_t resOff, int64_t n) {
  addActivate(out + outOff, g.residual + resOff, n, g.tailAct);
}

/// residualRun over the whole output, for the paths that do not apply it
/// per tile.
static void residualAll(const ConvGeom &g, float *out) {
  if (!g.residual)
    return;
  int64_t planes = g.n * g.o, sp = g.spatial();
  parallelFor(planes, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(sp, 1)),
              [&](int64_t p0, int64_t p1) {
                for (int64_t p = p0; p < p1; ++p)
                  residualRun(g, out, g.outAt(p / g.o, p % g.o), p * sp, sp);
              });
}

namespace {
/// How convBlas cuts one (image, group) GEMM into work items.
struct GemmTiling {
  int64_t tile, tiles, mBlocks;
};
} // namespace

/// Column tiles keep the K x tile slice of the patch matrix within
/// ColumnBudgetBytes; the tile count is then raised until the work items
/// divide evenly over the threads (when there are few of them), and the
/// output channels are split when there are still fewer items than
/// threads (small outputs such as 7x7).
static GemmTiling planGemm(const ConvGeom &g, int threads) {
  constexpr int64_t ColumnBudgetBytes = 1 << 20;
  constexpr int64_t MinTile = 64, Align = 8, MinRows = 32;
  int64_t k = std::max<int64_t>(g.k(), 1), sp = g.spatial();
  int64_t images = g.n * g.groups;
  int64_t maxTile =
      std::max(MinTile, ColumnBudgetBytes / int64_t(sizeof(float)) / k);
  int64_t tiles = (sp + maxTile - 1) / maxTile;
  if (images * tiles < 4 * threads)
    while ((images * tiles) % threads != 0 && sp / (tiles + 1) >= MinTile)
      ++tiles;
  int64_t tile = ((sp + tiles - 1) / tiles + Align - 1) / Align * Align;
  tile = std::min(tile, sp);
  tiles = (sp + tile - 1) / tile;
  int64_t mBlocks = 1;
  if (images * tiles < threads)
    mBlocks = std::max<int64_t>(
        1, std::min<int64_t>((threads + images * tiles - 1) / (images * tiles),
                             g.og / MinRows));
  return {tile, tiles, mBlocks};
}

/// GEMM lowering of conv2d (see the file comment).
static void convBlas(const ConvGeom &g, const float *x, const float *w,
                     const float *bias, float *out) {
  int64_t k = g.k(), sp = g.spatial();
  bool pointwise = g.isPointwise();
  int threads = omp_get_max_threads();
  GemmTiling t = planGemm(g, threads);
  int64_t items = g.n * g.groups * t.tiles * t.mBlocks;
  // One patch tile per thread, allocated here: an allocation failure must
  // throw on the calling thread, not inside the parallel region.
  // From the run's storage arena: recycled across layers and runs.
  size_t tileFloats = pointwise ? 0 : size_t(k) * size_t(t.tile);
  Tensor scratchT = Tensor::empty({int64_t(tileFloats) * threads});
  float *scratch = scratchT.data<float>();

  ensureSerialBlas();
#pragma omp parallel for schedule(static)                                      \
    num_threads(threads) if (items > 1 && threads > 1)
  for (int64_t item = 0; item < items; ++item) {
    int64_t mb = item % t.mBlocks;
    int64_t tl = (item / t.mBlocks) % t.tiles;
    int64_t img = item / (t.mBlocks * t.tiles);
    int64_t n = img / g.groups, grp = img % g.groups;
    int64_t j0 = tl * t.tile, j1 = std::min(sp, j0 + t.tile);
    int64_t m0 = g.og * mb / t.mBlocks, m1 = g.og * (mb + 1) / t.mBlocks;
    // (x is null for a normalised input, read from its channels.)
    const float *xg = x ? x + (n * g.c + grp * g.cg) * g.h * g.w : nullptr;
    float *og = out + g.outAt(n, grp * g.og);
    const float *wg = w + (grp * g.og + m0) * k;
    const float *bg = bias ? bias + grp * g.og : nullptr;
    const float *b;
    int64_t ldb;
    if (pointwise) {
      b = xg + j0;
      ldb = sp;
    } else {
      float *col = scratch + tileFloats * size_t(omp_get_thread_num());
      im2colTile(g, xg, j0, j1, col);
      b = col;
      ldb = j1 - j0;
    }
    sgemmSerial(false, false, m1 - m0, j1 - j0, k, 1.0f, wg, k, b, ldb, 0.0f,
                og + m0 * sp + j0, sp);
    epilogue(g, og, sp, m0, m1, j0, j1, bg);
  }
}

//===----------------------------------------------------------------------===//
// The micro-kernel path (AVX-512, weights packed once)
//===----------------------------------------------------------------------===//

bool convMicroKernelAvailable() { return gemmMicroKernelAvailable(); }

std::shared_ptr<const PackedConvWeight> packConvWeight(const Tensor &weight,
                                                       int64_t groups) {
  llvm::StringRef op = "pack_conv_weight";
  requireFloat32(op, weight, "weight");
  if (weight.rank() < 3)
    raise("{}: weight {} must be (out_channels, in_channels / groups, ...)",
          op.str(), shapeStr(weight.shape()));
  if (groups <= 0 || weight.dim(0) % groups != 0)
    raise("{}: groups {} does not divide the {} output channels of weight {}",
          op.str(), groups, weight.dim(0), shapeStr(weight.shape()));
  if (!gemmMicroKernelAvailable())
    return nullptr;
  return std::make_shared<PackedConvWeight>(weight, groups);
}

PackedConvWeight::PackedConvWeight(const Tensor &weight, int64_t g)
    : outChannels(weight.dim(0)), groups(g),
      depth(weight.dim(0) ? weight.numel() / weight.dim(0) : 0),
      weight_(weight.contiguous()) {}

/// w (o, 1, kh, kw) as [kh * kw][o]: PackedConvWeight::depthwiseTaps().
static void packDepthwiseTaps(const float *w, int64_t o, int64_t taps,
                              float *dst) {
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t t = 0; t < taps; ++t)
      dst[t * o + oc] = w[oc * taps + t];
}

llvm::ArrayRef<float> PackedConvWeight::depthwiseTaps() const {
  std::call_once(tapsOnce_, [this] {
    if (depth != 0 && weight_.dim(1) != 1)
      raise("pack_conv_weight: the depthwise form needs one input channel per "
            "group, got weight {}",
            shapeStr(weight_.shape()));
    tapsSize_ = size_t(outChannels * depth);
    taps_.reset(new float[tapsSize_]);
    packDepthwiseTaps(weight_.data<float>(), outChannels, depth, taps_.get());
  });
  return {taps_.get(), tapsSize_};
}

llvm::ArrayRef<float> PackedConvWeight::panels() const {
  std::call_once(panelsOnce_, [this] {
    int64_t og = outChannels / groups;
    panelsSize_ = size_t(packedPanelFloats(groups, og, depth));
    panels_.reset(new float[panelsSize_]); // every element written below
    packPanels(weight_.data<float>(), groups, og, depth, panels_.get());
  });
  return {panels_.get(), panelsSize_};
}

namespace {
/// F(2x2, 3x3): out (2x2) = A^T [(G g G^T) . (B^T d B)] A for a 4x4 input
/// tile d and a 3x3 kernel g, with
///   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],
///   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
///   A^T = [1 1 1 0; 0 1 -1 -1].
constexpr int64_t WinoXi = 16; ///< transformed positions (4x4)

/// u (4x4, row-major) = G g G^T of one 3x3 kernel g, in double.
void winogradKernel(const float *g, float *u) {
  double t[4][3]; // G g
  for (int j = 0; j < 3; ++j) {
    double g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    t[0][j] = g0;
    t[1][j] = 0.5 * (g0 + g1 + g2);
    t[2][j] = 0.5 * (g0 - g1 + g2);
    t[3][j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    double a = t[i][0], b = t[i][1], c = t[i][2];
    u[i * 4 + 0] = float(a);
    u[i * 4 + 1] = float(0.5 * (a + b + c));
    u[i * 4 + 2] = float(0.5 * (a - b + c));
    u[i * 4 + 3] = float(c);
  }
}
} // namespace

llvm::ArrayRef<float> PackedConvWeight::winograd() const {
  std::call_once(winogradOnce_, [this] {
    if (groups != 1 || weight_.rank() != 4 || weight_.dim(2) != 3 ||
        weight_.dim(3) != 3)
      raise("pack_conv_weight: the Winograd form needs a 3x3 weight and one "
            "group, got weight {} with groups {}",
            shapeStr(weight_.shape()), groups);
    int64_t o = outChannels, c = weight_.dim(1);
    // U_xi (o x c) for each of the 16 positions, each packed like an
    // im2col weight of depth c (packPanels' layout), written in place:
    // output channel oc is row oc % 8 of panel oc / 8; depth ic is in the
    // depth block at ic / kb * kb.
    int64_t per = packedPanelFloats(1, o, c), panels = (o + GemmMR - 1) / GemmMR;
    int64_t kb = gemmDepthBlock(c);
    winogradSize_ = size_t(WinoXi * per);
    winograd_.reset(new float[winogradSize_]);
    float *dst = winograd_.get();
    auto at = [&](int64_t xi, int64_t oc, int64_t ic) {
      int64_t k0 = ic / kb * kb, kc = std::min(kb, c - k0);
      return xi * per + k0 * panels * GemmMR + (oc / GemmMR) * kc * GemmMR +
             (ic - k0) * GemmMR + oc % GemmMR;
    };
    const float *w = weight_.data<float>();
#pragma omp parallel for schedule(static) if (o * c > (1 << 12) && !omp_in_parallel())
    for (int64_t oc = 0; oc < panels * GemmMR; ++oc)
      for (int64_t ic = 0; ic < c; ++ic) {
        float tile[WinoXi];
        if (oc < o)
          winogradKernel(w + (oc * c + ic) * 9, tile);
        else
          std::fill(tile, tile + WinoXi, 0.0f); // the last panel's padding rows
        for (int64_t xi = 0; xi < WinoXi; ++xi)
          dst[at(xi, oc, ic)] = tile[xi];
      }
  });
  return {winograd_.get(), winogradSize_};
}

/// Builds rows [r0, r1) x columns [j0, j1) of the patch matrix of one
/// group, like im2colTile, but directly in the micro-kernel's B layout:
/// strips of 48 columns, strip s at col + s * (r1 - r0) * 48, row r0 + k
/// of a strip at + k * width, width = 48 except for a last, partial strip
/// (GemmB::compact).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TM_IM2COL_AVX512 TM_AVX512F
namespace {
using simd512::evens;
using simd512::headMask;
using simd512::odds;
// Segments of a strip row are at most 48 floats: masked AVX-512 moves
// rather than memcpy / memset calls (im2colStrips runs only where the
// micro-kernel, hence AVX-512, is available).
TM_IM2COL_AVX512 inline void zeroSeg(float *d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16)
    _mm512_mask_storeu_ps(d + i, headMask(n - i), _mm512_setzero_ps());
}
TM_IM2COL_AVX512 inline void copySeg(float *d, const float *s, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = headMask(n - i);
    _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_loadu_ps(m, s + i));
  }
}
/// d[q] = s[2q], q < n: two loads and one even-lane permute per 16.
TM_IM2COL_AVX512 inline void copySeg2(float *d, const float *s, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    int64_t in = 2 * (n - i) - 1; // inputs this chunk may read
    __m512 lo = _mm512_maskz_loadu_ps(headMask(in), s + 2 * i);
    __m512 hi = _mm512_maskz_loadu_ps(headMask(std::max<int64_t>(in - 16, 0)),
                                      s + 2 * i + 16);
    _mm512_mask_storeu_ps(d + i, headMask(n - i),
                          evens(lo, hi));
  }
}
/// d[i] = act(s[i] * scale + shift), i < n, as one FMA: what
/// scaleShiftChannels computes on a CPU with AVX-512 (its AVX-512 and AVX2
/// clones contract the multiply and add), the only CPUs that run this.
TM_IM2COL_AVX512 inline void scaleShiftSeg(float *d, const float *s, int64_t n,
                                           float scale, float shift,
                                           Activation act) {
  const __m512 sv = _mm512_set1_ps(scale), bv = _mm512_set1_ps(shift);
  for (int64_t i = 0; i < n; i += 16) {
    __mmask16 m = headMask(n - i);
    __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, s + i), sv, bv);
    _mm512_mask_storeu_ps(d + i, m, simd512::activate(v, act));
  }
}
} // namespace
#else
#define TM_IM2COL_AVX512
namespace {
inline void zeroSeg(float *d, int64_t n) { std::fill(d, d + n, 0.0f); }
inline void copySeg(float *d, const float *s, int64_t n) { std::copy(s, s + n, d); }
inline void copySeg2(float *d, const float *s, int64_t n) {
  for (int64_t q = 0; q < n; ++q)
    d[q] = s[2 * q];
}
inline void scaleShiftSeg(float *d, const float *s, int64_t n, float scale,
                          float shift, Activation act) {
  for (int64_t i = 0; i < n; ++i)
    d[i] = activate(act, s[i] * scale + shift);
}
} // namespace
#endif

TM_IM2COL_AVX512
static void im2colStrips(const ConvGeom &g, const float *x, int64_t j0,
                         int64_t j1, int64_t r0, int64_t r1, float *col) {
  int64_t stripStride = (r1 - r0) * GemmNR;
  // The tile's output positions as runs along one output row and within
  // one strip, computed once for all K rows: row k of run r goes to
  // col + r.base + k * r.width, its element ox at + ox.
  struct Run {
    int64_t oy, ox0, ox1, base, width;
  };
  llvm::SmallVector<Run, 32> runs;
  for (int64_t j = j0; j < j1;) {
    int64_t oy = j / g.ow, ox0 = j % g.ow;
    int64_t ox1 = std::min(g.ow, ox0 + (j1 - j));
    for (int64_t ox = ox0; ox < ox1;) {
      int64_t jj = j - j0 + (ox - ox0);
      int64_t n0 = jj % GemmNR, strip = jj / GemmNR;
      int64_t end = std::min(ox1, ox + (GemmNR - n0));
      runs.push_back({oy, ox, end, strip * stripStride + n0 - ox,
                      std::min(GemmNR, j1 - j0 - strip * GemmNR)});
      ox = end;
    }
    j += ox1 - ox0;
  }
  // The input rows the tile reads (of every channel): the next channel's
  // are requested as a channel's first patch row is built, since the
  // short runs of a row wait on memory otherwise (the input was written
  // by another op, often beyond L2).
  int64_t oyLo = j0 / g.ow, oyHi = (j1 - 1) / g.ow + 1;
  int64_t iyLo = std::clamp<int64_t>(oyLo * g.sh - g.ph, 0, g.h),
          iyHi = std::clamp<int64_t>(
              (oyHi - 1) * g.sh - g.ph + (g.kh - 1) * g.dh + 1, iyLo, g.h);
  int64_t taps = g.kh * g.kw;
  for (int64_t kr = r0; kr < r1; ++kr) {
    int64_t ci = kr / taps, ki = kr / g.kw % g.kh, kj = kr % g.kw;
    const float *plane = x + ci * g.h * g.w;
    if (kr % taps == 0 && ci + 1 < g.cg)
      prefetchFloats(plane + g.h * g.w + iyLo * g.w, (iyHi - iyLo) * g.w);
    {
      {
        int64_t row = kr - r0;
        int64_t shift = kj * g.dw - g.pw; // ix = ox * sw + shift
        int64_t oxLo = shift >= 0 ? 0 : (-shift + g.sw - 1) / g.sw;
        int64_t oxHi = g.w - shift <= 0 ? 0 : (g.w - shift + g.sw - 1) / g.sw;
        for (const Run &r : runs) {
          float *d = col + r.base + row * r.width;
          int64_t iy = r.oy * g.sh - g.ph + ki * g.dh;
          if (iy < 0 || iy >= g.h) {
            zeroSeg(d + r.ox0, r.ox1 - r.ox0);
            continue;
          }
          const float *src = plane + iy * g.w + shift;
          int64_t a = std::clamp(oxLo, r.ox0, r.ox1);
          int64_t b = std::clamp(oxHi, a, r.ox1);
          zeroSeg(d + r.ox0, a - r.ox0);
          if (g.sw == 1)
            copySeg(d + a, src + a, b - a);
          else if (g.sw == 2)
            copySeg2(d + a, src + 2 * a, b - a);
          else
            for (int64_t q = a; q < b; ++q)
              d[q] = src[q * g.sw];
          zeroSeg(d + b, r.ox1 - b);
        }
      }
    }
  }
}

namespace {
/// A ConvInputNorm as convMicro reads it: input channel k of image n at
/// base[k] + n * imageStride[k] (a plane of its part), then act(v *
/// scale[k] + shift[k]).
struct NormedChannels {
  llvm::SmallVector<const float *, 64> base;
  llvm::SmallVector<int64_t, 64> imageStride;
  const float *scale = nullptr, *shift = nullptr;
  Activation act = Activation::None;
};
} // namespace

/// Rows [k0, k1) x columns [j0, j1) of the normalised input of image n of
/// a pointwise conv, in im2colStrips' layout (the patch matrix of a 1x1
/// conv is its input).
TM_IM2COL_AVX512
static void normedStrips(const NormedChannels &nm, int64_t n, int64_t j0,
                         int64_t j1, int64_t k0, int64_t k1, float *col) {
  int64_t stripStride = (k1 - k0) * GemmNR;
  // Channel by channel: each reads one contiguous run of its plane (the
  // parts come from layers run long before, from memory) while the next
  // channel's run is prefetched.
  for (int64_t k = k0; k < k1; ++k) {
    const float *src = nm.base[k] + n * nm.imageStride[k];
    if (k + 1 < k1)
      prefetchFloats(nm.base[k + 1] + n * nm.imageStride[k + 1] + j0, j1 - j0);
    for (int64_t s0 = j0; s0 < j1; s0 += GemmNR) {
      int64_t width = std::min(GemmNR, j1 - s0);
      scaleShiftSeg(col + (s0 - j0) / GemmNR * stripStride + (k - k0) * width,
                    src + s0, width, nm.scale[k], nm.shift[k], nm.act);
    }
  }
}

/// Rows [k0, k1) x columns [j0, j1) of a pointwise conv's input `x` (rows
/// sp floats apart) in the micro-kernel's strip layout, as im2colStrips
/// lays out a patch tile: one contiguous run per row, cut at the strips.
static void pointwiseStrips(const float *x, int64_t sp, int64_t j0, int64_t j1,
                            int64_t k0, int64_t k1, float *col) {
  int64_t stripStride = (k1 - k0) * GemmNR;
  for (int64_t k = k0; k < k1; ++k)
    for (int64_t s0 = j0; s0 < j1; s0 += GemmNR) {
      int64_t width = std::min(GemmNR, j1 - s0);
      copySeg(col + (s0 - j0) / GemmNR * stripStride + (k - k0) * width,
              x + k * sp + s0, width);
    }
}

/// Whether conv `g` is a 1x1 convolution with strides and no leading
/// padding reading only input positions: output (oy, ox) is input
/// (oy sh, ox sw), so it is the pointwise convolution of the input
/// subsampled once (subsample). Building its patch matrix per tile
/// instead costs the GEMM 20-50% more: runs of ow columns, one per
/// output row and channel, each from another plane.
static bool subsampledPointwise(const ConvGeom &g) {
  return g.kh == 1 && g.kw == 1 && (g.sh > 1 || g.sw > 1) && g.ph == 0 &&
         g.pw == 0 && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w;
}

/// Rows of the planes [p0, p1) of x subsampled by (sh, sw) into d.
TM_IM2COL_AVX512
static void subsamplePlanes(const ConvGeom &g, const float *x, float *d,
                            int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      const float *src = x + p * g.h * g.w + oy * g.sh * g.w;
      float *dst = d + (p * g.oh + oy) * g.ow;
      if (g.sw == 1)
        copySeg(dst, src, g.ow);
      else if (g.sw == 2)
        copySeg2(dst, src, g.ow);
      else
        for (int64_t q = 0; q < g.ow; ++q)
          dst[q] = src[q * g.sw];
    }
}

/// The input of a subsampledPointwise conv, (N, C, oh, ow), and the
/// pointwise geometry that reads it.
static Tensor subsample(ConvGeom &g, const float *x) {
  Tensor t = Tensor::empty({g.n, g.c, g.oh, g.ow});
  float *d = t.data<float>();
  parallelFor(
      g.n * g.c, std::max<int64_t>(1, (1 << 14) / (g.oh * g.ow)),
      [&](int64_t p0, int64_t p1) { subsamplePlanes(g, x, d, p0, p1); });
  g.h = g.oh;
  g.w = g.ow;
  g.sh = g.sw = 1;
  return t;
}

//===----------------------------------------------------------------------===//
// Implicit GEMM: patch rows read in place from phase planes
//===----------------------------------------------------------------------===//

namespace {
/// An implicit GEMM computes conv `g` on a padded grid of wq columns per
/// output row: grid column j = oy * wq + ox is output (oy, ox) for
/// ox < ow, and computed then dropped for ox >= ow. The input rows a
/// work item needs are first copied, padding included, into sh x sw
/// phase planes (phase (py, px) holds padded input rows py + sh r and
/// columns px + sw c, for c < wq), one depth block's channels at a time.
/// Tap (ki, kj) of grid column j then reads phase (ki dh % sh, kj dw % sw)
/// at row oy + ki dh / sh, column ox + kj dw / sw: j plus a constant, so
/// each patch row is a window of the phase buffer, which the micro-kernel
/// reads at its own offset (GemmB::rowOffsets), and no patch matrix is
/// built. The input is copied once per item as contiguous runs, where
/// im2col writes every element kh kw / (sh sw) times in segments of an
/// output row (2.25 times for a stride-2 3x3 conv, 12 for a 7x7 stem).
struct Implicit {
  int64_t wq = 0;               ///< grid columns per output row
  int64_t halo = 0;             ///< phase rows read past a range's rows
  int64_t planeRows = 0;        ///< rows of a phase plane
  int64_t bufferFloats = 0;     ///< the phase buffer of one work item
  std::vector<int64_t> offsets; ///< of each patch row in the phase buffer
  int64_t planeFloats() const { return planeRows * wq; }
};
} // namespace

/// Grid columns per output row of conv `g`'s implicit GEMM.
static int64_t implicitPitch(const ConvGeom &g) {
  return g.ow + (g.kw - 1) * g.dw / g.sw;
}

/// What the micro-kernel's strips cost for n columns of C, in columns of
/// full strips: whole strips, then a tail of at most 8 columns on the
/// narrow kernel (half the width: 2 per column), or whole vectors of 16.
static int64_t stripCost(int64_t n) {
  int64_t tail = n % GemmNR;
  return n - tail + (tail <= 8 ? 2 * tail : (tail + 15) / 16 * 16);
}

/// Whether conv `g` may run as an implicit GEMM (implicitFits) and, on
/// the output's plane, does (implicitApplies), rather than on an im2col
/// patch matrix (unless ConvGemm::Im2col asks for the patch matrix; never
/// for pointwise convs, read in place, or subsampled ones). Measured on
/// the convs of torchvision's models, 2 threads: the patch matrix costs
/// most where few output channels reuse it (og <= 16: a grouped 3x3 of
/// RegNet's 8-channel groups runs 1.9-2.5x faster implicit, a 3 -> 16
/// stem 1.1-1.2x) and where it repeats each input element many times
/// (kh kw >= 4 sh sw: a 7x7 stride-2 stem 1.05-1.16x). Elsewhere the
/// implicit GEMM's kernel, reading rows at any alignment (about 7%
/// slower), and its copy of C from the grid into the plane (og floats a
/// column, against im2col's K) cost as much as they save: 3x3 stride-2
/// convs of 32-128 channels run 0.76-1.03x. Nor where the grid's dropped
/// columns cost the kernel a tenth more than the plane's (a 14x14 output
/// of a stride-2 3x3 conv: 210 columns, 18 in a tail, for 196 with a
/// 4-column tail).
static bool implicitFits(const ConvGeom &g) {
  if (g.gemm == ConvGemm::Im2col || g.isPointwise() || subsampledPointwise(g) ||
      g.k() == 0)
    return false;
  return stripCost(g.oh * implicitPitch(g)) * 10 <= stripCost(g.spatial()) * 11;
}

static bool implicitApplies(const ConvGeom &g) {
  bool pays =
      g.og <= 16 || (g.kh * g.kw >= 4 * g.sh * g.sw && g.k() >= 2 * g.og);
  return pays && implicitFits(g);
}

/// ceil(a / b) for b > 0 and any a.
static int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

/// The implicit GEMM of `g` for ranges of at most `maxCols` grid columns.
static Implicit makeImplicit(const ConvGeom &g, int64_t maxCols) {
  Implicit im;
  im.wq = implicitPitch(g);
  im.halo = (g.kh - 1) * g.dh / g.sh;
  // A depth block (the packed weight's) reads the channels of its rows.
  int64_t k = g.k(), taps = g.kh * g.kw, kb = gemmDepthBlock(k), chans = 0;
  for (int64_t k0 = 0; k0 < k; k0 += kb)
    chans = std::max(chans, (std::min(k, k0 + kb) - 1) / taps + 1 - k0 / taps);
  im.planeRows =
      std::min(g.oh, (std::max<int64_t>(maxCols, 1) + im.wq - 2) / im.wq + 1) +
      im.halo;
  int64_t phases = g.sh * g.sw;
  // Slack: a dropped column of the last row reads up to wq - ow floats
  // past its plane.
  im.bufferFloats = chans * phases * im.planeFloats() + im.wq;
  im.offsets.resize(size_t(k));
  for (int64_t kr = 0; kr < k; ++kr) {
    int64_t c0 = kr / kb * kb / taps; // the block's first channel
    int64_t ci = kr / taps, ki = kr % taps / g.kw, kj = kr % g.kw;
    int64_t a = ki * g.dh, b = kj * g.dw;
    im.offsets[size_t(kr)] =
        (((ci - c0) * g.sh + a % g.sh) * g.sw + b % g.sw) * im.planeFloats() +
        a / g.sh * im.wq + b / g.sw;
  }
  return im;
}

/// Phase planes of input channels [c0, c1) of one group's input `x` (see
/// Implicit), rows [0, rows) of each starting at output row oy0, into
/// `buf`: channel ci's phase (py, px) at plane ((ci - c0) sh + py) sw + px.
TM_IM2COL_AVX512
static void implicitPhases(const ConvGeom &g, const Implicit &im,
                           const float *x, int64_t oy0, int64_t rows,
                           int64_t c0, int64_t c1, float *buf) {
  int64_t wq = im.wq;
  for (int64_t ci = c0; ci < c1; ++ci)
    for (int64_t py = 0; py < g.sh; ++py)
      for (int64_t px = 0; px < g.sw; ++px) {
        float *plane =
            buf + (((ci - c0) * g.sh + py) * g.sw + px) * im.planeFloats();
        // Column c reads input column px + sw c - pw: inside for [lo, hi).
        int64_t lo = std::clamp<int64_t>(ceilDiv(g.pw - px, g.sw), 0, wq);
        int64_t hi =
            std::clamp<int64_t>(ceilDiv(g.w + g.pw - px, g.sw), lo, wq);
        for (int64_t r = 0; r < rows; ++r) {
          float *d = plane + r * wq;
          int64_t iy = py + g.sh * (oy0 + r) - g.ph;
          if (iy < 0 || iy >= g.h) {
            zeroSeg(d, wq);
            continue;
          }
          const float *src = x + (ci * g.h + iy) * g.w + px + g.sw * lo - g.pw;
          zeroSeg(d, lo);
          if (g.sw == 1)
            copySeg(d + lo, src, hi - lo);
          else if (g.sw == 2)
            copySeg2(d + lo, src, hi - lo);
          else
            for (int64_t q = lo; q < hi; ++q)
              d[q] = src[(q - lo) * g.sw];
          zeroSeg(d + hi, wq - hi);
        }
      }
}

/// Columns [j0, j1) of one (image, group) GEMM of conv `g`, rows from
/// panel p0 (m of them), into `c` (row stride ldc), every depth block: on
/// the implicit GEMM's grid with `im` (its phase buffer in `scratch`),
/// else on the output's plane with the im2col tile in `scratch`. The last
/// block stores act(C + bias + addend).
static void convColumns(const ConvGeom &g, const Implicit *im, const float *xg,
                        const float *wg, int64_t panels, int64_t p0, int64_t m,
                        int64_t j0, int64_t j1, float *c, int64_t ldc,
                        const float *bias, float *scratch, Activation act,
                        GemmAddend addend = {}) {
  int64_t k = g.k(), kb = gemmDepthBlock(k), taps = g.kh * g.kw;
  // One depth block at a time: its patch rows (or phase planes) are built
  // right before the kernel sweeps them, so they are read back from L2.
  for (int64_t k0 = 0; k0 < k; k0 += kb) {
    int64_t kc = std::min(kb, k - k0);
    if (!im) {
      im2colStrips(g, xg, j0, j1, k0, k0 + kc, scratch);
      gemmPackedABlock(wg, panels, p0, m, j1 - j0, k, k0, kc,
                       {scratch, kc * GemmNR, GemmNR, /*compact=*/true}, c, ldc,
                       bias, act, addend);
      continue;
    }
    int64_t oy0 = j0 / im->wq, oy1 = (j1 + im->wq - 1) / im->wq;
    implicitPhases(g, *im, xg, oy0, oy1 - oy0 + im->halo, k0 / taps,
                   std::min(g.cg, (k0 + kc - 1) / taps + 1), scratch);
    GemmB b{scratch + (j0 - oy0 * im->wq), GemmNR, 0};
    b.rowOffsets = im->offsets.data() + k0;
    gemmPackedABlock(wg, panels, p0, m, j1 - j0, k, k0, kc, b, c, ldc, bias,
                     act, addend);
  }
}

/// The widest column tile of a conv of depth k on the micro-kernel, in
/// whole 48-column strips. Every tile streams all of the packed weights
/// once, so tiles are as wide as L2 allows: one depth block of the tile's
/// patch columns (min(K, KC) x tile floats, what the kernel sweeps once
/// per weight panel) within ColumnBudgetBytes.
static int64_t widestColumnTile(int64_t k) {
  constexpr int64_t ColumnBudgetBytes = 384 << 10;
  return std::max(GemmNR, ColumnBudgetBytes / int64_t(sizeof(float)) /
                              gemmDepthBlock(k) / GemmNR * GemmNR);
}

/// Columns [j0, j1) of a pointwise conv's GEMM, rows from panel p0 (m of
/// them), into `c`, its input built into `buf` one depth block at a time by
/// `fill(k0, k1, buf)` in the strip layout (normalised, or copied), each
/// block then multiplied as gemmPackedA multiplies an input read in place.
static void
stripColumns(const ConvGeom &g,
             llvm::function_ref<void(int64_t, int64_t, float *)> fill,
             const float *wg, int64_t panels, int64_t p0, int64_t m, int64_t j0,
             int64_t j1, float *c, int64_t ldc, const float *bias, float *buf,
             Activation act, GemmAddend addend) {
  int64_t k = g.k(), kb = gemmDepthBlock(k);
  for (int64_t k0 = 0; k0 < k; k0 += kb) {
    int64_t kc = std::min(kb, k - k0);
    fill(k0, k0 + kc, buf);
    gemmPackedABlock(wg, panels, p0, m, j1 - j0, k, k0, kc,
                     {buf, kc * GemmNR, GemmNR, /*compact=*/true}, c, ldc, bias,
                     act, addend);
  }
}

/// Whether pointwise conv `g`, with at most `panels` panels of output
/// channels a work item, copies its input into the micro-kernel's strip
/// layout (pointwiseStrips) instead of reading it in place, one stream per
/// input channel. Each strip of the input is re-read from cache by the
/// item's other panels; with at most two panels (16 output channels:
/// SqueezeNet's squeeze convs, GoogLeNet's reduce convs) nothing amortises
/// the streams, and where they are many (32 input channels or more) over
/// an input larger than 128 KB they wait on the last-level cache: on an
/// Intel Xeon (Sapphire Rapids) a 128 -> 16 conv at 55x55 ran as fast on
/// two threads as on one. Copied row by row, one depth block at a time,
/// the squeeze convs of a chain of fire modules took 92-104 us instead of
/// 133-150 (SqueezeNet 0-3% faster: the first one, reading the model's
/// input from memory, took 58-63 us instead of 46); with up to 8 panels
/// copied, MobileNetV2 ran 3-9% slower.
static bool copiesInput(const ConvGeom &g, int64_t panels) {
  constexpr int64_t CopiedMaxPanels = 2, MinStreams = 32,
                    MinInputBytes = 128 << 10;
  return g.isPointwise() && !g.norm && panels <= CopiedMaxPanels &&
         g.k() >= MinStreams &&
         g.k() * g.spatial() * int64_t(sizeof(float)) >= MinInputBytes;
}

/// Whether pointwise conv `g` gives each of `threads` threads one block of
/// output channels over all images, rather than whole images or column
/// tiles. A pointwise conv with fewer columns than output channels reads
/// less input than weights. When an image's columns would be cut over the
/// threads, every thread would stream all the weights (1 MB for each of
/// ResNet-50's 14x14 layers, from memory in a model); one block of output
/// channels per thread streams only its share. A batch the threads divide
/// keeps whole images per thread: each thread then reads the images the op
/// before wrote on its core, and writes those the op after reads there (the
/// depthwise convs, pools and other convs split the batch the same way).
/// Cutting channels made every thread read every image, half of them from
/// the other core's cache: at batch 8 on an Intel Xeon VM, MobileNetV2 ran
/// 4-7% slower, ShuffleNetV2, RegNetY and MobileNetV3 3-5% (ResNets and
/// ConvNeXt the same). Another batch keeps the channel split where the
/// share stays in L2 next to an image's input, to be reused by the next
/// image.
static bool channelsFirst(const ConvGeom &g, int threads) {
  constexpr int64_t ReuseBudgetBytes = 768 << 10;
  int64_t k = g.k(), images = g.n * g.groups;
  int64_t panels = (g.og + GemmMR - 1) / GemmMR;
  int64_t weightBytes = g.og * k * int64_t(sizeof(float));
  int64_t inputBytes = k * g.spatial() * int64_t(sizeof(float));
  return threads > 1 && inputBytes < weightBytes && panels / 4 >= threads &&
         (images < threads ||
          (images % threads != 0 &&
           weightBytes / threads + inputBytes <= ReuseBudgetBytes));
}

/// convBlas on the micro-kernel: the same work items (image, group, column
/// tile, row block), with the patch tile written straight into the
/// kernel's strip layout and bias + activation applied in its store.
static void convMicro(const ConvGeom &g, const float *x, const float *wPacked,
                      const float *bias, float *out) {
  int64_t k = g.k(), sp = g.spatial();
  bool pointwise = g.isPointwise(), implicit = implicitApplies(g);
  // Columns of one (image, group) GEMM: the output plane's, or the
  // implicit GEMM's grid.
  int64_t wq = implicit ? implicitPitch(g) : g.ow, gsp = g.oh * wq;
  int threads = omp_get_max_threads();
  // Column tiles: boundaries on whole 48-column strips (only the last
  // tile of a plane has a partial strip), at most widestColumnTile wide.
  // With few tiles, their count is raised until the work items divide
  // evenly over the threads, keeping tiles of at least MinTile columns:
  // one strip, so a 13x13 plane (169 columns) still splits over two
  // threads (96 + 73) where its output channels cannot (SqueezeNet's
  // 384 -> 48 1x1 convs ran on one thread: 2.5% of its run).
  constexpr int64_t MinTile = 48;
  int64_t images = g.n * g.groups;
  int64_t maxTile = widestColumnTile(k);
  int64_t tiles = std::max<int64_t>(1, (gsp + maxTile - 1) / maxTile);
  int64_t panels = (g.og + GemmMR - 1) / GemmMR;
  bool rowsFirst = pointwise && channelsFirst(g, threads);
  if (images * tiles < 4 * threads && !rowsFirst)
    while ((images * tiles) % threads != 0 && gsp / (tiles + 1) >= MinTile)
      ++tiles;
  // Tile t starts at column tileStart(t): t * sp / tiles rounded to the
  // nearest strip boundary.
  auto tileStart = [gsp, tiles](int64_t t) {
    if (t >= tiles)
      return gsp;
    int64_t c = (t * gsp / tiles + GemmNR / 2) / GemmNR * GemmNR;
    return std::min(c, gsp);
  };
  int64_t tile = 0; // the widest tile
  for (int64_t t = 0; t < tiles; ++t)
    tile = std::max(tile, tileStart(t + 1) - tileStart(t));
  // Too few items for the threads (small outputs such as 7x7): split the
  // output channels too, in whole panels of 8.
  int64_t mBlocks = 1;
  if (rowsFirst)
    mBlocks = threads;
  else if (images * tiles < threads)
    mBlocks = std::max<int64_t>(
        1, std::min<int64_t>((threads + images * tiles - 1) / (images * tiles),
                             panels / 4));
  int64_t items = images * tiles * mBlocks;
  int64_t strips = (tile + GemmNR - 1) / GemmNR;
  // Per thread: the im2col tile, or the implicit GEMM's phase planes and,
  // where the grid is wider than the plane, the tile's C on the grid,
  // computed in chunks of columns that keep it in L2 (CBudgetBytes) before
  // it is copied into the plane.
  constexpr int64_t CBudgetBytes = 256 << 10;
  bool onGrid = implicit && wq != g.ow;
  int64_t chunk =
      std::max(GemmNR, CBudgetBytes / int64_t(sizeof(float)) /
                           std::max<int64_t>(g.og, 1) / GemmNR * GemmNR);
  std::optional<Implicit> im;
  if (implicit)
    im = makeImplicit(g, onGrid ? std::min(chunk, tile) : tile);
  bool copied = copiesInput(g, (panels + mBlocks - 1) / mBlocks);
  size_t tileFloats =
      pointwise && !g.norm && !copied ? 0
      : implicit ? size_t(im->bufferFloats + (onGrid ? g.og * chunk : 0))
                 : size_t(gemmDepthBlock(k)) * size_t(strips * GemmNR);
  Tensor scratchT = Tensor::empty({int64_t(tileFloats) * threads});
  float *scratch = scratchT.data<float>();
  int64_t groupFloats = panels * k * GemmMR;

#pragma omp parallel for schedule(static)                                      \
    num_threads(threads) if (items > 1 && threads > 1)
  for (int64_t item = 0; item < items; ++item) {
    // Static scheduling gives each thread a contiguous run of items: with
    // rowsFirst, the channel block varies slowest, so a thread keeps one.
    int64_t cols = images * tiles;
    int64_t mb = rowsFirst ? item / cols : item % mBlocks;
    int64_t rest = rowsFirst ? item % cols : item / mBlocks;
    int64_t tl = rest % tiles, img = rest / tiles;
    int64_t n = img / g.groups, grp = img % g.groups;
    int64_t j0 = tileStart(tl), j1 = tileStart(tl + 1);
    if (j0 >= j1)
      continue;
    int64_t p0 = panels * mb / mBlocks, p1 = panels * (mb + 1) / mBlocks;
    int64_t m0 = p0 * GemmMR, m1 = std::min(g.og, p1 * GemmMR);
    if (m0 >= m1)
      continue;
    const float *xg = x + (n * g.c + grp * g.cg) * g.h * g.w;
    float *og = out + g.outAt(n, grp * g.og);
    const float *wg = wPacked + grp * groupFloats;
    float *cg = og + m0 * sp + j0;
    const float *bg = bias ? bias + grp * g.og + m0 : nullptr;
    // The residual, added where the kernel stores C (on the plane).
    GemmAddend res;
    if (g.residual)
      res = {g.residual + g.resAt(n, grp * g.og + m0) + j0, sp};
    Activation act = g.residual ? g.tailAct : g.act;
    if ((g.norm && k > 0) || copied) {
      auto fill = [&](int64_t k0, int64_t k1, float *buf) {
        g.norm ? normedStrips(*g.norm, n, j0, j1, k0, k1, buf)
               : pointwiseStrips(xg, sp, j0, j1, k0, k1, buf);
      };
      stripColumns(g, fill, wg, panels, p0, m1 - m0, j0, j1, cg, sp, bg,
                   scratch + tileFloats * size_t(omp_get_thread_num()), act,
                   res);
    } else if (pointwise || k == 0) { // (k == 0: C is the activated bias)
      gemmPackedA(wg, panels, p0, m1 - m0, j1 - j0, k, {xg + j0, GemmNR, sp},
                  cg, sp, bg, act, res);
    } else if (onGrid) {
      // C on the grid, then its output columns into the plane.
      float *buf = scratch + tileFloats * size_t(omp_get_thread_num());
      float *cb = buf + im->bufferFloats;
      for (int64_t c0 = j0; c0 < j1; c0 += chunk) {
        int64_t c1 = std::min(j1, c0 + chunk);
        convColumns(g, &*im, xg, wg, panels, p0, m1 - m0, c0, c1, cb, chunk, bg,
                    buf, g.act);
        for (int64_t m = m0; m < m1; ++m) {
          const float *src = cb + (m - m0) * chunk;
          int64_t at = g.outAt(n, grp * g.og + m),
                  res = g.resAt(n, grp * g.og + m);
          for (int64_t oy = c0 / wq; oy * wq < c1; ++oy) {
            int64_t a = std::max(c0, oy * wq), b = std::min(c1, oy * wq + g.ow);
            if (a >= b)
              continue;
            int64_t o = oy * g.ow + (a - oy * wq);
            std::memcpy(out + at + o, src + (a - c0),
                        size_t(b - a) * sizeof(float));
            if (g.residual)
              residualRun(g, out, at + o, res + o, b - a);
          }
        }
      }
      continue;
    } else {
      float *buf = scratch + tileFloats * size_t(omp_get_thread_num());
      convColumns(g, im ? &*im : nullptr, xg, wg, panels, p0, m1 - m0, j0, j1,
                  cg, sp, bg, buf, act, res);
    }
  }
}

/// convMicro followed by max pool `pr` over its output, in bands of pool
/// rows (see conv2dMaxPool): work items are (image, band), a contiguous
/// run of them per thread. A band's conv rows are computed into a
/// per-thread buffer and pooled from there. The conv computes whole
/// 48-column strips of the plane, on the same grid as convMicro (strip s
/// is plane columns 48s ..), so every column goes through the same kernel
/// as unfused: a band computes the strips up to its last needed column,
/// the next band on the thread takes the columns it shares with it from
/// the previous buffer (pool windows overlap) and computes from there.
static void convMicroPooled(const ConvGeom &g, const float *x,
                            const float *wPacked, const float *bias,
                            const detail::MaxPoolRows &pr, float *out) {
  int64_t k = g.k();
  int threads = omp_get_max_threads();
  // The conv's columns: the output plane's, or the implicit GEMM's grid
  // (rows wq apart). The band buffer holds them either way, so the grid
  // costs no copy of C here, and the implicit GEMM wherever it fits: 1.03-
  // 1.26x faster than the patch matrix on every conv + pool measured
  // (SqueezeNet's 3 -> 64 3x3 stride-2 stem 1.15x at batch 1, 1.2x at
  // batch 8; 3x3 stride-2 convs of 16-64 channels in, 3x3 stride 1, 5x5,
  // 4x4 stride 4).
  bool implicit = implicitFits(g);
  int64_t wq = implicit ? implicitPitch(g) : g.ow, gsp = g.oh * wq;
  // Bands: about BandBytes of conv rows (all channels) each, at least
  // two items per thread where the images allow.
  constexpr int64_t BandBytes = 256 << 10;
  int64_t rowBytes = g.o * wq * int64_t(sizeof(float));
  auto convRows = [&](int64_t y0, int64_t y1) {
    auto [lo, hi] = pr.inputRows(y0, y1);
    return hi - lo;
  };
  int64_t bandRows = 1;
  while (bandRows < pr.oh && convRows(0, bandRows + 1) * rowBytes <= BandBytes)
    ++bandRows;
  int64_t bands = (pr.oh + bandRows - 1) / bandRows;
  while (g.n * bands < 2 * threads && bandRows > 1) {
    bandRows = (bandRows + 1) / 2;
    bands = (pr.oh + bandRows - 1) / bandRows;
  }
  int64_t items = g.n * bands;
  // A band buffer: its conv rows' columns and up to a strip more on each
  // side (strip-aligned starts and ends).
  int64_t maxCols = 0;
  for (int64_t b = 0; b < bands; ++b)
    maxCols = std::max(
        maxCols,
        convRows(b * bandRows, std::min(pr.oh, (b + 1) * bandRows)) * wq);
  int64_t bufCols = std::min(gsp, maxCols + 2 * GemmNR);
  // Patch tiles as convMicro's.
  int64_t kb = gemmDepthBlock(k), maxTile = widestColumnTile(k);
  std::optional<Implicit> im;
  if (implicit)
    im = makeImplicit(g, maxTile);
  int64_t tileFloats = implicit ? im->bufferFloats : kb * maxTile;
  int64_t perThread = 2 * g.o * bufCols + tileFloats + pr.scratchFloats();
  Tensor scratchT = Tensor::empty({perThread * threads});
  int64_t panels = (g.o + GemmMR - 1) / GemmMR;
  int64_t outPlane = pr.oh * pr.ow;
  int64_t parts = std::min<int64_t>(threads, items);

#pragma omp parallel num_threads(int(parts)) if (parts > 1)
  {
    int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    float *base = scratchT.data<float>() + perThread * t;
    float *bufs[2] = {base, base + g.o * bufCols};
    float *col = base + 2 * g.o * bufCols, *poolScratch = col + tileFloats;
    // The previous item's buffer: its image, first column and the end of
    // its computed strips.
    int64_t prevImg = -1, prevStart = 0, prevEnd = 0, prevLd = 0;
    int cur = 0;
    for (int64_t item = items * t / nt; item < items * (t + 1) / nt; ++item) {
      int64_t img = item / bands, band = item % bands;
      int64_t y0 = band * bandRows, y1 = std::min(pr.oh, y0 + bandRows);
      auto [lo, hi] = pr.inputRows(y0, y1);
      int64_t need0 = lo * wq, need1 = (hi - 1) * wq + g.ow;
      int64_t end = std::min(gsp, (need1 + GemmNR - 1) / GemmNR * GemmNR);
      bool continued = img == prevImg && prevStart <= need0 && need0 <= prevEnd;
      int64_t start = continued ? need0 : need0 / GemmNR * GemmNR;
      int64_t from = continued ? std::max(prevEnd, need0) : start;
      int64_t ld = end - start;
      float *c = bufs[cur];
      if (continued && prevEnd > need0)
        for (int64_t m = 0; m < g.o; ++m)
          std::memcpy(c + m * ld,
                      bufs[1 - cur] + m * prevLd + (need0 - prevStart),
                      (prevEnd - need0) * sizeof(float));
      const float *xi = x + img * g.c * g.h * g.w;
      for (int64_t j0 = from; j0 < end; j0 += maxTile) {
        int64_t j1 = std::min(end, j0 + maxTile);
        convColumns(g, im ? &*im : nullptr, xi, wPacked, panels, 0, g.o, j0, j1,
                    c + (j0 - start), ld, bias, col, g.act);
      }
      for (int64_t m = 0; m < g.o; ++m)
        pr.pool(c + m * ld + (need0 - start), y0, y1,
                out + (img * g.o + m) * outPlane, poolScratch, wq);
      prevImg = img;
      prevStart = start;
      prevEnd = end;
      prevLd = ld;
      cur = 1 - cur;
    }
  }
}

//===----------------------------------------------------------------------===//
// Winograd F(2x2, 3x3) on the micro-kernel
//===----------------------------------------------------------------------===//

/// Whether conv `g` may run as F(2x2, 3x3): a 3x3 stride-1 undilated
/// ungrouped convolution on the micro-kernel.
static bool winogradApplies(const ConvGeom &g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1 && g.groups == 1 && g.gemm != ConvGemm::Blas &&
         g.gemm != ConvGemm::Im2col && gemmMicroKernelAvailable();
}

/// Whether it should: with fewer than 8 channels in or out the transforms
/// cost more than the 16 thin GEMMs save (an RGB stem runs 2.5x slower),
/// and below a 6x6 output the tiles' cover wastes the 2.25x (4x4 and 5x5
/// run slower, 6x6 already 1.25x faster; 56x56 to 7x7 outputs of 16 to
/// 512 channels run 1.5-2x faster).
static bool winogradPays(const ConvGeom &g) {
  return g.gemm == ConvGemm::Winograd ||
         (g.c >= 8 && g.o >= 8 && g.oh >= 6 && g.ow >= 6);
}

namespace {
/// Geometry of the tiles of one F(2x2, 3x3) convolution: tile (ty, tx)
/// gives output rows 2ty, 2ty + 1 and columns 2tx, 2tx + 1, and reads the
/// 4x4 input block at (2ty - ph, 2tx - pw) (zeros outside the input). An
/// image's tiles are numbered t = ty * tw + tx, and the batch's tiles
/// image by image (tile t of image i is tile i * th * tw + t).
struct WinoTiles {
  int64_t th, tw;
};
} // namespace

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// B^T d B of 16 tiles, e[i][k] holding row i, column k of their 4x4
/// input blocks, stored (masked to `m`) at `d`, position xi = 4i + j at
/// d + xi * vStride.
TM_IM2COL_AVX512
static inline void winogradInputStore(__m512 (&e)[4][4], __mmask16 m, float *d,
                                      int64_t vStride) {
  for (int k = 0; k < 4; ++k) { // B^T d, column k
    __m512 a0 = e[0][k], a1 = e[1][k], a2 = e[2][k], a3 = e[3][k];
    e[0][k] = _mm512_sub_ps(a0, a2);
    e[1][k] = _mm512_add_ps(a1, a2);
    e[2][k] = _mm512_sub_ps(a2, a1);
    e[3][k] = _mm512_sub_ps(a1, a3);
  }
  for (int i = 0; i < 4; ++i) { // (B^T d) B, row i
    float *di = d + (4 * i) * vStride;
    _mm512_mask_storeu_ps(di, m, _mm512_sub_ps(e[i][0], e[i][2]));
    _mm512_mask_storeu_ps(di + vStride, m, _mm512_add_ps(e[i][1], e[i][2]));
    _mm512_mask_storeu_ps(di + 2 * vStride, m, _mm512_sub_ps(e[i][2], e[i][1]));
    _mm512_mask_storeu_ps(di + 3 * vStride, m, _mm512_sub_ps(e[i][1], e[i][3]));
  }
}

/// The input transform of one channel's tiles [t0, t1) of one image: V_xi =
/// B^T d B for each tile, written as the micro-kernel's B operand, tile t
/// in column col0 + t - t0: position xi at v + xi * vStride, in strips of
/// 48 tiles (strip s at + s * c * 48), the channel's row at + ci * 48. Per 16
/// tiles of a tile row: the four input rows at columns 2q .. 2q + 3 as even
/// and odd lanes (permutes) of loads straight from the plane, masked to the
/// row (zeros outside the input, as the padding), B^T down the rows, B
/// across, 16 stores. Rows of at most 8 tiles (outputs up to 16 wide) fill
/// the lanes with R = 2 or 4 whole tile rows at once: the permutes take
/// each row's tiles into its run of lanes, so a 14x14 output's 7-tile
/// rows cost half the loads, permutes and stores, a 7x7 output's a
/// quarter. No padded copy of the rows: reading one back at once at other
/// offsets than it was written stalls every load on store forwarding.
TM_IM2COL_AVX512
static void winogradInput(const ConvGeom &g, const WinoTiles &wt,
                          const float *plane, int64_t ci, int64_t t0,
                          int64_t t1, int64_t col0, float *v, int64_t vStride) {
  // Where tile column tl (of this call's range, from col0) is in V.
  auto at = [&](int64_t tl) {
    return v + tl / GemmNR * g.c * GemmNR + ci * GemmNR + tl % GemmNR;
  };
  int64_t tw = wt.tw;
  int64_t rowsPerVector = tw <= 4 ? 4 : tw <= 8 ? 2 : 1;
  // Lane j of a group of whole tile rows takes tile j % tw of its row
  // j / tw: within a pair of rows, lanes [0, tw) from the first (its
  // evens or odds: columns 2j + k), [tw, 2 tw) from the second; four rows
  // are two pairs, lanes [0, 2 tw) of each.
  alignas(64) int32_t pairIdx[2][16], quadIdx[16];
  for (int j = 0; j < 16; ++j) {
    int jj = j < tw ? 2 * j : 16 + 2 * (j - int(tw));
    pairIdx[0][j] = std::min(jj, 31);
    pairIdx[1][j] = std::min(jj + 1, 31);
    quadIdx[j] = j < 2 * tw ? j : std::min(16 + j - 2 * int(tw), 31);
  }
  const __m512i pe = _mm512_load_si512(pairIdx[0]),
                po = _mm512_load_si512(pairIdx[1]),
                pq = _mm512_load_si512(quadIdx);
  const int64_t c0 = -g.pw;
  const __mmask16 mk0 = simd512::insideMask(c0, g.w),
                  mk2 = simd512::insideMask(c0 + 2, g.w);
  for (int64_t t = t0; t < t1;) {
    int64_t ty = t / tw, tx0 = t % tw, tl = col0 + (t - t0);
    int64_t rows = tx0 == 0 ? std::min(rowsPerVector, (t1 - t) / tw) : 0;
    if (rowsPerVector > 1 && rows > 0 && tl % GemmNR + rows * tw <= GemmNR) {
      // Whole tile rows in one strip: columns c0 .. c0 + 17 of each input
      // row hold their tiles' blocks (tw <= 8).
      __m512 e[4][4];
      for (int i = 0; i < 4; ++i) {
        __m512 src[4][2]; // group row s at columns c0 .. and c0 + 2 ..
        for (int64_t s2 = 0; s2 < rowsPerVector; ++s2) {
          int64_t iy = 2 * (ty + s2) - g.ph + i;
          if (s2 >= rows || iy < 0 || iy >= g.h) {
            src[s2][0] = src[s2][1] = _mm512_setzero_ps();
            continue;
          }
          const float *r = plane + iy * g.w + c0;
          src[s2][0] = _mm512_maskz_loadu_ps(mk0, r);
          src[s2][1] = _mm512_maskz_loadu_ps(mk2, r + 2);
        }
        for (int k = 0; k < 4; ++k) {
          const __m512i idx = k % 2 ? po : pe;
          __m512 lo = _mm512_permutex2var_ps(src[0][k / 2], idx, src[1][k / 2]);
          if (rowsPerVector == 4)
            lo = _mm512_permutex2var_ps(
                lo, pq,
                _mm512_permutex2var_ps(src[2][k / 2], idx, src[3][k / 2]));
          e[i][k] = lo;
        }
      }
      winogradInputStore(e, headMask(rows * tw), at(tl), vStride);
      t += rows * tw;
      continue;
    }
    // The rest of tile row ty from tile tx0, 16 at a time within strips:
    // padded column 2 tx0 + j is input column x0 + j.
    int64_t tx1 = std::min(tw, tx0 + (t1 - t)), x0 = 2 * tx0 - g.pw;
    const float *r[4];
    for (int i = 0; i < 4; ++i) {
      int64_t iy = 2 * ty - g.ph + i;
      r[i] = iy >= 0 && iy < g.h ? plane + iy * g.w : nullptr;
    }
    for (int64_t q0 = 0, n = tx1 - tx0; q0 < n;) {
      // One strip segment: contiguous tiles in V.
      int64_t q1 = std::min(n, q0 + (GemmNR - (tl + q0) % GemmNR));
      float *base = at(tl + q0) - q0;
      for (int64_t q = q0; q < q1; q += 16) {
        // Loads at columns c, c + 16, c + 2, c + 18 of each row.
        int64_t c = x0 + 2 * q;
        __mmask16 mk[4] = {
            simd512::insideMask(c, g.w), simd512::insideMask(c + 16, g.w),
            simd512::insideMask(c + 2, g.w), simd512::insideMask(c + 18, g.w)};
        // e[i][k]: row i at columns 2q + k, k = 0..3, for 16 tiles.
        __m512 e[4][4];
        for (int i = 0; i < 4; ++i) {
          if (!r[i]) {
            e[i][0] = e[i][1] = e[i][2] = e[i][3] = _mm512_setzero_ps();
            continue;
          }
          const float *s = r[i] + c;
          __m512 lo = _mm512_maskz_loadu_ps(mk[0], s),
                 hi = _mm512_maskz_loadu_ps(mk[1], s + 16);
          __m512 lo2 = _mm512_maskz_loadu_ps(mk[2], s + 2),
                 hi2 = _mm512_maskz_loadu_ps(mk[3], s + 18);
          e[i][0] = evens(lo, hi);
          e[i][1] = odds(lo, hi);
          e[i][2] = evens(lo2, hi2);
          e[i][3] = odds(lo2, hi2);
        }
        winogradInputStore(e, headMask(q1 - q), base + q, vStride);
      }
      q0 = q1;
    }
    t += tx1 - tx0;
  }
}

/// The output transform of one output channel's tiles [t0, t1): out =
/// A^T M A from M_xi at m + xi * mStride (tile t at + t - t0; the loads
/// read up to 15 floats past the last tile), then bias and activation as
/// biasActivate applies them (with a residual plane `zplane`: bias, then
/// + the residual, then tailAct), stored straight into the output plane.
/// M holds the range's tiles contiguously, so 16 of them are transformed
/// at a time whatever rows they lie on (a 7x7 output's rows hold 4): each
/// output row then takes its run of the interleaved results by a masked
/// store at a shifted address.
TM_IM2COL_AVX512
static void winogradOutput(const ConvGeom &g, const WinoTiles &wt,
                           const float *m, int64_t mStride, int64_t t0,
                           int64_t t1, float bias, float *plane,
                           const float *zplane) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5,
                                       21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28,
                                       13, 29, 14, 30, 15, 31);
  using simd512::activate;
  const __m512 b = _mm512_set1_ps(bias);
  for (int64_t q = 0, n = t1 - t0; q < n; q += 16) {
    __m512 s0[4], s1[4];
    for (int j = 0; j < 4; ++j) {
      __m512 m0 = _mm512_loadu_ps(m + j * mStride + q),
             m1 = _mm512_loadu_ps(m + (4 + j) * mStride + q),
             m2 = _mm512_loadu_ps(m + (8 + j) * mStride + q),
             m3 = _mm512_loadu_ps(m + (12 + j) * mStride + q);
      s0[j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
      s1[j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
    }
    // Output rows 2 ty + r of the tiles: interleaved, v[r][0] holds tiles
    // q .. q + 7 (columns 2tx, 2tx + 1 each), v[r][1] tiles q + 8 ..
    __m512 v[2][2];
    for (int r = 0; r < 2; ++r) {
      const __m512 *sr = r ? s1 : s0;
      __m512 y0 = _mm512_add_ps(_mm512_add_ps(sr[0], sr[1]), sr[2]),
             y1 = _mm512_sub_ps(_mm512_sub_ps(sr[1], sr[2]), sr[3]);
      if (bias != 0.0f) { // as biasActivate: a zero bias is not added
        y0 = _mm512_add_ps(y0, b);
        y1 = _mm512_add_ps(y1, b);
      }
      y0 = activate(y0, g.act);
      y1 = activate(y1, g.act);
      v[r][0] = _mm512_permutex2var_ps(y0, lo, y1);
      v[r][1] = _mm512_permutex2var_ps(y0, hi, y1);
    }
    // Each tile row the 16 tiles touch: tiles [a, e) of the range, at
    // interleaved positions [2 (a - q), ...) of v.
    int64_t end = std::min(n, q + 16);
    for (int64_t a = q; a < end;) {
      int64_t t = t0 + a, ty = t / wt.tw, tx = t % wt.tw;
      int64_t e = std::min(end, a + (wt.tw - tx));
      int64_t p = 2 * (a - q), ox = 2 * tx,
              cols = std::min(2 * (e - a), g.ow - ox);
      // Positions [p, p + cols) of the 32: lanes of v[.][0], then v[.][1].
      uint32_t bits =
          uint32_t((uint64_t(1) << (p + cols)) - (uint64_t(1) << p));
      __mmask16 mLo = __mmask16(bits), mHi = __mmask16(bits >> 16);
      for (int r = 0; r < 2 && 2 * ty + r < g.oh; ++r) {
        int64_t at = (2 * ty + r) * g.ow + ox - p; // position 0's column
        __m512 vLo = v[r][0], vHi = v[r][1];
        if (zplane) { // the residual add, then tailAct (act is None)
          vLo = activate(
              _mm512_add_ps(vLo, _mm512_maskz_loadu_ps(mLo, zplane + at)),
              g.tailAct);
          vHi = activate(
              _mm512_add_ps(vHi, _mm512_maskz_loadu_ps(mHi, zplane + at + 16)),
              g.tailAct);
        }
        _mm512_mask_storeu_ps(plane + at, mLo, vLo);
        _mm512_mask_storeu_ps(plane + at + 16, mHi, vHi);
      }
      a = e;
    }
  }
}
#else
static void winogradInput(const ConvGeom &, const WinoTiles &, const float *,
                          int64_t, int64_t, int64_t, int64_t, float *,
                          int64_t) {
  __builtin_trap(); // only where the micro-kernel (AVX-512) runs
}
static void winogradOutput(const ConvGeom &, const WinoTiles &, const float *,
                           int64_t, int64_t, int64_t, float, float *,
                           const float *) {
  __builtin_trap();
}
#endif

/// conv2d as F(2x2, 3x3): work items are ranges of the batch's tiles
/// (a range may span images, so small planes still fill the kernel's
/// 48-column strips and the transformed weights are streamed once per
/// range, not once per image); each transforms its tiles' input for
/// every channel, runs the 16 GEMMs M_xi (out channels x tiles) = U_xi
/// (out x in channels) * V_xi (in channels x tiles) on the micro-kernel,
/// and transforms M back into the output, all in per-thread buffers sized
/// for L2.
static void convWinograd(const ConvGeom &g, const float *x, const float *u,
                         const float *bias, float *out) {
  WinoTiles wt{(g.oh + 1) / 2, (g.ow + 1) / 2};
  int64_t tiles = wt.th * wt.tw, total = g.n * tiles;
  int threads = omp_get_max_threads();
  // Tiles per item: V (16 x C x tiles) and M (16 x O x tiles) within the
  // budget, at least one 48-tile strip; then more items until they
  // divide evenly over the threads, keeping 16 tiles or more each.
  constexpr int64_t BudgetBytes = 512 << 10, MinTiles = 16;
  int64_t perTile = WinoXi * (g.c + g.o) * int64_t(sizeof(float));
  int64_t maxTiles = std::max(GemmNR, BudgetBytes / perTile / GemmNR * GemmNR);
  int64_t chunks = std::max<int64_t>(1, (total + maxTiles - 1) / maxTiles);
  while (chunks % threads != 0 && total / (chunks + 1) >= MinTiles)
    ++chunks;
  // Chunk boundaries: total * i / chunks, or that rounded to a multiple
  // of 16, one vector of the micro-kernel's B strip: a GEMM over 33 tiles
  // costs as much as one over 48 (196 tiles in 6 chunks of 32-33 ran the
  // GEMMs at 65% of the rate of 32). Rounded when that lowers the
  // vectors of the busiest thread (the static schedule gives thread t a
  // contiguous run of items), which it does not when a thread's share is
  // one chunk (49 tiles over 2 threads: 24 + 25 cost 2 + 2 vectors, 32 +
  // 17 as many, with the transforms unbalanced).
  auto exactStart = [&](int64_t i) { return total * i / chunks; };
  auto roundedStart = [&](int64_t i) {
    return i >= chunks ? total
                       : std::min(total, (total * i / chunks + 8) / 16 * 16);
  };
  auto busiestVectors = [&](auto start) {
    int64_t q = chunks / threads, r = chunks % threads;
    int64_t worst = 0, item = 0;
    for (int t = 0; t < threads; ++t) {
      int64_t vectors = 0;
      for (int64_t j = 0; j < q + (t < r); ++j, ++item)
        vectors += (start(item + 1) - start(item) + 15) / 16;
      worst = std::max(worst, vectors);
    }
    return worst;
  };
  bool rounded = busiestVectors(roundedStart) < busiestVectors(exactStart);
  auto chunkStart = [&](int64_t i) {
    return rounded ? roundedStart(i) : exactStart(i);
  };
  int64_t chunkTiles = 0; // the largest chunk
  for (int64_t i = 0; i < chunks; ++i)
    chunkTiles = std::max(chunkTiles, chunkStart(i + 1) - chunkStart(i));
  int64_t strips = (chunkTiles + GemmNR - 1) / GemmNR;
  int64_t vStride = strips * GemmNR * g.c, mStride = g.o * chunkTiles;
  // (+ 16: winogradOutput's loads may read 15 floats past M.)
  int64_t perThread = WinoXi * (vStride + mStride) + 16;
  Tensor scratchT = Tensor::empty({perThread * threads});
  float *scratch = scratchT.data<float>();
  int64_t panels = (g.o + GemmMR - 1) / GemmMR;
  int64_t uStride = packedPanelFloats(1, g.o, g.c);
  // Too few items for the threads (small outputs such as 7x7, one chunk
  // of tiles): split the output channels too, in whole panels of 8; each
  // such item transforms the chunk's input again, a 1/O share of its work.
  int64_t mBlocks = 1;
  if (chunks < threads)
    mBlocks = std::clamp<int64_t>(threads / chunks, 1,
                                  std::max<int64_t>(1, panels / 2));
  int64_t items = chunks * mBlocks;

#pragma omp parallel for schedule(static) num_threads(threads) if (items > 1 && threads > 1)
  for (int64_t item = 0; item < items; ++item) {
    int64_t mb = item % mBlocks, ch = item / mBlocks;
    int64_t c0 = chunkStart(ch), c1 = chunkStart(ch + 1), nt = c1 - c0;
    int64_t p0 = panels * mb / mBlocks, p1 = panels * (mb + 1) / mBlocks;
    int64_t m0 = p0 * GemmMR, m1 = std::min(g.o, p1 * GemmMR);
    if (nt <= 0 || m0 >= m1)
      continue;
    float *v = scratch + perThread * omp_get_thread_num();
    float *m = v + WinoXi * vStride;
    // The chunk's part of one image: its tiles [t0, t1) (tile rows [ty0,
    // ty1)), which are columns [col, ...) of V and M.
    struct Part {
      int64_t img, t0, t1, col, ty0, ty1;
    };
    llvm::SmallVector<Part, 4> parts;
    for (int64_t c = c0; c < c1;) {
      int64_t img = c / tiles, t0 = c - img * tiles;
      int64_t t1 = std::min(tiles, t0 + (c1 - c));
      parts.push_back({img, t0, t1, c - c0, t0 / wt.tw, (t1 - 1) / wt.tw + 1});
      c += t1 - t0;
    }
    for (const Part &pt : parts) {
      // The input rows of the part's tile rows, and its output rows: each
      // channel prefetches the next channel's (a transform waits on memory
      // otherwise: the input comes from another op, the output is new).
      const float *xi = x + pt.img * g.c * g.h * g.w;
      int64_t inLo = std::clamp<int64_t>(2 * pt.ty0 - g.ph, 0, g.h) * g.w,
              inHi = std::clamp<int64_t>(2 * pt.ty1 - g.ph + 2, 0, g.h) * g.w;
      for (int64_t ci = 0; ci < g.c; ++ci) {
        if (ci + 1 < g.c)
          prefetchFloats(xi + (ci + 1) * g.h * g.w + inLo, inHi - inLo);
        winogradInput(g, wt, xi + ci * g.h * g.w, ci, pt.t0, pt.t1, pt.col, v,
                      vStride);
      }
    }
    // M_xi rows m0 .. m1 (out channels) at m + xi * o * nt + oc * nt.
    for (int64_t p = 0; p < WinoXi; ++p)
      gemmPackedA(u + p * uStride, panels, p0, m1 - m0, nt, g.c,
                  {v + p * vStride, g.c * GemmNR, GemmNR}, m + p * g.o * nt + m0 * nt, nt,
                  nullptr, Activation::None);
    for (const Part &pt : parts) {
      int64_t outLo = std::min(g.oh, 2 * pt.ty0) * g.ow,
              outHi = std::min(g.oh, 2 * pt.ty1) * g.ow;
      for (int64_t oc = m0; oc < m1; ++oc) {
        int64_t at = g.outAt(pt.img, oc), rat = g.resAt(pt.img, oc);
        if (oc + 1 < m1) {
          prefetchFloats<true>(out + at + g.spatial() + outLo, outHi - outLo);
          if (g.residual)
            prefetchFloats(g.residual + rat + g.spatial() + outLo,
                           outHi - outLo);
        }
        winogradOutput(g, wt, m + oc * nt + pt.col, g.o * nt, pt.t0, pt.t1,
                       bias ? bias[oc] : 0.0f, out + at,
                       g.residual ? g.residual + rat : nullptr);
      }
    }
  }
}

namespace {
/// The polyphase layout of one depthwise plane: the zero-padded input cut
/// by stride phase into sh * sw sub-planes, S_ab[r][x] = padded[r sh + a]
/// [x sw + b], each hs x ws floats plus slack. Tap (ki, kj) of output
/// (y, x) reads S_ab[y + qi][x + qj] with ki dh = qi sh + a and
/// kj dw = qj sw + b: every tap is a stride-1 read at a fixed offset from
/// y ws + x, so the whole output plane is one flat run of oh * ws
/// positions (the ws - ow columns past each row are computed, then
/// dropped), whatever the stride, dilation and kernel.
struct DwLayout {
  static constexpr int64_t Block = 128; ///< positions summed in registers
  int64_t hs, ws, subFloats, padRow;
  llvm::SmallVector<int64_t, 49> off; ///< per tap, into the sub-planes
  /// Sizes saturate at 2^62 (floats() then refuses them), so hostile
  /// strides, dilations and paddings cannot wrap them around.
  static int64_t sat(__int128 v) {
    return v > (__int128(1) << 62) ? int64_t(1) << 62 : int64_t(v);
  }
  explicit DwLayout(const ConvGeom &g)
      : hs(sat(g.oh + __int128(g.kh - 1) * g.dh / g.sh)),
        ws(sat(g.ow + __int128(g.kw - 1) * g.dw / g.sw)),
        // Slack: a block reads up to Block - 1 positions past the plane's
        // last, plus the largest column offset (< ws). Only dropped
        // positions read it; it is zeroed once per call, so it holds no
        // NaN or denormal garbage.
        subFloats(sat(__int128(hs) * ws + ws + Block)),
        // One padded input row, with room for whole 16-float vectors.
        padRow(sat((__int128(ws) + 16) * g.sw + 32)) {
    if (subFloats >= (int64_t(1) << 62) || padRow >= (int64_t(1) << 62))
      return; // floats() refuses the layout; no tap offsets needed
    for (int64_t ki = 0; ki < g.kh; ++ki)
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        int64_t vy = ki * g.dh, vx = kj * g.dw;
        off.push_back(((vy % g.sh) * g.sw + vx % g.sw) * subFloats +
                      vy / g.sh * ws + vx / g.sw);
      }
  }
  int64_t subTotal(const ConvGeom &g) const { return g.sh * g.sw * subFloats; }
  /// Scratch of one plane: the sub-planes, the flat output, a padded row;
  /// nullopt when that does not fit in int64 (strides and paddings near
  /// 2^31 each: the sub-planes cover the padded plane).
  std::optional<int64_t> floats(const ConvGeom &g) const {
    __int128 n = __int128(g.sh) * g.sw * subFloats + __int128(g.oh) * ws + Block + padRow;
    if (off.empty() || n > (__int128(1) << 62))
      return std::nullopt;
    return int64_t(n);
  }
  /// Zeros the sub-planes' slack of one plane's scratch (rows are
  /// rewritten per plane; the slack only receives row data that a whole
  /// vector carried past a sub-plane's last row).
  void clearSlack(const ConvGeom &g, float *scratch) const {
    for (int64_t p = 0; p < g.sh * g.sw; ++p)
      std::fill(scratch + p * subFloats + hs * ws, scratch + (p + 1) * subFloats, 0.0f);
  }
};
} // namespace

/// One plane of a depthwise convolution (see DwLayout): the plane's
/// polyphase copy, then the flat output in blocks of 128 positions kept
/// in registers across all taps, each summed from the bias in (ki, kj)
/// order, then cut to ow columns with the activation. Compiled for
/// AVX-512, AVX2 and baseline x86-64, chosen at load time (the library
/// itself is built without -march).
TM_VECTOR_CLONES
static void depthwisePlane(const ConvGeom &g, const DwLayout &L,
                           const float *plane, const float *wk, float b,
                           float *dst, float *scratch) {
  // GCC/Clang vector extensions: one zmm in the AVX-512 clone, two ymm in
  // the AVX2 one.
  typedef float V16 __attribute__((vector_size(64)));
  typedef float V16u __attribute__((vector_size(64), aligned(4), may_alias));
  float *flat = scratch + L.subTotal(g);
  float *pad = flat + g.oh * L.ws + DwLayout::Block;
  int64_t padLen = L.ws * g.sw; // padded columns any phase reads
  for (int64_t rr = 0; rr < L.hs * g.sh; ++rr) {
    int64_t a = rr % g.sh, r = rr / g.sh, iy = rr - g.ph;
    // Padded row rr: zeros outside the input.
    int64_t x0 = std::clamp<int64_t>(g.pw, 0, padLen);
    int64_t x1 = std::clamp<int64_t>(g.pw + g.w, x0, padLen);
    bool inside = iy >= 0 && iy < g.h;
    if (g.sw == 1) { // the sub-plane row is the padded row
      float *row = scratch + a * L.subFloats + r * L.ws;
      if (!inside) {
        std::fill(row, row + L.ws, 0.0f);
        continue;
      }
      std::fill(row, row + x0, 0.0f);
      std::copy(plane + iy * g.w + (x0 - g.pw), plane + iy * g.w + (x1 - g.pw), row + x0);
      std::fill(row + x1, row + L.ws, 0.0f);
      continue;
    }
    if (!inside) {
      for (int64_t c = 0; c < g.sw; ++c) {
        float *row = scratch + (a * g.sw + c) * L.subFloats + r * L.ws;
        std::fill(row, row + L.ws, 0.0f);
      }
      continue;
    }
    std::fill(pad, pad + x0, 0.0f);
    std::copy(plane + iy * g.w + (x0 - g.pw), plane + iy * g.w + (x1 - g.pw), pad + x0);
    std::fill(pad + x1, pad + L.padRow, 0.0f);
    if (g.sw == 2) {
      // Even and odd columns, 16 at a time by shuffles. The last vector
      // may run past the row: into the next row, written after this one,
      // or into the slack, which only discarded positions read.
      // (__builtin_shufflevector: GCC 12 and clang both have it.)
      float *e = scratch + (a * 2) * L.subFloats + r * L.ws;
      float *o = e + L.subFloats;
      for (int64_t x = 0; x < L.ws; x += 16) {
        V16 lo = *reinterpret_cast<const V16u *>(pad + 2 * x);
        V16 hi = *reinterpret_cast<const V16u *>(pad + 2 * x + 16);
        *reinterpret_cast<V16u *>(e + x) = __builtin_shufflevector(
            lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        *reinterpret_cast<V16u *>(o + x) = __builtin_shufflevector(
            lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
      }
      continue;
    }
    for (int64_t c = 0; c < g.sw; ++c) {
      float *row = scratch + (a * g.sw + c) * L.subFloats + r * L.ws;
      for (int64_t x = 0; x < L.ws; ++x)
        row[x] = pad[x * g.sw + c];
    }
  }
  // Eight independent accumulators: each tap's FMA waits for the
  // previous tap's, so fewer would leave the FMA units idle.
  constexpr int V = DwLayout::Block / 16;
  int64_t n = g.oh * L.ws;
  for (int64_t i0 = 0; i0 < n; i0 += DwLayout::Block) {
    V16 acc[V];
    for (int v = 0; v < V; ++v)
      acc[v] = V16{} + b;
    for (size_t t = 0; t < L.off.size(); ++t) {
      V16 wv = V16{} + wk[t];
      const V16u *s = reinterpret_cast<const V16u *>(scratch + L.off[t] + i0);
      for (int v = 0; v < V; ++v)
        acc[v] += wv * s[v];
    }
    V16u *f = reinterpret_cast<V16u *>(flat + i0);
    for (int v = 0; v < V; ++v)
      f[v] = acc[v];
  }
  // The activation as a clamp, branch-free so the row loops vectorise.
  constexpr float Inf = std::numeric_limits<float>::infinity();
  float lo = g.act == Activation::None ? -Inf : 0.0f;
  float hi = g.act == Activation::Relu6 ? 6.0f : Inf;
  // Whole vectors, which may run into the following output rows (written
  // after this one), never past the plane's end.
  int64_t planeEnd = g.oh * g.ow;
  for (int64_t y = 0; y < g.oh; ++y) {
    const float *src = flat + y * L.ws;
    float *d = dst + y * g.ow;
    int64_t x = 0;
    for (; x < g.ow && y * g.ow + x + 16 <= planeEnd; x += 16) {
      V16 v = *reinterpret_cast<const V16u *>(src + x);
      v = v < lo ? lo : v; // as std::max(v, lo): NaN stays NaN
      v = v > hi ? hi : v;
      *reinterpret_cast<V16u *>(d + x) = v;
    }
    for (; x < g.ow; ++x)
      d[x] = std::min(std::max(src[x], lo), hi);
  }
}

#if TM_HAVE_SIMD512
/// One plane of an undilated K x K depthwise convolution with strides SH
/// (vertical) and SW (horizontal) of 1 or 2, in registers. R output rows
/// at a time, 16 columns at a time: each input row those outputs read is
/// loaded once and its taps added to every output row that reads it, so
/// the R sums are independent chains (one chain would wait on each FMA's
/// latency). Tap kj of 16 outputs is an unaligned load of the row at
/// column x0 + kj (SW = 1), or the even or odd lanes of two loads at x0 +
/// kj rounded down to even (SW = 2): loads issue on more ports than lane
/// shifts. Loads are masked to the row, so columns outside it read as
/// zeros, as depthwisePlane pads. Each output sums its taps from the bias
/// in (ki, kj) order; rows outside the plane count as zeros, as in
/// depthwisePlane. The loops over rows and taps have constant trips and
/// unroll fully, so every tap's row and weight is a constant of the code.
/// Each block prefetches the input rows the next block adds: without it
/// the kernel waits on memory at half the bandwidth of a plain stream.
template <int K, int SH, int SW>
TM_AVX512F static void depthwisePlaneRows(const ConvGeom &g, const float *plane,
                                          const float *wk, float b,
                                          float *dst) {
  using namespace detail::simd512;
  constexpr int R = SH == 1 ? 7 : 4;
  constexpr int InRows = (R - 1) * SH + K; // input rows of R output rows
  // Vectors loaded per input row: one per tap, or two per pair of taps.
  constexpr int Loads = SW == 1 ? K : 2 * ((K + 1) / 2);
  constexpr float Inf = std::numeric_limits<float>::infinity();
  const __m512 lo = _mm512_set1_ps(g.act == Activation::None ? -Inf : 0.0f);
  const __m512 hi = _mm512_set1_ps(g.act == Activation::Relu6 ? 6.0f : Inf);
  __m512 wv[K * K];
  for (int t = 0; t < K * K; ++t)
    wv[t] = _mm512_set1_ps(wk[t]);
  for (int64_t oy0 = 0; oy0 < g.oh; oy0 += R) {
    const float *rows[InRows];
    for (int j = 0; j < InRows; ++j) {
      int64_t iy = oy0 * SH - g.ph + j;
      rows[j] = iy >= 0 && iy < g.h ? plane + iy * g.w : nullptr;
    }
    for (int64_t ox = 0; ox < g.ow; ox += 16) {
      int64_t x0 = ox * SW - g.pw;
      // Load l starts at column x0 + l (SW = 1), or x0 + 2 (l / 2) plus
      // 16 for odd l (SW = 2).
      __mmask16 m[Loads];
      for (int l = 0; l < Loads; ++l)
        m[l] = insideMask(x0 + (SW == 1 ? l : 2 * (l / 2) + 16 * (l % 2)), g.w);
      __m512 acc[R];
      for (int r = 0; r < R; ++r)
        acc[r] = _mm512_set1_ps(b);
      // Prefetch the rows the next R output rows add, at these columns;
      // past the plane's last row they are the next plane's first rows
      // when planes are contiguous (a prefetch never faults).
      for (int j = InRows; j < InRows + R * SH; ++j) {
        // Unsigned arithmetic: the address may be any, never overflows.
        uintptr_t at =
            reinterpret_cast<uintptr_t>(plane) +
            ((uintptr_t(oy0) * SH - uintptr_t(g.ph) + j) * uintptr_t(g.w) +
             uintptr_t(std::max<int64_t>(x0, 0))) *
                sizeof(float);
        prefetchBytes(at, 64 * SW);
      }
#pragma GCC unroll 32
      for (int j = 0; j < InRows; ++j) {
        const float *row = rows[j];
        if (!row)
          continue;
        __m512 tap[K];
        if constexpr (SW == 1) {
#pragma GCC unroll 8
          for (int kj = 0; kj < K; ++kj)
            tap[kj] = _mm512_maskz_loadu_ps(m[kj], row + x0 + kj);
        } else {
#pragma GCC unroll 8
          for (int kj = 0; kj < K; kj += 2) {
            const float *p = row + x0 + kj;
            __m512 v0 = _mm512_maskz_loadu_ps(m[kj], p),
                   v1 = _mm512_maskz_loadu_ps(m[kj + 1], p + 16);
            tap[kj] = evens(v0, v1);
            if (kj + 1 < K)
              tap[kj + 1] = odds(v0, v1);
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          int ki = j - r * SH;
          if (ki < 0 || ki >= K)
            continue;
#pragma GCC unroll 8
          for (int kj = 0; kj < K; ++kj)
            acc[r] = _mm512_fmadd_ps(wv[ki * K + kj], tap[kj], acc[r]);
        }
      }
      for (int r = 0; r < R && oy0 + r < g.oh; ++r) {
        // The activation as depthwisePlane's clamp: NaN stays NaN.
        __m512 y = _mm512_min_ps(hi, _mm512_max_ps(lo, acc[r]));
        _mm512_mask_storeu_ps(dst + (oy0 + r) * g.ow + ox, headMask(g.ow - ox),
                              y);
      }
    }
  }
}
#endif

/// The register kernel for `g`'s depthwise planes, or null.
using DwRowsFn = void (*)(const ConvGeom &, const float *, const float *, float,
                          float *);
#if TM_HAVE_SIMD512
template <int K> static DwRowsFn depthwiseRowsKernelK(int64_t sh, int64_t sw) {
  if (sh == 1)
    return sw == 1 ? &depthwisePlaneRows<K, 1, 1>
                   : &depthwisePlaneRows<K, 1, 2>;
  return sw == 1 ? &depthwisePlaneRows<K, 2, 1> : &depthwisePlaneRows<K, 2, 2>;
}
#endif
static DwRowsFn depthwiseRowsKernel(const ConvGeom &g) {
#if TM_HAVE_SIMD512
  if (!detail::simd512::available() || g.kh != g.kw || g.dh != 1 || g.dw != 1 ||
      (g.sh != 1 && g.sh != 2) || (g.sw != 1 && g.sw != 2))
    return nullptr;
  switch (g.kh) {
  case 3:
    return depthwiseRowsKernelK<3>(g.sh, g.sw);
  case 5:
    return depthwiseRowsKernelK<5>(g.sh, g.sw);
  case 7:
    return depthwiseRowsKernelK<7>(g.sh, g.sw);
  default:
    return nullptr;
  }
#else
  (void)g;
  return nullptr;
#endif
}

/// `g` as the depthwise kernels run it: with one output row (column) the
/// stride along it does not matter, so it is taken as 1 (which keeps a
/// huge stride from making as many sub-planes).
static ConvGeom depthwiseGeom(ConvGeom g) {
  if (g.oh == 1)
    g.sh = 1;
  if (g.ow == 1)
    g.sw = 1;
  return g;
}

/// Direct depthwise convolution: output channel oc reads input channel
/// oc / og; planes are split over threads.
static void convDepthwise(const ConvGeom &g0, const float *x, const float *w,
                          const float *bias, float *out) {
  ConvGeom g = depthwiseGeom(g0);
  int64_t planes = g.n * g.o;
  int64_t khw = g.kh * g.kw;
  int64_t grain =
      std::max<int64_t>(1, 4096 / std::max<int64_t>(1, g.spatial() * khw / 16));
  if (DwRowsFn rows = depthwiseRowsKernel(g)) {
    parallelFor(planes, grain, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        int64_t n = p / g.o, oc = p % g.o, ic = oc / g.og;
        rows(g, x + (n * g.c + ic) * g.h * g.w, w + oc * khw,
             bias ? bias[oc] : 0.0f, out + g.outAt(n, oc));
      }
    });
    return;
  }
  DwLayout layout(g);
  std::optional<int64_t> floats = layout.floats(g);
  if (!floats)
    raise("conv2d: a depthwise convolution of input ({}, {}, {}, {}) with stride {} and padding "
          "{} needs more scratch than memory can hold",
          g.n, g.c, g.h, g.w, Int2(g0.sh, g0.sw).str(), Int2(g.ph, g.pw).str());
  int64_t planeFloats = *floats;
  // One scratch plane per part (allocated outside the parallel region).
  int parts = parallelParts(planes, grain);
  Tensor scratch = Tensor::empty({int64_t(parts), planeFloats});
  float *pad = scratch.data<float>();
  parallelForParts(planes, grain, [&](int64_t p0, int64_t p1, int part) {
    float *mine = pad + part * planeFloats;
    layout.clearSlack(g, mine);
    for (int64_t p = p0; p < p1; ++p) {
      int64_t n = p / g.o, oc = p % g.o, ic = oc / g.og;
      depthwisePlane(g, layout, x + (n * g.c + ic) * g.h * g.w, w + oc * khw,
                     bias ? bias[oc] : 0.0f, out + g.outAt(n, oc), mine);
    }
  });
}

/// Throws when `pk` was not packed from a weight of `w`'s geometry.
static void checkPacked(const ConvGeom &g, const PackedConvWeight &pk,
                        const Tensor &w) {
  if (pk.outChannels != g.o || pk.groups != g.groups || pk.depth != g.k())
    raise("conv: the packed weight ({} output channels, {} groups, depth "
          "{}) was not packed from weight {} with groups {}",
          pk.outChannels, pk.groups, pk.depth, shapeStr(w.shape()), g.groups);
}

//===-- Channels-last depthwise convolution -------------------------------===//

/// Whether depthwiseChannelsLast computes conv `g`: a depthwise
/// convolution with one output channel per input channel whose planes the
/// register kernel (depthwisePlaneRows) computes in (N, C, H, W) order.
/// Both then sum the same taps in the same order with the same FMAs, so a
/// layout never changes a result.
static bool channelsLastDepthwiseApplies(const ConvGeom &g) {
  return g.isDepthwise() && g.og == 1 &&
         depthwiseRowsKernel(depthwiseGeom(g)) != nullptr;
}

#if TM_HAVE_SIMD512
/// Output pixels of one register block of the channels-last kernel.
constexpr int DwNhwcPixels = 8;

/// Output pixels ox0 .. ox0 + 7 of output row `oy`, channels c .. c + 15
/// (the lanes of `m`), of a K x K depthwise convolution with horizontal
/// stride SW on one channels-last image: x is (H, W, C), y (OH, OW, C),
/// `taps` the weight as [K * K][C]; the first `np` pixels are stored. Each
/// input pixel of a row is loaded once and its taps added to every output
/// that reads it, in order of columns, so each output sums its taps from
/// the bias in (ki, kj) order, one FMA each; taps left or right of the
/// input row are FMAs of zero and rows above or below are skipped, as
/// depthwisePlaneRows sums them.
template <int K, int SW>
TM_AVX512F static inline void
depthwiseNhwcBlock(const ConvGeom &g, const float *x, const float *taps,
                   __m512 bias, int64_t c, __mmask16 m, int64_t oy, int64_t ox0,
                   int64_t np, float *y, __m512 lo, __m512 hi) {
  constexpr int P = DwNhwcPixels;
  constexpr int Span = (P - 1) * SW + K; // input columns of P outputs
  const __m512 zero = _mm512_setzero_ps();
  __m512 acc[P];
  for (int p = 0; p < P; ++p)
    acc[p] = bias;
  int64_t ix0 = ox0 * SW - g.pw;
  for (int ki = 0; ki < K; ++ki) {
    int64_t iy = oy * g.sh - g.ph + ki;
    if (iy < 0 || iy >= g.h)
      continue;
    const float *row = x + iy * g.w * g.c + c;
    __m512 wv[K];
#pragma GCC unroll 8
    for (int kj = 0; kj < K; ++kj)
      wv[kj] = _mm512_maskz_loadu_ps(m, taps + (ki * K + kj) * g.c + c);
#pragma GCC unroll 32
    for (int j = 0; j < Span; ++j) {
      int64_t ix = ix0 + j;
      __m512 xv =
          ix >= 0 && ix < g.w ? _mm512_maskz_loadu_ps(m, row + ix * g.c) : zero;
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        int kj = j - p * SW;
        if (kj >= 0 && kj < K)
          acc[p] = _mm512_fmadd_ps(wv[kj], xv, acc[p]);
      }
    }
  }
  // The activation as depthwisePlaneRows' clamp: NaN stays NaN.
  for (int p = 0; p < P && p < np; ++p)
    _mm512_mask_storeu_ps(y + (oy * g.ow + ox0 + p) * g.c + c, m,
                          _mm512_min_ps(hi, _mm512_max_ps(lo, acc[p])));
}

/// Work items [i0, i1) of depthwiseChannelsLast: item i is output row
/// (i / chunks) % oh of image i / (oh * chunks), channels of chunk
/// i % chunks (64 each).
template <int K, int SW>
TM_AVX512F static void depthwiseNhwcItems(const ConvGeom &g, const float *x,
                                          const float *taps, const float *bias,
                                          float *y, int64_t chunks, int64_t i0,
                                          int64_t i1) {
  using namespace detail::simd512;
  constexpr float Inf = std::numeric_limits<float>::infinity();
  const __m512 lo = _mm512_set1_ps(g.act == Activation::None ? -Inf : 0.0f);
  const __m512 hi = _mm512_set1_ps(g.act == Activation::Relu6 ? 6.0f : Inf);
  for (int64_t i = i0; i < i1; ++i) {
    int64_t img = i / (g.oh * chunks), oy = i / chunks % g.oh;
    int64_t c0 = i % chunks * 64, c1 = std::min(g.c, c0 + 64);
    const float *xi = x + img * g.h * g.w * g.c;
    float *yi = y + img * g.oh * g.ow * g.c;
    for (int64_t c = c0; c < c1; c += 16) {
      __mmask16 m = headMask(c1 - c);
      __m512 b =
          bias ? _mm512_maskz_loadu_ps(m, bias + c) : _mm512_setzero_ps();
      for (int64_t ox = 0; ox < g.ow; ox += DwNhwcPixels)
        depthwiseNhwcBlock<K, SW>(g, xi, taps, b, c, m, oy, ox,
                                  std::min<int64_t>(DwNhwcPixels, g.ow - ox),
                                  yi, lo, hi);
    }
  }
}

using DwNhwcFn = void (*)(const ConvGeom &, const float *, const float *,
                          const float *, float *, int64_t, int64_t, int64_t);
template <int K> static DwNhwcFn depthwiseNhwcKernelK(int64_t sw) {
  return sw == 1 ? &depthwiseNhwcItems<K, 1> : &depthwiseNhwcItems<K, 2>;
}
/// The channels-last kernel of `g` (one that channelsLastDepthwiseApplies).
static DwNhwcFn depthwiseNhwcKernel(const ConvGeom &g) {
  switch (g.kh) {
  case 3:
    return depthwiseNhwcKernelK<3>(g.sw);
  case 5:
    return depthwiseNhwcKernelK<5>(g.sw);
  default:
    return depthwiseNhwcKernelK<7>(g.sw);
  }
}
#endif

/// conv2d of `g` on a channels-last input (isChannelsLast): a channels-last
/// result computed without transposing either, bit for bit the (N, C, H, W)
/// kernel's; undefined (nothing computed) where it does not apply
/// (channelsLastDepthwiseApplies, an AVX-512 CPU).
static Tensor depthwiseChannelsLast(const ConvGeom &g0, const Tensor &x,
                                    const Tensor &w, const Tensor &bias) {
#if TM_HAVE_SIMD512
  if (!isChannelsLast(x) || !channelsLastDepthwiseApplies(g0))
    return Tensor();
  ConvGeom g = depthwiseGeom(g0);
  Tensor y = Tensor::empty({g.n, g.oh, g.ow, g.o});
  if (y.numel() == 0)
    return y.permuted(ChannelsLastToNchw);
  const float *taps;
  Tensor owned;
  if (const PackedConvWeight *pk = g.packed) {
    checkPacked(g, *pk, w);
    taps = pk->depthwiseTaps().data();
  } else {
    owned = Tensor::empty({g.kh * g.kw * g.o});
    packDepthwiseTaps(w.contiguous().data<float>(), g.o, g.kh * g.kw,
                      owned.data<float>());
    taps = owned.data<float>();
  }
  const float *xs = static_cast<const float *>(x.viewData());
  const float *pb = bias.defined() ? bias.data<float>() : nullptr;
  float *ys = y.data<float>();
  int64_t chunks = (g.c + 63) / 64, items = g.n * g.oh * chunks;
  int64_t perItem = g.ow * std::min<int64_t>(g.c, 64) * g.kh * g.kw;
  DwNhwcFn kernel = depthwiseNhwcKernel(g);
  parallelFor(items,
              std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(perItem, 1)),
              [&](int64_t i0, int64_t i1) {
                kernel(g, xs, taps, pb, ys, chunks, i0, i1);
              });
  return y.permuted(ChannelsLastToNchw);
#else
  (void)g0, (void)x, (void)w, (void)bias;
  return Tensor();
#endif
}

/// The im2col panels of conv `g`'s weight `w`: the packed weight's, or
/// packed for this call into `owned` (on the calling thread, from the
/// run's arena).
static const float *panelsOf(const ConvGeom &g, const Tensor &w,
                             Tensor &owned) {
  if (const PackedConvWeight *pk = g.packed) {
    checkPacked(g, *pk, w);
    return pk->panels().data();
  }
  owned = Tensor::empty({packedPanelFloats(g.groups, g.og, g.k())});
  packPanels(w.data<float>(), g.groups, g.og, g.k(), owned.data<float>());
  return owned.data<float>();
}

/// The convolution into `outT`: contiguous, or images g.outImage apart.
static void runConv(const ConvGeom &g, const Tensor &x, const Tensor &w,
                    const Tensor &bias, Tensor &outT) {
  if (outT.numel() == 0)
    return;
  float *out = static_cast<float *>(outT.viewData());
  const float *pb = bias.defined() ? bias.data<float>() : nullptr;
  if (g.isDepthwise()) {
    convDepthwise(g, x.data<float>(), w.data<float>(), pb, out);
    residualAll(g, out);
    return;
  }
  // The one GEMM dispatch: the micro-kernel wherever the CPU has it,
  // unless a path is forced.
  if (winogradApplies(g) && winogradPays(g)) {
    if (const PackedConvWeight *pk = g.packed) {
      checkPacked(g, *pk, w);
      convWinograd(g, x.data<float>(), pk->winograd().data(), pb, out);
      return;
    }
    PackedConvWeight perCall(w, 1);
    convWinograd(g, x.data<float>(), perCall.winograd().data(), pb, out);
    return;
  }
  if (g.gemm != ConvGemm::Blas && gemmMicroKernelAvailable()) {
    Tensor owned;
    const float *panels = panelsOf(g, w, owned);
    if (subsampledPointwise(g)) {
      ConvGeom pg = g;
      Tensor xs = subsample(pg, x.data<float>());
      assert(pg.isPointwise());
      convMicro(pg, xs.data<float>(), panels, pb, out);
      return;
    }
    convMicro(g, x.data<float>(), panels, pb, out);
    return;
  }
  convBlas(g, x.data<float>(), w.data<float>(), pb, out);
  residualAll(g, out);
}

/// The checked geometry of conv2d(input, weight, bias, p).
static ConvGeom conv2dGeom(const Tensor &input, const Tensor &weight,
                           const Tensor &bias, const Conv2dParams &p) {
  ConvGeom g = checkConv({"conv2d", "(N, C, H, W)",
                          "(out_channels, in_channels / groups, kh, kw)", 4},
                         input, weight, bias, p.stride, p.padding,
                         p.paddingEnd.value_or(p.padding), p.dilation, p.groups,
                         p.activation);
  g.packed = p.packed;
  g.gemm = p.gemm;
  return g;
}

/// conv2dMaxPool's fused path; undefined (nothing computed) where it does
/// not apply.
static Tensor conv2dMaxPoolFused(const Tensor &input, const Tensor &weight,
                                 const Tensor &bias, const Conv2dParams &p,
                                 const WindowNd &pool) {
  if (p.residual.defined() || p.into.defined() || p.gemm == ConvGemm::Blas ||
      !gemmMicroKernelAvailable() || pool.kernel.size() != 2 ||
      pool.stride.size() != 2 || pool.padBegin.size() != 2 ||
      pool.padEnd.size() != 2 || pool.dilation.size() != 2)
    return Tensor();
  for (int i = 0; i < 2; ++i)
    if (pool.kernel[i] < 1 || pool.stride[i] < 1 || pool.dilation[i] < 1 ||
        pool.padBegin[i] < 0 || pool.padEnd[i] < 0)
      return Tensor();
  if (input.dtype() != DType::Float32 || weight.dtype() != DType::Float32 ||
      input.rank() != 4 || weight.rank() != 4)
    return Tensor();
  ConvGeom g = conv2dGeom(input, weight, bias, p);
  if (g.isDepthwise() || g.groups != 1 || g.k() == 0 ||
      (winogradApplies(g) && winogradPays(g)))
    return Tensor();
  int64_t oh =
      poolOutputSize(g.oh, pool.kernel[0], pool.stride[0], pool.padBegin[0],
                     pool.padEnd[0], pool.dilation[0], pool.ceilMode);
  int64_t ow =
      poolOutputSize(g.ow, pool.kernel[1], pool.stride[1], pool.padBegin[1],
                     pool.padEnd[1], pool.dilation[1], pool.ceilMode);
  if (oh <= 0 || ow <= 0 || g.n == 0 || g.o == 0)
    return Tensor();
  detail::MaxPoolRows pr(pool, g.oh, g.ow, oh, ow);
  Tensor out = Tensor::empty({g.n, g.o, oh, ow});
  // (The runtime's strided copy: a view's transposing copy is tiled.)
  Tensor x = rt::contiguous(input), w = weight.contiguous();
  Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  const float *pb = b.defined() ? b.data<float>() : nullptr;
  Tensor owned;
  convMicroPooled(g, x.data<float>(), panelsOf(g, w, owned), pb, pr,
                  out.data<float>());
  return out;
}

Tensor conv2dMaxPool(const Tensor &input, const Tensor &weight,
                     const Tensor &bias, const Conv2dParams &p,
                     const WindowNd &pool, bool *fused) {
  Tensor y = conv2dMaxPoolFused(input, weight, bias, p, pool);
  if (fused)
    *fused = y.defined();
  return y.defined() ? y : maxPoolNd(conv2d(input, weight, bias, p), pool);
}

/// The output of conv `g` with p's residual and `into` (checked; an
/// `into` that does not fit is ignored), computed by run(g, out) with
/// g.residual and g.outImage set.
template <typename Run>
static Tensor convOutput(ConvGeom g, const Conv2dParams &p, Run &&run) {
  Shape outShape{g.n, g.o, g.oh, g.ow};
  Tensor residual;
  if (p.residual.defined()) {
    requireFloat32("conv2d", p.residual, "residual");
    if (p.residual.shape() != llvm::ArrayRef<int64_t>(outShape))
      raise("conv2d: residual {} must have the output's shape {}",
            shapeStr(p.residual.shape()), shapeStr(outShape));
    residual = p.residual.contiguous();
    g.residual = residual.data<float>();
    g.tailAct = g.act;
    g.act = Activation::None;
  }
  // `into` may also be a channel slice of a larger tensor (a concat's
  // output at batch > 1): each image contiguous, the images further apart.
  const Tensor &into = p.into;
  bool fits =
      into.defined() && into.dtype() == DType::Float32 &&
      into.shape() == llvm::ArrayRef<int64_t>(outShape) &&
      (into.isContiguous() ||
       (into.strides()[3] == 1 && into.strides()[2] == g.ow &&
        into.strides()[1] == g.spatial() && into.strides()[0] >= g.outImage));
  if (!fits) {
    Tensor out = Tensor::empty(outShape, DType::Float32);
    run(g, out);
    return out;
  }
  if (!into.isContiguous())
    g.outImage = into.strides()[0];
  Tensor out = into;
  run(g, out);
  return out;
}

Tensor conv2d(const Tensor &input, const Tensor &weight, const Tensor &bias,
              const Conv2dParams &p) {
  ConvGeom g = conv2dGeom(input, weight, bias, p);
  if (!input.isContiguous()) {
    // A channels-last input keeps its layout where the depthwise kernel
    // reads it; other views are read as a dense copy.
    if (!p.residual.defined() && !p.into.defined())
      if (Tensor y = depthwiseChannelsLast(g, input, weight, bias); y.defined())
        return y;
    return conv2d(rt::contiguous(input), weight, bias, p);
  }
  return convOutput(g, p, [&](const ConvGeom &gg, Tensor &out) {
    runConv(gg, input, weight, bias, out);
  });
}

Tensor detail::conv2dNormedInput(const ConvInputNorm &in, const Tensor &w,
                                 const Tensor &bias, const Conv2dParams &p) {
  const ChannelAffine &a = *in.affine;
  // The in-kernel path's conditions. Anything else, every error included,
  // goes through the built input and conv2d.
  constexpr int64_t IntMax = std::numeric_limits<int>::max();
  bool fast = gemmMicroKernelAvailable() && p.gemm != ConvGemm::Blas &&
              !in.parts.empty();
  int64_t n = 0, c = 0, h = 0, wd = 0;
  for (size_t i = 0; fast && i < in.parts.size(); ++i) {
    const Tensor &t = in.parts[i];
    fast = t.defined() && t.dtype() == DType::Float32 && t.rank() == 4 &&
           t.isContiguous();
    if (!fast)
      break;
    if (i == 0) {
      n = t.dim(0);
      h = t.dim(2);
      wd = t.dim(3);
    }
    fast = t.dim(0) == n && t.dim(2) == h && t.dim(3) == wd;
    c += t.dim(1);
  }
  Int2 end = p.paddingEnd.value_or(p.padding);
  fast =
      fast && n > 0 && c > 0 && h > 0 && wd > 0 && c <= IntMax &&
      h * wd <= IntMax && int64_t(a.scale.size()) == c &&
      int64_t(a.shift.size()) == c && w.defined() &&
      w.dtype() == DType::Float32 && w.rank() == 4 && w.isContiguous() &&
      w.dim(0) > 0 && w.dim(1) == c && w.dim(2) == 1 && w.dim(3) == 1 &&
      p.groups == 1 && p.stride == Int2(1) && p.padding == Int2(0) &&
      end == Int2(0) && p.dilation.h >= 1 && p.dilation.w >= 1 &&
      (!bias.defined() || (bias.dtype() == DType::Float32 && bias.rank() == 1 &&
                           bias.numel() == w.dim(0) && bias.isContiguous()));
  if (!fast)
    return conv2d(scaleShiftChannels(in.parts, a, in.act), w, bias, p);
  NormedChannels nm;
  for (const Tensor &t : in.parts)
    for (int64_t j = 0; j < t.dim(1); ++j) {
      nm.base.push_back(t.data<float>() + j * h * wd);
      nm.imageStride.push_back(t.dim(1) * h * wd);
    }
  nm.scale = a.scale.data();
  nm.shift = a.shift.data();
  nm.act = in.act;
  ConvGeom g;
  g.n = n;
  g.c = g.cg = c;
  g.h = g.oh = h;
  g.w = g.ow = wd;
  g.o = g.og = w.dim(0);
  g.kh = g.kw = 1;
  g.sh = g.sw = 1;
  g.ph = g.pw = 0;
  g.dh = p.dilation.h;
  g.dw = p.dilation.w;
  g.groups = 1;
  g.act = p.activation;
  g.packed = p.packed;
  g.gemm = p.gemm;
  g.outImage = g.o * g.spatial();
  g.norm = &nm;
  return convOutput(g, p, [&](const ConvGeom &gg, Tensor &out) {
    Tensor owned;
    const float *panels = panelsOf(gg, w, owned);
    convMicro(gg, nullptr, panels,
              bias.defined() ? bias.data<float>() : nullptr,
              static_cast<float *>(out.viewData()));
  });
}

Tensor conv1d(const Tensor &input, const Tensor &weight, const Tensor &bias,
              const Conv1dParams &p) {
  ConvGeom g = checkConv(
      {"conv1d", "(N, C, L)", "(out_channels, in_channels / groups, k)", 3},
      input, weight, bias, Int2(1, p.stride), Int2(0, p.padding),
      Int2(0, p.paddingEnd.value_or(p.padding)), Int2(1, p.dilation), p.groups,
      p.activation);
  g.packed = p.packed;
  g.gemm = p.gemm;
  Tensor out = Tensor::empty({g.n, g.o, g.ow}, DType::Float32);
  runConv(g, input, weight, bias, out);
  return out;
}

//===----------------------------------------------------------------------===//
// Transposed convolution
//===----------------------------------------------------------------------===//

Tensor convTranspose2d(const Tensor &x, const Tensor &w, const Tensor &bias,
                       const ConvTranspose2dParams &p) {
  llvm::StringRef op = "conv_transpose2d";
  requireFloat32(op, x, "input");
  requireFloat32(op, w, "weight");
  requireRank(op, x, "input", 4, "(N, C, H, W)");
  requireRank(op, w, "weight", 4,
              "(in_channels, out_channels / groups, kh, kw)");
  if (p.groups <= 0)
    raise("{}: groups must be positive, got {}", op.str(), p.groups);
  if (p.stride.h <= 0 || p.stride.w <= 0)
    raise("{}: stride {} must be positive", op.str(), p.stride.str());
  if (p.dilation.h <= 0 || p.dilation.w <= 0)
    raise("{}: dilation {} must be positive", op.str(), p.dilation.str());
  if (p.padding.h < 0 || p.padding.w < 0 || p.outputPadding.h < 0 ||
      p.outputPadding.w < 0)
    raise("{}: padding {} and output padding {} must be non-negative", op.str(),
          p.padding.str(), p.outputPadding.str());
  if ((p.outputPadding.h >= p.stride.h && p.outputPadding.h >= p.dilation.h) ||
      (p.outputPadding.w >= p.stride.w && p.outputPadding.w >= p.dilation.w))
    raise("{}: output padding {} must be smaller than the stride {} or the "
          "dilation {}",
          op.str(), p.outputPadding.str(), p.stride.str(), p.dilation.str());
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), wd = x.dim(3);
  int64_t groups = p.groups;
  if (w.dim(0) != c)
    raise("{}: input {} has {} channels but weight {} expects {}", op.str(),
          shapeStr(x.shape()), c, shapeStr(w.shape()), w.dim(0));
  if (c % groups != 0)
    raise("{}: groups {} does not divide the {} input channels of input {}",
          op.str(), groups, c, shapeStr(x.shape()));
  int64_t og = w.dim(1), o = og * groups, kh = w.dim(2), kw = w.dim(3);
  if (bias.defined()) {
    requireFloat32(op, bias, "bias");
    if (bias.rank() != 1 || bias.dim(0) != o)
      raise("{}: bias {} does not match the {} output channels of weight {} "
            "with groups {}",
            op.str(), shapeStr(bias.shape()), o, shapeStr(w.shape()), groups);
  }
  int64_t oh = (h - 1) * p.stride.h - 2 * p.padding.h +
               p.dilation.h * (kh - 1) + p.outputPadding.h + 1;
  int64_t ow = (wd - 1) * p.stride.w - 2 * p.padding.w +
               p.dilation.w * (kw - 1) + p.outputPadding.w + 1;
  if (h <= 0 || wd <= 0 || oh <= 0 || ow <= 0)
    raise("{}: input {} with weight {}, stride {}, padding {} gives an empty "
          "output {}x{}",
          op.str(), shapeStr(x.shape()), shapeStr(w.shape()), p.stride.str(),
          p.padding.str(), oh, ow);
  int64_t cg = c / groups, rows = og * kh * kw, hw = h * wd;
  for (int64_t v : {cg, rows, hw})
    requireBlasSize(op, v, "dimension");

  Tensor out = Tensor::zeros({n, o, oh, ow}, DType::Float32);
  if (out.numel() == 0)
    return out;
  // cols (og*kh*kw x H*W) = W_g^T (og*kh*kw x cg) @ X_g (cg x H*W), then
  // scatter-add each column to the output positions it feeds (col2im).
  // col2im runs one output channel per thread, in a fixed order, so it is
  // race-free and deterministic.
  std::unique_ptr<float[]> cols(new float[size_t(rows) * size_t(hw)]);
  const float *px = x.data<float>(), *pw = w.data<float>();
  const float *pb = bias.defined() ? bias.data<float>() : nullptr;
  float *po = out.data<float>();
  for (int64_t in = 0; in < n; ++in) {
    for (int64_t grp = 0; grp < groups; ++grp) {
      parallelSgemm(true, false, rows, hw, cg, 1.0f, pw + grp * cg * rows, rows,
                    px + (in * c + grp * cg) * hw, hw, 0.0f, cols.get(), hw);
      float *outg = po + (in * o + grp * og) * oh * ow;
      parallelFor(og, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t oc = c0; oc < c1; ++oc) {
          float *plane = outg + oc * oh * ow;
          for (int64_t ki = 0; ki < kh; ++ki)
            for (int64_t kj = 0; kj < kw; ++kj) {
              const float *src = cols.get() + ((oc * kh + ki) * kw + kj) * hw;
              for (int64_t iy = 0; iy < h; ++iy) {
                int64_t oy = iy * p.stride.h - p.padding.h + ki * p.dilation.h;
                if (oy < 0 || oy >= oh)
                  continue;
                for (int64_t ix = 0; ix < wd; ++ix) {
                  int64_t ox =
                      ix * p.stride.w - p.padding.w + kj * p.dilation.w;
                  if (ox >= 0 && ox < ow)
                    plane[oy * ow + ox] += src[iy * wd + ix];
                }
              }
            }
          biasActivate(plane, oh * ow, pb ? pb[grp * og + oc] : 0.0f,
                       p.activation);
        }
      });
    }
  }
  return out;
}

} // namespace tmg::rt
