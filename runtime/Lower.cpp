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
  if (const LowerFn *fn = lowerTable().lookup(k))
    return (*fn)(e, k, ctx);
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
StepFn lowerBuiltinCall(const Expr &e, const Module &m, LowerContext &ctx) {
  if (ModuleKernel k = lookupModuleKernel(m.type()))
    return moduleKernelStep(e, m, k, ctx);
  if (llvm::isa<Elemwise>(&m))
    return lowerElemwiseModule(e, m, ctx);
  if (e.numArgs() != 2 || e.numOutputs() != 1)
    raiseAt(Location::atExpr(e.id()), "{} takes one tensor argument and returns one tensor",
            m.typeName().str());
  ctx.readsModule(&m);
  Node *in = e.arg(1).node();
  if (!in || !llvm::isa<TensorNode>(in))
    raiseAt(Location::atExpr(e.id()), "{} needs a tensor argument", m.typeName().str());
  uint32_t x = ctx.slot(in), o = ctx.slot(e.output(0));
  auto tensorAttr = [&](const char *n) { return m.tensor(n); };
  // Modules from files are verified on loading (ModuleCheck.h); these
  // checks keep a module edited in memory from being dereferenced blindly.
  auto requiredTensor = [&](const char *n) {
    const Tensor *t = m.tensor(n);
    if (!t || !t->defined())
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' parameter", m.typeName().str(), n);
    return t;
  };
  auto valueAttr = [&](const char *n) -> const TreeDef & {
    const TreeDef *v = m.value(n);
    if (!v)
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' attribute", m.typeName().str(), n);
    return *v;
  };
  auto pairAttr = [&](const char *n) { return Args(e, ctx).pairOf(valueAttr(n), n); };
  Src xs;
  xs.slot = x;
  auto fn = [&](std::function<Tensor(const Tensor &)> f) -> StepFn {
    return [xs, o, f](Value *s, RunState &) { s[o].tensor = f(xs.get(s)); };
  };
  auto tensorOr = [](const Tensor *t) { return t ? *t : Tensor(); };
  if (llvm::isa<Conv2d>(&m) || llvm::isa<ConvTranspose2d>(&m)) {
    ConvCall c;
    c.x.slot = x;
    c.w.attr = tensorAttr("weight");
    c.b.attr = tensorAttr("bias");
    if (!c.w.attr)
      raiseAt(Location::atExpr(e.id()), "{} has no weight", m.typeName().str());
    if (llvm::isa<Conv2d>(&m)) {
      if (m.scalar("padding_mode").getString() != "zeros")
        raiseAt(Location::atExpr(e.id()), "Conv2d padding_mode '{}' is not supported",
                m.scalar("padding_mode").getString());
      c.p2.stride = pairAttr("stride");
      c.p2.padding = pairAttr("padding");
      c.p2.dilation = pairAttr("dilation");
      c.p2.groups = m.intValue("groups");
    } else {
      c.kind = ConvCall::Kind::ConvTranspose2d;
      c.pt.stride = pairAttr("stride");
      c.pt.padding = pairAttr("padding");
      c.pt.outputPadding = pairAttr("output_padding");
      c.pt.dilation = pairAttr("dilation");
      c.pt.groups = m.intValue("groups");
    }
    return convStep(e, c, ctx);
  }
  if (llvm::isa<Linear>(&m)) {
    const Tensor *w = requiredTensor("weight"), *b = tensorAttr("bias");
    auto pack = std::make_shared<detail::LinearWeightPack>();
    return fn([w, b, tensorOr, pack](const Tensor &t) {
      auto packed = pack->get(*w);
      return detail::linearWithPack(t, *w, tensorOr(b), Activation::None, packed.get());
    });
  }
  if (llvm::isa<BatchNorm2d>(&m)) {
    const Tensor *mean = tensorAttr("running_mean"), *var = tensorAttr("running_var"),
                 *w = tensorAttr("weight"), *b = tensorAttr("bias");
    if (!mean || !var)
      raiseAt(Location::atExpr(e.id()), "BatchNorm2d without running statistics cannot run "
                                        "at inference");
    double eps = m.floatValue("eps");
    return fn([mean, var, w, b, eps, tensorOr](const Tensor &t) {
      return batchNorm(t, *mean, *var, tensorOr(w), tensorOr(b), eps);
    });
  }
  if (llvm::isa<LayerNorm>(&m)) {
    auto shape = Args::ints(valueAttr("normalized_shape"), Args(e, ctx), "normalized_shape");
    const Tensor *w = tensorAttr("weight"), *b = tensorAttr("bias");
    double eps = m.floatValue("eps");
    return fn([shape, w, b, eps, tensorOr](const Tensor &t) {
      return layerNorm(t, shape, tensorOr(w), tensorOr(b), eps);
    });
  }
  if (llvm::isa<MaxPool2d>(&m) || llvm::isa<AvgPool2d>(&m)) {
    Pool2dParams p;
    p.kernel = pairAttr("kernel_size");
    p.stride = pairAttr("stride");
    p.padding = pairAttr("padding");
    bool avg = llvm::isa<AvgPool2d>(&m);
    if (avg)
      p.countIncludePad = m.scalar("mode").getString() == "average";
    return fn([p, avg](const Tensor &t) { return avg ? avgPool2d(t, p) : maxPool2d(t, p); });
  }
  if (llvm::isa<AdaptiveAvgPool2d>(&m)) {
    Int2 o2 = pairAttr("oshp");
    return fn([o2](const Tensor &t) { return adaptiveAvgPool2d(t, o2); });
  }
  if (llvm::isa<Flatten>(&m)) {
    int64_t s0 = m.intValue("start_axis"), s1 = m.intValue("end_axis");
    return fn([s0, s1](const Tensor &t) { return flatten(t, s0, s1); });
  }
  if (llvm::isa<Embedding>(&m)) {
    const Tensor *w = requiredTensor("weight");
    return fn([w](const Tensor &t) { return take(*w, t, 0); });
  }
  if (llvm::isa<Softmax>(&m)) {
    const Scalar &ax = m.scalar("axis");
    std::optional<int64_t> axis;
    if (ax.isInt())
      axis = ax.getInt();
    return fn([axis](const Tensor &t) {
      return softmax(t, axis ? *axis : defaultSoftmaxAxis(t.rank()));
    });
  }
  if (llvm::isa<ReLU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Relu, t); });
  if (llvm::isa<ReLU6>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Relu6, t); });
  if (llvm::isa<GELU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Gelu, t); });
  if (llvm::isa<Sigmoid>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Sigmoid, t); });
  if (llvm::isa<SiLU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Silu, t); });
  if (llvm::isa<Hardswish>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Hardswish, t); });
  if (llvm::isa<Identity>(&m) || llvm::isa<Dropout>(&m))
    return fn([](const Tensor &t) { return t; });
  raiseAt(Location::atExpr(e.id()), "the runtime does not implement module '{}'",
          m.typeName().str());
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
    if (const LowerFn *fn = lowerTable().lookup(ap.opdef().kind()))
      return (*fn)(e, ap.opdef().kind(), ctx);
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

} // namespace tmg::rt
