//===- tm-run.cpp - Run a model on the CPU --------------------------------===//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tm/io/Npy.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif
#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/Kernels.h"
#include "ToolCommon.h"

using namespace tmg;

static const char *Usage = R"(usage: tm-run MODEL [options]

Runs MODEL (.tmir with its weights, or .onnx) on the CPU interpreter. For an
ONNX model, inputs and outputs may be named by their ONNX names or by their
graph node names; output files are written under both when they differ.

Options:
  -i, --input NAME=FILE.npy    bind a graph input by name, or by position (0, 1, ...)
  --random-inputs [SEED]       fill unbound inputs with seeded random normals
                               (their shapes must be static)
  --input-shape NAME=DIMS      an ONNX input's static shape, e.g. input=1x3x224x224, for
                               symbolic dims such as a dynamic batch (repeatable); inputs
                               bound with -i take their file's shape without it
  -o, --output-dir DIR         write each output as DIR/NAME.npy (DIR is created)
  --threads N                  number of OpenMP threads (default: OMP_NUM_THREADS)
  --repeat N                   run N times and print latency min/median/max in ms
  --warmup N                   untimed runs before the timed ones (default 1 with --repeat)
  --compare NAME=FILE.npy      compare an output (by name or position) with a reference;
                               exits 1 when |out - ref| > atol + rtol * |ref| anywhere
  --rtol R                     relative tolerance (default 1e-5)
  --atol A                     absolute tolerance (default 1e-6)
  -h, --help                   show this help
)";

static const tools::Tool Tool{"tm-run"};
static int fail(const Diagnostic &d) { return Tool.fail(d); }
static int usageError(const std::string &msg) { return Tool.usageError(msg); }

/// Index of the graph node named `key` among `nodes` (or of the ONNX value
/// of that name, `onnxNames` being empty or parallel to `nodes`), or by
/// position.
static int64_t findByNameOrIndex(llvm::ArrayRef<Node *> nodes, llvm::StringRef key,
                                 llvm::ArrayRef<std::string> onnxNames = {}) {
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]->name() == key)
      return int64_t(i);
  for (size_t i = 0; i < onnxNames.size() && i < nodes.size(); ++i)
    if (onnxNames[i] == key)
      return int64_t(i);
  int64_t idx;
  if (!key.getAsInteger(10, idx) && idx >= 0 && size_t(idx) < nodes.size())
    return idx;
  return -1;
}

static bool parseNumber(const std::string &s, double &out) {
  char *end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0';
}

int main(int argc, char **argv) {
  std::string model, outDir;
  std::vector<std::pair<std::string, std::string>> inputs, compares;
  int threads = 0, repeat = 0, warmup = -1;
  bool random = false;
  uint64_t seed = 0;
  double rtol = 1e-5, atol = 1e-6;
  std::map<std::string, Shape> inputShapes;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *name) -> std::string {
      if (i + 1 >= argc) {
        usageError(std::string(name) + " needs a value");
        std::exit(2);
      }
      return argv[++i];
    };
    auto binding = [&](const char *name, auto &into) {
      std::string v = value(name);
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
        usageError(std::string(name) + " expects NAME=FILE.npy, got '" + v + "'");
        std::exit(2);
      }
      into.emplace_back(v.substr(0, eq), v.substr(eq + 1));
    };
    auto count = [&](const char *name) {
      std::string v = value(name);
      double d;
      if (!parseNumber(v, d) || d < 0 || d != std::floor(d)) {
        usageError(std::string(name) + " needs a non-negative integer, got '" + v + "'");
        std::exit(2);
      }
      return int(d);
    };
    if (a == "-h" || a == "--help") {
      std::fputs(Usage, stdout);
      return 0;
    } else if (a == "-i" || a == "--input") {
      binding("--input", inputs);
    } else if (a == "--compare") {
      binding("--compare", compares);
    } else if (a == "-o" || a == "--output-dir") {
      outDir = value("-o");
    } else if (a == "--threads") {
      threads = count("--threads");
    } else if (a == "--repeat") {
      repeat = count("--repeat");
    } else if (a == "--warmup") {
      warmup = count("--warmup");
    } else if (a == "--random-inputs") {
      random = true;
      if (i + 1 < argc && argv[i + 1][0] != '-') {
        double d;
        if (parseNumber(argv[i + 1], d))
          seed = uint64_t(d), ++i;
      }
    } else if (a == "--input-shape") {
      std::string err = tools::parseInputShape(value("--input-shape"), inputShapes);
      if (!err.empty())
        return usageError(err);
    } else if (a == "--rtol" || a == "--atol") {
      std::string v = value(a.c_str());
      double d;
      if (!parseNumber(v, d) || d < 0)
        return usageError(a + " needs a non-negative number, got '" + v + "'");
      (a == "--rtol" ? rtol : atol) = d;
    } else if (!a.empty() && a[0] == '-') {
      return usageError("unknown option '" + a + "'");
    } else if (model.empty()) {
      model = a;
    } else {
      return usageError("more than one model given");
    }
  }
  if (model.empty())
    return usageError("no model given");
  if (threads > 0)
    rt::setNumThreads(threads);

  // Input files are read first: an ONNX model with symbolic input dims
  // (a dynamic batch) is imported with the shapes of the bound inputs.
  std::vector<Tensor> bound;
  for (const auto &[key, file] : inputs) {
    auto t = readNpy(file);
    if (t.failed())
      return fail(t.diagnostic());
    if (tools::isOnnxPath(model))
      inputShapes.emplace(key, Shape(t->shape().begin(), t->shape().end()));
    bound.push_back(std::move(*t));
  }

  std::unique_ptr<TracedModule> m;
  std::vector<std::string> onnxIn, onnxOut;
  {
    tools::LoadedModel loaded;
    if (int rc = tools::loadModel(Tool, model, loaded, inputShapes))
      return rc;
    m = std::move(loaded.module);
    onnxIn = std::move(loaded.onnxInputs);
    onnxOut = std::move(loaded.onnxOutputs);
  }
  // ONNX names kept by the importer (also through .tmir files).
  auto names = [&](const char *attr, std::vector<std::string> &out) {
    const TreeDef *t = m->value(attr);
    if (!out.empty() || !t)
      return;
    for (size_t i = 0; i < t->numChildren(); ++i)
      if (t->child(i).isConst() && t->child(i).value().isString())
        out.push_back(t->child(i).value().getString());
  };
  names("onnx_inputs", onnxIn);
  names("onnx_outputs", onnxOut);
  try {
    InternalGraph &g = m->graph();
    llvm::ArrayRef<Node *> ins = g.inputs().drop_front();
    std::vector<Tensor> args(ins.size());
    for (size_t b = 0; b < inputs.size(); ++b) {
      int64_t i = findByNameOrIndex(ins, inputs[b].first, onnxIn);
      if (i < 0)
        return usageError("the model has no input '" + inputs[b].first + "'");
      args[i] = std::move(bound[b]);
    }
    for (size_t i = 0; i < ins.size(); ++i) {
      if (args[i].defined())
        continue;
      auto *tn = llvm::cast<TensorNode>(ins[i]);
      if (!random)
        return usageError("input '" + tn->name().str() + "' is not bound (use -i " + tn->name().str() +
                          "=FILE.npy or --random-inputs)");
      if (!tn->shape())
        return usageError("input '" + tn->name().str() + "' has no static shape to fill randomly");
      args[i] = Tensor::randn(*tn->shape(), seed + i);
      if (tn->hasDType() && tn->dtype() != DType::Float32)
        args[i] = rt::cast(args[i], tn->dtype());
    }
    if (!outDir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(outDir, ec);
      if (ec)
        return fail(Diagnostic(Location::inFile(outDir),
                               "cannot create the output directory: " + ec.message()));
    }
    rt::Interpreter interp(*m);
    interp.prepare(g);
    if (warmup < 0)
      warmup = repeat > 0 ? 1 : 0;
    for (int w = 0; w < warmup; ++w)
      (void)interp.run(args);
    std::vector<double> ms;
    rt::RunResult result;
    for (int r = 0; r < std::max(repeat, 1); ++r) {
      auto t0 = std::chrono::steady_clock::now();
      result = interp.run(args);
      auto t1 = std::chrono::steady_clock::now();
      ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    llvm::ArrayRef<Node *> outs = g.outputs();
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor &t = result.outputs[i];
      std::printf("output %zu '%s': %s%s\n", i, outs[i]->name().str().c_str(),
                  dtypeName(t.dtype()).str().c_str(), shapeStr(t.shape()).c_str());
      if (!outDir.empty()) {
        Diagnostic d;
        if (failed(writeNpy(outDir + "/" + outs[i]->name().str() + ".npy", t, &d)))
          return fail(d);
        if (i < onnxOut.size() && onnxOut[i] != outs[i]->name() &&
            onnxOut[i].find('/') == std::string::npos &&
            failed(writeNpy(outDir + "/" + onnxOut[i] + ".npy", t, &d)))
          return fail(d);
      }
    }
    if (repeat > 0) {
      std::sort(ms.begin(), ms.end());
      std::printf("latency over %d runs (%d warm-up): min %.3f ms, median %.3f ms, max %.3f ms\n",
                  repeat, warmup, ms.front(), ms[ms.size() / 2], ms.back());
    }
    std::printf("peak live tensor memory: %.1f KiB\n", double(result.peakBytes) / 1024);
    bool ok = true;
    for (const auto &[key, file] : compares) {
      int64_t i = findByNameOrIndex(outs, key, onnxOut);
      if (i < 0)
        return usageError("the model has no output '" + key + "'");
      auto ref = readNpy(file);
      if (ref.failed())
        return fail(ref.diagnostic());
      const Tensor &out = result.outputs[i];
      if (out.shape() != ref->shape()) {
        std::printf("compare '%s': shape %s differs from the reference %s\n", key.c_str(),
                    shapeStr(out.shape()).c_str(), shapeStr(ref->shape()).c_str());
        ok = false;
        continue;
      }
      double maxAbs = 0, maxRel = 0;
      bool within = true;
      for (int64_t j = 0; j < out.numel(); ++j) {
        double a = out.at(j), b = ref->at(j), d = std::fabs(a - b);
        maxAbs = std::max(maxAbs, d);
        if (b != 0)
          maxRel = std::max(maxRel, d / std::fabs(b));
        if (!(d <= atol + rtol * std::fabs(b)))
          within = false;
      }
      std::printf("compare '%s': max abs error %.3g, max rel error %.3g: %s\n", key.c_str(),
                  maxAbs, maxRel, within ? "ok" : "OUTSIDE TOLERANCE");
      ok &= within;
    }
    return ok ? 0 : 1;
  } catch (const Error &e) {
    return fail(e.diagnostic());
  }
}
