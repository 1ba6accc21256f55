//===- OpTable.h - Per-layer implementation tables keyed by op --*- C++ -*-===//
//
// Each layer that implements ops (shape rules, runtime lowering, ONNX export)
// keeps one OpTable: an op family's file registers its implementations, and
// the layer finds them by op kind, never through a `switch` with a
// `default:` (DESIGN.md, "Ops: one registry, one file per family and
// layer"). A table is filled once, by its layer's list of family
// registration functions, and read-only afterwards; `missing()` is what the
// op-coverage test walks.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/OpSchema.h"

namespace tmg {

/// Number of builtin op kinds (those listed in Ops.def).
inline constexpr size_t kNumOpKinds = size_t(OpKind::Custom);

/// The printed name of a builtin op ("nn.relu", "__add__", "GetVarShape").
inline std::string opKindName(OpKind k) { return op(k).printName().str(); }

/// Every builtin op kind, in Ops.def order.
inline std::vector<OpKind> allOpKinds() {
  std::vector<OpKind> all;
  all.reserve(kNumOpKinds);
  for (size_t i = 0; i < kNumOpKinds; ++i)
    all.push_back(OpKind(i));
  return all;
}

/// One implementation (`Impl`: a function pointer or small callable) per
/// builtin op kind, plus the name of the family file that registered it.
template <typename Impl> class OpTable {
public:
  /// `layer` names the table in errors and coverage reports ("runtime").
  explicit OpTable(llvm::StringRef layer)
      : layer_(layer.str()), impls_(kNumOpKinds), families_(kNumOpKinds) {}

  llvm::StringRef layer() const { return layer_; }

  /// Registers `impl` for each of `kinds` on behalf of `family`, which must
  /// be each op's family in Ops.def: an op is implemented in its family's
  /// file of every layer. A kind of another family, or registered twice, is
  /// a programmer error and throws tmg::Error naming both.
  void add(llvm::StringRef family, std::initializer_list<OpKind> kinds, Impl impl) {
    for (OpKind k : kinds) {
      size_t i = size_t(k);
      if (i >= kNumOpKinds)
        raise("{}: family '{}' registers a non-builtin op", layer_, family.str());
      if (op(k).family() != family)
        raise("{}: family '{}' registers '{}' of family '{}'", layer_, family.str(),
              opKindName(k), op(k).family().str());
      if (!families_[i].empty())
        raise("{}: op '{}' is registered by both '{}' and '{}'", layer_, opKindName(k),
              families_[i], family.str());
      impls_[i] = impl;
      families_[i] = family.str();
    }
  }

  /// The implementation of `k`, or nullptr when no family registered one.
  const Impl *lookup(OpKind k) const {
    size_t i = size_t(k);
    return i < kNumOpKinds && !families_[i].empty() ? &impls_[i] : nullptr;
  }
  bool contains(OpKind k) const { return lookup(k) != nullptr; }

  /// The family that registered `k` ("" when none).
  llvm::StringRef family(OpKind k) const {
    size_t i = size_t(k);
    return i < kNumOpKinds ? llvm::StringRef(families_[i]) : llvm::StringRef();
  }

  /// The builtin ops without an implementation, in Ops.def order.
  std::vector<OpKind> missing() const {
    std::vector<OpKind> out;
    for (size_t i = 0; i < kNumOpKinds; ++i)
      if (families_[i].empty())
        out.push_back(OpKind(i));
    return out;
  }

private:
  std::string layer_;
  std::vector<Impl> impls_;
  std::vector<std::string> families_;
};

} // namespace tmg
