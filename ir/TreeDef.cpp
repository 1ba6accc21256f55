//===- TreeDef.cpp - Python-style pytree structure ------------------------===//
#include "tm/ir/TreeDef.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <llvm/ADT/Hashing.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// Scalar
//===----------------------------------------------------------------------===//

std::string pyFloatRepr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d > 0 ? "inf" : "-inf";
  if (d == 0)
    return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then Python's layout:
  // fixed notation when -4 <= exponent < 16, else d.ddde+XX.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  bool neg = sci[0] == '-';
  if (neg)
    sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.')
      digits += c;
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp >= 0) {
      if (digits.size() <= size_t(exp) + 1) {
        out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
      } else {
        out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
      }
    } else {
      out += "0." + std::string(-exp - 1, '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1)
    out += "." + digits.substr(1);
  out += exp < 0 ? "e-" : "e+";
  int a = std::abs(exp);
  if (a < 10)
    out += "0";
  out += std::to_string(a);
  return out;
}

std::string pyStringRepr(llvm::StringRef s) {
  std::string out;
  appendPyStringRepr(out, s);
  return out;
}

void appendPyFloatRepr(std::string &out, double d) { out += pyFloatRepr(d); }

void appendInt(std::string &out, int64_t v) {
  // Digits written backwards two at a time (ids are printed several times
  // per expr line).
  static const char pairs[] = "00010203040506070809101112131415161718192021222324"
                              "25262728293031323334353637383940414243444546474849"
                              "50515253545556575859606162636465666768697071727374"
                              "75767778798081828384858687888990919293949596979899";
  char buf[24];
  char *end = buf + sizeof buf, *p = end;
  uint64_t u = v < 0 ? 0 - uint64_t(v) : uint64_t(v);
  while (u >= 100) {
    unsigned r = unsigned(u % 100);
    u /= 100;
    p -= 2;
    std::memcpy(p, pairs + 2 * r, 2);
  }
  if (u >= 10) {
    p -= 2;
    std::memcpy(p, pairs + 2 * u, 2);
  } else {
    *--p = char('0' + u);
  }
  if (v < 0)
    *--p = '-';
  out.append(p, size_t(end - p));
}

void appendPyStringRepr(std::string &out, llvm::StringRef s) {
  // Fast path: nothing to escape and no quote inside (names, qualnames).
  static const auto special = [] {
    std::array<bool, 256> t{};
    for (int c = 0; c < 0x20; ++c)
      t[c] = true;
    t[0x7f] = t['\\'] = t['\''] = t['"'] = true;
    return t;
  }();
  bool plain = true;
  for (unsigned char c : s)
    if (special[c]) {
      plain = false;
      break;
    }
  if (plain) {
    out += '\'';
    out.append(s.data(), s.size());
    out += '\'';
    return;
  }
  char q = '\'';
  if (s.contains('\'') && !s.contains('"'))
    q = '"';
  out += q;
  for (unsigned char c : s) {
    switch (c) {
    case '\\': out += "\\\\"; break;
    case '\n': out += "\\n"; break;
    case '\r': out += "\\r"; break;
    case '\t': out += "\\t"; break;
    default:
      if (c == (unsigned char)q) {
        out += '\\';
        out += char(c);
      } else if (c < 0x20 || c == 0x7f) {
        static const char hex[] = "0123456789abcdef";
        out += "\\x";
        out += hex[c >> 4];
        out += hex[c & 15];
      } else {
        out += char(c);
      }
    }
  }
  out += q;
}

double Scalar::toDouble() const {
  switch (kind()) {
  case Kind::Int: return double(getInt());
  case Kind::Float: return getFloat();
  case Kind::Bool: return getBool() ? 1.0 : 0.0;
  default: raise("expected a number, got {}", repr());
  }
}

std::string Scalar::str() const {
  if (isString())
    return getString();
  return repr();
}

std::string Scalar::repr() const {
  switch (kind()) {
  case Kind::None: return "None";
  case Kind::Bool: return getBool() ? "True" : "False";
  case Kind::Int: return std::to_string(getInt());
  case Kind::Float: return pyFloatRepr(getFloat());
  case Kind::String: return pyStringRepr(getString());
  case Kind::Ellipsis: return "Ellipsis";
  }
  return "?";
}

void Scalar::appendStr(std::string &out) const {
  if (isString())
    out += getString();
  else
    appendRepr(out);
}

void Scalar::appendRepr(std::string &out) const {
  switch (kind()) {
  case Kind::None: out += "None"; return;
  case Kind::Bool: out += getBool() ? "True" : "False"; return;
  case Kind::Int: appendInt(out, getInt()); return;
  case Kind::Float: appendPyFloatRepr(out, getFloat()); return;
  case Kind::String: appendPyStringRepr(out, getString()); return;
  case Kind::Ellipsis: out += "Ellipsis"; return;
  }
  out += '?';
}

bool Scalar::operator<(const Scalar &o) const {
  if (kind() != o.kind())
    return kind() < o.kind();
  switch (kind()) {
  case Kind::Bool: return getBool() < o.getBool();
  case Kind::Int: return getInt() < o.getInt();
  case Kind::Float: return getFloat() < o.getFloat();
  case Kind::String: return getString() < o.getString();
  default: return false;
  }
}

/// Combines hashes in order (asymmetric). TreeDefs are hashed on every
/// creation, so this is a multiply-xorshift step rather than
/// llvm::hash_combine (~100 instructions per call).
static inline size_t mixHash(uint64_t a, uint64_t b) {
  uint64_t x = (a * 0x9E3779B97F4A7C15ull) ^ b;
  x *= 0xBF58476D1CE4E5B9ull;
  return size_t(x ^ (x >> 31));
}

size_t Scalar::hash() const {
  switch (kind()) {
  case Kind::Bool: return mixHash(1, getBool());
  case Kind::Int: return mixHash(2, uint64_t(getInt()));
  case Kind::Float: {
    double d = getFloat();
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    return mixHash(3, bits);
  }
  case Kind::String: return mixHash(4, llvm::hash_value(getString()));
  default: return size_t(kind()) * 0x9E3779B97F4A7C15ull;
  }
}

//===----------------------------------------------------------------------===//
// TreeDef
//===----------------------------------------------------------------------===//

static std::shared_ptr<const TreeDef::Impl> tensorLeafImpl() {
  static auto impl = [] {
    auto i = std::make_shared<TreeDef::Impl>();
    i->kind = TreeDef::Kind::Leaf;
    i->numLeaves = 1;
    i->hash = mixHash(0, 0);
    return i;
  }();
  return impl;
}

TreeDef::TreeDef() : impl_(tensorLeafImpl()) {}

/// Shares equal TreeDefs. Graphs hold two TreeDefs per expr and nearly all
/// of them are a handful of shapes (`((Tensor,), {})`, `((Tensor, 1), {})`),
/// so each new structure is looked up in a small direct-mapped per-thread
/// cache of recent ones (by structural hash) and shares its Impl when equal:
/// exprs then point to one Impl instead of owning three, which makes
/// creating, copying and destroying graphs cheaper and keeps the cache
/// bounded (it only ever holds the last structure of each slot). It
/// changes no result: TreeDefs compare by value.
/// Kept: bench/vs-mlir-opt.sh, see the BindCache in Builder.cpp (15%).
static TreeDef intern(TreeDef::Impl &&i) {
  constexpr size_t Slots = 1024;
  static thread_local std::shared_ptr<const TreeDef::Impl> cache[Slots];
  std::shared_ptr<const TreeDef::Impl> &slot = cache[i.hash % Slots];
  if (slot && slot->hash == i.hash && slot->kind == i.kind &&
      slot->leafType == i.leafType && slot->numLeaves == i.numLeaves &&
      slot->value == i.value && slot->keys == i.keys &&
      slot->children == i.children)
    return TreeDef::fromImplInternal(slot);
  slot = std::make_shared<const TreeDef::Impl>(std::move(i));
  return TreeDef::fromImplInternal(slot);
}

TreeDef TreeDef::leaf(LeafType t) {
  if (t == LeafType::Tensor)
    return TreeDef();
  Impl i;
  i.kind = Kind::Leaf;
  i.leafType = t;
  i.numLeaves = 1;
  i.hash = mixHash(0, 1);
  return intern(std::move(i));
}

TreeDef TreeDef::constant(Scalar v) {
  Impl i;
  i.kind = Kind::Const;
  i.hash = mixHash(1, v.hash());
  i.value = std::move(v);
  return intern(std::move(i));
}

static TreeDef::Impl makeContainer(TreeDef::Kind k, std::vector<TreeDef> children,
                                   std::vector<Scalar> keys) {
  TreeDef::Impl i;
  i.kind = k;
  size_t h = mixHash(10, uint64_t(k));
  for (size_t c = 0; c < children.size(); ++c) {
    i.numLeaves += children[c].numLeaves();
    h = mixHash(h, children[c].hash());
    if (!keys.empty())
      h = mixHash(h, keys[c].hash());
  }
  i.hash = h;
  i.children = std::move(children);
  i.keys = std::move(keys);
  return i;
}

TreeDef TreeDef::tuple(std::vector<TreeDef> children) {
  return intern(makeContainer(Kind::Tuple, std::move(children), {}));
}
TreeDef TreeDef::list(std::vector<TreeDef> children) {
  return intern(makeContainer(Kind::List, std::move(children), {}));
}

static TreeDef makeDict(TreeDef::Kind k,
                        std::vector<std::pair<Scalar, TreeDef>> items,
                        bool sort);

TreeDef TreeDef::dict(std::vector<std::pair<Scalar, TreeDef>> items) {
  return makeDict(Kind::Dict, std::move(items), true);
}
TreeDef TreeDef::orderedDict(std::vector<std::pair<Scalar, TreeDef>> items) {
  return makeDict(Kind::OrderedDict, std::move(items), false);
}

static TreeDef makeDict(TreeDef::Kind k,
                        std::vector<std::pair<Scalar, TreeDef>> items,
                        bool sort) {
  if (sort)
    std::stable_sort(items.begin(), items.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<TreeDef> children;
  std::vector<Scalar> keys;
  children.reserve(items.size());
  keys.reserve(items.size());
  // Sorted, equal keys are neighbours (a key equals another only if
  // neither orders before the other); unsorted, a key hash -> index table
  // keeps the check linear (an ONNX model's node name dict has one entry
  // per node).
  std::unordered_multimap<size_t, size_t> seen;
  if (!sort)
    seen.reserve(items.size());
  for (auto &[k2, v] : items) {
    if (sort) {
      if (!keys.empty() && keys.back() == k2)
        raise("duplicate dict key {}", k2.repr());
    } else {
      size_t h = k2.hash();
      auto [b, e] = seen.equal_range(h);
      for (auto it = b; it != e; ++it)
        if (keys[it->second] == k2)
          raise("duplicate dict key {}", k2.repr());
      seen.emplace(h, keys.size());
    }
    keys.push_back(k2);
    children.push_back(std::move(v));
  }
  return intern(makeContainer(k, std::move(children), std::move(keys)));
}

TreeDef TreeDef::slice(TreeDef start, TreeDef stop, TreeDef step) {
  return intern(makeContainer(
      Kind::Slice, {std::move(start), std::move(stop), std::move(step)}, {}));
}

TreeDef TreeDef::tupleOfLeaves(size_t n) {
  return tuple(std::vector<TreeDef>(n, TreeDef()));
}

const Scalar &TreeDef::value() const {
  if (!isConst())
    raise("TreeDef {} is not a constant", str());
  return impl_->value;
}
int64_t TreeDef::findKey(const Scalar &k) const {
  for (size_t i = 0; i < impl_->keys.size(); ++i)
    if (impl_->keys[i] == k)
      return int64_t(i);
  return -1;
}
int64_t TreeDef::findStringKey(llvm::StringRef k) const {
  for (size_t i = 0; i < impl_->keys.size(); ++i)
    if (impl_->keys[i].isString() && impl_->keys[i].getString() == k)
      return int64_t(i);
  return -1;
}

void TreeDef::collectLeafTypes(std::vector<LeafType> &out) const {
  if (isLeaf()) {
    out.push_back(leafType());
    return;
  }
  for (const auto &c : impl_->children)
    c.collectLeafTypes(out);
}

bool TreeDef::operator==(const TreeDef &o) const {
  if (impl_ == o.impl_)
    return true;
  const Impl &a = *impl_, &b = *o.impl_;
  if (a.hash != b.hash || a.kind != b.kind || a.numLeaves != b.numLeaves)
    return false;
  switch (a.kind) {
  case Kind::Leaf: return a.leafType == b.leafType;
  case Kind::Const: return a.value == b.value;
  default:
    return a.keys == b.keys && a.children == b.children;
  }
}

std::string TreeDef::str() const {
  std::string out;
  size_t next = 0;
  printTo(out, [](std::string &, size_t) {}, &next, false);
  return out;
}

void TreeDef::print(std::string &out,
                    const std::function<std::string(size_t)> &leaf,
                    size_t *next, bool strTop) const {
  printTo(
      out, [&](std::string &o, size_t i) { o += leaf(i); }, next, strTop);
}

void TreeDef::printTo(std::string &out,
                      llvm::function_ref<void(std::string &, size_t)> leaf,
                      size_t *next, bool strTop) const {
  const Impl &i = *impl_;
  switch (i.kind) {
  case Kind::Leaf: {
    size_t before = out.size();
    leaf(out, *next);
    ++*next;
    if (out.size() == before)
      out += i.leafType == LeafType::Tensor ? "Tensor" : "Module";
    return;
  }
  case Kind::Const:
    if (strTop)
      i.value.appendStr(out);
    else
      i.value.appendRepr(out);
    return;
  case Kind::Tuple:
  case Kind::List: {
    bool tup = i.kind == Kind::Tuple;
    out += tup ? '(' : '[';
    for (size_t c = 0; c < i.children.size(); ++c) {
      if (c)
        out += ", ";
      i.children[c].printTo(out, leaf, next, false);
    }
    if (tup && i.children.size() == 1)
      out += ',';
    out += tup ? ')' : ']';
    return;
  }
  case Kind::Dict:
  case Kind::OrderedDict: {
    out += '{';
    for (size_t c = 0; c < i.children.size(); ++c) {
      if (c)
        out += ", ";
      i.keys[c].appendRepr(out);
      out += ": ";
      i.children[c].printTo(out, leaf, next, false);
    }
    out += '}';
    return;
  }
  case Kind::Slice: {
    out += "slice(";
    for (size_t c = 0; c < 3; ++c) {
      if (c)
        out += ", ";
      i.children[c].printTo(out, leaf, next, false);
    }
    out += ')';
    return;
  }
  }
}

TreeDef TreeDef::appended(TreeDef extra) const {
  if (kind() != Kind::Tuple)
    raise("cannot append to TreeDef {}: not a tuple", str());
  std::vector<TreeDef> c = impl_->children;
  c.push_back(std::move(extra));
  return tuple(std::move(c));
}

TreeDef makeArgDef(std::vector<TreeDef> positional,
                   std::vector<std::pair<Scalar, TreeDef>> kwargs) {
  return TreeDef::tuple(
      {TreeDef::tuple(std::move(positional)), TreeDef::dict(std::move(kwargs))});
}


} // namespace tmg
