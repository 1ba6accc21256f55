//===- OpCoverage.h - Which builtin ops the runtime can run -----*- C++ -*-===//
//
// The runtime lowers each builtin op through its lowering table, filled by
// one file per op family (runtime/ops/<family>.cpp). These queries report
// that table's coverage, for tools and for the op-coverage test.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/OpSchema.h"

namespace tmg {
struct ModuleType;
}

namespace tmg::rt {

/// The builtin ops the runtime cannot run, in Ops.def order.
std::vector<OpKind> opsWithoutKernel();

/// The family whose file lowers `k` ("conv"), or "" when the runtime has no
/// kernel for it.
llvm::StringRef kernelFamily(OpKind k);

/// The builtin module types the runtime lowers (a subclass without an
/// entry of its own runs as its base); kernels registered with
/// registerModuleKernel (tm/runtime/Eval.h) come on top.
std::vector<const ModuleType *> modulesWithLowering();

} // namespace tmg::rt
