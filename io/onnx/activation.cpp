//===- activation.cpp - ONNX mapping of activations -------------*- C++ -*-===//
//
// The ONNX importers and exporters of the activation family: Relu and its
// relatives with their attributes (LeakyRelu, Elu, Selu, HardSigmoid, ...),
// PRelu (with the pre-opset-7 channel slope) and Dropout in inference mode.
//
//===----------------------------------------------------------------------===//
#include "Import.h"

namespace tmg::io::onnxdetail {
namespace {

void importPRelu(NodeCx &c) {
  Node *slope = c.node(1);
  // Before opset 7 a 1-D slope applies along the channel axis.
  if (c.opset < 7 && c.rank(1) == 1 && c.rank(0) > 2 && c.shape(1)[0] == c.shape(0)[1] &&
      c.shape(1)[0] != 1) {
    Shape cs{c.shape(1)[0]};
    for (int64_t i = 2; i < c.rank(0); ++i)
      cs.push_back(1);
    slope = c.call("tensor.reshape", {slope, tupleOf(cs)});
  }
  c.out(0, c.call("nn.prelu", {c.node(0), slope}));
}

void importSelu(NodeCx &c) {
  c.out(0, c.call("nn.selu", {c.node(0)},
                  {{"alpha", c.af("alpha", 1.67326319217681884765625)},
                   {"scale", c.af("gamma", 1.05070102214813232421875)}}));
}

void importHardSigmoid(NodeCx &c) {
  c.out(0, c.call("nn.hard_sigmoid", {c.node(0)},
                  {{"alpha", c.af("alpha", 0.2)}, {"beta", c.af("beta", 0.5)}}));
}

void importDropout(NodeCx &c) {
  // Training mode with a ratio of 0 (PyTorch exports F.dropout(p=0.0,
  // training=True) this way) keeps every element: the same as inference.
  bool ratioKnown = !c.has(1) || c.val(1).cst;
  double ratio = c.has(1) ? (ratioKnown ? c.cst(1).at(0) : 0.5) : c.af("ratio", 0.5);
  if (c.has(2) && (!c.val(2).cst || c.cst(2).at(0) != 0) && (!ratioKnown || ratio != 0))
    c.fail("training mode is not supported");
  c.out(0, c.call("nn.dropout", {c.node(0)}, {{"drop_prob", ratio}, {"training", false}}));
  if (c.wants(1))
    c.outConst(1, Tensor::full(c.shape(0), 1.0, DType::Bool));
}

} // namespace

void registerActivationOnnxImport(OnnxImportTable &t) {
  static const std::pair<const char *, const char *> unary[] = {
      {"Relu", "nn.relu"},         {"Sigmoid", "nn.sigmoid"}, {"Softsign", "nn.softsign"},
      {"Softplus", "nn.softplus"}, {"HardSwish", "nn.hswish"}};
  for (auto [op, fn] : unary)
    t.add(op, 1, kMaxOpset, [fn = fn](NodeCx &c) { c.out(0, c.call(fn, {c.node(0)})); });
  t.add("LeakyRelu", 1, kMaxOpset, [](NodeCx &c) {
    c.out(0, c.call("nn.leaky_relu", {c.node(0)}, {{"negative_slope", c.af("alpha", 0.01)}}));
  });
  t.add("PRelu", 1, kMaxOpset, importPRelu);
  // Activations with one `alpha`: ONNX op, tmgraph function, default.
  static const std::tuple<const char *, const char *, double> alphaOnly[] = {
      {"Elu", "nn.elu", 1.0}, {"Celu", "nn.celu", 1.0},
      {"ThresholdedRelu", "nn.thresholded_relu", 1.0}};
  for (auto [op, fn, dflt] : alphaOnly)
    t.add(op, 1, kMaxOpset, [fn = fn, dflt = dflt](NodeCx &c) {
      c.out(0, c.call(fn, {c.node(0)}, {{"alpha", c.af("alpha", dflt)}}));
    });
  t.add("Selu", 1, kMaxOpset, importSelu);
  t.add("HardSigmoid", 1, kMaxOpset, importHardSigmoid);
  t.add("Dropout", 1, kMaxOpset, importDropout);
}

} // namespace tmg::io::onnxdetail
