//===- KernelUtil.h - What the family kernels share -------------*- C++ -*-===//
//
// Private to the runtime: small helpers of the kernels that live in the
// family files of runtime/ops/ (the parameterised activations, math and
// logical ops, modulo, cumsum, and the N-d convolution, pooling and resize
// kernels of ONNX import). These kernels are straightforward OpenMP loops:
// they are rare in the hot path of the models tmgraph optimises (the 2-D
// convolution and pooling kernels of Conv.cpp / Pool.cpp stay the fast
// path; convNd and the N-d pools are the general fallback for 1-D/3-D and
// asymmetric padding).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Extra.h"
#include "tm/runtime/Shape.h"

namespace tmg::rt {
/// The explicit cast of astype (ONNX Cast): cast() plus the conversions to
/// and from strings, which cast() refuses (kernels convert operands with
/// cast(), and text must not be parsed or written behind an op's back).
/// Defined in runtime/Elementwise.cpp.
Tensor castText(const Tensor &x, DType to);
} // namespace tmg::rt

namespace tmg::rt::detail {

inline void requireDef(const char *op, const Tensor &x) {
  if (!x.defined())
    raise("{}: input is undefined", op);
}

/// `x` for a kernel that computes in float32 only: 16-bit floats and
/// integers convert exactly or nearly so; float64 is an error naming `op`
/// (never narrowed silently).
inline Tensor asFloat32(const char *op, const Tensor &x) {
  if (x.dtype() == DType::Float64)
    raise("{}: float64 is not supported (this kernel computes in float32; cast the "
          "input to float32 first)",
          op);
  return asDType(x, DType::Float32);
}

/// Applies f elementwise in floatComputeType (f takes and returns float or
/// double); 16-bit float inputs give their dtype back, integer inputs float32
/// unless keepInt.
template <typename F> Tensor mapFloat(const char *op, const Tensor &x, bool keepInt, F f) {
  requireDef(op, x);
  DType t = floatComputeType(x.dtype());
  Tensor in = asDType(x, t).contiguous();
  Tensor out = Tensor::empty(x.shape(), t);
  visitDType(t, [&](auto tag) {
    using T = StorageT<decltype(tag)::value>;
    if constexpr (std::is_floating_point_v<T>) {
      const T *p = in.data<T>();
      T *q = out.data<T>();
      int64_t n = x.numel();
#pragma omp parallel for if (n > 65536) schedule(static)
      for (int64_t i = 0; i < n; ++i)
        q[i] = T(f(p[i]));
    }
  });
  if ((isFloat(x.dtype()) && x.dtype() != t) || (keepInt && isInteger(x.dtype())))
    return cast(out, x.dtype());
  return out;
}

/// Both operands broadcast to their common shape (copies; these ops are
/// not on a hot path).
inline std::pair<Tensor, Tensor> broadcastPair(const char *op, const Tensor &a,
                                                const Tensor &b) {
  requireDef(op, a);
  requireDef(op, b);
  Shape s = broadcastShapes(op, a.shape(), b.shape());
  // broadcastTo returns a strided view; these kernels read dense data.
  Tensor x = a.shape() == llvm::ArrayRef<int64_t>(s) ? a : broadcastTo(a, s);
  Tensor y = b.shape() == llvm::ArrayRef<int64_t>(s) ? b : broadcastTo(b, s);
  return {x.contiguous(), y.contiguous()};
}

/// Multi-index iteration helper: row-major strides of a shape.
inline std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

inline void checkWindow(const char *op, const Tensor &x, const WindowNd &p, size_t nd) {
  if (x.rank() < 3 || x.rank() - 2 != nd)
    raise("{}: input {} needs {} spatial axes after (N, C)", op, shapeStr(x.shape()), nd);
  auto sized = [&](const std::vector<int64_t> &v, const char *what) {
    if (v.size() != nd)
      raise("{}: {} has {} entries for {} spatial axes", op, what, v.size(), nd);
  };
  sized(p.stride, "stride");
  sized(p.padBegin, "padding");
  sized(p.padEnd, "padding");
  sized(p.dilation, "dilation");
  for (size_t i = 0; i < nd; ++i)
    if (p.stride[i] < 1 || p.dilation[i] < 1 || p.padBegin[i] < 0 || p.padEnd[i] < 0)
      raise("{}: strides and dilations must be >= 1 and paddings >= 0", op);
}

} // namespace tmg::rt::detail
