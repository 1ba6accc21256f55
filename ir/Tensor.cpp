//===- Tensor.cpp - Dense tensor value type -------------------------------===//
#include "tm/ir/Tensor.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <algorithm>

#include <llvm/ADT/STLExtras.h>

#include "tm/ir/HugePages.h"

#include "tm/ir/CheckedSize.h"
#include "tm/ir/Diagnostic.h"

namespace tmg {

llvm::ArrayRef<DType> allDTypes() {
  static constexpr DType all[] = {
#define TM_DTYPE(E, name, Storage, Kind) DType::E,
#include "tm/ir/DTypes.def"
  };
  return all;
}

llvm::StringRef dtypeName(DType t) {
  switch (t) {
#define TM_DTYPE(E, name, Storage, Kind)                                       \
  case DType::E:                                                               \
    return name;
#include "tm/ir/DTypes.def"
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType t : allDTypes())
    if (dtypeName(t) == name)
      return t;
  return std::nullopt;
}

size_t dtypeSize(DType t) {
  switch (t) {
#define TM_DTYPE(E, name, Storage, Kind)                                       \
  case DType::E:                                                               \
    return sizeof(Storage);
#include "tm/ir/DTypes.def"
  }
  return 4;
}

void throwStringNotNumeric() {
  raise("a string tensor reached a kernel that computes on numbers; the string "
        "dtype supports data movement, equality, cast and string ops only");
}

namespace {
enum class DTypeKind { Float, Int, UInt, Bool, String };
DTypeKind dtypeKind(DType t) {
  switch (t) {
#define TM_DTYPE(E, name, Storage, Kind)                                       \
  case DType::E:                                                               \
    return DTypeKind::Kind;
#include "tm/ir/DTypes.def"
  }
  return DTypeKind::Float;
}
} // namespace

bool isFloat(DType t) { return dtypeKind(t) == DTypeKind::Float; }
bool isInteger(DType t) {
  DTypeKind k = dtypeKind(t);
  return k == DTypeKind::Int || k == DTypeKind::UInt;
}
bool isUnsigned(DType t) { return dtypeKind(t) == DTypeKind::UInt; }

/// The signed integer dtype of `bytes` bytes (int64 for 8 and more).
static DType signedOfSize(size_t bytes) {
  return bytes <= 1 ? DType::Int8 : bytes == 2 ? DType::Int16 : bytes == 4 ? DType::Int32 : DType::Int64;
}

DType promoteTypes(DType a, DType b) {
  if (isString(a) || isString(b)) {
    if (a == b)
      return a;
    raise("dtypes {} and {} have no common type (strings do not mix with numbers)",
          dtypeName(a), dtypeName(b));
  }
  if (a == DType::Bool && b == DType::Bool)
    return DType::Int32;
  if (a == b)
    return a;
  if (a == DType::Bool || b == DType::Bool)
    return a == DType::Bool ? b : a;
  if (isFloat(a) != isFloat(b))
    return isFloat(a) ? a : b;
  size_t sa = dtypeSize(a), sb = dtypeSize(b);
  if (isFloat(a)) // float16 with bfloat16 meets in float32
    return sa != sb ? (sa > sb ? a : b) : DType::Float32;
  if (isUnsigned(a) == isUnsigned(b))
    return sa > sb ? a : b;
  // Signed with unsigned: a signed type that holds both (int64 at most).
  size_t su = isUnsigned(a) ? sa : sb, ss = isUnsigned(a) ? sb : sa;
  return signedOfSize(std::max(ss, 2 * su));
}

int64_t shapeNumel(llvm::ArrayRef<int64_t> shape) {
  if (std::optional<int64_t> n = checkedNumel(shape))
    return *n;
  for (int64_t d : shape)
    if (d < 0)
      raise("invalid shape {}: negative dimension", shapeStr(shape));
  raise("invalid shape {}: element count overflows", shapeStr(shape));
}

std::string shapeStr(llvm::ArrayRef<int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1)
    s += ",";
  return s + ")";
}

//===----------------------------------------------------------------------===//
// Storage and arenas
//===----------------------------------------------------------------------===//

struct StorageArena::Impl {
  std::mutex mu;
  std::unordered_map<size_t, std::vector<void *>> free;
  int64_t live = 0, peak = 0, reused = 0;
  int64_t maxTensor = -1, maxLive = -1;
};

StorageArena::Impl &StorageArena::impl() const {
  if (!impl_)
    impl_ = std::make_unique<Impl>();
  return *impl_;
}

StorageArena::StorageArena() = default;

StorageArena::~StorageArena() {
  if (!impl_)
    return;
  for (auto &[size, blocks] : impl_->free)
    for (void *p : blocks)
      std::free(p);
}

int64_t StorageArena::liveBytes() const {
  std::lock_guard l(impl().mu);
  return impl().live;
}
int64_t StorageArena::peakBytes() const {
  std::lock_guard l(impl().mu);
  return impl().peak;
}
int64_t StorageArena::reusedBlocks() const {
  std::lock_guard l(impl().mu);
  return impl().reused;
}

void StorageArena::resetCounters() {
  std::lock_guard l(impl().mu);
  impl().peak = impl().live;
  impl().reused = 0;
}

void StorageArena::setLimits(int64_t maxTensorBytes, int64_t maxLiveBytes) {
  std::lock_guard l(impl().mu);
  impl().maxTensor = maxTensorBytes;
  impl().maxLive = maxLiveBytes;
}

void StorageArena::admit(llvm::ArrayRef<int64_t> shape, DType dtype, int64_t bytes) const {
  Impl &i = impl();
  std::lock_guard l(i.mu);
  if (i.maxTensor >= 0 && bytes > i.maxTensor)
    raise("cannot allocate a {} tensor of shape {}: it needs {}, more than the run's "
          "tensor size limit of {} (InterpreterOptions::maxTensorBytes, tm-run "
          "--max-tensor-bytes)",
          dtypeName(dtype).str(), shapeStr(shape), formatBytes(uint64_t(bytes)),
          formatBytes(uint64_t(i.maxTensor)));
  if (i.maxLive >= 0 && bytes > i.maxLive - i.live)
    raise("cannot allocate a {} tensor of shape {}, {}: the run already holds {} of "
          "tensors, and its limit of live tensor memory is {} "
          "(InterpreterOptions::maxLiveBytes)",
          dtypeName(dtype).str(), shapeStr(shape), formatBytes(uint64_t(bytes)),
          formatBytes(uint64_t(i.live)), formatBytes(uint64_t(i.maxLive)));
}

static thread_local std::shared_ptr<StorageArena> currentArena;

std::shared_ptr<StorageArena>
StorageArena::install(std::shared_ptr<StorageArena> a) {
  std::swap(a, currentArena);
  return a;
}

void *StorageArena::take(size_t rounded) {
  Impl &i = impl();
  std::lock_guard l(i.mu);
  i.live += int64_t(rounded);
  i.peak = std::max(i.peak, i.live);
  auto it = i.free.find(rounded);
  if (it != i.free.end() && !it->second.empty()) {
    void *p = it->second.back();
    it->second.pop_back();
    ++i.reused;
    return p;
  }
  return nullptr;
}

void StorageArena::give(void *p, size_t rounded) {
  Impl &i = impl();
  std::lock_guard l(i.mu);
  i.live -= int64_t(rounded);
  i.free[rounded].push_back(p);
}

/// Storage this large goes on transparent huge pages.
static constexpr size_t LargeBytes = size_t(4) << 20;

Storage::Storage(size_t bytes) : size_(bytes) {
  rounded_ = (bytes + Alignment - 1) / Alignment * Alignment;
  if (rounded_ == 0)
    rounded_ = Alignment;
  arena_ = currentArena;
  if (arena_)
    data_ = arena_->take(rounded_);
  if (!data_ && rounded_ >= LargeBytes) {
    // Large buffers are filled at once (weights, packed weights, big
    // activations): on transparent huge pages, one first-touch fault per
    // 2 MiB rather than per 4 KiB (HugePages.h).
    size_t huge = (rounded_ + HugePageBytes - 1) / HugePageBytes * HugePageBytes;
    data_ = std::aligned_alloc(HugePageBytes, huge);
    if (data_)
      adviseHugePages(data_, huge);
  }
  if (!data_)
    data_ = std::aligned_alloc(Alignment, rounded_);
  if (!data_)
    raise("out of memory allocating {} bytes", bytes);
}

Storage::~Storage() {
  if (owner_)
    return; // the owner frees the memory when its last user is gone
  if (arena_)
    arena_->give(data_, rounded_);
  else
    std::free(data_);
}

//===----------------------------------------------------------------------===//
// Layout and views
//===----------------------------------------------------------------------===//

/// Row-major strides. Dimensions of size 0 or 1 take no room, so for a
/// non-empty tensor every stride is at most its element count; for an empty
/// one (where no stride is ever used) the products saturate instead of
/// overflowing.
static Shape denseStrides(llvm::ArrayRef<int64_t> shape) {
  Shape st(shape.size(), 1);
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    st[d] = s;
    if (__builtin_mul_overflow(s, std::max<int64_t>(shape[d], 1), &s))
      s = std::numeric_limits<int64_t>::max();
  }
  return st;
}

/// Row-major dense: every dimension of size > 1 has the stride of the
/// dimensions after it; empty tensors count as dense.
static bool isDense(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> st) {
  if (llvm::is_contained(shape, 0))
    return true;
  int64_t expect = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && st[d] != expect)
      return false;
    expect *= shape[d];
  }
  return true;
}

Tensor Tensor::empty(llvm::ArrayRef<int64_t> shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_.assign(shape.begin(), shape.end());
  t.numel_ = shapeNumel(shape);
  // Sizes from files and command lines end up here: a byte count that
  // wraps would allocate a small buffer for a huge tensor, and one larger
  // than the machine's memory cannot be meant.
  std::optional<int64_t> bytes = checkedByteSize(shape, dtype);
  if (!bytes)
    raise("cannot allocate a {} tensor of shape {}: its byte size does not fit in 64 bits",
          dtypeName(dtype).str(), shapeStr(shape));
  if (*bytes > physicalMemoryBytes())
    raise("cannot allocate a {} tensor of shape {}: it needs {}, more than this machine's "
          "physical memory ({})",
          dtypeName(dtype).str(), shapeStr(shape), formatBytes(uint64_t(*bytes)),
          formatBytes(uint64_t(physicalMemoryBytes())));
  if (currentArena)
    currentArena->admit(shape, dtype, *bytes);
  t.strides_ = denseStrides(shape);
  t.storage_ = std::make_shared<Storage>(size_t(*bytes));
  return t;
}

Tensor Tensor::fromExternal(llvm::ArrayRef<int64_t> shape, DType dtype, void *data,
                            std::shared_ptr<const void> owner) {
  if (!owner)
    raise("a tensor over external memory needs an owner of that memory");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_.assign(shape.begin(), shape.end());
  t.numel_ = shapeNumel(shape);
  std::optional<int64_t> bytes = checkedByteSize(shape, dtype);
  if (!bytes)
    raise("a {} tensor of shape {}: its byte size does not fit in 64 bits",
          dtypeName(dtype).str(), shapeStr(shape));
  if (reinterpret_cast<uintptr_t>(data) % dtypeSize(dtype))
    raise("a {} tensor over external memory must be aligned to its element size",
          dtypeName(dtype).str());
  t.strides_ = denseStrides(shape);
  t.storage_ = std::make_shared<Storage>(data, size_t(*bytes), std::move(owner));
  return t;
}

void Tensor::throwNotContiguous() const {
  raise("{} is a non-contiguous view (strides {}): call contiguous() first",
        str(), shapeStr(strides_));
}

Tensor Tensor::view(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> strides,
                    int64_t offset) const {
  Tensor t;
  t.dtype_ = dtype_;
  t.storage_ = storage_;
  t.shape_.assign(shape.begin(), shape.end());
  t.strides_.assign(strides.begin(), strides.end());
  t.numel_ = shapeNumel(shape);
  t.offset_ = offset;
  t.contiguous_ = isDense(shape, strides);
  return t;
}

/// Copies elements of `elem` bytes from the strided `src` to the dense `dst`,
/// the innermost dimension as a run.
template <typename E>
static void copyStrided(const char *src, llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<int64_t> strides, char *dst) {
  size_t rank = shape.size();
  if (rank == 0) {
    std::memcpy(dst, src, sizeof(E));
    return;
  }
  int64_t inner = shape[rank - 1], is = strides[rank - 1];
  if (rank >= 2 && is != 1 && strides[rank - 2] == 1) {
    // A transpose of the last two dimensions (a weight's W^T): copied in
    // 32 x 32 blocks, each read along its columns (contiguous in the
    // source) and written along its rows, both within the L1 cache,
    // rather than one element per cache line read.
    constexpr int64_t B = 32;
    int64_t n = shape[rank - 2];
    llvm::ArrayRef<int64_t> outerShape = shape.drop_back(2);
    llvm::SmallVector<int64_t, 6> oidx(outerShape.size(), 0);
    int64_t outer = 1;
    for (int64_t d : outerShape)
      outer *= d;
    const E *in = reinterpret_cast<const E *>(src);
    E *out = reinterpret_cast<E *>(dst);
    for (int64_t o = 0; o < outer; ++o) {
      int64_t base = 0;
      for (size_t d = 0; d < oidx.size(); ++d)
        base += oidx[d] * strides[d];
      E *plane = out + o * n * inner;
      for (int64_t i0 = 0; i0 < n; i0 += B)
        for (int64_t j0 = 0; j0 < inner; j0 += B) {
          int64_t i1 = std::min(n, i0 + B), j1 = std::min(inner, j0 + B);
          for (int64_t j = j0; j < j1; ++j)
            for (int64_t i = i0; i < i1; ++i)
              plane[i * inner + j] = in[base + i + j * is];
        }
      for (size_t d = oidx.size(); d-- > 0;) {
        if (++oidx[d] < outerShape[d])
          break;
        oidx[d] = 0;
      }
    }
    return;
  }
  llvm::SmallVector<int64_t, 6> idx(rank - 1, 0);
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= shape[d];
  const E *in = reinterpret_cast<const E *>(src);
  E *out = reinterpret_cast<E *>(dst);
  int64_t off = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (is == 1)
      std::memcpy(out, in + off, sizeof(E) * size_t(inner));
    else
      for (int64_t i = 0; i < inner; ++i)
        out[i] = in[off + i * is];
    out += inner;
    for (size_t d = rank - 1; d-- > 0;) {
      off += strides[d];
      if (++idx[d] < shape[d])
        break;
      off -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

Tensor Tensor::contiguous() const {
  if (!defined() || contiguous_)
    return *this;
  Tensor t = empty(shape_, dtype_);
  if (numel_ == 0)
    return t;
  auto *src = static_cast<const char *>(viewData());
  auto *dst = static_cast<char *>(t.rawData());
  switch (dtypeSize(dtype_)) {
  case 1: copyStrided<uint8_t>(src, shape_, strides_, dst); break;
  case 2: copyStrided<uint16_t>(src, shape_, strides_, dst); break;
  case 4: copyStrided<uint32_t>(src, shape_, strides_, dst); break;
  default: copyStrided<uint64_t>(src, shape_, strides_, dst); break;
  }
  return t;
}

static int64_t viewAxis(const char *what, int64_t axis, size_t rank,
                        llvm::ArrayRef<int64_t> shape) {
  int64_t r = int64_t(rank);
  if (axis < -r || axis >= r)
    raise("{}: axis {} is out of range for shape {}", what, axis, shapeStr(shape));
  return axis < 0 ? axis + r : axis;
}

Tensor Tensor::permuted(llvm::ArrayRef<int64_t> perm) const {
  if (perm.size() != rank())
    raise("permute: {} axes given for shape {}", perm.size(), shapeStr(shape_));
  Shape shape, strides;
  llvm::SmallVector<bool, 6> seen(rank(), false);
  for (int64_t p : perm) {
    int64_t a = viewAxis("permute", p, rank(), shape_);
    if (seen[a])
      raise("permute: axis {} repeats in the permutation", p);
    seen[a] = true;
    shape.push_back(shape_[a]);
    strides.push_back(strides_[a]);
  }
  return view(shape, strides, offset_);
}

Tensor Tensor::sliced(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  int64_t a = viewAxis("slice", axis, rank(), shape_);
  if (step < 1)
    raise("slice: step must be >= 1, got {}", step);
  int64_t n = shape_[a];
  start = std::clamp<int64_t>(start, 0, n);
  stop = std::clamp<int64_t>(stop, start, n);
  Shape shape = shape_, strides = strides_;
  shape[a] = (stop - start + step - 1) / step;
  strides[a] = strides_[a] * step;
  return view(shape, strides, shape[a] ? offset_ + start * strides_[a] : offset_);
}

Tensor Tensor::selected(int64_t axis, int64_t index) const {
  int64_t a = viewAxis("select", axis, rank(), shape_);
  if (index < -shape_[a] || index >= shape_[a])
    raise("select: index {} is out of range for axis {} of shape {}", index, axis,
          shapeStr(shape_));
  if (index < 0)
    index += shape_[a];
  Shape shape = shape_, strides = strides_;
  shape.erase(shape.begin() + a);
  strides.erase(strides.begin() + a);
  return view(shape, strides, offset_ + index * strides_[a]);
}

Tensor Tensor::asStrided(llvm::ArrayRef<int64_t> shape,
                         llvm::ArrayRef<int64_t> strides, int64_t offset) const {
  if (!defined())
    raise("as_strided: the tensor is undefined");
  if (strides.size() != shape.size())
    raise("as_strided: {} strides for shape {}", strides.size(), shapeStr(shape));
  int64_t last = offset, n = shapeNumel(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (strides[d] < 0)
      raise("as_strided: negative stride {} (strides {})", strides[d], shapeStr(strides));
    last += (shape[d] - 1) * strides[d];
  }
  int64_t capacity = int64_t(storage_->size() / dtypeSize(dtype_));
  if (offset < 0 || (n > 0 && last >= capacity))
    raise("as_strided: shape {} with strides {} at offset {} reaches element {} of a "
          "storage of {} elements",
          shapeStr(shape), shapeStr(strides), offset, last, capacity);
  return view(shape, strides, offset);
}

Tensor Tensor::expanded(llvm::ArrayRef<int64_t> shape) const {
  if (shape.size() < rank())
    raise("cannot broadcast a tensor of shape {} to {}", shapeStr(shape_),
          shapeStr(shape));
  Shape strides(shape.size(), 0);
  size_t lead = shape.size() - rank();
  for (size_t d = 0; d < rank(); ++d) {
    int64_t from = shape_[d], to = shape[lead + d];
    if (from == to)
      strides[lead + d] = strides_[d];
    else if (from != 1)
      raise("cannot broadcast a tensor of shape {} to {}", shapeStr(shape_),
            shapeStr(shape));
  }
  return view(shape, strides, offset_);
}

Tensor Tensor::zeros(llvm::ArrayRef<int64_t> shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.rawData(), 0, t.nbytes());
  return t;
}

template <typename T> static void fillAs(Tensor &t, T v) {
  T *p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = v;
}

Tensor Tensor::full(llvm::ArrayRef<int64_t> shape, double value, DType dtype) {
  Tensor t = empty(shape, dtype);
  visitDType(dtype, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    fillAs<StorageT<D>>(t, fromDouble<D>(value));
  });
  return t;
}

Tensor Tensor::randn(llvm::ArrayRef<int64_t> shape, uint64_t seed) {
  Tensor t = empty(shape, DType::Float32);
  // splitmix64 + Box-Muller: portable and reproducible.
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
  auto next = [&s]() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double(z >> 11) + 0.5) / 9007199254740992.0;
  };
  float *p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); i += 2) {
    double u1 = next(), u2 = next();
    double r = std::sqrt(-2.0 * std::log(u1));
    p[i] = float(r * std::cos(2 * M_PI * u2));
    if (i + 1 < t.numel())
      p[i + 1] = float(r * std::sin(2 * M_PI * u2));
  }
  return t;
}

Tensor Tensor::fromFloats(llvm::ArrayRef<int64_t> shape,
                          llvm::ArrayRef<float> values) {
  Tensor t = empty(shape, DType::Float32);
  if (size_t(t.numel()) != values.size())
    raise("fromFloats: shape {} has {} elements but {} values were given",
          shapeStr(shape), t.numel(), values.size());
  std::memcpy(t.rawData(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::fromInts(llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<int64_t> values, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (size_t(t.numel()) != values.size())
    raise("fromInts: shape {} has {} elements but {} values were given",
          shapeStr(shape), t.numel(), values.size());
  visitDType(dtype, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    using T = StorageT<D>;
    T *p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      // Integers convert exactly (modular for narrower ones).
      if constexpr (D == DType::Bool)
        p[i] = values[i] != 0;
      else if constexpr (std::is_integral_v<T> && !isHalfLike<D>)
        p[i] = T(values[i]);
      else
        p[i] = fromDouble<D>(double(values[i]));
    }
  });
  return t;
}

Tensor Tensor::clone() const {
  if (!defined())
    return Tensor();
  if (!contiguous_)
    return contiguous();
  Tensor t = empty(shape_, dtype_);
  std::memcpy(t.rawData(), rawData(), nbytes());
  return t;
}

/// Strides viewing `from` (shape, strides) as `to` without a copy, or
/// nullopt when the layout does not allow it (NumPy's no-copy reshape:
/// each group of old dimensions merged or split must be contiguous within
/// itself).
static std::optional<Shape> reshapeStrides(llvm::ArrayRef<int64_t> fromShape,
                                           llvm::ArrayRef<int64_t> fromStrides,
                                           llvm::ArrayRef<int64_t> to) {
  Shape od, os;
  for (size_t d = 0; d < fromShape.size(); ++d)
    if (fromShape[d] != 1) {
      od.push_back(fromShape[d]);
      os.push_back(fromStrides[d]);
    }
  Shape ns(to.size(), 1);
  size_t oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < to.size() && oi < od.size()) {
    int64_t np = to[ni], op = od[oi];
    while (np != op) {
      if (np < op)
        np *= to[nj++];
      else
        op *= od[oj++];
    }
    for (size_t ok = oi; ok + 1 < oj; ++ok)
      if (os[ok] != od[ok + 1] * os[ok + 1])
        return std::nullopt;
    ns[nj - 1] = os[oj - 1];
    for (size_t nk = nj - 1; nk > ni; --nk)
      ns[nk - 1] = ns[nk] * to[nk];
    ni = nj++;
    oi = oj++;
  }
  return ns;
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> shape) const {
  if (shapeNumel(shape) != numel_)
    raise("cannot reshape a tensor of shape {} to {}", shapeStr(shape_),
          shapeStr(shape));
  if (contiguous_ || numel_ == 0)
    return view(shape, denseStrides(shape), offset_);
  if (auto st = reshapeStrides(shape_, strides_, shape))
    return view(shape, *st, offset_);
  return contiguous().reshaped(shape);
}

double Tensor::at(int64_t i) const {
  if (!defined() || i < 0 || i >= numel_)
    raise("tensor index {} out of range for shape {}", i, shapeStr(shape_));
  int64_t off = i;
  if (!contiguous_) {
    off = 0;
    for (size_t d = shape_.size(); d-- > 0;) {
      off += (i % shape_[d]) * strides_[d];
      i /= shape_[d];
    }
  }
  const void *p = viewData();
  return visitDType(dtype_, [&](auto tag) {
    constexpr DType D = decltype(tag)::value;
    return toDouble<D>(static_cast<const StorageT<D> *>(p)[off]);
  });
}

bool Tensor::bitwiseEqual(const Tensor &o) const {
  if (defined() != o.defined())
    return false;
  if (!defined())
    return true;
  if (dtype_ != o.dtype_ || shape_ != o.shape_)
    return false;
  if (!contiguous_ || !o.contiguous_)
    return contiguous().bitwiseEqual(o.contiguous());
  return rawData() == o.rawData() ||
         std::memcmp(rawData(), o.rawData(), nbytes()) == 0;
}

std::string Tensor::str() const {
  if (!defined())
    return "Tensor(undefined)";
  return "Tensor(shape=" + shapeStr(shape_) + ", dtype=" +
         dtypeName(dtype_).str() + ")";
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else { // subnormal
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ff;
      bits = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return uint16_t(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0));
  if (absx >= 0x477ff000u) // overflow to inf (>= 65520)
    return uint16_t(sign | 0x7c00);
  if (absx < 0x38800000u) { // subnormal or zero
    if (absx < 0x33000000u)
      return uint16_t(sign);
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    uint32_t shift = 126 - e; // 14..24
    // round to nearest even
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1)))
      ++q;
    return uint16_t(sign | q);
  }
  uint32_t e = (absx >> 23) - 127 + 15;
  uint32_t m = absx & 0x7fffff;
  uint32_t q = (e << 10) | (m >> 13);
  uint32_t rem = m & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
    ++q;
  return uint16_t(sign | q);
}

} // namespace tmg
