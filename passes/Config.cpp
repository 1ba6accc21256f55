//===- Config.cpp - Pipeline config files (TOML) --------------------------===//
#include <algorithm>

#include "../matcher/TomlText.h"

#include "tm/passes/PassManager.h"
#include "tm/passes/RulePasses.h"

namespace tmg {

namespace {

using tomltext::at;
using tomltext::fail;

/// Applies `fn` to every pass element, fixpoint children included.
void forEachPass(std::vector<PipelineElement> &els,
                 const std::function<void(PipelineElement &)> &fn) {
  for (auto &e : els) {
    if (e.kind == PipelineElement::Kind::Pass)
      fn(e);
    else
      forEachPass(e.children, fn);
  }
}

/// A scalar of a pass option in a config file.
OptionValue::Scalar optionScalar(const std::string &file, const std::string &opt,
                                 const toml::node &n) {
  if (n.is_boolean())
    return *n.value<bool>();
  if (n.is_integer())
    return *n.value<int64_t>();
  if (n.is_floating_point())
    return *n.value<double>();
  if (n.is_string())
    return *n.value<std::string>();
  fail(file, n, fmt::format("option '{}' must be a boolean, number, string or an array of "
                            "them",
                            opt));
}

/// The value of a pass option in a config file: a scalar or an array.
OptionValue optionValue(const std::string &file, const std::string &opt, const toml::node &n) {
  const toml::array *a = n.as_array();
  if (!a)
    return OptionValue(optionScalar(file, opt, n));
  std::vector<OptionValue::Scalar> items;
  for (const toml::node &x : *a)
    items.push_back(optionScalar(file, opt, x));
  return OptionValue(std::move(items));
}

const std::vector<std::string> PipelineKeys = {
    "passes", "disabled", "verify-each", "print-after-all", "print-after",
    "print-changed", "time-passes", "stats", "threads", "transactional"};

bool getBool(const std::string &file, const toml::node &n, const std::string &key) {
  if (auto v = n.value<bool>(); v && n.is_boolean())
    return *v;
  fail(file, n, fmt::format("'{}' expects true or false", key));
}

std::vector<std::string> getStrings(const std::string &file, const toml::node &n,
                                    const std::string &key) {
  const toml::array *a = n.as_array();
  if (!a)
    fail(file, n, fmt::format("'{}' expects an array of strings", key));
  std::vector<std::string> out;
  for (const toml::node &x : *a) {
    if (!x.is_string())
      fail(file, x, fmt::format("'{}' expects an array of strings", key));
    out.push_back(*x.value<std::string>());
  }
  return out;
}

PipelineFile parse(llvm::StringRef text, const std::string &file, const PassRegistry &r) {
  toml::table root = tomltext::parse(text, file);
  PipelineFile out;
  for (auto &[k, v] : root) {
    std::string key(k.str());
    if (key == "rules") {
      auto rules = parseRulesToml(text, file, false);
      if (rules.failed())
        throw Error(rules.diagnostic());
      out.rules = std::move(*rules);
      continue;
    }
    if (key != "pipeline" && key != "passes") {
      std::string c = closestName(key, {"pipeline", "passes", "rules"});
      fail(file, v, fmt::format("unknown section '{}'; did you mean '{}'?", key, c));
    }
  }
  const toml::table *pl = root["pipeline"].as_table();
  if (!pl)
    throw Error(Location::inFile(file, 1, 1), "the config needs a [pipeline] table");
  const toml::node *passes = pl->get("passes");
  if (!passes)
    fail(file, *pl, "[pipeline] needs 'passes = [...]'");
  const toml::array *arr = passes->as_array();
  if (!arr || arr->empty())
    fail(file, *passes, "'passes' expects a non-empty array of pipeline strings");
  out.pipeline.registry = &r;
  for (const toml::node &p : *arr) {
    if (!p.is_string())
      fail(file, p, "'passes' expects an array of strings");
    // The string starts one column after its opening quote.
    auto src = p.source();
    FailureOr<Pipeline> sub = Pipeline::parse(*p.value<std::string>(), r, file,
                                              int64_t(src.begin.line),
                                              int64_t(src.begin.column) + 1);
    if (sub.failed())
      throw Error(sub.diagnostic());
    for (auto &e : sub->elements)
      out.pipeline.elements.push_back(std::move(e));
  }
  PipelineOptions &o = out.options;
  for (auto &[k, v] : *pl) {
    std::string key(k.str());
    if (key == "passes")
      continue;
    if (key == "verify-each")
      o.verifyEach = getBool(file, v, key);
    else if (key == "print-after-all")
      o.printAfterAll = getBool(file, v, key);
    else if (key == "print-changed")
      o.printChanged = getBool(file, v, key);
    else if (key == "time-passes")
      o.timePasses = getBool(file, v, key);
    else if (key == "stats")
      o.stats = getBool(file, v, key);
    else if (key == "transactional")
      o.transactional = getBool(file, v, key);
    else if (key == "threads") {
      auto n = v.value<int64_t>();
      if (!v.is_integer() || !n || *n < 1)
        fail(file, v, "'threads' expects a positive integer");
      o.threads = int(*n);
    } else if (key == "print-after" || key == "disabled") {
      for (const std::string &name : getStrings(file, v, key)) {
        if (!r.contains(name))
          fail(file, v, fmt::format("unknown pass '{}' in '{}'; did you mean '{}'?", name,
                                    key, r.closest(name)));
        (key == "disabled" ? o.disabled : o.printAfter).insert(name);
      }
    } else {
      fail(file, v, fmt::format("unknown key '{}' in [pipeline]; did you mean '{}'?", key,
                                closestName(key, PipelineKeys)));
    }
  }
  if (const toml::table *opts = root["passes"].as_table()) {
    for (auto &[k, v] : *opts) {
      std::string pass(k.str());
      const toml::table *t = v.as_table();
      if (!r.contains(pass))
        fail(file, v, fmt::format("unknown pass '{}'; did you mean '{}'?", pass,
                                  r.closest(pass)));
      if (!t)
        fail(file, v, fmt::format("[passes.{}] must be a table of options", pass));
      for (auto &[ok, ov] : *t) {
        std::string opt(ok.str());
        OptionValue val = optionValue(file, opt, ov);
        // Check against a fresh instance even if the pipeline lacks the pass.
        if (auto set = r.create(pass)->setOption(opt, val); set.failed())
          fail(file, ov, set.diagnostic().message);
        forEachPass(out.pipeline.elements, [&](PipelineElement &e) {
          if (e.pass->name() == pass)
            (void)e.pass->setOption(opt, val);
        });
      }
    }
  }
  if (!out.rules.empty()) {
    // The rules go to every apply-rules without a file of its own.
    bool given = false;
    auto give = [&](Pass &p) {
      auto *c = dynamic_cast<RuleConsumer *>(&p);
      if (!c)
        return;
      if (auto set = c->setRules(out.rules); set.failed())
        throw Error(set.diagnostic());
      given = true;
    };
    forEachPass(out.pipeline.elements, [&](PipelineElement &e) {
      if (auto *a = dynamic_cast<ApplyRulesPass *>(e.pass.get()); a && a->file->empty())
        give(*e.pass);
    });
    if (!given) {
      if (!r.contains("apply-rules"))
        throw Error(out.rules.front().loc,
                    "[[rules]] need the 'apply-rules' pass: call tmg::registerMatcherPasses "
                    "(tm/passes/RulePasses.h) on the registry");
      PipelineElement e;
      e.pass = r.create("apply-rules");
      e.loc = out.rules.front().loc;
      give(*e.pass);
      out.pipeline.elements.push_back(std::move(e));
    }
  }
  return out;
}

} // namespace

RuleConsumer::~RuleConsumer() = default;


FailureOr<PipelineFile> parsePipelineToml(llvm::StringRef text, const std::string &file,
                                          const PassRegistry &r) {
  try {
    return parse(text, file, r);
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

FailureOr<PipelineFile> parsePipelineFile(const std::string &path, const PassRegistry &r) {
  auto text = tomltext::readText(path, "pipeline file");
  if (text.failed())
    return text.diagnostic();
  return parsePipelineToml(*text, path, r);
}

} // namespace tmg
