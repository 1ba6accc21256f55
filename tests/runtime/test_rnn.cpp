//===- test_rnn.cpp - lstm, gru and rnn kernels by hand -------------------===//
//
// The recurrent kernel on tiny cases (hidden size 2, one or two batch
// entries, two steps) against values computed once with NumPy by a direct
// loop over the ONNX equations (one step at a time, one batch entry at a
// time, gates i, o, f, c and z, r, h as the ONNX operator spec writes
// them), pasted here: a bidirectional LSTM with peepholes, a GRU with
// sequence_lens in both directions and both linear_before_reset modes, the
// same GRU with layout 1, and an RNN with Tanh and Relu; float64 and
// float16 inputs.
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include "tm/runtime/Kernels.h"

using namespace tmg;
using namespace tmg::rt;
using tmtest::checkValues;
using tmtest::floats;

namespace {

// The inputs of the NumPy computation (W, R, B are (i % m - k) * s over a
// flat index i, written out).
const std::vector<float> kW = {-0.3f, -0.2f, -0.1f, 0.0f, 0.1f,  0.2f,  0.3f, -0.3f,
                               -0.2f, -0.1f, 0.0f,  0.1f, 0.2f,  0.3f,  -0.3f, -0.2f,
                               -0.1f, 0.0f,  0.1f,  0.2f, 0.3f,  -0.3f, -0.2f, -0.1f,
                               0.0f,  0.1f,  0.2f,  0.3f, -0.3f, -0.2f, -0.1f, 0.0f};
const std::vector<float> kR = {-0.3f,  -0.15f, 0.0f,   0.15f,  0.3f,  -0.3f,  -0.15f, 0.0f,
                               0.15f,  0.3f,   -0.3f,  -0.15f, 0.0f,  0.15f,  0.3f,   -0.3f,
                               -0.15f, 0.0f,   0.15f,  0.3f,   -0.3f, -0.15f, 0.0f,   0.15f,
                               0.3f,   -0.3f,  -0.15f, 0.0f,   0.15f, 0.3f,   -0.3f,  -0.15f};
const std::vector<float> kB = {-0.2f,  -0.15f, -0.1f,  -0.05f, 0.0f,   0.05f,  0.1f,   0.15f,
                               0.2f,   -0.2f,  -0.15f, -0.1f,  -0.05f, 0.0f,   0.05f,  0.1f,
                               0.15f,  0.2f,   -0.2f,  -0.15f, -0.1f,  -0.05f, 0.0f,   0.05f,
                               0.1f,   0.15f,  0.2f,   -0.2f,  -0.15f, -0.1f,  -0.05f, 0.0f};

std::vector<float> head(const std::vector<float> &v, size_t n) {
  return std::vector<float>(v.begin(), v.begin() + n);
}

} // namespace

TEST_CASE("lstm: bidirectional with bias, initial state and peepholes", "[runtime][rnn]") {
  RnnParams p;
  p.cell = RnnCell::Lstm;
  p.direction = "bidirectional";
  Tensor x = floats({2, 1, 2}, {0.5f, -1.0f, 1.5f, 0.25f});
  Tensor w = floats({2, 8, 2}, kW), r = floats({2, 8, 2}, kR), b = floats({2, 16}, kB);
  Tensor h0 = floats({2, 1, 2}, {0.1f, -0.2f, 0.3f, 0.0f});
  Tensor c0 = floats({2, 1, 2}, {-0.5f, 0.4f, 0.2f, 0.1f});
  Tensor pp = floats({2, 6}, {-0.3f, -0.1f, 0.1f, 0.3f, -0.3f, -0.1f, 0.1f, 0.3f, -0.3f, -0.1f,
                              0.1f, 0.3f});
  std::vector<Tensor> out = recurrent(p, x, w, r, b, Tensor(), h0, c0, pp);
  REQUIRE(out.size() == 3);
  // Y (seq, dirs, batch, hidden): the reverse direction's step 0 comes last.
  checkValues(out[0], {2, 2, 1, 2},
              {-0.121416672, 0.191605864, -0.0438341134, -0.00494219327, 0.0324244487,
               0.0261715047, -0.085164684, -0.0226907482});
  checkValues(out[1], {2, 1, 2},
              {0.0324244487, 0.0261715047, -0.0438341134, -0.00494219327});
  checkValues(out[2], {2, 1, 2}, {0.0697200409, 0.0464421382, -0.0705345731, -0.0119715629});

  SECTION("float64 gives the same values") {
    auto f64 = [](const Tensor &t) { return cast(t, DType::Float64); };
    std::vector<Tensor> d =
        recurrent(p, f64(x), f64(w), f64(r), f64(b), Tensor(), f64(h0), f64(c0), f64(pp));
    CHECK(d[0].dtype() == DType::Float64);
    checkValues(d[1], {2, 1, 2}, {0.0324244487, 0.0261715047, -0.0438341134, -0.00494219327});
  }
  SECTION("float16 computes in float32 and gives float16 back") {
    auto f16 = [](const Tensor &t) { return cast(t, DType::Float16); };
    std::vector<Tensor> h =
        recurrent(p, f16(x), f16(w), f16(r), f16(b), Tensor(), f16(h0), f16(c0), f16(pp));
    CHECK(h[2].dtype() == DType::Float16);
    CHECK(h[2].at(0) == Approx(0.0697200409).margin(1e-3));
  }
}

TEST_CASE("gru: sequence_lens, reverse, linear_before_reset and layout 1", "[runtime][rnn]") {
  RnnParams p;
  p.cell = RnnCell::Gru;
  // (seq 2, batch 2, input 2); batch entry 1 has length 1.
  Tensor x = floats({2, 2, 2}, {0.5f, -1.0f, 0.2f, 0.3f, 1.5f, 0.25f, -0.7f, 0.9f});
  Tensor w = floats({1, 6, 2}, head(kW, 12)), r = floats({1, 6, 2}, head(kR, 12)),
         b = floats({1, 12}, head(kB, 12)), h0 = floats({1, 2, 2}, {0.1f, -0.2f, 0.3f, 0.4f});
  Tensor lens = Tensor::fromInts({2}, {2, 1}, DType::Int32);
  struct Case {
    bool lbr;
    const char *dir;
    std::vector<double> y, yh;
  };
  // Y (seq, 1, batch, hidden): entry 1's step 1 is past its length, zero.
  Case cases[] = {
      {false, "forward",
       {-0.0400905344, -0.172869705, 0.0371183684, 0.158299828, -0.311956411, -0.0811141735, 0,
        0},
       {-0.311956411, -0.0811141735, 0.0371183684, 0.158299828}},
      {false, "reverse",
       {-0.223896647, -0.104537526, 0.0371183684, 0.158299828, -0.26176745, -0.105767394, 0, 0},
       {-0.223896647, -0.104537526, 0.0371183684, 0.158299828}},
      {true, "forward",
       {-0.0020501067, -0.150201612, 0.0859749693, 0.191818376, -0.265263001, -0.0500912684, 0,
        0},
       {-0.265263001, -0.0500912684, 0.0859749693, 0.191818376}},
      {true, "reverse",
       {-0.16667757, -0.0692826021, 0.0859749693, 0.191818376, -0.23231984, -0.0789011581, 0, 0},
       {-0.16667757, -0.0692826021, 0.0859749693, 0.191818376}},
  };
  for (const Case &c : cases) {
    INFO("linear_before_reset " << c.lbr << ", " << c.dir);
    p.linearBeforeReset = c.lbr;
    p.direction = c.dir;
    p.batchFirst = false;
    std::vector<Tensor> out = recurrent(p, x, w, r, b, lens, h0);
    REQUIRE(out.size() == 2);
    checkValues(out[0], {2, 1, 2, 2}, c.y);
    checkValues(out[1], {1, 2, 2}, c.yh);

    // Layout 1: x (batch, seq, input), y (batch, seq, 1, hidden), y_h (batch, 1, hidden).
    p.batchFirst = true;
    Tensor xb = x.permuted({1, 0, 2}).contiguous(),
           hb = h0.permuted({1, 0, 2}).contiguous();
    std::vector<Tensor> bf = recurrent(p, xb, w, r, b, lens, hb);
    Tensor ywant = floats({2, 1, 2, 2}, std::vector<float>(c.y.begin(), c.y.end()));
    std::vector<double> yb, hwant;
    Tensor yt = ywant.permuted({2, 0, 1, 3}).contiguous();
    for (int64_t i = 0; i < yt.numel(); ++i)
      yb.push_back(yt.at(i));
    checkValues(bf[0], {2, 2, 1, 2}, yb);
    checkValues(bf[1], {2, 1, 2}, c.yh); // one direction: the same order
  }
}

TEST_CASE("rnn: tanh and relu, a zero length and bad inputs", "[runtime][rnn]") {
  RnnParams p;
  p.cell = RnnCell::Rnn;
  Tensor x = floats({2, 1, 2}, {0.5f, -1.0f, 1.5f, 0.25f});
  Tensor w = floats({1, 2, 2}, {0.3f, -0.2f, 0.1f, 0.4f}),
         r = floats({1, 2, 2}, {0.5f, 0.1f, -0.3f, 0.2f}),
         b = floats({1, 4}, {0.05f, -0.1f, 0.2f, 0.0f}), h0 = floats({1, 1, 2}, {0.1f, -0.2f});
  std::vector<Tensor> out = recurrent(p, x, w, r, b, Tensor(), h0);
  checkValues(out[0], {2, 1, 1, 2}, {0.558052216, -0.477700012, 0.707048036, -0.112477706});
  checkValues(out[1], {1, 1, 2}, {0.707048036, -0.112477706});
  p.activations = {rnnActivation("relu")};
  out = recurrent(p, x, w, r, b, Tensor(), h0);
  checkValues(out[0], {2, 1, 1, 2}, {0.63, 0, 0.965, 0});

  // A sequence of length 0: no step, zero outputs and a zero final state.
  out = recurrent(p, x, w, r, b, Tensor::fromInts({1}, {0}, DType::Int64), h0);
  checkValues(out[0], {2, 1, 1, 2}, {0, 0, 0, 0});
  checkValues(out[1], {1, 1, 2}, {0, 0});

  CHECK_THROWS_WITH(recurrent(p, x, floats({1, 2, 3}, {0, 0, 0, 0, 0, 0}), r, b, Tensor(), h0),
                    Catch::Contains("rnn: the weight must have shape (1, 2, 2), got (1, 2, 3)"));
  CHECK_THROWS_WITH(recurrent(p, cast(x, DType::Int32), w, r, b, Tensor(), h0),
                    Catch::Contains("rnn: the input must be floating point"));
  CHECK_THROWS_WITH(
      recurrent(p, x, w, r, b, Tensor::fromInts({1}, {3}, DType::Int64), h0),
      Catch::Contains("sequence_lens[0] = 3 is outside [0, 2]"));
  CHECK_THROWS_WITH(rnnActivation("Gelu"), Catch::Contains("unknown recurrent activation 'Gelu'"));
  CHECK(rnnActivation("leakyrelu").alpha == Approx(0.01));
  CHECK(rnnActivation("HardSigmoid", 0.3).beta == Approx(0.5));
}
