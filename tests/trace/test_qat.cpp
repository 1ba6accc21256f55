//===- test_qat.cpp - Quantisation-aware modules while tracing -----------===//
//
// The reference's QAT rules (census §1.9, MegEngine's test_qat_module.py):
// observers and FakeQuantize are builtin; a user observer or fake-quantiser
// is replaced by a FakeQuantize with its parameters; and the helper
// `_apply_fakequant_with_observer(self, t, fake_quant, observer)` is
// recorded as one CallFunction per quantised tensor, which interprets like
// the eager observer + fake-quantiser, reads back from .tmir and survives
// flatten.
//
//===----------------------------------------------------------------------===//
#include <cmath>

#include "Layers.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/ir/StateDict.h"
#include "tm/runtime/Compare.h"

using namespace tmg;
using namespace layers;
using namespace fixtures;

namespace {

struct MyObserver : MinMaxObserver {}; // a user subclass: not builtin

/// linear(x, fq(obs(weight))) -> fq(obs(.)): the reference's QAT Linear.
struct QATLinear : LayerOf<QATLinear, QATLayer> {
  /// `observers`: 0 none, 1 MinMaxObserver, 2 a user subclass (replaced).
  explicit QATLinear(int observers = 1, bool weightFakeQuant = true)
      : LayerOf("QATLinear", {"x"}, true, true) {
    registerParameter("weight", Tensor::randn({4, 4}, 3));
    if (observers)
      addModule<MinMaxObserver>("weight_observer");
    if (weightFakeQuant)
      addModule<FakeQuantize>("weight_fake_quant", "qint8", QParams{0.02, 0});
    if (observers == 2)
      addModule<MyObserver>("act_observer");
    else if (observers == 1)
      addModule<MinMaxObserver>("act_observer");
    addModule<FakeQuantize>("act_fake_quant", "quint8", QParams{0.05, 100});
  }
  Var forward(Var x) {
    Var w = applyWeight(attr("weight"));
    return applyAct(F::linear(x, w));
  }
};

struct TwoLinears : LayerOf<TwoLinears> {
  TwoLinears() : LayerOf("TwoLinears", {"x"}) {
    addModule<QATLinear>("fc0");
    addModule<QATLinear>("fc1", 1, false);
  }
  Var forward(Var x) { return F::relu(mod("fc1")(mod("fc0")(x))); }
};

/// What the interpreter must compute: fake_quant(linear(x, fake_quant(w))).
Tensor byHand(const Tensor &x, const Tensor &w, bool weightFakeQuant = true) {
  Var wq = weightFakeQuant ? F::fake_quant(Var(w), 0.02, 0, -128, 127) : Var(w);
  return F::fake_quant(F::linear(Var(x), wq), 0.05, 100, 0, 255).value();
}

size_t helperCalls(const InternalGraph &g) {
  return g.getFunctionByType(&fakeQuantWithObserverFunction()).asCount();
}

/// The .tmir text of `m` (weights in a safetensors image) and back.
std::unique_ptr<TracedModule> tmirRoundTrip(const TracedModule &m) {
  WeightFile w;
  TmirWriteOptions wo;
  wo.weights = &w;
  std::string text = printTmir(m, wo);
  TmirReadOptions ro;
  ro.weights = &w;
  auto back = parseTmir(text, "qat.tmir", ro);
  if (back.failed())
    FAIL(back.diagnostic().str());
  CHECK(compareModules(m, **back).value_or("") == "");
  WeightFile again;
  wo.weights = &again;
  CHECK(printTmir(**back, wo) == text);
  return std::move(*back);
}

} // namespace

// First in the file: before anything is traced, the tracer library has
// registered the QAT module types and the helper with its kernel.
TEST_CASE("QAT: a .tmir file with QAT modules and the helper reads and runs",
          "[trace][qat]") {
  const char *text =
      "tmir 3\n"
      "ids 5 5\n"
      "module Q traced top {\n"
      "  fq = FakeQuantize builtin {\n"
      "    dtype = 'qint8'\n"
      "    qmin = -128\n"
      "    qmax = 127\n"
      "    scale = 0.5\n"
      "    zero_point = 0\n"
      "  }\n"
      "  obs = MinMaxObserver builtin {\n"
      "    dtype = 'qint8'\n"
      "    min_val = buffer(float32(), [inf])\n"
      "    max_val = buffer(float32(), [-inf])\n"
      "  }\n"
      "graph name='Q' qualname='Q' argdef=((Module, Tensor), {}) outdef=Tensor "
      "inputs=[%0 'self' module<Module> 'Q' #0 'self', %1 'x' float32(4) 'Q.[x]' #1 'x'] "
      "reserved=['func__apply_fakequant_with_observer']\n"
      "Q.Graph (self, x) {\n"
      "\t%2:\tfq = getattr(self, \"fq\") -> (FakeQuantize)\t;; getattr='fq' base=%0 "
      "outs=[%2 'fq' module<FakeQuantize> 'Q.fq']\n"
      "\t%3:\tobs = getattr(self, \"obs\") -> (MinMaxObserver)\t;; getattr='obs' base=%0 "
      "outs=[%3 'obs' module<MinMaxObserver> 'Q.obs']\n"
      "\t%4:\t_apply_fakequant_with_observer_out = "
      "module._apply_fakequant_with_observer(self, x, fq, obs, )\t;; "
      "fn=module._apply_fakequant_with_observer args=((%0, %1, %2, %3), {}) "
      "outs=[%4 '_apply_fakequant_with_observer_out' float32(4) "
      "'Q.[func__apply_fakequant_with_observer]'] outdef=Tensor\n"
      "\treturn _apply_fakequant_with_observer_out\t;; outs=[%4]\n"
      "}\n"
      "}\n";
  auto m = parseTmir(text, "q.tmir");
  if (m.failed())
    FAIL(m.diagnostic().str());
  checkVerified(**m);
  Tensor x = Tensor::zeros({4});
  const float in[] = {0.3f, -1.2f, 70.f, 0.74f}, want[] = {0.5f, -1.f, 63.5f, 0.5f};
  std::copy(in, in + 4, x.data<float>());
  Tensor got = run(**m, {x})[0];
  for (int i = 0; i < 4; ++i)
    CHECK(got.at(i) == want[i]);
  CHECK(std::isinf((*m)->module("obs")->tensor("min_val")->at(0)));
}

TEST_CASE("QAT: observers and FakeQuantize are builtin; others are replaced",
          "[trace][qat]") {
  Tensor x = Tensor::randn({2, 4}, 9);
  SECTION("builtin observer: kept, one CallFunction per quantised tensor") {
    QATLinear net;
    (void)net(x); // calibration
    auto tm = traceModule(net, Var::meta({2, 4}));
    CHECK(tm->graph().str() ==
          "QATLinear.Graph (self, x) {\n"
          "\t%2:\tweight = getattr(self, \"weight\") -> (Tensor)\n"
          "\t%3:\tweight_fake_quant = getattr(self, \"weight_fake_quant\") -> (FakeQuantize)\n"
          "\t%4:\tweight_observer = getattr(self, \"weight_observer\") -> (MinMaxObserver)\n"
          "\t%5:\t_apply_fakequant_with_observer_out = "
          "module._apply_fakequant_with_observer(self, weight, weight_fake_quant, "
          "weight_observer, )\n"
          "\t%6:\tlinear_out = nn.linear(x, _apply_fakequant_with_observer_out, )\n"
          "\t%7:\tact_fake_quant = getattr(self, \"act_fake_quant\") -> (FakeQuantize)\n"
          "\t%8:\tact_observer = getattr(self, \"act_observer\") -> (MinMaxObserver)\n"
          "\t%9:\t_apply_fakequant_with_observer_out_1 = "
          "module._apply_fakequant_with_observer(self, linear_out, act_fake_quant, "
          "act_observer, )\n"
          "\treturn _apply_fakequant_with_observer_out_1\n"
          "}");
    CHECK(tm->module("act_observer")->isBuiltin());
    Tensor got = run(*tm, {x})[0];
    CHECK(got.bitwiseEqual(Var(net(x)).value()));
    CHECK(got.bitwiseEqual(byHand(x, *net.tensor("weight"))));
    checkVerified(*tm);
  }
  SECTION("user observer: replaced by FakeQuantize with its qparams") {
    QATLinear net(2);
    (void)net(x); // calibration: MyObserver records min/max
    QParams want = static_cast<MyObserver *>(net.module("act_observer"))->qparams();
    auto tm = traceModule(net, Var::meta({2, 4}));
    CHECK(tm->graph().str() ==
          "QATLinear.Graph (self, x) {\n"
          "\t%2:\tweight = getattr(self, \"weight\") -> (Tensor)\n"
          "\t%3:\tweight_fake_quant = getattr(self, \"weight_fake_quant\") -> (FakeQuantize)\n"
          "\t%4:\tweight_observer = getattr(self, \"weight_observer\") -> (MinMaxObserver)\n"
          "\t%5:\t_apply_fakequant_with_observer_out = "
          "module._apply_fakequant_with_observer(self, weight, weight_fake_quant, "
          "weight_observer, )\n"
          "\t%6:\tlinear_out = nn.linear(x, _apply_fakequant_with_observer_out, )\n"
          "\t%7:\tact_fake_quant = getattr(self, \"act_fake_quant\") -> (FakeQuantize)\n"
          "\t%8:\t_apply_fakequant_with_observer_out_1 = "
          "module._apply_fakequant_with_observer(self, linear_out, act_fake_quant, None, )\n"
          "\treturn _apply_fakequant_with_observer_out_1\n"
          "}");
    CHECK(!net.module("act_observer")); // in place, as the reference
    Module *fq = tm->module("act_fake_quant");
    REQUIRE(fq);
    CHECK(fq->floatValue("scale") == want.scale);
    CHECK(fq->intValue("zero_point") == want.zeroPoint);
    CHECK(run(*tm, {x})[0].bitwiseEqual(Var(net(x)).value()));
    checkVerified(*tm);
  }
}

TEST_CASE("QAT: the helper call's arguments are self, the tensor and two modules or None",
          "[trace][qat]") {
  QATLinear net(0, true); // no observers
  auto tm = traceModule(net, Var::meta({2, 4}));
  InternalGraph &g = tm->graph();
  REQUIRE(helperCalls(g) == 2);
  Expr *w = g.getFunctionByType(&fakeQuantWithObserverFunction()).asList()[0];
  CHECK(w->str() == "%4:\t_apply_fakequant_with_observer_out = "
                    "module._apply_fakequant_with_observer(self, weight, weight_fake_quant, "
                    "None, )");
  // The module arguments are inputs of the call, as the reference's
  // `add_inputs` makes them: self and the GetAttr's module node.
  REQUIRE(w->numInputs() == 3);
  CHECK(w->input(0) == g.self());
  auto *fq = llvm::dyn_cast<ModuleNode>(w->input(2));
  REQUIRE(fq);
  CHECK(fq->owner() == tm->module("weight_fake_quant"));
  CHECK(w->arg(3).isConst());
  // Without an observer the value only goes through the fake-quantiser.
  Tensor x = Tensor::randn({2, 4}, 4);
  CHECK(run(*tm, {x})[0].bitwiseEqual(byHand(x, *net.tensor("weight"))));
  // Without a fake-quantiser it only goes through the observer: unchanged.
  QATLinear noWeightFq(1, false);
  auto tm2 = traceModule(noWeightFq, Var::meta({2, 4}));
  CHECK(tm2->graph().str().find("module._apply_fakequant_with_observer(self, weight, None, "
                                "weight_observer, )") != std::string::npos);
  CHECK(run(*tm2, {x})[0].bitwiseEqual(byHand(x, *noWeightFq.tensor("weight"), false)));
  checkVerified(*tm2);
}

TEST_CASE("QAT: observers record statistics eagerly, never while tracing or interpreting",
          "[trace][qat]") {
  QATLinear net;
  Tensor x = Tensor::randn({2, 4}, 5);
  auto *obs = static_cast<MinMaxObserver *>(net.module("act_observer"));
  auto tm = traceModule(net, Var::meta({2, 4}));
  CHECK(std::isinf(obs->tensor("min_val")->at(0)));
  TraceOptions checking;
  checking.checkExprs = true; // each helper call is checked against the eager modules
  auto checked = traceModule(net, {{Var(x)}, {}}, checking);
  CHECK(std::isinf(obs->tensor("min_val")->at(0)));
  CHECK(checked->graph().str() == tm->graph().str());
  (void)run(*tm, {x});
  CHECK(std::isinf(tm->module("act_observer")->tensor("min_val")->at(0)));
  (void)net(x);
  CHECK(std::isfinite(obs->tensor("min_val")->at(0)));
}

TEST_CASE("QAT: the helper call reads back from .tmir and survives flatten", "[trace][qat]") {
  TwoLinears net;
  Tensor x = Tensor::randn({3, 4}, 6);
  Tensor eager = Var(net(x)).value();
  auto tm = traceModule(net, Var::meta({3, 4}));
  CHECK(helperCalls(tm->graph()) == 4);
  CHECK(run(*tm, {x})[0].bitwiseEqual(eager));

  auto back = tmirRoundTrip(*tm);
  CHECK(helperCalls(back->graph()) == 4);
  CHECK(run(*back, {x})[0].bitwiseEqual(eager));
  checkVerified(*back);

  // flatten() keeps the calls of QAT blocks (the reference's is_qat), with
  // their graphs (test_trace_qat: `MyModule_block0_conv0` is a ModuleNode
  // owned by a TracedModule, and the input of `..._conv0_out`'s call).
  CHECK(tm->module("fc0")->boolValue("is_qat"));
  auto flat = tm->flatten();
  CHECK(flat->graph().str() == "TwoLinears.Graph (self, x) {\n"
                               "\t%2:\tfc1 = getattr(self, \"fc1\") -> (Module)\n"
                               "\t%3:\tfc0 = getattr(self, \"fc0\") -> (Module)\n"
                               "\t%4:\tfc0_out = fc0(x, )\n"
                               "\t%15:\tfc1_out = fc1(fc0_out, )\n"
                               "\t%25:\trelu_out = nn.relu(fc1_out, )\n"
                               "\treturn relu_out\n"
                               "}");
  Node *fc0 = flat->graph().getNodeByName("TwoLinears_fc0").asUnique();
  REQUIRE(llvm::isa<ModuleNode>(fc0));
  CHECK(llvm::isa<TracedModule>(llvm::cast<ModuleNode>(fc0)->owner()));
  CHECK(flat->graph().getNodeByName("TwoLinears_fc0_out").asUnique()->expr()->input(0) == fc0);
  CHECK(helperCalls(flat->graph()) == 4);
  CHECK(run(*flat, {x})[0].bitwiseEqual(eager));
  checkVerified(*flat);
  auto flatBack = tmirRoundTrip(*flat);
  CHECK(run(*flatBack, {x})[0].bitwiseEqual(eager));
}

TEST_CASE("QAT: a malformed helper call is an error at its expr", "[trace][qat][error]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("M"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *y = b.callFunction(fakeQuantWithObserverFunction(),
                           {b.self(), b.arg(0), b.arg(0), Arg::none()});
  b.finish(y);
  CHECK_THROWS_WITH(run(*tm, {Tensor::randn({2}, 1)}),
                    Catch::Contains("'fake_quant' must be a module or None"));
}

TEST_CASE("QAT: test_load_param and test_qualname on a calibrated QAT net", "[trace][qat]") {
  // MegEngine's test_qat_module.py: the state dict of one calibrated QAT net
  // loads into the traced module of another and into its flatten; every
  // node's qualname is an attribute path of both the traced and the
  // original module.
  TwoLinears calibrated, fresh;
  (void)calibrated(Tensor::randn({3, 4}, 7));
  StateDict sd = stateDict(calibrated);
  CHECK(std::isfinite(calibrated.module("fc0")->module("act_observer")->tensor("min_val")->at(0)));
  auto tm = traceModule(fresh, Var::meta({3, 4}));
  auto flat = tm->flatten();
  for (TracedModule *t : {tm.get(), flat.get()}) {
    REQUIRE(loadStateDict(*t, sd).succeeded());
    for (const auto &[name, v] : sd) {
      INFO(name);
      CHECK(t->resolveTensor(name)->bitwiseEqual(v));
    }
  }
  size_t checked = 0;
  for (Node *n : tm->graph().nodes().asList()) {
    llvm::StringRef q = n->qualname();
    INFO(q.str());
    REQUIRE(q.consume_front("TwoLinears"));
    q.consume_front(".");
    if (q.startswith("["))
      q = "";
    else if (size_t i = q.find(".["); i != llvm::StringRef::npos)
      q = q.take_front(i);
    auto reaches = [&](const Module &m) {
      return q.empty() || m.resolveModule(q) || m.resolveTensor(q);
    };
    CHECK(reaches(*tm));
    CHECK(reaches(fresh));
    ++checked;
  }
  CHECK(checked > 20);
}

namespace {
/// A forward that quantises with a child's observer: not its own.
struct Borrows : LayerOf<Borrows> {
  Borrows() : LayerOf("Borrows", {"x"}) { addModule<QATLinear>("fc"); }
  Var forward(Var x) { return static_cast<QATLinear *>(module("fc"))->applyAct(x); }
};
} // namespace

TEST_CASE("QAT: a forward quantises only with its own modules", "[trace][qat][error]") {
  Borrows net;
  CHECK_THROWS_WITH(traceModule(net, Var::meta({2, 4})),
                    Catch::Contains("QATLinear.applyFakeQuantWithObserver while the forward of "
                                    "'Borrows' is traced"));
}
