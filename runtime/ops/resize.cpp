//===- resize.cpp - Kernels and lowering of the resize family ---*- C++ -*-===//
//
// interpolate (nearest or bilinear, to a size or by scale factors) and the
// N-d resize of ONNX import with its interpolation, coordinate
// transformation and nearest rounding modes, whose kernel lives here.
//
//===----------------------------------------------------------------------===//
#include "KernelUtil.h"
#include "Lowering.h"

#include <cmath>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

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

} // namespace

void registerResizeLowering(LowerTable &t) {
  t.add("resize", {OpKind::Interpolate}, lowerInterpolate);
  t.add("resize", {OpKind::ResizeNd}, lowerResizeNd);
}

} // namespace tmg::rt
