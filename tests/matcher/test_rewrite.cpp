//===- test_rewrite.cpp - Rewriter, greedy driver, pattern passes --------===//
#include <chrono>
#include <limits>
#include <thread>

#include "../TestPasses.h"
#include "Common.h"
#include "tm/passes/PassManager.h"
#include "tm/passes/RulePasses.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
using namespace tmg::pat;
using namespace mtest;

namespace {
/// relu(relu(...relu(x + 1)...)), `n` relus.
std::unique_ptr<TracedModule> reluChain(int n) {
  return net([n](GraphBuilder &b) {
    Node *v = b.callMethod(b.arg(0), "__add__", {1});
    for (int i = 0; i < n; ++i)
      v = b.callFunction("relu", {v});
    return v;
  });
}

PatternSet doubleRelu() {
  PatternSet set;
  set.add("double-relu", Pattern(fn("relu")(fn("relu")(var()).bind("inner"))),
          [](const Match &m, Rewriter &rw) {
            return rw.replaceAllUsesWith(m.rootExpr()->output(0), m.node("inner"));
          });
  return set;
}

struct Log : RewriteListener {
  std::vector<std::string> events;
  void notifyInserted(Expr *e) override { events.push_back(fmt::format("insert %{}", e->id())); }
  void notifyInputsChanged(Expr *e) override {
    events.push_back(fmt::format("rewire %{}", e->id()));
  }
  void notifyErased(Expr *e, llvm::ArrayRef<Node *>) override {
    events.push_back(fmt::format("erase %{}", e->id()));
  }
};
} // namespace

TEST_CASE("rewriter: a rolled-back transaction leaves the graph unchanged", "[rewriter]") {
  auto m = net([](GraphBuilder &b) {
    Node *r = b.callFunction("relu", {b.arg(0)});
    Node *s = b.callFunction("sigmoid", {r});
    return b.callMethod(s, "__mul__", {r});
  });
  InternalGraph &g = m->graph();
  std::string before = g.str();
  Rewriter rw(g);
  Log log;
  rw.addListener(&log);
  Expr *sig = exprNamed(g, "sigmoid_out");
  Expr *relu = exprNamed(g, "relu_out");
  rw.begin();
  rw.setInsertionPoint(sig);
  Node *t = rw.callFunction("tanh", {relu->output(0)});
  REQUIRE(succeeded(rw.replaceAllUsesWith(sig->output(0), t)));
  rw.eraseExpr(sig);
  REQUIRE(succeeded(rw.replaceAllUsesWith(g.outputs()[0], t))); // a graph output
  rw.eraseIfDead(exprNamed(g, "mul_out"));
  CHECK(g.str() != before);
  rw.rollback();
  CHECK(g.str() == before);
  CHECK(log.events.empty()); // nothing was committed
  requireVerified(*m);

  // A replacement defined after a user is refused without any change.
  Expr *mul = exprNamed(g, "mul_out");
  CHECK(failed(rw.replaceAllUsesWith(relu->output(0), mul->output(0))));
  CHECK(rw.lastFailure().find("comes before") != std::string::npos);
  CHECK(g.str() == before);

  // Committed edits reach the listeners in order.
  rw.begin();
  rw.setInsertionPoint(sig);
  Node *t2 = rw.callFunction("tanh", {relu->output(0)});
  REQUIRE(succeeded(rw.replaceAllUsesWith(sig->output(0), t2)));
  CHECK(rw.eraseIfDead(sig) == 1);
  rw.commit();
  CHECK(log.events == std::vector<std::string>{"insert %6", "rewire %4", "erase %3"});
  // Deferred actions run on commit only.
  int ran = 0;
  rw.begin();
  rw.onCommit([&] { ++ran; });
  rw.rollback();
  CHECK(ran == 0);
  rw.begin();
  rw.onCommit([&] { ++ran; });
  CHECK(ran == 0);
  rw.commit();
  CHECK(ran == 1);
  requireVerified(*m);
  CHECK(g.str() == "Net.Graph (self, x) {\n"
                   "\t%2:\trelu_out = nn.relu(x, )\n"
                   "\t%6:\ttanh_out_1 = elemwise.tanh(relu_out, )\n"
                   "\t%4:\tmul_out = tanh_out_1.__mul__(relu_out, )\n"
                   "\treturn mul_out\n"
                   "}");
}

TEST_CASE("rewriter: erasing exprs in use is an error; transact rolls back on throw",
          "[rewriter]") {
  auto m = reluChain(2);
  InternalGraph &g = m->graph();
  std::string before = g.str();
  Rewriter rw(g);
  CHECK_THROWS_WITH(rw.eraseExpr(exprNamed(g, "relu_out")), Catch::Contains("still used"));
  FailureOr<bool> r = rw.transact([&] {
    rw.setInsertionPoint(exprNamed(g, "relu_out"));
    rw.callFunction("tanh", {g.input(1)});
    rw.callFunction("relu", {g.input(1), g.input(1)}); // does not bind: throws
    return success();
  });
  REQUIRE(r.failed());
  CHECK(r.diagnostic().message.find("takes 1 positional arguments but 2 were given") != std::string::npos);
  CHECK(g.str() == before);
  requireVerified(*m);

  // A function that declines is rolled back without an error.
  FailureOr<bool> declined = rw.transact([&] {
    rw.setInsertionPoint(exprNamed(g, "relu_out"));
    rw.callFunction("tanh", {g.input(1)});
    return failure();
  });
  REQUIRE(declined.succeeded());
  CHECK_FALSE(*declined);
  CHECK(g.str() == before);
  FailureOr<bool> applied = rw.transact([&] {
    rw.setInsertionPoint(exprNamed(g, "relu_out"));
    rw.callFunction("tanh", {g.input(1)});
    return success();
  });
  REQUIRE(applied.succeeded());
  CHECK(*applied);
  CHECK(g.str() != before);
  requireVerified(*m);
}

TEST_CASE("greedy driver folds a relu chain and converges", "[driver]") {
  auto m = reluChain(5);
  FrozenPatternSet set(doubleRelu());
  GreedyResult r = applyPatternsGreedily(m->graph(), set);
  INFO(r.str());
  CHECK(r.converged);
  CHECK(r.rewrites == 4);
  CHECK(r.erased == 4);
  CHECK(r.applied == std::vector<std::pair<std::string, int64_t>>{{"double-relu", 4}});
  CHECK(m->graph().str() == "Net.Graph (self, x) {\n"
                            "\t%2:\tadd_out = x.__add__(1, )\n"
                            "\t%3:\trelu_out = nn.relu(add_out, )\n"
                            "\treturn relu_out\n"
                            "}");
  requireVerified(*m);
}

TEST_CASE("greedy driver: the first round is the same after an edit in the middle",
          "[driver]") {
  // An insertion and removal in the middle of the body must leave the
  // first round visiting the same exprs in the same order.
  auto fresh = reluChain(9);
  auto edited = reluChain(9);
  InternalGraph &g = edited->graph();
  {
    Rewriter rw(g);
    rw.setInsertionPoint(*std::next(g.body().begin(), 3));
    Node *t = rw.callFunction("neg", {g.input(1)});
    rw.eraseExpr(t->expr());
  }
  FrozenPatternSet set(doubleRelu());
  GreedyResult a = applyPatternsGreedily(fresh->graph(), set);
  GreedyResult b = applyPatternsGreedily(g, set);
  CHECK(a.converged);
  CHECK(a.rewrites == 8);
  CHECK(b.rewrites == a.rewrites);
  CHECK(b.iterations == a.iterations);
  CHECK(g.str() == fresh->graph().str());
  requireVerified(*edited);
}

TEST_CASE("greedy driver reports non-convergence and the patterns that kept firing",
          "[driver]") {
  auto m = net([](GraphBuilder &b) { return b.callFunction("relu", {b.arg(0)}); });
  auto swap = [](const char *to) {
    return [to](const Match &mt, Rewriter &rw) {
      Node *y = rw.callFunction(to, {mt.node("x")});
      return rw.replaceAllUsesWith(mt.rootExpr()->output(0), y);
    };
  };
  PatternSet set;
  set.add("relu-to-sigmoid", Pattern(fn("relu")(var("x"))), swap("sigmoid"));
  set.add("sigmoid-to-relu", Pattern(fn("sigmoid")(var("x"))), swap("relu"));
  FrozenPatternSet frozen(std::move(set));
  GreedyConfig cfg;
  cfg.maxIterations = 5;
  GreedyResult r = applyPatternsGreedily(m->graph(), frozen, cfg);
  CHECK_FALSE(r.converged);
  CHECK(r.iterations == 5);
  CHECK(r.rewrites == 5);
  CHECK(r.stillFiring ==
        std::vector<std::pair<std::string, int64_t>>{{"relu-to-sigmoid", 1}, {"sigmoid-to-relu", 1}});
  CHECK(r.str() == "did not converge after 5 rounds (5 rewrites); still firing: "
                   "relu-to-sigmoid (1), sigmoid-to-relu (1)");
  requireVerified(*m);
  // With onMatchFailure, the driver explains failed matches (for debugging).
  std::vector<std::string> whys;
  GreedyConfig dbg;
  dbg.maxIterations = 1;
  dbg.onMatchFailure = [&](const RewritePattern &p, const std::string &why) {
    whys.push_back(p.name() + ": " + why);
  };
  PatternSet none;
  none.add("relu-of-tanh", Pattern(fn("relu")(fn("tanh")(var()))),
           [](const Match &, Rewriter &) { return success(); });
  FrozenPatternSet noneSet(std::move(none));
  auto m3 = net([](GraphBuilder &b) { return b.callFunction("relu", {b.arg(0)}); });
  GreedyResult r3 = applyPatternsGreedily(m3->graph(), noneSet, dbg);
  CHECK(r3.converged);
  REQUIRE(whys.size() == 1);
  INFO(whys[0]);
  CHECK(whys[0].find("relu-of-tanh: pattern nn.relu(elemwise.tanh(var)) does not match") == 0);
  // The rewrite limit stops it too.
  cfg.maxIterations = 100;
  cfg.maxRewrites = 3;
  GreedyResult r2 = applyPatternsGreedily(m->graph(), frozen, cfg);
  CHECK_FALSE(r2.converged);
  CHECK(r2.rewrites == 3);
  requireVerified(*m);
}

TEST_CASE("greedy driver: a failing rewrite leaves the graph unchanged; benefit order",
          "[driver]") {
  auto m = reluChain(2);
  std::string before = m->graph().str();
  PatternSet set;
  set.add("half-done", Pattern(fn("relu")(var("x"))), [](const Match &mt, Rewriter &rw) {
    Node *y = rw.callFunction("tanh", {mt.node("x")});
    (void)rw.replaceAllUsesWith(mt.rootExpr()->output(0), y);
    return failure(); // declines after editing: rolled back
  });
  set.add("throws", Pattern(fn("relu")(var("x"))), [](const Match &mt, Rewriter &rw) -> LogicalResult {
    rw.callFunction("tanh", {mt.node("x")});
    raise("rewrite went wrong");
  }, 5);
  FrozenPatternSet frozen(std::move(set));
  GreedyResult r = applyPatternsGreedily(m->graph(), frozen);
  CHECK(r.converged);
  CHECK(r.rewrites == 0);
  CHECK(m->graph().str() == before);
  requireVerified(*m);

  // The higher benefit wins when both apply.
  PatternSet set2;
  set2.add("to-tanh", Pattern(fn("relu")(var("x"))), [](const Match &mt, Rewriter &rw) {
    return rw.replaceAllUsesWith(mt.rootExpr()->output(0), rw.callFunction("tanh", {mt.node("x")}));
  });
  set2.add("to-sigmoid", Pattern(fn("relu")(var("x"))), [](const Match &mt, Rewriter &rw) {
    return rw.replaceAllUsesWith(mt.rootExpr()->output(0),
                                 rw.callFunction("sigmoid", {mt.node("x")}));
  }, 2);
  FrozenPatternSet frozen2(std::move(set2));
  GreedyResult r2 = applyPatternsGreedily(m->graph(), frozen2);
  CHECK(r2.converged);
  CHECK(r2.applied == std::vector<std::pair<std::string, int64_t>>{{"to-sigmoid", 2}});
  requireVerified(*m);
}

TEST_CASE("fold-double-relu keeps the numerics; runs in a pipeline on several threads",
          "[driver][pass]") {
  auto build = [] {
    return net([](GraphBuilder &b) {
      Node *a = b.callFunction("relu", {b.callFunction("relu", {b.arg(0)})});
      Node *c = b.callFunction("relu6", {b.callFunction("relu", {b.arg(1)})});
      Node *d = b.callFunction("relu", {b.callFunction("relu6", {a})});
      return b.callMethod(c, "__add__", {d});
    }, 2, Shape{4, 5});
  };
  auto m = build();
  Tensor x = Tensor::randn({4, 5}, 1), y = Tensor::randn({4, 5}, 2);
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data<float>()[i] *= 5;
    y.data<float>()[i] *= 5;
  }
  rt::Interpreter before(*m);
  Tensor want = before.run({x, y}).outputs[0];
  PassRegistry &reg = test::testPasses();
  registerMatcherPasses(reg);
  registerMatcherPasses(reg); // idempotent
  auto p = Pipeline::parse("fold-double-relu,compile", reg);
  REQUIRE(p.succeeded());
  PipelineOptions o;
  o.verifyEach = true;
  o.stats = true;
  o.output = [](const std::string &) {};
  PassManager pm(std::move(*p), o);
  if (auto r = pm.run(*m); r.failed())
    FAIL(r.diagnostic().str());
  // relu(relu(x)) folds first; then relu6(relu(x)) and relu(relu6(x))
  // fold twice more on the x side (each new relu6 is matched again).
  CHECK(m->graph().str() == "Net.Graph (self, x, y) {\n"
                            "\t%10:\trelu6_out_2 = nn.relu6(y, )\n"
                            "\t%12:\trelu6_out_4 = nn.relu6(x, )\n"
                            "\t%9:\tadd_out = relu6_out_2.__add__(relu6_out_4, )\n"
                            "\treturn add_out\n"
                            "}");
  auto stats = const_cast<PassContext &>(pm.context()).stats().all().at("fold-double-relu");
  CHECK(stats.at("relu-relu: applied") == 1);
  CHECK(stats.at("relu-relu: matched") == 1);
  CHECK(stats.at("relu-relu6: applied") == 3);
  rt::Interpreter after(*m);
  Tensor got = after.run({x, y}).outputs[0];
  REQUIRE(got.numel() == want.numel());
  for (int64_t i = 0; i < got.numel(); ++i)
    CHECK(got.at(i) == want.at(i));
}

TEST_CASE("one frozen set drives rewrites of several graphs on several threads", "[driver][threads]") {
  FrozenPatternSet set(doubleRelu());
  std::vector<std::unique_ptr<TracedModule>> ms;
  for (int i = 0; i < 4; ++i)
    ms.push_back(reluChain(200 + i));
  std::vector<GreedyResult> rs(4);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] { rs[i] = applyPatternsGreedily(ms[i]->graph(), set); });
  for (auto &t : ts)
    t.join();
  for (int i = 0; i < 4; ++i) {
    CHECK(rs[i].converged);
    CHECK(rs[i].rewrites == 199 + i);
    CHECK(ms[i]->graph().size() == 2);
    requireVerified(*ms[i]);
  }
}

TEST_CASE("greedy driver: the wall-clock limit stops a run that would not end", "[driver]") {
  // relu -> sigmoid -> relu ... one rewrite per round, forever.
  auto m = net([](GraphBuilder &b) { return b.callFunction("relu", {b.arg(0)}); });
  auto swap = [](const char *to) {
    return [to](const Match &mt, Rewriter &rw) {
      return rw.replaceAllUsesWith(mt.rootExpr()->output(0), rw.callFunction(to, {mt.node("x")}));
    };
  };
  PatternSet set;
  set.add("relu-to-sigmoid", Pattern(fn("relu")(var("x"))), swap("sigmoid"));
  set.add("sigmoid-to-relu", Pattern(fn("sigmoid")(var("x"))), swap("relu"));
  FrozenPatternSet frozen(std::move(set));
  GreedyConfig cfg;
  cfg.maxIterations = std::numeric_limits<int64_t>::max();
  cfg.timeLimit = std::chrono::milliseconds(30);
  auto t0 = std::chrono::steady_clock::now();
  GreedyResult r = applyPatternsGreedily(m->graph(), frozen, cfg);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.str());
  CHECK(r.timedOut);
  CHECK_FALSE(r.converged);
  CHECK(secs >= 0.03);
  CHECK(secs < 5);
  CHECK(r.rewrites > 10);
  // One rewrite per round; the last round may have stopped before its.
  CHECK(r.rewrites >= r.iterations - 1);
  CHECK(r.rewrites <= r.iterations);
  CHECK(r.str().find("stopped by the time limit of 30 ms in round ") == 0);
  CHECK(r.str().find("patterns that fired in the last two rounds: relu-to-sigmoid (1), "
                     "sigmoid-to-relu (1)") != std::string::npos);
  // Every committed rewrite is complete: one activation of x remains.
  requireVerified(*m);
  CHECK(m->graph().size() == 1);
  // Without a limit reached, nothing changes in the result.
  auto m2 = reluChain(5);
  FrozenPatternSet dr(doubleRelu());
  GreedyConfig generous;
  generous.timeLimit = std::chrono::seconds(60);
  GreedyResult r2 = applyPatternsGreedily(m2->graph(), dr, generous);
  CHECK(r2.converged);
  CHECK_FALSE(r2.timedOut);
  CHECK(r2.rewrites == 4);
}
