//===- Compare.h - Comparing outputs with references ------------*- C++ -*-===//
//
// `tm-run --compare` and tests compare a computed tensor with a reference
// element by element: an element is within tolerance when
//   |got - want| <= atol + rtol * |want|
// (NaN equals NaN, infinities equal when their signs do), and the report
// says where and by how much it is not. String tensors compare exactly.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "tm/ir/Tensor.h"

namespace tmg::rt {

/// The defaults pass a correct float32 computation of a standard CNN or
/// Transformer against another engine's float32 result (accumulation
/// order differs): rtol as the ONNX backend suite's; atol for the elements
/// near zero, whose error follows the magnitude of the values summed into
/// them, not their own (a random-weight ResNet-50's outputs reach 350, and
/// both PyTorch's and tmgraph's float32 results are 1e-4 from float64's).
struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-4;
};

struct CompareReport {
  std::string name;
  /// Shape or dtype differ: nothing else is compared.
  bool shapeMismatch = false, dtypeMismatch = false;
  Shape gotShape, wantShape;
  DType gotDType = DType::Float32, wantDType = DType::Float32;
  Tolerance tol;
  int64_t numel = 0;
  /// Elements outside the tolerance (a NaN on one side only counts).
  int64_t outside = 0;
  double maxAbs = 0, meanAbs = 0, maxRel = 0, meanRel = 0;
  /// The element furthest outside the tolerance (or, when all are within,
  /// the one with the largest absolute error); -1 for empty tensors.
  int64_t worstIndex = -1;
  Shape worstCoords;
  double worstGot = 0, worstWant = 0;
  /// String tensors compare exactly: `outside` counts the unequal
  /// elements, the worst is the first of them, given as text.
  bool strings = false;
  std::string worstGotText, worstWantText;

  bool ok() const { return !shapeMismatch && !dtypeMismatch && outside == 0; }
  /// "compare 'out': max abs 1.2e-06, ...: ok" plus, when it fails, the
  /// count and share outside the tolerance and the worst element.
  std::string str() const;
  /// The same as one JSON object.
  std::string json() const;
};

/// Compares `got` with `want` under `tol`. Never throws on mismatching
/// shapes or dtypes: the report says so.
CompareReport compareTensors(const Tensor &got, const Tensor &want, const Tolerance &tol = {},
                             std::string name = "");

} // namespace tmg::rt
