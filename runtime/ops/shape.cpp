//===- shape.cpp - Lowering of the shape family -----------------*- C++ -*-===//
//
// Reshapes, flatten, transpose, broadcast_to, squeeze and expand_dims make
// views where the layout allows (their operand is read as a view); concat,
// stack, split and pad copy. The GetVarShape op def (what `x.shape`
// records) yields the shape as an int32 tensor.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

/// The integers of a method's positional arguments after `self`
/// (`x.reshape(2, 3)` or `x.reshape((2, 3))`).
std::vector<int64_t> methodInts(const Args &a, llvm::StringRef what) {
  const Expr &e = a.expr();
  std::vector<int64_t> out;
  for (size_t i = 1; i < e.numArgs(); ++i) {
    auto v = Args::ints(e.arg(i).def, a, what);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

/// reshape(inp, target_shape): a shape given as ints, or as a tensor node
/// whose values are read when the step runs.
StepFn lowerReshape(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg shape = a.intsArg("target_shape");
  Src x = a.tensor("inp").asView();
  return [x, shape, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = reshape(x.get(s), shape.get(s));
  };
}

StepFn lowerMReshape(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> shape = methodInts(a, "shape");
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [shape](const Tensor &x) { return reshape(x, shape); });
}

StepFn lowerFlatten(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t s0 = a.integer("start_axis"), s1 = a.integer("end_axis");
  return unaryStep(a.tensor("inp").asView(), outSlot(e, ctx),
                   [s0, s1](const Tensor &x) { return flatten(x, s0, s1); });
}

StepFn lowerMFlatten(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [](const Tensor &x) { return flatten(x, 0, -1); });
}

StepFn lowerTranspose(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> perm = a.ints("pattern");
  return unaryStep(a.tensor("inp").asView(), outSlot(e, ctx),
                   [perm](const Tensor &x) { return transpose(x, perm); });
}

StepFn lowerMTranspose(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> perm = methodInts(a, "pattern");
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [perm](const Tensor &x) { return transpose(x, perm); });
}

/// broadcast_to(inp, shape) and inp._broadcast(*shape).
StepFn lowerBroadcastTo(const Expr &e, OpKind k, LowerContext &ctx) {
  Args a(e, ctx);
  bool method = k == OpKind::MBroadcast;
  IntsArg shape;
  if (method)
    shape.fixed = methodInts(a, "shape");
  else
    shape = a.intsArg("shape");
  Src x = a.tensor(method ? "self" : "inp").asView();
  return [x, shape, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = broadcastTo(x.get(s), shape.get(s));
  };
}

StepFn lowerSqueeze(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg axes = a.axesArg("axis");
  Src x = a.tensor("inp").asView();
  return [x, axes, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = squeeze(x.get(s), axes.get(s));
  };
}

StepFn lowerExpandDims(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg axes = a.intsArg("axis");
  Src x = a.tensor("inp").asView();
  return [x, axes, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = expandDims(x.get(s), axes.get(s));
  };
}

/// concat and stack of a list of tensors.
template <bool Stack> StepFn lowerJoin(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<Src> xs = a.list("inps");
  int64_t axis = a.integer("axis");
  uint32_t o = outSlot(e, ctx);
  // A concat whose inputs were written into its output (ConcatPart).
  std::optional<PlacedConcat> placed;
  if (auto it = ctx.placedConcats.find(&e); it != ctx.placedConcats.end())
    placed = it->second;
  return [xs, axis, o, placed](Value *s, RunState &) {
    if (placed && concatInPlace(*placed, xs, o, s))
      return;
    std::vector<Tensor> ts;
    ts.reserve(xs.size());
    for (const Src &x : xs)
      ts.push_back(x.get(s));
    s[o].tensor = Stack ? stack(ts, axis) : concat(ts, axis);
  };
}

/// Split points read at run time: ascending within [0, size] (no wrap-around
/// of negatives, which only a constant written that way means).
void checkPoints(const std::vector<int64_t> &v, const Tensor &x, int64_t axis) {
  int64_t r = int64_t(x.rank()), ax = axis < 0 ? axis + r : axis;
  int64_t n = ax >= 0 && ax < r ? x.dim(size_t(ax)) : 0, prev = 0;
  for (int64_t p : v) {
    if (p < prev || p > n)
      raise("split: split points {} are not ascending within [0, {}] for input {}",
            shapeStr(v), n, shapeStr(x.shape()));
    prev = p;
  }
}

/// split at points given as a tensor node, read when the step runs.
StepFn lowerSplitRuntime(const Args &a, std::vector<uint32_t> outs) {
  IntsArg pts = a.intsArg("nsplits_or_sections");
  int64_t axis = a.integer("axis");
  Src x = a.tensor("inp");
  return [x, pts, axis, outs](Value *s, RunState &) {
    Tensor t = x.get(s);
    std::vector<int64_t> v = pts.get(s);
    checkPoints(v, t, axis);
    std::vector<Tensor> parts = splitAt(t, v, axis);
    if (parts.size() != outs.size())
      raise("split produced {} parts for {} outputs", parts.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(parts[i]);
  };
}

StepFn lowerSplit(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  if (auto r = a.ref("nsplits_or_sections"); r && r->node()) {
    std::vector<uint32_t> outs;
    for (size_t i = 0; i < e.numOutputs(); ++i)
      outs.push_back(outSlot(e, ctx, i));
    return lowerSplitRuntime(a, outs);
  }
  TreeDef ns = a.constant("nsplits_or_sections");
  int64_t axis = a.integer("axis");
  Src x = a.tensor("inp");
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < e.numOutputs(); ++i)
    outs.push_back(outSlot(e, ctx, i));
  bool equal = ns.isConst();
  std::vector<int64_t> v = Args::ints(ns, a, "nsplits_or_sections");
  return [x, outs, equal, v, axis](Value *s, RunState &) {
    std::vector<Tensor> parts = equal ? split(x.get(s), v[0], axis) : splitAt(x.get(s), v, axis);
    if (parts.size() != outs.size())
      raise("split produced {} parts for {} outputs", parts.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(parts[i]);
  };
}

PadMode padMode(const std::string &m, const Args &a) {
  if (m == "constant")
    return PadMode::Constant;
  if (m == "reflect")
    return PadMode::Reflect;
  if (m == "edge" || m == "replicate")
    return PadMode::Edge;
  a.fail(fmt::format("unsupported pad mode '{}'", m));
}

/// pad_width as integers (before0, after0, before1, ...): a tuple of pairs,
/// or a tensor node of them read at run time.
IntsArg padWidth(const Args &a) {
  auto r = a.ref("pad_width");
  if (r && r->node())
    return a.intsArg("pad_width");
  IntsArg w;
  TreeDef t = a.constant("pad_width");
  for (size_t i = 0; i < t.numChildren(); ++i) {
    auto v = Args::ints(t.child(i), a, "pad_width");
    if (v.size() != 2)
      a.fail("pad_width needs (before, after) pairs");
    w.fixed.insert(w.fixed.end(), v.begin(), v.end());
  }
  return w;
}

std::vector<std::pair<int64_t, int64_t>> pairsOf(const std::vector<int64_t> &v) {
  if (v.size() % 2)
    raise("pad: pad_width has {} integers, not (before, after) pairs", v.size());
  std::vector<std::pair<int64_t, int64_t>> pw;
  for (size_t i = 0; i < v.size(); i += 2)
    pw.emplace_back(v[i], v[i + 1]);
  return pw;
}

/// pad(src, pad_width, mode, constant_value); pad_width and constant_value
/// may be tensor nodes, read when the step runs.
StepFn lowerPad(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg pw = padWidth(a);
  PadMode mode = padMode(a.string("mode"), a);
  auto cv = a.ref("constant_value");
  Src value = cv && cv->node() ? a.tensor("constant_value") : Src();
  double fixed = value.defined() ? 0.0 : a.number("constant_value");
  Src x = a.tensor("src");
  return [x, pw, mode, value, fixed, o = outSlot(e, ctx)](Value *s, RunState &) {
    double val = fixed;
    if (value.defined()) {
      Tensor v = value.get(s);
      val = v.numel() ? v.at(0) : 0.0;
    }
    auto widths = pw.get(s);
    Tensor t = x.get(s);
    // No padding (PyTorch's exports pad average pools by zero): the value
    // itself, when the widths fit the input (else pad reports them).
    if (widths.size() == 2 * t.rank() && llvm::all_of(widths, [](int64_t w) { return w == 0; }))
      s[o].tensor = std::move(t);
    else
      s[o].tensor = pad(t, pairsOf(widths), mode, val);
  };
}

/// `GetVarShape(x)`: x's shape as a 1-d int32 tensor.
StepFn lowerGetVarShape(const Expr &e, OpKind, LowerContext &ctx) {
  if (e.numInputs() != 1 || e.numOutputs() != 1)
    raiseAt(Location::atExpr(e.id()), "the runtime does not implement op def '{}'",
            llvm::cast<Apply>(e).opdef().name().str());
  uint32_t x = ctx.slot(e.input(0)), o = ctx.slot(e.output(0));
  return [x, o](Value *s, RunState &) {
    const Tensor &t = s[x].tensor;
    std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
    s[o].tensor = Tensor::fromInts({int64_t(dims.size())}, dims, DType::Int32);
  };
}

} // namespace

void registerShapeLowering(LowerTable &t) {
  using K = OpKind;
  t.add("shape", {K::Reshape}, lowerReshape);
  t.add("shape", {K::MReshape}, lowerMReshape);
  t.add("shape", {K::Flatten}, lowerFlatten);
  t.add("shape", {K::MFlatten}, lowerMFlatten);
  t.add("shape", {K::Transpose}, lowerTranspose);
  t.add("shape", {K::MTranspose}, lowerMTranspose);
  t.add("shape", {K::BroadcastTo, K::MBroadcast}, lowerBroadcastTo);
  t.add("shape", {K::Squeeze}, lowerSqueeze);
  t.add("shape", {K::ExpandDims}, lowerExpandDims);
  t.add("shape", {K::Concat}, lowerJoin<false>);
  t.add("shape", {K::Stack}, lowerJoin<true>);
  t.add("shape", {K::Split}, lowerSplit);
  t.add("shape", {K::Pad}, lowerPad);
  t.add("shape", {K::GetVarShape}, lowerGetVarShape);
}

} // namespace tmg::rt
