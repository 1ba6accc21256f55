//===- RuleAst.h - The syntax tree of rule texts (internal) ---------------===//
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tm/matcher/Pattern.h"

namespace tmg::rules {

/// One parsed expression of a rule's `match` or `replace` text.
struct Ast {
  enum class K : uint8_t { Capture, Any, Var, Const, LitAny, Lit, Call, Or };
  K k = K::Any;
  size_t pos = 0; ///< byte offset in the text
  // Capture
  std::string name;
  std::unique_ptr<Ast> inner; ///< `$x=inner`
  // Lit
  TreeDef literal;
  // Call
  pat::PatternNode::OpTarget target = pat::PatternNode::OpTarget::Schema;
  const OpSchema *schema = nullptr;
  const ModuleType *module = nullptr;
  std::vector<std::unique_ptr<Ast>> args;
  struct Kw {
    std::string name;
    size_t pos;
    std::unique_ptr<Ast> value;
  };
  std::vector<Kw> kwargs;
  bool prefix = false;
  int output = -1;
  std::vector<std::pair<std::string, TreeDef>> attrs;
  bool ordered = false;
  bool hasModifiers = false;
  std::optional<bool> checkUsers;
  // Or
  std::vector<std::unique_ptr<Ast>> alts;
};

/// A text with the location of its first character.
struct Source {
  llvm::StringRef text;
  Location loc;
  /// The location of byte `off`.
  Location at(size_t off) const;
  [[noreturn]] void error(size_t off, const std::string &msg) const;
};

/// Parses a `match` or `replace` expression.
std::unique_ptr<Ast> parseExpr(const Source &src);

/// Operand of a `where` comparison.
struct WhereOperand {
  bool isCapture = false;
  std::string capture;
  size_t pos = 0;
  std::string prop;   ///< "", rank, shape, dtype, value, users
  std::optional<int64_t> index; ///< shape[i]
  TreeDef literal;    ///< when not a capture
  bool bareWord = false; ///< an identifier used as a string (float32)
};
struct WhereClause {
  WhereOperand lhs, rhs;
  std::string op; ///< == != < <= > >=
  std::string text;
};
WhereClause parseWhere(const Source &src);

} // namespace tmg::rules
