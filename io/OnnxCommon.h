//===- OnnxCommon.h - Helpers shared by ONNX import and export --*- C++ -*-===//
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "tm/io/Onnx.h"
#include "tm/ir/CheckedSize.h"

namespace tmg::io::onnxdetail {

/// tmgraph dtype of an ONNX element type; nullopt when tmgraph has none.
/// DOUBLE maps to Float32 (tmgraph has no float64).
std::optional<DType> fromOnnxType(int32_t t);
int32_t toOnnxType(DType t);
/// "FLOAT", "INT64", ... for messages.
std::string onnxTypeName(int32_t t);

/// Checks a TensorProto without allocating: a supported element type, no
/// external or segmented data, dims whose element count fits, raw_data or
/// typed values exactly as many as the dims say, a byte size within
/// `limits`. Returns the byte size; throws tmg::Error naming `what`.
int64_t validateTensorProto(const onnx::TensorProto &p, const std::string &what,
                            const SizeLimits &limits);
/// Tensor of a TensorProto (raw_data or typed fields), validated first.
Tensor tensorFromProto(const onnx::TensorProto &p, const SizeLimits &limits = {});
/// Tensor of a TensorProto, validated first, that takes over the buffer of
/// a large raw_data instead of copying it (p's raw_data is left empty).
Tensor takeTensorFromProto(onnx::TensorProto &p, const SizeLimits &limits = {});
void tensorToProto(const Tensor &t, onnx::TensorProto &p);

/// Parses serialized bytes; throws tmg::Error naming `what` when they are
/// not a complete message.
void parseProto(google::protobuf::MessageLite &m, const std::string &bytes,
                const std::string &what);
std::string readFileBytes(const std::string &path);

} // namespace tmg::io::onnxdetail
