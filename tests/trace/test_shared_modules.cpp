//===- test_shared_modules.cpp - One module under two attribute names ----===//
//
// Python's `self.b = self.a`, written `registerModuleAlias("b", "a")`:
// tracing keeps one object reached by both names (test_modification.py's
// test_shared_module, census §2 24, with the reference's Elemwise("ADD")),
// and so do clone, flatten, state dicts and the .tmir + safetensors round
// trip (the module is written once, `b = alias a`).
//
//===----------------------------------------------------------------------===//
#include "Layers.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/ir/StateDict.h"
#include "tm/runtime/Compare.h"

using namespace tmg;
using namespace layers;
using namespace fixtures;

namespace {

/// test_shared_module's net: z = a(x, y); z = b(z, y), b being a.
struct SharedAdd : LayerOf<SharedAdd> {
  SharedAdd() : LayerOf("SharedAdd", {"x", "y"}) {
    addModule<Elemwise>("a", "ADD");
    registerModuleAlias("b", "a");
  }
  Var forward(Var x, Var y) {
    Var z = mod("a")(x, y);
    return mod("b")(z, y);
  }
};

struct Block : LayerOf<Block> {
  Block() : LayerOf("Block", {"x"}) { addModule<Linear>("lin", 4, 4, true, 7); }
  Var forward(Var x) { return F::relu(mod("lin")(x)); }
};

/// A traced (non-builtin) module under two names, called through both.
struct SharedBlock : LayerOf<SharedBlock> {
  SharedBlock() : LayerOf("SharedBlock", {"x"}) {
    addModule<Block>("a");
    registerModuleAlias("b", "a");
  }
  Var forward(Var x) { return mod("b")(mod("a")(x) * 2); }
};

/// The text of `m` and back, checking it reads to the same module.
std::unique_ptr<TracedModule> roundTrip(const TracedModule &m, WeightFile *w,
                                        std::string &text) {
  TmirWriteOptions wo;
  wo.weights = w;
  text = printTmir(m, wo);
  TmirReadOptions ro;
  ro.weights = w;
  auto back = parseTmir(text, "shared.tmir", ro);
  if (back.failed())
    FAIL(back.diagnostic().str());
  CHECK(compareModules(m, **back).value_or("") == "");
  WeightFile again;
  if (w)
    wo.weights = &again;
  CHECK(printTmir(**back, wo) == text);
  return std::move(*back);
}

} // namespace

TEST_CASE("test_shared_module: a builtin module under two names stays one object",
          "[trace][shared]") {
  SharedAdd net;
  Tensor x = Tensor::randn({2, 3}, 1), y = Tensor::randn({2, 3}, 2);
  auto tm = traceModule(net, Var(x), Var(y));
  CHECK(tm->graph().str() == "SharedAdd.Graph (self, x, y) {\n"
                             "\t%3:\ta = getattr(self, \"a\") -> (Elemwise)\n"
                             "\t%4:\ta_out = a(x, y, )\n"
                             "\t%5:\tb = getattr(self, \"b\") -> (Elemwise)\n"
                             "\t%6:\tb_out = b(a_out, y, )\n"
                             "\treturn b_out\n"
                             "}");
  REQUIRE(tm->module("a") != nullptr);
  CHECK(tm->module("a") == tm->module("b"));
  CHECK(tm->module("a") != net.module("a")); // the traced tree's own copy
  checkVerified(*tm);
  checkExprUsers(*tm);
  checkIds(*tm);
  Tensor eager = Var(net(Var(x), Var(y))).value();
  CHECK(run(*tm, {x, y})[0].bitwiseEqual(eager));

  std::string text;
  auto back = roundTrip(*tm, nullptr, text);
  CHECK(text.find("  a = Elemwise builtin {\n") != std::string::npos);
  CHECK(text.find("  b = alias a\n") != std::string::npos);
  CHECK(back->module("a") == back->module("b")); // `load_tm.a is load_tm.b`
  checkExprUsers(*back);
  checkIds(*back);
  CHECK(run(*back, {x, y})[0].bitwiseEqual(eager));
}

TEST_CASE("a traced module under two names: one module, one graph, one set of weights",
          "[trace][shared]") {
  SharedBlock net;
  Tensor x = Tensor::randn({3, 4}, 4);
  Tensor eager = Var(net(Var(x))).value();
  auto tm = traceModule(net, Var(x));
  auto *a = llvm::dyn_cast_or_null<TracedModule>(tm->module("a"));
  REQUIRE(a);
  CHECK(tm->module("b") == a);
  CHECK(a->numGraphs() == 1); // both calls have one signature
  CHECK(run(*tm, {x})[0].bitwiseEqual(eager));
  checkVerified(*tm);
  // The state dict names the one Linear once, under the first name.
  std::vector<std::string> keys;
  for (const auto &[k, t] : stateDict(*tm))
    keys.push_back(k);
  CHECK(keys == std::vector<std::string>{"a.lin.bias", "a.lin.weight"});

  // flatten inlines each call under its own name; the two GetAttrs of the
  // one Linear merge (one object); the tree keeps the alias.
  auto flat = tm->flatten();
  CHECK(flat->module("a") == flat->module("b"));
  CHECK(flat->graph().str() == "SharedBlock.Graph (self, x) {\n"
                               "\t%2:\ta_lin = getattr(self, \"a.lin\") -> (Linear)\n"
                               "\t%3:\ta_lin_out = a_lin(x, )\n"
                               "\t%4:\ta_out = nn.relu(a_lin_out, )\n"
                               "\t%5:\tmul_out = a_out.__mul__(2, )\n"
                               "\t%6:\tb_lin_out = a_lin(mul_out, )\n"
                               "\t%7:\tb_out = nn.relu(b_lin_out, )\n"
                               "\treturn b_out\n"
                               "}");
  CHECK(run(*flat, {x})[0].bitwiseEqual(eager));
  checkVerified(*flat);
  checkNames(*flat);

  // .tmir + safetensors: the weights stored once, the identity restored.
  WeightFile w;
  std::string text;
  auto back = roundTrip(*tm, &w, text);
  std::vector<std::string> stored;
  for (const auto &[k, t] : w.tensors)
    stored.push_back(k);
  CHECK(stored == std::vector<std::string>{"a.lin.weight", "a.lin.bias"}); // file order
  CHECK(back->module("a") == back->module("b"));
  CHECK(run(*back, {x})[0].bitwiseEqual(eager));
  // A new weight loaded under the one key is what both calls use.
  StateDict sd = stateDict(*back);
  sd[1].second = Tensor::randn({4, 4}, 9);
  REQUIRE(loadStateDict(*back, sd).succeeded());
  Tensor h = rt::Interpreter(*back).run({x}).outputs[0];
  SharedBlock fresh;
  REQUIRE(loadStateDict(fresh, sd).succeeded());
  CHECK(h.bitwiseEqual(Var(fresh(Var(x))).value()));
}

TEST_CASE("aliases in .tmir: errors are located", "[trace][shared][error]") {
  const char *head = "tmir 3\nids 0 0\nmodule M traced top {\n";
  auto bad = parseTmir(std::string(head) + "  b = alias a\n}\n", "alias.tmir");
  REQUIRE(bad.failed());
  CHECK(bad.diagnostic().str().find("alias.tmir:4") != std::string::npos);
  CHECK(bad.diagnostic().str().find("'b' names 'a', which is not a submodule") !=
        std::string::npos);
}
