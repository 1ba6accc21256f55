//===- Import.h - The ONNX importer's per-node API --------------*- C++ -*-===//
//
// What an op family's ONNX importers (io/onnx/<family>.cpp) see of the
// importer: `NodeCx`, one ONNX node's inputs (as graph nodes or values known
// at import time), attributes and outputs, and the builder that emits its
// tmgraph exprs; and `OnnxImportTable`, the importers keyed by ONNX op type
// and opset range. The driver (model loading, external data, initializers,
// folding, graph outputs) is io/OnnxImport.cpp.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringMap.h>

#include "../OnnxCommon.h"
#include "tm/ir/Builder.h"
#include "tm/ir/IR.h"

namespace tmg::io::onnxdetail {

/// The newest opset of the default domain the importer reads.
inline constexpr int64_t kMaxOpset = 17;

/// A value's dependence on graph inputs, for "constant input" notes.
using Deps = llvm::SmallVector<std::string, 2>;

/// A tensor known at import time, or none: std::optional<Tensor>'s
/// interface in one pointer (a Val exists per ONNX value, and most have
/// none; 10^6-node models hold a million of them).
class CstTensor {
public:
  CstTensor() = default;
  CstTensor(Tensor t) : p_(std::make_shared<const Tensor>(std::move(t))) {}
  explicit operator bool() const { return bool(p_); }
  const Tensor &operator*() const { return *p_; }
  const Tensor *operator->() const { return p_.get(); }

private:
  std::shared_ptr<const Tensor> p_;
};

/// An ONNX value: a graph node, and/or a value known at import time.
struct Val {
  Node *node = nullptr;
  CstTensor cst;
  std::string param; ///< attribute name of an initializer
  std::optional<DType> dtype;
  std::optional<Shape> shape;
  Deps deps;
};

/// The per-graph state a node mapping works on: the builder and values.
/// The real graph and each scratch folding graph have their own.
/// The values of a graph by ONNX name.
using ValMap = llvm::StringMap<Val>;

struct Ctx {
  GraphBuilder &b;
  ValMap &vals;
};

class Importer;

/// One ONNX node being imported: its inputs, attributes and outputs, and the
/// builder its exprs go to. Errors name the node.
struct NodeCx {
  Importer &im;
  Ctx &cx;
  const onnx::NodeProto &n;
  /// The model's opset of the default domain.
  int64_t opset;
  std::unordered_map<std::string, const onnx::AttributeProto *> attrs;

  NodeCx(Importer &i, Ctx &c, const onnx::NodeProto &np, int64_t opsetVersion)
      : im(i), cx(c), n(np), opset(opsetVersion) {
    for (const auto &a : n.attribute())
      attrs[a.name()] = &a;
  }
  [[noreturn]] void fail(const std::string &msg) const {
    raise("node '{}' ({}): {}", n.name(), n.op_type(), msg);
  }

  // -- Inputs -------------------------------------------------------------------
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
  /// Input `i` as a graph node (a known value is materialised).
  Node *node(size_t i) const;
  /// The value of input `i`, which decides a shape: an error, with the
  /// graph inputs it depends on as notes, when it is not known.
  const Tensor &cst(size_t i) const;
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
  /// Whether input `i`, which decides a shape, is known only at run time
  /// (a graph input or a value the graph computes).
  bool runtime(size_t i) const { return has(i) && !val(i).cst; }
  /// Input `i`, integers read at run time, as an int64 graph node.
  Node *intsNode(size_t i) const {
    Node *x = node(i);
    return dtype(i) == DType::Int64 ? x : astype(x, DType::Int64);
  }
  /// The static length of input `i`, a 1-d tensor; an error otherwise.
  int64_t length(size_t i) const {
    const Shape &s = dims(i);
    if (s.size() == 1 && !isKnownDim(s[0]))
      fail(fmt::format("input '{}' must have a known length, got shape {}", n.input(int(i)),
                       dim::dimsStr(s)));
    if (s.size() != 1)
      fail(fmt::format("input '{}' must be 1-d, got shape {}", n.input(int(i)), dim::dimsStr(s)));
    return s[0];
  }
  /// The static shape of input `i`; an error when it is not known or has a
  /// symbolic or unknown dim.
  const Shape &shape(size_t i) const;
  /// The shape of input `i`, whose dims may be symbolic or unknown
  /// (tm/ir/SymbolicDim.h); an error when its rank is not known.
  const Shape &dims(size_t i) const;
  int64_t rank(size_t i) const { return int64_t(dims(i).size()); }
  std::optional<DType> dtype(size_t i) const { return val(i).dtype; }

  // -- Attributes ---------------------------------------------------------------
  const onnx::AttributeProto *attr(const char *name) const {
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
  /// `a` made non-negative for rank `r`; an error when out of range.
  int64_t axis(int64_t a, int64_t r) const {
    int64_t x = a < 0 ? a + r : a;
    if (x < 0 || x >= r)
      fail(fmt::format("axis {} is out of range for rank {}", a, r));
    return x;
  }

  // -- Emitting -----------------------------------------------------------------
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
  /// Output `i` is the graph node `x` (nothing when the node has no such
  /// output).
  void out(size_t i, Node *x) const;
  /// Output `i` is the same value as `v`.
  void outAlias(size_t i, const Val &v) const {
    if (i >= size_t(n.output_size()) || n.output(int(i)).empty())
      return;
    cx.vals[n.output(int(i))] = v;
  }
  /// Output `i` is the value `t`, known at import time.
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

/// A 1-d int64 constant node.
inline Node *intsConst(const NodeCx &c, const std::vector<int64_t> &v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, DType::Int64); // exact: no doubles
  std::copy(v.begin(), v.end(), t.data<int64_t>());
  return c.constant(std::move(t));
}

/// An argument of integers, as a tuple.
inline Arg tupleOf(llvm::ArrayRef<int64_t> v) { return Arg::ints(v); }

/// Maps one ONNX node to tmgraph exprs through its NodeCx.
using ImportFn = std::function<void(NodeCx &)>;

/// The importers keyed by ONNX op type (default domain), each for a range
/// of opsets. Filled once by the families' register functions, read-only
/// afterwards.
class OnnxImportTable {
public:
  /// Registers `fn` for `opType` in opsets [minOpset, maxOpset]. A range
  /// that overlaps one already registered for the op is a programmer error
  /// (tmg::Error).
  void add(llvm::StringRef opType, int64_t minOpset, int64_t maxOpset, ImportFn fn);
  /// The importer of `opType` at `opset`, or nullptr.
  const ImportFn *lookup(llvm::StringRef opType, int64_t opset) const;
  /// The op types with an importer for some opset, sorted.
  std::vector<std::string> opTypes() const;

private:
  struct Entry {
    int64_t minOpset, maxOpset;
    ImportFn fn;
  };
  llvm::StringMap<std::vector<Entry>> entries_;
};

/// The importer table of every family, built once.
const OnnxImportTable &onnxImportTable();

// Window helpers shared by the conv and pool families (conv.cpp).

/// Fails unless the kernel, strides and dilations each have one value per
/// spatial axis and every size of the window arithmetic (input, kernel
/// extent (k - 1) * d + 1, stride, dilation, padding) is below 2^60, so
/// that no sum or product of them overflows int64.
void checkWindow(NodeCx &c, llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> k,
                 llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> d);
/// Fails unless every value of attribute `what` lies in (-2^60, 2^60).
void checkWindowValues(NodeCx &c, const char *what, llvm::ArrayRef<int64_t> values);

/// (begin..., end...) paddings for a window op: explicit pads or auto_pad.
std::vector<int64_t> windowPads(const std::string &autoPad,
                                std::optional<std::vector<int64_t>> pads,
                                llvm::ArrayRef<int64_t> in, llvm::ArrayRef<int64_t> k,
                                llvm::ArrayRef<int64_t> s, llvm::ArrayRef<int64_t> d);
/// Fails unless the input sizes `in` that SAME_UPPER/SAME_LOWER paddings
/// depend on (those with a stride above 1) are known.
void checkSamePads(const NodeCx &c, const std::string &autoPad, llvm::ArrayRef<int64_t> in,
                   llvm::ArrayRef<int64_t> s);
/// Whether (begin..., end...) paddings are the same on both sides.
bool symmetric(const std::vector<int64_t> &p);

// One register function per family file (io/onnx/<family>.cpp).
void registerElementwiseOnnxImport(OnnxImportTable &t);
void registerActivationOnnxImport(OnnxImportTable &t);
void registerLinalgOnnxImport(OnnxImportTable &t);
void registerConvOnnxImport(OnnxImportTable &t);
void registerPoolOnnxImport(OnnxImportTable &t);
void registerNormOnnxImport(OnnxImportTable &t);
void registerReduceOnnxImport(OnnxImportTable &t);
void registerShapeOnnxImport(OnnxImportTable &t);
void registerIndexOnnxImport(OnnxImportTable &t);
void registerCreationOnnxImport(OnnxImportTable &t);
void registerResizeOnnxImport(OnnxImportTable &t);
void registerQuantOnnxImport(OnnxImportTable &t);
void registerRnnOnnxImport(OnnxImportTable &t);
void registerMiscOnnxImport(OnnxImportTable &t);

} // namespace tmg::io::onnxdetail
