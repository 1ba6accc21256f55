//===- ElemwiseModule.h - The Elemwise builtin module -----------*- C++ -*-===//
#pragma once

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "Plan.h"

namespace tmg::rt {

/// `Elemwise(method)(*inputs)` computed with the elementwise kernels.
/// Throws tmg::Error at `loc` for an unknown mode, a wrong number of
/// inputs, or a mode the runtime does not implement.
Tensor elemwiseMode(const Location &loc, llvm::StringRef mode, llvm::ArrayRef<Tensor> ins);

/// The step of a call of an Elemwise module (any number of tensor inputs).
StepFn lowerElemwiseModule(const Expr &e, const Module &m, LowerContext &ctx);

/// The step of the `Elemwise` op def (an Apply whose `mode` attribute names
/// the mode, over the Apply's inputs). Registered by the elementwise family.
StepFn lowerElemwiseDef(const Expr &e, OpKind k, LowerContext &ctx);

} // namespace tmg::rt
