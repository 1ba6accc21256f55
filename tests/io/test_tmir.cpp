//===- test_tmir.cpp - The .tmir format: round trips and errors ----------===//
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>

#include "../../io/TmirCommon.h"
#include "../ir/Fixtures.h"
#include "tm/io/Tmir.h"

using namespace tmg;
using namespace fixtures;

namespace {

/// print -> parse -> print gives the same text, and the parsed module equals
/// the original structurally (ids, names, attributes, weights).
void roundTrip(const TracedModule &m) {
  WeightFile w;
  TmirWriteOptions wo;
  wo.weights = &w;
  std::string text = printTmir(m, wo);
  INFO(text);
  TmirReadOptions ro;
  ro.weights = &w;
  auto parsed = parseTmir(text, "rt.tmir", ro);
  if (parsed.failed())
    FAIL(parsed.diagnostic().str());
  auto diff = compareModules(m, **parsed);
  CHECK(diff.value_or("") == "");
  WeightFile w2;
  TmirWriteOptions wo2;
  wo2.weights = &w2;
  CHECK(printTmir(**parsed, wo2) == text);
  // Weights survive a trip through safetensors bytes too.
  auto bytes = serializeSafetensors(w);
  REQUIRE(bytes.succeeded());
  auto back = parseSafetensors(*bytes);
  REQUIRE(back.succeeded());
  REQUIRE(back->tensors.size() == w.tensors.size());
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    CHECK(back->tensors[i].first == w.tensors[i].first);
    CHECK(back->tensors[i].second.bitwiseEqual(w.tensors[i].second));
  }
}

std::string errorOf(llvm::StringRef text, const WeightFile *w = nullptr) {
  TmirReadOptions ro;
  ro.weights = w;
  auto r = parseTmir(text, "bad.tmir", ro);
  REQUIRE(r.failed());
  return r.diagnostic().str();
}

} // namespace

TEST_CASE("round trip: the reference fixtures", "[io][tmir]") {
  roundTrip(*docstringMyModule());
  roundTrip(*tracedMyBlock());
  auto my = tracedMyModule();
  roundTrip(*my);
  roundTrip(*my->flatten());
  roundTrip(*addOneModule());
}

TEST_CASE("round trip: constants, op defs, kwargs, multi-outputs, keep", "[io][tmir]") {
  auto m = std::make_unique<Module>("Net");
  m->registerParameter("w", Tensor::randn({2, 3}, 5));
  m->setValue("label", Scalar("it's \"quoted\"\tand tabbed"));
  m->setValue("dims", TreeDef::tuple({TreeDef::constant(Scalar(1)), TreeDef::constant(Scalar(2.5))}));
  m->addModule<Conv2d>("conv", 3, 4, 3);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"idx", Shape{2}, DType::Int64}});
  Node *c = b.constant(Tensor::fromInts({3}, {1, 2, 3}, DType::Int32), "table");
  Node *cm = b.constant(std::make_unique<Softmax>(1));
  Node *s = b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0];
  auto parts = b.callFunctionN(functionOp("split"), {b.arg(0), Arg::list({1})}, {{"axis", 1}}, 2);
  Node *item = b.callMethod(b.arg(0), "__getitem__",
                            {Arg::tuple({Arg::slice(Arg::none(), 1, Arg::none()), Scalar::ellipsis()})});
  Node *r = b.callFunction("reshape", {item, Arg::ints({-1})});
  r->expr()->disableRemove();
  Node *sm = b.callModule(cm, {parts[0]});
  Node *p = b.callFunction("pad", {sm, Arg::tuple({Arg::ints({0, 0}), Arg::ints({1, 1})})},
                           {{"mode", "reflect"}});
  b.finish(Arg::dict({{Scalar("a"), p}, {Scalar("b"), Arg::list({parts[1], s, c})}}));
  std::string text = printTmir(*tm);
  CHECK(text.find("keep") != std::string::npos);
  CHECK(text.find("label = 'it\\'s \"quoted\"\\tand tabbed'") != std::string::npos);
  roundTrip(*tm);
}

TEST_CASE("round trip: tensor slice bounds keep their start, stop, step order", "[io][tmir]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 6}}, {"idx", Shape{3}, DType::Int64}});
  Node *lo = b.callMethod(b.arg(1), "__getitem__", {0});
  Node *hi = b.callMethod(b.arg(1), "__getitem__", {1});
  Node *st = b.callMethod(b.arg(1), "__getitem__", {2});
  Node *y = b.callMethod(
      b.arg(0), "__getitem__",
      {Arg::tuple({Arg::slice(Arg::none(), Arg::none(), Arg::none()), Arg::slice(lo, hi, st)})});
  b.finish(y);
  std::string want = fmt::format("slice({}, {}, {})", lo->name(), hi->name(), st->name());
  CHECK(printTmir(*tm).find(want) != std::string::npos);
  roundTrip(*tm);
}

TEST_CASE("round trip: nested modules with several signatures", "[io][tmir]") {
  auto m = std::make_unique<Module>("Net");
  m->registerModule("mod", std::make_unique<Module>("AddK"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  auto body = [](int k) {
    return [k](GraphBuilder &sb) { sb.setOutputs(sb.callMethod(sb.arg(0), "__add__", {k})); };
  };
  Node *mod = b.getAttr(b.self(), "mod");
  Node *x = b.callModule(mod, {b.arg(0), 1}, {}, body(1), {"x", "k"});
  b.finish(b.callModule(mod, {x, 2}, {}, body(2), {"x", "k"}));
  roundTrip(*tm);
}

TEST_CASE("saveTmir / loadTmir write .tmir and .safetensors beside it", "[io][tmir]") {
  auto tm = tracedMyModule();
  std::string path = "tmir_save_test.tmir";
  REQUIRE(succeeded(saveTmir(*tm, path)));
  auto loaded = loadTmir(path);
  if (loaded.failed())
    FAIL(loaded.diagnostic().str());
  CHECK(compareModules(*tm, **loaded).value_or("") == "");
  auto w = readSafetensors("tmir_save_test.safetensors");
  REQUIRE(w.succeeded());
  CHECK(w->find("block0.conv1.weight") != nullptr);
  CHECK(w->metadata.at("format") == "tmgraph");
  std::remove(path.c_str());
  std::remove("tmir_save_test.safetensors");
}

TEST_CASE("printing to a sink gives the text in pieces; saveTmir streams it to "
          "the file",
          "[io][tmir]") {
  // A graph whose text is a few MiB: the sink gets it in pieces of about
  // 1 MiB, which together are the text printTmir returns.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Chain"));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x", Shape{4})});
  Node *x = b.arg(0);
  for (int i = 0; i < 30000; ++i)
    x = b.callFunction(i % 2 ? "relu" : "neg", {x});
  b.finish(x);
  std::string whole = printTmir(*tm);
  REQUIRE(whole.size() > (size_t(3) << 20));
  std::vector<std::string> pieces;
  printTmir(*tm, {}, [&](llvm::StringRef p) { pieces.push_back(p.str()); });
  REQUIRE(pieces.size() >= 3);
  std::string joined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (i + 1 < pieces.size())
      CHECK(pieces[i].size() >= (size_t(1) << 20));
    joined += pieces[i];
  }
  CHECK(joined == whole);

  std::string path = "tmir_stream_test.tmir";
  REQUIRE(succeeded(saveTmir(*tm, path)));
  auto text = readFileBytes(path);
  REQUIRE(succeeded(text));
  auto loaded = parseTmir(*text, path);
  if (loaded.failed())
    FAIL(loaded.diagnostic().str());
  CHECK(compareModules(*tm, **loaded).value_or("") == "");
  std::remove(path.c_str());
  std::remove("tmir_stream_test.safetensors");
}

TEST_CASE("malformed .tmir input is reported with file:line:col", "[io][tmir]") {
  auto tm = addOneModule();
  WeightFile w;
  TmirWriteOptions wo;
  wo.weights = &w;
  std::string good = printTmir(*tm, wo);
  auto replace = [&](std::string from, std::string to) {
    std::string t = good;
    size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  CHECK(errorOf("") == "bad.tmir:1:1: error: unexpected end of file");
  CHECK(errorOf("tmir 7\n").find("bad.tmir:1:") != std::string::npos);
  CHECK(errorOf("tmir 7\n").find("unsupported .tmir version 7") != std::string::npos);
  CHECK(errorOf("hello\n").find("not a .tmir file") != std::string::npos);
  // Unknown op.
  std::string e = errorOf(replace("method=__add__", "method=__addd__"), &w);
  CHECK(e.find("bad.tmir:6:") == 0);
  CHECK(e.find("unknown tensor method '__addd__'") != std::string::npos);
  // Bad shape.
  e = errorOf(replace("float32(1,)", "float32(-1,)"), &w);
  CHECK(e.find("bad.tmir:4:") == 0);
  CHECK(e.find("dimensions must be non-negative") != std::string::npos);
  // Undefined node.
  e = errorOf(replace("args=((%1, 1), {})", "args=((%9, 1), {})"), &w);
  CHECK(e.find("bad.tmir:6:") == 0);
  CHECK(e.find("undefined node %9") != std::string::npos);
  // Duplicate node id.
  e = errorOf(replace("outs=[%2 'add_out'", "outs=[%1 'add_out'"), &w);
  CHECK(e.find("node id %1 is defined twice") != std::string::npos);
  // The printed part disagrees with the annotations.
  e = errorOf(replace("x.__add__(1, )", "x.__add__(2, )"), &w);
  CHECK(e.find("bad.tmir:6:") == 0);
  CHECK(e.find("does not match the annotations") != std::string::npos);
  // Unknown dtype.
  e = errorOf(replace("float32(1,)", "float33(1,)"), &w);
  CHECK(e.find("bad.tmir:4:") == 0);
  CHECK(e.find("unknown dtype 'float33'") != std::string::npos);
  // A graph without its return line, a truncated file.
  e = errorOf(replace("\treturn add_out\t;; outs=[%2]\n", ""), &w);
  CHECK(e.find("graph ends without a return line") != std::string::npos);
  e = errorOf(good.substr(0, good.find("\treturn")), &w);
  CHECK(e.find("unexpected end of file") != std::string::npos);
}

TEST_CASE("weights: missing, mismatched, unknown module types", "[io][tmir]") {
  auto tm = docstringMyModule();
  WeightFile w;
  TmirWriteOptions wo;
  wo.weights = &w;
  std::string text = printTmir(*tm, wo);
  std::string e = errorOf(text);
  CHECK(e.find("bad.tmir:4:") == 0);
  CHECK(e.find("tensor 'param' needs a weights file") != std::string::npos);
  WeightFile wrong = w;
  wrong.tensors[0].second = Tensor::zeros({2});
  e = errorOf(text, &wrong);
  CHECK(e.find("is float32(2,) in the weights file but float32(3, 4) here") !=
        std::string::npos);
  std::string t2 = text;
  t2.replace(t2.find("Linear builtin"), 6, "Lineer");
  e = errorOf(t2, &w);
  CHECK(e.find("unknown builtin module type 'Lineer'") != std::string::npos);
  // Viewing without weights: zeros on request.
  TmirReadOptions ro;
  ro.missingWeightsAsZeros = true;
  auto r = parseTmir(text, "view.tmir", ro);
  REQUIRE(r.succeeded());
  CHECK((*r)->tensor("param")->at(0) == 0.0);
}

TEST_CASE("a version-0 file is upgraded as the reference's __setstate__", "[io][tmir]") {
  auto m = loadTmir(std::string(TM_TEST_FILES) + "/v0_net.tmir");
  if (m.failed())
    FAIL(m.diagnostic().str());
  TracedModule &tm = **m;
  InternalGraph &g = tm.graph();
  // _module_name -> qualname; _prefix_name + name -> name.
  auto *block = llvm::cast<TracedModule>(tm.module("block"));
  CHECK(block->graph().name() == "Net_block");
  CHECK(block->graph().qualname() == "Net.block");
  // _orig_name -> qualname: GetAttr keeps the path, other tensors get
  // brackets, module-call outputs are "<module>.[out]".
  auto q = [](InternalGraph &gr, const char *name) {
    return gr.getNodeByName(gr.name() + "_" + name, false, false).asUnique()->qualname();
  };
  CHECK(q(block->graph(), "self") == "Net.block");
  CHECK(q(block->graph(), "x") == "Net.block.[x]");
  CHECK(q(block->graph(), "scale") == "Net.block.scale");
  CHECK(q(block->graph(), "mul_out") == "Net.block.[mul_out]");
  CHECK(q(block->graph(), "act") == "Net.block.act");
  CHECK(q(block->graph(), "act_out") == "Net.block.act.[out]");
  CHECK(q(g, "add_out") == "Net.[add_out]");
  CHECK(q(g, "block_out") == "Net.block.[out]");
  CHECK(block->tensor("scale")->at(1) == 2.0);
  checkVerified(tm);
  // Written back, it is a current-version file that reads back equal.
  std::string v1 = printTmir(tm, [] {
    TmirWriteOptions o;
    o.inlineMaxElements = 16;
    return o;
  }());
  CHECK(v1.rfind(fmt::format("tmir {}\n", TmirVersion), 0) == 0);
  auto again = parseTmir(v1, "v1.tmir");
  REQUIRE(again.succeeded());
  CHECK(compareModules(tm, **again).value_or("") == "");
}

// The parser caches `args=` TreeDefs by their text with node ids left out,
// so `x.__add__(y)` and `sm(x)` share one entry ("((%, %), {})"); the module
// leaf must still come out as a Module leaf, whichever line comes first.
TEST_CASE("parser: cached args structures keep module and tensor leaves apart",
          "[io][tmir]") {
  auto m = std::make_unique<Module>("Net");
  m->addModule<Softmax>("sm", 1);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}});
  Node *s = b.callMethod(b.arg(0), "__add__", {b.arg(1)});
  Node *sm = b.getAttr(b.self(), "sm");
  Node *o = b.callModule(sm, {s});
  Node *o2 = b.callModule(sm, {o});
  b.finish(b.callMethod(o2, "__add__", {s}));
  roundTrip(*tm);
  auto parsed = parseTmir(printTmir(*tm), "cache.tmir");
  REQUIRE(parsed.succeeded());
  size_t calls = 0;
  for (Expr *e : (*parsed)->graph()) {
    auto *cm = llvm::dyn_cast<CallMethod>(e);
    if (!cm)
      continue;
    TreeDef::LeafType want =
        cm->isModuleCall() ? TreeDef::LeafType::Module : TreeDef::LeafType::Tensor;
    CHECK(cm->argDef()->child(0).child(0).leafType() == want);
    CHECK(cm->argDef()->child(0).child(1).leafType() == TreeDef::LeafType::Tensor);
    ++calls;
  }
  CHECK(calls == 4);
}

TEST_CASE("parser: errors on lines whose args are cached", "[io][tmir]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Chain"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *x = b.callMethod(b.arg(0), "__add__", {1});
  b.finish(b.callMethod(x, "__add__", {1}));
  std::string text = printTmir(*tm);
  // Repeat the second add's args annotation on its line: the first add put
  // that structure in the cache, so both values are cache hits, and the
  // duplicate is still reported at the second key's column.
  size_t a = text.rfind(" args=");
  REQUIRE(a != std::string::npos);
  size_t end = text.find(' ', a + 1);
  while (text[end - 1] != ')')
    end = text.find(' ', end + 1);
  std::string dup = text.substr(a, end - a);
  std::string bad = text;
  bad.insert(end, dup);
  size_t lineStart = bad.rfind('\n', end) + 1;
  size_t line = size_t(std::count(bad.begin(), bad.begin() + long(lineStart), '\n')) + 1;
  std::string want = "bad.tmir:" + std::to_string(line) + ":" +
                     std::to_string(end + 1 - lineStart + 1) +
                     ": error: duplicate annotation 'args'";
  CHECK(errorOf(bad).rfind(want, 0) == 0);
}

TEST_CASE("sortStringsBytewise orders as std::sort does", "[io][tmir]") {
  std::mt19937 rng(7);
  std::vector<std::string> store;
  const char alphabet[] = {'a', 'b', '_', '1', '\0', '\xff'};
  for (int i = 0; i < 3000; ++i) {
    std::string s = i % 3 ? "method_add_" : "";
    size_t len = rng() % 20;
    for (size_t k = 0; k < len; ++k)
      s += alphabet[rng() % sizeof alphabet];
    store.push_back(s);
    if (i % 50 == 0)
      store.push_back(s); // duplicates
  }
  std::vector<llvm::StringRef> v(store.begin(), store.end()), want = v;
  std::sort(want.begin(), want.end());
  sortStringsBytewise(v);
  REQUIRE(v.size() == want.size());
  for (size_t i = 0; i < v.size(); ++i)
    CHECK(v[i] == want[i]);
}

TEST_CASE("a parameter shared by two modules is stored once and shared again on load",
          "[io][tmir][shared]") {
  // test_module.py::test_shared_param: shared weights stay shared after
  // save and load.
  auto m = std::make_unique<Module>("Net");
  auto &a = m->addModule<Linear>("a", 4, 4, true, 1);
  auto &b = m->addModule<Linear>("b", 4, 4, true, 2);
  b.registerParameter("weight", *a.tensor("weight"));
  // Small enough to be written inline: shared tensors still go by reference.
  m->registerBuffer("s1", Tensor::full({2}, 3.0));
  m->registerBuffer("s2", *m->tensor("s1"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder gb = GraphBuilder::top(*tm, {{"x", Shape{2, 4}}});
  Node *y = gb.callModule(gb.getAttr(gb.self(), "a"), {gb.arg(0)});
  gb.finish(gb.callModule(gb.getAttr(gb.self(), "b"), {y}));
  WeightFile w;
  TmirWriteOptions wo;
  wo.weights = &w;
  wo.inlineMaxElements = 4;
  std::string text = printTmir(*tm, wo);
  INFO(text);
  CHECK(text.find("weight = param(float32(4, 4), @'a.weight')") != std::string::npos);
  CHECK(text.find("s2 = buffer(float32(2,), @'s1')") != std::string::npos);
  std::vector<std::string> keys;
  for (const auto &[k, t] : w.tensors)
    keys.push_back(k);
  // a.bias and b.bias (4 elements) are inline; a.weight and s1 once each.
  CHECK(keys == std::vector<std::string>{"a.weight", "s1"});
  TmirReadOptions ro;
  ro.weights = &w;
  auto back = parseTmir(text, "shared.tmir", ro);
  if (back.failed())
    FAIL(back.diagnostic().str());
  TracedModule &l = **back;
  CHECK(l.resolveTensor("a.weight")->sharesStorage(*l.resolveTensor("b.weight")));
  CHECK(l.resolveTensor("s1")->sharesStorage(*l.resolveTensor("s2")));
  CHECK(!l.resolveTensor("a.bias")->sharesStorage(*l.resolveTensor("b.bias")));
  CHECK(compareModules(*tm, l).value_or("") == "");
  // Through files as well.
  std::string path = "tmir_shared_test.tmir";
  REQUIRE(succeeded(saveTmir(*tm, path)));
  auto loaded = loadTmir(path);
  REQUIRE(loaded.succeeded());
  CHECK((*loaded)->resolveTensor("a.weight")->sharesStorage(*(*loaded)->resolveTensor("b.weight")));
  auto file = readSafetensors("tmir_shared_test.safetensors");
  REQUIRE(file.succeeded());
  CHECK(file->find("b.weight") == nullptr);
  std::remove(path.c_str());
  std::remove("tmir_shared_test.safetensors");
}
