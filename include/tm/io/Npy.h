//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes NumPy's .npy format (versions 1.0, 2.0 and 3.0) for the
// runtime's dtypes: float32, float16, int8, uint8, int32, int64 and bool, C
// order, little-endian. Anything else is rejected with a Diagnostic naming
// the file and byte offset.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg {

FailureOr<Tensor> parseNpy(llvm::StringRef bytes, llvm::StringRef filename = "<memory>");
FailureOr<Tensor> readNpy(const std::string &path);
/// The .npy bytes of `t`; throws tmg::Error for bfloat16, which NumPy has
/// no dtype for (writeNpy returns that error instead).
std::string serializeNpy(const Tensor &t);
FailureOr<void> writeNpy(const std::string &path, const Tensor &t);

} // namespace tmg
