//===- test_flatten.cpp - TracedModule::flatten --------------------------===//
#include "Fixtures.h"

#include <random>

using namespace tmg;
using namespace fixtures;

/// flattenInPlace (the `flatten` pass) inlines into a copy of the top graph
/// only; it must give what flatten() gives on a clone of the hierarchy.
static void checkInPlaceAsFlatten(const TracedModule &tm) {
  auto flat = tm.flatten();
  auto inPlace = tm.cloneTraced();
  CHECK(inPlace->flattenInPlace());
  CHECK(inPlace->graph().str() == flat->graph().str());
  CHECK(inPlace->graph().str(NodeFormat{true, false}) == flat->graph().str(NodeFormat{true, false}));
  CHECK(inPlace->totalIds() == flat->totalIds());
  CHECK(inPlace->graph().ns().size() == flat->graph().ns().size());
  checkVerified(*inPlace);
  checkExprUsers(*inPlace);
  checkIds(*inPlace);
  CHECK(!inPlace->flattenInPlace()); // nothing left to inline
}

static const char *FlatMyModule =
    "MyModule.Graph (self, x) {\n"
    "\t%2:\tblock0_conv1 = getattr(self, \"block0.conv1\") -> (Conv2d)\n"
    "\t%3:\tblock0_conv1_out = block0_conv1(x, )\n"
    "\t%4:\tblock0_bn1 = getattr(self, \"block0.bn1\") -> (BatchNorm2d)\n"
    "\t%5:\tblock0_bn1_out = block0_bn1(block0_conv1_out, )\n"
    "\t%6:\tblock0_relu_out = nn.relu(block0_bn1_out, )\n"
    "\t%7:\tblock0_add_out = block0_relu_out.__add__(1, )\n"
    "\t%8:\tblock1_conv1 = getattr(self, \"block1.conv1\") -> (Conv2d)\n"
    "\t%9:\tblock1_conv1_out = block1_conv1(block0_add_out, )\n"
    "\t%10:\tblock1_bn1 = getattr(self, \"block1.bn1\") -> (BatchNorm2d)\n"
    "\t%11:\tblock1_bn1_out = block1_bn1(block1_conv1_out, )\n"
    "\t%12:\tblock1_relu_out = nn.relu(block1_bn1_out, )\n"
    "\t%13:\tblock1_add_out = block1_relu_out.__add__(1, )\n"
    "\treturn block1_add_out\n"
    "}";

TEST_CASE("flatten MyModule (test_flatten)", "[ir][flatten]") {
  auto tm = tracedMyModule();
  std::string before = tm->graph().str();
  auto flat = tm->flatten();
  checkInPlaceAsFlatten(*tm);
  CHECK(flat->graph().size() == 12);
  CHECK(flat->graph().str() == FlatMyModule);
  // Module nodes resolve into the flat module's own tree.
  Node *conv = flat->graph().getNodeByName("MyModule_block1_conv1").asUnique();
  CHECK(llvm::cast<ModuleNode>(conv)->owner() == flat->resolveModule("block1.conv1"));
  checkVerified(*flat);
  checkExprUsers(*flat);
  checkIds(*flat);
  checkNames(*flat);
  // Flattening a flat module changes nothing; the original is untouched.
  auto again = flat->flatten();
  CHECK(again->graph().str() == FlatMyModule);
  CHECK(tm->graph().str() == before);
  checkVerified(*tm);
}

TEST_CASE("flatten rewires pass-through outputs of a shared sub-graph", "[ir][flatten]") {
  // MyBlock1.forward(a) = (a, concat([a, a]));
  // forward(x): a, y1 = block(x); a = a + 1; a, y2 = block(a); return a, y1 + y2
  auto m = std::make_unique<Module>("MyModule1");
  m->registerModule("block", std::make_unique<Module>("MyBlock1"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  auto body = [](GraphBuilder &sb) {
    Node *a = sb.arg(0);
    Node *cat = sb.callFunction("concat", {Arg::list({a, a})});
    sb.setOutputs(Arg::tuple({a, cat}));
  };
  Node *blk = b.getAttr(b.self(), "block");
  auto r1 = b.callModuleN(blk, {b.arg(0)}, {}, body, {"a"}, 2);
  Node *a = b.callMethod(r1[0], "__add__", {1});
  auto r2 = b.callModuleN(blk, {a}, {}, body, {"a"}, 2);
  Node *sum = b.callMethod(r1[1], "__add__", {r2[1]});
  b.finish(Arg::tuple({r2[0], sum}));
  CHECK(tm->module("block") != nullptr);
  CHECK(llvm::cast<TracedModule>(tm->module("block"))->numGraphs() == 1);
  auto flat = tm->flatten();
  checkInPlaceAsFlatten(*tm);
  // Call outputs keep their names (the reference's rename blacklist): the
  // second output of each call is now produced by the inlined concat.
  CHECK(flat->graph().str() ==
        "MyModule1.Graph (self, x) {\n"
        "\t%2:\tblock_out_1 = tensor.concat([x, x], )\n"
        "\t%3:\tadd_out = x.__add__(1, )\n"
        "\t%4:\tblock_out_3 = tensor.concat([add_out, add_out], )\n"
        "\t%5:\tadd_out_1 = block_out_1.__add__(block_out_3, )\n"
        "\treturn add_out, add_out_1\n"
        "}");
  checkVerified(*flat);
  checkExprUsers(*flat);
  checkIds(*flat);
  checkNames(*flat);
}

TEST_CASE("flatten of three levels prefixes names per level", "[ir][flatten]") {
  // Net -> layer1 (Sequential-like) -> "0" (block) -> conv1, relu
  auto blk = std::make_unique<Module>("BasicBlock");
  blk->addModule<Conv2d>("conv1", 3, 3, 3, 1, 1);
  auto seq = std::make_unique<Module>("Sequential");
  seq->registerModule("0", std::move(blk));
  auto net = std::make_unique<Module>("ResNet");
  net->registerModule("layer1", std::move(seq));
  auto tm = TracedModule::fromModule(std::move(net));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 8, 8}}});
  auto blockBody = [](GraphBuilder &sb) {
    Node *conv = sb.getAttr(sb.self(), "conv1");
    Node *y = sb.callModule(conv, {sb.arg(0)});
    Node *r = sb.callMethod(y, "__iadd__", {sb.arg(0)});
    sb.setOutputs(sb.callFunction("relu", {r}));
  };
  auto seqBody = [&](GraphBuilder &sb) {
    Node *zero = sb.getAttr(sb.self(), "0");
    CHECK(zero->name() == "_0");
    sb.setOutputs(sb.callModule(zero, {sb.arg(0)}, {}, blockBody, {"x"}));
  };
  Node *l1 = b.getAttr(b.self(), "layer1");
  b.finish(b.callModule(l1, {b.arg(0)}, {}, seqBody, {"input"}));
  // Sub-graph inputs are named after forward's parameters ("input" is a
  // Python builtin, so it gets a suffix).
  auto *seqGraph = &llvm::cast<TracedModule>(tm->module("layer1"))->graph();
  CHECK(seqGraph->input(1)->name() == "input_1");
  auto flat = tm->flatten();
  checkInPlaceAsFlatten(*tm);
  CHECK(flat->graph().str() ==
        "ResNet.Graph (self, x) {\n"
        "\t%2:\tlayer1__0_conv1 = getattr(self, \"layer1.0.conv1\") -> (Conv2d)\n"
        "\t%3:\tlayer1__0_conv1_out = layer1__0_conv1(x, )\n"
        "\t%4:\tlayer1__0_iadd_out = layer1__0_conv1_out.__iadd__(x, )\n"
        "\t%5:\tlayer1_out = nn.relu(layer1__0_iadd_out, )\n"
        "\treturn layer1_out\n"
        "}");
  CHECK(flat->graph().output(0)->qualname() == "ResNet.layer1.0.[func_relu]");
  checkVerified(*flat);
  checkIds(*flat);
  checkNames(*flat);
}

TEST_CASE("a module called with two constants has two graphs, both inlined", "[ir][flatten]") {
  // forward(x): x = self.mod(x, 1); return self.mod(x, 2)
  auto m = std::make_unique<Module>("Net");
  m->registerModule("mod", std::make_unique<Module>("AddK"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  auto body = [](int k) {
    return [k](GraphBuilder &sb) { sb.setOutputs(sb.callMethod(sb.arg(0), "__add__", {k})); };
  };
  Node *mod = b.getAttr(b.self(), "mod");
  Node *x = b.callModule(mod, {b.arg(0), 1}, {}, body(1), {"x", "k"});
  Node *mod2 = b.getAttr(b.self(), "mod");
  b.finish(b.callModule(mod2, {x, 2}, {}, body(2), {"x", "k"}));
  auto *modTm = llvm::cast<TracedModule>(tm->module("mod"));
  CHECK(modTm->numGraphs() == 2);
  CHECK_THROWS_WITH(modTm->graph(), Catch::Contains("has 2 graphs"));
  CHECK(modTm->signatures()[0].graph->name() == "Net_mod");
  CHECK(modTm->signatures()[1].graph->name() == "Net_mod_1");
  // The duplicate getattr was merged by compile; the call output keeps the
  // name it got from the second getattr (`mod_1`), as in the reference's
  // documentation.
  CHECK(tm->graph().str() == "Net.Graph (self, x) {\n"
                             "\t%2:\tmod = getattr(self, \"mod\") -> (Module)\n"
                             "\t%3:\tmod_out = mod(x, 1, )\n"
                             "\t%7:\tmod_1_out = mod(mod_out, 2, )\n"
                             "\treturn mod_1_out\n"
                             "}");
  auto flat = tm->flatten();
  checkInPlaceAsFlatten(*tm);
  CHECK(flat->graph().str() == "Net.Graph (self, x) {\n"
                               "\t%2:\tmod_out = x.__add__(1, )\n"
                               "\t%3:\tmod_1_out = mod_out.__add__(2, )\n"
                               "\treturn mod_1_out\n"
                               "}");
  checkVerified(*flat);
}

namespace {
/// Random hierarchies with dead code for the differential test below.
/// Leaf modules hold a parameter and a builtin ReLU; mid modules hold
/// leaves; the top holds both. Attribute names collide once prefixed
/// ("a" + "_relu_out" vs "a_relu" + "_out"), so the names that dead nodes
/// take decide the names of live ones.
struct RandomHierarchy {
  std::mt19937 rng;
  explicit RandomHierarchy(unsigned seed) : rng(seed) {}

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool chance(int percent) { return int(pick(100)) < percent; }

  static constexpr const char *Names[] = {"a", "a_relu", "b", "b_1", "neg", "c"};

  std::unique_ptr<Module> leaf() {
    auto m = std::make_unique<Module>("Leaf");
    m->registerParameter("w", Tensor::zeros({4}));
    m->addModule<ReLU>("act");
    return m;
  }
  std::unique_ptr<Module> mid() {
    auto m = std::make_unique<Module>("Mid");
    m->registerParameter("w", Tensor::zeros({4}));
    for (size_t i = 0, n = 1 + pick(2); i < n; ++i)
      m->registerModule(Names[i], leaf());
    return m;
  }

  /// A body over `self`'s attributes: ops on a pool of values, some dead,
  /// some kept by disable_remove, duplicate GetAttrs, calls of traced
  /// submodules whose outputs are partly ignored, two outputs (one may be
  /// an input: a pass-through).
  void body(GraphBuilder &b, Module &self) {
    std::vector<Node *> pool;
    for (size_t i = 0; i + 1 < b.graph().inputs().size(); ++i)
      pool.push_back(b.arg(i));
    auto any = [&] { return pool[pick(pool.size())]; };
    // The traced submodules (cases 6 and 7 read or call one).
    std::vector<std::string> subs;
    for (const auto &a : self.attrs())
      if (a.kind == ModuleAttr::Kind::Submodule && !a.module->isBuiltin())
        subs.push_back(a.name);
    for (size_t step = 0, n = 4 + pick(10); step < n; ++step) {
      Node *v = nullptr;
      switch (pick(8)) {
      case 0:
        v = b.callFunction("relu", {any()});
        break;
      case 1:
        v = b.callFunction("neg", {any()});
        break;
      case 2:
        v = b.callMethod(any(), "__add__", {any()});
        break;
      case 3:
        v = b.callMethod(any(), "__mul__", {b.getAttr(b.self(), "w")});
        break;
      case 4:
        if (self.module("act"))
          v = b.callModule(b.getAttr(b.self(), "act"), {any()});
        else
          v = b.callFunction("sigmoid", {any()});
        break;
      case 5:
        // A parameter read once and used anywhere later (also as an
        // output): duplicate GetAttrs whose users interleave.
        v = b.getAttr(b.self(), "w");
        break;
      case 6: {
        // A submodule's parameter read from here: the same path as the
        // GetAttrs of the submodule's inlined graph.
        if (subs.empty()) {
          v = b.callFunction("exp", {any()});
          break;
        }
        v = b.getAttr(b.getAttr(b.self(), subs[pick(subs.size())]), "w");
        break;
      }
      default: {
        if (subs.empty()) {
          v = b.callFunction("abs", {any()});
          break;
        }
        std::string s = subs[pick(subs.size())];
        Module &callee = *self.module(s);
        auto outs = b.callModuleN(
            b.getAttr(b.self(), s), {any()}, {},
            [&](GraphBuilder &sb) { body(sb, callee); }, {"x"}, 2);
        v = outs[pick(2)];
      }
      }
      if (chance(10))
        v->expr()->disableRemove();
      pool.push_back(v);
    }
    b.setOutputs(Arg::tuple({any(), any()}));
  }

  std::unique_ptr<TracedModule> make() {
    // (Every module has a parameter "w": case 5 reads it.)
    auto top = std::make_unique<Module>("Net");
    top->registerParameter("w", Tensor::zeros({4}));
    for (size_t i = 0, n = 2 + pick(3); i < n; ++i)
      top->registerModule(Names[i], chance(50) ? mid() : leaf());
    auto tm = TracedModule::fromModule(std::move(top));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
    body(b, *tm);
    tm->updateRefs();
    return tm;
  }
};

/// Every node's users by expr id, in use-list order, per graph position.
std::vector<std::vector<int64_t>> userLists(const InternalGraph &g) {
  std::vector<std::vector<int64_t>> out;
  for (Node *n : g.nodes(false)) {
    out.emplace_back();
    for (Expr *u : n->users())
      out.back().push_back(u->id());
  }
  return out;
}

std::vector<std::string> usedNames(const NameSpace &ns) {
  std::vector<std::string> out;
  ns.forEachUsedName([&](llvm::StringRef n) { out.push_back(n.str()); });
  std::sort(out.begin(), out.end());
  return out;
}
} // namespace

TEST_CASE("flatten skips dead exprs and agrees with copying them all",
          "[ir][flatten]") {
  uint64_t fallbacks = TracedModule::flattenFallbacksForTesting();
  for (unsigned seed = 0; seed < 200; ++seed) {
    INFO("seed " << seed);
    auto tm = RandomHierarchy(seed).make();
    auto flat = tm->flatten();
    auto plain = tm->flattenCopyingDeadExprsForTesting();
    REQUIRE(flat->graph().str(NodeFormat{true, false}) ==
            plain->graph().str(NodeFormat{true, false}));
    CHECK(flat->graph().str() == plain->graph().str());
    CHECK(flat->totalIds() == plain->totalIds());
    CHECK(usedNames(flat->graph().ns()) == usedNames(plain->graph().ns()));
    CHECK(userLists(flat->graph()) == userLists(plain->graph()));
    bool inlines = false; // flattenInPlace changes nothing otherwise
    for (Expr *e : tm->graph())
      if (auto *cm = llvm::dyn_cast<CallMethod>(e))
        inlines |= cm->calleeGraph() != nullptr;
    if (inlines)
      checkInPlaceAsFlatten(*tm);
    checkVerified(*flat);
    checkExprUsers(*flat);
    checkIds(*flat);
  }
  // The one case the one-walk builder leaves to the plain algorithm (see
  // the next test) is rare: none of these hierarchies has it.
  CHECK(TracedModule::flattenFallbacksForTesting() == fallbacks);
}

namespace {
/// Net(w, sub: Sub(w)); the top graph reads `w` twice and calls `sub`,
/// which returns its input (a pass-through) and reads its own `w`.
std::unique_ptr<TracedModule> twoReadsOfW(bool returnThroughSub) {
  auto top = std::make_unique<Module>("Net");
  top->registerParameter("w", Tensor::zeros({4}));
  auto sub = std::make_unique<Module>("Sub");
  sub->registerParameter("w", Tensor::zeros({4}));
  top->registerModule("sub", std::move(sub));
  auto tm = TracedModule::fromModule(std::move(top));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
  Node *w1 = b.getAttr(b.self(), "w");
  Node *w2 = b.getAttr(b.self(), "w");
  Node *y = b.callMethod(b.arg(0), "__mul__", {w2});
  Node *z = b.callModule(
      b.getAttr(b.self(), "sub"), {w2}, {},
      [](GraphBuilder &sb) {
        (void)sb.callFunction("neg", {sb.getAttr(sb.self(), "w")});
        sb.setOutputs(sb.arg(0));
      },
      {"x"});
  y = b.callMethod(y, "__add__", {w1});
  b.setOutputs(Arg::tuple({y, returnThroughSub ? z : w2}));
  tm->updateRefs();
  return tm;
}

/// Both flatten to this: the second read stays (a graph output either
/// way), its user reads the first.
const char *TwoReadsFlat = "Net.Graph (self, x) {\n"
                           "\t%2:\tw = getattr(self, \"w\") -> (Tensor)\n"
                           "\t%3:\tw_1 = getattr(self, \"w\") -> (Tensor)\n"
                           "\t%4:\tmul_out = x.__mul__(w, )\n"
                           "\t%5:\tadd_out = mul_out.__add__(w, )\n"
                           "\treturn add_out, w_1\n"
                           "}";

void checkAgainstPlain(const TracedModule &tm) {
  auto flat = tm.flatten();
  auto plain = tm.flattenCopyingDeadExprsForTesting();
  CHECK(flat->graph().str(NodeFormat{true, false}) == plain->graph().str(NodeFormat{true, false}));
  CHECK(flat->totalIds() == plain->totalIds());
  CHECK(userLists(flat->graph()) == userLists(plain->graph()));
  checkInPlaceAsFlatten(tm);
  checkVerified(*flat);
}
} // namespace

TEST_CASE("flatten keeps a duplicate GetAttr that is a graph output", "[ir][flatten]") {
  // The second read of `w` is returned: the getattr merge moves its users
  // to the first read but the graph output keeps it. The one-walk builder
  // copies it (no fallback).
  auto tm = twoReadsOfW(false);
  uint64_t before = TracedModule::flattenFallbacksForTesting();
  checkAgainstPlain(*tm);
  CHECK(TracedModule::flattenFallbacksForTesting() == before);
  auto flat = tm->flatten();
  CHECK(flat->graph().str() == TwoReadsFlat);
}

TEST_CASE("flatten of a duplicate GetAttr returned through a pass-through", "[ir][flatten]") {
  // The second read of `w` is not copied by the one-walk builder (its
  // users merge into the first) until the inlined pass-through makes it
  // the graph output: the plain algorithm builds this one.
  auto tm = twoReadsOfW(true);
  uint64_t before = TracedModule::flattenFallbacksForTesting();
  checkAgainstPlain(*tm);
  CHECK(TracedModule::flattenFallbacksForTesting() > before);
  auto flat = tm->flatten();
  CHECK(flat->graph().str() == TwoReadsFlat);
}

TEST_CASE("flatten with id counters set below the ids in use", "[ir][flatten]") {
  // New node ids then repeat old ones, and which of two equal ids comes
  // first depends on the nodes made: the plain algorithm builds these.
  for (unsigned seed = 0; seed < 20; ++seed) {
    INFO("seed " << seed);
    auto tm = RandomHierarchy(seed).make();
    tm->setTotalIds(0, 0);
    uint64_t before = TracedModule::flattenFallbacksForTesting();
    auto flat = tm->flatten();
    CHECK(TracedModule::flattenFallbacksForTesting() == before + 1);
    auto plain = tm->flattenCopyingDeadExprsForTesting();
    CHECK(flat->graph().str(NodeFormat{true, false}) == plain->graph().str(NodeFormat{true, false}));
    CHECK(userLists(flat->graph()) == userLists(plain->graph()));
    checkVerified(*flat);
    checkIds(*flat);
  }
}
