//===- VecMath.h - Vectorised float32 exp, erf and activations -*- C++ -*-===//
//
// The transcendental functions of softmax, sigmoid, SiLU and GELU, over
// arrays, in SIMD registers: AVX-512 or AVX2 when the CPU has them (chosen
// at run time, once), SSE2 otherwise. Accuracy against the correctly
// rounded float32 result: exp within 1.2 ulp, erf within 3.5 ulp; results
// below FLT_MIN (subnormals) are flushed to zero. NaN stays NaN, +-inf
// give exp's and erf's limits. `x` and `y` may be the same array.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace tmg::rt::detail {

enum class VecFn : uint8_t {
  Exp,     ///< exp(x)
  Erf,     ///< erf(x)
  Sigmoid, ///< 1 / (1 + exp(-x))
  Silu,    ///< x / (1 + exp(-x))
  Gelu,    ///< x / 2 * (1 + erf(x / sqrt(2)))
};

/// y[i] = f(x[i]) for i in [0, n), on the calling thread.
void vecMath(VecFn f, const float *x, float *y, int64_t n);

} // namespace tmg::rt::detail
