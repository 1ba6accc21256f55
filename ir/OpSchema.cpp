//===- OpSchema.cpp - The op schema registry ------------------------------===//
#include "tm/ir/OpSchema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <mutex>
#include <shared_mutex>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// Python literal parsing (defaults in Ops.def and user signatures)
//===----------------------------------------------------------------------===//

namespace {
class LiteralParser {
public:
  explicit LiteralParser(llvm::StringRef text) : text_(text) {}

  TreeDef parseAll() {
    TreeDef t = parseValue();
    skipWs();
    if (pos_ != text_.size())
      fail("unexpected trailing text");
    return t;
  }

private:
  [[noreturn]] void fail(const char *what) {
    raise("malformed Python literal '{}' at column {}: {}", text_.str(),
          pos_ + 1, what);
  }
  void skipWs() {
    while (pos_ < text_.size() && std::isspace((unsigned char)text_[pos_]))
      ++pos_;
  }
  bool eat(char c) {
    skipWs();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  TreeDef parseSeq(char close, bool tuple) {
    std::vector<TreeDef> items;
    bool trailingComma = false;
    while (!eat(close)) {
      if (!items.empty() && !trailingComma)
        fail("expected ',' or closing bracket");
      items.push_back(parseValue());
      trailingComma = eat(',');
    }
    if (tuple)
      return TreeDef::tuple(std::move(items));
    return TreeDef::list(std::move(items));
  }
  TreeDef parseValue() {
    skipWs();
    if (pos_ >= text_.size())
      fail("unexpected end");
    char c = text_[pos_];
    if (c == '(') {
      ++pos_;
      return parseSeq(')', true);
    }
    if (c == '[') {
      ++pos_;
      return parseSeq(']', false);
    }
    if (c == '\'' || c == '"') {
      ++pos_;
      std::string s;
      while (pos_ < text_.size() && text_[pos_] != c) {
        if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
          char e = text_[++pos_];
          s += e == 'n' ? '\n' : e == 't' ? '\t' : e;
          ++pos_;
          continue;
        }
        s += text_[pos_++];
      }
      if (pos_ >= text_.size())
        fail("unterminated string");
      ++pos_;
      return TreeDef::constant(Scalar(std::move(s)));
    }
    size_t start = pos_;
    while (pos_ < text_.size() &&
           (std::isalnum((unsigned char)text_[pos_]) || text_[pos_] == '_' ||
            text_[pos_] == '.' || text_[pos_] == '-' || text_[pos_] == '+'))
      ++pos_;
    llvm::StringRef tok = text_.slice(start, pos_);
    if (tok.empty())
      fail("expected a value");
    if (tok == "None")
      return TreeDef::constant(Scalar());
    if (tok == "True")
      return TreeDef::constant(Scalar(true));
    if (tok == "False")
      return TreeDef::constant(Scalar(false));
    if (tok == "Ellipsis" || tok == "...")
      return TreeDef::constant(Scalar::ellipsis());
    int64_t iv;
    if (!tok.getAsInteger(10, iv))
      return TreeDef::constant(Scalar(iv));
    double dv;
    if (tok == "inf")
      return TreeDef::constant(Scalar(HUGE_VAL));
    if (tok == "-inf")
      return TreeDef::constant(Scalar(-HUGE_VAL));
    if (!tok.getAsDouble(dv))
      return TreeDef::constant(Scalar(dv));
    fail("not a literal");
  }

  llvm::StringRef text_;
  size_t pos_ = 0;
};
} // namespace

TreeDef parsePyLiteral(llvm::StringRef text) {
  return LiteralParser(text).parseAll();
}

OpParam parseOpParam(llvm::StringRef spec) {
  spec = spec.trim();
  OpParam p;
  if (spec == "*") {
    p.keywordOnly = true; // marker
    return p;
  }
  if (spec.startswith("*")) {
    p.variadic = true;
    spec = spec.drop_front();
  }
  auto [name, def] = spec.split('=');
  name = name.trim();
  if (name.empty())
    raise("malformed parameter spec '{}': empty name", spec.str());
  for (char c : name)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      raise("malformed parameter spec '{}': bad name", spec.str());
  p.name = name.str();
  if (spec.contains('=')) {
    if (p.variadic)
      raise("malformed parameter spec '{}': *args has no default", spec.str());
    p.hasDefault = true;
    p.defaultValue = parsePyLiteral(def.trim());
  }
  return p;
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

static std::vector<OpParam> parseParams(llvm::ArrayRef<std::string> specs,
                                        llvm::StringRef opName) {
  std::vector<OpParam> out;
  bool kwOnly = false, sawDefault = false;
  for (const auto &s : specs) {
    OpParam p = parseOpParam(s);
    if (p.name.empty()) { // "*"
      kwOnly = true;
      continue;
    }
    if (p.variadic) {
      kwOnly = true;
      out.push_back(std::move(p));
      continue;
    }
    p.keywordOnly = kwOnly;
    if (!kwOnly) {
      if (sawDefault && !p.hasDefault)
        raise("op '{}': parameter '{}' without default follows one with a "
              "default",
              opName.str(), p.name);
      sawDefault |= p.hasDefault;
    }
    for (const auto &q : out)
      if (q.name == p.name)
        raise("op '{}': duplicate parameter '{}'", opName.str(), p.name);
    out.push_back(std::move(p));
  }
  return out;
}

static std::vector<std::string> splitSpecs(llvm::StringRef params) {
  std::vector<std::string> out;
  llvm::SmallVector<llvm::StringRef, 8> parts;
  params.split(parts, ';', -1, false);
  for (auto p : parts)
    if (!p.trim().empty())
      out.push_back(p.trim().str());
  return out;
}

struct OpRegistry::Impl {
  mutable std::shared_mutex mu;
  std::deque<OpSchema> schemas; // stable addresses
  std::vector<const OpSchema *> byKind;
  llvm::StringMap<const OpSchema *> functions; // "relu" and "nn.relu"
  llvm::StringMap<const OpSchema *> methods;
  llvm::StringMap<const OpSchema *> opdefs;
};

static bool sameParams(const std::vector<OpParam> &a,
                       const std::vector<OpParam> &b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].hasDefault != b[i].hasDefault ||
        a[i].keywordOnly != b[i].keywordOnly || a[i].variadic != b[i].variadic ||
        (a[i].hasDefault && a[i].defaultValue != b[i].defaultValue))
      return false;
  return true;
}

OpRegistry::OpRegistry() : impl_(new Impl) {
  auto add = [this](OpKind k, const char *family, OpClass c, const char *mod,
                    const char *name, uint32_t traits, const char *params) {
    OpSchema s;
    s.kind_ = k;
    s.family_ = family;
    s.class_ = c;
    s.name_ = name;
    s.module_ = mod;
    s.traits_ = traits;
    s.printName_ = c == OpClass::Function ? std::string(mod) + "." + name
                                          : std::string(name);
    s.params_ = parseParams(splitSpecs(params), name);
    s.indexParams();
    impl_->schemas.push_back(std::move(s));
    const OpSchema *p = &impl_->schemas.back();
    impl_->byKind.push_back(p);
    if (c == OpClass::Function) {
      impl_->functions[p->name()] = p;
      impl_->functions[p->printName()] = p;
    } else if (c == OpClass::TensorMethod) {
      impl_->methods[p->name()] = p;
    } else {
      impl_->opdefs[p->name()] = p;
    }
  };
#define TM_FUNCTION(ID, FAMILY, MOD, NAME, TRAITS, PARAMS)                     \
  add(OpKind::ID, #FAMILY, OpClass::Function, #MOD, #NAME, TRAITS, PARAMS);
#define TM_METHOD(ID, FAMILY, NAME, TRAITS, PARAMS)                            \
  add(OpKind::ID, #FAMILY, OpClass::TensorMethod, "", #NAME, TRAITS, PARAMS);
#define TM_OPDEF(ID, FAMILY, NAME, TRAITS)                                     \
  add(OpKind::ID, #FAMILY, OpClass::OpDef, "", #NAME, TRAITS, "");
#include "tm/ir/Ops.def"
}

OpRegistry &OpRegistry::instance() {
  static OpRegistry reg;
  return reg;
}

const OpSchema &OpRegistry::get(OpKind k) const {
  std::shared_lock lock(impl_->mu);
  if (size_t(k) >= impl_->byKind.size())
    raise("OpKind {} is not a builtin op", int(k));
  return *impl_->byKind[size_t(k)];
}

const OpSchema *OpRegistry::lookupFunction(llvm::StringRef name) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->functions.find(name);
  return it == impl_->functions.end() ? nullptr : it->second;
}
const OpSchema *OpRegistry::lookupMethod(llvm::StringRef name) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->methods.find(name);
  return it == impl_->methods.end() ? nullptr : it->second;
}
const OpSchema *OpRegistry::lookupOpDef(llvm::StringRef name) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->opdefs.find(name);
  return it == impl_->opdefs.end() ? nullptr : it->second;
}

const OpSchema &OpRegistry::registerFunction(llvm::StringRef module,
                                             llvm::StringRef name,
                                             llvm::ArrayRef<std::string> params,
                                             uint32_t traits) {
  if (module.empty() || name.empty())
    raise("registerFunction: module and name must not be empty");
  std::vector<OpParam> ps = parseParams(params, name);
  std::string printName = module.str() + "." + name.str();
  std::unique_lock lock(impl_->mu);
  auto it = impl_->functions.find(printName);
  if (it != impl_->functions.end()) {
    if (sameParams(it->second->params_, ps) && it->second->traits_ == traits)
      return *it->second;
    raise("function '{}' is already registered with another signature",
          printName);
  }
  OpSchema s;
  s.kind_ = OpKind::Custom;
  s.class_ = OpClass::Function;
  s.name_ = name.str();
  s.module_ = module.str();
  s.printName_ = printName;
  s.traits_ = traits;
  s.params_ = std::move(ps);
  s.indexParams();
  impl_->schemas.push_back(std::move(s));
  const OpSchema *p = &impl_->schemas.back();
  impl_->functions[printName] = p;
  // The short name resolves to the first function registered under it.
  impl_->functions.try_emplace(p->name(), p);
  return *p;
}

const OpSchema &OpRegistry::registerMethod(llvm::StringRef name,
                                           llvm::ArrayRef<std::string> params,
                                           uint32_t traits) {
  if (name.empty())
    raise("registerMethod: name must not be empty");
  std::vector<OpParam> ps = parseParams(params, name);
  std::unique_lock lock(impl_->mu);
  auto it = impl_->methods.find(name);
  if (it != impl_->methods.end()) {
    if (sameParams(it->second->params_, ps) && it->second->traits_ == traits)
      return *it->second;
    raise("tensor method '{}' is already registered with another signature",
          name.str());
  }
  OpSchema s;
  s.kind_ = OpKind::Custom;
  s.class_ = OpClass::TensorMethod;
  s.name_ = name.str();
  s.printName_ = name.str();
  s.traits_ = traits;
  s.params_ = std::move(ps);
  s.indexParams();
  impl_->schemas.push_back(std::move(s));
  const OpSchema *p = &impl_->schemas.back();
  impl_->methods[p->name()] = p;
  return *p;
}

std::vector<const OpSchema *> OpRegistry::all() const {
  std::shared_lock lock(impl_->mu);
  std::vector<const OpSchema *> out;
  for (const auto &s : impl_->schemas)
    out.push_back(&s);
  return out;
}

void OpSchema::indexParams() {
  positional_.clear();
  keywordOnly_.clear();
  variadic_ = -1;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (params_[i].variadic)
      variadic_ = int64_t(i);
    else if (params_[i].keywordOnly)
      keywordOnly_.push_back(uint32_t(i));
    else
      positional_.push_back(uint32_t(i));
  }
  std::stable_sort(keywordOnly_.begin(), keywordOnly_.end(), [&](uint32_t a, uint32_t b) {
    return params_[a].name < params_[b].name;
  });
}

int64_t OpSchema::paramIndex(llvm::StringRef name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name)
      return int64_t(i);
  return -1;
}

/// The known name closest to `name` by edit distance, for "did you mean".
static std::string closest(llvm::StringRef name,
                           const std::vector<const OpSchema *> &all,
                           OpClass c) {
  std::string best;
  unsigned bestD = ~0u;
  for (const OpSchema *s : all) {
    if (s->opClass() != c)
      continue;
    for (llvm::StringRef cand : {s->name(), s->printName()}) {
      unsigned d = name.edit_distance(cand, true, bestD);
      if (d < bestD) {
        bestD = d;
        best = cand.str();
      }
    }
  }
  return best;
}

const OpSchema &functionOp(llvm::StringRef name) {
  auto &reg = OpRegistry::instance();
  if (const OpSchema *s = reg.lookupFunction(name))
    return *s;
  raise("unknown function '{}'; did you mean '{}'?", name.str(),
        closest(name, reg.all(), OpClass::Function));
}

const OpSchema &methodOp(llvm::StringRef name) {
  auto &reg = OpRegistry::instance();
  if (const OpSchema *s = reg.lookupMethod(name))
    return *s;
  raise("unknown tensor method '{}'; did you mean '{}'?", name.str(),
        closest(name, reg.all(), OpClass::TensorMethod));
}

} // namespace tmg
