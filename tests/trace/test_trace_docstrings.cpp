//===- test_trace_docstrings.cpp - The reference's examples, traced -------===//
//
// The modules of the reference's docstrings written as C++ Layers and
// traced: each prints exactly the text the builder-made graphs of
// tests/ir/test_docstrings.cpp print (the reference's text).
//
//===----------------------------------------------------------------------===//
#include "Layers.h"
#include "tm/runtime/Interpreter.h"
#include "tm/trace/Trace.h"

using namespace tmg;
using namespace fixtures;

namespace {

// class MyModule(M.Module):
//     def __init__(self): self.param = randn(3, 4); self.linear = M.Linear(4, 5)
//     def forward(self, x): return F.relu(self.linear(x + self.param))
struct MyModule : LayerOf<MyModule> {
  MyModule() : LayerOf("MyModule", {"x"}) {
    registerBuffer("param", Tensor::randn({3, 4}));
    addModule<Linear>("linear", 4, 5);
  }
  Var forward(Var x) { return F::relu(mod("linear")(x + attr("param"))); }
};

// forward(x): x = x + 1; return x
struct AddOne : LayerOf<AddOne> {
  AddOne() : LayerOf("MyModule", {"x"}) {}
  Var forward(Var x) { return x + 1; }
};

// forward(x): return x + 1 + 2 (int64 input)
struct AddTwice : LayerOf<AddTwice> {
  AddTwice() : LayerOf("MyModule", {"x"}) {}
  Var forward(Var x) { return x + 1 + 2; }
};

// The census appendix module.
struct SimpleModule : LayerOf<SimpleModule> {
  SimpleModule() : LayerOf("SimpleModule", {"x"}) {
    addModule<Linear>("linear", 4, 5);
    registerBuffer("param", Tensor::zeros({4}));
  }
  Var forward(Var x) {
    Var c = Tensor::full({4}, 1.0);
    Var r = F::relu(x + c);
    return mod("linear")(r + attr("param"));
  }
};

// MyBlock of test_modification.py (conv1 -> bn1 -> relu + 1 -> nothing),
// shared with the other trace tests.
using layers::MyBlock;

// class block: relu = M.ReLU(); param; forward(x) = relu(F.relu(x + param))
struct Block : LayerOf<Block> {
  Block() : LayerOf("block", {"x"}) {
    registerBuffer("param", Tensor::full({1}, 1.0));
    addModule<ReLU>("relu");
  }
  Var forward(Var x) {
    Var y = x + attr("param");
    return mod("relu")(F::relu(y));
  }
};
struct Outer : LayerOf<Outer> {
  Outer() : LayerOf("module", {"x"}) { addModule<Block>("block"); }
  Var forward(Var x) { return mod("block")(x); }
};

} // namespace

TEST_CASE("traced InternalGraph docstring prints the reference's text", "[trace][docstring]") {
  MyModule net;
  auto tm = traceModule(net, Var::meta({3, 4}));
  CHECK(tm->graph().str() == docstringMyModule()->graph().str());
  CHECK(tm->graph().str() == "MyModule.Graph (self, x) {\n"
                             "\t%2:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
                             "\t%3:\tparam = getattr(self, \"param\") -> (Tensor)\n"
                             "\t%4:\tadd_out = x.__add__(param, )\n"
                             "\t%5:\tlinear_out = linear(add_out, )\n"
                             "\t%6:\trelu_out = nn.relu(linear_out, )\n"
                             "\treturn relu_out\n"
                             "}");
  checkVerified(*tm);
  checkIds(*tm);
  // Types come from the op schemas.
  auto *out = llvm::cast<TensorNode>(tm->graph().output(0));
  REQUIRE(out->shape());
  CHECK(shapeStr(*out->shape()) == "(3, 5)");
  // The user's module is untouched and runs eagerly on the same kernels.
  Tensor x = Tensor::randn({3, 4}, 7);
  Var eager = net(x);
  rt::Interpreter interp(*tm);
  Tensor traced = interp.run({x}).outputs[0];
  CHECK(traced.bitwiseEqual(eager.value()));
}

TEST_CASE("traced x + 1: reset_outputs and add_output_node docstrings", "[trace][docstring]") {
  AddOne net;
  auto tm = traceModule(net, Var::meta({1}));
  CHECK(tm->graph().str() == addOneModule()->graph().str());
  InternalGraph &g = tm->graph();
  g.addOutputNode(g.input(1));
  g.addOutputNode(g.output(0));
  CHECK(g.str() == "MyModule.Graph (self, x) {\n"
                   "\t%2:\tadd_out = x.__add__(1, )\n"
                   "\treturn add_out, x, add_out\n"
                   "}");
}

TEST_CASE("traced set_watch_points docstring: node 2 is the first add", "[trace][docstring]") {
  AddTwice net;
  auto tm = traceModule(net, Var::meta({1}, DType::Int64));
  CHECK(tm->graph().str() == "MyModule.Graph (self, x) {\n"
                             "\t%2:\tadd_out = x.__add__(1, )\n"
                             "\t%3:\tadd_out_1 = add_out.__add__(2, )\n"
                             "\treturn add_out_1\n"
                             "}");
  CHECK(tm->graph().getNodeById({2}).asUnique()->str() == "add_out");
}

TEST_CASE("traced census appendix: constants and repeated names", "[trace][docstring]") {
  SimpleModule net;
  auto tm = traceModule(net, Var::meta({4}));
  InternalGraph &g = tm->graph();
  CHECK(g.str() == "SimpleModule.Graph (self, x) {\n"
                   "\t%2:\tconst_tensor = Constant() -> (Tensor)\n"
                   "\t%3:\tadd_out = x.__add__(const_tensor, )\n"
                   "\t%4:\trelu_out = nn.relu(add_out, )\n"
                   "\t%5:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
                   "\t%6:\tparam = getattr(self, \"param\") -> (Tensor)\n"
                   "\t%7:\tadd_out_1 = relu_out.__add__(param, )\n"
                   "\t%8:\tlinear_out = linear(add_out_1, )\n"
                   "\treturn linear_out\n"
                   "}");
  Node *relu = g.getFunctionByType(&op(OpKind::Relu)).asUnique()->output(0);
  CHECK(fmt::format("{:ip}", *relu) == "%4_SimpleModule_relu_out");
  CHECK(relu->qualname() == "SimpleModule.[func_relu]");
  checkVerified(*tm);
}

TEST_CASE("traced MyBlock prints as in the census, with its identity sub-graph",
          "[trace][docstring]") {
  MyBlock net;
  auto tm = traceModule(net, Var::meta({1, 3, 3, 3}));
  auto ref = tracedMyBlock();
  CHECK(tm->graph().str() == ref->graph().str());
  auto sub = llvm::cast<CallMethod>(tm->graph().getExprById({9}).asUnique())->calleeGraph();
  REQUIRE(sub);
  CHECK(sub->str() == "MyBlock_nothing.Graph (self, x) {\n"
                      "\t\n"
                      "\treturn x\n"
                      "}");
  CHECK(sub->qualname() == "MyBlock.nothing");
  CHECK(sub->input(0)->id() == 9);
  CHECK(sub->input(0)->expr()->id() == 10);
  checkVerified(*tm);
  checkIds(*tm);
  checkExprUsers(*tm);
}

TEST_CASE("traced qualname docstring: sub-graph qualnames are attribute paths",
          "[trace][docstring]") {
  Outer net;
  auto tm = traceModule(net, Var::meta({1}));
  auto *blockTm = llvm::cast<TracedModule>(tm->module("block"));
  CHECK(blockTm->graph().qualname() == "module.block");
  CHECK(!blockTm->isTop());
  // `self.relu(F.relu(y))`: Python (and C++17) evaluate the callee first.
  CHECK(blockTm->graph().str() == "module_block.Graph (self, x) {\n"
                                  "\t%6:\tparam = getattr(self, \"param\") -> (Tensor)\n"
                                  "\t%7:\tadd_out = x.__add__(param, )\n"
                                  "\t%8:\trelu = getattr(self, \"relu\") -> (ReLU)\n"
                                  "\t%9:\trelu_out = nn.relu(add_out, )\n"
                                  "\t%10:\trelu_out_1 = relu(relu_out, )\n"
                                  "\treturn relu_out_1\n"
                                  "}");
  checkIds(*tm);
  auto flat = tm->flatten();
  CHECK(flat->graph().output(0)->qualname() == "module.block.relu.[out]");
  checkVerified(*flat);
}

namespace {
struct PostProcess : LayerOf<PostProcess> {
  PostProcess() : LayerOf("PostProcess", {"x"}) {}
  Var forward(Var x) { return x * 2; }
};
} // namespace

TEST_CASE("README: the tracing and insertion examples", "[trace][docstring]") {
  MyModule net;
  Tensor in = Tensor::randn({3, 4}, 2);
  Var y = net(in);
  auto tm = traceModule(net, Var::meta({3, 4}));
  InternalGraph &g = tm->graph();
  Expr *relu = g.getFunctionByType(&op(OpKind::Relu)).asUnique();
  Var neg;
  {
    auto scope = insertExprs(g, relu);
    neg = F::neg(Var(relu->output(0)));
  }
  g.replaceNode({{relu->output(0), neg.node()}});
  g.compile();
  CHECK(g.str() == "MyModule.Graph (self, x) {\n"
                   "\t%2:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
                   "\t%3:\tparam = getattr(self, \"param\") -> (Tensor)\n"
                   "\t%4:\tadd_out = x.__add__(param, )\n"
                   "\t%5:\tlinear_out = linear(add_out, )\n"
                   "\t%6:\trelu_out = nn.relu(linear_out, )\n"
                   "\t%7:\tneg_out = elemwise.neg(relu_out, )\n"
                   "\treturn neg_out\n"
                   "}");
  tm->registerModule("post", std::make_unique<PostProcess>());
  Var z;
  {
    auto scope = insertExprs(g);
    z = ModuleRef(g.self()).mod("post")(Var(g.output(0)));
  }
  g.replaceNode({{g.output(0), z.node()}});
  g.compile();
  CHECK(llvm::cast<TracedModule>(tm->module("post"))->graph().str() ==
        "MyModule_post.Graph (self, x) {\n"
        "\t%12:\tmul_out = x.__mul__(2, )\n"
        "\treturn mul_out\n"
        "}");
  rt::Interpreter interp(*tm);
  Tensor got = interp.run({in}).outputs[0];
  Tensor want = Var(F::neg(y) * 2).value();
  CHECK(got.bitwiseEqual(want));
  checkVerified(*tm);
}

TEST_CASE("traced reset_outputs docstring", "[trace][docstring]") {
  AddOne net;
  auto tm = traceModule(net, Var::meta({1}));
  InternalGraph &g = tm->graph();
  Node *inp = g.input(1), *out = g.output(0);
  g.resetOutputs(TreeDef::tuple({TreeDef(), TreeDef::dict({{Scalar("input"), TreeDef()}})}),
                 {out, inp});
  CHECK(g.str() == "MyModule.Graph (self, x) {\n"
                   "\t%2:\tadd_out = x.__add__(1, )\n"
                   "\treturn add_out, x\n"
                   "}");
  CHECK(tm->outDefFor(tm->signatures()[0].argDef)->str() == "(Tensor, {'input': Tensor})");
  checkVerified(*tm);
}

TEST_CASE("traced census appendix: {:i} format", "[trace][docstring]") {
  SimpleModule net;
  auto tm = traceModule(net, Var::meta({4}));
  CHECK(fmt::format("{:i}", tm->graph()) ==
        "SimpleModule.Graph (%0_self, %1_x) {\n"
        "\t%2:\t%2_const_tensor = Constant() -> (Tensor)\n"
        "\t%3:\t%3_add_out = %1_x.__add__(%2_const_tensor, )\n"
        "\t%4:\t%4_relu_out = nn.relu(%3_add_out, )\n"
        "\t%5:\t%5_linear = getattr(%0_self, \"linear\") -> (Linear)\n"
        "\t%6:\t%6_param = getattr(%0_self, \"param\") -> (Tensor)\n"
        "\t%7:\t%7_add_out_1 = %4_relu_out.__add__(%6_param, )\n"
        "\t%8:\t%8_linear_out = %5_linear(%7_add_out_1, )\n"
        "\treturn %8_linear_out\n"
        "}");
  CHECK(tm->graph().getNodeByName("SimpleModule_linear_out").asUnique()->qualname() ==
        "SimpleModule.linear.[out]");
}

namespace {
// F.batch_norm(x, None, None, self.weight, self.bias, training=True)
struct BnNet : LayerOf<BnNet> {
  BnNet() : LayerOf("Net", {"x"}) {
    registerParameter("weight", Tensor::full({3}, 1.0));
    registerParameter("bias", Tensor::zeros({3}));
  }
  Var forward(Var x) {
    Var w = attr("weight");
    Var b = attr("bias");
    // As M.BatchNorm2d.forward calls it: every keyword written out.
    return F::call("batch_norm", x, Value(), Value(), w, b, kw("training", true),
                   kw("momentum", 0.9), kw("eps", 1e-05), kw("inplace", true),
                   kw("compute_mode", "default"), kw("param_dim", "dim_1c11"));
  }
};
} // namespace

TEST_CASE("traced census appendix: batch_norm keyword arguments print sorted",
          "[trace][docstring]") {
  BnNet net;
  auto tm = traceModule(net, Var::meta({1, 3, 4, 4}));
  CHECK(tm->graph().str().find(
            "batch_norm_out = nn.batch_norm(x, None, None, weight, bias, "
            "compute_mode=default, eps=1e-05, inplace=True, momentum=0.9, "
            "param_dim=dim_1c11, training=True)") != std::string::npos);
}
