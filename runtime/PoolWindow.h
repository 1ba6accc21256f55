//===- PoolWindow.h - 2-D pooling with any window geometry ------*- C++ -*-===//
//
// The N-d pools (max_pool_nd, avg_pool_nd: ONNX's MaxPool and AveragePool
// with ceil_mode, asymmetric or large paddings, dilations) with two spatial
// axes run on the 2-D plane kernels of Pool.cpp, which vectorise along rows.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include "tm/ir/Tensor.h"
#include "tm/runtime/Extra.h"

namespace tmg::rt::detail {

/// Max (isMax) or average pooling of the float32 (N, C, H, W) `x` with the
/// checked window `p` (two axes) into an (N, C, outSize[0], outSize[1])
/// result: the same values, NaN rules and summation order as the N-d loop.
Tensor pool2dWindow(const Tensor &x, const WindowNd &p, llvm::ArrayRef<int64_t> outSize,
                    bool isMax);

} // namespace tmg::rt::detail
