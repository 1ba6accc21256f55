//===- test_docstrings.cpp - The reference's printed examples ------------===//
//
// Every example printed in the reference's docstrings (and the census's
// printing appendix), built with the GraphBuilder, must print exactly the
// reference's text, ids and names included.
//
//===----------------------------------------------------------------------===//
#include "Fixtures.h"

using namespace tmg;
using namespace fixtures;

TEST_CASE("InternalGraph docstring: relu(linear(x + param))", "[ir][docstring]") {
  auto tm = docstringMyModule();
  CHECK(tm->graph().str() == "MyModule.Graph (self, x) {\n"
                             "\t%2:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
                             "\t%3:\tparam = getattr(self, \"param\") -> (Tensor)\n"
                             "\t%4:\tadd_out = x.__add__(param, )\n"
                             "\t%5:\tlinear_out = linear(add_out, )\n"
                             "\t%6:\trelu_out = nn.relu(linear_out, )\n"
                             "\treturn relu_out\n"
                             "}");
  // fmt integration prints the same text.
  CHECK(fmt::format("{}", tm->graph()) == tm->graph().str());
  checkVerified(*tm);
}

TEST_CASE("reset_outputs docstring", "[ir][docstring]") {
  auto tm = addOneModule();
  InternalGraph &g = tm->graph();
  Node *inp = g.input(1), *out = g.output(0);
  // graph.reset_outputs((out_node, {"input": inp_node}))
  g.resetOutputs(TreeDef::tuple({TreeDef(), TreeDef::dict({{Scalar("input"), TreeDef()}})}),
                 {out, inp});
  CHECK(g.str() == "MyModule.Graph (self, x) {\n"
                   "\t%2:\tadd_out = x.__add__(1, )\n"
                   "\treturn add_out, x\n"
                   "}");
  CHECK(tm->outDefFor(tm->signatures()[0].argDef)->str() == "(Tensor, {'input': Tensor})");
  checkVerified(*tm);
}

TEST_CASE("add_output_node docstring", "[ir][docstring]") {
  auto tm = addOneModule();
  InternalGraph &g = tm->graph();
  Node *inp = g.input(1), *out = g.output(0);
  g.addOutputNode(inp);
  g.addOutputNode(out);
  CHECK(g.str() == "MyModule.Graph (self, x) {\n"
                   "\t%2:\tadd_out = x.__add__(1, )\n"
                   "\treturn add_out, x, add_out\n"
                   "}");
  // The output structure nests: ((orig, a), b).
  CHECK(tm->signatures()[0].outDef.str() == "((Tensor, Tensor), Tensor)");
  checkVerified(*tm);
}

TEST_CASE("set_watch_points docstring: node id 2 is the first add", "[ir][docstring]") {
  // x = x + 1 + 2
  auto tm = TracedModule::fromModule(std::make_unique<Module>("MyModule"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}, DType::Int64}});
  Node *a = b.callMethod(b.arg(0), "__add__", {1});
  b.finish(b.callMethod(a, "__add__", {2}));
  Node *n = tm->graph().getNodeById({2}).asUnique();
  CHECK(n->str() == "add_out");
  CHECK(tm->graph().str() == "MyModule.Graph (self, x) {\n"
                             "\t%2:\tadd_out = x.__add__(1, )\n"
                             "\t%3:\tadd_out_1 = add_out.__add__(2, )\n"
                             "\treturn add_out_1\n"
                             "}");
}

TEST_CASE("census appendix: constants, repeated names and {:i}", "[ir][docstring]") {
  auto m = std::make_unique<Module>("SimpleModule");
  m->addModule<Linear>("linear", 4, 5);
  m->registerBuffer("param", Tensor::zeros({4}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
  Node *c = b.constant(Tensor::full({4}, 1.0));
  Node *a = b.callMethod(b.arg(0), "__add__", {c});
  Node *r = b.callFunction("relu", {a});
  Node *lin = b.getAttr(b.self(), "linear");
  Node *p = b.getAttr(b.self(), "param");
  Node *a2 = b.callMethod(r, "__add__", {p});
  b.finish(b.callModule(lin, {a2}));
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
  CHECK(fmt::format("{:i}", g) ==
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
  Node *relu = g.getFunctionByType(&op(OpKind::Relu)).asUnique()->output(0);
  CHECK(fmt::format("{:p}", *relu) == "SimpleModule_relu_out");
  CHECK(fmt::format("{:ip}", *relu) == "%4_SimpleModule_relu_out");
  CHECK(relu->qualname() == "SimpleModule.[func_relu]");
  CHECK(g.input(1)->qualname() == "SimpleModule.[x]");
  CHECK(g.getNodeByName("SimpleModule_linear_out").asUnique()->qualname() ==
        "SimpleModule.linear.[out]");
}

TEST_CASE("census appendix: batch_norm keyword arguments print sorted", "[ir][docstring]") {
  auto m = std::make_unique<Module>("Net");
  m->registerParameter("weight", Tensor::full({3}, 1.0));
  m->registerParameter("bias", Tensor::zeros({3}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 4, 4}}});
  Node *w = b.getAttr(b.self(), "weight");
  Node *bias = b.getAttr(b.self(), "bias");
  // As M.BatchNorm2d.forward calls it: every keyword written out.
  b.finish(b.callFunction("batch_norm", {b.arg(0), Arg::none(), Arg::none(), w, bias},
                          {{"training", true},
                           {"momentum", 0.9},
                           {"eps", 1e-05},
                           {"inplace", true},
                           {"compute_mode", "default"},
                           {"param_dim", "dim_1c11"}}));
  std::string s = tm->graph().str();
  CHECK(s.find("batch_norm_out = nn.batch_norm(x, None, None, weight, bias, "
               "compute_mode=default, eps=1e-05, inplace=True, momentum=0.9, "
               "param_dim=dim_1c11, training=True)") != std::string::npos);
}

TEST_CASE("MyBlock of the reference tests prints as derived in the census", "[ir][docstring]") {
  auto tm = tracedMyBlock();
  CHECK(tm->graph().str() == "MyBlock.Graph (self, x) {\n"
                             "\t%2:\tconv1 = getattr(self, \"conv1\") -> (Conv2d)\n"
                             "\t%3:\tconv1_out = conv1(x, )\n"
                             "\t%4:\tbn1 = getattr(self, \"bn1\") -> (BatchNorm2d)\n"
                             "\t%5:\tbn1_out = bn1(conv1_out, )\n"
                             "\t%6:\trelu_out = nn.relu(bn1_out, )\n"
                             "\t%7:\tadd_out = relu_out.__add__(1, )\n"
                             "\t%8:\tnothing = getattr(self, \"nothing\") -> (Module)\n"
                             "\t%9:\tnothing_out = nothing(add_out, )\n"
                             "\treturn nothing_out\n"
                             "}");
  // The identity sub-graph follows its call in recursive expr order.
  auto sub = llvm::cast<CallMethod>(tm->graph().getExprById({9}).asUnique())->calleeGraph();
  REQUIRE(sub);
  CHECK(sub->str() == "MyBlock_nothing.Graph (self, x) {\n"
                      "\t\n"
                      "\treturn x\n"
                      "}");
  CHECK(sub->qualname() == "MyBlock.nothing");
  // Node ids follow creation order: the sub-graph's inputs come before the
  // call's output; expr ids follow the recursive expr order.
  CHECK(sub->input(0)->id() == 9);
  CHECK(sub->input(0)->expr()->id() == 10);
  checkVerified(*tm);
  checkIds(*tm);
}

TEST_CASE("qualname docstring: sub-graph qualnames are attribute paths", "[ir][docstring]") {
  // class block: relu = M.ReLU(); class module: block = block()
  auto blk = std::make_unique<Module>("block");
  blk->registerBuffer("param", Tensor::full({1}, 1.0));
  blk->addModule<ReLU>("relu");
  auto m = std::make_unique<Module>("module");
  m->registerModule("block", std::move(blk));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  Node *blkNode = b.getAttr(b.self(), "block");
  b.finish(b.callModule(
      blkNode, {b.arg(0)}, {},
      [](GraphBuilder &sb) {
        Node *p = sb.getAttr(sb.self(), "param");
        Node *x = sb.callMethod(sb.arg(0), "__add__", {p});
        Node *relu = sb.getAttr(sb.self(), "relu");
        sb.setOutputs(sb.callModule(relu, {sb.callFunction("relu", {x})}));
      },
      {"x"}));
  auto *blockTm = llvm::cast<TracedModule>(tm->module("block"));
  CHECK(blockTm->graph().qualname() == "module.block");
  CHECK(!blockTm->isTop());
  auto flat = tm->flatten();
  Node *out = flat->graph().output(0);
  CHECK(out->qualname() == "module.block.relu.[out]");
  checkVerified(*flat);
}
