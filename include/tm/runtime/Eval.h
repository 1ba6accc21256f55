//===- Eval.h - Run one expr on given values --------------------*- C++ -*-===//
//
// Eager execution of a single recorded expr with the interpreter's own
// lowering (runtime/Lower.cpp): the tracer's eager mode and value
// computation use it, so an op runs on the same kernels whether it is
// called eagerly, while tracing or by the interpreter.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"

namespace tmg::rt {

/// Runs `e` (a CallFunction, a tensor CallMethod, a builtin module call, a
/// GetAttr, a Constant or an Apply) with `inputs[i]` bound to input node i
/// (module inputs: ignored, pass an undefined Tensor). Returns one tensor per
/// output. Calls of traced modules are not single exprs: run them with an
/// Interpreter. Throws tmg::Error naming the expr when the runtime does not
/// implement the op or a kernel rejects its arguments.
std::vector<Tensor> evalExpr(const Expr &e, llvm::ArrayRef<Tensor> inputs);

/// The kernel of a user function (a schema registered at run time, e.g. by
/// tmg::wrap): gets the CallFunction expr (for the structure of its
/// arguments) and one tensor per input node, returns one per output.
using FunctionKernel =
    std::function<std::vector<Tensor>(const Expr &, llvm::ArrayRef<Tensor>)>;
/// Registers (or replaces) the kernel of `fn`; thread-safe. The interpreter
/// and evalExpr run CallFunctions of `fn` with it.
void registerFunctionKernel(const OpSchema &fn, FunctionKernel k);
/// The kernel of `fn`, or an empty function.
FunctionKernel lookupFunctionKernel(const OpSchema &fn);

/// The kernel of a builtin module class registered at run time (e.g. a
/// C++ Layer made builtin with tmg::registerAsBuiltin): gets the module, the
/// call expr and one tensor per input node after the module; returns one
/// tensor per output.
using ModuleKernel = std::function<std::vector<Tensor>(const Module &, const Expr &,
                                                       llvm::ArrayRef<Tensor>)>;
void registerModuleKernel(const ModuleType &type, ModuleKernel k);
ModuleKernel lookupModuleKernel(const ModuleType &type);

} // namespace tmg::rt
