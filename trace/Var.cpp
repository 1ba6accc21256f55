//===- Var.cpp - Vars, Values and tensor methods --------------------------===//
#include "tm/trace/Var.h"

#include <algorithm>

#include "State.h"
#include "tm/ir/Diagnostic.h"
#include "tm/trace/Functional.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// Var
//===----------------------------------------------------------------------===//

Var Var::meta(llvm::ArrayRef<int64_t> shape, DType dtype) {
  Var v;
  v.meta_ = true;
  v.metaShape_.assign(shape.begin(), shape.end());
  v.metaDType_ = dtype;
  return v;
}

bool Var::hasValue() const {
  if (!node_)
    return value_.defined();
  trace::State *st = trace::current();
  return st && st->values.count(node_);
}

const Tensor &Var::value() const {
  if (!node_) {
    if (!value_.defined()) {
      if (meta_)
        raise("this tensor is known by shape {} only: it has no value",
              shapeStr(metaShape_));
      raise("the tensor is undefined");
    }
    return value_;
  }
  if (trace::State *st = trace::current()) {
    auto it = st->values.find(node_);
    if (it != st->values.end())
      return it->second;
  }
  raise("'{}' has no value while tracing: trace with concrete inputs and "
        "TraceOptions::computeValues to read values inside forward",
        node_->str());
}

std::optional<Shape> Var::shapeIfKnown() const {
  if (node_) {
    if (auto *t = llvm::dyn_cast<TensorNode>(node_))
      return t->shape();
    return std::nullopt;
  }
  if (meta_)
    return metaShape_;
  if (value_.defined())
    return Shape(value_.shape().begin(), value_.shape().end());
  return std::nullopt;
}

Shape Var::shape() const {
  auto s = shapeIfKnown();
  if (!s)
    raise("the shape of '{}' is unknown", node_ ? node_->str() : std::string("tensor"));
  return *s;
}

DType Var::dtype() const {
  if (node_)
    if (auto *t = llvm::dyn_cast<TensorNode>(node_))
      return t->dtype();
  return meta_ ? metaDType_ : value_.dtype();
}

int64_t Var::dim(int64_t i) const {
  Shape s = shape();
  int64_t r = int64_t(s.size());
  if (i < -r || i >= r)
    raise("dimension {} out of range for shape {}", i, shapeStr(s));
  return s[i < 0 ? i + r : i];
}

std::string Var::name() const { return node_ ? node_->name().str() : std::string(); }

void Var::setName(llvm::StringRef name) const {
  if (!node_)
    raise("only traced tensors have names (setName('{}') outside tracing)", name.str());
  node_->setName(name);
}

static Var method(const char *m, CallArgs c) { return callOp(methodOp(m), std::move(c)); }
static Value optInt(std::optional<int64_t> v) { return v ? Value(*v) : Value(); }

Var Var::reshape(const ShapeArg &shape) const {
  return method("reshape", {{*this, shape.value()}, {}});
}

Var Var::tracedShape() const { return callOp(op(OpKind::GetVarShape), {{*this}, {}}); }
Var Var::tracedDim(int64_t i) const {
  int64_t r = int64_t(rank());
  if (i < -r || i >= r)
    raise("dimension {} out of range for rank {}", i, r);
  return tracedShape()[Index(i < 0 ? i + r : i)];
}
Var Var::tracedNumel() const {
  return callOp(op(OpKind::Prod), {{tracedShape()}, {}});
}
Var Var::flatten() const { return method("flatten", {{*this}, {}}); }
Var Var::transpose(std::vector<int64_t> pattern) const {
  return method("transpose", {{*this, Value::ints(pattern)}, {}});
}
Var Var::astype(DType t) const {
  return method("astype", {{*this, Value(dtypeName(t).str())}, {}});
}
Var Var::sum(std::optional<int64_t> axis, bool keepdims) const {
  return method("sum", {{*this, optInt(axis), keepdims}, {}});
}
Var Var::mean(std::optional<int64_t> axis, bool keepdims) const {
  return method("mean", {{*this, optInt(axis), keepdims}, {}});
}
Var Var::max(std::optional<int64_t> axis, bool keepdims) const {
  return method("max", {{*this, optInt(axis), keepdims}, {}});
}
Var Var::min(std::optional<int64_t> axis, bool keepdims) const {
  return method("min", {{*this, optInt(axis), keepdims}, {}});
}
Var Var::prod(std::optional<int64_t> axis, bool keepdims) const {
  return method("prod", {{*this, optInt(axis), keepdims}, {}});
}
Var Var::detach() const { return method("detach", {{*this}, {}}); }

static Value indexValue(const Index &i) {
  auto opt = [](const std::optional<int64_t> &v) { return v ? Value(*v) : Value(); };
  switch (i.kind) {
  case Index::Kind::Int: return Value(i.i);
  case Index::Kind::Slice: return Value::slice(opt(i.start), opt(i.stop), opt(i.step));
  case Index::Kind::Ellipsis: return Value(Scalar::ellipsis());
  case Index::Kind::NewAxis: return Value();
  }
  return Value();
}

Var Var::operator[](Index i) const {
  return method("__getitem__", {{*this, indexValue(i)}, {}});
}
Var Var::operator[](std::initializer_list<Index> items) const {
  return index(std::vector<Index>(items));
}
Var Var::index(std::vector<Index> items) const {
  std::vector<Value> v;
  for (const Index &i : items)
    v.push_back(indexValue(i));
  return method("__getitem__", {{*this, Value::tuple(std::move(v))}, {}});
}

#define TM_BINOP(OP, M, RM)                                                    \
  Var operator OP(const Var &a, const Var &b) { return method(M, {{a, b}, {}}); } \
  Var operator OP(const Var &a, double b) { return method(M, {{a, b}, {}}); }  \
  Var operator OP(double a, const Var &b) { return method(RM, {{b, a}, {}}); }
TM_BINOP(+, "__add__", "__radd__")
TM_BINOP(-, "__sub__", "__rsub__")
TM_BINOP(*, "__mul__", "__rmul__")
TM_BINOP(/, "__truediv__", "__rtruediv__")
#undef TM_BINOP
Var operator+(const Var &a, int b) { return method("__add__", {{a, b}, {}}); }
Var operator-(const Var &a, int b) { return method("__sub__", {{a, b}, {}}); }
Var operator*(const Var &a, int b) { return method("__mul__", {{a, b}, {}}); }
Var operator/(const Var &a, int b) { return method("__truediv__", {{a, b}, {}}); }
Var operator+(const Var &a, int64_t b) { return method("__add__", {{a, b}, {}}); }
Var operator-(const Var &a, int64_t b) { return method("__sub__", {{a, b}, {}}); }
Var operator*(const Var &a, int64_t b) { return method("__mul__", {{a, b}, {}}); }
Var operator/(const Var &a, int64_t b) { return method("__truediv__", {{a, b}, {}}); }
Var operator+(int a, const Var &b) { return method("__radd__", {{b, a}, {}}); }
Var operator*(int a, const Var &b) { return method("__rmul__", {{b, a}, {}}); }
Var operator-(const Var &a) { return method("__neg__", {{a}, {}}); }
Var &operator+=(Var &a, const Var &b) { return a = method("__iadd__", {{a, b}, {}}); }
Var &operator+=(Var &a, double b) { return a = method("__iadd__", {{a, b}, {}}); }
Var &operator+=(Var &a, int b) { return a = method("__iadd__", {{a, b}, {}}); }
Var &operator-=(Var &a, const Var &b) { return a = method("__isub__", {{a, b}, {}}); }
Var &operator*=(Var &a, const Var &b) { return a = method("__imul__", {{a, b}, {}}); }

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Tuple;
  v.items_ = std::move(items);
  return v;
}
Value Value::list(std::vector<Value> items) {
  Value v = tuple(std::move(items));
  v.kind_ = Kind::List;
  return v;
}
Value Value::dict(std::vector<std::pair<std::string, Value>> items) {
  // Python's pytree flattens a dict in sorted key order; keep that order.
  std::stable_sort(items.begin(), items.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  Value v;
  v.kind_ = Kind::Dict;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i && items[i].first == items[i - 1].first)
      raise("dict: duplicate key '{}'", items[i].first);
    v.keys_.push_back(std::move(items[i].first));
    v.items_.push_back(std::move(items[i].second));
  }
  return v;
}
Value Value::slice(Value start, Value stop, Value step) {
  Value v;
  v.kind_ = Kind::Slice;
  v.items_ = {std::move(start), std::move(stop), std::move(step)};
  return v;
}
Value Value::ints(llvm::ArrayRef<int64_t> v) {
  std::vector<Value> items(v.begin(), v.end());
  return tuple(std::move(items));
}

const Var &Value::var() const {
  if (kind_ != Kind::Var)
    raise("expected a tensor, got {}", str());
  return var_;
}
const Scalar &Value::scalar() const {
  if (kind_ != Kind::Scalar)
    raise("expected a plain value, got {}", str());
  return scalar_;
}
const Value &Value::operator[](size_t i) const {
  if (!isContainer() || i >= items_.size())
    raise("index {} out of range for {}", i, str());
  return items_[i];
}
const Value &Value::at(llvm::StringRef key) const {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key)
      return items_[i];
  raise("no key '{}' in {}", key.str(), str());
}

std::string Value::str() const {
  switch (kind_) {
  case Kind::Var: return var_.node() ? var_.node()->name().str() : "Tensor";
  case Kind::Scalar: return scalar_.repr();
  case Kind::Slice:
    return "slice(" + items_[0].str() + ", " + items_[1].str() + ", " + items_[2].str() + ")";
  case Kind::Dict: {
    std::string s = "{";
    for (size_t i = 0; i < items_.size(); ++i)
      s += (i ? ", '" : "'") + keys_[i] + "': " + items_[i].str();
    return s + "}";
  }
  case Kind::Tuple:
  case Kind::List: {
    std::string s = kind_ == Kind::Tuple ? "(" : "[";
    for (size_t i = 0; i < items_.size(); ++i)
      s += (i ? ", " : "") + items_[i].str();
    if (kind_ == Kind::Tuple && items_.size() == 1)
      s += ",";
    return s + (kind_ == Kind::Tuple ? ")" : "]");
  }
  }
  return "?";
}

} // namespace tmg
