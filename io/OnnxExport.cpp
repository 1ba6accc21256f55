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
//===----------------------------------------------------------------------===//
#include "OnnxCommon.h"

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>
#include <set>
#include <unordered_map>

#include <onnx/checker.h>

#include "tm/ir/IR.h"
#include "tm/runtime/Kernels.h"

namespace tmg::io {
namespace {

using namespace onnxdetail;
using onnx::AttributeProto;
using onnx::NodeProto;

class Exporter {
public:
  Exporter(const TracedModule &m, onnx::GraphProto &g) : m_(m), g_(g) {}

  void run(const InternalGraph &graph);

private:
  [[noreturn]] void fail(const Expr &e, const std::string &msg) const {
    raiseAt(Location::atExpr(e.id()), "ONNX export of '{}': {}", e.str(), msg);
  }

  std::string fresh(llvm::StringRef base) {
    std::string b = base.empty() ? "v" : base.str(), n = b;
    for (int i = 1; used_.count(n); ++i)
      n = b + "_" + std::to_string(i);
    used_.insert(n);
    return n;
  }
  std::string init(const Tensor &t, llvm::StringRef base) {
    std::string n = fresh(base);
    auto *p = g_.add_initializer();
    tensorToProto(t, *p);
    p->set_name(n);
    return n;
  }
  /// The initializer of a weight: one per tensor however many getattrs or
  /// constants read it. A tensor that is still a module attribute (no pass
  /// replaced it) keeps its attribute's original ONNX name; others are
  /// named `base`.
  std::string weight(const Tensor &t, llvm::StringRef base);
  std::string intsInit(llvm::ArrayRef<int64_t> v, llvm::StringRef base) {
    return init(Tensor::fromInts({int64_t(v.size())}, v, DType::Int64), base);
  }
  NodeProto *node(const std::string &op, std::vector<std::string> ins,
                  std::vector<std::string> outs) {
    NodeProto *n = g_.add_node();
    n->set_op_type(op);
    // The first node an expr emits takes the name of the ONNX node it was
    // imported from.
    n->set_name(fresh(pendingName_.empty() ? "n_" + (outs.empty() ? op : outs[0])
                                           : pendingName_));
    pendingName_.clear();
    for (auto &i : ins)
      n->add_input(i);
    for (auto &o : outs)
      n->add_output(o);
    return n;
  }
  /// Adds one node with a fresh output named after `base`; returns it.
  std::string emit(const std::string &op, std::vector<std::string> ins, llvm::StringRef base,
                   NodeProto **out = nullptr) {
    std::string o = fresh(base);
    NodeProto *n = node(op, std::move(ins), {o});
    if (out)
      *out = n;
    return o;
  }
  static void attrI(NodeProto *n, const char *name, int64_t v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INT);
    a->set_i(v);
  }
  static void attrF(NodeProto *n, const char *name, double v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::FLOAT);
    a->set_f(float(v));
  }
  static void attrS(NodeProto *n, const char *name, const std::string &v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::STRING);
    a->set_s(v);
  }
  static void attrIs(NodeProto *n, const char *name, llvm::ArrayRef<int64_t> v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }

  // -- Arguments ------------------------------------------------------------------
  static std::optional<DType> dtypeOf(const Node *n) {
    auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
    if (t && t->hasDType())
      return t->dtype();
    return std::nullopt;
  }
  static DType dt(const Node *n) { return dtypeOf(n).value_or(DType::Float32); }
  const Shape &shapeOf(const Expr &e, const Node *n) const {
    auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
    if (!t || !t->shape())
      fail(e, fmt::format("the static shape of '{}' is unknown", n ? n->name() : "?"));
    return *t->shape();
  }
  std::optional<ArgRef> ref(const Expr &e, llvm::StringRef name) const {
    return e.namedArg(name);
  }
  bool isNone(const Expr &e, llvm::StringRef name) const {
    auto a = ref(e, name);
    return !a || (a->def.isConst() && a->def.value().isNone());
  }
  TreeDef constant(const Expr &e, llvm::StringRef name) const {
    auto a = ref(e, name);
    if (!a || a->def.numLeaves())
      fail(e, fmt::format("argument '{}' must be a constant", name.str()));
    return a->def;
  }
  std::vector<int64_t> intsOf(const Expr &e, const TreeDef &t) const {
    if (t.isConst() && t.value().isInt())
      return {t.value().getInt()};
    std::vector<int64_t> out;
    for (size_t i = 0; i < t.numChildren(); ++i) {
      if (!t.child(i).isConst() || !t.child(i).value().isInt())
        fail(e, "expected integers, got " + t.str());
      out.push_back(t.child(i).value().getInt());
    }
    return out;
  }
  std::vector<int64_t> ints(const Expr &e, llvm::StringRef name) const {
    return intsOf(e, constant(e, name));
  }
  /// An int or a tuple expanded to n entries.
  std::vector<int64_t> intsN(const Expr &e, llvm::StringRef name, size_t n) const {
    auto v = ints(e, name);
    if (v.size() == 1)
      return std::vector<int64_t>(n, v[0]);
    if (v.size() != n)
      fail(e, fmt::format("'{}' needs {} entries", name.str(), n));
    return v;
  }
  double number(const Expr &e, llvm::StringRef name) const {
    TreeDef t = constant(e, name);
    if (!t.isConst() || !t.value().isNumber())
      fail(e, fmt::format("'{}' must be a number", name.str()));
    return t.value().toDouble();
  }
  bool boolean(const Expr &e, llvm::StringRef name) const {
    TreeDef t = constant(e, name);
    return t.isConst() && t.value().isBool() && t.value().getBool();
  }
  std::string string(const Expr &e, llvm::StringRef name) const {
    TreeDef t = constant(e, name);
    if (!t.isConst() || !t.value().isString())
      fail(e, fmt::format("'{}' must be a string", name.str()));
    return t.value().getString();
  }
  std::string nameOf(const Expr &e, const Node *n) const {
    auto it = names_.find(n);
    if (it == names_.end())
      fail(e, fmt::format("'{}' has no ONNX value (a module or an unsupported value)",
                          n->name()));
    return it->second;
  }
  /// A tensor operand: the node's value cast to `to` when given and
  /// different, or a scalar constant as a 0-d initializer of dtype `to` (or
  /// its own dtype).
  std::string operand(const Expr &e, const ArgRef &a, std::optional<DType> to) {
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
  std::string operand(const Expr &e, llvm::StringRef name, std::optional<DType> to = {}) {
    auto a = ref(e, name);
    if (!a)
      fail(e, fmt::format("missing argument '{}'", name.str()));
    return operand(e, *a, to);
  }
  std::string cast(const std::string &v, DType to) {
    NodeProto *n;
    std::string o = emit("Cast", {v}, v + "_cast", &n);
    attrI(n, "to", toOnnxType(to));
    return o;
  }
  /// The dtype an output was computed in (float32 when unknown).
  static DType outDType(const Expr &e, size_t i = 0) { return dt(e.output(i)); }

  void exportExpr(const Expr &e);
  /// `outBase` names the ONNX value of the expr's first output (default:
  /// the node's name); a fused op writes its first part under another.
  void exportCall(const Expr &e, OpKind k, const std::string *outBase = nullptr);
  void exportModuleCall(const Expr &e, const Module &m);
  void bind(const Expr &e, const std::string &v, size_t i = 0) { names_[e.output(i)] = v; }

  const TracedModule &m_;
  onnx::GraphProto &g_;
  std::unordered_map<const Node *, std::string> names_;
  std::unordered_map<const Node *, const Module *> modules_;
  /// Attribute paths of module nodes ("block1.conv"), naming their tensors.
  std::unordered_map<const Module *, std::string> modulePaths_;
  std::set<std::string> used_;
  std::unordered_map<std::string, std::string> paramNames_;
  /// Module tensors by identity (storage, shape, dtype) -> attribute path;
  /// initializers written so far by identity.
  using TensorKey = std::tuple<const void *, std::vector<int64_t>, DType>;
  static TensorKey keyOf(const Tensor &t) {
    return {t.rawData(), std::vector<int64_t>(t.shape().begin(), t.shape().end()), t.dtype()};
  }
  std::map<TensorKey, std::string> attrOf_, written_;
  /// Original ONNX node names by the name of their first output's node,
  /// and the name the next emitted node takes.
  std::unordered_map<std::string, std::string> nodeNames_;
  std::string pendingName_;
};

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
    if (t->shape()) {
      auto *sh = tt->mutable_shape();
      for (int64_t d : *t->shape())
        sh->add_dim()->set_dim_value(d);
    }
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
    if (auto *t = llvm::dyn_cast<TensorNode>(n); t && t->shape()) {
      auto *sh = tt->mutable_shape();
      for (int64_t d : *t->shape())
        sh->add_dim()->set_dim_value(d);
    }
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
    auto &ap = llvm::cast<Apply>(e);
    if (ap.opdef().kind() == OpKind::GetVarShape && e.numInputs() == 1) {
      std::string s = emit("Shape", {nameOf(e, e.input(0))}, e.output(0)->name());
      bind(e, cast(s, DType::Int32));
      return;
    }
    fail(e, "op def has no ONNX form");
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

void Exporter::exportModuleCall(const Expr &e, const Module &m) {
  if (e.numArgs() != 2 || e.numOutputs() != 1 || !e.arg(1).node())
    fail(e, "a builtin module call with one tensor argument is expected");
  std::string x = nameOf(e, e.arg(1).node()), out = e.output(0)->name().str();
  auto tensorInit = [&](const char *attr) -> std::string {
    const Tensor *t = m.tensor(attr);
    auto p = modulePaths_.find(&m);
    return t ? init(*t, (p != modulePaths_.end() ? p->second : out) + "." + attr) : std::string();
  };
  auto intsAttr = [&](const char *n) { return intsOf(e, *m.value(n)); };
  auto pair = [&](const char *n) {
    auto v = intsAttr(n);
    return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
  };
  NodeProto *n = nullptr;
  if (llvm::isa<Conv2d>(&m)) {
    std::vector<std::string> ins = {x, tensorInit("weight")};
    if (std::string b = tensorInit("bias"); !b.empty())
      ins.push_back(b);
    bind(e, emit("Conv", ins, out, &n));
    auto p = pair("padding");
    attrIs(n, "strides", pair("stride"));
    attrIs(n, "pads", {p[0], p[1], p[0], p[1]});
    attrIs(n, "dilations", pair("dilation"));
    attrI(n, "group", m.intValue("groups"));
    return;
  }
  if (llvm::isa<Linear>(&m)) {
    std::vector<std::string> ins = {x, tensorInit("weight")};
    if (std::string b = tensorInit("bias"); !b.empty())
      ins.push_back(b);
    bind(e, emit("Gemm", ins, out, &n));
    attrI(n, "transB", 1);
    return;
  }
  if (llvm::isa<BatchNorm2d>(&m)) {
    const Tensor *w = m.tensor("weight"), *b = m.tensor("bias"), *mean = m.tensor("running_mean");
    if (!mean)
      fail(e, "BatchNorm2d without running statistics");
    int64_t C = mean->numel();
    auto p = modulePaths_.find(&m);
    std::string base = p != modulePaths_.end() ? p->second : out;
    std::string sw = init(w ? w->reshaped({C}) : Tensor::full({C}, 1.0), base + ".weight");
    std::string sb = init(b ? b->reshaped({C}) : Tensor::full({C}, 0.0), base + ".bias");
    std::string sm = init(mean->reshaped({C}), base + ".running_mean");
    std::string sv = init(m.tensor("running_var")->reshaped({C}), base + ".running_var");
    bind(e, emit("BatchNormalization", {x, sw, sb, sm, sv}, out, &n));
    attrF(n, "epsilon", m.floatValue("eps"));
    return;
  }
  if (llvm::isa<ReLU>(&m))
    return bind(e, emit("Relu", {x}, out));
  if (llvm::isa<Sigmoid>(&m))
    return bind(e, emit("Sigmoid", {x}, out));
  if (llvm::isa<Identity>(&m) || llvm::isa<Dropout>(&m))
    return bind(e, emit("Identity", {x}, out));
  if (llvm::isa<MaxPool2d>(&m) || llvm::isa<AvgPool2d>(&m)) {
    bool avg = llvm::isa<AvgPool2d>(&m);
    bind(e, emit(avg ? "AveragePool" : "MaxPool", {x}, out, &n));
    auto p = pair("padding");
    attrIs(n, "kernel_shape", pair("kernel_size"));
    attrIs(n, "strides", pair("stride"));
    attrIs(n, "pads", {p[0], p[1], p[0], p[1]});
    if (avg)
      attrI(n, "count_include_pad", m.scalar("mode").getString() == "average");
    return;
  }
  if (llvm::isa<AdaptiveAvgPool2d>(&m) && pair("oshp") == std::vector<int64_t>{1, 1})
    return bind(e, emit("GlobalAveragePool", {x}, out));
  if (llvm::isa<Flatten>(&m)) {
    const Shape &s = shapeOf(e, e.output(0));
    return bind(e, emit("Reshape", {x, intsInit(s, out + "_shape")}, out));
  }
  fail(e, fmt::format("module '{}' has no ONNX form", m.typeName().str()));
}

void Exporter::exportCall(const Expr &e, OpKind k, const std::string *outBase) {
  bool method = llvm::isa<CallMethod>(e);
  std::string out = outBase ? *outBase : e.output(0)->name().str();
  DType od = outDType(e);
  NodeProto *n = nullptr;
  auto simple = [&](const char *op, std::vector<std::string> ins) {
    bind(e, emit(op, std::move(ins), out, &n));
    return n;
  };
  auto first = [&](std::optional<DType> to = {}) -> std::string {
    return method ? operand(e, "self", to) : operand(e, e.arg(0), to);
  };
  // Binary operands, cast to the dtype tmgraph computes in.
  auto binArgs = [&](DType to, bool swap) {
    std::string x = method ? operand(e, "self", to) : operand(e, "x", to);
    std::string y = method ? operand(e, "value", to) : operand(e, "y", to);
    if (swap)
      std::swap(x, y);
    return std::vector<std::string>{x, y};
  };
  auto operandDType = [&]() {
    Node *a = method ? e.namedArg("self")->node() : e.namedArg("x")->node();
    Node *b = method ? e.namedArg("value")->node() : e.namedArg("y") ? e.namedArg("y")->node()
                                                                    : nullptr;
    if (a && b)
      return rt::promoteTypes(dt(a), dt(b));
    if (a)
      return dt(a);
    return b ? dt(b) : DType::Float32;
  };
  auto arith = [&](const char *op, bool swap = false) { simple(op, binArgs(od, swap)); };
  auto cmp = [&](const char *op, bool negate = false) {
    auto args = binArgs(operandDType(), false);
    if (!negate)
      return (void)simple(op, args);
    std::string t = emit(op, args, out + "_pre");
    simple("Not", {t});
  };
  // gelu as opset-17 ops (ONNX's Gelu op came in opset 20):
  // 0.5 x (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3));
  // returns the factor 0.5 (1 + ...) that x is multiplied by.
  auto geluFactor = [&](const std::string &x, bool tanhForm) {
    auto c = [&](double v, const char *tag) {
      return init(Tensor::full({}, v, DType::Float32), out + tag);
    };
    std::string t;
    if (!tanhForm) {
      t = emit("Erf", {emit("Div", {x, c(M_SQRT2, "_sqrt2")}, out + "_scaled")}, out + "_erf");
    } else {
      std::string cube = emit("Mul", {x, emit("Mul", {x, x}, out + "_sq")}, out + "_cube");
      std::string in = emit("Add", {x, emit("Mul", {cube, c(0.044715, "_kappa")}, out + "_kc")},
                            out + "_inner");
      t = emit("Tanh", {emit("Mul", {in, c(std::sqrt(2.0 / M_PI), "_beta")}, out + "_arg")},
               out + "_tanh");
    }
    std::string onePlus = emit("Add", {t, c(1.0, "_one")}, out + "_onep");
    return emit("Mul", {onePlus, c(0.5, "_half")}, out + "_factor");
  };
  auto un = [&](const char *op) { simple(op, {first(isFloat(od) ? std::optional(od) : std::nullopt)}); };
  auto reshapeToOutput = [&]() {
    const Shape &s = shapeOf(e, e.output(0));
    simple("Reshape", {first(), intsInit(s, out + "_shape")});
    if (std::find(s.begin(), s.end(), 0) != s.end())
      attrI(n, "allowzero", 1); // a 0 is a size, not "copy the input's"
  };
  switch (k) {
  case OpKind::Add: case OpKind::MAdd: case OpKind::MRAdd: case OpKind::MIAdd:
    return arith("Add", k == OpKind::MRAdd);
  case OpKind::Sub: case OpKind::MSub: case OpKind::MISub: return arith("Sub");
  case OpKind::MRSub: return arith("Sub", true);
  case OpKind::Mul: case OpKind::MMul: case OpKind::MRMul: case OpKind::MIMul:
    return arith("Mul", k == OpKind::MRMul);
  case OpKind::Div: case OpKind::MTrueDiv: case OpKind::MITrueDiv: return arith("Div");
  case OpKind::MRTrueDiv: return arith("Div", true);
  case OpKind::Pow: case OpKind::MPow: return arith("Pow");
  case OpKind::MRPow: return arith("Pow", true);
  case OpKind::Maximum: return arith("Max");
  case OpKind::Minimum: return arith("Min");
  case OpKind::Mod:
    if (isFloat(od))
      fail(e, "Python-style modulo of floats has no ONNX form");
    simple("Mod", binArgs(od, false));
    return;
  case OpKind::Fmod:
    simple("Mod", binArgs(od, false));
    attrI(n, "fmod", 1);
    return;
  case OpKind::Equal: case OpKind::MEq: return cmp("Equal");
  case OpKind::NotEqual: case OpKind::MNe: return cmp("Equal", true);
  case OpKind::Less: case OpKind::MLt: return cmp("Less");
  case OpKind::LessEqual: case OpKind::MLe: return cmp("LessOrEqual");
  case OpKind::Greater: case OpKind::MGt: return cmp("Greater");
  case OpKind::GreaterEqual: case OpKind::MGe: return cmp("GreaterOrEqual");
  case OpKind::LogicalAnd: case OpKind::LogicalOr: case OpKind::LogicalXor: {
    const char *op = k == OpKind::LogicalAnd ? "And" : k == OpKind::LogicalOr ? "Or" : "Xor";
    simple(op, {operand(e, "x", DType::Bool), operand(e, "y", DType::Bool)});
    return;
  }
  case OpKind::LogicalNot: simple("Not", {operand(e, "x", DType::Bool)}); return;
  case OpKind::Neg: case OpKind::MNeg: simple("Neg", {first(od)}); return;
  case OpKind::Abs: case OpKind::MAbs: simple("Abs", {first(od)}); return;
  case OpKind::Exp: return un("Exp");
  case OpKind::Log: return un("Log");
  case OpKind::Sqrt: return un("Sqrt");
  case OpKind::Rsqrt: {
    std::string s = emit("Sqrt", {first(od)}, out + "_sqrt");
    simple("Reciprocal", {s});
    return;
  }
  case OpKind::Erf: return un("Erf");
  case OpKind::Tanh: return un("Tanh");
  case OpKind::Sin: return un("Sin");
  case OpKind::Cos: return un("Cos");
  case OpKind::Tan: return un("Tan");
  case OpKind::Asin: return un("Asin");
  case OpKind::Acos: return un("Acos");
  case OpKind::Atan: return un("Atan");
  case OpKind::Sinh: return un("Sinh");
  case OpKind::Cosh: return un("Cosh");
  case OpKind::Asinh: return un("Asinh");
  case OpKind::Acosh: return un("Acosh");
  case OpKind::Atanh: return un("Atanh");
  case OpKind::Floor: simple("Floor", {first(DType::Float32)}); break;
  case OpKind::Ceil: simple("Ceil", {first(DType::Float32)}); break;
  case OpKind::Round: simple("Round", {first(DType::Float32)}); break;
  case OpKind::Sign: simple("Sign", {first(od)}); return;
  case OpKind::Reciprocal: return un("Reciprocal");
  case OpKind::Sigmoid: return un("Sigmoid");
  case OpKind::Relu: simple("Relu", {first(od)}); return;
  case OpKind::Softplus: return un("Softplus");
  case OpKind::Softsign: return un("Softsign");
  case OpKind::Hswish: return un("HardSwish");
  case OpKind::IsNan: simple("IsNaN", {first(DType::Float32)}); return;
  case OpKind::IsInf:
    simple("IsInf", {first(DType::Float32)});
    attrI(n, "detect_positive", boolean(e, "detect_positive"));
    attrI(n, "detect_negative", boolean(e, "detect_negative"));
    return;
  case OpKind::Hsigmoid:
    simple("HardSigmoid", {first(od)});
    attrF(n, "alpha", 1.0 / 6.0);
    attrF(n, "beta", 0.5);
    return;
  case OpKind::HardSigmoid:
    simple("HardSigmoid", {first(od)});
    attrF(n, "alpha", number(e, "alpha"));
    attrF(n, "beta", number(e, "beta"));
    return;
  case OpKind::LeakyRelu:
    simple("LeakyRelu", {first(od)});
    attrF(n, "alpha", number(e, "negative_slope"));
    return;
  case OpKind::Elu: case OpKind::Celu: case OpKind::ThresholdedRelu:
    simple(k == OpKind::Elu ? "Elu" : k == OpKind::Celu ? "Celu" : "ThresholdedRelu", {first(od)});
    attrF(n, "alpha", number(e, "alpha"));
    return;
  case OpKind::Selu:
    simple("Selu", {first(od)});
    attrF(n, "alpha", number(e, "alpha"));
    attrF(n, "gamma", number(e, "scale"));
    return;
  case OpKind::Silu: {
    std::string x = first(od);
    std::string s = emit("Sigmoid", {x}, out + "_sigmoid");
    simple("Mul", {x, s});
    return;
  }
  case OpKind::Relu6: case OpKind::Clip: {
    std::string x = first(k == OpKind::Relu6 ? std::optional(od) : std::nullopt);
    auto bound = [&](const char *name, double dflt, bool has) -> std::string {
      if (!has)
        return "";
      double v = k == OpKind::Relu6 ? dflt : number(e, name);
      return init(Tensor::full({}, v, od), out + "_" + name);
    };
    bool r6 = k == OpKind::Relu6;
    simple("Clip", {x, bound("lower", 0.0, r6 || !isNone(e, "lower")),
                    bound("upper", 6.0, r6 || !isNone(e, "upper"))});
    return;
  }
  case OpKind::Prelu:
    simple("PRelu", {operand(e, "inp", od), operand(e, "weight", od)});
    return;
  case OpKind::Gelu: case OpKind::GeluTanh: {
    std::string x = first(DType::Float32);
    simple("Mul", {x, geluFactor(x, k == OpKind::GeluTanh)});
    return;
  }
  case OpKind::Softmax: case OpKind::LogSoftmax: {
    std::string x = operand(e, "inp");
    int64_t r = int64_t(shapeOf(e, e.input(0)).size());
    int64_t axis = isNone(e, "axis") ? ((r == 0 || r == 1 || r == 3) ? 0 : 1) : ints(e, "axis")[0];
    simple(k == OpKind::Softmax ? "Softmax" : "LogSoftmax", {x});
    attrI(n, "axis", axis);
    return;
  }
  case OpKind::Where:
    simple("Where", {operand(e, "mask", DType::Bool), operand(e, "x", od), operand(e, "y", od)});
    return;
  case OpKind::Conv1d: case OpKind::Conv2d: case OpKind::ConvNd:
  case OpKind::ConvTranspose2d: case OpKind::ConvTransposeNd: {
    bool tr = k == OpKind::ConvTranspose2d || k == OpKind::ConvTransposeNd;
    const Shape &ws = shapeOf(e, e.namedArg("weight")->node());
    size_t nd = ws.size() - 2;
    std::vector<std::string> ins = {operand(e, "inp"), operand(e, "weight")};
    if (!isNone(e, "bias")) {
      std::string b = operand(e, "bias");
      const Shape &bs = shapeOf(e, e.namedArg("bias")->node());
      if (bs.size() != 1)
        b = emit("Reshape", {b, intsInit({-1}, out + "_bshape")}, out + "_bias");
      ins.push_back(b);
    }
    simple(tr ? "ConvTranspose" : "Conv", ins);
    std::vector<int64_t> pads = ints(e, "padding");
    if (pads.size() == 1)
      pads.assign(2 * nd, pads[0]);
    else if (pads.size() == nd)
      pads.insert(pads.end(), pads.begin(), pads.end());
    attrIs(n, "kernel_shape", llvm::ArrayRef<int64_t>(ws).drop_front(2));
    attrIs(n, "strides", intsN(e, "stride", nd));
    attrIs(n, "pads", pads);
    attrIs(n, "dilations", intsN(e, "dilation", nd));
    attrI(n, "group", ints(e, "groups")[0]);
    if (tr)
      attrIs(n, "output_padding", intsN(e, "output_padding", nd));
    if (k == OpKind::Conv2d && string(e, "conv_mode") != "cross_correlation")
      fail(e, "only cross-correlation convolutions have an ONNX form");
    return;
  }
  case OpKind::Conv2dAct: case OpKind::LinearAct: {
    // Made by fuse-conv-activation: written as the conv / linear followed
    // by the activation's ONNX op.
    std::string act = string(e, "activation");
    static const char *Known[] = {"none",      "relu",        "relu6", "sigmoid",  "silu",
                                  "hardswish", "hardsigmoid", "gelu",  "gelu_tanh"};
    if (std::find(std::begin(Known), std::end(Known), act) == std::end(Known))
      fail(e, fmt::format("unknown activation '{}'", act));
    std::string pre = out + "_pre";
    exportCall(e, k == OpKind::Conv2dAct ? OpKind::Conv2d : OpKind::Linear, &pre);
    std::string x = names_.at(e.output(0));
    if (act == "none")
      return;
    if (act == "relu") {
      simple("Relu", {x});
    } else if (act == "sigmoid") {
      simple("Sigmoid", {x});
    } else if (act == "hardswish") {
      simple("HardSwish", {x});
    } else if (act == "silu") {
      simple("Mul", {x, emit("Sigmoid", {x}, out + "_sigmoid")});
    } else if (act == "hardsigmoid") {
      simple("HardSigmoid", {x});
      attrF(n, "alpha", 1.0 / 6.0);
      attrF(n, "beta", 0.5);
    } else if (act == "gelu" || act == "gelu_tanh") {
      simple("Mul", {x, geluFactor(x, act == "gelu_tanh")});
    } else { // relu6
      simple("Clip", {x, init(Tensor::full({}, 0.0, DType::Float32), out + "_lower"),
                      init(Tensor::full({}, 6.0, DType::Float32), out + "_upper")});
    }
    return;
  }
  case OpKind::Linear: {
    std::string x = operand(e, "inp"), w = operand(e, "weight");
    const Shape &xs = shapeOf(e, e.input(0));
    if (xs.size() == 2) {
      std::vector<std::string> ins = {x, w};
      if (!isNone(e, "bias"))
        ins.push_back(operand(e, "bias"));
      simple("Gemm", ins);
      attrI(n, "transB", 1);
      return;
    }
    NodeProto *t;
    std::string wt = emit("Transpose", {w}, out + "_wt", &t);
    attrIs(t, "perm", {1, 0});
    if (isNone(e, "bias"))
      return (void)simple("MatMul", {x, wt});
    std::string mm = emit("MatMul", {x, wt}, out + "_mm");
    simple("Add", {mm, operand(e, "bias")});
    return;
  }
  case OpKind::Matmul: case OpKind::MMatmul: {
    std::string a = method ? operand(e, "self") : operand(e, "inp1");
    std::string b = method ? operand(e, "value") : operand(e, "inp2");
    auto tr = [&](std::string v, const Node *nd, const char *flag) {
      if (method || !boolean(e, flag))
        return v;
      size_t r = shapeOf(e, nd).size();
      std::vector<int64_t> perm;
      for (size_t i = 0; i < r; ++i)
        perm.push_back(int64_t(i));
      std::swap(perm[r - 1], perm[r - 2]);
      NodeProto *t;
      std::string o = emit("Transpose", {v}, out + "_t", &t);
      attrIs(t, "perm", perm);
      return o;
    };
    a = tr(a, method ? e.namedArg("self")->node() : e.namedArg("inp1")->node(), "transpose_a");
    b = tr(b, method ? e.namedArg("value")->node() : e.namedArg("inp2")->node(), "transpose_b");
    simple("MatMul", {a, b});
    return;
  }
  case OpKind::MaxPool2d: case OpKind::AvgPool2d: case OpKind::MaxPoolNd:
  case OpKind::AvgPoolNd: {
    bool avg = k == OpKind::AvgPool2d || k == OpKind::AvgPoolNd;
    std::vector<int64_t> ks = ints(e, "kernel_size");
    size_t nd = shapeOf(e, e.input(0)).size() - 2;
    if (ks.size() == 1)
      ks.assign(nd, ks[0]);
    simple(avg ? "AveragePool" : "MaxPool", {operand(e, "inp")});
    std::vector<int64_t> pads = ints(e, "padding");
    if (pads.size() == 1)
      pads.assign(2 * nd, pads[0]);
    else if (pads.size() == nd)
      pads.insert(pads.end(), pads.begin(), pads.end());
    attrIs(n, "kernel_shape", ks);
    attrIs(n, "strides", isNone(e, "stride") ? ks : intsN(e, "stride", nd));
    attrIs(n, "pads", pads);
    if (k == OpKind::MaxPoolNd)
      attrIs(n, "dilations", intsN(e, "dilation", nd));
    if (k == OpKind::MaxPoolNd || k == OpKind::AvgPoolNd)
      attrI(n, "ceil_mode", boolean(e, "ceil_mode"));
    if (avg)
      attrI(n, "count_include_pad", string(e, "mode") == "average");
    return;
  }
  case OpKind::AdaptiveAvgPool2d: case OpKind::AdaptiveMaxPool2d:
    if (ints(e, "oshp") != std::vector<int64_t>{1, 1} && ints(e, "oshp") != std::vector<int64_t>{1})
      fail(e, "only a (1, 1) adaptive pooling has an ONNX form");
    simple(k == OpKind::AdaptiveAvgPool2d ? "GlobalAveragePool" : "GlobalMaxPool",
           {operand(e, "inp")});
    return;
  case OpKind::BatchNorm: {
    std::string x = operand(e, "inp");
    const Shape &xs = shapeOf(e, e.input(0));
    int64_t C = xs.size() > 1 ? xs[1] : 1;
    auto param = [&](const char *name, double dflt) {
      if (isNone(e, name))
        return init(Tensor::full({C}, dflt), out + "_" + name);
      std::string v = operand(e, name, DType::Float32);
      return emit("Reshape", {v, intsInit({C}, out + "_" + name + "_shape")},
                  out + "_" + name + "_flat");
    };
    std::string w = param("weight", 1.0), b = param("bias", 0.0),
                mn = param("running_mean", 0.0), vr = param("running_var", 1.0);
    simple("BatchNormalization", {x, w, b, mn, vr});
    attrF(n, "epsilon", number(e, "eps"));
    return;
  }
  case OpKind::LayerNorm: {
    std::vector<int64_t> ns = ints(e, "normalized_shape");
    std::string x = operand(e, "inp");
    std::string w = (!isNone(e, "weight") && boolean(e, "affine"))
                        ? operand(e, "weight")
                        : init(Tensor::full(ns, 1.0), out + "_scale");
    std::vector<std::string> ins = {x, w};
    if (!isNone(e, "bias") && boolean(e, "affine"))
      ins.push_back(operand(e, "bias"));
    simple("LayerNormalization", ins);
    attrI(n, "axis", -int64_t(ns.size()));
    attrF(n, "epsilon", number(e, "eps"));
    return;
  }
  case OpKind::Dropout: case OpKind::Copy: case OpKind::MPos: case OpKind::MDetach:
    simple("Identity", {first()});
    return;
  case OpKind::Pad: {
    TreeDef pw = constant(e, "pad_width");
    std::vector<int64_t> b, a;
    for (size_t i = 0; i < pw.numChildren(); ++i) {
      auto v = intsOf(e, pw.child(i));
      b.push_back(v[0]);
      a.push_back(v[1]);
    }
    b.insert(b.end(), a.begin(), a.end());
    std::string mode = string(e, "mode");
    if (mode == "replicate")
      mode = "edge";
    simple("Pad", {operand(e, "src"), intsInit(b, out + "_pads"),
                   init(Tensor::full({}, number(e, "constant_value"), od), out + "_value")});
    attrS(n, "mode", mode);
    return;
  }
  case OpKind::ResizeNd: {
    std::vector<int64_t> size = ints(e, "size");
    std::string x = operand(e, "inp");
    if (!isNone(e, "scales")) {
      TreeDef t = constant(e, "scales");
      std::vector<float> s;
      for (size_t i = 0; i < t.numChildren(); ++i)
        s.push_back(float(t.child(i).value().toDouble()));
      simple("Resize", {x, "", init(Tensor::fromFloats({int64_t(s.size())}, s), out + "_scales")});
    } else {
      simple("Resize", {x, "", "", intsInit(size, out + "_sizes")});
    }
    attrS(n, "mode", string(e, "mode"));
    attrS(n, "coordinate_transformation_mode", string(e, "coordinate_transformation_mode"));
    attrS(n, "nearest_mode", string(e, "nearest_mode"));
    attrF(n, "cubic_coeff_a", number(e, "cubic_coeff_a"));
    attrI(n, "exclude_outside", boolean(e, "exclude_outside"));
    return;
  }
  case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min: case OpKind::Prod:
  case OpKind::MSum: case OpKind::MMean: case OpKind::MMax: case OpKind::MMin:
  case OpKind::MProd: {
    const char *op = (k == OpKind::Sum || k == OpKind::MSum)     ? "ReduceSum"
                     : (k == OpKind::Mean || k == OpKind::MMean) ? "ReduceMean"
                     : (k == OpKind::Max || k == OpKind::MMax)   ? "ReduceMax"
                     : (k == OpKind::Min || k == OpKind::MMin)   ? "ReduceMin"
                                                                 : "ReduceProd";
    std::vector<int64_t> axes = isNone(e, "axis") ? std::vector<int64_t>{} : ints(e, "axis");
    std::string x = first();
    if (std::string(op) == "ReduceSum")
      simple(op, axes.empty() ? std::vector<std::string>{x}
                              : std::vector<std::string>{x, intsInit(axes, out + "_axes")});
    else {
      simple(op, {x});
      if (!axes.empty())
        attrIs(n, "axes", axes);
    }
    attrI(n, "keepdims", boolean(e, "keepdims"));
    return;
  }
  case OpKind::Argmax: case OpKind::Argmin: {
    if (isNone(e, "axis") || ints(e, "axis").size() != 1)
      fail(e, "arg-reductions over several axes have no ONNX form");
    simple(k == OpKind::Argmax ? "ArgMax" : "ArgMin", {operand(e, "inp")});
    attrI(n, "axis", ints(e, "axis")[0]);
    attrI(n, "keepdims", boolean(e, "keepdims"));
    return;
  }
  case OpKind::Reshape: case OpKind::MReshape: case OpKind::Flatten: case OpKind::MFlatten:
  case OpKind::Squeeze: case OpKind::ExpandDims:
    return reshapeToOutput();
  case OpKind::Transpose: case OpKind::MTranspose: {
    std::vector<int64_t> perm;
    if (method)
      for (size_t i = 1; i < e.numArgs(); ++i) {
        auto v = intsOf(e, e.arg(i).def);
        perm.insert(perm.end(), v.begin(), v.end());
      }
    else
      perm = ints(e, "pattern");
    simple("Transpose", {first()});
    attrIs(n, "perm", perm);
    return;
  }
  case OpKind::BroadcastTo:
    simple("Expand", {operand(e, "inp"), intsInit(ints(e, "shape"), out + "_shape")});
    return;
  case OpKind::Concat: case OpKind::Stack: {
    auto a = ref(e, "inps");
    std::vector<std::string> ins;
    int64_t axis = ints(e, "axis")[0];
    for (size_t i = 0; i < a->def.numChildren(); ++i) {
      Node *x = e.input(a->firstLeaf + i);
      std::string v = nameOf(e, x);
      if (dt(x) != od)
        v = cast(v, od);
      if (k == OpKind::Stack) {
        int64_t r = int64_t(shapeOf(e, x).size()) + 1;
        v = emit("Unsqueeze", {v, intsInit({axis < 0 ? axis + r : axis}, out + "_axes")},
                 out + "_in");
      }
      ins.push_back(v);
    }
    simple("Concat", ins);
    attrI(n, "axis", axis);
    return;
  }
  case OpKind::Split: {
    int64_t axis = ints(e, "axis")[0];
    std::vector<int64_t> sizes;
    std::vector<std::string> outs;
    for (size_t i = 0; i < e.numOutputs(); ++i) {
      const Shape &s = shapeOf(e, e.output(i));
      int64_t ax = axis < 0 ? axis + int64_t(s.size()) : axis;
      sizes.push_back(s[ax]);
      outs.push_back(fresh(e.output(i)->name()));
      names_[e.output(i)] = outs.back();
    }
    n = node("Split", {operand(e, "inp"), intsInit(sizes, out + "_split")}, outs);
    attrI(n, "axis", axis);
    return;
  }
  case OpKind::Gather:
    simple("GatherElements", {operand(e, "inp"), operand(e, "index")});
    attrI(n, "axis", ints(e, "axis")[0]);
    return;
  case OpKind::Take:
    simple("Gather", {operand(e, "inp"), operand(e, "indices")});
    attrI(n, "axis", ints(e, "axis")[0]);
    return;
  case OpKind::Scatter: case OpKind::ScatterNd: {
    // ONNX has max and min reductions from opset 18 on; we write opset 17.
    std::string red = string(e, "reduction");
    if (red != "none" && red != "add" && red != "mul")
      fail(e, fmt::format("reduction '{}' needs ONNX opset 18 (written: 17)", red));
    if (k == OpKind::Scatter) {
      simple("ScatterElements", {operand(e, "inp"), operand(e, "index"), operand(e, "source")});
      attrI(n, "axis", ints(e, "axis")[0]);
    } else {
      simple("ScatterND", {operand(e, "inp"), operand(e, "indices"), operand(e, "updates")});
    }
    if (red != "none")
      attrS(n, "reduction", red);
    return;
  }
  case OpKind::Cumsum:
    simple("CumSum", {operand(e, "inp"), intsInit({ints(e, "axis")[0]}, out + "_axis")});
    attrI(n, "exclusive", boolean(e, "exclusive"));
    attrI(n, "reverse", boolean(e, "reverse"));
    return;
  case OpKind::Embedding:
    simple("Gather", {operand(e, "weight"), operand(e, "inp")});
    return;
  case OpKind::MAstype:
    simple("Cast", {operand(e, "self")});
    attrI(n, "to", toOnnxType(od));
    return;
  case OpKind::Zeros: case OpKind::Ones: case OpKind::Full: case OpKind::Arange: {
    // Creation ops with constant arguments: their value.
    auto dt2 = parseDType(string(e, "dtype"));
    if (!dt2)
      fail(e, "unknown dtype");
    Tensor t;
    if (k == OpKind::Arange) {
      double start = number(e, "start"), step = number(e, "step"), stop;
      if (isNone(e, "stop")) {
        stop = start;
        start = 0;
      } else {
        stop = number(e, "stop");
      }
      t = rt::arange(start, stop, step, *dt2);
    } else {
      double v = k == OpKind::Zeros ? 0.0 : k == OpKind::Ones ? 1.0 : number(e, "value");
      t = rt::full(ints(e, "shape"), v, *dt2);
    }
    NodeProto *c;
    std::string o = emit("Constant", {}, out, &c);
    auto *a = c->add_attribute();
    a->set_name("value");
    a->set_type(AttributeProto::TENSOR);
    tensorToProto(t, *a->mutable_t());
    bind(e, o);
    return;
  }
  case OpKind::MGetItem: {
    TreeDef idx = constant(e, "index");
    std::vector<TreeDef> items;
    if (idx.kind() == TreeDef::Kind::Tuple)
      for (size_t i = 0; i < idx.numChildren(); ++i)
        items.push_back(idx.child(i));
    else
      items.push_back(idx);
    const Shape &xs = shapeOf(e, e.input(0));
    std::vector<int64_t> starts, ends, axes, steps, squeeze;
    auto opt = [&](const TreeDef &t, int64_t dflt) {
      if (t.isConst() && t.value().isNone())
        return dflt;
      if (t.isConst() && t.value().isInt())
        return t.value().getInt();
      fail(e, "slice bounds must be integers or None");
    };
    for (size_t i = 0; i < items.size(); ++i) {
      const TreeDef &t = items[i];
      if (i >= xs.size())
        fail(e, "too many indices");
      if (t.isConst() && t.value().isInt()) {
        int64_t v = t.value().getInt();
        starts.push_back(v);
        ends.push_back(v == -1 ? std::numeric_limits<int64_t>::max() : v + 1);
        axes.push_back(int64_t(i));
        steps.push_back(1);
        squeeze.push_back(int64_t(i));
      } else if (t.kind() == TreeDef::Kind::Slice) {
        int64_t st = opt(t.child(2), 1);
        int64_t big = std::numeric_limits<int64_t>::max();
        starts.push_back(opt(t.child(0), st > 0 ? 0 : big));
        ends.push_back(opt(t.child(1), st > 0 ? big : std::numeric_limits<int64_t>::min()));
        axes.push_back(int64_t(i));
        steps.push_back(st);
      } else {
        fail(e, "only integer and slice indices have an ONNX form");
      }
    }
    std::string v = emit("Slice", {operand(e, "self"), intsInit(starts, out + "_starts"),
                                   intsInit(ends, out + "_ends"), intsInit(axes, out + "_axes"),
                                   intsInit(steps, out + "_steps")},
                         squeeze.empty() ? llvm::StringRef(out) : llvm::StringRef(out + "_sl"));
    if (!squeeze.empty())
      v = emit("Squeeze", {v, intsInit(squeeze, out + "_sq")}, out);
    bind(e, v);
    return;
  }
  default:
    fail(e, "this op has no ONNX form");
  }
  // floor/ceil/round: computed in float32; back to the output dtype.
  if (od != DType::Float32)
    names_[e.output(0)] = cast(names_[e.output(0)], od);
}

} // namespace

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
/// file `dir/location`, each at a 64-byte aligned offset.
void writeExternalData(onnx::ModelProto &model, const std::string &dir,
                       const std::string &location, int64_t minBytes) {
  std::string path = dir + "/" + location;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    raise("cannot write the external data file '{}': {}", path, std::strerror(errno));
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
  if (!f.flush())
    raise("write error in '{}'", path);
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

LogicalResult exportOnnx(const TracedModule &m, const std::string &path,
                         const OnnxExportOptions &opts, Diagnostic *diag) {
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
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f)
      raise("cannot write the file: {}", std::strerror(errno));
    if (!model.SerializeToOstream(&f) || !f.flush())
      raise("cannot write the file (disk full?)");
    return success();
  } catch (const Error &e) {
    if (diag) {
      *diag = e.diagnostic();
      if (diag->loc.file.empty() && diag->loc.exprId < 0)
        diag->loc.file = path;
    }
    return failure();
  }
}

} // namespace tmg::io
