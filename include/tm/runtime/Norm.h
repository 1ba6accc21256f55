//===- Norm.h - Normalisation and softmax -----------------------*- C++ -*-===//
//
// float32 kernels. Statistics are accumulated in double, one row per thread,
// so the results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Common.h"

namespace tmg::rt {

/// Inference batch normalisation over axis 1 of x (N, C, ...), rank >= 2:
/// y = (x - mean) / sqrt(var + eps) * weight + bias. mean and var (and
/// weight and bias when defined; otherwise 1 and 0) hold C elements in any
/// shape, e.g. (C,) or (1, C, 1, 1). eps must be >= 0.
Tensor batchNorm(const Tensor &x, const Tensor &mean, const Tensor &var,
                 const Tensor &weight = {}, const Tensor &bias = {},
                 double eps = 1e-5);

/// batchNorm of the concatenation of `parts` along axis 1 (float32, equal
/// in every other dimension), then `act`: concat, batch_norm and relu (as
/// DenseNet's layers begin) in one pass that reads each part once. Bit for
/// bit the three ops one after the other.
Tensor batchNormAct(llvm::ArrayRef<Tensor> parts, const Tensor &mean, const Tensor &var,
                    const Tensor &weight, const Tensor &bias, double eps,
                    Activation act);

/// Layer normalisation over the trailing dimensions given by
/// `normalizedShape` (it must equal the last k dimensions of x): each row of
/// prod(normalizedShape) elements becomes (v - mean) / sqrt(var + eps) with
/// the biased variance, then * weight + bias elementwise when defined
/// (their shape must equal normalizedShape).
Tensor layerNorm(const Tensor &x, llvm::ArrayRef<int64_t> normalizedShape,
                 const Tensor &weight = {}, const Tensor &bias = {},
                 double eps = 1e-5);

/// exp(x - max) / sum(exp(x - max)) along `axis` (negative counts from the
/// end). Size-0 axes give an empty result.
Tensor softmax(const Tensor &x, int64_t axis = -1);
/// x - max - log(sum(exp(x - max))) along `axis`.
Tensor logSoftmax(const Tensor &x, int64_t axis = -1);

} // namespace tmg::rt
