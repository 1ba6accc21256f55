//===- test_transactional.cpp - A failing pass leaves the module intact ---===//
//
// Each structural pass is made to fail after it has changed the module
// (after the whole pass, and part-way: after its first graph, after some
// erases, after a flatten); the pass manager must restore the module: same
// printed text, verifying, computing the same outputs, usable by the next
// pipeline.
//
//===----------------------------------------------------------------------===//
#include "../TestPasses.h"
#include "../ir/Fixtures.h"
#include "tm/io/Tmir.h"
#include "tm/ir/Verifier.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
using namespace fixtures;

namespace {

/// Runs the registered pass `inner`, then throws: the module has changed.
class FailAfter : public Pass {
public:
  explicit FailAfter(std::string inner) : inner_(std::move(inner)), name_("fail-after-" + inner_) {}
  llvm::StringRef name() const override { return name_; }
  llvm::StringRef description() const override { return "test: fails after a pass"; }
  std::unique_ptr<Pass> clone() const override { return std::make_unique<FailAfter>(inner_); }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override {
    auto p = test::testPasses().create(inner_);
    REQUIRE(p);
    auto r = p->run(m, ctx);
    REQUIRE(r.succeeded());
    raise("injected failure after '{}'", inner_);
  }

private:
  std::string inner_, name_;
};

/// Part-way failures: compile the first graph, then fail on the second; or
/// erase dead exprs one by one and throw a non-tmg exception half-way; or
/// rewire uses with replaceNode and fail.
class FailPartWay : public Pass {
public:
  enum class How { SecondGraph, HalfErased, AfterReplace, AfterFlatten };
  FailPartWay(How h, std::string n) : how_(h), name_(std::move(n)) {}
  llvm::StringRef name() const override { return name_; }
  llvm::StringRef description() const override { return "test: fails part-way"; }
  std::unique_ptr<Pass> clone() const override { return std::make_unique<FailPartWay>(how_, name_); }
  FailureOr<bool> run(TracedModule &m, PassContext &ctx) override {
    switch (how_) {
    case How::SecondGraph: {
      int seen = 0;
      return runOnEachGraph(m, ctx, [&](InternalGraph &g, PassContext &) -> FailureOr<bool> {
        if (++seen == 2)
          raise("injected failure in the second graph");
        g.compile();
        g.exprs(); // keep walking
        return true;
      });
    }
    case How::HalfErased: {
      InternalGraph &g = m.graph();
      std::vector<Expr *> body;
      for (Expr *e : g.exprs())
        body.push_back(e);
      // Erase from the end (users before producers) until half are gone.
      size_t erased = 0;
      for (auto it = body.rbegin(); it != body.rend() && erased < body.size() / 2; ++it, ++erased) {
        for (Node *o : (*it)->outputs())
          if (!o->users().empty())
            throw std::runtime_error("cannot erase an expr with users");
        g.eraseExpr(*it);
      }
      throw std::runtime_error("injected std::runtime_error after erasing half the body");
    }
    case How::AfterReplace: {
      InternalGraph &g = m.graph();
      std::vector<Node *> outs = g.outputs();
      Node *x = g.inputs()[1];
      g.replaceNode({{outs[0], x}});
      raise("injected failure after replaceNode");
    }
    case How::AfterFlatten:
      m.flattenInPlace();
      raise("injected failure after flatten");
    }
    return false;
  }

private:
  How how_;
  std::string name_;
};

void registerTestPasses() {
  static bool done = [] {
    auto &r = test::testPasses();
    for (std::string p : {"flatten", "merge-getattr", "compile", "verify"})
      r.add("fail-after-" + p, [p] { return std::make_unique<FailAfter>(p); });
    using H = FailPartWay::How;
    for (auto [h, n] : {std::pair{H::SecondGraph, "fail-second-graph"},
                        std::pair{H::HalfErased, "fail-half-erased"},
                        std::pair{H::AfterReplace, "fail-after-replace"},
                        std::pair{H::AfterFlatten, "fail-after-flatten-in-place"}})
      r.add(n, [h = h, n = std::string(n)] { return std::make_unique<FailPartWay>(h, n); });
    return true;
  }();
  (void)done;
}

Tensor input() {
  Tensor t = Tensor::empty({1, 3, 3, 3});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float((i * 37) % 19) / 9.0f - 1.0f;
  return t;
}

} // namespace

TEST_CASE("a pass that fails after changing the module is rolled back",
          "[robustness][transactional]") {
  registerTestPasses();
  const char *pipelines[] = {
      "fail-after-flatten",       "flatten,fail-after-merge-getattr",
      "fail-after-compile",       "flatten,fail-second-graph",
      "fail-second-graph",        "flatten,compile,fail-half-erased",
      "flatten,fail-after-replace", "fail-after-flatten-in-place",
      "fail-after-merge-getattr",
  };
  for (const char *text : pipelines) {
    INFO(text);
    auto tm = tracedMyModule();
    // The state before the failing (last) pass: run the prefix alone.
    std::string t(text);
    std::string prefix = t.rfind(',') == std::string::npos ? "" : t.substr(0, t.rfind(','));
    if (!prefix.empty()) {
      PassManager pre(*Pipeline::parse(prefix, test::testPasses()), {});
      REQUIRE(succeeded(pre.run(*tm)));
    }
    std::string before = printTmir(*tm);
    Tensor want = rt::Interpreter(*tm).run({input()}).outputs.at(0);
    // Fresh copy through the full pipeline: fails in its last pass.
    auto run = tracedMyModule();
    PassManager pm(*Pipeline::parse(text, test::testPasses()), {});
    auto r = pm.run(*run);
    REQUIRE(r.failed());
    CHECK_THAT(r.diagnostic().str(), Catch::Contains("restored to its state before pass"));
    CHECK(verify(*run).empty());
    CHECK(printTmir(*run) == before);
    CHECK(rt::Interpreter(*run).run({input()}).outputs.at(0).bitwiseEqual(want));
    // The restored module is fully usable: the normal pipeline runs on it.
    PassManager again(*Pipeline::parse("flatten,merge-getattr,compile,verify",
                                       test::testPasses()),
                      {});
    CHECK(succeeded(again.run(*run)));
    CHECK(rt::Interpreter(*run).run({input()}).outputs.at(0).bitwiseEqual(want));
  }
}

TEST_CASE("without transactional the failing pass's edits stay", "[robustness][transactional]") {
  registerTestPasses();
  auto tm = tracedMyModule();
  std::string before = printTmir(*tm);
  PipelineOptions o;
  o.transactional = false;
  PassManager pm(*Pipeline::parse("fail-after-flatten", test::testPasses()), o);
  REQUIRE(failed(pm.run(*tm)));
  CHECK(printTmir(*tm) != before); // the flatten happened and was kept
}

TEST_CASE("atomic passes fail without changing the module, snapshot or not",
          "[robustness][transactional]") {
  // Top graph: a getattr chain merge-getattr rewrites, and a call of a traced
  // block whose graph (visited after the top graph) holds a GetAttr with a
  // qualname outside its graph's: merge-getattr and compile fail on it.
  auto makeNet = [] {
    auto inner = std::make_unique<Module>("Inner");
    inner->registerParameter("w", Tensor::zeros({1}));
    auto m = std::make_unique<Module>("Net");
    m->registerModule("a", std::move(inner));
    m->registerModule("blk", makeMyBlockModule());
    auto tm = TracedModule::fromModule(std::move(m));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 3, 3}}});
    Node *w = b.getAttr(b.getAttr(b.self(), "a"), "w");
    Node *x = b.callModule(b.getAttr(b.self(), "blk"), {b.arg(0)}, {}, myBlockBody, {"x"});
    b.setOutputs(b.callMethod(x, "__add__", {w}));
    return tm;
  };
  auto subGetAttr = [](TracedModule &m) -> GetAttr * {
    for (Expr *e : m.graph())
      if (auto *cm = llvm::dyn_cast<CallMethod>(e))
        if (InternalGraph *sub = cm->calleeGraph())
          for (Expr *s : *sub)
            if (auto *ga = llvm::dyn_cast<GetAttr>(s))
              return ga;
    return nullptr;
  };
  for (const char *pass : {"merge-getattr", "compile"}) {
    for (bool transactional : {false, true}) {
      INFO(pass << (transactional ? " transactional" : " not transactional"));
      auto tm = makeNet();
      GetAttr *bad = subGetAttr(*tm);
      REQUIRE(bad);
      std::string good = bad->output(0)->qualname().str();
      bad->output(0)->setQualname("Other.conv1");
      std::string before = tm->str();
      PipelineOptions o;
      o.transactional = transactional;
      PassManager pm(*Pipeline::parse(pass, test::testPasses()), o);
      auto r = pm.run(*tm);
      REQUIRE(r.failed());
      CHECK_THAT(r.diagnostic().str(), Catch::Contains("is not a prefix") &&
                                Catch::Contains("is atomic: it left the module unchanged"));
      CHECK(tm->str() == before);
      // With the qualname repaired the same pass changes the top graph.
      bad->output(0)->setQualname(good);
      PassManager ok(*Pipeline::parse(pass, test::testPasses()), o);
      REQUIRE(succeeded(ok.run(*tm)));
      CHECK(tm->str() != before);
      CHECK(verify(*tm).empty());
    }
  }
}
