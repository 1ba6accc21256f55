//===- Common.cpp - Shared kernel support ---------------------------------===//
#include "Internal.h"

#include <cblas.h>
#include <climits>
#include <fmt/format.h>

namespace tmg::rt {

llvm::StringRef activationName(Activation a) {
  switch (a) {
  case Activation::None:
    return "none";
  case Activation::Relu:
    return "relu";
  case Activation::Relu6:
    return "relu6";
  }
  return "?";
}

std::string Int2::str() const { return fmt::format("{}x{}", h, w); }

void setNumThreads(int n) {
  if (n < 1)
    raise("setNumThreads: thread count must be >= 1, got {}", n);
  omp_set_num_threads(n);
}

int numThreads() { return omp_get_max_threads(); }

namespace detail {

std::string describe(llvm::StringRef what, const Tensor &t) {
  return fmt::format("{} {}", what.str(), shapeStr(t.shape()));
}

void requireDefined(llvm::StringRef op, const Tensor &t, llvm::StringRef what) {
  if (!t.defined())
    raise("{}: {} is undefined", op.str(), what.str());
}

void requireDType(llvm::StringRef op, const Tensor &t, llvm::StringRef what,
                  DType dtype) {
  requireDefined(op, t, what);
  if (t.dtype() != dtype)
    raise("{}: {} must be {}, got {}", op.str(), describe(what, t),
          dtypeName(dtype).str(), dtypeName(t.dtype()).str());
}

void requireRank(llvm::StringRef op, const Tensor &t, llvm::StringRef what,
                 size_t rank, llvm::StringRef layout) {
  requireDefined(op, t, what);
  if (t.rank() != rank)
    raise("{}: {} must be {}-D{}{}, got {}", op.str(), what.str(), rank,
          layout.empty() ? "" : " ", layout.str(), shapeStr(t.shape()));
}

int64_t normalizeAxis(llvm::StringRef op, int64_t axis,
                      llvm::ArrayRef<int64_t> shape) {
  int64_t rank = int64_t(shape.size());
  if (axis < -rank || axis >= rank)
    raise("{}: axis {} is out of range for shape {}", op.str(), axis,
          shapeStr(shape));
  return axis < 0 ? axis + rank : axis;
}

llvm::SmallVector<int64_t, 4> normalizeAxes(llvm::StringRef op,
                                            llvm::ArrayRef<int64_t> axes,
                                            llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t, 4> out;
  if (axes.empty()) {
    for (size_t d = 0; d < shape.size(); ++d)
      out.push_back(int64_t(d));
    return out;
  }
  llvm::SmallVector<bool, 8> seen(shape.size(), false);
  for (int64_t a : axes) {
    int64_t d = normalizeAxis(op, a, shape);
    if (seen[d])
      raise("{}: axis {} is repeated for shape {}", op.str(), a,
            shapeStr(shape));
    seen[d] = true;
    out.push_back(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void requireBlasSize(llvm::StringRef op, int64_t value, llvm::StringRef what) {
  if (value > INT_MAX)
    raise("{}: {} {} exceeds the BLAS limit of {}", op.str(), what.str(), value,
          INT_MAX);
}

TM_VECTOR_CLONES
void addActivate(float *out, const float *add, int64_t n, Activation act) {
  if (!add)
    return biasActivate(out, n, 0.0f, act);
  switch (act) {
  case Activation::None:
    for (int64_t i = 0; i < n; ++i)
      out[i] = out[i] + add[i];
    return;
  case Activation::Relu:
    for (int64_t i = 0; i < n; ++i)
      out[i] = activate(Activation::Relu, out[i] + add[i]);
    return;
  case Activation::Relu6:
    for (int64_t i = 0; i < n; ++i)
      out[i] = activate(Activation::Relu6, out[i] + add[i]);
    return;
  }
}

TM_VECTOR_CLONES
void biasActivate(float *out, int64_t n, float bias, Activation act) {
  // A zero bias is not added, with or without an activation: -0 + 0 is
  // +0, and relu(-0) is -0, so adding it only when fused would make the
  // fused result differ from the unfused one in the sign of zero.
  if (bias != 0.0f)
    for (int64_t i = 0; i < n; ++i)
      out[i] += bias;
  switch (act) {
  case Activation::None:
    return;
  case Activation::Relu:
    for (int64_t i = 0; i < n; ++i)
      out[i] = out[i] < 0.0f ? 0.0f : out[i];
    return;
  case Activation::Relu6:
    for (int64_t i = 0; i < n; ++i)
      out[i] = out[i] < 0.0f ? 0.0f : (out[i] > 6.0f ? 6.0f : out[i]);
    return;
  }
}

void ensureSerialBlas() {
  // Debian's OpenBLAS is the pthread build. With more than one thread, a
  // call made from an OpenMP worker would wake OpenBLAS's own pool, whose
  // spinning threads compete with OpenMP's for the same cores (and level-3
  // calls from several threads serialise on a lock). The runtime
  // parallelises GEMMs itself, so OpenBLAS runs on the calling thread.
  if (openblas_get_num_threads() != 1)
    openblas_set_num_threads(1);
}

} // namespace detail
} // namespace tmg::rt
