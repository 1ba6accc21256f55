//===- Fuse.cpp - Plan-time fusion: conv chains, norms, elementwise chains ===//
//
// The graph is never changed: fusion is a decision of the execution plan.
// A conv2d (function or builtin module) followed by a relu / relu6 runs as
// one conv whose GEMM epilogue applies the activation: the same float
// operations on the same values as the two ops one after the other, so the
// result is bit for bit the same. A residual add between the two (conv +
// z, z computed before the conv runs, as in ResNet's blocks) is absorbed
// too: the conv adds z where it stores each output value
// (Conv2dParams::residual), again bit for bit; a z whose shape or dtype
// needs broadcasting or promotion runs the add as the op would. A max
// pool that alone reads such a conv's value (without a residual), or a
// conv2d_act's, is absorbed as well: the conv pools its output in bands
// of rows as it computes them (conv2dMaxPool), bit for bit the two ops.
//
// Chains of float32 elementwise ops (each value read only within the chain)
// run as one loop over chunks that stay in L1 (ElementwiseProgram.h), each
// op on the same code as its own kernel: bit for bit the ops one by one.
// Reductions over the last axis join such chains (layer and RMS norms,
// softmax as exported), which then run a row at a time.
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

#include <cassert>
#include <cmath>
#include <mutex>

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/SmallPtrSet.h>

#include "ElementwiseProgram.h"
#include "Gemm.h"
#include "Internal.h"
#include "ops/Lowering.h"
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

/// A constant number argument of `e`, or nullopt (absent: None).
std::optional<double> constNumber(const Expr &e, llvm::StringRef name) {
  auto a = e.namedArg(name);
  if (!a || !a->isConst() || !a->scalar().isNumber())
    return std::nullopt;
  return a->scalar().toDouble();
}

/// clip(x, 0, 6) is relu6, bit for bit: the clip kernel computes
/// `r = x < 0 ? 0 : x; r > 6 ? 6 : r` on float32 (ONNX exports ReLU6 as
/// Clip). clip(x, 0) is not relu: without an upper bound, clip takes
/// ONNX's largest finite float, so +inf becomes FLT_MAX.
std::optional<Activation> clipActivation(const Expr &e) {
  if (e.numOutputs() == 1 && constNumber(e, "lower") == 0.0 &&
      constNumber(e, "upper") == 6.0)
    return Activation::Relu6;
  return std::nullopt;
}

/// The activation `e` applies to its one tensor input, if it is one.
std::optional<Activation> activationOf(const Expr &e) {
  if (auto *cf = llvm::dyn_cast<CallFunction>(&e)) {
    if (cf->func().kind() == OpKind::Relu)
      return Activation::Relu;
    if (cf->func().kind() == OpKind::Relu6)
      return Activation::Relu6;
    if (cf->func().kind() == OpKind::Clip)
      return clipActivation(e);
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

/// When `e` adds two tensors (add, __add__, __iadd__) one of which is `n`,
/// the other one, and whether it comes first.
std::optional<std::pair<const Node *, bool>> addendOf(const Expr &e, const Node *n) {
  const OpSchema *op = e.opSchema();
  if (!op || e.numOutputs() != 1)
    return std::nullopt;
  bool method = llvm::isa<CallMethod>(&e);
  if (!(method ? op->kind() == OpKind::MAdd || op->kind() == OpKind::MIAdd
               : llvm::isa<CallFunction>(&e) && op->kind() == OpKind::Add))
    return std::nullopt;
  auto a = e.namedArg(method ? "self" : "x"), b = e.namedArg(method ? "value" : "y");
  if (!a || !b)
    return std::nullopt;
  Node *na = a->node(), *nb = b->node();
  if (!na || !nb || !llvm::isa<TensorNode>(na) || !llvm::isa<TensorNode>(nb) || na == nb)
    return std::nullopt;
  if (na == n)
    return std::make_pair(static_cast<const Node *>(nb), false);
  if (nb == n)
    return std::make_pair(static_cast<const Node *>(na), true);
  return std::nullopt;
}

/// Whether conv `e`'s weight may be (O, C, 1, 1): false only when its
/// shape is known and is not.
bool mayBePointwise(const Expr &e) {
  const Shape *shape = nullptr;
  if (const Module *m = builtinCallee(e)) {
    const Tensor *w = m->tensor("weight");
    if (w && w->rank() != 4)
      return false;
    return !w || (w->dim(2) == 1 && w->dim(3) == 1);
  }
  if (auto w = e.namedArg("weight"))
    if (auto *t = llvm::dyn_cast_or_null<TensorNode>(w->node()))
      shape = t->staticShape();
  return !shape || (shape->size() == 4 && (*shape)[2] == 1 && (*shape)[3] == 1);
}

/// An inference batch norm with running statistics.
bool isFoldableBatchNorm(const Expr &e) {
  const Module *m = builtinCallee(e);
  return m && llvm::isa<BatchNorm2d>(m) && e.numArgs() == 2 &&
         m->tensor("running_mean") && m->tensor("running_var");
}

/// The tensor input of an inference batch norm: a BatchNorm2d module call
/// with running statistics, or `batch_norm` with training=False.
const Node *batchNormInput(const Expr &e) {
  if (isFoldableBatchNorm(e))
    return e.arg(1).node();
  auto *cf = llvm::dyn_cast<CallFunction>(&e);
  if (!cf || cf->func().kind() != OpKind::BatchNorm || e.numOutputs() != 1)
    return nullptr;
  auto training = e.namedArg("training"), x = e.namedArg("inp");
  if (!training || !training->isConst() || !training->scalar().isBool() ||
      training->scalar().getBool() || !x || !x->node() || !llvm::isa<TensorNode>(x->node()))
    return nullptr;
  return x->node();
}

/// The relu / relu6 op on `t` (None: t itself), as the unfused chain runs it.
Tensor activationOp(const Tensor &t, Activation act) {
  if (act == Activation::None)
    return t;
  return unary(act == Activation::Relu ? UnaryOp::Relu : UnaryOp::Relu6, t);
}

/// A concat of tensors along axis 1 (a constant axis).
bool isChannelConcat(const Expr &e) {
  auto *cf = llvm::dyn_cast<CallFunction>(&e);
  if (!cf || cf->func().kind() != OpKind::Concat || e.numOutputs() != 1)
    return false;
  auto axis = e.namedArg("axis");
  return axis && axis->isConst() && axis->scalar().isInt() && axis->scalar().getInt() == 1;
}

/// Channel concats of a static (N, C, H, W) shape whose every input is
/// computed by a conv2d (a conv2d_act, a plain conv2d, or the head of a
/// fused chain ending in the input) with a static shape and used by the
/// concat alone: the convs write into the concat's output (ConcatPart), a
/// channel slice of it (at N > 1 its images are strided).
void planConcatPlacement(
    const InternalGraph &g, const llvm::DenseSet<const Node *> &outputs,
    const llvm::DenseMap<const Expr *, const Expr *> &chainHeads,
    LowerContext &ctx) {
  // The conv computing `n`'s value into its own output, or null.
  auto producerOf = [&](const Node *n) -> const Expr * {
    const Expr *x = n->expr();
    if (!x || x->numOutputs() != 1)
      return nullptr;
    if (auto it = chainHeads.find(x); it != chainHeads.end())
      return ctx.concatParts.count(it->second) ? nullptr : it->second;
    auto *cf = llvm::dyn_cast<CallFunction>(x);
    bool conv = (cf && cf->func().kind() == OpKind::Conv2dAct) || isConv2d(*x);
    return conv && !ctx.claimed(x) ? x : nullptr;
  };
  // A float32 node's static shape, or null.
  auto staticShape = [](const Node *n) -> const Shape * {
    auto *t = llvm::dyn_cast<TensorNode>(n);
    return t && t->dtype() == DType::Float32 ? t->staticShape() : nullptr;
  };
  for (const Expr *e : g) {
    if (!isChannelConcat(*e) || ctx.claimed(e) || e->numInputs() < 2)
      continue;
    const Shape *cs = staticShape(e->output(0));
    if (!cs || cs->size() != 4)
      continue;
    PlacedConcat placed{*cs, {}};
    llvm::SmallVector<const Expr *, 8> producers;
    llvm::SmallVector<int64_t, 8> widths;
    llvm::DenseSet<const void *> seen; // parts and their producers, once each
    int64_t channels = 0;
    bool ok = true;
    for (const Node *n : e->inputs()) {
      const Expr *x = producerOf(n);
      const Shape *ps = staticShape(n);
      ok = x && n->numUsers() == 1 && !outputs.count(n) &&
           seen.insert(n).second &&
           (x->output(0) == n || seen.insert(x).second) && ps &&
           ps->size() == 4 && (*ps)[0] == (*cs)[0] && (*ps)[2] == (*cs)[2] &&
           (*ps)[3] == (*cs)[3];
      if (!ok)
        break;
      placed.offsets.push_back(channels);
      widths.push_back((*ps)[1]);
      channels += (*ps)[1];
      producers.push_back(x);
    }
    if (!ok || channels != (*cs)[1])
      continue;
    for (size_t i = 0; i < producers.size(); ++i)
      ctx.concatParts[producers[i]] =
          ConcatPart{ctx.slot(e->output(0)), *cs, placed.offsets[i], widths[i]};
    ctx.placedConcats[e] = std::move(placed);
  }
}

/// The op kind of a function call or (non-module) tensor method.
std::optional<OpKind> callKind(const Expr &e) {
  if (auto *cf = llvm::dyn_cast<CallFunction>(&e))
    return cf->func().kind();
  if (auto *cm = llvm::dyn_cast<CallMethod>(&e);
      cm && !cm->isModuleCall() && cm->methodSchema())
    return cm->methodSchema()->kind();
  return std::nullopt;
}

/// The ElementwiseCall decoder of `e`'s op, if it is a unary or binary
/// arithmetic op or a reduction.
ElementwiseFn elementwiseDecoder(const Expr &e) {
  auto k = callKind(e);
  if (!k || *k == OpKind::Custom)
    return nullptr;
  const LowerEntry *entry = lowerTable().lookup(*k);
  return entry ? entry->elementwise : nullptr;
}

/// The ElementwiseCall of `e` if a fused loop can run it (its own step
/// reports arguments it cannot decode).
std::optional<ElementwiseCall> fusableCall(const Expr &e, LowerContext &ctx) {
  ElementwiseFn f = elementwiseDecoder(e);
  if (!f)
    return std::nullopt;
  try {
    ElementwiseCall c = f(e, ctx);
    return c.fusable ? std::optional(std::move(c)) : std::nullopt;
  } catch (const Error &) {
    return std::nullopt;
  }
}

/// Chains of float32 elementwise ops, each value but the last read only by
/// ops of the chain (GELU reads its input twice), of the last one's static
/// shape or that shape with the last axis 1 (a row value: a reduction over
/// the last axis with keepdims, and what is computed from it), where both
/// are known (ctx.elementwiseRoots). A chain grows from its root to the
/// producers of its operands that qualify. Exprs another fusion claimed
/// stay out.
void planElementwiseChains(const InternalGraph &g,
                           const llvm::DenseSet<const Node *> &outputs,
                           const llvm::DenseMap<const Expr *, size_t> &position,
                           LowerContext &ctx) {
  auto float32Out = [](const Expr *x) {
    if (x->numOutputs() != 1)
      return false;
    auto *t = llvm::dyn_cast<TensorNode>(x->output(0));
    return t && t->hasDType() && t->dtype() == DType::Float32;
  };
  llvm::DenseSet<const Expr *> taken;
  // The call of x if it may join a chain, where reductions are not roots.
  auto fusable = [&](const Expr *x) -> std::optional<ElementwiseCall> {
    if (!x || taken.count(x) || ctx.claimed(x) || !float32Out(x))
      return std::nullopt;
    return fusableCall(*x, ctx);
  };
  std::vector<const Expr *> order(g.begin(), g.end());
  for (auto r = order.rbegin(); r != order.rend(); ++r) {
    const Expr *root = *r;
    if (auto c = fusable(root); !c || c->reduce)
      continue;
    const Shape *rootShape =
        llvm::cast<TensorNode>(root->output(0))->staticShape();
    std::optional<Shape> rowShape;
    if (rootShape && !rootShape->empty()) {
      rowShape = *rootShape;
      rowShape->back() = 1;
    }
    auto shapeFits = [&](const Shape *ns) {
      return !ns || !rootShape || *ns == *rootShape ||
             (rowShape && *ns == *rowShape);
    };
    // At most MaxChain ops: the fused loop keeps a chunk of every value
    // of the chain in a per-thread buffer.
    constexpr size_t MaxChain = 32;
    llvm::SmallPtrSet<const Expr *, 8> in{root};
    std::vector<const Expr *> chain{root}, work{root};
    while (!work.empty() && chain.size() < MaxChain) {
      const Expr *m = work.back();
      work.pop_back();
      for (const Node *n : m->inputs()) {
        const Expr *p = n->expr();
        std::optional<ElementwiseCall> call = fusable(p);
        if (!call || in.count(p) || outputs.count(n))
          continue;
        // A reduction joins where the loop runs it: over the last axis of
        // a value of the root's shape.
        if (call->reduce) {
          auto *x = llvm::dyn_cast<TensorNode>(p->input(0));
          int64_t rank = rowShape ? int64_t(rowShape->size()) : 0;
          if (!rowShape || !x || !x->staticShape() ||
              *x->staticShape() != *rootShape ||
              (call->axis != -1 && call->axis != rank - 1))
            continue;
        }
        // Every reader is in the chain (a value read twice joins when its
        // last reader does).
        bool inside = true;
        for (const Use *u = n->firstUse(); u && inside; u = u->nextUse())
          inside = in.count(u->user());
        const Shape *ns = llvm::cast<TensorNode>(n)->staticShape();
        if (!inside || !shapeFits(ns) || chain.size() == MaxChain)
          continue;
        in.insert(p);
        chain.push_back(p);
        work.push_back(p);
      }
    }
    if (chain.size() < 2)
      continue;
    std::sort(chain.begin(), chain.end(), [&](const Expr *a, const Expr *b) {
      return position.lookup(a) < position.lookup(b);
    });
    for (const Expr *x : chain) {
      taken.insert(x);
      if (x != root)
        ctx.deferred[x] = root;
    }
    ctx.elementwiseRoots[root] = std::move(chain);
  }
}

} // namespace

Tensor concatPartView(const ConcatPart &p, Value *slots, const Tensor &x,
                      const Tensor &w, const Conv2dParams &cp) {
  // Only a conv whose output has the planned shape allocates the buffer.
  if (x.rank() != 4 || w.rank() != 4 || x.dim(0) != p.concatShape[0] ||
      w.dim(0) != p.channels)
    return Tensor();
  Int2 end = cp.paddingEnd.value_or(cp.padding);
  if (convOutputSize(x.dim(2), w.dim(2), cp.stride.h, cp.padding.h, end.h,
                     cp.dilation.h) != p.concatShape[2] ||
      convOutputSize(x.dim(3), w.dim(3), cp.stride.w, cp.padding.w, end.w,
                     cp.dilation.w) != p.concatShape[3])
    return Tensor();
  Tensor &buf = slots[p.concatSlot].tensor;
  if (!buf.defined())
    buf = Tensor::empty(p.concatShape, DType::Float32);
  else if (buf.shape() != llvm::ArrayRef<int64_t>(p.concatShape) ||
           buf.dtype() != DType::Float32)
    return Tensor();
  return buf.sliced(1, p.offset, p.offset + p.channels);
}

Tensor ConcatTarget::view(Value *slots, const RunState &st, const Tensor &x,
                          const Tensor &w, const Conv2dParams &cp) const {
  return part && !st.observable ? concatPartView(*part, slots, x, w, cp)
                                : Tensor();
}

ConcatTarget concatTargetOf(const LowerContext &ctx, const Expr &e) {
  auto it = ctx.concatParts.find(&e);
  return {it == ctx.concatParts.end() ? std::nullopt
                                      : std::optional(it->second)};
}

bool concatInPlace(const PlacedConcat &c, const std::vector<Src> &parts,
                   uint32_t out, const Value *slots) {
  const Tensor &buf = slots[out].tensor;
  if (!buf.defined() || buf.shape() != llvm::ArrayRef<int64_t>(c.shape) ||
      buf.dtype() != DType::Float32 || parts.size() != c.offsets.size())
    return false;
  int64_t plane = c.shape[2] * c.shape[3];
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor &t = parts[i].raw(slots);
    int64_t next = i + 1 < parts.size() ? c.offsets[i + 1] : c.shape[1];
    Shape want{c.shape[0], next - c.offsets[i], c.shape[2], c.shape[3]};
    // The channel slice of buf: its strides (images buf's image apart).
    if (!t.defined() || t.dtype() != DType::Float32 ||
        t.shape() != llvm::ArrayRef<int64_t>(want) ||
        t.strides() != buf.strides() ||
        t.viewData() !=
            static_cast<const float *>(buf.rawData()) + c.offsets[i] * plane)
      return false;
  }
  return true;
}

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
  // Position of each expr: a residual operand must be computed before
  // the conv that absorbs the add runs (graph inputs, made by no expr of
  // the body, always are).
  llvm::DenseMap<const Expr *, size_t> position;
  for (const Expr *e : g)
    position.try_emplace(e, position.size());
  // The head of each fused chain, by the chain's last expr.
  llvm::DenseMap<const Expr *, const Expr *> chainHeads;
  auto before = [&](const Node *z, const Expr *head) {
    auto it = position.find(z->expr());
    return it == position.end() || it->second < position.lookup(head);
  };
  // A max pool reading the value of conv `head`'s chain ending at `last`
  // (and nothing else reading it): the conv pools its own output.
  auto poolAfter = [&](const Expr *head, const Expr *last) {
    const Expr *u = soleUser(last->output(0));
    if (!u || ctx.absorbed.count(u))
      return;
    if (auto w = maxPoolWindow(*u, ctx)) {
      ctx.convPools[head] = *w;
      ctx.absorbed[u] = ctx.slot(last->output(0));
    }
  };
  for (const Expr *e : g) {
    if (auto *cf = llvm::dyn_cast<CallFunction>(e);
        cf && cf->func().kind() == OpKind::Conv2dAct && e->numOutputs() == 1 &&
        !ctx.absorbed.count(e)) {
      poolAfter(e, e);
      continue;
    }
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
    if (const Node *n = last->output(0); n->numUsers() == 1 && !outputs.count(n)) {
      const Expr *u = n->firstUse()->user();
      if (auto z = addendOf(*u, n); z && !ctx.absorbed.count(u) && before(z->first, e)) {
        chain.residualSlot = ctx.slot(z->first);
        chain.residualFirst = z->second;
        ctx.absorbed[u] = ctx.slot(n);
        last = u;
      }
    }
    if (const Expr *u = soleUser(last->output(0))) {
      if (auto act = activationOf(*u)) {
        chain.activation = *act;
        ctx.absorbed[u] = ctx.slot(last->output(0));
        last = u;
      }
    }
    if (last != e) {
      ctx.heads[e] = chain;
      chainHeads[last] = e;
    }
    if (chain.residualSlot < 0)
      poolAfter(e, last);
  }
  // linear -> add of a tensor computed before it: the residual
  // connections of transformer blocks.
  for (const Expr *e : g) {
    auto *cf = llvm::dyn_cast<CallFunction>(e);
    if (!cf || e->numOutputs() != 1 || ctx.claimed(e) ||
        (cf->func().kind() != OpKind::Linear &&
         cf->func().kind() != OpKind::LinearAct))
      continue;
    const Node *n = e->output(0);
    if (n->numUsers() != 1 || outputs.count(n))
      continue;
    const Expr *u = n->firstUse()->user();
    if (auto z = addendOf(*u, n); z && !ctx.claimed(u) && before(z->first, e)) {
      ctx.linearResiduals[e] = {ctx.slot(z->first), z->second};
      ctx.absorbed[u] = ctx.slot(n);
    }
  }
  // [concat] -> batch norm -> [relu]: the conv chains above come first.
  for (const Expr *e : g) {
    const Node *x = batchNormInput(*e);
    if (!x || ctx.absorbed.count(e))
      continue;
    NormChain chain;
    if (const Expr *c = x->expr(); c && x->numUsers() == 1 && !outputs.count(x) &&
                                   isChannelConcat(*c) && !ctx.absorbed.count(c) &&
                                   !ctx.heads.count(c) && !ctx.normHeads.count(c))
      chain.concat = c;
    const Expr *act = soleUser(e->output(0));
    if (act && !activationOf(*act))
      act = nullptr;
    if (!chain.concat && !act)
      continue;
    if (chain.concat)
      ctx.deferred[chain.concat] = e;
    if (act) {
      chain.activation = *activationOf(*act);
      ctx.absorbed[act] = ctx.slot(e->output(0));
    }
    chain.value = (act ? act : e)->output(0);
    ctx.normHeads[e] = chain;
  }
  planConcatPlacement(g, outputs, chainHeads, ctx);
  // ... -> conv2d: a pointwise conv normalises its input as it reads it.
  // Not where the conv writes into a concat, pools its output or adds a
  // residual (those read the input's shape first), nor where its weight
  // is known not to be 1x1.
  for (auto &[head, chain] : ctx.normHeads) {
    const Expr *u = soleUser(chain.value);
    auto *cf = u ? llvm::dyn_cast<CallFunction>(u) : nullptr;
    if (!u || u->numOutputs() != 1 ||
        !((cf && cf->func().kind() == OpKind::Conv2dAct) || isConv2d(*u)) ||
        ctx.convPools.count(u) || ctx.concatParts.count(u) ||
        ctx.absorbed.count(u) || ctx.deferred.count(u) || !mayBePointwise(*u))
      continue;
    if (auto h = ctx.heads.find(u);
        h != ctx.heads.end() && h->second.residualSlot >= 0)
      continue;
    chain.conv = u;
    ctx.convInputNorms[u] = head;
    ctx.deferred[head] = u;
  }
  planElementwiseChains(g, outputs, position, ctx);
}

Tensor linearWithResidual(const LinearResidual *res, Value *s,
                          const RunState &st, const Tensor &x, const Tensor &w,
                          const Tensor &b,
                          llvm::function_ref<Tensor(const Tensor &)> linear) {
  if (!res || st.observable)
    return linear(Tensor());
  const Tensor &z = s[res->slot].tensor;
  if (detail::linearAddendFits(x, w, b, z))
    return linear(z);
  // Broadcasting or promoting: the add as its op.
  Tensor y = linear(Tensor());
  return res->first ? binary(BinaryOp::Add, z, y) : binary(BinaryOp::Add, y, z);
}

StepFn elementwiseChainStep(const Expr &root,
                            llvm::ArrayRef<const Expr *> chain, StepFn single,
                            LowerContext &ctx) {
  // The instruction computing each slot of the chain, and the leaves: the
  // operands computed outside it (by slot when they have one).
  llvm::DenseMap<int64_t, uint32_t> instrOfSlot;
  std::vector<ElementwiseCall> calls;
  for (const Expr *x : chain)
    calls.push_back(elementwiseDecoder(*x)(*x, ctx));
  ElementwiseProgram prog;
  std::vector<Src> leaves;
  llvm::DenseMap<int64_t, uint32_t> leafOfSlot;
  auto leaf = [&](const Src &src) -> uint32_t {
    if (src.slot >= 0)
      if (auto it = leafOfSlot.find(src.slot); it != leafOfSlot.end()) {
        // Read as a view only when every op reading it takes views.
        leaves[it->second].strided &= src.strided;
        return it->second;
      }
    uint32_t i = uint32_t(leaves.size());
    leaves.push_back(src);
    if (src.slot >= 0)
      leafOfSlot[src.slot] = i;
    return i;
  };
  // Each operand is a leaf or an earlier instruction; instruction values
  // are numbered after the leaves, whose count is known after this pass.
  struct Ref {
    bool instr;
    uint32_t index;
  };
  std::vector<std::array<Ref, 2>> refs;
  for (size_t k = 0; k < chain.size(); ++k) {
    std::array<Ref, 2> r{};
    const ElementwiseCall &c = calls[k];
    const Src *ops[2] = {&c.x, c.unary || c.reduce ? nullptr : &c.y};
    for (int j = 0; j < 2; ++j) {
      if (!ops[j])
        continue;
      auto it = ops[j]->slot >= 0 ? instrOfSlot.find(ops[j]->slot)
                                  : instrOfSlot.end();
      r[j] = it != instrOfSlot.end() ? Ref{true, it->second}
                                     : Ref{false, leaf(*ops[j])};
    }
    refs.push_back(r);
    instrOfSlot[ctx.slot(chain[k]->output(0))] = uint32_t(k);
  }
  prog.numLeaves = uint32_t(leaves.size());
  for (size_t k = 0; k < chain.size(); ++k) {
    ElementwiseProgram::Instr in;
    in.unary = calls[k].unary;
    in.binary = calls[k].binary;
    in.reduce = calls[k].reduce;
    in.axis = calls[k].axis;
    auto value = [&](Ref r) {
      return r.instr ? prog.numLeaves + r.index : r.index;
    };
    in.a = value(refs[k][0]);
    in.b = in.unary || in.reduce ? 0 : value(refs[k][1]);
    prog.instrs.push_back(in);
  }
  // Where the one pass does not apply (dtypes, or shapes broadcasting
  // between the chain's values, known only at run time), the chain's exprs
  // run one by one, each reporting its own errors.
  std::vector<std::pair<const Expr *, StepFn>> ops;
  for (const Expr *x : chain) {
    OpKind k = *callKind(*x);
    ops.emplace_back(x, x == &root ? single
                                   : lowerTable().lookup(k)->lower(*x, k, ctx));
  }
  const InternalGraph *g = ctx.plan.graph;
  uint32_t o = ctx.slot(root.output(0));
  return [prog, leaves, single, ops, g, o](Value *s, RunState &st) {
    if (st.observable) {
      single(s, st);
      return;
    }
    llvm::SmallVector<Tensor, 8> ts;
    for (const Src &l : leaves)
      ts.push_back(l.get(s));
    if (Tensor r = runFusedElementwise(prog, ts); r.defined()) {
      s[o].tensor = std::move(r);
      return;
    }
    for (const auto &[x, fn] : ops) {
      try {
        fn(s, st);
      } catch (const Error &err) {
        throw errorInStep(err, *x, *g);
      }
    }
  };
}

namespace {
/// What a NormChain's steps read: its parts (the concat's inputs, or the
/// batch norm's own input) and the statistics and affine tensors.
struct NormSource {
  std::vector<Src> parts;
  std::function<std::array<Tensor, 4>(Value *)> params;
  double eps = 0;
  bool concat = false;
  Activation act = Activation::None;

  std::vector<Tensor> tensors(Value *s) const {
    std::vector<Tensor> ts;
    ts.reserve(parts.size());
    for (const Src &p : parts)
      ts.push_back(p.get(s));
    return ts;
  }
  /// Whether `ts` are what batchNormAct takes: float32 parts equal
  /// outside axis 1.
  static bool fits(const std::vector<Tensor> &ts) {
    bool ok = !ts.empty();
    for (const Tensor &t : ts)
      ok &= t.defined() && t.dtype() == DType::Float32 && t.rank() >= 2 &&
            t.rank() == ts[0].rank() && t.dim(0) == ts[0].dim(0) &&
            t.shape().drop_front(2) == ts[0].shape().drop_front(2);
    return ok;
  }
  /// The chain's value as its ops compute it (promotion, or a mismatch
  /// the concat reports).
  Tensor byOps(const std::vector<Tensor> &ts,
               const std::array<Tensor, 4> &p) const {
    Tensor t = concat ? rt::concat(ts, 1) : ts[0];
    t = batchNorm(t, p[0], p[1], p[2], p[3], eps);
    return activationOp(t, act);
  }
};

NormSource normSourceOf(const Expr &bn, const NormChain &chain,
                        LowerContext &ctx) {
  NormSource src;
  src.concat = chain.concat != nullptr;
  src.act = chain.activation;
  if (chain.concat)
    src.parts = Args(*chain.concat, ctx).list("inps");
  if (const Module *m = builtinCallee(bn)) {
    ctx.readsModule(m);
    const Tensor *t[4] = {m->tensor("running_mean"), m->tensor("running_var"),
                          m->tensor("weight"), m->tensor("bias")};
    src.params = [t](Value *) {
      return std::array<Tensor, 4>{*t[0], *t[1], t[2] ? *t[2] : Tensor(),
                                   t[3] ? *t[3] : Tensor()};
    };
    src.eps = m->floatValue("eps");
    if (!chain.concat) {
      Src x;
      x.slot = ctx.slot(bn.arg(1).node());
      src.parts.push_back(x);
    }
    return src;
  }
  Args a(bn, ctx);
  Src mean = a.optTensor("running_mean"), var = a.optTensor("running_var"),
      w = a.optTensor("weight"), b = a.optTensor("bias");
  if (!mean.defined() || !var.defined())
    a.fail("batch_norm needs running_mean and running_var at inference");
  src.params = [mean, var, w, b](Value *s) {
    return std::array<Tensor, 4>{mean.get(s), var.get(s),
                                 w.defined() ? w.get(s) : Tensor(),
                                 b.defined() ? b.get(s) : Tensor()};
  };
  src.eps = a.number("eps");
  if (!chain.concat)
    src.parts.push_back(a.tensor("inp"));
  return src;
}

/// A batch norm's per-channel affine, computed once and kept against the
/// identity (storage, shape, dtype) of the tensors it came from and the
/// channel count, as BatchNormFold keeps its fold.
class AffineCache {
public:
  std::shared_ptr<const detail::ChannelAffine>
  get(const std::array<Tensor, 4> &t, double eps,
      llvm::ArrayRef<int64_t> shape) {
    std::lock_guard l(mu_);
    bool same = affine_ && channels_ == shape[1];
    for (size_t i = 0; same && i < t.size(); ++i)
      same = t[i].defined() == key_[i].defined() &&
             t[i].rawData() == key_[i].rawData() &&
             t[i].shape() == key_[i].shape() && t[i].dtype() == key_[i].dtype();
    if (!same) {
      affine_ = std::make_shared<const detail::ChannelAffine>(
          detail::batchNormAffine(t[0], t[1], t[2], t[3], eps, shape));
      key_ = t;
      channels_ = shape[1];
    }
    return affine_;
  }

private:
  std::mutex mu_;
  std::array<Tensor, 4> key_;
  int64_t channels_ = -1;
  std::shared_ptr<const detail::ChannelAffine> affine_;
};

} // namespace

/// What a NormChain's step, or the conv reading its value
/// (ctx.convInputNorms), reads: its source and its affine, folded once
/// per set of tensors.
struct NormInput {
  NormSource src;
  AffineCache affine;

  /// The affine of parts `ts` (NormSource::fits) under `params`.
  std::shared_ptr<const detail::ChannelAffine>
  affineOf(const std::vector<Tensor> &ts, const std::array<Tensor, 4> &params) {
    return affine.get(params, src.eps, detail::channelConcatShape(ts));
  }
};

std::shared_ptr<NormInput> normedConvInput(const Expr &e, LowerContext &ctx) {
  auto n = ctx.convInputNorms.find(&e);
  if (n == ctx.convInputNorms.end())
    return nullptr;
  auto normed = std::make_shared<NormInput>();
  normed->src = normSourceOf(*n->second, ctx.normHeads.lookup(n->second), ctx);
  return normed;
}

bool runNormedConv(
    NormInput &normed, Value *s, const RunState &st, uint32_t xSlot,
    llvm::function_ref<void(const detail::ConvInputNorm &)> run) {
  if (st.observable)
    return false;
  std::vector<Tensor> ts = normed.src.tensors(s);
  std::array<Tensor, 4> params = normed.src.params(s);
  bool fits = NormSource::fits(ts);
  for (const Tensor &t : ts)
    fits &= t.rank() == 4;
  if (!fits) {
    s[xSlot].tensor = normed.src.byOps(ts, params);
    return false;
  }
  auto affine = normed.affineOf(ts, params);
  run(detail::ConvInputNorm{ts, affine.get(), normed.src.act});
  return true;
}

StepFn normChainStep(const Expr &head, const NormChain &chain, StepFn single,
                     LowerContext &ctx) {
  uint32_t o = ctx.slot(head.output(0));
  if (chain.conv) // the conv reads the parts and normalises them itself
    return [single](Value *s, RunState &st) {
      if (st.observable)
        single(s, st);
    };
  auto in = std::make_shared<NormInput>();
  in->src = normSourceOf(head, chain, ctx);
  return [single, o, in](Value *s, RunState &st) {
    if (st.observable) {
      single(s, st);
      return;
    }
    std::vector<Tensor> ts = in->src.tensors(s);
    std::array<Tensor, 4> params = in->src.params(s);
    s[o].tensor = NormSource::fits(ts)
                      ? detail::scaleShiftChannels(
                            ts, *in->affineOf(ts, params), in->src.act)
                      : in->src.byOps(ts, params);
  };
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

/// The conv call, then (when `pool` is given: a conv2d that absorbed a max
/// pool, ctx.convPools, with no residual or `into`) the pool. With `norm`
/// (a conv2d without pool), the input is that normalised input, not x.
Tensor runConv(const ConvCall &c, const Tensor &x, const Tensor &w,
               const Tensor &b, Activation act,
               const PackedConvWeight *packed = nullptr,
               const Tensor &residual = {}, const Tensor &into = {},
               const std::optional<WindowNd> &pool = std::nullopt,
               const detail::ConvInputNorm *norm = nullptr) {
  if (pool) {
    assert(c.kind == ConvCall::Kind::Conv2d && !residual.defined() &&
           !into.defined());
    Conv2dParams p = c.p2;
    p.activation = act;
    p.packed = packed;
    return conv2dMaxPool(x, w, b, p, *pool);
  }
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
    p.residual = residual;
    p.into = into;
    return norm ? detail::conv2dNormedInput(*norm, w, b, p)
                : conv2d(x, w, b, p);
  }
  case ConvCall::Kind::ConvTranspose2d: {
    ConvTranspose2dParams p = c.pt;
    p.activation = act;
    return convTranspose2d(x, w, b, p);
  }
  }
  return Tensor();
}

/// Whether residual `z` is a float32 tensor of conv2d `c`'s output shape
/// on input `x` and weight `w`: the add then needs no broadcasting or
/// promotion and runs in the conv (Conv2dParams::residual).
bool residualFits(const ConvCall &c, const Tensor &x, const Tensor &w, const Tensor &z) {
  if (c.kind != ConvCall::Kind::Conv2d || !z.defined() || z.dtype() != DType::Float32 ||
      z.rank() != 4 || x.rank() != 4 || w.rank() != 4)
    return false;
  const Conv2dParams &p = c.p2;
  Int2 end = p.paddingEnd.value_or(p.padding);
  return z.dim(0) == x.dim(0) && z.dim(1) == w.dim(0) &&
         z.dim(2) == convOutputSize(x.dim(2), w.dim(2), p.stride.h, p.padding.h, end.h,
                                    p.dilation.h) &&
         z.dim(3) == convOutputSize(x.dim(3), w.dim(3), p.stride.w, p.padding.w, end.w,
                                    p.dilation.w);
}

} // namespace

std::shared_ptr<const PackedConvWeight> WeightPack::get(const Tensor &w) {
  if (!convMicroKernelAvailable() || !w.defined() ||
      w.dtype() != DType::Float32 || w.rank() < 3 || !w.isContiguous() ||
      groups_ <= 0 || w.dim(0) % groups_ != 0)
    return nullptr; // the conv reports what is wrong, if anything
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
  // conv2d reads any view (a channels-last input keeps its layout in the
  // depthwise kernel); the others take dense inputs.
  if (c.kind == ConvCall::Kind::Conv2d)
    c.x = c.x.asView();
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
  // One part of a channel concat: written straight into its output.
  auto intoOf = [target = concatTargetOf(ctx, e), cp = c.p2](
                    Value *s, const RunState &st, const Tensor &x,
                    const Tensor &w) { return target.view(s, st, x, w, cp); };
  // A max pool the conv absorbed (with values observable, it runs as its
  // own step).
  std::optional<WindowNd> pool;
  if (auto p = ctx.convPools.find(&e); p != ctx.convPools.end())
    pool = p->second;
  // A NormChain's value as the input (planned only without pool, residual
  // or concat target): the parts, normalised as the conv reads them.
  // viaNorm runs the conv so and returns true, or computes the input into
  // x's slot and returns false.
  std::shared_ptr<NormInput> normed =
      c.kind == ConvCall::Kind::Conv2d && c.x.slot >= 0
          ? normedConvInput(e, ctx)
          : nullptr;
  auto viaNorm = [c, normed, o](Value *s, const RunState &st, const Tensor &w,
                                const Tensor &b, Activation act,
                                const PackedConvWeight *pw) {
    return normed && runNormedConv(*normed, s, st, uint32_t(c.x.slot),
                                   [&](const detail::ConvInputNorm &in) {
                                     s[o].tensor =
                                         runConv(c, Tensor(), w, b, act, pw, {},
                                                 {}, std::nullopt, &in);
                                   });
  };
  auto it = ctx.heads.find(&e);
  if (it == ctx.heads.end())
    return [c, o, pack, packOf, intoOf, pool, viaNorm](Value *s, RunState &st) {
      Tensor w = c.w.get(s);
      auto pw = packOf(pack, w);
      if (viaNorm(s, st, w, c.b.getOr(s), Activation::None, pw.get()))
        return;
      Tensor x = c.x.get(s);
      if (pool && !st.observable) {
        s[o].tensor = runConv(c, x, w, c.b.getOr(s), Activation::None, pw.get(),
                              {}, {}, pool);
        return;
      }
      s[o].tensor = runConv(c, x, w, c.b.getOr(s), Activation::None, pw.get(),
                            {}, intoOf(s, st, x, w));
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
  return [c, o, chain, fold, pack, foldPack, packOf, intoOf, pool,
          viaNorm](Value *s, RunState &st) {
    Tensor w = c.w.get(s);
    if (st.observable) {
      auto pw = packOf(pack, w);
      s[o].tensor =
          runConv(c, c.x.get(s), w, c.b.getOr(s), Activation::None, pw.get());
      return;
    }
    Tensor b = c.b.getOr(s);
    if (fold)
      std::tie(w, b) = fold->get(w, b);
    auto pw = packOf(fold ? foldPack : pack, w);
    if (viaNorm(s, st, w, b, chain.activation, pw.get()))
      return;
    const Tensor &x = c.x.get(s);
    if (chain.residualSlot < 0) {
      s[o].tensor =
          pool ? runConv(c, x, w, b, chain.activation, pw.get(), {}, {}, pool)
               : runConv(c, x, w, b, chain.activation, pw.get(), {},
                         intoOf(s, st, x, w));
      return;
    }
    const Tensor &z = s[chain.residualSlot].tensor;
    if (residualFits(c, x, w, z)) {
      s[o].tensor = runConv(c, x, w, b, chain.activation, pw.get(), z,
                            intoOf(s, st, x, w));
      return;
    }
    // Broadcasting or promoting: the add and the activation as their ops.
    Tensor t = runConv(c, x, w, b, Activation::None, pw.get());
    t = chain.residualFirst ? binary(BinaryOp::Add, z, t) : binary(BinaryOp::Add, t, z);
    t = activationOp(t, chain.activation);
    s[o].tensor = std::move(t);
  };
}

} // namespace tmg::rt
