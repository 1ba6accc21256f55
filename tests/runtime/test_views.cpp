//===- test_views.cpp - Strided tensor views and the interpreter boundary -===//
//
// Tensor views (permuted, sliced, selected, expanded, reshaped, asStrided)
// against element-by-element references; arena accounting of views; and
// the interpreter's one conversion point, where views produced by
// transpose / getitem / broadcast_to reach kernels that need dense data.
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include "tm/ir/IR.h"
#include "tm/runtime/Interpreter.h"

using namespace tmtest;
using namespace tmg;
namespace rt = tmg::rt;

namespace {

/// Reference value of view element `idx` given the dense source and a map
/// from view multi-index to source multi-index.
template <typename Map>
void requireViewOf(const Tensor &view, const Tensor &src, Map toSource) {
  Ref got(view), s(src);
  REQUIRE(got.numel() == view.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    auto idx = unravel(i, view.shape());
    REQUIRE(got.v[i] == s(toSource(idx)));
  }
}

Tensor ramp(llvm::ArrayRef<int64_t> shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(i);
  return t;
}

} // namespace

TEST_CASE("permuted, sliced, selected and expanded are views", "[views]") {
  Tensor x = ramp({2, 3, 4});
  Tensor p = x.permuted({2, 0, 1});
  CHECK(p.sharesStorage(x));
  CHECK_FALSE(p.isContiguous());
  CHECK(p.shape() == llvm::ArrayRef<int64_t>{4, 2, 3});
  requireViewOf(p, x, [](auto i) { return std::vector<int64_t>{i[1], i[2], i[0]}; });

  Tensor s = x.sliced(2, 1, 4, 2); // x[:, :, 1::2]
  CHECK(s.sharesStorage(x));
  CHECK(s.shape() == llvm::ArrayRef<int64_t>{2, 3, 2});
  requireViewOf(s, x, [](auto i) { return std::vector<int64_t>{i[0], i[1], 1 + 2 * i[2]}; });
  // Slicing along the outermost axis with step 1 stays contiguous.
  Tensor rows = x.sliced(0, 1, 2);
  CHECK(rows.isContiguous());
  CHECK(rows.data<float>()[0] == 12.0f);
  // Empty and clamped slices.
  CHECK(x.sliced(1, 2, 2).numel() == 0);
  CHECK(x.sliced(1, 1, 100, 3).dim(1) == 1);

  Tensor sel = x.selected(1, -1); // x[:, 2]
  CHECK(sel.shape() == llvm::ArrayRef<int64_t>{2, 4});
  requireViewOf(sel, x, [](auto i) { return std::vector<int64_t>{i[0], 2, i[1]}; });

  Tensor col = ramp({3, 1});
  Tensor e = col.expanded({2, 3, 5});
  CHECK(e.sharesStorage(col));
  CHECK(e.strides() == llvm::ArrayRef<int64_t>{0, 1, 0});
  requireViewOf(e, col, [](auto i) { return std::vector<int64_t>{i[1], 0}; });

  CHECK_THROWS_WITH(x.permuted({0, 0, 1}), Catch::Contains("repeats"));
  CHECK_THROWS_WITH(x.sliced(3, 0, 1), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(x.sliced(0, 0, 1, 0), Catch::Contains("step"));
  CHECK_THROWS_WITH(col.expanded({2, 2}), Catch::Contains("cannot broadcast"));
  CHECK_THROWS_WITH(col.expanded({3}), Catch::Contains("cannot broadcast"));
  CHECK_THROWS_WITH(x.asStrided({2, 12}, {12, 1}, 1), Catch::Contains("reaches element"));
}

TEST_CASE("contiguous() copies only views, and dense accessors refuse views", "[views]") {
  Rng rng(5);
  for (Layout l : AllLayouts) {
    for (Shape shape : {Shape{}, Shape{1}, Shape{0, 3}, Shape{5}, Shape{3, 1, 4},
                        Shape{2, 3, 4, 5}}) {
      CAPTURE(layoutName(l), shapeOf(shape));
      Tensor dense = rng.tensor(shape);
      Tensor v = stridedCopyOf(dense, l, rng);
      Tensor c = v.contiguous();
      CHECK(c.isContiguous());
      requireIdentical(c, dense);
      CHECK(v.bitwiseEqual(dense));
      CHECK(c.contiguous().sharesStorage(c));
      requireIdentical(v.clone(), dense);
      for (int64_t i = 0; i < dense.numel(); ++i)
        REQUIRE(v.at(i) == dense.at(i));
    }
  }
  Tensor t = ramp({3, 4}).permuted({1, 0});
  CHECK_THROWS_WITH(t.data<float>(), Catch::Contains("non-contiguous view"));
}

TEST_CASE("contiguous() of transposed last dimensions, every block edge", "[views]") {
  // Copied in 32 x 32 blocks: sizes around the block, leading dimensions,
  // every element size.
  Rng rng(6);
  for (DType dt : {DType::UInt8, DType::Int16, DType::Float32, DType::Float64})
    for (Shape shape : {Shape{1, 1}, Shape{31, 33}, Shape{64, 70}, Shape{3, 2, 45, 32},
                        Shape{2, 1, 97}}) {
      CAPTURE(dtypeName(dt).str(), shapeOf(shape));
      Tensor dense = tmg::rt::asDType(rng.tensor(shape, -50, 50), dt);
      llvm::SmallVector<int64_t, 4> perm;
      for (size_t d = 0; d < shape.size(); ++d)
        perm.push_back(int64_t(d));
      std::swap(perm[shape.size() - 2], perm[shape.size() - 1]);
      Tensor t = dense.permuted(perm), c = t.contiguous();
      REQUIRE(c.isContiguous());
      REQUIRE(c.shape() == t.shape());
      for (int64_t i = 0; i < c.numel(); ++i)
        REQUIRE(c.at(i) == t.at(i));
    }
}

TEST_CASE("reshaped is a view whenever the strides allow", "[views]") {
  Tensor x = ramp({4, 6});
  Tensor t = x.permuted({1, 0}); // (6, 4), strides (1, 6)
  // Splitting a dimension keeps a view...
  Tensor split = t.reshaped({2, 3, 4});
  CHECK(split.sharesStorage(x));
  requireViewOf(split, x, [](auto i) { return std::vector<int64_t>{i[2], i[0] * 3 + i[1]}; });
  // ...and so do squeeze / unsqueeze...
  Tensor un = t.reshaped({6, 1, 4, 1});
  CHECK(un.sharesStorage(x));
  requireViewOf(un, x, [](auto i) { return std::vector<int64_t>{i[2], i[0]}; });
  // ...but merging the two transposed dimensions needs a copy.
  Tensor flat = t.reshaped({24});
  CHECK_FALSE(flat.sharesStorage(x));
  CHECK(flat.isContiguous());
  requireViewOf(flat, x, [](auto i) { return std::vector<int64_t>{i[0] % 4, i[0] / 4}; });
  // A stepped slice merges with its outer dimension when they line up...
  Tensor s = ramp({3, 8}).sliced(1, 0, 8, 2); // (3, 4), strides (8, 2)
  Tensor m = s.reshaped({12});
  CHECK(m.sharesStorage(s)); // 8 == 4 * 2: one dimension of stride 2
  CHECK(m.strides() == llvm::ArrayRef<int64_t>{2});
  requireViewOf(m, ramp({24}), [](auto i) { return std::vector<int64_t>{2 * i[0]}; });
  // ...and is copied when they do not.
  Tensor s9 = ramp({3, 9}).sliced(1, 0, 8, 2); // (3, 4), strides (9, 2)
  Tensor m9 = s9.reshaped({12});
  CHECK_FALSE(m9.sharesStorage(s9));
  requireViewOf(m9, ramp({27}), [](auto i) { return std::vector<int64_t>{(i[0] / 4) * 9 + 2 * (i[0] % 4)}; });
  Tensor rows = ramp({6, 4}).sliced(0, 0, 6, 2); // (3, 4), strides (8, 1)
  CHECK(rows.reshaped({3, 2, 2}).sharesStorage(rows));
  CHECK_THROWS_WITH(t.reshaped({5, 5}), Catch::Contains("cannot reshape"));
}

TEST_CASE("views own no arena bytes", "[views][arena]") {
  auto arena = std::make_shared<StorageArena>();
  auto previous = StorageArena::install(arena);
  {
    Tensor x = Tensor::zeros({64, 64});
    int64_t one = arena->liveBytes();
    CHECK(one >= 64 * 64 * 4);
    Tensor v1 = x.permuted({1, 0}), v2 = x.sliced(0, 0, 64, 2), v3 = x.reshaped({4096}),
           v4 = x.selected(0, 3).expanded({5, 64});
    CHECK(arena->liveBytes() == one);
    Tensor c = v1.contiguous();
    CHECK(arena->liveBytes() == 2 * one);
    x = Tensor(); // the views keep the storage alive
    CHECK(arena->liveBytes() == 2 * one);
    v1 = v2 = v3 = v4 = Tensor();
    CHECK(arena->liveBytes() == one);
  }
  CHECK(arena->liveBytes() == 0);
  StorageArena::install(previous);
}

//===----------------------------------------------------------------------===//
// The interpreter: views flow between steps, dense kernels get contiguous()
//===----------------------------------------------------------------------===//

namespace {

/// Runs `consume(view(x))` as a graph and returns the output.
template <typename MakeView, typename Consume>
Tensor runGraph(Shape inShape, MakeView makeView, Consume consume, const Tensor &x,
                int64_t *peak = nullptr) {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", inShape}});
  b.finish(consume(b, makeView(b, b.arg(0))));
  rt::Interpreter interp(*tm);
  rt::RunResult r = interp.run({x});
  if (peak)
    *peak = r.peakBytes;
  return r.outputs.at(0);
}

} // namespace

TEST_CASE("kernels behind transpose, stepped getitem and broadcast_to",
          "[views][interp]") {
  Rng rng(17);
  Tensor x = rng.tensor({2, 6, 8, 4});
  // The three views, as graph exprs and as the kernels compute them.
  auto transposed = [](GraphBuilder &b, Node *n) {
    return b.callFunction("transpose", {n, Arg::ints({0, 3, 2, 1})});
  };
  auto stepped = [](GraphBuilder &b, Node *n) {
    return b.callMethod(n, "__getitem__",
                        {Arg::tuple({Arg::slice(Arg::none(), Arg::none(), Arg::none()),
                                     Arg::slice(1, Arg::none(), 2),
                                     Arg::slice(Arg::none(), Arg::none(), 3)})});
  };
  auto broadcast = [](GraphBuilder &b, Node *n) {
    Node *row = b.callMethod(n, "__getitem__", {Arg::tuple({0, 0, 0})});
    return b.callFunction("broadcast_to", {row, Arg::ints({2, 3, 5, 4})});
  };
  Tensor tv = x.permuted({0, 3, 2, 1}).contiguous();
  Tensor sv = rt::getitem(x, {rt::IndexItem::range(std::nullopt, std::nullopt, 1),
                              rt::IndexItem::range(1, std::nullopt, 2),
                              rt::IndexItem::range(std::nullopt, std::nullopt, 3)})
                  .contiguous();
  Tensor bv = x.selected(0, 0).selected(0, 0).selected(0, 0).expanded({2, 3, 5, 4}).contiguous();
  REQUIRE(tv.isContiguous());

  using Consume = std::function<Node *(GraphBuilder &, Node *)>;
  using Kernel = std::function<Tensor(const Tensor &)>;
  Tensor w = rng.tensor({5, 4, 3, 3}), m = rng.tensor({4, 7});
  REQUIRE(tv.dim(1) == 4);
  const std::vector<std::tuple<const char *, Consume, Kernel>> consumers = {
      {"relu", [](GraphBuilder &b, Node *v) { return b.callFunction("relu", {v}); },
       [](const Tensor &t) { return rt::unary(rt::UnaryOp::Relu, t); }},
      {"softmax", [](GraphBuilder &b, Node *v) { return b.callFunction("softmax", {v, 1}); },
       [](const Tensor &t) { return rt::softmax(t, 1); }},
      {"sum", [](GraphBuilder &b, Node *v) { return b.callFunction("sum", {v, 2}); },
       [](const Tensor &t) { return rt::reduce(rt::ReduceOp::Sum, t, {2}, false); }},
      {"matmul", [&](GraphBuilder &b, Node *v) {
         return b.callFunction("matmul", {v, b.constant(m)}); },
       [&](const Tensor &t) { return rt::matmul(t, m); }},
      {"concat", [](GraphBuilder &b, Node *v) {
         return b.callFunction("concat", {Arg::list({v, v}), 1}); },
       [](const Tensor &t) { return rt::concat({t, t}, 1); }},
      {"add", [](GraphBuilder &b, Node *v) { return b.callMethod(v, "__add__", {v}); },
       [](const Tensor &t) { return rt::add(t, t); }},
  };
  for (const auto &[name, consume, kernel] : consumers) {
    CAPTURE(name);
    // matmul needs the last dimension 4: the transposed view has 6.
    if (std::string(name) != "matmul")
      requireIdentical(runGraph({2, 6, 8, 4}, transposed, consume, x), kernel(tv));
    requireIdentical(runGraph({2, 6, 8, 4}, stepped, consume, x), kernel(sv));
    requireIdentical(runGraph({2, 6, 8, 4}, broadcast, consume, x), kernel(bv));
  }
  // conv2d and max_pool2d (NCHW) behind the transpose.
  auto conv = [&](GraphBuilder &b, Node *v) { return b.callFunction("conv2d", {v, b.constant(w)}); };
  requireIdentical(runGraph({2, 6, 8, 4}, transposed, conv, x), rt::conv2d(tv, w));
  auto pool = [](GraphBuilder &b, Node *v) { return b.callFunction("max_pool2d", {v, 2}); };
  rt::Pool2dParams pp;
  pp.kernel = 2;
  requireIdentical(runGraph({2, 6, 8, 4}, transposed, pool, x), rt::maxPool2d(tv, pp));
  requireIdentical(runGraph({2, 6, 8, 4}, stepped, pool, x), rt::maxPool2d(sv, pp));
  // The fused ops of `-p optimize` behind a view: a batch-2 channel slice
  // is strided (ShuffleNetV2's split, exported with batch 8).
  auto convAct = [&](GraphBuilder &b, Node *v) {
    return b.callFunction("nn.conv2d_act", {v, b.constant(w)},
                          {{"activation", std::string("relu")}});
  };
  Tensor convRelu = rt::unary(rt::UnaryOp::Relu, rt::conv2d(tv, w));
  requireIdentical(runGraph({2, 6, 8, 4}, transposed, convAct, x), convRelu);
  Tensor lw = rng.tensor({7, 4}), lb = rng.tensor({7});
  auto linearAct = [&](GraphBuilder &b, Node *v) {
    return b.callFunction("nn.linear_act", {v, b.constant(lw), b.constant(lb)},
                          {{"activation", std::string("none")}});
  };
  requireIdentical(runGraph({2, 6, 8, 4}, stepped, linearAct, x),
                   rt::linear(sv, lw, lb));
  // A residual add whose other operand is a view runs as its own op.
  Tensor wr = rng.tensor({4, 4, 3, 3});
  auto residual = [&](GraphBuilder &b, Node *v) {
    Node *c =
        b.callFunction("conv2d", {b.callFunction("relu", {v}), b.constant(wr)},
                       {{"padding", 1}});
    return b.callFunction("relu", {b.callMethod(c, "__add__", {v})});
  };
  Tensor conv2 = rt::conv2d(rt::unary(rt::UnaryOp::Relu, tv), wr, Tensor(),
                            {.padding = 1});
  requireIdentical(runGraph({2, 6, 8, 4}, transposed, residual, x),
                   rt::unary(rt::UnaryOp::Relu, rt::add(conv2, tv)));
}

TEST_CASE("channels-last values: a ConvNeXt block transposes nothing",
          "[views][interp]") {
  // As PyTorch exports ConvNeXt's blocks: two (N, H, W, C) values
  // transposed to (N, C, H, W), x * scale (C, 1, 1) + r, a 7x7 depthwise
  // conv, the transpose back. The elementwise chain computes in the
  // channels-last order of its first operand and the depthwise conv reads
  // and writes that order, so the last transpose is dense (N, H, W, C)
  // again (the layouts themselves are checked with the kernels). Values:
  // bit for bit the ops on dense (N, C, H, W) tensors, fused or with every
  // op on its own (values watched).
  Rng rng(18);
  int64_t n = 2, h = 9, w = 13, c = 40;
  Tensor x = rng.tensor({n, h, w, c}), r = rng.tensor({n, h, w, c});
  Tensor scale = rng.tensor({c, 1, 1}), wt = rng.tensor({c, 1, 7, 7}),
         bias = rng.tensor({c});
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Block"));
  GraphBuilder b = GraphBuilder::top(
      *tm, {{"x", Shape{n, h, w, c}}, {"r", Shape{n, h, w, c}}});
  auto toNchw = [&](Node *v) {
    return b.callFunction("transpose", {v, Arg::ints({0, 3, 1, 2})});
  };
  Node *scaled = b.callMethod(toNchw(b.arg(0)), "__mul__", {b.constant(scale)});
  Node *sum = b.callMethod(scaled, "__add__", {toNchw(b.arg(1))});
  Node *conv = b.callFunction("conv2d", {sum, b.constant(wt), b.constant(bias)},
                              {{"padding", 3}, {"groups", c}});
  b.finish(b.callFunction("transpose", {conv, Arg::ints({0, 2, 3, 1})}));

  Tensor xd = x.permuted({0, 3, 1, 2}).contiguous(),
         rd = r.permuted({0, 3, 1, 2}).contiguous();
  Tensor sumWant = rt::add(rt::mul(xd, scale), rd);
  Tensor convWant = rt::conv2d(sumWant, wt, bias, {.padding = 3, .groups = c});
  Tensor want = convWant.permuted({0, 2, 3, 1}).contiguous();
  rt::Interpreter interp(*tm);
  requireIdentical(interp.run({x, r}).outputs.at(0), want);
  rt::RunResult watched = interp.run({x, r}, rt::RunOptions{{sum, conv}, {}});
  requireIdentical(watched.outputs.at(0), want);
  requireIdentical(watched.watched.at(sum).at(0), sumWant);
  requireIdentical(watched.watched.at(conv).at(0), convWant);
}

TEST_CASE("transposing twice needs no copy in the interpreter", "[views][interp]") {
  Tensor x = Tensor::randn({64, 32}, 3);
  int64_t peak = 0;
  auto twice = [](GraphBuilder &b, Node *n) {
    Node *t = b.callFunction("transpose", {n, Arg::ints({1, 0})});
    return b.callFunction("transpose", {t, Arg::ints({1, 0})});
  };
  auto relu = [](GraphBuilder &b, Node *v) { return b.callFunction("relu", {v}); };
  Tensor y = runGraph({64, 32}, twice, relu, x, &peak);
  requireIdentical(y, rt::unary(rt::UnaryOp::Relu, x));
  // Only relu's output is allocated: both transposes are views and the
  // double transpose is contiguous again.
  CHECK(peak <= int64_t(x.nbytes()));
}
