//===- IndexSpec.h - The items of a __getitem__ index -----------*- C++ -*-===//
//
// A `__getitem__` call records its index as a TreeDef: an int, a slice, None
// (a new axis), Ellipsis, or a tuple of those, where a slice bound may be a
// tensor node read at run time (MegEngine takes `x[a:b]` with tensors a and
// b). decodeIndex reads that TreeDef once for every layer that needs it:
// shape inference, the interpreter's lowering and the ONNX exporter.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tm/ir/Expr.h"

namespace tmg {

/// One slice bound: a constant, a node read at run time, or absent (None).
struct IndexBound {
  std::optional<int64_t> value;
  /// The argument leaf of a bound read at run time.
  std::optional<ArgRef> leaf;
  bool isNone() const { return !value && !leaf; }
  Node *node() const { return leaf ? leaf->node() : nullptr; }
};

/// One item of a basic index.
struct IndexSpec {
  enum class Kind : uint8_t { Index, Slice, NewAxis, Ellipsis };
  Kind kind = Kind::Slice;
  int64_t index = 0; ///< Kind::Index (negative counts from the end)
  IndexBound start, stop, step; ///< Kind::Slice
};

/// The items of index argument `idx` (a tuple gives one per element);
/// nullopt when an item is none of int, slice (with int, None or node
/// bounds), None and Ellipsis, e.g. a tensor used as an index.
std::optional<std::vector<IndexSpec>> decodeIndex(const ArgRef &idx);

} // namespace tmg
