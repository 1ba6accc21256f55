//===- shape.cpp - ONNX mapping of shape ops --------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the shape family: Reshape, Flatten,
// Transpose, Squeeze/Unsqueeze, Concat, Split, Expand, Tile, Pad,
// DepthToSpace/SpaceToDepth (reshape, transpose, reshape), and Shape and
// Size, whose values are known at import time from the static shapes.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"
#include "tm/ir/CheckedSize.h"

namespace tmg::io::onnxdetail {
namespace {

/// Input `i`'s shape read at run time (GetVarShape), as int64.
Node *runtimeShape(NodeCx &c, size_t i) {
  Node *s = c.cx.b.apply(op(OpKind::GetVarShape), {c.node(i)})[0];
  return c.astype(s, DType::Int64);
}

/// The first `n` dims of input 0, 0 past its rank, read at run time:
/// (dims..., 0 * n)[:n].
Node *firstDims(NodeCx &c, int64_t n) {
  Node *padded = c.call("tensor.concat",
                        {Arg::list({runtimeShape(c, 0), intsConst(c, std::vector<int64_t>(n, 0))})});
  return c.method(padded, "__getitem__", {Arg::slice(Arg::none(), n, Arg::none())});
}

/// Reshape to a shape read at run time; a 0 entry copies the input's dim
/// (unless allowzero): from its static shape, or read at run time.
void importReshapeRuntime(NodeCx &c) {
  Node *t = c.intsNode(1);
  if (!c.ai("allowzero", 0)) {
    int64_t n = c.length(1);
    Node *eq = c.call("elemwise.equal", {t, c.constant(Tensor::fromInts({}, {0}))});
    Node *dims;
    if (const auto &s = c.val(0).shape;
        s && isStaticShape(llvm::ArrayRef<int64_t>(*s).take_front(size_t(n)))) {
      std::vector<int64_t> d(size_t(n), 0);
      for (size_t i = 0; i < d.size() && i < s->size(); ++i)
        d[i] = (*s)[i];
      dims = intsConst(c, d);
    } else {
      dims = firstDims(c, n);
    }
    t = c.call("tensor.where", {eq, dims, t});
  }
  c.out(0, c.call("tensor.reshape", {c.node(0), t}));
}

void importFlatten(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.ai("axis", 1);
  ax = ax < 0 ? ax + r : ax;
  if (ax < 0 || ax > r)
    c.fail(fmt::format("axis {} is out of range", c.ai("axis", 1)));
  if (ax == 1 && r >= 2)
    return c.out(0, c.call("tensor.flatten", {c.node(0)}, {{"start_axis", int64_t(1)}}));
  if (!isStaticShape(c.dims(0)) && ax >= 1 && ax < r) {
    // Both sides merged by flatten, which keeps symbolic sizes.
    Node *y = c.call("tensor.flatten", {c.node(0)}, {{"start_axis", ax}});
    return c.out(0, c.call("tensor.flatten", {y}, {{"start_axis", int64_t(0)},
                                                  {"end_axis", ax - 1}}));
  }
  if (!isStaticShape(c.dims(0)))
    return c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf(ax == 0 ? std::vector<int64_t>{1, -1}
                                                                        : std::vector<int64_t>{-1, 1})}));
  const Shape &s = c.shape(0);
  int64_t a = 1, b2 = 1;
  for (int64_t i = 0; i < r; ++i)
    if (__builtin_mul_overflow(i < ax ? a : b2, s[i], i < ax ? &a : &b2))
      c.fail(fmt::format("the flattened size of {} overflows int64", shapeStr(s)));
  c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf({a, b2})}));
}

void importReshape(NodeCx &c) {
  if (c.has(1) && (c.runtime(1) || !c.val(0).shape))
    return importReshapeRuntime(c);
  std::vector<int64_t> target =
      c.has(1) ? c.ints(1) : c.ais("shape").value_or(std::vector<int64_t>{});
  bool allowZero = c.ai("allowzero", 0);
  if (!isStaticShape(c.dims(0))) {
    // A 0 copies a dim that may be symbolic: read at run time; -1 alone is
    // the reshape's own inference.
    bool copies = !allowZero && llvm::is_contained(target, 0);
    if (copies && c.has(1))
      return importReshapeRuntime(c);
    if (!copies && llvm::count(target, -1) <= 1 && llvm::all_of(target, [](int64_t v) {
          return v >= -1;
        }))
      return c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf(target)}));
  }
  const Shape &s = c.shape(0);
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allowZero) {
      if (i >= s.size())
        c.fail("0 in the shape refers past the input's rank");
      target[i] = s[i];
    }
    if (target[i] < -1)
      c.fail(fmt::format("shape entry {} is negative", target[i]));
    if (target[i] == -1) {
      if (infer >= 0)
        c.fail("more than one -1 in the shape");
      infer = int64_t(i);
    } else if (__builtin_mul_overflow(known, target[i], &known)) {
      c.fail("the shape's element count overflows int64");
    }
  }
  if (infer >= 0)
    target[infer] = known ? shapeNumel(s) / known : 0;
  c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf(target)}));
}

/// Transpose: only the default perm (reversed axes) needs the input's rank.
void importTranspose(NodeCx &c) {
  std::vector<int64_t> perm;
  if (auto p = c.ais("perm"))
    perm = *p;
  else
    for (int64_t i = c.rank(0) - 1; i >= 0; --i)
      perm.push_back(i);
  c.out(0, c.call("tensor.transpose", {c.node(0), tupleOf(perm)}));
}

void importConcat(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", c.opset < 4 ? 1 : 0), r);
  std::vector<Arg> xs;
  for (size_t i = 0; i < c.numIn(); ++i)
    if (c.has(i))
      xs.push_back(c.node(i));
  c.out(0, c.call("tensor.concat", {Arg::list(xs)}, {{"axis", ax}}));
}

/// Split by sizes read at run time: split at their running sums but the last.
void importSplitRuntime(NodeCx &c, int64_t ax, size_t n) {
  if (c.length(1) != int64_t(n))
    c.fail("the number of split sizes differs from the number of outputs");
  if (n == 1)
    return c.outAlias(0, c.val(0));
  Node *ends = c.call("tensor.cumsum", {c.intsNode(1), int64_t(0)});
  Node *at = c.method(ends, "__getitem__",
                      {Arg::slice(Arg::none(), int64_t(n - 1), Arg::none())});
  // The parts' sizes are known only at run time (the shape rule can tell
  // neither them nor how many there are): give their dtype.
  std::vector<OutputType> types(n, OutputType{std::nullopt, c.dtype(0)});
  auto outs = c.cx.b.callFunctionN(functionOp("tensor.split"), {c.node(0), at}, {{"axis", ax}},
                                   n, types);
  for (size_t i = 0; i < n; ++i)
    c.out(i, outs[i]);
}

void importSplit(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", 0), r);
  size_t n = size_t(c.n.output_size());
  if (n == 0)
    c.fail("Split has no outputs");
  if (c.runtime(1))
    return importSplitRuntime(c, ax, n);
  std::vector<int64_t> sizes =
      c.has(1) ? c.ints(1) : c.ais("split").value_or(std::vector<int64_t>{});
  int64_t dim = c.dims(0)[ax];
  if (sizes.empty() && !isKnownDim(dim)) {
    if (n == 1)
      return c.outAlias(0, c.val(0));
    auto outs = c.cx.b.callFunctionN(functionOp("tensor.split"), {c.node(0), Arg(int64_t(n))},
                                     {{"axis", ax}}, n);
    for (size_t i = 0; i < n; ++i)
      c.out(i, outs[i]);
    return;
  }
  if (sizes.empty()) {
    if (dim % int64_t(n))
      c.fail(fmt::format("axis of size {} does not split into {} equal parts", dim, n));
    sizes.assign(n, dim / int64_t(n));
  }
  if (sizes.size() != n)
    c.fail("the number of split sizes differs from the number of outputs");
  int64_t total = 0;
  for (int64_t v : sizes)
    if (v < 0 || __builtin_add_overflow(total, v, &total))
      c.fail(fmt::format("split size {} is negative or the sizes overflow", v));
  if (isKnownDim(dim) && total != dim)
    c.fail(fmt::format("the split sizes add up to {}, the axis has {}", total, dim));
  Arg how = Arg(int64_t(n));
  if (std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end()) {
    std::vector<int64_t> at;
    int64_t acc = 0;
    for (size_t i = 0; i + 1 < n; ++i)
      at.push_back(acc += sizes[i]);
    how = Arg::list(std::vector<Arg>(at.begin(), at.end()));
  }
  if (n == 1)
    return c.outAlias(0, c.val(0));
  auto outs =
      c.cx.b.callFunctionN(functionOp("tensor.split"), {c.node(0), how}, {{"axis", ax}}, n);
  for (size_t i = 0; i < n; ++i)
    c.out(i, outs[i]);
}

/// Shape of a value whose shape is known only at run time: GetVarShape,
/// sliced [start:end] (Python's clamping is ONNX's).
void importShapeRuntime(NodeCx &c) {
  Node *s = runtimeShape(c, 0);
  if (c.hasAttr("start") || c.hasAttr("end")) {
    Arg e0 = c.hasAttr("end") ? Arg(c.ai("end", 0)) : Arg::none();
    s = c.method(s, "__getitem__", {Arg::slice(c.ai("start", 0), e0, Arg::none())});
  }
  c.out(0, s);
}

void importShape(NodeCx &c) {
  if (!c.val(0).shape)
    return importShapeRuntime(c);
  const Shape &s = c.dims(0);
  int64_t r = int64_t(s.size());
  int64_t b0 = c.ai("start", 0), e0 = c.ai("end", r);
  if (b0 < 0)
    b0 += r;
  if (e0 < 0)
    e0 += r;
  b0 = std::clamp<int64_t>(b0, 0, r);
  e0 = std::clamp<int64_t>(e0, b0, r);
  std::vector<int64_t> v(s.begin() + b0, s.begin() + e0);
  if (!isStaticShape(v)) // symbolic sizes: read when it runs
    return importShapeRuntime(c);
  c.outConst(0, Tensor::fromInts({int64_t(v.size())}, v, DType::Int64));
}

/// Expand to a shape read at run time: ONNX broadcasts both ways, so the
/// target is the shape with each 1 replaced by the input's dim (both
/// right-aligned).
void importExpandRuntime(NodeCx &c) {
  const Shape &s = c.dims(0);
  int64_t n = c.length(1), r = int64_t(s.size()), m = std::max(n, r);
  Node *t = c.intsNode(1);
  if (n < r)
    t = c.call("tensor.concat", {Arg::list({intsConst(c, std::vector<int64_t>(r - n, 1)), t})});
  std::vector<int64_t> ones(size_t(m - r), 1), dims = ones;
  dims.insert(dims.end(), s.begin(), s.end());
  Node *eq = c.call("elemwise.equal", {t, c.constant(Tensor::fromInts({}, {1}, DType::Int64))});
  Node *d = isStaticShape(s) ? intsConst(c, dims)
                             : c.call("tensor.concat",
                                      {Arg::list({intsConst(c, ones), runtimeShape(c, 0)})});
  c.out(0, c.call("tensor.broadcast_to", {c.node(0), c.call("tensor.where", {eq, d, t})}));
}

void importExpand(NodeCx &c) {
  if (c.runtime(1) || !isStaticShape(c.dims(0)))
    return importExpandRuntime(c);
  std::vector<int64_t> shp = c.ints(1);
  auto s = broadcastShapes(c.shape(0), shp);
  if (!s)
    c.fail(fmt::format("{} does not broadcast to {}", shapeStr(c.shape(0)), shapeStr(shp)));
  c.out(0, c.call("tensor.broadcast_to", {c.node(0), tupleOf(*s)}));
}

/// Tile by repeats read at run time: x as (1, d0, 1, d1, ...), broadcast to
/// (r0, d0, r1, d1, ...), reshaped to (r0 * d0, r1 * d1, ...).
void importTileRuntime(NodeCx &c) {
  const Shape &s = c.shape(0);
  if (c.length(1) != int64_t(s.size()))
    c.fail("repeats must have one entry per axis");
  Node *reps = c.intsNode(1), *dims = intsConst(c, std::vector<int64_t>(s.begin(), s.end()));
  Shape a;
  for (int64_t d : s)
    a.append({1, d});
  Node *pairs = c.call("tensor.stack", {Arg::list({reps, dims})}, {{"axis", int64_t(1)}});
  Node *wide = c.call("tensor.reshape", {pairs, tupleOf({-1})});
  Node *x = c.call("tensor.reshape", {c.node(0), tupleOf(a)});
  x = c.call("tensor.broadcast_to", {x, wide});
  c.out(0, c.call("tensor.reshape", {x, c.call("elemwise.mul", {reps, dims})}));
}

void importTile(NodeCx &c) {
  if (c.runtime(1))
    return importTileRuntime(c);
  std::vector<int64_t> reps = c.ints(1);
  const Shape &s = c.shape(0);
  if (reps.size() != s.size())
    c.fail("repeats must have one entry per axis");
  Shape a, bshape, fin;
  for (size_t i = 0; i < s.size(); ++i) {
    a.append({1, s[i]});
    bshape.append({reps[i], s[i]});
    fin.push_back(reps[i] * s[i]);
  }
  Node *x = c.call("tensor.reshape", {c.node(0), tupleOf(a)});
  x = c.call("tensor.broadcast_to", {x, tupleOf(bshape)});
  c.out(0, c.call("tensor.reshape", {x, tupleOf(fin)}));
}

void callPad(NodeCx &c, Arg pw, Arg value) {
  c.out(0, c.call("nn.pad", {c.node(0), std::move(pw)},
                  {{"mode", c.as("mode", "constant")}, {"constant_value", std::move(value)}}));
}

void emitPad(NodeCx &c, const std::vector<int64_t> &pads, Arg value) {
  int64_t r = c.rank(0);
  if (int64_t(pads.size()) != 2 * r)
    c.fail("pads needs 2 * rank entries");
  std::vector<Arg> pw;
  for (int64_t i = 0; i < r; ++i)
    pw.push_back(tupleOf({pads[i], pads[i + r]}));
  callPad(c, Arg::tuple(pw), std::move(value));
}

/// Pads read at run time, (begin..., end...) as ONNX orders them, made the
/// (before, after) pairs pad takes: reshaped to (2, rank), transposed and
/// flattened.
void emitPadRuntime(NodeCx &c, Arg value) {
  int64_t r = c.rank(0);
  if (c.length(1) != 2 * r)
    c.fail("pads needs 2 * rank entries");
  Node *p = c.call("tensor.reshape", {c.intsNode(1), tupleOf({2, r})});
  p = c.call("tensor.transpose", {p, tupleOf({1, 0})});
  callPad(c, c.call("tensor.reshape", {p, tupleOf({-1})}), std::move(value));
}

/// Pad before opset 11: pads and value are attributes.
void importPadAttrs(NodeCx &c) {
  c.rank(0);
  std::vector<int64_t> pads =
      c.ais("pads").value_or(c.ais("paddings").value_or(std::vector<int64_t>{}));
  emitPad(c, pads, c.af("value", 0.0));
}

/// Pad from opset 11: pads and value are inputs.
void importPadInputs(NodeCx &c) {
  c.rank(0);
  Arg value = 0.0;
  if (c.runtime(2))
    value = c.node(2);
  else if (c.has(2))
    value = c.cst(2).numel() ? c.cst(2).at(0) : 0.0;
  if (c.runtime(1))
    return emitPadRuntime(c, std::move(value));
  emitPad(c, c.ints(1), std::move(value));
}

void importSqueeze(NodeCx &c) {
  if (c.runtime(1))
    return c.out(0, c.call("tensor.squeeze", {c.node(0)}, {{"axis", c.intsNode(1)}}));
  std::optional<std::vector<int64_t>> axes = c.ais("axes");
  if (c.has(1))
    axes = c.ints(1);
  int64_t r = c.rank(0);
  if (!axes || axes->empty())
    return c.out(0, c.call("tensor.squeeze", {c.node(0)}));
  std::vector<int64_t> a;
  for (int64_t v : *axes)
    a.push_back(c.axis(v, r));
  std::sort(a.begin(), a.end());
  c.out(0, c.call("tensor.squeeze", {c.node(0)}, {{"axis", tupleOf(a)}}));
}

void importUnsqueeze(NodeCx &c) {
  if (c.runtime(1))
    return c.out(0, c.call("tensor.expand_dims", {c.node(0), c.intsNode(1)}));
  std::optional<std::vector<int64_t>> axes = c.ais("axes");
  if (c.has(1))
    axes = c.ints(1);
  int64_t r = c.rank(0);
  if (!axes)
    c.fail("axes are missing");
  int64_t ro = r + int64_t(axes->size());
  std::vector<int64_t> a;
  for (int64_t v : *axes)
    a.push_back(c.axis(v, ro));
  std::sort(a.begin(), a.end());
  c.out(0, c.call("tensor.expand_dims", {c.node(0), tupleOf(a)}));
}

/// DepthToSpace (`toSpace`) and SpaceToDepth: reshape, transpose, reshape.
void importDepthSpace(NodeCx &c, bool toSpace) {
  const Shape &s = c.shape(0);
  if (s.size() != 4)
    c.fail("input must be NCHW");
  int64_t bs = c.ai("blocksize", 0), N = s[0], C = s[1], H = s[2], W = s[3];
  if (bs <= 0)
    c.fail("blocksize must be positive");
  // bs * bs and the output dims must fit in int64: a blocksize of 2^32
  // wrapped bs * bs to 0 (a division by zero).
  std::optional<int64_t> bs2 = checkedNumel({bs, bs});
  bool fits = bs2 && (toSpace ? C % *bs2 == 0 && checkedNumel({H, bs}) && checkedNumel({W, bs})
                              : H % bs == 0 && W % bs == 0 && checkedNumel({C, *bs2}));
  if (!fits)
    c.fail(fmt::format("blocksize {} does not fit input {}", bs, shapeStr(s)));
  Node *x = c.node(0);
  if (toSpace) {
    bool crd = c.as("mode", "DCR") == "CRD";
    Shape t1 = crd ? Shape{N, C / (bs * bs), bs, bs, H, W} : Shape{N, bs, bs, C / (bs * bs), H, W};
    std::vector<int64_t> perm = crd ? std::vector<int64_t>{0, 1, 4, 2, 5, 3}
                                    : std::vector<int64_t>{0, 3, 4, 1, 5, 2};
    x = c.call("tensor.reshape", {x, tupleOf(t1)});
    x = c.call("tensor.transpose", {x, tupleOf(perm)});
    return c.out(0, c.call("tensor.reshape", {x, tupleOf({N, C / (bs * bs), H * bs, W * bs})}));
  }
  x = c.call("tensor.reshape", {x, tupleOf({N, C, H / bs, bs, W / bs, bs})});
  x = c.call("tensor.transpose", {x, tupleOf({0, 3, 5, 1, 2, 4})});
  c.out(0, c.call("tensor.reshape", {x, tupleOf({N, C * bs * bs, H / bs, W / bs})}));
}

} // namespace

void registerShapeOnnxImport(OnnxImportTable &t) {
  t.add("Flatten", 1, kMaxOpset, importFlatten);
  t.add("Reshape", 1, kMaxOpset, importReshape);
  t.add("Transpose", 1, kMaxOpset, importTranspose);
  t.add("Concat", 1, kMaxOpset, importConcat);
  t.add("Split", 1, kMaxOpset, importSplit);
  t.add("Shape", 1, kMaxOpset, importShape);
  t.add("Size", 1, kMaxOpset, [](NodeCx &c) {
    if (!isStaticShape(c.dims(0))) // the product of the dims read when it runs
      return c.out(0, c.call("math.prod", {runtimeShape(c, 0)}, {{"axis", Arg::none()}, {"keepdims", false}}));
    c.outConst(0, Tensor::fromInts({}, {shapeNumel(c.shape(0))}, DType::Int64));
  });
  t.add("Expand", 1, kMaxOpset, importExpand);
  t.add("Tile", 1, kMaxOpset, importTile);
  t.add("Pad", 1, 10, importPadAttrs);
  t.add("Pad", 11, kMaxOpset, importPadInputs);
  t.add("Squeeze", 1, kMaxOpset, importSqueeze);
  t.add("Unsqueeze", 1, kMaxOpset, importUnsqueeze);
  t.add("DepthToSpace", 1, kMaxOpset, [](NodeCx &c) { importDepthSpace(c, true); });
  t.add("SpaceToDepth", 1, kMaxOpset, [](NodeCx &c) { importDepthSpace(c, false); });
}

// -- Export -------------------------------------------------------------------

namespace {

void exportTranspose(ExportCall &c) {
  std::vector<int64_t> perm;
  if (c.method)
    for (size_t i = 1; i < c.e.numArgs(); ++i) {
      auto v = c.intsOf(c.e.arg(i).def);
      perm.insert(perm.end(), v.begin(), v.end());
    }
  else
    perm = c.ints("pattern");
  c.simple("Transpose", {c.first()});
  Exporter::attrIs(c.n, "perm", perm);
}

/// Concat, and Stack as Concat of inputs unsqueezed at the axis.
void exportConcat(ExportCall &c) {
  auto a = c.e.namedArg("inps");
  std::vector<std::string> ins;
  int64_t axis = c.ints("axis")[0];
  for (size_t i = 0; i < a->def.numChildren(); ++i) {
    Node *x = c.e.input(a->firstLeaf + i);
    std::string v = c.nameOf(x);
    if (Exporter::dt(x) != c.od)
      v = c.cast(v, c.od);
    if (c.k == OpKind::Stack) {
      int64_t r = int64_t(c.shapeOf(x).size()) + 1;
      v = c.emit("Unsqueeze", {v, c.intsInit({axis < 0 ? axis + r : axis}, c.out + "_axes")},
                 c.out + "_in");
    }
    ins.push_back(v);
  }
  c.simple("Concat", ins);
  Exporter::attrI(c.n, "axis", axis);
}

/// split at points read at run time: ONNX Split sizes, the differences of
/// (points..., size) and (0, points...).
void exportSplitRuntime(ExportCall &c, int64_t axis, std::vector<std::string> outs) {
  const Shape &s = c.staticShapeOf(c.e.input(0));
  int64_t ax = axis < 0 ? axis + int64_t(s.size()) : axis;
  std::string p = c.operand("nsplits_or_sections", DType::Int64), base = c.out + "_split";
  onnx::NodeProto *n1, *n2;
  std::string hi = c.emit("Concat", {p, c.intsInit({s[ax]}, base + "_dim")}, base + "_hi", &n1);
  std::string lo = c.emit("Concat", {c.intsInit({0}, base + "_zero"), p}, base + "_lo", &n2);
  Exporter::attrI(n1, "axis", 0);
  Exporter::attrI(n2, "axis", 0);
  std::string sizes = c.emit("Sub", {hi, lo}, base);
  Exporter::attrI(c.ex.node("Split", {c.operand("inp"), sizes}, outs), "axis", axis);
}

void exportSplit(ExportCall &c) {
  int64_t axis = c.ints("axis")[0];
  if (auto a = c.e.namedArg("nsplits_or_sections"); a && a->node()) {
    std::vector<std::string> outs;
    for (size_t i = 0; i < c.e.numOutputs(); ++i) {
      outs.push_back(c.ex.fresh(c.e.output(i)->name()));
      c.bind(outs.back(), i);
    }
    return exportSplitRuntime(c, axis, outs);
  }
  std::vector<int64_t> sizes;
  std::vector<std::string> outs;
  auto ns = c.e.namedArg("nsplits_or_sections");
  if (ns && ns->isConst() && ns->scalar().isInt() && !isStaticShape(c.shapeOf(c.e.output(0)))) {
    // Equal parts of a symbolic axis: opset-17 Split without sizes.
    for (size_t i = 0; i < c.e.numOutputs(); ++i) {
      outs.push_back(c.ex.fresh(c.e.output(i)->name()));
      c.bind(outs.back(), i);
    }
    return Exporter::attrI(c.ex.node("Split", {c.operand("inp")}, outs), "axis", axis);
  }
  for (size_t i = 0; i < c.e.numOutputs(); ++i) {
    const Shape &s = c.staticShapeOf(c.e.output(i));
    int64_t ax = axis < 0 ? axis + int64_t(s.size()) : axis;
    sizes.push_back(s[ax]);
    outs.push_back(c.ex.fresh(c.e.output(i)->name()));
    c.bind(outs.back(), i);
  }
  onnx::NodeProto *n =
      c.ex.node("Split", {c.operand("inp"), c.intsInit(sizes, c.out + "_split")}, outs);
  Exporter::attrI(n, "axis", axis);
}

/// pad_width a tensor node of (before, after) pairs: ONNX's (begin...,
/// end...) order by reshape to (rank, 2), transpose and flatten.
std::string runtimePads(ExportCall &c) {
  std::string p = c.operand("pad_width", DType::Int64);
  p = c.emit("Reshape", {p, c.intsInit({-1, 2}, c.out + "_pairs")}, c.out + "_pairs");
  onnx::NodeProto *t;
  p = c.emit("Transpose", {p}, c.out + "_pads_t", &t);
  Exporter::attrIs(t, "perm", {1, 0});
  return c.emit("Reshape", {p, c.intsInit({-1}, c.out + "_flat")}, c.out + "_pads");
}

/// The constant value of a pad: a number or a tensor node.
std::string padValue(ExportCall &c) {
  if (auto a = c.e.namedArg("constant_value"); a && a->node())
    return c.operand("constant_value", c.od);
  return c.init(Tensor::full({}, c.number("constant_value"), c.od), c.out + "_value");
}

void exportPad(ExportCall &c) {
  std::string mode = c.string("mode");
  if (mode == "replicate")
    mode = "edge";
  if (auto a = c.e.namedArg("pad_width"); a && a->node()) {
    std::string pads = runtimePads(c);
    c.simple("Pad", {c.operand("src"), pads, padValue(c)});
    return Exporter::attrS(c.n, "mode", mode);
  }
  TreeDef pw = c.constant("pad_width");
  std::vector<int64_t> b, a;
  for (size_t i = 0; i < pw.numChildren(); ++i) {
    auto v = c.intsOf(pw.child(i));
    b.push_back(v[0]);
    a.push_back(v[1]);
  }
  b.insert(b.end(), a.begin(), a.end());
  c.simple("Pad", {c.operand("src"), c.intsInit(b, c.out + "_pads"), padValue(c)});
  Exporter::attrS(c.n, "mode", mode);
}

/// reshape, broadcast_to, squeeze and expand_dims whose shape or axes
/// argument is a tensor node: the ONNX op that takes it as an int64 input.
/// False when the argument is constant.
bool exportRuntimeShaped(ExportCall &c) {
  using K = OpKind;
  const char *arg = c.k == K::Reshape ? "target_shape" : c.k == K::BroadcastTo ? "shape" : "axis";
  auto a = c.e.namedArg(arg);
  if (!a || !a->node())
    return false;
  std::string v = c.operand(arg, DType::Int64);
  const char *op = c.k == K::Reshape       ? "Reshape"
                   : c.k == K::BroadcastTo ? "Expand"
                   : c.k == K::Squeeze     ? "Squeeze"
                                           : "Unsqueeze";
  c.simple(op, {c.operand("inp"), v});
  if (c.k == K::Reshape)
    Exporter::attrI(c.n, "allowzero", 1); // a 0 is a size, as in the reference
  return true;
}

/// GetVarShape (an op def applied to one tensor): Shape, as int32.
void exportGetVarShape(ExportCall &c) {
  if (c.e.numInputs() != 1)
    c.fail("op def has no ONNX form");
  std::string s = c.emit("Shape", {c.nameOf(c.e.input(0))}, c.e.output(0)->name());
  c.bind(c.cast(s, DType::Int32));
}

} // namespace

void registerShapeOnnxExport(OnnxExportTable &t) {
  const char *f = "shape";
  // Shape-changing ops whose static output shape is known: Reshape to it.
  t.add(f,
        {OpKind::Reshape, OpKind::MReshape, OpKind::Flatten, OpKind::MFlatten, OpKind::Squeeze,
         OpKind::ExpandDims},
        [](ExportCall &c) {
          if (exportRuntimeShaped(c))
            return;
          // Without sizes (or without a known shape), squeeze and
          // expand_dims keep their ONNX forms.
          auto *out = llvm::dyn_cast_or_null<TensorNode>(c.e.output(0));
          bool sym = !out || !out->shape() || !isStaticShape(*out->shape());
          auto ax = c.e.namedArg("axis");
          if (sym && ax && (c.k == OpKind::Squeeze || c.k == OpKind::ExpandDims) &&
              !(ax->isConst() && ax->scalar().isNone()))
            return (void)c.simple(c.k == OpKind::Squeeze ? "Squeeze" : "Unsqueeze",
                                  {c.operand("inp"), c.intsInit(c.ints("axis"), c.out + "_axes")});
          c.reshapeToOutput();
        });
  t.add(f, {OpKind::Transpose, OpKind::MTranspose}, exportTranspose);
  t.add(f, {OpKind::BroadcastTo}, [](ExportCall &c) {
    if (exportRuntimeShaped(c))
      return;
    c.simple("Expand", {c.operand("inp"), c.intsInit(c.ints("shape"), c.out + "_shape")});
  });
  t.add(f, {OpKind::Concat, OpKind::Stack}, exportConcat);
  t.add(f, {OpKind::Split}, exportSplit);
  t.add(f, {OpKind::Pad}, exportPad);
  t.add(f, {OpKind::GetVarShape}, exportGetVarShape);
}

} // namespace tmg::io::onnxdetail
