//===- test_elemwise_module.cpp - The Elemwise builtin module -------------===//
//
// megengine.module.Elemwise: `Elemwise(method)(*inputs)` with a mode of any
// arity traces as one builtin module call, prints as the reference prints
// it, survives .tmir, and runs in the interpreter as the eager call does.
// test_trace_module.py's MyModule3 holds such modules (Elemwise("ADD")).
//
//===----------------------------------------------------------------------===//
#include "Layers.h"
#include "tm/io/Tmir.h"
#include "tm/runtime/Compare.h"
#include "tm/runtime/Elementwise.h"

using namespace tmg;
using namespace fixtures;

namespace {

// forward(x, y, z) = fma(fuse(x, y), y, z) with fuse = FUSE_ADD_RELU and
// fma = FUSE_MUL_ADD3, then the binary ADD of the reference's MyModule3.
struct Fused : LayerOf<Fused> {
  Fused() : LayerOf("Fused", {"x", "y", "z"}) {
    addModule<Elemwise>("fuse", "FUSE_ADD_RELU");
    addModule<Elemwise>("fma", "FUSE_MUL_ADD3");
    addModule<Elemwise>("add", "ADD");
  }
  Var forward(Var x, Var y, Var z) {
    Var a = mod("fuse")(x, y);
    Var b = mod("fma")(a, y, z);
    return mod("add")(b, x);
  }
};

Tensor ramp(Shape s, float start, float step) {
  Tensor t = Tensor::zeros(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = start + step * float(i);
  return t;
}

} // namespace

TEST_CASE("Elemwise modules of one, two and three inputs", "[trace][elemwise]") {
  Fused net;
  Tensor x = ramp({2, 3}, -3, 1), y = ramp({3}, 0.5, -0.75), z = ramp({2, 1}, 1, 2);
  auto tm = traceModule(net, Var(x), Var(y), Var(z));
  CHECK(tm->graph().str() == "Fused.Graph (self, x, y, z) {\n"
                             "\t%4:\tfuse = getattr(self, \"fuse\") -> (Elemwise)\n"
                             "\t%5:\tfuse_out = fuse(x, y, )\n"
                             "\t%6:\tfma = getattr(self, \"fma\") -> (Elemwise)\n"
                             "\t%7:\tfma_out = fma(fuse_out, y, z, )\n"
                             "\t%8:\tadd = getattr(self, \"add\") -> (Elemwise)\n"
                             "\t%9:\tadd_out = add(fma_out, x, )\n"
                             "\treturn add_out\n"
                             "}");
  checkVerified(*tm);
  auto *out = llvm::cast<TensorNode>(tm->graph().outputs()[0]);
  CHECK(out->shape() == std::optional<Shape>(Shape{2, 3}));

  // Interpreted, it gives what the modes mean, computed eagerly.
  using namespace rt;
  Tensor a = unary(UnaryOp::Relu, binary(BinaryOp::Add, x, y));
  Tensor want = binary(BinaryOp::Add, binary(BinaryOp::Add, binary(BinaryOp::Mul, a, y), z), x);
  Interpreter interp(*tm);
  Tensor got = interp.run({x, y, z}).outputs[0];
  CHECK(compareTensors(got, want, {1e-6, 1e-6}).ok());
  // And so does the eager call of the untraced module.
  Value eager = net(Var(x), Var(y), Var(z));
  CHECK(compareTensors(eager.var().value(), want, {1e-6, 1e-6}).ok());

  // Through .tmir and back: the same module, the same results.
  TmirWriteOptions wo;
  wo.inlineMaxElements = 64;
  std::string text = printTmir(*tm, wo);
  CHECK(text.find("fma = Elemwise builtin {\n    method = 'FUSE_MUL_ADD3'\n") !=
        std::string::npos);
  auto back = parseTmir(text, "elemwise.tmir");
  REQUIRE(back.succeeded());
  CHECK(compareModules(*tm, **back).value_or("") == "");
  CHECK(printTmir(**back, wo) == text);
  Interpreter again(**back);
  CHECK(again.run({x, y, z}).outputs[0].bitwiseEqual(got));
}

TEST_CASE("Elemwise modes: predicates, conditional moves, errors", "[trace][elemwise]") {
  struct Cmp : LayerOf<Cmp> {
    Cmp() : LayerOf("Cmp", {"x", "y"}) {
      addModule<Elemwise>("lt", "lt"); // MegEngine accepts any case
      addModule<Elemwise>("mov", "COND_LEQ_MOV");
    }
    std::tuple<Var, Var> forward(Var x, Var y) {
      return {mod("lt")(x, y), mod("mov")(x, y, x)};
    }
  } net;
  Tensor x = Tensor::fromFloats({4}, {1, 2, 3, 4}), y = Tensor::fromFloats({4}, {4, 2, 2, 1});
  auto tm = traceModule(net, Var(x), Var(y));
  auto outs = tm->graph().outputs();
  CHECK(llvm::cast<TensorNode>(outs[0])->dtype() == DType::Bool);
  auto res = rt::Interpreter(*tm).run({x, y}).outputs;
  CHECK(res[0].bitwiseEqual(Tensor::fromInts({4}, {1, 0, 0, 0}, DType::Bool)));
  CHECK(res[1].bitwiseEqual(Tensor::fromFloats({4}, {1, 2, 0, 0})));

  struct Wrong : LayerOf<Wrong> {
    Wrong() : LayerOf("Wrong", {"x"}) { addModule<Elemwise>("add", "ADD"); }
    Var forward(Var x) { return mod("add")(x); }
  } wrong;
  CHECK_THROWS_WITH(traceModule(wrong, Var(x)),
                    Catch::Contains("Elemwise mode ADD takes 2 inputs, got 1"));
  struct Unknown : LayerOf<Unknown> {
    Unknown() : LayerOf("Unknown", {"x"}) { addModule<Elemwise>("m", "FUSE_EVERYTHING"); }
    Var forward(Var x) { return mod("m")(x); }
  } unknown;
  CHECK_THROWS_WITH(traceModule(unknown, Var(x)),
                    Catch::Contains("unknown Elemwise method 'FUSE_EVERYTHING'"));
}
