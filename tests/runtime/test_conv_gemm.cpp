//===- test_conv_gemm.cpp - The conv GEMM paths against a double reference -===//
//
// Every non-depthwise convolution is a GEMM: out (O_g x Ho*Wo) = weight
// (O_g x K) times patches (K x Ho*Wo), K = C_g * kh * kw. These tests run
// both GEMM paths (the micro-kernel with weights packed once or per call,
// and OpenBLAS) over shapes chosen for the micro-kernel's edges: rows
// (output channels) that are not a multiple of its 8-row panels, columns
// (output positions) around its 48-column strips and 1..8-column narrow
// tails, depths around its blocks of at most 256, K = 1, and every im2col
// case (1x1, 3x3, 7x7, stride, dilation, padding, groups).
//
// Tolerance: |got - want| <= 1e-4 |want| + 1e-5 sqrt(K) (gemmTol), inputs
// in [-2, 2] and weights in [-1, 1]; the reference sums in double.
//
//===----------------------------------------------------------------------===//
#include "ConvReference.h"

#include <thread>

#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Extra.h"
#include "tm/runtime/Shape.h"

using namespace tmtest;
namespace rt = tmg::rt;
using rt::Activation;
using rt::Int2;

namespace {

int64_t outSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad,
                int64_t dil) {
  return rt::convOutputSize(in, kernel, stride, pad, pad, dil);
}

/// Checks one case on every path: OpenBLAS, and each micro-kernel path
/// (the default choice, im2col, Winograd where the shape allows it)
/// packing per call and with a weight packed once (which must give the
/// very same bits as packing per call: same layout, same kernel).
void check(Rng &rng, const ConvCase &k) {
  INFO(describeCase(k));
  int64_t depth = k.c / k.groups * k.kh * k.kw;
  Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
  Tensor w = rng.tensor({k.o, k.c / k.groups, k.kh, k.kw});
  Tensor b = k.bias ? rng.tensor({k.o}) : Tensor();
  rt::Conv2dParams p{.stride = k.stride,
                     .padding = k.pad,
                     .dilation = k.dilation,
                     .groups = k.groups,
                     .activation = k.act};
  Ref rb = b.defined() ? Ref(b) : Ref();
  ConvCase sym = k; // this file's convs pad both sides alike
  sym.padEnd = k.pad;
  Ref want = refConv2d(Ref(x), Ref(w), b.defined() ? &rb : nullptr, sym);
  Tol tol = gemmTol(depth);
  {
    rt::Conv2dParams blas = p;
    blas.gemm = rt::ConvGemm::Blas;
    requireClose(rt::conv2d(x, w, b, blas), want, tol);
  }
  auto packed = rt::packConvWeight(w, k.groups);
  if (!rt::convMicroKernelAvailable())
    CHECK(!packed);
  else
    REQUIRE(packed);
  for (rt::ConvGemm path :
       {rt::ConvGemm::Auto, rt::ConvGemm::Im2col, rt::ConvGemm::Winograd}) {
    INFO("path " << int(path));
    p.gemm = path;
    p.packed = nullptr;
    Tensor perCall = rt::conv2d(x, w, b, p);
    requireClose(perCall, want, tol);
    if (!packed)
      continue;
    p.packed = packed.get();
    Tensor once = rt::conv2d(x, w, b, p);
    requireClose(once, want, tol);
    REQUIRE(once.bitwiseEqual(perCall));
  }
}

} // namespace

TEST_CASE("conv GEMM: micro-kernel tails of rows, columns and depth",
          "[conv][gemm]") {
  Rng rng(401);
  // Rows: 1, 7, 8, 9, 17 output channels (panels of 8); columns: output
  // planes of 1..9, 47..50, 95..97 positions (strips of 48, narrow tails
  // of <= 8 columns); depth: K = 1, 255..257, 300, 513 (one, two and
  // three depth blocks of at most 256).
  for (int64_t o : {1, 7, 8, 9, 17})
    for (int64_t hw : {1, 2, 3, 5, 7, 8, 9})
      check(rng, {1, 3, 1, hw, o, 1, 1});
  for (int64_t cols : {47, 48, 49, 50, 95, 96, 97, 145})
    check(rng, {1, 5, 1, cols, 9, 1, 1});
  for (int64_t c : {1, 255, 256, 257, 300, 513})
    check(rng, {1, c, 3, 7, 10, 1, 1});
  // K = 1 through im2col (padding), tiny everything.
  check(rng, {1, 1, 1, 1, 1, 1, 1});
  ConvCase pad1{1, 1, 2, 3, 3, 1, 1};
  pad1.pad = 1;
  check(rng, pad1);
  // 3x3 with K = 576 (three blocks of 192), 7x7 output (49 columns = a
  // strip + a 1-column tail), relu / relu6 epilogues on the last block.
  ConvCase r3{1, 64, 7, 7, 40, 3, 3};
  r3.pad = 1;
  r3.act = Activation::Relu;
  check(rng, r3);
  r3.act = Activation::Relu6;
  r3.c = 30; // K = 270
  check(rng, r3);
  // 7x7 stride 2 pad 3 (ResNet's stem, small), 1x1 stride 2 (shortcut).
  ConvCase stem{1, 3, 23, 19, 12, 7, 7};
  stem.stride = 2;
  stem.pad = 3;
  check(rng, stem);
  ConvCase shortcut{1, 24, 13, 13, 16, 1, 1};
  shortcut.stride = 2;
  check(rng, shortcut);
  // Groups, dilation, asymmetric stride, batch.
  ConvCase grouped{2, 12, 11, 9, 18, 3, 3, 3};
  grouped.dilation = Int2(2, 1);
  grouped.stride = Int2(1, 2);
  grouped.pad = Int2(2, 1);
  check(rng, grouped);
  // Many tiles and threads: 60x60 output (several column tiles).
  ConvCase wide{1, 16, 60, 60, 24, 3, 3};
  wide.pad = 1;
  wide.bias = false;
  check(rng, wide);
}

TEST_CASE("conv GEMM: Winograd F(2x2, 3x3) tiles, strips and depth",
          "[conv][gemm][winograd]") {
  Rng rng(406);
  // Output sizes odd and even (a last tile half outside), tile rows
  // around the 48-tile strips, paddings 0..2 (tiles reading past the
  // input), out channels around the 8-row panels, in channels past one
  // depth block of 256, batch 2, every activation.
  for (int64_t hw : {1, 2, 3, 4, 5, 13, 14, 15})
    for (int64_t pad : {0, 1, 2}) {
      ConvCase k{1, 5, hw, hw + 1, 9, 3, 3};
      k.pad = pad;
      if (outSize(hw, 3, 1, pad, 1) > 0)
        check(rng, k);
    }
  for (int64_t o : {1, 8, 17}) {
    ConvCase k{2, 20, 30, 26, o, 3, 3};
    k.pad = 1;
    k.act = Activation(o % 3);
    check(rng, k);
  }
  for (int64_t c : {256, 300}) {
    ConvCase k{1, c, 14, 14, 24, 3, 3};
    k.pad = 1;
    check(rng, k);
  }
  // Many tiles: several work items of 48-tile strips.
  ConvCase big{1, 16, 57, 61, 16, 3, 3};
  big.pad = 1;
  big.act = Activation::Relu;
  check(rng, big);
  // Chunks of tiles cut at whole vectors of 16 (196 tiles over 2 or 3
  // threads, 784 over 2) or evenly (49 tiles over 2 threads), at batch 1
  // and 2.
  for (int threads : {2, 3})
    for (int64_t hw : {28, 14}) {
      ConvCase k{1 + (hw == 14 && threads == 3), 128, hw, hw, 40, 3, 3};
      k.pad = 1;
      INFO("threads " << threads);
      withThreads(threads, [&] {
        check(rng, k);
        return 0;
      });
    }
  ConvCase wide{1, 64, 56, 56, 16, 3, 3};
  wide.pad = 1;
  withThreads(2, [&] {
    check(rng, wide);
    return 0;
  });
  // Ranges of tiles that span images: small planes at batch > 1 (16
  // tiles per image of a 7x7 output, 49 of 13x13, 4 of 3x4) share 48-tile
  // strips, the range boundaries falling inside an image or on one, with
  // 1 to 3 threads and the output channels split when ranges are few.
  for (int threads : {1, 2, 3})
    for (auto [n, hw] : {std::pair<int64_t, int64_t>{5, 7}, {3, 13}, {7, 3}}) {
      ConvCase k{n, 24, hw, hw + (hw == 3), 40, 3, 3};
      k.pad = 1;
      k.act = Activation(threads % 3);
      INFO("threads " << threads);
      withThreads(threads, [&] {
        check(rng, k);
        return 0;
      });
    }
}

TEST_CASE("conv GEMM: pointwise convs with more output channels than "
          "columns cut the channels over threads",
          "[conv][gemm][omp]") {
  Rng rng(408);
  // Batch 1 (an image's columns would otherwise be cut), batch 3 with a
  // small weight (on 2 threads each keeps its channel block over the
  // images), batch 3 with a large one and batch 4 (whole images per
  // thread instead), groups, channel counts that leave a partial panel,
  // and 2 or 3 threads.
  ConvCase cases[] = {
      {1, 40, 9, 9, 100, 1, 1},  {1, 256, 7, 14, 1000, 1, 1},
      {3, 24, 5, 5, 72, 1, 1},   {3, 24, 5, 5, 145, 1, 1, 1},
      {3, 600, 6, 6, 800, 1, 1}, {1, 24, 4, 5, 144, 1, 1, 2},
      {4, 24, 5, 5, 72, 1, 1},
  };
  for (int threads : {2, 3})
    for (ConvCase k : cases) {
      k.act = Activation(rng.uniformInt(0, 2));
      INFO("threads " << threads);
      withThreads(threads, [&] {
        check(rng, k);
        return 0;
      });
    }
}

TEST_CASE("conv GEMM: strided 1x1 convs (a pointwise conv of the "
          "subsampled input)",
          "[conv][gemm]") {
  Rng rng(409);
  // Strides 2, 3 and mixed, sizes that leave the last rows / columns
  // unread, batch and groups, on every path.
  ConvCase cases[] = {
      {3, 24, 14, 14, 40, 1, 1}, {2, 16, 13, 15, 24, 1, 1},
      {1, 32, 9, 10, 17, 1, 1},  {4, 12, 8, 7, 16, 1, 1, 2},
      {2, 64, 28, 28, 96, 1, 1},
  };
  Int2 strides[] = {Int2(2), Int2(3), Int2(2, 1), Int2(1, 3), Int2(2)};
  for (size_t i = 0; i < std::size(cases); ++i) {
    ConvCase k = cases[i];
    k.stride = strides[i];
    k.act = Activation(i % 3);
    check(rng, k);
  }
  // ONNX's end padding: where the last output reads the padding (zeros)
  // the conv is no subsampling; where it reads no padding it is.
  for (Int2 end : {Int2(1, 0), Int2(0, 1), Int2(1, 1), Int2(2, 2)}) {
    ConvCase k{2, 8, 10, 9, 12, 1, 1};
    k.stride = 2;
    k.padEnd = end;
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
    Tensor w = rng.tensor({k.o, k.c, 1, 1});
    Tensor b = rng.tensor({k.o});
    Ref rb(b);
    Ref want = refConv2d(Ref(x), Ref(w), &rb, k);
    INFO("end padding " << end.str());
    for (rt::ConvGemm path : {rt::ConvGemm::Auto, rt::ConvGemm::Blas}) {
      rt::Conv2dParams p{.stride = k.stride, .paddingEnd = end, .gemm = path};
      requireClose(rt::conv2d(x, w, b, p), want, gemmTol(k.c));
    }
  }
}

TEST_CASE("conv GEMM: Winograd with ONNX's asymmetric padding",
          "[conv][gemm][winograd]") {
  Rng rng(407);
  for (Int2 end : {Int2(0, 2), Int2(2, 0), Int2(1, 1)}) {
    Tensor x = rng.tensor({1, 16, 15, 16}, -2, 2);
    Tensor w = rng.tensor({16, 16, 3, 3});
    Tensor b = rng.tensor({16});
    ConvCase k{1, 16, 15, 16, 16, 3, 3};
    k.pad = Int2(1, 0);
    k.padEnd = end;
    Ref rb(b);
    Ref want = refConv2d(Ref(x), Ref(w), &rb, k);
    rt::Conv2dParams p{.padding = k.pad, .paddingEnd = end,
                       .gemm = rt::ConvGemm::Winograd};
    INFO("end padding " << end.str());
    requireClose(rt::conv2d(x, w, b, p), want, gemmTol(16 * 9));
  }
}

TEST_CASE("conv GEMM: random shapes on every path", "[conv][gemm]") {
  Rng rng(402);
  int checked = 0;
  while (checked < 60) {
    ConvCase k;
    k.groups = rng.coin(0.25) ? rng.uniformInt(2, 3) : 1;
    k.n = rng.uniformInt(1, 2);
    k.c = k.groups * rng.uniformInt(1, 24);
    k.o = k.groups * rng.uniformInt(1, 20);
    int64_t kern[] = {1, 3, 7, 2, 5};
    k.kh = kern[rng.uniformInt(0, 4)];
    k.kw = rng.coin(0.7) ? k.kh : kern[rng.uniformInt(0, 4)];
    k.h = rng.uniformInt(1, 24);
    k.w = rng.uniformInt(1, 24);
    k.stride = Int2(rng.uniformInt(1, 3), rng.uniformInt(1, 3));
    k.dilation = Int2(rng.uniformInt(1, 2), rng.uniformInt(1, 2));
    k.pad = Int2(rng.uniformInt(0, 3), rng.uniformInt(0, 3));
    k.act = Activation(rng.uniformInt(0, 2));
    k.bias = rng.coin(0.7);
    if (outSize(k.h, k.kh, k.stride.h, k.pad.h, k.dilation.h) <= 0 ||
        outSize(k.w, k.kw, k.stride.w, k.pad.w, k.dilation.w) <= 0)
      continue;
    check(rng, k);
    ++checked;
  }
}

TEST_CASE("conv GEMM: conv1d on the micro-kernel", "[conv][gemm]") {
  Rng rng(403);
  for (int64_t l : {1, 9, 49, 100})
    for (int64_t k : {1, 3}) {
      Tensor x = rng.tensor({2, 6, l}, -2, 2);
      Tensor w = rng.tensor({10, 3, k});
      Tensor b = rng.tensor({10});
      rt::Conv1dParams p{.padding = k / 2, .groups = 2};
      // conv1d is conv2d with H = 1.
      ConvCase c{2, 6, 1, l, 10, 1, k, 2};
      c.pad = c.padEnd = Int2(0, k / 2);
      Ref rb(b);
      Ref want = refConv2d(Ref(x.reshaped({2, 6, 1, l})), Ref(w.reshaped({10, 3, 1, k})), &rb, c);
      want.shape = Shape{2, 10, l};
      INFO("length " << l << " kernel " << k);
      requireClose(rt::conv1d(x, w, b, p), want, gemmTol(3 * k));
      auto packed = rt::packConvWeight(w, 2);
      if (packed) {
        p.packed = packed.get();
        requireClose(rt::conv1d(x, w, b, p), want, gemmTol(3 * k));
      }
    }
}

TEST_CASE("conv GEMM: a packed weight must match the convolution",
          "[conv][gemm]") {
  Rng rng(404);
  Tensor x = rng.tensor({1, 8, 5, 5});
  Tensor w = rng.tensor({6, 8, 3, 3});
  auto packed = rt::packConvWeight(rng.tensor({6, 4, 3, 3}), 2);
  if (!packed)
    return; // no micro-kernel on this CPU: nothing is packed
  rt::Conv2dParams p{.padding = 1, .packed = packed.get()};
  REQUIRE_THROWS_WITH(rt::conv2d(x, w, {}, p),
                      Catch::Contains("was not packed from weight (6, 8, 3, 3)"));
  REQUIRE_THROWS_WITH(rt::packConvWeight(w, 4),
                      Catch::Contains("groups 4 does not divide the 6 output"));
  REQUIRE_THROWS_WITH(rt::packConvWeight(rng.tensor({6, 8}), 1),
                      Catch::Contains("must be (out_channels"));
}

TEST_CASE("conv GEMM: one packed weight shared by concurrent calls",
          "[conv][gemm][threads]") {
  // Packed weights are read-only plan data; each call has its own scratch.
  Rng rng(405);
  Tensor w = rng.tensor({40, 24, 3, 3}), b = rng.tensor({40});
  auto packed = rt::packConvWeight(w, 1);
  rt::Conv2dParams p{.padding = 1, .activation = Activation::Relu,
                     .packed = packed.get()};
  std::vector<Tensor> xs, want;
  for (int i = 0; i < 4; ++i) {
    xs.push_back(rng.tensor({1, 24, 17 + i, 15}));
    want.push_back(rt::conv2d(xs[i], w, b, p));
  }
  std::vector<Tensor> got(4);
  std::vector<std::thread> workers;
  for (int i = 0; i < 4; ++i)
    workers.emplace_back([&, i] {
      for (int rep = 0; rep < 10; ++rep)
        got[i] = rt::conv2d(xs[i], w, b, p);
    });
  for (auto &t : workers)
    t.join();
  for (int i = 0; i < 4; ++i)
    requireIdentical(got[i], want[i]);
}

TEST_CASE("conv GEMM: a pointwise conv's first output channels are those "
          "of a wider one, bit for bit",
          "[conv][gemm]") {
  // A pointwise conv with at most 16 output channels (over 32 or more
  // input channels and 128 KB of input) copies its input into the kernel's
  // strip layout first; a wider one reads it in place. Each
  // output channel is the same sum either way: the first 8 or 16 channels
  // of a 40-channel conv, with bias, activation and residual, must be
  // those of the narrower conv. Planes: several column tiles with rows not
  // whole vectors (55x55), 13x13 at batch 2, 7x7 (a strip and a 1-column
  // tail); depths of one to three blocks; 1 to 3 threads; and a conv too
  // small to copy.
  Rng rng(411);
  constexpr int64_t Wide = 40;
  for (ConvCase k :
       {ConvCase{1, 128, 55, 55, Wide, 1, 1},
        ConvCase{2, 300, 13, 13, Wide, 1, 1},
        ConvCase{3, 700, 7, 7, Wide, 1, 1}, ConvCase{1, 3, 9, 17, Wide, 1, 1}})
    for (int64_t narrow : {8, 16})
      for (int threads : {1, 2, 3}) {
        INFO(describeCase(k) << " narrow " << narrow << " threads " << threads);
        Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
        Tensor w = rng.tensor({Wide, k.c, 1, 1}), b = rng.tensor({Wide});
        // The first `narrow` entries of `axis` (the output channels).
        auto firstRows = [narrow](const Tensor &t, int64_t axis) {
          return rt::slice(t, {rt::AxisSlice{axis, 0, narrow}}).contiguous();
        };
        Tensor wn = firstRows(w, 0), bn = firstRows(b, 0);
        Tensor z = rng.tensor({k.n, Wide, k.h, k.w}, -2, 2);
        Tensor zn = firstRows(z, 1);
        for (bool residual : {false, true}) {
          rt::Conv2dParams p{.activation = Activation::Relu};
          rt::Conv2dParams pn = p;
          if (residual) {
            p.residual = z;
            pn.residual = zn;
          }
          withThreads(threads, [&] {
            Tensor wide = rt::conv2d(x, w, b, p);
            Tensor got = rt::conv2d(x, wn, bn, pn);
            REQUIRE(got.bitwiseEqual(firstRows(wide, 1)));
            return 0;
          });
        }
      }
}

TEST_CASE("conv GEMM: results do not depend on the thread count",
          "[conv][gemm][omp]") {
  Rng rng(406);
  // Output-channel split (7x7), column tiles (28x28), a pointwise conv.
  for (ConvCase k : {ConvCase{1, 64, 7, 7, 96, 3, 3}, ConvCase{1, 32, 28, 28, 40, 3, 3},
                 ConvCase{2, 48, 14, 14, 72, 1, 1}}) {
    k.pad = k.kh / 2;
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w});
    Tensor w = rng.tensor({k.o, k.c, k.kh, k.kw});
    rt::Conv2dParams p{.padding = k.pad};
    Tensor one = withThreads(1, [&] { return rt::conv2d(x, w, {}, p); });
    Tensor two = withThreads(2, [&] { return rt::conv2d(x, w, {}, p); });
    INFO(describeCase(k));
    requireClose(two, Ref(one), gemmTol(k.c * k.kh * k.kw));
  }
}

TEST_CASE("conv GEMM: a fused residual add and activation are the unfused "
          "ops' bits on every path",
          "[conv][gemm][residual]") {
  // act(conv(x) + residual) as one conv2d (Conv2dParams::residual) must
  // be exactly conv2d, then add, then the activation op: the micro-kernel
  // adds in its store (im2col, implicit, 1x1), Winograd in its output
  // transform, depthwise and OpenBLAS after the whole output.
  Rng rng(405);
  for (int i = 0; i < 48; ++i) {
    ConvCase k;
    int kind = i % 4; // Winograd-sized 3x3, pointwise, depthwise, random
    k.n = rng.uniformInt(1, 2);
    k.c = rng.uniformInt(8, 24);
    k.o = kind == 2 ? k.c : rng.uniformInt(8, 40);
    k.groups = kind == 2 ? k.c : 1;
    k.kh = k.kw = kind == 1 ? 1 : kind == 3 ? rng.uniformInt(1, 5) : 3;
    k.h = rng.uniformInt(6, 30);
    k.w = rng.uniformInt(6, 60);
    k.stride = Int2(kind == 3 ? rng.uniformInt(1, 2) : 1);
    k.pad = Int2(kind == 1 ? 0 : k.kh / 2);
    k.act = Activation(rng.uniformInt(0, 2));
    k.bias = rng.coin(0.7);
    if (i == 0) { // 7x7: Winograd splits the output channels over threads
      k.n = 1;
      k.c = 64;
      k.o = 96;
      k.h = k.w = 7;
    }
    if (i == 4) { // 7x7 at batch 5: Winograd's tile ranges span images
      k.n = 5;
      k.h = k.w = 7;
    }
    INFO(describeCase(k));
    Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
    Tensor w = rng.tensor({k.o, k.c / k.groups, k.kh, k.kw});
    Tensor b = k.bias ? rng.tensor({k.o}) : Tensor();
    rt::Conv2dParams p{.stride = k.stride, .padding = k.pad, .groups = k.groups};
    Tensor plain = rt::conv2d(x, w, b, p);
    Tensor z = rng.tensor(plain.shape(), -2, 2);
    auto packed = rt::packConvWeight(w, k.groups);
    for (rt::ConvGemm path : {rt::ConvGemm::Blas, rt::ConvGemm::Auto,
                              rt::ConvGemm::Im2col, rt::ConvGemm::Winograd}) {
      INFO("path " << int(path));
      p.gemm = path;
      p.packed = path == rt::ConvGemm::Blas ? nullptr : packed.get();
      p.activation = Activation::None;
      p.residual = Tensor();
      Tensor sum = rt::binary(rt::BinaryOp::Add, rt::conv2d(x, w, b, p), z);
      Tensor want = k.act == Activation::Relu    ? rt::unary(rt::UnaryOp::Relu, sum)
                    : k.act == Activation::Relu6 ? rt::unary(rt::UnaryOp::Relu6, sum)
                                                 : sum;
      p.activation = k.act;
      p.residual = z;
      Tensor got = rt::conv2d(x, w, b, p);
      REQUIRE(got.bitwiseEqual(want));
    }
  }
  // A residual of another shape or dtype is refused.
  Tensor x = rng.tensor({1, 4, 5, 5}), w = rng.tensor({6, 4, 3, 3});
  rt::Conv2dParams p{.padding = 1};
  p.residual = rng.tensor({1, 6, 5, 4});
  REQUIRE_THROWS_WITH(rt::conv2d(x, w, {}, p),
                      Catch::Contains("residual (1, 6, 5, 4) must have the "
                                      "output's shape (1, 6, 5, 5)"));
  p.residual = Tensor::zeros({1, 6, 5, 5}, tmg::DType::Float64);
  REQUIRE_THROWS_WITH(rt::conv2d(x, w, {}, p), Catch::Contains("residual"));
}

TEST_CASE("conv GEMM: a conv pooled in bands of rows is the conv, then "
          "the max pool, bit for bit",
          "[conv][gemm][pool]") {
  // rt::conv2dMaxPool against conv2d then maxPoolNd (the fused conv on
  // the implicit GEMM's grid wherever that fits, the unfused one on
  // im2col's plane unless its output channels are few): stems (7x7
  // stride 2 then 3x3 stride 2 pad 1, 3x3 stride 2 then ceil mode), a
  // pointwise conv, planes whose last strip is a narrow tail (7x7, 13x13:
  // the fused conv on im2col's plane too, the grid's extra columns
  // costing more than a tenth), a
  // partial panel of output channels, bands per thread that continue
  // from the previous one or not (1 to 3 threads, batch 1 to 3), pool
  // paddings (up to whole windows of padding), asymmetric ends, dilation,
  // kernels wider and narrower than strides.
  Rng rng(410);
  struct Case {
    ConvCase conv;
    std::vector<int64_t> kernel, stride, padBegin, padEnd, dilation;
    bool ceil;
  };
  auto stem = [](int64_t n, int64_t hw, int64_t k, int64_t s, int64_t pad) {
    ConvCase c{n, 3, hw, hw + 3, 20, k, k};
    c.stride = s;
    c.pad = pad;
    return c;
  };
  ConvCase pw{2, 24, 15, 14, 70, 1, 1};
  ConvCase small{3, 4, 7, 7, 16, 3, 3};
  small.pad = 1; // 7x7 output: a strip and a 1-column tail
  ConvCase plane13{2, 5, 13, 13, 9, 3, 3};
  plane13.pad = 1;
  ConvCase wide{1, 6, 90, 61, 64, 3, 3};
  wide.pad = 1;
  // Few output channels: the implicit GEMM fused and unfused.
  ConvCase stem16{2, 3, 45, 48, 16, 3, 3};
  stem16.stride = 2;
  stem16.pad = 1;
  ConvCase few{1, 6, 40, 37, 12, 3, 3};
  few.pad = 1;
  Case cases[] = {
      {stem(2, 61, 7, 2, 3), {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {stem(3, 45, 3, 2, 0), {3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true},
      {pw, {2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true},
      {small, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {plane13, {3, 2}, {1, 2}, {1, 0}, {0, 1}, {1, 1}, true},
      {plane13, {2, 3}, {2, 1}, {0, 1}, {1, 1}, {2, 1}, false},
      {wide, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {wide, {5, 5}, {1, 1}, {2, 2}, {2, 2}, {1, 1}, false},
      // Windows wholly in the padding (-inf), a 1x1 window skipping rows.
      {small, {2, 2}, {1, 1}, {3, 3}, {3, 3}, {1, 1}, false},
      {plane13, {1, 1}, {3, 3}, {0, 0}, {0, 0}, {1, 1}, true},
      {stem16, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},
      {stem16, {3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true},
      {few, {3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true},
  };
  for (int threads : {1, 2, 3})
    for (const Case &c : cases) {
      const ConvCase &k = c.conv;
      INFO(describeCase(k) << " threads " << threads);
      Tensor x = rng.tensor({k.n, k.c, k.h, k.w}, -2, 2);
      Tensor w = rng.tensor({k.o, k.c, k.kh, k.kw});
      Tensor b = k.bias ? rng.tensor({k.o}) : Tensor();
      rt::WindowNd pool{c.kernel, c.stride, c.padBegin, c.padEnd, c.dilation};
      pool.ceilMode = c.ceil;
      for (Activation act :
           {Activation::None, Activation::Relu, Activation::Relu6}) {
        rt::Conv2dParams p{
            .stride = k.stride, .padding = k.pad, .activation = act};
        auto packed = rt::packConvWeight(w, 1);
        p.packed = packed.get();
        withThreads(threads, [&] {
          Tensor want = rt::maxPoolNd(rt::conv2d(x, w, b, p), pool);
          bool fused = false;
          Tensor got = rt::conv2dMaxPool(x, w, b, p, pool, &fused);
          CHECK(fused == rt::convMicroKernelAvailable());
          REQUIRE(got.bitwiseEqual(want));
          p.packed = nullptr; // packed per call: the same bits
          REQUIRE(rt::conv2dMaxPool(x, w, b, p, pool).bitwiseEqual(want));
          return 0;
        });
      }
    }
  // Where it does not fuse (Winograd, grouped, a residual), the two ops.
  Tensor x = rng.tensor({1, 16, 12, 12}), w = rng.tensor({16, 16, 3, 3});
  rt::WindowNd pool{{2, 2}, {2, 2}, {0, 0}, {0, 0}, {1, 1}};
  rt::Conv2dParams p{.padding = 1};
  bool fused = true;
  Tensor got = rt::conv2dMaxPool(x, w, {}, p, pool, &fused);
  CHECK(!fused);
  REQUIRE(got.bitwiseEqual(rt::maxPoolNd(rt::conv2d(x, w, {}, p), pool)));
  p.groups = 2;
  Tensor wg = rng.tensor({16, 8, 3, 3});
  got = rt::conv2dMaxPool(x, wg, {}, p, pool, &fused);
  CHECK(!fused);
  REQUIRE(got.bitwiseEqual(rt::maxPoolNd(rt::conv2d(x, wg, {}, p), pool)));
}
