//===- tm-opt.cpp - Load, transform and write models ----------------------===//
//
// tm-opt MODEL [-o OUT] [--pipeline P | --pipeline-file F.toml] [options]
//
// Reads a model (.tmir with its weights), runs a pass pipeline, verifies the
// result, and writes it as .tmir + .safetensors, as Graphviz DOT, or as
// text on stdout.
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstring>
#include <string>

#include "tm/io/Dot.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif
#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/matcher/Rules.h"
#include "tm/passes/PassManager.h"
#include "tm/transforms/Transforms.h"
#include "ToolCommon.h"

using namespace tmg;

static const char *Usage = R"(usage: tm-opt MODEL [-o OUT] [options]

Loads MODEL (.tmir and the .safetensors it names, or .onnx), runs a pass pipeline,
verifies the result and writes it.

Output (-o OUT):
  OUT.tmir                 write OUT.tmir and OUT.safetensors beside it
  OUT.dot                  write Graphviz DOT (render: dot -Tpng OUT.dot -o OUT.png)
  OUT.onnx                 write an ONNX model (opset 17, checked by ONNX's checker)
  - or no -o               print the .tmir text to stdout

Pipelines:
  -p, --pipeline TEXT      e.g. "flatten,compile,fixpoint(merge-getattr,compile){max-iterations=4}"
  --pipeline-file F.toml   a pipeline config file (see README)
  --list-passes            list the registered passes with their options
  --dump-pipeline          print the parsed pipeline in canonical form and exit
  --load-pass-plugin LIB   load passes from a shared library (repeatable)

Instrumentation:
  --verify-each            verify the module after every pass
  --time-passes            print time per pass
  --print-after-all        print the module after every pass
  --print-after NAME       print the module after pass NAME (repeatable)
  --print-changed          print the module after passes that changed it
  --stats                  print per-pass counters
  --reproducer FILE        on a pass failure, write FILE (+ FILE.tmir) to replay it
  --run-reproducer FILE    load a reproducer and run its pipeline
  --threads N              threads for graph-local passes (default 1)

Other:
  --input-shape NAME=DIMS  an ONNX input's static shape, e.g. input=1x3x224x224, for
                           models with symbolic dims such as a dynamic batch (repeatable)
  --no-verify              do not verify the final module
  --inline-weights N       on stdout, write tensors of at most N elements inline
  -h, --help               show this help
  --version                show the version
)";

static const tools::Tool Tool{"tm-opt"};
static int fail(const Diagnostic &d) { return Tool.fail(d); }
static int usageError(const std::string &msg) { return Tool.usageError(msg); }

static void listPasses(const PassRegistry &r) {
  for (const std::string &n : r.names()) {
    auto p = r.create(n);
    std::printf("%s\n    %s\n", n.c_str(), p->description().str().c_str());
    for (const OptionSpec &o : p->optionSpecs())
      std::printf("    {%s=<%s>} default %s: %s\n", o.name.c_str(),
                  optionTypeName(o.defaultValue).str().c_str(),
                  optionValueStr(o.defaultValue).c_str(), o.help.c_str());
    auto pre = p->prerequisites();
    if (!pre.empty()) {
      std::string s;
      for (const auto &x : pre)
        s += (s.empty() ? "" : ", ") + x;
      std::printf("    requires: %s\n", s.c_str());
    }
  }
  std::printf("fixpoint(P)\n    repeat pipeline P until nothing changes\n"
              "    {max-iterations=<int>} default 10\n");
  for (const PassRegistry::Preset *p : r.presets())
    std::printf("%s (preset)\n    %s\n    = %s\n", p->name.c_str(), p->description.c_str(),
                p->text.c_str());
}

int main(int argc, char **argv) {
  std::string model, out, pipelineText, pipelineFile, reproducerIn;
  bool verifyIt = true, list = false, dump = false;
  int64_t inlineMax = -1;
  PipelineOptions opts;
  std::vector<std::string> plugins;
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
    if (a == "-h" || a == "--help") {
      std::fputs(Usage, stdout);
      return 0;
    } else if (a == "--version") {
      std::puts("tm-opt (tmgraph) 0.1.0");
      return 0;
    } else if (a == "-o" || a == "--output") {
      out = value("-o");
    } else if (a == "-p" || a == "--pipeline") {
      pipelineText = value("--pipeline");
    } else if (a == "--pipeline-file") {
      pipelineFile = value("--pipeline-file");
    } else if (a == "--list-passes") {
      list = true;
    } else if (a == "--dump-pipeline") {
      dump = true;
    } else if (a == "--load-pass-plugin") {
      plugins.push_back(value("--load-pass-plugin"));
    } else if (a == "--verify-each") {
      opts.verifyEach = true;
    } else if (a == "--time-passes") {
      opts.timePasses = true;
    } else if (a == "--print-after-all") {
      opts.printAfterAll = true;
    } else if (a == "--print-after") {
      opts.printAfter.insert(value("--print-after"));
    } else if (a.rfind("--print-after=", 0) == 0) {
      opts.printAfter.insert(a.substr(14));
    } else if (a == "--print-changed") {
      opts.printChanged = true;
    } else if (a == "--stats") {
      opts.stats = true;
    } else if (a == "--reproducer") {
      std::string path = value("--reproducer");
      opts.onFailure = [path](const TracedModule &m, const Pipeline &p) {
        Diagnostic d;
        if (failed(writeReproducer(path, m, p.str(), &d)))
          std::fprintf(stderr, "tm-opt: %s\n", d.str().c_str());
        else
          std::fprintf(stderr, "tm-opt: wrote reproducer %s\n", path.c_str());
      };
    } else if (a == "--run-reproducer") {
      reproducerIn = value("--run-reproducer");
    } else if (a == "--threads") {
      std::string v = value("--threads");
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < 1)
        return usageError("--threads needs a positive integer, got '" + v + "'");
      opts.threads = int(n);
    } else if (a == "--input-shape") {
      std::string err = tools::parseInputShape(value("--input-shape"), inputShapes);
      if (!err.empty())
        return usageError(err);
    } else if (a == "--no-verify") {
      verifyIt = false;
    } else if (a == "--inline-weights") {
      std::string v = value("--inline-weights");
      char *end = nullptr;
      inlineMax = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end || inlineMax < 0)
        return usageError("--inline-weights needs a non-negative integer, got '" + v + "'");
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      return usageError("unknown option '" + a + "'");
    } else if (model.empty()) {
      model = a;
    } else {
      return usageError("more than one model given ('" + model + "' and '" + a + "')");
    }
  }
  PassRegistry &registry = PassRegistry::global();
  registerTransformPasses(registry);
  registerMatcherPasses(registry);
  for (const auto &p : plugins) {
    Diagnostic d;
    if (failed(loadPassPlugin(p, registry, &d)))
      return fail(d);
  }
  if (list) {
    listPasses(registry);
    return 0;
  }
  if (!pipelineText.empty() && !pipelineFile.empty())
    return usageError("give --pipeline or --pipeline-file, not both");

  std::unique_ptr<TracedModule> m;
  if (!reproducerIn.empty()) {
    auto r = readReproducer(reproducerIn);
    if (r.failed())
      return fail(r.diagnostic());
    m = std::move(r->first);
    pipelineText = r->second;
  }
  Pipeline pipeline;
  if (!pipelineFile.empty()) {
    auto pf = parsePipelineFile(pipelineFile, registry);
    if (pf.failed())
      return fail(pf.diagnostic());
    pipeline = std::move(pf->pipeline);
    PipelineOptions fileOpts = std::move(pf->options);
    // Command-line switches add to the file's.
    opts.verifyEach |= fileOpts.verifyEach;
    opts.timePasses |= fileOpts.timePasses;
    opts.printAfterAll |= fileOpts.printAfterAll;
    opts.printChanged |= fileOpts.printChanged;
    opts.stats |= fileOpts.stats;
    opts.printAfter.insert(fileOpts.printAfter.begin(), fileOpts.printAfter.end());
    opts.disabled = fileOpts.disabled;
    if (opts.threads == 1)
      opts.threads = fileOpts.threads;
  } else if (!pipelineText.empty()) {
    auto p = Pipeline::parse(pipelineText, registry, "<pipeline>");
    if (p.failed())
      return fail(p.diagnostic());
    pipeline = std::move(*p);
  }
  if (dump) {
    std::printf("%s\n", pipeline.str().c_str());
    if (model.empty() && !m)
      return 0;
  }
  if (!m) {
    if (model.empty())
      return usageError("no model given");
    if (!llvm::StringRef(model).endswith(".onnx") && !llvm::StringRef(model).endswith(".tmir"))
      return usageError("cannot read '" + model + "': expected a .tmir or .onnx file");
    tools::LoadedModel loaded;
    if (int rc = tools::loadModel(Tool, model, loaded, inputShapes))
      return rc;
    m = std::move(loaded.module);
  }
  if (!pipeline.elements.empty()) {
    PassManager pm(std::move(pipeline), opts);
    Diagnostic d;
    if (failed(pm.run(*m, &d)))
      return fail(d);
  }
  if (verifyIt) {
    Diagnostic d;
    if (failed(verifyOrReport(*m, &d)))
      return fail(d);
  }
  if (out.empty() || out == "-") {
    if (dump)
      return 0;
    TmirWriteOptions o;
    o.inlineMaxElements = inlineMax;
    std::fputs(printTmir(*m, o).c_str(), stdout);
    return 0;
  }
  if (llvm::StringRef(out).endswith(".dot")) {
    Diagnostic d;
    if (failed(writeFileBytes(out, printDot(*m), &d)))
      return fail(d);
    return 0;
  }
  if (llvm::StringRef(out).endswith(".onnx")) {
#ifdef TM_HAVE_ONNX
    Diagnostic d;
    if (failed(io::exportOnnx(*m, out, {}, &d)))
      return fail(d);
    return 0;
#else
    return usageError("this tmgraph was built without ONNX support (meson -Donnx=enabled)");
#endif
  }
  if (!llvm::StringRef(out).endswith(".tmir"))
    return usageError("cannot write '" + out + "': expected .tmir, .onnx, .dot or -");
  Diagnostic d;
  if (failed(saveTmir(*m, out, &d)))
    return fail(d);
  return 0;
}
