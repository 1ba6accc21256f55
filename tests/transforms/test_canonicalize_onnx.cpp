//===- test_canonicalize_onnx.cpp - canonicalize-onnx, rewrites and numerics ===//
//
// The inputs are the golden tests' graphs (tests/files/transforms/onnx-*.tmir,
// imported from hand-written ONNX graphs by scripts/make-idiom-models.py
// --golden): each idiom in several spellings, with near misses that stay.
// Every rewrite is checked through the interpreter: outputs before and after
// agree within 1e-5 relative (+ 1e-6 absolute).
//
//===----------------------------------------------------------------------===//
#include "Common.h"

#include "tm/io/Tmir.h"

using namespace tmg;
using namespace xt;

namespace {

std::unique_ptr<TracedModule> load(const std::string &name) {
  auto m = loadTmir(std::string(TM_TEST_FILES) + "/transforms/" + name);
  if (m.failed())
    FAIL(m.diagnostic().str());
  return std::move(*m);
}

std::vector<Shape> inputShapes(const TracedModule &m) {
  std::vector<Shape> s;
  for (size_t i = 1; i < m.graph().inputs().size(); ++i)
    s.push_back(*llvm::cast<TensorNode>(m.graph().input(i))->shape());
  return s;
}

/// canonicalize-onnx (then `then`) on `name`, checked numerically.
std::unique_ptr<TracedModule> rewrite(const std::string &name, const std::string &then = "") {
  auto m = load(name);
  std::string pipeline = then.empty() ? "canonicalize-onnx" : "canonicalize-onnx," + then;
  return checkDifferential(*m, pipeline, inputShapes(*m), 1e-6);
}

} // namespace

TEST_CASE("canonicalize-onnx: clip, hardswish and silu idioms", "[transforms][canonicalize-onnx]") {
  auto m = rewrite("onnx-activations.tmir");
  CHECK(countFn(*m, OpKind::Relu6) == 1);
  CHECK(countFn(*m, OpKind::Relu) == 2);
  CHECK(countFn(*m, OpKind::Clip) == 1); // clip(0, 5)
  CHECK(countFn(*m, OpKind::Hswish) == 2);
  CHECK(countFn(*m, OpKind::HardSigmoid) == 2); // alone, and alpha 0.2
  CHECK(countFn(*m, OpKind::Silu) == 1);
  CHECK(countFn(*m, OpKind::Sigmoid) == 1); // x * sigmoid(relu6(x))
  CHECK(countFn(*m, OpKind::Mul) == 2);
}

TEST_CASE("canonicalize-onnx: single-element constants become literals",
          "[transforms][canonicalize-onnx]") {
  auto m = rewrite("onnx-scalars.tmir");
  std::string text = m->graph().str();
  INFO(text);
  for (const char *s : {"elemwise.mul(x, 1.0, )", "elemwise.add(x, 0.5, )",
                        "elemwise.sub(x, 2.0, )", "elemwise.div(x, 4.0, )",
                        "elemwise.sub(3.0, x, )", "elemwise.mul(x, vec3, )",
                        "elemwise.mul(x, one_111, )"})
    CHECK(text.find(s) != std::string::npos);
  // Then canonicalize's neutral-element rules see them: x * 1 => x.
  auto c = rewrite("onnx-scalars.tmir", "canonicalize");
  CHECK(c->graph().output(0) == c->graph().input(1));
  // And the optimize preset turns them into x + c / x * c.
  auto o = rewrite("onnx-scalars.tmir", "optimize");
  CHECK(countFn(*o, OpKind::Sub) + countFn(*o, OpKind::Div) == 0);
}

TEST_CASE("canonicalize-onnx: matmul + bias and gemm become linear",
          "[transforms][canonicalize-onnx]") {
  auto m = rewrite("onnx-linear.tmir");
  CHECK(countFn(*m, OpKind::Linear) == 7);
  CHECK(countFn(*m, OpKind::Matmul) == 1); // by a graph input
  CHECK(countFn(*m, OpKind::Add) == 1);    // the (5, 6) bias
  size_t withBias = 0;
  for (Expr *e : m->graph().getFunctionByType(&op(OpKind::Linear)).asList())
    withBias += e->namedArg("bias") && e->namedArg("bias")->node() != nullptr;
  CHECK(withBias == 5);
  // optimize: cse merges the transposed copies of the shared weight.
  auto o = rewrite("onnx-linear.tmir", "optimize");
  size_t constants = 0;
  for (Expr *e : o->graph().body())
    constants += llvm::isa<Constant>(e) && e->output(0)->name().startswith("w_t");
  CHECK(constants == 1);
  // The (in, out) weight the linear layers no longer read is dropped; wt,
  // equal to the transposed copy, was merged into it by cse.
  CHECK_FALSE(o->hasAttr("w"));
  CHECK_FALSE(o->hasAttr("wt"));
  CHECK(o->hasAttr("b56"));
}

TEST_CASE("canonicalize-onnx: the erf and tanh forms of GELU",
          "[transforms][canonicalize-onnx]") {
  auto m = rewrite("onnx-gelu.tmir");
  CHECK(countFn(*m, OpKind::Gelu) == 4);
  CHECK(countFn(*m, OpKind::GeluTanh) == 1);
  CHECK(countFn(*m, OpKind::Tanh) == 0);
  CHECK(countFn(*m, OpKind::Erf) == 1); // erf(x / 2)
}

TEST_CASE("canonicalize-onnx: decomposed layer norm over the last axis",
          "[transforms][canonicalize-onnx]") {
  auto m = rewrite("onnx-layernorm.tmir");
  auto lns = m->graph().getFunctionByType(&op(OpKind::LayerNorm)).asList();
  REQUIRE(lns.size() == 2);
  CHECK(lns[0]->namedArg("weight")->node() != nullptr);
  CHECK(lns[0]->namedArg("bias")->node() != nullptr);
  CHECK(lns[1]->namedArg("weight")->node() == nullptr);
  CHECK(lns[0]->namedArg("eps")->scalar().toDouble() == Approx(1e-5));
  CHECK(countFn(*m, OpKind::Mean) == 2); // the chain over axis 1
  CHECK(countFn(*m, OpKind::Sqrt) == 1);
}

TEST_CASE("canonicalize-onnx: graph-built idioms, several uses and dtypes",
          "[transforms][canonicalize-onnx]") {
  auto mod = std::make_unique<Module>("Net");
  mod->registerBuffer("half", Tensor::full({}, 0.5));
  auto tm = TracedModule::fromModule(std::move(mod));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4, 5}}, {"i", Shape{4}, DType::Int32}});
  Node *x = b.arg(0);
  // x * sigmoid(x) where sigmoid(x) is also an output: both stay (silu
  // would not save the sigmoid).
  Node *s = b.callFunction("nn.sigmoid", {x});
  Node *silu = b.callFunction("elemwise.mul", {x, s});
  // An int tensor times a float constant is not rewritten (dtypes differ).
  Node *h = b.getAttr(b.self(), "half");
  Node *im = b.callFunction("elemwise.mul", {b.arg(1), h});
  // Clip of an int tensor stays.
  Node *ic = b.callFunction("elemwise.clip", {b.arg(1)},
                            {{"lower", int64_t(0)}, {"upper", int64_t(6)}});
  b.finish(Arg::tuple({silu, s, im, ic}));
  auto opt = tm->cloneTraced();
  run(*opt, "canonicalize-onnx");
  checkVerified(*opt);
  CHECK(countFn(*opt, OpKind::Silu) == 0); // sigmoid(x) has a use outside the match
  CHECK(countFn(*opt, OpKind::Mul) == 2);
  CHECK(countFn(*opt, OpKind::Clip) == 1);
}
