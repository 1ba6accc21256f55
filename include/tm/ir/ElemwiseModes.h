//===- ElemwiseModes.h - Modes of the Elemwise builtin module ---*- C++ -*-===//
//
// MegEngine's Elemwise modes (megengine.module.Elemwise's `method`, the
// Elemwise op def's `mode`), with their number of inputs. Shape inference,
// the interpreter and the tracer look modes up here.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/StringRef.h>

namespace tmg {

struct ElemwiseMode {
  const char *name; ///< upper case, as MegEngine spells it: "FUSE_ADD_RELU"
  int arity;
  /// The result is bool (comparisons, logic, ISNAN/ISINF).
  bool predicate;
  /// The result is float even for integer inputs (TRUE_DIV, transcendental).
  bool toFloat;
};

/// The mode named `name` (case-insensitive, as MegEngine accepts "Add"),
/// or nullptr.
const ElemwiseMode *lookupElemwiseMode(llvm::StringRef name);

} // namespace tmg
