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
// This file is the driver: model loading, input shapes, external data,
// validation, initializers, folding and graph outputs. Each ONNX op's
// mapping is in the file of the family of the tmgraph op it becomes,
// io/onnx/<family>.cpp, found through the importer table
// (onnxImportTable) by op type and opset.
//
//===----------------------------------------------------------------------===//
#include "onnx/Import.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/DenseSet.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include "tm/io/MappedFile.h"
#include "tm/ir/HugePages.h"
#include "tm/ir/Builder.h"
#include "tm/ir/IR.h"
#include "tm/ir/ModuleCheck.h"
#include "tm/ir/NameSpace.h"
#include "tm/runtime/Interpreter.h"

#include <sys/wait.h>
#include <unistd.h>

namespace tmg::io {
namespace {

using namespace onnxdetail;
using onnx::AttributeProto;
using onnx::NodeProto;

/// Known values up to this many elements (summed over a node's inputs) are
/// folded at import time.
constexpr int64_t FoldLimit = 1 << 16;

/// The external_data key by which importOnnx marks an initializer whose
/// raw_data was left in the mapped model file (splitModel).
constexpr const char *InlineKey = "tmgraph.inline_raw_data";

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

/// A dim of an ONNX type: its size, its dim_param as a symbol (or the
/// expression it spells, such as `N*197`), or unknown.
int64_t onnxDim(const onnx::TensorShapeProto::Dimension &d) {
  if (d.has_dim_value())
    return d.dim_value() >= 0 ? d.dim_value() : kUnknownDim;
  if (!d.has_dim_param() || d.dim_param().empty())
    return kUnknownDim;
  if (auto v = dim::parse(d.dim_param()); v && isSymbolicDim(*v))
    return *v;
  return dim::symbol(d.dim_param());
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
    for (const auto &d : tt.shape().dim())
      s.push_back(onnxDim(d));
    t.shape = s;
  }
  return t;
}

/// Our shape of a node with what ONNX's types say of it merged in: per dim,
/// a known size wins over a symbol, a symbol over an unknown dim.
std::optional<Shape> mergeShapes(const std::optional<Shape> &ours,
                                 const std::optional<Shape> &onnx) {
  if (!ours || !onnx || ours->size() != onnx->size())
    return ours ? ours : onnx;
  Shape s = *ours;
  for (size_t i = 0; i < s.size(); ++i)
    if (!isKnownDim(s[i]) && (isKnownDim((*onnx)[i]) || s[i] == kUnknownDim))
      s[i] = (*onnx)[i];
  return s;
}

/// The graph's nodes, in order. A model read through splitModel keeps each
/// node serialized, and a visit parses one node at a time into one reused
/// message: a graph of 10^6 nodes never holds 10^6 parsed messages (about
/// 440 bytes each, and a fifth of a second to free) next to its IR. A model
/// parsed whole visits its graph's own nodes.
class GraphNodes {
public:
  GraphNodes(const onnx::GraphProto &g, std::vector<llvm::StringRef> wire)
      : graph_(g), wire_(std::move(wire)) {}

  int64_t size() const { return graph_.node_size() + int64_t(wire_.size()); }

  /// Calls f(node, index) for every node in order. The node is valid during
  /// the call only.
  template <class F> void forEach(F &&f) const {
    for (int i = 0; i < graph_.node_size(); ++i)
      f(graph_.node(i), int64_t(i));
    for (size_t i = 0; i < wire_.size(); ++i)
      f(parse(scratch_, i), int64_t(graph_.node_size()) + int64_t(i));
  }

  /// Node `i`, valid until the next at() or forEach.
  const NodeProto &at(int64_t i) const {
    return i < graph_.node_size()
               ? graph_.node(int(i))
               : parse(scratch_, size_t(i - graph_.node_size()));
  }

  /// Appends the serialized nodes to `g` (a copy of the graph, for ONNX's
  /// shape inference).
  void addTo(onnx::GraphProto &g) const {
    g.mutable_node()->Reserve(g.node_size() + int(wire_.size()));
    for (size_t i = 0; i < wire_.size(); ++i)
      parse(*g.add_node(), i);
  }

private:
  const NodeProto &parse(NodeProto &into, size_t i) const {
    llvm::StringRef b = wire_[i];
    if (b.size() > size_t(INT32_MAX) ||
        !into.ParseFromArray(b.data(), int(b.size())))
      raise("not a valid ONNX protobuf (truncated or corrupt): node #{} cannot "
            "be read",
            graph_.node_size() + int64_t(i));
    return into;
  }

  const onnx::GraphProto &graph_;
  std::vector<llvm::StringRef> wire_;
  mutable NodeProto scratch_;
};

} // namespace

namespace onnxdetail {

/// Reads one model: the driver around the families' node importers.
class Importer {
public:
  /// The importer owns `m` for the import: it fixes input shapes in place
  /// and releases each initializer's bytes once they are in a tensor, so
  /// that the weights are held once, not twice.
  /// `nodes` are the graph's nodes kept serialized (splitModel), if any.
  Importer(onnx::ModelProto &m, std::vector<llvm::StringRef> nodes,
           std::string file, const OnnxImportOptions &o)
      : model_(m), nodes_(m.graph(), std::move(nodes)), file_(std::move(file)),
        opts_(o) {}
  /// The mapped model file, whose initializers' raw_data the model names
  /// as external data of key InlineKey (see splitModel).
  void setSelf(std::shared_ptr<MappedFile> self) { self_ = std::move(self); }

  OnnxModel run();

private:
  friend struct NodeCx;

  Node *materialize(Ctx &cx, Val &v, const std::string &name);
  void setOutput(Ctx &cx, const std::string &name, Node *x, const NodeCx &nc);
  void convertNode(Ctx &cx, const NodeProto &n);
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
  GraphNodes nodes_;
  /// The nodes with tensor attributes (Constant's value), for
  /// validateTensors; found by checkSupported.
  std::vector<int64_t> tensorAttrNodes_;
  std::string file_;
  const OnnxImportOptions &opts_;
  /// opts_.limits resolved once (the memory available when reading).
  SizeLimits limits_ = opts_.limits.resolved();
  int64_t opset_ = 0;
  std::unordered_map<std::string, TypeInfo> onnxTypes_;
  /// Graph inputs whose shape stayed symbolic, with their dims as text.
  std::map<std::string, std::string> symbolicInputs_;

  void applyInputShapes(onnx::GraphProto &g);
  /// Maps the files of initializers stored as external data (checked: a
  /// relative location inside the model's directory, offset and length
  /// inside the file, the length the dims ask for). Large tensors become
  /// views of the mapping in external_; small ones (a Reshape's shape) are
  /// read into their raw_data for ONNX's shape inference.
  void loadExternalData();
  /// Initializers read by loadExternalData, by index.
  std::unordered_map<int, Tensor> external_;
  std::shared_ptr<MappedFile> self_;
  /// Types of the graph's values from ONNX's shape inference, run on a copy
  /// of the model without the bytes of its large initializers (their types
  /// and shapes are what inference needs; small ones, such as a Reshape's
  /// shape, keep their values). Run once, when the first value tmgraph's
  /// own rules cannot type fully is met (ensureOnnxTypes): a model the
  /// rules type needs none of its cost.
  void inferOnnxTypes();
  void ensureOnnxTypes() {
    if (onnxTypesPending_) {
      onnxTypesPending_ = false;
      inferOnnxTypes();
    }
  }
  bool onnxTypesPending_ = false;
  /// The initializers whose bytes ONNX's shape inference does not need.
  static constexpr size_t KeepBytes = 4096;
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
  constexpr int64_t ReadBytes = 4096;
  std::map<std::string, std::shared_ptr<MappedFile>> files;
  auto &inits = *model_.mutable_graph()->mutable_initializer();
  for (int i = 0; i < inits.size(); ++i) {
    onnx::TensorProto &t = inits[i];
    if (t.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    std::string what = "initializer '" + t.name() + "'";
    std::string location;
    int64_t offset = 0, length = -1;
    bool inlined = false;
    for (const auto &kv : t.external_data()) {
      inlined |= kv.key() == InlineKey && self_;
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
    if (inlined) {
      // raw_data left in the mapped model file (splitModel). The range
      // is checked all the same: a file may carry this key itself.
      if (length < 0 || offset > int64_t(self_->size()) ||
          length > int64_t(self_->size()) - offset)
        raise("{}: its data ({} bytes at offset {}) lies beyond the end of the model file ({} "
              "bytes)",
              what, length, offset, self_->size());
      auto dt = fromOnnxType(t.data_type());
      if (dt == DType::String)
        raise("{}: a STRING tensor cannot have external data", what);
      Shape shape(t.dims().begin(), t.dims().end());
      std::optional<int64_t> want = dt ? checkedByteSize(shape, dtypeSize(*dt)) : std::nullopt;
      if (dt && (!want || *want != length))
        raise("{}: tensor '{}' of shape {} ({}) has {} raw bytes, expected {}", what, t.name(),
              shapeStr(shape), onnxTypeName(t.data_type()), length,
              want ? fmt::to_string(*want) : std::string("more than 2^63"));
      if (dt) {
        auto ok = checkTensorBytes(what, shape, *dt, limits_);
        if (ok.failed())
          throw Error(ok.diagnostic());
        external_[i] = MappedFile::tensor(self_, uint64_t(offset), shape, *dt);
      } else {
        t.set_raw_data(self_->bytes().data() + offset, size_t(length));
      }
      t.clear_external_data();
      t.set_data_location(onnx::TensorProto::DEFAULT);
      continue;
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
    std::shared_ptr<MappedFile> &file = files[path];
    if (!file) {
      auto mapped = MappedFile::open(path);
      if (mapped.failed())
        raise("{}: its external data file '{}': {}", what, path, mapped.diagnostic().message);
      file = *mapped;
    }
    int64_t size = int64_t(file->size());
    if (length < 0)
      length = size - offset;
    if (offset > size || length > size - offset)
      raise("{}: external data [{}, {}) lies beyond the end of '{}' ({} bytes)", what, offset,
            offset + length, path, size);
    auto dt = fromOnnxType(t.data_type());
    if (dt == DType::String)
      raise("{}: a STRING tensor cannot have external data", what);
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
    if (dt && want && length > ReadBytes)
      external_[i] = MappedFile::tensor(file, uint64_t(offset), shape, *dt);
    else
      t.set_raw_data(file->bytes().data() + offset, size_t(length));
    t.clear_external_data();
    t.set_data_location(onnx::TensorProto::DEFAULT);
  }
}

namespace {

bool writeAll(int fd, const std::string &s) {
  for (size_t done = 0; done < s.size();) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += size_t(n);
  }
  return true;
}

/// ONNX's shape inference trusts the model it is given: ranks and attribute
/// lengths that disagree (a ConvTranspose weight of rank 2 for a rank-3
/// input, a `pads` shorter than the kernel, ...) make libonnx read and write
/// out of bounds. It runs in a child process, whose value_info comes back
/// through a pipe; a child that fails, dies of a signal or outlives its
/// alarm gives no ONNX types, as for a model ONNX rejects (tmgraph's own
/// shape rules then type the graph, and check what they use).
std::optional<onnx::GraphProto> inferShapesIsolated(onnx::ModelProto &model) {
  // ONNX builds its registry of op schemas on the first look-up, which
  // under ASan takes ~0.1 s. Built here once, every child inherits it
  // instead of building and discarding its own.
  static const bool schemasBuilt = onnx::OpSchemaRegistry::Schema("Add") != nullptr;
  (void)schemasBuilt;
  int fds[2];
  if (::pipe(fds) != 0)
    return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    // The child: the default action for the signals of a crash (not the
    // sanitizers' or a fuzzer's handlers, which would report the parent's
    // input as a finding), a time limit, and _exit (no atexit work).
    ::close(fds[0]);
    struct sigaction dfl = {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGALRM})
      ::sigaction(sig, &dfl, nullptr);
    ::alarm(120);
    int code = 1;
    try {
      onnx::shape_inference::InferShapes(model);
      onnx::GraphProto out;
      *out.mutable_value_info() = model.graph().value_info();
      if (writeAll(fds[1], out.SerializeAsString()))
        code = 0;
    } catch (...) {
    }
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string bytes;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    bytes.append(buf, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  onnx::GraphProto out;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !out.ParseFromString(bytes))
    return std::nullopt;
  return out;
}

} // namespace

void Importer::inferOnnxTypes() {
  auto &inits = *model_.mutable_graph()->mutable_initializer();
  std::vector<std::pair<int, std::string>> held;
  for (int i = 0; i < inits.size(); ++i)
    if (inits[i].raw_data().size() > KeepBytes) {
      held.emplace_back(i, std::string());
      held.back().second.swap(*inits[i].mutable_raw_data());
    }
  onnx::ModelProto copy = model_;
  nodes_.addTo(*copy.mutable_graph());
  for (auto &[i, bytes] : held)
    inits[i].mutable_raw_data()->swap(bytes);
  // Models ONNX cannot type are typed by tmgraph's own rules. The graph's
  // declared outputs keep their declared types.
  std::set<std::string> outputs;
  for (const auto &v : model_.graph().output())
    outputs.insert(v.name());
  if (auto inferred = inferShapesIsolated(copy))
    for (const auto &v : inferred->value_info())
      if (!outputs.count(v.name()))
        onnxTypes_[v.name()] = typeInfoOf(v);
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
    if (!t->hasDType() || !t->shape() ||
        llvm::is_contained(*t->shape(), kUnknownDim))
      ensureOnnxTypes();
    auto it = onnxTypes_.find(name);
    if (it != onnxTypes_.end() && it->second.shape &&
        (!t->shape() || !isStaticShape(*t->shape())))
      t->setShape(mergeShapes(t->shape(), it->second.shape));
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
  // ONNX's own shape inference (run later) divides by these without checking
  // them (libonnx 1.12: a zero stride is a SIGFPE in convPoolShapeInference).
  static const std::map<std::string, std::vector<std::string>> positive = {
      {"Conv", {"strides", "dilations", "kernel_shape"}},
      {"ConvTranspose", {"strides", "dilations", "kernel_shape"}},
      {"MaxPool", {"strides", "dilations", "kernel_shape"}},
      {"AveragePool", {"strides", "dilations", "kernel_shape"}},
      {"DepthToSpace", {"blocksize"}},
      {"SpaceToDepth", {"blocksize"}}};
  auto label = [](const NodeProto &n, int64_t index) {
    return n.name().empty() ? "#" + std::to_string(index)
                            : "'" + n.name() + "'";
  };
  std::vector<std::string> bad;
  std::string
      notPositive; // the first attribute that must be positive and is not
  tensorAttrNodes_.clear();
  nodes_.forEach([&](const NodeProto &n, int64_t index) {
    bool sub = false, tensors = false;
    for (const auto &a : n.attribute()) {
      sub |= a.type() == AttributeProto::GRAPH ||
             a.type() == AttributeProto::GRAPHS;
      tensors |= a.has_t() || a.tensors_size() || a.has_sparse_tensor() ||
                 a.sparse_tensors_size();
    }
    if (tensors)
      tensorAttrNodes_.push_back(index);
    bool dom = !n.domain().empty() && n.domain() != "ai.onnx";
    if (dom || sub || !isOnnxOpSupported(n.op_type()))
      bad.push_back(fmt::format("{}{} (node {}{})", dom ? n.domain() + "." : "",
                                n.op_type(), label(n, index),
                                sub ? ", has subgraphs" : ""));
    auto it = positive.find(n.op_type());
    if (it == positive.end() || !notPositive.empty())
      return;
    for (const auto &a : n.attribute()) {
      if (std::find(it->second.begin(), it->second.end(), a.name()) == it->second.end())
        continue;
      std::vector<int64_t> vs(a.ints().begin(), a.ints().end());
      if (a.type() == AttributeProto::INT || (vs.empty() && a.has_i()))
        vs.push_back(a.i());
      for (int64_t v : vs)
        if (v < 1 && notPositive.empty())
          notPositive = fmt::format(
              "node {} ({}): attribute '{}' must be positive, got {}",
              label(n, index), n.op_type(), a.name(), v);
    }
  });
  if (!bad.empty()) {
    std::string list;
    for (size_t i = 0; i < bad.size(); ++i)
      list += (i ? ", " : "") + bad[i];
    raise("unsupported ONNX ops: {}", list);
  }
  if (g.sparse_initializer_size())
    raise("sparse initializers are not supported");
  if (!notPositive.empty())
    raise("{}", notPositive);
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
  ValMap svals;
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
  NodeCx c(*this, cx, n, opset_);
  const ImportFn *fn = onnxImportTable().lookup(n.op_type(), opset_);
  if (!fn)
    c.fail("no mapping for this op");
  (*fn)(c);
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
    if (auto r = budget.add(where, bytes); r.failed())
      throw Error(r.diagnostic());
  };
  for (int i = 0; i < g.initializer_size(); ++i) {
    const onnx::TensorProto &init = g.initializer(i);
    std::string where = "initializer '" + init.name() + "'";
    if (auto it = external_.find(i); it != external_.end()) {
      if (auto r = budget.add(where, int64_t(it->second.nbytes())); r.failed())
        throw Error(r.diagnostic());
      continue;
    }
    check(init, where);
  }
  for (int64_t index : tensorAttrNodes_) {
    const NodeProto &n = nodes_.at(index);
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
    auto bytes = checkTensorBytes("graph input '" + in.name() + "'", knownSizes(*ti.shape), *dt,
                                  limits_);
    if (bytes.failed())
      throw Error(bytes.diagnostic());
  }
}

/// The ONNX names as the top module's values: `onnx_inputs`,
/// `onnx_outputs`, `onnx_params` and `onnx_node_names` (the node names of
/// the nodes still in `g`; `nodeNamesNow[i]` is the tmgraph name
/// `nodeNames[i].first` had before dead nodes were freed).
static void recordOnnxNames(TracedModule &tm, const InternalGraph &g,
                            const std::vector<std::string> &inputNames,
                            const std::vector<std::string> &outputNames,
                            const std::vector<std::pair<Scalar, TreeDef>> &paramNames,
                            const std::vector<std::pair<Node *, std::string>> &nodeNames,
                            const std::vector<std::string> &nodeNamesNow) {
  llvm::DenseSet<const Node *> live(g.inputs().begin(), g.inputs().end());
  live.reserve(unsigned(std::min<size_t>(g.size() + g.inputs().size(), size_t(1) << 30)));
  for (Expr *e : g)
    for (Node *o : e->outputs())
      live.insert(o);
  std::vector<TreeDef> ins, outsDef;
  for (auto &s : inputNames)
    ins.push_back(TreeDef::constant(Scalar(s)));
  for (auto &s : outputNames)
    outsDef.push_back(TreeDef::constant(Scalar(s)));
  tm.setValue("onnx_inputs", TreeDef::tuple(ins));
  tm.setValue("onnx_outputs", TreeDef::tuple(outsDef));
  tm.setValue("onnx_params", TreeDef::dict(paramNames));
  std::vector<std::pair<Scalar, TreeDef>> nodeNameDict;
  llvm::DenseSet<llvm::StringRef> seenNodes;
  seenNodes.reserve(unsigned(std::min<size_t>(nodeNames.size(), size_t(1) << 30)));
  for (size_t i = 0; i < nodeNames.size(); ++i)
    if (live.contains(nodeNames[i].first) && seenNodes.insert(nodeNamesNow[i]).second)
      nodeNameDict.emplace_back(Scalar(nodeNamesNow[i]),
                                TreeDef::constant(Scalar(nodeNames[i].second)));
  tm.setValue("onnx_node_names", TreeDef::dict(nodeNameDict));
}

/// About how many values the graph names, to size the value table once: a
/// graph of 10^6 nodes would otherwise rehash it 20 times.
static unsigned valueCount(const onnx::GraphProto &g, int64_t nodes) {
  return unsigned(std::min<int64_t>(
      nodes + g.initializer_size() + g.input_size(), 1 << 26));
}

OnnxModel Importer::run() {
  for (const auto &o : model_.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx")
      opset_ = o.version();
  if (opset_ == 0)
    raise("the model imports no opset of the default ONNX domain");
  if (opset_ > kMaxOpset)
    raise("opset {} is newer than the newest supported ({})", opset_, kMaxOpset);
  // Input shapes given by the caller replace the graph's input types.
  if (!opts_.inputShapes.empty())
    applyInputShapes(*model_.mutable_graph());
  const onnx::GraphProto &g = model_.graph();
  checkSupported(g);
  loadExternalData();
  validateTensors(g);

  // Types: the model's own value_info, completed by ONNX shape inference
  // where tmgraph's rules leave a type open.
  for (const auto &v : g.value_info())
    onnxTypes_[v.name()] = typeInfoOf(v);
  onnxTypesPending_ = opts_.onnxShapeInference;
  for (const auto &v : g.output())
    onnxTypes_[v.name()] = typeInfoOf(v);

  auto mod = std::make_unique<Module>(sanitizeIdent(g.name(), "OnnxModel"));
  NameSpace paramNs("params", "");
  ValMap vals(valueCount(g, nodes_.size()));
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
  auto &inits = *model_.mutable_graph()->mutable_initializer();
  for (int i = 0; i < inits.size(); ++i) {
    onnx::TensorProto &init = inits[i];
    if (auto it = external_.find(i); it != external_.end()) {
      addParam(init.name(), std::move(it->second));
      external_.erase(it);
      continue;
    }
    try {
      // The tensor takes the parsed bytes over: they are held once.
      addParam(init.name(), takeTensorFromProto(init, limits_));
    } catch (const Error &e) {
      raise("initializer '{}': {}", init.name(), e.diagnostic().message);
    }
    if (init.raw_data().size() > KeepBytes) // small ones stay for ONNX's inference
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
    if (!ti.shape || !isStaticShape(*ti.shape))
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
  nodes_.forEach([&](const NodeProto &n, int64_t) {
    if (tryFold(cx, n))
      return;
    convertNode(cx, n);
    if (!n.name().empty() && n.output_size() > 0)
      if (auto it = vals.find(n.output(0)); it != vals.end() && it->second.node)
        nodeNames.emplace_back(it->second.node, n.name());
  });
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
    TypeInfo declared = typeInfoOf(o);
    auto want = fromOnnxType(declared.elem);
    if (t && want && t->hasDType() && t->dtype() != *want)
      x = b.callMethod(x, "astype", {Arg(dtypeName(*want).str())});
    // The declared output type fills the dims inference left unknown.
    if (auto *tx = llvm::dyn_cast<TensorNode>(x); tx && declared.shape &&
                                                   (!tx->shape() || !isStaticShape(*tx->shape())))
      tx->setShape(mergeShapes(tx->shape(), declared.shape));
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
  recordOnnxNames(*tm, b.graph(), inputNames, outputNames, paramNames, nodeNames, nodeNamesNow);
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

// -- The node API that needs the importer -------------------------------------

Node *NodeCx::node(size_t i) const { return im.materialize(cx, val(i), n.input(int(i))); }

const Tensor &NodeCx::cst(size_t i) const {
  Val &v = val(i);
  if (!v.cst) {
    Diagnostic d(Location(), fmt::format("node '{}' ({}): input '{}' decides a shape and must "
                                         "be known at import time",
                                         n.name(), n.op_type(), n.input(int(i))));
    for (const auto &dep : v.deps)
      d.note("constant input: " + dep);
    throw Error(d);
  }
  return *v.cst;
}

const Shape &NodeCx::shape(size_t i) const {
  Val &v = val(i);
  if (!v.shape)
    fail(fmt::format("the shape of input '{}' is not known statically{}", n.input(int(i)),
                     im.symbolicHint()));
  if (!isStaticShape(*v.shape))
    fail(fmt::format("input '{}' has shape {}; this import needs its sizes{}", n.input(int(i)),
                     dim::dimsStr(*v.shape), im.symbolicHint()));
  return *v.shape;
}

const Shape &NodeCx::dims(size_t i) const {
  Val &v = val(i);
  if (!v.shape)
    fail(fmt::format("the rank of input '{}' is not known statically{}", n.input(int(i)),
                     im.symbolicHint()));
  return *v.shape;
}

void NodeCx::out(size_t i, Node *x) const {
  if (i >= size_t(n.output_size()) || n.output(int(i)).empty())
    return;
  im.setOutput(cx, n.output(int(i)), x, *this);
}

// -- The import table ---------------------------------------------------------

void OnnxImportTable::add(llvm::StringRef opType, int64_t minOpset, int64_t maxOpset,
                          ImportFn fn) {
  auto &list = entries_[opType];
  for (const Entry &e : list)
    if (minOpset <= e.maxOpset && e.minOpset <= maxOpset)
      raise("onnx-import: '{}' is registered twice for opsets [{}, {}] and [{}, {}]",
            opType.str(), e.minOpset, e.maxOpset, minOpset, maxOpset);
  list.push_back({minOpset, maxOpset, std::move(fn)});
}

const ImportFn *OnnxImportTable::lookup(llvm::StringRef opType, int64_t opset) const {
  auto it = entries_.find(opType);
  if (it == entries_.end())
    return nullptr;
  for (const Entry &e : it->second)
    if (e.minOpset <= opset && opset <= e.maxOpset)
      return &e.fn;
  return nullptr;
}

std::vector<std::string> OnnxImportTable::opTypes() const {
  std::vector<std::string> out;
  for (const auto &kv : entries_)
    out.push_back(kv.getKey().str());
  std::sort(out.begin(), out.end());
  return out;
}

const OnnxImportTable &onnxImportTable() {
  static const OnnxImportTable table = [] {
    OnnxImportTable t;
    registerElementwiseOnnxImport(t);
    registerActivationOnnxImport(t);
    registerLinalgOnnxImport(t);
    registerConvOnnxImport(t);
    registerPoolOnnxImport(t);
    registerNormOnnxImport(t);
    registerReduceOnnxImport(t);
    registerShapeOnnxImport(t);
    registerIndexOnnxImport(t);
    registerCreationOnnxImport(t);
    registerResizeOnnxImport(t);
    registerQuantOnnxImport(t);
    registerRnnOnnxImport(t);
    registerMiscOnnxImport(t);
    return t;
  }();
  return table;
}

} // namespace onnxdetail

const std::vector<std::string> &onnxSupportedOps() {
  static const std::vector<std::string> ops = onnxImportedOps();
  return ops;
}

bool isOnnxOpSupported(const std::string &opType) {
  const auto &v = onnxSupportedOps();
  return std::binary_search(v.begin(), v.end(), opType);
}

std::vector<std::string> onnxImportedOps() { return onnxImportTable().opTypes(); }

std::vector<std::string> onnxOpsWithoutImport() {
  std::set<std::string> known;
  for (const auto &s : onnx::OpSchemaRegistry::get_all_schemas())
    if (s.domain().empty() && !s.deprecated())
      known.insert(s.Name());
  std::vector<std::string> out;
  for (const auto &op : known)
    if (!isOnnxOpSupported(op))
      out.push_back(op);
  return out;
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

/// The protobuf wire format, as far as splitModel reads it.
struct WireReader {
  const char *p, *end;
  bool varint(uint64_t &v) {
    v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t c = uint8_t(*p++);
      v |= uint64_t(c & 0x7f) << shift;
      if (!(c & 0x80))
        return true;
    }
    return false;
  }
  /// One field: its number, wire type and (for LEN fields) payload; false
  /// at the end or on bytes that are not the wire format.
  bool field(uint32_t &number, uint32_t &type, llvm::StringRef &payload, const char *&start) {
    start = p;
    uint64_t key, v;
    if (p >= end || !varint(key))
      return false;
    number = uint32_t(key >> 3);
    type = uint32_t(key & 7);
    const char *at = p;
    switch (type) {
    case 0: if (!varint(v)) return false; break;
    case 1: if (end - p < 8) return false; p += 8; break;
    case 5: if (end - p < 4) return false; p += 4; break;
    case 2:
      if (!varint(v) || v > uint64_t(end - p))
        return false;
      at = p;
      p += v;
      break;
    default: return false; // groups: not in ONNX
    }
    payload = llvm::StringRef(at, size_t(p - at));
    return true;
  }
};

void putVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out += char(v | 0x80);
    v >>= 7;
  }
  out += char(v);
}

void putLen(std::string &out, uint32_t number, llvm::StringRef payload) {
  putVarint(out, uint64_t(number) << 3 | 2);
  putVarint(out, payload.size());
  out += payload;
}

/// An initializer (TensorProto) without its raw_data (field 9) when that
/// holds at least MinBytes: it names the bytes as external data of key
/// InlineKey instead (offset from `base`, length). Copied as it is
/// otherwise, and when it has external data of its own.
bool unrawTensor(llvm::StringRef t, const char *base, std::string &out) {
  constexpr size_t MinBytes = 4096;
  WireReader r{t.data(), t.data() + t.size()};
  uint32_t n, type;
  llvm::StringRef payload, raw;
  const char *start;
  int raws = 0;
  while (r.field(n, type, payload, start)) {
    if (n == 13 || n == 14) // external_data, data_location
      return false;
    if (n == 9 && type == 2) {
      raw = payload;
      ++raws;
    }
  }
  if (r.p != r.end || raws != 1 || raw.size() < MinBytes)
    return false;
  r.p = t.data();
  std::string body;
  while (r.field(n, type, payload, start))
    if (!(n == 9 && type == 2))
      body.append(start, size_t(r.p - start));
  auto entry = [&](const char *key, const std::string &value) {
    std::string kv;
    putLen(kv, 1, key);
    putLen(kv, 2, value);
    putLen(body, 13, kv);
  };
  entry(InlineKey, "1");
  entry("offset", std::to_string(raw.data() - base));
  entry("length", std::to_string(raw.size()));
  putVarint(body, 14 << 3 | 0);
  putVarint(body, onnx::TensorProto::EXTERNAL);
  putLen(out, 5, body);
  return true;
}

/// A serialized model split for import (splitModel).
struct SplitModel {
  /// The model without its graph's nodes and, when asked, without the
  /// raw_data of its large initializers.
  std::string skeleton;
  /// The graph's nodes, serialized, in order (views of the bytes split).
  std::vector<llvm::StringRef> nodes;
  /// Some initializer's raw_data was left in the bytes (unrawTensor).
  bool mapsData = false;
};

/// Splits the serialized model `bytes`: its graph's nodes are left out of
/// the skeleton and kept as views of `bytes`, parsed one at a time by the
/// importer (GraphNodes). With `mapData`, the graph's large initializers
/// lose their raw_data too, which they name as external data of key
/// InlineKey (the offset of the bytes in `bytes`) instead: parsing the
/// skeleton copies no weights. nullopt when the bytes are not the wire
/// format (the parser then reports them).
std::optional<SplitModel> splitModel(llvm::StringRef bytes, bool mapData) {
  SplitModel out;
  WireReader model{bytes.data(), bytes.data() + bytes.size()};
  uint32_t n, type;
  llvm::StringRef payload;
  const char *start;
  while (model.field(n, type, payload, start)) {
    if (n != 7 || type != 2) { // ModelProto.graph
      out.skeleton.append(start, size_t(model.p - start));
      continue;
    }
    std::string graph;
    WireReader g{payload.data(), payload.data() + payload.size()};
    uint32_t gn, gtype;
    llvm::StringRef gp;
    const char *gstart;
    while (g.field(gn, gtype, gp, gstart)) {
      if (gn == 1 && gtype == 2) { // GraphProto.node
        out.nodes.push_back(gp);
        continue;
      }
      bool done = mapData && gn == 5 && gtype == 2 && // initializer
                  unrawTensor(gp, bytes.data(), graph);
      out.mapsData |= done;
      if (!done)
        graph.append(gstart, size_t(g.p - gstart));
    }
    if (g.p != g.end)
      return std::nullopt;
    putLen(out.skeleton, 7, graph);
  }
  if (model.p != model.end)
    return std::nullopt;
  return out;
}

/// Imports the serialized model `bytes`, naming `name` in errors. `file`,
/// when given, is the mapping that holds `bytes`: the large initializers'
/// tensors then view it rather than copy it.
FailureOr<OnnxModel> importSerialized(llvm::StringRef bytes,
                                      const std::string &name,
                                      const OnnxImportOptions &opts,
                                      std::shared_ptr<MappedFile> file) {
  std::optional<SplitModel> split = splitModel(bytes, file != nullptr);
  llvm::StringRef parse = split ? llvm::StringRef(split->skeleton) : bytes;
  // The IR takes up to about 40 times the bytes parsed (weights aside).
  if (opts.reserveHeap) {
    size_t parsed = parse.size();
    if (split)
      for (llvm::StringRef n : split->nodes)
        parsed += n.size();
    reserveHugePageHeap(std::min<size_t>(parsed, size_t(64) << 20) * 40);
  }
  onnx::ModelProto m;
  if (parse.size() > size_t(INT32_MAX) ||
      !m.ParseFromArray(parse.data(), int(parse.size())))
    return Diagnostic(
        Location::inFile(name),
        fmt::format("{}: not a valid ONNX protobuf (truncated or corrupt)",
                    name));
  try {
    Importer im(
        m, split ? std::move(split->nodes) : std::vector<llvm::StringRef>(),
        name, opts);
    if (split && split->mapsData)
      im.setSelf(std::move(file));
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
  return importSerialized(bytes, name, opts, nullptr);
}

FailureOr<OnnxModel> importOnnx(const std::string &path, const OnnxImportOptions &opts) {
  // The file is mapped, and only what is not the initializers' bytes is
  // parsed: their raw_data stays in the mapping, where the tensors view it
  // (or copy it from, when not aligned to the element size).
  auto file = MappedFile::open(path);
  if (file.failed())
    return file.diagnostic();
  OnnxImportOptions o = opts;
  if (o.externalDataDir.empty()) {
    size_t slash = path.rfind('/');
    o.externalDataDir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  return importSerialized((*file)->bytes(), path, o, *file);
}

} // namespace tmg::io
