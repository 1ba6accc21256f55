//===- CheckedSize.cpp - Overflow-safe tensor sizes and limits ------------===//
#include "tm/ir/CheckedSize.h"

#include <limits>

#include <unistd.h>

namespace tmg {

static constexpr int64_t Unlimited = std::numeric_limits<int64_t>::max();

std::optional<int64_t> checkedNumel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      return std::nullopt;
  return n;
}

std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape, uint64_t elemBytes) {
  std::optional<int64_t> n = checkedNumel(shape);
  int64_t bytes;
  if (!n || elemBytes > uint64_t(Unlimited) ||
      __builtin_mul_overflow(*n, int64_t(elemBytes), &bytes))
    return std::nullopt;
  return bytes;
}

std::optional<int64_t> checkedByteSize(llvm::ArrayRef<int64_t> shape, DType dtype) {
  return checkedByteSize(shape, dtypeSize(dtype));
}

int64_t physicalMemoryBytes() {
  static const int64_t bytes = [] {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t b;
    if (pages <= 0 || page <= 0 || __builtin_mul_overflow(int64_t(pages), int64_t(page), &b))
      return Unlimited;
    return b;
  }();
  return bytes;
}

std::string formatBytes(uint64_t bytes) {
  if (bytes < 1024)
    return fmt::format("{} bytes", bytes);
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = -1;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{} bytes ({:.1f} {})", bytes, v, units[u]);
}

static int64_t effective(int64_t limit) {
  if (limit < 0)
    return Unlimited;
  return limit == 0 ? physicalMemoryBytes() : limit;
}

int64_t SizeLimits::tensorLimit() const { return effective(maxTensorBytes); }
int64_t SizeLimits::modelLimit() const { return effective(maxModelBytes); }

/// Which limit a message names: the option when the user set one, the
/// machine's memory otherwise.
static std::string limitText(int64_t option, int64_t limit, const char *name) {
  if (option == 0)
    return fmt::format("this machine's physical memory, {} (raise SizeLimits::{} to allow it)",
                       formatBytes(uint64_t(limit)), name);
  return fmt::format("the limit of {} (SizeLimits::{})", formatBytes(uint64_t(limit)), name);
}

FailureOr<int64_t> checkTensorBytes(llvm::StringRef what, llvm::ArrayRef<int64_t> shape,
                                    DType dtype, const SizeLimits &limits) {
  for (int64_t d : shape)
    if (d < 0)
      return Diagnostic(Location(), fmt::format("{}: {} tensor of shape {} has a negative "
                                                "dimension",
                                                what.str(), dtypeName(dtype).str(),
                                                shapeStr(shape)));
  std::optional<int64_t> bytes = checkedByteSize(shape, dtype);
  if (!bytes)
    return Diagnostic(Location(),
                      fmt::format("{}: {} tensor of shape {} has a byte size that does not "
                                  "fit in 64 bits",
                                  what.str(), dtypeName(dtype).str(), shapeStr(shape)));
  int64_t limit = limits.tensorLimit();
  if (*bytes > limit)
    return Diagnostic(Location(),
                      fmt::format("{}: {} tensor of shape {} needs {}, more than {}", what.str(),
                                  dtypeName(dtype).str(), shapeStr(shape),
                                  formatBytes(uint64_t(*bytes)),
                                  limitText(limits.maxTensorBytes, limit, "maxTensorBytes")));
  return *bytes;
}

LogicalResult ModelBytesBudget::add(llvm::StringRef what, int64_t bytes, Diagnostic *error) {
  int64_t total;
  if (__builtin_add_overflow(total_, bytes, &total) || total > limit_) {
    if (error)
      *error = Diagnostic(
          Location(),
          fmt::format("{}: the model's tensors reach {} with this one ({}), more than {}",
                      what.str(), formatBytes(uint64_t(total_) + uint64_t(bytes)),
                      formatBytes(uint64_t(bytes)),
                      limitText(option_, limit_, "maxModelBytes")));
    return failure();
  }
  total_ = total;
  return success();
}

} // namespace tmg
