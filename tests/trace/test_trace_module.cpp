//===- test_trace_module.cpp - Tracing C++ modules -----------------------===//
//
// The scenarios of MegEngine's test_trace_module.py (census §2, 1-3) for C++
// Layers, and the tracer's own contracts: signatures and input naming,
// shared graphs, constants, wrapped functions, builtin registration,
// value computation, threads, and errors.
//
//===----------------------------------------------------------------------===//
#include <thread>

#include "Layers.h"
#include "tm/ir/StateDict.h"

using namespace tmg;
using namespace layers;
using namespace fixtures;

namespace {

// forward(x): y = copy(x); y += 1; x = x + 2; return x, y
struct MyModule1 : LayerOf<MyModule1> {
  MyModule1() : LayerOf("MyModule1", {"x"}) {}
  std::tuple<Var, Var> forward(Var x) {
    Var y = F::copy(x);
    y += 1;
    x = x + 2;
    return {x, y};
  }
};

// Containers of modules: a list whose third item is a dict.
struct MyModule3 : LayerOf<MyModule3> {
  MyModule3() : LayerOf("MyModule3", {"x"}) {
    auto &l = addModule<ModuleList>("modules");
    l.append<ReLU>();
    l.append<ReLU>();
    auto &d = l.append<ModuleDict>();
    d.addModule<Sigmoid>("a");
    d.addModule<Sigmoid>("b");
    l.append<ReLU6>();
    l.append<ReLU6>();
  }
  Var forward(Var x) {
    ModuleRef ms = mod("modules");
    x = ms.mod(0)(x);
    x = ms.mod(1)(x);
    ModuleRef d = ms.mod(2);
    CHECK(d.moduleNames() == std::vector<std::string>{"a", "b"});
    for (const std::string &k : d.moduleNames())
      x = d.mod(k)(x);
    for (size_t i = 3; i < 5; ++i)
      x = ms.mod(i)(x);
    return x;
  }
};

// forward(x, y) = F.add(x, y)
struct MyModule4 : LayerOf<MyModule4> {
  MyModule4() : LayerOf("MyModule4", {"x", "y"}) {}
  Var forward(Var x, Var y) { return F::add(x, y); }
};

struct Holder : LayerOf<Holder> {
  explicit Holder(std::unique_ptr<TracedModule> m) : LayerOf("Holder", {"x", "y"}) {
    registerModule("m1", std::move(m));
  }
  Var forward(Var x, Var y) { return mod("m1")(x, y); }
};

// x.name = "result" while tracing
struct Rename : LayerOf<Rename> {
  Rename() : LayerOf("Rename", {"x"}) {}
  Var forward(Var x) {
    Var a = x + x;
    Var b = x * a;
    b.setName("result");
    return b;
  }
};

} // namespace

TEST_CASE("trace_module: copy, in-place add, tuple outputs", "[trace][trace_module]") {
  MyModule1 net;
  auto tm = traceModule(net, Tensor::full({}, 1.0));
  CHECK(tm->graph().str() == "MyModule1.Graph (self, x) {\n"
                             "\t%2:\tcopy_out = tensor.copy(x, )\n"
                             "\t%3:\tiadd_out = copy_out.__iadd__(1, )\n"
                             "\t%4:\tadd_out = x.__add__(2, )\n"
                             "\treturn add_out, iadd_out\n"
                             "}");
  CHECK(tm->signatures()[0].outDef.str() == "(Tensor, Tensor)");
  Tensor two = Tensor::full({}, 2.0);
  Value eager = net(two);
  auto outs = run(*tm, {two});
  CHECK(outs[0].bitwiseEqual(eager[0].var().value()));
  CHECK(outs[1].bitwiseEqual(eager[1].var().value()));
  CHECK(outs[0].at(0) == 4.0);
  CHECK(outs[1].at(0) == 3.0);
}

TEST_CASE("trace_module: lists and dicts of modules", "[trace][trace_module]") {
  MyModule3 net;
  Tensor x = Tensor::randn({2, 3}, 5);
  auto tm = traceModule(net, Var::meta({2, 3}));
  CHECK(run(*tm, {x})[0].bitwiseEqual(Var(net(x)).value()));
  Module *ms = tm->module("modules");
  REQUIRE(ms);
  CHECK(llvm::isa<ReLU>(ms->module("0")));
  CHECK(llvm::isa<ReLU6>(ms->module("3")));
  CHECK(llvm::isa<TracedModule>(ms->module("2")));
  CHECK(llvm::isa<Sigmoid>(ms->module("2")->module("a")));
  // GetAttr chains through the containers become dotted paths.
  CHECK(tm->graph().str().find("modules_2_a = getattr(self, \"modules.2.a\") -> (Sigmoid)") !=
        std::string::npos);
  checkVerified(*tm);
}

TEST_CASE("trace_module: keyword arguments are their own signatures", "[trace][trace_module]") {
  MyModule4 net;
  Tensor a = Tensor::full({1}, 1.0), b = Tensor::full({1}, 2.0);
  auto t1 = traceModule(net, a, b);
  auto t2 = traceModule(net, a, kw("y", b));
  auto t3 = traceModule(net, kw("x", a), kw("y", b));
  for (auto *tm : {t1.get(), t2.get(), t3.get()}) {
    CHECK(tm->graph().str() == "MyModule4.Graph (self, x, y) {\n"
                               "\t%3:\tadd_out = elemwise.add(x, y, )\n"
                               "\treturn add_out\n"
                               "}");
    CHECK(tm->graph().size() == 1);
    CHECK(llvm::isa<CallFunction>(tm->graph().front()));
    CHECK(run(*tm, {a, b})[0].at(0) == 3.0);
  }
  CHECK(t1->signatures()[0].argDef.str() == "((Module, Tensor, Tensor), {})");
  CHECK(t2->signatures()[0].argDef.str() == "((Module, Tensor), {'y': Tensor})");
  CHECK(t3->signatures()[0].argDef.str() == "((Module,), {'x': Tensor, 'y': Tensor})");
  // Re-tracing a traced module gives its graph for that signature.
  auto r1 = traceModule(*t1, a, b);
  CHECK(r1->graph().str() == t1->graph().str());
  CHECK(r1->isTop());
  CHECK(run(*r1, {a, b})[0].at(0) == 3.0);
  CHECK_THROWS_WITH(traceModule(*t1, a), Catch::Contains("has no graph for the call signature"));
  // A traced module inside a new trace is nested and not top.
  Holder h(std::move(t1));
  auto t6 = traceModule(h, a, b);
  auto *m1 = llvm::cast<TracedModule>(t6->module("m1"));
  CHECK(!m1->isTop());
  CHECK(run(*t6, {a, b})[0].at(0) == 3.0);
  CHECK(Var(h(a, b)).value().at(0) == 3.0);
}

TEST_CASE("trace_module: renaming a traced tensor inserts nothing", "[trace][trace_module]") {
  Rename net;
  auto tm = traceModule(net, Var::meta({2}));
  Node *out = tm->graph().output(0);
  CHECK(out->name() == "result");
  CHECK(llvm::isa<CallMethod>(out->expr()));
  CHECK(tm->graph().size() == 2);
}

namespace {
// Containers and plain values as arguments; names follow getcallargs.
struct Args : LayerOf<Args> {
  Args() : LayerOf("Args", {"xs", "d", "scale"}) {}
  std::map<std::string, Var> forward(std::vector<Var> xs, std::map<std::string, Var> d,
                                     int64_t scale) {
    Var s = xs[0] + xs[1];
    return {{"sum", s * scale}, {"b", d["b"]}};
  }
};
struct UsesArgs : LayerOf<UsesArgs> {
  UsesArgs() : LayerOf("UsesArgs", {"x"}) { addModule<Args>("inner"); }
  Value forward(Var x) {
    ModuleRef inner = mod("inner");
    Value r1 = inner(Value::list({x, x}), Value::dict({{"a", x}, {"b", x}}), 2);
    Value r2 = inner(Value::list({x, x}), Value::dict({{"a", x}, {"b", x}}), 2);
    Value r3 = inner(Value::list({x, x}), Value::dict({{"a", x}, {"b", x}}), 3);
    return Value::tuple({r1.at("sum"), r2.at("b"), r3.at("sum")});
  }
};
} // namespace

TEST_CASE("trace_module: container arguments, plain values, shared graphs",
          "[trace][trace_module]") {
  UsesArgs net;
  auto tm = traceModule(net, Var::meta({2}));
  auto *inner = llvm::cast<TracedModule>(tm->module("inner"));
  // Same signature twice: one graph; another constant: a second graph.
  CHECK(inner->numGraphs() == 2);
  const InternalGraph &g = *inner->signatures()[0].graph;
  CHECK(g.name() == "UsesArgs_inner");
  CHECK(inner->signatures()[1].graph->name() == "UsesArgs_inner_1");
  std::vector<std::string> names;
  for (Node *n : g.inputs())
    names.push_back(n->name().str());
  CHECK(names == std::vector<std::string>{"self", "xs_0", "xs_1", "d_0", "d_1"});
  CHECK(inner->signatures()[0].argDef.str() ==
        "((Module, [Tensor, Tensor], {'a': Tensor, 'b': Tensor}, 2), {})");
  CHECK(inner->signatures()[0].outDef.str() == "{'b': Tensor, 'sum': Tensor}");
  Tensor x = Tensor::fromFloats({2}, {1, 2});
  Value eager = net(x);
  auto outs = run(*tm, {x});
  REQUIRE(outs.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(outs[i].bitwiseEqual(eager[i].var().value()));
  CHECK(outs[2].at(1) == 12.0);
  checkVerified(*tm);
  checkIds(*tm);
}

namespace {
struct WithConst : LayerOf<WithConst> {
  WithConst() : LayerOf("WithConst", {"x"}) {}
  Var forward(Var x) {
    Tensor bias = Tensor::fromFloats({2}, {10, 20});
    Var y = x + bias;
    return y * bias; // the same tensor: one Constant
  }
};
} // namespace

TEST_CASE("trace_module: tensors made in forward become one Constant each",
          "[trace][trace_module]") {
  WithConst net;
  auto tm = traceModule(net, Var::meta({2}));
  CHECK(tm->graph().str() == "WithConst.Graph (self, x) {\n"
                             "\t%2:\tconst_tensor = Constant() -> (Tensor)\n"
                             "\t%3:\tadd_out = x.__add__(const_tensor, )\n"
                             "\t%4:\tmul_out = add_out.__mul__(const_tensor, )\n"
                             "\treturn mul_out\n"
                             "}");
  Tensor x = Tensor::fromFloats({2}, {1, 2});
  CHECK(run(*tm, {x})[0].bitwiseEqual(Var(net(x)).value()));
}

namespace {
const WrappedFunction &myFunc() {
  static WrappedFunction f =
      wrap([](Var x, Var y) { return F::relu(x) * y + 1; }, "my_func", {"x", "y"});
  return f;
}
struct UsesWrapped : LayerOf<UsesWrapped> {
  UsesWrapped() : LayerOf("UsesWrapped", {"x"}) {}
  Var forward(Var x) {
    Var y = myFunc()(x, kw("y", x));
    return y.mean();
  }
};
} // namespace

TEST_CASE("wrap: one CallFunction, run by calling the function", "[trace][trace_module]") {
  UsesWrapped net;
  auto tm = traceModule(net, Var::meta({3}));
  CHECK(tm->graph().str() == "UsesWrapped.Graph (self, x) {\n"
                             "\t%2:\tmy_func_out = __main__.my_func(x, y=x)\n"
                             "\t%3:\tmean_out = my_func_out.mean(, )\n"
                             "\treturn mean_out\n"
                             "}");
  auto *out = llvm::cast<TensorNode>(tm->graph().front()->output(0));
  CHECK(shapeStr(*out->shape()) == "(3,)");
  Tensor x = Tensor::fromFloats({3}, {-1, 2, 3});
  Tensor eager = Var(net(x)).value();
  CHECK(eager.at(0) == Approx((1 + 5 + 10) / 3.0));
  CHECK(run(*tm, {x})[0].bitwiseEqual(eager));
  // Registering another signature under the same name is an error.
  CHECK_THROWS(wrap([](Var x) { return x; }, "my_func", {"x"}));
}

namespace {
// Calls as a Python user would write them: keywords, defaults left out.
struct AsWritten : LayerOf<AsWritten> {
  AsWritten() : LayerOf("AsWritten", {"x", "y"}) {}
  Value forward(Var x, Var y) {
    Var a = F::call("add", x, kw("y", y)).var();
    Var c = F::call("clip", a, kw("upper", 0.5)).var();
    Var m = c.mean();
    Var k = c.sum(1, true);
    Var f = F::flatten(c);
    Var l = F::call("leaky_relu", f).var();
    Var s = F::call("softmax", kw("inp", l), kw("axis", 0)).var();
    return Value::tuple({m, k, s});
  }
};
} // namespace

TEST_CASE("calls record the arguments as written; readers bind the defaults",
          "[trace][trace_module]") {
  AsWritten net;
  auto tm = traceModule(net, Var::meta({2, 3}), Var::meta({2, 3}));
  // The reference records `args, kwargs` as the call passed them: keywords
  // stay keywords, defaults are not filled in.
  CHECK(tm->graph().str() == "AsWritten.Graph (self, x, y) {\n"
                             "\t%3:\tadd_out = elemwise.add(x, y=y)\n"
                             "\t%4:\tclip_out = elemwise.clip(add_out, upper=0.5)\n"
                             "\t%5:\tmean_out = clip_out.mean(, )\n"
                             "\t%6:\tsum_out = clip_out.sum(1, True, )\n"
                             "\t%7:\tflatten_out = tensor.flatten(clip_out, )\n"
                             "\t%8:\tleaky_relu_out = nn.leaky_relu(flatten_out, )\n"
                             "\t%9:\tsoftmax_out = nn.softmax(, axis=0, inp=leaky_relu_out)\n"
                             "\treturn mean_out, sum_out, softmax_out\n"
                             "}");
  // Shape inference and the runtime take the schema's defaults.
  const Expr *e = tm->graph().getFunctionByType(&op(OpKind::Clip)).asUnique();
  REQUIRE(e->namedArg("lower"));
  CHECK(e->namedArg("lower")->def.isConst());
  CHECK(e->namedArg("lower")->scalar().isNone());
  CHECK(e->numArgs() == 1);
  CHECK(e->arg(2).scalar() == Scalar(0.5)); // upper, passed by keyword
  const Expr *sm = tm->graph().getFunctionByType(&op(OpKind::Softmax)).asUnique();
  CHECK(sm->numArgs() == 0);
  CHECK(sm->arg(0).node() == tm->graph().getFunctionByType(&op(OpKind::LeakyRelu))
                                 .asUnique()->output(0));
  CHECK_THROWS_WITH(sm->arg(2), Catch::Contains("out of range"));
  CHECK(shapeStr(*llvm::cast<TensorNode>(tm->graph().output(0))->shape()) == "()");
  CHECK(shapeStr(*llvm::cast<TensorNode>(tm->graph().output(1))->shape()) == "(2, 1)");
  CHECK(shapeStr(*llvm::cast<TensorNode>(tm->graph().output(2))->shape()) == "(6,)");
  Tensor x = Tensor::fromFloats({2, 3}, {-1, 2, 0.1f, 0.2f, -3, 0});
  Tensor y = Tensor::fromFloats({2, 3}, {0, -1, 0.1f, 0.2f, 1, -2});
  Value eager = net(x, y);
  auto got = run(*tm, {x, y});
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(got[i].bitwiseEqual(eager.items()[i].var().value()));
}

namespace {
struct Swish : LayerOf<Swish> {
  Swish() : LayerOf("Swish", {"x"}) {}
  Var forward(Var x) { return x * F::sigmoid(x); }
};
struct SubSwish : Swish {};
struct UsesSwish : LayerOf<UsesSwish> {
  UsesSwish() : LayerOf("UsesSwish", {"x"}) {
    addModule<Swish>("swish");
    registerModule("sub", std::make_unique<SubSwish>());
  }
  Var forward(Var x) {
    Var y = mod("swish")(x);
    return mod("sub")(y);
  }
};
} // namespace

TEST_CASE("registerAsBuiltin: one CallMethod, exact type only", "[trace][trace_module]") {
  registerAsBuiltin<Swish>();
  UsesSwish net;
  auto tm = traceModule(net, Var::meta({4}));
  CHECK(tm->graph().str() == "UsesSwish.Graph (self, x) {\n"
                             "\t%2:\tswish = getattr(self, \"swish\") -> (Swish)\n"
                             "\t%3:\tswish_out = swish(x, )\n"
                             "\t%4:\tsub = getattr(self, \"sub\") -> (Module)\n"
                             "\t%5:\tsub_out = sub(swish_out, )\n"
                             "\treturn sub_out\n"
                             "}");
  CHECK(tm->module("swish")->isBuiltin());
  CHECK(llvm::isa<TracedModule>(tm->module("sub")));
  auto *out = llvm::cast<TensorNode>(tm->graph().getExprById({3}).asUnique()->output(0));
  CHECK(shapeStr(*out->shape()) == "(4,)");
  checkVerified(*tm);
}

namespace {
struct Branchy : LayerOf<Branchy> {
  Branchy() : LayerOf("Branchy", {"x"}) {}
  Var forward(Var x) {
    Var s = x.sum();
    // Control flow on values: only the taken branch is recorded.
    if (s.value().at(0) > 0)
      return F::relu(x);
    return F::neg(x);
  }
};
} // namespace

TEST_CASE("computeValues: forward may read values", "[trace][trace_module]") {
  Branchy net;
  CHECK_THROWS_WITH(traceModule(net, Var::meta({2})), Catch::Contains("has no value"));
  CallArgs pos;
  pos.add(Tensor::fromFloats({2}, {1, -3}));
  auto neg = traceModule(net, pos, {.computeValues = true});
  CHECK(neg->graph().getFunctionByType(&op(OpKind::Neg)).asCount() == 1);
  CallArgs p2;
  p2.add(Tensor::fromFloats({2}, {5, -3}));
  auto relu = traceModule(net, p2, {.computeValues = true});
  CHECK(relu->graph().getFunctionByType(&op(OpKind::Relu)).asCount() == 1);
}

TEST_CASE("indexing and tensor methods trace and run", "[trace][trace_module]") {
  struct Idx : LayerOf<Idx> {
    Idx() : LayerOf("Idx", {"x"}) {}
    Var forward(Var x) {
      Var a = x[0];
      Var b = x[{all, slice(1, std::nullopt)}];
      Var c = b.reshape({2, 2}).transpose({1, 0}).flatten();
      return a.sum() + c.mean(0) - (-x).max();
    }
  };
  Idx net;
  auto tm = traceModule(net, Var::meta({2, 3}));
  CHECK(tm->graph().str().find("getitem_out = x.__getitem__(0, )") != std::string::npos);
  Tensor x = Tensor::randn({2, 3}, 11);
  CHECK(maxDiff(run(*tm, {x})[0], Var(net(x)).value()) <= 1e-6);
}

TEST_CASE("two threads trace at once", "[trace][trace_module]") {
  std::string a, b;
  std::thread t1([&] {
    for (int i = 0; i < 20; ++i) {
      MyModule net;
      a = traceModule(net, Var::meta({1, 3, 3, 3}))->graph().str();
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < 20; ++i) {
      MyBlock net;
      b = traceModule(net, Var::meta({1, 3, 3, 3}))->graph().str();
    }
  });
  t1.join();
  t2.join();
  MyModule m;
  MyBlock k;
  CHECK(a == traceModule(m, Var::meta({1, 3, 3, 3}))->graph().str());
  CHECK(b == traceModule(k, Var::meta({1, 3, 3, 3}))->graph().str());
  CHECK(!isTracing());
}

namespace {
struct ReturnsInt : LayerOf<ReturnsInt> {
  ReturnsInt() : LayerOf("ReturnsInt", {"x"}) {}
  Value forward(Var x) { return Value::tuple({x, 3}); }
};
struct Mixed : LayerOf<Mixed> {
  Mixed() : LayerOf("Mixed", {"x"}) {
    auto &l = addModule<ModuleList>("items");
    l.append<ReLU>();
    l.setValue("1", Scalar(int64_t(3)));
  }
  Var forward(Var x) { return mod("items").mod(0)(x); }
};
struct Nested : LayerOf<Nested> {
  Nested() : LayerOf("Nested", {"x"}) {}
  Var forward(Var x) {
    MyModule inner;
    traceModule(inner, Var::meta({1}));
    return x;
  }
};
struct Missing : LayerOf<Missing> {
  Missing() : LayerOf("Missing", {"x"}) {}
  Var forward(Var x) { return x + attr("weight"); }
};
} // namespace

TEST_CASE("tracing errors have clear messages", "[trace][trace_module][error]") {
  ReturnsInt r;
  CHECK_THROWS_WITH(traceModule(r, Var::meta({1})),
                    Catch::Contains("the forward of 'ReturnsInt' returns 3 (a plain value): "
                                    "only tensors, and tuples, lists and dicts of tensors, "
                                    "can be returned"));
  Mixed m;
  CHECK_THROWS_WITH(traceModule(m, Var::meta({1})),
                    Catch::Contains("Can not trace the module that uses the same container to "
                                    "store Module and Non-Module objects"));
  Nested n;
  CHECK_THROWS_WITH(traceModule(n, Var::meta({1})), Catch::Contains("traces do not nest"));
  CHECK(!isTracing());
  Missing mi;
  CHECK_THROWS_WITH(traceModule(mi, Var::meta({1})),
                    Catch::Contains("module 'Missing' has no tensor attribute 'weight'"));
  MyModule4 two;
  CHECK_THROWS_WITH(traceModule(two, Var::meta({1})),
                    Catch::Contains("MyModule4.forward() missing required argument 'y'"));
  CHECK_THROWS_WITH(traceModule(two, Var::meta({1}), Var::meta({1}), kw("x", Var::meta({1}))),
                    Catch::Contains("got multiple values for argument 'x'"));
}

namespace {
/// The reference's qat.Concat: `apply_quant_activation(F.concat(inps))`.
struct Cat : LayerOf<Cat, QATLayer> {
  Cat() : LayerOf("Concat", {"inps"}, false, true) {
    addModule<MinMaxObserver>("act_observer");
    addModule<FakeQuantize>("act_fake_quant", "qint8", QParams{1.0 / 64, 0});
  }
  Var forward(std::vector<Var> inps) { return applyAct(F::concat(inps)); }
};
struct MyCat : Cat {}; // a subclass of a builtin: traced
} // namespace

TEST_CASE("insert builtin and traced calls with list arguments", "[trace][modification][qat]") {
  registerAsBuiltin<Cat>();
  MyBlock net;
  Tensor x = ones({1, 3, 3, 3});
  Tensor e = Var(net(x)).value();
  auto tm = traceModule(net, Var::meta({1, 3, 3, 3}));
  tm->registerModule("cat_0", std::make_unique<Cat>());
  tm->registerModule("cat_1", std::make_unique<MyCat>());
  InternalGraph &g = tm->graph();
  Node *out = g.output(0);
  Var x1;
  {
    auto scope = insertExprs(g);
    ModuleRef self(g.self());
    Var o(out);
    Var x0 = self.mod("cat_0")(Value::list({o, o}));
    x1 = self.mod("cat_1")(Value::list({o, x0}));
  }
  g.replaceNode({{out, x1.node()}});
  g.compile();
  CHECK(tm->module("cat_0")->isBuiltin());
  auto *c1 = llvm::dyn_cast<TracedModule>(tm->module("cat_1"));
  REQUIRE(c1);
  CHECK(c1->numGraphs() == 1);
  // The traced subclass quantises its output with one helper call.
  CHECK(c1->graph().str() ==
        "MyBlock_cat_1.Graph (self, inps_0, inps_1) {\n"
        "\t%19:\tconcat_out = tensor.concat([inps_0, inps_1], )\n"
        "\t%20:\tact_fake_quant = getattr(self, \"act_fake_quant\") -> (FakeQuantize)\n"
        "\t%21:\tact_observer = getattr(self, \"act_observer\") -> (MinMaxObserver)\n"
        "\t%22:\t_apply_fakequant_with_observer_out = "
        "module._apply_fakequant_with_observer(self, concat_out, act_fake_quant, "
        "act_observer, )\n"
        "\treturn _apply_fakequant_with_observer_out\n"
        "}");
  Tensor got = run(*tm, {x})[0];
  auto fq = [](Tensor t) { return F::fake_quant(Var(t), 1.0 / 64, 0, -128, 127).value(); };
  Tensor want = fq(Var(F::concat({e, fq(Var(F::concat({e, e})).value())})).value());
  CHECK(got.bitwiseEqual(want));
  Cat eager;
  Tensor inner = Var(eager(Value::list({e, e}))).value();
  CHECK(got.bitwiseEqual(Var(eager(Value::list({e, inner}))).value()));
  checkVerified(*tm);
}

namespace {
struct Functional : LayerOf<Functional> {
  Functional() : LayerOf("Functional", {"x"}) {
    registerParameter("w", Tensor::randn({4, 3, 3, 3}, 21));
    registerParameter("b", Tensor::randn({4}, 22));
    registerParameter("fc", Tensor::randn({5, 64}, 23));
  }
  std::vector<Var> forward(Var x) {
    Var w = attr("w");
    Var b = attr("b");
    Var y = F::conv2d(x, w, b, 1, 1);
    y = F::max_pool2d(F::relu(y), 2);
    std::vector<Var> parts = F::split(y, 2, 1);
    Var z = F::concat({parts[1], parts[0]}, 1);
    Var flat = F::flatten(z, 1);
    Var fc = attr("fc");
    Var logits = F::matmul(flat, fc, false, true);
    return {F::softmax(logits, 1), F::mean(z, 1, true), F::sigmoid(parts[0]).transpose({0, 1, 3, 2})};
  }
};
} // namespace

TEST_CASE("functional ops: eager and interpreted results agree bitwise", "[trace][trace_module]") {
  Functional net;
  Tensor x = Tensor::randn({2, 3, 8, 8}, 20);
  Value eager = net(x);
  auto tm = traceModule(net, Var::meta({2, 3, 8, 8}));
  CHECK(tm->graph().str().find("(split_out, split_out_1) = tensor.split(max_pool2d_out, 2, 1, )") !=
        std::string::npos);
  auto outs = run(*tm, {x});
  REQUIRE(outs.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(outs[i].bitwiseEqual(eager[i].var().value()));
    auto *n = llvm::cast<TensorNode>(tm->graph().output(i));
    REQUIRE(n->shape());
    CHECK(shapeStr(*n->shape()) == shapeStr(outs[i].shape()));
  }
  checkVerified(*tm);
}

//===----------------------------------------------------------------------===//
// Interpreting is eager execution (test_jit_trace.py, census §2 4)
//===----------------------------------------------------------------------===//

namespace {

/// conv -> relu (function) or relu6 (module), for the exact-fusion checks.
struct ConvAct : LayerOf<ConvAct> {
  ConvAct(int64_t c, int64_t groups, bool relu6) : LayerOf("ConvAct", {"x"}), relu6(relu6) {
    addModule<Conv2d>("conv", c, c, 3, 1, 1, 1, groups, true, 11);
    addModule<ReLU6>("act");
  }
  Var forward(Var x) {
    Var y = mod("conv")(x);
    return relu6 ? Var(mod("act")(y)) : F::relu(y);
  }
  bool relu6;
};

} // namespace

TEST_CASE("interpreting a conv + batch norm + relu model equals eager bit for bit",
          "[trace][trace_module][exact]") {
  // Two MyBlocks (conv without bias, eval batch norm, relu + 1), 8 -> 4 -> 2
  // channels, input ones (1, 8, 14, 14), as test_jit_trace.
  struct Net : LayerOf<Net> {
    Net() : LayerOf("Net", {"x"}) {
      addModule<MyBlock>("block0", 8, 4);
      addModule<MyBlock>("block1", 4, 2);
    }
    Var forward(Var x) { return mod("block1")(mod("block0")(x)); }
  };
  Net net;
  for (Tensor x : {ones({1, 8, 14, 14}), Tensor::randn({2, 8, 14, 14}, 21)}) {
    auto tm = traceModule(net, x);
    Tensor eager = Var(net(x)).value();
    CHECK(run(*tm, {x})[0].bitwiseEqual(eager));
    CHECK(run(*tm->flatten(), {x})[0].bitwiseEqual(eager));
    // fastMath folds the batch norms into the convs: close, not bitwise.
    rt::Interpreter fast(*tm, rt::InterpreterOptions{.fastMath = true});
    CHECK(maxDiff(fast.run({x}).outputs[0], eager) < 1e-4);
  }
}

TEST_CASE("a relu fused into the conv's epilogue gives the unfused bits, NaN and -0 included",
          "[trace][trace_module][exact]") {
  for (int64_t groups : {int64_t(1), int64_t(8)})
    for (bool relu6 : {false, true})
      for (int64_t h : {int64_t(5), int64_t(14)}) {
        CAPTURE(groups, relu6, h);
        ConvAct net(8, groups, relu6);
        Tensor x = Tensor::randn({1, 8, h, h}, 5);
        x.data<float>()[3] = NAN;
        x.data<float>()[x.numel() - 1] = -INFINITY;
        auto tm = traceModule(net, x);
        CHECK(run(*tm, {x})[0].bitwiseEqual(Var(net(x)).value()));
        // Zero input, negative weights and a zero bias: every product is -0.
        Module &conv = *net.module("conv");
        *conv.tensor("weight") = Tensor::full(conv.tensor("weight")->shape(), -0.5);
        *conv.tensor("bias") = Tensor::zeros({8});
        Tensor z = Tensor::zeros({1, 8, h, h});
        auto tz = traceModule(net, z);
        CHECK(run(*tz, {z})[0].bitwiseEqual(Var(net(z)).value()));
      }
}

TEST_CASE("a parameter shared by two modules stays one tensor through tracing and flatten",
          "[trace][trace_module][shared]") {
  // test_module.py::test_shared_param: both modules reach one weight.
  struct Shared : LayerOf<Shared> {
    Shared() : LayerOf("Shared", {"x"}) {
      auto &a = addModule<Linear>("a", 4, 4, true, 1);
      auto &b = addModule<Linear>("b", 4, 4, true, 2);
      b.registerParameter("weight", *a.tensor("weight"));
    }
    Var forward(Var x) { return mod("b")(F::relu(mod("a")(x))); }
  };
  Shared net;
  Tensor x = Tensor::randn({2, 4}, 3);
  auto tm = traceModule(net, x);
  auto flat = tm->flatten();
  for (TracedModule *t : {tm.get(), flat.get()}) {
    CHECK(t->resolveTensor("a.weight")->sharesStorage(*t->resolveTensor("b.weight")));
    CHECK(t->resolveTensor("a.weight")->sharesStorage(*net.resolveTensor("a.weight")));
    // One tensor, two state-dict keys (it is shared by two modules).
    std::vector<std::string> keys;
    for (const auto &[k, v] : stateDict(*t))
      keys.push_back(k);
    CHECK(keys == std::vector<std::string>{"a.bias", "a.weight", "b.bias", "b.weight"});
    CHECK(run(*t, {x})[0].bitwiseEqual(Var(net(x)).value()));
  }
  // Loading a new value through either key changes what both modules use.
  StateDict sd = stateDict(*tm);
  sd[3].second = Tensor::randn({4, 4}, 9);
  sd[1].second = sd[3].second;
  REQUIRE(loadStateDict(*tm, sd).succeeded());
  CHECK(tm->resolveTensor("a.weight")->sharesStorage(*tm->resolveTensor("b.weight")));
  CHECK(tm->resolveTensor("a.weight")->bitwiseEqual(sd[3].second));
}

namespace {
/// test_module.py's test_module_api fixture, attributes declared out of
/// alphabetical order: `buff` and `param` are never read by forward.
struct ApiNet : LayerOf<ApiNet> {
  ApiNet() : LayerOf("ApiNet", {"x"}) {
    addModule<MyBlock>("b");
    addModule<ReLU>("a");
    registerBuffer("buff", Tensor::full({1}, 1.0));
    registerParameter("param", Tensor::full({1}, 2.0));
  }
  Var forward(Var x) { return mod("a")(mod("b")(x)); }
};
} // namespace

TEST_CASE("test_module_api: sorted names; tensors forward never read are not copied",
          "[trace][trace_module]") {
  ApiNet net;
  auto tm = traceModule(net, Var::meta({1, 3, 3, 3}));
  auto modules = [](Module &m) {
    std::vector<std::string> out;
    m.namedModules([&](const std::string &n, Module &) { out.push_back(n); });
    return out;
  };
  auto tensors = [](const Module &m) {
    std::vector<std::string> out;
    m.namedTensors([&](const std::string &n, const Tensor &) { out.push_back(n); });
    return out;
  };
  // namedModules / namedTensors: the reference's sorted keys, pre-order,
  // tensors and modules interleaved by key.
  CHECK(modules(net) == std::vector<std::string>{"", "a", "b", "b.bn1", "b.conv1", "b.nothing"});
  CHECK(tensors(net) == std::vector<std::string>{"b.bn1.bias", "b.bn1.running_mean",
                                                 "b.bn1.running_var", "b.bn1.weight",
                                                 "b.conv1.weight", "buff", "param"});
  CHECK(modules(*tm) == modules(net));
  // `buff` and `param` are never read by forward: the traced module does
  // not have them (test_module_api: `"buff" not in m.__dict__`).
  CHECK(tensors(*tm) == std::vector<std::string>{"b.bn1.bias", "b.bn1.running_mean",
                                                 "b.bn1.running_var", "b.bn1.weight",
                                                 "b.conv1.weight"});
  CHECK_FALSE(tm->tensor("buff"));
  CHECK_FALSE(tm->tensor("param"));
  std::vector<std::string> keys;
  for (const auto &kv : stateDict(*tm))
    keys.push_back(kv.first);
  CHECK(keys == std::vector<std::string>{"b.bn1.bias", "b.bn1.running_mean",
                                         "b.bn1.running_var", "b.bn1.weight",
                                         "b.conv1.weight"});
  // So the original's state dict loads only without strict checking.
  CHECK(loadStateDict(*tm, stateDict(net)).failed());
  CHECK(loadStateDict(*tm, stateDict(net), /*strict=*/false).succeeded());
}

namespace {
/// A forward that reaches one of two linears, one item of a list and one
/// weight of a plain submodule it never calls.
struct PartlyUsed : LayerOf<PartlyUsed> {
  PartlyUsed() : LayerOf("PartlyUsed", {"x"}) {
    addModule<Linear>("used", 4, 4, true, 1);
    addModule<Linear>("spare", 4, 4, true, 2);
    auto &l = addModule<ModuleList>("items");
    l.append<ReLU>();
    l.append<Sigmoid>();
    auto &holder = addModule<Module>("holder", "Holder");
    holder.registerParameter("scale", Tensor::full({4}, 2.0));
    holder.registerParameter("unused", Tensor::full({4}, 3.0));
    setValue("note", Scalar(int64_t(7)));
  }
  Var forward(Var x) {
    x = mod("used")(x);
    x = mod("items").mod(0)(x);
    return x * mod("holder").attr("scale");
  }
};
} // namespace

TEST_CASE("tracing copies the submodules and tensors forward reached, as the reference's builder",
          "[trace][trace_module]") {
  PartlyUsed net;
  Tensor x = Tensor::randn({2, 4}, 3);
  auto tm = traceModule(net, x);
  CHECK(tm->module("used"));
  CHECK_FALSE(tm->module("spare"));
  // A module container keeps every item; a plain module reached for a
  // tensor keeps that tensor only; values stay.
  REQUIRE(tm->module("items"));
  CHECK(tm->module("items")->attrs().size() == 2);
  REQUIRE(tm->module("holder"));
  CHECK(tm->module("holder")->tensor("scale"));
  CHECK_FALSE(tm->module("holder")->tensor("unused"));
  CHECK(tm->value("note"));
  // The user's module is untouched, and the traced one runs as it does.
  CHECK(net.module("spare"));
  CHECK(net.module("holder")->tensor("unused"));
  CHECK(run(*tm, {x})[0].bitwiseEqual(Var(net(x)).value()));
  checkVerified(*tm);
}
