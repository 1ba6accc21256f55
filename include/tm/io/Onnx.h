//===- Onnx.h - ONNX import and export --------------------------*- C++ -*-===//
//
// Reading ONNX models (opsets 7 to 17) into flat TracedModules and writing
// TracedModules (flat or hierarchical) back out as ONNX. Built only when
// Debian's libonnx-dev and libprotobuf-dev are found (the Meson feature
// option `onnx`); `TM_HAVE_ONNX` is defined for users of tm_io_dep then.
//
// Import, in short:
//  * initializers become parameters of the top module (attribute names
//    sanitised with the NameSpace rules), reached by GetAttr;
//  * graph inputs that are not initializers become Input nodes named after
//    the ONNX inputs (sanitised: "input" becomes "input_1");
//  * each ONNX node becomes a CallFunction/CallMethod of the matching op
//    schema with its attributes as keyword arguments, or a short fixed
//    composition of schemas where tmgraph has no single op (Gemm with alpha,
//    InstanceNormalization, ReduceL2, Tile, ...); Constant nodes become
//    Constant exprs;
//  * tmgraph graphs are statically shaped: inputs that decide shapes
//    (Reshape's shape, Slice's starts, Expand's shape, ...) must be
//    initializers, Constant nodes, or computable from them and from static
//    shapes at import time (Shape, Gather, Concat, ... are folded). A graph
//    input in such a position is an error whose notes say
//    "constant input: NAME"; bind it with ImportOptions::constantInputs;
//  * tmgraph has no float64: DOUBLE tensors are imported as float32.
//
// The names the module came with (ONNX input, output and initializer names)
// are kept in `OnnxNames` and, for export, in the top module's value
// attribute "onnx_names" (a dict from tmgraph name to ONNX name).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tm/ir/CheckedSize.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/OpSchema.h"
#include "tm/ir/TracedModule.h"

namespace tmg::io {

struct OnnxImportOptions {
  /// Graph inputs (by ONNX name) bound to fixed values: they become
  /// initializers (parameters) instead of graph inputs.
  std::map<std::string, Tensor> constantInputs;
  /// Static shapes for graph inputs (by ONNX name, by the graph node's
  /// sanitised name, or by position among the inputs that are not
  /// initializers: "0", "1", ...) whose ONNX shape has
  /// symbolic or unknown dimensions, such as a dynamic batch `N`. The rank
  /// and every fixed dimension must agree with the model. tmgraph graphs
  /// are statically shaped: an input left symbolic fails at the first node
  /// that needs its shape, with a message naming this option.
  std::map<std::string, Shape> inputShapes;
  /// Let ONNX's own shape inference type the values tmgraph's rules leave
  /// without a dtype, a rank or a dimension; it runs once, when the first
  /// such value is met, so a model the rules type fully never needs it.
  bool onnxShapeInference = true;
  /// Largest tensor and model the file may make the importer allocate
  /// (initializers, Constant nodes, static shapes of graph values);
  /// checked before anything is allocated or given to ONNX's shape
  /// inference.
  SizeLimits limits;
  /// Where the files of tensors stored as external data (`location`,
  /// `offset`, `length`) are found: importOnnx sets it to the model's
  /// directory. Empty: external data is an error.
  std::string externalDataDir;
  /// importOnnx: before parsing, grow the heap by about what parsing the graph
  /// will allocate, on transparent huge pages (reserveHugePageHeap in
  /// tm/ir/HugePages.h): a graph of 10^6 nodes loads about 1.5 times faster.
  /// For tools that read one large model; off by default, since a library call
  /// should not reshape its host's heap. The initializers' bytes do not count
  /// (they are mapped, not parsed).
  bool reserveHeap = false;
};

/// The ONNX names of a module's graph inputs and outputs, in graph order.
struct OnnxNames {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

struct OnnxModel {
  std::unique_ptr<TracedModule> module;
  OnnxNames names;
  int64_t opsetVersion = 0;
};

/// Reads `path` (.onnx). Errors (unreadable or corrupt protobuf, unsupported
/// ops - all listed with their node names -, dtypes, subgraphs, sparse or
/// external-data tensors, shapes that do not fit) come back as a Diagnostic
/// naming the file and the ONNX node.
FailureOr<OnnxModel> importOnnx(const std::string &path,
                                const OnnxImportOptions &opts = {});
/// Same from serialized ModelProto bytes; `name` is used in diagnostics.
FailureOr<OnnxModel> importOnnxBytes(const std::string &bytes, const std::string &name,
                                     const OnnxImportOptions &opts = {});

/// The ONNX op types (default domain) the importer maps, sorted: the keys
/// of its table of per-family importers (io/onnx/<family>.cpp).
const std::vector<std::string> &onnxSupportedOps();
bool isOnnxOpSupported(const std::string &opType);
/// The same list, by value.
std::vector<std::string> onnxImportedOps();
/// The op types of the default ONNX domain known to libonnx's schema
/// registry (deprecated ones left out) that the importer does not map,
/// sorted.
std::vector<std::string> onnxOpsWithoutImport();
/// The builtin ops (Ops.def order) the exporter has no ONNX form for.
std::vector<OpKind> opsWithoutOnnxExport();
/// The builtin module types whose calls export (a subclass without an
/// entry of its own exports as its base).
std::vector<const ModuleType *> modulesWithOnnxExport();
/// Op types used by the model at `path` (sorted, unique), for skip
/// accounting. Fails on an unreadable model.
FailureOr<std::vector<std::string>> onnxModelOps(const std::string &path);

/// Reads a serialized TensorProto (the test data's input_0.pb files).
FailureOr<Tensor> readOnnxTensor(const std::string &path);
/// The ONNX data type name of a TensorProto file's tensor ("FLOAT",
/// "DOUBLE", ...), for comparisons that need the original dtype.
FailureOr<std::string> onnxTensorTypeName(const std::string &path);

struct OnnxExportOptions {
  /// Opset of the default domain written in the model.
  int64_t opsetVersion = 17;
  /// Run ONNX's checker on the result (an error when it fails).
  bool check = true;
  /// exportOnnx: write the initializers of at least externalDataMinBytes
  /// bytes to this file beside the model (ONNX external data: `location`,
  /// `offset`, `length`), e.g. "model.onnx.data". Empty: only when the
  /// model would pass protobuf's 2 GiB limit, to "<model file name>.data".
  /// exportOnnxBytes cannot write external data.
  std::string externalData;
  int64_t externalDataMinBytes = 1024;
};

/// Writes the single graph of `m` (flattened first when hierarchical) as an
/// ONNX model. Parameters and buffers become initializers, Constant exprs
/// Constant nodes. Ops without an ONNX form are an error naming the expr.
FailureOr<std::string> exportOnnxBytes(const TracedModule &m,
                                       const OnnxExportOptions &opts = {});
/// exportOnnxBytes written to `path` (with external data beside it when
/// asked, or when the initializers pass protobuf's 2 GB limit).
FailureOr<void> exportOnnx(const TracedModule &m, const std::string &path,
                           const OnnxExportOptions &opts = {});

} // namespace tmg::io
