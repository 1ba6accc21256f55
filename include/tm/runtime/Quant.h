//===- Quant.h - Fake quantisation ------------------------------*- C++ -*-===//
//
// Quantise-dequantise in float32, MegEngine's fake_quant:
//   q = clamp(round(x / scale) + zeroPoint, qmin, qmax)
//   y = (q - zeroPoint) * scale
// `round` rounds half away from zero (MegEngine's kernel uses C round()).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tm/runtime/Common.h"

namespace tmg::rt {

/// Per-tensor fake quantisation. scale must be finite and > 0, qmin <= qmax,
/// and zeroPoint within [qmin, qmax].
Tensor fakeQuantize(const Tensor &x, float scale, int64_t zeroPoint,
                    int64_t qmin, int64_t qmax);

/// Per-channel fake quantisation along `axis`: scale (float32) and
/// zeroPoint (any integer or float dtype, integral values) hold
/// x.dim(axis) elements each, in any shape; same rules per channel.
Tensor fakeQuantizePerChannel(const Tensor &x, const Tensor &scale,
                              const Tensor &zeroPoint, int64_t axis,
                              int64_t qmin, int64_t qmax);

} // namespace tmg::rt
