//===- Common.h - Types shared by the CPU kernels ---------------*- C++ -*-===//
//
// Conventions of every kernel in tm/runtime/ (namespace tmg::rt):
//  * inputs are `const Tensor &`; an optional tensor input (a bias, a
//    weight) is passed as an undefined `Tensor()`. Strided views (see
//    Tensor::isContiguous) are read natively by the elementwise binary ops,
//    compare, where and cast (through their broadcast plans) and by the
//    view kernels of Shape.h; every other kernel requires dense inputs and
//    throws tmg::Error for a view (Tensor::data() does) -- the interpreter
//    gives them contiguous() inputs at one place, its argument fetch;
//  * outputs are freshly allocated dense tensors, except the view kernels of
//    Shape.h (transpose, broadcast_to, slicing, reshape...), which share
//    the input's storage because Tensor storage is immutable to kernels;
//  * attributes are typed parameters (axes, Int2 pairs, small parameter
//    structs usable with designated initialisers);
//  * every kernel validates its inputs before touching data and throws
//    tmg::Error whose message starts with the op name and quotes the shapes,
//    e.g. "conv2d: input (1, 3, 8, 8) has 3 channels but weight
//    (16, 4, 3, 3) expects 4";
//  * kernels are parallelised with OpenMP over contiguous ranges of their
//    output. Every output element is computed by one thread in a fixed
//    order, and reductions that need several threads per output combine
//    fixed, shape-determined chunks in chunk order, so results do not depend
//    on the thread count (the tests check this bitwise for reductions). GEMM
//    work is split by output rows or columns, never along K; each element is
//    one OpenBLAS dot product (identical across thread counts in practice,
//    though only OpenBLAS can promise its micro-kernel order);
//  * kernels must not be called concurrently from several threads that
//    change the thread count (setNumThreads is process-wide).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Tensor.h"

namespace tmg::rt {

/// An activation fused into the epilogue of conv and linear kernels: it is
/// applied to each output element right after the bias is added, while the
/// tile is still in cache.
enum class Activation : uint8_t { None, Relu, Relu6 };

/// "none", "relu", "relu6".
llvm::StringRef activationName(Activation a);

/// A (height, width) pair: kernel sizes, strides, paddings, dilations.
/// Implicitly constructible from one integer used for both.
struct Int2 {
  int64_t h = 0;
  int64_t w = 0;

  constexpr Int2() = default;
  constexpr Int2(int64_t v) : h(v), w(v) {} // NOLINT: implicit by design
  constexpr Int2(int64_t h, int64_t w) : h(h), w(w) {}

  friend constexpr bool operator==(Int2 a, Int2 b) {
    return a.h == b.h && a.w == b.w;
  }
  /// "3x3".
  std::string str() const;
};

/// Sets the number of OpenMP threads the kernels use (n >= 1); throws
/// tmg::Error otherwise. The setting is process-wide (omp_set_num_threads).
void setNumThreads(int n);
/// Number of threads a parallel kernel will use.
int numThreads();

} // namespace tmg::rt
