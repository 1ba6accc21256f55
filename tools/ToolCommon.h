//===- ToolCommon.h - What tm-opt and tm-run share ------------------------===//
//
// The command-line conventions of both tools (LLVM's llvm::cl: `--opt=value`
// and `--opt value`, `-` for stdin/stdout, generated `--help`, `--version`,
// "did you mean" for typos), their exit codes, diagnostics printed with the
// source line and a caret, and loading a model from a file or stdin.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/CommandLine.h>

#include "tm/io/Tmir.h"
#include "tm/ir/CheckedSize.h"
#include "tm/ir/Diagnostic.h"

namespace tmg::tools {

/// Exit codes of both tools (docs/tools.md).
enum ExitCode : int {
  ExitOk = 0,
  /// tm-run: an output is outside the --compare tolerance.
  ExitOutputsDiffer = 1,
  /// The command line, an input file, a model, a pipeline or a pass
  /// rejected what it was given.
  ExitInputError = 2,
  /// A bug in tmgraph: a pass left an invalid module, an unexpected
  /// exception escaped.
  ExitInternalError = 3,
};

/// Resets llvm::cl so that only the options the tool declares after this
/// call exist (LLVM's own global options, such as `-stats` and
/// `-time-passes` of its pass manager, would collide with ours), and
/// declares `--help`, `--help-hidden` and `--version`.
class CommandLine {
public:
  CommandLine(const char *argv0);
  /// Parses `argv`. Returns -1 to go on, or the exit code to return
  /// (after --help, --version, or an error that llvm::cl printed).
  int parse(int argc, char **argv, llvm::StringRef overview);

private:
  std::unique_ptr<llvm::cl::opt<bool>> help_, helpHidden_, version_;
  std::unique_ptr<llvm::cl::alias> helpShort_;
};

/// The options category every tool shows first.
llvm::cl::OptionCategory &generalCategory();

/// Prints diagnostics as `tool: file:line:col: error: message`, followed by
/// the source line and a caret under the column when the text is known
/// (a file, stdin, or a pipeline string registered with addSource).
class Tool {
public:
  explicit Tool(const char *name) : name_(name) {}
  const char *name() const { return name_; }

  /// Makes `text` the source of locations in `file` (stdin, a pipeline).
  void addSource(std::string file, std::string text);

  /// Prints `d` and returns `code`.
  int fail(const Diagnostic &d, int code = ExitInputError) const;
  /// A command-line error: prints `msg` and a hint to --help; returns 2.
  int usageError(const std::string &msg) const;
  /// Prints a warning (never changes the exit code).
  void warn(const Diagnostic &d) const;
  /// `d` as printed, with its source context.
  std::string render(const Diagnostic &d) const;

  /// Runs `body`, turning escaped exceptions into diagnostics: tmg::Error is
  /// an input error, std::bad_alloc "out of memory" (an input error: the
  /// model asks for more than there is), anything else an internal error.
  int guard(const std::function<int()> &body) const;

private:
  const char *name_;
  std::map<std::string, std::string> sources_;
};

/// Reads `path`, or standard input for "-", as bytes; errors carry errno's
/// text.
FailureOr<std::string> readInput(const std::string &path);
/// Writes `bytes` to `path`, or standard output for "-".
FailureOr<void> writeOutput(const std::string &path, llvm::StringRef bytes);

/// What a model file holds, from its suffix or, for stdin and unknown
/// suffixes, from its first bytes.
enum class ModelFormat { Tmir, Onnx };
ModelFormat detectFormat(llvm::StringRef path, llvm::StringRef bytes);

struct LoadedModel {
  std::unique_ptr<TracedModule> module;
  /// The ONNX names of the graph inputs and outputs (empty for .tmir).
  std::vector<std::string> onnxInputs, onnxOutputs;
};

/// Parses one `--input-shape` value, NAME=DIMxDIMx... (NAME= for a scalar),
/// into `shapes`; returns an error message or "".
std::string parseInputShape(llvm::StringRef v, std::map<std::string, Shape> &shapes);

/// Loads `path` ("-": stdin; .tmir or .onnx by suffix or content) into
/// `out`; returns -1 or the exit code after reporting the error through
/// `tool`. `inputShapes` fix the shapes of ONNX graph inputs with symbolic
/// dimensions (OnnxImportOptions).
int loadModel(Tool &tool, const std::string &path, LoadedModel &out,
              const std::map<std::string, Shape> &inputShapes = {},
              const SizeLimits &limits = {});

/// `--weights FILE.safetensors`: loads the file as a state dict into `m`
/// (keys are the qualified names of parameters and buffers, as stateDict()
/// gives them: `fc.weight`, `block0.conv1.weight`), strictly: every key
/// must name a tensor of the same shape and dtype, and every tensor must
/// have a key. Returns -1, or the exit code after reporting the problems
/// through `tool` (the module is then unchanged).
int loadWeights(Tool &tool, const std::string &path, TracedModule &m);
/// The help text of both tools' `--weights` option, which loadWeights serves.
inline constexpr const char *WeightsHelp =
    "Load a state dict from this .safetensors file after reading the model: keys are the "
    "qualified names of parameters and buffers (fc.weight, block0.conv1.weight); every key "
    "must match a tensor of the same shape and dtype, and every tensor must have a key";

/// `--max-tensor-bytes` and `--max-model-bytes`, in a category of their own.
struct LimitOptions {
  llvm::cl::OptionCategory cat{"Limits"};
  llvm::cl::opt<int64_t> maxTensorBytes{
      "max-tensor-bytes",
      llvm::cl::desc("Refuse a model that declares a tensor larger than this, and (tm-run) a "
                     "random input or a tensor the run computes (0: the memory available when "
                     "the file is read; -1: no limit)"),
      llvm::cl::init(0), llvm::cl::value_desc("bytes"), llvm::cl::cat(cat)};
  llvm::cl::opt<int64_t> maxModelBytes{
      "max-model-bytes",
      llvm::cl::desc("Refuse a model whose weights and constants total more than this (0: the "
                     "memory available; -1: no limit)"),
      llvm::cl::init(0), llvm::cl::value_desc("bytes"), llvm::cl::cat(cat)};
  SizeLimits limits() const {
    SizeLimits l;
    l.maxTensorBytes = maxTensorBytes;
    l.maxModelBytes = maxModelBytes;
    return l;
  }
};

/// The `main` of a tool: resets llvm::cl, declares `Options` (which has a
/// `limits` pointer) and the limit options, parses `argv`, and runs
/// `run(options)` under Tool::guard.
template <typename Options>
int toolMain(int argc, char **argv, const Tool &tool, llvm::StringRef overview,
             int (*run)(Options &)) {
  CommandLine cli(argv[0]);
  Options o;
  LimitOptions limits;
  o.limits = &limits;
  if (int rc = cli.parse(argc, argv, overview); rc >= 0)
    return rc;
  return tool.guard([&] { return run(o); });
}

} // namespace tmg::tools
