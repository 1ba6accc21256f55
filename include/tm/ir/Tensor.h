//===- Tensor.h - Dense tensor value type -----------------------*- C++ -*-===//
//
// The value type of parameters, buffers and constants: a dtype, a shape and a
// storage shared between copies (64-byte aligned when allocated, or a view of
// a mapped file; copying a Tensor is O(1);
// `clone()` copies the bytes). A tensor may be a strided view of its storage
// (an element offset and per-dimension element strides): permuted(),
// sliced(), expanded() and, when the layout allows, reshaped() share the
// storage instead of copying. Kernels live in runtime/.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>
#include <string>
#include <utility>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/SymbolicDim.h"

namespace tmg {

/// The element type of a tensor; the list is include/tm/ir/DTypes.def.
enum class DType : uint8_t {
#define TM_DTYPE(E, name, Storage, Kind) E,
#include "tm/ir/DTypes.def"
};

/// Every dtype, in enum order.
llvm::ArrayRef<DType> allDTypes();
/// "float32", "float64", "bfloat16", "int16", "uint64", "bool", ...
llvm::StringRef dtypeName(DType t);
/// Inverse of dtypeName; nullopt for an unknown name.
std::optional<DType> parseDType(llvm::StringRef name);
/// Bytes per element.
size_t dtypeSize(DType t);
/// float16, bfloat16, float32, float64.
bool isFloat(DType t);
/// Signed or unsigned integers (not bool).
bool isInteger(DType t);
bool isUnsigned(DType t);
/// The string dtype: elements are ids of the interned string table
/// (tm/ir/Strings.h), not numbers.
inline bool isString(DType t) { return t == DType::String; }
/// Throws tmg::Error: a string tensor reached code that computes on
/// numbers (visitDType's string case).
[[noreturn]] void throwStringNotNumeric();
/// The dtype arithmetic on `a` and `b` computes in: the same dtype for
/// equal ones (bool with bool: int32); otherwise bool yields to the other,
/// a float beats an integer, the wider float or same-signed integer wins
/// (float16 with bfloat16: float32), and signed with unsigned gives a
/// signed integer holding both (int64 at most).
DType promoteTypes(DType a, DType b);

/// IEEE half and bfloat16 <-> float conversions (round to nearest even;
/// NaN stays NaN).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
inline float bfloat16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}
inline uint16_t floatToBFloat16(float f) {
  uint32_t bits;
  __builtin_memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet and NaN
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// The C++ type an element of dtype D is stored as (DTypes.def).
template <DType D> struct StorageOf;
#define TM_DTYPE(E, name, Storage, Kind)                                       \
  template <> struct StorageOf<DType::E> { using type = Storage; };
#include "tm/ir/DTypes.def"
template <DType D> using StorageT = typename StorageOf<D>::type;
template <DType D> using DTypeTag = std::integral_constant<DType, D>;

/// Calls f(DTypeTag<D>{}) for the run-time dtype t: one instantiation of f
/// per numeric dtype, so kernels written over StorageT<D> cover every
/// numeric dtype. The string dtype is never passed to f: it throws
/// tmg::Error (kernels check for strings first and name their op; code that
/// only moves elements copies them by dtypeSize).
template <typename F> decltype(auto) visitDType(DType t, F &&f) {
  switch (t) {
#define TM_DTYPE(E, name, Storage, Kind)                                       \
  case DType::E:                                                               \
    if constexpr (DType::E == DType::String)                                   \
      throwStringNotNumeric();                                                 \
    else                                                                       \
      return f(DTypeTag<DType::E>{});
#include "tm/ir/DTypes.def"
  }
  return f(DTypeTag<DType::Float32>{});
}

/// Whether dtype D is stored as a 16-bit float pattern (float16, bfloat16)
/// that kernels compute on as float.
template <DType D>
inline constexpr bool isHalfLike = D == DType::Float16 || D == DType::BFloat16;

/// A double as dtype D's storage: floating to integer truncates toward
/// zero and saturates (NaN gives 0), bool is v != 0, 16-bit floats round to
/// nearest even.
template <DType D> StorageT<D> fromDouble(double v) {
  using T = StorageT<D>;
  if constexpr (D == DType::Float16) {
    return floatToHalf(float(v));
  } else if constexpr (D == DType::BFloat16) {
    return floatToBFloat16(float(v));
  } else if constexpr (D == DType::Bool) {
    return v != 0.0 ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return T(v);
  } else {
    if (v != v)
      return 0;
    if (v <= double(std::numeric_limits<T>::min()))
      return std::numeric_limits<T>::min();
    if (v >= double(std::numeric_limits<T>::max()))
      return std::numeric_limits<T>::max();
    return T(v);
  }
}

/// An element of dtype D as a double (exact except for 64-bit integers
/// beyond 2^53).
template <DType D> inline double toDouble(StorageT<D> v) {
  if constexpr (D == DType::Float16)
    return halfToFloat(v);
  else if constexpr (D == DType::BFloat16)
    return bfloat16ToFloat(v);
  else
    return double(v);
}

/// A shape. A tensor's dimensions are sizes (>= 0; size 0 is allowed); a
/// graph node's may also be symbolic or unknown (tm/ir/SymbolicDim.h).
using Shape = llvm::SmallVector<int64_t, 4>;

/// A node shape's sizes with each symbolic or unknown dim taken as 1: what
/// size limits check before the symbols have values.
inline Shape knownSizes(llvm::ArrayRef<int64_t> dims) {
  Shape s;
  for (int64_t d : dims)
    s.push_back(d >= 0 ? d : 1);
  return s;
}

/// Number of elements of a shape (1 for a scalar shape `()`). Throws
/// tmg::Error on a negative dimension or overflow.
int64_t shapeNumel(llvm::ArrayRef<int64_t> shape);
/// "(3, 4)", "(5,)" and "()" as Python prints a tuple (of any ints; a
/// node's shape with symbolic dims prints with dimsStr, tm/ir/SymbolicDim.h).
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
  /// Starts a new measurement (an arena reused for another run): the peak
  /// becomes the live bytes and the reuse count 0; freed blocks are kept.
  void resetCounters();

  /// Bounds what may be allocated from this arena: a tensor larger than
  /// `maxTensorBytes`, or one that takes the live bytes past
  /// `maxLiveBytes`, is refused by Tensor::empty (a tmg::Error giving the
  /// shape, the size and the limit). Negative: no limit (the default).
  void setLimits(int64_t maxTensorBytes, int64_t maxLiveBytes);

  /// Installs `a` for allocations on this thread; returns the previous one.
  static std::shared_ptr<StorageArena> install(std::shared_ptr<StorageArena> a);

private:
  friend class Storage;
  friend class Tensor;
  /// Raises when a `dtype` tensor of `shape` and `bytes` is over a limit.
  void admit(llvm::ArrayRef<int64_t> shape, DType dtype, int64_t bytes) const;
  void *take(size_t rounded);
  void give(void *p, size_t rounded);
  struct Impl;
  mutable std::unique_ptr<Impl> impl_;
  Impl &impl() const;
};

/// Reference-counted byte buffer: allocated 64-byte aligned, or memory owned
/// elsewhere (a region of a mapped file, a buffer moved in) that `owner`
/// keeps alive until the storage is gone.
class Storage {
public:
  static constexpr size_t Alignment = 64;
  explicit Storage(size_t bytes);
  Storage(void *data, size_t bytes, std::shared_ptr<const void> owner)
      : data_(data), size_(bytes), owner_(std::move(owner)) {}
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
  std::shared_ptr<const void> owner_;
};

/// A tensor: row-major and dense when created, possibly a strided view of
/// another tensor's storage (see isContiguous()). A default-constructed
/// Tensor is "undefined".
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
  /// A dense tensor over the bytes at `data`, not copied: `owner` keeps
  /// them alive as long as the storage lives. `data` must be aligned to the
  /// element size and writable (or a copy-on-write mapping).
  static Tensor fromExternal(llvm::ArrayRef<int64_t> shape, DType dtype, void *data,
                             std::shared_ptr<const void> owner);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  llvm::ArrayRef<int64_t> shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_[i]; }
  size_t rank() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return size_t(numel_) * dtypeSize(dtype_); }

  /// Dense row-major data. Throws tmg::Error for a non-contiguous view
  /// (call contiguous() first, or read it with viewData() and strides()).
  void *rawData() { return const_cast<void *>(std::as_const(*this).rawData()); }
  const void *rawData() const {
    if (!contiguous_)
      throwNotContiguous();
    return viewData();
  }
  template <typename T> T *data() { return static_cast<T *>(rawData()); }
  template <typename T> const T *data() const {
    return static_cast<const T *>(rawData());
  }

  // -- Strided views ------------------------------------------------------
  /// Address of element (0, ..., 0), for any layout.
  const void *viewData() const {
    return storage_ ? static_cast<const char *>(storage_->data()) +
                          offset_ * int64_t(dtypeSize(dtype_))
                    : nullptr;
  }
  void *viewData() { return const_cast<void *>(std::as_const(*this).viewData()); }
  /// Element strides per dimension, >= 0 (0 on expanded dimensions).
  llvm::ArrayRef<int64_t> strides() const { return strides_; }
  /// Element offset of element (0, ..., 0) in the storage.
  int64_t storageOffset() const { return offset_; }
  /// Row-major and dense: rawData() / data() may be used.
  bool isContiguous() const { return contiguous_; }
  /// This tensor when contiguous (O(1)), else a dense copy.
  Tensor contiguous() const;
  /// View with dimensions reordered: result dim i is dim perm[i]. Throws
  /// unless perm is a permutation of [0, rank).
  Tensor permuted(llvm::ArrayRef<int64_t> perm) const;
  /// View of elements start, start + step, ... (< stop) along `axis`;
  /// start and stop are clamped to [0, dim], step >= 1.
  Tensor sliced(int64_t axis, int64_t start, int64_t stop, int64_t step = 1) const;
  /// View broadcast to `shape` (NumPy rules; new leading dimensions and
  /// size-1 dimensions get stride 0). Throws when it does not broadcast.
  Tensor expanded(llvm::ArrayRef<int64_t> shape) const;
  /// View of element `index` along `axis`, which is removed.
  Tensor selected(int64_t axis, int64_t index) const;
  /// General view of the same storage (PyTorch's as_strided): `shape`,
  /// element `strides` (>= 0) and element `offset` from the storage start.
  /// Throws when a viewed element would lie outside the storage.
  Tensor asStrided(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
                   int64_t offset) const;

  /// Deep copy of the bytes.
  Tensor clone() const;
  /// New shape with the same element count (throws otherwise): a view of
  /// the same storage when the strides allow it (always for contiguous
  /// tensors; squeeze / unsqueeze always), else a dense copy.
  Tensor reshaped(llvm::ArrayRef<int64_t> shape) const;
  /// Element `i` (flat row-major index) converted to double, for any dtype
  /// and layout.
  double at(int64_t i) const;
  /// True when both share the same storage object (views included).
  bool sharesStorage(const Tensor &o) const { return storage_ == o.storage_; }
  /// Same dtype, shape and element bytes (layouts may differ).
  bool bitwiseEqual(const Tensor &o) const;
  /// "Tensor(shape=(3, 4), dtype=float32)".
  std::string str() const;

private:
  [[noreturn]] void throwNotContiguous() const;
  /// A view of the same storage; recomputes contiguous_.
  Tensor view(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
              int64_t offset) const;

  DType dtype_ = DType::Float32;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<Storage> storage_;
  Shape strides_;
  int64_t offset_ = 0;
  bool contiguous_ = true;
};

} // namespace tmg
