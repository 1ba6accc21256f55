//===- ToolCommon.h - What tm-opt and tm-run share ------------------------===//
//
// Error reporting with the tool's name and exit codes (1: the input or a
// pass failed; 2: the command line is wrong), and loading a model from
// .tmir or .onnx.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/io/Onnx.h"
#include "tm/io/Tmir.h"

namespace tmg::tools {

struct Tool {
  const char *name;

  int fail(const Diagnostic &d) const {
    std::fprintf(stderr, "%s: %s\n", name, d.str().c_str());
    return 1;
  }
  int usageError(const std::string &msg) const {
    std::fprintf(stderr, "%s: error: %s\nRun '%s --help' for usage.\n", name,
                 msg.c_str(), name);
    return 2;
  }
};

struct LoadedModel {
  std::unique_ptr<TracedModule> module;
  /// The ONNX names of the graph inputs and outputs (empty for .tmir).
  std::vector<std::string> onnxInputs, onnxOutputs;
};

/// Loads `path` (.onnx by suffix, otherwise .tmir) into `out`; returns 0 or
/// the exit code after reporting the error.
inline int loadModel(const Tool &tool, const std::string &path, LoadedModel &out) {
  if (llvm::StringRef(path).endswith(".onnx")) {
#ifdef TM_HAVE_ONNX
    auto imported = io::importOnnx(path);
    if (imported.failed())
      return tool.fail(imported.diagnostic());
    out.module = std::move(imported->module);
    out.onnxInputs = imported->names.inputs;
    out.onnxOutputs = imported->names.outputs;
    return 0;
#else
    return tool.usageError(
        "this tmgraph was built without ONNX support (meson -Donnx=enabled)");
#endif
  }
  auto loaded = loadTmir(path);
  if (loaded.failed())
    return tool.fail(loaded.diagnostic());
  out.module = std::move(*loaded);
  return 0;
}

} // namespace tmg::tools
