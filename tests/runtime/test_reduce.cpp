//===- test_reduce.cpp - Reductions against references --------------------===//
#include "Reference.h"

#include <limits>

using namespace tmtest;
namespace rt = tmg::rt;
using rt::ReduceOp;

namespace {

/// Output multi-index of input index `idx` (reduced axes dropped or set
/// to 0 with keepdims).
std::vector<int64_t> reducedIndex(const std::vector<int64_t> &idx,
                                  const std::vector<bool> &red, bool keepdims) {
  std::vector<int64_t> o;
  for (size_t d = 0; d < idx.size(); ++d) {
    if (!red[d])
      o.push_back(idx[d]);
    else if (keepdims)
      o.push_back(0);
  }
  return o;
}

Shape reducedShape(llvm::ArrayRef<int64_t> s, const std::vector<bool> &red,
                   bool keepdims) {
  Shape o;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!red[d])
      o.push_back(s[d]);
    else if (keepdims)
      o.push_back(1);
  }
  return o;
}

std::vector<bool> reducedAxes(size_t rank, llvm::ArrayRef<int64_t> axes) {
  std::vector<bool> red(rank, axes.empty());
  for (int64_t a : axes)
    red[a < 0 ? a + int64_t(rank) : a] = true;
  return red;
}

/// Naive reduction: every input element folded into its output slot.
Ref refReduce(ReduceOp op, const Ref &x, llvm::ArrayRef<int64_t> axes,
              bool keepdims) {
  auto red = reducedAxes(x.rank(), axes);
  Ref out(reducedShape(x.shape, red, keepdims));
  double init = op == ReduceOp::Prod  ? 1.0
                : op == ReduceOp::Max ? -INFINITY
                : op == ReduceOp::Min ? INFINITY
                                      : 0.0;
  std::fill(out.v.begin(), out.v.end(), init);
  int64_t count = 1;
  for (size_t d = 0; d < x.rank(); ++d)
    if (red[d])
      count *= x.shape[d];
  for (int64_t i = 0; i < x.numel(); ++i) {
    double &o = out(reducedIndex(unravel(i, x.shape), red, keepdims));
    double v = x.v[i];
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      o += v;
      break;
    case ReduceOp::Prod:
      o *= v;
      break;
    case ReduceOp::Max:
      o = std::max(o, v);
      break;
    case ReduceOp::Min:
      o = std::min(o, v);
      break;
    }
  }
  if (op == ReduceOp::Mean)
    for (double &v : out.v)
      v /= double(count);
  return out;
}

/// First extreme in row-major order over the reduced axes; the index is
/// the row-major position within the reduced sub-tensor.
Ref refArg(bool isMax, const Ref &x, llvm::ArrayRef<int64_t> axes,
           bool keepdims) {
  auto red = reducedAxes(x.rank(), axes);
  Ref out(reducedShape(x.shape, red, keepdims));
  Ref best(out.shape, NAN);
  std::vector<bool> seen(size_t(out.numel()), false);
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto idx = unravel(i, x.shape);
    int64_t o = out.offset(reducedIndex(idx, red, keepdims));
    int64_t pos = 0;
    for (size_t d = 0; d < x.rank(); ++d)
      if (red[d])
        pos = pos * x.shape[d] + idx[d];
    double v = x.v[i];
    if (!seen[o] || (isMax ? v > best.v[o] : v < best.v[o])) {
      seen[o] = true;
      best.v[o] = v;
      out.v[o] = double(pos);
    }
  }
  return out;
}

const ReduceOp AllOps[] = {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max,
                           ReduceOp::Min, ReduceOp::Prod};

/// A random subset of the axes of a rank, possibly empty, with negative
/// spellings mixed in.
std::vector<int64_t> randomAxes(Rng &rng, size_t rank) {
  std::vector<int64_t> axes;
  for (size_t d = 0; d < rank; ++d)
    if (rng.coin(0.4))
      axes.push_back(rng.coin() ? int64_t(d) : int64_t(d) - int64_t(rank));
  std::shuffle(axes.begin(), axes.end(), rng.gen);
  return axes;
}

} // namespace

TEST_CASE("float reductions over random axis sets", "[reduce]") {
  Rng rng(501);
  for (int i = 0; i < 150; ++i) {
    size_t rank = size_t(rng.uniformInt(0, 4));
    Shape s = rng.shape(rank, 1, 6);
    auto axes = randomAxes(rng, rank);
    bool keep = rng.coin();
    for (ReduceOp op : AllOps) {
      Tensor x =
          op == ReduceOp::Prod ? rng.tensor(s, 0.8, 1.2) : rng.tensor(s, -5, 5);
      INFO(rt::opName(op).str() << " " << shapeOf(s) << " axes "
                                << shapeOf(axes) << " keepdims " << keep);
      Tol tol =
          (op == ReduceOp::Max || op == ReduceOp::Min) ? Exact : ElementwiseTol;
      requireClose(rt::reduce(op, x, axes, keep),
                   refReduce(op, Ref(x), axes, keep), tol);
    }
  }
}

TEST_CASE("reduction wrappers and layouts needing a transpose", "[reduce]") {
  Rng rng(502);
  Tensor x = rng.tensor({3, 4, 5, 6});
  requireIdentical(rt::sum(x, {1}), rt::reduce(ReduceOp::Sum, x, {1}));
  requireIdentical(rt::mean(x, {2}), rt::reduce(ReduceOp::Mean, x, {2}));
  requireIdentical(rt::max(x, {3}), rt::reduce(ReduceOp::Max, x, {3}));
  requireIdentical(rt::min(x, {0}), rt::reduce(ReduceOp::Min, x, {0}));
  requireIdentical(rt::prod(x, {1}), rt::reduce(ReduceOp::Prod, x, {1}));
  // Separated reduced groups (0 and 2; 1 and 3; 0, 1 and 3).
  for (auto axes : {std::vector<int64_t>{0, 2}, std::vector<int64_t>{1, 3},
                    std::vector<int64_t>{0, 1, 3}})
    for (bool keep : {false, true}) {
      requireClose(rt::sum(x, axes, keep),
                   refReduce(ReduceOp::Sum, Ref(x), axes, keep),
                   ElementwiseTol);
      requireClose(rt::argmax(x, axes, keep), refArg(true, Ref(x), axes, keep),
                   Exact);
    }
}

TEST_CASE("integer reductions keep the dtype; mean gives float32",
          "[reduce][dtype]") {
  Rng rng(503);
  for (DType t : {DType::Int32, DType::Int64}) {
    Tensor x = rng.ints({4, 3, 5}, -9, 9, t);
    for (ReduceOp op : AllOps)
      for (auto axes : {std::vector<int64_t>{}, std::vector<int64_t>{1},
                        std::vector<int64_t>{0, 2}}) {
        Tensor r = rt::reduce(op, x, axes);
        CHECK(r.dtype() == (op == ReduceOp::Mean ? DType::Float32 : t));
        INFO(rt::opName(op).str() << " axes " << shapeOf(axes));
        requireClose(r, refReduce(op, Ref(x), axes, false),
                     op == ReduceOp::Mean ? ElementwiseTol : Exact);
      }
  }
  // Bool counts as int32.
  Tensor b = Tensor::fromInts({4}, {1, 0, 1, 1}, DType::Bool);
  Tensor n = rt::sum(b);
  CHECK(n.dtype() == DType::Int32);
  CHECK(n.data<int32_t>()[0] == 3);
}

TEST_CASE("reductions over size-0 and size-1 axes", "[reduce]") {
  Tensor e = Tensor::zeros({3, 0});
  CHECK(Ref(rt::sum(e, {1})).v == std::vector<double>{0, 0, 0});
  CHECK(Ref(rt::prod(e, {1})).v == std::vector<double>{1, 1, 1});
  CHECK(std::isnan(rt::mean(e, {1}).data<float>()[0]));
  CHECK(shapeOf(rt::max(e, {0}).shape()) == "(0,)");
  CHECK(shapeOf(rt::sum(e, {1}, true).shape()) == "(3, 1)");
  // Reduced axes apart from one another, one of them of size 0 (ONNX
  // MeanVarianceNormalization over (0, 2, 3) of a (3, 3, 3, 0) input).
  Tensor apart = Tensor::zeros({3, 3, 3, 0});
  CHECK(Ref(rt::sum(apart, {0, 2, 3})).v == std::vector<double>{0, 0, 0});
  Tensor m = rt::mean(apart, {0, 2, 3}, true);
  CHECK(shapeOf(m.shape()) == "(1, 3, 1, 1)");
  CHECK(std::isnan(m.data<float>()[2]));
  Tensor one = Tensor::randn({1, 5, 1}, 1);
  requireClose(rt::sum(one, {0, 2}), Ref(one.reshaped({5})), Exact);
  Tensor scalar = Tensor::full({}, 4.0);
  CHECK(rt::sum(scalar).data<float>()[0] == 4.0f);
  CHECK(rt::argmax(scalar).data<int64_t>()[0] == 0);
}

TEST_CASE("argmax and argmin: first extreme, NaN, several axes", "[reduce]") {
  Rng rng(504);
  for (int i = 0; i < 100; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 4));
    Shape s = rng.shape(rank, 1, 5);
    auto axes = randomAxes(rng, rank);
    bool keep = rng.coin();
    // Few distinct values: plenty of ties.
    Tensor x = rt::cast(rng.ints(s, -2, 2), DType::Float32);
    INFO(shapeOf(s) << " axes " << shapeOf(axes) << " keepdims " << keep);
    Tensor am = rt::argmax(x, axes, keep);
    CHECK(am.dtype() == DType::Int64);
    requireClose(am, refArg(true, Ref(x), axes, keep), Exact);
    requireClose(rt::argmin(x, axes, keep), refArg(false, Ref(x), axes, keep),
                 Exact);
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::fromFloats({5}, {1.0f, nan, 9.0f, nan, -3.0f});
  CHECK(rt::argmax(n).data<int64_t>()[0] == 1);
  CHECK(rt::argmin(n).data<int64_t>()[0] == 1);
  CHECK(std::isnan(rt::max(n).data<float>()[0]));
  CHECK(std::isnan(rt::min(n, {0}).data<float>()[0]));
  Tensor ints = Tensor::fromInts({2, 3}, {3, 7, 7, -1, -1, 0}, DType::Int32);
  CHECK(Ref(rt::argmax(ints, {1})).v == std::vector<double>{1, 2});
  CHECK(Ref(rt::argmin(ints, {1})).v == std::vector<double>{0, 0});
}

TEST_CASE("large reductions are chunked deterministically",
          "[reduce][threads]") {
  Rng rng(505);
  // Full reduction of 3M elements (many row chunks), a column reduction
  // with a long reduced axis (row chunks with inner > 1), and an inner
  // reduction of many rows.
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {
      {{3000000}, {}},
      {{200000, 3}, {0}},
      {{5000, 300}, {1}},
      {{40, 5000, 7}, {1}}};
  for (const auto &[s, axes] : cases) {
    Tensor x = rng.tensor(s);
    INFO(shapeOf(s) << " axes " << shapeOf(axes));
    Tensor one = withThreads(1, [&] { return rt::sum(x, axes); });
    Tensor two = withThreads(2, [&] { return rt::sum(x, axes); });
    requireIdentical(one, two);
    requireClose(two, refReduce(ReduceOp::Sum, Ref(x), axes, false),
                 ElementwiseTol);
    Tensor a1 = withThreads(1, [&] { return rt::argmax(x, axes); });
    Tensor a2 = withThreads(2, [&] { return rt::argmax(x, axes); });
    requireIdentical(a1, a2);
    requireClose(a2, refArg(true, Ref(x), axes, false), Exact);
    requireClose(rt::max(x, axes),
                 refReduce(ReduceOp::Max, Ref(x), axes, false), Exact);
  }
}

TEST_CASE("reduction errors name the op and the shapes", "[reduce][errors]") {
  Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(rt::sum(x, {2}),
                      Catch::Contains("sum: axis 2 is out of range for shape "
                                      "(2, 3)"));
  REQUIRE_THROWS_WITH(rt::mean(x, {1, -1}),
                      Catch::Contains("mean: axis -1 is repeated for shape "
                                      "(2, 3)"));
  REQUIRE_THROWS_WITH(rt::max(Tensor::zeros({2, 0}), {1}),
                      Catch::Contains("max: cannot reduce input (2, 0) over a "
                                      "size-0 axis (axes (1,))"));
  REQUIRE_THROWS_WITH(rt::argmin(Tensor::zeros({0})),
                      Catch::Contains("argmin: cannot reduce input (0,)"));
}
