//===- Export.h - The ONNX exporter's per-expr API --------------*- C++ -*-===//
//
// What an op family's ONNX exporters (io/onnx/<family>.cpp) see of the
// exporter: `Exporter`, the ONNX graph being written (fresh value names,
// initializers, nodes, attributes) with the expr argument readers, and
// `ExportCall`, one call expr being exported. The exporters are kept in an
// `OpTable` keyed by op kind, registered by each family under its Ops.def
// family. The driver (graph inputs and outputs, getattrs, constants,
// builtin module calls, the model around the graph) is io/OnnxExport.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "../OnnxCommon.h"
#include "tm/ir/IR.h"
#include "tm/ir/OpTable.h"

namespace tmg::io::onnxdetail {

/// Writes one graph into an ONNX GraphProto.
class Exporter {
public:
  Exporter(const TracedModule &m, onnx::GraphProto &g) : m_(m), g_(g) {}

  void run(const InternalGraph &graph);

  [[noreturn]] void fail(const Expr &e, const std::string &msg) const {
    raiseAt(Location::atExpr(e.id()), "ONNX export of '{}': {}", e.str(), msg);
  }

  // -- Writing the graph --------------------------------------------------------
  /// A value name not used yet, `base` or `base_N`.
  std::string fresh(llvm::StringRef base) {
    std::string b = base.empty() ? "v" : base.str(), n = b;
    for (int i = 1; used_.count(n); ++i)
      n = b + "_" + std::to_string(i);
    used_.insert(n);
    return n;
  }
  /// A new initializer holding `t`, named after `base`.
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
  onnx::NodeProto *node(const std::string &op, std::vector<std::string> ins,
                        std::vector<std::string> outs) {
    onnx::NodeProto *n = g_.add_node();
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
                   onnx::NodeProto **out = nullptr) {
    std::string o = fresh(base);
    onnx::NodeProto *n = node(op, std::move(ins), {o});
    if (out)
      *out = n;
    return o;
  }
  static void attrI(onnx::NodeProto *n, const char *name, int64_t v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attrF(onnx::NodeProto *n, const char *name, double v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(float(v));
  }
  static void attrS(onnx::NodeProto *n, const char *name, const std::string &v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attrIs(onnx::NodeProto *n, const char *name, llvm::ArrayRef<int64_t> v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  /// `v` cast to `to` by a new Cast node.
  std::string cast(const std::string &v, DType to) {
    onnx::NodeProto *n;
    std::string o = emit("Cast", {v}, v + "_cast", &n);
    attrI(n, "to", toOnnxType(to));
    return o;
  }
  /// Output `i` of `e` is the ONNX value `v`.
  void bind(const Expr &e, const std::string &v, size_t i = 0) { names_[e.output(i)] = v; }

  // -- Reading arguments --------------------------------------------------------
  static std::optional<DType> dtypeOf(const Node *n) {
    auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
    if (t && t->hasDType())
      return t->dtype();
    return std::nullopt;
  }
  static DType dt(const Node *n) { return dtypeOf(n).value_or(DType::Float32); }
  /// The dtype an output was computed in (float32 when unknown).
  static DType outDType(const Expr &e, size_t i = 0) { return dt(e.output(i)); }
  /// The shape of `n` (its dims may be symbolic); an error when not even
  /// its rank is known.
  const Shape &shapeOf(const Expr &e, const Node *n) const {
    auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
    if (!t || !t->shape())
      fail(e, fmt::format("the static shape of '{}' is unknown", n ? n->name() : "?"));
    return *t->shape();
  }
  /// The shape of `n` when every dim is a known size; an error otherwise.
  const Shape &staticShapeOf(const Expr &e, const Node *n) const {
    const Shape &s = shapeOf(e, n);
    if (!isStaticShape(s))
      fail(e, fmt::format("'{}' has shape {}; its ONNX form needs the sizes", n->name(),
                          dim::dimsStr(s)));
    return s;
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
  /// The ONNX value of `n`.
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
  std::string operand(const Expr &e, const ArgRef &a, std::optional<DType> to);
  std::string operand(const Expr &e, llvm::StringRef name, std::optional<DType> to = {}) {
    auto a = ref(e, name);
    if (!a)
      fail(e, fmt::format("missing argument '{}'", name.str()));
    return operand(e, *a, to);
  }

  /// Exports the call `e` of op `k` through the family exporters.
  /// `outBase` names the ONNX value of the expr's first output (default:
  /// the node's name); a fused op writes its first part under another.
  void exportCall(const Expr &e, OpKind k, const std::string *outBase = nullptr);

  /// The attribute path of module `m` ("block1.conv"), or `fallback` for a
  /// module reached otherwise (a module constant).
  std::string modulePath(const Module &m, const std::string &fallback) const {
    auto p = modulePaths_.find(&m);
    return p != modulePaths_.end() ? p->second : fallback;
  }

private:
  void exportExpr(const Expr &e);
  void exportModuleCall(const Expr &e, const Module &m);
  void exportElemwiseCall(const Expr &e, const Module &m);

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

/// One call expr being exported: the expr, its op, the name its first
/// output's ONNX value is based on (`out`), the dtype it computes in
/// (`od`), and shorthands for the Exporter's API on this expr.
struct ExportCall {
  Exporter &ex;
  const Expr &e;
  OpKind k;
  /// A tensor method call (arguments `self`, `value`) rather than a function.
  bool method;
  std::string out;
  DType od;
  /// The node `simple` emitted last, for its attributes.
  onnx::NodeProto *n = nullptr;

  [[noreturn]] void fail(const std::string &msg) const { ex.fail(e, msg); }

  /// Emits `op` on `ins` as the expr's output; returns the node.
  onnx::NodeProto *simple(const char *op, std::vector<std::string> ins) {
    ex.bind(e, ex.emit(op, std::move(ins), out, &n));
    return n;
  }
  /// The first operand (`self` of a method).
  std::string first(std::optional<DType> to = {}) {
    return method ? ex.operand(e, "self", to) : ex.operand(e, e.arg(0), to);
  }
  /// Binary operands (x, y or self, value) cast to `to`, swapped when asked.
  std::vector<std::string> binArgs(DType to, bool swap);
  /// The dtype binary operands promote to.
  DType operandDType() const;
  /// A binary arithmetic op computed in the output dtype.
  void arith(const char *op, bool swap = false) { simple(op, binArgs(od, swap)); }
  /// A comparison in the operands' dtype; `negate` adds a Not.
  void cmp(const char *op, bool negate = false);
  /// A unary op; float outputs are computed in the output dtype.
  void un(const char *op) { simple(op, {first(isFloat(od) ? std::optional(od) : std::nullopt)}); }
  /// A Reshape of the first operand to the static output shape.
  void reshapeToOutput();

  // Shorthands for the Exporter's argument readers on this expr.
  std::string operand(llvm::StringRef name, std::optional<DType> to = {}) {
    return ex.operand(e, name, to);
  }
  bool isNone(llvm::StringRef name) const { return ex.isNone(e, name); }
  TreeDef constant(llvm::StringRef name) const { return ex.constant(e, name); }
  std::vector<int64_t> intsOf(const TreeDef &t) const { return ex.intsOf(e, t); }
  std::vector<int64_t> ints(llvm::StringRef name) const { return ex.ints(e, name); }
  std::vector<int64_t> intsN(llvm::StringRef name, size_t nd) const {
    return ex.intsN(e, name, nd);
  }
  double number(llvm::StringRef name) const { return ex.number(e, name); }
  bool boolean(llvm::StringRef name) const { return ex.boolean(e, name); }
  std::string string(llvm::StringRef name) const { return ex.string(e, name); }
  const Shape &shapeOf(const Node *node) const { return ex.shapeOf(e, node); }
  const Shape &staticShapeOf(const Node *node) const { return ex.staticShapeOf(e, node); }
  std::string nameOf(const Node *node) const { return ex.nameOf(e, node); }
  std::string emit(const std::string &op, std::vector<std::string> ins, llvm::StringRef base,
                   onnx::NodeProto **node = nullptr) {
    return ex.emit(op, std::move(ins), base, node);
  }
  std::string init(const Tensor &t, llvm::StringRef base) { return ex.init(t, base); }
  std::string intsInit(llvm::ArrayRef<int64_t> v, llvm::StringRef base) {
    return ex.intsInit(v, base);
  }
  std::string cast(const std::string &v, DType to) { return ex.cast(v, to); }
  void bind(const std::string &v, size_t i = 0) { ex.bind(e, v, i); }
};

/// Exports one call expr.
using ExportFn = std::function<void(ExportCall &)>;
using OnnxExportTable = OpTable<ExportFn>;

/// The exporter table of every family, built once.
const OnnxExportTable &onnxExportTable();

// Shared by the activation, conv and linalg families (activation.cpp).

/// gelu as opset-17 ops (ONNX's Gelu op came in opset 20): the factor
/// 0.5 (1 + erf(x / sqrt 2)), or with tanh(sqrt(2/pi) (x + 0.044715 x^3)),
/// that x is multiplied by.
std::string geluFactor(ExportCall &c, const std::string &x, bool tanhForm);
/// A conv or linear with a fused activation (fuse-conv-activation): the
/// `inner` op followed by the activation's ONNX op.
void exportFusedActivation(ExportCall &c, OpKind inner);

// One register function per family file (io/onnx/<family>.cpp).
void registerElementwiseOnnxExport(OnnxExportTable &t);
void registerActivationOnnxExport(OnnxExportTable &t);
void registerLinalgOnnxExport(OnnxExportTable &t);
void registerConvOnnxExport(OnnxExportTable &t);
void registerPoolOnnxExport(OnnxExportTable &t);
void registerNormOnnxExport(OnnxExportTable &t);
void registerReduceOnnxExport(OnnxExportTable &t);
void registerShapeOnnxExport(OnnxExportTable &t);
void registerIndexOnnxExport(OnnxExportTable &t);
void registerCreationOnnxExport(OnnxExportTable &t);
void registerResizeOnnxExport(OnnxExportTable &t);
void registerQuantOnnxExport(OnnxExportTable &t);
void registerRnnOnnxExport(OnnxExportTable &t);

} // namespace tmg::io::onnxdetail
