//===- reduce.cpp - ONNX mapping of reductions ------------------*- C++ -*-===//
//
// The ONNX importers and exporters of the reduce family: the Reduce* ops
// (axes as attribute or input; L1, L2, LogSum, LogSumExp and SumSquare
// composed from sum), ArgMax/ArgMin (select_last_index by reversing the
// axis), Hardmax (an argmax compared with the axis' indices), CumSum and
// TopK (topk along the last axis, other axes transposed there and back).
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {
namespace {

/// A reduction composed from tmgraph ops: `x` reduced with the keyword
/// arguments `kw` (axis, keepdims).
using ReduceComposer = Node *(*)(const NodeCx &c, Node *x, const std::vector<KwArg> &kw);

/// A reduction over axes read at run time (an empty tensor: every axis).
void importReduceRuntime(NodeCx &c, ReduceComposer compose) {
  // The axes' count is static: with none, noop_with_empty_axes is the identity.
  if (c.ai("noop_with_empty_axes", 0) && c.length(1) == 0)
    return c.outAlias(0, c.val(0));
  std::vector<KwArg> kw = {{"axis", c.intsNode(1)}, {"keepdims", bool(c.ai("keepdims", 1))}};
  c.out(0, compose(c, c.node(0), kw));
}

void importReduce(NodeCx &c, ReduceComposer compose) {
  if (c.runtime(1))
    return importReduceRuntime(c, compose);
  int64_t r = c.rank(0);
  std::optional<std::vector<int64_t>> axes = c.ais("axes");
  if (c.has(1))
    axes = c.ints(1);
  bool keep = c.ai("keepdims", 1);
  if ((!axes || axes->empty()) && c.ai("noop_with_empty_axes", 0))
    return c.outAlias(0, c.val(0));
  Arg ax = Arg::none();
  if (axes && !axes->empty()) {
    std::vector<int64_t> a;
    for (int64_t v : *axes)
      a.push_back(c.axis(v, r));
    std::sort(a.begin(), a.end());
    ax = tupleOf(a);
  }
  std::vector<KwArg> kw = {{"axis", ax}, {"keepdims", keep}};
  Node *x = c.node(0);
  c.out(0, compose(c, x, kw));
}

struct Reduction {
  const char *op;
  ReduceComposer compose;
};

const Reduction reductions[] = {
    {"ReduceMean", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.mean", {x}, kw);
     }},
    {"ReduceSum", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.sum", {x}, kw);
     }},
    {"ReduceMax", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.max", {x}, kw);
     }},
    {"ReduceMin", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.min", {x}, kw);
     }},
    {"ReduceProd", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.prod", {x}, kw);
     }},
    {"ReduceL1", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.sum", {c.call("elemwise.abs", {x})}, kw);
     }},
    {"ReduceSumSquare", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("math.sum", {c.call("elemwise.mul", {x, x})}, kw);
     }},
    {"ReduceL2", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("elemwise.sqrt", {c.call("math.sum", {c.call("elemwise.mul", {x, x})}, kw)});
     }},
    {"ReduceLogSum", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("elemwise.log", {c.call("math.sum", {x}, kw)});
     }},
    {"ReduceLogSumExp", [](const NodeCx &c, Node *x, const std::vector<KwArg> &kw) {
       return c.call("elemwise.log", {c.call("math.sum", {c.call("elemwise.exp", {x})}, kw)});
     }},
};

void importArgReduce(NodeCx &c, const char *fn) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", 0), r);
  bool keep = c.ai("keepdims", 1);
  Node *x = c.node(0);
  if (!c.ai("select_last_index", 0))
    return c.out(0, c.call(fn, {x}, {{"axis", ax}, {"keepdims", keep}}));
  // Last index: the first index of the reversed axis, mirrored.
  std::vector<Arg> idx;
  for (int64_t i = 0; i < r; ++i)
    idx.push_back(i == ax ? Arg::slice(Arg::none(), Arg::none(), int64_t(-1))
                          : Arg::slice(Arg::none(), Arg::none(), Arg::none()));
  Node *rev = c.method(x, "__getitem__", {Arg::tuple(idx)});
  Node *i = c.call(fn, {rev}, {{"axis", ax}, {"keepdims", keep}});
  Node *last = c.constant(Tensor::fromInts({}, {c.shape(0)[ax] - 1}, DType::Int64));
  c.out(0, c.call("elemwise.sub", {last, i}));
}

void importHardmax(NodeCx &c) {
  const Shape &s = c.shape(0);
  int64_t r = int64_t(s.size());
  Node *x = c.node(0);
  int64_t ax;
  if (c.opset >= 13) {
    ax = c.axis(c.ai("axis", -1), r);
  } else {
    int64_t a0 = c.axis(c.ai("axis", 1), r), a = 1, b2 = 1;
    for (int64_t i = 0; i < r; ++i)
      (i < a0 ? a : b2) *= s[i];
    x = c.call("tensor.reshape", {x, tupleOf({a, b2})});
    ax = 1;
  }
  auto *xt = llvm::cast<TensorNode>(x);
  Shape cur = *xt->shape();
  Shape is(cur.size(), 1);
  is[ax] = cur[ax];
  std::vector<int64_t> iota(cur[ax]);
  for (int64_t i = 0; i < cur[ax]; ++i)
    iota[i] = i;
  Node *am = c.call("math.argmax", {x}, {{"axis", ax}, {"keepdims", true}});
  Node *eq = c.call("elemwise.equal", {am, c.constant(Tensor::fromInts(is, iota))});
  Node *y = c.astype(eq, c.dtype(0).value_or(DType::Float32));
  if (c.opset < 13)
    y = c.call("tensor.reshape", {y, tupleOf(s)});
  c.out(0, y);
}

void importCumSum(NodeCx &c) {
  if (c.runtime(1))
    return c.out(0, c.call("tensor.cumsum", {c.node(0), c.intsNode(1)},
                           {{"exclusive", bool(c.ai("exclusive", 0))},
                            {"reverse", bool(c.ai("reverse", 0))}}));
  int64_t ax = c.axis(c.ints(1).at(0), c.rank(0));
  c.out(0, c.call("tensor.cumsum", {c.node(0), ax},
                  {{"exclusive", bool(c.ai("exclusive", 0))},
                   {"reverse", bool(c.ai("reverse", 0))}}));
}

/// TopK's k: an attribute (opset < 10), an input known at import (checked
/// against the axis) or an input the kernel reads at run time.
Arg topkK(NodeCx &c, int64_t ax) {
  if (c.opset >= 10 && c.runtime(1))
    return c.intsNode(1);
  int64_t k = c.opset < 10 ? c.ai("k", -1) : 0;
  if (c.opset >= 10) {
    std::vector<int64_t> kv = c.ints(1);
    if (kv.size() != 1)
      c.fail(fmt::format("K must hold one value, got {}", kv.size()));
    k = kv[0];
  }
  if (k < 0 || k > c.shape(0)[ax])
    c.fail(fmt::format("k = {} is out of range for axis {} of {}", k, ax, shapeStr(c.shape(0))));
  return k;
}

/// TopK: topk along the last axis, another axis transposed there and back.
void importTopK(NodeCx &c) {
  int64_t r = c.rank(0), ax = c.axis(c.ai("axis", -1), r);
  Arg k = topkK(c, ax);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i == ax ? r - 1 : i == r - 1 ? ax : i);
  Node *x = c.node(0);
  if (ax != r - 1)
    x = c.call("tensor.transpose", {x, tupleOf(perm)});
  auto outs = c.cx.b.callFunctionN(functionOp("math.topk"), {x, std::move(k)},
                                   {{"descending", bool(c.ai("largest", 1))},
                                    {"no_sort", !c.ai("sorted", 1)}},
                                   2);
  for (size_t i = 0; i < 2; ++i)
    c.out(i, ax == r - 1 ? outs[i] : c.call("tensor.transpose", {outs[i], tupleOf(perm)}));
}

} // namespace

void registerReduceOnnxImport(OnnxImportTable &t) {
  for (const Reduction &r : reductions)
    t.add(r.op, 1, kMaxOpset, [compose = r.compose](NodeCx &c) { importReduce(c, compose); });
  t.add("ArgMax", 1, kMaxOpset, [](NodeCx &c) { importArgReduce(c, "math.argmax"); });
  t.add("ArgMin", 1, kMaxOpset, [](NodeCx &c) { importArgReduce(c, "math.argmin"); });
  t.add("Hardmax", 1, kMaxOpset, importHardmax);
  t.add("CumSum", 1, kMaxOpset, importCumSum);
  t.add("TopK", 1, kMaxOpset, importTopK);
}

// -- Export -------------------------------------------------------------------

namespace {

void exportReduce(ExportCall &c) {
  OpKind k = c.k;
  const char *op = (k == OpKind::Sum || k == OpKind::MSum)     ? "ReduceSum"
                   : (k == OpKind::Mean || k == OpKind::MMean) ? "ReduceMean"
                   : (k == OpKind::Max || k == OpKind::MMax)   ? "ReduceMax"
                   : (k == OpKind::Min || k == OpKind::MMin)   ? "ReduceMin"
                                                               : "ReduceProd";
  std::string x = c.first();
  if (auto a = c.e.namedArg("axis"); a && a->node()) {
    if (std::string(op) != "ReduceSum")
      c.fail("axes read at run time need ONNX opset 18 for this reduction (written: 17)");
    c.simple(op, {x, c.operand("axis", DType::Int64)});
    return Exporter::attrI(c.n, "keepdims", c.boolean("keepdims"));
  }
  std::vector<int64_t> axes = c.isNone("axis") ? std::vector<int64_t>{} : c.ints("axis");
  // ReduceSum takes its axes as an input from opset 13, the others from 18.
  if (std::string(op) == "ReduceSum") {
    c.simple(op, axes.empty() ? std::vector<std::string>{x}
                              : std::vector<std::string>{x, c.intsInit(axes, c.out + "_axes")});
  } else {
    c.simple(op, {x});
    if (!axes.empty())
      Exporter::attrIs(c.n, "axes", axes);
  }
  Exporter::attrI(c.n, "keepdims", c.boolean("keepdims"));
}

void exportArgReduce(ExportCall &c) {
  if (c.isNone("axis") || c.ints("axis").size() != 1)
    c.fail("arg-reductions over several axes have no ONNX form");
  c.simple(c.k == OpKind::Argmax ? "ArgMax" : "ArgMin", {c.operand("inp")});
  Exporter::attrI(c.n, "axis", c.ints("axis")[0]);
  Exporter::attrI(c.n, "keepdims", c.boolean("keepdims"));
}

/// topk: TopK along the last axis.
void exportTopk(ExportCall &c) {
  if (c.boolean("kth_only"))
    c.fail("kth_only has no ONNX form");
  std::vector<std::string> outs;
  for (size_t i = 0; i < 2; ++i) {
    outs.push_back(c.ex.fresh(c.e.output(i)->name()));
    c.bind(outs.back(), i);
  }
  auto k = c.e.namedArg("k");
  std::string kin = k && k->node() ? c.operand("k", DType::Int64)
                                   : c.intsInit({c.ints("k")[0]}, c.out + "_k");
  onnx::NodeProto *n = c.ex.node("TopK", {c.operand("inp"), kin}, outs);
  Exporter::attrI(n, "axis", -1);
  Exporter::attrI(n, "largest", c.boolean("descending"));
  Exporter::attrI(n, "sorted", !c.boolean("no_sort"));
}

} // namespace

void registerReduceOnnxExport(OnnxExportTable &t) {
  t.add("reduce",
        {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::Prod, OpKind::MSum,
         OpKind::MMean, OpKind::MMax, OpKind::MMin, OpKind::MProd},
        exportReduce);
  t.add("reduce", {OpKind::Argmax, OpKind::Argmin}, exportArgReduce);
  t.add("reduce", {OpKind::Topk}, exportTopk);
  t.add("reduce", {OpKind::Cumsum}, [](ExportCall &c) {
    auto a = c.e.namedArg("axis");
    c.simple("CumSum", {c.operand("inp"), a && a->node() ? c.operand("axis", DType::Int64)
                                                          : c.intsInit({c.ints("axis")[0]},
                                                                       c.out + "_axis")});
    Exporter::attrI(c.n, "exclusive", c.boolean("exclusive"));
    Exporter::attrI(c.n, "reverse", c.boolean("reverse"));
  });
}

} // namespace tmg::io::onnxdetail
