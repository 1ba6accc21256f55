//===- Tensor.h - Dense tensor value type -----------------------*- C++ -*-===//
//
// The value type of parameters, buffers and constants: a dtype, a shape and a
// contiguous, 64-byte-aligned storage shared between copies (copying a Tensor
// is O(1); `clone()` copies the bytes). Kernels live in runtime/.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

namespace tmg {

enum class DType : uint8_t { Float32, Float16, Int8, UInt8, Int32, Int64, Bool };

/// "float32", "float16", "int8", "uint8", "int32", "int64", "bool".
llvm::StringRef dtypeName(DType t);
/// Inverse of dtypeName; nullopt for an unknown name.
std::optional<DType> parseDType(llvm::StringRef name);
/// Bytes per element.
size_t dtypeSize(DType t);
bool isFloat(DType t);

/// A shape; dimensions are non-negative (size-0 dimensions are allowed).
using Shape = llvm::SmallVector<int64_t, 4>;

/// Number of elements of a shape (1 for a scalar shape `()`). Throws
/// tmg::Error on a negative dimension or overflow.
int64_t shapeNumel(llvm::ArrayRef<int64_t> shape);
/// "(3, 4)", "(5,)" and "()" as Python prints a tuple.
std::string shapeStr(llvm::ArrayRef<int64_t> shape);

/// Where tensor storage comes from on the current thread. By default plain
/// aligned malloc; the interpreter installs an arena per run that counts live
/// and peak bytes and recycles freed blocks of the same size. An arena stays
/// alive (shared ownership) until every block allocated from it is gone, so
/// tensors may outlive the run and be freed on any thread.
class StorageArena {
public:
  StorageArena();
  ~StorageArena();
  StorageArena(const StorageArena &) = delete;
  StorageArena &operator=(const StorageArena &) = delete;

  /// Bytes of storage allocated from this arena and not yet freed.
  int64_t liveBytes() const;
  /// The maximum of liveBytes() so far.
  int64_t peakBytes() const;
  /// Blocks handed out again after being freed (memory reuse).
  int64_t reusedBlocks() const;

  /// Installs `a` for allocations on this thread; returns the previous one.
  static std::shared_ptr<StorageArena> install(std::shared_ptr<StorageArena> a);

private:
  friend class Storage;
  void *take(size_t rounded);
  void give(void *p, size_t rounded);
  struct Impl;
  mutable std::unique_ptr<Impl> impl_;
  Impl &impl() const;
};

/// Aligned, reference-counted byte buffer.
class Storage {
public:
  static constexpr size_t Alignment = 64;
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage &) = delete;
  Storage &operator=(const Storage &) = delete;

  void *data() { return data_; }
  const void *data() const { return data_; }
  size_t size() const { return size_; }

private:
  void *data_ = nullptr;
  size_t size_ = 0;
  size_t rounded_ = 0;
  std::shared_ptr<StorageArena> arena_;
};

/// A dense row-major tensor. A default-constructed Tensor is "undefined".
class Tensor {
public:
  Tensor() = default;
  /// Uninitialised contents.
  static Tensor empty(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32);
  static Tensor zeros(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32);
  static Tensor full(llvm::ArrayRef<int64_t> shape, double value,
                     DType dtype = DType::Float32);
  /// Deterministic pseudo-random normal values (float32), for examples and
  /// tests; the same seed gives the same tensor on every platform.
  static Tensor randn(llvm::ArrayRef<int64_t> shape, uint64_t seed = 0);
  /// Copies `values` (their count must equal the shape's element count).
  static Tensor fromFloats(llvm::ArrayRef<int64_t> shape,
                           llvm::ArrayRef<float> values);
  static Tensor fromInts(llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<int64_t> values,
                         DType dtype = DType::Int64);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtypeSize(dtype_); }

  void *rawData() { return storage_ ? storage_->data() : nullptr; }
  const void *rawData() const { return storage_ ? storage_->data() : nullptr; }
  template <typename T> T *data() { return static_cast<T *>(rawData()); }
  template <typename T> const T *data() const {
    return static_cast<const T *>(rawData());
  }

  /// Deep copy of the bytes.
  Tensor clone() const;
  /// Same storage, new shape with the same element count (throws otherwise).
  Tensor reshaped(llvm::ArrayRef<int64_t> shape) const;
  /// Element `i` (flat index) converted to double, for any dtype.
  double at(int64_t i) const;
  /// True when both share the same storage object.
  bool sharesStorage(const Tensor &o) const { return storage_ == o.storage_; }
  /// Same dtype, shape and bytes.
  bool bitwiseEqual(const Tensor &o) const;
  /// "Tensor(shape=(3, 4), dtype=float32)".
  std::string str() const;

private:
  DType dtype_ = DType::Float32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
};

/// IEEE half <-> float conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);

} // namespace tmg
