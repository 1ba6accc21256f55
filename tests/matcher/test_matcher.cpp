//===- test_matcher.cpp - The pattern DSL and the matcher ----------------===//
#include <atomic>
#include <thread>

#include "Common.h"

using namespace tmg;
using namespace tmg::pat;
using namespace mtest;

TEST_CASE("relu(relu(x)) matches; captures by name, by handle, typed", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *r1 = b.callFunction("relu", {b.arg(0)});
    return b.callFunction("relu", {r1});
  });
  InternalGraph &g = m->graph();
  Capture<TensorNode> xh;
  Capture<CallFunction> innerh;
  Pat x = var("x").bind(xh);
  Pat inner = fn("relu")(x).bind("inner").bind(innerh);
  Pattern p(fn("nn.relu")(inner));
  CHECK(p.str() == "nn.relu($inner=nn.relu($x=var))");
  Match mt;
  Expr *outer = exprNamed(g, "relu_out_1");
  REQUIRE(mt.match(p, outer));
  CHECK(mt.rootExpr() == outer);
  CHECK(mt.node("x") == g.input(1));
  CHECK(mt.node(x) == g.input(1));
  CHECK(mt[xh] == g.input(1));
  CHECK(mt[innerh] == exprNamed(g, "relu_out"));
  CHECK(mt.expr("inner") == exprNamed(g, "relu_out"));
  CHECK(mt.node("nothing") == nullptr);
  // Matching at the inner relu fails (x is an input, not a relu) and clears
  // the captures.
  CHECK_FALSE(mt.match(p, exprNamed(g, "relu_out")));
  CHECK_FALSE(mt.matched());
  CHECK(mt.node("x") == nullptr);
  // A module-typed handle on a tensor does not match.
  Capture<ModuleNode> mh;
  CHECK_FALSE(mt.match(Pattern(fn("relu")(var().bind(mh))), exprNamed(g, "relu_out")));
}

TEST_CASE("commutative matching follows the op's trait, not its name", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *c = b.constant(Tensor::full({1}, 2.0), "two");
    Node *a = b.callMethod(b.arg(0), "__add__", {c}); // x + c
    Node *s = b.callMethod(a, "__sub__", {c});        // (x + c) - c
    return b.callFunction("add", {c, s});             // add(c, ...)
  });
  InternalGraph &g = m->graph();
  Match mt;
  // `c + x` written with the constant first: __add__ is Commutative.
  Pattern add(constant("c") + var("x"));
  REQUIRE(mt.match(add, exprNamed(g, "add_out")));
  CHECK(mt.node("x") == g.input(1));
  CHECK(llvm::isa<Constant>(mt.node("c")->expr()));
  // `.ordered()` turns the swap off.
  CHECK_FALSE(mt.match(Pattern((constant("c") + var("x")).ordered()), exprNamed(g, "add_out")));
  // __sub__ is not commutative.
  CHECK_FALSE(mt.match(Pattern(constant() - any()), exprNamed(g, "sub_out")));
  CHECK(mt.match(Pattern(any() - constant()), exprNamed(g, "sub_out")));
  // The function elemwise.add has the trait too.
  CHECK(mt.match(Pattern(fn("add")(var(), constant())), exprNamed(g, "add_out_1")));
  // A user-registered function without the trait is matched in order only.
  const OpSchema &f = OpRegistry::instance().registerFunction("test", "mtest_pair", {"a", "b"});
  auto m2 = net([&](GraphBuilder &b) {
    Node *c = b.constant(Tensor::full({1}, 2.0), "two");
    return b.callFunction(f, {c, b.arg(0)});
  });
  Expr *call = exprNamed(m2->graph(), "mtest_pair_out");
  CHECK_FALSE(mt.match(Pattern(op(f)(var(), constant())), call));
  CHECK(mt.match(Pattern(op(f)(constant(), var())), call));
}

TEST_CASE("alternatives, literals, wildcards, has_params, all-args rule", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *c = b.callFunction("clip", {b.arg(0), 0, 6});
    Node *s = b.callFunction("sigmoid", {c});
    Node *l = b.callFunction("leaky_relu", {s}, {{"negative_slope", 0.2}});
    return b.callFunction("conv2d", {l, b.arg(1)});
  }, 2, Shape{1, 1, 4, 4});
  InternalGraph &g = m->graph();
  Match mt;
  Expr *clip = exprNamed(g, "clip_out");
  // Literal arguments: 6 matches 6, 6.0 matches 6 (numbers by value).
  CHECK(mt.match(Pattern(fn("clip")(var("x"), 0, 6)), clip));
  CHECK(mt.match(Pattern(fn("clip")(var("x"), 0.0, 6.0)), clip));
  CHECK_FALSE(mt.match(Pattern(fn("clip")(var("x"), 0, 1)), clip));
  // A literal wildcard ignores the value; a tensor pattern never matches a
  // literal slot.
  CHECK(mt.match(Pattern(fn("clip")(var(), lit(), lit())), clip));
  CHECK_FALSE(mt.match(Pattern(fn("clip")(var(), var(), lit())), clip));
  // Captured literals.
  REQUIRE(mt.match(Pattern(fn("clip")(var(), any("lo"), any("hi"))), clip));
  REQUIRE(mt.literal("hi"));
  CHECK(mt.literal("hi")->value() == Scalar(6));
  // Alternatives of ops.
  Pat act = fn("relu")(var("a")) | fn("sigmoid")(var("a")) | fn("tanh")(var("a"));
  REQUIRE(act.node().alts.size() == 3);
  CHECK(mt.match(Pattern(act), exprNamed(g, "sigmoid_out")));
  CHECK(mt.node("a") == clip->output(0));
  CHECK_FALSE(mt.match(Pattern(act), clip));
  // has_params (MegEngine) on a named argument, by value.
  Expr *lr = exprNamed(g, "leaky_relu_out");
  CHECK(mt.match(Pattern(fn("leaky_relu")(var()).hasParam("negative_slope", 0.2)), lr));
  CHECK_FALSE(mt.match(Pattern(fn("leaky_relu")(var()).hasParam("negative_slope", 0.01)), lr));
  // The all-args rule: conv2d(x, w) has two tensor inputs.
  Expr *conv = exprNamed(g, "conv2d_out");
  CHECK(mt.match(Pattern(fn("conv2d")(var(), var())), conv));
  CHECK_FALSE(mt.match(Pattern(fn("conv2d")(var())), conv));
  CHECK(mt.match(Pattern(fn("conv2d")(var()).prefix()), conv));
  // Unknown ops and parameters are errors when the pattern is built.
  CHECK_THROWS_WITH(fn("rellu"), Catch::Contains("did you mean 'relu'"));
  CHECK_THROWS_WITH(fn("leaky_relu").kwarg("slope", 1.0),
                    Catch::Contains("has no parameter 'slope'; did you mean 'negative_slope'?"));
}

TEST_CASE("predicates on shapes, dtypes, constant values", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *c = b.constant(Tensor::full({1}, 0.5), "half");
    return b.callMethod(b.arg(0), "__mul__", {c});
  });
  Expr *mul = exprNamed(m->graph(), "mul_out");
  Match mt;
  CHECK(mt.match(Pattern(var().withRank(2) * constant().withValue(0.5)), mul));
  CHECK_FALSE(mt.match(Pattern(var().withRank(4) * constant()), mul));
  CHECK(mt.match(Pattern(var().withShape({2, 3}).withDType(DType::Float32) * constant()), mul));
  CHECK_FALSE(mt.match(Pattern(var().withDType(DType::Int32) * constant()), mul));
  CHECK_FALSE(mt.match(Pattern(var() * constant().withValue(2.0)), mul));
  CHECK(mt.match(Pattern(var() * constant().where("positive", [](const Node *n, const TreeDef *) {
                           auto *c = llvm::dyn_cast<Constant>(n->expr());
                           return c && c->tensor().at(0) > 0;
                         })),
                 mul));
}

TEST_CASE("DAG patterns: shared sub-patterns and several roots", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *sq = b.callMethod(b.arg(0), "__mul__", {b.arg(0)}); // x * x
    Node *xy = b.callMethod(b.arg(0), "__mul__", {b.arg(1)}); // x * y
    Node *r = b.callFunction("relu", {sq});
    Node *s = b.callFunction("sigmoid", {sq});
    return b.callMethod(b.callMethod(r, "__add__", {s}), "__add__", {xy});
  }, 2);
  InternalGraph &g = m->graph();
  Match mt;
  Pat x = var("x");
  Pattern square(x * x);
  CHECK(mt.match(square, exprNamed(g, "mul_out")));
  CHECK_FALSE(mt.match(square, exprNamed(g, "mul_out_1")));
  // Two roots sharing x*x: relu(t) and sigmoid(t).
  Pat t = (x * x).bind("t");
  Pattern two({fn("relu")(t), fn("sigmoid")(t)});
  REQUIRE(two.numRoots() == 2);
  REQUIRE(mt.match(two, exprNamed(g, "relu_out")));
  CHECK(mt.rootExpr(1) == exprNamed(g, "sigmoid_out"));
  CHECK(mt.node("t") == exprNamed(g, "mul_out")->output(0));
  // The second root is searched among users of the shared value.
  Pattern noTanh({fn("relu")(t), fn("tanh")(t)});
  CHECK_FALSE(mt.match(noTanh, exprNamed(g, "relu_out")));
  // Roots that share nothing are rejected when compiled.
  CHECK_THROWS_WITH(Pattern({fn("relu")(var()), fn("tanh")(var())}),
                    Catch::Contains("shares no sub-pattern"));
}

TEST_CASE("check_users: intermediate values may not escape the match", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *r1 = b.callFunction("relu", {b.arg(0)});
    Node *r2 = b.callFunction("relu", {r1});
    return b.callMethod(r2, "__add__", {r1}); // r1 also used by the add
  });
  InternalGraph &g = m->graph();
  Match mt;
  Expr *outer = exprNamed(g, "relu_out_1");
  CHECK_FALSE(mt.match(Pattern(fn("relu")(fn("relu")(var()))), outer));
  CHECK(mt.match(Pattern(fn("relu")(fn("relu")(var()).checkUsers(false))), outer));
  // The root is never checked (its users are what a rewrite rewires).
  auto m2 = net([](GraphBuilder &b) {
    Node *r1 = b.callFunction("relu", {b.arg(0)});
    Node *r2 = b.callFunction("relu", {r1});
    return b.callMethod(r2, "__add__", {r2});
  });
  CHECK(mt.match(Pattern(fn("relu")(fn("relu")(var()))), exprNamed(m2->graph(), "relu_out_1")));
  // Uses inside the match count: relu(x) + relu(x) with one shared relu.
  auto m3 = net([](GraphBuilder &b) {
    Node *r = b.callFunction("relu", {b.arg(0)});
    return b.callMethod(r, "__add__", {r});
  });
  Pat r = fn("relu")(var());
  CHECK(mt.match(Pattern(r + r), exprNamed(m3->graph(), "add_out")));
}

TEST_CASE("selecting one output of a multi-output expr", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    auto parts = b.callFunctionN(functionOp("split"), {b.arg(0), 2}, {}, 2);
    Node *a = b.callFunction("relu", {parts[0]});
    Node *c = b.callFunction("sigmoid", {parts[1]});
    return b.callMethod(a, "__add__", {c});
  }, 1, Shape{4, 2});
  InternalGraph &g = m->graph();
  Match mt;
  Pat split = fn("split")(var("x"), lit());
  CHECK(mt.match(Pattern(fn("relu")(split.output(0))), exprNamed(g, "relu_out")));
  CHECK_FALSE(mt.match(Pattern(fn("relu")(split.output(1))), exprNamed(g, "relu_out")));
  REQUIRE(mt.match(Pattern(fn("sigmoid")(split.output(1).bind("half"))), exprNamed(g, "sigmoid_out")));
  CHECK(mt.node("half") == exprNamed(g, "sigmoid_out")->input(0));
  // Without output(), any output of the producer matches (MegEngine).
  CHECK(mt.match(Pattern(fn("sigmoid")(split)), exprNamed(g, "sigmoid_out")));
}

TEST_CASE("module patterns: is_op by class, has_attr, any module", "[matcher]") {
  auto net2 = std::make_unique<Module>("Net");
  net2->addModule<Conv2d>("conv", 4, 4, 3, 1, 1, 1, 2, false);
  net2->addModule<ReLU>("act");
  auto m = TracedModule::fromModule(std::move(net2));
  GraphBuilder b = GraphBuilder::top(*m, {{"x", Shape{1, 4, 8, 8}}});
  Node *conv = b.callModule(b.getAttr(b.self(), "conv"), {b.arg(0)});
  b.finish(b.callModule(b.getAttr(b.self(), "act"), {conv}));
  InternalGraph &g = m->graph();
  Match mt;
  Expr *act = exprNamed(g, "act_out");
  CHECK(mt.match(Pattern(isOp("ReLU")(isOp("Conv2d")(var()))), act));
  CHECK(mt.match(Pattern(module<ReLU>()(module<Conv2d>().hasAttr("groups", 2)(var()))), act));
  CHECK_FALSE(mt.match(Pattern(module<ReLU>()(module<Conv2d>().hasAttr("groups", 1)(var()))), act));
  CHECK(mt.match(Pattern(anyModule()(anyModule()(var()))), act));
  CHECK_FALSE(mt.match(Pattern(module<Sigmoid>()(var())), act));
  CHECK_THROWS_WITH(fn("relu").hasAttr("groups", 1), Catch::Contains("module patterns"));
}

TEST_CASE("explain says which sub-pattern failed and why", "[matcher][explain]") {
  auto m = net([](GraphBuilder &b) {
    Node *a = b.callMethod(b.arg(0), "__add__", {1});
    return b.callFunction("relu", {a});
  });
  InternalGraph &g = m->graph();
  Match mt;
  mt.setExplain(true);
  Pattern p(fn("relu")(fn("relu")(var("x"))));
  REQUIRE_FALSE(mt.match(p, exprNamed(g, "relu_out")));
  std::string why = mt.explanation();
  INFO(why);
  CHECK(why == "pattern nn.relu(nn.relu($x=var)) does not match %3: relu_out = nn.relu(add_out, ):\n"
               "  in argument 0 of nn.relu(nn.relu($x=var)) at %3: relu_out = nn.relu(add_out, ):\n"
               "    nn.relu($x=var): %2: add_out = x.__add__(1, ) is a different op");
  // Alternatives list every branch; commutative ops both orders.
  Pattern alt(fn("relu")(fn("sigmoid")(var()) | (var() + 2)));
  REQUIRE_FALSE(mt.match(alt, exprNamed(g, "relu_out")));
  why = mt.explanation();
  INFO(why);
  CHECK(why.find("no alternative matches 'add_out'") != std::string::npos);
  CHECK(why.find("nn.sigmoid(var): %2: add_out = x.__add__(1, ) is a different op") !=
        std::string::npos);
  CHECK(why.find("neither operand order matches") != std::string::npos);
  CHECK(why.find("the argument is 1, not 2") != std::string::npos);
  // check_users failures are explained too.
  auto m2 = net([](GraphBuilder &b) {
    Node *r1 = b.callFunction("relu", {b.arg(0)});
    return b.callMethod(b.callFunction("relu", {r1}), "__add__", {r1});
  });
  REQUIRE_FALSE(mt.match(Pattern(fn("relu")(fn("relu")(var()))),
                         exprNamed(m2->graph(), "relu_out_1")));
  CHECK(mt.explanation().find("has 2 uses but only 1 inside the match (check_users)") !=
        std::string::npos);
}

TEST_CASE("one frozen pattern set matched from several threads", "[matcher][threads]") {
  // 400 relu(relu(x_i)) chains over one input.
  auto m = net([](GraphBuilder &b) {
    Node *acc = b.arg(0);
    for (int i = 0; i < 400; ++i) {
      Node *r = b.callFunction("relu", {b.callFunction(i % 2 ? "relu" : "sigmoid", {acc})});
      acc = b.callMethod(acc, "__add__", {r});
    }
    return acc;
  });
  InternalGraph &g = m->graph();
  PatternSet set;
  set.add("double-relu", Pattern(fn("relu")(fn("relu")(var("x")))),
          [](const Match &, Rewriter &) { return success(); });
  set.add("relu-sigmoid", Pattern(fn("relu")(fn("sigmoid")(var("x")))),
          [](const Match &, Rewriter &) { return success(); }, 2);
  FrozenPatternSet frozen(std::move(set));
  std::vector<Expr *> exprs(g.begin(), g.end());
  auto countMatches = [&](std::vector<int> &counts) {
    Match mt;
    llvm::SmallVector<const RewritePattern *, 4> cands;
    for (int rep = 0; rep < 20; ++rep)
      for (Expr *e : exprs) {
        cands.clear();
        frozen.candidates(e, cands);
        for (size_t i = 0; i < cands.size(); ++i)
          if (mt.match(cands[i]->pattern(), e)) {
            ++counts[cands[i]->name() == "double-relu" ? 0 : 1];
            CHECK(mt.node("x") != nullptr);
          }
      }
  };
  std::vector<int> serial(2, 0);
  countMatches(serial);
  CHECK(serial[0] == 20 * 200);
  CHECK(serial[1] == 20 * 200);
  std::vector<std::vector<int>> per(4, std::vector<int>(2, 0));
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] { countMatches(per[t]); });
  for (auto &t : ts)
    t.join();
  for (const auto &c : per)
    CHECK(c == serial);
  // Candidates come by root op, best benefit first.
  llvm::SmallVector<const RewritePattern *, 4> cands;
  frozen.candidates(exprNamed(g, "relu_out"), cands);
  REQUIRE(cands.size() == 2);
  CHECK(cands[0]->name() == "relu-sigmoid");
  cands.clear();
  frozen.candidates(exprNamed(g, "sigmoid_out"), cands);
  CHECK(cands.empty());
}

TEST_CASE("check_users on a leaf: the value has no users outside the match", "[matcher]") {
  auto m = net([](GraphBuilder &b) {
    Node *a = b.callFunction("sigmoid", {b.arg(0)});
    Node *sq = b.callMethod(a, "__mul__", {a});           // a * a: a used twice, inside
    Node *r = b.callFunction("relu", {b.arg(0)});         // x used by sigmoid and relu
    return b.callMethod(sq, "__add__", {r});
  });
  InternalGraph &g = m->graph();
  Match mt;
  Pat a = var("a").checkUsers(true);
  CHECK(mt.match(Pattern(a * a), exprNamed(g, "mul_out")));
  CHECK(mt.match(Pattern(fn("relu")(var())), exprNamed(g, "relu_out")));
  CHECK_FALSE(mt.match(Pattern(fn("relu")(var().checkUsers(true))), exprNamed(g, "relu_out")));
  mt.setExplain(true);
  CHECK_FALSE(mt.match(Pattern(fn("relu")(var().checkUsers(true))), exprNamed(g, "relu_out")));
  CHECK(mt.explanation().find("has 2 uses but only 1 inside the match (check_users)") !=
        std::string::npos);
}

TEST_CASE("the quick rejection never changes a result: fast path against the full path",
          "[matcher]") {
  // Every pattern against every expr of a graph with the shapes the quick
  // checks look at (input counts, producers in either operand, literal
  // slots, prefix patterns, alternatives of several ops, module calls):
  // the fast path (quickAccepts, quickReject) and the explain path (which
  // skips them) must agree on the result and the bindings.
  auto net2 = std::make_unique<Module>("Net");
  net2->addModule<ReLU>("act");
  auto m = TracedModule::fromModule(std::move(net2));
  GraphBuilder b = GraphBuilder::top(*m, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}});
  Node *x = b.arg(0), *y = b.arg(1);
  Node *c = b.constant(Tensor::full({1}, 1.0), "one");
  Node *r = b.callFunction("relu", {x});
  Node *rr = b.callFunction("relu", {r});
  Node *r6 = b.callFunction("relu6", {rr});
  Node *s = b.callFunction("sigmoid", {r6});
  Node *m1 = b.callMethod(s, "__mul__", {r6});      // sigmoid(v) * v
  Node *m2 = b.callMethod(r6, "__mul__", {s});      // v * sigmoid(v)
  Node *a0 = b.callMethod(m1, "__add__", {0});
  Node *a1 = b.callMethod(a0, "__add__", {m2});
  Node *ac = b.callMethod(a1, "__add__", {c});
  Node *cl = b.callFunction("clip", {ac, 0, 6});
  Node *mx = b.callFunction("maximum", {cl, cl});
  Node *md = b.callModule(b.getAttr(b.self(), "act"), {mx});
  Node *t = b.callFunction("tanh", {md});
  Node *q = b.callFunction("maximum", {b.callFunction("relu", {y}), b.callFunction("abs", {y})});
  Node *cv = b.callFunction("concat", {std::vector<Arg>{t, q, x}});
  b.finish(b.callFunction("relu", {cv}));
  Pat v = var("v");
  std::vector<Pattern> patterns = {
      Pattern(fn("relu")(fn("relu")(any()))),
      Pattern(fn("relu6")(fn("relu")(v)) | fn("relu")(fn("relu6")(v))),
      Pattern(fn("sigmoid")(v) * v),
      Pattern((fn("sigmoid")(v) * v).ordered()),
      Pattern(fn("sigmoid")(var()) * fn("relu6")(var())), // two producers named
      Pattern((fn("relu6")(var()) * fn("sigmoid")(var())).ordered()),
      Pattern(fn("maximum")(fn("relu")(var()), fn("abs")(var()))),
      Pattern(fn("maximum")(fn("abs")(var()), fn("relu")(var()))),
      Pattern(var() + 0),
      Pattern(var() + constant()),
      Pattern(fn("clip")(var(), 0, 6)),
      Pattern(fn("clip")(var(), lit(), lit())),
      Pattern(fn("maximum")(v, v)),
      Pattern(fn("maximum")(var(), any())),
      Pattern(fn("tanh")(module<ReLU>()(var()))),
      Pattern(module<ReLU>()(fn("maximum")(any(), any()))),
      Pattern(anyModule()(var()) | fn("tanh")(any())),
      Pattern(fn("concat")(any())),
      Pattern(fn("concat")(any()).prefix()),
      Pattern(fn("relu")(fn("concat")(any()))),
      Pattern(fn("add")(var(), var()) | (fn("sigmoid")(var()) * var())),
      Pattern(std::vector<Pat>{fn("relu")(v), fn("relu")(fn("relu")(v))}),
  };
  Match fast, full;
  full.setExplain(true);
  size_t hits = 0, pairs = 0;
  for (const Pattern &p : patterns)
    for (Expr *e : m->graph().body()) {
      bool a = fast.match(p, e), bres = full.match(p, e);
      INFO(p.str() << " at " << e->str());
      REQUIRE(a == bres);
      if (a) {
        ++hits;
        CHECK(fast.matchedExprs() == full.matchedExprs());
        for (uint32_t id = 0; id < p.size(); ++id) {
          CHECK(fast.nodeAt(id) == full.nodeAt(id));
          CHECK(fast.exprAt(id) == full.exprAt(id));
        }
      }
      ++pairs;
    }
  // Both outcomes occur (the comparison is not vacuous).
  CHECK(hits >= 12);
  CHECK(hits < pairs / 2);
}
