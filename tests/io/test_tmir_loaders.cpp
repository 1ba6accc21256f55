//===- test_tmir_loaders.cpp - Versioned loaders of older .tmir files -----===//
//
// The reference's test_serialization.py loader tests (test_opdef_loader,
// test_functional_loader, test_tensor_method_loader, test_module_loader),
// with .tmir versions in place of MegEngine versions, and tmgraph's own
// upgrades (tests/files/v1_creation.tmir).
//
//===----------------------------------------------------------------------===//
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/runtime/Compare.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;

namespace {

std::string readFile(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string print(const TracedModule &m) {
  TmirWriteOptions o;
  o.inlineMaxElements = 64;
  return printTmir(m, o);
}

std::unique_ptr<TracedModule> parseOrFail(const std::string &text,
                                          const TmirLoaders *loaders = nullptr) {
  TmirReadOptions o;
  o.loaders = loaders;
  auto r = parseTmir(text, "old.tmir", o);
  if (r.failed())
    FAIL(r.diagnostic().str());
  return std::move(*r);
}

/// Replaces every occurrence of `from` in `s`.
std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

/// The text of `m` as a file of version `v` would hold it (same body).
std::string asVersion(const TracedModule &m, int v) {
  std::string t = print(m);
  REQUIRE(t.rfind(fmt::format("tmir {}\n", TmirVersion), 0) == 0);
  return fmt::format("tmir {}", v) + t.substr(t.find('\n'));
}

std::vector<Tensor> run(const TracedModule &m, std::vector<Tensor> ins) {
  rt::Interpreter interp(m);
  return interp.run(ins).outputs;
}

/// forward(x, y) = relu(x) + y * 1, with a softmax module.
std::unique_ptr<TracedModule> smallNet() {
  auto root = std::make_unique<Module>("Net");
  root->addModule<Softmax>("sm", 1);
  auto tm = TracedModule::fromModule(std::move(root));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}});
  Node *r = b.callFunction("nn.relu", {b.arg(0)});
  Node *m = b.callMethod(b.arg(1), "__mul__", {1});
  Node *a = b.callMethod(r, "__add__", {m});
  Node *sm = b.getAttr(b.self(), "sm");
  b.finish(b.callModule(sm, {a}));
  return tm;
}

} // namespace

TEST_CASE("a version-1 file: creation functions take dtype and device by keyword",
          "[io][tmir][loaders]") {
  std::string dir = TM_TEST_FILES;
  std::string old = readFile(dir + "/v1_creation.tmir");
  std::string current = readFile(dir + "/v1_creation.current.tmir");
  REQUIRE(old.rfind("tmir 1\n", 0) == 0);
  REQUIRE(current.rfind(fmt::format("tmir {}\n", TmirVersion), 0) == 0);
  auto up = parseOrFail(old);
  // Upgraded, it prints as the current version does.
  CHECK(print(*up) == current);
  auto now = parseOrFail(current);
  CHECK(compareModules(*up, *now).value_or("") == "");
  auto *z = up->graph().getFunctionByType(&op(OpKind::Zeros)).asUnique();
  REQUIRE(z->argDef());
  CHECK(z->argDef()->child(0).numChildren() == 1);
  CHECK(z->argDef()->child(1).findStringKey("dtype") >= 0);
  // And it runs as the current file does.
  Tensor x = Tensor::fromFloats({2, 3}, {1, 2, 3, 4, 5, 6});
  auto a = run(*up, {x}), b = run(*now, {x});
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(a[i].bitwiseEqual(b[i]));
}

TEST_CASE("a version-2 file: five functions move to the submodule defining them",
          "[io][tmir][loaders]") {
  // sign(x), isnan, isinf, cumsum and interpolate, printed today as
  // math.sign, math.isnan, math.isinf, tensor.cumsum, vision.interpolate.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 1, 2, 2}}});
  Node *s = b.callFunction("sign", {b.arg(0)});
  Node *n = b.callFunction("isnan", {s});
  Node *i = b.callFunction("isinf", {s});
  Node *c = b.callFunction("cumsum", {b.arg(0), 1});
  Node *r = b.callFunction("interpolate", {c}, {{"size", Arg::tuple({4, 4})}});
  b.finish(Arg::tuple({r, n, i}));
  std::string current = print(*tm);
  std::string old = asVersion(*tm, 2);
  // Both in the printed part and in the `fn=` annotation.
  const std::pair<const char *, const char *> renames[] = {
      {"math.sign", "elemwise.sign"},       {"math.isnan", "elemwise.isnan"},
      {"math.isinf", "elemwise.isinf"},     {"tensor.cumsum", "math.cumsum"},
      {"vision.interpolate", "nn.interpolate"}};
  for (auto [now, before] : renames) {
    REQUIRE(old.find(now) != std::string::npos);
    old = replaceAll(old, now, before);
  }
  auto up = parseOrFail(old);
  CHECK(print(*up) == current);
  CHECK(compareModules(*up, *tm).value_or("") == "");
  // Without the builtin loaders the old names are unknown functions.
  TmirLoaders none;
  TmirReadOptions o;
  o.loaders = &none;
  CHECK(parseTmir(old, "old.tmir", o).failed());
  // A current file spelling the old names is not upgraded.
  CHECK(parseTmir(fmt::format("tmir {}", TmirVersion) + old.substr(old.find('\n')), "new.tmir")
            .failed());
}

TEST_CASE("a version-3 file: math.einsum reads as einsum.einsum", "[io][tmir][loaders]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"a", Shape{2, 3}}, {"b", Shape{3, 4}}});
  Node *e = b.callFunction("einsum", {"ij,jk->ik", Arg::list({b.arg(0), b.arg(1)})});
  b.finish(e);
  std::string current = print(*tm);
  REQUIRE(current.find("einsum.einsum(") != std::string::npos);
  std::string old = replaceAll(asVersion(*tm, 3), "einsum.einsum", "math.einsum");
  auto up = parseOrFail(old);
  CHECK(print(*up) == current);
  Tensor x = Tensor::randn({2, 3}, 1), y = Tensor::randn({3, 4}, 2);
  CHECK(run(*up, {x, y})[0].bitwiseEqual(run(*tm, {x, y})[0]));
  // A current file spelling the old name is not upgraded.
  CHECK(parseTmir(fmt::format("tmir {}", TmirVersion) + old.substr(old.find('\n')), "new.tmir")
            .failed());
}

TEST_CASE("without loaders an old file is read as written", "[io][tmir][loaders]") {
  std::string old = readFile(std::string(TM_TEST_FILES) + "/v1_creation.tmir");
  TmirLoaders none;
  auto raw = parseOrFail(old, &none);
  auto *z = raw->graph().getFunctionByType(&op(OpKind::Zeros)).asUnique();
  // dtype and device stay positional, where the current signature has none.
  CHECK(z->argDef()->child(0).numChildren() == 3);
  CHECK(compareModules(*raw, *parseOrFail(old)).has_value());
}

TEST_CASE("a function loader renames a function and rewrites its arguments",
          "[io][tmir][loaders]") {
  auto m = smallNet();
  // A version-1 file whose `nn.relu` was called `nn.rectify`.
  std::string old = replaceAll(asVersion(*m, 1), "nn.relu", "nn.rectify");
  TmirLoaders l = TmirLoaders::builtin();
  int calls = 0;
  l.registerFunctionLoader("nn.rectify", 1, [&](TmirCall &c) {
    ++calls;
    CHECK(c.version == 1);
    CHECK(c.args.size() == 1);
    CHECK(c.args[0].nodes.size() == 1);
    c.name = "nn.relu";
  });
  auto up = parseOrFail(old, &l);
  CHECK(calls == 1);
  CHECK(compareModules(*m, *up).value_or("") == "");
  // The default loaders do not know the old name.
  TmirReadOptions o;
  auto bad = parseTmir(old, "old.tmir", o);
  REQUIRE(bad.failed());
  CHECK(bad.diagnostic().str().find("unknown function 'nn.rectify'") != std::string::npos);
  CHECK(bad.diagnostic().str().find("old.tmir:") == 0);
}

TEST_CASE("a tensor method loader rewrites a constant argument", "[io][tmir][loaders]") {
  auto m = smallNet();
  TmirLoaders l;
  l.registerTensorMethodLoader("__mul__", 1, [](TmirCall &c) {
    REQUIRE(c.args.size() == 2);
    REQUIRE(c.args[1].isConstant());
    c.args[1] = TmirArg::constant(Scalar(2));
  });
  auto up = parseOrFail(asVersion(*m, 1), &l);
  Tensor x = Tensor::fromFloats({2, 3}, {-1, 2, -3, 4, -5, 6});
  Tensor y = Tensor::fromFloats({2, 3}, {1, 1, 1, 1, 1, 1});
  auto want = run(*m, {x, rt::binary(rt::BinaryOp::Mul, y, Tensor::fromFloats({}, {2}))});
  auto got = run(*up, {x, y});
  CHECK(rt::compareTensors(got[0], want[0]).ok());
  // Loaders apply to older files only.
  auto same = parseOrFail(print(*m), &l);
  CHECK(compareModules(*m, *same).value_or("") == "");
}

TEST_CASE("a module loader upgrades the attributes of old modules", "[io][tmir][loaders]") {
  auto m = smallNet();
  // On top of tmgraph's own upgrades (version 0 needs them).
  TmirLoaders l = TmirLoaders::builtin();
  std::vector<int64_t> seen;
  l.registerModuleLoader("Softmax", 0, [&](Module &mod, int64_t v) {
    seen.push_back(v);
    mod.setValue("axis", Scalar(0));
  });
  l.registerModuleLoader("Softmax", 1, [&](Module &mod, int64_t v) {
    seen.push_back(v);
    CHECK(mod.scalar("axis").getInt() == (v == 0 ? 0 : 1));
  });
  auto v1 = parseOrFail(asVersion(*m, 1), &l);
  CHECK(seen == std::vector<int64_t>{1});
  CHECK(v1->module("sm")->scalar("axis").getInt() == 1);
  seen.clear();
  auto v0 = asVersion(*m, 0);
  // Version 0 spelled the qualname `module_name`.
  v0 = replaceAll(v0, " qualname='Net' ", " module_name='Net' ");
  auto up = parseOrFail(v0, &l);
  CHECK(seen == std::vector<int64_t>{0, 0}); // both loaders, in version order
  CHECK(up->module("sm")->scalar("axis").getInt() == 0);
}

TEST_CASE("an op def loader changes the mode and the inputs", "[io][tmir][loaders]") {
  auto tm = std::make_unique<TracedModule>("Net", true);
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3}}, {"y", Shape{3}}});
  auto outs = b.apply(op(OpKind::ElemwiseDef), {b.arg(0), b.arg(1)}, 1,
                      TreeDef::dict({{Scalar("mode"), TreeDef::constant(Scalar("ADD"))}}));
  b.finish(outs[0]);
  TmirLoaders l;
  l.registerOpDefLoader("Elemwise", 1, [](TmirCall &c) {
    int64_t k = c.attrs.findStringKey("mode");
    REQUIRE(k >= 0);
    CHECK(c.attrs.child(size_t(k)).value().getString() == "ADD");
    c.attrs = TreeDef::dict({{Scalar("mode"), TreeDef::constant(Scalar("MUL"))}});
    std::swap(c.args[0], c.args[1]);
  });
  auto up = parseOrFail(asVersion(*tm, 1), &l);
  Expr *e = *up->graph().exprs(false).asList().rbegin();
  auto *ap = llvm::dyn_cast<Apply>(e);
  REQUIRE(ap);
  CHECK(ap->attrs().child(0).value().getString() == "MUL");
  CHECK(ap->input(0)->name() == "y");
}

TEST_CASE("loaders: registration and chaining", "[io][tmir][loaders]") {
  TmirLoaders l;
  auto noop = [](TmirCall &) {};
  l.registerFunctionLoader("nn.relu", 1, noop);
  CHECK_THROWS_WITH(l.registerFunctionLoader("nn.relu", 1, noop),
                    Catch::Contains("already registered"));
  CHECK(l.hasCallLoader(TmirLoaderKind::Function, "nn.relu", 0));
  CHECK(l.hasCallLoader(TmirLoaderKind::Function, "nn.relu", 1));
  CHECK_FALSE(l.hasCallLoader(TmirLoaderKind::Function, "nn.relu", 2));
  CHECK_FALSE(l.hasCallLoader(TmirLoaderKind::TensorMethod, "nn.relu", 0));

  // A rename at version 0 hands over to the new name's loaders after it.
  TmirLoaders chain;
  std::vector<std::string> order;
  chain.registerFunctionLoader("a.f", 0, [&](TmirCall &c) {
    order.push_back("a.f@0");
    c.name = "b.g";
  });
  chain.registerFunctionLoader("b.g", 0, [&](TmirCall &) { order.push_back("b.g@0"); });
  chain.registerFunctionLoader("b.g", 1, [&](TmirCall &) { order.push_back("b.g@1"); });
  TmirCall c;
  c.name = "a.f";
  c.version = 0;
  chain.upgradeCall(TmirLoaderKind::Function, c);
  CHECK(order == std::vector<std::string>{"a.f@0", "b.g@1"});

  // Arguments move to keywords and back into one sorted TreeDef.
  TreeDef args = makeArgDef({TreeDef::leaf(), TreeDef::constant(Scalar("int32")),
                             TreeDef::leaf()},
                            {{Scalar("z"), TreeDef::leaf()}});
  TmirCall s = splitCallArgs(args, {4, 5, 6});
  s.moveToKeywords(1, {"a", "b"});
  std::vector<int64_t> ids;
  TreeDef joined = joinCallArgs(s, ids);
  CHECK(joined.str() == makeArgDef({TreeDef::leaf()},
                                   {{Scalar("a"), TreeDef::constant(Scalar("int32"))},
                                    {Scalar("b"), TreeDef::leaf()},
                                    {Scalar("z"), TreeDef::leaf()}})
                            .str());
  CHECK(ids == std::vector<int64_t>{4, 5, 6});
}

TEST_CASE("an old graph field no loader takes is an error at its line",
          "[io][tmir][loaders]") {
  auto m = smallNet();
  std::string old = replaceAll(asVersion(*m, 1), " qualname='Net' ", " qualname='Net' owner='x' ");
  TmirReadOptions o;
  auto r = parseTmir(old, "old.tmir", o);
  REQUIRE(r.failed());
  CHECK(r.diagnostic().str().find("unknown graph field 'owner' in a version-1 file") !=
        std::string::npos);
  CHECK(r.diagnostic().str().find("old.tmir:") == 0);
}
