//===- quant.cpp - ONNX mapping of quantisation ops -------------*- C++ -*-===//
//
// The ONNX importers and exporters of the quant family. FakeQuantize, its
// one op, has no ONNX form yet (QuantizeLinear followed by
// DequantizeLinear would be one), so this family registers nothing; the
// coverage lists (opsWithoutOnnxExport) show it.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {

void registerQuantOnnxImport(OnnxImportTable &) {}

// -- Export -------------------------------------------------------------------

void registerQuantOnnxExport(OnnxExportTable &) {}

} // namespace tmg::io::onnxdetail
