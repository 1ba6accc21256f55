//===- ToolCommon.h - What tm-opt and tm-run share ------------------------===//
//
// Error reporting with the tool's name and exit codes (1: the input or a
// pass failed; 2: the command line is wrong), and loading a model from
// .tmir or .onnx.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdio>
#include <map>
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

inline bool isOnnxPath(llvm::StringRef path) { return path.endswith(".onnx"); }

/// Parses the value of --input-shape, NAME=DIMxDIMx... (NAME= for a
/// scalar), into `shapes`; returns an error message or "".
inline std::string parseInputShape(llvm::StringRef v, std::map<std::string, Shape> &shapes) {
  auto [name, dims] = v.split('=');
  if (name.empty() || !v.contains('='))
    return "--input-shape expects NAME=DIMxDIM... (e.g. input=1x3x224x224), got '" + v.str() +
           "'";
  Shape s;
  while (!dims.empty()) {
    auto [d, rest] = dims.split('x');
    int64_t n;
    if (d.getAsInteger(10, n) || n < 0)
      return "--input-shape: '" + d.str() + "' in '" + v.str() +
             "' is not a non-negative integer";
    s.push_back(n);
    dims = rest;
  }
  shapes[name.str()] = s;
  return "";
}

/// Loads `path` (.onnx by suffix, otherwise .tmir) into `out`; returns 0 or
/// the exit code after reporting the error. `inputShapes` fix the shapes of
/// ONNX graph inputs with symbolic dimensions (OnnxImportOptions).
inline int loadModel(const Tool &tool, const std::string &path, LoadedModel &out,
                     const std::map<std::string, Shape> &inputShapes = {}) {
  if (isOnnxPath(path)) {
#ifdef TM_HAVE_ONNX
    io::OnnxImportOptions opts;
    opts.inputShapes = inputShapes;
    auto imported = io::importOnnx(path, opts);
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
  if (!inputShapes.empty())
    return tool.usageError("--input-shape applies to ONNX models (a .tmir file's input shapes "
                           "are part of its graph)");
  auto loaded = loadTmir(path);
  if (loaded.failed())
    return tool.fail(loaded.diagnostic());
  out.module = std::move(*loaded);
  return 0;
}

} // namespace tmg::tools
