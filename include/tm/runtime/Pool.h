//===- Pool.h - Pooling -----------------------------------------*- C++ -*-===//
//
// 2-D pooling on NCHW float32 tensors (rank 4, or rank 3 (C, H, W) which is
// treated as one image). Windows are computed independently per (n, c)
// plane; planes are distributed over OpenMP threads.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>

#include "tm/runtime/Common.h"

namespace tmg::rt {

/// Attributes of max_pool2d and avg_pool2d (PyTorch semantics).
struct Pool2dParams {
  Int2 kernel = 1;
  std::optional<Int2> stride; ///< defaults to `kernel`
  Int2 padding = 0;           ///< on both sides; at most half the kernel
  Int2 dilation = 1;          ///< max_pool2d only; must be 1 for avg_pool2d
  /// Output size rounds up instead of down; a window that would start in
  /// the bottom/right padding is dropped (PyTorch's rule).
  bool ceilMode = false;
  /// avg_pool2d only: divide by the full window size including padded
  /// positions (PyTorch's default, MegEngine's 'average') instead of the
  /// number of input elements (MegEngine's default
  /// 'average_count_exclude_padding'). Positions past the padding, created
  /// by ceilMode, never count.
  bool countIncludePad = false;
};

/// Maximum over each window; padded positions never win.
Tensor maxPool2d(const Tensor &input, const Pool2dParams &params);
/// Mean over each window (see Pool2dParams::countIncludePad).
Tensor avgPool2d(const Tensor &input, const Pool2dParams &params);

/// Adaptive pooling to `outputSize`: output cell (i, j) covers rows
/// [floor(i * H / Ho), ceil((i + 1) * H / Ho)) and likewise columns.
/// outputSize must be positive; H and W must be positive.
Tensor adaptiveAvgPool2d(const Tensor &input, Int2 outputSize);
Tensor adaptiveMaxPool2d(const Tensor &input, Int2 outputSize);

/// Mean / maximum over each (H, W) plane: (N, C, H, W) -> (N, C, 1, 1).
Tensor globalAvgPool2d(const Tensor &input);
Tensor globalMaxPool2d(const Tensor &input);

} // namespace tmg::rt
