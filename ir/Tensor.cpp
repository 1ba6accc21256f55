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

#include "tm/ir/Diagnostic.h"

namespace tmg {

llvm::StringRef dtypeName(DType t) {
  switch (t) {
  case DType::Float32: return "float32";
  case DType::Float16: return "float16";
  case DType::Int8: return "int8";
  case DType::UInt8: return "uint8";
  case DType::Int32: return "int32";
  case DType::Int64: return "int64";
  case DType::Bool: return "bool";
  }
  return "?";
}

std::optional<DType> parseDType(llvm::StringRef name) {
  for (DType t : {DType::Float32, DType::Float16, DType::Int8, DType::UInt8,
                  DType::Int32, DType::Int64, DType::Bool})
    if (dtypeName(t) == name)
      return t;
  return std::nullopt;
}

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::Float32: case DType::Int32: return 4;
  case DType::Float16: return 2;
  case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
  case DType::Int64: return 8;
  }
  return 1;
}

bool isFloat(DType t) { return t == DType::Float32 || t == DType::Float16; }

int64_t shapeNumel(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      raise("invalid shape {}: negative dimension", shapeStr(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      raise("invalid shape {}: element count overflows", shapeStr(shape));
    n *= d;
  }
  return n;
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

Storage::Storage(size_t bytes) : size_(bytes) {
  rounded_ = (bytes + Alignment - 1) / Alignment * Alignment;
  if (rounded_ == 0)
    rounded_ = Alignment;
  arena_ = currentArena;
  if (arena_)
    data_ = arena_->take(rounded_);
  if (!data_)
    data_ = std::aligned_alloc(Alignment, rounded_);
  if (!data_)
    raise("out of memory allocating {} bytes", bytes);
}

Storage::~Storage() {
  if (arena_)
    arena_->give(data_, rounded_);
  else
    std::free(data_);
}

Tensor Tensor::empty(llvm::ArrayRef<int64_t> shape, DType dtype) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_.assign(shape.begin(), shape.end());
  t.numel_ = shapeNumel(shape);
  t.storage_ = std::make_shared<Storage>(size_t(t.numel_) * dtypeSize(dtype));
  return t;
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
  switch (dtype) {
  case DType::Float32: fillAs<float>(t, float(value)); break;
  case DType::Float16: fillAs<uint16_t>(t, floatToHalf(float(value))); break;
  case DType::Int8: fillAs<int8_t>(t, int8_t(value)); break;
  case DType::UInt8: fillAs<uint8_t>(t, uint8_t(value)); break;
  case DType::Int32: fillAs<int32_t>(t, int32_t(value)); break;
  case DType::Int64: fillAs<int64_t>(t, int64_t(value)); break;
  case DType::Bool: fillAs<uint8_t>(t, value != 0.0); break;
  }
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
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t v = values[i];
    switch (dtype) {
    case DType::Float32: t.data<float>()[i] = float(v); break;
    case DType::Float16: t.data<uint16_t>()[i] = floatToHalf(float(v)); break;
    case DType::Int8: t.data<int8_t>()[i] = int8_t(v); break;
    case DType::UInt8: t.data<uint8_t>()[i] = uint8_t(v); break;
    case DType::Int32: t.data<int32_t>()[i] = int32_t(v); break;
    case DType::Int64: t.data<int64_t>()[i] = v; break;
    case DType::Bool: t.data<uint8_t>()[i] = v != 0; break;
    }
  }
  return t;
}

Tensor Tensor::clone() const {
  if (!defined())
    return Tensor();
  Tensor t = empty(shape_, dtype_);
  std::memcpy(t.rawData(), rawData(), nbytes());
  return t;
}

Tensor Tensor::reshaped(llvm::ArrayRef<int64_t> shape) const {
  if (shapeNumel(shape) != numel_)
    raise("cannot reshape a tensor of shape {} to {}", shapeStr(shape_),
          shapeStr(shape));
  Tensor t = *this;
  t.shape_.assign(shape.begin(), shape.end());
  return t;
}

double Tensor::at(int64_t i) const {
  if (!defined() || i < 0 || i >= numel_)
    raise("tensor index {} out of range for shape {}", i, shapeStr(shape_));
  switch (dtype_) {
  case DType::Float32: return data<float>()[i];
  case DType::Float16: return halfToFloat(data<uint16_t>()[i]);
  case DType::Int8: return data<int8_t>()[i];
  case DType::UInt8: return data<uint8_t>()[i];
  case DType::Int32: return data<int32_t>()[i];
  case DType::Int64: return double(data<int64_t>()[i]);
  case DType::Bool: return data<uint8_t>()[i] ? 1.0 : 0.0;
  }
  return 0;
}

bool Tensor::bitwiseEqual(const Tensor &o) const {
  if (defined() != o.defined())
    return false;
  if (!defined())
    return true;
  if (dtype_ != o.dtype_ || shape_ != o.shape_)
    return false;
  return storage_ == o.storage_ ||
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
