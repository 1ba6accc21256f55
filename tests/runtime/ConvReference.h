//===- ConvReference.h - Direct-loop conv2d reference for the tests -*- C++ -*-===//
//
// Shared by test_conv.cpp (every conv path) and test_conv_gemm.cpp (the
// GEMM micro-kernel): one case description and one double-precision
// reference, so both files check against the same thing.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <sstream>
#include <string>

#include "Reference.h"

namespace tmtest {

using tmg::rt::Activation;
using tmg::rt::Int2;

/// One conv2d case: input (n, c, h, w), weight (o, c / groups, kh, kw);
/// `pad` is the padding before, `padEnd` the one after (asymmetric).
struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, groups = 1;
  Int2 stride = 1, pad = 0, padEnd = 0, dilation = 1;
  bool bias = true;
  Activation act = Activation::None;
};

inline std::string describeCase(const ConvCase &k) {
  std::ostringstream os;
  os << "x (" << k.n << ", " << k.c << ", " << k.h << ", " << k.w << ") w ("
     << k.o << ", " << k.c / k.groups << ", " << k.kh << ", " << k.kw
     << ") groups " << k.groups << " stride " << k.stride.str() << " pad "
     << k.pad.str() << "/" << k.padEnd.str() << " dilation " << k.dilation.str()
     << " bias " << k.bias << " act " << tmg::rt::activationName(k.act).str();
  return os.str();
}

inline double activateRef(Activation a, double v) {
  if (a == Activation::Relu)
    return std::max(v, 0.0);
  if (a == Activation::Relu6)
    return std::min(std::max(v, 0.0), 6.0);
  return v;
}

/// Direct 7-loop convolution in double.
inline Ref refConv2d(const Ref &x, const Ref &w, const Ref *b, const ConvCase &k) {
  int64_t oh = (k.h + k.pad.h + k.padEnd.h - k.dilation.h * (k.kh - 1) - 1) /
                   k.stride.h +
               1;
  int64_t ow = (k.w + k.pad.w + k.padEnd.w - k.dilation.w * (k.kw - 1) - 1) /
                   k.stride.w +
               1;
  int64_t cg = k.c / k.groups, og = k.o / k.groups;
  Ref y(Shape{k.n, k.o, oh, ow});
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t o = 0; o < k.o; ++o)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double s = b ? b->v[o] : 0.0;
          int64_t g = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ki = 0; ki < k.kh; ++ki)
              for (int64_t kj = 0; kj < k.kw; ++kj) {
                int64_t iy = oy * k.stride.h - k.pad.h + ki * k.dilation.h;
                int64_t ix = ox * k.stride.w - k.pad.w + kj * k.dilation.w;
                if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w)
                  continue;
                s += x({n, g * cg + ci, iy, ix}) * w({o, ci, ki, kj});
              }
          y({n, o, oy, ox}) = activateRef(k.act, s);
        }
  return y;
}

} // namespace tmtest
