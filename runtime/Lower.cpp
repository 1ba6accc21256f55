//===- Lower.cpp - From exprs to kernel calls -----------------------------===//
//
// Each expr becomes a closure with its argument slots and constant
// arguments decoded once, when the plan is built. Calls of builtin ops
// (functions, tensor methods, op defs) are lowered by their family's file
// in runtime/ops/, found through the lowering table; this file lowers the
// other exprs: getattr, constants, calls of builtin modules and of
// user-defined graphs, and user functions with a registered kernel.
//
//===----------------------------------------------------------------------===//
#include "ElemwiseModule.h"
#include "Gemm.h"
#include "Plan.h"
#include "ops/Lowering.h"

#include "tm/ir/ModuleTable.h"
#include "tm/runtime/OpCoverage.h"
#include "tm/ir/Strings.h"
#include "tm/runtime/Eval.h"

namespace tmg::rt {
namespace {

/// The step of a call of builtin op `k` (a function or a tensor method),
/// from the op's family lowering.
/// Refuses a string-typed input of an op that computes on numbers (the
/// kernels' visitDType would refuse it too, without naming the op).
void checkStringInputs(const Expr &e, OpKind k, llvm::StringRef name) {
  if (opAcceptsStrings(k))
    return;
  for (size_t i = 0; i < e.numInputs(); ++i)
    if (auto *t = llvm::dyn_cast<TensorNode>(e.input(i)); t && t->hasDType() && isString(t->dtype()))
      raiseAt(Location::atExpr(e.id()),
              "{}: input '{}' has dtype string, which this op does not support (string "
              "tensors support data movement, equality, cast and string_normalizer)",
              name.str(), t->name().str());
}

StepFn lowerOp(const Expr &e, OpKind k, LowerContext &ctx) {
  checkStringInputs(e, k,
                    llvm::isa<CallFunction>(e) ? llvm::cast<CallFunction>(e).func().printName()
                                               : llvm::cast<CallMethod>(e).method());
  if (const LowerEntry *fn = lowerTable().lookup(k))
    return fn->lower(e, k, ctx);
  raiseAt(Location::atExpr(e.id()), "the runtime does not implement '{}'",
          llvm::isa<CallFunction>(e) ? llvm::cast<CallFunction>(e).func().printName().str()
                                     : llvm::cast<CallMethod>(e).method().str());
}

/// The step of a builtin class registered at run time: its kernel gets the
/// inputs.
static StepFn moduleKernelStep(const Expr &e, const Module &m, ModuleKernel k,
                               LowerContext &ctx) {
  ctx.readsModule(&m);
  std::vector<uint32_t> ins, outs;
  for (size_t i = 1; i < e.numInputs(); ++i)
    ins.push_back(ctx.slot(e.input(i)));
  for (size_t i = 0; i < e.numOutputs(); ++i)
    outs.push_back(ctx.slot(e.output(i)));
  const Expr *ep = &e;
  const Module *mp = &m;
  return [k, ins, outs, ep, mp](Value *s, RunState &) {
    std::vector<Tensor> args;
    for (uint32_t a : ins)
      args.push_back(s[a].tensor);
    std::vector<Tensor> res = k(*mp, *ep, args);
    if (res.size() != outs.size())
      raiseAt(Location::atExpr(ep->id()), "{} returned {} tensors for {} outputs",
              mp->typeName().str(), res.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(res[i]);
  };
}

/// A call of a builtin module: its attributes are read once, its tensors
/// through pointers that stay valid while the module's version holds.
/// A call of a builtin module with one tensor argument and one result, as
/// its lowering sees it.
struct ModuleStep {
  const Expr &e;
  const Module &m;
  LowerContext &ctx;
  uint32_t x, o;

  const Tensor *tensor(const char *n) const { return m.tensor(n); }
  // Modules from files are verified on loading (ModuleCheck.h); these
  // checks keep a module edited in memory from being dereferenced blindly.
  const Tensor *required(const char *n) const {
    const Tensor *t = m.tensor(n);
    if (!t || !t->defined())
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' parameter", m.typeName().str(), n);
    return t;
  }
  const TreeDef &value(const char *n) const {
    const TreeDef *v = m.value(n);
    if (!v)
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' attribute", m.typeName().str(), n);
    return *v;
  }
  Int2 pair(const char *n) const { return Args(e, ctx).pairOf(value(n), n); }
  /// The step computing the result from the argument with `f`.
  StepFn map(std::function<Tensor(const Tensor &)> f) const {
    Src xs;
    xs.slot = x;
    return [xs, o = o, f](Value *s, RunState &) { s[o].tensor = f(xs.get(s)); };
  }
  static Tensor orEmpty(const Tensor *t) { return t ? *t : Tensor(); }
};
using ModuleLowering = StepFn (*)(const ModuleStep &);

StepFn lowerConvModule(const ModuleStep &k) {
  ConvCall c;
  c.x.slot = k.x;
  c.w.attr = k.tensor("weight");
  c.b.attr = k.tensor("bias");
  if (!c.w.attr)
    raiseAt(Location::atExpr(k.e.id()), "{} has no weight", k.m.typeName().str());
  if (llvm::isa<ConvTranspose2d>(&k.m)) {
    c.kind = ConvCall::Kind::ConvTranspose2d;
    c.pt.stride = k.pair("stride");
    c.pt.padding = k.pair("padding");
    c.pt.outputPadding = k.pair("output_padding");
    c.pt.dilation = k.pair("dilation");
    c.pt.groups = k.m.intValue("groups");
    return convStep(k.e, c, k.ctx);
  }
  if (k.m.scalar("padding_mode").getString() != "zeros")
    raiseAt(Location::atExpr(k.e.id()), "Conv2d padding_mode '{}' is not supported",
            k.m.scalar("padding_mode").getString());
  c.p2.stride = k.pair("stride");
  c.p2.padding = k.pair("padding");
  c.p2.dilation = k.pair("dilation");
  c.p2.groups = k.m.intValue("groups");
  return convStep(k.e, c, k.ctx);
}

StepFn lowerLinearModule(const ModuleStep &k) {
  const Tensor *w = k.required("weight"), *b = k.tensor("bias");
  auto pack = std::make_shared<detail::LinearWeightPack>();
  return k.map([w, b, pack](const Tensor &t) {
    auto packed = pack->get(*w);
    return detail::linearWithPack(t, *w, ModuleStep::orEmpty(b), Activation::None,
                                  packed.get());
  });
}

StepFn lowerBatchNormModule(const ModuleStep &k) {
  const Tensor *mean = k.tensor("running_mean"), *var = k.tensor("running_var"),
               *w = k.tensor("weight"), *b = k.tensor("bias");
  if (!mean || !var)
    raiseAt(Location::atExpr(k.e.id()),
            "BatchNorm2d without running statistics cannot run at inference");
  double eps = k.m.floatValue("eps");
  return k.map([mean, var, w, b, eps](const Tensor &t) {
    return batchNorm(t, *mean, *var, ModuleStep::orEmpty(w), ModuleStep::orEmpty(b), eps);
  });
}

StepFn lowerLayerNormModule(const ModuleStep &k) {
  auto shape = Args::ints(k.value("normalized_shape"), Args(k.e, k.ctx), "normalized_shape");
  const Tensor *w = k.tensor("weight"), *b = k.tensor("bias");
  double eps = k.m.floatValue("eps");
  return k.map([shape, w, b, eps](const Tensor &t) {
    return layerNorm(t, shape, ModuleStep::orEmpty(w), ModuleStep::orEmpty(b), eps);
  });
}

StepFn lowerPoolModule(const ModuleStep &k) {
  Pool2dParams p;
  p.kernel = k.pair("kernel_size");
  p.stride = k.pair("stride");
  p.padding = k.pair("padding");
  bool avg = llvm::isa<AvgPool2d>(&k.m);
  if (avg)
    p.countIncludePad = k.m.scalar("mode").getString() == "average";
  return k.map([p, avg](const Tensor &t) { return avg ? avgPool2d(t, p) : maxPool2d(t, p); });
}

StepFn lowerAdaptivePoolModule(const ModuleStep &k) {
  Int2 o2 = k.pair("oshp");
  return k.map([o2](const Tensor &t) { return adaptiveAvgPool2d(t, o2); });
}

StepFn lowerFlattenModule(const ModuleStep &k) {
  int64_t s0 = k.m.intValue("start_axis"), s1 = k.m.intValue("end_axis");
  return k.map([s0, s1](const Tensor &t) { return flatten(t, s0, s1); });
}

StepFn lowerEmbeddingModule(const ModuleStep &k) {
  const Tensor *w = k.required("weight");
  return k.map([w](const Tensor &t) { return take(*w, t, 0); });
}

StepFn lowerSoftmaxModule(const ModuleStep &k) {
  const Scalar &ax = k.m.scalar("axis");
  std::optional<int64_t> axis;
  if (ax.isInt())
    axis = ax.getInt();
  return k.map([axis](const Tensor &t) {
    return softmax(t, axis ? *axis : defaultSoftmaxAxis(t.rank()));
  });
}

template <UnaryOp Op> StepFn lowerUnaryModule(const ModuleStep &k) {
  return k.map([](const Tensor &t) { return unary(Op, t); });
}

StepFn lowerIdentityModule(const ModuleStep &k) {
  return k.map([](const Tensor &t) { return t; });
}

const ModuleTable<ModuleLowering> &moduleLowerings() {
  static const ModuleTable<ModuleLowering> t = {
      {&Conv2d::staticType(), lowerConvModule},
      {&ConvTranspose2d::staticType(), lowerConvModule},
      {&Linear::staticType(), lowerLinearModule},
      {&BatchNorm2d::staticType(), lowerBatchNormModule},
      {&LayerNorm::staticType(), lowerLayerNormModule},
      {&MaxPool2d::staticType(), lowerPoolModule},
      {&AvgPool2d::staticType(), lowerPoolModule},
      {&AdaptiveAvgPool2d::staticType(), lowerAdaptivePoolModule},
      {&Flatten::staticType(), lowerFlattenModule},
      {&Embedding::staticType(), lowerEmbeddingModule},
      {&Softmax::staticType(), lowerSoftmaxModule},
      {&ReLU::staticType(), lowerUnaryModule<UnaryOp::Relu>},
      {&ReLU6::staticType(), lowerUnaryModule<UnaryOp::Relu6>},
      {&GELU::staticType(), lowerUnaryModule<UnaryOp::Gelu>},
      {&Sigmoid::staticType(), lowerUnaryModule<UnaryOp::Sigmoid>},
      {&SiLU::staticType(), lowerUnaryModule<UnaryOp::Silu>},
      {&Hardswish::staticType(), lowerUnaryModule<UnaryOp::Hardswish>},
      {&Identity::staticType(), lowerIdentityModule},
      {&Dropout::staticType(), lowerIdentityModule},
  };
  return t;
}

StepFn lowerBuiltinCall(const Expr &e, const Module &m, LowerContext &ctx) {
  if (ModuleKernel k = lookupModuleKernel(m.type()))
    return moduleKernelStep(e, m, k, ctx);
  if (llvm::isa<Elemwise>(&m))
    return lowerElemwiseModule(e, m, ctx);
  const ModuleLowering *lower = moduleLowerings().find(m);
  if (!lower)
    raiseAt(Location::atExpr(e.id()), "the runtime does not implement module '{}'",
            m.typeName().str());
  if (e.numArgs() != 2 || e.numOutputs() != 1)
    raiseAt(Location::atExpr(e.id()), "{} takes one tensor argument and returns one tensor",
            m.typeName().str());
  ctx.readsModule(&m);
  Node *in = e.arg(1).node();
  if (!in || !llvm::isa<TensorNode>(in))
    raiseAt(Location::atExpr(e.id()), "{} needs a tensor argument", m.typeName().str());
  return (*lower)(ModuleStep{e, m, ctx, ctx.slot(in), ctx.slot(e.output(0))});
}

/// The step of `e` on its own, unfused.
StepFn lowerSingle(const Expr &e, LowerContext &ctx) {
  switch (e.kind()) {
  case Expr::Kind::Input:
    raiseAt(Location::atExpr(e.id()), "Input exprs are not steps");
  case Expr::Kind::GetAttr: {
    auto &ga = llvm::cast<GetAttr>(e);
    auto *base = llvm::dyn_cast<ModuleNode>(e.input(0));
    Module *owner = base ? base->owner() : nullptr;
    if (!owner)
      raiseAt(Location::atExpr(e.id()), "getattr base '{}' has no module",
              e.input(0)->str());
    uint32_t o = ctx.slot(e.output(0));
    if (llvm::isa<ModuleNode>(e.output(0))) {
      Module *m = owner->resolveModule(ga.attrName());
      if (!m)
        raiseAt(Location::atExpr(e.id()), "module '{}' has no submodule '{}'",
                owner->typeName().str(), ga.attrName());
      // Every module on the path: a removed or replaced attribute invalidates.
      for (Module *p = m; p && p != owner; p = p->parent())
        ctx.readsModule(p->parent());
      return [m, o](Value *s, RunState &) { s[o].module = m; };
    }
    const Tensor *t = owner->resolveTensor(ga.attrName());
    if (!t)
      raiseAt(Location::atExpr(e.id()), "module '{}' has no tensor '{}'",
              owner->typeName().str(), ga.attrName());
    Module *holder = owner->resolveModule(
        llvm::StringRef(ga.attrName()).contains('.') ? llvm::StringRef(ga.attrName()).rsplit('.').first
                                                     : llvm::StringRef());
    for (Module *p = holder; p; p = p == owner ? nullptr : p->parent())
      ctx.readsModule(p);
    return [t, o](Value *s, RunState &) { s[o].tensor = *t; };
  }
  case Expr::Kind::Constant: {
    auto &c = llvm::cast<Constant>(e);
    uint32_t o = ctx.slot(e.output(0));
    if (c.isTensor()) {
      Tensor t = c.tensor();
      return [t, o](Value *s, RunState &) { s[o].tensor = t; };
    }
    Module *m = c.module();
    return [m, o](Value *s, RunState &) { s[o].module = m; };
  }
  case Expr::Kind::Apply: {
    auto &ap = llvm::cast<Apply>(e);
    checkStringInputs(e, ap.opdef().kind(), ap.opdef().name());
    if (const LowerEntry *fn = lowerTable().lookup(ap.opdef().kind()))
      return fn->lower(e, ap.opdef().kind(), ctx);
    raiseAt(Location::atExpr(e.id()), "the runtime does not implement op def '{}'",
            ap.opdef().name().str());
  }
  case Expr::Kind::CallFunction: {
    const OpSchema &fn = llvm::cast<CallFunction>(e).func();
    if (fn.kind() == OpKind::Custom)
      if (FunctionKernel k = lookupFunctionKernel(fn)) {
        // A user function (tmg::wrap): its kernel gets every input tensor.
        std::vector<uint32_t> ins, outs;
        for (size_t i = 0; i < e.numInputs(); ++i)
          ins.push_back(ctx.slot(e.input(i)));
        for (size_t i = 0; i < e.numOutputs(); ++i)
          outs.push_back(ctx.slot(e.output(i)));
        const Expr *ep = &e;
        return [k, ins, outs, ep](Value *s, RunState &) {
          std::vector<Tensor> args;
          for (uint32_t a : ins)
            args.push_back(s[a].tensor);
          std::vector<Tensor> res = k(*ep, args);
          if (res.size() != outs.size())
            raiseAt(Location::atExpr(ep->id()), "{} returned {} tensors for {} outputs",
                    llvm::cast<CallFunction>(ep)->func().printName().str(), res.size(),
                    outs.size());
          for (size_t i = 0; i < outs.size(); ++i)
            s[outs[i]].tensor = std::move(res[i]);
        };
      }
    return lowerOp(e, fn.kind(), ctx);
  }
  case Expr::Kind::CallMethod: {
    auto &cm = llvm::cast<CallMethod>(e);
    if (!cm.isModuleCall())
      return lowerOp(e, cm.methodSchema()->kind(), ctx);
    ModuleNode *mn = cm.moduleNode();
    Module *m = mn ? mn->owner() : nullptr;
    if (!m)
      raiseAt(Location::atExpr(e.id()), "module call on '{}' without a module",
              e.input(0)->str());
    if (m->isBuiltin())
      return lowerBuiltinCall(e, *m, ctx);
    InternalGraph *callee = cm.calleeGraph();
    if (!callee)
      raiseAt(Location::atExpr(e.id()), "'{}' has no graph for this call's signature",
              mn->str());
    std::shared_ptr<const ExecutionPlan> plan = ctx.interp.planFor(*callee);
    ctx.plan.callees.push_back(plan);
    std::vector<uint32_t> args, outs;
    for (size_t i = 0; i < e.numInputs(); ++i)
      args.push_back(ctx.slot(e.input(i)));
    for (size_t i = 0; i < e.numOutputs(); ++i)
      outs.push_back(ctx.slot(e.output(i)));
    const ExecutionPlan *raw = plan.get();
    return [raw, args, outs](Value *s, RunState &st) {
      std::vector<Value> in;
      in.reserve(args.size());
      for (uint32_t a : args)
        in.push_back(s[a]);
      std::vector<Value> res = execute(*raw, in, st);
      for (size_t i = 0; i < outs.size(); ++i)
        s[outs[i]] = std::move(res[i]);
    };
  }
  }
  raiseAt(Location::atExpr(e.id()), "unknown expr kind");
}

} // namespace

StepFn lowerExpr(const Expr &e, LowerContext &ctx) {
  StepFn single = lowerSingle(e, ctx);
  if (auto nh = ctx.normHeads.find(&e); nh != ctx.normHeads.end())
    return normChainStep(e, nh->second, std::move(single), ctx);
  if (auto ew = ctx.elementwiseRoots.find(&e); ew != ctx.elementwiseRoots.end())
    return elementwiseChainStep(e, ew->second, std::move(single), ctx);
  if (ctx.deferred.count(&e)) // a later step reads the inputs itself
    return [single](Value *s, RunState &st) {
      if (st.observable)
        single(s, st);
    };
  auto it = ctx.absorbed.find(&e);
  if (it == ctx.absorbed.end())
    return single;
  // Absorbed into a fused chain: the value already is in the input slot.
  uint32_t in = it->second, o = ctx.slot(e.output(0));
  return [single, in, o](Value *s, RunState &st) {
    if (st.observable)
      single(s, st);
    else
      s[o].tensor = s[in].tensor;
  };
}

std::vector<const ModuleType *> modulesWithLowering() {
  std::vector<const ModuleType *> out = moduleLowerings().types();
  out.push_back(&Elemwise::staticType());
  return out;
}

} // namespace tmg::rt
