//===- index.cpp - ONNX mapping of indexing ops -----------------*- C++ -*-===//
//
// The ONNX importers and exporters of the index family: Slice (as
// __getitem__ with clamped bounds, or with bounds read at run time), Gather
// (take), GatherElements (gather), the scatters, GatherND, OneHot (one_hot,
// then where and a transpose), Compress (a take when the condition is known
// at import), ReverseSequence, NonMaxSuppression, Unique and NonZero (a
// compress of the coordinates).
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"
#include "tm/ir/IndexSpec.h"

#include <limits>

#include "tm/runtime/Kernels.h"

namespace tmg::io::onnxdetail {
namespace {

/// Slice's bounds made a __getitem__ index of slices.
void emitSlice(NodeCx &c, const std::vector<int64_t> &starts, const std::vector<int64_t> &ends,
               std::vector<int64_t> axes, std::vector<int64_t> steps) {
  const Shape &s = c.dims(0);
  int64_t r = int64_t(s.size());
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<Arg> idx;
  for (int64_t i = 0; i < r; ++i)
    idx.push_back(Arg::slice(Arg::none(), Arg::none(), Arg::none()));
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t ax = c.axis(axes[i], r), dim = s[ax], st = steps[i];
    if (st == 0)
      c.fail("a step is 0");
    int64_t b0 = starts[i], e0 = ends[i];
    if (!isKnownDim(dim)) {
      // Python's slice clamping is ONNX's: the bounds go as they are.
      idx[ax] = Arg::slice(b0, e0, st);
      continue;
    }
    if (b0 < 0)
      b0 = std::max<int64_t>(b0, -dim - 1) + dim;
    if (e0 < 0)
      e0 = std::max<int64_t>(e0, -dim - 1) + dim;
    if (st > 0) {
      b0 = std::clamp<int64_t>(b0, 0, dim);
      e0 = std::clamp<int64_t>(e0, 0, dim);
      idx[ax] = Arg::slice(b0, e0, st);
    } else {
      b0 = std::clamp<int64_t>(b0, -1, dim - 1);
      e0 = std::clamp<int64_t>(e0, -1, dim - 1);
      if (b0 < 0)
        b0 = e0; // empty
      idx[ax] = Arg::slice(b0, e0 < 0 ? Arg::none() : Arg(e0), st);
    }
  }
  c.out(0, c.method(c.node(0), "__getitem__", {Arg::tuple(idx)}));
}

/// Slice before opset 10: bounds are attributes.
void importSliceAttrs(NodeCx &c) {
  c.dims(0);
  emitSlice(c, c.ais("starts").value_or(std::vector<int64_t>{}),
            c.ais("ends").value_or(std::vector<int64_t>{}),
            c.ais("axes").value_or(std::vector<int64_t>{}), {});
}

/// Input `i` of Slice as an int64 node of `n` entries; `dflt` when absent.
Node *sliceInput(NodeCx &c, size_t i, int64_t n, std::vector<int64_t> dflt) {
  if (!c.has(i))
    return intsConst(c, dflt);
  if (c.length(i) != n)
    c.fail("starts, ends, axes and steps differ in length");
  return c.runtime(i) ? c.intsNode(i) : intsConst(c, c.ints(i));
}

/// Slice with bounds read at run time: starts, ends and steps scattered
/// into one entry per axis (0, INT64_MAX and 1 for axes not sliced), each
/// entry a slice bound of __getitem__ read when it runs.
void importSliceRuntime(NodeCx &c) {
  int64_t r = c.rank(0), n = c.length(1);
  std::vector<int64_t> iota(n);
  for (int64_t i = 0; i < n; ++i)
    iota[i] = i;
  Node *axes = sliceInput(c, 3, n, iota);
  Node *zero = c.constant(Tensor::fromInts({}, {0}, DType::Int64));
  Node *neg = c.call("elemwise.less", {axes, zero});
  axes = c.call("tensor.where",
                {neg, c.call("elemwise.add", {axes, c.constant(Tensor::fromInts({}, {r}))}), axes});
  auto perAxis = [&](size_t i, int64_t dflt) {
    Node *v = sliceInput(c, i, n, std::vector<int64_t>(n, dflt));
    return c.call("tensor.scatter",
                  {intsConst(c, std::vector<int64_t>(r, dflt)), int64_t(0), axes, v});
  };
  Node *b = perAxis(1, 0), *e = perAxis(2, std::numeric_limits<int64_t>::max()),
       *st = perAxis(4, 1);
  std::vector<Arg> idx;
  for (int64_t d = 0; d < r; ++d) {
    Node *b0 = c.method(b, "__getitem__", {d}), *e0 = c.method(e, "__getitem__", {d}),
         *s0 = c.method(st, "__getitem__", {d});
    idx.push_back(Arg::slice(b0, e0, s0));
  }
  c.out(0, c.method(c.node(0), "__getitem__", {Arg::tuple(idx)}));
}

/// Slice from opset 10: bounds are inputs.
void importSliceInputs(NodeCx &c) {
  c.dims(0);
  for (size_t i = 1; i <= 4; ++i)
    if (c.runtime(i))
      return importSliceRuntime(c);
  std::vector<int64_t> starts = c.ints(1), ends = c.ints(2), axes, steps;
  if (c.has(3))
    axes = c.ints(3);
  if (c.has(4))
    steps = c.ints(4);
  emitSlice(c, starts, ends, axes, steps);
}

void importGather(NodeCx &c) {
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.take", {c.node(0), c.node(1)}, {{"axis", ax}}));
}

void importGatherElements(NodeCx &c) {
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.gather", {c.node(0), ax, c.node(1)}));
}

/// ScatterND (`nd`), ScatterElements and Scatter.
void importScatter(NodeCx &c, bool nd) {
  std::string red = c.as("reduction", "none");
  if (!rt::parseScatterReduce(red))
    c.fail(fmt::format("unknown reduction '{}'", red));
  if (nd)
    return c.out(0, c.call("tensor.scatter_nd", {c.node(0), c.node(1), c.node(2)},
                           {{"reduction", red}}));
  int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
  c.out(0, c.call("tensor.scatter", {c.node(0), ax, c.node(1), c.node(2)},
                  {{"reduction", red}}));
}

void importGatherNd(NodeCx &c) {
  c.out(0, c.call("tensor.gather_nd", {c.node(0), c.node(1)},
                  {{"batch_dims", c.ai("batch_dims", 0)}}));
}

/// One of OneHot's (off, on) values as a 0-d tensor node.
Node *oneHotValue(NodeCx &c, int64_t i) {
  const Val &v = c.val(2);
  if (v.cst) {
    if (v.cst->numel() != 2)
      c.fail(fmt::format("values must hold 2 elements, got {}", v.cst->numel()));
    return c.constant(Tensor::full({}, v.cst->at(i), v.cst->dtype()));
  }
  return c.method(c.node(2), "__getitem__", {Arg(i)});
}

/// OneHot's depth: known at import (checked), or read by the kernel at run
/// time (a float depth truncated to int64).
Arg oneHotDepth(NodeCx &c) {
  if (c.runtime(1))
    return c.intsNode(1);
  std::vector<double> d = c.floats(1);
  if (d.size() != 1 || d[0] < 1)
    c.fail("depth must be one positive number");
  return int64_t(d[0]);
}

/// OneHot: one_hot along a new last axis as a mask, the values chosen by
/// where, the new axis moved to `axis`.
void importOneHot(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", -1), r + 1);
  Node *hot = c.call("nn.one_hot", {c.node(0), oneHotDepth(c)});
  Node *y = c.call("tensor.where",
                   {c.astype(hot, DType::Bool), oneHotValue(c, 1), oneHotValue(c, 0)});
  if (ax != r) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < r; ++i) {
      if (i == ax)
        perm.push_back(r);
      perm.push_back(i);
    }
    y = c.call("tensor.transpose", {y, tupleOf(perm)});
  }
  c.out(0, y);
}

/// Compress: a take of the selected positions when the condition is known
/// at import (its result shape is then known), else compress.
void importCompress(NodeCx &c) {
  std::optional<int64_t> ax;
  if (c.hasAttr("axis"))
    ax = c.axis(c.ai("axis", 0), c.rank(0));
  if (!c.val(1).cst) {
    std::vector<KwArg> kw;
    if (ax)
      kw.push_back({"axis", *ax});
    return c.out(0, c.call("tensor.compress", {c.node(0), c.node(1)}, kw));
  }
  const Tensor &cond = *c.val(1).cst;
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.at(i) != 0)
      keep.push_back(i);
  Node *idx = c.constant(Tensor::fromInts({int64_t(keep.size())}, keep));
  Node *x = ax ? c.node(0) : c.call("tensor.flatten", {c.node(0)});
  c.out(0, c.call("tensor.take", {x, idx}, {{"axis", ax.value_or(0)}}));
}

void importReverseSequence(NodeCx &c) {
  c.out(0, c.call("tensor.reverse_sequence", {c.node(0), c.node(1)},
                  {{"batch_axis", c.ai("batch_axis", 1)}, {"time_axis", c.ai("time_axis", 0)}}));
}

/// NonMaxSuppression: the limits are graph values.
void importNms(NodeCx &c) {
  std::vector<KwArg> kw;
  const char *names[] = {"max_output_boxes_per_class", "iou_threshold", "score_threshold"};
  for (size_t i = 2; i < 5; ++i)
    if (c.has(i))
      kw.push_back({names[i - 2], c.node(i)});
  kw.push_back({"center_point_box", bool(c.ai("center_point_box", 0))});
  c.out(0, c.call("vision.non_max_suppression", {c.node(0), c.node(1)}, kw));
}

void importUnique(NodeCx &c) {
  std::vector<KwArg> kw = {{"sorted", bool(c.ai("sorted", 1))}};
  if (c.hasAttr("axis"))
    kw.push_back({"axis", c.axis(c.ai("axis", 0), c.rank(0))});
  auto outs = c.cx.b.callFunctionN(functionOp("tensor.unique"), {c.node(0)}, kw, 4);
  for (size_t i = 0; i < 4; ++i)
    c.out(i, outs[i]);
}

/// NonZero: the row-major coordinates (rank, numel) of a static shape
/// (axis d: arange(size_d) broadcast along the other axes, flattened),
/// compressed along axis 1 by x != 0; a 0-d input counts as 1-d.
void importNonZero(NodeCx &c) {
  Shape s = c.shape(0);
  if (s.empty())
    s = {1};
  size_t r = s.size();
  Node *flat = c.call("tensor.flatten", {c.node(0)});
  std::optional<DType> dt = c.dtype(0);
  if (!dt)
    c.fail("the dtype of the input is not known");
  Node *cond = c.call("elemwise.not_equal", {flat, c.constant(Tensor::zeros({}, *dt))});
  std::vector<Arg> coords;
  for (size_t d = 0; d < r; ++d) {
    Shape one(r, 1);
    one[d] = s[d];
    Node *i = c.call("tensor.arange", {int64_t(0), s[d], int64_t(1)}, {{"dtype", "int64"}});
    i = c.call("tensor.broadcast_to", {c.call("tensor.reshape", {i, tupleOf(one)}), tupleOf(s)});
    coords.push_back(c.call("tensor.reshape", {i, tupleOf({-1})}));
  }
  Node *table = c.call("tensor.stack", {Arg::list(coords)}, {{"axis", int64_t(0)}});
  c.out(0, c.call("tensor.compress", {table, cond}, {{"axis", int64_t(1)}}));
}

} // namespace

void registerIndexOnnxImport(OnnxImportTable &t) {
  t.add("Slice", 1, 9, importSliceAttrs);
  t.add("Slice", 10, kMaxOpset, importSliceInputs);
  t.add("Gather", 1, kMaxOpset, importGather);
  t.add("GatherElements", 1, kMaxOpset, importGatherElements);
  t.add("ScatterND", 1, kMaxOpset, [](NodeCx &c) { importScatter(c, true); });
  for (const char *op : {"ScatterElements", "Scatter"})
    t.add(op, 1, kMaxOpset, [](NodeCx &c) { importScatter(c, false); });
  t.add("GatherND", 11, kMaxOpset, importGatherNd);
  t.add("OneHot", 9, kMaxOpset, importOneHot);
  t.add("Compress", 9, kMaxOpset, importCompress);
  t.add("ReverseSequence", 10, kMaxOpset, importReverseSequence);
  t.add("NonMaxSuppression", 10, kMaxOpset, importNms);
  t.add("Unique", 11, kMaxOpset, importUnique);
  t.add("NonZero", 9, kMaxOpset, importNonZero);
}

// -- Export -------------------------------------------------------------------

namespace {

void exportScatter(ExportCall &c) {
  // ONNX has max and min reductions from opset 18 on; we write opset 17.
  std::string red = c.string("reduction");
  if (red != "none" && red != "add" && red != "mul")
    c.fail(fmt::format("reduction '{}' needs ONNX opset 18 (written: 17)", red));
  if (c.k == OpKind::Scatter) {
    c.simple("ScatterElements",
             {c.operand("inp"), c.operand("index"), c.operand("source")});
    Exporter::attrI(c.n, "axis", c.ints("axis")[0]);
  } else {
    c.simple("ScatterND", {c.operand("inp"), c.operand("indices"), c.operand("updates")});
  }
  if (red != "none")
    Exporter::attrS(c.n, "reduction", red);
}

/// __getitem__ with integer and slice indices: Slice, then Squeeze of the
/// integer-indexed axes.
/// A Slice input entry: a constant or an ONNX value (a 0-d tensor).
struct Bound {
  int64_t v = 0;
  std::string name;
};

/// Entries joined into one 1-d int64 ONNX value (Concat of 1-element parts).
std::string joinBounds(ExportCall &c, const std::vector<Bound> &bs, const std::string &base) {
  std::vector<std::string> parts;
  for (const Bound &b : bs) {
    if (b.name.empty()) {
      parts.push_back(c.intsInit({b.v}, base));
      continue;
    }
    std::string v = c.ex.cast(b.name, DType::Int64);
    parts.push_back(c.emit("Reshape", {v, c.intsInit({1}, base + "_one")}, base));
  }
  onnx::NodeProto *n;
  std::string out = c.emit("Concat", parts, base, &n);
  Exporter::attrI(n, "axis", 0);
  return out;
}

/// x[...] whose slice bounds include tensor nodes: Slice with starts, ends
/// and steps joined from constants and those tensors.
void exportGetItemRuntime(ExportCall &c, const std::vector<IndexSpec> &items) {
  std::vector<Bound> starts, ends, steps;
  std::vector<int64_t> axes;
  auto bound = [&](const IndexBound &b) {
    if (b.leaf)
      return Bound{0, c.nameOf(b.node())};
    if (b.value)
      return Bound{*b.value, ""};
    c.fail("a slice with bounds read at run time needs every bound given");
  };
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != IndexSpec::Kind::Slice)
      c.fail("only slices have an ONNX form when bounds are read at run time");
    starts.push_back(bound(items[i].start));
    ends.push_back(bound(items[i].stop));
    steps.push_back(bound(items[i].step));
    axes.push_back(int64_t(i));
  }
  c.simple("Slice", {c.operand("self"), joinBounds(c, starts, c.out + "_starts"),
                     joinBounds(c, ends, c.out + "_ends"), c.intsInit(axes, c.out + "_axes"),
                     joinBounds(c, steps, c.out + "_steps")});
}

void exportGetItem(ExportCall &c) {
  auto a = c.e.namedArg("index");
  auto items = a ? decodeIndex(*a) : std::nullopt;
  if (!items)
    c.fail("only integer and slice indices have an ONNX form");
  if (a->def.numLeaves())
    return exportGetItemRuntime(c, *items);
  const Shape &xs = c.shapeOf(c.e.input(0));
  std::vector<int64_t> starts, ends, axes, steps, squeeze;
  constexpr int64_t big = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < items->size(); ++i) {
    const IndexSpec &t = (*items)[i];
    if (i >= xs.size())
      c.fail("too many indices");
    if (t.kind == IndexSpec::Kind::Index) {
      starts.push_back(t.index);
      ends.push_back(t.index == -1 ? big : t.index + 1);
      axes.push_back(int64_t(i));
      steps.push_back(1);
      squeeze.push_back(int64_t(i));
    } else if (t.kind == IndexSpec::Kind::Slice) {
      int64_t st = t.step.value.value_or(1);
      starts.push_back(t.start.value.value_or(st > 0 ? 0 : big));
      ends.push_back(t.stop.value.value_or(st > 0 ? big : std::numeric_limits<int64_t>::min()));
      axes.push_back(int64_t(i));
      steps.push_back(st);
    } else {
      c.fail("only integer and slice indices have an ONNX form");
    }
  }
  const std::string &out = c.out;
  std::string v = c.emit("Slice", {c.operand("self"), c.intsInit(starts, out + "_starts"),
                                   c.intsInit(ends, out + "_ends"), c.intsInit(axes, out + "_axes"),
                                   c.intsInit(steps, out + "_steps")},
                         squeeze.empty() ? llvm::StringRef(out) : llvm::StringRef(out + "_sl"));
  if (!squeeze.empty())
    v = c.emit("Squeeze", {v, c.intsInit(squeeze, out + "_sq")}, out);
  c.bind(v);
}

/// one_hot: OneHot with (0, 1) values of the output dtype.
void exportOneHot(ExportCall &c) {
  Tensor values = rt::cast(Tensor::fromFloats({2}, {0.0f, 1.0f}), c.od);
  auto n = c.e.namedArg("num_classes");
  std::string depth = n && n->node() ? c.operand("num_classes", DType::Int64)
                                     : c.intsInit({c.ints("num_classes")[0]}, c.out + "_depth");
  c.simple("OneHot", {c.operand("inp"), depth, c.init(values, c.out + "_values")});
}

void exportNms(ExportCall &c) {
  std::vector<std::string> ins = {c.operand("boxes"), c.operand("scores"),
                                  c.operand("max_output_boxes_per_class", DType::Int64),
                                  c.operand("iou_threshold", DType::Float32)};
  if (!c.isNone("score_threshold"))
    ins.push_back(c.operand("score_threshold", DType::Float32));
  c.simple("NonMaxSuppression", ins);
  Exporter::attrI(c.n, "center_point_box", c.boolean("center_point_box"));
}

void exportUnique(ExportCall &c) {
  std::vector<std::string> outs;
  for (size_t i = 0; i < c.e.numOutputs(); ++i) {
    outs.push_back(c.ex.fresh(c.e.output(i)->name()));
    c.bind(outs.back(), i);
  }
  onnx::NodeProto *n = c.ex.node("Unique", {c.operand("inp")}, outs);
  if (!c.isNone("axis"))
    Exporter::attrI(n, "axis", c.ints("axis")[0]);
  Exporter::attrI(n, "sorted", c.boolean("sorted"));
}

} // namespace

void registerIndexOnnxExport(OnnxExportTable &t) {
  t.add("index", {OpKind::Gather}, [](ExportCall &c) {
    c.simple("GatherElements", {c.operand("inp"), c.operand("index")});
    Exporter::attrI(c.n, "axis", c.ints("axis")[0]);
  });
  t.add("index", {OpKind::Take}, [](ExportCall &c) {
    c.simple("Gather", {c.operand("inp"), c.operand("indices")});
    Exporter::attrI(c.n, "axis", c.ints("axis")[0]);
  });
  t.add("index", {OpKind::Scatter, OpKind::ScatterNd}, exportScatter);
  t.add("index", {OpKind::Embedding}, [](ExportCall &c) {
    c.simple("Gather", {c.operand("weight"), c.operand("inp")});
  });
  t.add("index", {OpKind::MGetItem}, exportGetItem);
  t.add("index", {OpKind::GatherNd}, [](ExportCall &c) {
    c.simple("GatherND", {c.operand("inp"), c.operand("indices")});
    Exporter::attrI(c.n, "batch_dims", c.ints("batch_dims")[0]);
  });
  t.add("index", {OpKind::OneHot}, exportOneHot);
  t.add("index", {OpKind::NonMaxSuppression}, exportNms);
  t.add("index", {OpKind::Unique}, exportUnique);
  t.add("index", {OpKind::Compress}, [](ExportCall &c) {
    c.simple("Compress", {c.operand("inp"), c.operand("condition")});
    if (!c.isNone("axis"))
      Exporter::attrI(c.n, "axis", c.ints("axis")[0]);
  });
  t.add("index", {OpKind::ReverseSequence}, [](ExportCall &c) {
    c.simple("ReverseSequence", {c.operand("inp"), c.operand("sequence_lens")});
    Exporter::attrI(c.n, "batch_axis", c.ints("batch_axis")[0]);
    Exporter::attrI(c.n, "time_axis", c.ints("time_axis")[0]);
  });
}

} // namespace tmg::io::onnxdetail
