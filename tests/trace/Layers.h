//===- Layers.h - The modules of the reference's tests, in C++ ------------===//
#pragma once

#include <cmath>

#include "Fixtures.h"
#include "tm/runtime/Interpreter.h"
#include "tm/trace/Trace.h"

namespace layers {
using namespace tmg;

/// IdentityMod of test_modification.py: forward(x) = x.
struct IdentityMod : LayerOf<IdentityMod> {
  IdentityMod() : LayerOf("IdentityMod", {"x"}) {}
  Var forward(Var x) { return x; }
};

/// MyBlock: conv1 -> bn1 -> relu + 1 -> nothing.
struct MyBlock : LayerOf<MyBlock> {
  explicit MyBlock(int64_t in = 3, int64_t ch = 3) : LayerOf("MyBlock", {"x"}) {
    addModule<Conv2d>("conv1", in, ch, 3, 1, 1, 1, 1, false);
    auto &bn = addModule<BatchNorm2d>("bn1", ch);
    // Non-trivial statistics, so that a wrong edit shows in the numbers.
    bn.registerBuffer("running_mean", Tensor::full({ch}, 0.25));
    bn.registerBuffer("running_var", Tensor::full({ch}, 2.0));
    addModule<IdentityMod>("nothing");
  }
  Var forward(Var x) {
    x = mod("conv1")(x);
    x = mod("bn1")(x);
    x = F::relu(x) + 1;
    return mod("nothing")(x);
  }
};

/// MyModule: block0 -> block1 -> nothing.
struct MyModule : LayerOf<MyModule> {
  MyModule() : LayerOf("MyModule", {"x"}) {
    addModule<MyBlock>("block0");
    addModule<MyBlock>("block1");
    addModule<IdentityMod>("nothing");
  }
  Var forward(Var x) {
    x = mod("block0")(x);
    x = mod("block1")(x);
    return mod("nothing")(x);
  }
};

inline Tensor ones(llvm::ArrayRef<int64_t> shape) { return Tensor::full(shape, 1.0); }

/// max |a - b|, or infinity when the shapes differ.
inline double maxDiff(const Tensor &a, const Tensor &b) {
  if (a.shape() != b.shape())
    return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(a.at(i) - b.at(i)));
  return m;
}

/// Runs the traced module on `inputs` with the interpreter.
inline std::vector<Tensor> run(const TracedModule &m, std::vector<Tensor> inputs) {
  rt::Interpreter interp(m);
  return interp.run(inputs).outputs;
}

/// `f(t)` elementwise (a test reference).
template <typename Fn> Tensor map(const Tensor &t, Fn f) {
  Tensor out = t.clone();
  for (int64_t i = 0; i < t.numel(); ++i)
    out.data<float>()[i] = float(f(t.at(i)));
  return out;
}

} // namespace layers
