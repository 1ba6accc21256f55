//===- StateDict.h - state_dict and load_state_dict -------------*- C++ -*-===//
//
// The reference's `Module.state_dict()` / `load_state_dict()` on any
// Module, TracedModule included: parameters and buffers by dotted name.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Module.h"

namespace tmg {

/// Parameters and buffers by dotted name, in stateDict() order.
using StateDict = std::vector<std::pair<std::string, Tensor>>;

/// What loadStateDict did with the keys.
struct LoadStateReport {
  std::vector<std::string> loaded;
  /// Keys of the module absent from the state dict (kept unchanged).
  std::vector<std::string> missing;
  /// Keys of the state dict that name no tensor of the module.
  std::vector<std::string> unexpected;
};

/// Every parameter and buffer of the tree rooted at `m` by dotted name, in
/// MegEngine's order (`Module._flatten`): the module's own tensors sorted
/// by attribute name, then each submodule (sorted by name) recursively; the
/// items of a ModuleList in index order. A tensor held under two names of
/// one module (the same storage, offset, strides, shape and dtype) appears
/// once, under the first name; one shared by two modules appears under
/// both. The values share storage with the module's tensors.
/// O(tensors log tensors).
StateDict stateDict(const Module &m);

/// Replaces each tensor of stateDict(m) by a copy of the value under its
/// key. Shape and dtype must match and a key may appear once; with
/// `strict`, missing and unexpected keys are errors too, otherwise they are
/// listed in the report. All or nothing: on failure no tensor changes and
/// the diagnostic has one note per problem. Tensors shared by several
/// attributes stay shared (each attribute gets the same new tensor; of two
/// keys naming one tensor, the later wins, as in the reference).
FailureOr<LoadStateReport> loadStateDict(Module &m, const StateDict &sd,
                                         bool strict = true);

} // namespace tmg
