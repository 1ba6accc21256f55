//===- Reference.h - Helpers of the runtime kernel tests --------*- C++ -*-===//
//
// Seeded random tensors, a dense double-precision reference array (`Ref`)
// for the naive implementations written in each test, and comparisons with
// stated tolerances.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstring>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tm/ir/Tensor.h"
#include "tm/runtime/Kernels.h"

namespace tmtest {

using tmg::DType;
using tmg::Shape;
using tmg::Tensor;

/// Tolerances of float32 kernels against double references:
/// |got - want| <= atol + rtol * |want|.
struct Tol {
  double rtol, atol;
};
/// Elementwise math on float32 (libm ulp-level differences).
constexpr Tol ElementwiseTol{1e-5, 1e-6};
/// GEMM-based kernels (matmul, linear, conv) with short dot products:
/// float32 accumulation in a blocked order.
constexpr Tol GemmTol{1e-4, 1e-5};
/// GEMM-based kernels whose dot products have length k (inputs of magnitude
/// <= 2): the float32 rounding error of a sum grows like sqrt(k) times the
/// terms, which matters when the sum cancels to a small value.
inline Tol gemmTol(int64_t k) {
  return {1e-4, 1e-5 * std::max(1.0, std::sqrt(double(k)))};
}
/// Exact data movement.
constexpr Tol Exact{0.0, 0.0};

/// A dense row-major array of doubles with a shape: the result type of the
/// naive references.
struct Ref {
  Shape shape;
  std::vector<double> v;

  Ref() = default;
  explicit Ref(llvm::ArrayRef<int64_t> s, double fill = 0.0)
      : shape(s.begin(), s.end()), v(size_t(tmg::shapeNumel(s)), fill) {}
  explicit Ref(const Tensor &t) : shape(t.shape().begin(), t.shape().end()) {
    v.resize(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      v[i] = t.at(i);
  }
  int64_t numel() const { return int64_t(v.size()); }
  size_t rank() const { return shape.size(); }
  std::vector<int64_t> strides() const {
    std::vector<int64_t> s(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;)
      s[d - 1] = s[d] * shape[d];
    return s;
  }
  /// Flat index of a multi-index.
  int64_t offset(llvm::ArrayRef<int64_t> idx) const {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      o = o * shape[d] + idx[d];
    return o;
  }
  double &operator()(llvm::ArrayRef<int64_t> idx) { return v[offset(idx)]; }
  double operator()(llvm::ArrayRef<int64_t> idx) const {
    return v[offset(idx)];
  }
};

/// Multi-index of flat index i in `shape`.
inline std::vector<int64_t> unravel(int64_t i, llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

/// Seeded generator for a test case.
struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t seed) : gen(seed) {}
  int64_t uniformInt(int64_t lo, int64_t hi) { // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(gen);
  }
  bool coin(double p = 0.5) { return uniform(0.0, 1.0) < p; }
  /// float32 tensor with uniform values in [lo, hi).
  Tensor tensor(llvm::ArrayRef<int64_t> shape, double lo = -1.0,
                double hi = 1.0) {
    Tensor t = Tensor::empty(shape, DType::Float32);
    float *p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i)
      p[i] = float(uniform(lo, hi));
    return t;
  }
  /// Integer tensor (int32 or int64) with values in [lo, hi].
  Tensor ints(llvm::ArrayRef<int64_t> shape, int64_t lo, int64_t hi,
              DType dtype = DType::Int64) {
    Tensor t = Tensor::empty(shape, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) {
      int64_t v = uniformInt(lo, hi);
      if (dtype == DType::Int32)
        t.data<int32_t>()[i] = int32_t(v);
      else
        t.data<int64_t>()[i] = v;
    }
    return t;
  }
  /// Random shape of `rank` dims in [lo, hi].
  Shape shape(size_t rank, int64_t lo, int64_t hi) {
    Shape s;
    for (size_t i = 0; i < rank; ++i)
      s.push_back(uniformInt(lo, hi));
    return s;
  }
};

inline std::string shapeOf(llvm::ArrayRef<int64_t> s) {
  return tmg::shapeStr(s);
}

/// Checks shape and every value; NaNs must match NaNs. Reports the first
/// mismatch with its multi-index.
inline void requireClose(const Tensor &got, const Ref &want, Tol tol,
                         const std::string &what = "") {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(shapeOf(got.shape()) == shapeOf(want.shape));
  int64_t bad = -1;
  double worst = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.at(i), w = want.v[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else
      ok = std::fabs(g - w) <= tol.atol + tol.rtol * std::fabs(w);
    if (!ok) {
      bad = i;
      worst = std::fabs(g - w);
      break;
    }
  }
  if (bad >= 0) {
    std::ostringstream os;
    os << "first mismatch at flat " << bad << " index "
       << shapeOf(unravel(bad, want.shape)) << ": got " << got.at(bad)
       << ", want " << want.v[bad] << " (|diff| " << worst << ", rtol "
       << tol.rtol << ", atol " << tol.atol << ")";
    FAIL(os.str());
  }
}

/// Same dtype, shape and bytes.
inline void requireIdentical(const Tensor &a, const Tensor &b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(shapeOf(a.shape()) == shapeOf(b.shape()));
  REQUIRE(a.bitwiseEqual(b));
}

/// Runs f with the kernels limited to `n` threads, restoring the setting.
template <typename F> auto withThreads(int n, F f) {
  int saved = tmg::rt::numThreads();
  tmg::rt::setNumThreads(n);
  auto r = f();
  tmg::rt::setNumThreads(saved);
  return r;
}

/// Non-contiguous layouts for kernel tests.
enum class Layout {
  Transposed,       ///< dimensions stored in reverse order
  Stepped,          ///< every dimension strided by 2 or 3, at an offset
  TransposedStepped ///< both
};
inline constexpr Layout AllLayouts[] = {Layout::Transposed, Layout::Stepped,
                                        Layout::TransposedStepped};
inline const char *layoutName(Layout l) {
  return l == Layout::Transposed ? "transposed"
         : l == Layout::Stepped  ? "stepped"
                                 : "transposed+stepped";
}

/// A strided view (Tensor::asStrided over a larger storage whose other
/// elements hold garbage) with the same dtype, shape and values as
/// `dense`. The layout is built here, element by element, independently of
/// the view methods under test.
inline Tensor stridedCopyOf(const Tensor &dense, Layout layout, Rng &rng) {
  size_t r = dense.rank();
  std::vector<size_t> order(r); // physical order, outermost first
  for (size_t d = 0; d < r; ++d)
    order[d] = layout == Layout::Stepped ? d : r - 1 - d;
  bool stepped = layout != Layout::Transposed;
  Shape strides(r, 0);
  int64_t running = 1;
  for (size_t k = r; k-- > 0;) {
    size_t d = order[k];
    int64_t step = stepped ? rng.uniformInt(2, 3) : 1;
    strides[d] = running * step;
    running = strides[d] * std::max<int64_t>(dense.dim(d), 1);
  }
  int64_t offset = stepped ? rng.uniformInt(1, 3) : 0;
  size_t elem = tmg::dtypeSize(dense.dtype());
  Tensor base = Tensor::empty({offset + running}, dense.dtype());
  auto *b = static_cast<unsigned char *>(base.rawData());
  for (size_t i = 0; i < size_t(base.numel()) * elem; ++i)
    b[i] = static_cast<unsigned char>(0x7f ^ (i * 37)); // garbage
  Tensor src = dense.contiguous();
  auto *from = static_cast<const unsigned char *>(src.rawData());
  for (int64_t i = 0; i < dense.numel(); ++i) {
    auto idx = unravel(i, dense.shape());
    int64_t off = offset;
    for (size_t d = 0; d < r; ++d)
      off += idx[d] * strides[d];
    std::memcpy(b + size_t(off) * elem, from + size_t(i) * elem, elem);
  }
  return base.asStrided(dense.shape(), strides, offset);
}

/// A float32 tensor of `shape` holding `v` (a hand-written test value).
inline Tensor floats(llvm::ArrayRef<int64_t> shape, std::vector<float> v) {
  return Tensor::fromFloats(shape, v);
}

/// `t` has `shape` and, element by element, the values `want` (within
/// 1e-6): for results computed by hand or taken from the ONNX examples.
inline void checkValues(const Tensor &t, llvm::ArrayRef<int64_t> shape,
                        std::vector<double> want) {
  REQUIRE(t.shape() == shape);
  REQUIRE(t.numel() == int64_t(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(t.at(int64_t(i)) == Approx(want[i]).margin(1e-6));
  }
}

} // namespace tmtest
