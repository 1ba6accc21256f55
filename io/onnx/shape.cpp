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

namespace tmg::io::onnxdetail {
namespace {

void importFlatten(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.ai("axis", 1);
  ax = ax < 0 ? ax + r : ax;
  if (ax < 0 || ax > r)
    c.fail(fmt::format("axis {} is out of range", c.ai("axis", 1)));
  const Shape &s = c.shape(0);
  if (ax == 1 && r >= 2)
    return c.out(0, c.call("tensor.flatten", {c.node(0)}, {{"start_axis", int64_t(1)}}));
  int64_t a = 1, b2 = 1;
  for (int64_t i = 0; i < r; ++i)
    if (__builtin_mul_overflow(i < ax ? a : b2, s[i], i < ax ? &a : &b2))
      c.fail(fmt::format("the flattened size of {} overflows int64", shapeStr(s)));
  c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf({a, b2})}));
}

void importReshape(NodeCx &c) {
  std::vector<int64_t> target =
      c.has(1) ? c.ints(1) : c.ais("shape").value_or(std::vector<int64_t>{});
  const Shape &s = c.shape(0);
  bool allowZero = c.ai("allowzero", 0);
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

void importTranspose(NodeCx &c) {
  int64_t r = c.rank(0);
  std::vector<int64_t> perm;
  if (auto p = c.ais("perm"))
    perm = *p;
  else
    for (int64_t i = r - 1; i >= 0; --i)
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

void importSplit(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", 0), r);
  size_t n = size_t(c.n.output_size());
  std::vector<int64_t> sizes =
      c.has(1) ? c.ints(1) : c.ais("split").value_or(std::vector<int64_t>{});
  int64_t dim = c.shape(0)[ax];
  if (sizes.empty()) {
    if (dim % int64_t(n))
      c.fail(fmt::format("axis of size {} does not split into {} equal parts", dim, n));
    sizes.assign(n, dim / int64_t(n));
  }
  if (sizes.size() != n)
    c.fail("the number of split sizes differs from the number of outputs");
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

void importShape(NodeCx &c) {
  const Shape &s = c.shape(0);
  int64_t r = int64_t(s.size());
  int64_t b0 = c.ai("start", 0), e0 = c.ai("end", r);
  if (b0 < 0)
    b0 += r;
  if (e0 < 0)
    e0 += r;
  b0 = std::clamp<int64_t>(b0, 0, r);
  e0 = std::clamp<int64_t>(e0, b0, r);
  std::vector<int64_t> v(s.begin() + b0, s.begin() + e0);
  c.outConst(0, Tensor::fromInts({int64_t(v.size())}, v, DType::Int64));
}

void importExpand(NodeCx &c) {
  std::vector<int64_t> shp = c.ints(1);
  auto s = broadcastShapes(c.shape(0), shp);
  if (!s)
    c.fail(fmt::format("{} does not broadcast to {}", shapeStr(c.shape(0)), shapeStr(shp)));
  c.out(0, c.call("tensor.broadcast_to", {c.node(0), tupleOf(*s)}));
}

void importTile(NodeCx &c) {
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

void emitPad(NodeCx &c, const std::vector<int64_t> &pads, double value) {
  int64_t r = c.rank(0);
  if (int64_t(pads.size()) != 2 * r)
    c.fail("pads needs 2 * rank entries");
  std::vector<Arg> pw;
  for (int64_t i = 0; i < r; ++i)
    pw.push_back(tupleOf({pads[i], pads[i + r]}));
  c.out(0, c.call("nn.pad", {c.node(0), Arg::tuple(pw)},
                  {{"mode", c.as("mode", "constant")}, {"constant_value", value}}));
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
  std::vector<int64_t> pads = c.ints(1);
  double value = 0;
  if (c.has(2))
    value = c.cst(2).numel() ? c.cst(2).at(0) : 0.0;
  emitPad(c, pads, value);
}

void importSqueeze(NodeCx &c) {
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

void exportSplit(ExportCall &c) {
  int64_t axis = c.ints("axis")[0];
  std::vector<int64_t> sizes;
  std::vector<std::string> outs;
  for (size_t i = 0; i < c.e.numOutputs(); ++i) {
    const Shape &s = c.shapeOf(c.e.output(i));
    int64_t ax = axis < 0 ? axis + int64_t(s.size()) : axis;
    sizes.push_back(s[ax]);
    outs.push_back(c.ex.fresh(c.e.output(i)->name()));
    c.bind(outs.back(), i);
  }
  onnx::NodeProto *n =
      c.ex.node("Split", {c.operand("inp"), c.intsInit(sizes, c.out + "_split")}, outs);
  Exporter::attrI(n, "axis", axis);
}

void exportPad(ExportCall &c) {
  TreeDef pw = c.constant("pad_width");
  std::vector<int64_t> b, a;
  for (size_t i = 0; i < pw.numChildren(); ++i) {
    auto v = c.intsOf(pw.child(i));
    b.push_back(v[0]);
    a.push_back(v[1]);
  }
  b.insert(b.end(), a.begin(), a.end());
  std::string mode = c.string("mode");
  if (mode == "replicate")
    mode = "edge";
  c.simple("Pad", {c.operand("src"), c.intsInit(b, c.out + "_pads"),
                   c.init(Tensor::full({}, c.number("constant_value"), c.od), c.out + "_value")});
  Exporter::attrS(c.n, "mode", mode);
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
        [](ExportCall &c) { c.reshapeToOutput(); });
  t.add(f, {OpKind::Transpose, OpKind::MTranspose}, exportTranspose);
  t.add(f, {OpKind::BroadcastTo}, [](ExportCall &c) {
    c.simple("Expand", {c.operand("inp"), c.intsInit(c.ints("shape"), c.out + "_shape")});
  });
  t.add(f, {OpKind::Concat, OpKind::Stack}, exportConcat);
  t.add(f, {OpKind::Split}, exportSplit);
  t.add(f, {OpKind::Pad}, exportPad);
  t.add(f, {OpKind::GetVarShape}, exportGetVarShape);
}

} // namespace tmg::io::onnxdetail
