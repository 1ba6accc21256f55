//===- test_traced_shapes.cpp - x.shape as a traced value -----------------===//
//
// The reference traces `x.shape` symbolically (GetVarShape, then getitem):
// `F.reshape(x, (x.shape[0], -1))` stays batch-generic. Var::tracedShape and
// Var::tracedDim record the same exprs; a module traced at one batch runs at
// others, before and after a .tmir round trip, with the eager results.
//
//===----------------------------------------------------------------------===//
#include "Layers.h"
#include "tm/io/Tmir.h"
#include "tm/runtime/Compare.h"

using namespace tmg;
using namespace fixtures;

namespace {

// forward(x): x is (N, 2, 3); flatten the trailing dims by a traced batch,
// scale, and broadcast a row to the traced (N, 6).
struct Generic : LayerOf<Generic> {
  Generic() : LayerOf("Generic", {"x"}) {}
  std::tuple<Var, Var> forward(Var x) {
    Var flat = F::reshape(x, {x.tracedDim(0), -1});
    Var row = Var(Tensor::fromFloats({1, 6}, {1, 2, 3, 4, 5, 6}));
    Var wide = F::broadcast_to(row, {x.tracedDim(0), 6});
    return {flat * 2.0, wide + flat};
  }
};

Tensor ramp(Shape s) {
  Tensor t = Tensor::zeros(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 0.5f * float(i) - 2.0f;
  return t;
}

} // namespace

TEST_CASE("a traced dim keeps the module batch-generic", "[trace][shapes]") {
  Generic net;
  auto tm = traceModule(net, Var(ramp({2, 2, 3})));
  std::string g = tm->graph().str();
  CHECK_THAT(g, Catch::Contains("GetVarShape(x)"));
  CHECK_THAT(g, Catch::Contains("__getitem__(0, )"));
  CHECK_THAT(g, Catch::Contains("tensor.reshape(x, (getitem_out, -1), )"));
  checkVerified(*tm);
  // The reshape's shape is known from the traced dim: (2, 6) at trace time.
  auto *flat = llvm::cast<TensorNode>(tm->graph().outputs()[0]);
  REQUIRE(flat->shape());
  CHECK(shapeStr(*flat->shape()) == "(2, 6)");

  TmirWriteOptions wo;
  wo.inlineMaxElements = 64;
  std::string text = printTmir(*tm, wo);
  auto back = parseTmir(text, "generic.tmir");
  REQUIRE(back.succeeded());
  for (int64_t n : {1, 5}) {
    INFO("batch " << n);
    Tensor x = ramp({n, 2, 3});
    Value eager = net(Var(x));
    for (const TracedModule *m : {tm.get(), back->get()}) {
      auto outs = rt::Interpreter(*m).run({x}).outputs;
      REQUIRE(outs.size() == 2);
      CHECK(outs[0].shape() == llvm::ArrayRef<int64_t>{n, 6});
      CHECK(rt::compareTensors(outs[0], eager[0].var().value(), {0, 0}).ok());
      CHECK(rt::compareTensors(outs[1], eager[1].var().value(), {0, 0}).ok());
    }
  }
}

TEST_CASE("traced shapes, dims and element counts", "[trace][shapes]") {
  struct Counts : LayerOf<Counts> {
    Counts() : LayerOf("Counts", {"x"}) {}
    std::tuple<Var, Var, Var> forward(Var x) {
      return {x.tracedShape(), x.tracedDim(-1), x.tracedNumel()};
    }
  } net;
  auto tm = traceModule(net, Var(ramp({3, 4})));
  auto outs = rt::Interpreter(*tm).run({ramp({5, 7})}).outputs;
  CHECK(outs[0].bitwiseEqual(Tensor::fromInts({2}, {5, 7}, DType::Int32)));
  CHECK(outs[1].at(0) == 7);
  CHECK(outs[2].at(0) == 35);
  CHECK_THROWS_AS(Var(ramp({3})).tracedDim(1), Error);
}
