//===- FusedOps.cpp - conv2d/linear with a fused activation ---------------===//
//
// `nn.conv2d_act(inp, weight, bias, stride, padding, dilation, groups,
// conv_mode, compute_mode, activation)` and `nn.linear_act(inp, weight,
// bias, compute_mode, activation)` run as one interpreter step: relu and
// relu6 are applied by the GEMM epilogue of the conv/linear kernels (on each
// output tile while it is in cache); sigmoid, silu, hardswish, hardsigmoid,
// gelu and gelu_tanh are applied in place over the fresh output in the same
// step, with the same formulas as the elementwise kernels, so no
// intermediate tensor is allocated.
//
//===----------------------------------------------------------------------===//
#include "FusedOps.h"

#include "Internal.h"

#include "Gemm.h"
#include "VecMath.h"
#include "ops/Lowering.h"

#include <cmath>

#include "tm/runtime/Conv.h"
#include "tm/runtime/Linalg.h"

namespace tmg::rt {
using detail::VecFn;
using detail::vecMath;

namespace {

enum class Act : uint8_t {
  None,
  Relu,
  Relu6,
  Sigmoid,
  Silu,
  Hardswish,
  Hardsigmoid,
  Gelu,
  GeluTanh
};

Act parseAct(const std::string &s, const Expr &e) {
  if (s == "none")
    return Act::None;
  if (s == "relu")
    return Act::Relu;
  if (s == "relu6")
    return Act::Relu6;
  if (s == "sigmoid")
    return Act::Sigmoid;
  if (s == "silu")
    return Act::Silu;
  if (s == "hardswish")
    return Act::Hardswish;
  if (s == "hardsigmoid")
    return Act::Hardsigmoid;
  if (s == "gelu")
    return Act::Gelu;
  if (s == "gelu_tanh")
    return Act::GeluTanh;
  raiseAt(Location::atExpr(e.id()),
          "unknown activation '{}' (expected none, relu, relu6, sigmoid, silu, hardswish, "
          "hardsigmoid, gelu or gelu_tanh)",
          s);
}

Activation epilogue(Act a) {
  return a == Act::Relu ? Activation::Relu : a == Act::Relu6 ? Activation::Relu6
                                                             : Activation::None;
}

/// Whether `a` is applied after the GEMM's epilogue (not relu / relu6).
bool hasTail(Act a) { return a != Act::None && a != Act::Relu && a != Act::Relu6; }

/// p[i] = a(p[i]) over n floats, for the activations the GEMM epilogue
/// does not apply (the result of each element does not depend on n).
void tailRow(Act a, float *p, int64_t n) {
  auto each = [p, n](auto f) {
    for (int64_t i = 0; i < n; ++i)
      p[i] = f(p[i]);
  };
  switch (a) {
  case Act::Sigmoid:
    return vecMath(VecFn::Sigmoid, p, p, n);
  case Act::Silu:
    return vecMath(VecFn::Silu, p, p, n);
  case Act::Hardswish:
    return each([](float v) {
      float r = v + 3.0f;
      r = r < 0.0f ? 0.0f : (r > 6.0f ? 6.0f : r);
      return v * r * (1.0f / 6.0f);
    });
  case Act::Hardsigmoid:
    return each([](float v) {
      float r = v * (1.0f / 6.0f) + 0.5f;
      return r < 0.0f ? 0.0f : (r > 1.0f ? 1.0f : r);
    });
  case Act::Gelu:
    return vecMath(VecFn::Gelu, p, p, n);
  case Act::GeluTanh:
    return each([](float v) {
      constexpr float K = 0.7978845608028654f; // sqrt(2 / pi)
      return 0.5f * v * (1.0f + std::tanh(K * (v + 0.044715f * v * v * v)));
    });
  default:
    return;
  }
}

/// tailRow over a whole float32 tensor, in parallel chunks.
void applyTail(Tensor &t, Act a) {
  if (!hasTail(a))
    return;
  if (!t.isContiguous()) { // a conv's output in a concat: image by image
    for (int64_t i = 0; i < t.dim(0); ++i) {
      Tensor image = t.sliced(0, i, i + 1);
      applyTail(image, a);
    }
    return;
  }
  float *p = t.data<float>();
  int64_t n = t.numel();
  constexpr int64_t Chunk = 4096;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; i += Chunk)
    tailRow(a, p + i, std::min(Chunk, n - i));
}

struct Decoder {
  const Expr &e;
  LowerContext &ctx;
  [[noreturn]] void fail(const std::string &m) const { raiseAt(Location::atExpr(e.id()), "{}", m); }
  ArgRef arg(const char *name) const {
    auto a = e.namedArg(name);
    if (!a)
      fail(fmt::format("missing argument '{}'", name));
    return *a;
  }
  int64_t slot(const char *name, bool optional = false) const {
    ArgRef a = arg(name);
    if (optional && a.isConst() && a.scalar().isNone())
      return -1;
    Node *n = a.node();
    if (!n || !llvm::isa<TensorNode>(n))
      fail(fmt::format("argument '{}' must be a tensor", name));
    return ctx.slot(n);
  }
  /// The argument in slot `slot` (-1: absent), as kernels read it: a view
  /// (a channel slice, a transpose) arrives as a contiguous copy.
  static Src src(int64_t slot) {
    Src s;
    s.slot = slot;
    return s;
  }
  std::vector<int64_t> ints(const char *name) const {
    ArgRef a = arg(name);
    const TreeDef &t = a.def;
    std::vector<int64_t> v;
    if (t.isConst() && t.value().isInt())
      return {t.value().getInt()};
    for (size_t i = 0; i < t.numChildren(); ++i)
      if (t.child(i).isConst() && t.child(i).value().isInt())
        v.push_back(t.child(i).value().getInt());
      else
        fail(fmt::format("'{}' must be integers", name));
    if (v.empty())
      fail(fmt::format("'{}' must be integers", name));
    return v;
  }
  Int2 pair(const char *name) const {
    auto v = ints(name);
    if (v.size() > 2)
      fail(fmt::format("'{}' must be an int or a pair", name));
    return v.size() == 1 ? Int2(v[0]) : Int2(v[0], v[1]);
  }
  std::string string(const char *name) const {
    ArgRef a = arg(name);
    if (!a.isConst() || !a.scalar().isString())
      fail(fmt::format("'{}' must be a string", name));
    return a.scalar().getString();
  }
};

} // namespace

StepFn lowerConv2dAct(const Expr &e, OpKind, LowerContext &ctx) {
  Decoder d{e, ctx};
  Act act = parseAct(d.string("activation"), e);
  int64_t x = d.slot("inp"), w = d.slot("weight"), b = d.slot("bias", true);
  uint32_t o = ctx.slot(e.output(0));
  if (d.string("conv_mode") != "cross_correlation")
    d.fail("only conv_mode='cross_correlation' is supported");
  Conv2dParams p;
  p.stride = d.pair("stride");
  p.padding = d.pair("padding");
  p.dilation = d.pair("dilation");
  auto g = d.ints("groups");
  if (g.size() != 1)
    d.fail("'groups' must be one integer");
  p.groups = g[0];
  p.activation = epilogue(act);
  // A weight read by getattr (the usual case) is packed once per plan.
  std::shared_ptr<WeightPack> pack;
  if (auto a = e.namedArg("weight"); a && a->node() && a->node()->expr() &&
                                     (llvm::isa<GetAttr>(a->node()->expr()) ||
                                      llvm::isa<Constant>(a->node()->expr())))
    pack = std::make_shared<WeightPack>(p.groups);
  // A max pool the conv absorbed (a tail activation runs before it, so
  // then the pool runs after the conv, as its own op).
  std::optional<WindowNd> pool;
  if (auto it = ctx.convPools.find(&e); it != ctx.convPools.end())
    pool = it->second;
  // One part of a channel concat: written straight into its output.
  // Its input a NormChain's value: normalised as it is read (planned only
  // without pool or concat target).
  auto normed = x >= 0 ? normedConvInput(e, ctx) : nullptr;
  return [x = d.src(x), w = d.src(w), b = d.src(b), o, p, act, pack, pool,
          target = concatTargetOf(ctx, e), normed](Value *s, RunState &st) {
    Conv2dParams q = p;
    Tensor wt = w.get(s);
    std::shared_ptr<const PackedConvWeight> pw;
    if (pack) {
      pw = pack->get(wt);
      q.packed = pw.get();
    }
    if (normed && runNormedConv(*normed, s, st, uint32_t(x.slot),
                                [&](const detail::ConvInputNorm &in) {
                                  Tensor y = detail::conv2dNormedInput(
                                      in, wt, b.getOr(s), q);
                                  applyTail(y, act);
                                  s[o].tensor = std::move(y);
                                }))
      return;
    Tensor xt = x.get(s);
    q.into = target.view(s, st, xt, wt, p);
    if (pool && !st.observable) {
      Tensor y;
      if (hasTail(act)) {
        y = conv2d(xt, wt, b.getOr(s), q);
        applyTail(y, act);
        y = maxPoolNd(y, *pool);
      } else {
        y = conv2dMaxPool(xt, wt, b.getOr(s), q, *pool);
      }
      s[o].tensor = std::move(y);
      return;
    }
    Tensor y = conv2d(xt, wt, b.getOr(s), q);
    applyTail(y, act);
    s[o].tensor = std::move(y);
  };
}

StepFn lowerLinearAct(const Expr &e, OpKind, LowerContext &ctx) {
  Decoder d{e, ctx};
  Act act = parseAct(d.string("activation"), e);
  int64_t x = d.slot("inp"), w = d.slot("weight"), b = d.slot("bias", true);
  uint32_t o = ctx.slot(e.output(0));
  // A weight read by getattr (the usual case) is packed once per plan.
  auto pack = stableTensorArg(e, "weight") ? std::make_shared<detail::LinearWeightPack>()
                                           : nullptr;
  std::optional<LinearResidual> res;
  if (auto it = ctx.linearResiduals.find(&e); it != ctx.linearResiduals.end())
    res = it->second;
  return [x = d.src(x), w = d.src(w), b = d.src(b), o, act, pack,
          res](Value *s, RunState &st) {
    const Tensor &xt = x.get(s);
    Tensor wt = w.get(s), bt = b.getOr(s);
    auto packed = pack ? pack->get(wt) : nullptr;
    // The tail runs on each block of a float32 result as it is computed.
    auto tail = [act](float *p, int64_t n) { tailRow(act, p, n); };
    s[o].tensor = linearWithResidual(
        res ? &*res : nullptr, s, st, xt, wt, bt, [&](const Tensor &addend) {
          Tensor y = detail::linearWithPack(
              xt, wt, bt, epilogue(act), packed.get(),
              hasTail(act) ? llvm::function_ref<void(float *, int64_t)>(tail)
                           : nullptr,
              addend);
          if (y.dtype() != DType::Float32)
            applyTail(y, act);
          return y;
        });
  };
}

} // namespace tmg::rt
