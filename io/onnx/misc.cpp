//===- misc.cpp - ONNX ops of no single tmgraph family ----------*- C++ -*-===//
//
// ONNX importers whose op becomes no one tmgraph op family: Constant (a
// value known at import time), Identity (an alias of its input), and the
// losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (composed
// of logsoftmax, gather, where and reductions).
//
//===----------------------------------------------------------------------===//
#include "Import.h"

#include "tm/ir/Strings.h"

namespace tmg::io::onnxdetail {
namespace {

void importConstant(NodeCx &c) {
  if (auto *a = c.attr("value"))
    return c.outConst(0, tensorFromProto(a->t()));
  if (auto *a = c.attr("value_float"))
    return c.outConst(0, Tensor::full({}, a->f(), DType::Float32));
  if (auto *a = c.attr("value_int"))
    return c.outConst(0, Tensor::fromInts({}, {a->i()}, DType::Int64));
  if (auto v = c.afs("value_floats")) {
    std::vector<float> f(v->begin(), v->end());
    return c.outConst(0, Tensor::fromFloats({int64_t(f.size())}, f));
  }
  if (auto v = c.ais("value_ints"))
    return c.outConst(0, Tensor::fromInts({int64_t(v->size())}, *v, DType::Int64));
  if (auto *a = c.attr("value_string"))
    return c.outConst(0, stringTensor({}, {a->s()}));
  if (auto *a = c.attr("value_strings")) {
    std::vector<std::string> v(a->strings().begin(), a->strings().end());
    return c.outConst(0, stringTensor({int64_t(v.size())}, v));
  }
  c.fail("only tensor, float(s), int(s) and string(s) constants are supported");
}

/// loss[n, d...] = -input[n, target[n, d...], d...] * weight[target],
/// entries whose target is ignore_index weigh 0; then none/sum/mean (the
/// mean divides by the sum of the weights). SoftmaxCrossEntropyLoss (`sce`)
/// takes the logsoftmax of its input first.
void importLoss(NodeCx &c, bool sce) {
  Node *x = c.node(0), *t = c.node(1);
  DType fdt = c.dtype(0).value_or(DType::Float32);
  if (sce) {
    x = c.call("nn.logsoftmax", {x}, {{"axis", int64_t(1)}});
    c.out(1, x);
  }
  Node *w = nullptr;
  if (c.hasAttr("ignore_index")) {
    Node *ii = c.constant(Tensor::fromInts({}, {c.ai("ignore_index", 0)}, *c.dtype(1)));
    Node *mask = c.call("elemwise.not_equal", {t, ii});
    t = c.call("tensor.where", {mask, t, c.constant(Tensor::fromInts({}, {0}, *c.dtype(1)))});
    w = c.astype(mask, fdt);
  }
  Node *g =
      c.call("tensor.gather", {x, int64_t(1), c.call("tensor.expand_dims", {t, int64_t(1)})});
  g = c.call("elemwise.neg", {c.call("tensor.squeeze", {g}, {{"axis", int64_t(1)}})});
  if (c.has(2)) {
    Node *cw = c.call("tensor.take", {c.node(2), t}, {{"axis", int64_t(0)}});
    w = w ? c.call("elemwise.mul", {w, cw}) : cw;
  }
  Node *loss = w ? c.call("elemwise.mul", {g, w}) : g;
  std::string red = c.as("reduction", "mean");
  if (red == "sum")
    loss = c.call("math.sum", {loss});
  else if (red == "mean")
    loss = w ? c.call("elemwise.div", {c.call("math.sum", {loss}), c.call("math.sum", {w})})
             : c.call("math.mean", {loss});
  else if (red != "none")
    c.fail(fmt::format("unknown reduction '{}'", red));
  c.out(0, loss);
}

} // namespace

void registerMiscOnnxImport(OnnxImportTable &t) {
  t.add("Constant", 1, kMaxOpset, importConstant);
  t.add("Identity", 1, kMaxOpset, [](NodeCx &c) { c.outAlias(0, c.val(0)); });
  t.add("NegativeLogLikelihoodLoss", 1, kMaxOpset, [](NodeCx &c) { importLoss(c, false); });
  t.add("SoftmaxCrossEntropyLoss", 1, kMaxOpset, [](NodeCx &c) { importLoss(c, true); });
}

} // namespace tmg::io::onnxdetail
