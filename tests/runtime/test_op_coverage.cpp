//===- test_op_coverage.cpp - The runtime's lowering table ------*- C++ -*-===//
//
// The lowering table lists each op under its Ops.def family, covers the ops
// the interpreter runs, and an op without a lowering fails with an error
// naming it; the op defs (GetVarShape, Elemwise, Copy) run through the same
// table.
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "tm/ir/Builder.h"
#include "tm/ir/OpTable.h"
#include "tm/ir/TracedModule.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/OpCoverage.h"

using namespace tmg;
using namespace tmg::rt;

namespace {
bool hasKernel(OpKind k) {
  std::vector<OpKind> missing = opsWithoutKernel();
  return std::find(missing.begin(), missing.end(), k) == missing.end();
}
} // namespace

TEST_CASE("the runtime table files each op under its family", "[runtime][coverage]") {
  CHECK(kernelFamily(OpKind::Conv2d) == "conv");
  CHECK(kernelFamily(OpKind::ConvNd) == "conv");
  CHECK(kernelFamily(OpKind::Add) == "elementwise");
  CHECK(kernelFamily(OpKind::Relu) == "activation");
  CHECK(kernelFamily(OpKind::GetVarShape) == "shape");
  for (OpKind k : allOpKinds())
    if (hasKernel(k))
      CHECK(kernelFamily(k) == op(k).family());
    else
      CHECK(kernelFamily(k).empty());
}

TEST_CASE("ops the runtime runs have a kernel", "[runtime][coverage]") {
  for (OpKind k : {OpKind::Add, OpKind::MAdd, OpKind::MRSub, OpKind::Conv2d, OpKind::Relu,
                   OpKind::GetVarShape, OpKind::Linear, OpKind::MaxPool2d, OpKind::Softmax,
                   OpKind::Sum, OpKind::Reshape, OpKind::MGetItem, OpKind::Zeros,
                   OpKind::Interpolate, OpKind::FakeQuantize, OpKind::Conv2dAct,
                   OpKind::LinearAct, OpKind::ScatterNd, OpKind::ResizeNd}) {
    INFO(opKindName(k));
    CHECK(hasKernel(k));
  }
  std::vector<OpKind> missing = opsWithoutKernel();
  CHECK(missing.size() < kNumOpKinds);
  CHECK(std::is_sorted(missing.begin(), missing.end()));
}

TEST_CASE("an op without a kernel is named in the error", "[runtime][coverage]") {
  // A function registered without a kernel.
  OpRegistry::instance().registerFunction("test_rt", "no_kernel", {"x"});
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3}}});
  b.finish(b.callFunction("test_rt.no_kernel", {b.arg(0)}));
  Interpreter interp(*tm);
  CHECK_THROWS_WITH(interp.run({Tensor::zeros({3})}),
                    Catch::Contains("the runtime does not implement 'test_rt.no_kernel'"));
}

TEST_CASE("x._broadcast(*shape) runs as broadcast_to", "[runtime][shape]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3}}});
  Node *y = b.callMethod(b.arg(0), "_broadcast", {2, 3});
  CHECK(llvm::cast<TensorNode>(y)->shape() == Shape{2, 3});
  b.finish(y);
  Interpreter interp(*tm);
  RunResult r = interp.run({Tensor::fromFloats({1, 3}, {1, 2, 3})});
  REQUIRE(r.outputs.size() == 1);
  REQUIRE(r.outputs[0].numel() == 6);
  const double want[] = {1, 2, 3, 1, 2, 3};
  for (int i = 0; i < 6; ++i)
    CHECK(r.outputs[0].at(i) == want[i]);
}

TEST_CASE("floor_div and % follow Python's signs", "[runtime][elementwise]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}, {"y", Shape{4}}});
  Node *q = b.callFunction("floor_div", {b.arg(0), b.arg(1)});
  Node *r = b.callMethod(b.arg(0), "__mod__", {b.arg(1)});
  Node *qi = b.callMethod(b.callMethod(b.arg(0), "astype", {"int32"}), "__floordiv__",
                          {b.callMethod(b.arg(1), "astype", {"int32"})});
  b.finish(Arg::tuple({q, r, qi}));
  Interpreter interp(*tm);
  // 7 // 2 = 3, -7 // 2 = -4, 7 // -2 = -4, -7 // -2 = 3; x % y has y's sign.
  RunResult res = interp.run({Tensor::fromFloats({4}, {7, -7, 7, -7}),
                              Tensor::fromFloats({4}, {2, 2, -2, -2})});
  REQUIRE(res.outputs.size() == 3);
  const double quot[] = {3, -4, -4, 3}, rem[] = {1, 1, -1, -1};
  for (int i = 0; i < 4; ++i) {
    CHECK(res.outputs[0].at(i) == quot[i]);
    CHECK(res.outputs[1].at(i) == rem[i]);
    CHECK(res.outputs[2].at(i) == quot[i]);
  }
  CHECK(res.outputs[2].dtype() == DType::Int32);
}

TEST_CASE("& | ~ are logical on bool and bitwise on integers", "[runtime][elementwise]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}, {"y", Shape{4}}});
  Node *xi = b.callMethod(b.arg(0), "astype", {"int32"});
  Node *yi = b.callMethod(b.arg(1), "astype", {"int32"});
  Node *xb = b.callMethod(b.arg(0), "__gt__", {0});
  Node *yb = b.callMethod(b.arg(1), "__gt__", {0});
  b.finish(Arg::tuple({b.callMethod(xi, "__and__", {yi}), b.callMethod(xi, "__or__", {yi}),
                       b.callMethod(xi, "__invert__", {}), b.callMethod(xb, "__and__", {yb}),
                       b.callMethod(xb, "__invert__", {})}));
  Interpreter interp(*tm);
  RunResult res = interp.run({Tensor::fromFloats({4}, {12, 5, 0, -1}),
                              Tensor::fromFloats({4}, {10, 3, 7, 6})});
  REQUIRE(res.outputs.size() == 5);
  const double band[] = {8, 1, 0, 6}, bor[] = {14, 7, 7, -1}, inv[] = {-13, -6, -1, 0};
  const double land[] = {1, 1, 0, 0}, lnot[] = {0, 0, 1, 1};
  for (int i = 0; i < 4; ++i) {
    CHECK(res.outputs[0].at(i) == band[i]);
    CHECK(res.outputs[1].at(i) == bor[i]);
    CHECK(res.outputs[2].at(i) == inv[i]);
    CHECK(res.outputs[3].at(i) == land[i]);
    CHECK(res.outputs[4].at(i) == lnot[i]);
  }
  CHECK(res.outputs[0].dtype() == DType::Int32);
  CHECK(res.outputs[3].dtype() == DType::Bool);
  // Floating-point operands are an error, as in the reference.
  auto tf = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder bf = GraphBuilder::top(*tf, {{"x", Shape{2}}});
  bf.finish(bf.callMethod(bf.arg(0), "__invert__", {}));
  Interpreter fi(*tf);
  CHECK_THROWS_WITH(fi.run({Tensor::zeros({2})}),
                    Catch::Contains("__invert__: needs bool or integer tensors, got float32"));
}

TEST_CASE("GetVarShape runs through the table", "[runtime][coverage]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 5, 7}}});
  b.finish(b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0]);
  Interpreter interp(*tm);
  RunResult r = interp.run({Tensor::zeros({2, 5, 7})});
  REQUIRE(r.outputs.size() == 1);
  const Tensor &s = r.outputs[0];
  CHECK(s.dtype() == DType::Int32);
  REQUIRE(s.numel() == 3);
  CHECK(s.at(0) == 2);
  CHECK(s.at(1) == 5);
  CHECK(s.at(2) == 7);
}

TEST_CASE("the Elemwise and Copy op defs run through the table", "[runtime][coverage]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3}}, {"y", Shape{3}}});
  Node *sum = b.apply(op(OpKind::ElemwiseDef), {b.arg(0), b.arg(1)}, 1,
                      TreeDef::dict({{Scalar("mode"), TreeDef::constant(Scalar("ADD"))}}))[0];
  Node *copy = b.apply(op(OpKind::CopyDef), {sum})[0];
  b.finish(copy);
  Interpreter interp(*tm);
  RunResult r =
      interp.run({Tensor::fromFloats({3}, {1, 2, 3}), Tensor::fromFloats({3}, {10, 20, 30})});
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].at(0) == 11);
  CHECK(r.outputs[0].at(2) == 33);
}
