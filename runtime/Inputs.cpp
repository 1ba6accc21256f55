//===- Inputs.cpp - Random values for a graph's inputs --------------------===//
#include "tm/runtime/Inputs.h"

#include "tm/ir/Node.h"
#include "tm/ir/SymbolicDim.h"
#include "tm/runtime/Elementwise.h"

namespace tmg::rt {

FailureOr<Tensor> randomInput(const Node &node, size_t index,
                              const RandomInputOptions &opts) {
  std::string name = "input '" + node.name().str() + "'";
  const auto *tn = llvm::dyn_cast<TensorNode>(&node);
  if (!tn)
    return Diagnostic(Location(), name + " is not a tensor, which is not filled randomly");
  const TensorNode &in = *tn;
  if (in.hasDType() && isString(in.dtype()))
    return Diagnostic(Location(), name + " is a string tensor, which is not filled randomly");
  if (!in.shape())
    return Diagnostic(Location(), name + " has no static shape to fill randomly");
  Shape shape = *in.shape();
  if (!in.staticShape()) {
    if (opts.symbolicDimSize <= 0)
      return Diagnostic(Location(), name + " has shape " + dim::dimsStr(shape) +
                                        ", whose symbolic sizes are not filled randomly");
    for (int64_t &d : shape)
      if (d < 0)
        d = opts.symbolicDimSize;
  }
  DType dtype = in.hasDType() ? in.dtype() : DType::Float32;
  auto bytes = checkTensorBytes(name, shape, dtype, opts.limits);
  if (bytes.failed())
    return bytes.diagnostic();
  Tensor t = Tensor::randn(shape, opts.seed + index);
  if (dtype != DType::Float32)
    t = cast(t, dtype);
  return t;
}

} // namespace tmg::rt
