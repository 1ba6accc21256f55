//===- FusedOps.h - Lowering of fused ops (internal) ------------*- C++ -*-===//
#pragma once

#include "Plan.h"

namespace tmg::rt {

/// Lowers `nn.conv2d_act` (made by the fuse-conv-activation pass): one step
/// computing conv2d + bias + the activation. Registered by the conv family.
StepFn lowerConv2dAct(const Expr &e, OpKind k, LowerContext &ctx);

/// Lowers `nn.linear_act` (made by the fuse-conv-activation pass): one step
/// computing linear + bias + the activation. Registered by the linalg family.
StepFn lowerLinearAct(const Expr &e, OpKind k, LowerContext &ctx);

} // namespace tmg::rt
