//===- norm.cpp - Shape rules of the normalisation ops --------------------===//
//
// Output types of the norm family: softmax, log-softmax, batch and layer
// norm and local response norm keep their input's shape and dtype.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

void registerNormShapeRules(ShapeRuleTable &t) {
  t.add("norm",
        {OpKind::Softmax, OpKind::LogSoftmax, OpKind::BatchNorm,
         OpKind::LayerNorm, OpKind::LocalResponseNorm},
        symbolic([](const ShapeContext &c, OpKind) { return c.same(); }));
}

} // namespace tmg::shapes
