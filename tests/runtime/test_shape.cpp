//===- test_shape.cpp - Shape and data-movement kernels against references ===//
#include "Reference.h"

#include <numeric>

using namespace tmtest;
namespace rt = tmg::rt;
using rt::IndexItem;

namespace {

/// A float tensor whose values are their flat indices: data movement can be
/// checked by looking at where each value landed.
Tensor iota(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32) {
  std::vector<int64_t> v(size_t(tmg::shapeNumel(shape)));
  std::iota(v.begin(), v.end(), 0);
  return rt::cast(Tensor::fromInts(shape, v), dtype);
}

/// Indices selected by a Python slice on an axis of size n, by brute force
/// (independent of the kernel's slice.indices() arithmetic).
std::vector<int64_t> pySlice(std::optional<int64_t> start,
                             std::optional<int64_t> stop, int64_t step,
                             int64_t n) {
  std::vector<int64_t> out;
  auto norm = [n](int64_t v) { return v < 0 ? v + n : v; };
  if (step > 0) {
    int64_t s = start ? std::clamp<int64_t>(norm(*start), 0, n) : 0;
    int64_t e = stop ? std::clamp<int64_t>(norm(*stop), 0, n) : n;
    for (int64_t i = 0; i < n; ++i)
      if (i >= s && i < e && (i - s) % step == 0)
        out.push_back(i);
  } else {
    int64_t s = start ? std::clamp<int64_t>(norm(*start), -1, n - 1) : n - 1;
    int64_t e = stop ? std::clamp<int64_t>(norm(*stop), -1, n - 1) : -1;
    for (int64_t i = n - 1; i >= 0; --i)
      if (i <= s && i > e && (s - i) % -step == 0)
        out.push_back(i);
  }
  return out;
}

std::optional<int64_t> randomBound(Rng &rng, int64_t n) {
  if (rng.coin(0.3))
    return std::nullopt;
  return rng.uniformInt(-n - 2, n + 2);
}

} // namespace

TEST_CASE("reshape, flatten, squeeze, unsqueeze are views", "[shape]") {
  Tensor x = iota({2, 3, 4});
  Tensor r = rt::reshape(x, {4, -1});
  CHECK(shapeOf(r.shape()) == "(4, 6)");
  CHECK(r.sharesStorage(x));
  CHECK(shapeOf(rt::reshape(x, {-1}).shape()) == "(24,)");
  CHECK(shapeOf(rt::reshape(Tensor::zeros({0, 3}), {3, 0}).shape()) ==
        "(3, 0)");
  CHECK(shapeOf(rt::flatten(x).shape()) == "(24,)");
  CHECK(shapeOf(rt::flatten(x, 1).shape()) == "(2, 12)");
  CHECK(shapeOf(rt::flatten(x, 0, 1).shape()) == "(6, 4)");
  CHECK(shapeOf(rt::flatten(x, -2, -1).shape()) == "(2, 12)");
  CHECK(shapeOf(rt::flatten(Tensor::zeros({})).shape()) == "(1,)");
  Tensor s = Tensor::zeros({1, 3, 1, 2});
  CHECK(shapeOf(rt::squeeze(s).shape()) == "(3, 2)");
  CHECK(shapeOf(rt::squeeze(s, {2}).shape()) == "(1, 3, 2)");
  CHECK(shapeOf(rt::squeeze(s, {0, -2}).shape()) == "(3, 2)");
  CHECK(shapeOf(rt::unsqueeze(x, {0}).shape()) == "(1, 2, 3, 4)");
  CHECK(shapeOf(rt::unsqueeze(x, {-1}).shape()) == "(2, 3, 4, 1)");
  CHECK(shapeOf(rt::unsqueeze(x, {1, 3}).shape()) == "(2, 1, 3, 1, 4)");
  CHECK(shapeOf(rt::expandDims(Tensor::zeros({}), {0}).shape()) == "(1,)");
  CHECK(rt::unsqueeze(x, {0}).sharesStorage(x));
}

TEST_CASE("transpose matches an index reference for every element size",
          "[shape]") {
  Rng rng(601);
  for (int i = 0; i < 60; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 5));
    Shape s = rng.shape(rank, 1, 5);
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng.gen);
    for (DType t :
         {DType::Float32, DType::Int64, DType::Float16, DType::UInt8}) {
      // uint8 values wrap modulo 256: still a fine pattern for a copy.
      Tensor x =
          t == DType::UInt8 ? rt::cast(iota(s, DType::Int32), t) : iota(s, t);
      Tensor y = rt::transpose(x, perm);
      Ref rx(x);
      Shape os;
      for (int64_t p : perm)
        os.push_back(s[p]);
      Ref want(os);
      for (int64_t k = 0; k < want.numel(); ++k) {
        auto oi = unravel(k, os);
        std::vector<int64_t> ii(rank);
        for (size_t d = 0; d < rank; ++d)
          ii[perm[d]] = oi[d];
        want.v[k] = rx(ii);
      }
      INFO(shapeOf(s) << " perm " << shapeOf(perm) << " "
                      << tmg::dtypeName(t).str());
      CHECK(y.dtype() == x.dtype());
      requireClose(y, want, Exact);
    }
  }
  // Large 2-D and batched transposes (tiled path, parallel).
  for (Shape s : {Shape{513, 1025}, Shape{3, 300, 257}}) {
    Tensor x = iota(s);
    std::vector<int64_t> perm = s.size() == 2 ? std::vector<int64_t>{1, 0}
                                              : std::vector<int64_t>{0, 2, 1};
    Tensor y = rt::permute(x, perm);
    CHECK(y.sharesStorage(x)); // a view
    Tensor dense = rt::contiguous(y); // the tiled, parallel copy
    CHECK(dense.isContiguous());
    CHECK(dense.data<float>()[1] == float(s.back()));
    // Every element (the 4-byte tiles move as 8 x 8 register blocks):
    // dense[n][j][i] = x[n][i][j].
    int64_t rows = s[s.size() - 2], cols = s.back(), mismatches = 0;
    const float *d = dense.data<float>();
    for (int64_t n = 0; n < x.numel() / (rows * cols); ++n)
      for (int64_t j = 0; j < cols; ++j)
        for (int64_t i = 0; i < rows; ++i)
          mismatches +=
              d[(n * cols + j) * rows + i] != float((n * rows + i) * cols + j);
    CHECK(mismatches == 0);
    requireIdentical(dense, y.contiguous());
    requireIdentical(rt::contiguous(rt::transpose(dense, perm)), x);
    requireIdentical(rt::transpose(y, perm).contiguous(), x);
  }
}

TEST_CASE("broadcast_to views with NumPy rules", "[shape]") {
  Tensor x = iota({3, 1});
  Tensor y = rt::broadcastTo(x, {2, 3, 4});
  Ref want(Shape{2, 3, 4});
  for (int64_t i = 0; i < want.numel(); ++i)
    want.v[i] = double(unravel(i, want.shape)[1]);
  requireClose(y, want, Exact);
  requireClose(rt::broadcastTo(Tensor::full({}, 5.0), {2, 2}),
               Ref(Shape{2, 2}, 5.0), Exact);
  requireClose(rt::broadcastTo(x, {3, 1}), Ref(x), Exact);
  CHECK(rt::broadcastTo(x, {3, 1}).sharesStorage(x));
  CHECK(y.sharesStorage(x)); // stride 0 on the expanded axes, no copy
  CHECK(rt::broadcastTo(x, {0, 3, 5}).numel() == 0);
}

TEST_CASE("concat of large inputs, copied in pieces over the threads",
          "[shape]") {
  // Inputs of more than one 16K-element piece, an empty one, at batch 1
  // and 2 along the channels and along axis 0.
  const std::vector<int64_t> sizes = {7, 0, 12, 3};
  for (auto [base, ax] :
       {std::pair{Shape{1, 0, 50, 70}, 1}, std::pair{Shape{2, 0, 50, 70}, 1},
        std::pair{Shape{0, 3, 40, 41}, 0}}) {
    std::vector<Tensor> xs;
    for (size_t p = 0; p < sizes.size(); ++p) {
      Shape sh = base;
      sh[size_t(ax)] = sizes[p];
      xs.push_back(
          rt::add(iota(sh, DType::Int32),
                  Tensor::fromInts({}, {int64_t(1000000 * p)}, DType::Int32)));
    }
    Tensor c = rt::concat(xs, ax);
    std::vector<Ref> refs(xs.begin(), xs.end());
    Shape os = base;
    os[size_t(ax)] = 22;
    REQUIRE(c.shape() == llvm::ArrayRef<int64_t>(os));
    const int32_t *got = c.data<int32_t>();
    for (int64_t k = 0; k < c.numel(); ++k) {
      auto idx = unravel(k, os);
      int64_t p = 0, pos = idx[size_t(ax)];
      while (pos >= sizes[size_t(p)])
        pos -= sizes[size_t(p++)];
      idx[size_t(ax)] = pos;
      if (got[k] != int32_t(refs[size_t(p)](idx)))
        FAIL("concat element " << k << " of " << shapeOf(os) << " axis " << ax);
    }
  }
}

TEST_CASE("concat, stack and the three split forms", "[shape]") {
  Rng rng(602);
  for (int i = 0; i < 40; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 4));
    Shape base = rng.shape(rank, 1, 4);
    int64_t axis = rng.uniformInt(-int64_t(rank), int64_t(rank) - 1);
    int64_t ax = axis < 0 ? axis + int64_t(rank) : axis;
    int64_t parts = rng.uniformInt(1, 4);
    std::vector<Tensor> xs;
    std::vector<int64_t> sizes;
    for (int64_t p = 0; p < parts; ++p) {
      Shape s = base;
      s[ax] = rng.uniformInt(0, 3);
      sizes.push_back(s[ax]);
      xs.push_back(rt::add(iota(s, DType::Int32),
                           Tensor::fromInts({}, {1000 * p}, DType::Int32)));
    }
    Tensor c = rt::concat(xs, axis);
    // Reference: walk the output along the axis, part by part.
    Shape os = base;
    os[ax] = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    Ref want(os);
    for (int64_t k = 0; k < want.numel(); ++k) {
      auto idx = unravel(k, os);
      int64_t p = 0, pos = idx[ax];
      while (pos >= sizes[p])
        pos -= sizes[p++];
      idx[ax] = pos;
      want.v[k] = Ref(xs[p])(idx);
    }
    INFO(shapeOf(base) << " axis " << axis << " sizes " << shapeOf(sizes));
    CHECK(c.dtype() == DType::Int32);
    requireClose(c, want, Exact);
    auto back = rt::splitSizes(c, sizes, axis);
    REQUIRE(back.size() == xs.size());
    for (size_t p = 0; p < xs.size(); ++p)
      requireIdentical(back[p], xs[p]);
  }
  Tensor x = iota({4, 6});
  auto eq = rt::split(x, 3, 1);
  REQUIRE(eq.size() == 3);
  CHECK(Ref(eq[1]).v == std::vector<double>{2, 3, 8, 9, 14, 15, 20, 21});
  auto at = rt::splitAt(x, {1, 3, 10}, 0);
  REQUIRE(at.size() == 4);
  CHECK(shapeOf(at[0].shape()) == "(1, 6)");
  CHECK(shapeOf(at[1].shape()) == "(2, 6)");
  CHECK(shapeOf(at[2].shape()) == "(1, 6)");
  CHECK(shapeOf(at[3].shape()) == "(0, 6)");
  Tensor a = iota({2, 3}), b = rt::add(iota({2, 3}), Tensor::full({}, 10.0));
  for (int64_t axis : {0, 1, 2, -1}) {
    Tensor st = rt::stack({a, b}, axis);
    int64_t ax = axis < 0 ? axis + 3 : axis;
    Shape es{2, 3};
    es.insert(es.begin() + ax, 2);
    CHECK(shapeOf(st.shape()) == shapeOf(es));
    Ref rs(st);
    for (int64_t k = 0; k < rs.numel(); ++k) {
      auto idx = unravel(k, es);
      int64_t which = idx[ax];
      idx.erase(idx.begin() + ax);
      CHECK(rs.v[k] == idx[0] * 3 + idx[1] + 10 * which);
    }
  }
}

TEST_CASE("slice follows Python slice semantics", "[shape]") {
  Rng rng(603);
  for (int i = 0; i < 200; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 3));
    Shape s = rng.shape(rank, 0, 7);
    Tensor x = iota(s);
    std::vector<rt::AxisSlice> slices;
    std::vector<std::vector<int64_t>> picks(rank);
    for (size_t d = 0; d < rank; ++d) {
      picks[d].resize(size_t(s[d]));
      std::iota(picks[d].begin(), picks[d].end(), 0);
      if (rng.coin(0.3))
        continue;
      rt::AxisSlice sl;
      sl.axis = rng.coin() ? int64_t(d) : int64_t(d) - int64_t(rank);
      sl.start = randomBound(rng, s[d]);
      sl.stop = randomBound(rng, s[d]);
      do
        sl.step = rng.uniformInt(-3, 3);
      while (sl.step == 0);
      picks[d] = pySlice(sl.start, sl.stop, sl.step, s[d]);
      slices.push_back(sl);
    }
    Shape os;
    for (auto &p : picks)
      os.push_back(int64_t(p.size()));
    Ref want(os), rx(x);
    for (int64_t k = 0; k < want.numel(); ++k) {
      auto idx = unravel(k, os);
      for (size_t d = 0; d < rank; ++d)
        idx[d] = picks[d][idx[d]];
      want.v[k] = rx(idx);
    }
    INFO("case " << i << " shape " << shapeOf(s));
    requireClose(rt::slice(x, slices), want, Exact);
  }
}

TEST_CASE("getitem: ints, slices, ellipsis and new axes", "[shape]") {
  Rng rng(604);
  Tensor x = iota({3, 4, 5, 6});
  Ref rx(x);
  auto check = [&](std::vector<IndexItem> items, const char *expectShape,
                   auto valueAt) {
    Tensor y = rt::getitem(x, items);
    INFO(expectShape);
    REQUIRE(shapeOf(y.shape()) == expectShape);
    Ref ry(y);
    for (int64_t k = 0; k < ry.numel(); ++k)
      REQUIRE(ry.v[k] == valueAt(unravel(k, ry.shape)));
  };
  // x[1]
  check({IndexItem::at(1)}, "(4, 5, 6)", [&](auto i) {
    return rx({1, i[0], i[1], i[2]});
  });
  // x[-1, ..., 2]
  check({IndexItem::at(-1), IndexItem::ellipsis(), IndexItem::at(2)}, "(4, 5)",
        [&](auto i) {
          return rx({2, i[0], i[1], 2});
        });
  // x[None, :, 1:3, ::-2]
  check({IndexItem::newAxis(), IndexItem::all(), IndexItem::range(1, 3),
         IndexItem::range(std::nullopt, std::nullopt, -2)},
        "(1, 3, 2, 3, 6)", [&](auto i) {
          return rx({i[1], 1 + i[2], 4 - 2 * i[3], i[4]});
        });
  // x[..., None]
  check({IndexItem::ellipsis(), IndexItem::newAxis()}, "(3, 4, 5, 6, 1)",
        [&](auto i) {
          return rx({i[0], i[1], i[2], i[3]});
        });
  // x[0, 1, 2, 3]
  check(
      {IndexItem::at(0), IndexItem::at(1), IndexItem::at(2), IndexItem::at(3)},
      "()", [&](auto) {
        return rx({0, 1, 2, 3});
      });
  // x[:, 5:1] is empty
  check({IndexItem::all(), IndexItem::range(5, 1)}, "(3, 0, 5, 6)",
        [&](auto) { return 0.0; });
  // x[1, None, ..., -2:, None]
  check({IndexItem::at(1), IndexItem::newAxis(), IndexItem::ellipsis(),
         IndexItem::range(-2, std::nullopt), IndexItem::newAxis()},
        "(1, 4, 5, 2, 1)", [&](auto i) {
          return rx({1, i[1], i[2], 4 + i[3]});
        });
  // Random int/slice mixes against slice() + reshape.
  for (int t = 0; t < 50; ++t) {
    std::vector<IndexItem> items;
    std::vector<rt::AxisSlice> slices;
    Shape keep;
    for (int64_t d = 0; d < 4; ++d) {
      if (rng.coin(0.3)) {
        int64_t i = rng.uniformInt(-x.dim(d), x.dim(d) - 1);
        items.push_back(IndexItem::at(i));
        int64_t n = i < 0 ? i + x.dim(d) : i;
        slices.push_back({d, n, n + 1, 1});
      } else {
        auto a = randomBound(rng, x.dim(d)), b = randomBound(rng, x.dim(d));
        int64_t st = rng.coin() ? 1 : -1;
        items.push_back(IndexItem::range(a, b, st));
        slices.push_back({d, a, b, st});
        keep.push_back(int64_t(pySlice(a, b, st, x.dim(d)).size()));
      }
    }
    Tensor want = rt::reshape(rt::slice(x, slices), keep);
    requireIdentical(rt::getitem(x, items), want);
  }
}

TEST_CASE("gather and take", "[shape]") {
  Rng rng(605);
  for (int i = 0; i < 40; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 4));
    Shape s = rng.shape(rank, 1, 5);
    int64_t ax = rng.uniformInt(0, int64_t(rank) - 1);
    Shape is;
    for (size_t d = 0; d < rank; ++d)
      is.push_back(int64_t(d) == ax ? rng.uniformInt(0, 6)
                                    : rng.uniformInt(1, s[d]));
    Tensor x = iota(s);
    DType it = rng.coin() ? DType::Int32 : DType::Int64;
    Tensor index = rng.ints(is, -s[ax], s[ax] - 1, it);
    Ref rx(x), ri(index), want(is);
    for (int64_t k = 0; k < want.numel(); ++k) {
      auto idx = unravel(k, is);
      int64_t v = int64_t(ri.v[k]);
      idx[ax] = v < 0 ? v + s[ax] : v;
      want.v[k] = rx(idx);
    }
    INFO(shapeOf(s) << " axis " << ax << " index " << shapeOf(is));
    requireClose(rt::gather(x, ax, index), want, Exact);

    Shape ts = rng.shape(size_t(rng.uniformInt(0, 2)), 0, 3);
    Tensor ti = rng.ints(ts, -s[ax], s[ax] - 1, it);
    Shape os(s.begin(), s.begin() + ax);
    os.append(ts.begin(), ts.end());
    os.append(s.begin() + ax + 1, s.end());
    Ref rti(ti), tw(os);
    for (int64_t k = 0; k < tw.numel(); ++k) {
      auto oi = unravel(k, os);
      std::vector<int64_t> xi(oi.begin(), oi.begin() + ax);
      std::vector<int64_t> ii(oi.begin() + ax, oi.begin() + ax + ts.size());
      int64_t v = ts.empty() ? int64_t(rti.v[0]) : int64_t(rti(ii));
      xi.push_back(v < 0 ? v + s[ax] : v);
      xi.insert(xi.end(), oi.begin() + ax + ts.size(), oi.end());
      tw.v[k] = rx(xi);
    }
    requireClose(rt::take(x, ti, ax), tw, Exact);
  }
  // Embedding-style lookup.
  Tensor table = iota({10, 4});
  Tensor rows = rt::take(table, Tensor::fromInts({2, 2}, {3, 0, 9, 3}), 0);
  CHECK(shapeOf(rows.shape()) == "(2, 2, 4)");
  CHECK(rows.data<float>()[4 * 2] == 36.0f);
}

TEST_CASE("pad: constant, reflect and edge, with cropping", "[shape]") {
  Rng rng(606);
  for (int i = 0; i < 80; ++i) {
    size_t rank = size_t(rng.uniformInt(1, 3));
    Shape s = rng.shape(rank, 1, 6);
    auto mode = rt::PadMode(rng.uniformInt(0, 2));
    std::vector<std::pair<int64_t, int64_t>> pw;
    Shape os;
    for (size_t d = 0; d < rank; ++d) {
      int64_t lim = mode == rt::PadMode::Reflect ? s[d] - 1 : 3;
      int64_t lo = mode == rt::PadMode::Constant ? -s[d] / 2 : 0;
      pw.push_back({rng.uniformInt(lo, lim), rng.uniformInt(lo, lim)});
      os.push_back(s[d] + pw.back().first + pw.back().second);
    }
    Tensor x = rt::add(iota(s), Tensor::full({}, 1.0));
    Ref rx(x), want(os);
    for (int64_t k = 0; k < want.numel(); ++k) {
      auto idx = unravel(k, os);
      bool constant = false;
      for (size_t d = 0; d < rank; ++d) {
        int64_t v = idx[d] - pw[d].first, n = s[d];
        if (v < 0 || v >= n) {
          if (mode == rt::PadMode::Constant)
            constant = true;
          else if (mode == rt::PadMode::Edge)
            v = v < 0 ? 0 : n - 1;
          else
            v = v < 0 ? -v : 2 * (n - 1) - v;
        }
        idx[d] = v;
      }
      want.v[k] = constant ? -7.5 : rx(idx);
    }
    INFO(shapeOf(s) << " mode " << int(mode));
    requireClose(rt::pad(x, pw, mode, -7.5), want, Exact);
  }
  Tensor i = rt::pad(Tensor::fromInts({2}, {1, 2}, DType::Int32), {{1, 2}},
                     rt::PadMode::Constant, 9);
  CHECK(i.dtype() == DType::Int32);
  CHECK(Ref(i).v == std::vector<double>{9, 1, 2, 9, 9});
}

TEST_CASE("resize and upsample: nearest and bilinear", "[shape]") {
  Rng rng(607);
  for (int i = 0; i < 40; ++i) {
    int64_t h = rng.uniformInt(1, 7), w = rng.uniformInt(1, 7);
    int64_t oh = rng.uniformInt(1, 12), ow = rng.uniformInt(1, 12);
    Tensor x = rng.tensor({2, 3, h, w});
    Ref rx(x);
    for (auto mode : {rt::ResizeMode::Nearest, rt::ResizeMode::Bilinear})
      for (bool align : {false, true}) {
        if (mode == rt::ResizeMode::Nearest && align)
          continue;
        Ref want(Shape{2, 3, oh, ow});
        auto src = [&](int64_t o, int64_t in, int64_t out) {
          if (align)
            return out > 1 ? double(o) * double(in - 1) / double(out - 1) : 0.0;
          return std::max(0.0,
                          (double(o) + 0.5) * double(in) / double(out) - 0.5);
        };
        for (int64_t k = 0; k < want.numel(); ++k) {
          auto idx = unravel(k, want.shape);
          if (mode == rt::ResizeMode::Nearest) {
            int64_t sy = std::min<int64_t>(
                int64_t(std::floor(double(idx[2]) * double(h) / double(oh))),
                h - 1);
            int64_t sx = std::min<int64_t>(
                int64_t(std::floor(double(idx[3]) * double(w) / double(ow))),
                w - 1);
            want.v[k] = rx({idx[0], idx[1], sy, sx});
            continue;
          }
          double fy = src(idx[2], h, oh), fx = src(idx[3], w, ow);
          int64_t y0 = std::min<int64_t>(int64_t(fy), h - 1),
                  x0 = std::min<int64_t>(int64_t(fx), w - 1);
          int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
          double ly = fy - double(y0), lx = fx - double(x0);
          auto at = [&](int64_t yy, int64_t xx) {
            return rx({idx[0], idx[1], yy, xx});
          };
          want.v[k] = (1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
                      ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1));
        }
        INFO(h << "x" << w << " -> " << oh << "x" << ow << " mode " << int(mode)
               << " align " << align);
        requireClose(rt::resize(x, {oh, ow}, mode, align), want,
                     ElementwiseTol);
      }
  }
  // upsample: factor 2 nearest repeats each pixel; bilinear factor 2 with
  // recompute off equals resize to twice the size.
  Tensor x = rng.tensor({1, 2, 3, 4});
  Tensor up = rt::upsample(x, 2, 2);
  CHECK(shapeOf(up.shape()) == "(1, 2, 6, 8)");
  Ref ru(up), rx(x);
  for (int64_t k = 0; k < ru.numel(); ++k) {
    auto i = unravel(k, ru.shape);
    CHECK(ru.v[k] == rx({i[0], i[1], i[2] / 2, i[3] / 2}));
  }
  requireClose(rt::upsample(x, 2, 2, rt::ResizeMode::Bilinear),
               Ref(rt::resize(x, {6, 8}, rt::ResizeMode::Bilinear)),
               ElementwiseTol);
  CHECK(shapeOf(rt::upsample(x, 1.5, 0.5).shape()) == "(1, 2, 4, 2)");
}

TEST_CASE("arange, zeros, ones, full", "[shape]") {
  CHECK(Ref(rt::arange(0, 5)).v == std::vector<double>{0, 1, 2, 3, 4});
  CHECK(Ref(rt::arange(1, 2, 0.25)).v ==
        std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(Ref(rt::arange(5, 0, -2, DType::Int64)).v ==
        std::vector<double>{5, 3, 1});
  CHECK(rt::arange(3, 1).numel() == 0);
  CHECK(rt::arange(0, 3, 1, DType::Int32).dtype() == DType::Int32);
  for (DType t : {DType::Float32, DType::Float16, DType::Int8, DType::UInt8,
                  DType::Int32, DType::Int64, DType::Bool}) {
    Tensor z = rt::zeros({2, 3}, t), o = rt::ones({4}, t),
           f = rt::full({2}, 3, t);
    CHECK(z.dtype() == t);
    CHECK(Ref(z).v == std::vector<double>(6, 0.0));
    CHECK(Ref(o).v == std::vector<double>(4, 1.0));
    CHECK(Ref(f).v == std::vector<double>(2, t == DType::Bool ? 1.0 : 3.0));
  }
  CHECK(rt::full({3}, 1e12, DType::Int32).data<int32_t>()[0] == INT32_MAX);
}

TEST_CASE("shape errors name the op and the shapes", "[shape][errors]") {
  Tensor x = Tensor::zeros({2, 3});
  REQUIRE_THROWS_WITH(rt::reshape(x, {4, 2}),
                      Catch::Contains("reshape: cannot reshape input (2, 3) "
                                      "(6 elements) into (4, 2) (8 elements)"));
  REQUIRE_THROWS_WITH(rt::reshape(x, {-1, -1}),
                      Catch::Contains("reshape: only one dimension can be -1"));
  REQUIRE_THROWS_WITH(rt::reshape(x, {4, -1}),
                      Catch::Contains("reshape: cannot infer the -1 in (4, -1) "
                                      "for input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::flatten(x, 1, 0),
                      Catch::Contains("flatten: start axis 1 comes after end "
                                      "axis 0 for input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::squeeze(x, {0}),
                      Catch::Contains("squeeze: axis 0 of input (2, 3) has "
                                      "size 2, not 1"));
  REQUIRE_THROWS_WITH(rt::transpose(x, {0, 0}),
                      Catch::Contains("transpose: (0, 0) is not a permutation "
                                      "of the axes of input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::broadcastTo(x, {3, 3}),
                      Catch::Contains("broadcast_to: input (2, 3) cannot be "
                                      "broadcast to (3, 3)"));
  REQUIRE_THROWS_WITH(rt::concat({x, Tensor::zeros({2, 4})}, 0),
                      Catch::Contains("concat: input 1 (2, 4) does not match "
                                      "input 0 (2, 3) outside axis 0"));
  REQUIRE_THROWS_WITH(rt::concat({x, Tensor::zeros({2, 3}, DType::Int32)}),
                      Catch::Contains("concat: input 1 (2, 3) has dtype int32 "
                                      "but input 0 has float32"));
  REQUIRE_THROWS_WITH(rt::stack({x, Tensor::zeros({3, 2})}),
                      Catch::Contains("stack: input 1 (3, 2) does not match "
                                      "input 0 (2, 3)"));
  REQUIRE_THROWS_WITH(rt::split(x, 2, 1),
                      Catch::Contains("split: 2 sections do not divide axis 1 "
                                      "of input (2, 3) (size 3)"));
  REQUIRE_THROWS_WITH(rt::splitSizes(x, {1, 1}, 1),
                      Catch::Contains("split: sizes (1, 1) sum to 2 but axis 1 "
                                      "of input (2, 3) has size 3"));
  REQUIRE_THROWS_WITH(rt::slice(x, {{1, 0, 2, 0}}),
                      Catch::Contains("slice: step of axis 1 must not be 0 for "
                                      "input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::getitem(x, {IndexItem::at(2)}),
                      Catch::Contains("getitem: index 2 is out of range for "
                                      "axis 0 of input (2, 3)"));
  REQUIRE_THROWS_WITH(
      rt::getitem(x, {IndexItem::at(0), IndexItem::at(0), IndexItem::at(0)}),
      Catch::Contains("getitem: too many indices for input "
                      "(2, 3): 3 were given"));
  REQUIRE_THROWS_WITH(
      rt::getitem(x, {IndexItem::ellipsis(), IndexItem::ellipsis()}),
      Catch::Contains("getitem: an index can only have a "
                      "single ellipsis"));
  REQUIRE_THROWS_WITH(rt::gather(x, 1, Tensor::fromInts({2, 1}, {0, 3})),
                      Catch::Contains("gather: index 3 is out of range for "
                                      "axis 1 of input (2, 3) (size 3)"));
  REQUIRE_THROWS_WITH(rt::gather(x, 1, Tensor::fromInts({3, 1}, {0, 1, 2})),
                      Catch::Contains("gather: index (3, 1) must have the rank "
                                      "of input (2, 3) and no larger sizes "
                                      "outside axis 1"));
  REQUIRE_THROWS_WITH(rt::take(x, Tensor::zeros({2}), 0),
                      Catch::Contains("take: index (2,) must be int32 or "
                                      "int64, got float32"));
  REQUIRE_THROWS_WITH(rt::pad(x, {{0, 0}, {3, 0}}, rt::PadMode::Reflect),
                      Catch::Contains("pad: reflect padding (3, 0) of axis 1 "
                                      "must be smaller than its size 3 in "
                                      "input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::pad(x, {{0, 0}}),
                      Catch::Contains("pad: 1 (before, after) pairs given for "
                                      "input (2, 3) of rank 2"));
  REQUIRE_THROWS_WITH(rt::resize(x, {4, 4}),
                      Catch::Contains("resize: input must be 4-D (N, C, H, W), "
                                      "got (2, 3)"));
  REQUIRE_THROWS_WITH(rt::upsample(Tensor::zeros({1, 1, 2, 2}), 0, 2),
                      Catch::Contains("upsample: scale factors 0x2 must be "
                                      "positive and finite"));
  REQUIRE_THROWS_WITH(rt::arange(0, 1, 0),
                      Catch::Contains("arange: step must be non-zero"));
}
