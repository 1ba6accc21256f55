//===- test_npy.cpp - NumPy .npy reading and writing ---------------------===//
#include <catch2/catch.hpp>

#include "tm/io/Npy.h"

using namespace tmg;

static std::string header(const std::string &dict, uint8_t major = 1) {
  std::string h = std::string("\x93NUMPY", 6) + char(major) + char(0);
  if (major == 1)
    h += std::string{char(dict.size() & 0xff), char(dict.size() >> 8)};
  else
    h += std::string{char(dict.size() & 0xff), char(dict.size() >> 8), 0, 0};
  return h + dict;
}

TEST_CASE("npy: write and read back every dtype", "[io][npy]") {
  for (DType t : allDTypes()) {
    if (t == DType::BFloat16 || t == DType::String)
      continue; // NumPy has no bfloat16: checked below; strings: test_strings
    INFO(dtypeName(t).str());
    Tensor x = Tensor::fromInts({2, 3}, {1, 0, 3, 4, 5, 1}, t);
    std::string bytes = serializeNpy(x);
    CHECK((bytes.find('\n') + 1) % 64 == 0); // data is 64-byte aligned
    auto back = parseNpy(bytes);
    REQUIRE(back.succeeded());
    CHECK(back->bitwiseEqual(x));
  }
  auto s = parseNpy(serializeNpy(Tensor::full({}, 2.5)));
  REQUIRE(s.succeeded());
  CHECK(s->rank() == 0);
  CHECK(s->at(0) == 2.5);
  CHECK(serializeNpy(Tensor::zeros({5})).find("'shape': (5,)") != std::string::npos);
  CHECK(serializeNpy(Tensor::zeros({1}, DType::Float64)).find("'descr': '<f8'") != std::string::npos);
  CHECK(serializeNpy(Tensor::zeros({1}, DType::UInt16)).find("'descr': '<u2'") != std::string::npos);
  auto bf = writeNpy("bf16.npy", Tensor::zeros({1}, DType::BFloat16));
  REQUIRE(bf.failed());
  CHECK(bf.diagnostic().str().find("bfloat16 has no NumPy dtype") != std::string::npos);
}

TEST_CASE("npy: a non-contiguous view is written dense", "[io][npy]") {
  Tensor x = Tensor::fromInts({2, 3}, {1, 2, 3, 4, 5, 6}, DType::Int32);
  Tensor v = x.permuted({1, 0}); // (3, 2) view: 1 4 2 5 3 6
  REQUIRE(!v.isContiguous());
  auto back = parseNpy(serializeNpy(v));
  REQUIRE(back.succeeded());
  CHECK(back->shape() == llvm::ArrayRef<int64_t>{3, 2});
  CHECK(back->bitwiseEqual(v));
  CHECK(back->at(1) == 4);
}

TEST_CASE("npy: reads what NumPy writes, rejects what it cannot", "[io][npy]") {
  // As np.save writes a (2,) int64 array, header version 2.
  std::string data(16, '\0');
  data[0] = 7;
  auto v2 = parseNpy(header("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }\n", 2) + data);
  REQUIRE(v2.succeeded());
  CHECK(v2->at(0) == 7.0);
  auto err = [](const std::string &b) {
    auto r = parseNpy(b, "x.npy");
    REQUIRE(r.failed());
    return r.diagnostic().str();
  };
  CHECK(err("hello") == "x.npy@byte 0: error: not a .npy file (bad magic)");
  CHECK(err(header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") +
            std::string(4, '\0'))
            .find("unsupported dtype '>f4'") != std::string::npos);
  CHECK(err(header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") +
            std::string(8, '\0'))
            .find("unsupported dtype '<c8'") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }") +
            std::string(4, '\0'))
            .find("Fortran-order") != std::string::npos);
  CHECK(err(header("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }") +
            std::string(4, '\0'))
            .find("needs 12 bytes of data, the file has 4") != std::string::npos);
  CHECK(err(header("{'descr': '<f4'}")).find("needs descr, fortran_order and shape") !=
        std::string::npos);
}
