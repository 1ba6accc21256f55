//===- tm-opt.cpp - Load, transform and write models ----------------------===//
//
// tm-opt [options] [INPUT] [-o OUTPUT]
//
// Reads a model (.tmir with its weights, or .onnx; `-` or nothing: stdin),
// runs a pass pipeline, verifies the result, and writes it as .tmir (+
// .safetensors), ONNX or Graphviz DOT (`-` or nothing: stdout). The command
// line follows mlir-opt's (docs/tools.md).
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <limits>
#include <string>

#include "tm/Context.h"
#include "tm/io/Dot.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif
#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/passes/PassManager.h"
#include "ToolCommon.h"

using namespace tmg;
namespace cl = llvm::cl;

namespace {

enum class Emit { Auto, Tmir, Onnx, Dot };

/// The command line. Constructed after tools::CommandLine has reset llvm::cl.
struct Options {
  const tools::LimitOptions *limits = nullptr;
  cl::OptionCategory io{"Input and output"};
  cl::OptionCategory pipe{"Pipelines"};
  cl::OptionCategory instr{"Instrumentation"};
  cl::OptionCategory dot{"Graphviz output (--emit=dot)"};

  cl::opt<std::string> input{cl::Positional, cl::desc("<input .tmir or .onnx, - for stdin>"),
                             cl::init("-"), cl::cat(io)};
  cl::opt<std::string> output{"o", cl::desc("Output file (- for stdout)"),
                              cl::value_desc("file"), cl::init("-"), cl::cat(io)};
  cl::opt<Emit> emit{
      "emit", cl::desc("Output format (default: from the output's suffix; .tmir on stdout)"),
      cl::init(Emit::Auto),
      cl::values(clEnumValN(Emit::Tmir, "tmir", ".tmir text (+ .safetensors beside a file)"),
                 clEnumValN(Emit::Onnx, "onnx", "an ONNX model (opset 17)"),
                 clEnumValN(Emit::Dot, "dot", "Graphviz DOT")),
      cl::cat(io)};
  cl::opt<std::string> weightsFile{
      "weights-file",
      cl::desc(".tmir on stdout: write the weights to this .safetensors file and name it in "
               "the text (default: the weights are written inline in the text)"),
      cl::value_desc("file"), cl::cat(io)};
  cl::opt<int64_t> inlineWeights{
      "inline-weights",
      cl::desc(".tmir: write tensors of at most N elements inline, as numbers (-1: none)"),
      cl::value_desc("N"), cl::init(-1), cl::cat(io)};
  cl::list<std::string> inputShapes{
      "input-shape",
      cl::desc("Static shape of an ONNX input with symbolic dims, e.g. input=1x3x224x224 "
               "(repeatable)"),
      cl::value_desc("name=dims"), cl::cat(io)};
  cl::opt<std::string> weights{
      "weights",
      cl::desc(tools::WeightsHelp),
      cl::value_desc("file.safetensors"), cl::cat(io)};
  cl::opt<bool> noVerify{"no-verify", cl::desc("Do not verify the final module"), cl::cat(io)};
  cl::opt<std::string> onnxExternalData{
      "onnx-external-data",
      cl::desc("ONNX output: write the weights to an external data file beside the model "
               "(default name OUT.onnx.data); always done past protobuf's 2 GiB limit"),
      cl::value_desc("file"), cl::ValueOptional, cl::cat(io)};

  cl::opt<std::string> pipeline{
      "pass-pipeline",
      cl::desc("The pass pipeline, e.g. 'flatten,compile,fixpoint(merge-getattr,compile)'"),
      cl::value_desc("pipeline"), cl::cat(pipe)};
  cl::alias pipelineShort{"p", cl::desc("Alias for --pass-pipeline"), cl::aliasopt(pipeline),
                          cl::NotHidden, cl::cat(pipe)};
  cl::alias pipelineLong{"pipeline", cl::desc("Alias for --pass-pipeline"),
                         cl::aliasopt(pipeline), cl::cat(pipe)};
  cl::opt<std::string> pipelineFile{"pipeline-file",
                                    cl::desc("A pipeline config file (TOML, docs/passes.md)"),
                                    cl::value_desc("file.toml"), cl::cat(pipe)};
  cl::opt<bool> listPasses{"list-passes",
                           cl::desc("List the registered passes and presets, and exit"),
                           cl::cat(pipe)};
  cl::opt<std::string> helpPass{"help-pass",
                                cl::desc("Describe one pass and its options, and exit"),
                                cl::value_desc("name"), cl::cat(pipe)};
  cl::opt<bool> dumpPipeline{"dump-pipeline",
                             cl::desc("Print the parsed pipeline in canonical form"),
                             cl::cat(pipe)};
  cl::list<std::string> plugins{"load-pass-plugin",
                                cl::desc("Load passes from a shared library (repeatable)"),
                                cl::value_desc("lib.so"), cl::cat(pipe)};
  cl::opt<int> threads{"threads", cl::desc("Threads for graph-local passes"), cl::init(1),
                       cl::value_desc("N"), cl::cat(pipe)};

  cl::opt<bool> verifyEach{"verify-each", cl::desc("Verify the module after every pass"),
                           cl::cat(instr)};
  cl::opt<bool> timePasses{"time-passes", cl::desc("Print the time of every pass"),
                           cl::cat(instr)};
  cl::opt<bool> printAfterAll{"print-after-all", cl::desc("Print the module after every pass"),
                              cl::cat(instr)};
  cl::list<std::string> printAfter{"print-after",
                                   cl::desc("Print the module after this pass (repeatable)"),
                                   cl::value_desc("pass"), cl::cat(instr)};
  cl::opt<bool> printChanged{"print-changed",
                             cl::desc("Print the module after every pass that changed it"),
                             cl::cat(instr)};
  cl::opt<bool> stats{"stats",
                      cl::desc("Print counters per pass instance and per rewrite rule"),
                      cl::cat(instr)};
  cl::opt<bool> warnUnusedRules{"warn-unused-rules",
                                cl::desc("Warn about declarative rules that never matched"),
                                cl::cat(instr)};
  cl::opt<std::string> reproducer{"reproducer",
                                  cl::desc("On a pass failure, write a reproducer to this file"),
                                  cl::value_desc("file"), cl::cat(instr)};
  cl::opt<std::string> runReproducer{"run-reproducer",
                                     cl::desc("Load a reproducer and run its pipeline"),
                                     cl::value_desc("file"), cl::cat(instr)};

  cl::opt<bool> dotHideParams{"dot-hide-params",
                              cl::desc("Leave out parameter and buffer getattrs and constants"),
                              cl::cat(dot)};
  cl::opt<bool> dotHideGetattrs{"dot-hide-getattrs",
                                cl::desc("Leave out every getattr (and the edges from self)"),
                                cl::cat(dot)};
  cl::opt<int> dotDepth{"dot-depth",
                        cl::desc("Draw module graphs down to this depth; deeper module calls "
                                 "are single boxes (-1: all)"),
                        cl::init(-1), cl::value_desc("N"), cl::cat(dot)};
  cl::opt<bool> dotColor{"dot-color", cl::desc("Colour exprs by op family"), cl::cat(dot)};
};

tools::Tool Tool{"tm-opt"};

std::string describePass(const Pass &p) {
  std::string s = fmt::format("{}\n    {}\n", p.name().str(), p.description().str());
  for (const PassOptionBase *o : p.options())
    s += fmt::format("    {{{}=<{}>}} default {}: {}\n", o->name(), o->typeName(),
                     o->defaultStr(), o->description());
  auto pre = p.prerequisites();
  if (!pre.empty())
    s += fmt::format("    requires: {}\n", fmt::join(pre, ", "));
  return s;
}

void listPasses(const PassRegistry &r) {
  for (const std::string &n : r.names())
    std::fputs(describePass(*r.create(n)).c_str(), stdout);
  std::printf("fixpoint(P)\n    repeat pipeline P until nothing changes\n"
              "    {max-iterations=<int>} default 10\n");
  for (const PassRegistry::Preset *p : r.presets())
    std::printf("%s (preset)\n    %s\n    = %s\n", p->name.c_str(), p->description.c_str(),
                p->text.c_str());
}

/// A usage error for a pass name the registry does not know, with the
/// closest known name.
int unknownPass(const PassRegistry &registry, const std::string &name, const char *context) {
  std::string near = registry.closest(name);
  return Tool.usageError(std::string(context) + "unknown pass '" + name + "'" +
                         (near.empty() ? "" : "; did you mean '" + near + "'?"));
}

/// The pipeline from -p or --pipeline-file (or a reproducer), with the
/// switches of the command line and of the file merged.
int buildPipeline(Options &o, const PassRegistry &registry, Pipeline &pipeline,
                  PipelineOptions &opts, std::string text) {
  if (!o.pipelineFile.empty()) {
    auto pf = parsePipelineFile(o.pipelineFile, registry);
    if (pf.failed())
      return Tool.fail(pf.diagnostic());
    pipeline = std::move(pf->pipeline);
    const PipelineOptions &f = pf->options;
    // Command-line switches add to the file's.
    opts.verifyEach |= f.verifyEach;
    opts.timePasses |= f.timePasses;
    opts.printAfterAll |= f.printAfterAll;
    opts.printChanged |= f.printChanged;
    opts.stats |= f.stats;
    opts.printAfter.insert(f.printAfter.begin(), f.printAfter.end());
    opts.disabled = f.disabled;
    if (opts.threads == 1)
      opts.threads = f.threads;
    return -1;
  }
  if (text.empty())
    return -1;
  Tool.addSource("<pipeline>", text);
  auto p = Pipeline::parse(text, registry, "<pipeline>");
  if (p.failed())
    return Tool.fail(p.diagnostic());
  pipeline = std::move(*p);
  return -1;
}

/// Sets `warn-unused=true` on every apply-rules element of `els`.
void warnUnusedRules(std::vector<PipelineElement> &els) {
  for (PipelineElement &e : els) {
    if (e.kind == PipelineElement::Kind::Fixpoint)
      warnUnusedRules(e.children);
    else if (auto *a = dynamic_cast<ApplyRulesPass *>(e.pass.get()))
      a->warnUnused = true;
  }
}

int writeModel(Options &o, const TracedModule &m) {
  Emit emit = o.emit;
  llvm::StringRef out = o.output;
  if (emit == Emit::Auto) {
    if (out.endswith(".onnx"))
      emit = Emit::Onnx;
    else if (out.endswith(".dot"))
      emit = Emit::Dot;
    else if (out.endswith(".tmir") || out == "-")
      emit = Emit::Tmir;
    else
      return Tool.usageError("cannot tell the format of '" + out.str() +
                             "' from its suffix: name it .tmir, .onnx or .dot, or give --emit");
  }
  if (emit == Emit::Dot) {
    DotOptions dot;
    dot.hideParams = o.dotHideParams;
    dot.hideGetAttrs = o.dotHideGetattrs;
    dot.maxDepth = o.dotDepth;
    dot.colorByOp = o.dotColor;
    if (auto r = tools::writeOutput(o.output, printDot(m, dot)); r.failed())
      return Tool.fail(r.diagnostic());
    return tools::ExitOk;
  }
  if (emit == Emit::Onnx) {
#ifdef TM_HAVE_ONNX
    if (out != "-") {
      io::OnnxExportOptions eo;
      if (o.onnxExternalData.getNumOccurrences()) {
        size_t slash = out.rfind('/');
        eo.externalData = !o.onnxExternalData.empty()
                              ? std::string(o.onnxExternalData)
                              : (slash == llvm::StringRef::npos ? out : out.substr(slash + 1)).str() +
                                    ".data";
      }
      if (auto r = io::exportOnnx(m, o.output, eo); r.failed())
        return Tool.fail(r.diagnostic());
      return tools::ExitOk;
    }
    if (o.onnxExternalData.getNumOccurrences())
      return Tool.usageError("--onnx-external-data needs an output file (-o FILE.onnx)");
    auto bytes = io::exportOnnxBytes(m);
    if (bytes.failed())
      return Tool.fail(bytes.diagnostic());
    if (auto r = tools::writeOutput(o.output, *bytes); r.failed())
      return Tool.fail(r.diagnostic());
    return tools::ExitOk;
#else
    return Tool.usageError("this tmgraph was built without ONNX support (meson -Donnx=enabled)");
#endif
  }
  if (out != "-") {
    if (!o.weightsFile.empty())
      return Tool.usageError("--weights-file applies to .tmir on stdout; a .tmir file gets its "
                             "weights beside it");
    if (auto r = saveTmir(m, o.output); r.failed())
      return Tool.fail(r.diagnostic());
    return tools::ExitOk;
  }
  // On stdout the weights go inline unless a weights file is named, so that
  // whatever is written reads back.
  TmirWriteOptions w;
  WeightFile weights;
  if (!o.weightsFile.empty()) {
    w.weights = &weights;
    w.weightsFile = o.weightsFile;
    w.inlineMaxElements = o.inlineWeights;
  } else {
    w.inlineMaxElements = std::numeric_limits<int64_t>::max();
  }
  // The text goes out as it is printed, not held whole.
  FailureOr<void> written;
  printTmir(m, w, [&](llvm::StringRef piece) {
    if (!written.failed())
      written = tools::writeOutput("-", piece);
  });
  if (written.failed())
    return Tool.fail(written.diagnostic());
  if (!o.weightsFile.empty()) {
    weights.metadata["format"] = "tmgraph";
    if (auto r = writeSafetensors(o.weightsFile, weights); r.failed())
      return Tool.fail(r.diagnostic());
  }
  return tools::ExitOk;
}

int run(Options &o) {
  Context ctx;
  PassRegistry &registry = ctx.passes();
  for (const auto &p : o.plugins) {
    if (auto r = loadPassPlugin(p, registry); r.failed())
      return Tool.fail(r.diagnostic());
  }
  if (o.listPasses) {
    listPasses(registry);
    return tools::ExitOk;
  }
  if (!o.helpPass.empty()) {
    if (auto p = registry.create(o.helpPass)) {
      std::fputs(describePass(*p).c_str(), stdout);
      return tools::ExitOk;
    }
    if (const PassRegistry::Preset *p = registry.preset(o.helpPass)) {
      std::printf("%s (preset)\n    %s\n    = %s\n", p->name.c_str(), p->description.c_str(),
                  p->text.c_str());
      return tools::ExitOk;
    }
    return unknownPass(registry, o.helpPass, "");
  }
  if (!o.pipeline.empty() && !o.pipelineFile.empty())
    return Tool.usageError("give --pass-pipeline or --pipeline-file, not both");
  if (o.threads < 1)
    return Tool.usageError("--threads needs a positive integer");

  PipelineOptions opts;
  opts.verifyEach = o.verifyEach;
  opts.timePasses = o.timePasses;
  opts.printAfterAll = o.printAfterAll;
  opts.printChanged = o.printChanged;
  opts.stats = o.stats;
  opts.threads = o.threads;
  for (const std::string &name : o.printAfter) {
    if (!registry.contains(name))
      return unknownPass(registry, name, "--print-after: ");
    opts.printAfter.insert(name);
  }
  if (!o.reproducer.empty()) {
    std::string path = o.reproducer;
    opts.onFailure = [path](const TracedModule &m, const Pipeline &p) {
      if (auto r = writeReproducer(path, m, p.str()); r.failed())
        Tool.warn(r.diagnostic());
      else
        std::fprintf(stderr, "tm-opt: wrote reproducer %s\n", path.c_str());
    };
  }
  std::map<std::string, Shape> inputShapes;
  for (const std::string &s : o.inputShapes) {
    std::string err = tools::parseInputShape(s, inputShapes);
    if (!err.empty())
      return Tool.usageError(err);
  }

  std::unique_ptr<TracedModule> m;
  std::string pipelineText = o.pipeline;
  if (!o.runReproducer.empty()) {
    auto r = readReproducer(o.runReproducer);
    if (r.failed())
      return Tool.fail(r.diagnostic());
    m = std::move(r->first);
    pipelineText = r->second;
  }
  Pipeline pipeline;
  if (int rc = buildPipeline(o, registry, pipeline, opts, pipelineText); rc >= 0)
    return rc;
  if (o.warnUnusedRules)
    warnUnusedRules(pipeline.elements);
  if (o.dumpPipeline) {
    std::printf("%s\n", pipeline.str().c_str());
    if (o.input.getNumOccurrences() == 0 && !m)
      return tools::ExitOk;
  }
  if (!m) {
    tools::LoadedModel loaded;
    if (int rc = tools::loadModel(Tool, o.input, loaded, inputShapes, o.limits->limits());
        rc >= 0)
      return rc;
    m = std::move(loaded.module);
  }
  if (!o.weights.empty())
    if (int rc = tools::loadWeights(Tool, o.weights, *m); rc >= 0)
      return rc;
  bool ranPasses = !pipeline.elements.empty();
  if (ranPasses) {
    PassManager pm(std::move(pipeline), opts);
    if (auto r = pm.run(*m); r.failed())
      return Tool.fail(r.diagnostic());
  }
  if (!o.noVerify) {
    if (auto r = verifyOrReport(*m); r.failed()) {
      Diagnostic d = r.diagnostic();
      // A module that verified when read and not after the passes is a bug
      // of a pass.
      if (ranPasses)
        d.note("the module was produced by the pipeline: this is a bug in one of its passes");
      return Tool.fail(d, ranPasses ? tools::ExitInternalError : tools::ExitInputError);
    }
  }
  if (o.dumpPipeline && o.output == "-")
    return tools::ExitOk;
  return writeModel(o, *m);
}

} // namespace

int main(int argc, char **argv) {
  return tools::toolMain<Options>(argc, argv, Tool,
                                  "tm-opt: load a model (.tmir or .onnx), run a pass pipeline, "
                                  "verify it and write it (.tmir, .onnx or .dot)\n",
                                  run);
}
