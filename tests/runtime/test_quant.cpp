//===- test_quant.cpp - Fake quantisation against a reference -------------===//
#include "Reference.h"

using namespace tmtest;
namespace rt = tmg::rt;

namespace {
/// MegEngine's fake_quant in double: round half away from zero.
double refFakeQuant(double x, double s, double zp, double qmin, double qmax) {
  double q = std::round(double(float(x / s))) + zp;
  q = std::min(std::max(q, qmin), qmax);
  return (q - zp) * s;
}
} // namespace

TEST_CASE("fake_quantize per tensor", "[quant]") {
  Rng rng(701);
  struct Q {
    float scale;
    int64_t zp, qmin, qmax;
  };
  for (Q q : {Q{0.1f, 0, -128, 127}, Q{0.05f, 10, 0, 255}, Q{0.5f, -3, -8, 7},
              Q{1.0f, 0, 0, 0}}) {
    for (Shape s : {Shape{5, 7}, Shape{}, Shape{0}, Shape{300, 301}}) {
      Tensor x = rng.tensor(s, -20, 20);
      Ref want(x);
      for (double &v : want.v)
        v = refFakeQuant(v, q.scale, double(q.zp), double(q.qmin),
                         double(q.qmax));
      INFO("scale " << q.scale << " zp " << q.zp << " [" << q.qmin << ", "
                    << q.qmax << "] " << shapeOf(s));
      requireClose(rt::fakeQuantize(x, q.scale, q.zp, q.qmin, q.qmax), want,
                   ElementwiseTol);
    }
  }
  // Halves round away from zero: 0.25 / 0.5 = 0.5 -> 1, -0.25 -> -1.
  Tensor h = Tensor::fromFloats({3}, {0.25f, -0.25f, 0.75f});
  CHECK(Ref(rt::fakeQuantize(h, 0.5f, 0, -10, 10)).v ==
        std::vector<double>{0.5, -0.5, 1.0});
}

TEST_CASE("fake_quantize per channel along any axis", "[quant]") {
  Rng rng(702);
  for (Shape s : {Shape{4, 3, 5}, Shape{6}, Shape{2, 8, 3, 3}})
    for (int64_t axis = -int64_t(s.size()); axis < int64_t(s.size()); ++axis) {
      int64_t ax = axis < 0 ? axis + int64_t(s.size()) : axis;
      int64_t c = s[ax];
      Tensor scale = rng.tensor({c}, 0.02, 0.5);
      DType zt = rng.coin() ? DType::Int32 : DType::Int64;
      Tensor zp = rng.ints({c}, -5, 5, zt);
      Tensor x = rng.tensor(s, -10, 10);
      Ref want(x), rs(scale), rz(zp);
      for (int64_t k = 0; k < want.numel(); ++k) {
        int64_t ch = unravel(k, s)[ax];
        want.v[k] = refFakeQuant(want.v[k], float(rs.v[ch]), rz.v[ch], -16, 15);
      }
      INFO(shapeOf(s) << " axis " << axis);
      requireClose(rt::fakeQuantizePerChannel(x, scale, zp, axis, -16, 15),
                   want, ElementwiseTol);
    }
}

TEST_CASE("fake_quantize errors name the op and the shapes",
          "[quant][errors]") {
  Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(rt::fakeQuantize(x, 0.0f, 0, -128, 127),
                      Catch::Contains("fake_quantize: scale 0 must be positive "
                                      "and finite"));
  REQUIRE_THROWS_WITH(rt::fakeQuantize(x, 0.1f, 200, -128, 127),
                      Catch::Contains("fake_quantize: zero point 200 must be "
                                      "an integer in [-128, 127]"));
  REQUIRE_THROWS_WITH(rt::fakeQuantize(x, 0.1f, 0, 5, 4),
                      Catch::Contains("fake_quantize: qmin 5 is greater than "
                                      "qmax 4"));
  REQUIRE_THROWS_WITH(
      rt::fakeQuantizePerChannel(x, Tensor::full({2}, 0.1), Tensor::zeros({2}),
                                 1, -128, 127),
      Catch::Contains("fake_quantize_per_channel: scale (2,) and zero point "
                      "(2,) must have 3 elements (axis 1 of input (2, 3))"));
  REQUIRE_THROWS_WITH(
      rt::fakeQuantizePerChannel(x, Tensor::fromFloats({2}, {0.1f, -1.0f}),
                                 Tensor::zeros({2}), 0, -128, 127),
      Catch::Contains("fake_quantize_per_channel: scale -1 of channel 1 must "
                      "be positive and finite"));
}
