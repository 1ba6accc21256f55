//===- ElementwiseProgram.h - Fused elementwise loops -----------*- C++ -*-===//
//
// Private to the runtime. A chain of elementwise ops (GELU's div, erf, add,
// mul, mul as PyTorch exports it; a layer norm's normalise, scale and
// shift) run op by op reads and writes the whole tensor once per op. The
// plan (Fuse.cpp) turns such a chain into an ElementwiseProgram that runs
// in one pass: chunks of each output row stay in L1 while every op is
// applied to them in turn. Each op runs the same code as its own kernel
// (binaryFloatRow, unaryFloatSpan in Elementwise.cpp), so the result is bit
// for bit the value of the unfused ops.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Reduce.h"

namespace tmg::rt {

/// Value i < numLeaves is leaf i (a tensor given when the program runs);
/// value numLeaves + k is the result of instruction k; the last
/// instruction's result is the program's output.
///
/// A program may reduce rows: reduce(op, a, {axis}, keepdims) over the
/// output's last axis gives a value of the output's shape with that axis 1
/// (a row value, one element per row), which later instructions broadcast
/// along the row (a layer norm's mean and variance, a softmax's max and
/// sum). Such a program runs one whole row at a time.
struct ElementwiseProgram {
  /// unary(*unary, a) when `unary` is set, reduce(*reduce, a, {axis},
  /// keepdims) when `reduce` is, else binary(binary, a, b).
  struct Instr {
    std::optional<UnaryOp> unary;
    BinaryOp binary = BinaryOp::Add;
    std::optional<ReduceOp> reduce;
    int64_t axis = -1;
    uint32_t a = 0, b = 0;
  };
  uint32_t numLeaves = 0;
  std::vector<Instr> instrs;
};

/// The longest row a program with row values runs (every value of a row
/// is in a per-thread buffer).
constexpr int64_t MaxFusedRow = 8192;

/// The program's output computed in one pass, or an undefined tensor when
/// that does not apply: a leaf that is not float32, an instruction whose
/// result would have neither the output's shape nor a row value's (a
/// broadcast between intermediate values), a reduction over another axis
/// than the last, or, with row values, rows longer than MaxFusedRow: the
/// ops then run one by one. Leaves may be strided views.
Tensor runFusedElementwise(const ElementwiseProgram &p,
                           llvm::ArrayRef<Tensor> leaves);

} // namespace tmg::rt
