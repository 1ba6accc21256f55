//===- test_extra.cpp - Kernels added for ONNX coverage vs references -----===//
#include <cmath>

#include "Reference.h"

using namespace tmtest;
using namespace tmg::rt;

namespace {

/// Applies f to every element (double reference).
template <typename F> Ref mapRef(const Tensor &x, F f) {
  Ref r(x);
  for (double &v : r.v)
    v = f(v);
  return r;
}

/// Naive N-d window reference: for each output position of each (n, c)
/// plane, visits every tap of the window (dilated) and calls f(tap value or
/// nullopt for padding).
struct WindowRef {
  std::vector<int64_t> k, s, pb, pe, d;
  bool ceil = false;
  int64_t outSize(size_t i, int64_t in) const {
    int64_t eff = d[i] * (k[i] - 1) + 1;
    double q = double(in + pb[i] + pe[i] - eff) / double(s[i]);
    int64_t o = int64_t(ceil ? std::ceil(q) : std::floor(q)) + 1;
    if (ceil && (o - 1) * s[i] >= in + pb[i])
      --o;
    return o;
  }
};

Ref poolRef(const Tensor &xt, const WindowRef &w, bool isMax, bool includePad) {
  Ref x(xt);
  size_t nd = x.rank() - 2;
  Shape os{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < nd; ++i)
    os.push_back(w.outSize(i, x.shape[i + 2]));
  Ref out(os);
  Shape ks(w.k.begin(), w.k.end());
  int64_t taps = tmg::shapeNumel(ks);
  for (int64_t o = 0; o < out.numel(); ++o) {
    auto oi = unravel(o, os);
    double acc = isMax ? -INFINITY : 0.0;
    int64_t valid = 0, padded = 0;
    for (int64_t t = 0; t < taps; ++t) {
      auto ti = unravel(t, ks);
      std::vector<int64_t> xi = {oi[0], oi[1]};
      bool inside = true, inPadded = true;
      for (size_t i = 0; i < nd; ++i) {
        int64_t c = oi[i + 2] * w.s[i] - w.pb[i] + ti[i] * w.d[i];
        inside &= c >= 0 && c < x.shape[i + 2];
        inPadded &= c < x.shape[i + 2] + w.pe[i];
        xi.push_back(c);
      }
      padded += inPadded;
      if (!inside)
        continue;
      ++valid;
      double v = x(xi);
      acc = isMax ? std::max(acc, v) : acc + v;
    }
    out.v[o] = isMax ? acc : acc / double(includePad ? padded : valid);
  }
  return out;
}

Ref convRef(const Tensor &xt, const Tensor &wt, const Tensor &bt, const WindowRef &w,
            int64_t groups) {
  Ref x(xt), wr(wt);
  size_t nd = x.rank() - 2;
  int64_t O = wr.shape[0], cg = wr.shape[1], og = O / groups;
  Shape os{x.shape[0], O};
  WindowRef w2 = w;
  w2.k.assign(wr.shape.begin() + 2, wr.shape.end());
  for (size_t i = 0; i < nd; ++i)
    os.push_back(w2.outSize(i, x.shape[i + 2]));
  Ref out(os);
  Shape ks(w2.k.begin(), w2.k.end());
  for (int64_t o = 0; o < out.numel(); ++o) {
    auto oi = unravel(o, os);
    double acc = bt.defined() ? bt.at(oi[1]) : 0.0;
    int64_t g = oi[1] / og;
    for (int64_t t = 0; t < tmg::shapeNumel(ks); ++t) {
      auto ti = unravel(t, ks);
      std::vector<int64_t> xi = {oi[0], 0};
      bool inside = true;
      for (size_t i = 0; i < nd; ++i) {
        int64_t c = oi[i + 2] * w.s[i] - w.pb[i] + ti[i] * w.d[i];
        inside &= c >= 0 && c < x.shape[i + 2];
        xi.push_back(c);
      }
      if (!inside)
        continue;
      for (int64_t ci = 0; ci < cg; ++ci) {
        xi[1] = g * cg + ci;
        std::vector<int64_t> wi = {oi[1], ci};
        wi.insert(wi.end(), ti.begin(), ti.end());
        acc += x(xi) * wr(wi);
      }
    }
    out.v[o] = acc;
  }
  return out;
}

/// Transposed convolution as the scatter of each input element.
Ref convTransposeRef(const Tensor &xt, const Tensor &wt, const WindowRef &w,
                     llvm::ArrayRef<int64_t> outPad, int64_t groups) {
  Ref x(xt), wr(wt);
  size_t nd = x.rank() - 2;
  int64_t og = wr.shape[1], cg = x.shape[1] / groups;
  Shape os{x.shape[0], og * groups};
  for (size_t i = 0; i < nd; ++i)
    os.push_back((x.shape[i + 2] - 1) * w.s[i] - w.pb[i] - w.pe[i] +
                 w.d[i] * (wr.shape[i + 2] - 1) + outPad[i] + 1);
  Ref out(os);
  Shape ks(wr.shape.begin() + 2, wr.shape.end());
  for (int64_t a = 0; a < x.numel(); ++a) {
    auto xi = unravel(a, x.shape);
    int64_t g = xi[1] / cg;
    for (int64_t ol = 0; ol < og; ++ol)
      for (int64_t t = 0; t < tmg::shapeNumel(ks); ++t) {
        auto ti = unravel(t, ks);
        std::vector<int64_t> oi = {xi[0], g * og + ol};
        bool inside = true;
        for (size_t i = 0; i < nd; ++i) {
          int64_t p = xi[i + 2] * w.s[i] - w.pb[i] + ti[i] * w.d[i];
          inside &= p >= 0 && p < os[i + 2];
          oi.push_back(p);
        }
        if (!inside)
          continue;
        std::vector<int64_t> wi = {xi[1], ol};
        wi.insert(wi.end(), ti.begin(), ti.end());
        out(oi) += x.v[a] * wr(wi);
      }
  }
  return out;
}

WindowNd toParams(const WindowRef &w) {
  WindowNd p;
  p.kernel = w.k;
  p.stride = w.s;
  p.padBegin = w.pb;
  p.padEnd = w.pe;
  p.dilation = w.d;
  p.ceilMode = w.ceil;
  return p;
}

} // namespace

TEST_CASE("math unary ops match libm", "[runtime][extra]") {
  Rng rng(1);
  Tensor x = rng.tensor({3, 17}, -0.9, 0.9);
  struct Case {
    MathOp op;
    double (*f)(double);
  } cases[] = {
      {MathOp::Floor, [](double v) { return std::floor(v); }},
      {MathOp::Ceil, [](double v) { return std::ceil(v); }},
      {MathOp::Sin, [](double v) { return std::sin(v); }},
      {MathOp::Cos, [](double v) { return std::cos(v); }},
      {MathOp::Tan, [](double v) { return std::tan(v); }},
      {MathOp::Asin, [](double v) { return std::asin(v); }},
      {MathOp::Acos, [](double v) { return std::acos(v); }},
      {MathOp::Atan, [](double v) { return std::atan(v); }},
      {MathOp::Sinh, [](double v) { return std::sinh(v); }},
      {MathOp::Cosh, [](double v) { return std::cosh(v); }},
      {MathOp::Asinh, [](double v) { return std::asinh(v); }},
      {MathOp::Atanh, [](double v) { return std::atanh(v); }},
      {MathOp::Reciprocal, [](double v) { return 1.0 / v; }},
      {MathOp::Softsign, [](double v) { return v / (1.0 + std::fabs(v)); }},
      {MathOp::Softplus, [](double v) { return std::log(1.0 + std::exp(v)); }},
      {MathOp::Sign, [](double v) { return double((v > 0) - (v < 0)); }},
  };
  for (const auto &c : cases) {
    INFO(opName(c.op).str());
    requireClose(mathUnary(c.op, x), mapRef(x, c.f), {1e-5, 1e-6});
  }
  Tensor big = Tensor::fromFloats({2}, {2.0f, 1.5f});
  requireClose(mathUnary(MathOp::Acosh, big), mapRef(big, [](double v) { return std::acosh(v); }),
               ElementwiseTol);
  // Round: half to even; softplus stays finite for large inputs.
  Tensor h = Tensor::fromFloats({5}, {0.5f, 1.5f, 2.5f, -0.5f, -1.7f});
  requireClose(mathUnary(MathOp::Round, h), Ref(Tensor::fromFloats({5}, {0, 2, 2, -0.0f, -2})),
               Exact);
  Tensor l = Tensor::fromFloats({2}, {100.0f, -100.0f});
  Tensor sp = mathUnary(MathOp::Softplus, l);
  CHECK(sp.at(0) == Approx(100.0));
  CHECK((sp.at(1) >= 0 && sp.at(1) < 1e-30));
  // Integer dtypes are kept by floor/ceil/round/sign.
  Tensor i = Tensor::fromInts({3}, {-4, 0, 9});
  Tensor s = mathUnary(MathOp::Sign, i);
  CHECK(s.dtype() == DType::Int64);
  CHECK((s.at(0) == -1 && s.at(1) == 0 && s.at(2) == 1));
}

TEST_CASE("parametrised activations match their formulas", "[runtime][extra]") {
  Rng rng(2);
  Tensor x = rng.tensor({4, 9}, -3, 3);
  requireClose(elu(x, 0.7), mapRef(x, [](double v) { return v > 0 ? v : 0.7 * (std::exp(v) - 1); }),
               ElementwiseTol);
  requireClose(selu(x, 1.67, 1.05),
               mapRef(x, [](double v) { return 1.05 * (v > 0 ? v : 1.67 * (std::exp(v) - 1)); }),
               ElementwiseTol);
  requireClose(celu(x, 2.0), mapRef(x, [](double v) {
                 return std::max(0.0, v) + std::min(0.0, 2.0 * (std::exp(v / 2.0) - 1));
               }),
               ElementwiseTol);
  requireClose(hardSigmoid(x, 0.2, 0.5),
               mapRef(x, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }),
               ElementwiseTol);
  requireClose(thresholdedRelu(x, 1.0), mapRef(x, [](double v) { return v > 1.0 ? v : 0.0; }),
               Exact);
  CHECK_THROWS_WITH(celu(x, 0.0), Catch::Contains("alpha must not be 0"));
}

TEST_CASE("prelu broadcasts its slope", "[runtime][extra]") {
  Rng rng(3);
  Tensor x = rng.tensor({2, 3, 4, 5});
  Tensor slope = rng.tensor({3, 1, 1}, 0.1, 0.5);
  Ref want(x);
  for (int64_t i = 0; i < want.numel(); ++i) {
    auto idx = unravel(i, want.shape);
    if (want.v[i] < 0)
      want.v[i] *= slope.at(idx[1]);
  }
  requireClose(prelu(x, slope), want, ElementwiseTol);
  CHECK_THROWS_WITH(prelu(x, rng.tensor({4})), Catch::Contains("broadcast"));
}

TEST_CASE("logical ops, isnan, isinf", "[runtime][extra]") {
  Tensor a = Tensor::fromInts({4}, {0, 1, 0, 1}, DType::Int64);
  Tensor b = Tensor::fromInts({2, 1}, {0, 1}, DType::Int64);
  Tensor x = logical(LogicalOp::Xor, a, b);
  REQUIRE(x.shape() == llvm::ArrayRef<int64_t>({2, 4}));
  CHECK(x.dtype() == DType::Bool);
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 4; ++c) {
      bool p = a.at(c) != 0, q = b.at(r) != 0;
      CHECK(x.at(r * 4 + c) == double(p != q));
      CHECK(logical(LogicalOp::And, a, b).at(r * 4 + c) == double(p && q));
      CHECK(logical(LogicalOp::Or, a, b).at(r * 4 + c) == double(p || q));
    }
  CHECK(logicalNot(a).at(0) == 1.0);
  CHECK(logicalNot(a).at(1) == 0.0);
  Tensor f = Tensor::fromFloats({4}, {NAN, INFINITY, -INFINITY, 1.0f});
  Tensor n = isNan(f), i = isInf(f), ip = isInf(f, true, false), in = isInf(f, false, true);
  CHECK((n.at(0) == 1 && n.at(1) == 0 && n.at(3) == 0));
  CHECK((i.at(0) == 0 && i.at(1) == 1 && i.at(2) == 1 && i.at(3) == 0));
  CHECK((ip.at(1) == 1 && ip.at(2) == 0 && in.at(1) == 0 && in.at(2) == 1));
}

TEST_CASE("mod: Python and C semantics", "[runtime][extra]") {
  Tensor a = Tensor::fromInts({4}, {7, -7, 7, -7}), b = Tensor::fromInts({4}, {3, 3, -3, -3});
  Tensor py = mod(a, b, false), c = mod(a, b, true);
  CHECK(py.dtype() == DType::Int64);
  for (int i = 0; i < 4; ++i) {
    int64_t p = int64_t(a.at(i)), q = int64_t(b.at(i));
    int64_t want = ((p % q) + q) % q;
    CHECK(py.at(i) == double(want));
    CHECK(c.at(i) == double(p % q));
  }
  Tensor fa = Tensor::fromFloats({2}, {5.5f, -5.5f}), fb = Tensor::fromFloats({1}, {2.0f});
  CHECK(mod(fa, fb, false).at(1) == Approx(0.5));
  CHECK(mod(fa, fb, true).at(1) == Approx(-1.5));
  CHECK_THROWS_WITH(mod(a, Tensor::fromInts({1}, {0}), false), Catch::Contains("division by zero"));
}

TEST_CASE("convNd: 1-D and 3-D with asymmetric padding, groups, dilation", "[runtime][extra]") {
  Rng rng(4);
  {
    Tensor x = rng.tensor({2, 4, 11}), w = rng.tensor({6, 2, 3}), b = rng.tensor({6});
    WindowRef r{{3}, {2}, {1}, {2}, {2}};
    requireClose(convNd(x, w, b, toParams(r), 2), convRef(x, w, b, r, 2), GemmTol);
  }
  {
    Tensor x = rng.tensor({1, 2, 5, 6, 4}), w = rng.tensor({3, 2, 2, 3, 2});
    WindowRef r{{2, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 0, 0}, {1, 1, 2}};
    requireClose(convNd(x, w, Tensor(), toParams(r), 1), convRef(x, w, Tensor(), r, 1),
                 GemmTol);
  }
  // 2-D agrees with the conv2d kernel.
  Tensor x = rng.tensor({1, 3, 7, 7}), w = rng.tensor({4, 3, 3, 3}), b = rng.tensor({4});
  WindowRef r{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
  requireClose(convNd(x, w, b, toParams(r), 1), Ref(conv2d(x, w, b, {.stride = 2, .padding = 1})),
               GemmTol);
  CHECK_THROWS_WITH(convNd(x, rng.tensor({4, 2, 3, 3}), Tensor(), toParams(r), 1),
                    Catch::Contains("groups"));
}

TEST_CASE("convTransposeNd: 1-D, 2-D and 3-D against the scatter reference",
          "[runtime][extra]") {
  Rng rng(5);
  {
    Tensor x = rng.tensor({1, 2, 5}), w = rng.tensor({2, 3, 3});
    WindowRef r{{3}, {2}, {1}, {0}, {1}};
    std::vector<int64_t> op{1};
    requireClose(convTransposeNd(x, w, Tensor(), toParams(r), op, 1),
                 convTransposeRef(x, w, r, op, 1), GemmTol);
  }
  {
    Tensor x = rng.tensor({2, 4, 3, 4}), w = rng.tensor({4, 1, 3, 2});
    WindowRef r{{3, 2}, {2, 3}, {1, 0}, {0, 1}, {2, 1}};
    std::vector<int64_t> op{0, 1};
    requireClose(convTransposeNd(x, w, Tensor(), toParams(r), op, 2),
                 convTransposeRef(x, w, r, op, 2), GemmTol);
    // Symmetric padding agrees with conv_transpose2d.
    WindowRef s{{3, 2}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
    std::vector<int64_t> z{0, 0};
    requireClose(convTransposeNd(x, w, Tensor(), toParams(s), z, 2),
                 Ref(convTranspose2d(x, w, Tensor(), {.stride = 2, .padding = 1, .groups = 2})),
                 GemmTol);
  }
  {
    Tensor x = rng.tensor({1, 1, 2, 3, 2}), w = rng.tensor({1, 2, 2, 2, 2});
    Tensor b = rng.tensor({2});
    WindowRef r{{2, 2, 2}, {1, 2, 1}, {0, 0, 1}, {0, 1, 0}, {1, 1, 1}};
    std::vector<int64_t> op{0, 0, 0};
    Ref want = convTransposeRef(x, w, r, op, 1);
    for (int64_t i = 0; i < want.numel(); ++i)
      want.v[i] += b.at(unravel(i, want.shape)[1]);
    requireClose(convTransposeNd(x, w, b, toParams(r), op, 1), want, GemmTol);
  }
}

TEST_CASE("N-d pooling: ceil mode, dilation, padding counted or not", "[runtime][extra]") {
  Rng rng(6);
  Tensor x1 = rng.tensor({2, 3, 10});
  WindowRef r1{{3}, {2}, {1}, {1}, {2}, true};
  requireClose(maxPoolNd(x1, toParams(r1)), poolRef(x1, r1, true, false), Exact);
  Tensor x3 = rng.tensor({1, 2, 5, 6, 7});
  WindowRef r3{{2, 3, 3}, {2, 2, 2}, {0, 1, 2}, {1, 1, 0}, {1, 1, 1}, true};
  WindowNd p3 = toParams(r3);
  requireClose(avgPoolNd(x3, p3), poolRef(x3, r3, false, false), ElementwiseTol);
  p3.countIncludePad = true;
  requireClose(avgPoolNd(x3, p3), poolRef(x3, r3, false, true), ElementwiseTol);
  requireClose(maxPoolNd(x3, p3), poolRef(x3, r3, true, false), Exact);
  // Padding larger than half the window (the 2-D kernels reject it).
  Tensor x2 = rng.tensor({1, 1, 5, 5});
  WindowRef r2{{3, 3}, {1, 1}, {2, 2}, {2, 2}, {1, 1}};
  requireClose(maxPoolNd(x2, toParams(r2)), poolRef(x2, r2, true, false), Exact);
  // Plain 2-D agrees with max_pool2d.
  WindowRef q{{3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}};
  requireClose(maxPoolNd(x2, toParams(q)), Ref(maxPool2d(x2, {.kernel = 3, .stride = 2, .padding = 1})),
               Exact);
  CHECK_THROWS_WITH(maxPoolNd(rng.tensor({1, 1, 2}), toParams(WindowRef{{5}, {1}, {0}, {0}, {1}})),
                    Catch::Contains("does not fit"));
  // Integer inputs keep their dtype.
  Tensor xi = rng.ints({1, 1, 4, 4}, 0, 200, DType::Int32);
  Tensor yi = maxPoolNd(xi, toParams(WindowRef{{2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}}));
  CHECK(yi.dtype() == DType::Int32);
}

TEST_CASE("N-d pooling with two axes runs the 2-D kernels for every window geometry",
          "[runtime][extra]") {
  // Ceil mode, asymmetric and large paddings, dilation, strides above the
  // window: what ONNX's MaxPool/AveragePool can ask for, against the naive
  // reference.
  Rng rng(11);
  int cases = 0;
  for (int64_t h : {5, 8})
    for (int64_t k : {1, 2, 3})
      for (int64_t s : {1, 2, 3})
        for (int64_t d : {1, 2})
          for (bool ceil : {false, true})
            for (int64_t pb : {0, 1, 2})
              for (int64_t pe : {0, 1}) {
                WindowRef r{{k, k + 1}, {s, s}, {pb, pe}, {pe, pb}, {d, 1}, ceil};
                // Windows that lie wholly in the padding are invalid (ONNX
                // asks pads smaller than the window).
                int64_t span = d * (k - 1) + 1;
                if (pb >= k || pe >= k || span > h + pb + pe)
                  continue;
                Tensor x = rng.tensor({2, 3, h, h + 1});
                INFO("h " << h << " k " << k << " s " << s << " d " << d << " ceil " << ceil
                          << " pads " << pb << "," << pe);
                requireClose(maxPoolNd(x, toParams(r)), poolRef(x, r, true, false), Exact);
                WindowRef a = r;
                a.d = {1, 1};
                WindowNd pa = toParams(a);
                requireClose(avgPoolNd(x, pa), poolRef(x, a, false, false), ElementwiseTol);
                pa.countIncludePad = true;
                requireClose(avgPoolNd(x, pa), poolRef(x, a, false, true), ElementwiseTol);
                ++cases;
              }
  CHECK(cases > 100);
  // NaN wins in max pooling, as in PyTorch.
  Tensor xn = rng.tensor({1, 1, 4, 4});
  xn.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  Tensor yn = maxPoolNd(xn, toParams(WindowRef{{2, 2}, {2, 2}, {0, 0}, {1, 1}, {1, 1}, true}));
  CHECK(std::isnan(yn.at(0)));
  CHECK(!std::isnan(yn.at(1)));
}

TEST_CASE("resizeNd: nearest, linear and cubic coordinate modes", "[runtime][extra]") {
  Rng rng(7);
  Tensor x = rng.tensor({1, 2, 3, 4});
  // Nearest, asymmetric, floor, integer scale: each pixel repeated.
  ResizeParams nn;
  nn.coord = ResizeCoord::Asymmetric;
  nn.nearest = NearestRound::Floor;
  Tensor up = resizeNd(x, {1, 2, 6, 8}, nn);
  Ref want({1, 2, 6, 8});
  for (int64_t i = 0; i < want.numel(); ++i) {
    auto id = unravel(i, want.shape);
    want.v[i] = x.at(((id[0] * 2 + id[1]) * 3 + id[2] / 2) * 4 + id[3] / 2);
  }
  requireClose(up, want, Exact);
  // Linear with align_corners along one axis: the corners are kept and the
  // rest is the straight line between neighbours.
  Tensor v = Tensor::fromFloats({1, 3}, {0, 10, 40});
  ResizeParams lin;
  lin.mode = ResizeInterp::Linear;
  lin.coord = ResizeCoord::AlignCorners;
  requireClose(resizeNd(v, {1, 5}, lin), Ref(Tensor::fromFloats({1, 5}, {0, 5, 10, 25, 40})),
               ElementwiseTol);
  // Linear half-pixel downsampling by 2 averages pairs.
  ResizeParams hp;
  hp.mode = ResizeInterp::Linear;
  Tensor w = Tensor::fromFloats({4}, {1, 3, 5, 9});
  requireClose(resizeNd(w, {2}, hp), Ref(Tensor::fromFloats({2}, {2, 7})), ElementwiseTol);
  // Cubic: a linear ramp is reproduced exactly away from the edges (the
  // Keys kernel reproduces degree-1 polynomials).
  Tensor ramp = Tensor::fromFloats({8}, {0, 1, 2, 3, 4, 5, 6, 7});
  ResizeParams cu;
  cu.mode = ResizeInterp::Cubic;
  cu.coord = ResizeCoord::Asymmetric;
  Tensor r = resizeNd(ramp, {16}, cu);
  for (int64_t i = 2; i < 12; ++i)
    CHECK(r.at(i) == Approx(i / 2.0).margin(1e-5));
  CHECK_THROWS_WITH(resizeNd(x, {1, 2}, nn), Catch::Contains("size has 2 entries"));
}

TEST_CASE("cumsum: inclusive, exclusive, reversed, along any axis", "[runtime][extra]") {
  Rng rng(8);
  Tensor x = rng.tensor({3, 4, 5});
  for (int64_t axis : {0, 1, -1})
    for (bool ex : {false, true})
      for (bool rev : {false, true}) {
        INFO("axis " << axis << " exclusive " << ex << " reverse " << rev);
        Ref want(x.shape());
        int64_t ax = axis < 0 ? axis + 3 : axis;
        for (int64_t i = 0; i < want.numel(); ++i) {
          auto idx = unravel(i, want.shape);
          double acc = 0;
          for (int64_t j = 0; j < x.dim(ax); ++j) {
            bool take = rev ? (ex ? j > idx[ax] : j >= idx[ax]) : (ex ? j < idx[ax] : j <= idx[ax]);
            auto src = idx;
            src[ax] = j;
            if (take)
              acc += Ref(x)(src);
          }
          want.v[i] = acc;
        }
        requireClose(cumsum(x, axis, ex, rev), want, ElementwiseTol);
      }
  Tensor i = Tensor::fromInts({4}, {1, 2, 3, 4}, DType::Int32);
  Tensor c = cumsum(i, 0);
  CHECK(c.dtype() == DType::Int32);
  CHECK(c.at(3) == 10);
  CHECK_THROWS_WITH(cumsum(i, 1), Catch::Contains("out of range"));
}

TEST_CASE("scatter_nd: ONNX's examples, reductions, slices, errors", "[runtime][extra]") {
  // ONNX ScatterND example 1 (written out by hand).
  Tensor data = Tensor::fromFloats({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = Tensor::fromInts({4, 1}, {4, 3, 1, 7}, DType::Int64);
  Tensor upd = Tensor::fromFloats({4}, {9, 10, 11, 12});
  Tensor r = scatterNd(data, idx, upd);
  std::vector<double> want{1, 11, 3, 10, 9, 6, 7, 12};
  for (int64_t i = 0; i < 8; ++i)
    CHECK(r.at(i) == want[i]);
  CHECK(data.at(4) == 5); // the input is not modified
  // Duplicate rows accumulate under add and mul.
  Tensor dup = Tensor::fromInts({3, 1}, {2, 2, -1}, DType::Int32);
  Tensor u3 = Tensor::fromFloats({3}, {10, 20, 3});
  Tensor add = scatterNd(data, dup, u3, ScatterReduce::Add);
  CHECK(add.at(2) == 33);
  CHECK(add.at(7) == 11);
  Tensor mul = scatterNd(data, dup, u3, ScatterReduce::Mul);
  CHECK(mul.at(2) == 600);
  CHECK(mul.at(7) == 24);

  // Slices: index rows of length 1 into a (3, 4, 2) input, against a naive
  // reference, with every reduction; the input is a transposed view.
  Rng rng(11);
  Tensor base = rng.tensor({2, 4, 3});
  Tensor x = transpose(base, {2, 1, 0}); // (3, 4, 2), non-contiguous
  Tensor rows = Tensor::fromInts({2, 2, 2}, {0, 1, 2, 3, 0, 1, -1, 0}, DType::Int64);
  Tensor u = rng.tensor({2, 2, 2});
  for (auto red : {ScatterReduce::None, ScatterReduce::Add, ScatterReduce::Mul,
                   ScatterReduce::Max, ScatterReduce::Min}) {
    Ref want(x);
    for (int64_t i = 0; i < 4; ++i) {
      int64_t a = rows.at(i * 2), b = rows.at(i * 2 + 1);
      if (a < 0)
        a += 3;
      for (int64_t c = 0; c < 2; ++c) {
        double &w = want.v[size_t((a * 4 + b) * 2 + c)];
        double v = u.at(i * 2 + c);
        w = red == ScatterReduce::None  ? v
            : red == ScatterReduce::Add ? w + v
            : red == ScatterReduce::Mul ? w * v
            : red == ScatterReduce::Max ? std::max(w, v)
                                        : std::min(w, v);
      }
    }
    requireClose(scatterNd(x, rows, u, red), want, ElementwiseTol);
  }
  // int64 data, a full-index row per element.
  Tensor iv = Tensor::fromInts({2, 2}, {1, 2, 3, 4}, DType::Int64);
  Tensor full = Tensor::fromInts({1, 2}, {1, 0}, DType::Int64);
  Tensor ir = scatterNd(iv, full, Tensor::fromInts({1}, {7}, DType::Int64), ScatterReduce::Add);
  CHECK(ir.dtype() == DType::Int64);
  CHECK(ir.at(2) == 10);

  CHECK_THROWS_WITH(scatterNd(data, Tensor::fromInts({1, 1}, {8}, DType::Int64),
                              Tensor::fromFloats({1}, {0})),
                    Catch::Contains("index 8 is out of range for axis 0"));
  CHECK_THROWS_WITH(scatterNd(data, idx, Tensor::fromFloats({3}, {0, 0, 0})),
                    Catch::Contains("must have shape (4,)"));
  CHECK_THROWS_WITH(scatterNd(data, Tensor::fromInts({1, 2}, {0, 0}, DType::Int64),
                              Tensor::fromFloats({1}, {0})),
                    Catch::Contains("index 2 axes of input"));
  CHECK_THROWS_WITH(scatterNd(data, idx, Tensor::fromInts({4}, {1, 2, 3, 4}, DType::Int64)),
                    Catch::Contains("dtype int64 but the input has float32"));
  CHECK_THROWS_WITH(scatterNd(Tensor::zeros({2}, DType::Float16),
                              Tensor::fromInts({1, 1}, {0}, DType::Int64),
                              Tensor::zeros({1}, DType::Float16), ScatterReduce::Add),
                    Catch::Contains("needs a float32, float64 or integer input"));
}

TEST_CASE("scatter: ONNX ScatterElements examples, any axis, reductions", "[runtime][extra]") {
  // ONNX ScatterElements example 1 (axis 0), written out by hand.
  Tensor data = Tensor::zeros({3, 3}, DType::Float32);
  Tensor idx = Tensor::fromInts({2, 3}, {1, 0, 2, 0, 2, 1}, DType::Int64);
  Tensor upd = Tensor::fromFloats({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  Tensor r = scatter(data, 0, idx, upd);
  std::vector<float> want{2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f};
  for (int64_t i = 0; i < 9; ++i)
    CHECK(r.at(i) == Approx(want[size_t(i)]));
  // Example 2: axis 1, a negative index.
  Tensor d2 = Tensor::fromFloats({1, 5}, {1, 2, 3, 4, 5});
  Tensor r2 = scatter(d2, 1, Tensor::fromInts({1, 2}, {1, -2}, DType::Int64),
                      Tensor::fromFloats({1, 2}, {1.1f, 2.1f}));
  std::vector<float> want2{1, 1.1f, 3, 2.1f, 5};
  for (int64_t i = 0; i < 5; ++i)
    CHECK(r2.at(i) == Approx(want2[size_t(i)]));

  // Random indices with duplicates along each axis of a (3, 4, 5) input,
  // index smaller than the input outside the axis, against a naive loop.
  Rng rng(12);
  Tensor x = rng.tensor({3, 4, 5});
  for (int64_t axis : {0, 1, 2, -1})
    for (auto red : {ScatterReduce::None, ScatterReduce::Add, ScatterReduce::Max}) {
      INFO("axis " << axis);
      int64_t ax = axis < 0 ? axis + 3 : axis;
      Shape is{2, 3, 4};
      is[size_t(ax)] = 6;
      Tensor index = Tensor::empty(is, DType::Int64);
      for (int64_t i = 0; i < index.numel(); ++i)
        index.data<int64_t>()[i] = rng.uniformInt(-x.dim(size_t(ax)), x.dim(size_t(ax)) - 1);
      Tensor u = rng.tensor(is);
      Ref w(x);
      for (int64_t i = 0; i < index.numel(); ++i) {
        auto at = unravel(i, Ref(index).shape);
        int64_t k = index.data<int64_t>()[i];
        at[size_t(ax)] = k < 0 ? k + x.dim(size_t(ax)) : k;
        double &dst = w(at);
        double v = u.at(i);
        dst = red == ScatterReduce::None ? v : red == ScatterReduce::Add ? dst + v : std::max(dst, v);
      }
      requireClose(scatter(x, axis, index, u, red), w, ElementwiseTol);
    }
  CHECK_THROWS_WITH(scatter(data, 0, idx, Tensor::fromFloats({3, 2}, {0, 0, 0, 0, 0, 0})),
                    Catch::Contains("must have one shape"));
  CHECK_THROWS_WITH(scatter(data, 2, idx, upd), Catch::Contains("axis 2"));
  CHECK_THROWS_WITH(scatter(data, 1, Tensor::fromInts({1, 1}, {3}, DType::Int64),
                            Tensor::fromFloats({1, 1}, {0})),
                    Catch::Contains("index 3 is out of range"));
  CHECK(parseScatterReduce("add") == ScatterReduce::Add);
  CHECK(!parseScatterReduce("sum"));
}
