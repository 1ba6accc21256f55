//===- rnn.cpp - ONNX mapping of the recurrent ops --------------*- C++ -*-===//
//
// The ONNX importers and exporters of the rnn family: LSTM, GRU and RNN
// (every opset; layout from opset 14) become nn.lstm, nn.gru and nn.rnn
// with ONNX's inputs, attributes and outputs. ONNX's activation_alpha and
// activation_beta hold values only for the activations that read them, in
// order; the IR keeps one value per activation (the ONNX operator's
// default where none is given), and export writes them back the ONNX way.
// Opset 1's output_sequence only said whether Y is wanted; it is ignored.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

#include "tm/runtime/Extra.h"

namespace tmg::io::onnxdetail {
namespace {

struct RecurrentOp {
  const char *onnx, *fn;
  size_t inputs, outputs;
};

RecurrentOp recurrentOp(OpKind k) {
  if (k == OpKind::Lstm)
    return {"LSTM", "nn.lstm", 8, 3};
  if (k == OpKind::Gru)
    return {"GRU", "nn.gru", 6, 2};
  return {"RNN", "nn.rnn", 6, 2};
}

/// The names of the tmgraph arguments of ONNX inputs 3 on.
constexpr const char *kOptionalInputs[] = {"bias", "sequence_lens", "initial_h", "initial_c",
                                           "peephole"};

/// activations, activation_alpha and activation_beta as keyword arguments:
/// one alpha and beta per activation.
void importActivations(NodeCx &c, std::vector<KwArg> &kw) {
  const onnx::AttributeProto *names = c.attr("activations");
  if (!names || names->strings_size() == 0)
    return;
  std::vector<double> alpha = c.afs("activation_alpha").value_or(std::vector<double>{}),
                      beta = c.afs("activation_beta").value_or(std::vector<double>{});
  size_t ai = 0, bi = 0;
  std::vector<Arg> n, a, b;
  bool anyAlpha = false, anyBeta = false;
  for (const std::string &s : names->strings()) {
    rt::RnnActivation act;
    try {
      bool hasA = rt::rnnActivationHasAlpha(s), hasB = rt::rnnActivationHasBeta(s);
      std::optional<double> va, vb;
      if (hasA && ai < alpha.size())
        va = alpha[ai++];
      if (hasB && bi < beta.size())
        vb = beta[bi++];
      act = rt::rnnActivation(s, va, vb);
      anyAlpha |= hasA;
      anyBeta |= hasB;
    } catch (const Error &e) {
      c.fail(e.diagnostic().message);
    }
    n.push_back(Arg(act.name));
    a.push_back(Arg(act.alpha));
    b.push_back(Arg(act.beta));
  }
  if (ai < alpha.size() || bi < beta.size())
    c.fail(fmt::format("{} activation_alpha and {} activation_beta values, the activations "
                       "read {} and {}",
                       alpha.size(), beta.size(), ai, bi));
  kw.push_back({"activations", Arg::tuple(std::move(n))});
  if (anyAlpha)
    kw.push_back({"activation_alpha", Arg::tuple(std::move(a))});
  if (anyBeta)
    kw.push_back({"activation_beta", Arg::tuple(std::move(b))});
}

void importRecurrent(NodeCx &c, OpKind k) {
  RecurrentOp op = recurrentOp(k);
  if (c.numIn() > op.inputs)
    c.fail(fmt::format("{} takes at most {} inputs, got {}", op.onnx, op.inputs, c.numIn()));
  std::vector<KwArg> kw;
  for (size_t i = 3; i < op.inputs; ++i)
    if (c.has(i))
      kw.push_back({kOptionalInputs[i - 3], c.node(i)});
  if (c.hasAttr("hidden_size"))
    kw.push_back({"hidden_size", c.ai("hidden_size", 0)});
  std::string dir = c.as("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    c.fail(fmt::format("direction must be forward, reverse or bidirectional, got '{}'", dir));
  kw.push_back({"direction", dir});
  importActivations(c, kw);
  if (c.hasAttr("clip"))
    kw.push_back({"clip", c.af("clip", 0)});
  int64_t layout = c.ai("layout", 0);
  if (layout != 0 && layout != 1)
    c.fail(fmt::format("layout must be 0 or 1, got {}", layout));
  if (layout)
    kw.push_back({"layout", layout});
  if (k == OpKind::Lstm && c.ai("input_forget", 0))
    kw.push_back({"input_forget", true});
  if (k == OpKind::Gru && c.ai("linear_before_reset", 0))
    kw.push_back({"linear_before_reset", true});
  auto outs = c.cx.b.callFunctionN(functionOp(op.fn), {c.node(0), c.node(1), c.node(2)},
                                   std::move(kw), op.outputs);
  for (size_t i = 0; i < op.outputs; ++i)
    c.out(i, outs[i]);
}

} // namespace

void registerRnnOnnxImport(OnnxImportTable &t) {
  t.add("LSTM", 1, kMaxOpset, [](NodeCx &c) { importRecurrent(c, OpKind::Lstm); });
  t.add("GRU", 1, kMaxOpset, [](NodeCx &c) { importRecurrent(c, OpKind::Gru); });
  t.add("RNN", 1, kMaxOpset, [](NodeCx &c) { importRecurrent(c, OpKind::Rnn); });
}

// -- Export -------------------------------------------------------------------

namespace {

/// A constant tuple argument's entries.
std::vector<TreeDef> tupleItems(ExportCall &c, llvm::StringRef name) {
  std::vector<TreeDef> out;
  if (c.isNone(name))
    return out;
  TreeDef t = c.constant(name);
  for (size_t i = 0; i < t.numChildren(); ++i)
    out.push_back(t.child(i));
  return out;
}

void exportActivations(ExportCall &c, onnx::NodeProto *n) {
  std::vector<TreeDef> names = tupleItems(c, "activations"),
                       alpha = tupleItems(c, "activation_alpha"),
                       beta = tupleItems(c, "activation_beta");
  if (names.empty())
    return;
  if ((!alpha.empty() && alpha.size() != names.size()) ||
      (!beta.empty() && beta.size() != names.size()))
    c.fail("activation_alpha and activation_beta need one value per activation");
  auto *an = n->add_attribute();
  an->set_name("activations");
  an->set_type(onnx::AttributeProto::STRINGS);
  onnx::AttributeProto *aa = nullptr, *ab = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i].isConst() || !names[i].value().isString())
      c.fail("'activations' must be a tuple of names");
    const std::string &s = names[i].value().getString();
    an->add_strings(s);
    bool hasA = false, hasB = false;
    try {
      hasA = rt::rnnActivationHasAlpha(s);
      hasB = rt::rnnActivationHasBeta(s);
    } catch (const Error &e) {
      c.fail(e.diagnostic().message);
    }
    rt::RnnActivation d = rt::rnnActivation(s);
    auto value = [&](const std::vector<TreeDef> &v, double dflt) {
      if (v.empty())
        return dflt;
      if (!v[i].isConst() || !v[i].value().isNumber())
        c.fail("activation_alpha and activation_beta must be numbers");
      return v[i].value().toDouble();
    };
    auto add = [&](onnx::AttributeProto *&a, const char *attr, double v) {
      if (!a) {
        a = n->add_attribute();
        a->set_name(attr);
        a->set_type(onnx::AttributeProto::FLOATS);
      }
      a->add_floats(float(v));
    };
    if (hasA)
      add(aa, "activation_alpha", value(alpha, d.alpha));
    if (hasB)
      add(ab, "activation_beta", value(beta, d.beta));
  }
}

void exportRecurrent(ExportCall &c) {
  RecurrentOp op = recurrentOp(c.k);
  std::vector<std::string> ins = {c.operand("inp"), c.operand("weight"),
                                  c.operand("recurrent_weight")};
  size_t last = 3; // inputs up to here are given
  for (size_t i = 3; i < op.inputs; ++i) {
    const char *name = kOptionalInputs[i - 3];
    if (c.isNone(name)) {
      ins.push_back("");
      continue;
    }
    ins.push_back(c.operand(name, i == 4 ? std::optional(DType::Int32) : std::nullopt));
    last = i + 1;
  }
  ins.resize(last);
  std::vector<std::string> outs;
  for (size_t i = 0; i < c.e.numOutputs(); ++i) {
    outs.push_back(c.ex.fresh(c.e.output(i)->name()));
    c.bind(outs.back(), i);
  }
  onnx::NodeProto *n = c.ex.node(op.onnx, ins, outs);
  int64_t hidden = 0;
  if (!c.isNone("hidden_size")) {
    hidden = c.ints("hidden_size")[0];
  } else {
    const Shape &r = c.shapeOf(c.e.namedArg("recurrent_weight")->node());
    if (r.size() != 3 || !isKnownDim(r[2]))
      c.fail(fmt::format("the hidden size is needed: the recurrent weight has shape {}",
                         dim::dimsStr(r)));
    hidden = r[2];
  }
  Exporter::attrI(n, "hidden_size", hidden);
  Exporter::attrS(n, "direction", c.string("direction"));
  exportActivations(c, n);
  if (!c.isNone("clip"))
    Exporter::attrF(n, "clip", c.number("clip"));
  if (int64_t layout = c.ints("layout")[0])
    Exporter::attrI(n, "layout", layout);
  if (c.k == OpKind::Lstm && c.boolean("input_forget"))
    Exporter::attrI(n, "input_forget", 1);
  if (c.k == OpKind::Gru && c.boolean("linear_before_reset"))
    Exporter::attrI(n, "linear_before_reset", 1);
}

} // namespace

void registerRnnOnnxExport(OnnxExportTable &t) {
  t.add("rnn", {OpKind::Lstm, OpKind::Gru, OpKind::Rnn}, exportRecurrent);
}

} // namespace tmg::io::onnxdetail
