//===- test_shape_rules.cpp - Coverage of the shape rule table ------------===//
//
// Each builtin op's shape rule is registered by its family's file
// (ir/ops/<family>.cpp); these tests check that the table agrees with
// Ops.def and that the coverage list names exactly the ops without a rule.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include <catch2/catch.hpp>

#include "tm/ir/IR.h"
#include "tm/ir/OpTable.h"
#include "tm/ir/ShapeInference.h"

using namespace tmg;

TEST_CASE("shape rules are registered by their op's family", "[ir][shapes]") {
  CHECK(shapeRuleFamily(OpKind::Conv2d) == "conv");
  CHECK(shapeRuleFamily(OpKind::ConvNd) == "conv");
  CHECK(shapeRuleFamily(OpKind::MaxPoolNd) == "pool");
  CHECK(shapeRuleFamily(OpKind::Add) == "elementwise");
  CHECK(shapeRuleFamily(OpKind::MAdd) == "elementwise");
  CHECK(shapeRuleFamily(OpKind::Relu) == "activation");
  CHECK(shapeRuleFamily(OpKind::Matmul) == "linalg");
  CHECK(shapeRuleFamily(OpKind::Softmax) == "norm");
  CHECK(shapeRuleFamily(OpKind::Sum) == "reduce");
  CHECK(shapeRuleFamily(OpKind::Reshape) == "shape");
  CHECK(shapeRuleFamily(OpKind::GetVarShape) == "shape");
  CHECK(shapeRuleFamily(OpKind::MGetItem) == "index");
  CHECK(shapeRuleFamily(OpKind::Arange) == "creation");
  CHECK(shapeRuleFamily(OpKind::ResizeNd) == "resize");
  CHECK(shapeRuleFamily(OpKind::FakeQuantize) == "quant");
  CHECK(shapeRuleFamily(OpKind::Lstm) == "rnn");
  for (OpKind k : allOpKinds()) {
    llvm::StringRef f = shapeRuleFamily(k);
    INFO(opKindName(k));
    CHECK((f.empty() || f == op(k).family()));
  }
}

TEST_CASE("ops without a shape rule are exactly those the table lacks",
          "[ir][shapes]") {
  std::vector<OpKind> missing = opsWithoutShapeRule();
  for (OpKind k : allOpKinds()) {
    bool listed = std::find(missing.begin(), missing.end(), k) != missing.end();
    INFO(opKindName(k));
    CHECK(listed == shapeRuleFamily(k).empty());
  }
  for (OpKind k :
       {OpKind::Conv2d, OpKind::Add, OpKind::Relu, OpKind::GetVarShape})
    CHECK(std::find(missing.begin(), missing.end(), k) == missing.end());
}

TEST_CASE("an op def is typed by its family's rule", "[ir][shapes]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 4}}});
  Node *shape = b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0];
  auto *t = llvm::cast<TensorNode>(shape);
  REQUIRE(t->shape());
  CHECK(shapeStr(*t->shape()) == "(3,)");
  CHECK(t->dtype() == DType::Int32);
}
