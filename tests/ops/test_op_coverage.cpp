//===- test_op_coverage.cpp - Which layer lacks which op ---------*- C++ -*-===//
//
// Walks the op registry and lists, per layer, the builtin ops without an
// implementation (shape rule, runtime kernel, ONNX export) and the standard
// ONNX ops without an importer. The list must equal the one documented in
// docs/ops.md, so a change in coverage is a change of the documentation too.
//
//===----------------------------------------------------------------------===//
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tm/io/Onnx.h"
#include "tm/ir/OpTable.h"
#include "tm/ir/ShapeInference.h"
#include "tm/runtime/Eval.h"
#include "tm/runtime/OpCoverage.h"

#include <algorithm>
#include <set>

using namespace tmg;

namespace {

std::string section(const std::string &title, const std::vector<std::string> &names) {
  std::string out = title + " (" + std::to_string(names.size()) + "):\n";
  for (const auto &n : names)
    out += "  " + n + "\n";
  return out;
}

std::vector<std::string> opNames(const std::vector<OpKind> &kinds) {
  std::vector<std::string> out;
  for (OpKind k : kinds)
    out.push_back(opKindName(k) + " [" + op(k).family().str() + "]");
  return out;
}

/// The builtin module types of the IR without an entry in a layer's
/// table (their own or a base's), by name.
std::vector<std::string> modulesMissing(const std::vector<const ModuleType *> &have,
                                        bool kernelsCount = false) {
  std::set<const ModuleType *> own(have.begin(), have.end());
  std::vector<std::string> out;
  for (const ModuleType *t : ModuleTypeRegistry::instance().all()) {
    if (!t->builtin)
      continue;
    bool covered = kernelsCount && rt::lookupModuleKernel(*t);
    for (const ModuleType *k = t; k && !covered; k = k->base)
      covered = own.count(k);
    if (!covered)
      out.push_back(t->name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The current coverage, in the documented layout.
std::string coverage() {
  return section("builtin modules without a shape rule", modulesMissing(modulesWithShapeRule())) +
         section("builtin modules the runtime cannot run",
                 modulesMissing(rt::modulesWithLowering(), /*kernelsCount=*/true)) +
         section("builtin modules without ONNX export", modulesMissing(io::modulesWithOnnxExport())) +
         section("no shape rule", opNames(opsWithoutShapeRule())) +
         section("no runtime kernel", opNames(rt::opsWithoutKernel())) +
         section("no ONNX export", opNames(io::opsWithoutOnnxExport())) +
         section("standard ONNX ops without an importer", io::onnxOpsWithoutImport());
}

/// The fenced block between the op-coverage markers of docs/ops.md.
std::string documented() {
  std::ifstream in(TM_OPS_DOC);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  std::string doc = ss.str();
  const std::string begin = "<!-- op-coverage:begin -->", end = "<!-- op-coverage:end -->";
  size_t b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  std::string block = doc.substr(b + begin.size(), e - b - begin.size());
  // Drop the ``` fence lines.
  std::string out;
  std::istringstream lines(block);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.rfind("```", 0) != 0)
      out += line + "\n";
  return out;
}

} // namespace

TEST_CASE("the op coverage of every layer is the documented one", "[ops]") {
  std::string actual = coverage();
  INFO("docs/ops.md lists a different coverage; the current one is:\n" << actual);
  CHECK(documented() == actual);
}

TEST_CASE("every builtin op has a family", "[ops]") {
  for (OpKind k : allOpKinds()) {
    INFO(opKindName(k));
    CHECK(op(k).family() != "custom");
    CHECK(!op(k).family().empty());
  }
}

TEST_CASE("an op table takes an op only from its own family, once", "[ops]") {
  OpTable<int> t("test");
  t.add("conv", {OpKind::Conv2d}, 1);
  CHECK(t.lookup(OpKind::Conv2d));
  CHECK(*t.lookup(OpKind::Conv2d) == 1);
  CHECK(t.family(OpKind::Conv2d) == "conv");
  CHECK(!t.lookup(OpKind::Relu));
  CHECK_THROWS_WITH(t.add("elementwise", {OpKind::Relu}, 2),
                    Catch::Contains("'nn.relu' of family 'activation'"));
  CHECK_THROWS_WITH(t.add("conv", {OpKind::Conv2d}, 3),
                    Catch::Contains("registered by both 'conv' and 'conv'"));
  CHECK(t.missing().size() == kNumOpKinds - 1);
}
