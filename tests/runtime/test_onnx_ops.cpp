//===- test_onnx_ops.cpp - topk, gather_nd, einsum, ... by hand -----------===//
//
// The kernels of topk, gather_nd, one_hot, compress, reverse_sequence,
// local_response_norm, einsum, det, max_unpool_nd and grid_sample against
// values worked out by hand or taken from the ONNX operator examples.
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include "tm/runtime/Kernels.h"

using namespace tmg;
using namespace tmg::rt;
using tmtest::checkValues;
using tmtest::floats;

namespace {

} // namespace

TEST_CASE("topk: largest, smallest, ties and kth_only", "[runtime][topk]") {
  // The ONNX TopK example: the 3 largest of each row.
  Tensor x = floats({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  auto [v, i] = topk(x, 3, /*descending=*/true);
  checkValues(v, {3, 3}, {3, 2, 1, 7, 6, 5, 11, 10, 9});
  checkValues(i, {3, 3}, {3, 2, 1, 3, 2, 1, 3, 2, 1});
  CHECK(i.dtype() == DType::Int64);
  // Equal values: the lower index first.
  auto [v2, i2] = topk(floats({4}, {3, 1, 3, 1}), 2);
  checkValues(v2, {2}, {1, 1});
  checkValues(i2, {2}, {1, 3});
  auto [v3, i3] = topk(floats({4}, {1, 3, 2, 3}), 2, true);
  checkValues(i3, {2}, {1, 3});
  auto [v4, i4] = topk(x, 2, true, /*kthOnly=*/true);
  checkValues(v4, {3}, {2, 6, 10});
  checkValues(i4, {3}, {2, 2, 2});
  auto [v5, i5] = topk(Tensor::fromInts({3}, {5, -2, 7}, DType::Int32), 1);
  CHECK(v5.dtype() == DType::Int32);
  checkValues(v5, {1}, {-2});
  CHECK_THROWS_WITH(topk(x, 5), Catch::Contains("k = 5 is out of range"));
}

TEST_CASE("gather_nd: the ONNX examples", "[runtime][gather_nd]") {
  Tensor d2 = Tensor::fromInts({2, 2}, {0, 1, 2, 3}, DType::Int32);
  checkValues(gatherNd(d2, Tensor::fromInts({2, 2}, {0, 0, 1, 1})), {2}, {0, 3});
  checkValues(gatherNd(d2, Tensor::fromInts({2, 1}, {1, 0})), {2, 2}, {2, 3, 0, 1});
  Tensor d3 = Tensor::fromInts({2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7}, DType::Int32);
  checkValues(gatherNd(d3, Tensor::fromInts({2, 2}, {0, 1, 1, 0})), {2, 2}, {2, 3, 4, 5});
  checkValues(gatherNd(d3, Tensor::fromInts({2, 1, 2}, {0, 1, 1, 0})), {2, 1, 2},
              {2, 3, 4, 5});
  // batch_dims = 1: row b of indices indexes d3[b].
  checkValues(gatherNd(d3, Tensor::fromInts({2, 1}, {1, 0}), 1), {2, 2}, {2, 3, 4, 5});
  // Negative indices count from the end.
  checkValues(gatherNd(d2, Tensor::fromInts({1, 2}, {-1, -2})), {1}, {2});
  CHECK_THROWS_WITH(gatherNd(d2, Tensor::fromInts({1, 2}, {2, 0})),
                    Catch::Contains("out of range"));
}

TEST_CASE("one_hot: negative indices wrap, others out of range give zeros",
          "[runtime][one_hot]") {
  Tensor idx = Tensor::fromInts({4}, {1, -1, 5, 0});
  Tensor y = oneHot(idx, 3);
  CHECK(y.dtype() == DType::Int64);
  checkValues(y, {4, 3}, {0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0});
  checkValues(oneHot(floats({2}, {2.0f, 0.0f}), 3), {2, 3}, {0, 0, 1, 1, 0, 0});
}

TEST_CASE("compress: along an axis and flattened", "[runtime][compress]") {
  // The ONNX Compress examples.
  Tensor x = floats({3, 2}, {1, 2, 3, 4, 5, 6});
  checkValues(compress(x, Tensor::fromInts({3}, {0, 1, 1}, DType::Bool), 0), {2, 2},
              {3, 4, 5, 6});
  checkValues(compress(x, Tensor::fromInts({2}, {0, 1}, DType::Bool), 1), {3, 1}, {2, 4, 6});
  checkValues(compress(x, Tensor::fromInts({5}, {0, 1, 0, 0, 1}, DType::Bool), std::nullopt),
              {2}, {2, 5});
  checkValues(compress(x, Tensor::fromInts({1}, {1}, DType::Bool), -1), {3, 1}, {1, 3, 5});
}

TEST_CASE("reverse_sequence: the ONNX examples", "[runtime][reverse_sequence]") {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i)
    v[size_t(i)] = float(i);
  Tensor x = floats({4, 4}, v);
  // time_axis 0, batch_axis 1: column b reversed over its first lens[b] rows.
  checkValues(reverseSequence(x, Tensor::fromInts({4}, {4, 3, 2, 1}), 1, 0), {4, 4},
              {12, 9, 6, 3, 8, 5, 2, 7, 4, 1, 10, 11, 0, 13, 14, 15});
  // batch_axis 0, time_axis 1: row b reversed over its first lens[b] entries.
  checkValues(reverseSequence(x, Tensor::fromInts({4}, {1, 2, 3, 4}), 0, 1), {4, 4},
              {0, 1, 2, 3, 5, 4, 6, 7, 10, 9, 8, 11, 15, 14, 13, 12});
}

TEST_CASE("local_response_norm: sums over the channel window", "[runtime][lrn]") {
  Tensor x = floats({1, 3, 1, 1}, {1, 2, 3});
  // size 3, alpha / size = 1, k = 1, beta = 1: x / (1 + sum of squares of
  // channels c-1..c+1).
  checkValues(localResponseNorm(x, 3, 1.0, 3.0, 1.0), {1, 3, 1, 1},
              {1.0 / 6, 2.0 / 15, 3.0 / 14});
  // Even size 2: channels c..c+1.
  checkValues(localResponseNorm(x, 2, 1.0, 2.0, 1.0), {1, 3, 1, 1},
              {1.0 / 6, 2.0 / 14, 3.0 / 10});
  // beta 0.5, k 2: 1 / sqrt(2 + 5 / 3 * ...).
  checkValues(localResponseNorm(floats({1, 1, 2}, {2, -1}), 1, 2.0, 1.0, 0.5), {1, 1, 2},
              {2 / std::sqrt(6.0), -1 / std::sqrt(3.0)});
}

TEST_CASE("einsum: products, sums, transposes and diagonals", "[runtime][einsum]") {
  Tensor a = floats({2, 2}, {1, 2, 3, 4}), b = floats({2, 2}, {5, 6, 7, 8});
  checkValues(einsum("ij,jk->ik", {a, b}), {2, 2}, {19, 22, 43, 50});
  checkValues(einsum("ij,kj", {a, b}), {2, 2}, {17, 23, 39, 53}); // a @ b^T, implicit
  checkValues(einsum("ij->ji", {a}), {2, 2}, {1, 3, 2, 4});
  checkValues(einsum("ba", {a}), {2, 2}, {1, 3, 2, 4});
  checkValues(einsum("ij->i", {a}), {2}, {3, 7});
  checkValues(einsum("ij->", {a}), {}, {10});
  checkValues(einsum("ii->i", {a}), {2}, {1, 4});
  checkValues(einsum("ii", {a}), {}, {5});
  Tensor u = floats({3}, {1, 2, 3}), v = floats({3}, {4, 5, 6});
  checkValues(einsum("i,i", {u, v}), {}, {32});
  checkValues(einsum("i,j->ij", {floats({2}, {1, 2}), floats({2}, {3, 4})}), {2, 2},
              {3, 4, 6, 8});
  checkValues(einsum("i,i,i->", {floats({2}, {1, 2}), floats({2}, {3, 4}), floats({2}, {5, 6})}),
              {}, {63});
  Tensor ab = floats({2, 2, 2}, {1, 2, 3, 4, 1, 0, 0, 1});
  checkValues(einsum("bij,bjk->bik", {ab, floats({2, 2, 2}, {5, 6, 7, 8, 5, 6, 7, 8})}),
              {2, 2, 2}, {19, 22, 43, 50, 5, 6, 7, 8});
  checkValues(einsum("...ii->...i", {ab}), {2, 2}, {1, 4, 1, 1});
  checkValues(einsum("...j,j->...", {floats({2, 3}, {1, 2, 3, 4, 5, 6}), floats({3}, {1, 0, 1})}),
              {2}, {4, 10});
  CHECK_THROWS_WITH(einsum("ij,jk->ik", {a}), Catch::Contains("has 2 operands"));
  CHECK_THROWS_WITH(einsum("ij->k", {a}), Catch::Contains("repeats a label or has one"));
}

TEST_CASE("det: 2x2, 3x3, pivoting and batches", "[runtime][det]") {
  checkValues(det(floats({2, 2}, {1, 2, 3, 4})), {}, {-2});
  checkValues(det(floats({2, 2}, {0, 1, 1, 0})), {}, {-1});
  checkValues(det(floats({2, 3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4, 1, 2, 3, 4, 5, 6, 7, 8, 10})),
              {2}, {24, -3});
  checkValues(det(floats({2, 2}, {1, 2, 2, 4})), {}, {0});
  CHECK_THROWS_WITH(det(floats({2, 3}, {1, 2, 3, 4, 5, 6})), Catch::Contains("square"));
}

TEST_CASE("max_unpool_nd: values land at their flat indices", "[runtime][max_unpool]") {
  // The ONNX MaxUnpool example.
  Tensor x = floats({1, 1, 2, 2}, {5, 6, 7, 8});
  Tensor i = Tensor::fromInts({1, 1, 2, 2}, {5, 7, 13, 15});
  checkValues(maxUnpoolNd(x, i, {4, 4}), {1, 1, 4, 4},
              {0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8});
  Tensor y = maxUnpoolNd(x, i, {5, 5});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 5, 5}));
  CHECK(y.at(5) == 5);
  CHECK(y.at(15) == 8);
  CHECK_THROWS_WITH(maxUnpoolNd(x, i, {2, 2}), Catch::Contains("out of range"));
}

TEST_CASE("grid_sample: modes, paddings and align_corners", "[runtime][grid_sample]") {
  Tensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto at = [&](float gx, float gy, GridSampleMode m, GridSamplePad p, bool align) {
    return gridSample(x, floats({1, 1, 1, 2}, {gx, gy}), m, p, align).at(0);
  };
  using M = GridSampleMode;
  using P = GridSamplePad;
  // align_corners: -1 and 1 are the corner pixels' centres.
  CHECK(at(-1, -1, M::Bilinear, P::Zeros, true) == Approx(1));
  CHECK(at(1, 1, M::Bilinear, P::Zeros, true) == Approx(4));
  CHECK(at(0, 0, M::Bilinear, P::Zeros, true) == Approx(2.5));
  CHECK(at(1, -1, M::Bicubic, P::Zeros, true) == Approx(2));
  // x = 0.55 rounds to column 1, y = 0 is row 0.
  CHECK(at(0.1f, -1, M::Nearest, P::Zeros, true) == Approx(2));
  // Without align_corners -1 is the left edge: (-0.5, -0.5) in pixels.
  CHECK(at(0, 0, M::Bilinear, P::Zeros, false) == Approx(2.5));
  CHECK(at(-1, -1, M::Bilinear, P::Zeros, false) == Approx(0.25));
  CHECK(at(-1, -1, M::Bilinear, P::Border, false) == Approx(1));
  CHECK(at(-3, -3, M::Bilinear, P::Zeros, true) == Approx(0));
  CHECK(at(-3, -3, M::Bilinear, P::Border, true) == Approx(1));
  // Reflection about the corner centres: x = -0.5 reflects to 0.5.
  CHECK(at(-2, -1, M::Bilinear, P::Reflection, true) == Approx(1.5));
  Tensor y = gridSample(x, floats({1, 2, 3, 2}, std::vector<float>(12, 0)), M::Bilinear,
                        P::Zeros, true);
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 2, 3}));
}

TEST_CASE("unique: sorted, by first occurrence and along an axis", "[runtime][unique]") {
  // The ONNX Unique examples.
  Tensor x = floats({6}, {2, 1, 1, 3, 4, 3});
  std::vector<Tensor> s = unique(x, std::nullopt, true);
  checkValues(s[0], {4}, {1, 2, 3, 4});
  checkValues(s[1], {4}, {1, 0, 3, 4});
  checkValues(s[2], {6}, {1, 0, 0, 2, 3, 2});
  checkValues(s[3], {4}, {2, 1, 2, 1});
  std::vector<Tensor> u = unique(x, std::nullopt, false);
  checkValues(u[0], {4}, {2, 1, 3, 4});
  checkValues(u[1], {4}, {0, 1, 3, 4});
  checkValues(u[2], {6}, {0, 1, 1, 2, 3, 2});
  checkValues(u[3], {4}, {1, 2, 2, 1});
  std::vector<Tensor> a =
      unique(floats({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4}), 0, true);
  checkValues(a[0], {2, 3}, {1, 0, 0, 2, 3, 4});
  checkValues(a[1], {2}, {0, 2});
  checkValues(a[2], {3}, {0, 0, 1});
  checkValues(a[3], {2}, {2, 1});
  std::vector<Tensor> b = unique(
      floats({2, 4, 2}, {1, 1, 0, 1, 2, 1, 0, 1, 1, 1, 0, 1, 2, 1, 0, 1}), 1, true);
  checkValues(b[0], {2, 3, 2}, {0, 1, 1, 1, 2, 1, 0, 1, 1, 1, 2, 1});
  checkValues(b[1], {3}, {1, 0, 2});
  checkValues(b[2], {4}, {1, 0, 2, 0});
  checkValues(b[3], {3}, {2, 1, 1});
}

TEST_CASE("non_max_suppression: the ONNX examples", "[runtime][nms]") {
  Tensor boxes = floats({1, 6, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                    0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101});
  Tensor scores = floats({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  checkValues(nonMaxSuppression(boxes, scores, 3, 0.5, 0.0, false), {3, 3},
              {0, 0, 3, 0, 0, 0, 0, 0, 5});
  checkValues(nonMaxSuppression(boxes, scores, 2, 0.5, 0.0, false), {2, 3},
              {0, 0, 3, 0, 0, 0});
  // A score threshold of 0.4 drops box 5 (0.3).
  checkValues(nonMaxSuppression(boxes, scores, 3, 0.5, 0.4, false), {2, 3},
              {0, 0, 3, 0, 0, 0});
  Tensor centers = floats({1, 6, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.6f, 1, 1, 0.5f, 0.4f, 1, 1,
                                      0.5f, 10.5f, 1, 1, 0.5f, 10.6f, 1, 1, 0.5f, 100.5f, 1, 1});
  checkValues(nonMaxSuppression(centers, scores, 3, 0.5, std::nullopt, true), {3, 3},
              {0, 0, 3, 0, 0, 0, 0, 0, 5});
  CHECK(nonMaxSuppression(boxes, scores, 0, 0.5, std::nullopt, false).dim(0) == 0);
}

TEST_CASE("roi_align: bins average bilinear samples", "[runtime][roi_align]") {
  // x[y][x] = 4 y + x is linear, so every bilinear sample is exact.
  std::vector<float> v(32);
  for (int i = 0; i < 32; ++i)
    v[size_t(i)] = float(i % 16) + (i >= 16 ? 100.0f : 0.0f);
  Tensor x = floats({2, 1, 4, 4}, v);
  // aligned: the box (0, 0)-(4, 4) starts at -0.5; 2x2 bins of 2x2 samples.
  checkValues(roiAlign(x, floats({1, 5}, {0, 0, 0, 4, 4}), 2, 2, false, 1.0, 2, 2, true),
              {1, 1, 2, 2}, {2.5, 4.5, 10.5, 12.5});
  // Not aligned: one sample at the centre (1.5, 1.5) of the box; image 1.
  checkValues(roiAlign(x, floats({1, 5}, {1, 0, 0, 3, 3}), 1, 1, false, 1.0, 1, 1, false),
              {1, 1, 1, 1}, {107.5});
  // spatial_scale 0.5 halves the box; max of samples at 0.5 and 1.5.
  checkValues(roiAlign(x, floats({1, 5}, {0, 0, 0, 4, 4}), 1, 1, true, 0.5, 2, 2, false),
              {1, 1, 1, 1}, {7.5});
  // Adaptive sampling (0): ceil(2 / 1) = 2 samples per axis.
  checkValues(roiAlign(x, floats({1, 5}, {0, 0, 0, 2, 2}), 1, 1, false, 1.0, 0, 0, false),
              {1, 1, 1, 1}, {5});
}
