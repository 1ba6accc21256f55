//===- OpSchema.h - The op schema registry ----------------------*- C++ -*-===//
//
// One list of ops drives printing, parsing, matching and interpreter
// dispatch (DESIGN.md, "Style"). An OpSchema describes a builtin function
// (`CallFunction`, printed `nn.relu`), a tensor method (`CallMethod`,
// `x.__add__`) or an Apply op def: its name, the Python module it prints
// under, its parameter signature (names and defaults, for argument
// normalisation and `namedArg`), and its traits. The builtin ops are listed
// in `Ops.def`; users add their own (e.g. `tmg::wrap`) at run time.
//
// Schemas are interned: identity is pointer identity, and `OpKind` gives a
// switchable enum for builtin ops.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/TreeDef.h"

namespace tmg {

enum class OpKind : uint16_t {
#define TM_FUNCTION(ID, FAMILY, MOD, NAME, TRAITS, PARAMS) ID,
#define TM_METHOD(ID, FAMILY, NAME, TRAITS, PARAMS) ID,
#define TM_OPDEF(ID, FAMILY, NAME, TRAITS) ID,
#include "tm/ir/Ops.def"
  Custom, ///< registered at run time (user functions, plugins)
};

/// What an op is called through.
enum class OpClass : uint8_t { Function, TensorMethod, OpDef };

/// Op traits (a bit set).
enum OpTrait : uint32_t {
  TraitNone = 0,
  Commutative = 1u << 0, ///< binary op with f(a, b) == f(b, a)
  Elementwise = 1u << 1, ///< output element i depends on input element i
  Unary = 1u << 2,
  Binary = 1u << 3,
  Inplace = 1u << 4,     ///< `__iadd__` and friends
  Reflected = 1u << 5,   ///< `__radd__` and friends: operands swapped
  ShapeOnly = 1u << 6,   ///< reads only the input shape (shape, reshape...)
  Creation = 1u << 7,    ///< no tensor input required (zeros, arange, ...)
  MultiOutput = 1u << 8, ///< may return several tensors (split, ...)
  SideEffect = 1u << 9,  ///< `__setitem__`: mutates its receiver
  Associative = 1u << 10,
};

/// One formal parameter of an op: name and optional default.
struct OpParam {
  std::string name;
  bool hasDefault = false;
  TreeDef defaultValue; ///< a constant TreeDef (no node leaves)
  bool keywordOnly = false;
  bool variadic = false; ///< `*args`
};

class OpSchema {
public:
  OpKind kind() const { return kind_; }
  OpClass opClass() const { return class_; }
  /// Function or method name: "relu", "__add__", "GetVarShape".
  llvm::StringRef name() const { return name_; }
  /// The op family ("elementwise", "conv", ...): the file that implements
  /// the op in each layer. "custom" for ops registered at run time.
  llvm::StringRef family() const { return family_; }
  /// Python module the function prints under ("nn", "tensor", "elemwise").
  llvm::StringRef module() const { return module_; }
  /// "nn.relu" for functions, "__add__" for methods, "Elemwise" for op defs.
  llvm::StringRef printName() const { return printName_; }
  uint32_t traits() const { return traits_; }
  bool hasTrait(OpTrait t) const { return (traits_ & t) != 0; }
  bool isCommutative() const { return hasTrait(Commutative); }
  llvm::ArrayRef<OpParam> params() const { return params_; }
  /// Index of parameter `name`, or -1.
  int64_t paramIndex(llvm::StringRef name) const;
  /// The parameters by role, computed once at registration (argument
  /// binding runs for every expr a builder creates): the positional ones in
  /// order, the keyword-only ones sorted by name (the order their nodes are
  /// flattened in), and the index of `*args` (-1 when there is none).
  llvm::ArrayRef<uint32_t> positionalParams() const { return positional_; }
  llvm::ArrayRef<uint32_t> keywordOnlyParams() const { return keywordOnly_; }
  int64_t variadicParam() const { return variadic_; }

private:
  friend class OpRegistry;
  /// Fills the role lists from params_.
  void indexParams();
  std::vector<uint32_t> positional_, keywordOnly_;
  int64_t variadic_ = -1;
  OpKind kind_ = OpKind::Custom;
  OpClass class_ = OpClass::Function;
  std::string name_, module_, printName_, family_ = "custom";
  uint32_t traits_ = 0;
  std::vector<OpParam> params_;
};

/// The process-wide, thread-safe registry of op schemas. Registration is a
/// factory-style global (DESIGN.md: allowed for registries); lookups never
/// allocate. Schemas are never freed, so `const OpSchema*` stay valid.
class OpRegistry {
public:
  static OpRegistry &instance();

  /// Builtin op by kind.
  const OpSchema &get(OpKind k) const;
  /// Function by name: "relu" or qualified "nn.relu"; nullptr when unknown.
  const OpSchema *lookupFunction(llvm::StringRef name) const;
  /// Tensor method by name ("__add__", "reshape"); nullptr when unknown.
  const OpSchema *lookupMethod(llvm::StringRef name) const;
  /// Op def by name ("GetVarShape", "Elemwise"); nullptr when unknown.
  const OpSchema *lookupOpDef(llvm::StringRef name) const;

  /// Registers a user function printed as `module.name`. `params` use the
  /// signature syntax of Ops.def ("x", "axis=1", "*", "mode='x'"). Throws
  /// tmg::Error when the name is taken by a different signature; registering
  /// the same signature twice returns the existing schema.
  const OpSchema &registerFunction(llvm::StringRef module, llvm::StringRef name,
                                   llvm::ArrayRef<std::string> params,
                                   uint32_t traits = 0);
  /// Registers a tensor method (same rules).
  const OpSchema &registerMethod(llvm::StringRef name,
                                 llvm::ArrayRef<std::string> params,
                                 uint32_t traits = 0);

  /// All schemas, builtin first, in registration order.
  std::vector<const OpSchema *> all() const;

private:
  OpRegistry();
  struct Impl;
  Impl *impl_;
};

/// Shorthands.
inline const OpSchema &op(OpKind k) { return OpRegistry::instance().get(k); }
/// Throws tmg::Error naming the closest known op when `name` is unknown.
const OpSchema &functionOp(llvm::StringRef name);
const OpSchema &methodOp(llvm::StringRef name);

/// Parses one parameter spec of Ops.def syntax: "name", "name=default",
/// "*" (keyword-only marker, returned with an empty name), "*args".
/// Defaults are Python literals: None, True, False, ints, floats, 'strings',
/// and tuples of those. Throws tmg::Error on malformed text.
OpParam parseOpParam(llvm::StringRef spec);
/// Parses a Python literal (as in a default value) into a constant TreeDef.
TreeDef parsePyLiteral(llvm::StringRef text);

} // namespace tmg
