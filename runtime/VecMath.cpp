//===- VecMath.cpp - Vectorised float32 exp, erf and activations ----------===//
#include "VecMath.h"

#include <cstring>

namespace tmg::rt::detail {

// GCC's vector extensions pass vectors wider than the baseline ISA in
// other registers; these functions only exist inside one translation unit.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f")
namespace avx512 {
#define W 16
#include "VecMath.inc"
#undef W
} // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace avx2 {
#define W 8
#include "VecMath.inc"
#undef W
} // namespace avx2
#pragma GCC pop_options
#endif

namespace baseline {
#define W 4
#include "VecMath.inc"
#undef W
} // namespace baseline

#pragma GCC diagnostic pop

namespace {
using Fn = void (*)(VecFn, const float *, float *, int64_t);

Fn select() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return avx512::vecMath;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return avx2::vecMath;
#endif
  return baseline::vecMath;
}
} // namespace

void vecMath(VecFn f, const float *x, float *y, int64_t n) {
  static const Fn fn = select();
  fn(f, x, y, n);
}

} // namespace tmg::rt::detail
