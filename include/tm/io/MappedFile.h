//===- MappedFile.h - Weight files mapped into memory ----------*- C++ -*-===//
//
// Weights in .safetensors files and in ONNX external data are read by
// mapping the file, not by copying it: a tensor is a view of the mapped
// bytes (when they are aligned to its element size; else a copy), and the
// mapping lives as long as any tensor over it. The mapping is private and
// copy-on-write, so writing to such a tensor never changes the file; pages
// are read when a kernel first touches them and are served by the page
// cache, so loading costs no copy and no memory beyond the file's pages.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg {

class MappedFile {
public:
  /// Maps the whole file read-only (copy-on-write); a Diagnostic naming
  /// the file when it cannot be opened or mapped.
  static FailureOr<std::shared_ptr<MappedFile>> open(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  llvm::StringRef bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  /// The dense tensor of `shape` and `dtype` stored at byte `offset`: a
  /// view of the mapping that keeps `file` mapped when the address is
  /// aligned to the element size, else a copy (after which those pages are
  /// released). The caller checks that the bytes lie inside the file.
  static Tensor tensor(const std::shared_ptr<MappedFile> &file, uint64_t offset,
                       llvm::ArrayRef<int64_t> shape, DType dtype);

private:
  MappedFile() = default;
  char *data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

/// A whole file's bytes, mapped where the file is a regular one (its pages
/// are the page cache's: reading it would fill as much fresh memory), read
/// otherwise (a pipe, a terminal).
class FileBytes {
public:
  FileBytes() = default;
  /// Bytes read already (stdin, say).
  explicit FileBytes(std::string read) : read_(std::move(read)) {}
  /// The file's bytes; a Diagnostic naming the file when it cannot be read.
  static FailureOr<FileBytes> open(const std::string &path);
  llvm::StringRef bytes() const {
    return map_ ? map_->bytes() : llvm::StringRef(read_);
  }
  /// The mapping, when the file was mapped.
  const std::shared_ptr<MappedFile> &mapping() const { return map_; }
  /// The bytes as a string (moved out when they were read; the object then
  /// holds none).
  std::string take() { return map_ ? map_->bytes().str() : std::move(read_); }

private:
  std::shared_ptr<MappedFile> map_;
  std::string read_;
};

} // namespace tmg
