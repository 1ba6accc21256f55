//===- test_conv.cpp - Convolutions against direct-loop references --------===//
#include "ConvReference.h"

#include <thread>

using namespace tmtest;
namespace rt = tmg::rt;
using rt::Activation;
using rt::Int2;

namespace {

void checkConv2d(Rng &rng, const ConvCase &k) {
  INFO(describeCase(k));
  Tol tol = gemmTol(k.c / k.groups * k.kh * k.kw);
  Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
  Tensor w = rng.tensor({k.o, k.c / k.groups, k.kh, k.kw});
  Tensor b = k.bias ? rng.tensor({k.o}) : Tensor();
  rt::Conv2dParams p{.stride = k.stride,
                     .padding = k.pad,
                     .paddingEnd = k.padEnd,
                     .dilation = k.dilation,
                     .groups = k.groups,
                     .activation = k.act};
  Ref rb = k.bias ? Ref(b) : Ref();
  requireClose(rt::conv2d(x, w, b, p),
               refConv2d(Ref(x), Ref(w), k.bias ? &rb : nullptr, k), tol);
}

} // namespace

TEST_CASE("conv2d: random configurations", "[conv]") {
  Rng rng(201);
  int checked = 0;
  while (checked < 120) {
    ConvCase k;
    k.groups = rng.coin(0.3) ? rng.uniformInt(2, 4) : 1;
    k.n = rng.uniformInt(1, 2);
    k.c = k.groups * rng.uniformInt(1, 4);
    k.o = k.groups * rng.uniformInt(1, 5);
    k.h = rng.uniformInt(1, 13);
    k.w = rng.uniformInt(1, 13);
    k.kh = rng.uniformInt(1, 4);
    k.kw = rng.uniformInt(1, 4);
    k.stride = Int2(rng.uniformInt(1, 3), rng.uniformInt(1, 3));
    k.dilation = Int2(rng.uniformInt(1, 2), rng.uniformInt(1, 2));
    k.pad = Int2(rng.uniformInt(0, 2), rng.uniformInt(0, 2));
    k.padEnd = rng.coin(0.3) ? Int2(rng.uniformInt(0, 2), rng.uniformInt(0, 2))
                             : k.pad;
    k.bias = rng.coin(0.7);
    k.act = Activation(rng.uniformInt(0, 2));
    if (tmg::rt::convOutputSize(k.h, k.kh, k.stride.h, k.pad.h, k.padEnd.h,
                                k.dilation.h) <= 0 ||
        tmg::rt::convOutputSize(k.w, k.kw, k.stride.w, k.pad.w, k.padEnd.w,
                                k.dilation.w) <= 0)
      continue;
    checkConv2d(rng, k);
    ++checked;
  }
}

TEST_CASE("conv2d: depthwise fast path", "[conv]") {
  Rng rng(202);
  for (int64_t mult : {1, 2})
    for (int64_t s : {1, 2})
      for (int64_t d : {1, 2})
        for (int64_t kk : {3, 5}) {
          ConvCase k{2, 6, 11, 14, 6 * mult, kk, kk, 6};
          k.stride = s;
          k.dilation = d;
          k.pad = kk / 2;
          k.padEnd = k.pad;
          k.act = Activation::Relu6;
          checkConv2d(rng, k);
        }
  // Large enough to run planes in parallel.
  ConvCase big{1, 96, 28, 28, 96, 3, 3, 96};
  big.pad = big.padEnd = 1;
  checkConv2d(rng, big);
}

TEST_CASE("conv2d: depthwise strides, dilations and plane edges", "[conv]") {
  // The depthwise kernel cuts each padded plane by stride phase and runs
  // the output as one flat sequence of 128-position blocks: cover
  // strides 1..3 per axis, dilation with stride, kernels 1x1 to 7x7 and
  // non-square, asymmetric padding, planes narrower than a vector and of
  // one row or column, outputs ending mid-vector, and many planes run in
  // parallel (a row's vector may run into the next row, never into the
  // next plane).
  Rng rng(208);
  struct Case {
    int64_t h, w, kh, kw;
    Int2 stride, dilation, pad, padEnd;
  };
  for (Case c : {Case{1, 1, 1, 1, 1, 1, 0, 0}, Case{1, 9, 1, 3, 1, 1, 0, 0},
                 Case{9, 1, 3, 1, Int2(2, 1), 1, Int2(1, 0), Int2(1, 0)},
                 Case{7, 7, 7, 7, 1, 1, 3, 3}, Case{13, 17, 5, 3, Int2(3, 2), 1, Int2(2, 1), Int2(0, 2)},
                 Case{20, 23, 3, 3, 2, 2, 2, Int2(1, 0)}, Case{33, 31, 7, 7, 1, 1, 3, 3},
                 Case{40, 19, 3, 5, Int2(1, 3), Int2(2, 1), 1, 2}}) {
    for (int64_t mult : {1, 3}) {
      ConvCase k{2, 5, c.h, c.w, 5 * mult, c.kh, c.kw, 5};
      k.stride = c.stride;
      k.dilation = c.dilation;
      k.pad = c.pad;
      k.padEnd = c.padEnd;
      k.act = Activation(mult % 3);
      if (tmg::rt::convOutputSize(k.h, k.kh, k.stride.h, k.pad.h, k.padEnd.h, k.dilation.h) > 0 &&
          tmg::rt::convOutputSize(k.w, k.kw, k.stride.w, k.pad.w, k.padEnd.w, k.dilation.w) > 0)
        checkConv2d(rng, k);
    }
  }
  ConvCase many{1, 300, 9, 9, 300, 5, 5, 300};
  many.pad = many.padEnd = 2;
  checkConv2d(rng, many);
  // A stride far larger than the plane: one output row and column.
  ConvCase far{1, 4, 3, 3, 4, 3, 3, 4};
  far.stride = Int2(int64_t(1) << 30, int64_t(1) << 30);
  far.pad = far.padEnd = 1;
  checkConv2d(rng, far);
  // Strides and paddings near 2^40: a 5x5 output whose stride-phase
  // sub-planes would number 2^78 is refused, not wrapped around.
  Tensor x = rng.tensor({1, 2, 3, 3}), w = rng.tensor({2, 1, 3, 3});
  rt::Conv2dParams huge{.stride = Int2(int64_t(1) << 39), .padding = Int2(int64_t(1) << 40),
                        .groups = 2};
  REQUIRE_THROWS_WITH(rt::conv2d(x, w, {}, huge),
                      Catch::Contains("needs more scratch than memory can hold"));
}

TEST_CASE("conv2d: depthwise square kernels on wide planes", "[conv]") {
  // The AVX-512 kernel for undilated 3x3, 5x5 and 7x7 kernels at
  // strides 1 or 2 computes 7 output rows (4 at vertical stride 2) by 16
  // columns at a time: cover rows wider than a vector and ending at every
  // lane, output heights that leave partial row blocks, vertical strides
  // 1-2 (and 3, which the polyphase kernel runs), paddings from none to
  // K / 2 and asymmetric ones, and a channel multiplier.
  Rng rng(209);
  int checked = 0;
  for (int64_t kk : {3, 5, 7})
    for (int64_t sw : {1, 2})
      for (int64_t w : {16, 17, 29, 30, 31, 33, 46, 50})
        for (int64_t pb = 0; pb <= kk / 2; ++pb)
          for (int64_t pe = 0; pe <= kk / 2; ++pe) {
            ConvCase k{1, 3, 9 + (w + pe) % 5, w, 3 * (1 + w % 2), kk, kk, 3};
            k.stride = Int2(1 + (w + pb) % 3, sw);
            k.pad = Int2(pe, pb);
            k.padEnd = Int2(pb, pe);
            k.act = Activation((w + pb + pe) % 3);
            k.bias = (w + pb) % 4 != 0;
            if (tmg::rt::convOutputSize(k.h, kk, k.stride.h, k.pad.h,
                                        k.padEnd.h, 1) > 0 &&
                tmg::rt::convOutputSize(k.w, kk, k.stride.w, k.pad.w,
                                        k.padEnd.w, 1) > 0) {
              checkConv2d(rng, k);
              ++checked;
            }
          }
  CHECK(checked > 400);
}

TEST_CASE("conv2d: channels-last inputs of depthwise convolutions", "[conv]") {
  // An (N, C, H, W) view of dense (N, H, W, C) data, as an exporter's
  // transpose makes it: the depthwise kernel reads it in place and writes
  // a channels-last result, bit for bit the result of the same values
  // stored (N, C, H, W). Cover channel counts ending mid-vector and
  // spanning several 64-channel chunks, rows ending mid-block of 8
  // pixels, planes narrower than a kernel, both strides, 3x3 / 5x5 / 7x7,
  // asymmetric padding, the activations, no bias, packed weights, two
  // images; and views the kernel does not take (a dilation, a 4x4 kernel,
  // a channel multiplier), whose results are dense.
  Rng rng(210);
  bool simd = rt::convMicroKernelAvailable();
  int checked = 0;
  for (int64_t kk : {3, 4, 5, 7})
    for (int64_t c : {3, 16, 20, 80, 130})
      for (int64_t s : {1, 2})
        for (int64_t w : {2, 7, 9, 17}) {
          int64_t n = c == 20 ? 2 : 1, h = 5 + (w + c) % 6;
          int64_t mult = c == 3 && w == 9 ? 2 : 1;
          int64_t dil = c == 16 && w == 17 ? 2 : 1;
          Int2 pad(kk / 2, (kk - 1) / 2 - (w % 2)),
              padEnd(kk / 2 - s + 1, kk / 2);
          if (pad.w < 0 || padEnd.h < 0 ||
              rt::convOutputSize(h, kk, s, pad.h, padEnd.h, dil) <= 0 ||
              rt::convOutputSize(w, kk, s, pad.w, padEnd.w, dil) <= 0)
            continue;
          INFO("k " << kk << " c " << c << " stride " << s << " w " << w
                    << " h " << h << " mult " << mult << " dilation " << dil);
          Tensor x = rng.tensor({n, h, w, c}, -2, 2).permuted({0, 3, 1, 2});
          REQUIRE(!x.isContiguous());
          Tensor wt = rng.tensor({c * mult, 1, kk, kk});
          Tensor b = (w + c) % 3 ? rng.tensor({c * mult}) : Tensor();
          rt::Conv2dParams p{.stride = s,
                             .padding = pad,
                             .paddingEnd = padEnd,
                             .dilation = dil,
                             .groups = c,
                             .activation = Activation((w + kk) % 3)};
          std::shared_ptr<const rt::PackedConvWeight> packed;
          if (w % 2 && simd) {
            packed = rt::packConvWeight(wt, c);
            p.packed = packed.get();
          }
          Tensor got = rt::conv2d(x, wt, b, p);
          Tensor want = rt::conv2d(x.contiguous(), wt, b, p);
          REQUIRE(want.isContiguous());
          CHECK(got.bitwiseEqual(want));
          bool channelsLast = simd && mult == 1 && dil == 1 && kk != 4;
          llvm::ArrayRef<int64_t> st = got.strides();
          int64_t oc = want.dim(1), ow = want.dim(3);
          if (channelsLast)
            CHECK((st[1] == 1 && st[3] == oc && st[2] == ow * oc));
          else
            CHECK(got.isContiguous());
          ++checked;
        }
  CHECK(checked > 100);
}

TEST_CASE("conv2d: pointwise and GEMM tiling paths", "[conv]") {
  Rng rng(203);
  // 1x1 stride 1: the input is the GEMM operand, no im2col.
  checkConv2d(rng, {2, 16, 9, 7, 24, 1, 1, 1});
  checkConv2d(rng, {1, 8, 5, 5, 12, 1, 1, 2});
  // 1x1 with stride or padding goes through im2col.
  ConvCase s2{1, 16, 9, 9, 8, 1, 1, 1};
  s2.stride = 2;
  checkConv2d(rng, s2);
  ConvCase p1{1, 4, 5, 5, 8, 1, 1, 1};
  p1.pad = p1.padEnd = 1;
  checkConv2d(rng, p1);
  // Many column tiles (K = 1152: 224-column tiles over 900 outputs).
  ConvCase tiles{1, 128, 30, 30, 16, 3, 3, 1};
  tiles.pad = tiles.padEnd = 1;
  checkConv2d(rng, tiles);
  // Few outputs, many channels: the output channels are split.
  ConvCase rows{1, 64, 7, 7, 128, 3, 3, 1};
  rows.pad = rows.padEnd = 1;
  rows.act = Activation::Relu;
  checkConv2d(rng, rows);
  // Batch and groups as separate work items.
  ConvCase grouped{3, 12, 10, 10, 18, 3, 3, 3};
  grouped.stride = 2;
  checkConv2d(rng, grouped);
  // Kernel as large as the padded input; empty batch.
  checkConv2d(rng, {1, 2, 4, 4, 3, 4, 4, 1});
  Tensor e =
      rt::conv2d(Tensor::zeros({0, 3, 5, 5}), Tensor::zeros({4, 3, 3, 3}));
  CHECK(shapeOf(e.shape()) == "(0, 4, 3, 3)");
}

TEST_CASE("conv2d: results do not depend on the thread count",
          "[conv][threads]") {
  Rng rng(204);
  for (ConvCase k : {ConvCase{1, 64, 14, 14, 128, 3, 3, 1},
                     ConvCase{1, 32, 20, 20, 32, 3, 3, 32},
                     ConvCase{2, 16, 15, 15, 16, 1, 1, 1}}) {
    k.pad = k.padEnd = k.kh / 2;
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w});
    Tensor w = rng.tensor({k.o, k.c / k.groups, k.kh, k.kw});
    rt::Conv2dParams p{.padding = k.pad, .groups = k.groups};
    Tensor one = withThreads(1, [&] { return rt::conv2d(x, w, {}, p); });
    Tensor two = withThreads(2, [&] { return rt::conv2d(x, w, {}, p); });
    INFO(describeCase(k));
    requireClose(two, Ref(one), gemmTol(k.c / k.groups * k.kh * k.kw));
  }
}

TEST_CASE("kernels can run concurrently on several threads",
          "[conv][threads]") {
  // Each caller gets its own scratch and OpenBLAS runs serially per call,
  // so concurrent kernels (e.g. independent branches) must not interfere.
  Rng rng(207);
  Tensor x = rng.tensor({1, 32, 20, 20});
  Tensor wg = rng.tensor({48, 32, 3, 3}), wd = rng.tensor({32, 1, 3, 3});
  rt::Conv2dParams pg{.padding = 1}, pd{.padding = 1, .groups = 32};
  Tensor wantG = rt::conv2d(x, wg, {}, pg), wantD = rt::conv2d(x, wd, {}, pd);
  Tensor wantS = rt::sum(x, {1, 3});
  std::vector<Tensor> got(8);
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i)
    workers.emplace_back([&, i] {
      got[2 * i] = rt::conv2d(x, i % 2 ? wd : wg, {}, i % 2 ? pd : pg);
      got[2 * i + 1] = rt::sum(x, {1, 3});
    });
  for (std::thread &t : workers)
    t.join();
  for (int i = 0; i < 4; ++i) {
    requireIdentical(got[2 * i], i % 2 ? wantD : wantG);
    requireIdentical(got[2 * i + 1], wantS);
  }
}

TEST_CASE("conv1d matches a direct reference", "[conv]") {
  Rng rng(205);
  for (int i = 0; i < 30; ++i) {
    int64_t groups = rng.coin(0.3) ? 2 : 1;
    int64_t n = rng.uniformInt(1, 2), c = groups * rng.uniformInt(1, 3);
    int64_t o = groups * rng.uniformInt(1, 4), l = rng.uniformInt(4, 20);
    int64_t kk = rng.uniformInt(1, 4), s = rng.uniformInt(1, 3);
    int64_t d = rng.uniformInt(1, 2), pb = rng.uniformInt(0, 2);
    int64_t pe = rng.coin() ? pb : rng.uniformInt(0, 2);
    if (l + pb + pe < d * (kk - 1) + 1)
      continue;
    Tensor x = rng.tensor({n, c, l}), w = rng.tensor({o, c / groups, kk});
    Tensor b = rng.tensor({o});
    ConvCase k{n, c, 1, l, o, 1, kk, groups};
    k.stride = Int2(1, s);
    k.pad = Int2(0, pb);
    k.padEnd = Int2(0, pe);
    k.dilation = Int2(1, d);
    Ref rb(b);
    Ref want = refConv2d(Ref(x.reshaped({n, c, 1, l})),
                         Ref(w.reshaped({o, c / groups, 1, kk})), &rb, k);
    want.shape = {want.shape[0], want.shape[1], want.shape[3]};
    INFO(describeCase(k));
    requireClose(rt::conv1d(x, w, b,
                            {.stride = s,
                             .padding = pb,
                             .paddingEnd = pe,
                             .dilation = d,
                             .groups = groups}),
                 want, GemmTol);
  }
}

TEST_CASE("conv_transpose2d matches a scatter reference", "[conv]") {
  Rng rng(206);
  int checked = 0;
  while (checked < 40) {
    int64_t groups = rng.coin(0.3) ? 2 : 1;
    int64_t n = rng.uniformInt(1, 2), c = groups * rng.uniformInt(1, 3);
    int64_t og = rng.uniformInt(1, 3), o = og * groups;
    int64_t h = rng.uniformInt(1, 7), wd = rng.uniformInt(1, 7);
    int64_t kh = rng.uniformInt(1, 4), kw = rng.uniformInt(1, 4);
    Int2 s(rng.uniformInt(1, 3), rng.uniformInt(1, 3));
    Int2 d(rng.uniformInt(1, 2), rng.uniformInt(1, 2));
    Int2 p(rng.uniformInt(0, 2), rng.uniformInt(0, 2));
    Int2 op(rng.uniformInt(0, std::max(s.h, d.h) - 1),
            rng.uniformInt(0, std::max(s.w, d.w) - 1));
    int64_t oh = (h - 1) * s.h - 2 * p.h + d.h * (kh - 1) + op.h + 1;
    int64_t ow = (wd - 1) * s.w - 2 * p.w + d.w * (kw - 1) + op.w + 1;
    if (oh <= 0 || ow <= 0)
      continue;
    Tensor x = rng.tensor({n, c, h, wd}), w = rng.tensor({c, og, kh, kw});
    Tensor b = rng.tensor({o});
    Ref rx(x), rw(w), rb(b), want(Shape{n, o, oh, ow});
    int64_t cg = c / groups;
    for (int64_t in = 0; in < n; ++in)
      for (int64_t oc = 0; oc < o; ++oc)
        for (int64_t i = 0; i < oh * ow; ++i)
          want({in, oc, i / ow, i % ow}) = rb.v[oc];
    for (int64_t in = 0; in < n; ++in)
      for (int64_t ci = 0; ci < c; ++ci)
        for (int64_t iy = 0; iy < h; ++iy)
          for (int64_t ix = 0; ix < wd; ++ix)
            for (int64_t j = 0; j < og; ++j)
              for (int64_t ki = 0; ki < kh; ++ki)
                for (int64_t kj = 0; kj < kw; ++kj) {
                  int64_t oy = iy * s.h - p.h + ki * d.h;
                  int64_t ox = ix * s.w - p.w + kj * d.w;
                  if (oy < 0 || oy >= oh || ox < 0 || ox >= ow)
                    continue;
                  want({in, (ci / cg) * og + j, oy, ox}) +=
                      rx({in, ci, iy, ix}) * rw({ci, j, ki, kj});
                }
    INFO("x " << shapeOf(x.shape()) << " w " << shapeOf(w.shape()) << " groups "
              << groups << " stride " << s.str() << " pad " << p.str()
              << " dilation " << d.str() << " outpad " << op.str());
    requireClose(rt::convTranspose2d(x, w, b,
                                     {.stride = s,
                                      .padding = p,
                                      .outputPadding = op,
                                      .dilation = d,
                                      .groups = groups}),
                 want, GemmTol);
    ++checked;
  }
  // Fused activation.
  Tensor x = rng.tensor({1, 4, 5, 5}), w = rng.tensor({4, 3, 2, 2});
  Tensor plain = rt::convTranspose2d(x, w, {}, {.stride = 2});
  Ref want(plain);
  for (double &v : want.v)
    v = std::max(v, 0.0);
  requireClose(rt::convTranspose2d(
                   x, w, {}, {.stride = 2, .activation = Activation::Relu}),
               want, Exact);
}

TEST_CASE("conv errors name the op and the shapes", "[conv][errors]") {
  Tensor x = Tensor::zeros({1, 3, 8, 8});
  REQUIRE_THROWS_WITH(
      rt::conv2d(x, Tensor::zeros({16, 4, 3, 3})),
      Catch::Contains("conv2d: input (1, 3, 8, 8) has 3 channels but weight "
                      "(16, 4, 3, 3) expects 4"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(Tensor::zeros({1, 6, 8, 8}), Tensor::zeros({16, 4, 3, 3}), {},
                 {.groups = 2}),
      Catch::Contains("conv2d: input (1, 6, 8, 8) has 6 channels but weight "
                      "(16, 4, 3, 3) expects 8 (4 per group, 2 groups)"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(Tensor::zeros({1, 6, 8, 8}), Tensor::zeros({16, 2, 3, 3}), {},
                 {.groups = 3}),
      Catch::Contains("conv2d: groups 3 does not divide the 16 output "
                      "channels of weight (16, 2, 3, 3)"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(x, Tensor::zeros({16, 3, 3, 3}), Tensor::zeros({8})),
      Catch::Contains("conv2d: bias (8,) does not match the 16 output "
                      "channels of weight (16, 3, 3, 3)"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(Tensor::zeros({3, 8, 8}), Tensor::zeros({16, 3, 3, 3})),
      Catch::Contains("conv2d: input must be 4-D (N, C, H, W), got (3, 8, 8)"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(Tensor::zeros({1, 3, 2, 2}), Tensor::zeros({4, 3, 5, 5})),
      Catch::Contains("conv2d: kernel 5x5 with dilation 1x1 does not fit "
                      "input (1, 3, 2, 2) padded by 0x0 / 0x0"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(x, Tensor::zeros({4, 3, 3, 3}), {}, {.stride = {0, 1}}),
      Catch::Contains("conv2d: stride 0x1 must be positive"));
  REQUIRE_THROWS_WITH(
      rt::conv2d(x, Tensor::zeros({4, 3, 3, 3}), {}, {.padding = -1}),
      Catch::Contains("conv2d: padding -1x-1 / -1x-1 must be "
                      "non-negative"));
  REQUIRE_THROWS_WITH(
      rt::conv1d(Tensor::zeros({1, 3, 8}), Tensor::zeros({4, 2, 3})),
      Catch::Contains("conv1d: input (1, 3, 8) has 3 channels but weight "
                      "(4, 2, 3) expects 2"));
  REQUIRE_THROWS_WITH(
      rt::convTranspose2d(x, Tensor::zeros({4, 2, 3, 3})),
      Catch::Contains("conv_transpose2d: input (1, 3, 8, 8) has 3 channels "
                      "but weight (4, 2, 3, 3) expects 4"));
  REQUIRE_THROWS_WITH(
      rt::convTranspose2d(x, Tensor::zeros({3, 2, 3, 3}), {},
                          {.stride = 2, .outputPadding = 2}),
      Catch::Contains("conv_transpose2d: output padding 2x2 must be smaller "
                      "than the stride 2x2 or the dilation 1x1"));
}

TEST_CASE("conv2d: writing into a given tensor", "[conv]") {
  // `into`, channels [2, 2 + O) of a larger buffer, receives the output on
  // every path (Winograd, im2col, 1x1, depthwise, OpenBLAS), with and
  // without a residual add: contiguous for one image, its images strided
  // for three (a concat's output at batch > 1). The buffer's other
  // channels are untouched; an `into` of another shape or layout is
  // ignored.
  Rng rng(210);
  struct Case {
    int64_t c, o, k, groups, stride;
  };
  for (int64_t n : {1, 3})
    for (bool residual : {false, true})
      for (rt::ConvGemm gemm : {rt::ConvGemm::Auto, rt::ConvGemm::Blas})
        for (Case k :
             {Case{8, 8, 3, 1, 1}, Case{3, 5, 3, 1, 2}, Case{6, 7, 1, 1, 1},
              Case{6, 6, 3, 6, 1}, Case{4, 9, 5, 1, 2}}) {
          CAPTURE(n, residual, int(gemm), k.c, k.o, k.k, k.groups, k.stride);
          Tensor x = rng.tensor({n, k.c, 10, 11});
          Tensor w = rng.tensor({k.o, k.c / k.groups, k.k, k.k}),
                 b = rng.tensor({k.o});
          rt::Conv2dParams p{.stride = k.stride,
                             .padding = k.k / 2,
                             .groups = k.groups,
                             .activation = Activation::Relu,
                             .gemm = gemm};
          Tensor plain = rt::conv2d(x, w, b, p);
          if (residual)
            p.residual = rng.tensor(plain.shape());
          Tensor want = rt::conv2d(x, w, b, p);
          Tensor buf =
              Tensor::full({n, k.o + 5, want.dim(2), want.dim(3)}, 7.0);
          p.into = buf.sliced(1, 2, 2 + k.o);
          CHECK(p.into.isContiguous() == (n == 1));
          Tensor got = rt::conv2d(x, w, b, p);
          CHECK(got.viewData() == p.into.viewData());
          requireIdentical(got.contiguous(), want);
          requireIdentical(buf.sliced(1, 2, 2 + k.o).contiguous(), want);
          CHECK(buf.sliced(1, 0, 2).contiguous().bitwiseEqual(
              Tensor::full({n, 2, want.dim(2), want.dim(3)}, 7.0)));
          CHECK(buf.sliced(1, 2 + k.o, k.o + 5)
                    .contiguous()
                    .bitwiseEqual(
                        Tensor::full({n, 3, want.dim(2), want.dim(3)}, 7.0)));
          // Another shape, or rows not contiguous within an image: ignored.
          for (Tensor other :
               {Tensor::zeros({n, k.o, want.dim(2) + 1, want.dim(3)}),
                Tensor::zeros({n, k.o, want.dim(2), want.dim(3) + 2})
                    .sliced(3, 0, want.dim(3))}) {
            p.into = other;
            got = rt::conv2d(x, w, b, p);
            CHECK(got.viewData() != p.into.viewData());
            requireIdentical(got, want);
          }
        }
}
