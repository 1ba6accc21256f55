//===- TreeDef.h - Python-style pytree structure ----------------*- C++ -*-===//
//
// The reference's pytree (`pytree.py`): the structure of a call's arguments or
// results. Leaves are either node slots (a TensorNode or ModuleNode is bound
// there) or constant leaves that carry a Scalar. A module keeps one graph per
// distinct TreeDef of `((self, *args), kwargs)`, so TreeDef has structural
// equality and hashing, constants included (as the reference: a module called
// with 1 and with 2 has two graphs).
//
// TreeDef is an immutable value with shared structure: copying is O(1).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>

namespace tmg {

struct NoneValue {
  bool operator==(const NoneValue &) const { return true; }
};
struct EllipsisValue {
  bool operator==(const EllipsisValue &) const { return true; }
};

/// A non-tensor leaf value: None, bool, int, float, str or Ellipsis.
class Scalar {
public:
  enum class Kind : uint8_t { None, Bool, Int, Float, String, Ellipsis };

  Scalar() : v_(NoneValue{}) {}
  Scalar(NoneValue) : v_(NoneValue{}) {}
  Scalar(EllipsisValue) : v_(EllipsisValue{}) {}
  Scalar(bool b) : v_(b) {}
  Scalar(int i) : v_(int64_t(i)) {}
  Scalar(int64_t i) : v_(i) {}
  Scalar(double d) : v_(d) {}
  Scalar(std::string s) : v_(std::move(s)) {}
  Scalar(const char *s) : v_(std::string(s)) {}
  static Scalar none() { return Scalar(); }
  static Scalar ellipsis() { return Scalar(EllipsisValue{}); }

  Kind kind() const { return Kind(v_.index()); }
  bool isNone() const { return kind() == Kind::None; }
  bool isBool() const { return kind() == Kind::Bool; }
  bool isInt() const { return kind() == Kind::Int; }
  bool isFloat() const { return kind() == Kind::Float; }
  bool isNumber() const { return isInt() || isFloat() || isBool(); }
  bool isString() const { return kind() == Kind::String; }

  bool getBool() const { return std::get<bool>(v_); }
  int64_t getInt() const { return std::get<int64_t>(v_); }
  double getFloat() const { return std::get<double>(v_); }
  /// Int, float or bool as double (throws tmg::Error for other kinds).
  double toDouble() const;
  const std::string &getString() const { return std::get<std::string>(v_); }

  /// Python `str()`: strings unquoted.
  std::string str() const;
  /// Python `repr()`: strings quoted ('abc').
  std::string repr() const;
  /// Append str() / repr() to `out` (printers: no temporary strings).
  void appendStr(std::string &out) const;
  void appendRepr(std::string &out) const;

  /// Python equality semantics are *not* used: 1 != 1.0 != True here, as the
  /// reference's LeafDef compares types too.
  bool operator==(const Scalar &o) const { return v_ == o.v_; }
  bool operator!=(const Scalar &o) const { return !(*this == o); }
  bool operator<(const Scalar &o) const;
  size_t hash() const;

private:
  std::variant<NoneValue, bool, int64_t, double, std::string, EllipsisValue> v_;
};

/// Python float repr: shortest round-trip digits, "1.0", "1e-05", "inf".
std::string pyFloatRepr(double d);
/// Python str repr with quotes and escapes.
std::string pyStringRepr(llvm::StringRef s);
/// Appends pyFloatRepr(d) / pyStringRepr(s) / the decimal digits of `v`
/// to `out`, without temporaries (the .tmir printer's hot path).
void appendPyFloatRepr(std::string &out, double d);
void appendPyStringRepr(std::string &out, llvm::StringRef s);
void appendInt(std::string &out, int64_t v);

class TreeDef {
public:
  enum class Kind : uint8_t {
    Leaf,        ///< a node slot
    Const,       ///< a constant leaf (Scalar)
    Tuple,
    List,
    Dict,        ///< keys kept sorted, as the reference flattens dicts
    OrderedDict, ///< insertion order
    Slice,       ///< slice(start, stop, step): three children
  };
  enum class LeafType : uint8_t { Tensor, Module };

  /// A single tensor leaf.
  TreeDef();
  static TreeDef leaf(LeafType t = LeafType::Tensor);
  static TreeDef constant(Scalar v);
  static TreeDef tuple(std::vector<TreeDef> children);
  static TreeDef list(std::vector<TreeDef> children);
  /// Sorted by key; duplicate keys throw tmg::Error.
  static TreeDef dict(std::vector<std::pair<Scalar, TreeDef>> items);
  static TreeDef orderedDict(std::vector<std::pair<Scalar, TreeDef>> items);
  static TreeDef slice(TreeDef start, TreeDef stop, TreeDef step);
  /// `n` tensor leaves in a tuple.
  static TreeDef tupleOfLeaves(size_t n);

  Kind kind() const;
  bool isLeaf() const { return kind() == Kind::Leaf; }
  bool isConst() const { return kind() == Kind::Const; }
  bool isContainer() const { return !isLeaf() && !isConst(); }
  LeafType leafType() const;
  const Scalar &value() const;
  size_t numChildren() const;
  const TreeDef &child(size_t i) const;
  /// Key of child `i` of a dict.
  const Scalar &key(size_t i) const;
  /// Index of the child with key `k`, or -1.
  int64_t findKey(const Scalar &k) const;
  /// Index of the child whose key is the string `k`, or -1 (no allocation).
  int64_t findStringKey(llvm::StringRef k) const;
  /// Number of node leaves (constants excluded).
  size_t numLeaves() const;
  /// Leaf types of the node leaves in flattening order.
  void collectLeafTypes(std::vector<LeafType> &out) const;

  bool operator==(const TreeDef &o) const;
  bool operator!=(const TreeDef &o) const { return !(*this == o); }
  size_t hash() const;

  /// Structure with leaf placeholders: `((Module, Tensor, 1), {})`.
  std::string str() const;

  /// Python repr of the structure where node leaf `i` prints as `leaf(i)`
  /// (leaves numbered in flattening order from `*next`). With `strTop`, a
  /// top-level string constant is printed as `str()` (unquoted), as Python's
  /// str(x) does; nested constants always use repr.
  void print(std::string &out,
             const std::function<std::string(size_t)> &leaf, size_t *next,
             bool strTop) const;
  /// As print(), but node leaf `i` is appended by `leaf(out, i)`; a leaf
  /// that appends nothing prints as its placeholder (Tensor / Module).
  void printTo(std::string &out,
               llvm::function_ref<void(std::string &, size_t)> leaf,
               size_t *next, bool strTop) const;

  /// Appends the tensor/module leaf `extra` at the end of the top tuple:
  /// `(a, b)` -> `(a, b, extra)`. Throws when this is not a tuple.
  TreeDef appended(TreeDef extra) const;

  /// Implementation detail (shared immutable structure; defined below so
  /// the accessors inline).
  struct Impl;
  static TreeDef fromImplInternal(std::shared_ptr<const Impl> impl) {
    return TreeDef(std::move(impl));
  }

private:
  explicit TreeDef(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

struct TreeDef::Impl {
  Kind kind = Kind::Leaf;
  LeafType leafType = LeafType::Tensor;
  Scalar value;
  std::vector<TreeDef> children;
  std::vector<Scalar> keys;
  size_t numLeaves = 0;
  size_t hash = 0;
};

// The accessors the matcher, shape inference and argument lookups call for
// every expr they look at: inline.
inline TreeDef::Kind TreeDef::kind() const { return impl_->kind; }
inline TreeDef::LeafType TreeDef::leafType() const { return impl_->leafType; }
inline size_t TreeDef::numChildren() const { return impl_->children.size(); }
inline const TreeDef &TreeDef::child(size_t i) const { return impl_->children.at(i); }
inline const Scalar &TreeDef::key(size_t i) const { return impl_->keys.at(i); }
inline size_t TreeDef::numLeaves() const { return impl_->numLeaves; }
inline size_t TreeDef::hash() const { return impl_->hash; }

/// The arg TreeDef of a call `((self, *args), kwargs)` or `(args, kwargs)`:
/// a tuple of a positional tuple and a dict.
TreeDef makeArgDef(std::vector<TreeDef> positional,
                   std::vector<std::pair<Scalar, TreeDef>> kwargs = {});

} // namespace tmg

template <> struct std::hash<tmg::TreeDef> {
  size_t operator()(const tmg::TreeDef &t) const { return t.hash(); }
};
