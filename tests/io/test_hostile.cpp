// Hostile inputs (tests/files/hostile/, scripts/make-hostile-files.py) read
// through the library: each is refused with a Diagnostic naming the place,
// and the size limits of the read options apply and can be raised.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>

#include "tm/io/Npy.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif

using namespace tmg;

static const std::string Dir = std::string(TM_TEST_FILES) + "/hostile/";

static std::string fileText(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

static std::string loadError(const std::string &name, const TmirReadOptions &o = {}) {
  auto m = loadTmir(Dir + name, o);
  REQUIRE(m.failed());
  return m.diagnostic().str();
}

TEST_CASE("hostile .tmir: builtin modules lacking what their kernels read", "[io][hostile]") {
  CHECK_THAT(loadError("linear-no-weight.tmir"),
             Catch::Contains("linear-no-weight.tmir:6:8: error: module 'fc' (Linear): has "
                             "no 'weight' parameter, which its kernel reads"));
  CHECK_THAT(loadError("linear-weight-rank.tmir"),
             Catch::Contains("linear-weight-rank.tmir:6:8: error: module 'fc' (Linear): "
                             "'weight' must have rank 2, got shape (16,)"));
}

TEST_CASE("hostile .tmir: ids out of range are refused where they are written",
          "[io][hostile]") {
  CHECK_THAT(loadError("node-id-int64-max.tmir"),
             Catch::Matches(".*node-id-int64-max.tmir:28:[0-9]+: error: node id "
                            "9223372036854775807 is out of range.*"));
  CHECK_THAT(loadError("node-id-int64-max-1.tmir"),
             Catch::Contains("node id 9223372036854775806 is out of range"));
  CHECK_THAT(loadError("node-id-negative.tmir"),
             Catch::Contains("node id -1 is out of range"));
  CHECK_THAT(loadError("expr-id-int64-max.tmir"),
             Catch::Matches(".*expr-id-int64-max.tmir:28:3: error: expr id "
                            "9223372036854775807 is out of range.*"));
  auto m = parseTmir("tmir 1\nids 9223372036854775807 0\n", "ids.tmir");
  REQUIRE(m.failed());
  CHECK_THAT(m.diagnostic().str(),
             Catch::Contains("ids.tmir:2:5: error: node id total 9223372036854775807 is out "
                             "of range"));
}

TEST_CASE("hostile .tmir: sizes are checked before allocating, limits can be raised",
          "[io][hostile]") {
  CHECK_THAT(loadError("node-shape-overflow.tmir"),
             Catch::Contains("shape (2305843009213693952, 2) is too large: its byte size "
                             "does not fit in 64 bits"));
  CHECK_THAT(loadError("zeros-terabytes.tmir"),
             Catch::Contains("buffer 'a': float32 tensor of shape (1099511627776,) needs "
                             "4398046511104 bytes (4.0 TiB), more than the limit of"));
  CHECK_THAT(loadError("inline-data-short.tmir"),
             Catch::Contains("inline-data-short.tmir:4:7: error: tensor of shape "
                             "(3000000000,) needs 3000000000 values, got 4"));
  // The limits of the read options, both ways.
  TmirReadOptions small;
  small.limits.maxTensorBytes = 32;
  CHECK_THAT(loadError("../transforms/net.tmir", small),
             Catch::Contains("param 'weight': float32 tensor of shape (4, 4) needs 64 bytes, "
                             "more than the limit of 32 bytes (SizeLimits::maxTensorBytes"));
  TmirReadOptions model;
  model.limits.maxModelBytes = 100;
  CHECK_THAT(loadError("../transforms/net.tmir", model),
             Catch::Contains("the model's tensors reach"));
  TmirReadOptions raised;
  raised.limits.maxTensorBytes = -1;
  raised.limits.maxModelBytes = int64_t(1) << 50;
  CHECK(loadTmir(std::string(TM_TEST_FILES) + "/transforms/net.tmir", raised).succeeded());
}

TEST_CASE("hostile .npy and .safetensors: huge dims", "[io][hostile]") {
  auto e = readNpy(Dir + "npy-empty-huge-dims.npy");
  REQUIRE(e.succeeded());
  CHECK(e->numel() == 0);
  CHECK(e->shape() == llvm::ArrayRef<int64_t>({0, int64_t(1) << 62, int64_t(1) << 62}));
  auto o = readNpy(Dir + "npy-bytes-overflow.npy");
  REQUIRE(o.failed());
  CHECK_THAT(o.diagnostic().str(),
             Catch::Contains("shape (4611686018427387904, 2) of float32 has a byte size that "
                             "does not fit in 64 bits"));
  std::string header =
      R"({"e":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],)"
      R"("data_offsets":[0,0]},"o":{"dtype":"F32","shape":[4611686018427387904,2],)"
      R"("data_offsets":[0,0]}})";
  std::string bytes(8, '\0');
  bytes[0] = char(header.size());
  bytes += header;
  auto w = parseSafetensors(bytes, "huge.safetensors");
  REQUIRE(w.failed());
  CHECK_THAT(w.diagnostic().str(),
             Catch::Contains("tensor 'o': float32 (4611686018427387904, 2) has a byte size "
                             "that does not fit in 64 bits"));
}

#ifdef TM_HAVE_ONNX
static std::string importError(const std::string &name, const io::OnnxImportOptions &o = {}) {
  auto m = io::importOnnxBytes(fileText(Dir + name), name, o);
  REQUIRE(m.failed());
  return m.diagnostic().str();
}

TEST_CASE("hostile .onnx: tensors are validated before ONNX's shape inference",
          "[io][hostile][onnx]") {
  CHECK_THAT(importError("reshape-short-raw-data.onnx"),
             Catch::Contains("initializer 'shape': tensor 'shape' of shape (1,) (INT64) has "
                             "3 raw bytes, expected 8"));
  CHECK_THAT(importError("constant-short-raw-data.onnx"),
             Catch::Contains("node #0 (Constant) attribute 'value': tensor 'shape' of shape "
                             "(1,) (INT64) has 3 raw bytes, expected 8"));
}

TEST_CASE("hostile .onnx: declared sizes that wrap or exceed the limits", "[io][hostile][onnx]") {
  CHECK_THAT(importError("input-bytes-overflow.onnx"),
             Catch::Contains("graph input 'x': float32 tensor of shape (2305843009213693952, "
                             "2) has a byte size that does not fit in 64 bits"));
  CHECK_THAT(importError("input-bytes-overflow-square.onnx"),
             Catch::Contains("(2147483648, 2147483648) has a byte size that does not fit"));
  CHECK_THAT(importError("gather-huge-indices.onnx"),
             Catch::Contains("graph input 'idx': int64 tensor of shape (4611686018427387904,)"));
  CHECK_THAT(importError("input-terabytes.onnx"),
             Catch::Contains("graph input 'x': float32 tensor of shape (1099511627776,) needs "
                             "4398046511104 bytes (4.0 TiB), more than the limit of"));
  CHECK_THAT(importError("constant-of-shape-terabytes.onnx"),
             Catch::Contains("float32 tensor of shape (1048576, 1048576) needs 4398046511104 "
                             "bytes (4.0 TiB)"));
  io::OnnxImportOptions small;
  small.limits.maxTensorBytes = 8;
  CHECK_THAT(importError("gather-huge-indices.onnx", small),
             Catch::Contains("initializer 'data': tensor 'data': float32 tensor of shape "
                             "(3, 4) needs 48 bytes, more than the limit of 8 bytes"));
}
#endif
