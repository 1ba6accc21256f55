//===- test_expr_checker.cpp - The expr checker of tracing ----------------===//
//
// The reference's enable_expr_checker (checker.py; test_trace_module.py
// runs with it on): with TraceOptions::checkExprs every recorded expr is
// interpreted on its inputs' values and compared with what forward
// computed, and the traced module's outputs with forward's.
//
//===----------------------------------------------------------------------===//
#include "Layers.h"
#include "tm/runtime/Elementwise.h"

using namespace tmg;
using namespace layers;
using namespace fixtures;

namespace {

TraceOptions checking() {
  TraceOptions o;
  o.checkExprs = true;
  return o;
}

Tensor ramp(Shape s, float start, float step) {
  Tensor t = Tensor::zeros(s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = start + step * float(i);
  return t;
}

/// A Layer made builtin whose forward reads a plain C++ member: the
/// traced module's attributes do not carry it, so the interpreter's fresh
/// instance computes something else than the eager call did.
struct Scale : LayerOf<Scale> {
  explicit Scale(double f = 1.0) : LayerOf("Scale", {"x"}), factor(f) {}
  double factor;
  Var forward(Var x) { return x * factor; }
};

/// The same layer done right: the factor is a module attribute.
struct ScaleAttr : LayerOf<ScaleAttr> {
  explicit ScaleAttr(double f = 1.0) : LayerOf("ScaleAttr", {"x"}) {
    setValue("factor", Scalar(f));
  }
  Var forward(Var x) { return x * scalarAttr("factor").toDouble(); }
};

template <typename S> struct UsesScale : LayerOf<UsesScale<S>> {
  UsesScale() : LayerOf<UsesScale<S>>("UsesScale", {"x"}) {
    this->template addModule<S>("scale", 3.0);
  }
  Var forward(Var x) { return F::relu(this->mod("scale")(x + 1)); }
};

} // namespace

TEST_CASE("expr checker: correct modules pass", "[trace][checker]") {
  MyModule net; // traced blocks with builtin convs and batch norms
  Tensor x = ramp({1, 3, 3, 3}, -1, 0.1f);
  auto tm = traceModule(net, {{Var(x)}, {}}, checking());
  checkVerified(*tm);
  Tensor want = net(Var(x)).var().value();
  CHECK(rt::Interpreter(*tm).run({x}).outputs[0].bitwiseEqual(want));

  registerAsBuiltin<ScaleAttr>();
  UsesScale<ScaleAttr> good;
  CHECK_NOTHROW(traceModule(good, {{Var(x)}, {}}, checking()));
}

TEST_CASE("expr checker: a builtin Layer with state outside its attributes",
          "[trace][checker]") {
  registerAsBuiltin<Scale>();
  UsesScale<Scale> net;
  Tensor x = ramp({2, 2}, -1, 1);
  // Without the checker the trace goes through, and computes x + 1, not 3x + 3.
  auto silent = traceModule(net, Var(x));
  Tensor wrong = rt::Interpreter(*silent).run({x}).outputs[0];
  CHECK(wrong.bitwiseEqual(rt::relu(rt::binary(rt::BinaryOp::Add, x,
                                               Tensor::fromFloats({}, {1})))));
  try {
    traceModule(net, {{Var(x)}, {}}, checking());
    FAIL("the checker let a wrong expr through");
  } catch (const Error &e) {
    std::string msg = e.diagnostic().str();
    INFO(msg);
    // The call of `scale`: its id, its printed form and the max error
    // (|3 * 3 - 3| at x = 2).
    CHECK(msg.find("%4 `scale_out = scale(add_out, )` (output 0) differs from the "
                   "eager value: max error 6") != std::string::npos);
    CHECK(e.diagnostic().loc.exprId == 4);
  }
}

TEST_CASE("expr checker: a wrapped function with hidden state", "[trace][checker]") {
  // Each call adds how often it was called: the interpreted call is the
  // second one, so it adds 2 where forward saw 1.
  auto calls = std::make_shared<int>(0);
  auto counted = wrap(
      [calls](Var x) { return x + double(++*calls); }, "counted_add", {"x"});
  struct Net : LayerOf<Net> {
    WrappedFunction fn;
    explicit Net(WrappedFunction f) : LayerOf("Net", {"x"}), fn(std::move(f)) {}
    Var forward(Var x) { return fn(F::neg(x)).var(); }
  } net(counted);
  Tensor x = ramp({3}, 0, 1);
  try {
    traceModule(net, {{Var(x)}, {}}, checking());
    FAIL("the checker let a wrong expr through");
  } catch (const Error &e) {
    std::string msg = e.diagnostic().str();
    INFO(msg);
    CHECK(msg.find("__main__.counted_add(neg_out, )` (output 0) differs from the eager "
                   "value: max error 1") != std::string::npos);
  }
}

TEST_CASE("expr checker: needs values", "[trace][checker]") {
  MyBlock net;
  CHECK_THROWS_WITH(traceModule(net, {{Var::meta({1, 3, 3, 3})}, {}}, checking()),
                    Catch::Contains("the expr checker needs inputs with values"));
}
