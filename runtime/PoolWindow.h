//===- PoolWindow.h - 2-D pooling with any window geometry ------*- C++ -*-===//
//
// The N-d pools (max_pool_nd, avg_pool_nd: ONNX's MaxPool and AveragePool
// with ceil_mode, asymmetric or large paddings, dilations) with two spatial
// axes run on the 2-D plane kernels of Pool.cpp, which vectorise along rows.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <utility>

#include <llvm/ADT/ArrayRef.h>

#include "tm/ir/Tensor.h"
#include "tm/runtime/Extra.h"

namespace tmg::rt::detail {

/// Max (isMax) or average pooling of the float32 (N, C, H, W) `x` with the
/// checked window `p` (two axes) into an (N, C, outSize[0], outSize[1])
/// result: the same values, NaN rules and summation order as the N-d loop.
Tensor pool2dWindow(const Tensor &x, const WindowNd &p, llvm::ArrayRef<int64_t> outSize,
                    bool isMax);

/// A 2-D max pool (`p`, two axes, checked) of H x W planes into oh x ow
/// ones, run on bands of input rows as a producer (a convolution whose
/// output only the pool reads) computes them: the input is never whole.
/// The same plane kernels, hence the same bits, as pool2dWindow.
class MaxPoolRows {
public:
  MaxPoolRows(const WindowNd &p, int64_t h, int64_t w, int64_t oh, int64_t ow);
  /// The input rows [first, second) that output rows [y0, y1) read,
  /// clamped to the plane (y0 < y1).
  std::pair<int64_t, int64_t> inputRows(int64_t y0, int64_t y1) const;
  /// Floats of scratch that pool() needs.
  int64_t scratchFloats() const;
  /// Output rows [y0, y1) of one plane, into `out` (the oh x ow output
  /// plane), from `rows`: input rows inputRows(y0, y1) of the plane,
  /// `pitch` floats apart (0: w).
  void pool(const float *rows, int64_t y0, int64_t y1, float *out,
            float *scratch, int64_t pitch = 0) const;
  int64_t oh, ow;

private:
  int64_t h_, w_, kh_, kw_, sh_, sw_, ph_, pw_, dh_, dw_;
};

} // namespace tmg::rt::detail
