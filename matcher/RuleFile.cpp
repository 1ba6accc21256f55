//===- RuleFile.cpp - [[rules]] tables of TOML texts ----------------------===//
#include "tm/matcher/RuleDecl.h"

#include <algorithm>

#include "TomlText.h"

#include "tm/ir/Suggest.h"

namespace tmg {

namespace {

using tomltext::at;
using tomltext::fail;

/// Where the text of string node `n` starts: one column after a `"` or
/// `'`, three after a multi-line delimiter (on the next line when a newline
/// follows it, which TOML trims).
Location textStart(const std::string &file, llvm::StringRef text, const toml::node &n) {
  auto b = n.source().begin;
  Location l = Location::inFile(file, int64_t(b.line), int64_t(b.column) + 1);
  // The byte offset of the node's first character.
  size_t off = 0;
  for (uint32_t line = 1; line < b.line && off < text.size(); ++off)
    if (text[off] == '\n')
      ++line;
  off += b.column - 1;
  if (off + 3 <= text.size() &&
      (text.substr(off, 3) == "\"\"\"" || text.substr(off, 3) == "'''")) {
    l.column = int64_t(b.column) + 3;
    size_t after = off + 3;
    if (after < text.size() && (text[after] == '\n' || text.substr(after, 2) == "\r\n")) {
      l.line += 1;
      l.column = 1;
    }
  }
  return l;
}

const std::vector<std::string> RuleKeys = {"name", "match", "replace", "where", "benefit"};

std::vector<RuleDecl> parseRules(llvm::StringRef text, const std::string &file,
                                 const toml::node &v) {
  const toml::array *arr = v.as_array();
  if (!arr || !arr->is_array_of_tables())
    fail(file, v, "'rules' must be an array of tables ([[rules]])");
  std::vector<RuleDecl> out;
  for (const toml::node &t : *arr) {
    const toml::table &tab = *t.as_table();
    RuleDecl d;
    d.loc = at(file, tab.source());
    auto str = [&](const char *key, bool required, std::string &dst, Location &loc) {
      const toml::node *n = tab.get(key);
      if (!n) {
        if (required)
          throw Error(d.loc, fmt::format("rule{} needs '{}'",
                                         d.name.empty() ? "" : " '" + d.name + "'", key));
        return;
      }
      if (!n->is_string())
        fail(file, *n, fmt::format("'{}' of a rule must be a string", key));
      dst = *n->value<std::string>();
      loc = textStart(file, text, *n);
    };
    Location ignored;
    str("name", false, d.name, ignored);
    str("match", true, d.match, d.matchLoc);
    str("replace", true, d.replace, d.replaceLoc);
    if (const toml::node *w = tab.get("where")) {
      if (w->is_string()) {
        d.where.push_back(*w->value<std::string>());
        d.whereLocs.push_back(textStart(file, text, *w));
      } else if (const toml::array *wa = w->as_array()) {
        for (const toml::node &x : *wa) {
          if (!x.is_string())
            fail(file, x, "'where' expects a string or an array of strings");
          d.where.push_back(*x.value<std::string>());
          d.whereLocs.push_back(textStart(file, text, x));
        }
      } else {
        fail(file, *w, "'where' expects a string or an array of strings");
      }
    }
    if (const toml::node *b = tab.get("benefit")) {
      if (!b->is_integer())
        fail(file, *b, "'benefit' of a rule must be an integer");
      d.benefit = *b->value<int64_t>();
    }
    for (auto &[k, x] : tab) {
      std::string key(k.str());
      if (std::find(RuleKeys.begin(), RuleKeys.end(), key) == RuleKeys.end())
        fail(file, x, fmt::format("unknown key '{}' in a rule; did you mean '{}'?", key,
                                  closestName(key, RuleKeys)));
    }
    if (d.name.empty())
      d.name = fmt::format("rule-{}", out.size() + 1);
    out.push_back(std::move(d));
  }
  return out;
}


} // namespace

FailureOr<std::vector<RuleDecl>> parseRulesToml(llvm::StringRef text, const std::string &file,
                                                bool rulesOnly) {
  try {
    toml::table root = tomltext::parse(text, file);
    std::vector<RuleDecl> out;
    for (auto &[k, v] : root) {
      std::string key(k.str());
      if (key == "rules")
        out = parseRules(text, file, v);
      else if (rulesOnly)
        fail(file, v, fmt::format("unknown key '{}' in a rules file (it holds [[rules]] "
                                  "tables only)",
                                  key));
    }
    return out;
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

FailureOr<std::vector<RuleDecl>> parseRulesFile(const std::string &path) {
  auto text = tomltext::readText(path, "rules file");
  if (text.failed())
    return text.diagnostic();
  return parseRulesToml(*text, path, true);
}

} // namespace tmg
