//===- PassOption.cpp - Typed pass options --------------------------------===//
#include "tm/passes/PassOption.h"

#include <cctype>

#include <fmt/format.h>

#include "tm/ir/Suggest.h"
#include "tm/ir/TreeDef.h"
#include "tm/passes/Pass.h"

namespace tmg {

std::string OptionValue::typeName(const Scalar &s) {
  static const char *const Names[] = {"bool", "int", "float", "string"};
  return Names[s.index()];
}

std::string OptionValue::str(const Scalar &s) {
  return std::visit([](const auto &v) { return detail::optionText(v); }, s);
}

std::string OptionValue::typeName() const { return isList() ? "list" : typeName(scalar()); }

std::string OptionValue::str() const {
  if (!isList())
    return str(scalar());
  std::string s = "[";
  for (size_t i = 0; i < list().size(); ++i)
    s += (i ? "," : "") + str(list()[i]);
  return s + "]";
}

PassOptionBase::~PassOptionBase() = default;

PassOptionBase::PassOptionBase(Pass &owner, llvm::StringRef name) : name_(name.str()) {
  ownerOffset_ = reinterpret_cast<const char *>(this) - reinterpret_cast<const char *>(&owner);
  owner.options_.push_back(this);
}

PassOptionBase::PassOptionBase(const PassOptionBase &o)
    : name_(o.name_), description_(o.description_), ownerOffset_(o.ownerOffset_), set_(o.set_) {
  // The copy sits at the same place in the copied pass as `o` in its own.
  Pass *owner = reinterpret_cast<Pass *>(reinterpret_cast<char *>(this) - ownerOffset_);
  owner->options_.push_back(this);
}

std::optional<std::string> PassOptionBase::assign(const OptionValue &v) {
  std::optional<std::string> err = parse(v);
  if (!err)
    set_ = true;
  return err;
}

namespace detail {

std::string optionText(bool v) { return v ? "true" : "false"; }
std::string optionText(int64_t v) { return std::to_string(v); }
std::string optionText(double v) { return pyFloatRepr(v); }

/// A bare word when the pipeline parser reads it back as the same string,
/// else a quoted string.
std::string optionText(const std::string &s) {
  bool bare = !s.empty();
  for (char c : s)
    bare &= bool(std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' ||
                 c == ':' || c == '/');
  if (bare && s != "true" && s != "false" &&
      !(std::isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '.'))
    return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string expectsError(llvm::StringRef type, const OptionValue &got) {
  bool vowel = !type.empty() && llvm::StringRef("aeiou").contains(type[0]);
  return fmt::format("expects {} {}, got {} '{}'", vowel ? "an" : "a", type.str(),
                     got.typeName(), got.str());
}

std::string EnumNames::typeName() const {
  std::string s;
  for (const Entry &e : entries)
    s += (s.empty() ? "" : "|") + e.name;
  return s;
}

const EnumNames::Entry *EnumNames::byName(llvm::StringRef n) const {
  for (const Entry &e : entries)
    if (e.name == n)
      return &e;
  return nullptr;
}

const EnumNames::Entry *EnumNames::byValue(int v) const {
  for (const Entry &e : entries)
    if (e.value == v)
      return &e;
  return nullptr;
}

std::string EnumNames::unknown(const OptionValue &got) const {
  std::vector<std::string> names;
  for (const Entry &e : entries)
    names.push_back(e.name);
  std::string msg = fmt::format("expects one of {}, got {} '{}'", typeName(),
                                got.typeName(), got.str());
  const auto *s = got.isList() ? nullptr : std::get_if<std::string>(&got.scalar());
  if (s)
    if (std::string c = closestName(*s, names); !c.empty())
      msg += fmt::format("; did you mean '{}'?", c);
  return msg;
}

} // namespace detail
} // namespace tmg
