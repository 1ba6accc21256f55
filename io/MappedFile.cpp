//===- MappedFile.cpp - Weight files mapped into memory -------------------===//
#include "tm/io/MappedFile.h"

#include <cerrno>
#include <cstring>

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

MappedFile::~MappedFile() {
  if (data_)
    munmap(data_, size_);
}

Tensor MappedFile::tensor(const std::shared_ptr<MappedFile> &file, uint64_t offset,
                          llvm::ArrayRef<int64_t> shape, DType dtype) {
  char *at = file->data_ + offset;
  if (reinterpret_cast<uintptr_t>(at) % dtypeSize(dtype) == 0)
    return Tensor::fromExternal(shape, dtype, at, file);
  Tensor t = Tensor::empty(shape, dtype);
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
