//===- Eval.h - Run one expr on given values --------------------*- C++ -*-===//
//
// Eager execution of a single recorded expr with the interpreter's own
// lowering (runtime/Lower.cpp): the tracer's eager mode and value
// computation use it, so an op runs on the same kernels whether it is
// called eagerly, while tracing or by the interpreter.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "tm/ir/Expr.h"

namespace tmg::rt {

/// Runs `e` (a CallFunction, a tensor CallMethod, a builtin module call, a
/// GetAttr, a Constant or an Apply) with `inputs[i]` bound to input node i
/// (module inputs: ignored, pass an undefined Tensor). Returns one tensor per
/// output. Calls of traced modules are not single exprs: run them with an
/// Interpreter. Throws tmg::Error naming the expr when the runtime does not
/// implement the op or a kernel rejects its arguments.
std::vector<Tensor> evalExpr(const Expr &e, llvm::ArrayRef<Tensor> inputs);

} // namespace tmg::rt
