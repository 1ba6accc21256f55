//===- quant.cpp - Shape rules of the quantisation ops --------------------===//
//
// Output types of the quant family: fake quantisation keeps its input's
// shape and dtype.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

void registerQuantShapeRules(ShapeRuleTable &t) {
  t.add("quant", {OpKind::FakeQuantize},
        symbolic([](const ShapeContext &c, OpKind) { return c.same(); }));
}

} // namespace tmg::shapes
