//===- OnnxCommon.cpp - TensorProto conversion, file reading --------------===//
#include "OnnxCommon.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "tm/io/Safetensors.h"
#include "tm/ir/CheckedSize.h"
#include "tm/ir/Strings.h"

namespace tmg::io {
namespace onnxdetail {

using onnx::TensorProto;

/// ONNX element types and the dtypes they are read as (one to one).
static constexpr std::pair<int32_t, DType> kOnnxTypes[] = {
    {TensorProto::FLOAT, DType::Float32},   {TensorProto::DOUBLE, DType::Float64},
    {TensorProto::FLOAT16, DType::Float16}, {TensorProto::BFLOAT16, DType::BFloat16},
    {TensorProto::INT8, DType::Int8},       {TensorProto::INT16, DType::Int16},
    {TensorProto::INT32, DType::Int32},     {TensorProto::INT64, DType::Int64},
    {TensorProto::UINT8, DType::UInt8},     {TensorProto::UINT16, DType::UInt16},
    {TensorProto::UINT32, DType::UInt32},   {TensorProto::UINT64, DType::UInt64},
    {TensorProto::BOOL, DType::Bool},       {TensorProto::STRING, DType::String},
};

std::optional<DType> fromOnnxType(int32_t t) {
  for (auto [onnxType, dtype] : kOnnxTypes)
    if (onnxType == t)
      return dtype;
  return std::nullopt;
}

int32_t toOnnxType(DType t) {
  for (auto [onnxType, dtype] : kOnnxTypes)
    if (dtype == t)
      return onnxType;
  return TensorProto::UNDEFINED;
}

std::string onnxTypeName(int32_t t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
  return "type " + std::to_string(t);
}

/// Values a TensorProto holds in the typed field ONNX defines for its
/// element type (-1 for element types tmgraph does not read).
static int64_t typedFieldCount(const TensorProto &p) {
  switch (p.data_type()) {
  case TensorProto::FLOAT: return p.float_data_size();
  case TensorProto::DOUBLE: return p.double_data_size();
  case TensorProto::INT64: return p.int64_data_size();
  case TensorProto::UINT32:
  case TensorProto::UINT64: return p.uint64_data_size();
  case TensorProto::INT32:
  case TensorProto::INT16:
  case TensorProto::INT8:
  case TensorProto::UINT16:
  case TensorProto::UINT8:
  case TensorProto::FLOAT16:
  case TensorProto::BFLOAT16:
  case TensorProto::BOOL: return p.int32_data_size();
  case TensorProto::STRING: return p.string_data_size();
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
  if (p.has_raw_data() && *dt == DType::String)
    raise("{} is a STRING tensor with raw_data; ONNX stores strings in string_data", what);
  if (p.has_raw_data()) {
    std::optional<int64_t> want = checkedByteSize(shape, dtypeSize(*dt));
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

/// Copies the typed field of `p` (as typedFieldCount picks it) into `t`:
/// 16-bit floats arrive as bit patterns, the rest as values of a wider type.
template <DType D> static void copyTypedField(const TensorProto &p, Tensor &t) {
  using T = StorageT<D>;
  T *o = t.data<T>();
  auto copy = [&](const auto &field) {
    int64_t i = 0;
    for (auto v : field)
      o[i++] = T(v);
  };
  if constexpr (D == DType::Float32)
    copy(p.float_data());
  else if constexpr (D == DType::Float64)
    copy(p.double_data());
  else if constexpr (D == DType::Int64)
    copy(p.int64_data());
  else if constexpr (D == DType::UInt32 || D == DType::UInt64)
    copy(p.uint64_data());
  else
    copy(p.int32_data());
}

Tensor tensorFromProto(const TensorProto &p, const SizeLimits &limits) {
  validateTensorProto(p, "tensor '" + p.name() + "'", limits);
  auto dt = fromOnnxType(p.data_type());
  Shape shape(p.dims().begin(), p.dims().end());
  Tensor t = Tensor::empty(shape, *dt);
  if (p.has_raw_data()) {
    if (!p.raw_data().empty())
      std::memcpy(t.rawData(), p.raw_data().data(), p.raw_data().size());
    return t;
  }
  if (*dt == DType::String) {
    int64_t *o = t.data<int64_t>();
    for (const std::string &v : p.string_data())
      *o++ = intern(v);
    return t;
  }
  visitDType(*dt, [&](auto tag) { copyTypedField<decltype(tag)::value>(p, t); });
  return t;
}

Tensor takeTensorFromProto(TensorProto &p, const SizeLimits &limits) {
  // Below a page the copy costs less than the bookkeeping.
  constexpr size_t MoveBytes = 4096;
  if (!p.has_raw_data() || p.raw_data().size() < MoveBytes)
    return tensorFromProto(p, limits);
  validateTensorProto(p, "tensor '" + p.name() + "'", limits);
  DType dt = *fromOnnxType(p.data_type());
  // malloc aligns a buffer this large to 16 bytes, more than any element
  // needs; a moved std::string keeps its buffer.
  if (reinterpret_cast<uintptr_t>(p.raw_data().data()) % dtypeSize(dt))
    return tensorFromProto(p, limits);
  auto bytes = std::make_shared<std::string>(std::move(*p.mutable_raw_data()));
  p.clear_raw_data();
  Shape shape(p.dims().begin(), p.dims().end());
  return Tensor::fromExternal(shape, dt, bytes->data(), bytes);
}

void tensorToProto(const Tensor &t, TensorProto &p) {
  p.set_data_type(toOnnxType(t.dtype()));
  for (int64_t d : t.shape())
    p.add_dims(d);
  Tensor dense = t.contiguous(); // views are written dense
  if (isString(t.dtype())) {
    const int64_t *ids = dense.data<int64_t>();
    for (int64_t i = 0; i < dense.numel(); ++i)
      p.add_string_data(text(ids[i]).str());
    return;
  }
  p.set_raw_data(std::string(static_cast<const char *>(dense.rawData()), dense.nbytes()));
}

void parseProto(google::protobuf::MessageLite &m, const std::string &bytes,
                const std::string &what) {
  if (!m.ParseFromString(bytes))
    raise("{}: not a valid ONNX protobuf (truncated or corrupt)", what);
}

std::string readFileBytes(const std::string &path) {
  auto bytes = tmg::readFileBytes(path);
  if (bytes.failed())
    throw Error(bytes.diagnostic());
  return std::move(*bytes);
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
