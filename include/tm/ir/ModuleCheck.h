//===- ModuleCheck.h - Builtin modules have what their kernels read -*- C++ -*-===//
//
// A builtin module (Linear, Conv2d, BatchNorm2d, ...) read from a file may
// lack a parameter or hold one of the wrong rank; its kernel would then
// dereference a missing tensor. These checks state, per builtin type, the
// tensors (name, required or optional, rank, float dtype, sizes that must
// agree) and value attributes (ints, pairs, numbers, strings and their
// ranges) the runtime's lowering reads, so that loading refuses what
// running could not do. verify() runs them over the module tree; the .tmir
// reader runs them per module to report the module's line.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

class Module;
class TracedModule;
struct SizeLimits;

/// Checks builtin module `m` (nothing for other modules, nor for its
/// submodules); `path` is its dotted name in the tree, for messages.
/// Appends one Diagnostic per problem.
void verifyBuiltinModule(const Module &m, llvm::StringRef path,
                         std::vector<Diagnostic> &diags);
/// verifyBuiltinModule on every module of the tree rooted at `root`.
void verifyBuiltinModules(const Module &root, std::vector<Diagnostic> &diags);

/// Checks the static shapes of the tensor nodes of `m`'s graphs (inputs
/// and every expr output, recursively) against `limits.maxTensorBytes`:
/// a graph that would need a larger tensor is refused before it runs.
/// Appends one Diagnostic (at the expr) per node that does not fit.
void checkNodeSizes(const TracedModule &m, const SizeLimits &limits,
                    std::vector<Diagnostic> &diags);

} // namespace tmg
