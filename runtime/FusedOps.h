//===- FusedOps.h - Lowering of fused ops (internal) ------------*- C++ -*-===//
#pragma once

#include "Plan.h"

namespace tmg::rt {

/// Lowers `nn.conv2d_act` and `nn.linear_act` (made by the
/// fuse-conv-activation pass): one step computing conv/linear + bias + the
/// activation.
StepFn lowerFusedOp(const Expr &e, OpKind k, LowerContext &ctx);

} // namespace tmg::rt
