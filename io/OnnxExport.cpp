//===- OnnxExport.cpp - TracedModule -> ONNX model -------------------------===//
//
// Writes the single graph of a module (flattened first when it calls traced
// submodules) as an opset-17 ONNX graph: one or a few ONNX nodes per expr,
// in graph order. Parameters, buffers and tensor constants become
// initializers; scalar arguments become scalar initializers of the other
// operand's dtype (tmgraph's weak scalar typing); operands of mixed dtypes
// are cast to the dtype tmgraph computes in, since ONNX ops need equal
// types. Shape-changing ops whose static output shape is known
// (flatten, squeeze, expand_dims, reshape) become Reshape to that shape.
//
// This file is the driver: graph inputs and outputs, getattrs, constants,
// calls of builtin modules, and the model around the graph. Each op's
// mapping is in its family's file, io/onnx/<family>.cpp, found through the
// exporter table (onnxExportTable).
//
//===----------------------------------------------------------------------===//
#include "onnx/Export.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <map>
#include <set>
#include <unordered_map>

#include <onnx/checker.h>

#include "tm/io/Safetensors.h"
#include "tm/ir/ElemwiseModes.h"
#include "tm/ir/IR.h"
#include "tm/ir/ModuleTable.h"
#include "tm/runtime/Kernels.h"

namespace tmg::io {
namespace onnxdetail {

using onnx::AttributeProto;
using onnx::NodeProto;

/// Writes a node's dims: sizes as dim_value, symbolic dims as their name or
/// expression in dim_param, unknown dims as neither.
static void writeShape(onnx::TensorShapeProto &sh, llvm::ArrayRef<int64_t> dims) {
  for (int64_t d : dims) {
    auto *od = sh.add_dim();
    if (isKnownDim(d))
      od->set_dim_value(d);
    else if (isSymbolicDim(d))
      od->set_dim_param(dim::symbolName(d).value_or(dim::str(d)));
  }
}

std::string Exporter::weight(const Tensor &t, llvm::StringRef base) {
  TensorKey k = keyOf(t);
  if (auto it = written_.find(k); it != written_.end())
    return it->second;
  std::string name = base.str();
  if (auto a = attrOf_.find(k); a != attrOf_.end()) {
    auto p = paramNames_.find(a->second);
    name = p != paramNames_.end() ? p->second : a->second;
  }
  return written_[k] = init(t, name);
}

void Exporter::run(const InternalGraph &graph) {
  // Original ONNX names, when the module came from importOnnx.
  std::vector<std::string> inNames, outNames;
  auto strings = [](const TreeDef *t, std::vector<std::string> &out) {
    if (!t)
      return;
    for (size_t i = 0; i < t->numChildren(); ++i)
      if (t->child(i).isConst() && t->child(i).value().isString())
        out.push_back(t->child(i).value().getString());
  };
  strings(m_.value("onnx_inputs"), inNames);
  strings(m_.value("onnx_outputs"), outNames);
  if (const TreeDef *p = m_.value("onnx_params"); p && p->kind() == TreeDef::Kind::Dict)
    for (size_t i = 0; i < p->numChildren(); ++i)
      if (p->child(i).isConst() && p->child(i).value().isString())
        paramNames_[p->key(i).getString()] = p->child(i).value().getString();
  const_cast<TracedModule &>(m_).namedTensors(
      [&](const std::string &path, const Tensor &t) {
        if (t.defined())
          attrOf_.emplace(keyOf(t), path);
      });
  if (const TreeDef *p = m_.value("onnx_node_names"); p && p->kind() == TreeDef::Kind::Dict)
    for (size_t i = 0; i < p->numChildren(); ++i)
      if (p->child(i).isConst() && p->child(i).value().isString())
        nodeNames_[p->key(i).getString()] = p->child(i).value().getString();
  if (inNames.size() != graph.inputs().size() - 1)
    inNames.clear();
  if (outNames.size() != graph.outputs().size())
    outNames.clear();
  for (size_t i = 1; i < graph.inputs().size(); ++i) {
    Node *n = graph.input(i);
    auto *t = llvm::dyn_cast<TensorNode>(n);
    if (!t)
      raise("ONNX export: graph input '{}' is not a tensor", n->name());
    std::string name = fresh(inNames.empty() ? n->name() : inNames[i - 1]);
    names_[n] = name;
    auto *vi = g_.add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(toOnnxType(dt(n)));
    if (t->shape())
      writeShape(*tt->mutable_shape(), *t->shape());
  }
  for (const Expr *e : graph.body()) {
    pendingName_.clear();
    if (e->numOutputs() > 0)
      if (auto it = nodeNames_.find(e->output(0)->name().str()); it != nodeNames_.end())
        pendingName_ = it->second;
    exportExpr(*e);
  }
  pendingName_.clear();
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    Node *n = graph.output(i);
    auto it = names_.find(n);
    if (it == names_.end())
      raise("ONNX export: graph output '{}' is not a tensor value", n->name());
    std::string want = outNames.empty() ? n->name().str() : outNames[i];
    std::string v = it->second;
    // Graph outputs carry their own names; inputs, initializers or values
    // already used as another output get an Identity.
    if (v != want || used_.count(want + "#out")) {
      std::string o = used_.count(want) ? fresh(want) : (used_.insert(want), want);
      node("Identity", {v}, {o});
      v = o;
    }
    used_.insert(want + "#out");
    auto *vi = g_.add_output();
    vi->set_name(v);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(toOnnxType(dt(n)));
    if (auto *t = llvm::dyn_cast<TensorNode>(n); t && t->shape())
      writeShape(*tt->mutable_shape(), *t->shape());
  }
}

void Exporter::exportExpr(const Expr &e) {
  switch (e.kind()) {
  case Expr::Kind::Input:
    return;
  case Expr::Kind::GetAttr: {
    auto &ga = llvm::cast<GetAttr>(e);
    auto *base = llvm::dyn_cast<ModuleNode>(e.input(0));
    const Module *owner = base ? base->owner() : nullptr;
    if (!owner)
      fail(e, "getattr base has no module");
    if (llvm::isa<ModuleNode>(e.output(0))) {
      const Module *mod = owner->resolveModule(ga.attrName());
      if (!mod)
        fail(e, "no such submodule");
      modules_[e.output(0)] = mod;
      modulePaths_[mod] = ga.attrName();
      return;
    }
    const Tensor *t = owner->resolveTensor(ga.attrName());
    if (!t)
      fail(e, "no such tensor attribute");
    // weight() names it after its attribute's original ONNX name.
    bind(e, weight(*t, ga.attrName()));
    return;
  }
  case Expr::Kind::Constant: {
    auto &c = llvm::cast<Constant>(e);
    if (!c.isTensor()) {
      modules_[e.output(0)] = c.module();
      return;
    }
    // Weights are initializers, never Constant nodes.
    bind(e, weight(c.tensor(), e.output(0)->name()));
    return;
  }
  case Expr::Kind::Apply: {
    // An op def is exported by its family, as a call is.
    OpKind k = llvm::cast<Apply>(e).opdef().kind();
    if (!onnxExportTable().lookup(k))
      fail(e, "op def has no ONNX form");
    return exportCall(e, k);
  }
  case Expr::Kind::CallFunction:
    return exportCall(e, llvm::cast<CallFunction>(e).func().kind());
  case Expr::Kind::CallMethod: {
    auto &cm = llvm::cast<CallMethod>(e);
    if (!cm.isModuleCall())
      return exportCall(e, cm.methodSchema()->kind());
    auto it = modules_.find(e.input(0));
    if (it == modules_.end() || !it->second->isBuiltin())
      fail(e, "only calls of builtin modules can be exported (flatten the module first)");
    return exportModuleCall(e, *it->second);
  }
  }
}

namespace {

/// A call of a builtin module with one tensor argument `x`, written as the
/// ONNX node(s) computing `out`.
struct ModuleExport {
  Exporter &ex;
  const Expr &e;
  const Module &m;
  std::string x, out;

  /// The initializer of tensor attribute `attr` ("" when absent).
  std::string tensorInit(const char *attr) const {
    const Tensor *t = m.tensor(attr);
    return t ? ex.init(*t, ex.modulePath(m, out) + "." + attr) : std::string();
  }
  std::vector<int64_t> pair(const char *n) const {
    auto v = ex.intsOf(e, *m.value(n));
    return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  }
  /// The node of `op` on x and the module's `weight` (and `bias`).
  NodeProto *withWeights(const char *op) const {
    std::vector<std::string> ins = {x, tensorInit("weight")};
    if (std::string b = tensorInit("bias"); !b.empty())
      ins.push_back(b);
    NodeProto *n = nullptr;
    ex.bind(e, ex.emit(op, ins, out, &n));
    return n;
  }
  void simple(const char *op) const { ex.bind(e, ex.emit(op, {x}, out)); }
};
using ModuleExporter = void (*)(const ModuleExport &);

/// The attributes of a Conv or ConvTranspose node from the module's.
void convAttrs(const ModuleExport &k, NodeProto *n) {
  auto p = k.pair("padding");
  Exporter::attrIs(n, "strides", k.pair("stride"));
  Exporter::attrIs(n, "pads", {p[0], p[1], p[0], p[1]});
  Exporter::attrIs(n, "dilations", k.pair("dilation"));
  Exporter::attrI(n, "group", k.m.intValue("groups"));
}

void exportConv2d(const ModuleExport &k) { convAttrs(k, k.withWeights("Conv")); }

void exportLinear(const ModuleExport &k) {
  Exporter::attrI(k.withWeights("Gemm"), "transB", 1);
}

void exportBatchNorm(const ModuleExport &k) {
  const Module &m = k.m;
  const Tensor *w = m.tensor("weight"), *b = m.tensor("bias"), *mean = m.tensor("running_mean");
  if (!mean)
    k.ex.fail(k.e, "BatchNorm2d without running statistics");
  int64_t C = mean->numel();
  std::string base = k.ex.modulePath(m, k.out);
  std::string sw = k.ex.init(w ? w->reshaped({C}) : Tensor::full({C}, 1.0), base + ".weight");
  std::string sb = k.ex.init(b ? b->reshaped({C}) : Tensor::full({C}, 0.0), base + ".bias");
  std::string sm = k.ex.init(mean->reshaped({C}), base + ".running_mean");
  std::string sv = k.ex.init(m.tensor("running_var")->reshaped({C}), base + ".running_var");
  NodeProto *n = nullptr;
  k.ex.bind(k.e, k.ex.emit("BatchNormalization", {k.x, sw, sb, sm, sv}, k.out, &n));
  Exporter::attrF(n, "epsilon", m.floatValue("eps"));
}

void exportPool(const ModuleExport &k) {
  bool avg = llvm::isa<AvgPool2d>(&k.m);
  NodeProto *n = nullptr;
  k.ex.bind(k.e, k.ex.emit(avg ? "AveragePool" : "MaxPool", {k.x}, k.out, &n));
  auto p = k.pair("padding");
  Exporter::attrIs(n, "kernel_shape", k.pair("kernel_size"));
  Exporter::attrIs(n, "strides", k.pair("stride"));
  Exporter::attrIs(n, "pads", {p[0], p[1], p[0], p[1]});
  if (avg)
    Exporter::attrI(n, "count_include_pad", k.m.scalar("mode").getString() == "average");
}

void exportAdaptivePool(const ModuleExport &k) {
  if (k.pair("oshp") != std::vector<int64_t>{1, 1})
    k.ex.fail(k.e, "AdaptiveAvgPool2d has an ONNX form for output (1, 1) only");
  k.simple("GlobalAveragePool");
}

void exportFlatten(const ModuleExport &k) {
  const Shape &s = k.ex.shapeOf(k.e, k.e.output(0));
  k.ex.bind(k.e, k.ex.emit("Reshape", {k.x, k.ex.intsInit(s, k.out + "_shape")}, k.out));
}

void exportConvTranspose2d(const ModuleExport &k) {
  NodeProto *n = k.withWeights("ConvTranspose");
  convAttrs(k, n);
  Exporter::attrIs(n, "output_padding", k.pair("output_padding"));
}

/// A float32 scalar initializer named after the output.
std::string scalarInit(const ModuleExport &k, double v, const char *tag) {
  return k.ex.init(Tensor::full({}, v, DType::Float32), k.out + tag);
}

void exportReLU6(const ModuleExport &k) {
  k.ex.bind(k.e, k.ex.emit("Clip", {k.x, scalarInit(k, 0.0, "_lower"), scalarInit(k, 6.0, "_upper")},
                           k.out));
}

void exportSiLU(const ModuleExport &k) {
  std::string s = k.ex.emit("Sigmoid", {k.x}, k.out + "_sigmoid");
  k.ex.bind(k.e, k.ex.emit("Mul", {k.x, s}, k.out));
}

/// x * 0.5 * (1 + erf(x / sqrt(2))): Gelu is an ONNX op from opset 20 only.
void exportGELU(const ModuleExport &k) {
  std::string erf = k.ex.emit(
      "Erf", {k.ex.emit("Div", {k.x, scalarInit(k, M_SQRT2, "_sqrt2")}, k.out + "_scaled")},
      k.out + "_erf");
  std::string onePlus = k.ex.emit("Add", {erf, scalarInit(k, 1.0, "_one")}, k.out + "_onep");
  std::string factor = k.ex.emit("Mul", {onePlus, scalarInit(k, 0.5, "_half")}, k.out + "_factor");
  k.ex.bind(k.e, k.ex.emit("Mul", {k.x, factor}, k.out));
}

void exportSoftmaxModule(const ModuleExport &k) {
  const Scalar &ax = k.m.scalar("axis");
  int64_t r = int64_t(k.ex.shapeOf(k.e, k.e.arg(1).node()).size());
  // MegEngine's default axis when none is given.
  int64_t axis = ax.isInt() ? ax.getInt() : (r == 0 || r == 1 || r == 3) ? 0 : 1;
  NodeProto *n = nullptr;
  k.ex.bind(k.e, k.ex.emit("Softmax", {k.x}, k.out, &n));
  Exporter::attrI(n, "axis", axis);
}

void exportLayerNormModule(const ModuleExport &k) {
  std::vector<int64_t> ns = k.ex.intsOf(k.e, *k.m.value("normalized_shape"));
  std::string scale = k.tensorInit("weight");
  std::vector<std::string> ins = {
      k.x, scale.empty() ? k.ex.init(Tensor::full(ns, 1.0), k.out + "_scale") : scale};
  if (std::string b = k.tensorInit("bias"); !b.empty())
    ins.push_back(b);
  NodeProto *n = nullptr;
  k.ex.bind(k.e, k.ex.emit("LayerNormalization", ins, k.out, &n));
  Exporter::attrI(n, "axis", -int64_t(ns.size()));
  Exporter::attrF(n, "epsilon", k.m.floatValue("eps"));
}

void exportEmbedding(const ModuleExport &k) {
  std::string w = k.tensorInit("weight");
  if (w.empty())
    k.ex.fail(k.e, "Embedding has no weight");
  NodeProto *n = nullptr;
  k.ex.bind(k.e, k.ex.emit("Gather", {w, k.x}, k.out, &n));
  Exporter::attrI(n, "axis", 0);
}

template <const char *Op> void exportSimple(const ModuleExport &k) { k.simple(Op); }
constexpr char Relu[] = "Relu", Sigmoid_[] = "Sigmoid", Identity_[] = "Identity",
               HardSwish[] = "HardSwish";

const ModuleTable<ModuleExporter> &moduleExporters() {
  static const ModuleTable<ModuleExporter> t = {
      {&Conv2d::staticType(), exportConv2d},
      {&Linear::staticType(), exportLinear},
      {&BatchNorm2d::staticType(), exportBatchNorm},
      {&MaxPool2d::staticType(), exportPool},
      {&AvgPool2d::staticType(), exportPool},
      {&AdaptiveAvgPool2d::staticType(), exportAdaptivePool},
      {&Flatten::staticType(), exportFlatten},
      {&ReLU::staticType(), exportSimple<Relu>},
      {&Sigmoid::staticType(), exportSimple<Sigmoid_>},
      {&Identity::staticType(), exportSimple<Identity_>},
      {&Dropout::staticType(), exportSimple<Identity_>},
      {&ConvTranspose2d::staticType(), exportConvTranspose2d},
      {&ReLU6::staticType(), exportReLU6},
      {&SiLU::staticType(), exportSiLU},
      {&GELU::staticType(), exportGELU},
      {&Hardswish::staticType(), exportSimple<HardSwish>},
      {&Softmax::staticType(), exportSoftmaxModule},
      {&LayerNorm::staticType(), exportLayerNormModule},
      {&Embedding::staticType(), exportEmbedding},
  };
  return t;
}

/// A call of an Elemwise module (MegEngine's `method`, see
/// ElemwiseModes.h): the operands, cast to the dtype the mode computes in,
/// and the ONNX nodes of the mode. The modes are those the interpreter
/// runs (runtime/ElemwiseModule.cpp).
struct ElemwiseExport {
  Exporter &ex;
  const Expr &e;
  std::string out;
  std::vector<std::string> x;

  std::string op(const char *type, std::vector<std::string> ins, const char *tag) const {
    return ex.emit(type, std::move(ins), out + tag);
  }
  std::string scalar(double v, DType t, const char *tag) const {
    return ex.init(Tensor::full({}, v, t), out + tag);
  }
  void result(const std::string &v) const { ex.bind(e, v); }
  void result(const char *type, std::vector<std::string> ins) const {
    ex.bind(e, ex.emit(type, std::move(ins), out));
  }
};
using ElemwiseExporter = void (*)(const ElemwiseExport &, DType);

const llvm::StringMap<ElemwiseExporter> &elemwiseExporters() {
  // One ONNX op on the operands, as they are.
  using E = const ElemwiseExport &;
#define TM_ONE(MODE, OP) {MODE, [](E k, DType) { k.result(OP, k.x); }}
  static const llvm::StringMap<ElemwiseExporter> t = {
      TM_ONE("RELU", "Relu"), TM_ONE("ABS", "Abs"), TM_ONE("EXP", "Exp"), TM_ONE("LOG", "Log"),
      TM_ONE("NEGATE", "Neg"), TM_ONE("SIGMOID", "Sigmoid"), TM_ONE("TANH", "Tanh"),
      TM_ONE("FAST_TANH", "Tanh"), TM_ONE("ERF", "Erf"), TM_ONE("H_SWISH", "HardSwish"),
      TM_ONE("SQRT", "Sqrt"), TM_ONE("ACOS", "Acos"), TM_ONE("ASIN", "Asin"),
      TM_ONE("CEIL", "Ceil"), TM_ONE("COS", "Cos"), TM_ONE("FLOOR", "Floor"),
      TM_ONE("SIN", "Sin"), TM_ONE("SINH", "Sinh"), TM_ONE("COSH", "Cosh"),
      TM_ONE("ASINH", "Asinh"), TM_ONE("ACOSH", "Acosh"), TM_ONE("ATANH", "Atanh"),
      TM_ONE("TAN", "Tan"), TM_ONE("SOFTPLUS", "Softplus"), TM_ONE("SIGN", "Sign"),
      TM_ONE("NOT", "Not"), TM_ONE("ISNAN", "IsNaN"), TM_ONE("ISINF", "IsInf"),
      TM_ONE("ADD", "Add"), TM_ONE("SUB", "Sub"), TM_ONE("MUL", "Mul"),
      TM_ONE("TRUE_DIV", "Div"), TM_ONE("POW", "Pow"), TM_ONE("MAX", "Max"),
      TM_ONE("MIN", "Min"), TM_ONE("LT", "Less"), TM_ONE("LEQ", "LessOrEqual"),
      TM_ONE("EQ", "Equal"), TM_ONE("AND", "And"), TM_ONE("OR", "Or"), TM_ONE("XOR", "Xor"),
      TM_ONE("PRELU", "PRelu"),
#undef TM_ONE
      {"SILU", [](E k, DType) { k.result("Mul", {k.x[0], k.op("Sigmoid", k.x, "_sigmoid")}); }},
      {"GELU",
       [](E k, DType t) {
         std::string erf = k.op(
             "Erf", {k.op("Div", {k.x[0], k.scalar(M_SQRT2, t, "_sqrt2")}, "_scaled")}, "_erf");
         std::string factor = k.op(
             "Mul", {k.op("Add", {erf, k.scalar(1, t, "_one")}, "_onep"), k.scalar(0.5, t, "_half")},
             "_factor");
         k.result("Mul", {k.x[0], factor});
       }},
      {"RELU6",
       [](E k, DType t) { k.result("Clip", {k.x[0], k.scalar(0, t, "_lo"), k.scalar(6, t, "_hi")}); }},
      {"HSIGMOID",
       [](E k, DType) {
         NodeProto *n = nullptr;
         k.ex.bind(k.e, k.ex.emit("HardSigmoid", k.x, k.out, &n));
         Exporter::attrF(n, "alpha", 1.0 / 6);
         Exporter::attrF(n, "beta", 0.5);
       }},
      {"SQUARE", [](E k, DType) { k.result("Mul", {k.x[0], k.x[0]}); }},
      {"LOGSIGMOID",
       [](E k, DType) {
         k.result("Neg", {k.op("Softplus", {k.op("Neg", k.x, "_neg")}, "_softplus")});
       }},
      {"NEQ", [](E k, DType) { k.result("Not", {k.op("Equal", k.x, "_eq")}); }},
      {"MOD",
       [](E k, DType t) {
         if (isFloat(t))
           k.ex.fail(k.e, "Elemwise MOD of floats (Python-style modulo) has no ONNX form");
         k.result("Mod", k.x);
       }},
      {"FUSE_ADD_RELU", [](E k, DType) { k.result("Relu", {k.op("Add", k.x, "_sum")}); }},
      {"FUSE_ADD_SIGMOID", [](E k, DType) { k.result("Sigmoid", {k.op("Add", k.x, "_sum")}); }},
      {"FUSE_ADD_TANH", [](E k, DType) { k.result("Tanh", {k.op("Add", k.x, "_sum")}); }},
      {"FUSE_ADD_H_SWISH",
       [](E k, DType) { k.result("HardSwish", {k.op("Add", k.x, "_sum")}); }},
      {"SWITCH_GT0", // a > 0 ? b : 0
       [](E k, DType t) {
         std::string zero = k.scalar(0, t, "_zero");
         k.result("Where", {k.op("Greater", {k.x[0], zero}, "_gt0"), k.x[1], zero});
       }},
      {"LOG_SUM_EXP", // max + log(exp(a - max) + exp(b - max))
       [](E k, DType) {
         std::string m = k.op("Max", k.x, "_max");
         std::string ea = k.op("Exp", {k.op("Sub", {k.x[0], m}, "_da")}, "_ea");
         std::string eb = k.op("Exp", {k.op("Sub", {k.x[1], m}, "_db")}, "_eb");
         k.result("Add", {m, k.op("Log", {k.op("Add", {ea, eb}, "_sum")}, "_log")});
       }},
      {"FUSE_MUL_ADD3",
       [](E k, DType) { k.result("Add", {k.op("Mul", {k.x[0], k.x[1]}, "_prod"), k.x[2]}); }},
      {"FUSE_MUL_ADD4",
       [](E k, DType) {
         k.result("Add", {k.op("Mul", {k.x[0], k.x[1]}, "_p0"), k.op("Mul", {k.x[2], k.x[3]}, "_p1")});
       }},
      {"COND_LEQ_MOV", // x0 <= x1 ? x2 : 0
       [](E k, DType t) {
         k.result("Where", {k.op("LessOrEqual", {k.x[0], k.x[1]}, "_cond"), k.x[2],
                            k.scalar(0, t, "_zero")});
       }},
      {"COND_LT_MOV",
       [](E k, DType t) {
         k.result("Where",
                  {k.op("Less", {k.x[0], k.x[1]}, "_cond"), k.x[2], k.scalar(0, t, "_zero")});
       }},
      {"CLIP", // min(max(x, lower), upper)
       [](E k, DType) { k.result("Min", {k.op("Max", {k.x[0], k.x[1]}, "_lower"), k.x[2]}); }},
  };
  return t;
}

} // namespace

void Exporter::exportElemwiseCall(const Expr &e, const Module &m) {
  const Scalar &method = m.scalar("method");
  const ElemwiseMode *mode = method.isString() ? lookupElemwiseMode(method.getString()) : nullptr;
  if (!mode)
    fail(e, "Elemwise module without a known method");
  const ElemwiseExporter *fn = nullptr;
  if (auto it = elemwiseExporters().find(mode->name); it != elemwiseExporters().end())
    fn = &it->second;
  if (!fn)
    fail(e, fmt::format("Elemwise method {} has no ONNX form", mode->name));
  if (e.numArgs() != size_t(mode->arity) + 1 || e.numOutputs() != 1)
    fail(e, fmt::format("Elemwise {} takes {} operands", mode->name, mode->arity));
  // Operands in one dtype: bool for logic, their common type for
  // comparisons, the result's for arithmetic.
  llvm::StringRef name = mode->name;
  bool logic = name == "AND" || name == "OR" || name == "XOR" || name == "NOT";
  DType t = outDType(e);
  if (logic) {
    t = DType::Bool;
  } else if (mode->predicate) {
    std::optional<DType> common;
    for (size_t i = 1; i < e.numArgs(); ++i)
      if (Node *n = e.arg(i).node())
        common = common ? rt::promoteTypes(*common, dt(n)) : dt(n);
    t = common.value_or(DType::Float32);
  }
  ElemwiseExport k{*this, e, e.output(0)->name().str(), {}};
  for (size_t i = 1; i < e.numArgs(); ++i)
    k.x.push_back(operand(e, e.arg(i), t));
  (*fn)(k, t);
}

void Exporter::exportModuleCall(const Expr &e, const Module &m) {
  if (llvm::isa<Elemwise>(&m))
    return exportElemwiseCall(e, m);
  if (e.numArgs() != 2 || e.numOutputs() != 1 || !e.arg(1).node())
    fail(e, "a builtin module call with one tensor argument is expected");
  const ModuleExporter *fn = moduleExporters().find(m);
  if (!fn)
    fail(e, fmt::format("module '{}' has no ONNX form", m.typeName().str()));
  (*fn)(ModuleExport{*this, e, m, nameOf(e, e.arg(1).node()), e.output(0)->name().str()});
}

std::string Exporter::operand(const Expr &e, const ArgRef &a, std::optional<DType> to) {
  if (Node *n = a.node()) {
    std::string v = nameOf(e, n);
    if (to && dt(n) != *to)
      return cast(v, *to);
    return v;
  }
  if (a.def.isConst() && a.def.value().isNumber()) {
    const Scalar &s = a.def.value();
    DType t = to ? *to : s.isFloat() ? DType::Float32 : s.isBool() ? DType::Bool : DType::Int64;
    return init(Tensor::full({}, s.toDouble(), t), "const");
  }
  fail(e, "expected a tensor or a number, got " + a.str());
}

void Exporter::exportCall(const Expr &e, OpKind k, const std::string *outBase) {
  const ExportFn *fn = onnxExportTable().lookup(k);
  if (!fn)
    fail(e, "this op has no ONNX form");
  ExportCall c{*this, e, k, llvm::isa<CallMethod>(e),
               outBase ? *outBase : e.output(0)->name().str(), outDType(e)};
  (*fn)(c);
}

// -- ExportCall -----------------------------------------------------------------

std::vector<std::string> ExportCall::binArgs(DType to, bool swap) {
  std::string x = method ? ex.operand(e, "self", to) : ex.operand(e, "x", to);
  std::string y = method ? ex.operand(e, "value", to) : ex.operand(e, "y", to);
  if (swap)
    std::swap(x, y);
  return {x, y};
}

DType ExportCall::operandDType() const {
  Node *a = method ? e.namedArg("self")->node() : e.namedArg("x")->node();
  Node *b = method ? e.namedArg("value")->node() : e.namedArg("y") ? e.namedArg("y")->node()
                                                                  : nullptr;
  if (a && b)
    return rt::promoteTypes(Exporter::dt(a), Exporter::dt(b));
  if (a)
    return Exporter::dt(a);
  return b ? Exporter::dt(b) : DType::Float32;
}

void ExportCall::cmp(const char *op, bool negate) {
  auto args = binArgs(operandDType(), false);
  if (!negate)
    return (void)simple(op, args);
  std::string t = ex.emit(op, args, out + "_pre");
  simple("Not", {t});
}

void ExportCall::reshapeToOutput() {
  const Shape &s = shapeOf(e.output(0));
  if (isStaticShape(s)) {
    simple("Reshape", {first(), intsInit(s, out + "_shape")});
    if (std::find(s.begin(), s.end(), 0) != s.end())
      Exporter::attrI(n, "allowzero", 1); // a 0 is a size, not "copy the input's"
    return;
  }
  // Symbolic dims: a 0 copies the input's dim where it is the same symbol
  // at the same position, and one other symbolic dim is ONNX's -1.
  const Shape &in = shapeOf(e.input(0));
  std::vector<int64_t> target;
  int infer = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (isKnownDim(s[i]) && s[i] != 0)
      target.push_back(s[i]);
    else if (!isKnownDim(s[i]) && i < in.size() && in[i] == s[i] && isSymbolicDim(s[i]))
      target.push_back(0);
    else if (!isKnownDim(s[i]) && infer++ == 0)
      target.push_back(-1);
    else
      staticShapeOf(e.output(0)); // fails, naming the shape
  }
  simple("Reshape", {first(), intsInit(target, out + "_shape")});
}

// -- The export table -----------------------------------------------------------

const OnnxExportTable &onnxExportTable() {
  static const OnnxExportTable table = [] {
    OnnxExportTable t("onnx-export");
    registerElementwiseOnnxExport(t);
    registerActivationOnnxExport(t);
    registerLinalgOnnxExport(t);
    registerConvOnnxExport(t);
    registerPoolOnnxExport(t);
    registerNormOnnxExport(t);
    registerReduceOnnxExport(t);
    registerShapeOnnxExport(t);
    registerIndexOnnxExport(t);
    registerCreationOnnxExport(t);
    registerResizeOnnxExport(t);
    registerQuantOnnxExport(t);
    registerRnnOnnxExport(t);
    return t;
  }();
  return table;
}

} // namespace onnxdetail

using namespace onnxdetail;

std::vector<OpKind> opsWithoutOnnxExport() { return onnxExportTable().missing(); }

std::vector<const ModuleType *> modulesWithOnnxExport() {
  std::vector<const ModuleType *> t = moduleExporters().types();
  t.push_back(&Elemwise::staticType()); // its operands vary: exportElemwiseCall
  return t;
}


namespace {

/// What the importer kept of the model it read (producer, doc strings,
/// metadata, graph name) goes back into the model; "tmgraph" is the
/// producer of a model that came from elsewhere.
void writeModelInfo(const TracedModule &m, onnx::ModelProto &model) {
  auto str = [&](const char *key) -> std::string {
    const TreeDef *t = m.value(key);
    return t && t->isConst() && t->value().isString() ? t->value().getString() : "";
  };
  std::string producer = str("onnx_producer_name");
  model.set_producer_name(producer.empty() ? "tmgraph" : producer);
  if (std::string v = str("onnx_producer_version"); !v.empty())
    model.set_producer_version(v);
  if (std::string v = str("onnx_doc_string"); !v.empty())
    model.set_doc_string(v);
  if (std::string v = str("onnx_graph_name"); !v.empty())
    model.mutable_graph()->set_name(v);
  if (std::string v = str("onnx_graph_doc_string"); !v.empty())
    model.mutable_graph()->set_doc_string(v);
  if (const TreeDef *md = m.value("onnx_metadata"); md && md->kind() == TreeDef::Kind::Dict)
    for (size_t i = 0; i < md->numChildren(); ++i)
      if (md->child(i).isConst() && md->child(i).value().isString()) {
        auto *p = model.add_metadata_props();
        p->set_key(md->key(i).getString());
        p->set_value(md->child(i).value().getString());
      }
}

} // namespace

namespace {

/// The ONNX model of `m` (flattened first when hierarchical).
onnx::ModelProto buildModel(const TracedModule &m, const OnnxExportOptions &opts) {
  std::unique_ptr<TracedModule> flat;
  const TracedModule *src = &m;
  bool nested = false;
  for (const Expr *e : m.graph().body())
    if (auto *cm = llvm::dyn_cast<CallMethod>(e); cm && cm->calleeGraph())
      nested = true;
  if (nested) {
    flat = m.flatten();
    src = flat.get();
  }
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto *op = model.add_opset_import();
  op->set_domain("");
  op->set_version(opts.opsetVersion);
  onnx::GraphProto *g = model.mutable_graph();
  writeModelInfo(*src, model);
  if (g->name().empty())
    g->set_name(src->typeName().str());
  Exporter ex(*src, *g);
  ex.run(src->graph());
  if (opts.check) {
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception &e) {
      raise("ONNX's checker rejects the exported model: {}", e.what());
    }
  }
  return model;
}

/// Serialized models must stay below protobuf's 2 GiB; the margin is for
/// the graph around the initializers.
constexpr int64_t ProtobufLimit = (int64_t(1) << 31) - (int64_t(64) << 20);

int64_t initializerBytes(const onnx::ModelProto &model) {
  int64_t n = 0;
  for (const auto &t : model.graph().initializer())
    n += int64_t(t.raw_data().size());
  return n;
}

/// Moves the bytes of the initializers of at least `minBytes` into the
/// file `dir/location`, each at a 64-byte aligned offset. The file is
/// written beside and renamed over the old one at the end (writeFileWith):
/// the tensors written may be views of the old file's mapping (a model
/// imported from this very file), which must not change under them.
void writeExternalData(onnx::ModelProto &model, const std::string &dir,
                       const std::string &location, int64_t minBytes) {
  auto written = writeFileWith(dir + "/" + location, [&](std::ostream &f) {
    int64_t offset = 0;
    for (auto &t : *model.mutable_graph()->mutable_initializer()) {
      const std::string &raw = t.raw_data();
      if (int64_t(raw.size()) < minBytes)
        continue;
      int64_t pad = (64 - offset % 64) % 64;
      static const char zeros[64] = {};
      f.write(zeros, pad);
      offset += pad;
      f.write(raw.data(), std::streamsize(raw.size()));
      auto add = [&](const char *k, const std::string &v) {
        auto *e = t.add_external_data();
        e->set_key(k);
        e->set_value(v);
      };
      add("location", location);
      add("offset", std::to_string(offset));
      add("length", std::to_string(raw.size()));
      offset += int64_t(raw.size());
      t.set_data_location(onnx::TensorProto::EXTERNAL);
      std::string().swap(*t.mutable_raw_data());
    }
  });
  if (written.failed())
    throw Error(written.diagnostic());
}

} // namespace

FailureOr<std::string> exportOnnxBytes(const TracedModule &m, const OnnxExportOptions &opts) {
  try {
    if (!opts.externalData.empty())
      raise("external data needs a model file to write beside (exportOnnx)");
    onnx::ModelProto model = buildModel(m, opts);
    if (initializerBytes(model) > ProtobufLimit)
      raise("the model's weights pass protobuf's 2 GiB limit: write it to a file with its "
            "weights as external data (exportOnnx, tm-opt -o FILE.onnx)");
    std::string bytes;
    if (!model.SerializeToString(&bytes))
      raise("the model does not serialize (over 2 GiB?)");
    return bytes;
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

FailureOr<void> exportOnnx(const TracedModule &m, const std::string &path,
                           const OnnxExportOptions &opts) {
  try {
    onnx::ModelProto model = buildModel(m, opts);
    std::string location = opts.externalData;
    if (location.empty() && initializerBytes(model) > ProtobufLimit) {
      size_t slash = path.rfind('/');
      location = (slash == std::string::npos ? path : path.substr(slash + 1)) + ".data";
    }
    if (!location.empty()) {
      llvm::StringRef loc(location);
      if (loc.startswith("/") || loc.contains(".."))
        raise("external data file '{}' must be a relative name beside the model", location);
      size_t slash = path.rfind('/');
      writeExternalData(model, slash == std::string::npos ? "." : path.substr(0, slash),
                        location, opts.externalDataMinBytes);
    }
    // Through a temporary file too: the module may view the old file's
    // mapping (a model imported from this very file).
    auto written = writeFileWith(path, [&](std::ostream &f) {
      if (!model.SerializeToOstream(&f))
        raise("cannot write the file (disk full?)");
    });
    if (written.failed())
      throw Error(written.diagnostic());
    return {};
  } catch (const Error &e) {
    Diagnostic d = e.diagnostic();
    if (d.loc.file.empty() && d.loc.exprId < 0)
      d.loc.file = path;
    return d;
  }
}

} // namespace tmg::io
