//===- OnnxCommon.cpp - TensorProto conversion, file reading --------------===//
#include "OnnxCommon.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tm/ir/CheckedSize.h"

namespace tmg::io {
namespace onnxdetail {

using onnx::TensorProto;

std::optional<DType> fromOnnxType(int32_t t) {
  switch (t) {
  case TensorProto::FLOAT: return DType::Float32;
  case TensorProto::DOUBLE: return DType::Float32;
  case TensorProto::FLOAT16: return DType::Float16;
  case TensorProto::INT8: return DType::Int8;
  case TensorProto::UINT8: return DType::UInt8;
  case TensorProto::INT32: return DType::Int32;
  case TensorProto::INT64: return DType::Int64;
  case TensorProto::BOOL: return DType::Bool;
  default: return std::nullopt;
  }
}

int32_t toOnnxType(DType t) {
  switch (t) {
  case DType::Float32: return TensorProto::FLOAT;
  case DType::Float16: return TensorProto::FLOAT16;
  case DType::Int8: return TensorProto::INT8;
  case DType::UInt8: return TensorProto::UINT8;
  case DType::Int32: return TensorProto::INT32;
  case DType::Int64: return TensorProto::INT64;
  case DType::Bool: return TensorProto::BOOL;
  }
  return TensorProto::UNDEFINED;
}

std::string onnxTypeName(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
  return "type " + std::to_string(t);
}

/// Values a TensorProto holds in its typed field for its element type
/// (-1 for element types tmgraph does not read).
static int64_t typedFieldCount(const TensorProto &p) {
  switch (p.data_type()) {
  case TensorProto::FLOAT: return p.float_data_size();
  case TensorProto::DOUBLE: return p.double_data_size();
  case TensorProto::INT64: return p.int64_data_size();
  case TensorProto::INT32:
  case TensorProto::FLOAT16:
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL: return p.int32_data_size();
  default: return -1;
  }
}

int64_t validateTensorProto(const TensorProto &p, const std::string &what,
                            const SizeLimits &limits) {
  if (p.data_location() == TensorProto::EXTERNAL || p.external_data_size())
    raise("{} stores its data externally, which is not supported", what);
  if (p.segment().begin() || p.segment().end())
    raise("{} is segmented, which is not supported", what);
  auto dt = fromOnnxType(p.data_type());
  if (!dt)
    raise("{} has element type {}, which tmgraph does not support", what,
          onnxTypeName(p.data_type()));
  Shape shape(p.dims().begin(), p.dims().end());
  for (int64_t d : shape)
    if (d < 0)
      raise("{} has a negative dimension (dims {})", what, shapeStr(shape));
  std::optional<int64_t> n = checkedNumel(shape);
  if (!n)
    raise("{} of shape {}: the element count overflows", what, shapeStr(shape));
  // The data must be there before anything is allocated or handed to ONNX's
  // shape inference: dims alone can claim any size (a fuzz_onnx finding
  // allocated 12 GB from a 1.6 kB file), and libonnx reads raw_data as the
  // dims say without checking its length.
  if (p.has_raw_data()) {
    bool isDouble = p.data_type() == TensorProto::DOUBLE;
    std::optional<int64_t> want = checkedByteSize(shape, isDouble ? 8 : dtypeSize(*dt));
    if (!want || uint64_t(*want) != p.raw_data().size())
      raise("{} of shape {} ({}) has {} raw bytes, expected {}", what, shapeStr(shape),
            onnxTypeName(p.data_type()), p.raw_data().size(),
            want ? fmt::to_string(*want) : std::string("more than 2^63"));
  } else if (int64_t have = typedFieldCount(p); have != *n) {
    raise("{} of shape {} holds {} values", what, shapeStr(shape), have);
  }
  auto bytes = checkTensorBytes(what, shape, *dt, limits);
  if (bytes.failed())
    throw Error(bytes.diagnostic());
  return *bytes;
}

Tensor tensorFromProto(const TensorProto &p, const SizeLimits &limits) {
  validateTensorProto(p, "tensor '" + p.name() + "'", limits);
  auto dt = fromOnnxType(p.data_type());
  Shape shape(p.dims().begin(), p.dims().end());
  int64_t n = *checkedNumel(shape);
  bool isDouble = p.data_type() == TensorProto::DOUBLE;
  Tensor t = Tensor::empty(shape, *dt);
  if (p.has_raw_data()) {
    const std::string &raw = p.raw_data();
    if (isDouble) {
      float *o = t.data<float>();
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, raw.data() + 8 * i, 8);
        o[i] = float(v);
      }
    } else if (n) {
      std::memcpy(t.rawData(), raw.data(), raw.size());
    }
    return t;
  }
  switch (p.data_type()) {
  case TensorProto::FLOAT:
    std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>());
    break;
  case TensorProto::DOUBLE:
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = float(p.double_data(i));
    break;
  case TensorProto::INT64:
    std::copy(p.int64_data().begin(), p.int64_data().end(), t.data<int64_t>());
    break;
  case TensorProto::INT32:
    std::copy(p.int32_data().begin(), p.int32_data().end(), t.data<int32_t>());
    break;
  case TensorProto::FLOAT16:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = uint16_t(p.int32_data(i));
    break;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL:
    for (int64_t i = 0; i < n; ++i)
      t.data<uint8_t>()[i] = uint8_t(p.int32_data(i));
    break;
  default:
    raise("tensor '{}': unsupported element type", p.name());
  }
  return t;
}

void tensorToProto(const Tensor &t, TensorProto &p) {
  p.set_data_type(toOnnxType(t.dtype()));
  for (int64_t d : t.shape())
    p.add_dims(d);
  Tensor dense = t.contiguous(); // views are written dense
  p.set_raw_data(std::string(static_cast<const char *>(dense.rawData()), dense.nbytes()));
}

void parseProto(google::protobuf::MessageLite &m, const std::string &bytes,
                const std::string &what) {
  if (!m.ParseFromString(bytes))
    raise("{}: not a valid ONNX protobuf (truncated or corrupt)", what);
}

std::string readFileBytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    raiseAt(Location::inFile(path), "cannot open file: {}", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

} // namespace onnxdetail

using namespace onnxdetail;

FailureOr<Tensor> readOnnxTensor(const std::string &path) {
  try {
    TensorProto p;
    parseProto(p, readFileBytes(path), path);
    return tensorFromProto(p);
  } catch (const Error &e) {
    Diagnostic d = e.diagnostic();
    if (d.loc.empty())
      d.loc = Location::inFile(path);
    return d;
  }
}

FailureOr<std::string> onnxTensorTypeName(const std::string &path) {
  try {
    TensorProto p;
    parseProto(p, readFileBytes(path), path);
    return onnxTypeName(p.data_type());
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

} // namespace tmg::io
