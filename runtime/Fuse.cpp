//===- Fuse.cpp - Plan-time fusion of conv, batch norm and activation -----===//
//
// The graph is never changed: fusion is a decision of the execution plan.
// A conv2d (function or builtin module) followed by a relu / relu6 runs as
// one conv whose GEMM epilogue applies the activation: the same float
// operations on the same values as the two ops one after the other, so the
// result is bit for bit the same.
//
// With InterpreterOptions::fastMath, an inference BatchNorm2d between the
// two is absorbed too: the conv's weights and bias get the batch norm
// folded in, which changes the rounding (results agree with the unfused
// chain within float32 rounding, not bitwise). Folded weights are computed
// on the first run and reused while the conv and batch-norm tensors are the
// same tensors (a module attribute replaced by another tensor is refolded).
//
//===----------------------------------------------------------------------===//
#include "Plan.h"

#include <cmath>
#include <mutex>

#include <llvm/ADT/DenseSet.h>

#include "tm/runtime/Kernels.h"

namespace tmg::rt {

namespace {

/// The builtin module a module-call expr calls, if any.
const Module *builtinCallee(const Expr &e) {
  auto *cm = llvm::dyn_cast<CallMethod>(&e);
  if (!cm || !cm->isModuleCall())
    return nullptr;
  ModuleNode *mn = cm->moduleNode();
  Module *m = mn ? mn->owner() : nullptr;
  return m && m->isBuiltin() ? m : nullptr;
}

/// The tensor input of a one-tensor builtin module call or function.
const Node *soleTensorArg(const Expr &e) {
  if (builtinCallee(e))
    return e.numArgs() == 2 ? e.arg(1).node() : nullptr;
  return e.numArgs() >= 1 ? e.arg(0).node() : nullptr;
}

/// The activation `e` applies to its one tensor input, if it is one.
std::optional<Activation> activationOf(const Expr &e) {
  if (auto *cf = llvm::dyn_cast<CallFunction>(&e)) {
    if (cf->func().kind() == OpKind::Relu)
      return Activation::Relu;
    if (cf->func().kind() == OpKind::Relu6)
      return Activation::Relu6;
    return std::nullopt;
  }
  const Module *m = builtinCallee(e);
  if (!m || e.numArgs() != 2)
    return std::nullopt;
  if (llvm::isa<ReLU>(m))
    return Activation::Relu;
  if (llvm::isa<ReLU6>(m))
    return Activation::Relu6;
  if (llvm::isa<Elemwise>(m) && m->scalar("method").isString() &&
      m->scalar("method").getString() == "RELU")
    return Activation::Relu;
  return std::nullopt;
}

bool isConv2d(const Expr &e) {
  if (auto *cf = llvm::dyn_cast<CallFunction>(&e))
    return cf->func().kind() == OpKind::Conv2d;
  const Module *m = builtinCallee(e);
  return m && llvm::isa<Conv2d>(m) && e.numArgs() == 2;
}

/// An inference batch norm with running statistics.
bool isFoldableBatchNorm(const Expr &e) {
  const Module *m = builtinCallee(e);
  return m && llvm::isa<BatchNorm2d>(m) && e.numArgs() == 2 &&
         m->tensor("running_mean") && m->tensor("running_var");
}

} // namespace

void planFusions(const InternalGraph &g, LowerContext &ctx) {
  llvm::DenseSet<const Node *> outputs;
  for (Node *o : g.outputs())
    outputs.insert(o);
  // The only expr reading `n` through its tensor argument, when n has
  // exactly one use and is no graph output.
  auto soleUser = [&](const Node *n) -> const Expr * {
    if (n->numUsers() != 1 || outputs.count(n))
      return nullptr;
    const Expr *u = n->firstUse()->user();
    return soleTensorArg(*u) == n ? u : nullptr;
  };
  for (const Expr *e : g) {
    if (!isConv2d(*e) || e->numOutputs() != 1 || ctx.absorbed.count(e))
      continue;
    FusedChain chain;
    const Expr *last = e;
    if (const Expr *u = soleUser(last->output(0));
        u && ctx.interp.options().fastMath && isFoldableBatchNorm(*u)) {
      chain.batchNorm = builtinCallee(*u);
      ctx.absorbed[u] = ctx.slot(last->output(0));
      last = u;
    }
    if (const Expr *u = soleUser(last->output(0))) {
      if (auto act = activationOf(*u)) {
        chain.activation = *act;
        ctx.absorbed[u] = ctx.slot(last->output(0));
        last = u;
      }
    }
    if (last != e)
      ctx.heads[e] = chain;
  }
}

namespace {

/// Conv weights and bias with a batch norm folded in, cached against the
/// identity (data pointer and shape) of the tensors they came from.
class BatchNormFold {
public:
  explicit BatchNormFold(const Module &bn)
      : mean_(bn.tensor("running_mean")), var_(bn.tensor("running_var")),
        gamma_(bn.tensor("weight")), beta_(bn.tensor("bias")),
        eps_(bn.floatValue("eps")) {}

  /// The folded (weight, bias) of conv weight `w` and bias `b`.
  std::pair<Tensor, Tensor> get(const Tensor &w, const Tensor &b) {
    std::array<Tensor, 6> src = {w, b, *mean_, *var_, gamma_ ? *gamma_ : Tensor(),
                                 beta_ ? *beta_ : Tensor()};
    std::lock_guard l(mu_);
    bool same = folded_.first.defined();
    for (size_t i = 0; same && i < src.size(); ++i)
      same = src[i].rawData() == key_[i].rawData() &&
             src[i].shape() == key_[i].shape() && src[i].dtype() == key_[i].dtype();
    if (!same) {
      folded_ = fold(src);
      key_ = std::move(src);
    }
    return folded_;
  }

private:
  std::pair<Tensor, Tensor> fold(const std::array<Tensor, 6> &s) const {
    const Tensor &w = s[0], &b = s[1];
    if (!w.defined() || w.dtype() != DType::Float32 || w.rank() < 1)
      raise("conv2d: weight {} must be float32 to fold a batch norm into it", w.str());
    int64_t o = w.dim(0), per = o ? w.numel() / o : 0;
    auto channel = [&](const Tensor &t, const char *what, double dflt) {
      std::vector<double> v(o, dflt);
      if (!t.defined())
        return v;
      if (t.numel() != o)
        raise("batch_norm: {} {} does not match the {} output channels of conv "
              "weight {}",
              what, shapeStr(t.shape()), o, shapeStr(w.shape()));
      Tensor c = t.contiguous();
      for (int64_t i = 0; i < o; ++i)
        v[i] = c.at(i);
      return v;
    };
    auto mean = channel(s[2], "running mean", 0), var = channel(s[3], "running var", 1),
         gamma = channel(s[4], "weight", 1), beta = channel(s[5], "bias", 0),
         bias = channel(b, "conv bias", 0);
    Tensor wc = w.contiguous();
    Tensor fw = Tensor::empty(w.shape()), fb = Tensor::empty({o});
    const float *pw = wc.data<float>();
    float *qw = fw.data<float>(), *qb = fb.data<float>();
    for (int64_t c = 0; c < o; ++c) {
      double scale = gamma[c] / std::sqrt(var[c] + eps_);
      for (int64_t i = 0; i < per; ++i)
        qw[c * per + i] = float(pw[c * per + i] * scale);
      qb[c] = float((bias[c] - mean[c]) * scale + beta[c]);
    }
    return {fw, fb};
  }

  const Tensor *mean_, *var_, *gamma_, *beta_;
  double eps_;
  std::mutex mu_;
  std::array<Tensor, 6> key_;
  std::pair<Tensor, Tensor> folded_;
};

Tensor runConv(const ConvCall &c, const Tensor &x, const Tensor &w, const Tensor &b,
               Activation act, const PackedConvWeight *packed = nullptr) {
  switch (c.kind) {
  case ConvCall::Kind::Conv1d: {
    Conv1dParams p = c.p1;
    p.activation = act;
    p.packed = packed;
    return conv1d(x, w, b, p);
  }
  case ConvCall::Kind::Conv2d: {
    Conv2dParams p = c.p2;
    p.activation = act;
    p.packed = packed;
    return conv2d(x, w, b, p);
  }
  case ConvCall::Kind::ConvTranspose2d: {
    ConvTranspose2dParams p = c.pt;
    p.activation = act;
    return convTranspose2d(x, w, b, p);
  }
  }
  return Tensor();
}

} // namespace

std::shared_ptr<const PackedConvWeight> WeightPack::get(const Tensor &w) {
  if (!convMicroKernelAvailable() || !w.defined() ||
      w.dtype() != DType::Float32 || w.rank() < 3 || !w.isContiguous() ||
      groups_ <= 0 || w.dim(0) % groups_ != 0)
    return nullptr; // the conv reports what is wrong, if anything
  if (groups_ > 1 && w.dim(1) == 1)
    return nullptr; // depthwise: a direct kernel, no GEMM
  std::lock_guard l(mu_);
  if (!packed_ || key_.rawData() != w.rawData() || key_.shape() != w.shape()) {
    packed_ = packConvWeight(w, groups_);
    key_ = w;
  }
  return packed_;
}


StepFn convStep(const Expr &e, const ConvCall &call, LowerContext &ctx) {
  uint32_t o = ctx.slot(e.output(0));
  ConvCall c = call;
  ConvGemm gemm = ctx.interp.options().convGemm;
  c.p1.gemm = c.p2.gemm = gemm;
  // Weights that persist across runs are packed once for the micro-kernel
  // (one pack per step, so it lives and dies with the plan).
  int64_t groups = c.kind == ConvCall::Kind::Conv1d ? c.p1.groups : c.p2.groups;
  std::shared_ptr<WeightPack> pack;
  if (c.kind != ConvCall::Kind::ConvTranspose2d && gemm != ConvGemm::Blas &&
      (c.w.slot < 0 || c.stableWeight))
    pack = std::make_shared<WeightPack>(groups);
  auto packOf = [](const std::shared_ptr<WeightPack> &pk, const Tensor &w) {
    return pk ? pk->get(w) : nullptr;
  };
  auto it = ctx.heads.find(&e);
  if (it == ctx.heads.end())
    return [c, o, pack, packOf](Value *s, RunState &) {
      Tensor w = c.w.get(s);
      auto pw = packOf(pack, w);
      s[o].tensor = runConv(c, c.x.get(s), w, c.b.getOr(s), Activation::None, pw.get());
    };
  FusedChain chain = it->second;
  std::shared_ptr<BatchNormFold> fold;
  std::shared_ptr<WeightPack> foldPack;
  if (chain.batchNorm) {
    ctx.readsModule(chain.batchNorm);
    fold = std::make_shared<BatchNormFold>(*chain.batchNorm);
    if (pack)
      foldPack = std::make_shared<WeightPack>(groups);
  }
  return [c, o, chain, fold, pack, foldPack, packOf](Value *s, RunState &st) {
    const Tensor &x = c.x.get(s);
    Tensor w = c.w.get(s);
    if (st.observable) {
      auto pw = packOf(pack, w);
      s[o].tensor = runConv(c, x, w, c.b.getOr(s), Activation::None, pw.get());
      return;
    }
    if (fold) {
      auto [fw, fb] = fold->get(w, c.b.getOr(s));
      auto pw = packOf(foldPack, fw);
      s[o].tensor = runConv(c, x, fw, fb, chain.activation, pw.get());
    } else {
      auto pw = packOf(pack, w);
      s[o].tensor = runConv(c, x, w, c.b.getOr(s), chain.activation, pw.get());
    }
  };
}

} // namespace tmg::rt
