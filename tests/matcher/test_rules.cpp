//===- test_rules.cpp - Declarative rules in config files ----------------===//
#include <chrono>
#include <cstdio>
#include <fstream>

#include "../TestPasses.h"
#include "Common.h"
#include "tm/passes/PassManager.h"
#include "tm/passes/RulePasses.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
using namespace mtest;

namespace {
PassRegistry &reg() {
  PassRegistry &r = test::testPasses();
  registerMatcherPasses(r);
  return r;
}

std::string configError(const std::string &text) {
  auto p = parsePipelineToml(text, "rules.toml", reg());
  REQUIRE(p.failed());
  return p.diagnostic().str();
}

void runConfig(TracedModule &m, const std::string &text) {
  auto p = parsePipelineToml(text, "deploy.toml", reg());
  if (p.failed())
    FAIL(p.diagnostic().str());
  PipelineOptions o = p->options;
  o.verifyEach = true;
  PassManager pm(std::move(p->pipeline), o);
  if (auto r = pm.run(m); r.failed())
    FAIL(r.diagnostic().str());
}
} // namespace

TEST_CASE("the rule syntax mirrors the C++ DSL", "[rules]") {
  using namespace tmg::pat;
  CHECK(parsePattern("nn.relu(nn.relu($x))").str() == "nn.relu(nn.relu($x))");
  CHECK(parsePattern("relu($x) | sigmoid($x)").str() == "(nn.relu($x) | nn.sigmoid($x))");
  CHECK(parsePattern("$x + 1").str() == "$x.__add__(1)");
  CHECK(parsePattern("-$x * const").str() == "$x.__neg__().__mul__(const)");
  CHECK(parsePattern("clip($x, -1, 6.5)").str() == "elemwise.clip($x, -1, 6.5)");
  CHECK(parsePattern("conv2d(var, _, ...)").str() == "nn.conv2d(var, _, ...)");
  CHECK(parsePattern("leaky_relu($x, negative_slope=0.2)").str() ==
        "nn.leaky_relu($x, negative_slope=0.2)");
  CHECK(parsePattern("split($x, lit).output(1)").str() == "tensor.split($x, lit).output(1)");
  CHECK(parsePattern("Conv2d($x).has_attr(groups=1)").str() == "Conv2d($x).has_attr(groups=1)");
  CHECK(parsePattern("$r=relu(var).check_users(false)").str() ==
        "$r=nn.relu(var).check_users(false)");
  CHECK(parsePattern("$x.reshape((2, 3))").str() == "$x.reshape((2, 3))");
  CHECK(parsePattern("add($x, $y).ordered()").str() == "elemwise.add($x, $y).ordered()");
  // The same capture twice is one shared sub-pattern.
  Pattern sq(parsePattern("$x * $x"));
  CHECK(sq.size() == 2);
}

TEST_CASE("rules from a pipeline config rewrite the graph, numerics kept", "[rules]") {
  auto m = net([](GraphBuilder &b) {
    Node *c = b.callFunction("clip", {b.arg(0), 0, 6});
    Node *r = b.callFunction("relu", {b.callFunction("relu", {c})});
    return b.callMethod(r, "__mul__", {1});
  });
  Tensor x = Tensor::randn({2, 3}, 3);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] *= 8;
  Tensor want = rt::Interpreter(*m).run({x}).outputs[0];
  runConfig(*m, R"toml([pipeline]
passes = ["apply-rules", "compile"]

[[rules]]
name = "double-relu"
match = "nn.relu(nn.relu($x))"
replace = "nn.relu($x)"

[[rules]]
name = "relu6-from-clip"
match = "clip($x, 0, 6)"
replace = "nn.relu6($x)"
where = ["$x.rank == 2", "$x.dtype == float32"]

[[rules]]
name = "mul-one"
match = "$x * 1"
replace = "$x"
benefit = 2
)toml");
  CHECK(m->graph().str() == "Net.Graph (self, x) {\n"
                            "\t%6:\trelu6_out = nn.relu6(x, )\n"
                            "\t%7:\trelu_out_2 = nn.relu(relu6_out, )\n"
                            "\treturn relu_out_2\n"
                            "}");
  Tensor got = rt::Interpreter(*m).run({x}).outputs[0];
  for (int64_t i = 0; i < got.numel(); ++i)
    CHECK(got.at(i) == want.at(i));
}

TEST_CASE("where constraints decide whether a rule applies", "[rules]") {
  auto build = [] {
    return net([](GraphBuilder &b) { return b.callFunction("clip", {b.arg(0), 0, 6}); });
  };
  auto rule = [](const std::string &where) {
    return "[pipeline]\npasses = [\"apply-rules\"]\n[[rules]]\nmatch = \"clip($x, $lo, 6)\"\n"
           "replace = \"nn.relu6($x)\"\nwhere = [" +
           where + "]\n";
  };
  auto changed = [&](const std::string &where) {
    auto m = build();
    runConfig(*m, rule(where));
    return m->graph().str().find("relu6") != std::string::npos;
  };
  CHECK(changed("\"$x.rank == 2\""));
  CHECK_FALSE(changed("\"$x.rank == 4\""));
  CHECK(changed("\"$x.shape == (2, 3)\", \"$x.shape[-1] >= 3\""));
  CHECK_FALSE(changed("\"$x.shape[0] > 2\""));
  CHECK(changed("\"$lo == 0\", \"$lo.value <= 0.0\""));
  CHECK_FALSE(changed("\"$lo != 0\""));
  CHECK(changed("\"$x.users == 1\""));
  CHECK_FALSE(changed("\"$x.dtype == int32\""));
}

TEST_CASE("rule errors name file:line:col inside the rule text", "[rules][errors]") {
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.rellu($x)\"\n"
                    "replace = \"$x\"\n") ==
        "rules.toml:4:10: error: unknown function 'nn.rellu'; did you mean 'nn.relu'?");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.relu($x)\"\n"
                    "replace = \"nn.relu($y)\"\n") ==
        "rules.toml:5:20: error: '$y' is not captured by the match; did you mean '$x'?");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.relu($x\"\n"
                    "replace = \"$x\"\n") ==
        "rules.toml:4:20: error: expected ')' to close the arguments, found the end of the "
        "text");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.relu($x)\"\n"
                    "replace = \"$x\"\nwhere = [\"$x.rnak == 2\"]\n") ==
        "rules.toml:6:14: error: unknown property 'rnak'; did you mean 'rank'? (rank, shape, "
        "dtype, value, users)");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"\"\"\nnn.relu(\n"
                    "  nn.rellu($x))\"\"\"\nreplace = \"$x\"\n") ==
        "rules.toml:6:3: error: unknown function 'nn.rellu'; did you mean 'nn.relu'?");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nname = \"r\"\nmatch = "
                    "\"nn.relu($x)\"\n") ==
        "rules.toml:3:1: error: rule 'r' needs 'replace'");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"$x\"\n"
                    "replace = \"$x\"\n") ==
        "rules.toml:4:10: error: a root must be an op or alternatives of ops, not '$x'");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.relu($x)\"\n"
                    "replace = \"$x | $x\"\n") ==
        "rules.toml:5:12: error: a replacement holds captures, literals and calls only (no "
        "wildcards or alternatives)");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\nmatch = \"nn.relu($x)\"\n"
                    "replace = \"$x\"\nbenfit = 2\n") ==
        "rules.toml:6:10: error: unknown key 'benfit' in a rule; did you mean 'benefit'?");
  CHECK(configError("[pipeline]\npasses = [\"compile\"]\n[[rules]]\n"
                    "match = \"nn.leaky_relu($x, slope=1)\"\nreplace = \"$x\"\n") ==
        "rules.toml:4:28: error: nn.leaky_relu has no parameter 'slope'; did you mean "
        "'negative_slope'?");
}

TEST_CASE("apply-rules reads a rules file; without rules it fails", "[rules]") {
  std::string path = "test_rules_file.toml";
  {
    std::ofstream f(path);
    f << "[[rules]]\nmatch = \"nn.sigmoid(nn.relu($x))\"\nreplace = \"nn.sigmoid($x)\"\n";
  }
  auto m = net([](GraphBuilder &b) {
    return b.callFunction("sigmoid", {b.callFunction("relu", {b.arg(0)})});
  });
  auto p = Pipeline::parse("apply-rules{file=" + path + "},compile", reg());
  REQUIRE(p.succeeded());
  PassManager pm(std::move(*p), {});
  REQUIRE(succeeded(pm.run(*m)));
  CHECK(m->graph().str() == "Net.Graph (self, x) {\n"
                            "\t%4:\tsigmoid_out_1 = nn.sigmoid(x, )\n"
                            "\treturn sigmoid_out_1\n"
                            "}");
  // A bad rules file is reported with its position.
  {
    std::ofstream f(path);
    f << "[[rules]]\nmatch = \"nn.sigmoid(nn.relu($x)\"\nreplace = \"$x\"\n";
  }
  auto p2 = Pipeline::parse("apply-rules{file=" + path + "}", reg());
  PassManager pm2(std::move(*p2), {});
  auto r2 = pm2.run(*m);
  REQUIRE(r2.failed());
  Diagnostic d = r2.diagnostic();
  INFO(d.str());
  CHECK(d.str() == path + ":2:32, pass 'apply-rules': error: expected ')' to close the "
                         "arguments, found the end of the text\n"
                         "  note: the module was restored to its state before pass 'apply-rules'");
  std::remove(path.c_str());
  auto p3 = Pipeline::parse("apply-rules", reg());
  PassManager pm3(std::move(*p3), {});
  auto r3 = pm3.run(*m);
  REQUIRE(r3.failed());
  CHECK(r3.diagnostic().str().find("apply-rules has no rules") != std::string::npos);
}

TEST_CASE("pattern passes: a rule that grows the graph without end stops at max-growth",
          "[rules][driver]") {
  // fuzz_rules found this one: the replacement contains what the rule
  // matches, so every round multiplies the muls by five (a hang, then out
  // of memory, before the growth limit).
  std::string path = "test_rules_growth.toml";
  {
    std::ofstream f(path);
    f << "[[rules]]\nname = \"expand\"\nmatch = \"($x) * $b\"\n"
         "replace = \"$x * $x * 1.*1.* 1.\"\n";
  }
  auto m = net([](GraphBuilder &b) { return b.callMethod(b.arg(0), "__mul__", {b.arg(0)}); });
  std::string before = m->str();
  auto p = Pipeline::parse("apply-rules{file=" + path + ",max-iterations=1000}", reg());
  REQUIRE(p.succeeded());
  PassManager pm(std::move(*p), {});
  auto r = pm.run(*m);
  REQUIRE(r.failed());
  Diagnostic d = r.diagnostic();
  std::remove(path.c_str());
  INFO(d.str());
  CHECK(d.loc.pass == "apply-rules");
  CHECK(d.str().find("pass 'apply-rules': error: graph 'Net': the pattern driver stopped in "
                     "round ") == 0);
  CHECK(d.str().find("past the growth limit (max-growth); patterns that fired in the last two "
                     "rounds: expand (") != std::string::npos);
  CHECK(m->str() == before);
  requireVerified(*m);
  auto p2 = Pipeline::parse("fold-double-relu{max-growth=-2}", reg());
  REQUIRE(p2.succeeded());
  PassManager pm2(std::move(*p2), {});
  auto r2 = pm2.run(*m);
  REQUIRE(r2.failed());
  CHECK(r2.diagnostic().str().find("option 'max-growth' must be >= 0") != std::string::npos);
}

TEST_CASE("pattern passes: hitting max-time-ms is an error naming the pass and patterns",
          "[rules][driver]") {
  std::string path = "test_rules_timeout.toml";
  {
    std::ofstream f(path);
    f << "[[rules]]\nname = \"relu-to-sigmoid\"\nmatch = \"nn.relu($x)\"\n"
         "replace = \"nn.sigmoid($x)\"\n"
         "[[rules]]\nname = \"sigmoid-to-relu\"\nmatch = \"nn.sigmoid($x)\"\n"
         "replace = \"nn.relu($x)\"\n";
  }
  auto m = net([](GraphBuilder &b) { return b.callFunction("relu", {b.arg(0)}); });
  std::string before = m->str();
  auto p = Pipeline::parse(
      "apply-rules{file=" + path + ",max-iterations=1000000000000,max-time-ms=40}", reg());
  REQUIRE(p.succeeded());
  PassManager pm(std::move(*p), {});
  auto t0 = std::chrono::steady_clock::now();
  auto r = pm.run(*m);
  REQUIRE(r.failed());
  Diagnostic d = r.diagnostic();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::remove(path.c_str());
  INFO(d.str());
  CHECK(secs < 10);
  CHECK(d.severity == Diagnostic::Severity::Error);
  CHECK(d.loc.pass == "apply-rules");
  CHECK(d.str().find("pass 'apply-rules': error: graph 'Net': the pattern driver stopped "
                     "by the time limit of 40 ms in round ") == 0);
  CHECK(d.str().find("patterns that fired in the last two rounds: relu-to-sigmoid (1), "
                     "sigmoid-to-relu (1)") != std::string::npos);
  // The pass manager restored the module.
  CHECK(m->str() == before);
  requireVerified(*m);
  // A negative limit is an option error.
  auto p2 = Pipeline::parse("fold-double-relu{max-time-ms=-1}", reg());
  REQUIRE(p2.succeeded());
  PassManager pm2(std::move(*p2), {});
  auto r2 = pm2.run(*m);
  REQUIRE(r2.failed());
  CHECK(r2.diagnostic().str().find("option 'max-time-ms' must be >= 0") != std::string::npos);
  // A generous limit changes nothing.
  auto p3 = Pipeline::parse("fold-double-relu{max-time-ms=60000,test-convergence=true}", reg());
  REQUIRE(p3.succeeded());
  PassManager pm3(std::move(*p3), {});
  REQUIRE(succeeded(pm3.run(*m)));
}
