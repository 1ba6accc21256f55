//===- PassOption.h - Typed pass options ------------------------*- C++ -*-===//
//
// A pass declares its options as members, as MLIR's passes do; the
// declaration gives the name, the type, the help text and the default, and
// is the one source of the option's parsing, checking, printing and help:
//
//   struct FoldConstant : tmg::GraphPass<FoldConstant> {
//     Option<int64_t> maxBytes{*this, "max-bytes",
//                              llvm::cl::desc("largest folded tensor in bytes"),
//                              llvm::cl::init(16 << 20)};
//     Option<Mode> mode{*this, "mode", llvm::cl::desc("what to fold"),
//                       llvm::cl::init(Mode::All),
//                       llvm::cl::values(clEnumValN(Mode::All, "all", "everything"),
//                                        clEnumValN(Mode::Small, "small", "small ones"))};
//     ListOption<int64_t> sizes{*this, "sizes", llvm::cl::desc("sizes to keep")};
//   };
//
// Value types: bool, integers, double, std::string, enums (named by
// llvm::cl::values), and lists of integers, doubles or strings. The pass
// reads an option as its value (`maxBytes` converts to int64_t, `*maxBytes`
// too). Pipeline texts (`fold-constant{max-bytes=1024 sizes=[1,2]}`) and
// config files (`[passes.fold-constant]`) set them through
// Pass::setOption, which checks the type and names the closest option on a
// typo.
//
// An Option must be a member of the pass it names (directly or inside a
// member struct): copying the pass (Pass::clone) copies the values and
// attaches the copies to the new pass.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CommandLine.h>

namespace tmg {

class Pass;

/// A value as written in a pipeline text, a config file or code, before an
/// option checks its type: a scalar or a list of scalars.
class OptionValue {
public:
  using Scalar = std::variant<bool, int64_t, double, std::string>;
  OptionValue(bool v) : v_(Scalar(v)) {}
  template <typename I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  OptionValue(I v) : v_(Scalar(int64_t(v))) {}
  OptionValue(double v) : v_(Scalar(v)) {}
  OptionValue(std::string v) : v_(Scalar(std::move(v))) {}
  OptionValue(const char *v) : v_(Scalar(std::string(v))) {}
  OptionValue(Scalar v) : v_(std::move(v)) {}
  OptionValue(std::vector<Scalar> v) : v_(std::move(v)) {}

  bool isList() const { return v_.index() == 1; }
  const Scalar &scalar() const { return std::get<0>(v_); }
  const std::vector<Scalar> &list() const { return std::get<1>(v_); }
  /// "bool", "int", "float", "string" or "list".
  std::string typeName() const;
  /// Canonical text: true, 12, 0.5, a bare word or a quoted string, [1, 2].
  std::string str() const;

  /// "bool", "int", "float", "string".
  static std::string typeName(const Scalar &s);
  static std::string str(const Scalar &s);

private:
  std::variant<Scalar, std::vector<Scalar>> v_;
};

/// What every typed option has: a name, help, its value as text, and a
/// checked setter. Options register with their pass on construction.
class PassOptionBase {
public:
  virtual ~PassOptionBase();
  const std::string &name() const { return name_; }
  const std::string &description() const { return description_; }
  /// The type as help shows it: "int", "float", "bool", "string",
  /// "all|small" (an enum's names), "list of int".
  virtual std::string typeName() const = 0;
  /// The default and the current value in pipeline syntax.
  virtual std::string defaultStr() const = 0;
  virtual std::string valueStr() const = 0;
  /// Whether a pipeline, a config file or code set the option (only those
  /// options are printed with the pipeline).
  bool isSet() const { return set_; }
  /// Takes `v` when it fits the option's type; otherwise the reason
  /// ("expects an int, got float '1.5'") and the value is unchanged.
  std::optional<std::string> assign(const OptionValue &v);

protected:
  PassOptionBase(Pass &owner, llvm::StringRef name);
  /// Attaches the copy to the pass that holds it (the copy of `owner`).
  PassOptionBase(const PassOptionBase &o);
  PassOptionBase &operator=(const PassOptionBase &o) {
    set_ = o.set_;
    return *this;
  }
  virtual std::optional<std::string> parse(const OptionValue &v) = 0;
  void markSet() { set_ = true; }
  void apply(const llvm::cl::desc &d) { description_ = d.Desc.str(); }

private:
  std::string name_, description_;
  /// Where the owning pass is, relative to this option.
  std::ptrdiff_t ownerOffset_ = 0;
  bool set_ = false;
};

namespace detail {
/// Text, type names and checked conversions of option value types.
std::string optionText(bool v);
std::string optionText(int64_t v);
std::string optionText(double v);
std::string optionText(const std::string &v);
/// "expects a T, got K 'text'".
std::string expectsError(llvm::StringRef type, const OptionValue &got);

template <typename T> std::string scalarTypeName() {
  if constexpr (std::is_same_v<T, bool>)
    return "bool";
  else if constexpr (std::is_integral_v<T>)
    return "int";
  else if constexpr (std::is_floating_point_v<T>)
    return "float";
  else
    return "string";
}

template <typename T> std::string scalarText(const T &v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>)
    return optionText(v);
  else if constexpr (std::is_integral_v<T>)
    return optionText(int64_t(v));
  else
    return optionText(double(v));
}

/// `s` as a T, or nothing when the types differ (an int is a fine float)
/// or an integer is out of T's range.
template <typename T> std::optional<T> scalarAs(const OptionValue::Scalar &s) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>) {
    if (auto *v = std::get_if<T>(&s))
      return *v;
  } else if constexpr (std::is_integral_v<T>) {
    if (auto *v = std::get_if<int64_t>(&s))
      if (std::in_range<T>(*v))
        return T(*v);
  } else {
    if (auto *v = std::get_if<double>(&s))
      return T(*v);
    if (auto *v = std::get_if<int64_t>(&s))
      return T(*v);
  }
  return std::nullopt;
}

/// The names of an enum option.
struct EnumNames {
  struct Entry {
    std::string name, description;
    int value;
  };
  std::vector<Entry> entries;
  /// "all|small".
  std::string typeName() const;
  const Entry *byName(llvm::StringRef n) const;
  const Entry *byValue(int v) const;
  /// The error for a name that is none of them, with the closest one.
  std::string unknown(const OptionValue &got) const;
};
} // namespace detail

/// A typed pass option: `Option<T> x{*this, "name", llvm::cl::desc(..),
/// llvm::cl::init(..)}` (enums add llvm::cl::values(clEnumValN(..), ..)).
template <typename T> class Option : public PassOptionBase {
  static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>,
                "Option<T> takes bool, an integer, a floating-point type, std::string or "
                "an enum");

public:
  template <typename... Mods>
  Option(Pass &owner, llvm::StringRef name, const Mods &...mods) : PassOptionBase(owner, name) {
    (applyMod(mods), ...);
    value_ = default_;
  }
  Option(const Option &) = default;
  Option &operator=(const Option &) = default;
  Option &operator=(const T &v) {
    value_ = v;
    markSet();
    return *this;
  }

  const T &value() const { return value_; }
  operator const T &() const { return value_; }
  const T &operator*() const { return value_; }
  const T *operator->() const { return &value_; }

  std::string typeName() const override {
    if constexpr (std::is_enum_v<T>)
      return enums_.typeName();
    else
      return detail::scalarTypeName<T>();
  }
  std::string defaultStr() const override { return text(default_); }
  std::string valueStr() const override { return text(value_); }

  /// The hook llvm::cl::values fills (MLIR's spelling of enum options).
  struct EnumParser {
    Option &o;
    void addLiteralOption(llvm::StringRef name, int v, llvm::StringRef help) {
      o.enums_.entries.push_back({name.str(), help.str(), v});
    }
  };
  EnumParser getParser() { return {*this}; }

protected:
  std::optional<std::string> parse(const OptionValue &v) override {
    if constexpr (std::is_enum_v<T>) {
      const detail::EnumNames::Entry *e = nullptr;
      if (!v.isList())
        if (auto *s = std::get_if<std::string>(&v.scalar()))
          e = enums_.byName(*s);
      if (!e)
        return enums_.unknown(v);
      value_ = T(e->value);
    } else {
      std::optional<T> x = v.isList() ? std::nullopt : detail::scalarAs<T>(v.scalar());
      if (!x)
        return detail::expectsError(detail::scalarTypeName<T>(), v);
      value_ = *x;
    }
    return std::nullopt;
  }

private:
  using PassOptionBase::apply;
  void applyMod(const llvm::cl::desc &d) { apply(d); }
  template <typename U> void applyMod(const llvm::cl::initializer<U> &i) { default_ = T(i.Init); }
  void applyMod(const llvm::cl::ValuesClass &v) { v.apply(*this); }

  std::string text(const T &v) const {
    if constexpr (std::is_enum_v<T>) {
      const detail::EnumNames::Entry *e = enums_.byValue(int(v));
      return e ? e->name : std::to_string(int(v));
    } else {
      return detail::scalarText(v);
    }
  }

  T default_{};
  T value_{};
  detail::EnumNames enums_;
};

/// A list-valued pass option: `sizes=[1, 2, 3]` in a pipeline, an array in
/// a config file; a single value is a list of one.
template <typename T> class ListOption : public PassOptionBase {
  static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, std::string>,
                "ListOption<T> takes bool, an integer, a floating-point type or std::string");

public:
  template <typename... Mods>
  ListOption(Pass &owner, llvm::StringRef name, const Mods &...mods)
      : PassOptionBase(owner, name) {
    (applyMod(mods), ...);
    value_ = default_;
  }
  ListOption(const ListOption &) = default;
  ListOption &operator=(const ListOption &) = default;
  ListOption &operator=(std::vector<T> v) {
    value_ = std::move(v);
    markSet();
    return *this;
  }

  const std::vector<T> &value() const { return value_; }
  operator llvm::ArrayRef<T>() const { return value_; }
  const std::vector<T> &operator*() const { return value_; }
  const std::vector<T> *operator->() const { return &value_; }
  auto begin() const { return value_.begin(); }
  auto end() const { return value_.end(); }
  size_t size() const { return value_.size(); }
  bool empty() const { return value_.empty(); }
  const T &operator[](size_t i) const { return value_[i]; }

  std::string typeName() const override { return "list of " + detail::scalarTypeName<T>(); }
  std::string defaultStr() const override { return text(default_); }
  std::string valueStr() const override { return text(value_); }

protected:
  std::optional<std::string> parse(const OptionValue &v) override {
    std::vector<OptionValue::Scalar> items =
        v.isList() ? v.list() : std::vector<OptionValue::Scalar>{v.scalar()};
    std::vector<T> out;
    for (size_t i = 0; i < items.size(); ++i) {
      std::optional<T> x = detail::scalarAs<T>(items[i]);
      if (!x)
        return detail::expectsError(typeName(), v) +
               " (element " + std::to_string(i + 1) + " is " +
               OptionValue::typeName(items[i]) + " '" + OptionValue::str(items[i]) + "')";
      out.push_back(*x);
    }
    value_ = std::move(out);
    return std::nullopt;
  }

private:
  using PassOptionBase::apply;
  void applyMod(const llvm::cl::desc &d) { apply(d); }
  template <typename U> void applyMod(const llvm::cl::initializer<U> &i) {
    default_.assign(i.Init.begin(), i.Init.end());
  }

  static std::string text(const std::vector<T> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + detail::scalarText<T>(v[i]);
    return s + "]";
  }

  std::vector<T> default_, value_;
};

} // namespace tmg
