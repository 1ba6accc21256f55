//===- Tmir.h - The .tmir text format ---------------------------*- C++ -*-===//
//
// `.tmir` is tmgraph's text format: a versioned, line-oriented file holding a
// whole TracedModule — the module tree (types, value attributes, tensor
// attributes by reference into a `.safetensors` file) and every graph of
// every module and call signature. Graph bodies are the reference's print
// (`%id:\tname = ...`), each line followed by `\t;; ` and annotations that
// carry what printing leaves out (node ids, types and qualnames, argument
// TreeDefs with typed constants, output structures). The reader checks that
// the printed part matches the annotations. See README.md for the grammar.
//
//   print(parse(text)) == text, and parse(print(m)) equals m structurally.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringRef.h>

#include "tm/io/Safetensors.h"
#include "tm/io/TmirLoaders.h"
#include "tm/ir/CheckedSize.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

/// The format version written by this build; readers accept 0..TmirVersion
/// and upgrade older files with TmirReadOptions::loaders.
constexpr int TmirVersion = 4;

struct TmirWriteOptions {
  /// When set, tensor data goes here and the text references it by key.
  WeightFile *weights = nullptr;
  /// File name recorded in the `weights` directive (relative to the .tmir).
  std::string weightsFile;
  /// Tensors with at most this many elements are written inline, as
  /// numbers, instead of by reference (-1: never; with no `weights` sink,
  /// larger tensors are printed as references that cannot be resolved).
  int64_t inlineMaxElements = -1;
};

/// Prints `m` (which must verify) as .tmir text.
std::string printTmir(const TracedModule &m, const TmirWriteOptions &opts = {});
/// The same text, handed to `sink` piece by piece (about 1 MiB each) as it
/// is printed: writing a large module holds no copy of its whole text.
void printTmir(const TracedModule &m, const TmirWriteOptions &opts,
               llvm::function_ref<void(llvm::StringRef)> sink);

struct TmirReadOptions {
  /// Resolves `@"key"` tensor references. When null, the `weights` directive
  /// is followed relative to `baseDir`.
  const WeightFile *weights = nullptr;
  std::string baseDir = ".";
  /// Treat unresolvable references as zeros (for viewing text without its
  /// weights); off by default, when they are errors.
  bool missingWeightsAsZeros = false;
  /// Largest tensor and model the text may make the reader allocate
  /// (inline tensors, zeros, static node shapes).
  SizeLimits limits;
  /// Upgrades for files older than TmirVersion (null: TmirLoaders::builtin()).
  /// Must outlive the call.
  const TmirLoaders *loaders = nullptr;
};

/// Parses .tmir text. Errors name `filename:line:col`.
FailureOr<std::unique_ptr<TracedModule>>
parseTmir(llvm::StringRef text, llvm::StringRef filename = "<string>",
          const TmirReadOptions &opts = {});

/// Reads `path` (.tmir) and its weights.
FailureOr<std::unique_ptr<TracedModule>> loadTmir(const std::string &path);
/// Same with read options; `baseDir` is replaced by the directory of
/// `path`.
FailureOr<std::unique_ptr<TracedModule>> loadTmir(const std::string &path,
                                                  const TmirReadOptions &opts);
/// Writes `path` (.tmir) and, beside it, `<stem>.safetensors`. A path that
/// is a device or a FIFO (/dev/null, a pipe) gets the text alone, weights
/// inline.
FailureOr<void> saveTmir(const TracedModule &m, const std::string &path);

/// A reproducer: `path` names a small text file holding the pipeline;
/// the module goes beside it as `<path>.tmir` + `.safetensors`.
FailureOr<void> writeReproducer(const std::string &path, const TracedModule &m,
                                const std::string &pipeline);
/// Reads a reproducer: the module and the pipeline text.
FailureOr<std::pair<std::unique_ptr<TracedModule>, std::string>>
readReproducer(const std::string &path);

/// Structural comparison: module trees, attributes, tensor bytes, graphs
/// (exprs, kinds, ids, names, qualnames, types, arguments, outputs).
/// Returns a description of the first difference, or nullopt when equal.
std::optional<std::string> compareModules(const TracedModule &a,
                                          const TracedModule &b);

} // namespace tmg
