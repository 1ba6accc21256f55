//===- Layer.h - Modules written in C++ -------------------------*- C++ -*-===//
//
// Users write models as subclasses of `tmg::LayerOf<Derived>` (a tmg::Module
// with a `forward`): parameters, buffers and submodules are registered by
// name in declaration order, and `forward` takes and returns Vars, plain
// values, and tuples, vectors and maps of them.
//
//   struct MyModule : tmg::LayerOf<MyModule> {
//     MyModule() : LayerOf("MyModule", {"x"}) {
//       registerBuffer("param", tmg::Tensor::randn({3, 4}));
//       addModule<tmg::Linear>("linear", 4, 5);
//     }
//     tmg::Var forward(tmg::Var x) {
//       return tmg::F::relu(mod("linear")(x + attr("param")));
//     }
//   };
//
// `mod(name)` and `attr(name)` are the reference's `self.name`: while
// tracing they record a GetAttr at the point of access (C++ evaluates the
// callee before the arguments, so `mod("linear")(x + attr("param"))` records
// linear, param, add, call, as Python does).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Module.h"
#include "tm/trace/Var.h"

namespace tmg {

class Layer;

/// A module as seen from a forward: a submodule reached by attribute (while
/// tracing, with its ModuleNode) that can be called and whose attributes
/// can be reached.
class ModuleRef {
public:
  ModuleRef(Module &m, Node *node = nullptr) : mod_(&m), node_(node) {}
  /// A module node of a graph being edited (inside an insertion scope).
  explicit ModuleRef(Node *moduleNode);

  Module &module() const { return *mod_; }
  Node *node() const { return node_; }

  /// `self.name` for a submodule / a tensor attribute.
  ModuleRef mod(llvm::StringRef name) const;
  ModuleRef mod(size_t index) const { return mod(std::to_string(index)); }
  Var attr(llvm::StringRef name) const;
  /// Names of the submodules, in order (iterating a ModuleList/Dict).
  std::vector<std::string> moduleNames() const;

  /// Calls the module: eagerly, or recorded (builtin: one CallMethod;
  /// otherwise its forward traced into a graph of its own).
  template <typename... A> Value operator()(A &&...a) const {
    CallArgs c;
    (c.add(std::forward<A>(a)), ...);
    return call(std::move(c));
  }
  Value call(CallArgs args) const;

private:
  Module *mod_;
  Node *node_;
};

/// A list of submodules, items named "0", "1", ... (the reference's list
/// attribute of modules, `_ModuleList`). It has no forward: reach its items
/// with `mod("blocks").mod(i)` and call them.
class ModuleList : public Module {
public:
  ModuleList() : Module("ModuleList") {}
  template <typename T, typename... A> T &append(A &&...a) {
    return addModule<T>(std::to_string(size()), std::forward<A>(a)...);
  }
  Module &append(std::unique_ptr<Module> m) {
    return registerModule(std::to_string(size()), std::move(m));
  }
  size_t size() const { return attrs().size(); }
};

/// A dict of submodules by key (`_ModuleDict`).
class ModuleDict : public Module {
public:
  ModuleDict() : Module("ModuleDict") {}
};

/// Base of modules with a C++ forward. Prefer LayerOf<Derived>, which
/// binds forward's typed parameters.
class Layer : public Module {
public:
  /// `forwardParams`: the names of forward's parameters (inputs of the
  /// traced graph are named after them, as the reference's getcallargs).
  Layer(std::string typeName, std::vector<std::string> forwardParams);
  const std::vector<std::string> &forwardParams() const { return params_; }

  /// forward on dynamic values.
  virtual Value forwardValues(const CallArgs &args) = 0;

  /// Calls this module (eager or recorded, as ModuleRef::operator()).
  template <typename... A> Value operator()(A &&...a) {
    CallArgs c;
    (c.add(std::forward<A>(a)), ...);
    return ModuleRef(*this).call(std::move(c));
  }

  /// `self.name` inside forward: a submodule, a tensor attribute, a plain
  /// value attribute.
  ModuleRef mod(llvm::StringRef name);
  ModuleRef mod(Module &sub);
  Var attr(llvm::StringRef name);
  const Scalar &scalarAttr(llvm::StringRef name) const { return scalar(name); }

  /// Binds positional and keyword arguments to forward's parameters
  /// (throws tmg::Error for missing, duplicate or unknown ones).
  std::vector<std::optional<Value>> bind(const CallArgs &args) const;

private:
  std::vector<std::string> params_;
};

namespace detail {

template <typename T> struct IsVector : std::false_type {};
template <typename T> struct IsVector<std::vector<T>> : std::true_type {};
template <typename T> struct IsTuple : std::false_type {};
template <typename... T> struct IsTuple<std::tuple<T...>> : std::true_type {};
template <typename A, typename B> struct IsTuple<std::pair<A, B>> : std::true_type {};
template <typename T> struct IsMap : std::false_type {};
template <typename V> struct IsMap<std::map<std::string, V>> : std::true_type {};
template <typename T> struct IsOptional : std::false_type {};
template <typename T> struct IsOptional<std::optional<T>> : std::true_type {};
template <typename> inline constexpr bool AlwaysFalse = false;

[[noreturn]] void badValue(const Value &v, const char *want, llvm::StringRef where);

/// Converts a Value to a forward parameter type.
template <typename T> T fromValue(const Value &v, llvm::StringRef where) {
  if constexpr (std::is_same_v<T, Value>) {
    return v;
  } else if constexpr (std::is_same_v<T, Var>) {
    if (!v.isVar())
      badValue(v, "a tensor", where);
    return v.var();
  } else if constexpr (std::is_same_v<T, Tensor>) {
    if (!v.isVar())
      badValue(v, "a tensor", where);
    return v.var().value();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!v.isScalar() || !v.scalar().isBool())
      badValue(v, "a bool", where);
    return v.scalar().getBool();
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.isScalar() || !v.scalar().isInt())
      badValue(v, "an int", where);
    return T(v.scalar().getInt());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.isScalar() || !(v.scalar().isFloat() || v.scalar().isInt()))
      badValue(v, "a float", where);
    return T(v.scalar().toDouble());
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.isScalar() || !v.scalar().isString())
      badValue(v, "a string", where);
    return v.scalar().getString();
  } else if constexpr (IsOptional<T>::value) {
    if (v.isNone())
      return std::nullopt;
    return fromValue<typename T::value_type>(v, where);
  } else if constexpr (IsVector<T>::value) {
    if (v.kind() != Value::Kind::Tuple && v.kind() != Value::Kind::List)
      badValue(v, "a tuple or list", where);
    T out;
    for (const Value &x : v.items())
      out.push_back(fromValue<typename T::value_type>(x, where));
    return out;
  } else if constexpr (IsTuple<T>::value) {
    constexpr size_t N = std::tuple_size_v<T>;
    if ((v.kind() != Value::Kind::Tuple && v.kind() != Value::Kind::List) ||
        v.size() != N)
      badValue(v, "a tuple of the right size", where);
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return T(fromValue<std::tuple_element_t<I, T>>(v[I], where)...);
    }(std::make_index_sequence<N>{});
  } else if constexpr (IsMap<T>::value) {
    if (v.kind() != Value::Kind::Dict)
      badValue(v, "a dict", where);
    T out;
    for (size_t i = 0; i < v.size(); ++i)
      out.emplace(v.keys()[i], fromValue<typename T::mapped_type>(v[i], where));
    return out;
  } else {
    static_assert(AlwaysFalse<T>, "unsupported forward parameter type");
  }
}

/// Converts a forward result to a Value.
template <typename T> Value toValue(T &&x) {
  using D = std::decay_t<T>;
  if constexpr (std::is_constructible_v<Value, D> && !IsVector<D>::value) {
    return Value(std::forward<T>(x));
  } else if constexpr (IsOptional<D>::value) {
    return x ? toValue(*x) : Value();
  } else if constexpr (IsVector<D>::value) {
    std::vector<Value> items;
    for (auto &e : x)
      items.push_back(toValue(e));
    return Value::list(std::move(items));
  } else if constexpr (IsTuple<D>::value) {
    return std::apply(
        [](auto &...e) { return Value::tuple({toValue(e)...}); }, x);
  } else if constexpr (IsMap<D>::value) {
    std::vector<std::pair<std::string, Value>> items;
    for (auto &[k, e] : x)
      items.emplace_back(k, toValue(e));
    return Value::dict(std::move(items));
  } else {
    static_assert(AlwaysFalse<T>, "unsupported forward result type");
  }
}

/// A bound argument converted to parameter type T.
template <typename T>
T boundArg(const std::optional<Value> &v, llvm::StringRef name, llvm::StringRef fn) {
  if (!v) {
    if constexpr (IsOptional<T>::value)
      return std::nullopt;
    else
      raise("{}() missing required argument '{}'", fn.str(), name.str());
  }
  return fromValue<T>(*v, fn.str() + "() argument '" + name.str() + "'");
}

template <typename T> struct MemberFn;
template <typename C, typename R, typename... A> struct MemberFn<R (C::*)(A...)> {
  using Result = R;
  static constexpr size_t Arity = sizeof...(A);
  using Args = std::tuple<std::decay_t<A>...>;
};
template <typename C, typename R, typename... A>
struct MemberFn<R (C::*)(A...) const> : MemberFn<R (C::*)(A...)> {};

} // namespace detail

/// A Layer (or a subclass `Base` of Layer) whose `Derived::forward` has
/// typed parameters: Var, Tensor,
/// bool, integers, floats, std::string, std::optional, std::vector,
/// std::tuple/std::pair and std::map<std::string, T> of those, or Value.
template <typename Derived, typename Base = Layer> class LayerOf : public Base {
public:
  using Base::Base;
  using Base::forwardParams;
  using Base::bind;
  using Base::typeName;
  Value forwardValues(const CallArgs &args) override {
    using FT = detail::MemberFn<decltype(&Derived::forward)>;
    if (forwardParams().size() != FT::Arity)
      raise("{}: forward takes {} parameters but {} names were declared",
            typeName().str(), FT::Arity, forwardParams().size());
    std::vector<std::optional<Value>> bound = bind(args);
    auto &self = static_cast<Derived &>(*this);
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return detail::toValue(self.forward(
          detail::boundArg<std::tuple_element_t<I, typename FT::Args>>(
              bound[I], forwardParams()[I], typeName().str() + ".forward")...));
    }(std::make_index_sequence<FT::Arity>{});
  }
};

} // namespace tmg
