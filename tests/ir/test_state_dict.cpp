//===- test_state_dict.cpp - state_dict / load_state_dict ----------------===//
//
// MegEngine's Module.state_dict order (Module._flatten: attribute names
// sorted, a list's items by index, identity counted once per module) and
// load_state_dict's strict checks, on modules and traced modules; the
// scenario of test_qat_module.py::test_load_param (census §2 29): a state
// dict from one instance loads into the traced module of another and into
// its flatten().
//
//===----------------------------------------------------------------------===//
#include <algorithm>

#include "Fixtures.h"
#include "tm/ir/StateDict.h"

using namespace tmg;
using namespace fixtures;

namespace {

std::vector<std::string> keys(const StateDict &sd) {
  std::vector<std::string> k;
  for (const auto &[name, t] : sd)
    k.push_back(name);
  return k;
}

/// A state dict of `m`'s keys with fresh random values.
StateDict randomState(const Module &m, uint64_t seed) {
  StateDict sd = stateDict(m);
  for (auto &[name, t] : sd)
    t = Tensor::randn(t.shape(), seed++);
  return sd;
}

} // namespace

TEST_CASE("state_dict: sorted names per module, tensors before submodules", "[ir][state_dict]") {
  auto m = makeMyBlockModule();
  // Declared conv1, bn1, nothing: the keys follow sorted attribute names.
  CHECK(keys(stateDict(*m)) ==
        std::vector<std::string>{"bn1.bias", "bn1.running_mean", "bn1.running_var",
                                 "bn1.weight", "conv1.weight"});
  Module top("Top");
  top.registerBuffer("z_buf", Tensor::zeros({1}));
  top.registerModule("block", makeMyBlockModule());
  top.registerParameter("a_param", Tensor::zeros({2}));
  top.setValue("alpha", Scalar(int64_t(3))); // plain values are no state
  CHECK(keys(stateDict(top)) ==
        std::vector<std::string>{"a_param", "z_buf", "block.bn1.bias",
                                 "block.bn1.running_mean", "block.bn1.running_var",
                                 "block.bn1.weight", "block.conv1.weight"});
  // The values are the module's tensors themselves.
  CHECK(stateDict(top)[0].second.sharesStorage(*top.tensor("a_param")));
}

TEST_CASE("state_dict: a list keeps index order; identity counts once per module",
          "[ir][state_dict]") {
  auto list = std::make_unique<Module>("ModuleList");
  for (int i = 0; i < 12; ++i)
    list->addModule<Linear>(std::to_string(i), 2, 2, false, i);
  Module net("Net");
  net.registerModule("layers", std::move(list));
  std::vector<std::string> k = keys(stateDict(net));
  REQUIRE(k.size() == 12);
  CHECK(k[2] == "layers.2.weight");
  CHECK(k[10] == "layers.10.weight");
  // One tensor under two names of one module: once, under the first
  // sorted name. Shared by two modules: under both.
  Module shared("Shared");
  Tensor w = Tensor::randn({2, 2}, 1);
  shared.registerParameter("w2", w);
  shared.registerParameter("w1", w);
  auto &a = shared.addModule<Linear>("a", 2, 2, false);
  auto &b = shared.addModule<Linear>("b", 2, 2, false);
  b.registerParameter("weight", *a.tensor("weight"));
  CHECK(keys(stateDict(shared)) ==
        std::vector<std::string>{"w1", "a.weight", "b.weight"});
}

TEST_CASE("load_state_dict: all keys, strict and not", "[ir][state_dict]") {
  auto src = makeMyBlockModule();
  StateDict sd = randomState(*src, 10);
  auto dst = makeMyBlockModule();
  auto r = loadStateDict(*dst, sd);
  REQUIRE(r.succeeded());
  CHECK(r->loaded == keys(sd));
  CHECK(r->missing.empty());
  CHECK(r->unexpected.empty());
  for (const auto &[name, t] : sd) {
    const Tensor *got = dst->resolveTensor(name);
    REQUIRE(got);
    CHECK(got->bitwiseEqual(t));
    CHECK(!got->sharesStorage(t)); // a copy, not the caller's tensor
  }
}

TEST_CASE("load_state_dict: missing, unexpected and mismatched keys", "[ir][state_dict]") {
  auto m = makeMyBlockModule();
  StateDict before = stateDict(*m);
  StateDict sd = randomState(*m, 20);
  sd.erase(sd.begin()); // bn1.bias missing
  sd.emplace_back("fc.weight", Tensor::zeros({1}));
  auto r = loadStateDict(*m, sd);
  REQUIRE(r.failed());
  const Diagnostic &d = r.diagnostic();
  CHECK(d.message == "load_state_dict into 'MyBlock': 2 problems (strict)");
  CHECK(d.notes == std::vector<std::string>{"missing key 'bn1.bias'",
                                            "unexpected key 'fc.weight'"});
  // All or nothing: no tensor changed.
  for (const auto &[name, t] : before)
    CHECK(m->resolveTensor(name)->bitwiseEqual(t));
  // Not strict: the rest loads, the report lists the others.
  auto loose = loadStateDict(*m, sd, /*strict=*/false);
  REQUIRE(loose.succeeded());
  CHECK(loose->missing == std::vector<std::string>{"bn1.bias"});
  CHECK(loose->unexpected == std::vector<std::string>{"fc.weight"});
  CHECK(loose->loaded.size() == 4);
  CHECK(m->resolveTensor("conv1.weight")->bitwiseEqual(sd[3].second));
  // Shape and dtype mismatches fail even when not strict.
  StateDict bad = stateDict(*m);
  bad[4].second = Tensor::zeros({3, 3, 1, 1});
  bad[0].second = Tensor::zeros({3}, DType::Int32);
  auto mis = loadStateDict(*m, bad, false);
  REQUIRE(mis.failed());
  CHECK(mis.diagnostic().notes ==
        std::vector<std::string>{
            "key 'bn1.bias': the module holds float32 (3,) but the state dict gives "
            "int32 (3,)",
            "key 'conv1.weight': the module holds float32 (3, 3, 3, 3) but the state "
            "dict gives float32 (3, 3, 1, 1)"});
  StateDict twice = {{"conv1.weight", Tensor::zeros({3, 3, 3, 3})},
                     {"conv1.weight", Tensor::zeros({3, 3, 3, 3})}};
  CHECK_THROWS_WITH(loadStateDict(*m, twice, false).value(),
                    Catch::Contains("key 'conv1.weight' is given twice"));
}

TEST_CASE("load_state_dict keeps shared tensors shared", "[ir][state_dict]") {
  Module m("Shared");
  auto &a = m.addModule<Linear>("a", 2, 2, false);
  auto &b = m.addModule<Linear>("b", 2, 2, false);
  b.registerParameter("weight", *a.tensor("weight"));
  StateDict sd = {{"a.weight", Tensor::randn({2, 2}, 1)},
                  {"b.weight", Tensor::randn({2, 2}, 2)}};
  REQUIRE(loadStateDict(m, sd).succeeded());
  // As `var._reset` on the one shared Parameter: the later key wins, and
  // both attributes still hold one tensor.
  CHECK(a.tensor("weight")->sharesStorage(*b.tensor("weight")));
  CHECK(a.tensor("weight")->bitwiseEqual(sd[1].second));
}

TEST_CASE("test_load_param: a module's state dict loads into a traced module and its flatten",
          "[ir][state_dict]") {
  auto eager = std::make_unique<Module>("MyModule");
  eager->registerModule("block0", makeMyBlockModule());
  eager->registerModule("block1", makeMyBlockModule());
  eager->registerModule("nothing", std::make_unique<Module>("IdentityMod"));
  StateDict sd = randomState(*eager, 30);
  REQUIRE(loadStateDict(*eager, sd).succeeded());
  auto tm = tracedMyModule();
  // The traced module answers the original's keys.
  CHECK(keys(stateDict(*tm)) == keys(stateDict(*eager)));
  auto flat = tm->flatten();
  for (TracedModule *t : {tm.get(), flat.get()}) {
    REQUIRE(loadStateDict(*t, stateDict(*eager)).succeeded());
    for (const auto &[name, v] : sd)
      CHECK(t->resolveTensor(name)->bitwiseEqual(v));
    checkVerified(*t);
  }
}

TEST_CASE("namedModules and namedTensors: sorted keys, each object once",
          "[ir][state_dict]") {
  // test_module.py::test_module_api's MyModule: attributes declared as
  // i, bn, param, buff; listed in sorted key order, pre-order.
  Module m("MyModule");
  Module &inner = m.addModule<Module>("i", "InnerModule");
  inner.addModule<BatchNorm2d>("bn", 4);
  m.addModule<BatchNorm2d>("bn", 4);
  m.registerParameter("param", Tensor::full({1}, 1.0));
  m.registerBuffer("buff", Tensor::full({1}, 1.0));
  std::vector<std::string> names, tensors;
  m.namedModules([&](const std::string &n, Module &) { names.push_back(n); });
  CHECK(names == std::vector<std::string>{"", "bn", "i", "i.bn"});
  names.clear();
  m.namedModules([&](const std::string &n, Module &) { names.push_back(n); }, "x");
  CHECK(names == std::vector<std::string>{"x", "x.bn", "x.i", "x.i.bn"});
  m.namedTensors([&](const std::string &n, const Tensor &) { tensors.push_back(n); });
  CHECK(tensors == std::vector<std::string>{"bn.bias", "bn.running_mean", "bn.running_var",
                                            "bn.weight", "buff", "i.bn.bias",
                                            "i.bn.running_mean", "i.bn.running_var",
                                            "i.bn.weight", "param"});
  // A tensor shared by two attributes is listed once, under its first key
  // (test_shared_param); the state dict keeps both keys.
  m.module("i")->module("bn")->registerParameter("weight", *m.resolveTensor("bn.weight"));
  tensors.clear();
  m.namedTensors([&](const std::string &n, const Tensor &) { tensors.push_back(n); });
  CHECK(std::count(tensors.begin(), tensors.end(), "i.bn.weight") == 0);
  CHECK(std::count(tensors.begin(), tensors.end(), "bn.weight") == 1);
  CHECK(keys(stateDict(m)).size() == 10);
}

TEST_CASE("one module under two names: one object, listed once, cloned as one",
          "[ir][state_dict][shared]") {
  // Python's `self.b = self.a`; state_dict lists an object once per module,
  // under its first name in sorted order.
  Module m("Net");
  Module &a = m.addModule<Linear>("z", 2, 2, true, 1);
  m.registerModuleAlias("a", "z");
  CHECK(m.module("a") == &a);
  CHECK(m.resolveTensor("a.weight") == a.tensor("weight"));
  CHECK(m.attr("a")->kind == ModuleAttr::Kind::Alias);
  // named_modules / named_tensors too (test_module_api_reuse_submodule:
  // `m.h = m.i` lists `h` and `h.bn`, not `i`).
  std::vector<std::string> names, tensors;
  m.namedModules([&](const std::string &n, Module &) { names.push_back(n); });
  CHECK(names == std::vector<std::string>{"", "a"});
  m.namedTensors([&](const std::string &n, const Tensor &) { tensors.push_back(n); });
  CHECK(tensors == std::vector<std::string>{"a.bias", "a.weight"});
  CHECK(keys(stateDict(m)) == std::vector<std::string>{"a.bias", "a.weight"});
  // A load through the one key changes what both names reach.
  StateDict sd = randomState(m, 5);
  REQUIRE(loadStateDict(m, sd).succeeded());
  CHECK(m.resolveTensor("z.weight")->bitwiseEqual(sd[1].second));
  // An alias of an alias names the submodule.
  m.registerModuleAlias("b", "a");
  CHECK(m.attr("b")->target == "z");
  auto c = m.clone();
  CHECK(c->module("a") == c->module("z"));
  CHECK(c->module("b") == c->module("z"));
  CHECK(c->module("z") != &a);
  // Replacing the submodule: both names reach the new one.
  Module &n = m.addModule<Linear>("z", 2, 2, false, 2);
  CHECK(m.module("a") == &n);
  // Errors: a target that is not a submodule; removing an aliased submodule.
  m.registerBuffer("t", Tensor::zeros({1}));
  CHECK_THROWS_WITH(m.registerModuleAlias("c", "t"), Catch::Contains("not a submodule"));
  CHECK_THROWS_WITH(m.removeAttr("z"), Catch::Contains("remove the alias first"));
  CHECK(m.removeAttr("a"));
  CHECK(m.removeAttr("b"));
  CHECK(m.removeAttr("z"));
}
