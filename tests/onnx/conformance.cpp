//===- conformance.cpp - ONNX backend test data through tmgraph -----------===//
//
// Walks the ONNX backend test data (Debian's libonnx-testdata), imports each
// model.onnx, runs every test_data_set_* on the interpreter and compares
// with output_*.pb (rtol 1e-3, atol 1e-7, as ONNX's backend tests). Tests
// whose ops are outside the importer's supported list are skipped. Prints
// one line per failure and, last, "N passed, N failed, N skipped".
//
//   onnx-conformance [--data DIR] [--expected FILE] [--write-expected FILE]
//                    [--roundtrip] [--filter SUBSTR] [--verbose]
//
// With --expected, a listed test that does not pass makes the exit status
// 1 (a regression); tests not listed may fail. --roundtrip also exports
// each passing model to ONNX (checked by ONNX's checker), imports it again
// and requires identical outputs.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "tm/io/Onnx.h"
#include "tm/ir/IR.h"
#include "tm/ir/Strings.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;
namespace fs = std::filesystem;

namespace {

struct Options {
  std::string data = "/usr/share/libonnx-testdata/data";
  std::string expected, writeExpected, filter;
  bool roundtrip = false, verbose = false;
};

std::string readAll(const fs::path &p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

/// Graph inputs that are not initializers, in order (the input_i.pb order).
std::vector<std::string> realInputs(const std::string &modelPath) {
  onnx::ModelProto m;
  std::vector<std::string> out;
  if (!m.ParseFromString(readAll(modelPath)))
    return out;
  std::set<std::string> inits;
  for (const auto &i : m.graph().initializer())
    inits.insert(i.name());
  for (const auto &i : m.graph().input())
    if (!inits.count(i.name()))
      out.push_back(i.name());
  return out;
}

std::vector<fs::path> numbered(const fs::path &dir, const std::string &prefix) {
  std::vector<fs::path> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p))
      break;
    out.push_back(p);
  }
  return out;
}

/// Empty when equal within tolerance; else the reason.
std::string compare(const Tensor &got, const Tensor &want, double rtol, double atol) {
  if (got.shape() != want.shape())
    return "shape " + shapeStr(got.shape()) + " != expected " + shapeStr(want.shape());
  if (isString(got.dtype()) || isString(want.dtype())) {
    if (got.dtype() != want.dtype())
      return std::string("dtype ") + dtypeName(got.dtype()).str() + " != expected " +
             dtypeName(want.dtype()).str();
    for (int64_t i = 0; i < got.numel(); ++i)
      if (stringAt(got, i) != stringAt(want, i))
        return fmt::format("element {} is \"{}\", expected \"{}\"", i, stringAt(got, i).str(),
                           stringAt(want, i).str());
    return "";
  }
  bool gotF = isFloat(got.dtype()), wantF = isFloat(want.dtype());
  if (gotF != wantF || (got.dtype() == DType::Bool) != (want.dtype() == DType::Bool))
    return std::string("dtype ") + dtypeName(got.dtype()).str() + " != expected " +
           dtypeName(want.dtype()).str();
  for (int64_t i = 0; i < got.numel(); ++i) {
    double g = got.at(i), w = want.at(i);
    if (std::isnan(w) && std::isnan(g))
      continue;
    if (std::isinf(w) && g == w)
      continue;
    if (!(std::fabs(g - w) <= atol + rtol * std::fabs(w)))
      return fmt::format("element {} is {} , expected {}", i, g, w);
  }
  return "";
}

enum class Outcome { Pass, Fail, Skip };

/// Tensor nodes of imported graphs, and those without a static shape.
int64_t gNodes = 0, gUnshaped = 0;

struct Result {
  Outcome outcome;
  std::string reason;
};

/// Imports with the inputs that must be constants bound from `set` (the
/// importer names one per failure; at most one retry per input).
FailureOr<io::OnnxModel> importFor(const std::string &model, const fs::path &set,
                                   const std::vector<std::string> &inputs, bool &specialised) {
  io::OnnxImportOptions opts;
  specialised = false;
  for (size_t attempt = 0;; ++attempt) {
    auto m = io::importOnnx(model, opts);
    if (m.succeeded() || attempt >= inputs.size())
      return m;
    size_t before = opts.constantInputs.size();
    for (const auto &n : m.diagnostic().notes) {
      llvm::StringRef note(n);
      if (!note.consume_front("constant input: "))
        continue;
      auto it = std::find(inputs.begin(), inputs.end(), note.str());
      if (it == inputs.end() || opts.constantInputs.count(note.str()))
        continue;
      auto t = io::readOnnxTensor(
          (set / ("input_" + std::to_string(it - inputs.begin()) + ".pb")).string());
      if (t.failed())
        return t.diagnostic();
      opts.constantInputs[note.str()] = *t;
    }
    if (opts.constantInputs.size() == before)
      return m;
    specialised = true;
  }
}

Result runTest(const fs::path &dir, const Options &o) {
  std::string model = (dir / "model.onnx").string();
  auto ops = io::onnxModelOps(model);
  if (ops.failed())
    return {Outcome::Fail, ops.diagnostic().str()};
  std::vector<std::string> unsupported;
  for (const auto &op : *ops)
    if (!io::isOnnxOpSupported(op))
      unsupported.push_back(op);
  if (!unsupported.empty()) {
    std::string s;
    for (auto &u : unsupported)
      s += (s.empty() ? "" : ", ") + u;
    return {Outcome::Skip, "ops outside the supported list: " + s};
  }
  std::vector<std::string> inputs = realInputs(model);
  std::vector<fs::path> sets;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty())
    return {Outcome::Fail, "no test_data_set_* directory"};
  std::optional<io::OnnxModel> shared;
  for (const auto &set : sets) {
    bool specialised = false;
    io::OnnxModel *mp;
    std::optional<io::OnnxModel> local;
    if (shared) {
      mp = &*shared;
    } else {
      auto m = importFor(model, set, inputs, specialised);
      if (m.failed())
        return {Outcome::Fail, "import: " + m.diagnostic().str()};
      local = std::move(*m);
      mp = &*local;
      for (const Expr *e : mp->module->graph().body())
        for (Node *n : e->outputs())
          if (auto *t = llvm::dyn_cast<TensorNode>(n)) {
            ++gNodes;
            gUnshaped += !t->shape();
          }
    }
    std::vector<Tensor> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (std::find(mp->names.inputs.begin(), mp->names.inputs.end(), inputs[i]) ==
          mp->names.inputs.end())
        continue; // bound as a constant
      auto t = io::readOnnxTensor((set / ("input_" + std::to_string(i) + ".pb")).string());
      if (t.failed())
        return {Outcome::Fail, "input: " + t.diagnostic().str()};
      in.push_back(*t);
    }
    std::vector<Tensor> outs;
    try {
      rt::Interpreter interp(*mp->module);
      outs = interp.run(in).outputs;
    } catch (const Error &e) {
      return {Outcome::Fail, "run: " + e.diagnostic().str()};
    }
    std::vector<fs::path> want = numbered(set, "output_");
    if (want.size() != outs.size())
      return {Outcome::Fail, fmt::format("{} outputs, expected {}", outs.size(), want.size())};
    for (size_t i = 0; i < want.size(); ++i) {
      auto t = io::readOnnxTensor(want[i].string());
      if (t.failed())
        return {Outcome::Fail, "output: " + t.diagnostic().str()};
      std::string why = compare(outs[i], *t, 1e-3, 1e-7);
      if (!why.empty())
        return {Outcome::Fail, fmt::format("{} output {}: {}",
                                           set.filename().string(), i, why)};
    }
    if (o.roundtrip) {
      auto bytes = io::exportOnnxBytes(*mp->module);
      if (bytes.failed())
        return {Outcome::Fail, "export: " + bytes.diagnostic().str()};
      auto back = io::importOnnxBytes(*bytes, model + " (exported)");
      if (back.failed())
        return {Outcome::Fail, "re-import: " + back.diagnostic().str()};
      try {
        rt::Interpreter interp(*back->module);
        std::vector<Tensor> again = interp.run(in).outputs;
        if (again.size() != outs.size())
          return {Outcome::Fail, "round trip changed the number of outputs"};
        for (size_t i = 0; i < outs.size(); ++i)
          if (!again[i].bitwiseEqual(outs[i]) && !compare(again[i], outs[i], 0, 0).empty())
            return {Outcome::Fail, fmt::format("round trip output {}: {}", i,
                                               compare(again[i], outs[i], 0, 0))};
      } catch (const Error &e) {
        return {Outcome::Fail, "round trip run: " + e.diagnostic().str()};
      }
    }
    if (!specialised && !shared)
      shared = std::move(local);
  }
  return {Outcome::Pass, ""};
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--data") o.data = next();
    else if (a == "--expected") o.expected = next();
    else if (a == "--write-expected") o.writeExpected = next();
    else if (a == "--filter") o.filter = next();
    else if (a == "--roundtrip") o.roundtrip = true;
    else if (a == "--verbose" || a == "-v") o.verbose = true;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  if (!fs::exists(o.data)) {
    std::printf("ONNX test data not found at %s\n0 passed, 0 failed, 0 skipped\n", o.data.c_str());
    return 77; // meson: skipped
  }
  std::set<std::string> expected;
  if (!o.expected.empty()) {
    std::ifstream f(o.expected);
    if (!f) {
      std::fprintf(stderr, "cannot read %s\n", o.expected.c_str());
      return 2;
    }
    for (std::string line; std::getline(f, line);)
      if (!line.empty() && line[0] != '#')
        expected.insert(line);
  }
  int passed = 0, failed = 0, skipped = 0, regressions = 0;
  std::vector<std::string> passing;
  auto t0 = std::chrono::steady_clock::now();
  for (const char *suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path root = fs::path(o.data) / suite;
    if (!fs::exists(root))
      continue;
    std::vector<fs::path> dirs;
    for (const auto &e : fs::directory_iterator(root))
      if (e.is_directory() && fs::exists(e.path() / "model.onnx"))
        dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const auto &d : dirs) {
      std::string name = std::string(suite) + "/" + d.filename().string();
      if (!o.filter.empty() && name.find(o.filter) == std::string::npos)
        continue;
      Result r;
      try {
        r = runTest(d, o);
      } catch (const std::exception &e) {
        r = {Outcome::Fail, std::string("exception: ") + e.what()};
      }
      if (r.outcome == Outcome::Pass) {
        ++passed;
        passing.push_back(name);
        if (o.verbose)
          std::printf("PASS %s\n", name.c_str());
      } else if (r.outcome == Outcome::Skip) {
        ++skipped;
        if (o.verbose)
          std::printf("SKIP %s: %s\n", name.c_str(), r.reason.c_str());
      } else {
        ++failed;
        bool reg = expected.count(name) != 0;
        regressions += reg;
        std::string reason = r.reason;
        std::replace(reason.begin(), reason.end(), '\n', ' ');
        std::printf("%s %s: %s\n", reg ? "REGRESSION" : "FAIL", name.c_str(), reason.c_str());
      }
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.writeExpected.empty()) {
    std::ofstream f(o.writeExpected);
    f << "# ONNX backend tests that pass (tests/onnx/conformance.cpp --write-expected)\n";
    for (auto &p : passing)
      f << p << "\n";
  }
  std::printf("time: %.1f s%s\n", secs, o.roundtrip ? " (with export round trips)" : "");
  std::printf("imported tensor nodes: %lld, without a static shape: %lld\n", (long long)gNodes,
              (long long)gUnshaped);
  if (regressions)
    std::printf("%d previously passing tests fail\n", regressions);
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return regressions ? 1 : 0;
}
