//===- CheckedSize.cpp - Overflow-safe tensor sizes and limits ------------===//
#include "tm/ir/CheckedSize.h"

#include <cstdio>
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

int64_t availableMemoryBytes() {
  if (FILE *f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    long long kib = -1;
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
        break;
    std::fclose(f);
    if (kib >= 0 && kib < Unlimited / 1024)
      return int64_t(kib) * 1024;
  }
  long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  int64_t b;
  if (pages > 0 && page > 0 && !__builtin_mul_overflow(int64_t(pages), int64_t(page), &b))
    return b;
  return physicalMemoryBytes();
}

static int64_t effective(int64_t limit) {
  if (limit < 0)
    return Unlimited;
  return limit == 0 ? availableMemoryBytes() : limit;
}

SizeLimits SizeLimits::resolved() const {
  SizeLimits r;
  r.maxTensorBytes = effective(maxTensorBytes);
  r.maxModelBytes = effective(maxModelBytes);
  return r;
}

/// The limit a message names, and how to change it.
static std::string limitText(int64_t limit, const char *name) {
  return fmt::format("the limit of {} (SizeLimits::{}; by default the memory available when "
                     "the file is read)",
                     formatBytes(uint64_t(limit)), name);
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
  int64_t limit = effective(limits.maxTensorBytes);
  if (*bytes > limit)
    return Diagnostic(Location(),
                      fmt::format("{}: {} tensor of shape {} needs {}, more than {}", what.str(),
                                  dtypeName(dtype).str(), shapeStr(shape),
                                  formatBytes(uint64_t(*bytes)),
                                  limitText(limit, "maxTensorBytes")));
  return *bytes;
}

FailureOr<void> ModelBytesBudget::add(llvm::StringRef what, int64_t bytes) {
  int64_t total;
  if (__builtin_add_overflow(total_, bytes, &total) || total > limit_)
    return Diagnostic(
        Location(),
        fmt::format("{}: the model's tensors reach {} with this one ({}), more than {}",
                    what.str(), formatBytes(uint64_t(total_) + uint64_t(bytes)),
                    formatBytes(uint64_t(bytes)), limitText(limit_, "maxModelBytes")));
  total_ = total;
  return {};
}

} // namespace tmg
