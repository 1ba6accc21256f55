//===- test_pool.cpp - Pooling against direct-loop references -------------===//
#include "Reference.h"

#include <limits>

using namespace tmtest;
namespace rt = tmg::rt;
using rt::Int2;

namespace {

/// PyTorch's pooled size, written independently of the kernel.
int64_t refPoolSize(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                    bool ceil) {
  double span = double(in + 2 * p - d * (k - 1) - 1) / double(s);
  int64_t out = int64_t(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + p)
    --out;
  return out;
}

struct PoolCase {
  int64_t n, c, h, w;
  rt::Pool2dParams p;
};

Ref refMaxPool(const Ref &x, const PoolCase &k) {
  Int2 s = k.p.stride.value_or(k.p.kernel);
  int64_t oh = refPoolSize(k.h, k.p.kernel.h, s.h, k.p.padding.h,
                           k.p.dilation.h, k.p.ceilMode);
  int64_t ow = refPoolSize(k.w, k.p.kernel.w, s.w, k.p.padding.w,
                           k.p.dilation.w, k.p.ceilMode);
  Ref y(Shape{k.n, k.c, oh, ow});
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double m = -std::numeric_limits<double>::infinity();
          for (int64_t i = 0; i < k.p.kernel.h; ++i)
            for (int64_t j = 0; j < k.p.kernel.w; ++j) {
              int64_t iy = oy * s.h - k.p.padding.h + i * k.p.dilation.h;
              int64_t ix = ox * s.w - k.p.padding.w + j * k.p.dilation.w;
              if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w) {
                double v = x({n, c, iy, ix});
                m = std::isnan(m) ? m : std::isnan(v) ? v : std::max(m, v);
              }
            }
          y({n, c, oy, ox}) = m;
        }
  return y;
}

Ref refAvgPool(const Ref &x, const PoolCase &k) {
  Int2 s = k.p.stride.value_or(k.p.kernel);
  int64_t oh =
      refPoolSize(k.h, k.p.kernel.h, s.h, k.p.padding.h, 1, k.p.ceilMode);
  int64_t ow =
      refPoolSize(k.w, k.p.kernel.w, s.w, k.p.padding.w, 1, k.p.ceilMode);
  Ref y(Shape{k.n, k.c, oh, ow});
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double sum = 0;
          int64_t valid = 0, padded = 0;
          for (int64_t i = 0; i < k.p.kernel.h; ++i)
            for (int64_t j = 0; j < k.p.kernel.w; ++j) {
              int64_t iy = oy * s.h - k.p.padding.h + i;
              int64_t ix = ox * s.w - k.p.padding.w + j;
              // Positions in the (symmetric) padding count with
              // countIncludePad; ceil-mode positions beyond it never do.
              bool inPadded =
                  iy < k.h + k.p.padding.h && ix < k.w + k.p.padding.w;
              padded += inPadded;
              if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w) {
                sum += x({n, c, iy, ix});
                ++valid;
              }
            }
          int64_t div = k.p.countIncludePad ? padded : valid;
          y({n, c, oy, ox}) = div ? sum / double(div) : 0.0;
        }
  return y;
}

} // namespace

TEST_CASE("max_pool2d and avg_pool2d: random configurations", "[pool]") {
  Rng rng(301);
  int checked = 0;
  while (checked < 150) {
    PoolCase k;
    k.n = rng.uniformInt(1, 2);
    k.c = rng.uniformInt(1, 3);
    k.h = rng.uniformInt(1, 12);
    k.w = rng.uniformInt(1, 12);
    k.p.kernel = Int2(rng.uniformInt(1, 4), rng.uniformInt(1, 4));
    if (rng.coin(0.8))
      k.p.stride = Int2(rng.uniformInt(1, 3), rng.uniformInt(1, 3));
    k.p.padding = Int2(rng.uniformInt(0, k.p.kernel.h / 2),
                       rng.uniformInt(0, k.p.kernel.w / 2));
    k.p.ceilMode = rng.coin();
    k.p.countIncludePad = rng.coin();
    bool useMax = rng.coin();
    if (useMax)
      k.p.dilation = Int2(rng.uniformInt(1, 2), rng.uniformInt(1, 2));
    Int2 s = k.p.stride.value_or(k.p.kernel);
    if (refPoolSize(k.h, k.p.kernel.h, s.h, k.p.padding.h, k.p.dilation.h,
                    k.p.ceilMode) <= 0 ||
        refPoolSize(k.w, k.p.kernel.w, s.w, k.p.padding.w, k.p.dilation.w,
                    k.p.ceilMode) <= 0)
      continue;
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -3, 3);
    INFO((useMax ? "max" : "avg")
         << " x " << shapeOf(x.shape()) << " kernel " << k.p.kernel.str()
         << " stride " << s.str() << " pad " << k.p.padding.str()
         << " dilation " << k.p.dilation.str() << " ceil " << k.p.ceilMode
         << " include_pad " << k.p.countIncludePad);
    if (useMax)
      requireClose(rt::maxPool2d(x, k.p), refMaxPool(Ref(x), k), Exact);
    else
      requireClose(rt::avgPool2d(x, k.p), refAvgPool(Ref(x), k),
                   ElementwiseTol);
    ++checked;
  }
}

TEST_CASE("max_pool2d: wide rows, every vector tail, NaN anywhere", "[pool]") {
  // Rows wide enough for several 16-lane vectors and every tail length,
  // strides 1 and 2 (the vector paths) and 3, dilations, a third of the
  // cases 3x3 and a third 2x2 windows, NaN at random places (a NaN in the
  // window wins).
  Rng rng(303);
  int checked = 0;
  while (checked < 360) {
    PoolCase k;
    k.n = 1;
    k.c = rng.uniformInt(1, 3);
    k.h = rng.uniformInt(1, 9);
    k.w = rng.uniformInt(1, 90);
    k.p.kernel = Int2(rng.uniformInt(1, 4), rng.uniformInt(1, 5));
    k.p.stride = Int2(rng.uniformInt(1, 3), rng.uniformInt(1, 3));
    k.p.padding = Int2(rng.uniformInt(0, k.p.kernel.h / 2),
                       rng.uniformInt(0, k.p.kernel.w / 2));
    k.p.dilation = Int2(rng.uniformInt(1, 2), rng.uniformInt(1, 3));
    if (int64_t sq = rng.uniformInt(1, 3); sq > 1) { // 2x2 and 3x3: their own kernel
      k.p.kernel = Int2(sq);
      k.p.dilation = Int2(1);
      k.p.padding = Int2(rng.uniformInt(0, 1), rng.uniformInt(0, 1));
    }
    k.p.ceilMode = rng.coin();
    Int2 s = *k.p.stride;
    if (refPoolSize(k.h, k.p.kernel.h, s.h, k.p.padding.h, k.p.dilation.h,
                    k.p.ceilMode) <= 0 ||
        refPoolSize(k.w, k.p.kernel.w, s.w, k.p.padding.w, k.p.dilation.w,
                    k.p.ceilMode) <= 0)
      continue;
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -3, 3);
    float *px = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i)
      if (rng.coin(0.02))
        px[i] = std::numeric_limits<float>::quiet_NaN();
      else if (rng.coin(0.02))
        px[i] = -std::numeric_limits<float>::infinity();
    INFO("x " << shapeOf(x.shape()) << " kernel " << k.p.kernel.str()
              << " stride " << s.str() << " pad " << k.p.padding.str()
              << " dilation " << k.p.dilation.str() << " ceil "
              << k.p.ceilMode);
    requireClose(rt::maxPool2d(x, k.p), refMaxPool(Ref(x), k), Exact);
    ++checked;
  }
}

TEST_CASE("max_pool2d: large planes split into row bands over threads",
          "[pool]") {
  // Planes of 2048 outputs and more, of fewer images than threads, run
  // as row bands, one per thread (each a sub-geometry with the padding
  // shifted): every kernel path, ceil mode, padding, and 2 and 3 threads
  // (bands of unequal height) against the direct loop; two images on two
  // threads take whole planes.
  Rng rng(307);
  for (int i = 0; i < 24; ++i) {
    PoolCase k;
    k.n = i % 3 == 2 ? 2 : 1;
    k.c = rng.uniformInt(1, 3);
    k.h = rng.uniformInt(70, 130);
    k.w = rng.uniformInt(70, 130);
    int64_t sq = rng.uniformInt(2, 4);
    k.p.kernel = Int2(sq);
    k.p.stride = Int2(rng.uniformInt(1, 2));
    k.p.padding = Int2(rng.uniformInt(0, sq / 2));
    k.p.dilation = Int2(i % 4 == 3 ? 2 : 1);
    k.p.ceilMode = rng.coin();
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -3, 3);
    float *px = x.data<float>();
    for (int64_t j = 0; j < x.numel(); ++j)
      if (rng.coin(0.001))
        px[j] = std::numeric_limits<float>::quiet_NaN();
    int threads = 2 + i % 2;
    INFO("x " << shapeOf(x.shape()) << " kernel " << k.p.kernel.str() << " stride "
              << k.p.stride->str() << " pad " << k.p.padding.str() << " dilation "
              << k.p.dilation.str() << " ceil " << k.p.ceilMode << " threads " << threads);
    Tensor y = withThreads(threads, [&] { return rt::maxPool2d(x, k.p); });
    requireClose(y, refMaxPool(Ref(x), k), Exact);
  }
}

TEST_CASE("pooling: ceil mode drops a window that starts in the padding",
          "[pool]") {
  // (5 + 2 - 2) / 2 rounds up to 3 windows, but the fourth would start at
  // row 6 = H + pad: dropped, as PyTorch does.
  Tensor x = Tensor::randn({1, 1, 5, 5}, 7);
  rt::Pool2dParams p{
      .kernel = 2, .stride = Int2(2), .padding = 1, .ceilMode = true};
  CHECK(shapeOf(rt::maxPool2d(x, p).shape()) == "(1, 1, 3, 3)");
  // Without padding the ceil window is kept: ceil((5 - 2) / 2) + 1 = 3.
  p.padding = 0;
  CHECK(shapeOf(rt::avgPool2d(x, p).shape()) == "(1, 1, 3, 3)");
  p.ceilMode = false;
  CHECK(shapeOf(rt::avgPool2d(x, p).shape()) == "(1, 1, 2, 2)");
  // count_include_pad both ways on a corner window of ones.
  Tensor ones = Tensor::full({1, 1, 4, 4}, 1.0);
  rt::Pool2dParams q{.kernel = 3, .stride = Int2(1), .padding = 1};
  CHECK(rt::avgPool2d(ones, q).data<float>()[0] == 1.0f);
  q.countIncludePad = true;
  CHECK(rt::avgPool2d(ones, q).data<float>()[0] == Approx(4.0 / 9.0));
}

TEST_CASE("pooling: larger inputs, 3-D inputs and NaN", "[pool]") {
  Rng rng(302);
  PoolCase k{2, 64, 56, 56, {.kernel = 3, .stride = Int2(2), .padding = 1}};
  Tensor x = rng.tensor({k.n, k.c, k.h, k.w});
  requireClose(rt::maxPool2d(x, k.p), refMaxPool(Ref(x), k), Exact);
  requireClose(rt::avgPool2d(x, k.p), refAvgPool(Ref(x), k), ElementwiseTol);
  Tensor x3 = rng.tensor({3, 9, 9});
  Tensor y3 = rt::maxPool2d(x3, {.kernel = 2});
  CHECK(shapeOf(y3.shape()) == "(3, 4, 4)");
  requireClose(y3,
               Ref(rt::maxPool2d(x3.reshaped({1, 3, 9, 9}), {.kernel = 2})
                       .reshaped({3, 4, 4})),
               Exact);
  Tensor n = Tensor::fromFloats(
      {1, 1, 2, 2},
      {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 2.0f});
  CHECK(std::isnan(rt::maxPool2d(n, {.kernel = 2}).data<float>()[0]));
  CHECK(std::isnan(rt::globalMaxPool2d(n).data<float>()[0]));
}

TEST_CASE("avg_pool2d 2x2 stride 2: the window summed in order, every width",
          "[pool]") {
  // (((0 + a) + b) + c) + d over the window's rows, then / 4, in float:
  // what the generic loop computes, exactly; odd sizes drop the last
  // row and column.
  Rng rng(304);
  for (int64_t w = 2; w <= 70; w += 3) {
    int64_t h = 5 + w % 4;
    Tensor x = rng.tensor({2, 3, h, w}, -3, 3);
    Tensor y = rt::avgPool2d(x, {.kernel = 2, .stride = Int2(2)});
    int64_t oh = h / 2, ow = w / 2;
    REQUIRE(shapeOf(y.shape()) == shapeOf(Shape{2, 3, oh, ow}));
    const float *px = x.data<float>(), *py = y.data<float>();
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const float *r0 = px + (p * h + 2 * oy) * w + 2 * ox, *r1 = r0 + w;
          float s = 0.0f;
          s += r0[0];
          s += r0[1];
          s += r1[0];
          s += r1[1];
          INFO("w " << w << " plane " << p << " at " << oy << ", " << ox);
          REQUIRE(py[(p * oh + oy) * ow + ox] == s / 4.0f);
        }
  }
}

TEST_CASE("adaptive and global pooling", "[pool]") {
  Rng rng(303);
  for (int i = 0; i < 40; ++i) {
    int64_t n = rng.uniformInt(1, 2), c = rng.uniformInt(1, 3);
    int64_t h = rng.uniformInt(1, 11), w = rng.uniformInt(1, 11);
    Int2 o(rng.uniformInt(1, 8), rng.uniformInt(1, 8));
    Tensor x = rng.tensor({n, c, h, w});
    Ref rx(x), avg(Shape{n, c, o.h, o.w}), mx(Shape{n, c, o.h, o.w});
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch)
        for (int64_t oy = 0; oy < o.h; ++oy)
          for (int64_t ox = 0; ox < o.w; ++ox) {
            int64_t y0 = int64_t(std::floor(double(oy * h) / double(o.h)));
            int64_t y1 = int64_t(std::ceil(double((oy + 1) * h) / double(o.h)));
            int64_t x0 = int64_t(std::floor(double(ox * w) / double(o.w)));
            int64_t x1 = int64_t(std::ceil(double((ox + 1) * w) / double(o.w)));
            double s = 0, m = -INFINITY;
            for (int64_t yy = y0; yy < y1; ++yy)
              for (int64_t xx = x0; xx < x1; ++xx) {
                s += rx({b, ch, yy, xx});
                m = std::max(m, rx({b, ch, yy, xx}));
              }
            avg({b, ch, oy, ox}) = s / double((y1 - y0) * (x1 - x0));
            mx({b, ch, oy, ox}) = m;
          }
    INFO("x " << shapeOf(x.shape()) << " out " << o.str());
    requireClose(rt::adaptiveAvgPool2d(x, o), avg, ElementwiseTol);
    requireClose(rt::adaptiveMaxPool2d(x, o), mx, Exact);
  }
  Tensor x = rng.tensor({2, 5, 7, 6});
  Ref rx(x), g(Shape{2, 5, 1, 1}), gm(Shape{2, 5, 1, 1});
  for (int64_t p = 0; p < 10; ++p) {
    double s = 0, m = -INFINITY;
    for (int64_t i = 0; i < 42; ++i) {
      s += rx.v[p * 42 + i];
      m = std::max(m, rx.v[p * 42 + i]);
    }
    g.v[p] = s / 42;
    gm.v[p] = m;
  }
  requireClose(rt::globalAvgPool2d(x), g, ElementwiseTol);
  requireClose(rt::globalMaxPool2d(x), gm, Exact);
  // A 1x1 adaptive average is the plane's mean: planes of 169 floats
  // (21 vectors of 8 and one more), many of them, in parallel.
  Tensor big = rng.tensor({2, 300, 13, 13});
  Ref rb(big), mean(Shape{2, 300, 1, 1});
  for (int64_t p = 0; p < 600; ++p) {
    double s = 0;
    for (int64_t i = 0; i < 169; ++i)
      s += rb.v[p * 169 + i];
    mean.v[p] = s / 169;
  }
  requireClose(rt::adaptiveAvgPool2d(big, Int2(1)), mean, ElementwiseTol);
  CHECK(rt::adaptiveAvgPool2d(big, Int2(1))
            .bitwiseEqual(rt::globalAvgPool2d(big)));
}

TEST_CASE("pool errors name the op and the shapes", "[pool][errors]") {
  Tensor x = Tensor::zeros({1, 2, 4, 4});
  REQUIRE_THROWS_WITH(rt::maxPool2d(x, {.kernel = 3, .padding = 2}),
                      Catch::Contains("max_pool2d: padding 2x2 must be "
                                      "between 0 and half the kernel size "
                                      "3x3"));
  REQUIRE_THROWS_WITH(rt::avgPool2d(x, {.kernel = 5}),
                      Catch::Contains("avg_pool2d: kernel 5x5 (dilation 1x1, "
                                      "padding 0x0) does not fit input "
                                      "(1, 2, 4, 4)"));
  REQUIRE_THROWS_WITH(rt::avgPool2d(x, {.kernel = 2, .dilation = 2}),
                      Catch::Contains("avg_pool2d: dilation 2x2 is not "
                                      "supported"));
  REQUIRE_THROWS_WITH(rt::maxPool2d(Tensor::zeros({4, 4}), {.kernel = 2}),
                      Catch::Contains("max_pool2d: input must be 4-D "
                                      "(N, C, H, W) or 3-D (C, H, W), got "
                                      "(4, 4)"));
  REQUIRE_THROWS_WITH(rt::maxPool2d(x, {.kernel = 2, .stride = Int2(0)}),
                      Catch::Contains("max_pool2d: stride 0x0 must be "
                                      "positive"));
  REQUIRE_THROWS_WITH(rt::adaptiveAvgPool2d(x, {0, 2}),
                      Catch::Contains("adaptive_avg_pool2d: output size 0x2 "
                                      "must be positive"));
  REQUIRE_THROWS_WITH(rt::globalAvgPool2d(Tensor::zeros({1, 2, 0, 3})),
                      Catch::Contains("global_avg_pool2d: input (1, 2, 0, 3) "
                                      "has an empty spatial size"));
}
