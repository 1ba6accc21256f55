//===- norm.cpp - ONNX mapping of normalisations ----------------*- C++ -*-===//
//
// The ONNX importers and exporters of the norm family: Softmax and
// LogSoftmax (before opset 13 over the flattened trailing axes),
// BatchNormalization (in training mode: the batch's statistics, and the
// updated running statistics as outputs), and LayerNormalization,
// InstanceNormalization and MeanVarianceNormalization (layer_norm where it
// fits, else mean/variance arithmetic), and LRN (local_response_norm).
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {
namespace {

/// Softmax or LogSoftmax (`fn`) from opset 13 on: over one axis.
void importSoftmax(NodeCx &c, const char *fn) {
  int64_t ax = c.axis(c.ai("axis", -1), c.rank(0));
  c.out(0, c.call(fn, {c.node(0)}, {{"axis", ax}}));
}

/// Before opset 13: over the axes from `axis` on, flattened into one.
void importSoftmaxFlat(NodeCx &c, const char *fn) {
  int64_t r = c.rank(0);
  int64_t ax = c.axis(c.ai("axis", 1), std::max<int64_t>(r, 1));
  const Shape &s = c.shape(0);
  if (ax == r - 1)
    return c.out(0, c.call(fn, {c.node(0)}, {{"axis", ax}}));
  int64_t a = 1, bsz = 1;
  for (int64_t i = 0; i < r; ++i)
    (i < ax ? a : bsz) *= s[i];
  Node *f = c.call("tensor.reshape", {c.node(0), tupleOf({a, bsz})});
  f = c.call(fn, {f}, {{"axis", int64_t(1)}});
  c.out(0, c.call("tensor.reshape", {f, tupleOf(s)}));
}

/// Training mode (opset 14 on: training_mode=1; before: the running
/// statistics outputs asked for): Y normalised with the batch's mean and
/// biased variance over every axis but 1, and running_mean = mean * momentum
/// + batch mean * (1 - momentum), running_var likewise.
void importBatchNormTraining(NodeCx &c) {
  if (c.wants(3) || c.wants(4))
    c.fail("the saved_mean and saved_var outputs (opsets before 14) are not supported");
  int64_t r = c.rank(0);
  if (r < 2)
    c.fail("the input needs rank >= 2");
  std::vector<int64_t> axes = {0};
  for (int64_t i = 2; i < r; ++i)
    axes.push_back(i);
  Node *x = c.node(0);
  Node *mean = c.call("math.mean", {x}, {{"axis", tupleOf(axes)}, {"keepdims", true}});
  Node *dlt = c.call("elemwise.sub", {x, mean});
  Node *var = c.call("math.mean", {c.call("elemwise.mul", {dlt, dlt})},
                     {{"axis", tupleOf(axes)}, {"keepdims", true}});
  Shape cs(size_t(r), 1);
  cs[1] = -1;
  auto perChannel = [&](size_t i) { return c.call("tensor.reshape", {c.node(i), tupleOf(cs)}); };
  Node *inv = c.call("elemwise.rsqrt", {c.call("elemwise.add", {var, c.af("epsilon", 1e-5)})});
  Node *y = c.call("elemwise.mul", {c.call("elemwise.mul", {dlt, inv}), perChannel(1)});
  c.out(0, c.call("elemwise.add", {y, perChannel(2)}));
  double m = c.af("momentum", 0.9);
  auto running = [&](size_t i, Node *batch) {
    Node *flat = c.call("tensor.reshape", {batch, tupleOf({-1})});
    return c.call("elemwise.add", {c.call("elemwise.mul", {c.node(i), m}),
                                   c.call("elemwise.mul", {flat, 1.0 - m})});
  };
  if (c.wants(1))
    c.out(1, running(3, mean));
  if (c.wants(2))
    c.out(2, running(4, var));
}

void importBatchNorm(NodeCx &c) {
  bool training = c.opset >= 14 ? c.ai("training_mode", 0) != 0
                                : c.wants(1) || c.wants(2) || c.wants(3) || c.wants(4);
  if (c.opset < 7 && c.ai("is_test", 0))
    training = false;
  if (training)
    return importBatchNormTraining(c);
  if (c.n.output_size() > 1)
    c.fail("outputs beyond Y are defined only in training mode (training_mode=1)");
  c.out(0, c.call("nn.batch_norm", {c.node(0)},
                  {{"running_mean", c.node(3)}, {"running_var", c.node(4)},
                   {"weight", c.node(1)}, {"bias", c.node(2)},
                   {"eps", c.af("epsilon", 1e-5)}}));
}

enum class MeanVarNorm { Instance, MeanVariance, Layer };

/// InstanceNormalization, MeanVarianceNormalization, LayerNormalization.
void importMeanVarNorm(NodeCx &c, MeanVarNorm op) {
  int64_t r = c.rank(0);
  std::vector<int64_t> axes;
  double eps = c.af("epsilon", 1e-5);
  if (op == MeanVarNorm::Instance) {
    for (int64_t i = 2; i < r; ++i)
      axes.push_back(i);
  } else if (op == MeanVarNorm::MeanVariance) {
    for (int64_t a : c.ais("axes").value_or(std::vector<int64_t>{0, 2, 3}))
      axes.push_back(c.axis(a, r));
    eps = 1e-9;
  } else {
    for (int64_t i = c.axis(c.ai("axis", -1), r); i < r; ++i)
      axes.push_back(i);
  }
  Node *x = c.node(0);
  if (op == MeanVarNorm::Layer && !c.wants(1) && !c.wants(2)) {
    const Shape &xs = c.dims(0);
    Shape ns(xs.begin() + axes[0], xs.end());
    bool fits = isStaticShape(ns) && c.dims(1) == ns && (!c.has(2) || c.dims(2) == ns);
    if (fits)
      return c.out(0, c.call("nn.layer_norm", {x, tupleOf(ns)},
                             {{"affine", true}, {"weight", c.node(1)},
                              {"bias", c.has(2) ? Arg(c.node(2)) : Arg::none()},
                              {"eps", eps}}));
  }
  Node *m = c.call("math.mean", {x}, {{"axis", tupleOf(axes)}, {"keepdims", true}});
  Node *dlt = c.call("elemwise.sub", {x, m});
  Node *v = c.call("math.mean", {c.call("elemwise.mul", {dlt, dlt})},
                   {{"axis", tupleOf(axes)}, {"keepdims", true}});
  Node *inv = c.call("elemwise.rsqrt", {c.call("elemwise.add", {v, eps})});
  Node *y = c.call("elemwise.mul", {dlt, inv});
  if (op == MeanVarNorm::Instance) {
    Shape cs{c.length(1)};
    for (int64_t i = 2; i < r; ++i)
      cs.push_back(1);
    y = c.call("elemwise.mul", {y, c.call("tensor.reshape", {c.node(1), tupleOf(cs)})});
    y = c.call("elemwise.add", {y, c.call("tensor.reshape", {c.node(2), tupleOf(cs)})});
  } else if (op == MeanVarNorm::Layer) {
    y = c.call("elemwise.mul", {y, c.node(1)});
    if (c.has(2))
      y = c.call("elemwise.add", {y, c.node(2)});
    c.out(1, m);
    c.out(2, inv);
  }
  c.out(0, y);
}

} // namespace

void registerNormOnnxImport(OnnxImportTable &t) {
  t.add("LRN", 1, kMaxOpset, [](NodeCx &c) {
    if (!c.hasAttr("size") || c.ai("size", 0) < 1)
      c.fail("the size attribute is missing or not positive");
    c.out(0, c.call("nn.local_response_norm", {c.node(0)},
                    {{"kernel_size", c.ai("size", 1)}, {"k", c.af("bias", 1.0)},
                     {"alpha", c.af("alpha", 1e-4)}, {"beta", c.af("beta", 0.75)}}));
  });
  static const std::pair<const char *, const char *> softmaxes[] = {
      {"Softmax", "nn.softmax"}, {"LogSoftmax", "nn.logsoftmax"}};
  for (auto [op, fn] : softmaxes) {
    t.add(op, 1, 12, [fn = fn](NodeCx &c) { importSoftmaxFlat(c, fn); });
    t.add(op, 13, kMaxOpset, [fn = fn](NodeCx &c) { importSoftmax(c, fn); });
  }
  t.add("BatchNormalization", 1, kMaxOpset, importBatchNorm);
  static const std::pair<const char *, MeanVarNorm> meanVar[] = {
      {"InstanceNormalization", MeanVarNorm::Instance},
      {"MeanVarianceNormalization", MeanVarNorm::MeanVariance},
      {"LayerNormalization", MeanVarNorm::Layer}};
  for (auto [op, kind] : meanVar)
    t.add(op, 1, kMaxOpset, [kind = kind](NodeCx &c) { importMeanVarNorm(c, kind); });
}

// -- Export -------------------------------------------------------------------

namespace {

void exportSoftmax(ExportCall &c) {
  std::string x = c.operand("inp");
  int64_t r = int64_t(c.shapeOf(c.e.input(0)).size());
  int64_t axis = c.isNone("axis") ? ((r == 0 || r == 1 || r == 3) ? 0 : 1) : c.ints("axis")[0];
  c.simple(c.k == OpKind::Softmax ? "Softmax" : "LogSoftmax", {x});
  Exporter::attrI(c.n, "axis", axis);
}

void exportBatchNorm(ExportCall &c) {
  std::string x = c.operand("inp");
  const Shape &xs = c.shapeOf(c.e.input(0));
  int64_t C = xs.size() > 1 ? xs[1] : 1;
  if (!isKnownDim(C))
    C = c.staticShapeOf(c.e.input(0))[1];
  auto param = [&](const char *name, double dflt) {
    if (c.isNone(name))
      return c.init(Tensor::full({C}, dflt), c.out + "_" + name);
    std::string v = c.operand(name, DType::Float32);
    return c.emit("Reshape", {v, c.intsInit({C}, c.out + "_" + name + "_shape")},
                  c.out + "_" + name + "_flat");
  };
  std::string w = param("weight", 1.0), b = param("bias", 0.0),
              mn = param("running_mean", 0.0), vr = param("running_var", 1.0);
  c.simple("BatchNormalization", {x, w, b, mn, vr});
  Exporter::attrF(c.n, "epsilon", c.number("eps"));
}

void exportLayerNorm(ExportCall &c) {
  std::vector<int64_t> ns = c.ints("normalized_shape");
  std::string x = c.operand("inp");
  std::string w = (!c.isNone("weight") && c.boolean("affine"))
                      ? c.operand("weight")
                      : c.init(Tensor::full(ns, 1.0), c.out + "_scale");
  std::vector<std::string> ins = {x, w};
  if (!c.isNone("bias") && c.boolean("affine"))
    ins.push_back(c.operand("bias"));
  c.simple("LayerNormalization", ins);
  Exporter::attrI(c.n, "axis", -int64_t(ns.size()));
  Exporter::attrF(c.n, "epsilon", c.number("eps"));
}

} // namespace

void registerNormOnnxExport(OnnxExportTable &t) {
  t.add("norm", {OpKind::Softmax, OpKind::LogSoftmax}, exportSoftmax);
  t.add("norm", {OpKind::BatchNorm}, exportBatchNorm);
  t.add("norm", {OpKind::LayerNorm}, exportLayerNorm);
  t.add("norm", {OpKind::LocalResponseNorm}, [](ExportCall &c) {
    c.simple("LRN", {c.operand("inp")});
    Exporter::attrI(c.n, "size", c.ints("kernel_size")[0]);
    Exporter::attrF(c.n, "bias", c.number("k"));
    Exporter::attrF(c.n, "alpha", c.number("alpha"));
    Exporter::attrF(c.n, "beta", c.number("beta"));
  });
}

} // namespace tmg::io::onnxdetail
