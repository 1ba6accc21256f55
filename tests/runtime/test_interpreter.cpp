//===- test_interpreter.cpp - Plans, refcounts, watch/end points, threads -===//
#include <cmath>
#include <thread>

#include "../ir/Fixtures.h"
#include "tm/runtime/Inputs.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/Kernels.h"

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

/// The peak bytes of a run of a plan-time fusion and of the same run
/// watching `node`, which makes every op run on its own: both must give
/// `want`, and the watched run `node`'s value `nodeWant`.
struct FusedAndWatched {
  int64_t fusedPeak, watchedPeak;
};
FusedAndWatched runFusedAndWatched(const Interpreter &interp,
                                   const std::vector<Tensor> &in,
                                   const Node *node, const Tensor &want,
                                   const Tensor &nodeWant) {
  RunResult fused = interp.run(in);
  CHECK(fused.outputs[0].bitwiseEqual(want));
  RunResult w = interp.run(in, RunOptions{{node}, {}});
  CHECK(w.outputs[0].bitwiseEqual(want));
  REQUIRE(w.watched.at(node).size() == 1);
  CHECK(w.watched.at(node)[0].bitwiseEqual(nodeWant));
  return {fused.peakBytes, w.peakBytes};
}

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
  // neg and softmax alternate: no two elementwise ops in a row, so every
  // op allocates its output (a chain of elementwise ops would run fused).
  for (int i = 0; i < 40; ++i)
    x = i % 2 ? b.callFunction("softmax", {x, 1}) : b.callFunction("neg", {x});
  b.finish(x);
  Interpreter interp(*tm);
  Tensor in = ramp({256, 256});
  RunResult r = interp.run({in});
  int64_t one = 256 * 256 * 4;
  // Without freeing, 40 intermediates would be alive at the end.
  CHECK(r.peakBytes <= 2 * one);
  CHECK(r.reusedBlocks >= 30);
  Tensor want = in;
  for (int i = 0; i < 40; ++i)
    want = i % 2 ? softmax(want, 1) : unary(UnaryOp::Neg, want);
  CHECK(same(r.outputs[0], want));
}

TEST_CASE("a run refuses a tensor above its limits, naming the expr", "[runtime][interp]") {
  // y = relu(x) @ neg(x): two 64 KiB intermediates alive at once.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{128, 128}}});
  Node *r = b.callFunction("relu", {b.arg(0)});
  Node *n = b.callFunction("neg", {b.arg(0)});
  b.finish(b.callMethod(r, "__matmul__", {n}));
  Tensor x = ramp({128, 128});
  auto errorOf = [&](InterpreterOptions o) -> std::string {
    Interpreter interp(*tm, o);
    try {
      interp.run({x});
    } catch (const Error &e) {
      return e.diagnostic().str();
    }
    return "";
  };
  InterpreterOptions o;
  CHECK(errorOf(o).empty());
  o.maxTensorBytes = 65536;
  CHECK(errorOf(o).empty()); // exactly at the limit
  o.maxTensorBytes = 65535;
  CHECK_THAT(errorOf(o), Catch::StartsWith("expr %2: error: graph 'Net': cannot allocate a "
                                           "float32 tensor of shape (128, 128): it needs 65536 "
                                           "bytes (64.0 KiB), more than the run's tensor size "
                                           "limit of 65535 bytes") &&
                             Catch::Contains("relu"));
  o.maxTensorBytes = -1;
  o.maxLiveBytes = 2 * 65536 + 100;
  CHECK_THAT(
      errorOf(o),
      Catch::Contains("shape (128, 128), 65536 bytes (64.0 KiB): the run "
                      "already holds 131072 bytes (128.0 KiB) of tensors, "
                      "and its limit of live tensor memory is 131172 bytes") &&
          Catch::Contains("__matmul__"));
  o.maxLiveBytes = 3 * 65536;
  CHECK(errorOf(o).empty());
}

TEST_CASE("random inputs: the graph input's shape and dtype, or why not", "[runtime][interp]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"s", Shape{kUnknownDim, 4}}});
  b.finish(b.callFunction("relu", {b.arg(0)}));
  const InternalGraph &g = tm->graph();
  RandomInputOptions o;
  o.seed = 7;
  auto x = randomInput(*g.input(1), 0, o);
  REQUIRE(!x.failed());
  CHECK(x->shape() == llvm::ArrayRef<int64_t>({2, 3}));
  CHECK(x->bitwiseEqual(Tensor::randn({2, 3}, 7)));
  auto s = randomInput(*g.input(2), 1, o);
  REQUIRE(s.failed());
  CHECK_THAT(s.diagnostic().message,
             Catch::Contains("input 's' has shape (?, 4), whose symbolic sizes are not filled"));
  o.symbolicDimSize = 2;
  s = randomInput(*g.input(2), 1, o);
  REQUIRE(!s.failed());
  CHECK(s->shape() == llvm::ArrayRef<int64_t>({2, 4}));
  o.limits.maxTensorBytes = 31;
  s = randomInput(*g.input(2), 1, o);
  REQUIRE(s.failed());
  CHECK_THAT(s.diagnostic().message, Catch::Contains("input 's': float32 tensor of shape (2, 4) "
                                                     "needs 32 bytes, more than the limit"));
  auto self = randomInput(*g.input(0), 0, o);
  REQUIRE(self.failed());
  CHECK_THAT(self.diagnostic().message, Catch::Contains("is not a tensor"));
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

namespace {
/// conv (module) -> bn (module) -> relu (module or function), optionally with
/// the conv output also used by an add (which prevents fusion).
std::unique_ptr<TracedModule> convBnRelu(bool functionRelu, bool extraUse) {
  auto m = std::make_unique<Module>("ConvBnRelu");
  m->addModule<Conv2d>("conv", 3, 4, IntPair{3, 3}, IntPair{1, 1}, IntPair{1, 1},
                       IntPair{1, 1}, 1, /*bias=*/true, /*seed=*/7);
  auto bn = std::make_unique<BatchNorm2d>(4);
  auto vec = [](std::vector<float> v) { return Tensor::fromFloats({4}, v); };
  bn->registerParameter("weight", vec({1.5f, -0.5f, 0.75f, 2.0f}));
  bn->registerParameter("bias", vec({0.1f, -0.2f, 0.3f, 0.0f}));
  bn->registerBuffer("running_mean", vec({0.2f, -0.1f, 0.05f, 0.3f}));
  bn->registerBuffer("running_var", vec({0.5f, 1.5f, 0.8f, 2.0f}));
  m->registerModule("bn", std::move(bn));
  m->addModule<ReLU>("relu");
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 6, 5}}});
  Node *c = b.callModule(b.getAttr(b.self(), "conv"), {b.arg(0)});
  Node *n = b.callModule(b.getAttr(b.self(), "bn"), {c});
  Node *r = functionRelu ? b.callFunction("relu", {n})
                         : b.callModule(b.getAttr(b.self(), "relu"), {n});
  b.finish(extraUse ? b.callMethod(r, "__add__", {c}) : r);
  return tm;
}

void requireClose(const Tensor &a, const Tensor &b, double tol) {
  REQUIRE(a.shape() == b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    REQUIRE(a.at(i) == Approx(b.at(i)).margin(tol));
}
} // namespace

TEST_CASE("plan-time fusion: conv + batch norm + relu", "[runtime][interp][fusion]") {
  for (bool fn : {false, true})
    for (bool extra : {false, true}) {
      CAPTURE(fn, extra);
      auto tm = convBnRelu(fn, extra);
      const Module &conv = *tm->module("conv"), &bnm = *tm->module("bn");
      Tensor x = Tensor::randn({2, 3, 6, 5}, 3);
      // Unfused reference from the kernels.
      Tensor c = conv2d(x, *conv.tensor("weight"), *conv.tensor("bias"),
                        Conv2dParams{.stride = 1, .padding = 1});
      Tensor ref = unary(UnaryOp::Relu,
                         batchNorm(c, *bnm.tensor("running_mean"), *bnm.tensor("running_var"),
                                   *bnm.tensor("weight"), *bnm.tensor("bias"), 1e-5));
      if (extra)
        ref = binary(BinaryOp::Add, ref, c);
      // By default nothing that changes rounding: the kernels' bits.
      CHECK(Interpreter(*tm).run({x}).outputs[0].bitwiseEqual(ref));
      Interpreter interp(*tm, InterpreterOptions{.fastMath = true});
      Tensor fused = interp.run({x}).outputs[0];
      requireClose(fused, ref, 1e-4);
      // Watching the conv output runs the chain unfused and records the
      // conv's own value.
      const Node *convOut = nullptr;
      for (const Expr *e : tm->graph())
        if (auto *cm = llvm::dyn_cast<CallMethod>(e); cm && cm->isModuleCall() &&
                                                      cm->moduleNode()->owner() == &conv)
          convOut = e->output(0);
      REQUIRE(convOut);
      RunResult w = interp.run({x}, RunOptions{{convOut}, {}});
      requireClose(w.outputs[0], ref, 1e-4);
      REQUIRE(w.watched.at(convOut).size() == 1);
      CHECK(w.watched.at(convOut)[0].bitwiseEqual(c));
      // An end point inside the chain stops with the unfused value.
      RunResult stop = interp.run({x}, RunOptions{{}, {convOut}});
      CHECK(stop.stoppedAtEndPoints);
      CHECK(stop.outputs[0].bitwiseEqual(c));
    }
}

/// relu(bn(conv(x))) of convBnRelu's modules computed by the kernels one
/// by one (no fusion), from the module's current tensors; `convOut` gets
/// the conv's output.
Tensor unfusedConvBnRelu(const TracedModule &tm, const Tensor &x, Tensor *convOut = nullptr) {
  const Module &conv = *tm.module("conv"), &bnm = *tm.module("bn");
  Tensor c = conv2d(x, *conv.tensor("weight"), *conv.tensor("bias"),
                    Conv2dParams{.stride = 1, .padding = 1});
  if (convOut)
    *convOut = c;
  return unary(UnaryOp::Relu,
               batchNorm(c, *bnm.tensor("running_mean"), *bnm.tensor("running_var"),
                         *bnm.tensor("weight"), *bnm.tensor("bias"), 1e-5));
}

TEST_CASE("plan-time fusion refolds when a batch-norm tensor is replaced",
          "[runtime][interp][fusion]") {
  auto tm = convBnRelu(false, false);
  Interpreter interp(*tm, InterpreterOptions{.fastMath = true});
  Tensor x = Tensor::randn({2, 3, 6, 5}, 4);
  Tensor before = interp.run({x}).outputs[0];
  // Replace the running mean by assignment (no module version change): the
  // folded weights must follow.
  Module &bnm = *tm->module("bn");
  *bnm.tensor("running_mean") = Tensor::fromFloats({4}, {5.0f, 5.0f, 5.0f, 5.0f});
  Tensor after = interp.run({x}).outputs[0];
  requireClose(after, unfusedConvBnRelu(*tm, x), 1e-4);
  CHECK(!after.bitwiseEqual(before));
}

TEST_CASE("plan-time packed conv weights follow a replaced weight",
          "[runtime][interp][fusion]") {
  // The plan packs each conv weight once for the GEMM micro-kernel; a
  // weight replaced by assignment (same module, no version change) must be
  // packed again, with and without a batch norm folded in.
  for (bool extra : {false, true})
    for (bool fast : {false, true}) {
    CAPTURE(extra, fast);
    auto tm = convBnRelu(false, extra);
    Interpreter interp(*tm, InterpreterOptions{.fastMath = fast});
    Tensor x = Tensor::randn({2, 3, 6, 5}, 5);
    Tensor before = interp.run({x}).outputs[0];
    Module &conv = *tm->module("conv");
    *conv.tensor("weight") = Tensor::randn({4, 3, 3, 3}, 99);
    Tensor after = interp.run({x}).outputs[0];
    Tensor c;
    Tensor ref = unfusedConvBnRelu(*tm, x, &c);
    if (extra)
      ref = binary(BinaryOp::Add, ref, c);
    if (fast)
      requireClose(after, ref, 1e-4);
    else
      CHECK(after.bitwiseEqual(ref));
    CHECK(!after.bitwiseEqual(before));
    // And again, from the cache.
    CHECK(interp.run({x}).outputs[0].bitwiseEqual(after));
  }
}

namespace {
/// A residual block: y = relu(conv1(x) + z), 1x1 convs (no scratch
/// memory), with z one of
///  0: x itself (computed before conv1), through the function `add`;
///  1: x through `__add__`, z first (`x + conv1(x)`);
///  2: conv2(x), traced after conv1: the add is absorbed by conv2 instead;
///  3: a (1, 8, 1, 1) parameter: broadcast, the add runs as its op;
///  4: sigmoid(x), traced after conv1: no conv can absorb the add.
std::unique_ptr<TracedModule> residualBlock(int variant) {
  auto m = std::make_unique<Module>("Residual");
  for (const char *name : {"conv1", "conv2"})
    m->addModule<Conv2d>(name, 8, 8, IntPair{1, 1}, IntPair{1, 1}, IntPair{0, 0},
                         IntPair{1, 1}, 1, /*bias=*/true, /*seed=*/name[4]);
  m->registerParameter("shift", ramp({1, 8, 1, 1}, 0.3f));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 8, 9, 7}}});
  Node *x = b.arg(0);
  Node *c = b.callModule(b.getAttr(b.self(), "conv1"), {x});
  Node *z = variant == 2   ? b.callModule(b.getAttr(b.self(), "conv2"), {x})
            : variant == 3 ? b.getAttr(b.self(), "shift")
            : variant == 4 ? b.callFunction("sigmoid", {x})
                           : x;
  Node *s = variant == 0   ? b.callFunction("add", {c, z})
            : variant == 1 ? b.callMethod(z, "__add__", {c})
                           : b.callMethod(c, "__add__", {z});
  b.finish(b.callFunction("relu", {s}));
  return tm;
}
} // namespace

TEST_CASE("plan-time fusion: a residual add and relu run in the conv",
          "[runtime][interp][fusion]") {
  Tensor x = ramp({2, 8, 9, 7}, 0.05f);
  for (int variant = 0; variant < 5; ++variant) {
    CAPTURE(variant);
    auto tm = residualBlock(variant);
    auto conv = [&](const char *name) {
      const Module &m = *tm->module(name);
      return conv2d(x, *m.tensor("weight"), *m.tensor("bias"));
    };
    Tensor c = conv("conv1");
    Tensor z = variant == 2   ? conv("conv2")
               : variant == 3 ? *tm->tensor("shift")
               : variant == 4 ? unary(UnaryOp::Sigmoid, x)
                              : x;
    Tensor sum = variant == 1 ? binary(BinaryOp::Add, z, c) : binary(BinaryOp::Add, c, z);
    Tensor want = unary(UnaryOp::Relu, sum);
    Interpreter interp(*tm);
    // Watching the add's output runs each op on its own: the same bits,
    // and the add's value recorded.
    const Node *addOut = tm->graph().outputs()[0]->expr()->input(0);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {x}, addOut, want, sum);
    // Fused, the conv output, the sum and the relu are one buffer (less
    // memory than the ops one by one).
    if (variant <= 2)
      CHECK(fusedPeak < watchedPeak);
  }
}

TEST_CASE("nn.linear_act: bias, activation and tail on every output block",
          "[runtime][interp][fusion]") {
  // 111 rows (several row chunks and a partial panel), 200 columns (two
  // column tiles, a partial strip), depth 300 (two depth blocks): the
  // micro-kernel applies bias, activation and the tail block by block.
  using U = UnaryOp;
  std::pair<const char *, std::optional<U>> acts[] = {
      {"none", std::nullopt},    {"relu", U::Relu},           {"relu6", U::Relu6},
      {"sigmoid", U::Sigmoid},   {"silu", U::Silu},           {"hardswish", U::Hardswish},
      {"hardsigmoid", U::Hardsigmoid}, {"gelu", U::Gelu},     {"gelu_tanh", U::GeluTanh}};
  Tensor x = Tensor::randn({3, 37, 300}, 11);
  for (auto [act, op] : acts) {
    INFO(act);
    auto net = std::make_unique<Module>("Net");
    net->registerParameter("w", Tensor::randn({200, 300}, 12));
    net->registerParameter("b", Tensor::randn({200}, 13));
    auto tm = TracedModule::fromModule(std::move(net));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 37, 300}}});
    b.finish(b.callFunction("nn.linear_act",
                            {b.arg(0), b.getAttr(b.self(), "w"), b.getAttr(b.self(), "b")},
                            {{"activation", std::string(act)}}));
    Tensor want = linear(x, *tm->tensor("w"), *tm->tensor("b"));
    if (op)
      want = unary(*op, want);
    Tensor got = Interpreter(*tm).run({x}).outputs[0];
    requireClose(got, want, 2e-4);
  }
}

namespace {
/// A transformer's residual connection: y = linear(x) + z, in=out=200
/// features, 111 rows (several row chunks, a partial panel), with
///  0: z = x, through the function `add`;
///  1: z = x first, through `__add__` (`x + linear(x)`);
///  2: nn.linear_act with GELU, then + x;
///  3: a (200,) parameter: broadcast, the add runs as its op;
///  4: sigmoid(x), traced after the linear: no linear can absorb the add;
///  5: a weight computed in the graph (w * 1: not packed, the BLAS path).
std::unique_ptr<TracedModule> linearResidual(int variant) {
  auto net = std::make_unique<Module>("Block");
  net->registerParameter("w", Tensor::randn({200, 200}, 21));
  net->registerParameter("b", Tensor::randn({200}, 22));
  net->registerParameter("shift", Tensor::randn({200}, 23));
  auto tm = TracedModule::fromModule(std::move(net));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 37, 200}}});
  Node *x = b.arg(0), *w = b.getAttr(b.self(), "w"),
       *bias = b.getAttr(b.self(), "b");
  if (variant == 5)
    w = b.callFunction("mul", {w, 1.0});
  Node *y = variant == 2
                ? b.callFunction("nn.linear_act", {x, w, bias},
                                 {{"activation", std::string("gelu")}})
                : b.callFunction("nn.linear", {x, w}, {{"bias", bias}});
  Node *z = variant == 3   ? b.getAttr(b.self(), "shift")
            : variant == 4 ? b.callFunction("sigmoid", {x})
                           : x;
  Node *s = variant == 1   ? b.callMethod(z, "__add__", {y})
            : variant == 0 ? b.callFunction("add", {y, z})
                           : b.callMethod(y, "__add__", {z});
  b.finish(s);
  return tm;
}
} // namespace

TEST_CASE("plan-time fusion: a residual add runs in the linear layer",
          "[runtime][interp][fusion]") {
  Tensor x = Tensor::randn({3, 37, 200}, 24);
  for (int variant = 0; variant < 6; ++variant) {
    CAPTURE(variant);
    auto tm = linearResidual(variant);
    Tensor y = linear(x, *tm->tensor("w"), *tm->tensor("b"));
    if (variant == 2)
      y = unary(UnaryOp::Gelu, y);
    Tensor z = variant == 3   ? *tm->tensor("shift")
               : variant == 4 ? unary(UnaryOp::Sigmoid, x)
                              : x;
    Tensor want = variant == 1 ? binary(BinaryOp::Add, z, y)
                               : binary(BinaryOp::Add, y, z);
    Interpreter interp(*tm);
    // Watching the linear's output runs the add on its own.
    const Node *linOut =
        tm->graph().outputs()[0]->expr()->input(variant == 1 ? 1 : 0);
    interp.run({x}); // packs the weight (memory the plan keeps)
    RunResult fused = interp.run({x});
    RunResult watched = interp.run({x}, RunOptions{{linOut}, {}});
    REQUIRE(watched.watched.at(linOut).size() == 1);
    Tensor linWant = watched.watched.at(linOut)[0];
    // The fused run gives the bits of the watched one, add by add.
    CHECK(fused.outputs[0].bitwiseEqual(watched.outputs[0]));
    CHECK(watched.outputs[0].bitwiseEqual(
        variant == 1 ? binary(BinaryOp::Add, z, linWant)
                     : binary(BinaryOp::Add, linWant, z)));
    // ... and the linear layer's own result within rounding of linear().
    requireClose(fused.outputs[0], want, 2e-4);
    // Fused, the linear's result and the sum are one buffer (for the
    // BLAS path the product of w * 1 and the weight make the peak).
    if (variant <= 2)
      CHECK(fused.peakBytes < watched.peakBytes);
    CHECK(fused.peakBytes <= watched.peakBytes);
  }
}

namespace {
/// relu(batch_norm(concat([sigmoid(a), b], axis), ...)) with the batch
/// norm's statistics and affine tensors read by getattr; `concat` false:
/// relu(batch_norm(a)); `relu` false: no activation.
std::unique_ptr<TracedModule> concatNormRelu(bool concat, bool relu,
                                             DType bType = DType::Float32) {
  auto m = std::make_unique<Module>("DenseLayer");
  int64_t c = concat ? 7 : 3;
  m->registerBuffer("mean", ramp({1, c, 1, 1}, 0.2f));
  m->registerBuffer("var", binary(BinaryOp::Add, ramp({1, c, 1, 1}, 0.05f),
                                  Tensor::full({1, c, 1, 1}, 2.0)));
  m->registerParameter("weight", ramp({1, c, 1, 1}, 0.3f));
  m->registerParameter("bias", ramp({1, c, 1, 1}, 0.1f));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b =
      GraphBuilder::top(*tm, {{"a", Shape{2, 3, 5, 6}}, {"b", Shape{2, 4, 5, 6}, bType}});
  Node *x = b.arg(0);
  if (concat)
    x = b.callFunction("concat", {Arg::list({b.callFunction("sigmoid", {b.arg(0)}), b.arg(1)}), 1});
  Node *n = b.callFunction("batch_norm",
                           {x, b.getAttr(b.self(), "mean"), b.getAttr(b.self(), "var"),
                            b.getAttr(b.self(), "weight"), b.getAttr(b.self(), "bias")},
                           {{"eps", 1e-3}});
  b.finish(relu ? b.callFunction("relu", {n}) : n);
  return tm;
}
} // namespace

TEST_CASE("plan-time fusion: concat + batch norm + relu in one pass",
          "[runtime][interp][fusion]") {
  Tensor a = ramp({2, 3, 5, 6}, 0.07f), bIn = ramp({2, 4, 5, 6}, 0.11f);
  for (bool concat : {true, false})
    for (bool relu : {true, false}) {
      if (!concat && !relu)
        continue; // a lone batch norm is no chain
      CAPTURE(concat, relu);
      auto tm = concatNormRelu(concat, relu);
      Tensor x = concat ? rt::concat({unary(UnaryOp::Sigmoid, a), bIn}, 1) : a;
      Tensor want = batchNorm(x, *tm->tensor("mean"), *tm->tensor("var"),
                              *tm->tensor("weight"), *tm->tensor("bias"), 1e-3);
      if (relu)
        want = unary(UnaryOp::Relu, want);
      Interpreter interp(*tm);
      // Watching the batch norm's input runs each op on its own.
      const Node *bnIn = nullptr;
      for (const Expr *e : tm->graph())
        if (auto *cf = llvm::dyn_cast<CallFunction>(e); cf && cf->func().kind() == OpKind::BatchNorm)
          bnIn = e->input(0);
      REQUIRE(bnIn);
      auto [fusedPeak, watchedPeak] =
          runFusedAndWatched(interp, {a, bIn}, bnIn, want, x);
      // The concatenation is never materialised.
      if (concat)
        CHECK(fusedPeak < watchedPeak);
    }
  // A float64 part, which concat refuses: the fused step runs the ops and
  // reports the concat's own error.
  auto wide = concatNormRelu(true, true, DType::Float64);
  Tensor b64 = asDType(bIn, DType::Float64);
  REQUIRE_THROWS_WITH(Interpreter(*wide).run({a, b64}),
                      Catch::Contains("concat: input 1 (2, 4, 5, 6) has dtype float64"));
}

namespace {
/// conv(relu(batch_norm(concat([sigmoid(a), b], 1)))) with a of 100 and b of
/// 200 channels (depth 300: two depth blocks) on (2, ., h, w); `conv` is
/// "conv2d" (with bias, then a relu: a fused chain) or "nn.conv2d_act"
/// (relu6); the weight is 40 x 300 x k x k.
std::unique_ptr<TracedModule> normConv(bool concat, bool relu,
                                       const std::string &conv, int64_t h,
                                       int64_t w, int64_t k, int64_t stride) {
  auto m = std::make_unique<Module>("DenseLayer");
  int64_t c = concat ? 300 : 100;
  m->registerBuffer("mean", ramp({c}, 0.2f));
  m->registerBuffer(
      "var", binary(BinaryOp::Add, ramp({c}, 0.05f), Tensor::full({c}, 2.0)));
  m->registerParameter("weight", ramp({c}, 0.3f));
  m->registerParameter("bias", ramp({c}, 0.1f));
  m->registerParameter("cw", Tensor::randn({40, c, k, k}, 7));
  m->registerParameter("cb", Tensor::randn({40}, 8));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(
      *tm, {{"a", Shape{2, 100, h, w}}, {"b", Shape{2, 200, h, w}}});
  Node *x = b.arg(0);
  if (concat)
    x = b.callFunction(
        "concat",
        {Arg::list({b.callFunction("sigmoid", {b.arg(0)}), b.arg(1)}), 1});
  Node *n = b.callFunction(
      "batch_norm",
      {x, b.getAttr(b.self(), "mean"), b.getAttr(b.self(), "var"),
       b.getAttr(b.self(), "weight"), b.getAttr(b.self(), "bias")},
      {{"eps", 1e-3}});
  if (relu)
    n = b.callFunction("relu", {n});
  std::vector<Arg> args{n, b.getAttr(b.self(), "cw"),
                        b.getAttr(b.self(), "cb")};
  if (conv == "conv2d")
    b.finish(b.callFunction(
        "relu", {b.callFunction("conv2d", args, {{"stride", stride}})}));
  else
    b.finish(b.callFunction(
        conv, args,
        {{"stride", stride}, {"activation", std::string("relu6")}}));
  return tm;
}
} // namespace

TEST_CASE(
    "plan-time fusion: a pointwise conv normalises its input as it reads it",
    "[runtime][interp][fusion]") {
  // Spatial sizes: 9 x 11 (two strips and a narrow tail of 3 columns) and
  // 24 x 30 (several column tiles).
  for (auto [h, w] : {std::pair{9, 11}, std::pair{24, 30}})
    for (bool concat : {true, false})
      for (bool relu : {true, false})
        for (const char *conv : {"conv2d", "nn.conv2d_act"})
          for (auto [k, stride] :
               {std::pair{1, 1}, std::pair{3, 1}, std::pair{1, 2}}) {
            if (!concat && !relu)
              continue; // a lone batch norm is no chain
            CAPTURE(h, w, concat, relu, conv, k, stride);
            auto tm = normConv(concat, relu, conv, h, w, k, stride);
            Tensor a = Tensor::randn({2, 100, h, w}, 1),
                   bIn = Tensor::randn({2, 200, h, w}, 2);
            Tensor x =
                concat ? rt::concat({unary(UnaryOp::Sigmoid, a), bIn}, 1) : a;
            Tensor bn =
                batchNorm(x, *tm->tensor("mean"), *tm->tensor("var"),
                          *tm->tensor("weight"), *tm->tensor("bias"), 1e-3);
            Tensor in = relu ? unary(UnaryOp::Relu, bn) : bn;
            Conv2dParams p;
            p.stride = stride;
            Tensor want = conv2d(in, *tm->tensor("cw"), *tm->tensor("cb"), p);
            want = unary(std::string(conv) == "conv2d" ? UnaryOp::Relu
                                                       : UnaryOp::Relu6,
                         want);
            Interpreter interp(*tm);
            const Node *bnOut = nullptr;
            for (const Expr *e : tm->graph())
              if (auto *cf = llvm::dyn_cast<CallFunction>(e);
                  cf && cf->func().kind() == OpKind::BatchNorm)
                bnOut = e->output(0);
            REQUIRE(bnOut);
            auto [fusedPeak, watchedPeak] =
                runFusedAndWatched(interp, {a, bIn}, bnOut, want, bn);
            // A pointwise conv holds neither the concatenation nor its
            // normalised input, only its patch buffers.
            if (concat && k == 1 && stride == 1 &&
                rt::convMicroKernelAvailable())
              CHECK(fusedPeak + in.numel() * 4 <= watchedPeak);
          }
}

namespace {
/// concat([conv2d_act(x, w1, b1), conv2d_act(x, w2), conv2d_act(x, w3, b3)], 1)
/// (relu activations) on a static input of `batch` images; `mixed`: w2 and
/// w3 are 3x3 (padding 1), else all three are 1x1 with more channels;
/// `extraUse`: the first conv's output is also a graph output; `chains`:
/// relu(conv2d(...)) instead of conv2d_act, as PyTorch exports them.
std::unique_ptr<TracedModule> convConcat(int64_t batch, bool mixed,
                                         bool extraUse, bool chains) {
  auto m = std::make_unique<Module>("Inception");
  int64_t k = mixed ? 3 : 1;
  m->registerParameter("w1", ramp({mixed ? 5 : 20, 4, 1, 1}, 0.05f));
  m->registerParameter("b1", ramp({mixed ? 5 : 20}, 0.1f));
  m->registerParameter("w2", ramp({mixed ? 3 : 12, 4, k, k}, 0.02f));
  m->registerParameter("w3", ramp({mixed ? 6 : 24, 4, k, k}, 0.03f));
  m->registerParameter("b3", ramp({mixed ? 6 : 24}, 0.2f));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{batch, 4, 7, 9}}});
  auto conv = [&](const char *w, const char *bias, int64_t pad) {
    std::vector<Arg> args{b.arg(0), b.getAttr(b.self(), w)};
    args.push_back(bias ? Arg(b.getAttr(b.self(), bias)) : Arg::none());
    if (chains)
      return b.callFunction(
          "relu", {b.callFunction("conv2d", args, {{"padding", pad}})});
    return b.callFunction(
        "nn.conv2d_act", args,
        {{"padding", pad}, {"activation", std::string("relu")}});
  };
  Node *c1 = conv("w1", "b1", 0), *c2 = conv("w2", nullptr, k / 2),
       *c3 = conv("w3", "b3", k / 2);
  Node *cat = b.callFunction("concat", {Arg::list({c1, c2, c3}), 1});
  if (extraUse)
    b.finish(Arg::tuple({cat, c1}));
  else
    b.finish(cat);
  return tm;
}
} // namespace

TEST_CASE("plan-time placement: convs write into their concat's output",
          "[runtime][interp][fusion]") {
  for (int64_t batch : {1, 2})
    for (bool mixed : {false, true})
      for (bool extraUse : {false, true})
        for (bool chains : {false, true}) {
          CAPTURE(batch, mixed, extraUse, chains);
          auto tm = convConcat(batch, mixed, extraUse, chains);
          Tensor x = ramp({batch, 4, 7, 9}, 0.13f);
          int64_t pad = mixed ? 1 : 0;
          auto conv = [&](const char *w, const char *bias, int64_t p) {
            return unary(UnaryOp::Relu,
                         conv2d(x, *tm->tensor(w),
                                bias ? *tm->tensor(bias) : Tensor(),
                                Conv2dParams{.padding = p}));
          };
          Tensor want =
              rt::concat({conv("w1", "b1", 0), conv("w2", nullptr, pad),
                          conv("w3", "b3", pad)},
                         1);
          Interpreter interp(*tm);
          // Watching a part runs every op on its own: the same values, and
          // the part's own.
          const Node *part = tm->graph().outputs()[0]->expr()->input(1);
          auto [placedPeak, watchedPeak] = runFusedAndWatched(
              interp, {x}, part, want, conv("w2", nullptr, pad));
          // Placed (each part used by the concat alone; at batch 2 the
          // parts are channel slices with strided images), the parts and
          // the concatenation are one buffer: with 1x1 convs (no scratch)
          // the concat's moment is the peak, and it halves.
          if (!mixed)
            CHECK(!extraUse == (placedPeak < watchedPeak));
          // A second run reuses the plan and its buffers.
          CHECK(interp.run({x}).outputs[0].bitwiseEqual(want));
        }
  // A weight replaced by one with more output channels: the graph's
  // static shapes no longer hold, that part lands in a tensor of its own
  // and the concat copies (the first part, whose shape still holds, is
  // placed).
  for (bool chains : {false, true}) {
    CAPTURE(chains);
    auto tm = convConcat(1, true, false, chains);
    Tensor x = ramp({1, 4, 7, 9}, 0.13f);
    Interpreter interp(*tm);
    interp.run({x});
    *tm->tensor("w2") = ramp({4, 4, 3, 3}, 0.04f);
    auto conv = [&](const char *w, const char *bias, int64_t p) {
      return unary(UnaryOp::Relu, conv2d(x, *tm->tensor(w),
                                         bias ? *tm->tensor(bias) : Tensor(),
                                         Conv2dParams{.padding = p}));
    };
    Tensor want = rt::concat(
        {conv("w1", "b1", 0), conv("w2", nullptr, 1), conv("w3", "b3", 1)}, 1);
    REQUIRE(want.dim(1) == 15);
    CHECK(interp.run({x}).outputs[0].bitwiseEqual(want));
  }
}

namespace {
/// The stem of a CNN: [relu](conv2d(x, w, b)) or conv2d_act(x, w, b), then
/// max_pool2d (3x3 stride 2 pad 1) or max_pool_nd (3x3 stride 2, ceil
/// mode); `extraUse`: the pooled value's input is also a graph output.
std::unique_ptr<TracedModule> convPool(int form, bool nd, bool extraUse) {
  auto m = std::make_unique<Module>("Stem");
  m->registerParameter("w", ramp({12, 3, 5, 5}, 0.01f));
  m->registerParameter("b", ramp({12}, 0.1f));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 33, 30}}});
  std::vector<Arg> args{b.arg(0), b.getAttr(b.self(), "w"),
                        b.getAttr(b.self(), "b")};
  std::vector<KwArg> kw{{"stride", 2}, {"padding", 2}};
  Node *c = nullptr;
  if (form == 0) // conv alone
    c = b.callFunction("conv2d", args, kw);
  else if (form == 1) // a chain: conv + relu
    c = b.callFunction("relu", {b.callFunction("conv2d", args, kw)});
  else { // conv2d_act, as -p optimize writes it
    kw.push_back({"activation", std::string("relu")});
    c = b.callFunction("nn.conv2d_act", args, kw);
  }
  Node *p =
      nd ? b.callFunction("max_pool_nd", {c, Arg::list({3, 3})},
                          {{"stride", Arg::list({2, 2})}, {"ceil_mode", true}})
         : b.callFunction("max_pool2d", {c, 3},
                          {{"stride", 2}, {"padding", 1}});
  if (extraUse)
    b.finish(Arg::tuple({p, c}));
  else
    b.finish(p);
  return tm;
}
} // namespace

TEST_CASE("plan-time fusion: a conv pools its own output",
          "[runtime][interp][fusion]") {
  // Whatever the conv's form and the pool's op, the result is the kernels'
  // conv (and relu), then the pool, bit for bit; watching the conv's value
  // or reading it elsewhere runs the two steps.
  for (int form : {0, 1, 2})
    for (bool nd : {false, true})
      for (bool extraUse : {false, true}) {
        CAPTURE(form, nd, extraUse);
        auto tm = convPool(form, nd, extraUse);
        Tensor x = ramp({2, 3, 33, 30}, 0.07f);
        Tensor c = conv2d(x, *tm->tensor("w"), *tm->tensor("b"),
                          Conv2dParams{.stride = 2, .padding = 2});
        if (form != 0)
          c = unary(UnaryOp::Relu, c);
        Tensor want =
            nd ? maxPoolNd(
                     c, WindowNd{{3, 3}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, true})
               : maxPool2d(c, Pool2dParams{.kernel = 3,
                                           .stride = Int2(2),
                                           .padding = 1});
        Interpreter interp(*tm);
        RunResult r = interp.run({x});
        REQUIRE(r.outputs[0].bitwiseEqual(want));
        if (extraUse)
          CHECK(r.outputs[1].bitwiseEqual(c));
        // The conv's value observed: unfused, the same bits.
        const Node *convOut = nullptr;
        for (const Expr *e : tm->graph())
          if (auto *cf = llvm::dyn_cast<CallFunction>(e);
              cf && (cf->func().name() == "relu" ||
                     cf->func().name() == "conv2d_act" ||
                     (form == 0 && cf->func().name() == "conv2d")))
            convOut = e->output(0);
        REQUIRE(convOut);
        RunResult w = interp.run({x}, RunOptions{{convOut}, {}});
        CHECK(w.outputs[0].bitwiseEqual(want));
        CHECK(w.watched.at(convOut)[0].bitwiseEqual(c));
      }
}

TEST_CASE("plan-time fusion: elementwise chains run in one pass, bit for bit",
          "[runtime][interp][fusion]") {
  using B = BinaryOp;
  auto scalar = [](float v) { return Tensor::fromFloats({}, {v}); };
  SECTION("GELU as PyTorch exports it: x * (1 + erf(x / sqrt 2)) * 0.5") {
    // Rows of 700: several chunks per row, both threads. GELU's input is
    // computed (x = in - 0.25, as a bias add): read twice, it joins too.
    Shape shape{3, 40, 700};
    auto tm = TracedModule::fromModule(std::make_unique<Module>("Gelu"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", shape}});
    Node *x = b.callFunction("sub", {b.arg(0), 0.25f});
    Node *e = b.callFunction("erf", {b.callFunction("div", {x, 1.4142135f})});
    Node *y = b.callFunction(
        "mul",
        {b.callFunction("mul", {x, b.callFunction("add", {e, 1.0f})}), 0.5f});
    b.finish(y);
    Tensor in = ramp(shape, 0.37f);
    Tensor xw = binary(B::Sub, in, scalar(0.25f));
    Tensor erfWant =
        unary(UnaryOp::Erf, binary(B::Div, xw, scalar(1.4142135f)));
    Tensor want = binary(
        B::Mul, binary(B::Mul, xw, binary(B::Add, erfWant, scalar(1.0f))),
        scalar(0.5f));
    Interpreter interp(*tm);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {in}, e, want, erfWant);
    // Fused, the output is the one tensor of its size the run allocates.
    CHECK(fusedPeak < 2 * in.numel() * 4);
    CHECK(fusedPeak < watchedPeak);
  }
  SECTION("a layer norm's tail: operands broadcast along rows and columns") {
    // y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis
    // of 37 (not a multiple of a vector).
    Shape shape{6, 10, 37};
    auto m = std::make_unique<Module>("Norm");
    m->registerParameter("gamma", ramp({37}, 0.11f));
    m->registerParameter("beta", ramp({37}, 0.07f));
    auto tm = TracedModule::fromModule(std::move(m));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", shape}});
    Node *x = b.arg(0);
    Node *d = b.callFunction("sub", {x, b.callFunction("mean", {x, -1, true})});
    Node *v =
        b.callFunction("mean", {b.callFunction("pow", {d, 2.0f}), -1, true});
    Node *s = b.callFunction("sqrt", {b.callFunction("add", {v, 1e-5f})});
    Node *q = b.callFunction("div", {d, s});
    Node *y = b.callFunction(
        "add", {b.callFunction("mul", {q, b.getAttr(b.self(), "gamma")}),
                b.getAttr(b.self(), "beta")});
    b.finish(y);
    Tensor in = ramp(shape, 0.5f);
    Tensor dw = binary(B::Sub, in, mean(in, {-1}, true));
    Tensor vw = mean(binary(B::Pow, dw, scalar(2.0f)), {-1}, true);
    Tensor qw = binary(B::Div, dw,
                       unary(UnaryOp::Sqrt, binary(B::Add, vw, scalar(1e-5f))));
    Tensor want = binary(B::Add, binary(B::Mul, qw, *tm->tensor("gamma")),
                         *tm->tensor("beta"));
    Interpreter interp(*tm);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {in}, q, want, qw);
    CHECK(fusedPeak < watchedPeak);
  }
  SECTION("a tree: two branches meet") {
    // y = sigmoid(x * 0.3) * neg(x - 1): each branch's value is kept while
    // the other is computed.
    auto tm = TracedModule::fromModule(std::make_unique<Module>("Tree"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{5, 1100}}});
    Node *x = b.arg(0);
    Node *s = b.callFunction("sigmoid", {b.callFunction("mul", {x, 0.3f})});
    Node *n = b.callFunction("neg", {b.callFunction("sub", {x, 1.0f})});
    b.finish(b.callFunction("mul", {s, n}));
    Tensor in = ramp({5, 1100}, 0.41f);
    Tensor sw = unary(UnaryOp::Sigmoid, binary(B::Mul, in, scalar(0.3f)));
    Tensor nw = unary(UnaryOp::Neg, binary(B::Sub, in, scalar(1.0f)));
    Interpreter interp(*tm);
    runFusedAndWatched(interp, {in}, s, binary(B::Mul, sw, nw), sw);
  }
  SECTION("a transposed view as an operand, pow by 2 inside the chain") {
    // y = relu(t * 2) ** 2 * 0.5 + t, t = x^T: binary ops read t as a view
    // (gathered per chunk), the intermediate values are dense.
    auto tm = TracedModule::fromModule(std::make_unique<Module>("View"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{300, 257}}});
    Node *t = b.callFunction("transpose", {b.arg(0), Arg::ints({1, 0})});
    Node *r = b.callFunction("relu", {b.callFunction("mul", {t, 2.0f})});
    Node *y = b.callFunction(
        "add",
        {b.callFunction("mul", {b.callFunction("pow", {r, 2.0f}), 0.5f}), t});
    b.finish(y);
    Tensor in = ramp({300, 257}, 0.29f);
    Tensor tw = transpose(in, {1, 0});
    Tensor rw = unary(UnaryOp::Relu, binary(B::Mul, tw, scalar(2.0f)));
    Tensor want = binary(
        B::Add, binary(B::Mul, binary(B::Pow, rw, scalar(2.0f)), scalar(0.5f)),
        tw);
    Interpreter interp(*tm);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {in}, r, want, rw);
    CHECK(fusedPeak < 2 * in.numel() * 4);
    CHECK(fusedPeak < watchedPeak);
  }
}

TEST_CASE("plan-time fusion: reductions over the last axis join the chain",
          "[runtime][interp][fusion]") {
  using B = BinaryOp;
  auto scalar = [](float v) { return Tensor::fromFloats({}, {v}); };
  SECTION("softmax as exp(x - max) / sum, of a transposed view") {
    // Rows of 1500 (longer than a chunk of the elementwise loop), x^T read
    // as a view: the reductions read it gathered.
    auto tm = TracedModule::fromModule(std::make_unique<Module>("Softmax"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1500, 7}}});
    Node *t = b.callFunction("transpose", {b.arg(0), Arg::ints({1, 0})});
    Node *d = b.callFunction("sub", {t, b.callFunction("max", {t, -1, true})});
    Node *e = b.callFunction("exp", {d});
    b.finish(b.callFunction("div", {e, b.callFunction("sum", {e, 1, true})}));
    Tensor in = ramp({1500, 7}, 0.013f);
    Tensor tw = contiguous(transpose(in, {1, 0}));
    Tensor ew =
        unary(UnaryOp::Exp,
              binary(B::Sub, tw, reduce(ReduceOp::Max, tw, {-1}, true)));
    Tensor want = binary(B::Div, ew, reduce(ReduceOp::Sum, ew, {1}, true));
    Interpreter interp(*tm);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {in}, e, want, ew);
    CHECK(fusedPeak < watchedPeak);
  }
  SECTION("RMS norm: x * rsqrt(mean(x * x) + eps) * w, rows of one element") {
    for (int64_t cols : {300, 1}) {
      CAPTURE(cols);
      auto m = std::make_unique<Module>("RmsNorm");
      m->registerParameter("w", ramp({cols}, 0.3f));
      auto tm = TracedModule::fromModule(std::move(m));
      GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 33, cols}}});
      Node *x = b.arg(0);
      Node *ms =
          b.callFunction("mean", {b.callFunction("mul", {x, x}), -1, true});
      Node *r = b.callFunction("rsqrt", {b.callFunction("add", {ms, 1e-6f})});
      b.finish(b.callFunction(
          "mul", {b.callFunction("mul", {x, r}), b.getAttr(b.self(), "w")}));
      Tensor in = ramp({2, 33, cols}, 0.21f);
      Tensor msw = mean(binary(B::Mul, in, in), {-1}, true);
      Tensor rw = unary(UnaryOp::Rsqrt, binary(B::Add, msw, scalar(1e-6f)));
      Tensor want = binary(B::Mul, binary(B::Mul, in, rw), *tm->tensor("w"));
      Interpreter interp(*tm);
      auto [fusedPeak, watchedPeak] =
          runFusedAndWatched(interp, {in}, ms, want, msw);
      CHECK(fusedPeak < watchedPeak);
    }
  }
  SECTION("other axes, and rows too long for one pass, run op by op") {
    // x - mean(x, axis) for the first axis (no row value), then for the
    // last axis of rows of 9000 (longer than MaxFusedRow) and of 9 traced
    // at 9000: either way each op runs on its own, bit for bit.
    for (int axis : {0, -1}) {
      auto tm = TracedModule::fromModule(std::make_unique<Module>("Center"));
      GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 9000}}});
      Node *x = b.arg(0);
      Node *c =
          b.callFunction("sub", {x, b.callFunction("mean", {x, axis, true})});
      b.finish(b.callFunction("mul", {c, c}));
      Interpreter interp(*tm);
      for (int64_t cols : {9000, 9}) {
        CAPTURE(axis, cols);
        Tensor in = ramp({3, cols}, 0.17f);
        Tensor cw = binary(B::Sub, in, mean(in, {axis}, true));
        CHECK(interp.run({in}).outputs[0].bitwiseEqual(binary(B::Mul, cw, cw)));
      }
    }
  }
}

TEST_CASE(
    "plan-time fusion: chains whose shapes change at run time run op by op",
    "[runtime][interp][fusion]") {
  // z = neg(x + y), traced at (4, 5) for both; a traced module runs at
  // other sizes where its ops allow.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b =
      GraphBuilder::top(*tm, {{"x", Shape{4, 5}}, {"y", Shape{4, 5}}});
  Node *sum = b.callFunction("add", {b.arg(0), b.arg(1)});
  b.finish(b.callFunction("neg", {sum}));
  Interpreter interp(*tm);
  Tensor x = ramp({4, 5}, 0.3f);
  // y of (1, 5): the chain's values all have the output's shape.
  Tensor y = ramp({1, 5}, 0.9f);
  CHECK(same(interp.run({x, y}).outputs[0],
             unary(UnaryOp::Neg, binary(BinaryOp::Add, x, y))));
  // (3, 5) does not broadcast: the add reports it, at its own expr.
  try {
    interp.run({x, ramp({3, 5})});
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(e.diagnostic().loc.exprId == sum->expr()->id());
    CHECK_THAT(e.diagnostic().str(),
               Catch::Contains("do not broadcast") && Catch::Contains("add"));
  }
}

TEST_CASE("plan-time fusion: clip(0, 6) after a conv is its relu6",
          "[runtime][interp][fusion]") {
  // ONNX exports ReLU6 as Clip(0, 6); any other bounds stay a clip. NaN,
  // infinities and -0 in the input reach the clip through the conv.
  for (double upper : {6.0, 5.0}) {
    CAPTURE(upper);
    auto m = std::make_unique<Module>("Net");
    m->registerParameter("w", ramp({64, 3, 3, 3}, 0.21f));
    auto tm = TracedModule::fromModule(std::move(m));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 40, 37}}});
    Node *c = b.callFunction("conv2d", {b.arg(0), b.getAttr(b.self(), "w")});
    b.finish(b.callFunction("clip", {c, 0.0, upper}));
    Tensor x = ramp({1, 3, 40, 37}, 0.7f);
    float *px = x.data<float>();
    px[5] = std::numeric_limits<float>::quiet_NaN();
    px[100] = std::numeric_limits<float>::infinity();
    px[200] = -std::numeric_limits<float>::infinity();
    Tensor cw = conv2d(x, *tm->tensor("w"), Tensor());
    Tensor want = clip(cw, 0.0, upper);
    Interpreter interp(*tm);
    auto [fusedPeak, watchedPeak] =
        runFusedAndWatched(interp, {x}, c, want, cw);
    if (upper == 6.0)
      CHECK(fusedPeak < watchedPeak); // the conv's output is the result
    else
      CHECK(fusedPeak == watchedPeak);
  }
}
