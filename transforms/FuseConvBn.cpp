//===- FuseConvBn.cpp - Fold batch norms into convolutions / linears ------===//
//
// The reference's FuseConvBn (and mgeconvert's linear + BN fusion), without
// its bugs:
//  * the batch norm is a BatchNorm2d module call or `F.batch_norm` with
//    constant statistics (after attr-to-constant); it must be in eval mode:
//    `training=True` (functional) or a module whose `training` value is true
//    is refused, as is a module without running statistics;
//  * the producer is an exact builtin Conv2d / Linear module call or an
//    `F.conv2d` / `F.linear` call with constant weight (and bias or None),
//    whose output is used by the batch norm only. Builtin subclasses are
//    refused (they may add an activation or another weight layout);
//    non-builtin subclasses are traced, so after `flatten` they show up as
//    the functional form and fold there;
//  * a module is updated in place when this is its only call in the whole
//    hierarchy; otherwise a copy (every attribute kept: stride, padding,
//    dilation, groups, padding_mode, conv_mode, compute_mode, ...) is
//    registered beside it as `<name>_fused[_k]` and called instead;
//  * a conv without bias gets one.
// Folding, per output channel c (s = gamma / sqrt(var + eps)):
//   w'[c] = w[c] * s[c],  b'[c] = beta[c] + (b[c] - mean[c]) * s[c]
// computed in double precision. Candidates are found with a matcher pattern
// (a BatchNorm2d call or F.batch_norm of a Conv2d/Linear call or F.conv2d /
// F.linear); the checks above and the rewrite, which edits modules, are C++.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <cmath>

#include <llvm/ADT/DenseMap.h>

#include "tm/matcher/Matcher.h"

namespace tmg {

namespace {

enum class Producer { Conv, Linear };

struct BnParams {
  const Tensor *mean = nullptr, *var = nullptr, *gamma = nullptr, *beta = nullptr;
  double eps = 1e-5;
  Node *input = nullptr;
};

/// Why a candidate is refused (empty: accepted).
std::string bnParams(const Expr *e, BnParams &p) {
  if (Module *m = xf::calledModule(e)) {
    if (!xf::isExactly(m, BatchNorm2d::staticType()))
      return "not a BatchNorm2d";
    if (const TreeDef *t = m->value("training"))
      if (t->isConst() && t->value().isBool() && t->value().getBool())
        return "the batch norm is in training mode";
    p.mean = m->tensor("running_mean");
    p.var = m->tensor("running_var");
    p.gamma = m->tensor("weight");
    p.beta = m->tensor("bias");
    if (const TreeDef *eps = m->value("eps"))
      p.eps = eps->value().toDouble();
    if (e->numArgs() != 2 || e->numInputs() != 2)
      return "unexpected batch-norm call";
    p.input = e->arg(1).node();
  } else if (isCallFunction(e, &op(OpKind::BatchNorm))) {
    auto arg = [&](const char *name) -> std::optional<ArgRef> { return e->namedArg(name); };
    auto tr = arg("training");
    if (tr && tr->isConst() && tr->scalar().isBool() && tr->scalar().getBool())
      return "the batch norm is in training mode";
    if (tr && !tr->isConst())
      return "training is not a constant";
    auto tensorArg = [&](const char *name, const Tensor *&dst) -> bool {
      auto a = arg(name);
      if (!a || (a->isConst() && a->scalar().isNone()))
        return true;
      dst = xf::staticTensor(a->node());
      return dst != nullptr;
    };
    if (!tensorArg("running_mean", p.mean) || !tensorArg("running_var", p.var) ||
        !tensorArg("weight", p.gamma) || !tensorArg("bias", p.beta))
      return "batch-norm parameters are not constants";
    if (auto eps = arg("eps"); eps && eps->isConst() && eps->scalar().isNumber())
      p.eps = eps->scalar().toDouble();
    auto inp = arg("inp");
    p.input = inp ? inp->node() : nullptr;
  } else {
    return "not a batch norm";
  }
  if (!p.mean || !p.var)
    return "the batch norm has no running statistics";
  if (!p.input)
    return "batch-norm input is not a node";
  return "";
}

/// bn(producer(x)): the batch norm's input is the producer's output (other
/// uses of it are reported by tryFuse, so the pattern does not check them).
Pattern candidatePattern(Producer kind) {
  using namespace pat;
  Pat x = any();
  Pat prod = kind == Producer::Conv
                 ? (module<Conv2d>()(x).checkUsers(false) |
                    fn("conv2d")(x).prefix().checkUsers(false))
                 : (module<Linear>()(x).checkUsers(false) |
                    fn("linear")(x).prefix().checkUsers(false));
  return Pattern(module<BatchNorm2d>()(prod) | fn("batch_norm")(prod).prefix());
}

class Fuser {
public:
  Fuser(TracedModule &m, PassContext &ctx, Producer kind)
      : m_(m), ctx_(ctx), kind_(kind), pattern_(candidatePattern(kind)) {
    // Call sites of every module in the whole hierarchy.
    for (InternalGraph *g : xf::allGraphs(m))
      for (Expr *e : g->body())
        if (Module *mod = xf::calledModule(e))
          ++calls_[mod];
  }

  bool runOn(InternalGraph &g) {
    std::vector<Expr *> bns;
    Match match;
    for (Expr *e : g.body())
      if (match.match(pattern_, e))
        bns.push_back(e);
    bool changed = false;
    for (Expr *bn : bns) {
      std::string why = tryFuse(g, bn);
      if (why.empty()) {
        changed = true;
        ctx_.count(kind_ == Producer::Conv ? "conv-bn-fused" : "linear-bn-fused");
      } else if (why != "-") {
        ctx_.remark(Diagnostic(Location::atExpr(bn->id()),
                                            std::string(kind_ == Producer::Conv
                                                            ? "fuse-conv-bn"
                                                            : "fuse-linear-bn") +
                                                ": not folded: " + why,
                                            Diagnostic::Severity::Remark));
      }
    }
    return changed;
  }

private:
  /// "" when fused, "-" when not a candidate at all, else the reason.
  std::string tryFuse(InternalGraph &g, Expr *bn) {
    BnParams p;
    std::string why = bnParams(bn, p);
    if (!why.empty())
      return why == "not a batch norm" || why == "not a BatchNorm2d" ? "-" : why;
    Expr *prod = p.input->expr();
    Module *mod = xf::calledModule(prod);
    const ModuleType &want =
        kind_ == Producer::Conv ? Conv2d::staticType() : Linear::staticType();
    const OpSchema &fn = op(kind_ == Producer::Conv ? OpKind::Conv2d : OpKind::Linear);
    bool functional = isCallFunction(prod, &fn);
    if (!functional && !(mod && mod->type().isa(want)))
      return "-";
    if (mod && !xf::isExactly(mod, want))
      return fmt::format("{} is a subclass of {}; its semantics may differ",
                         mod->typeName().str(), want.name);
    if (prod->numOutputs() != 1 || p.input->numUsers() != 1 ||
        xf::outputSet(g).count(p.input))
      return "the producer's output has other uses";
    // Weight and bias.
    const Tensor *w = nullptr, *b = nullptr;
    if (mod) {
      w = mod->tensor("weight");
      b = mod->tensor("bias");
    } else {
      auto wa = prod->namedArg("weight");
      w = wa ? xf::staticTensor(wa->node()) : nullptr;
      auto ba = prod->namedArg("bias");
      if (ba && !(ba->isConst() && ba->scalar().isNone())) {
        b = xf::staticTensor(ba->node());
        if (!b)
          return "the bias is not a constant";
      }
    }
    if (!w || w->rank() < 2)
      return "the weight is not a constant";
    int64_t c = w->dim(0);
    auto okLen = [&](const Tensor *t) { return !t || t->numel() == c; };
    if (!okLen(p.mean) || !okLen(p.var) || !okLen(p.gamma) || !okLen(p.beta) || !okLen(b))
      return fmt::format("channel counts differ (weight has {} output channels)", c);
    if (w->dtype() != DType::Float32)
      return "the weight is not float32";
    // Fold.
    std::vector<double> wv = xf::toDoubles(*w), mean = xf::toDoubles(*p.mean),
                        var = xf::toDoubles(*p.var);
    std::vector<double> gamma = p.gamma ? xf::toDoubles(*p.gamma) : std::vector<double>(c, 1.0);
    std::vector<double> beta = p.beta ? xf::toDoubles(*p.beta) : std::vector<double>(c, 0.0);
    std::vector<double> bv = b ? xf::toDoubles(*b) : std::vector<double>(c, 0.0);
    size_t per = wv.size() / size_t(c);
    std::vector<double> nb(c);
    for (int64_t k = 0; k < c; ++k) {
      double s = gamma[k] / std::sqrt(var[k] + p.eps);
      for (size_t j = 0; j < per; ++j)
        wv[size_t(k) * per + j] *= s;
      nb[k] = beta[k] + (bv[k] - mean[k]) * s;
    }
    Tensor nw = xf::fromDoubles(w->shape(), wv);
    Tensor nbias = xf::fromDoubles({c}, nb);
    Node *bnOut = bn->output(0);
    if (mod) {
      if (calls_[mod] == 1) {
        mod->registerParameter("weight", nw);
        mod->registerParameter("bias", nbias);
        if (!xf::replaceAll(g, bnOut, p.input))
          return "the batch norm's uses could not be rewired";
      } else {
        // A copy beside the module, called instead.
        auto *ga = llvm::dyn_cast_or_null<GetAttr>(prod->input(0)->expr());
        Module *parent = mod->parent();
        if (!ga || !parent)
          return "the module is not reached through an attribute";
        std::string base = mod->attrName() + "_fused", name = base;
        for (int k = 1; parent->hasAttr(name); ++k)
          name = fmt::format("{}_{}", base, k);
        std::unique_ptr<Module> copy = mod->clone();
        copy->registerParameter("weight", nw);
        copy->registerParameter("bias", nbias);
        Module &fused = parent->registerModule(name, std::move(copy));
        // The original has one call less; the copy has this one.
        --calls_[mod];
        calls_[&fused] = 1;
        std::string path = ga->attrName();
        size_t dot = path.rfind('.');
        path = (dot == std::string::npos ? "" : path.substr(0, dot + 1)) + name;
        Node *y = xf::withInsertionPoint(g, bn, [&] {
          GraphBuilder bld = GraphBuilder::into(g);
          g.setInsertionPoint(bn);
          Node *mn = bld.getAttr(ga->input(0), path);
          return bld.callModule(mn, {prod->arg(1).node()});
        });
        if (!xf::replaceAll(g, bnOut, y))
          return "the batch norm's uses could not be rewired";
        ctx_.count("modules-copied");
      }
    } else {
      Node *wn = xf::newConstant(g, prod, nw, "weight_fused");
      Node *bnode = xf::newConstant(g, prod, nbias, "bias_fused");
      auto oldW = prod->namedArg("weight")->node()->expr();
      auto ba = prod->namedArg("bias");
      Expr *oldB = ba && ba->node() ? ba->node()->expr() : nullptr;
      xf::setPositionalArg(prod, 1, wn);
      xf::setPositionalArg(prod, 2, bnode);
      if (!xf::replaceAll(g, bnOut, p.input))
        return "the batch norm's uses could not be rewired";
      xf::eraseDeadFrom(g, {oldW, oldB});
    }
    xf::eraseDeadFrom(g, {bn});
    return "";
  }

  TracedModule &m_;
  PassContext &ctx_;
  Producer kind_;
  Pattern pattern_;
  llvm::DenseMap<const Module *, int64_t> calls_;
};

FailureOr<bool> runFuse(TracedModule &m, PassContext &ctx, Producer kind) {
  Fuser f(m, ctx, kind);
  bool changed = false;
  for (InternalGraph *g : xf::allGraphs(m))
    changed |= f.runOn(*g);
  return changed;
}

} // namespace

FailureOr<bool> FuseConvBnPass::run(TracedModule &m, PassContext &ctx) {
  return runFuse(m, ctx, Producer::Conv);
}

FailureOr<bool> FuseLinearBnPass::run(TracedModule &m, PassContext &ctx) {
  return runFuse(m, ctx, Producer::Linear);
}

} // namespace tmg
