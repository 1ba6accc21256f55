//===- test_passes.cpp - Pipelines, config files, the pass manager -------===//
#include <cstdio>
#include <fstream>

#include "../TestPasses.h"
#include "../ir/Fixtures.h"
#include "tm/io/Tmir.h"
#include "tm/passes/PassManager.h"

using namespace tmg;
using namespace fixtures;

namespace {
PassRegistry &reg() { return test::testPasses(); }

std::string pipelineError(llvm::StringRef text) {
  auto p = Pipeline::parse(text, reg());
  REQUIRE(p.failed());
  return p.diagnostic().str();
}

std::string tomlError(llvm::StringRef text) {
  auto p = parsePipelineToml(text, "deploy.toml", reg());
  REQUIRE(p.failed());
  return p.diagnostic().str();
}

/// Runs `text` on `m`; returns what the pass manager printed.
std::string runPipeline(TracedModule &m, llvm::StringRef text, PipelineOptions o = {}) {
  std::string log;
  o.output = [&](const std::string &s) { log += s; };
  auto p = Pipeline::parse(text, reg());
  REQUIRE(p.succeeded());
  PassManager pm(std::move(*p), o);
  if (auto r = pm.run(m); r.failed())
    FAIL(r.diagnostic().str());
  return log;
}
} // namespace

TEST_CASE("pipeline text parses and prints canonically", "[passes][pipeline]") {
  auto p = Pipeline::parse(" flatten , compile,fixpoint( merge-getattr ,compile ){ max-iterations = 3 },"
                           "replace-node{pairs=\"Net_a:Net_b\"}",
                           reg());
  REQUIRE(p.succeeded());
  CHECK(p->str() == "flatten,compile,fixpoint(merge-getattr,compile){max-iterations=3},"
                    "replace-node{pairs=Net_a:Net_b}");
  auto again = Pipeline::parse(p->str(), reg());
  REQUIRE(again.succeeded());
  CHECK(again->str() == p->str());
  CHECK(Pipeline::parse("replace-node{pairs=\"a b\"}", reg())->str() ==
        "replace-node{pairs=\"a b\"}");
}

TEST_CASE("pipeline errors name the column and the closest name", "[passes][pipeline]") {
  CHECK(pipelineError("flatten,complie") ==
        "<pipeline>:1:9: error: unknown pass 'complie'; did you mean 'compile'?");
  CHECK(pipelineError("replace-node{pair=x}") ==
        "<pipeline>:1:14: error: pass 'replace-node' has no option 'pair'; did you mean "
        "'pairs'?");
  CHECK(pipelineError("replace-node{pairs=3}") ==
        "<pipeline>:1:14: error: option 'pairs' of pass 'replace-node' expects a string, got "
        "int '3'");
  CHECK(pipelineError("fixpoint(compile){max-iterations=0}").find("positive int") !=
        std::string::npos);
  CHECK(pipelineError("fixpoint(compile") ==
        "<pipeline>:1:17: error: expected ')' to close fixpoint(");
  CHECK(pipelineError("compile,") ==
        "<pipeline>:1:9: error: expected a pass name at the end of the pipeline");
  CHECK(pipelineError("") == "<pipeline>:1:1: error: the pipeline is empty");
}

TEST_CASE("config files: passes, options, switches and their errors", "[passes][config]") {
  auto f = parsePipelineToml(R"(# deploy pipeline
[pipeline]
passes = ["flatten", "fixpoint(merge-getattr, compile){max-iterations=4}"]
disabled = ["flatten"]
verify-each = true
print-after = ["compile"]
threads = 2

[passes.replace-node]
pairs = "x:y"
)",
                             "deploy.toml", reg());
  REQUIRE(f.succeeded());
  CHECK(f->pipeline.str() == "flatten,fixpoint(merge-getattr,compile){max-iterations=4}");
  CHECK(f->options.verifyEach);
  CHECK(f->options.disabled.count("flatten"));
  CHECK(f->options.printAfter.count("compile"));
  CHECK(f->options.threads == 2);
  CHECK(tomlError("[pipeline]\npasses = [\"flaten\"]\n") ==
        "deploy.toml:2:12: error: unknown pass 'flaten'; did you mean 'flatten'?");
  CHECK(tomlError("[pipeline]\npasses = [\"compile\"]\nverify-eech = true\n") ==
        "deploy.toml:3:15: error: unknown key 'verify-eech' in [pipeline]; did you mean "
        "'verify-each'?");
  CHECK(tomlError("[pipeline]\npasses = [\"compile\"]\nverify-each = 3\n") ==
        "deploy.toml:3:15: error: 'verify-each' expects true or false");
  CHECK(tomlError("[pipeline]\npasses = [\"compile\"]\n[passes.replace-node]\npairz = \"a\"\n") ==
        "deploy.toml:4:9: error: pass 'replace-node' has no option 'pairz'; did you mean "
        "'pairs'?");
  CHECK(tomlError("[pipeline]\npasses = [\"compile\"]\n[passes.replace-node]\npairs = 1\n") ==
        "deploy.toml:4:9: error: option 'pairs' of pass 'replace-node' expects a string, got "
        "int '1'");
  CHECK(tomlError("[pipeline\n").find("deploy.toml:1:") == 0);
  CHECK(tomlError("[pipeline\n").find("malformed TOML") != std::string::npos);
  CHECK(tomlError("[pipelin]\n") ==
        "deploy.toml:1:1: error: unknown section 'pipelin'; did you mean 'pipeline'?");
  CHECK(tomlError("[pipeline]\n").find("needs 'passes") != std::string::npos);
}

TEST_CASE("structural passes through the pass manager", "[passes]") {
  auto tm = tracedMyModule();
  auto direct = tm->flatten();
  std::string log = runPipeline(*tm, "flatten,compile,verify", [] {
    PipelineOptions o;
    o.verifyEach = true;
    o.stats = true;
    o.timePasses = true;
    return o;
  }());
  CHECK(compareModules(*tm, *direct).value_or("") == "");
  CHECK(log.find("pass execution timing report") != std::string::npos);
  CHECK(log.find("flatten - exprs-inlined") != std::string::npos);
  checkVerified(*tm);
  // A second flatten changes nothing; print-changed then prints nothing.
  PipelineOptions o;
  o.printChanged = true;
  CHECK(runPipeline(*tm, "flatten,compile", o).empty());
  o.printAfter = {"compile"};
  CHECK(runPipeline(*tm, "compile", o).find("// ----- IR after compile ----- //") == 0);
}

TEST_CASE("replace-node reports every skipped use", "[passes]") {
  auto tm = tracedMyBlock();
  InternalGraph &g = tm->graph();
  Expr *relu = g.getFunctionByType(&op(OpKind::Relu)).asUnique();
  GraphBuilder b = GraphBuilder::into(g);
  b.setInsertionPointAfter(relu);
  Node *neg = b.callFunction("neg", {relu->output(0)});
  std::string log = runPipeline(*tm, "replace-node{pairs=\"MyBlock_relu_out:MyBlock_" +
                                         neg->name().str() + "\"},compile");
  CHECK(log.find("warning: replace-node: expr keeps using 'relu_out': rewiring it to "
                 "'neg_out' would create a cycle") != std::string::npos);
  CHECK(g.getMethodByType("__add__").asUnique()->input(0) == neg);
  auto p = Pipeline::parse("replace-node{pairs=\"MyBlock_nope:MyBlock_x\"}", reg());
  PassManager pm(std::move(*p), {});
  auto r = pm.run(*tm);
  REQUIRE(r.failed());
  CHECK(r.diagnostic().str().find("pass 'replace-node': error: replace-node: 'MyBlock_nope:MyBlock_x' is "
                     "not a pair of full node names") != std::string::npos);
}

TEST_CASE("fixpoint stops when nothing changes and warns when it cannot", "[passes]") {
  auto tm = tracedMyBlock();
  // compile changes nothing on a compiled graph: one iteration.
  CHECK(runPipeline(*tm, "fixpoint(compile){max-iterations=2}").empty());
}

TEST_CASE("graph-local passes in parallel equal the sequential run", "[passes]") {
  auto a = tracedMyModule(), b = a->cloneTraced();
  // Make dead code in every graph so compile has work everywhere.
  for (TracedModule *m : {a.get(), b.get()})
    m->namedModules([](const std::string &, Module &x) {
      if (auto *t = llvm::dyn_cast<TracedModule>(&x))
        for (const auto &s : t->signatures()) {
          GraphBuilder gb = GraphBuilder::into(*s.graph);
          gb.callFunction("neg", {s.graph->input(1)});
        }
    });
  PipelineOptions par;
  par.threads = 4;
  runPipeline(*a, "merge-getattr,compile", par);
  runPipeline(*b, "merge-getattr,compile");
  CHECK(compareModules(*a, *b).value_or("") == "");
  CHECK(a->graph().getFunctionByType(&op(OpKind::Neg)).asCount() == 0);
}

TEST_CASE("a failing pass writes a reproducer that replays", "[passes]") {
  auto tm = tracedMyBlock();
  // Break the graph so `verify` fails.
  Expr *add = tm->graph().getMethodByType("__add__").asUnique();
  tm->graph().moveBefore(add, tm->graph().front());
  std::string seen;
  PipelineOptions o;
  o.onFailure = [&](const TracedModule &m, const Pipeline &p) {
    REQUIRE(succeeded(writeReproducer("repro.txt", m, p.str())));
    seen = p.str();
  };
  auto p = Pipeline::parse("merge-getattr,verify", reg());
  PassManager pm(std::move(*p), o);
  auto run = pm.run(*tm);
  REQUIRE(run.failed());
  CHECK(run.diagnostic().loc.pass == "verify");
  CHECK(seen == "merge-getattr,verify");
  auto r = readReproducer("repro.txt");
  // The broken module is rejected when read back, at the line of the use.
  REQUIRE(r.failed());
  INFO(r.diagnostic().str());
  CHECK(r.diagnostic().str().find("repro.txt.tmir:") != std::string::npos);
  CHECK(r.diagnostic().str().find("undefined node") != std::string::npos);
  std::remove("repro.txt");
  std::remove("repro.txt.tmir");
  std::remove("repro.txt.safetensors");
}

TEST_CASE("reproducers round-trip module and pipeline", "[passes]") {
  auto tm = tracedMyModule();
  REQUIRE(succeeded(writeReproducer("ok-repro.txt", *tm, "flatten,compile")));
  auto r = readReproducer("ok-repro.txt");
  REQUIRE(r.succeeded());
  CHECK(r->second == "flatten,compile");
  CHECK(compareModules(*tm, *r->first).value_or("") == "");
  std::remove("ok-repro.txt");
  std::remove("ok-repro.txt.tmir");
  std::remove("ok-repro.txt.safetensors");
}

TEST_CASE("a pass plugin built outside the project loads and runs", "[passes][plugin]") {
  PassRegistry r;
  registerBuiltinPasses(r);
  if (auto loaded = loadPassPlugin(TM_PLUGIN_PATH, r); loaded.failed())
    FAIL(loaded.diagnostic().str());
  REQUIRE(r.contains("fold-neg-neg"));
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *n = b.callFunction("neg", {b.callFunction("neg", {b.arg(0)})});
  b.finish(b.callFunction("relu", {n}));
  // The plugin's typed option is parsed, checked and printed as a builtin's.
  auto none = Pipeline::parse("fold-neg-neg{max-folds=0}", r);
  REQUIRE(none.succeeded());
  CHECK(none->str() == "fold-neg-neg{max-folds=0}");
  PassManager pm0(std::move(*none), {});
  REQUIRE(pm0.run(*tm).succeeded());
  CHECK(tm->graph().str().find("neg") != std::string::npos);
  CHECK(Pipeline::parse("fold-neg-neg{max-fold=1}", r).diagnostic().str() ==
        "<pipeline>:1:14: error: pass 'fold-neg-neg' has no option 'max-fold'; did you mean "
        "'max-folds'?");
  auto p = Pipeline::parse("fold-neg-neg,compile", r);
  REQUIRE(p.succeeded());
  PassManager pm(std::move(*p), {});
  REQUIRE(succeeded(pm.run(*tm)));
  CHECK(tm->graph().str() == "Net.Graph (self, x) {\n"
                             "\t%4:\trelu_out = nn.relu(x, )\n"
                             "\treturn relu_out\n"
                             "}");
  auto missing = loadPassPlugin("/nonexistent/plugin.so", r);
  REQUIRE(missing.failed());
  CHECK(missing.diagnostic().str().find("cannot load pass plugin") != std::string::npos);
}

#include "tm/passes/Drivers.h"

namespace {
/// Records the visiting order; rewrites `x + 0` into `x`.
struct FoldAddZero : ForwardPass<FoldAddZero> {
  static constexpr const char *Name = "test-fold-add-zero";
  static constexpr const char *Description = "x + 0 => x";
  std::vector<std::string> *order = nullptr;
  bool once = true;
  bool runOnce() const override { return once; }
  Expr *transform(Expr &e, PassContext &) override {
    if (order)
      order->push_back(e.output(0)->name().str());
    if (!isCallTensorMethod(&e, "__add__"))
      return nullptr;
    ArgRef v = e.arg(1);
    if (!v.isConst() || !(v.scalar() == Scalar(0)))
      return nullptr;
    Node *x = e.input(0);
    e.graph()->replaceNode({{e.output(0), x}});
    return x->expr();
  }
};

struct OrderOnly : BackwardPass<OrderOnly> {
  static constexpr const char *Name = "test-backward-order";
  static constexpr const char *Description = "records the backward order";
  std::vector<std::string> *order = nullptr;
  Expr *transform(Expr &e, PassContext &) override {
    order->push_back(e.output(0)->name().str());
    return nullptr;
  }
};

/// Counts exprs; an analysis for the cache test.
struct ExprCount {
  explicit ExprCount(const InternalGraph &g) : n(g.size()) {}
  size_t n;
};
} // namespace

TEST_CASE("ForwardPass and BackwardPass visit in the reference's orders", "[passes][drivers]") {
  // y = relu(x + 0); z = neg(x); out = y + z
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *a = b.callMethod(b.arg(0), "__add__", {0});
  Node *y = b.callFunction("relu", {a});
  Node *z = b.callFunction("neg", {b.arg(0)});
  b.finish(b.callMethod(y, "__add__", {z}));
  std::vector<std::string> fwd, bwd;
  OrderOnly ob;
  ob.order = &bwd;
  PassContext ctx;
  REQUIRE(ob.run(*tm, ctx).succeeded());
  // Input exprs are not visited (they are not in the body, as the reference).
  CHECK(bwd == std::vector<std::string>{"add_out_1", "relu_out", "add_out", "neg_out"});
  FoldAddZero f;
  f.order = &fwd;
  auto r = f.run(*tm, ctx);
  REQUIRE(r.succeeded());
  CHECK(*r);
  // Producers first.
  CHECK(fwd == std::vector<std::string>{"add_out", "relu_out", "neg_out", "add_out_1"});
  CHECK(y->expr()->input(0) == b.arg(0));
  tm->graph().compile();
  CHECK(tm->graph().getMethodByType("__add__").asCount() == 1);
  // Nothing left to fold: no change.
  fwd.clear();
  CHECK(!*f.run(*tm, ctx));
}

TEST_CASE("analyses are cached until the graph changes", "[passes][drivers]") {
  auto tm = tracedMyBlock();
  InternalGraph &g = tm->graph();
  PassContext ctx;
  CHECK(ctx.analysis<ExprCount>(g).n == 8);
  CHECK(ctx.analysis<ExprCount>(g).n == 8);
  CHECK(ctx.analysisComputations() == 1);
  g.compile(); // no change: the analysis stays valid
  CHECK(ctx.analysis<ExprCount>(g).n == 8);
  CHECK(ctx.analysisComputations() == 1);
  GraphBuilder(GraphBuilder::into(g)).callFunction("neg", {g.input(1)});
  CHECK(ctx.analysis<ExprCount>(g).n == 9);
  CHECK(ctx.analysisComputations() == 2);
}

namespace {
/// A hierarchy of `blocks` traced blocks whose graphs cover every case of
/// the getattr merge: no GetAttr (i % 4 == 0), duplicates (1), a chain
/// through a submodule to re-point (2), one GetAttr and nothing to do (3).
std::unique_ptr<TracedModule> mergeHierarchy(size_t blocks) {
  auto top = std::make_unique<Module>("Net");
  for (size_t i = 0; i < blocks; ++i) {
    auto inner = std::make_unique<Module>("Inner");
    inner->registerParameter("v", Tensor::zeros({2}));
    auto blk = std::make_unique<Module>("Block");
    blk->registerParameter("w", Tensor::zeros({2}));
    blk->registerModule("inner", std::move(inner));
    top->registerModule("b" + std::to_string(i), std::move(blk));
  }
  auto tm = TracedModule::fromModule(std::move(top));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *x = b.arg(0);
  for (size_t i = 0; i < blocks; ++i) {
    auto body = [i](GraphBuilder &g) {
      Node *y = g.arg(0);
      switch (i % 4) {
      case 0:
        y = g.callFunction("relu", {y});
        break;
      case 1:
        for (int k = 0; k < 3; ++k)
          y = g.callMethod(y, "__add__", {g.getAttr(g.self(), "w")});
        break;
      case 2:
        y = g.callMethod(y, "__mul__", {g.getAttr(g.getAttr(g.self(), "inner"), "v")});
        break;
      default:
        y = g.callMethod(y, "__sub__", {g.getAttr(g.self(), "w")});
      }
      g.setOutputs(y);
    };
    x = b.callModule(b.getAttr(b.self(), "b" + std::to_string(i)), {x}, {}, body, {"x"});
  }
  b.setOutputs(x);
  return tm;
}
} // namespace

/// What the getattr merge must leave in block `i` of mergeHierarchy, read
/// off the graph directly (not by comparing with another merge).
void checkMergedBlock(InternalGraph &g, size_t i) {
  std::vector<GetAttr *> gas;
  for (Expr *e : g)
    if (auto *ga = llvm::dyn_cast<GetAttr>(e))
      gas.push_back(ga);
  INFO("block " << i);
  switch (i % 4) {
  case 0:
    CHECK(gas.empty());
    break;
  case 1: // the first read of w has the three adds, the others none
    REQUIRE(gas.size() == 3);
    CHECK(gas[0]->output(0)->numUsers() == 3);
    CHECK(!gas[1]->output(0)->hasUsers());
    CHECK(!gas[2]->output(0)->hasUsers());
    break;
  case 2: // the chain's second GetAttr reads "inner.v" from self
    REQUIRE(gas.size() == 2);
    CHECK(gas[1]->attrName() == "inner.v");
    CHECK(gas[1]->input(0) == g.self());
    CHECK(gas[1]->output(0)->numUsers() == 1);
    break;
  default:
    REQUIRE(gas.size() == 1);
    CHECK(gas[0]->attrName() == "w");
  }
}

/// Gives the GetAttrs of `g` a qualname outside the graph's; returns how
/// many.
size_t breakQualnames(InternalGraph &g) {
  size_t broken = 0;
  for (Expr *e : g)
    if (auto *ga = llvm::dyn_cast<GetAttr>(e)) {
      ga->output(0)->setQualname("Other.w");
      ++broken;
    }
  return broken;
}

TEST_CASE("merge-getattr over many graphs: one stream, same result, atomic",
          "[passes][merge-getattr]") {
  // 40 blocks: more graphs than the walks' look-ahead, with every kind of
  // graph next to every other.
  constexpr size_t Blocks = 40;
  auto batch = mergeHierarchy(Blocks);
  auto single = batch->cloneTraced();
  std::vector<InternalGraph *> graphs = graphsOf(*batch);
  REQUIRE(graphs.size() == Blocks + 1);
  // Every other graph checked (planned) beforehand: kept plans and fresh
  // ones alternate in the stream.
  std::vector<InternalGraph *> odd;
  for (size_t k = 1; k < graphs.size(); k += 2)
    odd.push_back(graphs[k]);
  InternalGraph::checkGetAttrs(odd);
  size_t expected = 0;
  for (InternalGraph *g : graphsOf(*single))
    expected += g->mergeGetAttrs();
  // The top graph reads each block once by its own name (nothing to do);
  // the blocks i % 4 == 1 merge, i % 4 == 2 re-point: 10 + 10.
  CHECK(expected == 20);
  CHECK(InternalGraph::mergeGetAttrs(graphs) == expected);
  for (size_t i = 0; i < Blocks; ++i)
    checkMergedBlock(*graphs[1 + i], i);
  CHECK(batch->str() == single->str());
  CHECK(verify(*batch).empty());
  // Merged: nothing more to do.
  CHECK(InternalGraph::mergeGetAttrs(graphs) == 0);
}

TEST_CASE("merge-getattr over many graphs: a bad GetAttr anywhere changes none",
          "[passes][merge-getattr]") {
  for (size_t badBlock : {1, 17, 39}) {
    for (bool checkedBefore : {false, true}) {
      INFO("bad block " << badBlock << (checkedBefore ? ", all checked before" : ""));
      auto m = mergeHierarchy(40);
      std::vector<InternalGraph *> gs = graphsOf(*m);
      InternalGraph *bad = gs[1 + badBlock];
      // Checked while still good: the kept plan of the graph broken next is
      // stale and must not be used.
      if (checkedBefore)
        InternalGraph::checkGetAttrs(gs);
      REQUIRE(breakQualnames(*bad) > 0);
      std::string before = m->str();
      CHECK_THROWS_WITH(InternalGraph::checkGetAttrs(gs), Catch::Contains("is not a prefix"));
      CHECK(m->str() == before);
      CHECK_THROWS_WITH(InternalGraph::mergeGetAttrs(gs), Catch::Contains("is not a prefix"));
      CHECK(m->str() == before);
      // Repaired, the same call merges everything.
      for (Expr *e : *bad)
        if (auto *ga = llvm::dyn_cast<GetAttr>(e))
          ga->output(0)->setQualname(bad->qualname() + "." +
                                     (ga->attrName() == "v" ? "inner.v" : ga->attrName()));
      CHECK(InternalGraph::mergeGetAttrs(gs) == 20);
      for (size_t i = 0; i < 40; ++i)
        checkMergedBlock(*gs[1 + i], i);
    }
  }
}

TEST_CASE("merge-getattr and compile: the sequential stream and the threads agree",
          "[passes][merge-getattr]") {
  for (const char *pipeline : {"merge-getattr", "compile"}) {
    INFO(pipeline);
    auto seq = mergeHierarchy(40);
    auto par = seq->cloneTraced();
    PipelineOptions one, four;
    one.stats = four.stats = true;
    four.threads = 4;
    std::string seqLog = runPipeline(*seq, pipeline, one);
    std::string parLog = runPipeline(*par, pipeline, four);
    CHECK(seqLog == parLog); // the statistics
    // merge-getattr: the 10 + 10 blocks; compile also deletes the two
    // merged duplicates of each i % 4 == 1 block and the getattr of
    // `inner` each re-pointed chain leaves unused: 20 + 10.
    CHECK_THAT(seqLog, Catch::Contains(std::string(pipeline) == "compile"
                                           ? "30  compile - exprs-removed"
                                           : "20  merge-getattr - graphs-changed"));
    CHECK(compareModules(*seq, *par).value_or("") == "");
    CHECK(seq->str() == par->str());
  }
}
