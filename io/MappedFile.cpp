//===- MappedFile.cpp - Weight files mapped into memory -------------------===//
#include "tm/io/MappedFile.h"

#include "tm/io/Safetensors.h"

#include "tm/ir/CheckedSize.h"
#include "tm/ir/HugePages.h"

#include <cerrno>
#include <cstring>
#include <optional>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tmg {

FailureOr<std::shared_ptr<MappedFile>> MappedFile::open(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot open file: {}", std::strerror(errno)));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    int err = errno;
    ::close(fd);
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot map file: {}",
                                  S_ISREG(st.st_mode) || !st.st_mode ? std::strerror(err)
                                                                     : "not a regular file"));
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_) {
    void *p = mmap(nullptr, f->size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      f->size_ = 0;
      return Diagnostic(Location::inFile(path),
                        fmt::format("cannot map file: {}", std::strerror(err)));
    }
    f->data_ = static_cast<char *>(p);
  }
  ::close(fd); // the mapping stays valid
  return f;
}

FailureOr<FileBytes> FileBytes::open(const std::string &path) {
  FileBytes f;
  // Told apart by stat, which opens nothing: opening a FIFO to find out
  // would let its writer go ahead and then see the reader vanish.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
    auto m = MappedFile::open(path);
    if (m.failed())
      return m.diagnostic();
    f.map_ = std::move(*m);
    return f;
  }
  auto r = readFileBytes(path);
  if (r.failed())
    return r.diagnostic();
  f.read_ = std::move(*r);
  return f;
}

MappedFile::~MappedFile() {
  if (data_)
    munmap(data_, size_);
}

/// A dense tensor of at least 2 MiB, uninitialised, in anonymous memory
/// whose whole 2 MiB pages are transparent huge pages where the system
/// allows: filling it takes a page fault per 2 MiB, not per 4 KiB (the
/// cost of copying a weight out of a mapping is mostly those faults). The
/// tail stays in small pages, so no memory is held beyond the tensor.
static std::optional<Tensor> hugeTensor(llvm::ArrayRef<int64_t> shape, DType dtype) {
  constexpr size_t Huge = HugePageBytes;
  std::optional<int64_t> bytes = checkedByteSize(shape, dtype);
  if (!bytes || size_t(*bytes) < Huge)
    return std::nullopt;
  size_t len = (size_t(*bytes) + 4095) / 4096 * 4096;
  void *p = mmap(nullptr, len + Huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return std::nullopt;
  uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  uintptr_t base = (raw + Huge - 1) / Huge * Huge;
  if (base > raw)
    munmap(p, base - raw);
  if (raw + len + Huge > base + len)
    munmap(reinterpret_cast<void *>(base + len), raw + len + Huge - (base + len));
  adviseHugePages(reinterpret_cast<void *>(base), size_t(*bytes));
  auto *data = reinterpret_cast<void *>(base);
  std::shared_ptr<const void> owner(data, [len](const void *q) {
    munmap(const_cast<void *>(q), len);
  });
  return Tensor::fromExternal(shape, dtype, data, std::move(owner));
}

Tensor MappedFile::tensor(const std::shared_ptr<MappedFile> &file, uint64_t offset,
                          llvm::ArrayRef<int64_t> shape, DType dtype) {
  char *at = file->data_ + offset;
  if (reinterpret_cast<uintptr_t>(at) % dtypeSize(dtype) == 0)
    return Tensor::fromExternal(shape, dtype, at, file);
  std::optional<Tensor> huge = hugeTensor(shape, dtype);
  Tensor t = huge ? std::move(*huge) : Tensor::empty(shape, dtype);
  size_t bytes = t.nbytes();
  if (!bytes)
    return t;
  std::memcpy(t.rawData(), at, bytes);
  // The copy is the tensor now: give back the mapped pages that hold only
  // its bytes (nothing else views them, and none was written).
  uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  uintptr_t b = (reinterpret_cast<uintptr_t>(at) + page - 1) / page * page;
  uintptr_t e = (reinterpret_cast<uintptr_t>(at) + bytes) / page * page;
  if (e > b)
    madvise(reinterpret_cast<void *>(b), e - b, MADV_DONTNEED);
  return t;
}

} // namespace tmg
