//===- ShapeInference.h - Output types from input types ---------*- C++ -*-===//
//
// The type rules of the op schemas and builtin modules: given an expr whose
// inputs have known types (and whose constant arguments are known), compute
// the dtype and shape of each output, as tracing records them. The builder
// uses it for every call it creates; readers and passes can call it to
// re-derive types after an edit. Each op's rule lives in its family's file,
// ir/ops/<family>.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Tensor.h"

namespace tmg {

class Expr;
struct ModuleType;
enum class OpKind : uint16_t;

/// A tensor's static type; either part may be unknown.
struct TensorType {
  std::optional<Shape> shape;
  std::optional<DType> dtype = DType::Float32;
};

/// Output types, inline for the common single output (inference runs for
/// every created expr).
using TensorTypes = llvm::SmallVector<TensorType, 1>;

/// NumPy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b);

/// Output types of `e` (one per output it should have). Returns nullopt when
/// an input type it needs is unknown or the op has no rule. Throws
/// tmg::Error naming the expr, op and shapes when the known types do not fit
/// (e.g. a conv whose input channels do not match its weight).
std::optional<TensorTypes> inferTypes(const Expr &e);

/// The builtin ops without a shape rule (calls of them stay untyped), in
/// Ops.def order.
std::vector<OpKind> opsWithoutShapeRule();
/// The builtin module types with a type rule of their own (a subclass
/// without one uses its base's).
std::vector<const ModuleType *> modulesWithShapeRule();

/// The family whose file (ir/ops/<family>.cpp) holds the shape rule of `k`;
/// empty when `k` has none.
llvm::StringRef shapeRuleFamily(OpKind k);

} // namespace tmg
