//===- test_golden.cpp - File tests: input .tmir, pipeline, expected -----===//
//
// Every tests/files/passes/*.test file names an input (.tmir), a pipeline
// (text, or a TOML config file), and after a `---` line the expected top
// graph in the reference's print format, or `error: <diagnostic>`.
//
//===----------------------------------------------------------------------===//
#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include "../TestPasses.h"
#include "tm/io/Tmir.h"
#include "tm/passes/PassManager.h"
// Built a second time for tests/files/transforms with the optimisation
// passes registered (tests/transforms/meson.build).
#ifdef TM_GOLDEN_TRANSFORMS
#include "tm/transforms/Transforms.h"
#endif
#ifndef TM_GOLDEN_SUBDIR
#define TM_GOLDEN_SUBDIR "passes"
#endif
#ifndef TM_GOLDEN_MIN_CASES
#define TM_GOLDEN_MIN_CASES 8
#endif

using namespace tmg;

namespace {
const std::string Dir = std::string(TM_TEST_FILES) + "/" TM_GOLDEN_SUBDIR "/";

std::string readAll(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

/// Runs one .test file; returns the actual result text.
std::string runCase(const std::string &text, std::string &expected) {
  std::istringstream in(text);
  std::string line, input, pipeline, config;
  while (std::getline(in, line)) {
    if (line == "---")
      break;
    if (line.empty() || line[0] == '#')
      continue;
    auto colon = line.find(": ");
    REQUIRE(colon != std::string::npos);
    std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key == "input")
      input = value;
    else if (key == "pipeline")
      pipeline = value;
    else if (key == "config")
      config = value;
    else
      FAIL("unknown header '" << key << "'");
  }
  std::stringstream rest;
  rest << in.rdbuf();
  expected = trim(rest.str());
#ifdef TM_GOLDEN_TRANSFORMS
  registerTransformPasses(test::testPasses());
#endif
  auto m = loadTmir(Dir + input);
  REQUIRE(m.succeeded());
  Pipeline p;
  PipelineOptions o;
  o.output = [](const std::string &) {};
  auto strip = [](std::string s) {
    for (size_t at; (at = s.find(Dir)) != std::string::npos;)
      s.erase(at, Dir.size());
    return s;
  };
  if (!config.empty()) {
    auto f = parsePipelineFile(Dir + config, test::testPasses());
    if (f.failed())
      return "error: " + strip(f.diagnostic().str());
    p = std::move(f->pipeline);
    o.disabled = f->options.disabled;
    o.verifyEach = f->options.verifyEach;
  } else {
    auto t = Pipeline::parse(pipeline, test::testPasses());
    if (t.failed())
      return "error: " + t.diagnostic().str();
    p = std::move(*t);
  }
  PassManager pm(std::move(p), o);
  if (auto r = pm.run(**m); r.failed())
    return "error: " + strip(r.diagnostic().str());
  return (*m)->graph().str();
}
} // namespace

TEST_CASE("golden pass tests in tests/files/" TM_GOLDEN_SUBDIR, "[passes][golden]") {
  std::vector<std::string> cases;
  DIR *dir = opendir(Dir.c_str());
  REQUIRE(dir);
  while (dirent *e = readdir(dir)) {
    std::string n = e->d_name;
    if (n.size() > 5 && n.substr(n.size() - 5) == ".test")
      cases.push_back(n);
  }
  closedir(dir);
  std::sort(cases.begin(), cases.end());
  REQUIRE(cases.size() >= TM_GOLDEN_MIN_CASES);
  for (const std::string &c : cases) {
    SECTION(c) {
      std::string expected;
      std::string got = runCase(readAll(Dir + c), expected);
      CHECK(got == expected);
    }
  }
}
