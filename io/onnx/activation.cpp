//===- activation.cpp - ONNX mapping of activations -------------*- C++ -*-===//
//
// The ONNX importers and exporters of the activation family: Relu and its
// relatives with their attributes (LeakyRelu, Elu, Selu, HardSigmoid, ...),
// PRelu (with the pre-opset-7 channel slope) and Dropout in inference mode.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

#include <algorithm>
#include <cmath>

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

// -- Export -------------------------------------------------------------------

namespace {

void exportRelu6(ExportCall &c) {
  std::string x = c.first(c.od);
  auto bound = [&](const char *name, double v) {
    return c.init(Tensor::full({}, v, c.od), c.out + "_" + name);
  };
  c.simple("Clip", {x, bound("lower", 0.0), bound("upper", 6.0)});
}

/// One ONNX node with float attributes read from the expr's arguments.
void exportWithAlphas(ExportCall &c, const char *op,
                      std::initializer_list<std::pair<const char *, const char *>> attrs) {
  c.simple(op, {c.first(c.od)});
  for (auto [onnxName, argName] : attrs)
    Exporter::attrF(c.n, onnxName, c.number(argName));
}

} // namespace

std::string geluFactor(ExportCall &c, const std::string &x, bool tanhForm) {
  const std::string &out = c.out;
  auto k = [&](double v, const char *tag) {
    return c.init(Tensor::full({}, v, DType::Float32), out + tag);
  };
  std::string t;
  if (!tanhForm) {
    t = c.emit("Erf", {c.emit("Div", {x, k(M_SQRT2, "_sqrt2")}, out + "_scaled")}, out + "_erf");
  } else {
    std::string cube = c.emit("Mul", {x, c.emit("Mul", {x, x}, out + "_sq")}, out + "_cube");
    std::string in = c.emit("Add", {x, c.emit("Mul", {cube, k(0.044715, "_kappa")}, out + "_kc")},
                            out + "_inner");
    t = c.emit("Tanh", {c.emit("Mul", {in, k(std::sqrt(2.0 / M_PI), "_beta")}, out + "_arg")},
               out + "_tanh");
  }
  std::string onePlus = c.emit("Add", {t, k(1.0, "_one")}, out + "_onep");
  return c.emit("Mul", {onePlus, k(0.5, "_half")}, out + "_factor");
}

void exportFusedActivation(ExportCall &c, OpKind inner) {
  std::string act = c.string("activation");
  static const char *Known[] = {"none",      "relu",        "relu6", "sigmoid",  "silu",
                                "hardswish", "hardsigmoid", "gelu",  "gelu_tanh"};
  if (std::find(std::begin(Known), std::end(Known), act) == std::end(Known))
    c.fail(fmt::format("unknown activation '{}'", act));
  std::string pre = c.out + "_pre";
  c.ex.exportCall(c.e, inner, &pre);
  std::string x = c.nameOf(c.e.output(0));
  if (act == "none")
    return;
  if (act == "relu") {
    c.simple("Relu", {x});
  } else if (act == "sigmoid") {
    c.simple("Sigmoid", {x});
  } else if (act == "hardswish") {
    c.simple("HardSwish", {x});
  } else if (act == "silu") {
    c.simple("Mul", {x, c.emit("Sigmoid", {x}, c.out + "_sigmoid")});
  } else if (act == "hardsigmoid") {
    c.simple("HardSigmoid", {x});
    Exporter::attrF(c.n, "alpha", 1.0 / 6.0);
    Exporter::attrF(c.n, "beta", 0.5);
  } else if (act == "gelu" || act == "gelu_tanh") {
    c.simple("Mul", {x, geluFactor(c, x, act == "gelu_tanh")});
  } else { // relu6
    c.simple("Clip", {x, c.init(Tensor::full({}, 0.0, DType::Float32), c.out + "_lower"),
                      c.init(Tensor::full({}, 6.0, DType::Float32), c.out + "_upper")});
  }
}

void registerActivationOnnxExport(OnnxExportTable &t) {
  const char *f = "activation";
  static const std::pair<OpKind, const char *> unary[] = {{OpKind::Sigmoid, "Sigmoid"},
                                                          {OpKind::Softplus, "Softplus"},
                                                          {OpKind::Softsign, "Softsign"},
                                                          {OpKind::Hswish, "HardSwish"}};
  for (auto [k, op] : unary)
    t.add(f, {k}, [op = op](ExportCall &c) { c.un(op); });
  t.add(f, {OpKind::Relu}, [](ExportCall &c) { c.simple("Relu", {c.first(c.od)}); });
  t.add(f, {OpKind::Hsigmoid}, [](ExportCall &c) {
    c.simple("HardSigmoid", {c.first(c.od)});
    Exporter::attrF(c.n, "alpha", 1.0 / 6.0);
    Exporter::attrF(c.n, "beta", 0.5);
  });
  t.add(f, {OpKind::HardSigmoid},
        [](ExportCall &c) {
          exportWithAlphas(c, "HardSigmoid", {{"alpha", "alpha"}, {"beta", "beta"}});
        });
  t.add(f, {OpKind::LeakyRelu},
        [](ExportCall &c) { exportWithAlphas(c, "LeakyRelu", {{"alpha", "negative_slope"}}); });
  t.add(f, {OpKind::Elu}, [](ExportCall &c) { exportWithAlphas(c, "Elu", {{"alpha", "alpha"}}); });
  t.add(f, {OpKind::Celu},
        [](ExportCall &c) { exportWithAlphas(c, "Celu", {{"alpha", "alpha"}}); });
  t.add(f, {OpKind::ThresholdedRelu},
        [](ExportCall &c) { exportWithAlphas(c, "ThresholdedRelu", {{"alpha", "alpha"}}); });
  t.add(f, {OpKind::Selu}, [](ExportCall &c) {
    exportWithAlphas(c, "Selu", {{"alpha", "alpha"}, {"gamma", "scale"}});
  });
  t.add(f, {OpKind::Silu}, [](ExportCall &c) {
    std::string x = c.first(c.od);
    std::string s = c.emit("Sigmoid", {x}, c.out + "_sigmoid");
    c.simple("Mul", {x, s});
  });
  t.add(f, {OpKind::Relu6}, exportRelu6);
  t.add(f, {OpKind::Prelu}, [](ExportCall &c) {
    c.simple("PRelu", {c.operand("inp", c.od), c.operand("weight", c.od)});
  });
  t.add(f, {OpKind::Gelu, OpKind::GeluTanh}, [](ExportCall &c) {
    std::string x = c.first(DType::Float32);
    c.simple("Mul", {x, geluFactor(c, x, c.k == OpKind::GeluTanh)});
  });
  t.add(f, {OpKind::Dropout}, [](ExportCall &c) { c.simple("Identity", {c.first()}); });
}

} // namespace tmg::io::onnxdetail
