//===- Var.h - Tensors and values of a forward method -----------*- C++ -*-===//
//
// A `Var` is what a C++ `forward` computes with: outside tracing it holds a
// Tensor and every op runs eagerly on the runtime's kernels; while tracing
// (or inside an insertion scope) it stands for a Node of the graph being
// built and every op records an expr. `tmg::Tensor` stays the plain value
// type of parameters and kernels; a Var converts from it implicitly.
//
// A `Value` is one argument or result of a forward: a Var, a plain value
// (None, bool, int, float, string), or a tuple, list or dict of values: the
// reference's pytree leaves and containers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tm/ir/Node.h"
#include "tm/ir/Tensor.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class Value;
struct ShapeArg;

/// One item of an index: an int, a slice, `...` or a new axis (None).
struct Index {
  enum class Kind : uint8_t { Int, Slice, Ellipsis, NewAxis };
  Kind kind = Kind::Int;
  int64_t i = 0;
  std::optional<int64_t> start, stop, step;
  Index(int v) : i(v) {}
  Index(int64_t v) : i(v) {}
  static Index slice(std::optional<int64_t> start, std::optional<int64_t> stop,
                     std::optional<int64_t> step = std::nullopt) {
    Index x(0);
    x.kind = Kind::Slice;
    x.start = start;
    x.stop = stop;
    x.step = step;
    return x;
  }
  static Index ellipsis() {
    Index x(0);
    x.kind = Kind::Ellipsis;
    return x;
  }
  static Index newAxis() {
    Index x(0);
    x.kind = Kind::NewAxis;
    return x;
  }
};
/// `x[a:b:c]` is `x[slice(a, b, c)]`; `x[:]` is `x[all]`.
inline Index slice(std::optional<int64_t> start, std::optional<int64_t> stop,
                   std::optional<int64_t> step = std::nullopt) {
  return Index::slice(start, stop, step);
}
inline const Index all = Index::slice(std::nullopt, std::nullopt);

class Var {
public:
  /// An undefined Var (an absent optional tensor).
  Var() = default;
  /// An eager value; while tracing, a tensor that no graph produced
  /// (it becomes a `Constant` expr where it is first used).
  Var(Tensor t) : value_(std::move(t)) {}
  /// A node of the graph being traced or edited.
  explicit Var(Node *n) : node_(n) {}
  /// A tracing input known by shape and dtype only (no kernel runs).
  static Var meta(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32);

  bool defined() const { return node_ || value_.defined() || meta_; }
  /// The node (nullptr outside tracing).
  Node *node() const { return node_; }
  /// The value: eager tensors and, while tracing with values, computed
  /// ones. Throws tmg::Error when there is none (a shape-only trace).
  const Tensor &value() const;
  bool hasValue() const;
  bool isMeta() const { return meta_; }

  /// Static shape and dtype (from the value or the traced node's type).
  /// Throws tmg::Error when the shape is unknown.
  Shape shape() const;
  std::optional<Shape> shapeIfKnown() const;
  DType dtype() const;
  size_t rank() const { return shape().size(); }
  int64_t dim(int64_t i) const;
  /// The shape as a traced value: `GetVarShape(x)`, an int32 tensor, which
  /// is what the reference records for `x.shape` with symbolic shapes.
  /// Ops given it (or tracedDim) compute their sizes when the module runs,
  /// so the traced module stays generic in those dims.
  Var tracedShape() const;
  /// Dim `i` as a traced 0-d value: `tracedShape()[i]` (a __getitem__).
  Var tracedDim(int64_t i) const;
  /// The element count as a traced 0-d value: the product of tracedShape().
  Var tracedNumel() const;

  /// The node's name (tracing: `x.name = "result"` of the reference).
  std::string name() const;
  void setName(llvm::StringRef name) const;

  // -- Tensor methods: recorded as CallMethod --------------------------------
  /// Ints, or ints and traced dims: `x.reshape({x.tracedDim(0), -1})`.
  Var reshape(const ShapeArg &shape) const;
  Var flatten() const;
  Var transpose(std::vector<int64_t> pattern) const;
  Var astype(DType t) const;
  Var sum(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Var mean(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Var max(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Var min(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Var prod(std::optional<int64_t> axis = std::nullopt, bool keepdims = false) const;
  Var detach() const;
  Var operator[](Index i) const;
  Var operator[](std::initializer_list<Index> items) const;
  Var index(std::vector<Index> items) const;

private:
  friend class Value;
  Tensor value_;
  Node *node_ = nullptr;
  bool meta_ = false;
  Shape metaShape_;
  DType metaDType_ = DType::Float32;
};

// Arithmetic: `a + b` is `a.__add__(b)`, `1 + a` is `a.__radd__(1)`, as the
// reference records them.
Var operator+(const Var &a, const Var &b);
Var operator-(const Var &a, const Var &b);
Var operator*(const Var &a, const Var &b);
Var operator/(const Var &a, const Var &b);
Var operator+(const Var &a, double b);
Var operator-(const Var &a, double b);
Var operator*(const Var &a, double b);
Var operator/(const Var &a, double b);
Var operator+(double a, const Var &b);
Var operator-(double a, const Var &b);
Var operator*(double a, const Var &b);
Var operator/(double a, const Var &b);
Var operator-(const Var &a);
/// In-place forms record `__iadd__` etc. and rebind `a` to the result.
Var &operator+=(Var &a, const Var &b);
Var &operator+=(Var &a, double b);
Var &operator-=(Var &a, const Var &b);
Var &operator*=(Var &a, const Var &b);
// Integer literals: `x + 1` prints `x.__add__(1, )`, not `1.0`.
Var operator+(const Var &a, int b);
Var operator-(const Var &a, int b);
Var operator*(const Var &a, int b);
Var operator/(const Var &a, int b);
Var operator+(int a, const Var &b);
Var operator*(int a, const Var &b);
Var &operator+=(Var &a, int b);
Var operator+(const Var &a, int64_t b);
Var operator-(const Var &a, int64_t b);
Var operator*(const Var &a, int64_t b);
Var operator/(const Var &a, int64_t b);

/// A forward argument or result.
class Value {
public:
  enum class Kind : uint8_t { Var, Scalar, Tuple, List, Dict, Slice };
  /// None.
  Value() : kind_(Kind::Scalar) {}
  Value(Var v) : kind_(Kind::Var), var_(std::move(v)) {}
  Value(Tensor t) : Value(Var(std::move(t))) {}
  Value(Scalar s) : kind_(Kind::Scalar), scalar_(std::move(s)) {}
  Value(int v) : Value(Scalar(v)) {}
  Value(int64_t v) : Value(Scalar(v)) {}
  Value(double v) : Value(Scalar(v)) {}
  Value(bool v) : Value(Scalar(v)) {}
  Value(const char *v) : Value(Scalar(v)) {}
  Value(std::string v) : Value(Scalar(std::move(v))) {}
  static Value none() { return Value(); }
  static Value tuple(std::vector<Value> items);
  static Value list(std::vector<Value> items);
  static Value dict(std::vector<std::pair<std::string, Value>> items);
  /// `slice(start, stop, step)` (an index item).
  static Value slice(Value start, Value stop, Value step);
  /// A tuple of ints (a shape).
  static Value ints(llvm::ArrayRef<int64_t> v);

  Kind kind() const { return kind_; }
  bool isVar() const { return kind_ == Kind::Var; }
  bool isScalar() const { return kind_ == Kind::Scalar; }
  bool isNone() const { return isScalar() && scalar_.isNone(); }
  bool isContainer() const { return kind_ >= Kind::Tuple; }
  const Var &var() const;
  const Scalar &scalar() const;
  /// Items of a tuple, list or dict (values in key order for a dict).
  const std::vector<Value> &items() const { return items_; }
  const std::vector<std::string> &keys() const { return keys_; }
  size_t size() const { return items_.size(); }
  const Value &operator[](size_t i) const;
  const Value &at(llvm::StringRef key) const;

  /// A single Var (throws tmg::Error naming what it is otherwise).
  operator Var() const { return var(); }
  /// Python-style description for messages: "Tensor", "(Tensor, 1)", "'s'".
  std::string str() const;

private:
  Kind kind_;
  Var var_;
  Scalar scalar_;
  std::vector<Value> items_;
  std::vector<std::string> keys_;
};

/// A keyword argument of a module or function call: `block(x, kw("y", t))`.
struct Kw {
  std::string name;
  Value value;
};
inline Kw kw(std::string name, Value v) { return Kw{std::move(name), std::move(v)}; }

/// Positional and keyword arguments of a call.
/// A shape argument: ints, or ints and traced dims (Var::tracedDim),
/// whose sizes the traced module computes when it runs.
struct ShapeArg {
  ShapeArg(std::initializer_list<Value> items) : items(items) {}
  ShapeArg(std::vector<Value> v) : items(std::move(v)) {}
  ShapeArg(const std::vector<int64_t> &v) : items(v.begin(), v.end()) {}
  ShapeArg(llvm::ArrayRef<int64_t> v) : items(v.begin(), v.end()) {}
  /// The tuple recorded as the argument.
  Value value() const { return Value::tuple(items); }
  std::vector<Value> items;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<Kw> kwargs;
  void add(Kw k) { kwargs.push_back(std::move(k)); }
  template <typename T> void add(T &&v) { args.emplace_back(std::forward<T>(v)); }
};

} // namespace tmg
