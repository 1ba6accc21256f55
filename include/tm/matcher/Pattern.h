//===- Pattern.h - The pattern DSL ------------------------------*- C++ -*-===//
//
// Patterns describe a piece of graph to find: ops (functions, tensor
// methods, Apply op defs, module calls), leaves (any value, a variable, a
// Constant expr, a literal argument), alternatives, captures and
// predicates. They mirror MegEngine's `_passes/pattern.py` (`is_op`,
// `is_var`, `is_const`, `any_node`, `|`, `+ - * /`, `has_attr`,
// `has_params`, `check_users`) and add what XLA, MLIR and TVM offer:
//
//   using namespace tmg::pat;
//   Pat x = var("x");
//   Pat p = fn("relu")(fn("relu")(x));                  // relu(relu(x))
//   Pat q = (x + constant("c")) | (x * constant("c"));   // alternatives
//   Pat r = module<Conv2d>().hasAttr("groups", 1)(x).bind("conv");
//   Pat s = fn("split")(x, any()).output(1);             // one output
//
// A `Pat` is an immutable handle to a pattern node; modifiers return new
// handles, so a pattern shared by several threads is never written. Using
// the same handle twice in one pattern makes a DAG pattern: both places
// must bind the same value (`x * x`). Op names are resolved to interned
// schemas (or module types) when the pattern is built, so matching never
// compares strings. `Pattern` (Matcher.h) compiles one or more roots for
// matching.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"
#include "tm/ir/OpSchema.h"
#include "tm/ir/Tensor.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class Match;

namespace pat {

class Pat;
template <typename T> class Capture;

/// What a capture handle binds: any node, a tensor, a module node, or the
/// producing expr.
enum class CaptureType : uint8_t { Node, Tensor, Module, Expr };

/// The identity of a typed capture handle (see `Capture<T>`).
struct CaptureKey {
  CaptureType type;
  /// For Expr handles: the producer must satisfy this isa test.
  bool (*exprIsa)(const Expr *) = nullptr;
};

/// A predicate on a matched value with a description for `explain`.
/// `node` is set for values that are nodes, `literal` for constant
/// arguments (exactly one of them is non-null).
struct Predicate {
  std::string description;
  std::function<bool(const Node *node, const TreeDef *literal)> fn;
};

/// An immutable pattern node. Built only through the functions below.
struct PatternNode {
  enum class Kind : uint8_t {
    Any,      ///< any value: node or literal (`any_node`)
    Var,      ///< a node not produced by a Constant (`is_var`)
    Const,    ///< a node produced by a Constant expr (`is_const`)
    Lit,      ///< a literal argument, equal to `literal` when set
    Op,       ///< a call: op identity, argument patterns, constraints
    Or,       ///< alternatives, tried in order (`|`)
  };
  enum class OpTarget : uint8_t {
    Schema,     ///< CallFunction / tensor CallMethod / Apply by schema
    Module,     ///< module call whose module type isa `moduleType`
    AnyModule,  ///< any module call
  };
  Kind kind = Kind::Any;
  // -- Op ----------------------------------------------------------------------
  OpTarget target = OpTarget::Schema;
  const OpSchema *schema = nullptr;
  const ModuleType *moduleType = nullptr;
  /// Argument patterns by position (for module calls, after the module).
  std::vector<std::shared_ptr<const PatternNode>> args;
  /// Argument patterns by parameter name (`namedArg`), with the schema's
  /// parameter index resolved at build time (-1: a kwarg of a module call).
  struct Keyword {
    std::string name;
    int64_t paramIndex;
    std::shared_ptr<const PatternNode> pattern;
  };
  std::vector<Keyword> kwargs;
  /// Every tensor input must be covered by an argument pattern (MegEngine's
  /// default); `prefix()` turns it off (`not_all_args`).
  bool allArgs = true;
  /// Try both operand orders of a binary op whose schema has the
  /// Commutative trait (set from the trait; `ordered()` clears it).
  bool commutative = false;
  /// Which output the matched node must be (-1: any).
  int outputIndex = -1;
  /// `has_attr` on module calls: attribute name and required value.
  std::vector<std::pair<std::string, TreeDef>> attrs;
  // -- Lit ------------------------------------------------------------------------
  std::optional<TreeDef> literal;
  // -- Or ---------------------------------------------------------------------------
  std::vector<std::shared_ptr<const PatternNode>> alts;
  // -- Common ------------------------------------------------------------------------
  std::string name;                  ///< capture name ("" = none)
  std::shared_ptr<const CaptureKey> key; ///< typed capture handle
  /// Users of the matched node must all be inside the match. Unset: true
  /// for non-root ops, false for leaves and roots.
  std::optional<bool> checkUsers;
  std::vector<Predicate> preds;

  /// The pattern in the text-rule syntax: `nn.relu(nn.relu($x))`.
  std::string str() const;
};
using PatternRef = std::shared_ptr<const PatternNode>;

/// An argument of a call pattern: a pattern, or a literal value (which
/// becomes `lit(value)`).
class PatArg;

/// A handle to an immutable pattern node.
class Pat {
public:
  Pat() = default;
  explicit Pat(PatternRef n) : n_(std::move(n)) {}

  const PatternNode &node() const { return *n_; }
  const PatternRef &ref() const { return n_; }
  bool valid() const { return n_ != nullptr; }

  /// Call pattern: this op applied to `args` (positional argument slots).
  Pat operator()(std::vector<PatArg> args) const;
  template <typename... A> Pat operator()(A &&...args) const {
    return (*this)(std::vector<PatArg>{PatArg(std::forward<A>(args))...});
  }
  /// Argument bound to parameter `param` (positional or keyword), as
  /// MegEngine's `named_args`.
  Pat kwarg(llvm::StringRef param, const PatArg &p) const;

  /// Captures the matched value under `name` (`Match::node("x")`).
  Pat bind(llvm::StringRef name) const;
  /// Captures into a typed handle; a Tensor/Module handle also requires the
  /// matched node to be of that kind.
  template <typename T> Pat bind(const Capture<T> &c) const;
  /// MegEngine's `check_users`: no users of the matched value outside the
  /// match.
  Pat checkUsers(bool on = true) const;
  /// MegEngine's `not_all_args`: unmentioned tensor inputs are allowed.
  Pat prefix() const;
  /// Match operands only in the written order (no commutative retry).
  Pat ordered() const;
  /// Selects output `i` of a multi-output expr.
  Pat output(int i) const;
  /// MegEngine's `has_attr` (module calls): the module's attribute equals.
  Pat hasAttr(llvm::StringRef attr, TreeDef value) const;
  Pat hasAttr(llvm::StringRef attr, Scalar value) const {
    return hasAttr(attr, TreeDef::constant(std::move(value)));
  }
  /// MegEngine's `has_params` (functions and methods): the argument bound to
  /// parameter `param` is the literal `value`.
  Pat hasParam(llvm::StringRef param, TreeDef value) const;
  Pat hasParam(llvm::StringRef param, Scalar value) const {
    return hasParam(param, TreeDef::constant(std::move(value)));
  }
  /// A predicate on the matched value.
  Pat where(std::string description,
            std::function<bool(const Node *, const TreeDef *)> fn) const;
  /// Predicates on tensor nodes (false for literals and unknown types).
  Pat withShape(Shape s) const;
  Pat withRank(int64_t rank) const;
  Pat withDType(DType t) const;
  /// A literal, or a Constant tensor with one element, equal to `v`.
  Pat withValue(double v) const;

  /// Alternatives: this, else `o`.
  Pat operator|(const Pat &o) const;

  std::string str() const { return n_ ? n_->str() : "<null>"; }

private:
  Pat modified(const std::function<void(PatternNode &)> &f) const;
  PatternRef n_;
};

/// A typed capture handle: declare it, bind it in a pattern, read it from a
/// successful Match (`m[h]`). T is Node, TensorNode, ModuleNode, or an Expr
/// class (binds the producer; CallFunction/CallMethod/Apply/Constant also
/// check the producer's kind).
template <typename T> class Capture {
public:
  Capture() : key_(std::make_shared<CaptureKey>(CaptureKey{typeOf(), &exprIsa})) {}
  const std::shared_ptr<const CaptureKey> &key() const { return key_; }

private:
  static constexpr CaptureType typeOf() {
    if constexpr (std::is_same_v<T, TensorNode>)
      return CaptureType::Tensor;
    else if constexpr (std::is_same_v<T, ModuleNode>)
      return CaptureType::Module;
    else if constexpr (std::is_base_of_v<Expr, T>)
      return CaptureType::Expr;
    else
      return CaptureType::Node;
  }
  static bool exprIsa(const Expr *e) {
    if constexpr (std::is_base_of_v<Expr, T>)
      return e && llvm::isa<T>(e);
    else
      return true;
  }
  std::shared_ptr<const CaptureKey> key_;
};

template <typename T> Pat Pat::bind(const Capture<T> &c) const {
  return modified([&](PatternNode &n) { n.key = c.key(); });
}

class PatArg {
public:
  PatArg(Pat p) : p_(std::move(p)) {}
  PatArg(Scalar v);
  PatArg(int v) : PatArg(Scalar(v)) {}
  PatArg(int64_t v) : PatArg(Scalar(v)) {}
  PatArg(double v) : PatArg(Scalar(v)) {}
  PatArg(bool v) : PatArg(Scalar(v)) {}
  PatArg(const char *v) : PatArg(Scalar(v)) {}
  const Pat &pat() const { return p_; }

private:
  Pat p_;
};

// -- Leaves ------------------------------------------------------------------------
/// Any value: a node or a literal argument (MegEngine's `any_node`).
Pat any(llvm::StringRef name = "");
/// A node not produced by a Constant expr (`is_var`).
Pat var(llvm::StringRef name = "");
/// A node produced by a Constant expr (`is_const`).
Pat constant(llvm::StringRef name = "");
/// Any literal (non-tensor) argument: a wildcard that ignores it.
Pat lit();
/// A literal argument equal to `v` (numbers compare by value: 6 == 6.0).
Pat lit(TreeDef v);
Pat lit(Scalar v);

// -- Ops --------------------------------------------------------------------------------
/// A builtin or registered function ("relu", "nn.relu"). Throws tmg::Error
/// naming the closest op when unknown.
Pat fn(llvm::StringRef name);
/// A tensor method ("__add__", "reshape").
Pat method(llvm::StringRef name);
/// An Apply op def ("GetVarShape").
Pat opdef(llvm::StringRef name);
/// An op by schema (function, method or op def).
Pat op(const OpSchema &s); ///< e.g. `op(tmg::op(OpKind::Relu))`
/// A module call whose module isa `t` (subclass-inclusive, as MegEngine).
Pat module(const ModuleType &t);
template <typename M> Pat module() { return module(M::staticType()); }
/// A module call of any module.
Pat anyModule();
/// MegEngine's `is_op`: a module type name ("Conv2d"), else a tensor
/// method, else an op def, else a function.
Pat isOp(llvm::StringRef name);

// -- Operator sugar (MegEngine's `ExprPattern.__add__` & co.) ----------------------------
Pat operator+(const Pat &a, const PatArg &b);
Pat operator-(const Pat &a, const PatArg &b);
Pat operator*(const Pat &a, const PatArg &b);
Pat operator/(const Pat &a, const PatArg &b);
Pat operator-(const Pat &a); ///< `__neg__`

} // namespace pat
} // namespace tmg
