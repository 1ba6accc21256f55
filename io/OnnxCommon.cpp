//===- OnnxCommon.cpp - TensorProto conversion, file reading --------------===//
#include "OnnxCommon.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>

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

Tensor tensorFromProto(const TensorProto &p) {
  if (p.data_location() == TensorProto::EXTERNAL || p.external_data_size())
    raise("tensor '{}' stores its data externally, which is not supported", p.name());
  if (p.segment().begin() || p.segment().end())
    raise("tensor '{}' is segmented, which is not supported", p.name());
  auto dt = fromOnnxType(p.data_type());
  if (!dt)
    raise("tensor '{}' has element type {}, which tmgraph does not support", p.name(),
          onnxTypeName(p.data_type()));
  Shape shape;
  for (int64_t d : p.dims()) {
    if (d < 0)
      raise("tensor '{}' has a negative dimension", p.name());
    shape.push_back(d);
  }
  // The data must be there before anything is allocated: dims alone can
  // claim any size (a fuzz_onnx finding allocated 12 GB from a 1.6 kB file).
  uint64_t un = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(un, uint64_t(d), &un) || un > uint64_t(INT64_MAX))
      raise("tensor '{}' of shape {}: the element count overflows", p.name(), shapeStr(shape));
  int64_t n = int64_t(un);
  auto count = [&](int64_t have) {
    if (have != n)
      raise("tensor '{}' of shape {} holds {} values", p.name(), shapeStr(shape), have);
  };
  bool isDouble = p.data_type() == TensorProto::DOUBLE;
  if (p.has_raw_data()) {
    const std::string &raw = p.raw_data();
    uint64_t elem = isDouble ? 8 : dtypeSize(*dt), want = 0;
    if (__builtin_mul_overflow(un, elem, &want) || raw.size() != want)
      raise("tensor '{}' of shape {} has {} raw bytes, expected {}", p.name(),
            shapeStr(shape), raw.size(), want ? fmt::to_string(want) : fmt::format("{} x {}", n, elem));
  } else {
    switch (p.data_type()) {
    case TensorProto::FLOAT: count(p.float_data_size()); break;
    case TensorProto::DOUBLE: count(p.double_data_size()); break;
    case TensorProto::INT64: count(p.int64_data_size()); break;
    default: count(p.int32_data_size()); break;
    }
  }
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
    count(p.float_data_size());
    std::copy(p.float_data().begin(), p.float_data().end(), t.data<float>());
    break;
  case TensorProto::DOUBLE:
    count(p.double_data_size());
    for (int64_t i = 0; i < n; ++i)
      t.data<float>()[i] = float(p.double_data(i));
    break;
  case TensorProto::INT64:
    count(p.int64_data_size());
    std::copy(p.int64_data().begin(), p.int64_data().end(), t.data<int64_t>());
    break;
  case TensorProto::INT32:
    count(p.int32_data_size());
    std::copy(p.int32_data().begin(), p.int32_data().end(), t.data<int32_t>());
    break;
  case TensorProto::FLOAT16:
    count(p.int32_data_size());
    for (int64_t i = 0; i < n; ++i)
      t.data<uint16_t>()[i] = uint16_t(p.int32_data(i));
    break;
  case TensorProto::INT8:
  case TensorProto::UINT8:
  case TensorProto::BOOL:
    count(p.int32_data_size());
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
    raise("{}: cannot open file", path);
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
