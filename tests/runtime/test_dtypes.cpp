//===- test_dtypes.cpp - Every dtype through the kernels ------------------===//
//
// float64 computes in float64, integers of every width and signedness keep
// their dtype, 16-bit floats round-trip through float32, and kernels that
// compute in float32 only refuse float64 instead of narrowing it. Expected
// values are written out by hand.
//
//===----------------------------------------------------------------------===//
#include "Reference.h"

#include <cstring>
#include <limits>

#include "tm/runtime/Extra.h"

using namespace tmtest;
namespace rt = tmg::rt;
using namespace tmg;

namespace {

Tensor f64(llvm::ArrayRef<int64_t> shape, std::initializer_list<double> v) {
  Tensor t = Tensor::empty(shape, DType::Float64);
  std::copy(v.begin(), v.end(), t.data<double>());
  return t;
}

template <typename T> Tensor ints(DType dt, std::initializer_list<T> v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, dt);
  REQUIRE(t.nbytes() == v.size() * sizeof(T));
  std::copy(v.begin(), v.end(), t.data<T>());
  return t;
}

template <typename T> std::vector<T> values(const Tensor &t) {
  Tensor d = t.contiguous();
  return std::vector<T>(d.data<T>(), d.data<T>() + d.numel());
}

} // namespace

TEST_CASE("dtype table: names, sizes, kinds", "[dtype]") {
  struct Row {
    DType t;
    const char *name;
    size_t size;
    bool fl, in, un;
  };
  Row rows[] = {{DType::Float64, "float64", 8, true, false, false},
                {DType::BFloat16, "bfloat16", 2, true, false, false},
                {DType::Int16, "int16", 2, false, true, false},
                {DType::UInt16, "uint16", 2, false, true, true},
                {DType::UInt32, "uint32", 4, false, true, true},
                {DType::UInt64, "uint64", 8, false, true, true},
                {DType::Bool, "bool", 1, false, false, false},
                {DType::String, "string", 8, false, false, false}};
  for (const Row &r : rows) {
    CHECK(dtypeName(r.t) == r.name);
    CHECK(parseDType(r.name) == r.t);
    CHECK(dtypeSize(r.t) == r.size);
    CHECK(isFloat(r.t) == r.fl);
    CHECK(isInteger(r.t) == r.in);
    CHECK(isUnsigned(r.t) == r.un);
  }
  CHECK(allDTypes().size() == 14);
  CHECK(isString(DType::String));
  CHECK(!isString(DType::Int64));
}

TEST_CASE("promotion keeps equal dtypes and widens mixed ones", "[dtype]") {
  CHECK(promoteTypes(DType::UInt8, DType::UInt8) == DType::UInt8);
  CHECK(promoteTypes(DType::Int8, DType::Int8) == DType::Int8);
  CHECK(promoteTypes(DType::UInt16, DType::UInt32) == DType::UInt32);
  CHECK(promoteTypes(DType::UInt8, DType::Int8) == DType::Int16);
  CHECK(promoteTypes(DType::UInt32, DType::Int32) == DType::Int64);
  CHECK(promoteTypes(DType::UInt16, DType::Int64) == DType::Int64);
  CHECK(promoteTypes(DType::Float32, DType::Float64) == DType::Float64);
  CHECK(promoteTypes(DType::Int64, DType::Float64) == DType::Float64);
  CHECK(promoteTypes(DType::Float16, DType::BFloat16) == DType::Float32);
  CHECK(promoteTypes(DType::Bool, DType::UInt8) == DType::UInt8);
  CHECK(promoteTypes(DType::Bool, DType::Bool) == DType::Int32);
}

TEST_CASE("float64 arithmetic is computed in float64", "[dtype][float64]") {
  // 1 + 1e-12 is 1 in float32; float64 keeps the difference.
  Tensor a = f64({2}, {1.0, 2.0}), b = f64({2}, {1e-12, 0.1});
  Tensor s = rt::add(a, b);
  REQUIRE(s.dtype() == DType::Float64);
  CHECK(values<double>(s) == std::vector<double>{1.0 + 1e-12, 2.1});
  Tensor e = rt::unary(rt::UnaryOp::Exp, f64({1}, {1.0}));
  REQUIRE(e.dtype() == DType::Float64);
  CHECK(values<double>(e)[0] == 2.718281828459045);
  Tensor q = rt::div(f64({1}, {1.0}), f64({1}, {3.0}));
  CHECK(values<double>(q)[0] == 1.0 / 3.0);
  Tensor c = rt::compare(rt::CompareOp::Greater, f64({2}, {1.0 + 1e-12, 1.0}), f64({2}, {1.0, 1.0}));
  CHECK(values<uint8_t>(c) == std::vector<uint8_t>{1, 0});
  Tensor m = rt::mathUnary(rt::MathOp::Sin, f64({1}, {1.0}));
  REQUIRE(m.dtype() == DType::Float64);
  CHECK(values<double>(m)[0] == 0.8414709848078965);
}

TEST_CASE("float64 reductions and cumsum stay float64", "[dtype][float64]") {
  Tensor x = f64({2, 2}, {1.0, 1e-12, 2.0, 3.0});
  Tensor s = rt::reduce(rt::ReduceOp::Sum, x, {1}, false);
  REQUIRE(s.dtype() == DType::Float64);
  CHECK(values<double>(s) == std::vector<double>{1.0 + 1e-12, 5.0});
  Tensor m = rt::reduce(rt::ReduceOp::Mean, x, {0}, false);
  REQUIRE(m.dtype() == DType::Float64);
  CHECK(values<double>(m) == std::vector<double>{1.5, (1e-12 + 3.0) / 2});
  Tensor c = rt::cumsum(x, 1, false, false);
  REQUIRE(c.dtype() == DType::Float64);
  CHECK(values<double>(c) == std::vector<double>{1.0, 1.0 + 1e-12, 2.0, 5.0});
}

TEST_CASE("integer dtypes keep their width and wrap", "[dtype][int]") {
  Tensor a = ints<uint8_t>(DType::UInt8, {250, 3}), b = ints<uint8_t>(DType::UInt8, {10, 4});
  Tensor s = rt::add(a, b);
  REQUIRE(s.dtype() == DType::UInt8);
  CHECK(values<uint8_t>(s) == std::vector<uint8_t>{4, 7});
  Tensor d = rt::sub(ints<uint16_t>(DType::UInt16, {1}), ints<uint16_t>(DType::UInt16, {2}));
  CHECK(values<uint16_t>(d) == std::vector<uint16_t>{65535});
  Tensor big = ints<uint64_t>(DType::UInt64, {std::numeric_limits<uint64_t>::max(), 7});
  Tensor mx = rt::binary(rt::BinaryOp::Maximum, big, ints<uint64_t>(DType::UInt64, {1, 9}));
  CHECK(values<uint64_t>(mx) == std::vector<uint64_t>{std::numeric_limits<uint64_t>::max(), 9});
  Tensor md = rt::mod(ints<int16_t>(DType::Int16, {-7, 7}), ints<int16_t>(DType::Int16, {3, -3}), false);
  REQUIRE(md.dtype() == DType::Int16);
  CHECK(values<int16_t>(md) == std::vector<int16_t>{2, -2});
  Tensor um = rt::mod(big, ints<uint64_t>(DType::UInt64, {10, 4}), false);
  CHECK(values<uint64_t>(um) == std::vector<uint64_t>{5, 3}); // 18446744073709551615 % 10
  Tensor r = rt::reduce(rt::ReduceOp::Max, ints<uint32_t>(DType::UInt32, {4000000000u, 5}), {0}, false);
  REQUIRE(r.dtype() == DType::UInt32);
  CHECK(values<uint32_t>(r) == std::vector<uint32_t>{4000000000u});
}

TEST_CASE("bit shifts and bitwise ops on unsigned integers", "[dtype][int]") {
  Tensor x = ints<uint32_t>(DType::UInt32, {16, 4, 1}), n = ints<uint32_t>(DType::UInt32, {1, 2, 31});
  CHECK(values<uint32_t>(rt::bitShift(x, n, true)) == std::vector<uint32_t>{32, 16, 2147483648u});
  CHECK(values<uint32_t>(rt::bitShift(x, n, false)) == std::vector<uint32_t>{8, 1, 0});
  Tensor y = ints<int8_t>(DType::Int8, {-8}), k = ints<int8_t>(DType::Int8, {1});
  CHECK(values<int8_t>(rt::bitShift(y, k, false)) == std::vector<int8_t>{-4}); // arithmetic
  CHECK_THROWS_WITH(rt::bitShift(y, ints<int8_t>(DType::Int8, {-1}), true),
                    Catch::Contains("negative shift"));
  Tensor a = ints<uint64_t>(DType::UInt64, {0xF0F0F0F0F0F0F0F0ull});
  Tensor b = ints<uint64_t>(DType::UInt64, {0xFF00000000000000ull});
  CHECK(values<uint64_t>(rt::bitwise(rt::LogicalOp::Xor, a, b)) ==
        std::vector<uint64_t>{0x0FF0F0F0F0F0F0F0ull});
  CHECK(values<uint64_t>(rt::invert(b)) == std::vector<uint64_t>{0x00FFFFFFFFFFFFFFull});
}

TEST_CASE("casts between every dtype pair round-trip small integers", "[dtype][cast]") {
  for (DType from : allDTypes())
    for (DType to : allDTypes()) {
      if (isString(from) || isString(to))
        continue; // rt::cast refuses strings; astype's string casts: test_strings
      INFO(dtypeName(from).str() << " -> " << dtypeName(to).str());
      Tensor x = Tensor::fromInts({3}, {0, 1, 5}, from);
      if (from == DType::Bool)
        x = Tensor::fromInts({3}, {0, 1, 1}, from);
      Tensor y = rt::cast(rt::cast(x, to), from);
      REQUIRE(y.dtype() == from);
      for (int64_t i = 0; i < 3; ++i)
        CHECK(y.at(i) == (to == DType::Bool ? double(x.at(i) != 0) : x.at(i)));
    }
}

TEST_CASE("bfloat16 stores the top half of a float32", "[dtype][bfloat16]") {
  CHECK(floatToBFloat16(1.0f) == 0x3F80);
  CHECK(bfloat16ToFloat(0x3F80) == 1.0f);
  CHECK(floatToBFloat16(-2.5f) == 0xC020);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to even (1).
  CHECK(floatToBFloat16(1.00390625f) == 0x3F80);
  CHECK(floatToBFloat16(1.01171875f) == 0x3F82); // 1 + 3*2^-8: up to even
  CHECK(std::isnan(bfloat16ToFloat(floatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  Tensor x = rt::cast(Tensor::fromFloats({2}, {1.5f, -3.0f}), DType::BFloat16);
  Tensor s = rt::add(x, x);
  REQUIRE(s.dtype() == DType::BFloat16);
  CHECK(s.at(0) == 3.0);
  CHECK(s.at(1) == -6.0);
}

TEST_CASE("convNd computes float64 operands in float64", "[dtype][float64]") {
  // Products near 2^40: float32 (24-bit significand) would round them.
  int64_t big = (int64_t(1) << 20) + 1;
  Tensor x = rt::cast(Tensor::fromInts({1, 1, 1, 3}, {big, 3, 5}), DType::Float64);
  Tensor w = rt::cast(Tensor::fromInts({1, 1, 1, 2}, {big + 2, 7}), DType::Float64);
  Tensor b = rt::cast(Tensor::fromInts({1}, {-1}), DType::Float64);
  rt::WindowNd p;
  p.stride = {1, 1};
  p.padBegin = {0, 0};
  p.padEnd = {0, 1};
  p.dilation = {1, 1};
  Tensor y = rt::convNd(x, w, b, p, 1);
  REQUIRE(y.dtype() == DType::Float64);
  REQUIRE(y.numel() == 3);
  // Integer arithmetic: each output is x[i] * w0 + x[i + 1] * w1 + b (0 past the end).
  CHECK(y.data<double>()[0] == double(big * (big + 2) + 3 * 7 - 1));
  CHECK(y.data<double>()[1] == double(3 * (big + 2) + 5 * 7 - 1));
  CHECK(y.data<double>()[2] == double(5 * (big + 2) - 1));
}

TEST_CASE("float32-only kernels refuse float64 instead of narrowing it", "[dtype][float64]") {
  Tensor x = rt::cast(Tensor::fromFloats({1, 1, 2, 2}, {1, 2, 3, 4}), DType::Float64);
  rt::WindowNd p;
  p.kernel = {2, 2};
  p.stride = {1, 1};
  p.padBegin = {0, 0};
  p.padEnd = {0, 0};
  p.dilation = {1, 1};
  CHECK_THROWS_WITH(rt::maxPoolNd(x, p), Catch::Contains("float64 is not supported"));
}
