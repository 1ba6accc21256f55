//===- activation.cpp - Shape rules of the activation ops -----------------===//
//
// Output types of the activation family: every activation (and dropout)
// keeps its input's shape and dtype.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

void registerActivationShapeRules(ShapeRuleTable &t) {
  t.add("activation",
        {OpKind::Relu, OpKind::Relu6, OpKind::LeakyRelu, OpKind::Gelu,
         OpKind::GeluTanh, OpKind::Sigmoid, OpKind::Silu, OpKind::Hswish,
         OpKind::Hsigmoid, OpKind::Softplus, OpKind::Prelu, OpKind::Dropout,
         OpKind::Elu, OpKind::Selu, OpKind::Celu, OpKind::Softsign,
         OpKind::HardSigmoid, OpKind::ThresholdedRelu},
        symbolic([](const ShapeContext &c, OpKind) { return c.same(); }));
}

} // namespace tmg::shapes
