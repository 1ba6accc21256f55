//===- test_options.cpp - Typed pass options ------------------------------===//
#include "tm/passes/PassManager.h"
#include "tm/passes/RulePasses.h"

using namespace tmg;

namespace {
enum class Mode { Fast, Exact };

/// A pass with an option of every kind.
struct Knobs : PassWrapper<Knobs> {
  static constexpr const char *Name = "knobs";
  static constexpr const char *Description = "options of every kind";
  Option<int64_t> count{*this, "count", llvm::cl::desc("how many"), llvm::cl::init(3)};
  Option<double> scale{*this, "scale", llvm::cl::desc("a factor"), llvm::cl::init(0.5)};
  Option<bool> strict{*this, "strict", llvm::cl::desc("fail early")};
  Option<std::string> label{*this, "label", llvm::cl::desc("a name"),
                            llvm::cl::init(std::string("none"))};
  Option<Mode> mode{*this, "mode", llvm::cl::desc("how to work"), llvm::cl::init(Mode::Fast),
                    llvm::cl::values(clEnumValN(Mode::Fast, "fast", "quickly"),
                                     clEnumValN(Mode::Exact, "exact", "carefully"))};
  ListOption<int64_t> sizes{*this, "sizes", llvm::cl::desc("sizes to keep")};
  FailureOr<bool> run(TracedModule &, PassContext &) override { return false; }
};

PassRegistry &knobsRegistry() {
  static PassRegistry r = [] {
    PassRegistry x;
    x.add<Knobs>();
    return x;
  }();
  return r;
}

const Knobs &knobs(const Pipeline &p, size_t i = 0) {
  return static_cast<const Knobs &>(*p.elements[i].pass);
}

std::string parseError(llvm::StringRef text) {
  auto p = Pipeline::parse(text, knobsRegistry());
  REQUIRE(p.failed());
  return p.diagnostic().str();
}

std::string tomlError(llvm::StringRef options) {
  std::string text = "[pipeline]\npasses = [\"knobs\"]\n[passes.knobs]\n" + options.str();
  auto f = parsePipelineToml(text, "k.toml", knobsRegistry());
  REQUIRE(f.failed());
  return f.diagnostic().str();
}
} // namespace

TEST_CASE("typed options: declaration gives defaults, types and help", "[passes][options]") {
  Knobs k;
  REQUIRE(k.options().size() == 6);
  CHECK(k.count == 3);
  CHECK(*k.scale == 0.5);
  CHECK(!k.strict);
  CHECK(*k.label == "none");
  CHECK(k.mode == Mode::Fast);
  CHECK(k.sizes.empty());
  std::vector<std::string> seen;
  for (const PassOptionBase *o : k.options())
    seen.push_back(fmt::format("{}=<{}> {} {}", o->name(), o->typeName(), o->defaultStr(),
                               o->description()));
  CHECK(seen == std::vector<std::string>{"count=<int> 3 how many", "scale=<float> 0.5 a factor",
                                         "strict=<bool> false fail early",
                                         "label=<string> none a name",
                                         "mode=<fast|exact> fast how to work",
                                         "sizes=<list of int> [] sizes to keep"});
  CHECK(!k.count.isSet());
}

TEST_CASE("typed options: the pipeline text fills them and round-trips", "[passes][options]") {
  auto p = Pipeline::parse("knobs{count=-7 scale=2 strict=true, label=\"a b\" mode=exact "
                           "sizes=[1, 2,3]},knobs",
                           knobsRegistry());
  REQUIRE(p.succeeded());
  const Knobs &k = knobs(*p);
  CHECK(k.count == -7);
  CHECK(k.scale == 2.0); // an int is a fine float
  CHECK(k.strict);
  CHECK(*k.label == "a b");
  CHECK(k.mode == Mode::Exact);
  CHECK(*k.sizes == std::vector<int64_t>{1, 2, 3});
  CHECK(knobs(*p, 1).count == 3);
  std::string text = p->str();
  CHECK(text == "knobs{count=-7,label=\"a b\",mode=exact,scale=2.0,sizes=[1,2,3],strict=true},"
                "knobs");
  auto again = Pipeline::parse(text, knobsRegistry());
  REQUIRE(again.succeeded());
  CHECK(again->str() == text);
  CHECK(*knobs(*again).sizes == *k.sizes);
  // A single value is a list of one; an empty list is a list.
  CHECK(Pipeline::parse("knobs{sizes=4}", knobsRegistry())->str() == "knobs{sizes=[4]}");
  CHECK(Pipeline::parse("knobs{sizes=[]}", knobsRegistry())->str() == "knobs{sizes=[]}");
}

TEST_CASE("typed options: clones keep their own values", "[passes][options]") {
  Knobs k;
  k.count = 9;
  std::unique_ptr<Pass> c = k.clone();
  REQUIRE(c->options().size() == 6);
  REQUIRE(c->setOption("count", 11).succeeded());
  CHECK(k.count == 9);
  CHECK(static_cast<Knobs &>(*c).count == 11);
  CHECK(c->findOption("count") == &static_cast<Knobs &>(*c).count);
}

TEST_CASE("typed options: options in a member struct follow the clone", "[passes][options]") {
  FoldDoubleReluPass p; // GreedyOptions greedy{*this}
  REQUIRE(p.setOption("max-iterations", 3).succeeded());
  std::unique_ptr<Pass> c = p.clone();
  auto &copy = static_cast<FoldDoubleReluPass &>(*c);
  REQUIRE(c->options().size() == p.options().size());
  PassOptionBase *o = c->findOption("max-iterations");
  REQUIRE(o);
  CHECK(o->valueStr() == "3");
  REQUIRE(copy.setOption("max-iterations", 5).succeeded());
  CHECK(p.findOption("max-iterations")->valueStr() == "3");
  CHECK(o->valueStr() == "5");
}

TEST_CASE("typed options: errors name the pass, the option and the place",
          "[passes][options]") {
  CHECK(parseError("knobs{count=1.5}") ==
        "<pipeline>:1:7: error: option 'count' of pass 'knobs' expects an int, got float "
        "'1.5'");
  CHECK(parseError("knobs{strict=1}") ==
        "<pipeline>:1:7: error: option 'strict' of pass 'knobs' expects a bool, got int '1'");
  CHECK(parseError("knobs{cuont=1}") ==
        "<pipeline>:1:7: error: pass 'knobs' has no option 'cuont'; did you mean 'count'?");
  CHECK(parseError("knobs{count=1 mdoe=fast}") ==
        "<pipeline>:1:15: error: pass 'knobs' has no option 'mdoe'; did you mean 'mode'?");
  CHECK(parseError("knobs{mode=exct}") ==
        "<pipeline>:1:7: error: option 'mode' of pass 'knobs' expects one of fast|exact, got "
        "string 'exct'; did you mean 'exact'?");
  CHECK(parseError("knobs{sizes=[1,x,3]}") ==
        "<pipeline>:1:7: error: option 'sizes' of pass 'knobs' expects a list of int, got "
        "list '[1,x,3]' (element 2 is string 'x')");
  CHECK(parseError("knobs{count=[1]}") ==
        "<pipeline>:1:7: error: option 'count' of pass 'knobs' expects an int, got list "
        "'[1]'");
  CHECK(parseError("knobs{sizes=[1,2}") ==
        "<pipeline>:1:17: error: expected ',' or ']' in the list");
}

TEST_CASE("typed options: config files fill them with the same checks", "[passes][options]") {
  auto f = parsePipelineToml("[pipeline]\npasses = [\"knobs\"]\n[passes.knobs]\n"
                             "count = 5\nmode = \"exact\"\nsizes = [4, 5]\nscale = 1.25\n",
                             "k.toml", knobsRegistry());
  REQUIRE(f.succeeded());
  CHECK(f->pipeline.str() == "knobs{count=5,mode=exact,scale=1.25,sizes=[4,5]}");
  CHECK(tomlError("count = \"many\"\n") ==
        "k.toml:4:9: error: option 'count' of pass 'knobs' expects an int, got string 'many'");
  CHECK(tomlError("sizes = [1, 2.5]\n") ==
        "k.toml:4:9: error: option 'sizes' of pass 'knobs' expects a list of int, got list "
        "'[1,2.5]' (element 2 is float '2.5')");
  CHECK(tomlError("sizse = [1]\n") ==
        "k.toml:4:9: error: pass 'knobs' has no option 'sizse'; did you mean 'sizes'?");
}
