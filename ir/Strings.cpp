//===- Strings.cpp - The interned string table of the string dtype --------===//
#include "tm/ir/Strings.h"

#include <deque>
#include <mutex>
#include <shared_mutex>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringMap.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/OpSchema.h"

namespace tmg {

namespace {
/// Append-only: texts live in a deque (stable addresses), the map keys
/// are the deque's strings. Readers of known ids take the shared lock.
struct StringTable {
  std::shared_mutex mu;
  std::deque<std::string> texts;
  llvm::StringMap<int64_t> ids;
  StringTable() {
    texts.emplace_back();
    ids[""] = 0;
  }
};

StringTable &table() {
  static StringTable *t = new StringTable(); // never destroyed: ids outlive statics
  return *t;
}
} // namespace

int64_t intern(llvm::StringRef s) {
  StringTable &t = table();
  {
    std::shared_lock lock(t.mu);
    auto it = t.ids.find(s);
    if (it != t.ids.end())
      return it->second;
  }
  std::unique_lock lock(t.mu);
  auto [it, inserted] = t.ids.try_emplace(s, int64_t(t.texts.size()));
  if (inserted)
    t.texts.emplace_back(s.str());
  return it->second;
}

llvm::StringRef text(int64_t id) {
  StringTable &t = table();
  std::shared_lock lock(t.mu);
  if (id < 0 || id >= int64_t(t.texts.size()))
    raise("invalid string id {} (the string table holds {} strings)", id, t.texts.size());
  return t.texts[size_t(id)];
}

int64_t internedCount() {
  StringTable &t = table();
  std::shared_lock lock(t.mu);
  return int64_t(t.texts.size());
}

Tensor stringTensor(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<std::string> values) {
  Tensor t = Tensor::empty(shape, DType::String);
  if (size_t(t.numel()) != values.size())
    raise("stringTensor: shape {} has {} elements but {} strings were given", shapeStr(shape),
          t.numel(), values.size());
  int64_t *p = t.data<int64_t>();
  for (size_t i = 0; i < values.size(); ++i)
    p[i] = intern(values[i]);
  return t;
}

llvm::StringRef stringAt(const Tensor &t, int64_t i) {
  if (!isString(t.dtype()))
    raise("stringAt: tensor has dtype {}, not string", dtypeName(t.dtype()));
  if (i < 0 || i >= t.numel())
    raise("string tensor index {} out of range for shape {}", i, shapeStr(t.shape()));
  int64_t off = i;
  if (!t.isContiguous()) {
    off = 0;
    for (size_t d = t.rank(); d-- > 0;) {
      off += (i % t.dim(d)) * t.strides()[d];
      i /= t.dim(d);
    }
  }
  return text(static_cast<const int64_t *>(t.viewData())[off]);
}

std::string quoteString(llvm::StringRef s) {
  static const char hex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
    case '\\': out += "\\\\"; break;
    case '"': out += "\\\""; break;
    case '\n': out += "\\n"; break;
    case '\t': out += "\\t"; break;
    case '\r': out += "\\r"; break;
    default:
      if (u < 0x20 || u == 0x7f) {
        out += "\\x";
        out += hex[u >> 4];
        out += hex[u & 15];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

bool opAcceptsStrings(OpKind k) {
  switch (k) {
  // Equality compares ids.
  case OpKind::Equal:
  case OpKind::NotEqual:
  case OpKind::MEq:
  case OpKind::MNe:
  // Data movement copies 8-byte elements.
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Transpose:
  case OpKind::BroadcastTo:
  case OpKind::Concat:
  case OpKind::Stack:
  case OpKind::Split:
  case OpKind::Squeeze:
  case OpKind::ExpandDims:
  case OpKind::Gather:
  case OpKind::GatherNd:
  case OpKind::Take:
  case OpKind::Compress:
  case OpKind::ReverseSequence:
  case OpKind::Where:
  case OpKind::Copy:
  case OpKind::CopyDef:
  case OpKind::MGetItem:
  case OpKind::MReshape:
  case OpKind::MFlatten:
  case OpKind::MTranspose:
  case OpKind::MDetach:
  case OpKind::MBroadcast:
  case OpKind::GetVarShape:
  // Text.
  case OpKind::MAstype:
  case OpKind::StringNormalizer:
    return true;
  default:
    return false;
  }
}

} // namespace tmg
