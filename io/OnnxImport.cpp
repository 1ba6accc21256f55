//===- OnnxImport.cpp - ONNX model -> flat TracedModule --------------------===//
//
// One pass over the (topologically sorted) ONNX nodes. Each ONNX value is a
// `Val`: a graph node, and/or a value known at import time (initializers,
// Constant nodes, Shape of a static shape, and any node whose inputs are all
// known and small, which is folded by running its mapping on the CPU
// interpreter in a scratch module). Known values are materialised as
// GetAttr (initializers) or Constant exprs only where a tensor operand
// needs them, so shape arithmetic leaves no trace in the graph.
//
//===----------------------------------------------------------------------===//
#include "OnnxCommon.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <llvm/ADT/DenseSet.h>
#include <onnx/shape_inference/implementation.h>

#include "tm/ir/Builder.h"
#include "tm/ir/IR.h"
#include "tm/ir/ModuleCheck.h"
#include "tm/ir/NameSpace.h"
#include "tm/runtime/Interpreter.h"
#include "tm/runtime/Kernels.h"

namespace tmg::io {
namespace {

using namespace onnxdetail;
using onnx::AttributeProto;
using onnx::NodeProto;

constexpr int64_t MaxOpset = 17;
/// Known values up to this many elements (summed over a node's inputs) are
/// folded at import time.
constexpr int64_t FoldLimit = 1 << 16;

const std::vector<std::string> &supportedList() {
  static const std::vector<std::string> ops = [] {
    std::vector<std::string> v = {
      "Abs", "Acos", "Acosh", "Add", "And", "ArgMax", "ArgMin", "Asin", "Asinh", "Atan",
      "Atanh", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu",
      "Clip", "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "Cos", "Cosh",
      "CumSum", "DepthToSpace", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "EyeLike", "Flatten",
      "Floor", "Gather", "GatherElements", "Gemm", "GlobalAveragePool", "GlobalMaxPool",
      "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Hardmax", "Identity",
      "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu", "Less",
      "LessOrEqual", "Log", "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean",
      "MeanVarianceNormalization", "Min", "Mod", "Mul", "Neg", "NegativeLogLikelihoodLoss",
      "Not", "Or", "PRelu", "Pad",
      "Pow", "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
      "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare",
      "Relu", "Reshape", "Resize", "Round", "Scatter", "ScatterElements", "ScatterND", "Selu", "Shape", "Sigmoid", "Sign", "Sin", "Sinh",
      "Shrink", "Size", "Slice", "Softmax", "SoftmaxCrossEntropyLoss", "Softplus", "Softsign", "SpaceToDepth", "Split",
      "Sqrt", "Squeeze", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "Transpose",
      "Trilu", "Unsqueeze", "Upsample", "Where", "Xor"};
    std::sort(v.begin(), v.end()); // looked up by binary search
    return v;
  }();
  return ops;
}

/// A value's dependence on graph inputs, for "constant input" notes.
using Deps = llvm::SmallVector<std::string, 2>;

struct Val {
  Node *node = nullptr;
  std::optional<Tensor> cst;
  std::string param; ///< attribute name of an initializer
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  Deps deps;
};

/// Thrown when a shape-deciding input is not known at import time.
struct NeedConst : Error {
  using Error::Error;
};

std::string sanitizeIdent(const std::string &s, const char *fallback) {
  std::string out;
  for (char c : s)
    out += std::isalnum((unsigned char)c) ? c : '_';
  if (out.empty())
    out = fallback;
  if (std::isdigit((unsigned char)out[0]))
    out = "_" + out;
  return out;
}

struct TypeInfo {
  int32_t elem = 0;
  std::optional<Shape> shape;
};

TypeInfo typeInfoOf(const onnx::ValueInfoProto &v) {
  TypeInfo t;
  if (!v.type().has_tensor_type())
    return t;
  const auto &tt = v.type().tensor_type();
  t.elem = tt.elem_type();
  if (tt.has_shape()) {
    Shape s;
    for (const auto &d : tt.shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0)
        return t;
      s.push_back(d.dim_value());
    }
    t.shape = s;
  }
  return t;
}

class Importer;

/// The per-graph state a node mapping works on: the builder and values.
/// The real graph and each scratch folding graph have their own.
struct Ctx {
  GraphBuilder &b;
  std::unordered_map<std::string, Val> &vals;
};

class Importer {
public:
  /// The importer owns `m` for the import: it fixes input shapes in place
  /// and releases each initializer's bytes once they are in a tensor, so
  /// that the weights are held once, not twice.
  Importer(onnx::ModelProto &m, std::string file, const OnnxImportOptions &o)
      : model_(m), file_(std::move(file)), opts_(o) {}

  OnnxModel run();

private:
  // -- Per-node context ---------------------------------------------------------
  struct NodeCx {
    Importer &im;
    Ctx &cx;
    const NodeProto &n;
    std::unordered_map<std::string, const AttributeProto *> attrs;

    NodeCx(Importer &i, Ctx &c, const NodeProto &np) : im(i), cx(c), n(np) {
      for (const auto &a : n.attribute())
        attrs[a.name()] = &a;
    }
    [[noreturn]] void fail(const std::string &msg) const {
      raise("node '{}' ({}): {}", n.name(), n.op_type(), msg);
    }
    size_t numIn() const { return size_t(n.input_size()); }
    bool has(size_t i) const { return i < numIn() && !n.input(int(i)).empty(); }
    Val &val(size_t i) const {
      if (!has(i))
        fail(fmt::format("input {} is missing", i));
      auto it = cx.vals.find(n.input(int(i)));
      if (it == cx.vals.end())
        fail(fmt::format("input '{}' is not defined before its use", n.input(int(i))));
      return it->second;
    }
    Node *node(size_t i) const { return im.materialize(cx, val(i), n.input(int(i))); }
    const Tensor &cst(size_t i) const {
      Val &v = val(i);
      if (!v.cst) {
        NeedConst e(Diagnostic(Location(), fmt::format("node '{}' ({}): input '{}' decides a "
                                                       "shape and must be known at import time",
                                                       n.name(), n.op_type(), n.input(int(i)))));
        Diagnostic d = e.diagnostic();
        for (const auto &dep : v.deps)
          d.note("constant input: " + dep);
        throw NeedConst(d);
      }
      return *v.cst;
    }
    std::vector<int64_t> ints(size_t i) const {
      const Tensor &t = cst(i);
      std::vector<int64_t> out(t.numel());
      // Exact for int64 (slice bounds are often INT64_MAX; doubles round).
      for (int64_t k = 0; k < t.numel(); ++k)
        out[k] = t.dtype() == DType::Int64   ? t.data<int64_t>()[k]
                 : t.dtype() == DType::Int32 ? t.data<int32_t>()[k]
                                             : int64_t(t.at(k));
      return out;
    }
    std::vector<double> floats(size_t i) const {
      const Tensor &t = cst(i);
      std::vector<double> out(t.numel());
      for (int64_t k = 0; k < t.numel(); ++k)
        out[k] = t.at(k);
      return out;
    }
    const Shape &shape(size_t i) const {
      Val &v = val(i);
      if (!v.shape)
        fail(fmt::format("the shape of input '{}' is not known statically{}", n.input(int(i)),
                         im.symbolicHint()));
      return *v.shape;
    }
    int64_t rank(size_t i) const { return int64_t(shape(i).size()); }
    std::optional<DType> dtype(size_t i) const { return val(i).dtype; }

    const AttributeProto *attr(const char *name) const {
      auto it = attrs.find(name);
      return it == attrs.end() ? nullptr : it->second;
    }
    bool hasAttr(const char *name) const { return attr(name) != nullptr; }
    int64_t ai(const char *name, int64_t d) const {
      auto *a = attr(name);
      return a ? a->i() : d;
    }
    double af(const char *name, double d) const {
      auto *a = attr(name);
      return a ? a->f() : d;
    }
    std::string as(const char *name, const std::string &d) const {
      auto *a = attr(name);
      return a ? a->s() : d;
    }
    std::optional<std::vector<int64_t>> ais(const char *name) const {
      auto *a = attr(name);
      if (!a)
        return std::nullopt;
      return std::vector<int64_t>(a->ints().begin(), a->ints().end());
    }
    std::optional<std::vector<double>> afs(const char *name) const {
      auto *a = attr(name);
      if (!a)
        return std::nullopt;
      return std::vector<double>(a->floats().begin(), a->floats().end());
    }
    int64_t axis(int64_t a, int64_t r) const {
      int64_t x = a < 0 ? a + r : a;
      if (x < 0 || x >= r)
        fail(fmt::format("axis {} is out of range for rank {}", a, r));
      return x;
    }

    // -- Emitting ---------------------------------------------------------------
    Node *call(const char *fn, std::vector<Arg> args, std::vector<KwArg> kw = {}) const {
      return cx.b.callFunction(fn, std::move(args), std::move(kw));
    }
    Node *method(Node *self, const char *m, std::vector<Arg> args) const {
      return cx.b.callMethod(self, m, std::move(args));
    }
    Node *astype(Node *x, DType t) const {
      return method(x, "astype", {Arg(dtypeName(t).str())});
    }
    Node *constant(Tensor t) const { return cx.b.constant(std::move(t)); }
    void out(size_t i, Node *x) const {
      if (i >= size_t(n.output_size()) || n.output(int(i)).empty())
        return;
      im.setOutput(cx, n.output(int(i)), x, *this);
    }
    void outAlias(size_t i, const Val &v) const {
      if (i >= size_t(n.output_size()) || n.output(int(i)).empty())
        return;
      cx.vals[n.output(int(i))] = v;
    }
    void outConst(size_t i, Tensor t) const {
      if (i >= size_t(n.output_size()) || n.output(int(i)).empty())
        return;
      Val v;
      v.dtype = t.dtype();
      v.shape = Shape(t.shape().begin(), t.shape().end());
      v.cst = std::move(t);
      cx.vals[n.output(int(i))] = std::move(v);
    }
    bool wants(size_t i) const { return i < size_t(n.output_size()) && !n.output(int(i)).empty(); }
  };

  Node *materialize(Ctx &cx, Val &v, const std::string &name);
  void setOutput(Ctx &cx, const std::string &name, Node *x, const NodeCx &nc);
  void convertNode(Ctx &cx, const NodeProto &n);
  void mapNode(NodeCx &c);
  bool tryFold(Ctx &cx, const NodeProto &n);
  void checkSupported(const onnx::GraphProto &g);
  /// Keeps what export writes back: producer, doc strings, graph name,
  /// metadata_props (as module values `onnx_*`).
  void keepModelInfo(TracedModule &tm) const {
    auto set = [&](const char *key, const std::string &v) {
      if (!v.empty())
        tm.setValue(key, TreeDef::constant(Scalar(v)));
    };
    set("onnx_producer_name", model_.producer_name());
    set("onnx_producer_version", model_.producer_version());
    set("onnx_doc_string", model_.doc_string());
    set("onnx_graph_name", model_.graph().name());
    set("onnx_graph_doc_string", model_.graph().doc_string());
    std::vector<std::pair<Scalar, TreeDef>> md;
    for (const auto &p : model_.metadata_props())
      md.emplace_back(Scalar(p.key()), TreeDef::constant(Scalar(p.value())));
    if (!md.empty())
      tm.setValue("onnx_metadata", TreeDef::dict(md));
  }
  void validateTensors(const onnx::GraphProto &g);

  onnx::ModelProto &model_;
  std::string file_;
  const OnnxImportOptions &opts_;
  /// opts_.limits resolved once (the memory available when reading).
  SizeLimits limits_ = opts_.limits.resolved();
  int64_t opset_ = 0;
  std::unordered_map<std::string, TypeInfo> onnxTypes_;
  /// Graph inputs whose shape stayed symbolic, with their dims as text.
  std::map<std::string, std::string> symbolicInputs_;

  void applyInputShapes(onnx::GraphProto &g);
  /// Reads the bytes of initializers stored as external data into their
  /// raw_data (checked: a relative location inside the model's directory,
  /// offset and length inside the file, the length the dims ask for).
  void loadExternalData();
  /// Types of the graph's values from ONNX's shape inference, run on a copy
  /// of the model without the bytes of its large initializers (their types
  /// and shapes are what inference needs; small ones, such as a Reshape's
  /// shape, keep their values).
  void inferOnnxTypes();
  std::string symbolicHint() const;
};

/// A ValueInfo's dims as text: "(N, 3, 224, 224)" ("?" for a missing dim).
static std::string dimsText(const onnx::ValueInfoProto &v) {
  if (!v.type().tensor_type().has_shape())
    return "of unknown rank";
  std::string s = "(";
  const auto &dims = v.type().tensor_type().shape().dim();
  for (int i = 0; i < dims.size(); ++i) {
    if (i)
      s += ", ";
    const auto &d = dims[i];
    s += d.has_dim_value() ? std::to_string(d.dim_value())
         : d.has_dim_param() && !d.dim_param().empty() ? d.dim_param()
                                                        : std::string("?");
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

/// Writes OnnxImportOptions::inputShapes into the graph's input types (so
/// that ONNX's shape inference sees them too), checking rank and fixed dims.
void Importer::loadExternalData() {
  for (auto &t : *model_.mutable_graph()->mutable_initializer()) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string what = "initializer '" + t.name() + "'";
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &kv : t.external_data()) {
      auto number = [&](int64_t &out) {
        if (llvm::StringRef(kv.value()).getAsInteger(10, out) || out < 0)
          raise("{}: external data {} '{}' is not a non-negative integer", what, kv.key(),
                kv.value());
      };
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        number(offset);
      else if (kv.key() == "length")
        number(length);
    }
    if (location.empty())
      raise("{}: external data without a location", what);
    if (opts_.externalDataDir.empty())
      raise("{}: its data is in the external file '{}', and a model read from memory has no "
            "directory to find it in (import the model from its file)",
            what, location);
    llvm::StringRef loc(location);
    if (loc.startswith("/") || loc == ".." || loc.startswith("../") || loc.contains("/../") ||
        loc.endswith("/.."))
      raise("{}: external data location '{}' must be a relative path inside the model's "
            "directory",
            what, location);
    std::string path = opts_.externalDataDir + "/" + location;
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f)
      raise("{}: cannot open its external data file '{}': {}", what, path, std::strerror(errno));
    int64_t size = int64_t(f.tellg());
    if (length < 0)
      length = size - offset;
    if (offset > size || length > size - offset)
      raise("{}: external data [{}, {}) lies beyond the end of '{}' ({} bytes)", what, offset,
            offset + length, path, size);
    auto dt = fromOnnxType(t.data_type());
    Shape shape(t.dims().begin(), t.dims().end());
    std::optional<int64_t> want =
        dt ? checkedByteSize(shape, t.data_type() == onnx::TensorProto::DOUBLE ? 8
                                                                               : dtypeSize(*dt))
           : std::nullopt;
    if (want && *want != length)
      raise("{} of shape {} ({}): its external data holds {} bytes, expected {}", what,
            shapeStr(shape), onnxTypeName(t.data_type()), length, *want);
    // The tensor limit applies before the bytes are read.
    if (dt) {
      auto ok = checkTensorBytes(what, shape, *dt, limits_);
      if (ok.failed())
        throw Error(ok.diagnostic());
    }
    std::string *raw = t.mutable_raw_data();
    raw->resize(size_t(length));
    f.seekg(offset);
    if (!f.read(raw->data(), length))
      raise("{}: read error in '{}'", what, path);
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
  }
}

void Importer::inferOnnxTypes() {
  constexpr size_t KeepBytes = 4096;
  auto &inits = *model_.mutable_graph()->mutable_initializer();
  std::vector<std::pair<int, std::string>> held;
  for (int i = 0; i < inits.size(); ++i)
    if (inits[i].raw_data().size() > KeepBytes) {
      held.emplace_back(i, std::string());
      held.back().second.swap(*inits[i].mutable_raw_data());
    }
  try {
    onnx::ModelProto copy = model_;
    for (auto &[i, bytes] : held)
      inits[i].mutable_raw_data()->swap(bytes);
    held.clear();
    onnx::shape_inference::InferShapes(copy);
    for (const auto &v : copy.graph().value_info())
      onnxTypes_[v.name()] = typeInfoOf(v);
  } catch (const std::exception &) {
    // Models ONNX cannot type are typed by tmgraph's own rules.
    for (auto &[i, bytes] : held)
      inits[i].mutable_raw_data()->swap(bytes);
  }
}

void Importer::applyInputShapes(onnx::GraphProto &g) {
  std::set<std::string> initNames;
  for (const auto &init : g.initializer())
    initNames.insert(init.name());
  std::set<std::string> used;
  int64_t pos = 0;
  for (auto &in : *g.mutable_input()) {
    if (initNames.count(in.name()))
      continue;
    // By ONNX name, by the graph node's (sanitised) name, or by position.
    std::string key = in.name();
    auto it = opts_.inputShapes.find(key);
    if (it == opts_.inputShapes.end())
      it = opts_.inputShapes.find(key = NameSpace("", "").createUniqueName(in.name()));
    if (it == opts_.inputShapes.end())
      it = opts_.inputShapes.find(key = std::to_string(pos));
    ++pos;
    if (it == opts_.inputShapes.end())
      continue;
    used.insert(key);
    const Shape &want = it->second;
    if (!in.type().has_tensor_type())
      raise("graph input '{}' is not a tensor: it cannot take a shape", in.name());
    auto *shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    std::string declared = dimsText(in);
    bool hadShape = in.type().tensor_type().has_shape();
    if (hadShape && shape->dim_size() != int(want.size()))
      raise("graph input '{}' has shape {} of rank {}; the shape given for it, {}, has rank {}",
            in.name(), declared, shape->dim_size(), shapeStr(want), want.size());
    for (size_t d = 0; d < want.size(); ++d) {
      if (want[d] < 0)
        raise("the shape given for graph input '{}', {}, has a negative dimension", in.name(),
              shapeStr(want));
      if (!hadShape) {
        shape->add_dim()->set_dim_value(want[d]);
        continue;
      }
      auto *dim = shape->mutable_dim(int(d));
      if (dim->has_dim_value() && dim->dim_value() != want[d])
        raise("graph input '{}' has shape {}; the shape given for it, {}, differs in dimension "
              "{}",
              in.name(), declared, shapeStr(want), d);
      dim->set_dim_value(want[d]);
    }
  }
  for (const auto &[key, s] : opts_.inputShapes)
    if (!used.count(key))
      raise("a shape was given for graph input '{}', which the model does not have", key);
}

std::string Importer::symbolicHint() const {
  if (symbolicInputs_.empty())
    return "";
  std::string s, flags;
  for (const auto &[name, dims] : symbolicInputs_) {
    s += fmt::format("{}'{}' {}", s.empty() ? "" : ", ", name, dims);
    flags += fmt::format("{}--input-shape {}=DIMxDIM...", flags.empty() ? "" : " ", name);
  }
  return fmt::format("; graph input{} {} {} symbolic dimensions: give static shapes with {} "
                     "(tm-opt, tm-run) or OnnxImportOptions::inputShapes",
                     symbolicInputs_.size() > 1 ? "s" : "", s,
                     symbolicInputs_.size() > 1 ? "have" : "has", flags);
}

Node *Importer::materialize(Ctx &cx, Val &v, const std::string &name) {
  if (v.node)
    return v.node;
  if (!v.param.empty())
    v.node = cx.b.getAttr(cx.b.self(), v.param);
  else if (v.cst)
    v.node = cx.b.constant(*v.cst);
  else
    raise("value '{}' has neither a node nor a value", name);
  return v.node;
}

void Importer::setOutput(Ctx &cx, const std::string &name, Node *x, const NodeCx &nc) {
  Val v;
  v.node = x;
  auto *t = llvm::dyn_cast<TensorNode>(x);
  if (t) {
    auto it = onnxTypes_.find(name);
    if (!t->shape() && it != onnxTypes_.end() && it->second.shape)
      t->setShape(it->second.shape);
    if (!t->hasDType() && it != onnxTypes_.end())
      if (auto dt = fromOnnxType(it->second.elem)) {
        t->setDType(*dt);
        t->setHasDType(true);
      }
    v.shape = t->shape();
    if (t->hasDType())
      v.dtype = t->dtype();
  }
  for (size_t i = 0; i < nc.numIn(); ++i)
    if (nc.has(i))
      for (const auto &d : nc.val(i).deps)
        if (v.deps.size() < 8 && std::find(v.deps.begin(), v.deps.end(), d) == v.deps.end())
          v.deps.push_back(d);
  cx.vals[name] = std::move(v);
}

void Importer::checkSupported(const onnx::GraphProto &g) {
  std::vector<std::string> bad;
  int64_t index = -1;
  for (const auto &n : g.node()) {
    ++index;
    bool sub = false;
    for (const auto &a : n.attribute())
      sub |= a.type() == AttributeProto::GRAPH || a.type() == AttributeProto::GRAPHS;
    bool dom = !n.domain().empty() && n.domain() != "ai.onnx";
    if (dom || sub || !isOnnxOpSupported(n.op_type()))
      bad.push_back(fmt::format("{}{} (node {}{})", dom ? n.domain() + "." : "", n.op_type(),
                                n.name().empty() ? "#" + std::to_string(index)
                                                 : "'" + n.name() + "'",
                                sub ? ", has subgraphs" : ""));
  }
  if (!bad.empty()) {
    std::string list;
    for (size_t i = 0; i < bad.size(); ++i)
      list += (i ? ", " : "") + bad[i];
    raise("unsupported ONNX ops: {}", list);
  }
  if (g.sparse_initializer_size())
    raise("sparse initializers are not supported");
  // ONNX's own shape inference (run next) divides by these without checking
  // them (libonnx 1.12: a zero stride is a SIGFPE in convPoolShapeInference).
  static const std::map<std::string, std::vector<std::string>> positive = {
      {"Conv", {"strides", "dilations", "kernel_shape"}},
      {"ConvTranspose", {"strides", "dilations", "kernel_shape"}},
      {"MaxPool", {"strides", "dilations", "kernel_shape"}},
      {"AveragePool", {"strides", "dilations", "kernel_shape"}},
      {"DepthToSpace", {"blocksize"}},
      {"SpaceToDepth", {"blocksize"}}};
  index = -1;
  for (const auto &n : g.node()) {
    ++index;
    auto it = positive.find(n.op_type());
    if (it == positive.end())
      continue;
    for (const auto &a : n.attribute()) {
      if (std::find(it->second.begin(), it->second.end(), a.name()) == it->second.end())
        continue;
      std::vector<int64_t> vs(a.ints().begin(), a.ints().end());
      if (a.type() == AttributeProto::INT || (vs.empty() && a.has_i()))
        vs.push_back(a.i());
      for (int64_t v : vs)
        if (v < 1)
          raise("node {} ({}): attribute '{}' must be positive, got {}",
                n.name().empty() ? "#" + std::to_string(index) : "'" + n.name() + "'",
                n.op_type(), a.name(), v);
    }
  }
}

bool Importer::tryFold(Ctx &cx, const NodeProto &n) {
  static const std::set<std::string> never = {"Constant", "Identity", "Dropout"};
  if (never.count(n.op_type()) || n.input_size() == 0)
    return false;
  int64_t elems = 0;
  for (const auto &in : n.input()) {
    if (in.empty())
      continue;
    auto it = cx.vals.find(in);
    if (it == cx.vals.end() || !it->second.cst)
      return false;
    elems += it->second.cst->numel();
  }
  if (elems > FoldLimit)
    return false;
  // Run the node's mapping in a scratch module on the interpreter. A node
  // that cannot be evaluated this way is imported as a graph expr instead
  // (where a real error, if any, is reported with the graph's context).
  auto scratch = TracedModule::fromModule(std::make_unique<Module>("Fold"));
  GraphBuilder sb = GraphBuilder::top(*scratch, {});
  std::unordered_map<std::string, Val> svals;
  for (const auto &in : n.input())
    if (!in.empty()) {
      Val v;
      v.cst = cx.vals[in].cst;
      v.dtype = v.cst->dtype();
      v.shape = Shape(v.cst->shape().begin(), v.cst->shape().end());
      svals[in] = v;
    }
  Ctx sc{sb, svals};
  std::vector<std::string> names;
  rt::RunResult r;
  try {
    convertNode(sc, n);
    std::vector<Arg> outs;
    for (const auto &o : n.output())
      if (!o.empty() && svals.count(o)) {
        outs.push_back(materialize(sc, svals[o], o));
        names.push_back(o);
      }
    sb.finish(Arg::tuple(outs));
    rt::Interpreter interp(*scratch);
    r = interp.run({});
  } catch (const NeedConst &) {
    throw;
  } catch (const Error &) {
    return false;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    Val v;
    v.cst = r.outputs[i];
    v.dtype = v.cst->dtype();
    v.shape = Shape(v.cst->shape().begin(), v.cst->shape().end());
    cx.vals[names[i]] = v;
  }
  return true;
}

void Importer::convertNode(Ctx &cx, const NodeProto &n) {
  NodeCx c(*this, cx, n);
  mapNode(c);
}

/// Every tensor in the file is checked against its dims, dtype and the
/// size limits, and every static graph input shape against the limits,
/// before ONNX's shape inference reads them (libonnx trusts raw_data to
/// match the dims) and before anything is allocated.
void Importer::validateTensors(const onnx::GraphProto &g) {
  ModelBytesBudget budget(limits_);
  auto check = [&](const onnx::TensorProto &t, const std::string &where) {
    int64_t bytes;
    try {
      bytes = validateTensorProto(t, "tensor '" + t.name() + "'", limits_);
    } catch (const Error &e) {
      raise("{}: {}", where, e.diagnostic().message);
    }
    Diagnostic d;
    if (failed(budget.add(where, bytes, &d)))
      throw Error(d);
  };
  for (const auto &init : g.initializer())
    check(init, "initializer '" + init.name() + "'");
  int64_t index = -1;
  for (const auto &n : g.node()) {
    ++index;
    std::string node = fmt::format("node {} ({})",
                                   n.name().empty() ? "#" + std::to_string(index)
                                                    : "'" + n.name() + "'",
                                   n.op_type());
    for (const auto &a : n.attribute()) {
      std::string where = node + " attribute '" + a.name() + "'";
      if (a.has_t())
        check(a.t(), where);
      for (const auto &t : a.tensors())
        check(t, where);
      if (a.has_sparse_tensor() || a.sparse_tensors_size())
        raise("{}: sparse tensors are not supported", where);
    }
  }
  for (const auto &in : g.input()) {
    TypeInfo ti = typeInfoOf(in);
    auto dt = fromOnnxType(ti.elem);
    if (!ti.shape || !dt)
      continue;
    auto bytes = checkTensorBytes("graph input '" + in.name() + "'", *ti.shape, *dt,
                                  limits_);
    if (bytes.failed())
      throw Error(bytes.diagnostic());
  }
}

OnnxModel Importer::run() {
  for (const auto &o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset_ = o.version();
  if (opset_ == 0)
    raise("the model imports no opset of the default ONNX domain");
  if (opset_ > MaxOpset)
    raise("opset {} is newer than the newest supported ({})", opset_, MaxOpset);
  // Input shapes given by the caller replace the graph's input types.
  if (!opts_.inputShapes.empty())
    applyInputShapes(*model_.mutable_graph());
  const onnx::GraphProto &g = model_.graph();
  checkSupported(g);
  loadExternalData();
  validateTensors(g);

  // Types: the model's own value_info, completed by ONNX shape inference.
  for (const auto &v : g.value_info())
    onnxTypes_[v.name()] = typeInfoOf(v);
  if (opts_.onnxShapeInference)
    inferOnnxTypes();
  for (const auto &v : g.output())
    onnxTypes_[v.name()] = typeInfoOf(v);

  auto mod = std::make_unique<Module>(sanitizeIdent(g.name(), "OnnxModel"));
  NameSpace paramNs("params", "");
  std::unordered_map<std::string, Val> vals;
  std::vector<std::pair<Scalar, TreeDef>> paramNames;
  auto addParam = [&](const std::string &orig, Tensor t) {
    std::string name = paramNs.createUniqueName(orig.empty() ? "param" : orig);
    Val v;
    v.param = name;
    v.dtype = t.dtype();
    v.shape = Shape(t.shape().begin(), t.shape().end());
    v.cst = t;
    mod->registerParameter(name, t);
    paramNames.emplace_back(Scalar(name), TreeDef::constant(Scalar(orig)));
    vals[orig] = std::move(v);
  };
  for (auto &init : *model_.mutable_graph()->mutable_initializer()) {
    try {
      addParam(init.name(), tensorFromProto(init, limits_));
    } catch (const Error &e) {
      raise("initializer '{}': {}", init.name(), e.diagnostic().message);
    }
    // The bytes are in the tensor now: give the proto's copy back.
    std::string().swap(*init.mutable_raw_data());
  }
  std::vector<InputSpec> specs;
  std::vector<std::string> inputNames;
  for (const auto &in : g.input()) {
    if (vals.count(in.name()))
      continue; // an initializer with a default value
    if (auto it = opts_.constantInputs.find(in.name()); it != opts_.constantInputs.end()) {
      addParam(in.name(), it->second);
      continue;
    }
    if (!in.type().has_tensor_type())
      raise("graph input '{}' is not a tensor (sequences, maps and optionals are not "
            "supported)",
            in.name());
    TypeInfo ti = typeInfoOf(in);
    auto dt = fromOnnxType(ti.elem);
    if (!dt)
      raise("graph input '{}' has element type {}, which tmgraph does not support", in.name(),
            onnxTypeName(ti.elem));
    if (!ti.shape)
      symbolicInputs_[in.name()] = dimsText(in);
    specs.emplace_back(in.name(), ti.shape, *dt);
    inputNames.push_back(in.name());
  }
  auto tm = TracedModule::fromModule(std::move(mod));
  GraphBuilder b = GraphBuilder::top(*tm, specs);
  for (size_t i = 0; i < inputNames.size(); ++i) {
    Val v;
    v.node = b.arg(i);
    v.dtype = specs[i].dtype;
    v.shape = specs[i].shape;
    v.deps.push_back(inputNames[i]);
    vals[inputNames[i]] = v;
  }
  Ctx cx{b, vals};
  // Each ONNX node's name, kept on the node of its first output (named once
  // the graph outputs are renamed below) for the exporter.
  std::vector<std::pair<Node *, std::string>> nodeNames;
  for (const auto &n : g.node()) {
    if (tryFold(cx, n))
      continue;
    convertNode(cx, n);
    if (!n.name().empty() && n.output_size() > 0)
      if (auto it = vals.find(n.output(0)); it != vals.end() && it->second.node)
        nodeNames.emplace_back(it->second.node, n.name());
  }
  // Graph outputs, cast to their declared dtype where tmgraph's differs.
  std::vector<Arg> outs;
  std::vector<std::string> outputNames;
  std::set<Node *> renamed;
  for (const auto &o : g.output()) {
    auto it = vals.find(o.name());
    if (it == vals.end())
      raise("graph output '{}' is not computed by any node", o.name());
    Node *x = materialize(cx, it->second, o.name());
    auto *t = llvm::dyn_cast<TensorNode>(x);
    auto want = fromOnnxType(typeInfoOf(o).elem);
    if (t && want && t->hasDType() && t->dtype() != *want)
      x = b.callMethod(x, "astype", {Arg(dtypeName(*want).str())});
    if (!llvm::isa<Input>(x->expr()) && !renamed.count(x) && x->name() != o.name()) {
      try {
        x->setName(o.name());
      } catch (const Error &) {
        // Name taken: the auto name stays; OnnxNames keeps the mapping.
      }
    }
    renamed.insert(x);
    outs.push_back(x);
    outputNames.push_back(o.name());
  }
  // The nodes' names now: finish() deletes the dead exprs and their nodes,
  // so afterwards only the nodes still in the graph may be read.
  std::vector<std::string> nodeNamesNow;
  nodeNamesNow.reserve(nodeNames.size());
  for (auto &[node, name] : nodeNames)
    nodeNamesNow.push_back(node->name().str());
  b.finish(outs.size() == 1 ? outs[0] : Arg::tuple(outs));
  llvm::DenseSet<const Node *> live(b.graph().inputs().begin(), b.graph().inputs().end());
  for (Expr *e : b.graph())
    for (Node *o : e->outputs())
      live.insert(o);
  std::vector<TreeDef> ins, outsDef;
  for (auto &s : inputNames)
    ins.push_back(TreeDef::constant(Scalar(s)));
  for (auto &s : outputNames)
    outsDef.push_back(TreeDef::constant(Scalar(s)));
  tm->setValue("onnx_inputs", TreeDef::tuple(ins));
  tm->setValue("onnx_outputs", TreeDef::tuple(outsDef));
  tm->setValue("onnx_params", TreeDef::dict(paramNames));
  std::vector<std::pair<Scalar, TreeDef>> nodeNameDict;
  std::set<std::string> seenNodes;
  for (size_t i = 0; i < nodeNames.size(); ++i)
    if (live.contains(nodeNames[i].first) && seenNodes.insert(nodeNamesNow[i]).second)
      nodeNameDict.emplace_back(Scalar(nodeNamesNow[i]),
                                TreeDef::constant(Scalar(nodeNames[i].second)));
  tm->setValue("onnx_node_names", TreeDef::dict(nodeNameDict));
  keepModelInfo(*tm);
  std::vector<Diagnostic> tooBig;
  checkNodeSizes(*tm, limits_, tooBig);
  if (!tooBig.empty())
    throw Error(tooBig[0]);
  OnnxModel res;
  res.module = std::move(tm);
  res.names.inputs = inputNames;
  res.names.outputs = outputNames;
  res.opsetVersion = opset_;
  return res;
}

// ---------------------------------------------------------------------------
// The op mappings.
// ---------------------------------------------------------------------------

/// (begin..., end...) paddings for a window op: explicit pads or auto_pad.
std::vector<int64_t> windowPads(const Importer *, const std::string &autoPad,
                                std::optional<std::vector<int64_t>> pads,
                                llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> k,
                                llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> d) {
  size_t nd = in.size();
  std::vector<int64_t> p(2 * nd, 0);
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < nd; ++i) {
      int64_t out = (in[i] + s[i] - 1) / s[i];
      int64_t total = std::max<int64_t>(0, (out - 1) * s[i] + (k[i] - 1) * d[i] + 1 - in[i]);
      int64_t small = total / 2, big = total - small;
      p[i] = autoPad == "SAME_UPPER" ? small : big;
      p[i + nd] = autoPad == "SAME_UPPER" ? big : small;
    }
    return p;
  }
  if (autoPad == "VALID" || !pads)
    return p;
  if (pads->size() == 2 * nd)
    return *pads;
  return p;
}

bool symmetric(const std::vector<int64_t> &p) {
  size_t nd = p.size() / 2;
  for (size_t i = 0; i < nd; ++i)
    if (p[i] != p[i + nd])
      return false;
  return true;
}

Arg tupleOf(llvm::ArrayRef<int64_t> v) { return Arg::ints(v); }

void Importer::mapNode(NodeCx &c) {
  const std::string &op = c.n.op_type();
  auto un = [&](const char *fn) { c.out(0, c.call(fn, {c.node(0)})); };
  auto bin = [&](const char *fn) {
    Node *a = c.node(0), *b = c.node(1);
    if (opset_ < 7 && c.ai("broadcast", 0) && c.hasAttr("axis")) {
      // Legacy broadcasting: B aligned at `axis` of A.
      int64_t ra = c.rank(0), rb = c.rank(1), ax = c.axis(c.ai("axis", 0), ra);
      Shape s = c.shape(1);
      for (int64_t i = ax + rb; i < ra; ++i)
        s.push_back(1);
      b = c.call("tensor.reshape", {b, tupleOf(s)});
    }
    c.out(0, c.call(fn, {a, b}));
  };
  static const std::unordered_map<std::string, const char *> unary = {
      {"Relu", "nn.relu"},          {"Sigmoid", "nn.sigmoid"},
      {"Tanh", "elemwise.tanh"},    {"Erf", "elemwise.erf"},
      {"Exp", "elemwise.exp"},      {"Log", "elemwise.log"},
      {"Sqrt", "elemwise.sqrt"},    {"Neg", "elemwise.neg"},
      {"Abs", "elemwise.abs"},      {"Floor", "elemwise.floor"},
      {"Ceil", "elemwise.ceil"},    {"Round", "elemwise.round"},
      {"Sin", "elemwise.sin"},      {"Cos", "elemwise.cos"},
      {"Tan", "elemwise.tan"},      {"Asin", "elemwise.asin"},
      {"Acos", "elemwise.acos"},    {"Atan", "elemwise.atan"},
      {"Sinh", "elemwise.sinh"},    {"Cosh", "elemwise.cosh"},
      {"Asinh", "elemwise.asinh"},  {"Acosh", "elemwise.acosh"},
      {"Atanh", "elemwise.atanh"},  {"Sign", "math.sign"},
      {"Reciprocal", "elemwise.reciprocal"}, {"Softsign", "nn.softsign"},
      {"Softplus", "nn.softplus"},  {"HardSwish", "nn.hswish"},
      {"Not", "elemwise.logical_not"}, {"IsNaN", "math.isnan"}};
  static const std::unordered_map<std::string, const char *> binary = {
      {"Add", "elemwise.add"},           {"Sub", "elemwise.sub"},
      {"Mul", "elemwise.mul"},           {"Equal", "elemwise.equal"},
      {"Less", "elemwise.less"},         {"Greater", "elemwise.greater"},
      {"LessOrEqual", "elemwise.less_equal"}, {"GreaterOrEqual", "elemwise.greater_equal"},
      {"And", "elemwise.logical_and"},   {"Or", "elemwise.logical_or"},
      {"Xor", "elemwise.logical_xor"}};
  if (auto it = unary.find(op); it != unary.end())
    return un(it->second);
  if (auto it = binary.find(op); it != binary.end())
    return bin(it->second);

  if (op == "Div" || op == "Pow") {
    auto dt = c.dtype(0);
    bin(op == "Div" ? "elemwise.div" : "elemwise.pow");
    // ONNX keeps the first operand's dtype (integer Div truncates).
    Val &o = c.cx.vals[c.n.output(0)];
    if (dt && o.dtype && *o.dtype != *dt)
      c.out(0, c.astype(o.node, *dt));
    return;
  }
  if (op == "Mod") {
    Node *a = c.node(0), *b = c.node(1);
    return c.out(0, c.call(c.ai("fmod", 0) ? "elemwise.fmod" : "elemwise.mod", {a, b}));
  }
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    const char *fn = op == "Max" ? "elemwise.maximum" : op == "Min" ? "elemwise.minimum"
                                                                    : "elemwise.add";
    if (c.numIn() == 1 && op != "Mean")
      return c.outAlias(0, c.val(0));
    Node *acc = c.node(0);
    for (size_t i = 1; i < c.numIn(); ++i)
      acc = c.call(fn, {acc, c.node(i)});
    if (op == "Mean" && c.numIn() > 1)
      acc = c.call("elemwise.div", {acc, double(c.numIn())});
    if (op == "Mean" && c.numIn() == 1)
      return c.outAlias(0, c.val(0));
    return c.out(0, acc);
  }
  if (op == "IsInf")
    return c.out(0, c.call("math.isinf", {c.node(0)},
                           {{"detect_positive", bool(c.ai("detect_positive", 1))},
                            {"detect_negative", bool(c.ai("detect_negative", 1))}}));
  if (op == "LeakyRelu")
    return c.out(0, c.call("nn.leaky_relu", {c.node(0)}, {{"negative_slope", c.af("alpha", 0.01)}}));
  if (op == "PRelu") {
    Node *slope = c.node(1);
    // Before opset 7 a 1-D slope applies along the channel axis.
    if (opset_ < 7 && c.rank(1) == 1 && c.rank(0) > 2 && c.shape(1)[0] == c.shape(0)[1] &&
        c.shape(1)[0] != 1) {
      Shape cs{c.shape(1)[0]};
      for (int64_t i = 2; i < c.rank(0); ++i)
        cs.push_back(1);
      slope = c.call("tensor.reshape", {slope, tupleOf(cs)});
    }
    return c.out(0, c.call("nn.prelu", {c.node(0), slope}));
  }
  if (op == "Elu")
    return c.out(0, c.call("nn.elu", {c.node(0)}, {{"alpha", c.af("alpha", 1.0)}}));
  if (op == "Celu")
    return c.out(0, c.call("nn.celu", {c.node(0)}, {{"alpha", c.af("alpha", 1.0)}}));
  if (op == "Selu")
    return c.out(0, c.call("nn.selu", {c.node(0)},
                           {{"alpha", c.af("alpha", 1.67326319217681884765625)},
                            {"scale", c.af("gamma", 1.05070102214813232421875)}}));
  if (op == "HardSigmoid")
    return c.out(0, c.call("nn.hard_sigmoid", {c.node(0)},
                           {{"alpha", c.af("alpha", 0.2)}, {"beta", c.af("beta", 0.5)}}));
  if (op == "ThresholdedRelu")
    return c.out(0, c.call("nn.thresholded_relu", {c.node(0)}, {{"alpha", c.af("alpha", 1.0)}}));
  if (op == "Clip") {
    Node *x = c.node(0);
    if (opset_ < 11) {
      Arg lo = c.hasAttr("min") ? Arg(c.af("min", 0)) : Arg::none();
      Arg hi = c.hasAttr("max") ? Arg(c.af("max", 0)) : Arg::none();
      return c.out(0, c.call("elemwise.clip", {x}, {{"lower", lo}, {"upper", hi}}));
    }
    bool cmin = !c.has(1) || c.val(1).cst, cmax = !c.has(2) || c.val(2).cst;
    if (cmin && cmax) {
      bool integer = c.dtype(0) && !isFloat(*c.dtype(0));
      auto bound = [&](size_t i) -> Arg {
        if (!c.has(i))
          return Arg::none();
        double v = c.cst(i).at(0);
        return integer ? Arg(int64_t(v)) : Arg(v);
      };
      return c.out(0, c.call("elemwise.clip", {x}, {{"lower", bound(1)}, {"upper", bound(2)}}));
    }
    if (c.has(1))
      x = c.call("elemwise.maximum", {x, c.node(1)});
    if (c.has(2))
      x = c.call("elemwise.minimum", {x, c.node(2)});
    return c.out(0, x);
  }
  if (op == "Where")
    return c.out(0, c.call("tensor.where", {c.node(0), c.node(1), c.node(2)}));
  if (op == "Softmax" || op == "LogSoftmax") {
    const char *fn = op == "Softmax" ? "nn.softmax" : "nn.logsoftmax";
    int64_t r = c.rank(0);
    if (opset_ >= 13) {
      int64_t ax = c.axis(c.ai("axis", -1), r);
      return c.out(0, c.call(fn, {c.node(0)}, {{"axis", ax}}));
    }
    int64_t ax = c.axis(c.ai("axis", 1), std::max<int64_t>(r, 1));
    const Shape &s = c.shape(0);
    if (ax == r - 1)
      return c.out(0, c.call(fn, {c.node(0)}, {{"axis", ax}}));
    int64_t a = 1, bsz = 1;
    for (int64_t i = 0; i < r; ++i)
      (i < ax ? a : bsz) *= s[i];
    Node *f = c.call("tensor.reshape", {c.node(0), tupleOf({a, bsz})});
    f = c.call(fn, {f}, {{"axis", int64_t(1)}});
    return c.out(0, c.call("tensor.reshape", {f, tupleOf(s)}));
  }
  if (op == "Gemm") {
    double alpha = c.af("alpha", 1.0), beta = c.af("beta", 1.0);
    bool ta = c.ai("transA", 0), tb = c.ai("transB", 0);
    Node *A = c.node(0), *B = c.node(1);
    if (!ta && tb && alpha == 1.0 && beta == 1.0 && c.rank(0) == 2 &&
        (!c.has(2) || c.rank(2) == 1))
      return c.out(0, c.call("nn.linear", {A, B},
                             {{"bias", c.has(2) ? Arg(c.node(2)) : Arg::none()}}));
    Node *y = c.call("math.matmul", {A, B}, {{"transpose_a", ta}, {"transpose_b", tb}});
    if (alpha != 1.0)
      y = c.call("elemwise.mul", {y, alpha});
    if (c.has(2)) {
      Node *C = c.node(2);
      if (beta != 1.0)
        C = c.call("elemwise.mul", {C, beta});
      y = c.call("elemwise.add", {y, C});
    }
    return c.out(0, y);
  }
  if (op == "MatMul")
    return c.out(0, c.call("math.matmul", {c.node(0), c.node(1)}));
  if (op == "Conv" || op == "ConvTranspose") {
    const Shape &xs = c.shape(0), &ws = c.shape(1);
    if (xs.size() < 3 || ws.size() != xs.size())
      c.fail(fmt::format("input {} and weight {} do not fit", shapeStr(xs), shapeStr(ws)));
    size_t nd = xs.size() - 2;
    std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
    if (auto ks = c.ais("kernel_shape"); ks && *ks != k)
      c.fail("kernel_shape does not match the weight");
    std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
    std::vector<int64_t> d = c.ais("dilations").value_or(std::vector<int64_t>(nd, 1));
    int64_t groups = c.ai("group", 1);
    std::string autoPad = c.as("auto_pad", "NOTSET");
    Node *x = c.node(0), *w = c.node(1);
    Arg bias = c.has(2) ? Arg(c.node(2)) : Arg::none();
    if (op == "Conv") {
      std::vector<int64_t> p = windowPads(this, autoPad, c.ais("pads"), in, k, s, d);
      if (nd == 2 && symmetric(p))
        return c.out(0, c.call("nn.conv2d", {x, w, bias},
                               {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})},
                                {"dilation", tupleOf(d)}, {"groups", groups}}));
      if (nd == 1 && symmetric(p))
        return c.out(0, c.call("nn.conv1d", {x, w, bias},
                               {{"stride", s[0]}, {"padding", p[0]}, {"dilation", d[0]},
                                {"groups", groups}}));
      return c.out(0, c.call("nn.conv_nd", {x, w, bias},
                             {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                              {"dilation", tupleOf(d)}, {"groups", groups}}));
    }
    std::vector<int64_t> op2 = c.ais("output_padding").value_or(std::vector<int64_t>(nd, 0));
    std::vector<int64_t> p(2 * nd, 0);
    auto outShape = c.ais("output_shape");
    if (outShape && outShape->size() == nd + 2)
      outShape = std::vector<int64_t>(outShape->begin() + 2, outShape->end());
    if (!outShape && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
      outShape = std::vector<int64_t>(nd);
      for (size_t i = 0; i < nd; ++i)
        (*outShape)[i] = in[i] * s[i];
    }
    if (outShape) {
      for (size_t i = 0; i < nd; ++i) {
        int64_t total = s[i] * (in[i] - 1) + op2[i] + ((k[i] - 1) * d[i] + 1) - (*outShape)[i];
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2); // floor division
        if (autoPad == "SAME_UPPER") {
          p[i] = half;
          p[i + nd] = total - half;
        } else {
          p[i] = total - half;
          p[i + nd] = half;
        }
        if (p[i + nd] < 0) {
          op2[i] += -p[i + nd];
          p[i + nd] = 0;
        }
        if (p[i] < 0)
          c.fail("output_shape needs negative leading padding");
      }
    } else if (autoPad != "VALID") {
      if (auto pads = c.ais("pads"); pads && pads->size() == 2 * nd)
        p = *pads;
    }
    bool opOk = true;
    for (size_t i = 0; i < nd; ++i)
      opOk &= op2[i] < s[i] || op2[i] < d[i];
    if (nd == 2 && symmetric(p) && opOk)
      return c.out(0, c.call("nn.conv_transpose2d", {x, w, bias},
                             {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})},
                              {"output_padding", tupleOf(op2)}, {"dilation", tupleOf(d)},
                              {"groups", groups}}));
    return c.out(0, c.call("nn.conv_transpose_nd", {x, w, bias},
                           {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                            {"output_padding", tupleOf(op2)}, {"dilation", tupleOf(d)},
                            {"groups", groups}}));
  }
  if (op == "MaxPool" || op == "AveragePool") {
    const Shape &xs = c.shape(0);
    if (xs.size() < 3)
      c.fail(fmt::format("input {} needs spatial axes", shapeStr(xs)));
    size_t nd = xs.size() - 2;
    std::vector<int64_t> in(xs.begin() + 2, xs.end());
    auto k = c.ais("kernel_shape");
    if (!k || k->size() != nd)
      c.fail("kernel_shape is missing or does not match the input rank");
    std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
    std::vector<int64_t> d = c.ais("dilations").value_or(std::vector<int64_t>(nd, 1));
    std::vector<int64_t> p = windowPads(this, c.as("auto_pad", "NOTSET"), c.ais("pads"), in, *k,
                                        s, d);
    bool ceil = c.ai("ceil_mode", 0);
    if (c.wants(1))
      c.fail("the Indices output of MaxPool is not supported");
    // The 2-D kernels need float32 and paddings of at most half the window.
    bool plain = nd == 2 && symmetric(p) && !ceil && d == std::vector<int64_t>(nd, 1) &&
                 p[0] <= (*k)[0] / 2 && p[1] <= (*k)[1] / 2 && c.dtype(0) == DType::Float32;
    if (op == "MaxPool") {
      if (plain)
        return c.out(0, c.call("nn.max_pool2d", {c.node(0), tupleOf(*k)},
                               {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})}}));
      return c.out(0, c.call("nn.max_pool_nd", {c.node(0), tupleOf(*k)},
                             {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                              {"dilation", tupleOf(d)}, {"ceil_mode", ceil}}));
    }
    if (d != std::vector<int64_t>(nd, 1))
      c.fail("AveragePool with dilations is not supported");
    const char *mode = c.ai("count_include_pad", 0) ? "average" : "average_count_exclude_padding";
    if (plain)
      return c.out(0, c.call("nn.avg_pool2d", {c.node(0), tupleOf(*k)},
                             {{"stride", tupleOf(s)}, {"padding", tupleOf({p[0], p[1]})},
                              {"mode", mode}}));
    return c.out(0, c.call("nn.avg_pool_nd", {c.node(0), tupleOf(*k)},
                           {{"stride", tupleOf(s)}, {"padding", tupleOf(p)},
                            {"ceil_mode", ceil}, {"mode", mode}}));
  }
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    if (c.rank(0) == 4 && c.dtype(0) == DType::Float32)
      return c.out(0, c.call(op == "GlobalAveragePool" ? "nn.adaptive_avg_pool2d"
                                                       : "nn.adaptive_max_pool2d",
                             {c.node(0), tupleOf({1, 1})}));
    std::vector<int64_t> axes;
    for (int64_t i = 2; i < c.rank(0); ++i)
      axes.push_back(i);
    return c.out(0, c.call(op == "GlobalAveragePool" ? "math.mean" : "math.max", {c.node(0)},
                           {{"axis", tupleOf(axes)}, {"keepdims", true}}));
  }
  if (op == "BatchNormalization") {
    if (c.ai("training_mode", 0) || c.n.output_size() > 1)
      c.fail("training mode (running statistics outputs) is not supported");
    return c.out(0, c.call("nn.batch_norm", {c.node(0)},
                           {{"running_mean", c.node(3)}, {"running_var", c.node(4)},
                            {"weight", c.node(1)}, {"bias", c.node(2)},
                            {"eps", c.af("epsilon", 1e-5)}}));
  }
  if (op == "InstanceNormalization" || op == "MeanVarianceNormalization" ||
      op == "LayerNormalization") {
    int64_t r = c.rank(0);
    std::vector<int64_t> axes;
    double eps = c.af("epsilon", 1e-5);
    if (op == "InstanceNormalization") {
      for (int64_t i = 2; i < r; ++i)
        axes.push_back(i);
    } else if (op == "MeanVarianceNormalization") {
      for (int64_t a : c.ais("axes").value_or(std::vector<int64_t>{0, 2, 3}))
        axes.push_back(c.axis(a, r));
      eps = 1e-9;
    } else {
      for (int64_t i = c.axis(c.ai("axis", -1), r); i < r; ++i)
        axes.push_back(i);
    }
    Node *x = c.node(0);
    if (op == "LayerNormalization" && !c.wants(1) && !c.wants(2)) {
      const Shape &xs = c.shape(0);
      Shape ns(xs.begin() + axes[0], xs.end());
      bool fits = c.shape(1) == ns && (!c.has(2) || c.shape(2) == ns);
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
    if (op == "InstanceNormalization") {
      Shape cs{c.shape(0)[1]};
      for (int64_t i = 2; i < r; ++i)
        cs.push_back(1);
      y = c.call("elemwise.mul", {y, c.call("tensor.reshape", {c.node(1), tupleOf(cs)})});
      y = c.call("elemwise.add", {y, c.call("tensor.reshape", {c.node(2), tupleOf(cs)})});
    } else if (op == "LayerNormalization") {
      y = c.call("elemwise.mul", {y, c.node(1)});
      if (c.has(2))
        y = c.call("elemwise.add", {y, c.node(2)});
      c.out(1, m);
      c.out(2, inv);
    }
    return c.out(0, y);
  }
  if (op == "Dropout") {
    // Training mode with a ratio of 0 (PyTorch exports F.dropout(p=0.0,
    // training=True) this way) keeps every element: the same as inference.
    bool ratioKnown = !c.has(1) || c.val(1).cst;
    double ratio = c.has(1) ? (ratioKnown ? c.cst(1).at(0) : 0.5) : c.af("ratio", 0.5);
    if (c.has(2) && (!c.val(2).cst || c.cst(2).at(0) != 0) && (!ratioKnown || ratio != 0))
      c.fail("training mode is not supported");
    c.out(0, c.call("nn.dropout", {c.node(0)}, {{"drop_prob", ratio}, {"training", false}}));
    if (c.wants(1))
      c.outConst(1, Tensor::full(c.shape(0), 1.0, DType::Bool));
    return;
  }
  if (op == "Identity")
    return c.outAlias(0, c.val(0));
  if (op.rfind("Reduce", 0) == 0) {
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
    if (op == "ReduceMean") return c.out(0, c.call("math.mean", {x}, kw));
    if (op == "ReduceSum") return c.out(0, c.call("math.sum", {x}, kw));
    if (op == "ReduceMax") return c.out(0, c.call("math.max", {x}, kw));
    if (op == "ReduceMin") return c.out(0, c.call("math.min", {x}, kw));
    if (op == "ReduceProd") return c.out(0, c.call("math.prod", {x}, kw));
    if (op == "ReduceL1")
      return c.out(0, c.call("math.sum", {c.call("elemwise.abs", {x})}, kw));
    if (op == "ReduceSumSquare")
      return c.out(0, c.call("math.sum", {c.call("elemwise.mul", {x, x})}, kw));
    if (op == "ReduceL2")
      return c.out(0, c.call("elemwise.sqrt",
                             {c.call("math.sum", {c.call("elemwise.mul", {x, x})}, kw)}));
    if (op == "ReduceLogSum")
      return c.out(0, c.call("elemwise.log", {c.call("math.sum", {x}, kw)}));
    if (op == "ReduceLogSumExp")
      return c.out(0, c.call("elemwise.log",
                             {c.call("math.sum", {c.call("elemwise.exp", {x})}, kw)}));
  }
  if (op == "ArgMax" || op == "ArgMin") {
    int64_t r = c.rank(0), ax = c.axis(c.ai("axis", 0), r);
    bool keep = c.ai("keepdims", 1);
    const char *fn = op == "ArgMax" ? "math.argmax" : "math.argmin";
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
    return c.out(0, c.call("elemwise.sub", {last, i}));
  }
  if (op == "Flatten") {
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
    return c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf({a, b2})}));
  }
  if (op == "Reshape") {
    std::vector<int64_t> target = c.has(1) ? c.ints(1) : c.ais("shape").value_or(
                                                              std::vector<int64_t>{});
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
    return c.out(0, c.call("tensor.reshape", {c.node(0), tupleOf(target)}));
  }
  if (op == "Transpose") {
    int64_t r = c.rank(0);
    std::vector<int64_t> perm;
    if (auto p = c.ais("perm"))
      perm = *p;
    else
      for (int64_t i = r - 1; i >= 0; --i)
        perm.push_back(i);
    return c.out(0, c.call("tensor.transpose", {c.node(0), tupleOf(perm)}));
  }
  if (op == "Concat") {
    int64_t r = c.rank(0), ax = c.axis(c.ai("axis", opset_ < 4 ? 1 : 0), r);
    std::vector<Arg> xs;
    for (size_t i = 0; i < c.numIn(); ++i)
      if (c.has(i))
        xs.push_back(c.node(i));
    return c.out(0, c.call("tensor.concat", {Arg::list(xs)}, {{"axis", ax}}));
  }
  if (op == "Split") {
    int64_t r = c.rank(0), ax = c.axis(c.ai("axis", 0), r);
    size_t n = size_t(c.n.output_size());
    std::vector<int64_t> sizes = c.has(1) ? c.ints(1) : c.ais("split").value_or(
                                                             std::vector<int64_t>{});
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
    auto outs = c.cx.b.callFunctionN(functionOp("tensor.split"), {c.node(0), how}, {{"axis", ax}},
                                     n);
    for (size_t i = 0; i < n; ++i)
      c.out(i, outs[i]);
    return;
  }
  if (op == "Slice") {
    const Shape &s = c.shape(0);
    int64_t r = int64_t(s.size());
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = c.ais("starts").value_or(std::vector<int64_t>{});
      ends = c.ais("ends").value_or(std::vector<int64_t>{});
      axes = c.ais("axes").value_or(std::vector<int64_t>{});
    } else {
      starts = c.ints(1);
      ends = c.ints(2);
      if (c.has(3))
        axes = c.ints(3);
      if (c.has(4))
        steps = c.ints(4);
    }
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
    return c.out(0, c.method(c.node(0), "__getitem__", {Arg::tuple(idx)}));
  }
  if (op == "Gather") {
    int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
    return c.out(0, c.call("tensor.take", {c.node(0), c.node(1)}, {{"axis", ax}}));
  }
  if (op == "GatherElements") {
    int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
    return c.out(0, c.call("tensor.gather", {c.node(0), ax, c.node(1)}));
  }
  if (op == "Shape") {
    const Shape &s = c.shape(0);
    int64_t r = int64_t(s.size());
    int64_t b0 = c.ai("start", 0), e0 = c.ai("end", r);
    if (b0 < 0) b0 += r;
    if (e0 < 0) e0 += r;
    b0 = std::clamp<int64_t>(b0, 0, r);
    e0 = std::clamp<int64_t>(e0, b0, r);
    std::vector<int64_t> v(s.begin() + b0, s.begin() + e0);
    return c.outConst(0, Tensor::fromInts({int64_t(v.size())}, v, DType::Int64));
  }
  if (op == "Size")
    return c.outConst(0, Tensor::fromInts({}, {shapeNumel(c.shape(0))}, DType::Int64));
  if (op == "Constant") {
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
    c.fail("only tensor, float(s) and int(s) constants are supported");
  }
  if (op == "ConstantOfShape") {
    std::vector<int64_t> shape = c.ints(0);
    double v = 0;
    DType dt = DType::Float32;
    if (auto *a = c.attr("value")) {
      Tensor t = tensorFromProto(a->t());
      dt = t.dtype();
      v = t.numel() ? t.at(0) : 0.0;
    }
    return c.out(0, c.call("tensor.full", {tupleOf(shape), v}, {{"dtype", dtypeName(dt).str()}}));
  }
  if (op == "Range") {
    DType dt = c.cst(0).dtype();
    double st = c.cst(0).at(0), lim = c.cst(1).at(0), dl = c.cst(2).at(0);
    return c.out(0, c.call("tensor.arange", {st, lim, dl}, {{"dtype", dtypeName(dt).str()}}));
  }
  if (op == "Expand") {
    std::vector<int64_t> shp = c.ints(1);
    auto s = broadcastShapes(c.shape(0), shp);
    if (!s)
      c.fail(fmt::format("{} does not broadcast to {}", shapeStr(c.shape(0)), shapeStr(shp)));
    return c.out(0, c.call("tensor.broadcast_to", {c.node(0), tupleOf(*s)}));
  }
  if (op == "Tile") {
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
    return c.out(0, c.call("tensor.reshape", {x, tupleOf(fin)}));
  }
  if (op == "Pad") {
    int64_t r = c.rank(0);
    std::string mode = c.as("mode", "constant");
    std::vector<int64_t> pads;
    double value = 0;
    if (opset_ < 11) {
      pads = c.ais("pads").value_or(c.ais("paddings").value_or(std::vector<int64_t>{}));
      value = c.af("value", 0.0);
    } else {
      pads = c.ints(1);
      if (c.has(2))
        value = c.cst(2).numel() ? c.cst(2).at(0) : 0.0;
    }
    if (int64_t(pads.size()) != 2 * r)
      c.fail("pads needs 2 * rank entries");
    std::vector<Arg> pw;
    for (int64_t i = 0; i < r; ++i)
      pw.push_back(tupleOf({pads[i], pads[i + r]}));
    return c.out(0, c.call("nn.pad", {c.node(0), Arg::tuple(pw)},
                           {{"mode", mode}, {"constant_value", value}}));
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    std::optional<std::vector<int64_t>> axes = c.ais("axes");
    if (c.has(1))
      axes = c.ints(1);
    int64_t r = c.rank(0);
    if (op == "Squeeze") {
      if (!axes || axes->empty())
        return c.out(0, c.call("tensor.squeeze", {c.node(0)}));
      std::vector<int64_t> a;
      for (int64_t v : *axes)
        a.push_back(c.axis(v, r));
      std::sort(a.begin(), a.end());
      return c.out(0, c.call("tensor.squeeze", {c.node(0)}, {{"axis", tupleOf(a)}}));
    }
    if (!axes)
      c.fail("axes are missing");
    int64_t ro = r + int64_t(axes->size());
    std::vector<int64_t> a;
    for (int64_t v : *axes)
      a.push_back(c.axis(v, ro));
    std::sort(a.begin(), a.end());
    return c.out(0, c.call("tensor.expand_dims", {c.node(0), tupleOf(a)}));
  }
  if (op == "Cast" || op == "CastLike") {
    std::optional<DType> to;
    int32_t t = op == "Cast" ? int32_t(c.ai("to", 0)) : 0;
    if (op == "Cast")
      to = fromOnnxType(t);
    else
      to = c.dtype(1);
    if (!to)
      c.fail(fmt::format("cast to {} is not supported", onnxTypeName(t)));
    return c.out(0, c.astype(c.node(0), *to));
  }
  if (op == "Resize" || op == "Upsample") {
    const Shape &s = c.shape(0);
    int64_t r = int64_t(s.size());
    std::string mode = c.as("mode", "nearest");
    std::string coord = c.as("coordinate_transformation_mode",
                             opset_ < 11 || op == "Upsample" ? "asymmetric" : "half_pixel");
    std::string nearest = c.as("nearest_mode", opset_ < 11 || op == "Upsample" ? "floor"
                                                                               : "round_prefer_floor");
    if (mode == "bilinear" || mode == "trilinear")
      mode = "linear";
    if (coord == "tf_crop_and_resize" || coord == "tf_half_pixel_for_nn")
      c.fail(fmt::format("coordinate_transformation_mode '{}' is not supported", coord));
    std::vector<double> scales;
    std::vector<int64_t> sizes;
    if (op == "Upsample") {
      if (opset_ < 9)
        scales = c.afs("scales").value_or(std::vector<double>{});
      else
        scales = c.floats(1);
    } else if (opset_ < 11) {
      scales = c.floats(1);
    } else {
      if (c.has(3) && c.cst(3).numel())
        sizes = c.ints(3);
      else if (c.has(2))
        scales = c.floats(2);
    }
    if (sizes.empty()) {
      if (int64_t(scales.size()) != r)
        c.fail("scales need one entry per axis");
      for (int64_t i = 0; i < r; ++i)
        sizes.push_back(int64_t(std::floor(s[i] * scales[i] + 1e-9)));
    }
    if (int64_t(sizes.size()) != r)
      c.fail("sizes need one entry per axis");
    Arg sc = Arg::none();
    if (!scales.empty()) {
      std::vector<Arg> v;
      for (double x : scales)
        v.push_back(x);
      sc = Arg::tuple(v);
    }
    return c.out(0, c.call("nn.resize_nd", {c.node(0), tupleOf(sizes)},
                           {{"scales", sc}, {"mode", mode},
                            {"coordinate_transformation_mode", coord},
                            {"nearest_mode", nearest},
                            {"cubic_coeff_a", c.af("cubic_coeff_a", -0.75)},
                            {"exclude_outside", bool(c.ai("exclude_outside", 0))}}));
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    const Shape &s = c.shape(0);
    if (s.size() != 4)
      c.fail("input must be NCHW");
    int64_t bs = c.ai("blocksize", 0), N = s[0], C = s[1], H = s[2], W = s[3];
    if (bs <= 0)
      c.fail("blocksize must be positive");
    Node *x = c.node(0);
    if (op == "DepthToSpace") {
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
    return c.out(0, c.call("tensor.reshape", {x, tupleOf({N, C * bs * bs, H / bs, W / bs})}));
  }
  if (op == "ScatterND" || op == "ScatterElements" || op == "Scatter") {
    std::string red = c.as("reduction", "none");
    if (!rt::parseScatterReduce(red))
      c.fail(fmt::format("unknown reduction '{}'", red));
    if (op == "ScatterND")
      return c.out(0, c.call("tensor.scatter_nd", {c.node(0), c.node(1), c.node(2)},
                             {{"reduction", red}}));
    int64_t ax = c.axis(c.ai("axis", 0), c.rank(0));
    return c.out(0, c.call("tensor.scatter", {c.node(0), ax, c.node(1), c.node(2)},
                           {{"reduction", red}}));
  }
  if (op == "CumSum") {
    int64_t ax = c.axis(c.ints(1).at(0), c.rank(0));
    return c.out(0, c.call("tensor.cumsum", {c.node(0), ax},
                           {{"exclusive", bool(c.ai("exclusive", 0))},
                            {"reverse", bool(c.ai("reverse", 0))}}));
  }
  if (op == "Trilu" || op == "EyeLike") {
    // A mask (or the eye) of the static shape, computed at import time.
    const Shape &s = c.shape(0);
    if (s.size() < 2)
      c.fail("the input needs rank >= 2");
    int64_t k = op == "Trilu" ? (c.has(1) ? c.ints(1).at(0) : 0) : c.ai("k", 0);
    bool upper = c.ai("upper", 1);
    int64_t M = s[s.size() - 2], N = s.back();
    Tensor mask = Tensor::zeros({M, N}, DType::Bool);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j)
        mask.data<uint8_t>()[i * N + j] =
            op == "EyeLike" ? j - i == k : upper ? j - i >= k : j - i <= k;
    if (op == "EyeLike") {
      std::optional<DType> dt = c.hasAttr("dtype") ? fromOnnxType(int32_t(c.ai("dtype", 1)))
                                                   : c.dtype(0);
      if (!dt)
        c.fail("unsupported dtype");
      return c.outConst(0, rt::cast(mask, *dt));
    }
    DType dt = c.dtype(0).value_or(DType::Float32);
    return c.out(0, c.call("tensor.where", {c.constant(mask), c.node(0),
                                            c.constant(Tensor::zeros({}, dt))}));
  }
  if (op == "Shrink") {
    double l = c.af("lambd", 0.5), bias = c.af("bias", 0.0);
    DType dt = c.dtype(0).value_or(DType::Float32);
    auto num = [&](double v) { return c.constant(Tensor::full({}, v, dt)); };
    Node *x = c.node(0);
    Node *hi = c.call("tensor.where", {c.call("elemwise.greater", {x, num(l)}),
                                       c.call("elemwise.sub", {x, num(bias)}), num(0)});
    return c.out(0, c.call("tensor.where", {c.call("elemwise.less", {x, num(-l)}),
                                            c.call("elemwise.add", {x, num(bias)}), hi}));
  }
  if (op == "Hardmax") {
    const Shape &s = c.shape(0);
    int64_t r = int64_t(s.size());
    Node *x = c.node(0);
    int64_t ax;
    if (opset_ >= 13) {
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
    if (opset_ < 13)
      y = c.call("tensor.reshape", {y, tupleOf(s)});
    return c.out(0, y);
  }
  if (op == "NegativeLogLikelihoodLoss" || op == "SoftmaxCrossEntropyLoss") {
    // loss[n, d...] = -input[n, target[n, d...], d...] * weight[target],
    // entries whose target is ignore_index weigh 0; then none/sum/mean
    // (the mean divides by the sum of the weights).
    bool sce = op == "SoftmaxCrossEntropyLoss";
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
    Node *g = c.call("tensor.gather",
                     {x, int64_t(1), c.call("tensor.expand_dims", {t, int64_t(1)})});
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
    return c.out(0, loss);
  }
  c.fail("no mapping for this op");
}

} // namespace

const std::vector<std::string> &onnxSupportedOps() { return supportedList(); }

bool isOnnxOpSupported(const std::string &opType) {
  const auto &v = supportedList();
  return std::binary_search(v.begin(), v.end(), opType);
}

FailureOr<std::vector<std::string>> onnxModelOps(const std::string &path) {
  try {
    onnx::ModelProto m;
    parseProto(m, readFileBytes(path), path);
    std::set<std::string> ops;
    for (const auto &n : m.graph().node())
      ops.insert(n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type()
                                                                : n.domain() + "." + n.op_type());
    return std::vector<std::string>(ops.begin(), ops.end());
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

namespace {

/// Imports the parsed `m` (consumed), naming `name` in errors.
FailureOr<OnnxModel> importModel(onnx::ModelProto &m, const std::string &name,
                                 const OnnxImportOptions &opts) {
  try {
    Importer im(m, name, opts);
    return im.run();
  } catch (const Error &e) {
    Diagnostic d = e.diagnostic();
    if (d.loc.file.empty())
      d.loc.file = name;
    return d;
  } catch (const std::exception &e) {
    return Diagnostic(Location::inFile(name), std::string("ONNX import failed: ") + e.what());
  }
}

} // namespace

FailureOr<OnnxModel> importOnnxBytes(const std::string &bytes, const std::string &name,
                                     const OnnxImportOptions &opts) {
  onnx::ModelProto m;
  try {
    parseProto(m, bytes, name);
  } catch (const Error &e) {
    return Diagnostic(Location::inFile(name), e.diagnostic().message);
  }
  return importModel(m, name, opts);
}

FailureOr<OnnxModel> importOnnx(const std::string &path, const OnnxImportOptions &opts) {
  // Parsed from the file as it is read: the weights are not held as file
  // bytes besides the parsed model.
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot open file: {}", std::strerror(errno)));
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) {
    if (f.bad())
      return Diagnostic(Location::inFile(path), "read error");
    return Diagnostic(Location::inFile(path),
                      fmt::format("{}: not a valid ONNX protobuf (truncated or corrupt)", path));
  }
  OnnxImportOptions o = opts;
  if (o.externalDataDir.empty()) {
    size_t slash = path.rfind('/');
    o.externalDataDir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  return importModel(m, path, o);
}

} // namespace tmg::io
