//===- Rules.h - Declarative rewrite rules ----------------------*- C++ -*-===//
//
// Rules written in config files or rule files (`[[rules]]`, see
// tm/matcher/RuleDecl.h), in a text syntax that mirrors the
// C++ DSL and compiles to the same matcher:
//
//   [[rules]]
//   name = "relu6-from-clip"
//   match = "nn.clip($x, 0, 6)"
//   replace = "nn.relu6($x)"
//   where = ["$x.rank == 4"]
//
// Pattern syntax (`|` binds loosest, then `+ -`, then `* /`, then unary `-`):
//   nn.relu(p)            a function (qualified name), positional patterns
//   relu(p)  Conv2d(p)    bare names: a module type, else a tensor method,
//                         else an Apply op def, else a function
//   p.reshape(...)        a tensor method on a receiver (`p + q` is
//                         `p.__add__(q)`, also `- * /`, unary `-p`)
//   module(p)             any module call
//   f(p, eps=1e-5)        a pattern for the argument of parameter `eps`
//   f(p, ...)             more tensor inputs allowed (`not_all_args`)
//   $x                    capture anything (the same name twice: the same
//                         value); `$x=p` captures what p matches
//   var const lit _ *     is_var, is_const, any literal, any value
//   1  2.5  'same'  None  True  (1, 2)     literals (6 matches 6.0)
//   p | q                 alternatives
//   .output(i) .has_attr(k=v) .check_users(false) .ordered()  modifiers
// `replace` uses the same syntax with captures, literals, functions and
// methods. `where` entries compare `$x.rank`, `$x.shape`, `$x.shape[i]`,
// `$x.dtype`, `$x.value` (a literal, or a one-element Constant tensor) or
// `$x.users` with a literal or another property: `==  !=  <  <=  >  >=`.
//
// Errors name `file:line:col` inside the rule text.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tm/matcher/Driver.h"
#include "tm/matcher/RuleDecl.h"

namespace tmg {

/// Parses a pattern in the rule syntax. `loc` is where the text starts (for
/// error locations). Throws tmg::Error naming file:line:col.
pat::Pat parsePattern(llvm::StringRef text, const Location &loc = Location::inFile("<pattern>", 1, 1));

/// Compiles rules into rewrite patterns (each with its constraints and
/// replacement). Throws tmg::Error naming the place of the first error.
std::vector<std::unique_ptr<RewritePattern>> compileRules(const std::vector<RuleDecl> &rules);
/// The name a rule's pattern has: its `name`, or "rule at FILE:LINE:COL".
std::string ruleName(const RuleDecl &r);
/// compileRules as a result.
FailureOr<std::shared_ptr<const FrozenPatternSet>>
compileRuleSet(const std::vector<RuleDecl> &rules);

} // namespace tmg
