//===- FuseConvActivation.cpp - conv/linear + activation => fused op ------===//
//
// act(conv(x)) and act(linear(x)) - conv an exact Conv2d module call (zero
// padding) or `F.conv2d` (cross-correlation), linear an exact Linear module
// call or `F.linear`; act one of relu, relu6, sigmoid, silu, hswish, hsigmoid,
// hard_sigmoid with slope 1/6 and offset 0.5, gelu, gelu_tanh (function) or
// ReLU, ReLU6, Sigmoid, SiLU, Hardswish, GELU (module) - whose conv output has
// no other use, become one `nn.conv2d_act(...)` / `nn.linear_act(...)` call
// with every convolution argument kept. Module weights are read with a
// getattr of the module's tensors. The runtime runs the fused op as one
// step (runtime/FusedOps.cpp).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <cmath>

namespace tmg {

namespace {

using namespace pat;

Arg argOf(const TreeDef &t) {
  if (t.isConst())
    return Arg(t.value());
  std::vector<Arg> items;
  for (size_t i = 0; i < t.numChildren(); ++i)
    items.push_back(argOf(t.child(i)));
  if (t.kind() == TreeDef::Kind::List)
    return Arg::list(std::move(items));
  return Arg::tuple(std::move(items));
}

/// Arguments of the fused op for producer `c`, or failure.
FailureOr<std::vector<Arg>> fusedArgs(Expr *c, bool conv, Rewriter &rw) {
  static const char *ConvParams[] = {"stride", "padding", "dilation", "groups", "conv_mode",
                                     "compute_mode"};
  std::vector<Arg> args;
  if (Module *mod = xf::calledModule(c)) {
    const ModuleType &t = conv ? Conv2d::staticType() : Linear::staticType();
    if (!xf::isExactly(mod, t) || c->numArgs() != 2 || !c->arg(1).node())
      return Diagnostic(Location(), "not an exact builtin module call");
    if (conv) {
      if (const TreeDef *pm = mod->value("padding_mode"))
        if (!pm->isConst() || !pm->value().isString() || pm->value().getString() != "zeros")
          return Diagnostic(Location(), "padding_mode is not zeros");
      if (const TreeDef *cm = mod->value("conv_mode"))
        if (!cm->isConst() || !cm->value().isString() ||
            cm->value().getString() != "cross_correlation")
          return Diagnostic(Location(), "conv_mode is not cross_correlation");
    }
    auto *ga = llvm::dyn_cast_or_null<GetAttr>(c->input(0)->expr());
    if (!ga || !mod->tensor("weight"))
      return Diagnostic(Location(), "the module is not reached through an attribute");
    args.push_back(c->arg(1).node());
    args.push_back(rw.getAttr(ga->input(0), ga->attrName() + ".weight"));
    if (mod->tensor("bias"))
      args.push_back(rw.getAttr(ga->input(0), ga->attrName() + ".bias"));
    else
      args.push_back(Arg::none());
    if (conv)
      for (const char *p : ConvParams) {
        const TreeDef *v = mod->value(p);
        if (!v)
          return Diagnostic(Location(), fmt::format("the module has no '{}'", p));
        args.push_back(argOf(*v));
      }
    else
      args.push_back(mod->value("compute_mode") ? argOf(*mod->value("compute_mode"))
                                                : Arg("default"));
    return args;
  }
  const OpSchema &s = c->numInputs() ? llvm::cast<CallFunction>(c)->func() : op(OpKind::Conv2d);
  if (conv) {
    auto cm = c->namedArg("conv_mode");
    if (!cm || !cm->isConst() || !cm->scalar().isString() ||
        cm->scalar().getString() != "cross_correlation")
      return Diagnostic(Location(), "conv_mode is not cross_correlation");
  }
  for (const OpParam &p : s.params()) {
    auto a = c->namedArg(p.name);
    if (!a)
      return Diagnostic(Location(), fmt::format("argument '{}' is missing", p.name));
    if (a->def.numLeaves() == 0)
      args.push_back(argOf(a->def));
    else if (Node *n = a->node())
      args.push_back(n);
    else
      return Diagnostic(Location(), fmt::format("argument '{}' is a structure", p.name));
  }
  return args;
}

/// False for a hard_sigmoid whose slope and offset are not the fused
/// kernel's (1/6 and 0.5); true for every other matched activation.
bool isFusableActivation(const Expr *act) {
  const OpSchema *s = act->opSchema();
  if (!s || s->kind() != OpKind::HardSigmoid)
    return true;
  auto number = [act](const char *name, double dflt) -> std::optional<double> {
    auto a = act->namedArg(name);
    if (!a)
      return dflt;
    if (!a->isConst() || !a->scalar().isNumber())
      return std::nullopt;
    return a->scalar().toDouble();
  };
  auto alpha = number("alpha", 0.2), beta = number("beta", 0.5);
  return alpha && beta && std::abs(*alpha - 1.0 / 6.0) <= 1e-6 / 6.0 && *beta == 0.5;
}

} // namespace

void FuseConvActivationPass::populate(PatternSet &set) const {
  Pat x = any("x");
  struct ActSpec {
    const char *name;
    Pat root;
  };
  for (bool conv : {true, false}) {
    Pat prod = conv ? (module<Conv2d>()(x) | fn("conv2d")(x).prefix()).bind("conv")
                    : (module<Linear>()(x) | fn("linear")(x).prefix()).bind("conv");
    std::vector<ActSpec> acts = {
        {"relu", fn("relu")(prod) | module<ReLU>()(prod)},
        {"relu6", fn("relu6")(prod) | module<ReLU6>()(prod)},
        {"sigmoid", fn("sigmoid")(prod) | module<Sigmoid>()(prod)},
        {"silu", fn("silu")(prod) | module<SiLU>()(prod)},
        {"hardswish", fn("hswish")(prod) | module<Hardswish>()(prod)},
        {"hardsigmoid", fn("hsigmoid")(prod) | fn("hard_sigmoid")(prod)},
        {"gelu", fn("gelu")(prod) | module<GELU>()(prod)},
        {"gelu_tanh", fn("gelu_tanh")(prod)},
    };
    for (const ActSpec &a : acts) {
      std::string act = a.name;
      set.add(fmt::format("{}-{}", conv ? "conv2d" : "linear", act), Pattern(a.root),
              [conv, act](const Match &m, Rewriter &rw) -> LogicalResult {
                Expr *c = m.expr("conv");
                if (!c || c->numOutputs() != 1 || !isFusableActivation(m.rootExpr()))
                  return failure();
                auto args = fusedArgs(c, conv, rw);
                if (args.failed())
                  return failure();
                args->push_back(Arg(act));
                Node *y = rw.callFunction(op(conv ? OpKind::Conv2dAct : OpKind::LinearAct),
                                          std::move(*args));
                return rw.replaceAllUsesWith(m.rootExpr()->output(0), y);
              });
    }
  }
}

} // namespace tmg
