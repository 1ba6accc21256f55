//===- Inputs.h - Random values for a graph's inputs ------------*- C++ -*-===//
//
// What `tm-run --random-inputs` binds to a graph input that has no file:
// seeded standard normals of the input's static shape, cast to its dtype.
// The fuzz targets that run models (fuzz/Targets.cpp) bind inputs the same
// way, with symbolic dims given a small size and a small tensor limit.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

#include "tm/ir/CheckedSize.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg {
class Node;
}

namespace tmg::rt {

struct RandomInputOptions {
  /// The input at position i (of graph.inputs()[1:]) is drawn from seed + i.
  uint64_t seed = 0;
  /// The size given to each symbolic or unknown dim; 0: an input with such
  /// a dim is refused.
  int64_t symbolicDimSize = 0;
  /// An input larger than limits.maxTensorBytes is refused.
  SizeLimits limits;
};

/// Random values for graph input `in` at position `index`, or a Diagnostic
/// naming the input when it cannot be filled: not a tensor (a module), a
/// string tensor, no shape, a symbolic dim (with symbolicDimSize 0), a size
/// above the limit.
FailureOr<Tensor> randomInput(const Node &in, size_t index,
                              const RandomInputOptions &opts);

} // namespace tmg::rt
