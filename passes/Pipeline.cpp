//===- Pipeline.cpp - Pipeline text: parsing and printing -----------------===//
#include <algorithm>
#include <cctype>

#include "tm/passes/PassManager.h"

namespace tmg {

PipelineElement PipelineElement::clone() const {
  PipelineElement e;
  e.kind = kind;
  if (pass)
    e.pass = pass->clone();
  for (const auto &c : children)
    e.children.push_back(c.clone());
  e.maxIterations = maxIterations;
  e.maxIterationsSet = maxIterationsSet;
  e.loc = loc;
  return e;
}

Pipeline Pipeline::clone() const {
  Pipeline p;
  p.registry = registry;
  for (const auto &e : elements)
    p.elements.push_back(e.clone());
  return p;
}

/// `{name=value,...}` of the options set, sorted by name (canonical).
static void printOptions(const Pass &p, std::string &out) {
  std::vector<const PassOptionBase *> set;
  for (const PassOptionBase *o : p.options())
    if (o->isSet())
      set.push_back(o);
  if (set.empty())
    return;
  std::sort(set.begin(), set.end(),
            [](const auto *a, const auto *b) { return a->name() < b->name(); });
  out += "{";
  for (size_t i = 0; i < set.size(); ++i)
    out += (i ? "," : "") + set[i]->name() + "=" + set[i]->valueStr();
  out += "}";
}

static void printElements(const std::vector<PipelineElement> &els, std::string &out) {
  for (size_t i = 0; i < els.size(); ++i) {
    if (i)
      out += ",";
    const PipelineElement &e = els[i];
    if (e.kind == PipelineElement::Kind::Fixpoint) {
      out += "fixpoint(";
      printElements(e.children, out);
      out += ")";
      if (e.maxIterationsSet)
        out += fmt::format("{{max-iterations={}}}", e.maxIterations);
      continue;
    }
    out += e.pass->name().str();
    printOptions(*e.pass, out);
  }
}

std::string Pipeline::str() const {
  std::string out;
  printElements(elements, out);
  return out;
}

namespace {
class PipelineParser {
public:
  PipelineParser(llvm::StringRef text, const PassRegistry &r, llvm::StringRef file,
                 int64_t line, int64_t col)
      : s_(text), r_(r), file_(file.str()), line_(line), col_(col) {}

  Pipeline run() {
    Pipeline p;
    p.registry = &r_;
    skip();
    if (pos_ >= s_.size())
      fail("the pipeline is empty");
    p.elements = list();
    skip();
    if (pos_ < s_.size())
      fail(fmt::format("unexpected '{}'", s_[pos_]));
    return p;
  }

private:
  Location loc(size_t at) const {
    return Location::inFile(file_, line_, col_ + int64_t(at));
  }
  [[noreturn]] void fail(const std::string &msg, size_t at = ~size_t(0)) const {
    throw Error(loc(at == ~size_t(0) ? pos_ : at), msg);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace((unsigned char)s_[pos_]))
      ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string name() {
    skip();
    size_t b = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum((unsigned char)s_[pos_]) || s_[pos_] == '-' || s_[pos_] == '_'))
      ++pos_;
    if (b == pos_)
      fail(pos_ < s_.size() ? fmt::format("expected a pass name, got '{}'", s_[pos_])
                            : "expected a pass name at the end of the pipeline");
    return s_.slice(b, pos_).str();
  }
  std::vector<PipelineElement> list() {
    std::vector<PipelineElement> out;
    do {
      skip();
      size_t at = pos_;
      size_t save = pos_;
      std::string n = name();
      if (const PassRegistry::Preset *pre = r_.preset(n)) {
        expandPreset(*pre, at, out);
        continue;
      }
      pos_ = save;
      out.push_back(element());
    } while (eat(','));
    return out;
  }
  /// A preset name expands to its pipeline; its elements point at the name.
  void expandPreset(const PassRegistry::Preset &pre, size_t at,
                    std::vector<PipelineElement> &out) {
    if (depth_ > 8)
      fail(fmt::format("pipeline preset '{}' expands into itself", pre.name), at);
    PipelineParser sub(pre.text, r_, "<preset " + pre.name + ">", 1, 1);
    sub.depth_ = depth_ + 1;
    Pipeline p = sub.run();
    std::function<void(std::vector<PipelineElement> &)> relocate =
        [&](std::vector<PipelineElement> &els) {
          for (PipelineElement &e : els) {
            e.loc = loc(at);
            relocate(e.children);
          }
        };
    relocate(p.elements);
    for (PipelineElement &e : p.elements)
      out.push_back(std::move(e));
  }
  /// A quoted string (the opening quote at pos_).
  std::string quoted() {
    ++pos_;
    std::string v;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size())
        ++pos_;
      v += s_[pos_++];
    }
    if (pos_ >= s_.size())
      fail("unterminated string");
    ++pos_;
    return v;
  }
  /// true, false, an integer, a float, a bare word or a quoted string;
  /// a bare word ends at whitespace or one of `stops`.
  OptionValue::Scalar scalar(llvm::StringRef stops) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == '"')
      return quoted();
    size_t b = pos_;
    while (pos_ < s_.size() && !stops.contains(s_[pos_]) &&
           !std::isspace((unsigned char)s_[pos_]))
      ++pos_;
    llvm::StringRef t = s_.slice(b, pos_);
    if (t.empty())
      fail("expected an option value");
    if (t == "true" || t == "false")
      return t == "true";
    int64_t i;
    if (!t.getAsInteger(10, i))
      return i;
    double d;
    if (!t.getAsDouble(d))
      return d;
    return t.str();
  }
  /// A scalar, or a list `[v, v, ...]`.
  OptionValue value() {
    if (!eat('['))
      return OptionValue(scalar(",}"));
    std::vector<OptionValue::Scalar> items;
    if (eat(']'))
      return OptionValue(std::move(items));
    do
      items.push_back(scalar(",]}"));
    while (eat(','));
    if (!eat(']'))
      fail("expected ',' or ']' in the list");
    return OptionValue(std::move(items));
  }
  bool atName() {
    skip();
    return pos_ < s_.size() &&
           (std::isalnum((unsigned char)s_[pos_]) || s_[pos_] == '-' || s_[pos_] == '_');
  }
  /// `{k=v, k=v ...}` (separated by commas or spaces) applied through
  /// `set`.
  void options(const std::function<void(const std::string &, OptionValue, size_t)> &set) {
    if (!eat('{'))
      return;
    while (!eat('}')) {
      if (!atName())
        fail(pos_ < s_.size() ? "expected ',' or '}' in the options"
                              : "expected '}' to close the options");
      size_t at = pos_;
      std::string k = name();
      if (!eat('='))
        fail(fmt::format("expected '=' after option '{}'", k));
      OptionValue v = value();
      set(k, v, at);
      eat(',');
    }
  }
  PipelineElement element() {
    skip();
    size_t at = pos_;
    std::string n = name();
    PipelineElement e;
    e.loc = loc(at);
    if (n == "fixpoint") {
      e.kind = PipelineElement::Kind::Fixpoint;
      if (!eat('('))
        fail("expected '(' after fixpoint");
      e.children = list();
      if (!eat(')'))
        fail("expected ')' to close fixpoint(");
      options([&](const std::string &k, OptionValue v, size_t kat) {
        if (k != "max-iterations")
          fail(fmt::format("fixpoint has no option '{}'; did you mean 'max-iterations'?", k), kat);
        const int64_t *n = v.isList() ? nullptr : std::get_if<int64_t>(&v.scalar());
        if (!n || *n <= 0)
          fail("max-iterations expects a positive int", kat);
        e.maxIterations = *n;
        e.maxIterationsSet = true;
      });
      return e;
    }
    e.pass = r_.create(n);
    if (!e.pass) {
      std::string c = r_.closest(n);
      // A name close to none in a registry that lacks the optimisation
      // passes: most likely the registry was not filled by registerAllPasses.
      bool partial =
          c.empty() && (!r_.contains("canonicalize") || !r_.contains("apply-rules"));
      fail(fmt::format("unknown pass '{}'{}{}", n,
                       c.empty() ? "" : fmt::format("; did you mean '{}'?", c),
                       partial ? " (this registry lacks tmgraph's optimisation passes: "
                                 "tmg::registerAllPasses in tm/InitAllPasses.h registers them)"
                               : ""),
           at);
    }
    options([&](const std::string &k, OptionValue v, size_t kat) {
      if (auto set = e.pass->setOption(k, v); set.failed())
        fail(set.diagnostic().message, kat);
    });
    return e;
  }

  llvm::StringRef s_;
  const PassRegistry &r_;
  std::string file_;
  int64_t line_, col_;
  size_t pos_ = 0;
  int depth_ = 0;
};
} // namespace

FailureOr<Pipeline> Pipeline::parse(llvm::StringRef text, const PassRegistry &r,
                                    llvm::StringRef file, int64_t line, int64_t col) {
  try {
    return PipelineParser(text, r, file, line, col).run();
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

} // namespace tmg
