//===- Safetensors.h - The safetensors weight format ------------*- C++ -*-===//
//
// The standard layout: an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets"} (plus an
// optional "__metadata__" map of strings), then the raw little-endian data.
// NumPy, PyTorch and the `safetensors` package read these files.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <iosfwd>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg {

struct WeightFile {
  /// Tensors by name, in file order.
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;

  const Tensor *find(llvm::StringRef name) const;
};

/// "F32", "F16", "I8", "U8", "I32", "I64", "BOOL".
llvm::StringRef safetensorsDType(DType t);

/// Parses safetensors bytes. Every malformed input (short file, header
/// length out of range, bad JSON, unknown dtype, bad shape, offsets out of
/// range, overlapping or mis-sized data) is a Diagnostic naming `filename`
/// and the byte offset.
FailureOr<WeightFile> parseSafetensors(llvm::StringRef bytes,
                                       llvm::StringRef filename = "<memory>");
/// Maps the file: its tensors are views of the mapping (copies where a
/// tensor's bytes are not aligned to its element size), see MappedFile.h.
FailureOr<WeightFile> readSafetensors(const std::string &path);

/// Serialises tensors (names must be unique; order kept).
FailureOr<std::string> serializeSafetensors(const WeightFile &w);
FailureOr<void> writeSafetensors(const std::string &path, const WeightFile &w);

/// Reads a whole file; a Diagnostic names the file when it cannot.
FailureOr<std::string> readFileBytes(const std::string &path);
/// Writes a whole file atomically (temporary file + rename).
FailureOr<void> writeFileBytes(const std::string &path, llvm::StringRef bytes);
/// Writes `path` atomically from what `write` streams: through `path.tmp`,
/// renamed over `path` once `write` returns and the bytes are flushed (a
/// symbolic link is followed: the file it names is replaced). An Error
/// thrown by `write` removes the temporary file and is returned. A path
/// that isSpecialFile is written in place.
FailureOr<void> writeFileWith(const std::string &path,
                              llvm::function_ref<void(std::ostream &)> write);
/// Whether `path` exists and is neither a regular file nor a directory (a
/// device such as /dev/null, a FIFO, a terminal): written in place, since
/// renaming over it would replace it, and with nothing beside it.
bool isSpecialFile(const std::string &path);

} // namespace tmg
