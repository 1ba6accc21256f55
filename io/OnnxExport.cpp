//===- OnnxExport.cpp - TracedModule -> ONNX model -------------------------===//
#include "OnnxCommon.h"

namespace tmg::io {

FailureOr<std::string> exportOnnxBytes(const TracedModule &m, const OnnxExportOptions &opts) {
  return Diagnostic(Location(), "ONNX export is not implemented yet");
}

LogicalResult exportOnnx(const TracedModule &m, const std::string &path,
                         const OnnxExportOptions &opts, Diagnostic *diag) {
  auto r = exportOnnxBytes(m, opts);
  if (r.failed()) {
    if (diag)
      *diag = r.diagnostic();
    return failure();
  }
  return success();
}

} // namespace tmg::io
