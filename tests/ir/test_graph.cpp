//===- test_graph.cpp - Queries, filters and graph edits -----------------===//
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <set>

#include <llvm/ADT/DenseSet.h>

#include "Fixtures.h"

using namespace tmg;
using namespace fixtures;

TEST_CASE("exprs() and nodes() walk sub-graphs; filters chain", "[ir][graph]") {
  auto tm = tracedMyModule();
  InternalGraph &g = tm->graph();
  // Non-recursive: the Input exprs then the body.
  auto flat = g.exprs(false).asList();
  CHECK(flat.size() == 2 + 6);
  CHECK(flat[0]->str() == "%0:\tself = Input()");
  CHECK(flat[1]->str() == "%1:\tx = Input()");
  // Recursive: each sub-graph once (block0, block1, their nothing graphs,
  // the top nothing graph).
  size_t all = g.exprs(true).asCount();
  CHECK(all == 8 + 2 * (2 + 8) + 2 * 2 + 2);
  CHECK(g.getFunctionByType(&op(OpKind::Relu)).asCount() == 2);
  CHECK(g.getFunctionByType(&op(OpKind::Relu), false).asCount() == 0);
  CHECK(g.getMethodByType("__add__").asCount() == 2);
  CHECK(g.getMethodByType("__call__", false).asCount() == 3);
  // Three filters deep.
  auto chained = g.exprs().callMethod().callMethod("__call__").where(
      [](const Expr *e) { return e->graph()->name() == "MyModule_block0"; });
  CHECK(chained.asCount() == 3);
  auto ids = g.exprs().callMethod("__call__").exprId({3, 5, 7, 100}).asList();
  CHECK(ids.size() == 2);
  CHECK(g.getExprById({2}).asUnique()->str() ==
        "%2:\tblock0 = getattr(self, \"block0\") -> (Module)");
  auto dict = g.exprs(false).asDict();
  CHECK(dict.size() == 8);
  CHECK(dict.begin()->first == 0);
  CHECK_THROWS_WITH(g.exprs().asUnique(), Catch::Contains("elements found"));
  CHECK_THROWS_WITH(g.getExprById({999}).asUnique(), "error: 0 elements found");
  // Nodes: sorted by id, modules by type (subclass-inclusive), by name.
  auto nodes = g.nodes().asList();
  CHECK(std::is_sorted(nodes.begin(), nodes.end(),
                       [](Node *a, Node *b) { return a->id() < b->id(); }));
  CHECK(g.getModuleByType(Conv2d::staticType()).asCount() == 2);
  CHECK(g.nodes().type<BatchNorm2d>().asCount() == 2);
  CHECK(g.getNodeByName("MyModule_block0_conv1").asCount() == 1);
  // Full names are "<graph name>_<node name>": graph MyModule_block0 has 9
  // nodes, MyModule_block0_nothing 3, and the top graph's block0_out
  // matches too.
  CHECK(g.getNodeByName("MyModule_block0_*").asCount() == 13);
  CHECK(g.getNodeByName("mymodule_BLOCK0_*").asCount() == 13);
  CHECK(g.getNodeByName("mymodule_BLOCK0_*", false).asCount() == 0);
  CHECK(g.getNodeByName("MyModule_block0_*_out").asCount() == 5);
  CHECK(g.getNodeByName("MyModule_block0_*", true, false).asCount() == 1);
  CHECK(g.getNodeByName("MyModule_block0_out", true, false).asCount() == 1);
  CHECK(g.getNodeByName("mymodule_block0_conv?", true).asCount() == 1);
  CHECK(g.getNodeByName("mymodule_block0_conv?", false).asCount() == 0);
  CHECK(g.getNodeByName("*_[cb][on]*1").asCount() == 4);
  CHECK(g.getNodeById({0, 1}).asCount() == 2);
  checkExprUsers(*tm);
  checkIds(*tm);
  checkVerified(*tm);
}

TEST_CASE("glob matching follows fnmatch", "[ir][graph]") {
  CHECK(globMatch("a*b", "axxb", false));
  CHECK(globMatch("a*b", "ab", false));
  CHECK(!globMatch("a*b", "abc", false));
  CHECK(globMatch("a?c", "abc", false));
  CHECK(globMatch("[!x]bc", "abc", false));
  CHECK(!globMatch("[!a]bc", "abc", false));
  CHECK(globMatch("[a-c]*", "beta", false));
  CHECK(globMatch("*", "", false));
  CHECK(globMatch("A*", "abc", true));
  CHECK(globMatch("[", "[", false));
  CHECK(globMatch("*a*a*a*", "banananana", false));
}

namespace {
/// The reference's get_dep_exprs with lists, as the oracle.
std::vector<Expr *> naiveDepExprs(std::vector<Node *> queue) {
  std::vector<Expr *> ret;
  std::vector<Node *> visited;
  auto in = [](auto &v, auto x) { return std::find(v.begin(), v.end(), x) != v.end(); };
  while (!queue.empty()) {
    Node *n = queue.back();
    queue.pop_back();
    visited.push_back(n);
    Expr *e = n->expr();
    if (!in(ret, e))
      ret.push_back(e);
    for (size_t i = 0; i < e->numInputs(); ++i)
      if (!in(queue, e->input(i)) && !in(visited, e->input(i)))
        queue.push_back(e->input(i));
  }
  return ret;
}
} // namespace

TEST_CASE("get_dep_exprs matches the reference's order on random DAGs", "[ir][graph]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 30; ++round) {
    auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x"}, {"y"}});
    std::vector<Node *> vals = {b.arg(0), b.arg(1)};
    for (int i = 0; i < 40; ++i) {
      Node *a = vals[rng() % vals.size()];
      Node *c = vals[rng() % vals.size()];
      vals.push_back(rng() % 3 ? b.callMethod(a, "__add__", {c})
                               : b.callFunction("relu", {a}));
    }
    std::vector<Node *> roots = {vals.back(), vals[vals.size() / 2], vals[5]};
    b.setOutputs(vals.back());
    CHECK(b.graph().getDepExprs(roots) == naiveDepExprs(roots));
  }
}

TEST_CASE("scratch flags start clear, are independent and leave the rest alone",
          "[ir][graph]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
  Node *y = b.callFunction("neg", {b.arg(0)});
  b.setOutputs(y);
  Expr *e = y->expr();
  CHECK(!e->scratchFlag(0));
  CHECK(!e->scratchFlag(1));
  e->setScratchFlag(1, true);
  CHECK(!e->scratchFlag(0));
  CHECK(e->scratchFlag(1));
  e->setScratchFlag(0, true);
  e->disableRemove();
  e->setScratchFlag(1, false);
  CHECK(e->scratchFlag(0));
  CHECK(!e->scratchFlag(1));
  // The flags share a byte with the removal and body bits.
  CHECK(e->removeDisabled());
  CHECK(e->inBody());
  e->setScratchFlag(0, false);
  CHECK(e->removeDisabled());
  CHECK(e->inBody());
  checkVerified(*tm);
}

TEST_CASE("compile removes dead exprs but keeps disable_remove and its inputs", "[ir][graph]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
  Node *x = b.arg(0);
  Node *dead = b.callFunction("neg", {x});
  b.callFunction("exp", {dead});
  Node *kept1 = b.callFunction("abs", {x});
  Node *kept = b.callFunction("log", {kept1});
  kept->expr()->disableRemove();
  Node *out = b.callFunction("relu", {x});
  b.setOutputs(out);
  InternalGraph &g = b.graph();
  CHECK(g.size() == 5);
  CHECK(g.compile() == 2);
  CHECK(g.size() == 3);
  CHECK(g.getFunctionByType(&op(OpKind::Log)).asCount() == 1);
  CHECK(g.getFunctionByType(&op(OpKind::Abs)).asCount() == 1);
  CHECK(g.getFunctionByType(&op(OpKind::Neg)).asCount() == 0);
  CHECK(x->numUsers() == 2);
  kept->expr()->enableRemove();
  CHECK(g.compile() == 2);
  CHECK(x->numUsers() == 1);
  checkVerified(*tm);
}

TEST_CASE("the unused list follows every edit, and compile agrees with a naive liveness",
          "[ir][graph]") {
  // The verifier compares the graph's list of unused exprs (compile's work
  // list) with the use counts.
  std::mt19937 rng(11);
  for (int round = 0; round < 40; ++round) {
    auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x"}});
    InternalGraph &g = b.graph();
    std::vector<Node *> vals = {b.arg(0)};
    auto addOne = [&] {
      Node *a = vals[rng() % vals.size()];
      vals.push_back(rng() % 2 ? b.callFunction("relu", {a})
                               : b.callMethod(a, "__add__", {vals[rng() % vals.size()]}));
    };
    for (int i = 0; i < 30; ++i)
      addOne();
    for (int step = 0; step < 25; ++step) {
      switch (rng() % 7) {
      case 0: { // insert in the middle (inputs defined before the point)
        std::vector<Expr *> body(g.begin(), g.end());
        Expr *at = body[rng() % body.size()];
        g.setInsertionPoint(at);
        Node *a = g.inputs()[1];
        vals.push_back(b.callFunction("neg", {a}));
        g.setInsertionPoint(nullptr);
        break;
      }
      case 1: { // erase an expr nobody uses
        std::vector<Expr *> unused;
        for (Expr *e : g)
          if (!e->output(0)->hasUsers() && e->output(0) != vals.back() &&
              !llvm::is_contained(g.outputs(), e->output(0)))
            unused.push_back(e);
        if (!unused.empty()) {
          Expr *e = unused[rng() % unused.size()];
          vals.erase(std::find(vals.begin(), vals.end(), e->output(0)));
          g.eraseExpr(e);
        }
        break;
      }
      case 2: // append
        addOne();
        break;
      case 3: { // move an expr that reads only graph inputs to the front
        for (Expr *e : g) {
          bool onInputs = true;
          for (size_t i = 0; i < e->numInputs(); ++i)
            onInputs &= llvm::isa<Input>(e->input(i)->expr());
          if (onInputs && e != g.front()) {
            g.moveBefore(e, g.front());
            break;
          }
        }
        break;
      }
      case 4: { // compile against a naive liveness (everything the output needs)
        b.setOutputs(vals.back());
        std::set<const Expr *> live;
        std::vector<const Node *> work = {vals.back()};
        for (const Expr *e : g)
          if (e->removeDisabled()) // kept, with what it uses
            work.push_back(e->output(0));
        while (!work.empty()) {
          const Node *n = work.back();
          work.pop_back();
          const Expr *e = n->expr();
          if (!e || !e->inBody() || !live.insert(e).second)
            continue;
          for (size_t i = 0; i < e->numInputs(); ++i)
            work.push_back(e->input(i));
        }
        std::set<const Node *> liveNodes = {vals.front()}; // the input stays
        for (const Expr *e : live)
          liveNodes.insert(e->outputs().begin(), e->outputs().end());
        size_t before = g.size();
        CHECK(g.compile() == before - live.size());
        // compile deletes what was unused and what became so: only
        // disable_remove exprs stay on the list (outputs count as uses).
        for (const Expr *e : g.unusedExprs())
          CHECK(e->removeDisabled());
        // Dead nodes are freed now: compare pointers only.
        vals.erase(std::remove_if(vals.begin(), vals.end(),
                                  [&](Node *n) { return !liveNodes.count(n); }),
                   vals.end());
        break;
      }
      case 5: { // rewire one input to an earlier value (uses come and go)
        std::vector<Expr *> body(g.begin(), g.end());
        Expr *e = body[rng() % body.size()];
        std::vector<Node *> before = {g.inputs()[1]};
        for (Expr *x : body) {
          if (x == e)
            break;
          before.push_back(x->output(0));
        }
        e->setInput(e->numInputs() - 1, before[rng() % before.size()]);
        break;
      }
      case 6: { // toggle disable_remove
        std::vector<Expr *> body(g.begin(), g.end());
        Expr *e = body[rng() % body.size()];
        if (e->removeDisabled())
          e->enableRemove();
        else
          e->disableRemove();
        break;
      }
      }
      checkVerified(*tm);
    }
  }
}

TEST_CASE("merge getattr: chains become dotted paths, duplicates merge", "[ir][graph]") {
  auto inner = std::make_unique<Module>("Inner");
  inner->registerParameter("w", Tensor::zeros({2}));
  auto m = std::make_unique<Module>("Net");
  m->registerModule("a", std::move(inner));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *a1 = b.getAttr(b.self(), "a");
  Node *w1 = b.getAttr(a1, "w");
  Node *w2 = b.getAttr(b.self(), "a.w");
  Node *s = b.callMethod(b.arg(0), "__add__", {w1});
  Node *t = b.callMethod(s, "__mul__", {w2});
  b.setOutputs(t);
  InternalGraph &g = b.graph();
  CHECK(g.mergeGetAttrs());
  CHECK(w1->expr()->input(0) == g.self());
  CHECK(llvm::cast<GetAttr>(w1->expr())->attrName() == "a.w");
  CHECK(!w2->hasUsers());
  CHECK(t->expr()->input(1) == w1);
  CHECK(!g.mergeGetAttrs());
  g.compile();
  CHECK(g.str() == "Net.Graph (self, x) {\n"
                   "\t%3:\ta_w = getattr(self, \"a.w\") -> (Tensor)\n"
                   "\t%5:\tadd_out = x.__add__(a_w, )\n"
                   "\t%6:\tmul_out = add_out.__mul__(a_w, )\n"
                   "\treturn mul_out\n"
                   "}");
  // A GetAttr whose qualname is not under the graph's is reported by id.
  w1->setQualname("Other.a.w");
  CHECK_THROWS_WITH(g.mergeGetAttrs(), Catch::Contains("expr %3") &&
                                           Catch::Contains("is not a prefix"));
}

TEST_CASE("merge getattr: the first GetAttr in body order wins, a failure changes nothing",
          "[ir][graph]") {
  auto m = std::make_unique<Module>("Net");
  m->registerParameter("w", Tensor::zeros({2}));
  m->registerParameter("v", Tensor::zeros({2}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  InternalGraph &g = b.graph();

  SECTION("duplicates inserted before the originals") {
    Node *w1 = b.getAttr(b.self(), "w");
    Node *s = b.callMethod(b.arg(0), "__add__", {w1});
    Node *v1 = b.getAttr(b.self(), "v");
    Node *t = b.callMethod(s, "__mul__", {v1});
    b.setOutputs(t);
    // They come first in the body, so the originals' users move to them.
    g.setInsertionPointAfter(nullptr);
    Node *w0 = b.getAttr(b.self(), "w");
    g.setInsertionPointAfter(w1->expr());
    Node *v0 = b.getAttr(b.self(), "v");
    g.setInsertionPoint(nullptr);
    CHECK(g.mergeGetAttrs());
    CHECK(!w1->hasUsers());
    CHECK(!v1->hasUsers());
    CHECK(s->expr()->input(1) == w0);
    CHECK(t->expr()->input(1) == v0);
  }

  SECTION("a GetAttr removed from the middle") {
    // Erasing a GetAttr other than the last one created reorders the
    // graph's list of GetAttrs; the merge must still follow the body.
    Node *wa = b.getAttr(b.self(), "w");
    Node *wb = b.getAttr(b.self(), "w");
    Node *s = b.callMethod(b.arg(0), "__add__", {wb});
    Node *wc = b.getAttr(b.self(), "w");
    Node *t = b.callMethod(s, "__mul__", {wc});
    b.setOutputs(t);
    g.eraseExpr(wa->expr());
    CHECK(g.mergeGetAttrs());
    CHECK(wb->numUsers() == 2);
    CHECK(!wc->hasUsers());
  }

  SECTION("a bad qualname anywhere: the error, and no change at all") {
    Node *w1 = b.getAttr(b.self(), "w");
    Node *w2 = b.getAttr(b.self(), "w");
    Node *r = b.callMethod(w1, "__add__", {w2});
    Node *bad = b.getAttr(b.self(), "v");
    b.setOutputs(b.callMethod(r, "__add__", {bad}));
    bad->setQualname(SharedString("Other.v"));
    std::string before = g.str();
    CHECK_THROWS_WITH(g.mergeGetAttrs(), Catch::Contains("is not a prefix"));
    CHECK(g.str() == before);
    CHECK(w2->numUsers() == 1);
    bad->setQualname(SharedString(g.qualname() + ".v"));
    CHECK(g.mergeGetAttrs());
    CHECK(w2->numUsers() == 0);
    CHECK(w1->numUsers() == 2);
  }
  checkVerified(*tm);
}

TEST_CASE("reset_inputs, add_input_node and the signature maps", "[ir][graph]") {
  auto tm = addOneModule();
  InternalGraph &g = tm->graph();
  TensorNode *data = g.addInputNode(Shape{1, 3, 224, 224}, DType::Float32, "data");
  CHECK(data->name() == "data");
  CHECK(g.inputs().size() == 3);
  CHECK(g.inputs().back() == data);
  CHECK(tm->signatures()[0].argDef.str() == "((Module, Tensor, Tensor), {})");
  CHECK(g.addInputNode(Shape{1})->name() == "args");
  CHECK(g.addInputNode(Shape{1})->name() == "args_1");
  auto fresh = g.resetInputs({{Shape{2}, DType::Float32}});
  CHECK(fresh.size() == 1);
  CHECK(fresh[0]->name() == "args_2");
  CHECK(tm->signatures()[0].argDef.str() == "((Module, Tensor), {})");
  CHECK(tm->graphFor(tm->signatures()[0].argDef) == &g);
  // Only the top graph may change its inputs.
  auto my = tracedMyBlock();
  auto *sub = llvm::cast<CallMethod>(my->graph().getExprById({9}).asUnique())->calleeGraph();
  CHECK_THROWS_WITH(sub->addInputNode(Shape{1}), Catch::Contains("only supports top graph"));
  CHECK_THROWS_WITH(sub->resetOutputs(TreeDef(), {sub->input(1)}),
                    Catch::Contains("only supports top graph"));
}

TEST_CASE("graph and node renaming follow the reference's checks", "[ir][graph]") {
  auto tm = tracedMyModule();
  InternalGraph &g = tm->graph();
  Node *out = g.output(0);
  CHECK_THROWS_WITH(out->setName("block1_out"), Catch::Contains("already in use"));
  out->setName("output");
  CHECK(out->str() == "output");
  g.setName("Top");
  CHECK(g.getNodeByName("Top_output").asUnique() == out);
  auto *sub = llvm::cast<CallMethod>(g.getExprById({3}).asUnique())->calleeGraph();
  REQUIRE(sub);
  CHECK(sub->name() == "MyModule_block0");
  // A sub-graph's name is checked against, and reserved in, its own
  // namespace (TM.py `InternalGraph.name`): the names of its nodes are
  // taken, those of the parent graph are not.
  CHECK_THROWS_WITH(sub->setName("conv1"), Catch::Contains("The name(conv1) is already in use"));
  CHECK_THROWS_WITH(sub->setName("bn1_out"), Catch::Contains("already in use"));
  CHECK(sub->name() == "MyModule_block0");
  sub->setName("block0");
  CHECK(sub->name() == "block0");
  sub->setName("renamed");
  CHECK(sub->name() == "renamed");
  CHECK(sub->ns().isUsed("renamed"));
  CHECK(!g.ns().isUsed("renamed"));
  // The reserved name is no longer free for the graph's nodes.
  CHECK_THROWS_WITH(sub->output(0)->setName("renamed"), Catch::Contains("already in use"));
  CHECK(g.getNodeByName("renamed_conv1").asUnique() ==
        sub->getModuleByType(Conv2d::staticType(), false).asUnique());
}

TEST_CASE("type filters see builtin modules: every module is a Module", "[ir][graph]") {
  auto tm = tracedMyModule();
  InternalGraph &g = tm->graph();
  // Module nodes, recursively: self of each graph, the GetAttrs of blocks,
  // convs, batch norms and identity modules. Every one is a Module,
  // builtin or traced, as isinstance(owner, M.Module) in the reference.
  size_t moduleNodes = g.nodes().where([](const Node *n) {
                                  return llvm::isa<ModuleNode>(n) &&
                                         llvm::cast<ModuleNode>(n)->owner();
                                }).asCount();
  CHECK(g.getModuleByType(moduleBaseType()).asCount() == moduleNodes);
  CHECK(g.getModuleByType(moduleBaseType()).asCount() >
        g.getModuleByType(Conv2d::staticType()).asCount() +
            g.getModuleByType(BatchNorm2d::staticType()).asCount());
  CHECK(g.getModuleByType(Conv2d::staticType()).asCount() == 2);
  // Non-recursive: self, block0, block1, nothing.
  CHECK(g.getModuleByType(moduleBaseType(), false).asCount() == 4);
  CHECK(Conv2d::staticType().isa(moduleBaseType()));
  CHECK(!moduleBaseType().isa(Conv2d::staticType()));
}

TEST_CASE("type filters match builtin subclasses by their base type", "[ir][graph]") {
  // A builtin class registered with a base (a subclass of Conv2d) is found
  // by its own type, by Conv2d's and by Module's, as isinstance would.
  ModuleType sub;
  sub.name = "MyBuiltinConv";
  sub.builtin = true;
  sub.base = &Conv2d::staticType();
  const ModuleType &subType = ModuleTypeRegistry::instance().add(std::move(sub));
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  tm->registerModule("conv", std::make_unique<BuiltinModule>(Conv2d::staticType()));
  tm->registerModule("mine", std::make_unique<BuiltinModule>(subType));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  Node *conv = b.getAttr(b.self(), "conv");
  Node *mine = b.getAttr(b.self(), "mine");
  OutputType t;
  t.shape = Shape{1};
  Node *y = b.callModule(conv, {b.arg(0)}, {}, {}, {}, t);
  b.finish(b.callModule(mine, {y}, {}, {}, {}, t));
  InternalGraph &g = tm->graph();
  CHECK(g.getModuleByType(subType).asList() == std::vector<Node *>{mine});
  CHECK(g.getModuleByType(Conv2d::staticType()).asList() == std::vector<Node *>{conv, mine});
  CHECK(g.getModuleByType(moduleBaseType()).asCount() == 3); // self too
  CHECK(g.getModuleByType(BatchNorm2d::staticType()).asCount() == 0);
}

TEST_CASE("clone is deep and structurally equal", "[ir][graph]") {
  auto tm = tracedMyModule();
  auto c = tm->cloneTraced();
  CHECK(c->graph().str() == tm->graph().str());
  auto a = tm->graph().exprs(true).asList();
  auto b2 = c->graph().exprs(true).asList();
  REQUIRE(a.size() == b2.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i] != b2[i]);
    CHECK(a[i]->str() == b2[i]->str());
    CHECK(a[i]->graph()->qualname() == b2[i]->graph()->qualname());
  }
  // Module nodes point into the clone's own module tree.
  Node *conv = c->graph().getModuleByType(Conv2d::staticType()).asList()[0];
  Module *owner = llvm::cast<ModuleNode>(conv)->owner();
  CHECK(owner == c->resolveModule("block0.conv1"));
  CHECK(owner->tensor("weight")->sharesStorage(*tm->resolveTensor("block0.conv1.weight")));
  checkVerified(*c);
  checkExprUsers(*c);
  // Editing the clone leaves the original intact.
  c->graph().replaceNode({{c->graph().output(0), c->graph().input(1)}});
  c->graph().compile();
  CHECK(c->graph().size() == 0);
  CHECK(tm->graph().size() == 6);
  checkVerified(*tm);
}

/// Every module node of every graph of the traced modules in `root`'s tree
/// names a module of that tree (not of the tree it was cloned from).
static void checkOwnersWithin(Module &root) {
  llvm::DenseSet<const Module *> tree;
  std::vector<TracedModule *> traced;
  root.namedModules([&](const std::string &, Module &m) {
    tree.insert(&m);
    if (auto *t = llvm::dyn_cast<TracedModule>(&m))
      traced.push_back(t);
  });
  REQUIRE(!traced.empty());
  size_t checked = 0;
  for (TracedModule *t : traced)
    for (const auto &sig : t->signatures()) {
      for (Node *in : sig.graph->inputs())
        if (auto *mn = llvm::dyn_cast<ModuleNode>(in)) {
          CHECK(tree.contains(mn->owner()));
          ++checked;
        }
      for (Expr *e : *sig.graph)
        for (Node *o : e->outputs())
          if (auto *mn = llvm::dyn_cast<ModuleNode>(o)) {
            CHECK(tree.contains(mn->owner()));
            ++checked;
          }
    }
  CHECK(checked > 0);
}

TEST_CASE("clone points module nodes into the copy at every depth",
          "[ir][graph]") {
  // Traced below plain below traced: the inner graphs are reached by no
  // call of the top graph.
  auto top = tracedMyModule();
  auto holder = std::make_unique<Module>("Holder");
  holder->registerModule("inner", tracedMyModule());
  top->registerModule("holder", std::move(holder));
  checkOwnersWithin(*top);
  auto c = top->cloneTraced();
  checkOwnersWithin(*c);
  auto *inner = llvm::cast<TracedModule>(c->resolveModule("holder.inner"));
  CHECK(inner->graph().self()->owner() == inner);
  CHECK(inner->graph().str() == llvm::cast<TracedModule>(
                                    top->resolveModule("holder.inner"))
                                    ->graph()
                                    .str());
  checkVerified(*c);
  // A plain module at the top, cloned through Module::clone.
  auto plain = std::make_unique<Module>("Plain");
  plain->registerModule("net", tracedMyModule());
  std::unique_ptr<Module> pc = plain->clone();
  checkOwnersWithin(*pc);
  auto *net = llvm::cast<TracedModule>(pc->resolveModule("net"));
  CHECK(net->graph().self()->owner() == net);
  // flatten() inlines from the original sub-graphs and fixes the refs of
  // its copy once, at the end.
  auto flat = top->flatten();
  checkOwnersWithin(*flat);
  checkVerified(*flat);
}

TEST_CASE("reset_ids renumbers recursively after edits", "[ir][graph]") {
  auto tm = tracedMyModule();
  tm->setTotalIds(159, 1024); // garbage counters, as the reference's test
  // Insert a neg after every relu (recursively), replace, compile.
  for (Expr *relu : tm->graph().getFunctionByType(&op(OpKind::Relu))) {
    InternalGraph &g = *relu->graph();
    GraphBuilder b = GraphBuilder::into(g);
    b.setInsertionPointAfter(relu);
    Node *neg = b.callFunction("neg", {relu->output(0)});
    auto *negExpr = neg->expr();
    g.setInsertionPoint(nullptr);
    auto rep = g.replaceNode({{relu->output(0), neg}});
    CHECK(negExpr->input(0) == relu->output(0));
    CHECK(rep.rewired == 1);
    CHECK(rep.skipped.size() == 1); // the neg's own use
    g.compile();
  }
  CHECK(tm->graph().getFunctionByType(&op(OpKind::Neg)).asCount() == 2);
  // Nodes take the order of their old ids (nodes() sorts by id).
  std::vector<Node *> byOldId = tm->graph().nodes(true).asList();
  tm->graph().resetIds();
  checkIds(*tm);
  for (size_t i = 0; i < byOldId.size(); ++i)
    CHECK(byOldId[i]->id() == int64_t(i));
  checkVerified(*tm);
}

TEST_CASE("reset_ids orders nodes by old id: sparse, large, repeated and negative ids",
          "[ir][graph]") {
  // A chain with side branches; node ids are then scrambled.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x"}, {"y"}});
  Node *v = b.arg(0);
  for (int i = 0; i < 300; ++i)
    v = b.callMethod(i % 3 ? b.callFunction("relu", {v}) : v, "__add__", {b.arg(1)});
  b.finish(v);
  std::vector<Node *> all = tm->graph().nodes(true).asList();
  std::mt19937_64 rng(11);
  auto scramble = [&](int64_t scale) {
    std::vector<int64_t> ids(all.size());
    for (size_t i = 0; i < ids.size(); ++i)
      ids[i] = int64_t(i) * scale + int64_t(rng() % uint64_t(scale));
    std::shuffle(ids.begin(), ids.end(), rng);
    for (size_t i = 0; i < all.size(); ++i)
      all[i]->setIdInternal(ids[i]);
  };
  auto expectOrder = [&] {
    std::vector<Node *> want = tm->graph().nodes(true).asList();
    tm->graph().resetIds();
    for (size_t i = 0; i < want.size(); ++i)
      CHECK(want[i]->id() == int64_t(i));
    checkIds(*tm);
  };
  SECTION("ids below 2^11 (one radix pass)") {
    scramble(1);
    expectOrder();
  }
  SECTION("ids up to ~2^50 (five passes)") {
    scramble(int64_t(1) << 40);
    expectOrder();
  }
  SECTION("two increasing runs interleaved (what an insertion leaves: the merge path)") {
    // In walk order, each node's id continues one of two increasing runs,
    // picked at random: the old nodes and the ones created since.
    int64_t oldNext = 0, newNext = 100000;
    for (Node *n : all)
      n->setIdInternal(rng() % 4 ? newNext++ : (oldNext += 1 + int64_t(rng() % 3)));
    expectOrder();
  }
  SECTION("three interleaved runs (not two: the radix sort)") {
    int64_t next[3] = {0, 50000, 100000};
    for (size_t i = 0; i < all.size(); ++i)
      all[i]->setIdInternal(next[i % 3]++);
    expectOrder();
  }
  SECTION("repeated ids keep nodes()'s walk order") {
    scramble(7);
    all[5]->setIdInternal(all[200]->id());
    all[17]->setIdInternal(all[3]->id());
    expectOrder();
  }
  SECTION("a negative id") {
    scramble(3);
    all[42]->setIdInternal(-5);
    expectOrder();
  }
}

TEST_CASE("argument binding: positional calls (cached per call shape) agree with keyword calls",
          "[ir][builder]") {
  // Positional-only calls take a per-thread cache keyed by the schema and
  // the given arguments' TreeDefs; keyword calls bind from scratch. Each
  // records its arguments as written, and both bind every parameter to the
  // same value (namedArg, defaults included), hits and misses alike, with
  // the same errors.
  auto sameBinding = [](const Expr *a, const Expr *c) {
    const OpSchema &s = llvm::cast<CallFunction>(a)->func();
    for (const OpParam &p : s.params()) {
      INFO(p.name);
      auto x = a->namedArg(p.name), y = c->namedArg(p.name);
      REQUIRE(x.has_value() == y.has_value());
      if (x) {
        CHECK(x->def == y->def);
        CHECK(x->node() == y->node());
      }
    }
  };
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(
      *tm, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}, {"z", Shape{1, 2, 6, 6}}, {"w", Shape{3, 2, 1, 1}}});
  Node *x = b.arg(0), *y = b.arg(1), *z = b.arg(2), *w = b.arg(3);
  std::mt19937 rng(3);
  for (int i = 0; i < 300; ++i) {
    int64_t lo = int64_t(rng() % 3), hi = lo + int64_t(rng() % 3);
    Node *p = b.callFunction("clip", {x, lo, hi});
    Node *k = b.callFunction("clip", {x}, {{"upper", hi}, {"lower", lo}});
    sameBinding(p->expr(), k->expr());
    CHECK(p->expr()->str().substr(p->expr()->str().find('=')) ==
          fmt::format("= elemwise.clip(x, {}, {}, )", lo, hi));
    CHECK(k->expr()->str().substr(k->expr()->str().find('=')) ==
          fmt::format("= elemwise.clip(x, lower={}, upper={})", lo, hi));
    Node *s1 = b.callFunction("sum", {p, int64_t(i % 2)});
    Node *s2 = b.callFunction("sum", {p}, {{"axis", int64_t(i % 2)}});
    sameBinding(s1->expr(), s2->expr());
    // Node leaves of two different nodes, in argument order.
    Node *a = b.callMethod(i % 2 ? x : y, "__add__", {i % 2 ? y : x});
    REQUIRE(a->expr()->numInputs() == 2);
    CHECK(a->expr()->input(0) == (i % 2 ? x : y));
    CHECK(a->expr()->input(1) == (i % 2 ? y : x));
    // A tuple argument and the defaults after it.
    Node *c = b.callFunction("conv2d", {z, w, Arg::none(), Arg::ints({1, int64_t(i % 3 + 1)})});
    Node *c2 = b.callFunction("conv2d", {z, w},
                              {{"stride", Arg::ints({1, int64_t(i % 3 + 1)})}});
    sameBinding(c->expr(), c2->expr());
    // Errors are raised on hits of the same schema as on misses.
    CHECK_THROWS_WITH(b.callFunction("relu", {x, y}),
                      Catch::Contains("takes 1 positional arguments but 2 were given"));
    CHECK_THROWS_WITH(b.callFunction("conv2d", {z}),
                      Catch::Contains("missing required argument 'weight'"));
  }
}

TEST_CASE("functions print under the MegEngine submodule that defines them",
          "[ir][print]") {
  // The reference prints a CallFunction as `func.__module__`'s last part, a
  // dot and its name: the module that defines the function, which for these
  // five is not the one their neighbours in MegEngine's docs suggest.
  struct Case {
    OpKind kind;
    const char *printed, *old;
  };
  const Case cases[] = {{OpKind::Sign, "math.sign", "elemwise.sign"},
                        {OpKind::IsNan, "math.isnan", "elemwise.isnan"},
                        {OpKind::IsInf, "math.isinf", "elemwise.isinf"},
                        {OpKind::Cumsum, "tensor.cumsum", "math.cumsum"},
                        {OpKind::Interpolate, "vision.interpolate", "nn.interpolate"}};
  for (const Case &c : cases) {
    INFO(c.printed);
    CHECK(op(c.kind).printName() == c.printed);
    CHECK(OpRegistry::instance().lookupFunction(c.printed) == &op(c.kind));
    CHECK(OpRegistry::instance().lookupFunction(op(c.kind).name()) == &op(c.kind));
    // The old spelling is no function name; only .tmir loaders know it.
    CHECK(OpRegistry::instance().lookupFunction(c.old) == nullptr);
  }

  auto tm = TracedModule::fromModule(std::make_unique<Module>("MyModule"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 1, 2, 2}}});
  Node *x = b.arg(0);
  Node *s = b.callFunction("sign", {x});
  Node *n = b.callFunction("isnan", {s});
  Node *i = b.callFunction("isinf", {s});
  Node *c = b.callFunction("cumsum", {x, 1});
  Node *r = b.callFunction("interpolate", {c}, {{"size", Arg::tuple({4, 4})}});
  b.finish(Arg::tuple({r, n, i}));
  CHECK(tm->graph().str() ==
        "MyModule.Graph (self, x) {\n"
        "\t%2:\tsign_out = math.sign(x, )\n"
        "\t%3:\tisnan_out = math.isnan(sign_out, )\n"
        "\t%4:\tisinf_out = math.isinf(sign_out, )\n"
        "\t%5:\tcumsum_out = tensor.cumsum(x, 1, )\n"
        "\t%6:\tinterpolate_out = vision.interpolate(cumsum_out, size=(4, 4))\n"
        "\treturn interpolate_out, isnan_out, isinf_out\n"
        "}");
}

TEST_CASE("every builtin function prints under the reference's submodule", "[ir][print]") {
  // The submodule of MegEngine's `functional` package that defines each
  // function (`def NAME(` in functional/*.py; quantized.py's namesakes are
  // not the ones `F.` exports), which the reference prints as
  // `func.__module__`'s last part. nullptr: a function MegEngine does not
  // have (ONNX operators and tmgraph's fused forms); these print under the
  // submodule of their nearest MegEngine relatives.
  static const std::map<std::string, const char *> megengine = {
      {"add", "elemwise"}, {"sub", "elemwise"}, {"mul", "elemwise"}, {"div", "elemwise"},
      {"floor_div", "elemwise"}, {"mod", "elemwise"}, {"pow", "elemwise"},
      {"maximum", "elemwise"}, {"minimum", "elemwise"}, {"neg", "elemwise"},
      {"abs", "elemwise"}, {"exp", "elemwise"}, {"log", "elemwise"}, {"sqrt", "elemwise"},
      {"rsqrt", nullptr}, {"erf", "elemwise"}, {"tanh", "elemwise"}, {"sin", "elemwise"},
      {"cos", "elemwise"}, {"floor", "elemwise"}, {"ceil", "elemwise"}, {"round", "elemwise"},
      {"clip", "elemwise"}, {"equal", "elemwise"}, {"not_equal", "elemwise"},
      {"less", "elemwise"}, {"less_equal", "elemwise"}, {"greater", "elemwise"},
      {"greater_equal", "elemwise"}, {"logical_and", "elemwise"}, {"logical_or", "elemwise"},
      {"logical_not", "elemwise"}, {"relu", "nn"}, {"relu6", "nn"}, {"leaky_relu", "nn"},
      {"gelu", "nn"}, {"gelu_tanh", nullptr}, {"sigmoid", "nn"}, {"silu", "nn"},
      {"hswish", "nn"}, {"hsigmoid", "nn"}, {"softplus", "nn"}, {"prelu", "nn"},
      {"softmax", "nn"}, {"logsoftmax", "nn"}, {"conv1d", "nn"}, {"conv2d", "nn"},
      {"conv_transpose2d", "nn"}, {"linear", "nn"}, {"conv2d_act", nullptr},
      {"linear_act", nullptr}, {"scaled_dot_product_attention", nullptr},
      {"max_pool2d", "nn"}, {"avg_pool2d", "nn"},
      {"lstm", nullptr}, {"gru", nullptr}, {"rnn", nullptr}, {"string_normalizer", nullptr},
      {"adaptive_avg_pool2d", "nn"}, {"adaptive_max_pool2d", "nn"}, {"batch_norm", "nn"},
      {"layer_norm", "nn"}, {"dropout", "nn"}, {"embedding", "nn"}, {"pad", "nn"},
      {"interpolate", "vision"}, {"fake_quant", nullptr}, {"matmul", "math"}, {"sum", "math"},
      {"mean", "math"}, {"max", "math"}, {"min", "math"}, {"prod", "math"}, {"argmax", "math"},
      {"argmin", "math"}, {"reshape", "tensor"}, {"flatten", "tensor"},
      {"transpose", "tensor"}, {"broadcast_to", "tensor"}, {"concat", "tensor"},
      {"stack", "tensor"}, {"split", "tensor"}, {"squeeze", "tensor"},
      {"expand_dims", "tensor"}, {"gather", "tensor"}, {"where", "tensor"}, {"copy", "tensor"},
      {"zeros", "tensor"}, {"ones", "tensor"}, {"full", "tensor"}, {"arange", "tensor"},
      {"conv_nd", nullptr}, {"conv_transpose_nd", nullptr}, {"max_pool_nd", nullptr},
      {"avg_pool_nd", nullptr}, {"resize_nd", nullptr}, {"elu", nullptr}, {"selu", nullptr},
      {"celu", nullptr}, {"softsign", nullptr}, {"hard_sigmoid", nullptr},
      {"thresholded_relu", nullptr}, {"sign", "math"}, {"reciprocal", nullptr},
      {"tan", "elemwise"}, {"asin", "elemwise"}, {"acos", "elemwise"}, {"atan", "elemwise"},
      {"sinh", "elemwise"}, {"cosh", "elemwise"}, {"asinh", "elemwise"}, {"acosh", "elemwise"},
      {"atanh", "elemwise"}, {"logical_xor", "elemwise"}, {"isnan", "math"}, {"isinf", "math"},
      {"fmod", nullptr}, {"take", nullptr}, {"cumsum", "tensor"}, {"scatter", "tensor"},
      {"scatter_nd", nullptr}, {"topk", "math"}, {"einsum", "einsum"}, {"det", nullptr},
      {"one_hot", "nn"}, {"gather_nd", nullptr}, {"compress", nullptr},
      {"reverse_sequence", nullptr}, {"local_response_norm", "nn"}, {"max_unpool_nd", nullptr},
      {"grid_sample", nullptr}, {"roi_align", "vision"}, {"non_max_suppression", nullptr},
      {"unique", nullptr}};
  std::set<std::string> seen;
  for (const OpSchema *s : OpRegistry::instance().all()) {
    if (s->opClass() != OpClass::Function || s->kind() == OpKind::Custom)
      continue;
    INFO(s->printName().str());
    auto it = megengine.find(s->name().str());
    REQUIRE(it != megengine.end()); // a new function: add it above
    seen.insert(it->first);
    if (!it->second) {
      const std::set<std::string> submodules = {"elemwise", "math", "nn", "tensor", "vision"};
      CHECK(submodules.count(s->module().str()) == 1);
      continue;
    }
    std::string want = it->second;
    CHECK(s->module() == want);
    CHECK(s->printName() == want + "." + s->name().str());
  }
  CHECK(seen.size() == megengine.size());
}
