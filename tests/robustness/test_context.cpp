//===- test_context.cpp - Two contexts in one process -------------------===//
//
// What decides results lives in a tmg::Context the program owns: passes,
// presets, .tmir loaders, interpreter options. Two contexts in one process
// do not see each other's registrations or options.
//
//===----------------------------------------------------------------------===//
#include <thread>

#include "tm/Context.h"
#include "tm/ir/Builder.h"
#include "tm/runtime/Conv.h"

using namespace tmg;

namespace {

int runs = 0;

/// A pass of one context only; `needs` names its prerequisite.
class Marker : public Pass {
public:
  Marker(std::string name, std::vector<std::string> needs = {})
      : name_(std::move(name)), needs_(std::move(needs)) {}
  llvm::StringRef name() const override { return name_; }
  llvm::StringRef description() const override { return "test: counts its runs"; }
  std::vector<std::string> prerequisites() const override { return needs_; }
  std::unique_ptr<Pass> clone() const override { return std::make_unique<Marker>(*this); }
  FailureOr<bool> run(TracedModule &, PassContext &) override {
    ++runs;
    return false;
  }

private:
  std::string name_;
  std::vector<std::string> needs_;
};

std::unique_ptr<TracedModule> convNet() {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  auto &conv = tm->addModule<Conv2d>("conv", 8, 16, 3, 1, 1, 1, 1, true, 7);
  (void)conv;
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 8, 12, 12}}});
  Node *c = b.getAttr(b.self(), "conv");
  b.finish(b.callModule(c, {b.arg(0)}));
  return tm;
}

} // namespace

TEST_CASE("a pass registered in one context is unknown to another", "[context]") {
  Context a, b;
  a.passes().add("my-pass", [] { return std::make_unique<Marker>("my-pass"); });
  CHECK(a.parsePipeline("flatten,my-pass").succeeded());
  auto p = b.parsePipeline("flatten,my-pass");
  REQUIRE(p.failed());
  CHECK(p.diagnostic().str().find("my-pass") != std::string::npos);
  // Both have every pass of tmgraph.
  CHECK(a.parsePipeline("optimize").succeeded());
  CHECK(b.parsePipeline("optimize").succeeded());
}

TEST_CASE("a pass's prerequisites come from its pipeline's context", "[context]") {
  Context a, b;
  a.passes().add("prereq", [] { return std::make_unique<Marker>("prereq"); });
  for (Context *c : {&a, &b})
    c->passes().add("needs-prereq", [] {
      return std::make_unique<Marker>("needs-prereq", std::vector<std::string>{"prereq"});
    });
  auto m = convNet();
  runs = 0;
  PassManager pa(std::move(*a.parsePipeline("needs-prereq")), {});
  REQUIRE(pa.run(*m).succeeded());
  CHECK(runs == 2);
  PassManager pb(std::move(*b.parsePipeline("needs-prereq")), {});
  auto r = pb.run(*m);
  REQUIRE(r.failed());
  CHECK(r.diagnostic().str().find("requires pass 'prereq', which its registry does not have") !=
        std::string::npos);
}

TEST_CASE("a .tmir loader registered in one context upgrades files there only", "[context]") {
  Context a, b;
  // Files up to version 3 of a user library called relu `mylib.rectify`.
  a.loaders().registerFunctionLoader("mylib.rectify", 3,
                                     [](TmirCall &c) { c.name = "nn.relu"; });
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder g = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}});
  g.finish(g.callFunction("relu", {g.arg(0)}));
  std::string text = printTmir(*tm);
  text = "tmir 3" + text.substr(text.find('\n'));
  for (size_t p; (p = text.find("nn.relu")) != std::string::npos;)
    text.replace(p, 7, "mylib.rectify");
  auto ra = a.parseTmir(text, "old.tmir");
  REQUIRE(ra.succeeded());
  CHECK(printTmir(**ra) == printTmir(*tm));
  CHECK(b.parseTmir(text, "old.tmir").failed());
}

TEST_CASE("interpreter options are the context's: two GEMM paths side by side", "[context]") {
  Context blas, fast;
  blas.interpreter.convGemm = rt::ConvGemm::Blas;
  auto m = convNet();
  Tensor x = Tensor::randn({1, 8, 12, 12}, 3);
  const Tensor &w = *m->resolveTensor("conv.weight");
  const Tensor &bias = *m->resolveTensor("conv.bias");
  rt::Conv2dParams p{.padding = 1};
  rt::Conv2dParams pb = p;
  pb.gemm = rt::ConvGemm::Blas;
  Tensor wantBlas = rt::conv2d(x, w, bias, pb), wantAuto = rt::conv2d(x, w, bias, p);
  // Both interpreters run at once in one process, each with its own path.
  Tensor got[2];
  std::thread t1([&] { got[0] = rt::Interpreter(*m, blas.interpreter).run({x}).outputs[0]; });
  std::thread t2([&] { got[1] = rt::Interpreter(*m, fast.interpreter).run({x}).outputs[0]; });
  t1.join();
  t2.join();
  CHECK(got[0].bitwiseEqual(wantBlas));
  CHECK(got[1].bitwiseEqual(wantAuto));
}
