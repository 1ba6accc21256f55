//===- test_elementwise.cpp - Elementwise kernels against references ------===//
#include "Reference.h"

#include "../../runtime/ElementwiseProgram.h"

#include <functional>
#include <limits>

using namespace tmtest;
namespace rt = tmg::rt;
using rt::BinaryOp;
using rt::CompareOp;
using rt::UnaryOp;

namespace {

/// NumPy broadcast shape, computed independently of the kernels.
Shape refBroadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t k = 0; k < r; ++k) {
    int64_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    int64_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    out[r - 1 - k] = da == 1 ? db : da;
  }
  return out;
}

/// Element of `x` that broadcasts to output multi-index `idx`.
double bcastAt(const Ref &x, const std::vector<int64_t> &idx) {
  size_t off = idx.size() - x.rank();
  int64_t o = 0;
  for (size_t d = 0; d < x.rank(); ++d)
    o = o * x.shape[d] + (x.shape[d] == 1 ? 0 : idx[off + d]);
  return x.v[o];
}

Ref refBinary(const Ref &a, const Ref &b,
              const std::function<double(double, double)> &f) {
  Ref out(refBroadcast(a.shape, b.shape));
  for (int64_t i = 0; i < out.numel(); ++i) {
    auto idx = unravel(i, out.shape);
    out.v[i] = f(bcastAt(a, idx), bcastAt(b, idx));
  }
  return out;
}

double refUnary(UnaryOp op, double x) {
  switch (op) {
  case UnaryOp::Neg:
    return -x;
  case UnaryOp::Abs:
    return std::fabs(x);
  case UnaryOp::Exp:
    return std::exp(x);
  case UnaryOp::Log:
    return std::log(x);
  case UnaryOp::Sqrt:
    return std::sqrt(x);
  case UnaryOp::Rsqrt:
    return 1.0 / std::sqrt(x);
  case UnaryOp::Erf:
    return std::erf(x);
  case UnaryOp::Tanh:
    return std::tanh(x);
  case UnaryOp::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case UnaryOp::Relu:
    return x > 0 ? x : 0.0;
  case UnaryOp::Relu6:
    return std::min(std::max(x, 0.0), 6.0);
  case UnaryOp::Gelu:
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case UnaryOp::GeluTanh:
    return 0.5 * x *
           (1.0 +
            std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case UnaryOp::Silu:
    return x / (1.0 + std::exp(-x));
  case UnaryOp::Hardswish:
    return x * std::min(std::max(x + 3.0, 0.0), 6.0) / 6.0;
  case UnaryOp::Hardsigmoid:
    return std::min(std::max(x / 6.0 + 0.5, 0.0), 1.0);
  }
  return 0;
}

const UnaryOp AllUnary[] = {
    UnaryOp::Neg,        UnaryOp::Abs,   UnaryOp::Exp,
    UnaryOp::Log,        UnaryOp::Sqrt,  UnaryOp::Rsqrt,
    UnaryOp::Erf,        UnaryOp::Tanh,  UnaryOp::Sigmoid,
    UnaryOp::Relu,       UnaryOp::Relu6, UnaryOp::Gelu,
    UnaryOp::GeluTanh,   UnaryOp::Silu,  UnaryOp::Hardswish,
    UnaryOp::Hardsigmoid};

double refBinaryOp(BinaryOp op, double a, double b) {
  switch (op) {
  case BinaryOp::Add:
    return a + b;
  case BinaryOp::Sub:
    return a - b;
  case BinaryOp::Mul:
    return a * b;
  case BinaryOp::Div:
    return a / b;
  case BinaryOp::Pow:
    return std::pow(a, b);
  case BinaryOp::Maximum:
    return std::max(a, b);
  case BinaryOp::Minimum:
    return std::min(a, b);
  }
  return 0;
}

const BinaryOp AllBinary[] = {
    BinaryOp::Add, BinaryOp::Sub,     BinaryOp::Mul,    BinaryOp::Div,
    BinaryOp::Pow, BinaryOp::Maximum, BinaryOp::Minimum};

/// Shape pairs covering NumPy broadcasting corner cases: scalars, size-0
/// and size-1 dimensions, rank mismatch, both-sided broadcasting, and
/// sizes large enough for the parallel path.
const std::vector<std::pair<Shape, Shape>> BroadcastCases = {
    {{}, {}},
    {{3}, {}},
    {{}, {4}},
    {{1}, {5}},
    {{2, 3}, {3}},
    {{2, 1}, {1, 3}},
    {{4, 1, 5}, {3, 1}},
    {{3, 1, 1}, {1, 1, 1}},
    {{2, 3, 4}, {2, 3, 4}},
    {{5, 1, 7}, {1, 6, 1}},
    {{1, 1, 1, 1}, {3}},
    {{0}, {1}},
    {{2, 0, 3}, {1, 3}},
    {{0, 4}, {0, 1}},
    {{257, 129}, {129}},
    {{90, 1, 150}, {1, 40, 1}},
    {{64, 3, 32, 32}, {1, 3, 1, 1}},
};

} // namespace

TEST_CASE("unary float ops match double references", "[elementwise]") {
  Rng rng(11);
  for (UnaryOp op : AllUnary) {
    bool positive =
        op == UnaryOp::Log || op == UnaryOp::Sqrt || op == UnaryOp::Rsqrt;
    for (Shape shape :
         {Shape{3, 17, 5}, Shape{}, Shape{0, 4}, Shape{311, 257}}) {
      Tensor x = positive ? rng.tensor(shape, 0.01, 9.0)
                          : rng.tensor(shape, -8.0, 8.0);
      Ref want(x);
      for (double &v : want.v)
        v = refUnary(op, v);
      Tensor y = rt::unary(op, x);
      CHECK(y.dtype() == DType::Float32);
      requireClose(y, want, ElementwiseTol,
                   rt::opName(op).str() + " " + shapeOf(shape));
    }
  }
}

TEST_CASE("unary wrappers, leaky_relu, gelu approximations", "[elementwise]") {
  Rng rng(12);
  Tensor x = rng.tensor({4, 33}, -4, 4);
  requireIdentical(rt::relu(x), rt::unary(UnaryOp::Relu, x));
  requireIdentical(rt::gelu(x, rt::GeluApprox::Tanh),
                   rt::unary(UnaryOp::GeluTanh, x));
  requireIdentical(rt::gelu(x), rt::unary(UnaryOp::Gelu, x));
  for (double slope : {0.01, 0.2, -1.5}) {
    Ref want(x);
    for (double &v : want.v)
      v = v >= 0 ? v : v * slope;
    requireClose(rt::leakyRelu(x, slope), want, ElementwiseTol);
  }
}

TEST_CASE("relu family propagates NaN and handles infinities",
          "[elementwise]") {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::fromFloats({4}, {nan, inf, -inf, 0.0f});
  Tensor r = rt::relu(x);
  CHECK(std::isnan(r.data<float>()[0]));
  CHECK(r.data<float>()[1] == inf);
  CHECK(r.data<float>()[2] == 0.0f);
  Tensor r6 = rt::relu6(x);
  CHECK(std::isnan(r6.data<float>()[0]));
  CHECK(r6.data<float>()[1] == 6.0f);
  Tensor s = rt::sigmoid(x);
  CHECK(s.data<float>()[1] == 1.0f);
  CHECK(s.data<float>()[2] == 0.0f);
}

TEST_CASE("integer unary ops keep or promote the dtype", "[elementwise]") {
  for (DType t : {DType::Int32, DType::Int64}) {
    Tensor x = Tensor::fromInts({5}, {-7, -1, 0, 3, 9}, t);
    Tensor n = rt::neg(x);
    CHECK(n.dtype() == t);
    CHECK(Ref(n).v == std::vector<double>{7, 1, 0, -3, -9});
    CHECK(Ref(rt::abs(x)).v == std::vector<double>{7, 1, 0, 3, 9});
    CHECK(Ref(rt::relu(x)).v == std::vector<double>{0, 0, 0, 3, 9});
    CHECK(Ref(rt::relu6(x)).v == std::vector<double>{0, 0, 0, 3, 6});
    Tensor e = rt::exp(x);
    CHECK(e.dtype() == DType::Float32);
    CHECK(e.data<float>()[3] == Approx(std::exp(3.0)).epsilon(1e-6));
  }
  // Wrapping instead of undefined behaviour at the edge of the range.
  Tensor m = Tensor::fromInts({1}, {INT32_MIN}, DType::Int32);
  CHECK(rt::neg(m).data<int32_t>()[0] == INT32_MIN);
  // bool computes as int32; other integers keep their dtype.
  Tensor b = Tensor::fromInts({2}, {1, 0}, DType::Bool);
  CHECK(rt::neg(b).dtype() == DType::Int32);
  CHECK(rt::neg(Tensor::fromInts({1}, {3}, DType::Int8)).dtype() == DType::Int8);
}

TEST_CASE("binary float ops broadcast like NumPy", "[elementwise][broadcast]") {
  Rng rng(21);
  for (BinaryOp op : AllBinary) {
    for (const auto &[sa, sb] : BroadcastCases) {
      bool pw = op == BinaryOp::Pow;
      Tensor a = pw ? rng.tensor(sa, 0.1, 3.0) : rng.tensor(sa, -3.0, 3.0);
      Tensor b = op == BinaryOp::Div ? rng.tensor(sb, 0.5, 2.0)
                                     : rng.tensor(sb, -3.0, 3.0);
      Ref want = refBinary(Ref(a), Ref(b), [op](double x, double y) {
        return refBinaryOp(op, x, y);
      });
      // Float32 rounding of the inputs is in both; pow amplifies the
      // relative error of the exponent by |b log a| <= ~3.3.
      Tol tol = pw ? Tol{1e-5, 1e-6} : ElementwiseTol;
      requireClose(rt::binary(op, a, b), want, tol,
                   rt::opName(op).str() + " " + shapeOf(sa) + " " +
                       shapeOf(sb));
      // Swapped operands exercise the other scalar/broadcast loop.
      Ref swapped = refBinary(Ref(b), Ref(a), [op](double x, double y) {
        return refBinaryOp(op, x, y);
      });
      if (op != BinaryOp::Pow && op != BinaryOp::Div)
        requireClose(rt::binary(op, b, a), swapped, tol);
    }
  }
}

TEST_CASE("binary ops keep a channels-last first operand's layout",
          "[elementwise][broadcast]") {
  // An (N, C, H, W) view of dense (N, H, W, C) data as the first operand:
  // the result is laid out the same way (computed in memory order), with
  // the values of the op on dense operands; a dense first operand gives a
  // dense result whatever the second is. Second operands: the same
  // layout, dense, per-channel (C, 1, 1), a scalar; an integer pair.
  Rng rng(25);
  auto channelsLast = [](const Tensor &t) {
    llvm::ArrayRef<int64_t> st = t.strides();
    return st[1] == 1 && st[3] == t.dim(1) && st[2] == t.dim(1) * t.dim(3) &&
           st[0] == t.dim(1) * t.dim(2) * t.dim(3);
  };
  Tensor a = rng.tensor({2, 5, 7, 19}, -3, 3).permuted({0, 3, 1, 2});
  REQUIRE(channelsLast(a));
  Tensor ad = a.contiguous();
  Tensor others[] = {rng.tensor({2, 5, 7, 19}, 0.5, 2).permuted({0, 3, 1, 2}),
                     rng.tensor({2, 19, 5, 7}, 0.5, 2),
                     rng.tensor({19, 1, 1}, 0.5, 2),
                     Tensor::fromFloats({}, {1.5f})};
  for (BinaryOp op : AllBinary)
    for (const Tensor &b : others) {
      CAPTURE(rt::opName(op).str(), shapeOf(b.shape()));
      Tensor want = rt::binary(op, ad, b.contiguous());
      Tensor got = rt::binary(op, a, b);
      requireIdentical(got, want);
      CHECK(channelsLast(got));
      if (b.rank() == 4) {
        Tensor swapped = rt::binary(op, b.contiguous(), a);
        requireIdentical(swapped, rt::binary(op, b.contiguous(), ad));
        CHECK(swapped.isContiguous());
      }
    }
  Tensor ia = rt::cast(rng.tensor({2, 5, 7, 19}, -9, 9), DType::Int32)
                  .permuted({0, 3, 1, 2});
  Tensor ib = rt::cast(others[1], DType::Int32);
  Tensor isum = rt::binary(BinaryOp::Add, ia, ib);
  requireIdentical(isum, rt::binary(BinaryOp::Add, ia.contiguous(), ib));
  CHECK(channelsLast(isum));
}

TEST_CASE("fused elementwise programs keep a channels-last first leaf's layout",
          "[elementwise][fusion]") {
  // (x * scale + r) as one program, ConvNeXt's layer scale and residual:
  // with x channels-last the result is channels-last; with x dense and r
  // channels-last (the first leaf decides) it is dense. Bit for bit the
  // ops one by one either way. A program with a row reduction (a layer
  // norm's mean) runs row by row and keeps the dense layout.
  Rng rng(26);
  rt::ElementwiseProgram prog;
  prog.numLeaves = 3;
  prog.instrs.push_back({std::nullopt, BinaryOp::Mul, std::nullopt, -1, 0, 1});
  prog.instrs.push_back({std::nullopt, BinaryOp::Add, std::nullopt, -1, 3, 2});
  Tensor cl = rng.tensor({2, 6, 11, 70}).permuted({0, 3, 1, 2});
  Tensor dense = rng.tensor({2, 70, 6, 11}), scale = rng.tensor({70, 1, 1});
  for (bool firstChannelsLast : {true, false}) {
    CAPTURE(firstChannelsLast);
    const Tensor &x = firstChannelsLast ? cl : dense,
                 &r = firstChannelsLast ? dense : cl;
    Tensor got = rt::runFusedElementwise(prog, {x, scale, r});
    REQUIRE(got.defined());
    requireIdentical(got,
                     rt::add(rt::mul(x.contiguous(), scale), r.contiguous()));
    if (firstChannelsLast)
      CHECK((got.strides()[1] == 1 && got.strides()[3] == 70));
    else
      CHECK(got.isContiguous());
  }
  rt::ElementwiseProgram center; // x - mean(x, -1)
  center.numLeaves = 1;
  center.instrs.push_back(
      {std::nullopt, BinaryOp::Add, rt::ReduceOp::Mean, -1, 0, 0});
  center.instrs.push_back(
      {std::nullopt, BinaryOp::Sub, std::nullopt, -1, 0, 1});
  Tensor got = rt::runFusedElementwise(center, {cl});
  REQUIRE(got.defined());
  Tensor cd = cl.contiguous();
  requireIdentical(got, rt::sub(cd, rt::mean(cd, {-1}, true)));
  CHECK(got.isContiguous());
}

TEST_CASE("binary wrappers equal the generic entry point", "[elementwise]") {
  Rng rng(22);
  Tensor a = rng.tensor({3, 4}), b = rng.tensor({4}, 0.5, 1.0);
  requireIdentical(rt::add(a, b), rt::binary(BinaryOp::Add, a, b));
  requireIdentical(rt::sub(a, b), rt::binary(BinaryOp::Sub, a, b));
  requireIdentical(rt::mul(a, b), rt::binary(BinaryOp::Mul, a, b));
  requireIdentical(rt::div(a, b), rt::binary(BinaryOp::Div, a, b));
  requireIdentical(rt::maximum(a, b), rt::binary(BinaryOp::Maximum, a, b));
  requireIdentical(rt::minimum(a, b), rt::binary(BinaryOp::Minimum, a, b));
  requireIdentical(rt::pow(b, a), rt::binary(BinaryOp::Pow, b, a));
}

TEST_CASE("pow by a scalar 2, 3, -1, -2, 0.5, -0.5: products and square roots",
          "[elementwise]") {
  Rng rng(24);
  for (DType t : {DType::Float32, DType::Float64}) {
    Tensor x = rt::cast(rng.tensor({5, 37}, 0.05, 4.0), t);
    Ref rx(x);
    for (double e : {2.0, 3.0, -1.0, -2.0, 0.5, -0.5}) {
      // The exponent as a 0-d tensor and as a (1, 1) one broadcast over both
      // dimensions: both are one exponent for every element.
      for (Tensor b : {rt::cast(Tensor::fromFloats({}, {float(e)}), t),
                       rt::cast(Tensor::fromFloats({1, 1}, {float(e)}), t)}) {
        Tensor got = rt::pow(x, b);
        CHECK(got.dtype() == t);
        // Two roundings at most (x * x * x, 1 / (x * x), 1 / sqrt(x)).
        requireClose(
            got,
            refBinary(rx, Ref(b),
                      [](double a, double y) { return std::pow(a, y); }),
            t == DType::Float32 ? Tol{3e-7, 0} : Tol{5e-16, 0},
            fmt::format("pow {} {}", e, dtypeName(t).str()));
      }
    }
    // x * x and 1 / x are correctly rounded: exactly the product and the
    // quotient, element by element.
    Tensor sq = rt::pow(x, rt::cast(Tensor::fromFloats({}, {2.0f}), t));
    Tensor inv = rt::pow(x, rt::cast(Tensor::fromFloats({}, {-1.0f}), t));
    for (int64_t i = 0; i < x.numel(); ++i) {
      double v = rx.v[size_t(i)];
      if (t == DType::Float32) {
        CHECK(sq.data<float>()[i] == float(v) * float(v));
        CHECK(inv.data<float>()[i] == 1.0f / float(v));
      } else {
        CHECK(sq.data<double>()[i] == v * v);
        CHECK(inv.data<double>()[i] == 1.0 / v);
      }
    }
  }
  // Any other exponent, and an exponent per element, is pow's.
  Tensor x = rng.tensor({64}, 0.1, 3.0);
  Tensor e = Tensor::fromFloats({}, {1.7f});
  Tensor got = rt::pow(x, e);
  for (int64_t i = 0; i < 64; ++i)
    CHECK(got.data<float>()[i] == std::pow(x.data<float>()[i], 1.7f));
}

TEST_CASE("maximum and minimum propagate NaN", "[elementwise]") {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor a = Tensor::fromFloats({3}, {nan, 1.0f, 2.0f});
  Tensor b = Tensor::fromFloats({3}, {0.0f, nan, 1.0f});
  for (Tensor r : {rt::maximum(a, b), rt::minimum(a, b)}) {
    CHECK(std::isnan(r.data<float>()[0]));
    CHECK(std::isnan(r.data<float>()[1]));
  }
  CHECK(rt::maximum(a, b).data<float>()[2] == 2.0f);
  CHECK(rt::minimum(a, b).data<float>()[2] == 1.0f);
}

TEST_CASE("integer binary ops and dtype promotion", "[elementwise][dtype]") {
  Rng rng(23);
  for (DType t : {DType::Int32, DType::Int64}) {
    Tensor a = rng.ints({4, 5}, -20, 20, t), b = rng.ints({5}, -20, 20, t);
    for (BinaryOp op : {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul,
                        BinaryOp::Maximum, BinaryOp::Minimum}) {
      Tensor r = rt::binary(op, a, b);
      CHECK(r.dtype() == t);
      requireClose(
          r,
          refBinary(Ref(a), Ref(b),
                    [op](double x, double y) { return refBinaryOp(op, x, y); }),
          Exact, rt::opName(op).str());
    }
    Tensor e = rng.ints({5}, 0, 5, t);
    Tensor p = rt::pow(a, e);
    CHECK(p.dtype() == t);
    requireClose(p,
                 refBinary(Ref(a), Ref(e),
                           [](double x, double y) { return std::pow(x, y); }),
                 Exact, "pow");
    // True division: integers give float32.
    Tensor d = rt::div(a, rng.ints({5}, 1, 9, t));
    CHECK(d.dtype() == DType::Float32);
  }
  Tensor d = rt::div(Tensor::fromInts({2}, {7, -7}, DType::Int32),
                     Tensor::fromInts({1}, {2}, DType::Int32));
  CHECK(Ref(d).v == std::vector<double>{3.5, -3.5});

  auto dt = [](DType a, DType b) {
    return rt::add(Tensor::zeros({2}, a), Tensor::zeros({2}, b)).dtype();
  };
  CHECK(dt(DType::Int32, DType::Float32) == DType::Float32);
  CHECK(dt(DType::Int64, DType::Float32) == DType::Float32);
  CHECK(dt(DType::Int32, DType::Int64) == DType::Int64);
  CHECK(dt(DType::Bool, DType::Bool) == DType::Int32);
  CHECK(dt(DType::UInt8, DType::Int8) == DType::Int16);
  CHECK(dt(DType::Float16, DType::Float16) == DType::Float16);
  CHECK(dt(DType::Float16, DType::Float32) == DType::Float32);
  CHECK(dt(DType::Int64, DType::Float16) == DType::Float16);
  CHECK(rt::promoteTypes(DType::Int8, DType::Int64) == DType::Int64);

  // Mixed operands are converted before computing.
  Tensor m = rt::mul(Tensor::fromInts({2}, {3, 4}, DType::Int32),
                     Tensor::fromFloats({2}, {0.5f, 0.25f}));
  CHECK(Ref(m).v == std::vector<double>{1.5, 1.0});
}

TEST_CASE("float16 arithmetic computes in float32", "[elementwise][dtype]") {
  Tensor a =
      rt::cast(Tensor::fromFloats({3}, {1.5f, -2.0f, 0.25f}), DType::Float16);
  Tensor b = rt::cast(Tensor::fromFloats({1}, {2.0f}), DType::Float16);
  Tensor s = rt::add(a, b);
  CHECK(s.dtype() == DType::Float16);
  CHECK(Ref(s).v == std::vector<double>{3.5, 0.0, 2.25});
  Tensor r = rt::relu(a);
  CHECK(r.dtype() == DType::Float16);
  CHECK(Ref(r).v == std::vector<double>{1.5, 0.0, 0.25});
  Tensor c = rt::less(a, b);
  CHECK(c.dtype() == DType::Bool);
  CHECK(Ref(c).v == std::vector<double>{1, 1, 1});
}

TEST_CASE("comparisons return bool with broadcasting", "[elementwise]") {
  Rng rng(31);
  using Cmp = std::function<bool(double, double)>;
  const std::pair<CompareOp, Cmp> ops[] = {
      {CompareOp::Equal, [](double x, double y) { return x == y; }},
      {CompareOp::NotEqual, [](double x, double y) { return x != y; }},
      {CompareOp::Less, [](double x, double y) { return x < y; }},
      {CompareOp::LessEqual, [](double x, double y) { return x <= y; }},
      {CompareOp::Greater, [](double x, double y) { return x > y; }},
      {CompareOp::GreaterEqual, [](double x, double y) { return x >= y; }},
  };
  for (const auto &[op, f] : ops) {
    for (const auto &[sa, sb] : BroadcastCases) {
      // Small integer values so that equality actually happens.
      Tensor a = rt::cast(rng.ints(sa, -2, 2), DType::Float32);
      Tensor b = rng.ints(sb, -2, 2, DType::Int32);
      Tensor r = rt::compare(op, a, b);
      CHECK(r.dtype() == DType::Bool);
      Ref want = refBinary(Ref(a), Ref(b), [&f](double x, double y) {
        return f(x, y) ? 1.0 : 0.0;
      });
      requireClose(r, want, Exact, rt::opName(op).str());
    }
  }
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor n = Tensor::fromFloats({1}, {nan});
  CHECK(rt::equal(n, n).data<uint8_t>()[0] == 0);
  CHECK(rt::notEqual(n, n).data<uint8_t>()[0] == 1);
  CHECK(rt::lessEqual(n, n).data<uint8_t>()[0] == 0);
  Tensor i = Tensor::fromInts({3}, {1, 2, 3});
  CHECK(Ref(rt::greaterEqual(i, Tensor::fromInts({}, {2}))).v ==
        std::vector<double>{0, 1, 1});
  CHECK(Ref(rt::greater(i, Tensor::fromInts({}, {2}))).v ==
        std::vector<double>{0, 0, 1});
  CHECK(Ref(rt::lessEqual(i, Tensor::fromInts({}, {2}))).v ==
        std::vector<double>{1, 1, 0});
}

TEST_CASE("where selects with a broadcast bool mask", "[elementwise]") {
  Rng rng(41);
  const std::vector<std::tuple<Shape, Shape, Shape>> cases = {
      {{}, {}, {}},
      {{3}, {3}, {3}},
      {{2, 1}, {3}, {2, 3}},
      {{1}, {4, 1}, {5}},
      {{2, 3, 1}, {1, 4}, {}},
      {{0, 3}, {3}, {1}},
      {{300, 200}, {200}, {300, 1}},
  };
  for (const auto &[sm, sx, sy] : cases) {
    Tensor mask = rt::greater(rng.tensor(sm), Tensor::zeros({}));
    Tensor x = rng.tensor(sx), y = rng.tensor(sy);
    Tensor r = rt::where(mask, x, y);
    Shape out = refBroadcast(refBroadcast(sm, sx), sy);
    Ref want(out), rm(mask), rx(x), ry(y);
    for (int64_t i = 0; i < want.numel(); ++i) {
      auto idx = unravel(i, out);
      want.v[i] = bcastAt(rm, idx) != 0 ? bcastAt(rx, idx) : bcastAt(ry, idx);
    }
    requireClose(r, want, Exact, shapeOf(sm) + shapeOf(sx) + shapeOf(sy));
  }
  // Dtypes: same-dtype operands keep it; mixed ones are promoted.
  Tensor m = Tensor::fromInts({2}, {1, 0}, DType::Bool);
  Tensor i = rt::where(m, Tensor::fromInts({2}, {5, 6}, DType::Int32),
                       Tensor::fromInts({2}, {7, 8}, DType::Int32));
  CHECK(i.dtype() == DType::Int32);
  CHECK(Ref(i).v == std::vector<double>{5, 8});
  Tensor f = rt::where(m, Tensor::fromInts({2}, {5, 6}, DType::Int32),
                       Tensor::fromFloats({2}, {0.5f, 1.5f}));
  CHECK(f.dtype() == DType::Float32);
  CHECK(Ref(f).v == std::vector<double>{5, 1.5});
  Tensor b = rt::where(m, m, Tensor::fromInts({1}, {1}, DType::Bool));
  CHECK(b.dtype() == DType::Bool);
}

TEST_CASE("clip clamps with optional bounds", "[elementwise]") {
  Rng rng(51);
  Tensor x = rng.tensor({7, 9}, -5, 5);
  auto refClip = [&](std::optional<double> lo, std::optional<double> hi) {
    Ref r(x);
    for (double &v : r.v) {
      float fv = float(v);
      if (lo)
        fv = std::max(fv, float(*lo));
      if (hi)
        fv = std::min(fv, float(*hi));
      v = fv;
    }
    return r;
  };
  requireClose(rt::clip(x, -1.0, 2.0), refClip(-1.0, 2.0), Exact);
  requireClose(rt::clip(x, std::nullopt, 0.5), refClip(std::nullopt, 0.5),
               Exact);
  requireClose(rt::clip(x, 0.0, std::nullopt), refClip(0.0, std::nullopt),
               Exact);
  requireClose(rt::clip(x, std::nullopt, std::nullopt), Ref(x), Exact);
  Tensor i = Tensor::fromInts({5}, {-3, -1, 0, 2, 9}, DType::Int32);
  Tensor ci = rt::clip(i, -1.5, 2.5);
  CHECK(ci.dtype() == DType::Int32);
  CHECK(Ref(ci).v == std::vector<double>{-1, -1, 0, 2, 2});
  float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(
      rt::clip(Tensor::fromFloats({1}, {nan}), 0.0, 1.0).data<float>()[0]));
}

TEST_CASE("cast converts between every pair of dtypes", "[elementwise][cast]") {
  const DType all[] = {DType::Float32, DType::Float16, DType::Int8,
                       DType::UInt8,   DType::Int32,   DType::Int64,
                       DType::Bool};
  // Values representable in every dtype: the round trip is exact.
  std::vector<float> vals = {0, 1, 2, 7, 100, 0, 1};
  Tensor src = Tensor::fromFloats({7}, vals);
  for (DType from : all) {
    Tensor a = rt::cast(src, from);
    CHECK(a.dtype() == from);
    for (DType to : all) {
      Tensor b = rt::cast(a, to);
      CHECK(b.dtype() == to);
      for (int64_t i = 0; i < 7; ++i) {
        double want = vals[i];
        if (from == DType::Bool || to == DType::Bool)
          want = want != 0 ? 1 : 0;
        INFO(tmg::dtypeName(from).str()
             << " -> " << tmg::dtypeName(to).str() << " at " << i);
        CHECK(b.at(i) == want);
      }
    }
  }
}

TEST_CASE("cast: float to integer truncates, saturates, maps NaN to 0",
          "[elementwise][cast]") {
  float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::fromFloats({6}, {2.7f, -2.7f, 1e10f, -1e10f, nan, 300.f});
  CHECK(Ref(rt::cast(x, DType::Int32)).v ==
        std::vector<double>{2, -2, INT32_MAX, INT32_MIN, 0, 300});
  CHECK(Ref(rt::cast(x, DType::Int8)).v ==
        std::vector<double>{2, -2, 127, -128, 0, 127});
  CHECK(Ref(rt::cast(x, DType::UInt8)).v ==
        std::vector<double>{2, 0, 255, 0, 0, 255});
  CHECK(Ref(rt::cast(x, DType::Bool)).v ==
        std::vector<double>{1, 1, 1, 1, 1, 1});
  Tensor h = rt::cast(Tensor::fromFloats({2}, {0.1f, 65504.f}), DType::Float16);
  CHECK(h.data<uint16_t>()[1] == tmg::floatToHalf(65504.f));
  CHECK(rt::cast(h, DType::Float32).data<float>()[0] ==
        tmg::halfToFloat(tmg::floatToHalf(0.1f)));
  // Integer narrowing wraps.
  Tensor big = Tensor::fromInts({1}, {(int64_t(1) << 32) + 5});
  CHECK(rt::cast(big, DType::Int32).data<int32_t>()[0] == 5);
}

TEST_CASE("binary, compare, where and cast read strided views natively",
          "[elementwise][views]") {
  Rng rng(91);
  for (Layout la : AllLayouts) {
    for (const auto &[sa, sb] : BroadcastCases) {
      CAPTURE(layoutName(la), shapeOf(sa), shapeOf(sb));
      Tensor a = rng.tensor(sa, -3.0, 3.0), b = rng.tensor(sb, 0.5, 2.0);
      Tensor va = stridedCopyOf(a, la, rng), vb = stridedCopyOf(b, la, rng);
      // The reference reads the dense sources.
      for (BinaryOp op : AllBinary) {
        if (op == BinaryOp::Pow)
          continue;
        Ref want = refBinary(Ref(a), Ref(b), [op](double x, double y) {
          return refBinaryOp(op, x, y);
        });
        requireClose(rt::binary(op, va, vb), want, ElementwiseTol,
                     rt::opName(op).str());
        requireClose(rt::binary(op, va, b), want, ElementwiseTol);
        // Views give bit-identical results to dense inputs.
        requireIdentical(rt::binary(op, va, vb), rt::binary(op, a, b));
      }
      // An operand expanded to the broadcast shape (stride-0 dimensions).
      Shape out = refBroadcast(sa, sb);
      Tensor eb = vb.expanded(out);
      Ref want = refBinary(Ref(a), Ref(b), [](double x, double y) { return x * y; });
      requireClose(rt::mul(va, eb), want, ElementwiseTol, "mul expanded");
      Ref less = refBinary(Ref(a), Ref(b), [](double x, double y) { return x < y ? 1.0 : 0.0; });
      requireClose(rt::less(va, eb), less, Exact, "less expanded");
      // where over a strided mask and strided operands.
      Tensor mask = rt::greater(a, Tensor::zeros({}));
      Tensor vm = stridedCopyOf(mask, la, rng);
      Ref wm(mask), wa(a), wb(b), wwant(out);
      Shape wout = refBroadcast(sa, out);
      for (int64_t i = 0; i < wwant.numel(); ++i) {
        auto idx = unravel(i, wout);
        wwant.v[i] = bcastAt(wm, idx) != 0 ? bcastAt(wa, idx) : bcastAt(wb, idx);
      }
      requireClose(rt::where(vm, va, vb), wwant, Exact, "where");
      // cast reads through strides too.
      requireClose(rt::cast(va, DType::Int32),
                   [&] {
                     Ref r(a);
                     for (double &v : r.v)
                       v = std::trunc(v);
                     return r;
                   }(),
                   Exact, "cast");
      requireIdentical(rt::cast(va, DType::Float16), rt::cast(a, DType::Float16));
    }
  }
  // A transposed int64 operand promotes with a float32 one.
  Tensor i = Tensor::fromInts({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t = i.permuted({1, 0});
  REQUIRE_FALSE(t.isContiguous());
  Tensor f = Tensor::fromFloats({3, 1}, {0.5f, 1.5f, 2.5f});
  CHECK(Ref(rt::add(t, f)).v == std::vector<double>{1.5, 4.5, 3.5, 6.5, 5.5, 8.5});
}

TEST_CASE("dense-only kernels reject views with a clear error", "[elementwise][views]") {
  Tensor x = Tensor::randn({4, 6}).permuted({1, 0});
  CHECK_THROWS_WITH(rt::unary(UnaryOp::Exp, x), Catch::Contains("non-contiguous view"));
  CHECK_NOTHROW(rt::unary(UnaryOp::Exp, x.contiguous()));
}

TEST_CASE("elementwise errors name the op and the shapes",
          "[elementwise][errors]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  REQUIRE_THROWS_WITH(rt::add(a, b),
                      Catch::Contains("add: shapes (2, 3) and (4,) do not "
                                      "broadcast"));
  REQUIRE_THROWS_WITH(rt::less(a, b),
                      Catch::Contains("less: shapes (2, 3) and (4,)"));
  REQUIRE_THROWS_WITH(
      rt::where(Tensor::zeros({2, 3}), a, a),
      Catch::Contains("where: mask (2, 3) must be bool, got float32"));
  REQUIRE_THROWS_WITH(
      rt::where(Tensor::zeros({5}, DType::Bool), a, a),
      Catch::Contains("where: shapes (5,) and (2, 3) do not broadcast"));
  REQUIRE_THROWS_WITH(
      rt::pow(Tensor::fromInts({2}, {2, 3}), Tensor::fromInts({2}, {1, -1})),
      Catch::Contains("pow: integer base a (2,)") &&
          Catch::Contains("negative integer exponent"));
  REQUIRE_THROWS_WITH(rt::clip(a, 2.0, 1.0),
                      Catch::Contains("clip: lower bound 2 is greater than "
                                      "upper bound 1 for input (2, 3)"));
  REQUIRE_THROWS_WITH(rt::exp(Tensor()),
                      Catch::Contains("exp: input is undefined"));
}

TEST_CASE("exp, erf, sigmoid, silu and gelu: ulp bounds over their whole range, special values",
          "[elementwise][vecmath]") {
  // The vectorised kernels against std::exp / std::erf in double: exp
  // within 1.2 ulp of the correctly rounded result, erf within 3.5 ulp
  // (the bounds docs/runtime.md states), on a dense sweep; subnormal
  // results flush to zero.
  std::vector<float> xs;
  for (float v = -87.3f; v < 88.7f; v += 0.00137f)
    xs.push_back(v);
  Tensor x = Tensor::fromFloats({int64_t(xs.size())}, xs);
  auto ulps = [](float got, double want) {
    float w = float(want);
    double ulp = double(std::nextafter(std::fabs(w), INFINITY)) - std::fabs(w);
    return std::fabs(double(got) - want) / ulp;
  };
  Tensor e = rt::unary(UnaryOp::Exp, x);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i)
    worst = std::max(worst, ulps(e.data<float>()[i], std::exp(double(xs[i]))));
  CHECK(worst <= 1.2);
  std::vector<float> es;
  for (float v = -6.0f; v < 6.0f; v += 0.0001f)
    es.push_back(v);
  for (float v : {1e-30f, -1e-20f, 1e-7f, 3.9f, 3.93f, 4.0f, 4.1f, 20.0f})
    es.push_back(v);
  Tensor xe = Tensor::fromFloats({int64_t(es.size())}, es);
  Tensor r = rt::unary(UnaryOp::Erf, xe);
  worst = 0;
  for (size_t i = 0; i < es.size(); ++i)
    worst = std::max(worst, ulps(r.data<float>()[i], std::erf(double(es[i]))));
  CHECK(worst <= 3.5);

  const float inf = std::numeric_limits<float>::infinity(),
              nan = std::numeric_limits<float>::quiet_NaN();
  Tensor s = Tensor::fromFloats({7}, {nan, inf, -inf, 0.0f, 89.0f, -104.0f, -0.0f});
  auto at = [](const Tensor &t, int i) { return t.data<float>()[i]; };
  Tensor se = rt::unary(UnaryOp::Exp, s);
  CHECK(std::isnan(at(se, 0)));
  CHECK(at(se, 1) == inf);
  CHECK(at(se, 2) == 0.0f);
  CHECK(at(se, 3) == 1.0f);
  CHECK(at(se, 4) == inf);
  CHECK(at(se, 5) == 0.0f);
  Tensor sr = rt::unary(UnaryOp::Erf, s);
  CHECK(std::isnan(at(sr, 0)));
  CHECK(at(sr, 1) == 1.0f);
  CHECK(at(sr, 2) == -1.0f);
  CHECK(at(sr, 3) == 0.0f);
  CHECK(std::signbit(at(sr, 6)));
  Tensor sg = rt::unary(UnaryOp::Sigmoid, s);
  CHECK(std::isnan(at(sg, 0)));
  CHECK(at(sg, 1) == 1.0f);
  CHECK(at(sg, 2) == 0.0f);
  CHECK(at(sg, 3) == 0.5f);
  Tensor si = rt::unary(UnaryOp::Silu, s);
  // x * sigmoid(x) and x * Phi(x) at -inf are -inf * 0, NaN, as in PyTorch.
  CHECK(at(si, 1) == inf);
  CHECK(std::isnan(at(si, 2)));
  Tensor ge = rt::unary(UnaryOp::Gelu, s);
  CHECK(at(ge, 1) == inf);
  CHECK(std::isnan(at(ge, 2)));
  CHECK(at(ge, 3) == 0.0f);
}
