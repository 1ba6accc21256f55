//===- test_onnx_coverage.cpp - ONNX op coverage lists ----------*- C++ -*-===//
//
// The coverage lists derived from the ONNX importer and exporter tables:
// which ONNX op types import, which libonnx knows without an importer, and
// which builtin ops have no ONNX export.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "tm/io/Onnx.h"

using namespace tmg;

TEST_CASE("onnx coverage: imported ops come from the importer table") {
  std::vector<std::string> ops = io::onnxImportedOps();
  CHECK(std::is_sorted(ops.begin(), ops.end()));
  for (const char *op : {"Conv", "Gemm", "Relu"})
    CHECK(std::find(ops.begin(), ops.end(), op) != ops.end());
  CHECK(ops == io::onnxSupportedOps());
}

TEST_CASE("onnx coverage: ops without an export") {
  std::vector<OpKind> missing = io::opsWithoutOnnxExport();
  for (OpKind k : {OpKind::Conv2d, OpKind::Add})
    CHECK(std::find(missing.begin(), missing.end(), k) == missing.end());
}

TEST_CASE("onnx coverage: libonnx's ops without an importer") {
  std::vector<std::string> without = io::onnxOpsWithoutImport();
  CHECK(!without.empty());
  CHECK(std::is_sorted(without.begin(), without.end()));
  std::vector<std::string> imported = io::onnxImportedOps();
  std::set<std::string> importedSet(imported.begin(), imported.end());
  for (const std::string &op : without)
    CHECK(importedSet.count(op) == 0);
}
