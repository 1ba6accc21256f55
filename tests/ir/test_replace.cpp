//===- test_replace.cpp - replace_node semantics -------------------------===//
#include "Fixtures.h"

using namespace tmg;
using namespace fixtures;

namespace {
Expr *unique(InternalGraph &g, OpKind k) {
  return g.getFunctionByType(&op(k), false).asUnique();
}
} // namespace

TEST_CASE("insert a neg after relu and replace (test_insert)", "[ir][replace]") {
  auto tm = tracedMyBlock();
  InternalGraph &g = tm->graph();
  Expr *relu = unique(g, OpKind::Relu);
  Node *reluOut = relu->output(0);
  GraphBuilder b = GraphBuilder::into(g);
  b.setInsertionPointAfter(relu);
  Node *neg = b.callFunction("neg", {reluOut});
  ReplaceReport r = g.replaceNode({{reluOut, neg}});
  // The neg's own use is not rewired: that would make neg depend on itself.
  CHECK(r.rewired == 1);
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].user == neg->expr());
  CHECK(r.skipped[0].cycle);
  CHECK(r.str().find("create a cycle") != std::string::npos);
  g.compile();
  CHECK(g.str() == "MyBlock.Graph (self, x) {\n"
                   "\t%2:\tconv1 = getattr(self, \"conv1\") -> (Conv2d)\n"
                   "\t%3:\tconv1_out = conv1(x, )\n"
                   "\t%4:\tbn1 = getattr(self, \"bn1\") -> (BatchNorm2d)\n"
                   "\t%5:\tbn1_out = bn1(conv1_out, )\n"
                   "\t%6:\trelu_out = nn.relu(bn1_out, )\n"
                   "\t%12:\tneg_out = elemwise.neg(relu_out, )\n"
                   "\t%7:\tadd_out = neg_out.__add__(1, )\n"
                   "\t%8:\tnothing = getattr(self, \"nothing\") -> (Module)\n"
                   "\t%9:\tnothing_out = nothing(add_out, )\n"
                   "\treturn nothing_out\n"
                   "}");
  checkVerified(*tm);
  checkExprUsers(*tm);
}

TEST_CASE("delete relu, then everything (test_delete)", "[ir][replace]") {
  auto tm = tracedMyBlock();
  InternalGraph &g = tm->graph();
  Expr *relu = unique(g, OpKind::Relu);
  ReplaceReport r = g.replaceNode({{relu->output(0), relu->input(0)}});
  CHECK(r.complete());
  CHECK(g.compile() == 1);
  CHECK(g.getFunctionByType(&op(OpKind::Relu)).asCount() == 0);
  g.replaceNode({{g.output(0), g.input(1)}});
  g.compile();
  CHECK(g.size() == 0);
  CHECK(g.str() == "MyBlock.Graph (self, x) {\n\t\n\treturn x\n}");
  checkVerified(*tm);
}

TEST_CASE("uses before the replacement are skipped and classified", "[ir][replace]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
  Node *a = b.callFunction("relu", {b.arg(0)});
  Node *early = b.callFunction("exp", {a});      // before the replacement, independent
  Node *anc = b.callFunction("abs", {a});        // an ancestor of the replacement
  Node *repl = b.callMethod(anc, "__add__", {1});
  Node *late = b.callFunction("log", {a});       // after the replacement
  b.setOutputs(Arg::tuple({early, repl, late}));
  InternalGraph &g = b.graph();
  ReplaceReport r = g.replaceNode({{a, repl}});
  CHECK(r.rewired == 1);
  CHECK(late->expr()->input(0) == repl);
  REQUIRE(r.skipped.size() == 2);
  CHECK(r.skipped[0].user == early->expr());
  CHECK(!r.skipped[0].cycle);
  CHECK(r.skipped[1].user == anc->expr());
  CHECK(r.skipped[1].cycle);
  CHECK(early->expr()->input(0) == a);
  checkVerified(*tm);
}

TEST_CASE("replace_node updates outputs, accepts inputs, checks kinds", "[ir][replace]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}, {"y"}});
  Node *a = b.callFunction("relu", {b.arg(0)});
  Node *c = b.callFunction("neg", {a});
  b.setOutputs(Arg::tuple({a, c}));
  InternalGraph &g = b.graph();
  // An input replacement takes every use.
  ReplaceReport r = g.replaceNode({{a, b.arg(1)}});
  CHECK(r.complete());
  CHECK(g.output(0) == b.arg(1));
  CHECK(c->expr()->input(0) == b.arg(1));
  CHECK_THROWS_WITH(g.replaceNode({{c, g.self()}}), Catch::Contains("are not the same"));
  auto other = addOneModule();
  CHECK_THROWS_WITH(g.replaceNode({{c, other->graph().output(0)}}),
                    Catch::Contains("is not a node of graph"));
  // The failed calls changed nothing.
  CHECK(g.output(1) == c);
  checkVerified(*tm);
}

TEST_CASE("pairs are processed last to first, as popitem", "[ir][replace]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
  Node *a = b.callFunction("relu", {b.arg(0)});
  Node *bb = b.callFunction("neg", {b.arg(0)});
  Node *c = b.callFunction("exp", {b.arg(0)});
  Node *u = b.callMethod(a, "__add__", {bb});
  b.setOutputs(u);
  InternalGraph &g = b.graph();
  // {a: b, b: c}: b -> c first, then a -> b; so u = b + c.
  g.replaceNode({{a, bb}, {bb, c}});
  CHECK(u->expr()->input(0) == bb);
  CHECK(u->expr()->input(1) == c);
  checkVerified(*tm);
}

TEST_CASE("users keep their order; multi-use exprs are rewired per use", "[ir][replace]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
  Node *a = b.callFunction("relu", {b.arg(0)});
  Node *r = b.callFunction("neg", {b.arg(0)});
  Node *sq = b.callMethod(a, "__mul__", {a});
  b.setOutputs(sq);
  InternalGraph &g = b.graph();
  CHECK(a->numUsers() == 2);
  CHECK(g.replaceNode({{a, r}}).rewired == 2);
  CHECK(sq->expr()->input(0) == r);
  CHECK(sq->expr()->input(1) == r);
  CHECK(r->numUsers() == 2);
  CHECK(!a->hasUsers());
  checkVerified(*tm);
}
