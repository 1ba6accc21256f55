//===- resize.cpp - Kernels and lowering of the resize family ---*- C++ -*-===//
//
// interpolate (nearest or bilinear, to a size or by scale factors) and the
// N-d resize of ONNX import with its interpolation, coordinate
// transformation and nearest rounding modes, grid_sample and roi_align,
// whose kernels live here.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Lowering.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

namespace {

/// RoIAlign's bilinear sample of an H x W plane at (y, x): 0 outside
/// [-1, H] x [-1, W], edges clamped.
double roiSample(const float *p, int64_t h, int64_t w, double y, double x) {
  if (y < -1.0 || y > double(h) || x < -1.0 || x > double(w))
    return 0;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = int64_t(y), x0 = int64_t(x), y1 = y0 + 1, x1 = x0 + 1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = double(y0);
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = double(x0);
  }
  double ly = y - double(y0), lx = x - double(x0), hy = 1 - ly, hx = 1 - lx;
  return hy * hx * p[y0 * w + x0] + hy * lx * p[y0 * w + x1] + ly * hx * p[y1 * w + x0] +
         ly * lx * p[y1 * w + x1];
}

struct RoiParams {
  int64_t outH, outW, sampleH, sampleW;
  bool max, aligned;
  double scale;
};

/// One RoI's (C, outH, outW) bins from its image's planes.
void roiAlignOne(const float *img, int64_t ch, int64_t h, int64_t w, const float *roi,
                 const RoiParams &p, float *out) {
  double off = p.aligned ? 0.5 : 0.0;
  double x0 = roi[1] * p.scale - off, y0 = roi[2] * p.scale - off;
  double rw = roi[3] * p.scale - off - x0, rh = roi[4] * p.scale - off - y0;
  if (!p.aligned) {
    rw = std::max(rw, 1.0);
    rh = std::max(rh, 1.0);
  }
  double bh = rh / double(p.outH), bw = rw / double(p.outW);
  int64_t gh = p.sampleH > 0 ? p.sampleH : int64_t(std::ceil(rh / double(p.outH)));
  int64_t gw = p.sampleW > 0 ? p.sampleW : int64_t(std::ceil(rw / double(p.outW)));
  double count = double(std::max<int64_t>(gh * gw, 1));
  for (int64_t c = 0; c < ch; ++c)
    for (int64_t ph = 0; ph < p.outH; ++ph)
      for (int64_t pw = 0; pw < p.outW; ++pw) {
        double acc = p.max ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t iy = 0; iy < gh; ++iy)
          for (int64_t ix = 0; ix < gw; ++ix) {
            double y = y0 + double(ph) * bh + (double(iy) + 0.5) * bh / double(gh);
            double x = x0 + double(pw) * bw + (double(ix) + 0.5) * bw / double(gw);
            double v = roiSample(img + c * h * w, h, w, y, x);
            acc = p.max ? std::max(acc, v) : acc + v;
          }
        out[(c * p.outH + ph) * p.outW + pw] =
            float(p.max ? (gh > 0 && gw > 0 ? acc : 0.0) : acc / count);
      }
}

} // namespace

Tensor roiAlign(const Tensor &x0, const Tensor &rois0, int64_t outH, int64_t outW, bool max,
                double scale, int64_t sampleH, int64_t sampleW, bool aligned) {
  requireDef("roi_align", x0);
  requireDef("roi_align", rois0);
  if (x0.rank() != 4 || rois0.rank() != 2 || rois0.dim(1) != 5 || outH < 1 || outW < 1)
    raise("roi_align: input {} must be (N, C, H, W), rois {} (K, 5) and the output size "
          "positive", shapeStr(x0.shape()), shapeStr(rois0.shape()));
  Tensor x = cast(x0, DType::Float32).contiguous(), rois = cast(rois0, DType::Float32).contiguous();
  int64_t k = rois.dim(0), ch = x.dim(1), h = x.dim(2), w = x.dim(3);
  const float *pr = rois.data<float>();
  for (int64_t i = 0; i < k; ++i)
    if (pr[i * 5] < 0 || int64_t(pr[i * 5]) >= x.dim(0))
      raise("roi_align: roi {} has batch index {} for {} images", i, pr[i * 5], x.dim(0));
  Tensor y = Tensor::empty({k, ch, outH, outW}, DType::Float32);
  RoiParams p{outH, outW, sampleH, sampleW, max, aligned, scale};
  const float *px = x.data<float>();
  float *py = y.data<float>();
#pragma omp parallel for schedule(dynamic) if (k > 1)
  for (int64_t i = 0; i < k; ++i)
    roiAlignOne(px + int64_t(pr[i * 5]) * ch * h * w, ch, h, w, pr + i * 5, p,
                py + i * ch * outH * outW);
  return x0.dtype() == DType::Float32 ? y : cast(y, x0.dtype());
}

namespace {

/// PyTorch's reflect_coordinates: `v` reflected into [lo2 / 2, hi2 / 2].
double reflectCoord(double v, double lo2, double hi2) {
  if (lo2 == hi2)
    return 0;
  double mn = lo2 / 2, span = (hi2 - lo2) / 2;
  v = std::fabs(v - mn);
  double extra = std::fmod(v, span);
  int64_t flips = int64_t(std::floor(v / span));
  return flips % 2 == 0 ? extra + mn : span - extra + mn;
}

struct GridSampler {
  GridSamplePad pad;
  bool align;
  int64_t h, w;

  /// A normalised coordinate in pixels along an axis of `n`.
  double unnormalize(double v, int64_t n) const {
    return align ? (v + 1) / 2 * double(n - 1) : ((v + 1) * double(n) - 1) / 2;
  }
  /// Border and reflection padding: `v` moved inside [0, n - 1].
  double padCoord(double v, int64_t n) const {
    if (pad == GridSamplePad::Border)
      return std::clamp(v, 0.0, double(n - 1));
    if (pad == GridSamplePad::Reflection) {
      v = align ? reflectCoord(v, 0, 2.0 * double(n - 1)) : reflectCoord(v, -1, 2.0 * double(n) - 1);
      return std::clamp(v, 0.0, double(n - 1));
    }
    return v;
  }
  /// Pixel (y, x) of plane p, 0 outside.
  static double at(const float *p, int64_t y, int64_t x, int64_t h, int64_t w) {
    return y >= 0 && y < h && x >= 0 && x < w ? double(p[y * w + x]) : 0.0;
  }
  /// A bicubic tap: its coordinates padded first.
  double tap(const float *p, int64_t y, int64_t x) const {
    if (pad == GridSamplePad::Zeros)
      return at(p, y, x, h, w);
    return at(p, int64_t(padCoord(double(y), h)), int64_t(padCoord(double(x), w)), h, w);
  }
  double bilinear(const float *p, double y, double x) const {
    double y0 = std::floor(y), x0 = std::floor(x), ty = y - y0, tx = x - x0;
    int64_t iy = int64_t(y0), ix = int64_t(x0);
    return (1 - ty) * ((1 - tx) * at(p, iy, ix, h, w) + tx * at(p, iy, ix + 1, h, w)) +
           ty * ((1 - tx) * at(p, iy + 1, ix, h, w) + tx * at(p, iy + 1, ix + 1, h, w));
  }
  static void cubicWeights(double t, double *c) {
    const double a = -0.75;
    auto near = [a](double d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };
    auto far = [a](double d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };
    c[0] = far(t + 1);
    c[1] = near(t);
    c[2] = near(1 - t);
    c[3] = far(2 - t);
  }
  double bicubic(const float *p, double y, double x) const {
    double y0 = std::floor(y), x0 = std::floor(x), cy[4], cx[4];
    cubicWeights(y - y0, cy);
    cubicWeights(x - x0, cx);
    double v = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j)
        v += cy[i] * cx[j] * tap(p, int64_t(y0) - 1 + i, int64_t(x0) - 1 + j);
    return v;
  }
  double sample(const float *p, GridSampleMode m, double gx, double gy) const {
    double x = unnormalize(gx, w), y = unnormalize(gy, h);
    if (m == GridSampleMode::Bicubic)
      return bicubic(p, y, x);
    x = padCoord(x, w);
    y = padCoord(y, h);
    if (m == GridSampleMode::Bilinear)
      return bilinear(p, y, x);
    return at(p, int64_t(std::nearbyint(y)), int64_t(std::nearbyint(x)), h, w);
  }
};

} // namespace

Tensor gridSample(const Tensor &x0, const Tensor &g0, GridSampleMode mode, GridSamplePad pad,
                  bool alignCorners) {
  requireDef("grid_sample", x0);
  requireDef("grid_sample", g0);
  if (x0.rank() != 4 || g0.rank() != 4 || g0.dim(0) != x0.dim(0) || g0.dim(3) != 2)
    raise("grid_sample: input {} must be (N, C, H, W) and grid {} (N, Ho, Wo, 2)",
          shapeStr(x0.shape()), shapeStr(g0.shape()));
  if (!isFloat(x0.dtype()) || !isFloat(g0.dtype()))
    raise("grid_sample: input and grid must be floating point");
  Tensor x = x0.dtype() == DType::Float32 ? x0.contiguous() : cast(x0, DType::Float32);
  Tensor g = g0.dtype() == DType::Float32 ? g0.contiguous() : cast(g0, DType::Float32);
  int64_t n = x.dim(0), ch = x.dim(1), ho = g.dim(1), wo = g.dim(2);
  GridSampler s{pad, alignCorners, x.dim(2), x.dim(3)};
  Tensor y = Tensor::empty({n, ch, ho, wo}, DType::Float32);
  const float *px = x.data<float>(), *pg = g.data<float>();
  float *py = y.data<float>();
  int64_t plane = s.h * s.w, outPlane = ho * wo;
#pragma omp parallel for schedule(static) if (n * ch * outPlane > 4096)
  for (int64_t p = 0; p < n * ch; ++p) {
    const float *gp = pg + (p / ch) * outPlane * 2;
    for (int64_t i = 0; i < outPlane; ++i)
      py[p * outPlane + i] = float(s.sample(px + p * plane, mode, gp[2 * i], gp[2 * i + 1]));
  }
  return x0.dtype() == DType::Float32 ? y : cast(y, x0.dtype());
}

Tensor resizeNd(const Tensor &x0, llvm::ArrayRef<int64_t> size, const ResizeParams &p) {
  const char *op = "resize_nd";
  requireDef(op, x0);
  size_t r = x0.rank();
  if (size.size() != r)
    raise("{}: size has {} entries for input {}", op, size.size(), shapeStr(x0.shape()));
  if (!p.scales.empty() && p.scales.size() != r)
    raise("{}: scales has {} entries for input {}", op, p.scales.size(), shapeStr(x0.shape()));
  for (int64_t s : size)
    if (s < 0)
      raise("{}: negative output size", op);
  Tensor x = asFloat32(op, x0);
  Tensor y = Tensor::empty(size, DType::Float32);
  std::vector<int64_t> inStr = stridesOf(x.shape());
  // Per axis and output index: source taps and weights.
  struct Taps {
    std::vector<int64_t> idx;
    std::vector<float> w;
    int64_t n = 0;
  };
  std::vector<Taps> taps(r);
  for (size_t a = 0; a < r; ++a) {
    int64_t in = x.dim(a), out = size[a];
    double scale = p.scales.empty() ? (in ? double(out) / double(in) : 1.0) : p.scales[a];
    int64_t per = p.mode == ResizeInterp::Nearest ? 1 : p.mode == ResizeInterp::Linear ? 2 : 4;
    Taps &t = taps[a];
    t.n = per;
    t.idx.resize(out * per);
    t.w.resize(out * per);
    for (int64_t o = 0; o < out; ++o) {
      double c = 0;
      switch (p.coord) {
      case ResizeCoord::HalfPixel: c = (o + 0.5) / scale - 0.5; break;
      case ResizeCoord::PytorchHalfPixel: c = out > 1 ? (o + 0.5) / scale - 0.5 : 0.0; break;
      case ResizeCoord::AlignCorners: {
        // With explicit scales the resized length is in * scale, unrounded.
        double len = p.scales.empty() ? double(out) : in * scale;
        c = len > 1 ? double(o) * (in - 1) / (len - 1) : 0.0;
        break;
      }
      case ResizeCoord::Asymmetric: c = o / scale; break;
      case ResizeCoord::TfHalfPixelForNn: c = (o + 0.5) / scale; break;
      }
      auto clampI = [&](int64_t i) { return std::clamp<int64_t>(i, 0, in - 1); };
      if (p.mode == ResizeInterp::Nearest) {
        int64_t i = 0;
        switch (p.nearest) {
        case NearestRound::RoundPreferFloor: i = int64_t(std::ceil(c - 0.5)); break;
        case NearestRound::RoundPreferCeil: i = int64_t(std::floor(c + 0.5)); break;
        case NearestRound::Floor: i = int64_t(std::floor(c)); break;
        case NearestRound::Ceil: i = int64_t(std::ceil(c)); break;
        }
        t.idx[o] = clampI(i);
        t.w[o] = 1.0f;
      } else if (p.mode == ResizeInterp::Linear) {
        c = std::clamp(c, 0.0, double(in - 1));
        int64_t i0 = int64_t(std::floor(c));
        double f = c - i0;
        t.idx[2 * o] = clampI(i0);
        t.idx[2 * o + 1] = clampI(i0 + 1);
        t.w[2 * o] = float(1 - f);
        t.w[2 * o + 1] = float(f);
      } else {
        int64_t i0 = int64_t(std::floor(c));
        double f = c - i0, A = p.cubicA, ws[4], sum = 0;
        auto k = [A](double d) {
          d = std::fabs(d);
          if (d <= 1)
            return ((A + 2) * d - (A + 3)) * d * d + 1;
          if (d < 2)
            return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A;
          return 0.0;
        };
        for (int j = 0; j < 4; ++j) {
          int64_t ii = i0 - 1 + j;
          ws[j] = k(f + 1 - j);
          if (p.excludeOutside && (ii < 0 || ii >= in))
            ws[j] = 0;
          sum += ws[j];
        }
        for (int j = 0; j < 4; ++j) {
          t.idx[4 * o + j] = clampI(i0 - 1 + j);
          t.w[4 * o + j] = float(p.excludeOutside && sum != 0 ? ws[j] / sum : ws[j]);
        }
      }
    }
  }
  int64_t n = y.numel();
  std::vector<int64_t> outStr = stridesOf(size);
  const float *xs = x.data<float>();
  float *ys = y.data<float>();
  int64_t combos = 1;
  for (auto &t : taps)
    combos *= t.n;
#pragma omp parallel for if (n > 4096) schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    double acc = 0;
    for (int64_t cb = 0; cb < combos; ++cb) {
      int64_t rem = cb, off = 0;
      double w = 1;
      for (size_t a = r; a-- > 0;) {
        int64_t j = rem % taps[a].n;
        rem /= taps[a].n;
        int64_t o = (i / outStr[a]) % size[a];
        w *= taps[a].w[o * taps[a].n + j];
        off += taps[a].idx[o * taps[a].n + j] * inStr[a];
      }
      if (w != 0)
        acc += w * xs[off];
    }
    ys[i] = float(acc);
  }
  return isFloat(x0.dtype()) && x0.dtype() != DType::Float32 ? cast(y, x0.dtype()) : y;
}

// ---- Lowering -----------------------------------------------------------------

namespace {

StepFn lowerInterpolate(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::string mode = a.string("mode");
  ResizeMode rm = mode == "nearest" ? ResizeMode::Nearest
                  : (mode == "bilinear" || mode == "linear") ? ResizeMode::Bilinear
                                                             : ResizeMode::Nearest;
  if (mode != "nearest" && mode != "bilinear" && mode != "linear")
    a.fail(fmt::format("unsupported interpolate mode '{}'", mode));
  bool align = !a.isNone("align_corners") && a.boolean("align_corners");
  uint32_t o = outSlot(e, ctx);
  if (!a.isNone("size")) {
    Int2 size = a.pair("size");
    return unaryStep(a.tensor("inp"), o, [size, rm, align](const Tensor &x) {
      return resize(x, size, rm, align);
    });
  }
  TreeDef f = a.constant("scale_factor");
  double fh, fw;
  if (f.isConst() && f.value().isNumber()) {
    fh = fw = f.value().toDouble();
  } else if (f.numChildren() == 2 && f.child(0).isConst() && f.child(1).isConst()) {
    fh = f.child(0).value().toDouble();
    fw = f.child(1).value().toDouble();
  } else {
    a.fail("interpolate needs size or scale_factor");
  }
  return unaryStep(a.tensor("inp"), o, [fh, fw, rm, align](const Tensor &x) {
    return upsample(x, fh, fw, rm, align);
  });
}

/// The modes of `resize_nd`, each from its string argument.
void resizeModes(const Args &a, ResizeParams &p) {
  std::string mode = a.string("mode"), coord = a.string("coordinate_transformation_mode"),
              nearest = a.string("nearest_mode");
  if (mode == "nearest") p.mode = ResizeInterp::Nearest;
  else if (mode == "linear") p.mode = ResizeInterp::Linear;
  else if (mode == "cubic") p.mode = ResizeInterp::Cubic;
  else a.fail(fmt::format("unsupported resize mode '{}'", mode));
  if (coord == "half_pixel") p.coord = ResizeCoord::HalfPixel;
  else if (coord == "pytorch_half_pixel") p.coord = ResizeCoord::PytorchHalfPixel;
  else if (coord == "align_corners") p.coord = ResizeCoord::AlignCorners;
  else if (coord == "asymmetric") p.coord = ResizeCoord::Asymmetric;
  else if (coord == "tf_half_pixel_for_nn") p.coord = ResizeCoord::TfHalfPixelForNn;
  else a.fail(fmt::format("unsupported coordinate_transformation_mode '{}'", coord));
  if (nearest == "round_prefer_floor") p.nearest = NearestRound::RoundPreferFloor;
  else if (nearest == "round_prefer_ceil") p.nearest = NearestRound::RoundPreferCeil;
  else if (nearest == "floor") p.nearest = NearestRound::Floor;
  else if (nearest == "ceil") p.nearest = NearestRound::Ceil;
  else a.fail(fmt::format("unsupported nearest_mode '{}'", nearest));
}

/// The output size of `x` resized by `scales`: floor(in * scale), as ONNX.
std::vector<int64_t> scaledSize(const Tensor &x, const std::vector<double> &scales) {
  if (scales.size() != x.rank())
    raise("resize_nd: {} scales for input {} of rank {}", scales.size(), shapeStr(x.shape()),
          x.rank());
  std::vector<int64_t> out;
  for (size_t i = 0; i < scales.size(); ++i) {
    double v = std::floor(double(x.dim(i)) * scales[i] + 1e-9);
    if (!(scales[i] > 0) || !(v < 9.2e18))
      raise("resize_nd: scale {} of axis {} is not a positive size factor", scales[i], i);
    out.push_back(int64_t(v));
  }
  return out;
}

/// resize_nd to sizes (a node) or by scales (a node, size None) read when
/// the step runs.
StepFn lowerResizeRuntime(const Args &a, const ResizeParams &p, uint32_t o) {
  Src x = a.tensor("inp");
  auto sc = a.ref("scales");
  Src scales = sc && sc->node() ? a.tensor("scales") : Src();
  IntsArg size;
  if (!scales.defined())
    size = a.intsArg("size");
  return [x, scales, size, p, o](Value *s, RunState &) {
    Tensor t = x.get(s);
    ResizeParams q = p;
    if (!scales.defined())
      return void(s[o].tensor = resizeNd(t, size.get(s), q));
    Tensor f = scales.get(s);
    if (f.rank() != 1)
      raise("resize_nd: scales must be 1-d, got shape {}", shapeStr(f.shape()));
    for (int64_t i = 0; i < f.numel(); ++i)
      q.scales.push_back(f.at(i));
    s[o].tensor = resizeNd(t, scaledSize(t, q.scales), q);
  };
}

StepFn lowerResizeNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ResizeParams p;
  resizeModes(a, p);
  p.cubicA = a.number("cubic_coeff_a");
  p.excludeOutside = a.boolean("exclude_outside");
  auto sc = a.ref("scales");
  if (sc && sc->node())
    return lowerResizeRuntime(a, p, outSlot(e, ctx));
  if (auto sz = a.ref("size"); sz && sz->node())
    return lowerResizeRuntime(a, p, outSlot(e, ctx));
  std::vector<int64_t> size = a.ints("size");
  if (!a.isNone("scales")) {
    TreeDef t = a.constant("scales");
    for (size_t i = 0; i < t.numChildren(); ++i) {
      if (!t.child(i).isConst() || !t.child(i).value().isNumber())
        a.fail("'scales' must be numbers");
      p.scales.push_back(t.child(i).value().toDouble());
    }
  }
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [size, p](const Tensor &t) { return resizeNd(t, size, p); });
}

StepFn lowerGridSample(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::string m = a.string("mode"), p = a.string("padding_mode");
  GridSampleMode mode = m == "bilinear"  ? GridSampleMode::Bilinear
                        : m == "nearest" ? GridSampleMode::Nearest
                        : m == "bicubic" ? GridSampleMode::Bicubic
                                         : (a.fail("mode must be 'bilinear', 'nearest' or "
                                                   "'bicubic', got '" + m + "'"),
                                            GridSampleMode::Bilinear);
  GridSamplePad pad = p == "zeros"        ? GridSamplePad::Zeros
                      : p == "border"     ? GridSamplePad::Border
                      : p == "reflection" ? GridSamplePad::Reflection
                                          : (a.fail("padding_mode must be 'zeros', 'border' "
                                                    "or 'reflection', got '" + p + "'"),
                                             GridSamplePad::Zeros);
  bool align = a.boolean("align_corners");
  return binaryStep(a.tensor("inp"), a.tensor("grid"), outSlot(e, ctx),
                    [=](const Tensor &x, const Tensor &g) {
                      return gridSample(x, g, mode, pad, align);
                    });
}

StepFn lowerRoiAlign(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Int2 o = a.pair("output_shape"), sp = a.pair("sample_points");
  std::string m = a.string("mode");
  if (m != "average" && m != "max")
    a.fail("mode must be 'average' or 'max', got '" + m + "'");
  double scale = a.number("spatial_scale");
  bool aligned = a.boolean("aligned"), max = m == "max";
  return binaryStep(a.tensor("inp"), a.tensor("rois"), outSlot(e, ctx),
                    [=](const Tensor &x, const Tensor &r) {
                      return roiAlign(x, r, o.h, o.w, max, scale, sp.h, sp.w, aligned);
                    });
}

} // namespace

void registerResizeLowering(LowerTable &t) {
  t.add("resize", {OpKind::RoiAlign}, lowerRoiAlign);
  t.add("resize", {OpKind::GridSample}, lowerGridSample);
  t.add("resize", {OpKind::Interpolate}, lowerInterpolate);
  t.add("resize", {OpKind::ResizeNd}, lowerResizeNd);
}

} // namespace tmg::rt
