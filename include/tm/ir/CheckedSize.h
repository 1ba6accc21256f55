//===- CheckedSize.h - Overflow-safe tensor sizes and limits ----*- C++ -*-===//
//
// Element counts and byte sizes of shapes that come from outside (files,
// command lines, declared graph inputs) are computed here and nowhere else:
// a negative dimension or a product that does not fit in int64 is a
// failure, never a wrapped number. SizeLimits bound what a file may make
// tmgraph allocate; by default a tensor or a model may not be larger than
// the memory available when it is read. docs/robustness.md describes them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg {

/// Product of the dimensions (1 for a scalar shape); nullopt when a
/// dimension is negative or the product exceeds INT64_MAX.
std::optional<int64_t> checkedNumel(llvm::ArrayRef<int64_t> shape);
/// checkedNumel(shape) * elemBytes; nullopt when either overflows int64.
std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape, uint64_t elemBytes);
std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape, DType dtype);

/// Bytes of physical memory of this machine (sysconf), INT64_MAX when the
/// system does not say. Computed once: the bound of every allocation.
int64_t physicalMemoryBytes();
/// Bytes of memory available now: MemAvailable of /proc/meminfo, else
/// sysconf's available pages, else physicalMemoryBytes(). Read on each call.
int64_t availableMemoryBytes();
/// "12 bytes", "3221225472 bytes (3.0 GiB)": a byte count for messages.
std::string formatBytes(uint64_t bytes);

/// What a loaded file may ask tmgraph to allocate.
struct SizeLimits {
  /// Largest single tensor (parameter, constant, input, intermediate).
  /// 0: the memory available when the file is read; negative: no limit.
  int64_t maxTensorBytes = 0;
  /// Largest sum of a model's parameter, buffer and constant bytes.
  /// 0: the memory available when the file is read; negative: no limit.
  int64_t maxModelBytes = 0;

  /// These limits in bytes: 0 replaced by availableMemoryBytes() (read
  /// once), negative by INT64_MAX. Readers resolve once per file.
  SizeLimits resolved() const;
};

/// Byte size of a `dtype` tensor of `shape`, checked: a Diagnostic naming
/// `what`, the dtype, the dims and the size when a dimension is negative,
/// the size overflows or it exceeds `limits.maxTensorBytes` (resolved on
/// each call: pass resolved limits in loops).
FailureOr<int64_t> checkTensorBytes(llvm::StringRef what, llvm::ArrayRef<int64_t> shape,
                                    DType dtype, const SizeLimits &limits = {});

/// Sums the bytes of a model's tensors as they are loaded and refuses the
/// one that takes the total past `limits.maxModelBytes`.
class ModelBytesBudget {
public:
  explicit ModelBytesBudget(const SizeLimits &limits)
      : limit_(limits.resolved().maxModelBytes) {}
  /// Adds `bytes` for tensor `what`; a Diagnostic when the total would
  /// pass the limit (the total is then unchanged).
  FailureOr<void> add(llvm::StringRef what, int64_t bytes);
  int64_t total() const { return total_; }

private:
  int64_t limit_;
  int64_t total_ = 0;
};

} // namespace tmg
