//===- test_linalg.cpp - matmul, linear, gemm against references ----------===//
#include "Reference.h"

#include <array>
#include <cmath>
#include <optional>

#include "../../runtime/Gemm.h"
#include "tm/ir/IR.h"
#include "tm/runtime/Interpreter.h"

using namespace tmtest;
namespace rt = tmg::rt;

namespace {

/// Element (i, j) of op(m) for a row-major 2-D slab at `base`.
double mat(const Ref &m, int64_t base, int64_t cols, bool trans, int64_t i,
           int64_t j) {
  return trans ? m.v[base + j * cols + i] : m.v[base + i * cols + j];
}

/// Naive batched matmul with NumPy semantics (double accumulation).
Ref refMatmul(const Ref &a, const Ref &b, bool ta, bool tb) {
  bool av = a.rank() == 1, bv = b.rank() == 1;
  ta = ta && !av;
  tb = tb && !bv;
  int64_t ar = av ? 1 : a.shape[a.rank() - 2], ac = a.shape.back();
  int64_t br = bv ? b.shape[0] : b.shape[b.rank() - 2],
          bc = bv ? 1 : b.shape.back();
  int64_t m = ta ? ac : ar, k = ta ? ar : ac, n = tb ? br : bc;
  Shape ba = av ? Shape{} : Shape(a.shape.begin(), a.shape.end() - 2);
  Shape bb = bv ? Shape{} : Shape(b.shape.begin(), b.shape.end() - 2);
  size_t r = std::max(ba.size(), bb.size());
  Shape batch(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i < ba.size() ? ba[ba.size() - 1 - i] : 1;
    int64_t y = i < bb.size() ? bb[bb.size() - 1 - i] : 1;
    batch[r - 1 - i] = x == 1 ? y : x;
  }
  Shape out = batch;
  if (!av)
    out.push_back(m);
  if (!bv)
    out.push_back(n);
  Ref c(out);
  int64_t count = tmg::shapeNumel(batch);
  auto slab = [&](const Shape &bs, const std::vector<int64_t> &idx) {
    int64_t o = 0, off = idx.size() - bs.size();
    for (size_t d = 0; d < bs.size(); ++d)
      o = o * bs[d] + (bs[d] == 1 ? 0 : idx[off + d]);
    return o;
  };
  for (int64_t bi = 0; bi < count; ++bi) {
    auto idx = unravel(bi, batch);
    int64_t oa = slab(ba, idx) * ar * ac, ob = slab(bb, idx) * br * bc;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        long double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (long double)mat(a, oa, ac, ta, i, p) * mat(b, ob, bc, tb, p, j);
        c.v[(bi * m + i) * n + j] = double(s);
      }
  }
  return c;
}

/// Naive linear layer: act(x @ w^T + bias) over x's last axis (bias may
/// be undefined), accumulated in long double.
Ref refLinear(const Tensor &x, const Tensor &w, const Tensor &bias,
              rt::Activation act = rt::Activation::None) {
  int64_t in = w.dim(1), out = w.dim(0), rows = x.numel() / in;
  Shape ys(x.shape().begin(), x.shape().end());
  ys.back() = out;
  Ref want(ys), rx(x), rw(w);
  std::optional<Ref> rb;
  if (bias.defined())
    rb.emplace(bias);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      long double s = rb ? rb->v[o] : 0.0;
      for (int64_t i = 0; i < in; ++i)
        s += (long double)rx.v[r * in + i] * rw.v[o * in + i];
      double v = double(s);
      if (act != rt::Activation::None)
        v = std::max(v, 0.0);
      if (act == rt::Activation::Relu6)
        v = std::min(v, 6.0);
      want.v[r * out + o] = v;
    }
  return want;
}

} // namespace

TEST_CASE("matmul: 2-D with transposes and edge sizes", "[linalg]") {
  Rng rng(101);
  const int64_t dims[][3] = {{1, 1, 1},   {3, 4, 5},   {17, 31, 9},
                             {64, 1, 64}, {1, 200, 1}, {130, 70, 90},
                             {0, 4, 5},   {3, 0, 5},   {3, 4, 0}};
  for (const auto &d : dims) {
    int64_t m = d[0], k = d[1], n = d[2];
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = rng.tensor(ta ? Shape{k, m} : Shape{m, k});
        Tensor b = rng.tensor(tb ? Shape{n, k} : Shape{k, n});
        INFO("m=" << m << " k=" << k << " n=" << n << " ta=" << ta
                  << " tb=" << tb);
        requireClose(rt::matmul(a, b, ta, tb),
                     refMatmul(Ref(a), Ref(b), ta, tb), gemmTol(k));
      }
  }
}

/// Calls f(original a, a, b, ta, tb) for every shape pair of `cases` and
/// every pair of transpose flags, a transposed operand's last two
/// dimensions swapped.
template <typename F>
void forEachTransposed(const std::vector<std::pair<Shape, Shape>> &cases, F f) {
  for (const auto &[sa, sb] : cases)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Shape a = sa, b = sb;
        if (ta && a.size() >= 2)
          std::swap(a[a.size() - 1], a[a.size() - 2]);
        if (tb && b.size() >= 2)
          std::swap(b[b.size() - 1], b[b.size() - 2]);
        f(sa, a, b, ta, tb);
      }
}

TEST_CASE("matmul: batched with broadcast batch dimensions", "[linalg]") {
  Rng rng(102);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{3, 4}, {6, 4, 5}},
      {{2, 1, 3, 4}, {5, 4, 2}},
      {{1, 3, 4}, {7, 4, 6}},
      {{4}, {3, 4, 5}},
      {{2, 3, 4}, {4}},
      {{4}, {4}},
      {{0, 3, 4}, {4, 2}},
      {{5, 2, 8, 16}, {5, 1, 16, 8}},
      {{40, 20, 30}, {40, 30, 10}},
  };
  forEachTransposed(cases, [&](const Shape &, const Shape &a, const Shape &b, bool ta, bool tb) {
    Tensor ta_ = rng.tensor(a), tb_ = rng.tensor(b);
    INFO(shapeOf(a) << " @ " << shapeOf(b) << " ta=" << ta << " tb=" << tb);
    requireClose(rt::matmul(ta_, tb_, ta, tb), refMatmul(Ref(ta_), Ref(tb_), ta, tb), GemmTol);
  });
}

TEST_CASE("matmul: large products use every thread and agree across thread "
          "counts",
          "[linalg][threads]") {
  Rng rng(103);
  Tensor a = rng.tensor({300, 257}), b = rng.tensor({257, 190});
  requireClose(rt::matmul(a, b), refMatmul(Ref(a), Ref(b), false, false),
               gemmTol(257));
  Tensor one = withThreads(1, [&] { return rt::matmul(a, b); });
  Tensor two = withThreads(2, [&] { return rt::matmul(a, b); });
  requireClose(two, Ref(one), gemmTol(257));
}

TEST_CASE("linear: x @ W^T + b with a fused activation", "[linalg]") {
  Rng rng(104);
  const std::vector<Shape> inputs = {{7}, {3, 7}, {2, 5, 7}, {0, 7}, {129, 7}};
  for (const Shape &xs : inputs)
    for (int64_t out : {1, 4, 33})
      for (rt::Activation act :
           {rt::Activation::None, rt::Activation::Relu, rt::Activation::Relu6})
        for (bool withBias : {false, true}) {
          Tensor x = rng.tensor(xs, -3, 3), w = rng.tensor({out, 7});
          Tensor b = withBias ? rng.tensor({out}) : Tensor();
          INFO(shapeOf(xs) << " out=" << out
                           << " act=" << rt::activationName(act).str());
          requireClose(rt::linear(x, w, b, act), refLinear(x, w, b, act),
                       GemmTol);
        }
}

TEST_CASE("linear with an addend: bit for bit linear, then the add",
          "[linalg][threads]") {
  // A residual added as each block of the result is stored (the plan's
  // linear -> add fusion): rows around the 8-row panels and 12-panel
  // groups, columns around the strips and tiles, packed (micro-kernel) and
  // unpacked (BLAS), with GELU as a tail; one and two threads.
  Rng rng(131);
  auto gelu = [](float *p, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = 0.5f * p[i] * (1.0f + std::erf(p[i] * 0.70710678f));
  };
  for (int64_t m : {1, 9, 97, 197})
    for (int64_t n : {16, 49, 193})
      for (bool packed : {false, true})
        for (bool tail : {false, true}) {
          int64_t k = 300;
          Tensor x = rng.tensor({m, k}), w = rng.tensor({n, k}),
                 b = rng.tensor({n});
          Tensor z = rng.tensor({m, n});
          auto pk = packed ? rt::detail::packTransposedB(w) : nullptr;
          llvm::function_ref<void(float *, int64_t)> t;
          if (tail)
            t = gelu;
          INFO("m=" << m << " n=" << n << " packed=" << packed
                    << " tail=" << tail);
          for (int threads : {1, 2}) {
            Tensor y = withThreads(threads, [&] {
              return rt::detail::linearWithPack(x, w, b, rt::Activation::None,
                                                pk.get(), t);
            });
            Tensor got = withThreads(threads, [&] {
              return rt::detail::linearWithPack(x, w, b, rt::Activation::None,
                                                pk.get(), t, z);
            });
            CHECK(got.bitwiseEqual(rt::binary(rt::BinaryOp::Add, y, z)));
          }
        }
  // Addends that do not fit (broadcast, a view, float64) are added as the
  // add op would.
  Tensor x = rng.tensor({5, 8}), w = rng.tensor({6, 8}), b = rng.tensor({6});
  Tensor y = rt::linear(x, w, b);
  for (Tensor z : {rng.tensor({6}), rng.tensor({6, 5}).permuted({1, 0}),
                   rt::cast(rng.tensor({5, 6}), DType::Float64)}) {
    CHECK_FALSE(rt::detail::linearAddendFits(x, w, b, z));
    Tensor got = rt::detail::linearWithPack(x, w, b, rt::Activation::None,
                                            nullptr, {}, z);
    CHECK(got.bitwiseEqual(rt::binary(rt::BinaryOp::Add, y, z)));
  }
  CHECK(rt::detail::linearAddendFits(x, w, b, rng.tensor({5, 6})));
}

TEST_CASE("matmul and linear at the micro-kernel's tile edges", "[linalg][threads]") {
  // On AVX-512 CPUs float32 products without transposes run on the
  // runtime's own 8 x 48 micro-kernel: rows around its 8-row panels,
  // columns around its 48-column strips and 192-column tiles, depths
  // around its 256 blocks; one and two threads.
  Rng rng(105);
  for (int64_t m : {8, 9, 15, 197})
    for (int64_t n : {16, 47, 49, 192, 193})
      for (int64_t k : {1, 256, 257, 600}) {
        Tensor a = rng.tensor({m, k}), b = rng.tensor({k, n});
        Ref want = refMatmul(Ref(a), Ref(b), false, false);
        INFO("m=" << m << " k=" << k << " n=" << n);
        requireClose(withThreads(1, [&] { return rt::matmul(a, b); }), want, gemmTol(k));
        requireClose(withThreads(2, [&] { return rt::matmul(a, b); }), want, gemmTol(k));
      }

  // A linear layer's constant weight is packed once per plan step: two
  // runs, then a run after the weight is replaced by another tensor.
  for (int64_t out : {16, 50, 200}) {
    const int64_t rows = 37, in = 300;
    Tensor w = rng.tensor({out, in}), bias = rng.tensor({out});
    auto m = std::make_unique<tmg::Module>("Net");
    m->registerModule("fc", std::make_unique<tmg::Linear>(in, out));
    auto tm = tmg::TracedModule::fromModule(std::move(m));
    *tm->module("fc")->tensor("weight") = w;
    *tm->module("fc")->tensor("bias") = bias;
    tmg::GraphBuilder gb = tmg::GraphBuilder::top(*tm, {{"x", Shape{rows, in}}});
    gb.finish(gb.callModule(gb.getAttr(gb.self(), "fc"), {gb.arg(0)}));
    auto expect = [&](const Tensor &x, const Tensor &wt) {
      return refLinear(x, wt, bias);
    };
    rt::Interpreter interp(*tm);
    INFO("out=" << out);
    for (int run = 0; run < 2; ++run) {
      Tensor x = rng.tensor({rows, in});
      requireClose(interp.run({x}).outputs[0], expect(x, w), gemmTol(in));
    }
    Tensor w2 = rng.tensor({out, in});
    *tm->module("fc")->tensor("weight") = w2;
    Tensor x = rng.tensor({rows, in});
    requireClose(rt::Interpreter(*tm).run({x}).outputs[0], expect(x, w2), gemmTol(in));
    requireClose(interp.run({x}).outputs[0], expect(x, w2), gemmTol(in));
  }
}

TEST_CASE("matmul by a constant B packs it once, bit for bit the kernel",
          "[linalg][interp]") {
  // x @ W with W a module attribute (an exported linear layer: ONNX MatMul
  // by an initializer): the plan packs W for the micro-kernel on the first
  // run and reuses it, and repacks a replacing tensor. Batched rows (x is
  // 3-d), columns over several strips and a partial one, two depth blocks,
  // 1 and 2 threads; and a B too narrow for the micro-kernel (n < 16).
  Rng rng(107);
  for (int64_t n : {200, 48, 7}) {
    const int64_t k = 300;
    auto m = std::make_unique<tmg::Module>("Net");
    m->registerParameter("w", rng.tensor({k, n}));
    auto tm = tmg::TracedModule::fromModule(std::move(m));
    tmg::GraphBuilder gb =
        tmg::GraphBuilder::top(*tm, {{"x", Shape{3, 37, k}}});
    gb.finish(
        gb.callFunction("matmul", {gb.arg(0), gb.getAttr(gb.self(), "w")}));
    rt::Interpreter interp(*tm);
    for (int threads : {1, 2}) {
      INFO("n=" << n << " threads=" << threads);
      for (int run = 0; run < 2; ++run) {
        Tensor x = rng.tensor({3, 37, k});
        Tensor got =
            withThreads(threads, [&] { return interp.run({x}).outputs[0]; });
        Tensor want = withThreads(
            threads, [&] { return rt::matmul(x, *tm->tensor("w")); });
        CHECK(got.bitwiseEqual(want));
      }
    }
    Tensor w2 = rng.tensor({k, n});
    *tm->tensor("w") = w2;
    Tensor x = rng.tensor({3, 37, k});
    CHECK(interp.run({x}).outputs[0].bitwiseEqual(rt::matmul(x, w2)));
    requireClose(interp.run({x}).outputs[0],
                 refMatmul(Ref(x), Ref(w2), false, false), gemmTol(k));
  }
}

TEST_CASE("matmul and linear: tall products cut by rows over threads",
          "[linalg][threads]") {
  // More rows than columns with a B that stays in L2 (a conv net's
  // token-wise linears): each thread takes whole row blocks across every
  // column tile. Rows not a multiple of the panels, columns over one and
  // several tiles, 2 and 3 threads, a bias and relu epilogue.
  Rng rng(106);
  for (int threads : {2, 3})
    for (auto [m, k, n] : {std::array<int64_t, 3>{1000, 96, 96},
                           {1001, 40, 385},
                           {203, 300, 200},
                           {50, 33, 49}}) {
      Tensor a = rng.tensor({m, k}), b = rng.tensor({k, n});
      INFO("threads=" << threads << " m=" << m << " k=" << k << " n=" << n);
      requireClose(withThreads(threads, [&] { return rt::matmul(a, b); }),
                   refMatmul(Ref(a), Ref(b), false, false), gemmTol(k));
      Tensor w = rng.tensor({n, k}), bias = rng.tensor({n});
      requireClose(withThreads(threads,
                               [&] {
                                 return rt::linear(a, w, bias,
                                                   rt::Activation::Relu);
                               }),
                   refLinear(a, w, bias, rt::Activation::Relu), gemmTol(k));
    }
}

namespace {

/// softmax((q * scale) @ k^T) @ v in double, the batch axes broadcast.
Ref refAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                 double scale) {
  Ref rq(q), rk(k), rv(v);
  size_t nb = 0;
  for (const Ref *r : {&rq, &rk, &rv})
    nb = std::max(nb, r->rank() - 2);
  Shape batch(nb, 1);
  for (const Ref *r : {&rq, &rk, &rv})
    for (size_t i = 0; i + 2 < r->rank(); ++i)
      batch[nb - (r->rank() - 2) + i] =
          std::max(batch[nb - (r->rank() - 2) + i], r->shape[i]);
  int64_t L = rq.shape[rq.rank() - 2], E = rq.shape.back(),
          S = rk.shape[rk.rank() - 2], Ev = rv.shape.back();
  Shape outShape = batch;
  outShape.push_back(L);
  outShape.push_back(Ev);
  Ref out(outShape);
  // The matrix of operand r at output batch index idx.
  auto base = [&](const Ref &r, const std::vector<int64_t> &idx) {
    int64_t o = 0;
    size_t rb = r.rank() - 2;
    for (size_t i = 0; i < rb; ++i)
      o = o * r.shape[i] + (r.shape[i] == 1 ? 0 : idx[nb - rb + i]);
    return o * r.shape[rb] * r.shape[rb + 1];
  };
  int64_t batches = tmg::shapeNumel(batch);
  for (int64_t b = 0; b < batches; ++b) {
    auto idx = unravel(b, batch);
    int64_t qb = base(rq, idx), kb = base(rk, idx), vb = base(rv, idx);
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> p(static_cast<size_t>(S));
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e)
          d += rq.v[qb + i * E + e] * scale * rk.v[kb + j * E + e];
        p[j] = d;
        mx = std::max(mx, d);
      }
      for (double &x : p)
        sum += (x = std::exp(x - mx));
      for (int64_t c = 0; c < Ev; ++c) {
        double o = 0;
        for (int64_t j = 0; j < S; ++j)
          o += p[j] / sum * rv.v[vb + j * Ev + c];
        out.v[(b * L + i) * Ev + c] = o;
      }
    }
  }
  return out;
}

} // namespace

TEST_CASE("scaled_dot_product_attention: the fused kernel and the op-by-op "
          "path against a double reference",
          "[linalg][attention][threads]") {
  Rng rng(107);
  auto check = [&](const Tensor &q, const Tensor &k, const Tensor &v,
                   std::optional<double> scale) {
    double sc = scale.value_or(1.0 / std::sqrt(double(q.dim(q.rank() - 1))));
    Ref want = refAttention(q, k, v, sc);
    Tol tol = gemmTol(q.dim(q.rank() - 1) + k.dim(k.rank() - 2));
    for (int threads : {1, 2, 3}) {
      INFO("threads " << threads);
      requireClose(withThreads(threads,
                               [&] {
                                 return rt::scaledDotProductAttention(q, k, v,
                                                                      scale);
                               }),
                   want, tol);
    }
  };
  // ViT-B/16's heads, contiguous; rows and keys around the 8-row panels,
  // 48-row blocks and 48-key strips; features not a multiple of 16.
  check(rng.tensor({12, 197, 64}), rng.tensor({12, 197, 64}),
        rng.tensor({12, 197, 64}), 0.125);
  for (auto [L, S, E, Ev] : {std::array<int64_t, 4>{1, 1, 1, 1},
                             {7, 48, 17, 33},
                             {49, 50, 16, 48},
                             {96, 97, 40, 5},
                             {13, 200, 8, 100}})
    check(rng.tensor({2, 3, L, E}, -2, 2), rng.tensor({2, 3, S, E}, -2, 2),
          rng.tensor({2, 3, S, Ev}), std::nullopt);
  // 2-D operands (one head) and a large scale (peaked softmax).
  check(rng.tensor({30, 24}), rng.tensor({60, 24}), rng.tensor({60, 10}), 4.0);
  // The heads of a fused QKV projection: strided views of (L, 3, H, E),
  // permuted to (H, L, E); value also transposed in its last two axes
  // (a copy is taken for the kernel's unit stride).
  Tensor qkv = rng.tensor({53, 3, 4, 20});
  Tensor q = qkv.selected(1, 0).permuted({1, 0, 2}),
         k = qkv.selected(1, 1).permuted({1, 0, 2});
  Tensor vt = rng.tensor({4, 20, 53}).permuted({0, 2, 1});
  REQUIRE(!q.isContiguous());
  check(q, k, qkv.selected(1, 2).permuted({1, 0, 2}), 0.25);
  check(q, k, vt, 0.25);
  // Broadcast batch axes, no keys and no features run op by op.
  check(rng.tensor({1, 9, 8}), rng.tensor({3, 11, 8}), rng.tensor({11, 6}),
        std::nullopt);
  check(rng.tensor({8, 9}).permuted({1, 0}),
        rng.tensor({2, 8, 11}).permuted({0, 2, 1}),
        rng.tensor({6, 11}).permuted({1, 0}), 0.5);
  check(rng.tensor({2, 5, 4}), rng.tensor({2, 0, 4}), rng.tensor({2, 0, 3}),
        std::nullopt);
  check(rng.tensor({2, 5, 0}), rng.tensor({2, 7, 0}), rng.tensor({2, 7, 3}),
        1.0);
}

TEST_CASE("scaled_dot_product_attention: errors name the op and the operands",
          "[linalg][attention][errors]") {
  Tensor a = Tensor::zeros({2, 4, 8});
  REQUIRE_THROWS_WITH(
      rt::scaledDotProductAttention(a, Tensor::zeros({2, 4, 6}), a),
      Catch::Contains("scaled_dot_product_attention: query (2, 4, 8) and key "
                      "(2, 4, 6) have different feature sizes 8 and 6"));
  REQUIRE_THROWS_WITH(
      rt::scaledDotProductAttention(a, a, Tensor::zeros({2, 5, 8})),
      Catch::Contains("key (2, 4, 8) and value (2, 5, 8) have different "
                      "numbers of keys 4 and 5"));
  REQUIRE_THROWS_WITH(
      rt::scaledDotProductAttention(Tensor::zeros({8}), a, a),
      Catch::Contains("query (8,) must have at least 2 dimensions"));
  REQUIRE_THROWS_WITH(
      rt::scaledDotProductAttention(a, Tensor::zeros({3, 4, 8}), a),
      Catch::Contains("the batch dimensions of query (2, 4, 8), key "
                      "(3, 4, 8) and value (2, 4, 8) do not broadcast"));
  REQUIRE_THROWS_WITH(rt::scaledDotProductAttention(
                          a, a, Tensor::zeros({2, 4, 8}, DType::Float64)),
                      Catch::Contains("scaled_dot_product_attention: value"));
}

TEST_CASE("gemm: alpha, beta and a broadcast C", "[linalg]") {
  Rng rng(105);
  int64_t m = 9, k = 13, n = 6;
  for (Shape cs : {Shape{}, Shape{n}, Shape{1, n}, Shape{m, 1}, Shape{m, n}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Tensor a = rng.tensor(ta ? Shape{k, m} : Shape{m, k});
        Tensor b = rng.tensor(tb ? Shape{n, k} : Shape{k, n});
        Tensor c = rng.tensor(cs);
        Ref ab = refMatmul(Ref(a), Ref(b), ta, tb), rc(c);
        Ref want(Shape{m, n});
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double cv = cs.empty()       ? rc.v[0]
                        : cs.size() == 1 ? rc.v[j]
                        : cs[0] == 1     ? rc.v[j]
                        : cs[1] == 1     ? rc.v[i]
                                         : rc.v[i * n + j];
            want.v[i * n + j] = 0.5 * ab.v[i * n + j] + 2.0 * cv;
          }
        INFO("C " << shapeOf(cs) << " ta=" << ta << " tb=" << tb);
        requireClose(rt::gemm(a, b, c, 0.5f, 2.0f, ta, tb), want, GemmTol);
        // C is an input: it must not be modified.
        requireClose(c, rc, Exact);
      }
  Tensor a = rng.tensor({m, k}), b = rng.tensor({k, n});
  requireClose(rt::gemm(a, b), refMatmul(Ref(a), Ref(b), false, false),
               GemmTol);
}

TEST_CASE("gemm and linear: one row or one column (matrix-vector products)",
          "[linalg]") {
  // A single row or column of C is a matrix-vector product, reading the
  // matrix in place (rows dotted with the vector in registers where the
  // CPU has AVX-512 and the vector is contiguous, the BLAS's gemv
  // otherwise): every transpose, alpha and beta (0: C's old contents must
  // not leak through), depths below, between and at whole vectors, row
  // counts that leave a partial block of four, and a batch-1 linear layer
  // large enough to be split over threads.
  Rng rng(106);
  for (auto [m, n] : {std::pair<int64_t, int64_t>{1, 7}, {9, 1}, {1, 1}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (float beta : {0.0f, 2.0f})
          for (int64_t k : {5, 37, 64}) {
            Tensor a = rng.tensor(ta ? Shape{k, m} : Shape{m, k});
            Tensor b = rng.tensor(tb ? Shape{n, k} : Shape{k, n});
            Tensor c = rng.tensor({m, n});
            Ref ab = refMatmul(Ref(a), Ref(b), ta, tb), rc(c),
                want(Shape{m, n});
            for (int64_t i = 0; i < m * n; ++i)
              want.v[i] = 0.5 * ab.v[i] + beta * rc.v[i];
            INFO("m " << m << " n " << n << " k " << k << " ta=" << ta
                      << " tb=" << tb << " beta " << beta);
            requireClose(rt::gemm(a, b, c, 0.5f, beta, ta, tb), want, GemmTol);
          }
  Tensor x = rng.tensor({1, 1280}), w = rng.tensor({1000, 1280}), bias = rng.tensor({1000});
  requireClose(withThreads(2, [&] { return rt::linear(x, w, bias); }),
               refLinear(x, w, bias), GemmTol);
}

TEST_CASE("linalg errors name the op and the shapes", "[linalg][errors]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4, 5});
  REQUIRE_THROWS_WITH(rt::matmul(a, b),
                      Catch::Contains("matmul: a (2, 3) and b (4, 5) have "
                                      "mismatched inner dimensions 3 and 4"));
  REQUIRE_THROWS_WITH(
      rt::matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})),
      Catch::Contains("matmul: batch dimensions (2,) of a "
                      "(2, 3, 4) and (3,) of b (3, 4, 5) do "
                      "not broadcast"));
  REQUIRE_THROWS_WITH(rt::matmul(Tensor::fromInts({2, 2}, {1, 2, 3, 4}), a),
                      Catch::Contains("matmul: a (2, 2) must be floating point "
                                      "(float32, float64, float16 or "
                                      "bfloat16), got int64"));
  REQUIRE_THROWS_WITH(rt::linear(Tensor::zeros({3, 6}), Tensor::zeros({4, 5})),
                      Catch::Contains("linear: input (3, 6) has 6 features "
                                      "but weight (4, 5) expects 5"));
  REQUIRE_THROWS_WITH(
      rt::linear(Tensor::zeros({3, 5}), Tensor::zeros({4, 5}),
                 Tensor::zeros({3})),
      Catch::Contains("linear: bias (3,) does not match the 4 output "
                      "features of weight (4, 5)"));
  REQUIRE_THROWS_WITH(rt::gemm(a, b, Tensor::zeros({3})),
                      Catch::Contains("gemm: a (2, 3) and b (4, 5)"));
  REQUIRE_THROWS_WITH(rt::gemm(a, Tensor::zeros({3, 5}), Tensor::zeros({3, 5})),
                      Catch::Contains("gemm: c (3, 5) does not broadcast to "
                                      "the result shape (2, 5)") ||
                          Catch::Contains("gemm: shapes (3, 5) and (2, 5)"));
}

//===-- float64 -----------------------------------------------------------===//
//
// The float64 operands hold +-(1 + p * 2^-20) for small integers p: float32
// holds them exactly, but their products 1 + (p + q) 2^-20 + pq 2^-40 need
// 41 bits, so a float32 computation rounds them while every partial sum of
// a float64 one (magnitude < 2^9, on the 2^-40 grid) is exact. The
// references (refMatmul, long double) are therefore exact and the kernels
// must match them bit for bit; the same products in float32 must not.

namespace {

/// float64 tensor of +-(1 + p * 2^-20), p in [-8, 8].
Tensor exactF64(Rng &rng, llvm::ArrayRef<int64_t> shape) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  double *p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = (rng.coin() ? -1.0 : 1.0) *
           (1.0 + double(rng.uniformInt(-8, 8)) * std::ldexp(1.0, -20));
  return t;
}

/// Whether some element of `got` differs from `want`.
bool differs(const Tensor &got, const Ref &want) {
  for (int64_t i = 0; i < got.numel(); ++i)
    if (got.at(i) != want.v[size_t(i)])
      return true;
  return false;
}

} // namespace

TEST_CASE("matmul: float64 computes in float64", "[linalg][float64]") {
  Rng rng(201);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 4}, {4, 5}},
      {{130, 257}, {257, 190}},
      {{2, 3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {4, 5}},
      {{3, 4}, {6, 4, 5}},
      {{2, 1, 3, 4}, {5, 4, 2}},
      {{4}, {3, 4, 5}},
      {{2, 3, 4}, {4}},
      {{4}, {4}},
      {{0, 3, 4}, {4, 2}},
      {{40, 20, 30}, {40, 30, 10}},
      {{3, 0}, {0, 2}},
  };
  forEachTransposed(cases, [&](const Shape &sa, const Shape &a, const Shape &b, bool ta, bool tb) {
    Tensor x = exactF64(rng, a), y = exactF64(rng, b);
    INFO(shapeOf(a) << " @ " << shapeOf(b) << " ta=" << ta << " tb=" << tb);
    Tensor got = rt::matmul(x, y, ta, tb);
    REQUIRE(got.dtype() == DType::Float64);
    Ref want = refMatmul(Ref(x), Ref(y), ta, tb);
    requireClose(got, want, Exact);
    if (want.numel() > 0 && sa.back() > 0)
      CHECK(differs(rt::matmul(rt::cast(x, DType::Float32),
                               rt::cast(y, DType::Float32), ta, tb),
                    want));
  });
}

TEST_CASE("matmul: mixed float32 and float64 promote to float64; 16-bit "
          "floats round back; integers are refused",
          "[linalg][float64]") {
  Rng rng(202);
  Tensor x = exactF64(rng, {5, 6}), y = exactF64(rng, {6, 7});
  Tensor x32 = rt::cast(x, DType::Float32); // exact: 21 significant bits
  Ref want = refMatmul(Ref(x), Ref(y), false, false);
  Tensor got = rt::matmul(x32, y);
  REQUIRE(got.dtype() == DType::Float64);
  requireClose(got, want, Exact);
  got = rt::matmul(y, x32, true, true);
  REQUIRE(got.dtype() == DType::Float64);
  requireClose(got, refMatmul(Ref(y), Ref(x32), true, true), Exact);

  // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]].
  for (DType h : {DType::Float16, DType::BFloat16}) {
    Tensor a = rt::cast(Tensor::fromFloats({2, 2}, {1, 2, 3, 4}), h);
    Tensor b = rt::cast(Tensor::fromFloats({2, 2}, {5, 6, 7, 8}), h);
    Tensor c = rt::matmul(a, b);
    REQUIRE(c.dtype() == h);
    Ref r(Shape{2, 2});
    r.v = {19, 22, 43, 50};
    requireClose(c, r, Exact);
  }
  Tensor i32 = Tensor::fromInts({2, 2}, {1, 2, 3, 4}, DType::Int32);
  REQUIRE_THROWS_WITH(
      rt::matmul(x, i32),
      Catch::Contains("matmul: b (2, 2) must be floating point"));
}

TEST_CASE("linear and gemm: float64 computes in float64", "[linalg][float64]") {
  Rng rng(203);
  Tensor x = exactF64(rng, {2, 3, 9}), w = exactF64(rng, {5, 9});
  // bias on the 2^-40 grid: added in float64 it stays exact.
  Tensor bias = Tensor::empty({5}, DType::Float64);
  for (int64_t o = 0; o < 5; ++o)
    bias.data<double>()[o] = double(o - 2) * std::ldexp(1.0, -40);
  for (rt::Activation act : {rt::Activation::None, rt::Activation::Relu6}) {
    Ref want = refLinear(x, w, bias, act);
    Tensor got = rt::linear(x, w, bias, act);
    REQUIRE(got.dtype() == DType::Float64);
    requireClose(got, want, Exact);
    CHECK(differs(rt::linear(rt::cast(x, DType::Float32),
                             rt::cast(w, DType::Float32),
                             rt::cast(bias, DType::Float32), act),
                  want));
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Tensor a = exactF64(rng, ta ? Shape{11, 7} : Shape{7, 11});
      Tensor b = exactF64(rng, tb ? Shape{4, 11} : Shape{11, 4});
      Tensor c = exactF64(rng, {4});
      Ref ab = refMatmul(Ref(a), Ref(b), ta, tb), want(Shape{7, 4});
      for (int64_t i = 0; i < 7; ++i)
        for (int64_t j = 0; j < 4; ++j)
          want.v[i * 4 + j] = double(0.5L * ab.v[i * 4 + j] + 2.0L * c.at(j));
      INFO("ta=" << ta << " tb=" << tb);
      Tensor got = rt::gemm(a, b, c, 0.5f, 2.0f, ta, tb);
      REQUIRE(got.dtype() == DType::Float64);
      requireClose(got, want, Exact);
    }
}

TEST_CASE("einsum and det: float64 in, float64 out", "[linalg][float64]") {
  Rng rng(204);
  Tensor a = exactF64(rng, {2, 3, 4}), b = exactF64(rng, {2, 4, 5});
  Ref want = refMatmul(Ref(a), Ref(b), false, false);
  Tensor got = rt::einsum("bij,bjk->bik", {a, b});
  REQUIRE(got.dtype() == DType::Float64);
  requireClose(got, want, Exact);
  // A float32 operand promotes: the product is still exact.
  got = rt::einsum("bij,bjk->bik", {rt::cast(a, DType::Float32), b});
  REQUIRE(got.dtype() == DType::Float64);
  requireClose(got, want, Exact);
  // The sum over j of a[0] (3, 4): 1 + p 2^-20 terms, exact in float64.
  Ref rowSums(Shape{3});
  for (int64_t i = 0; i < 3; ++i) {
    long double s = 0;
    for (int64_t j = 0; j < 4; ++j)
      s += a.at(i * 4 + j);
    rowSums.v[size_t(i)] = double(s);
  }
  requireClose(rt::einsum("ij->i", {a.sliced(0, 0, 1).reshaped({3, 4})}),
               rowSums, Exact);
  REQUIRE_THROWS_WITH(
      rt::einsum("ij->i", {Tensor::fromInts({1, 2}, {1, 2}, DType::Int32)}),
      Catch::Contains("einsum: operands must be floating point"));

  // det [[2, 1], [1, 0.5 + 2^-30]] = 2^-29; 0.5 + 2^-30 is 0.5 in float32.
  Tensor m = Tensor::empty({2, 2}, DType::Float64);
  double e = std::ldexp(1.0, -30);
  std::copy_n(std::array<double, 4>{2.0, 1.0, 1.0, 0.5 + e}.data(), 4,
              m.data<double>());
  Tensor d = rt::det(m);
  REQUIRE(d.dtype() == DType::Float64);
  CHECK(d.at(0) == 2 * e);
}
