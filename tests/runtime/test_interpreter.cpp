//===- test_interpreter.cpp - Plans, refcounts, watch/end points, threads -===//
#include <cmath>
#include <thread>

#include "../ir/Fixtures.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
using namespace tmg::rt;
using namespace fixtures;

namespace {
Tensor ramp(llvm::ArrayRef<int64_t> shape, float scale = 0.1f) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * float((i * 7) % 23) - 1.0f;
  return t;
}

bool same(const Tensor &a, const Tensor &b) { return a.bitwiseEqual(b); }

std::unique_ptr<TracedModule> addConstants(std::vector<int> ks) {
  // forward(x): for k in ks: x = self.mod(x, k); return x
  auto m = std::make_unique<Module>("Net");
  m->registerModule("mod", std::make_unique<Module>("AddK"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
  Node *x = b.arg(0);
  Node *mod = b.getAttr(b.self(), "mod");
  for (int k : ks)
    x = b.callModule(mod, {x, k}, {},
                     [k](GraphBuilder &sb) { sb.setOutputs(sb.callMethod(sb.arg(0), "__add__", {k})); },
                     {"x", "k"});
  b.finish(x);
  return tm;
}
} // namespace

TEST_CASE("the docstring module computes relu(linear(x + param))", "[runtime][interp]") {
  auto tm = docstringMyModule();
  Interpreter interp(*tm);
  Tensor x = ramp({3, 4});
  RunResult r = interp.run({x});
  REQUIRE(r.outputs.size() == 1);
  const Tensor &y = r.outputs[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({3, 5}));
  auto *lin = tm->module("linear");
  const Tensor &w = *lin->tensor("weight"), &bias = *lin->tensor("bias"),
               &p = *tm->tensor("param");
  for (int i = 0; i < 3; ++i)
    for (int o = 0; o < 5; ++o) {
      double acc = bias.at(o);
      for (int k = 0; k < 4; ++k)
        acc += (x.at(i * 4 + k) + p.at(i * 4 + k)) * w.at(o * 4 + k);
      CHECK(y.at(i * 5 + o) == Approx(std::max(acc, 0.0)).margin(1e-5));
    }
}

TEST_CASE("nested graphs: one sub-graph per call signature", "[runtime][interp]") {
  auto tm = addConstants({1, 2, 1});
  CHECK(llvm::cast<TracedModule>(tm->module("mod"))->numGraphs() == 2);
  Interpreter interp(*tm);
  Tensor x = ramp({4});
  Tensor y = interp.run({x}).outputs[0];
  for (int i = 0; i < 4; ++i)
    CHECK(y.at(i) == Approx(x.at(i) + 4.0));
  // The flattened module computes the same.
  auto flat = tm->flatten();
  Interpreter fi(*flat);
  CHECK(same(fi.run({x}).outputs[0], y));
}

TEST_CASE("reference counting frees intermediates and reuses their memory", "[runtime][interp]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Chain"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{256, 256}}});
  Node *x = b.arg(0);
  for (int i = 0; i < 40; ++i)
    x = b.callFunction(i % 2 ? "relu" : "neg", {x});
  b.finish(x);
  Interpreter interp(*tm);
  Tensor in = ramp({256, 256});
  RunResult r = interp.run({in});
  int64_t one = 256 * 256 * 4;
  // Without freeing, 40 intermediates would be alive at the end.
  CHECK(r.peakBytes <= 2 * one);
  CHECK(r.reusedBlocks >= 30);
  CHECK(r.outputs[0].at(5) == Approx(std::max(0.0, -in.at(5))).margin(0));
}

TEST_CASE("watch points and end points (the reference's docstrings)", "[runtime][interp]") {
  // x = x + 1 + 2
  auto tm = TracedModule::fromModule(std::make_unique<Module>("MyModule"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  Node *a = b.callMethod(b.arg(0), "__add__", {1});
  b.finish(b.callMethod(a, "__add__", {2}));
  Node *add1 = tm->graph().getNodeById({2}).asUnique();
  Interpreter interp(*tm);
  Tensor x = Tensor::zeros({1});
  interp.setWatchPoints({add1, tm->graph().input(1)});
  std::vector<Tensor> out = interp.forward({x});
  CHECK(out[0].at(0) == 3.0);
  CHECK(interp.watchNodeValue().at(add1).at(0) == 1.0);
  CHECK(interp.watchNodeValue().at(tm->graph().input(1)).at(0) == 0.0);
  interp.clearWatchPoints();
  interp.setEndPoints({add1});
  RunResult r = interp.run({x}, RunOptions{{}, {add1}});
  CHECK(r.stoppedAtEndPoints);
  REQUIRE(r.outputs.size() == 1);
  CHECK(r.outputs[0].at(0) == 1.0);
  CHECK(interp.forward({x})[0].at(0) == 1.0);
  interp.clearEndPoints();
  CHECK(interp.forward({x})[0].at(0) == 3.0);
  // Watching a node of a sub-graph records one value per call.
  auto nested = addConstants({1, 1});
  auto *sub = llvm::cast<TracedModule>(nested->module("mod"))->signatures()[0].graph.get();
  Interpreter ni(*nested);
  RunResult w = ni.run({Tensor::zeros({4})}, RunOptions{{sub->output(0)}, {}});
  REQUIRE(w.watched.at(sub->output(0)).size() == 2);
  CHECK(w.watched.at(sub->output(0))[1].at(0) == 2.0);
}

TEST_CASE("kernel errors name the expr, op and shapes", "[runtime][interp]") {
  auto tm = tracedMyModule();
  Interpreter interp(*tm);
  try {
    interp.run({Tensor::zeros({1, 4, 3, 3})});
    FAIL("expected an error");
  } catch (const Error &e) {
    std::string msg = e.what();
    CHECK(msg.find("expr %7") != std::string::npos);
    CHECK(msg.find("conv2d") != std::string::npos);
    CHECK(msg.find("(1, 4, 3, 3)") != std::string::npos);
  }
  CHECK_THROWS_WITH(interp.run({}), Catch::Contains("takes 1 inputs but 0 were given"));
  CHECK_THROWS_WITH(interp.run({Tensor::zeros({1}, DType::Int32)}),
                    Catch::Contains("expects float32"));
}

TEST_CASE("plans are rebuilt after the graph changes", "[runtime][interp]") {
  auto tm = tracedMyBlock();
  Interpreter interp(*tm);
  Tensor x = ramp({1, 3, 3, 3});
  Tensor y1 = interp.run({x}).outputs[0];
  // relu(..) + 1 -> neg(relu(..)) + 1
  InternalGraph &g = tm->graph();
  Expr *relu = g.getFunctionByType(&op(OpKind::Relu)).asUnique();
  GraphBuilder b = GraphBuilder::into(g);
  b.setInsertionPointAfter(relu);
  Node *neg = b.callFunction("neg", {relu->output(0)});
  g.replaceNode({{relu->output(0), neg}});
  g.compile();
  Tensor y2 = interp.run({x}).outputs[0];
  for (int64_t i = 0; i < y1.numel(); ++i)
    CHECK(y2.at(i) == Approx(2.0 - y1.at(i)).margin(1e-6));
}

TEST_CASE("one module runs from four threads with identical results", "[runtime][interp]") {
  auto tm = tracedMyModule();
  Interpreter interp(*tm);
  std::vector<Tensor> inputs;
  for (int t = 0; t < 4; ++t)
    inputs.push_back(ramp({1, 3, 3, 3}, 0.05f * float(t + 1)));
  std::vector<Tensor> serial;
  for (const Tensor &in : inputs)
    serial.push_back(interp.run({in}).outputs[0]);
  std::vector<Tensor> parallel(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 20; ++rep)
        parallel[t] = interp.run({inputs[t]}).outputs[0];
    });
  for (auto &th : threads)
    th.join();
  for (int t = 0; t < 4; ++t)
    CHECK(same(parallel[t], serial[t]));
}
