//===- Reduce.h - Reductions ------------------------------------*- C++ -*-===//
//
// Reductions over a set of axes, NumPy style: `axes` lists axes (negative
// ones count from the end; no duplicates); an empty list reduces all axes.
// With keepdims the reduced axes stay as size 1.
//
// Dtypes: float32, int32 and int64 (sum, prod, max and min keep the dtype,
// with integer sums wrapping; mean returns float32). float16 is reduced in
// float32 and converted back (mean stays float32); bool, int8 and uint8 are
// reduced as int32 (so the sum of a bool mask counts its true elements).
// float32 sums and means accumulate in double. Results are deterministic: large reductions are
// split into a fixed number of chunks that depends on the shape only, and
// the partial results are combined in chunk order.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Common.h"

namespace tmg::rt {

enum class ReduceOp : uint8_t { Sum, Mean, Max, Min, Prod };

/// "sum", "mean", "max", "min", "prod".
llvm::StringRef opName(ReduceOp op);

/// Reduces `x` over `axes`. Sum and prod of nothing are 0 and 1, the mean of
/// nothing is NaN; max and min throw when a reduced axis has size 0. max
/// and min propagate NaN.
Tensor reduce(ReduceOp op, const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
              bool keepdims = false);

inline Tensor sum(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
                  bool keepdims = false) {
  return reduce(ReduceOp::Sum, x, axes, keepdims);
}
inline Tensor mean(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
                   bool keepdims = false) {
  return reduce(ReduceOp::Mean, x, axes, keepdims);
}
inline Tensor max(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
                  bool keepdims = false) {
  return reduce(ReduceOp::Max, x, axes, keepdims);
}
inline Tensor min(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
                  bool keepdims = false) {
  return reduce(ReduceOp::Min, x, axes, keepdims);
}
inline Tensor prod(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
                   bool keepdims = false) {
  return reduce(ReduceOp::Prod, x, axes, keepdims);
}

/// int64 index of the first maximum (argmax) or minimum (argmin) over
/// `axes`. With several reduced axes the index is the row-major position
/// within the reduced sub-tensor (so an empty `axes` gives the flat index,
/// as NumPy's argmax(axis=None)). NaN counts as the extreme value. Throws
/// when a reduced axis has size 0.
Tensor argmax(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
              bool keepdims = false);
Tensor argmin(const Tensor &x, llvm::ArrayRef<int64_t> axes = {},
              bool keepdims = false);

} // namespace tmg::rt
