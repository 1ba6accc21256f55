//===- tm-run.cpp - Run a model on the CPU --------------------------------===//
//
// tm-run [options] MODEL
//
// Runs a model (.tmir with its weights, or .onnx) on the CPU interpreter:
// binds inputs from .npy files or random values, writes the outputs as
// .npy, times repeated runs, and compares outputs with references
// (docs/tools.md).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringExtras.h>

#include <sys/resource.h>

#include "tm/io/Npy.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif
#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/runtime/Compare.h"
#include "tm/Context.h"
#include "tm/runtime/Inputs.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/Kernels.h"
#include "tm/runtime/Profile.h"
#include "ToolCommon.h"

using namespace tmg;
namespace cl = llvm::cl;

namespace {

enum class ReportFormat { Text, Json };

/// The command line. Constructed after tools::CommandLine has reset llvm::cl.
struct Options {
  const tools::LimitOptions *limits = nullptr;
  cl::OptionCategory in{"Inputs"};
  cl::OptionCategory out{"Outputs and comparison"};
  cl::OptionCategory exec{"Execution"};

  cl::opt<std::string> model{cl::Positional, cl::desc("<model .tmir or .onnx, - for stdin>"),
                             cl::init("-"), cl::cat(in)};
  cl::list<std::string> inputs{"input",
                               cl::desc("Bind a graph input, by name or position (0, 1, ...), "
                                        "to a .npy file or an ONNX TensorProto .pb (repeatable)"),
                               cl::value_desc("name=file.npy"), cl::cat(in)};
  cl::alias inputsShort{"i", cl::desc("Alias for --input"), cl::aliasopt(inputs),
                        cl::NotHidden, cl::cat(in)};
  cl::opt<bool> random{"random-inputs",
                       cl::desc("Fill unbound inputs with seeded random normals (their shapes "
                                "must be static)"),
                       cl::cat(in)};
  cl::opt<uint64_t> seed{"seed", cl::desc("Seed of --random-inputs"), cl::init(0),
                         cl::value_desc("N"), cl::cat(in)};
  cl::list<std::string> inputShapes{
      "input-shape",
      cl::desc("Static shape of an ONNX input with symbolic dims, e.g. input=1x3x224x224 "
               "(repeatable); inputs bound with -i take their file's shape without it"),
      cl::value_desc("name=dims"), cl::cat(in)};
  cl::opt<std::string> weights{
      "weights",
      cl::desc(tools::WeightsHelp),
      cl::value_desc("file.safetensors"), cl::cat(in)};

  cl::opt<std::string> outputDir{"output-dir",
                                 cl::desc("Write each output as DIR/NAME.npy (DIR is created)"),
                                 cl::value_desc("dir"), cl::cat(out)};
  cl::alias outputDirShort{"o", cl::desc("Alias for --output-dir"), cl::aliasopt(outputDir),
                           cl::NotHidden, cl::cat(out)};
  cl::list<std::string> compares{
      "compare",
      cl::desc("Compare an output (by name or position) with a reference .npy or .pb; exit code 1 "
               "when an element is outside |got - want| <= atol + rtol * |want| (repeatable)"),
      cl::value_desc("name=file.npy"), cl::cat(out)};
  cl::opt<double> rtol{"rtol", cl::desc("Relative tolerance of --compare"),
                       cl::init(rt::Tolerance().rtol), cl::cat(out)};
  cl::opt<double> atol{"atol", cl::desc("Absolute tolerance of --compare"),
                       cl::init(rt::Tolerance().atol), cl::cat(out)};
  cl::opt<ReportFormat> reportFormat{
      "compare-report", cl::desc("Form of the --compare report on stdout"),
      cl::init(ReportFormat::Text),
      cl::values(clEnumValN(ReportFormat::Text, "text", "one line per output, details on failure"),
                 clEnumValN(ReportFormat::Json, "json", "one JSON object for the whole run")),
      cl::cat(out)};

  cl::opt<int> threads{"threads",
                       cl::desc("Threads of every kernel (default: OMP_NUM_THREADS or all "
                                "cores)"),
                       cl::init(0), cl::value_desc("N"), cl::cat(exec)};
  cl::opt<int> repeat{"repeat", cl::desc("Run N times and print min/median/max latency"),
                      cl::init(0), cl::value_desc("N"), cl::cat(exec)};
  cl::opt<int> warmup{"warmup",
                      cl::desc("Untimed runs before the timed ones (default 1 with --repeat)"),
                      cl::init(-1), cl::value_desc("N"), cl::cat(exec)};
  cl::opt<bool> fastMath{"fast-math",
                         cl::desc("Let the plan fold batch norms into the convolutions before "
                                  "them (faster; results differ in the last bits)"),
                         cl::cat(exec)};
  cl::opt<std::string> pipeline{
      "pass-pipeline",
      cl::desc("Run this pass pipeline on the model before running it, as tm-opt does (e.g. "
               "'optimize': the graph optimisations an ONNX runtime applies)"),
      cl::value_desc("pipeline"), cl::cat(exec)};
  cl::alias pipelineShort{"p", cl::desc("Alias for --pass-pipeline"), cl::aliasopt(pipeline),
                          cl::NotHidden, cl::cat(exec)};
  cl::opt<bool> profile{"profile",
                        cl::desc("Print the time per op kind (count, share, GFLOP/s) and the "
                                 "slowest exprs over the timed runs"),
                        cl::cat(exec)};
  cl::opt<std::string> profileTrace{
      "profile-trace", cl::desc("Write the last run as a Chrome trace (chrome://tracing)"),
      cl::value_desc("file.json"), cl::cat(exec)};
  cl::opt<bool> loadOnly{"load-only",
                         cl::desc("Load the model and build its plan, print the time and the "
                                  "peak memory (RSS) this took, and run nothing"),
                         cl::cat(exec)};
};

tools::Tool Tool{"tm-run"};

/// Index of the graph node named `key` among `nodes` (or of the ONNX value
/// of that name, `onnxNames` being empty or parallel to `nodes`), or by
/// position.
int64_t findByNameOrIndex(llvm::ArrayRef<Node *> nodes, llvm::StringRef key,
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

/// A tensor file: NumPy's .npy, or a serialized ONNX TensorProto (.pb, as
/// the ONNX test data's input_0.pb / output_0.pb).
FailureOr<Tensor> readTensorFile(const std::string &file) {
  if (llvm::StringRef(file).endswith(".pb")) {
#ifdef TM_HAVE_ONNX
    return io::readOnnxTensor(file);
#else
    return Diagnostic(Location::inFile(file),
                      "reading a TensorProto needs ONNX support (meson -Donnx=enabled)");
#endif
  }
  return readNpy(file);
}

/// Splits NAME=FILE; "" when malformed.
std::pair<std::string, std::string> binding(llvm::StringRef v) {
  auto [k, f] = v.split('=');
  if (k.empty() || f.empty() || !v.contains('='))
    return {};
  return {k.str(), f.str()};
}

struct Model {
  std::unique_ptr<TracedModule> module;
  std::vector<std::string> onnxIn, onnxOut;
};

/// The graph's arguments: bound files, then random values.
int bindInputs(Options &o, Model &m, std::vector<std::pair<std::string, Tensor>> &bound,
               std::vector<Tensor> &args) {
  InternalGraph &g = m.module->graph();
  llvm::ArrayRef<Node *> ins = g.inputs().drop_front();
  args.assign(ins.size(), Tensor());
  for (auto &[key, t] : bound) {
    int64_t i = findByNameOrIndex(ins, key, m.onnxIn);
    if (i < 0)
      return Tool.usageError("the model has no input '" + key + "'");
    args[size_t(i)] = std::move(t);
  }
  for (size_t i = 0; i < ins.size(); ++i) {
    if (args[i].defined())
      continue;
    std::string name = ins[i]->name().str();
    if (!o.random)
      return Tool.usageError("input '" + name + "' is not bound (use -i " + name +
                             "=FILE.npy or --random-inputs)");
    rt::RandomInputOptions ro;
    ro.seed = o.seed;
    ro.limits = o.limits->limits();
    auto t = rt::randomInput(*ins[i], i, ro);
    if (t.failed())
      return Tool.usageError(t.diagnostic().message + " (bind it with -i " + name +
                             "=FILE.npy or .pb; fix an ONNX model's symbolic sizes with "
                             "--input-shape)");
    args[i] = std::move(*t);
  }
  return -1;
}

int compareOutputs(Options &o, Model &m, const rt::RunResult &result) {
  if (o.compares.empty())
    return tools::ExitOk;
  llvm::ArrayRef<Node *> outs = m.module->graph().outputs();
  rt::Tolerance tol{o.rtol, o.atol};
  bool ok = true;
  std::vector<std::string> json;
  for (const std::string &c : o.compares) {
    auto [key, file] = binding(c);
    int64_t i = findByNameOrIndex(outs, key, m.onnxOut);
    if (i < 0)
      return Tool.usageError("the model has no output '" + key + "'");
    auto ref = readTensorFile(file);
    if (ref.failed())
      return Tool.fail(ref.diagnostic());
    rt::CompareReport r = rt::compareTensors(result.outputs[size_t(i)], *ref, tol, key);
    ok &= r.ok();
    if (o.reportFormat == ReportFormat::Json)
      json.push_back(r.json());
    else
      std::printf("%s\n", r.str().c_str());
  }
  if (o.reportFormat == ReportFormat::Json)
    std::printf("{\"ok\": %s, \"outputs\": [%s]}\n", ok ? "true" : "false",
                llvm::join(json, ", ").c_str());
  return ok ? tools::ExitOk : tools::ExitOutputsDiffer;
}

int writeOutputs(Options &o, Model &m, const rt::RunResult &result, bool quiet) {
  llvm::ArrayRef<Node *> outs = m.module->graph().outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    const Tensor &t = result.outputs[i];
    if (!quiet)
      std::printf("output %zu '%s': %s%s\n", i, outs[i]->name().str().c_str(),
                  dtypeName(t.dtype()).str().c_str(), shapeStr(t.shape()).c_str());
    if (o.outputDir.empty())
      continue;
    if (auto r = writeNpy(o.outputDir + "/" + outs[i]->name().str() + ".npy", t); r.failed())
      return Tool.fail(r.diagnostic());
    if (i < m.onnxOut.size() && m.onnxOut[i] != outs[i]->name() &&
        m.onnxOut[i].find('/') == std::string::npos) {
      if (auto r = writeNpy(o.outputDir + "/" + m.onnxOut[i] + ".npy", t); r.failed())
        return Tool.fail(r.diagnostic());
    }
  }
  return -1;
}

int run(Options &o) {
  if (o.threads < 0 || o.repeat < 0 || o.warmup < -1)
    return Tool.usageError("--threads, --repeat and --warmup take non-negative integers");
  if (o.rtol < 0 || o.atol < 0)
    return Tool.usageError("--rtol and --atol take non-negative numbers");
  if (o.threads > 0)
    rt::setNumThreads(o.threads);
  std::map<std::string, Shape> inputShapes;
  for (const std::string &s : o.inputShapes) {
    std::string err = tools::parseInputShape(s, inputShapes);
    if (!err.empty())
      return Tool.usageError(err);
  }
  for (const std::string &c : o.compares)
    if (binding(c).first.empty())
      return Tool.usageError("--compare expects NAME=FILE.npy, got '" + c + "'");

  // Input files are read first: an ONNX model with symbolic input dims
  // (a dynamic batch) is imported with the shapes of the bound inputs.
  std::vector<std::pair<std::string, Tensor>> bound;
  for (const std::string &b : o.inputs) {
    auto [key, file] = binding(b);
    if (key.empty())
      return Tool.usageError("--input expects NAME=FILE.npy, got '" + b + "'");
    auto t = readTensorFile(file);
    if (t.failed())
      return Tool.fail(t.diagnostic());
    inputShapes.emplace(key, Shape(t->shape().begin(), t->shape().end()));
    bound.emplace_back(key, std::move(*t));
  }
  auto loadStart = std::chrono::steady_clock::now();
  Model m;
  {
    tools::LoadedModel loaded;
    // Shapes of bound inputs apply to ONNX models only.
    bool onnx = llvm::StringRef(o.model).endswith(".onnx");
    auto shapes = onnx || !o.inputShapes.empty() ? inputShapes : std::map<std::string, Shape>{};
    if (int rc = tools::loadModel(Tool, o.model, loaded, shapes, o.limits->limits()); rc >= 0)
      return rc;
    m.module = std::move(loaded.module);
    if (!o.weights.empty())
      if (int rc = tools::loadWeights(Tool, o.weights, *m.module); rc >= 0)
        return rc;
    m.onnxIn = std::move(loaded.onnxInputs);
    m.onnxOut = std::move(loaded.onnxOutputs);
  }
  // ONNX names kept by the importer (also through .tmir files).
  auto names = [&](const char *attr, std::vector<std::string> &out) {
    const TreeDef *t = m.module->value(attr);
    if (!out.empty() || !t)
      return;
    for (size_t i = 0; i < t->numChildren(); ++i)
      if (t->child(i).isConst() && t->child(i).value().isString())
        out.push_back(t->child(i).value().getString());
  };
  names("onnx_inputs", m.onnxIn);
  names("onnx_outputs", m.onnxOut);
  if (!o.pipeline.empty()) {
    Context ctx;
    PassRegistry &registry = ctx.passes();
    Tool.addSource("<pipeline>", o.pipeline);
    auto p = Pipeline::parse(o.pipeline, registry, "<pipeline>");
    if (p.failed())
      return Tool.fail(p.diagnostic());
    PassManager pm(std::move(*p), PipelineOptions{});
    if (auto r = pm.run(*m.module); r.failed())
      return Tool.fail(r.diagnostic());
  }

  if (o.loadOnly) {
    auto imported = std::chrono::steady_clock::now();
    rt::Interpreter interp(*m.module);
    interp.prepare(m.module->graph());
    auto ready = std::chrono::steady_clock::now();
    auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
    // The module's tensors and the graphs' tensor constants (passes turn
    // weights into constants), each storage once.
    int64_t weights = 0;
    llvm::DenseSet<const void *> counted;
    auto count = [&](const Tensor &t) {
      if (t.defined() && counted.insert(t.viewData()).second)
        weights += int64_t(t.nbytes());
    };
    m.module->namedTensors(
        [&](const std::string &, const Tensor &t) { count(t); });
    m.module->namedModules([&](const std::string &, Module &sub) {
      if (auto *tm = llvm::dyn_cast<TracedModule>(&sub))
        for (const auto &sig : tm->signatures())
          if (sig.graph)
            for (const Expr *e : sig.graph->body())
              if (auto *c = llvm::dyn_cast<Constant>(e); c && c->isTensor())
                count(c->tensor());
    });
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("load: %.1f ms (read %.1f ms, plan %.1f ms); weights %.1f MiB; peak RSS %.1f "
                "MiB\n",
                ms(loadStart, ready), ms(loadStart, imported), ms(imported, ready),
                double(weights) / (1 << 20), double(ru.ru_maxrss) / 1024);
    return tools::ExitOk;
  }
  std::vector<Tensor> args;
  if (int rc = bindInputs(o, m, bound, args); rc >= 0)
    return rc;
  if (!o.outputDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(std::string(o.outputDir), ec);
    if (ec)
      return Tool.fail(Diagnostic(Location::inFile(o.outputDir),
                                  "cannot create the output directory: " + ec.message()));
  }
  InternalGraph &g = m.module->graph();
  rt::InterpreterOptions interpOpts;
  interpOpts.fastMath = o.fastMath;
  interpOpts.maxTensorBytes = o.limits->limits().resolved().maxTensorBytes;
  rt::Interpreter interp(*m.module, interpOpts);
  interp.prepare(g);
  int warmup = o.warmup >= 0 ? o.warmup : (o.repeat > 0 ? 1 : 0);
  for (int w = 0; w < warmup; ++w)
    (void)interp.run(args);
  std::vector<double> ms;
  rt::RunResult result;
  rt::Profile profile;
  rt::RunOptions runOpts;
  if (o.profile || !o.profileTrace.empty())
    runOpts.profile = &profile;
  for (int r = 0; r < std::max(int(o.repeat), 1); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    result = interp.run(args, runOpts);
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  bool json = o.reportFormat == ReportFormat::Json && !o.compares.empty();
  if (int rc = writeOutputs(o, m, result, json); rc >= 0)
    return rc;
  if (!json) {
    if (o.repeat > 0) {
      std::sort(ms.begin(), ms.end());
      std::printf("latency over %d runs (%d warm-up): min %.3f ms, median %.3f ms, max %.3f ms\n",
                  int(o.repeat), warmup, ms.front(), ms[ms.size() / 2], ms.back());
    }
    std::printf("peak live tensor memory: %.1f KiB\n", double(result.peakBytes) / 1024);
    if (o.profile)
      std::fputs(profile.report().c_str(), stdout);
  }
  if (!o.profileTrace.empty()) {
    if (auto r = tools::writeOutput(o.profileTrace, profile.chromeTrace()); r.failed())
      return Tool.fail(r.diagnostic());
  }
  return compareOutputs(o, m, result);
}

} // namespace

int main(int argc, char **argv) {
  return tools::toolMain<Options>(argc, argv, Tool,
                                  "tm-run: run a model (.tmir or .onnx) on the CPU interpreter, "
                                  "write and compare its outputs\n",
                                  run);
}
