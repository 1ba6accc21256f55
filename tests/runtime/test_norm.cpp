//===- test_norm.cpp - batch_norm, layer_norm, softmax against references -===//
#include "Reference.h"

#include <limits>

using namespace tmtest;
namespace rt = tmg::rt;

/// Normalisation: float32 rounding of a handful of operations per element.
constexpr Tol NormTol{1e-5, 1e-5};

TEST_CASE("batch_norm: inference normalisation over axis 1", "[norm]") {
  Rng rng(401);
  for (Shape xs : {Shape{4, 3}, Shape{2, 5, 7}, Shape{2, 3, 6, 5},
                   Shape{1, 16, 40, 40}, Shape{0, 3, 2}, Shape{2, 4, 0}})
    for (bool affine : {false, true})
      for (bool fourD : {false, true}) {
        int64_t c = xs[1];
        Shape ps = fourD ? Shape{1, c, 1, 1} : Shape{c};
        Tensor x = rng.tensor(xs, -3, 3);
        Tensor mean = rng.tensor(ps), var = rng.tensor(ps, 0.1, 2.0);
        Tensor w = affine ? rng.tensor(ps) : Tensor();
        Tensor b = affine ? rng.tensor(ps) : Tensor();
        double eps = 1e-3;
        Ref want(x), rm(mean), rv(var);
        int64_t inner =
            xs.size() > 2
                ? tmg::shapeNumel(llvm::ArrayRef<int64_t>(xs).drop_front(2))
                : 1;
        for (int64_t i = 0; i < want.numel(); ++i) {
          int64_t ch = (i / inner) % c;
          double v = (want.v[i] - rm.v[ch]) / std::sqrt(rv.v[ch] + eps);
          if (affine)
            v = v * w.data<float>()[ch] + b.data<float>()[ch];
          want.v[i] = v;
        }
        INFO(shapeOf(xs) << " params " << shapeOf(ps) << " affine " << affine);
        requireClose(rt::batchNorm(x, mean, var, w, b, eps), want, NormTol);
      }
}

TEST_CASE("layer_norm: over the trailing dimensions", "[norm]") {
  Rng rng(402);
  const std::vector<std::pair<Shape, size_t>> cases = {
      {{4, 10}, 1}, {{2, 3, 8}, 1}, {{2, 3, 8}, 2}, {{2, 3, 4, 5}, 3},
      {{7}, 1},     {{0, 6}, 1},    {{300, 768}, 1}};
  for (const auto &[xs, k] : cases)
    for (bool affine : {false, true}) {
      Shape ns(xs.end() - k, xs.end());
      Tensor x = rng.tensor(xs, -2, 5);
      Tensor w = affine ? rng.tensor(ns) : Tensor();
      Tensor b = affine ? rng.tensor(ns) : Tensor();
      int64_t d = tmg::shapeNumel(ns);
      Ref want(x);
      for (int64_t r = 0; r < want.numel() / d; ++r) {
        double mu = 0, var = 0;
        for (int64_t i = 0; i < d; ++i)
          mu += want.v[r * d + i];
        mu /= double(d);
        for (int64_t i = 0; i < d; ++i)
          var += (want.v[r * d + i] - mu) * (want.v[r * d + i] - mu);
        var /= double(d);
        for (int64_t i = 0; i < d; ++i) {
          double v = (want.v[r * d + i] - mu) / std::sqrt(var + 1e-5);
          if (affine)
            v = v * w.data<float>()[i] + b.data<float>()[i];
          want.v[r * d + i] = v;
        }
      }
      INFO(shapeOf(xs) << " normalized " << shapeOf(ns) << " affine "
                       << affine);
      requireClose(rt::layerNorm(x, ns, w, b), want, NormTol);
    }
}

TEST_CASE("softmax and log_softmax along any axis", "[norm]") {
  Rng rng(403);
  for (Shape xs : {Shape{5}, Shape{3, 7}, Shape{2, 3, 4}, Shape{2, 300, 3},
                   Shape{4, 1, 5}, Shape{2, 0, 3}, Shape{64, 1000}})
    for (int64_t axis = -int64_t(xs.size()); axis < int64_t(xs.size());
         ++axis) {
      // Large offsets check the max subtraction.
      Tensor x = rng.tensor(xs, -30, 30);
      int64_t ax = axis < 0 ? axis + int64_t(xs.size()) : axis;
      Ref rx(x), sm(rx), lsm(rx);
      for (int64_t i = 0; i < rx.numel(); ++i) {
        auto idx = unravel(i, xs);
        if (idx[ax] != 0)
          continue; // one pass per line along the axis
        double m = -INFINITY, s = 0;
        for (int64_t l = 0; l < xs[ax]; ++l) {
          idx[ax] = l;
          m = std::max(m, rx(idx));
        }
        for (int64_t l = 0; l < xs[ax]; ++l) {
          idx[ax] = l;
          s += std::exp(rx(idx) - m);
        }
        for (int64_t l = 0; l < xs[ax]; ++l) {
          idx[ax] = l;
          sm(idx) = std::exp(rx(idx) - m) / s;
          lsm(idx) = rx(idx) - m - std::log(s);
        }
      }
      INFO(shapeOf(xs) << " axis " << axis);
      requireClose(rt::softmax(x, axis), sm, NormTol);
      requireClose(rt::logSoftmax(x, axis), lsm, NormTol);
    }
  // Extreme values stay finite.
  Tensor big = Tensor::fromFloats({3}, {1000.f, 1000.f, -1000.f});
  Tensor s = rt::softmax(big);
  CHECK(s.data<float>()[0] == Approx(0.5));
  CHECK(s.data<float>()[2] == 0.0f);
  CHECK(rt::logSoftmax(big).data<float>()[0] == Approx(-std::log(2.0)));
}

TEST_CASE("softmax: rows of every length around the vector width, NaN and -inf",
          "[norm]") {
  // The row maximum is taken 16 lanes at a time: a NaN anywhere in a row
  // makes the row NaN; -inf entries give 0; the maximum may sit in any
  // lane or the tail.
  Rng rng(404);
  for (int64_t len = 1; len <= 50; ++len)
    for (int variant = 0; variant < 3; ++variant) {
      Tensor x = rng.tensor({3, len}, -20, 20);
      float *p = x.data<float>();
      int64_t at = rng.uniformInt(0, len - 1);
      if (variant == 1)
        p[len + at] = std::numeric_limits<float>::quiet_NaN();
      if (variant == 2)
        p[len + at] = 1e30f; // one huge entry: the row is one-hot
      p[2 * len + rng.uniformInt(0, len - 1)] = -std::numeric_limits<float>::infinity();
      INFO("len " << len << " variant " << variant << " at " << at);
      Tensor y = rt::softmax(x, -1);
      const float *q = y.data<float>();
      for (int64_t r = 0; r < 3; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t l = 0; l < len; ++l)
          m = std::max(m, double(p[r * len + l]));
        for (int64_t l = 0; l < len; ++l)
          s += std::exp(double(p[r * len + l]) - m);
        for (int64_t l = 0; l < len; ++l) {
          double want = std::exp(double(p[r * len + l]) - m) / s;
          // (A row of only -inf is NaN, as in PyTorch: -inf - -inf.)
          if ((r == 1 && variant == 1) || std::isnan(want))
            REQUIRE(std::isnan(q[r * len + l]));
          else
            REQUIRE(q[r * len + l] == Approx(want).margin(1e-6));
        }
      }
    }
}

TEST_CASE("norm errors name the op and the shapes", "[norm][errors]") {
  Tensor x = Tensor::zeros({2, 3, 4});
  REQUIRE_THROWS_WITH(rt::batchNorm(x, Tensor::zeros({4}), Tensor::zeros({3})),
                      Catch::Contains("batch_norm: running mean (4,) has 4 "
                                      "elements but input (2, 3, 4) has 3 "
                                      "channels"));
  REQUIRE_THROWS_WITH(
      rt::batchNorm(Tensor::zeros({3}), Tensor::zeros({3}), Tensor::zeros({3})),
      Catch::Contains("batch_norm: input must be at least 2-D "
                      "(N, C, ...), got (3,)"));
  REQUIRE_THROWS_WITH(rt::layerNorm(x, {3}),
                      Catch::Contains("layer_norm: normalized shape (3,) must "
                                      "be the trailing dimensions of input "
                                      "(2, 3, 4)"));
  REQUIRE_THROWS_WITH(rt::layerNorm(x, {3, 4}, Tensor::zeros({12})),
                      Catch::Contains("layer_norm: weight (12,) must have the "
                                      "normalized shape (3, 4)"));
  REQUIRE_THROWS_WITH(rt::softmax(x, 3),
                      Catch::Contains("softmax: axis 3 is out of range for "
                                      "shape (2, 3, 4)"));
  REQUIRE_THROWS_WITH(rt::logSoftmax(Tensor::fromInts({2}, {1, 2}), 0),
                      Catch::Contains("log_softmax: input (2,) must be "
                                      "float32, got int64"));
}
