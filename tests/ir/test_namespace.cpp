//===- test_namespace.cpp - Unique names ---------------------------------===//
#include <random>
#include <regex>
#include <set>

#include "Fixtures.h"

using namespace tmg;

namespace {
/// The reference's create_unique_name, literally (quadratic): the oracle for
/// the incremental implementation.
struct NaiveNameSpace {
  std::set<std::string> used;
  std::string create(std::string name) {
    name = std::regex_replace(name, std::regex("[^0-9a-zA-Z_]+"), "_");
    if (std::isdigit((unsigned char)name[0]))
      name = "_" + name;
    std::regex suffix("(.*)_(\\d+)$");
    while (used.count(name) || isReservedName(name)) {
      std::smatch m;
      if (!std::regex_match(name, m, suffix))
        name += "_1";
      else
        name = m[1].str() + "_" + std::to_string(std::stoll(m[2].str()) + 1);
    }
    used.insert(name);
    return name;
  }
};
} // namespace

TEST_CASE("create_unique_name: suffixes, sanitising, reserved names", "[ir][namespace]") {
  NameSpace ns("g", "G");
  CHECK(ns.createUniqueName("x") == "x");
  CHECK(ns.createUniqueName("x") == "x_1");
  CHECK(ns.createUniqueName("x") == "x_2");
  CHECK(ns.createUniqueName("x_1") == "x_3");
  CHECK(ns.createUniqueName("a.b-c") == "a_b_c");
  CHECK(ns.createUniqueName("a..b") == "a_b");
  CHECK(ns.createUniqueName("0") == "_0");
  CHECK(ns.createUniqueName("layer1.0.conv1") == "layer1_0_conv1");
  // Python keywords, builtins, inf/nan/NoneType are never handed out.
  CHECK(ns.createUniqueName("input") == "input_1");
  CHECK(ns.createUniqueName("sum") == "sum_1");
  CHECK(ns.createUniqueName("lambda") == "lambda_1");
  CHECK(ns.createUniqueName("None") == "None_1");
  CHECK(ns.createUniqueName("inf") == "inf_1");
  CHECK(ns.createUniqueName("NoneType") == "NoneType_1");
  CHECK(ns.createUniqueName("self") == "self");
  CHECK_THROWS_AS(ns.createUniqueName(""), Error);
}

TEST_CASE("incremental unique names equal the reference's on random streams", "[ir][namespace]") {
  std::mt19937 rng(42);
  const char *bases[] = {"add_out", "add_out_1", "x", "x_3", "relu_out", "input",
                         "a.b", "7", "x_10", "add_out_2", "y_0", "y"};
  for (int round = 0; round < 20; ++round) {
    NameSpace fast("g", "G");
    NaiveNameSpace naive;
    for (int i = 0; i < 300; ++i) {
      std::string n = bases[rng() % (sizeof(bases) / sizeof(*bases))];
      REQUIRE(fast.createUniqueName(n) == naive.create(n));
    }
  }
}

TEST_CASE("a copied namespace continues like the original (recent-name cache)",
          "[ir][namespace]") {
  // The namespace remembers the counters of recently bumped base names; a
  // copy must not keep pointers into the original's tables, and more base
  // names than the cache holds must cycle through it correctly.
  std::mt19937 rng(11);
  const char *bases[] = {"add_out", "method_add", "relu_out", "func_relu", "clip_out",
                         "func_clip", "mul_out", "method_mul", "sub_out", "method_sub",
                         "x", "x_2"};
  NameSpace fast("g", "G");
  NaiveNameSpace naive;
  for (int i = 0; i < 2000; ++i) {
    std::string n = bases[rng() % (i < 1000 ? 4 : sizeof(bases) / sizeof(*bases))];
    REQUIRE(fast.createUniqueName(n) == naive.create(n));
    if (i % 500 == 499) {
      auto copy = std::make_unique<NameSpace>(fast);
      NaiveNameSpace naiveCopy = naive;
      fast = NameSpace("h", "H"); // the original's tables are gone
      for (int j = 0; j < 50; ++j) {
        std::string m = bases[rng() % 4];
        REQUIRE(copy->createUniqueName(m) == naiveCopy.create(m));
      }
      fast = *copy;
      naive = naiveCopy;
    }
  }
}

TEST_CASE("many equal names cost O(1) each", "[ir][namespace]") {
  NameSpace ns("g", "G");
  std::string last;
  for (int i = 0; i < 200000; ++i)
    last = ns.createUniqueName("add_out");
  CHECK(last == "add_out_199999");
  CHECK(ns.createUniqueName("add_out_5") == "add_out_200000");
  // Names reserved ahead of the counter join its range when it gets there
  // (else every later name would scan past them: quadratic).
  NameSpace ahead("g", "G");
  ahead.reserve("relu_out_3");
  ahead.reserve("relu_out_4");
  ahead.reserve("relu_out_9");
  CHECK(ahead.createUniqueName("relu_out") == "relu_out");
  for (int i = 0; i < 200000; ++i)
    last = ahead.createUniqueName("relu_out");
  CHECK(last == "relu_out_200003");
  CHECK(ahead.size() == 200004);
}

TEST_CASE("get_suffix_name", "[ir][namespace]") {
  std::string s;
  CHECK(getSuffixName("Net", "Net", s));
  CHECK(s.empty());
  CHECK(getSuffixName("Net", "Net.block.conv", s));
  CHECK(s == "block.conv");
  CHECK(!getSuffixName("Net", "Network.x", s));
  // The prefix is literal (the reference builds an unescaped regex).
  CHECK(!getSuffixName("N.t", "Nxt.a", s));
}

TEST_CASE("output naming of every expr kind", "[ir][namespace]") {
  auto m = std::make_unique<Module>("Net");
  auto blk = std::make_unique<Module>("Blk");
  blk->registerBuffer("w", Tensor::zeros({2}));
  m->registerModule("block", std::move(blk));
  m->addModule<ReLU>("act");
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4, 2}}});
  Node *blkNode = b.getAttr(b.self(), "block");
  Node *w = b.getAttr(blkNode, "w");
  CHECK(w->name() == "block_w");
  CHECK(w->qualname() == "Net.block.w");
  Node *item = b.callMethod(b.arg(0), "__getitem__", {0});
  CHECK(item->name() == "getitem_out");
  CHECK(item->qualname() == "Net.[method_getitem]");
  Node *shape = b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0];
  CHECK(shape->name() == "getvarshape_out");
  CHECK(shape->qualname() == "Net.[def_getvarshape]");
  auto parts = b.callFunctionN(functionOp("split"), {b.arg(0), 2}, {}, 2);
  CHECK(parts[0]->name() == "split_out");
  CHECK(parts[1]->name() == "split_out_1");
  Node *cm = b.constant(std::make_unique<ReLU>());
  CHECK(cm->name() == "const_relu");
  CHECK(cm->qualname() == "Net.[const_relu]");
  Node *act = b.getAttr(b.self(), "act");
  Node *y = b.callModule(cm, {b.callModule(act, {item})});
  CHECK(y->name() == "const_relu_out");
  CHECK(y->qualname() == "Net.[const_relu].[out]");
  // The qualname helpers reserve names, as the reference does.
  CHECK(b.graph().ns().isUsed("method_getitem"));
  CHECK(b.graph().ns().isUsed("func_split"));
  // A renamed node keeps its new name; taken names are refused.
  y->setName("result");
  CHECK(y->name() == "result");
  CHECK_THROWS_AS(y->setName("act_out"), Error);
  b.finish(Arg::tuple({y, w, shape, parts[0], parts[1]}));
  // finish() compiles as the reference's build(): the GetAttr chain becomes
  // one dotted getattr and the dead `block` getattr goes.
  CHECK(b.graph().str() ==
        "Net.Graph (self, x) {\n"
        "\t%2:\tblock_w = getattr(self, \"block.w\") -> (Tensor)\n"
        "\t%3:\tgetitem_out = x.__getitem__(0, )\n"
        "\t%4:\tgetvarshape_out = GetVarShape(x)\n"
        "\t%5:\t(split_out, split_out_1) = tensor.split(x, 2, )\n"
        "\t%6:\tconst_relu = Constant() -> (Module)\n"
        "\t%7:\tact = getattr(self, \"act\") -> (ReLU)\n"
        "\t%8:\tact_out = act(getitem_out, )\n"
        "\t%9:\tresult = const_relu(act_out, )\n"
        "\treturn result, block_w, getvarshape_out, split_out, split_out_1\n"
        "}");
  fixtures::checkVerified(*tm);
}

TEST_CASE("NameSpace::release frees a name for reuse", "[ir][namespace]") {
  NameSpace ns("g", "G");
  CHECK(ns.createUniqueName("a") == "a");
  CHECK(ns.createUniqueName("a") == "a_1");
  CHECK(ns.createUniqueName("a") == "a_2");
  ns.release("a_1");
  CHECK(!ns.isUsed("a_1"));
  CHECK(ns.createUniqueName("a") == "a_1");
  CHECK(ns.createUniqueName("a") == "a_3");
  ns.release("a_3");
  ns.release("a_2");
  CHECK(ns.createUniqueName("a") == "a_2");
  ns.release("never_used"); // no-op
  ns.release("a");
  CHECK(ns.createUniqueName("a") == "a");
}

TEST_CASE("counted names: create, reserve and release in any order agree with a plain set",
          "[ir][namespace]") {
  // Most names are kept as a counter range per base (see NameSpace.h); the
  // oracle keeps every name in a std::set. Reserving names above, inside
  // and at the end of a range, releasing in and out of order, and names
  // that only look counted ("y_0", "x_07") must not tell them apart.
  std::mt19937 rng(7);
  const char *bases[] = {"a", "a_1", "a_3", "x_07", "y_0", "relu_out", "id", "_", "b_2_1"};
  for (int round = 0; round < 30; ++round) {
    NameSpace fast("g", "G");
    NaiveNameSpace naive;
    std::vector<std::string> taken;
    for (int i = 0; i < 400; ++i) {
      unsigned op = rng() % 10;
      if (op < 6) {
        std::string n = bases[rng() % (sizeof(bases) / sizeof(*bases))];
        std::string got = fast.createUniqueName(n);
        REQUIRE(got == naive.create(n));
        taken.push_back(got);
      } else if (op < 8) {
        // A name of a range's neighbourhood, reserved as is.
        std::string n = std::string(rng() % 2 ? "a" : "relu_out") + "_" +
                        std::to_string(rng() % 40);
        fast.reserve(n);
        naive.used.insert(n);
        taken.push_back(n);
      } else if (!taken.empty()) {
        size_t j = rng() % taken.size();
        fast.release(taken[j]);
        naive.used.erase(taken[j]);
        taken.erase(taken.begin() + long(j));
      }
    }
    std::set<std::string> listed;
    fast.forEachUsedName([&](llvm::StringRef n) { CHECK(listed.insert(n.str()).second); });
    CHECK(listed == naive.used);
    CHECK(fast.size() == naive.used.size());
    for (int k = 0; k < 45; ++k)
      for (const char *b : {"a_", "relu_out_", "x_0", "y_"}) {
        std::string n = b + std::to_string(k);
        INFO(n);
        CHECK(fast.isUsed(n) == (naive.used.count(n) != 0));
      }
  }
}

TEST_CASE("counted names are never reserved ones", "[ir][namespace]") {
  for (const char *n : {"abs", "input", "sum", "None", "inf", "nan", "NoneType", "id", "lambda"})
    CHECK(isReservedName(n));
  CHECK(!isReservedName("input_1"));
  CHECK(!isReservedName("id_2"));
  NameSpace ns("g", "G");
  CHECK(ns.createUniqueName("id") == "id_1");
  CHECK(ns.createUniqueName("id") == "id_2");
}
