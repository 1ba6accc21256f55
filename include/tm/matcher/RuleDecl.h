//===- RuleDecl.h - Declarative rules as written in TOML --------*- C++ -*-===//
//
// A rule file (or a pipeline config's `[[rules]]`) declares rewrite rules
// whose texts tm/matcher/Rules.h compiles:
//
//   [[rules]]
//   name = "relu6-from-clip"
//   match = "nn.clip($x, 0, 6)"
//   replace = "nn.relu6($x)"
//   where = ["$x.rank == 4"]      # optional constraints
//   benefit = 2                   # optional, default 1
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

/// One `[[rules]]` table. Each location points at the first character of
/// its text in the file.
struct RuleDecl {
  std::string name;
  std::string match, replace;
  std::vector<std::string> where;
  int64_t benefit = 1;
  Location loc; ///< the rule's table
  Location matchLoc, replaceLoc;
  std::vector<Location> whereLocs;
};

/// Reads the `[[rules]]` tables of a TOML text. With `rulesOnly`, any other
/// top-level key is an error (a rules file); otherwise it is ignored.
FailureOr<std::vector<RuleDecl>> parseRulesToml(llvm::StringRef text, const std::string &file,
                                                bool rulesOnly);
/// parseRulesToml of the file at `path`, as a rules file.
FailureOr<std::vector<RuleDecl>> parseRulesFile(const std::string &path);

} // namespace tmg
