//===- TmirPrinter.cpp - Writing .tmir text -------------------------------===//
//
// Layout (see README.md, "The .tmir format"):
//
//   tmir 1
//   weights "model.safetensors"
//   ids <next node id> <next expr id>
//   module MyModule traced top {
//     linear = Linear builtin {
//       in_features = 4
//       weight = param(float32(5, 4), @"linear.weight")
//     }
//   graph name='MyModule' qualname='MyModule' argdef=((Module, Tensor), {}) ...
//   MyModule.Graph (self, x) {
//   	%2:	linear = getattr(self, "linear") -> (Linear)	;; getattr='linear' ...
//   	return relu_out	;; outs=[%6]
//   }
//   }
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringSet.h>

#include "TmirCommon.h"
#include "tm/ir/HugePages.h"

namespace tmg {

/// Sorts `v` bytewise (as std::sort with StringRef's operator<) in time
/// linear in the bytes that tell the strings apart: an MSD radix sort on
/// 8-byte big-endian chunks. The reserved-names list of a graph holds about
/// one name per expr ("method_add_123"), so a comparison sort of a 10^6-expr
/// graph's names would cost n log n string compares on scattered memory.
void sortStringsBytewise(std::vector<llvm::StringRef> &v) {
  struct Item {
    uint64_t key;
    uint32_t idx;
  };
  auto chunk = [](llvm::StringRef s, size_t depth) {
    uint64_t k = 0;
    for (size_t i = 0; i < 8; ++i)
      k = (k << 8) | (depth + i < s.size() ? (unsigned char)s[depth + i] : 0);
    return k;
  };
  std::vector<llvm::StringRef> src = v;
  std::vector<Item> items(src.size()), tmp;
  // Work list of (begin, end, depth) ranges of `items` still to sort.
  struct Range {
    size_t b, e, depth;
  };
  std::vector<Range> todo;
  for (size_t i = 0; i < src.size(); ++i)
    items[i] = {chunk(src[i], 0), uint32_t(i)};
  todo.push_back({0, items.size(), 0});
  while (!todo.empty()) {
    Range r = todo.back();
    todo.pop_back();
    size_t n = r.e - r.b;
    Item *it = items.data() + r.b;
    if (r.depth)
      for (size_t i = 0; i < n; ++i)
        it[i].key = chunk(src[it[i].idx], r.depth);
    if (n < 64) {
      std::sort(it, it + n, [&](const Item &x, const Item &y) {
        return src[x.idx].substr(r.depth) < src[y.idx].substr(r.depth);
      });
      continue;
    }
    // LSD radix sort of the 8-byte keys, skipping bytes all keys share.
    tmp.resize(n);
    Item *from = it, *to = tmp.data();
    for (int shift = 0; shift < 64; shift += 8) {
      size_t count[257] = {0};
      for (size_t i = 0; i < n; ++i)
        ++count[((from[i].key >> shift) & 255) + 1];
      if (count[((from[0].key >> shift) & 255) + 1] == n)
        continue;
      for (size_t c = 0; c < 256; ++c)
        count[c + 1] += count[c];
      for (size_t i = 0; i < n; ++i)
        to[count[(from[i].key >> shift) & 255]++] = from[i];
      std::swap(from, to);
    }
    if (from != it)
      std::copy(from, from + n, it);
    // Runs of equal keys: strings that end within this chunk come first,
    // shorter first (zero padding made them equal); the others recurse.
    for (size_t i = 0; i < n;) {
      size_t j = i + 1;
      while (j < n && it[j].key == it[i].key)
        ++j;
      if (j - i > 1) {
        size_t d = r.depth + 8;
        // Linear: the ended strings (usually none) go first, by length;
        // the order of the rest is settled by the recursion.
        Item *mid = std::partition(it + i, it + j, [&](const Item &x) {
          return src[x.idx].size() <= d;
        });
        std::sort(it + i, mid, [&](const Item &x, const Item &y) {
          return src[x.idx].size() < src[y.idx].size();
        });
        size_t k = size_t(mid - it);
        if (j - k > 1)
          todo.push_back({r.b + k, r.b + j, d});
      }
      i = j;
    }
  }
  for (size_t i = 0; i < items.size(); ++i)
    v[i] = src[items[i].idx];
}

namespace {

/// The names `ns` uses that are not in `own`, in no particular order,
/// written into `storage` (the returned StringRefs point into it: most
/// names are made from a counter on the fly).
std::vector<llvm::StringRef> namesNotIn(const NameSpace &ns, llvm::ArrayRef<llvm::StringRef> own,
                                        std::string &storage) {
  llvm::DenseSet<llvm::StringRef> ownSet(own.begin(), own.end());
  std::vector<std::pair<size_t, size_t>> spans;
  ns.forEachUsedName([&](llvm::StringRef n) {
    if (ownSet.contains(n))
      return;
    spans.emplace_back(storage.size(), n.size());
    storage.append(n.data(), n.size());
  });
  std::vector<llvm::StringRef> out;
  out.reserve(spans.size());
  for (auto [off, len] : spans)
    out.emplace_back(storage.data() + off, len);
  return out;
}

class Printer {
public:
  using Sink = llvm::function_ref<void(llvm::StringRef)>;
  /// With a sink, the text goes to it piece by piece (about ChunkBytes
  /// each) and run() returns what is left.
  explicit Printer(const TmirWriteOptions &o,
                   std::optional<Sink> sink = std::nullopt)
      : opts_(o), sink_(sink) {}

  std::string run(const TracedModule &m) {
    out_ += "tmir ";
    appendInt(out_, TmirVersion);
    out_ += '\n';
    if (opts_.weights && !opts_.weightsFile.empty()) {
      out_ += "weights ";
      appendPyStringRepr(out_, opts_.weightsFile);
      out_ += '\n';
    }
    auto [nn, ne] = m.totalIds();
    out_ += "ids ";
    appendInt(out_, nn);
    out_ += ' ';
    appendInt(out_, ne);
    out_ += "\nmodule ";
    out_ += m.typeName();
    out_ += " traced";
    if (m.isTop())
      out_ += " top";
    if (!m.name().empty()) {
      out_ += " name=";
      appendPyStringRepr(out_, m.name());
    }
    out_ += " {\n";
    countShared(m);
    moduleBody(m, 1, "");
    out_ += "}\n";
    return std::move(out_);
  }

private:
  void indent(int depth) { out_.append(size_t(2 * depth), ' '); }

  /// Hands the text so far to the sink once it holds a chunk; the buffer,
  /// emptied, is filled again.
  static constexpr size_t ChunkBytes = size_t(1) << 20;
  void flushChunk() {
    if (sink_ && out_.size() >= ChunkBytes) {
      (*sink_)(out_);
      out_.clear();
    }
  }

  /// Makes room for `extra` more bytes at once (one reallocation for a
  /// graph body instead of a doubling series).
  void ensure(size_t extra) {
    if (sink_)
      extra = std::min(extra, 2 * ChunkBytes);
    if (out_.size() + extra > out_.capacity()) {
      out_.reserve(out_.size() + extra);
      // The part not yet written, on huge pages: a large module's text
      // would fault once per 4 KiB otherwise.
      adviseHugePages(out_.data() + out_.size(), out_.capacity() - out_.size());
    }
  }

  /// What makes two attribute tensors one object (Module::stateDict's
  /// rule): the same bytes seen the same way.
  using Identity = std::tuple<const void *, std::vector<int64_t>, std::vector<int64_t>, DType>;
  static Identity identityOf(const Tensor &t) {
    return {t.viewData(), std::vector<int64_t>(t.shape().begin(), t.shape().end()),
            std::vector<int64_t>(t.strides().begin(), t.strides().end()), t.dtype()};
  }

  /// Counts the attribute tensors and tensor constants of the tree by
  /// identity, so that shared ones are written by reference. (A constant
  /// made by attr-to-constant holds its attribute's tensor: the weights are
  /// then written once, not twice.)
  void countShared(const Module &m) {
    for (const auto &a : m.attrs()) {
      if (a.kind == ModuleAttr::Kind::Parameter || a.kind == ModuleAttr::Kind::Buffer) {
        if (a.tensor.defined())
          ++uses_[identityOf(a.tensor)];
      } else if (a.kind == ModuleAttr::Kind::Submodule && a.module) {
        countShared(*a.module);
      }
    }
    if (auto *tm = llvm::dyn_cast<TracedModule>(&m))
      for (const auto &sig : tm->signatures())
        for (const Expr *e : sig.graph->body())
          if (auto *c = llvm::dyn_cast<Constant>(e); c && c->isTensor() && c->tensor().defined())
            ++uses_[identityOf(c->tensor())];
  }

  void tensorData(const Tensor &t, const std::string &key) {
    // Strings are always written inline, quoted and escaped: the weight
    // files (safetensors) have no string dtype.
    if (t.defined() && isString(t.dtype())) {
      out_ += '[';
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i)
          out_ += ", ";
        out_ += quoteString(stringAt(t, i));
      }
      out_ += ']';
      return;
    }
    // A tensor held by several attributes goes to the weights once, under
    // its first key; the others reference that key, and reading gives them
    // one tensor again.
    bool shared = false;
    if (opts_.weights && t.defined()) {
      Identity id = identityOf(t);
      auto it = uses_.find(id);
      shared = it != uses_.end() && it->second > 1;
      if (shared) {
        auto [w, fresh] = written_.try_emplace(std::move(id), key);
        if (!fresh) {
          out_ += '@';
          appendPyStringRepr(out_, w->second);
          return;
        }
      }
    }
    if (!shared && opts_.inlineMaxElements >= 0 && t.numel() <= opts_.inlineMaxElements) {
      out_ += '[';
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i)
          out_ += ", ";
        double v = t.at(i);
        if (isFloat(t.dtype()))
          appendPyFloatRepr(out_, v);
        else
          appendInt(out_, int64_t(v));
      }
      out_ += ']';
      return;
    }
    if (opts_.weights)
      opts_.weights->tensors.emplace_back(key, t);
    out_ += '@';
    appendPyStringRepr(out_, key);
  }

  void tensorValue(llvm::StringRef word, const Tensor &t, const std::string &key) {
    out_ += word;
    out_ += '(';
    out_ += dtypeName(t.dtype());
    appendShape(out_, t.shape());
    out_ += ", ";
    tensorData(t, key);
    out_ += ')';
  }

  /// `module(Type, {'attr': value, ...})` for a module constant.
  void inlineModule(const Module &m, const std::string &keyPrefix) {
    out_ += "module(";
    out_ += m.typeName();
    out_ += ", {";
    bool first = true;
    for (const auto &a : m.attrs()) {
      if (!first)
        out_ += ", ";
      first = false;
      appendPyStringRepr(out_, a.name);
      out_ += ": ";
      switch (a.kind) {
      case ModuleAttr::Kind::Value: appendTree(out_, a.value); break;
      case ModuleAttr::Kind::Parameter:
        tensorValue("param", a.tensor, keyPrefix + a.name);
        break;
      case ModuleAttr::Kind::Buffer:
        tensorValue("buffer", a.tensor, keyPrefix + a.name);
        break;
      case ModuleAttr::Kind::Submodule:
      case ModuleAttr::Kind::Alias:
        raise("module constant '{}' has a submodule '{}': not supported in "
              ".tmir",
              m.typeName().str(), a.name);
      }
    }
    out_ += "})";
  }

  void moduleBody(const Module &m, int depth, const std::string &path) {
    for (const auto &a : m.attrs()) {
      flushChunk(); // (inline weights can be most of the text)
      std::string key = path.empty() ? a.name : path + "." + a.name;
      indent(depth);
      out_ += a.name;
      out_ += " = ";
      switch (a.kind) {
      case ModuleAttr::Kind::Value:
        appendTree(out_, a.value);
        out_ += '\n';
        break;
      case ModuleAttr::Kind::Parameter:
        tensorValue("param", a.tensor, key);
        out_ += '\n';
        break;
      case ModuleAttr::Kind::Buffer:
        tensorValue("buffer", a.tensor, key);
        out_ += '\n';
        break;
      case ModuleAttr::Kind::Submodule: {
        const Module &c = *a.module;
        const char *kind = c.isBuiltin() ? "builtin"
                           : llvm::isa<TracedModule>(&c) ? "traced"
                                                         : "plain";
        out_ += c.typeName();
        out_ += ' ';
        out_ += kind;
        if (!c.name().empty()) {
          out_ += " name=";
          appendPyStringRepr(out_, c.name());
        }
        out_ += " {\n";
        moduleBody(c, depth + 1, key);
        indent(depth);
        out_ += "}\n";
        break;
      }
      case ModuleAttr::Kind::Alias: // one module, written once
        out_ += "alias ";
        out_ += a.target;
        out_ += '\n';
        break;
      }
    }
    if (auto *t = llvm::dyn_cast<TracedModule>(&m))
      for (const auto &sig : t->signatures())
        graph(sig);
  }

  void nodeList(llvm::ArrayRef<Node *> nodes) {
    out_ += '[';
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i)
        out_ += ", ";
      appendNodeInfo(out_, *nodes[i]);
    }
    out_ += ']';
  }

  void graph(const TracedModule::Signature &sig) {
    const InternalGraph &g = *sig.graph;
    out_ += "graph name=";
    appendPyStringRepr(out_, g.name());
    out_ += " qualname=";
    appendPyStringRepr(out_, g.qualname());
    out_ += " argdef=";
    appendTree(out_, sig.argDef);
    out_ += " outdef=";
    appendTree(out_, sig.outDef);
    out_ += " inputs=[";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Node *n = g.input(i);
      if (i)
        out_ += ", ";
      appendNodeInfo(out_, *n);
      out_ += " #";
      appendInt(out_, n->expr()->id());
      out_ += ' ';
      appendPyStringRepr(out_, llvm::cast<Input>(n->expr())->name());
    }
    out_ += ']';
    // Names the namespace holds besides the nodes' own: the qualname helpers
    // ("method_add") and names of erased nodes, which stay taken.
    std::vector<llvm::StringRef> ownNames;
    ownNames.reserve(g.inputs().size() + g.size());
    for (Node *n : g.inputs())
      ownNames.push_back(n->name());
    for (Expr *e : g)
      for (Node *n : e->outputs())
        ownNames.push_back(n->name());
    std::string reservedStorage;
    std::vector<llvm::StringRef> reserved = namesNotIn(g.ns(), ownNames, reservedStorage);
    sortStringsBytewise(reserved);
    size_t bytes = 0;
    for (llvm::StringRef r : reserved)
      bytes += r.size() + 4;
    ensure(bytes + 16);
    out_ += " reserved=[";
    for (size_t i = 0; i < reserved.size(); ++i) {
      if (i)
        out_ += ", ";
      appendPyStringRepr(out_, reserved[i]);
    }
    out_ += "]\n";

    // Header line (as InternalGraph::str), expr lines with annotations,
    // return line, closing brace; appended to one buffer.
    if (!g.name().empty()) {
      out_ += g.name();
      out_ += ".Graph";
    }
    out_ += " (";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      if (i)
        out_ += ", ";
      printNodeRef(out_, *g.input(i));
    }
    out_ += ") {\n";
    if (g.empty())
      out_ += "\t\n";
    // Reserve the body from the line length seen on the first lines.
    size_t bodyStart = out_.size(), done = 0;
    constexpr size_t Sample = 64;
    ensure(std::min(g.size(), Sample) * 256);
    for (Expr *e : g) {
      out_ += '\t';
      e->print(out_);
      out_ += "\t;; ";
      annotations(*e);
      out_ += '\n';
      flushChunk();
      if (++done == Sample && g.size() > Sample) {
        size_t perLine = (out_.size() - bodyStart) / Sample + 1;
        ensure((g.size() - Sample) * perLine * 9 / 8);
      }
    }
    out_ += "\treturn ";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      if (i)
        out_ += ", ";
      printNodeRef(out_, *g.output(i));
    }
    out_ += "\t;; outs=[";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      out_ += i ? ", %" : "%";
      appendInt(out_, g.output(i)->id());
    }
    out_ += "]\n}\n";
  }

  void annotations(const Expr &e) {
    auto args = [&]() {
      size_t next = 0;
      e.argDef()->printTo(
          out_,
          [&](std::string &o, size_t i) {
            o += '%';
            appendInt(o, e.input(i)->id());
          },
          &next, false);
    };
    switch (e.kind()) {
    case Expr::Kind::GetAttr:
      out_ += "getattr=";
      appendPyStringRepr(out_, llvm::cast<GetAttr>(e).attrName());
      out_ += " base=%";
      appendInt(out_, e.input(0)->id());
      break;
    case Expr::Kind::CallMethod: {
      auto &cm = llvm::cast<CallMethod>(e);
      if (cm.isModuleCall()) {
        out_ += "call";
      } else {
        out_ += "method=";
        out_ += cm.method();
      }
      out_ += " args=";
      args();
      break;
    }
    case Expr::Kind::CallFunction:
      out_ += "fn=";
      out_ += llvm::cast<CallFunction>(e).func().printName();
      out_ += " args=";
      args();
      break;
    case Expr::Kind::Constant: {
      auto &c = llvm::cast<Constant>(e);
      std::string key = "__constants__." + std::to_string(constants_++);
      out_ += "const=";
      appendPyStringRepr(out_, c.name());
      out_ += " value=";
      if (c.isTensor())
        tensorValue("tensor", c.tensor(), key);
      else
        inlineModule(*c.module(), key + ".");
      break;
    }
    case Expr::Kind::Apply: {
      auto &ap = llvm::cast<Apply>(e);
      out_ += "opdef=";
      out_ += ap.opdef().name();
      out_ += " attrs=";
      appendTree(out_, ap.attrs());
      out_ += " inputs=[";
      for (size_t i = 0; i < e.numInputs(); ++i) {
        out_ += i ? ", %" : "%";
        appendInt(out_, e.input(i)->id());
      }
      out_ += ']';
      break;
    }
    case Expr::Kind::Input:
      raise("Input exprs are printed in the graph directive");
    }
    out_ += " outs=";
    nodeList(e.outputs());
    if (e.outDef()) {
      out_ += " outdef=";
      appendTree(out_, *e.outDef());
    }
    if (e.removeDisabled())
      out_ += " keep";
  }

  const TmirWriteOptions &opts_;
  std::optional<Sink> sink_;
  std::string out_;
  size_t constants_ = 0;
  std::map<Identity, int> uses_;
  std::map<Identity, std::string> written_;
};

} // namespace

void appendShape(std::string &out, llvm::ArrayRef<int64_t> shape) {
  out += '(';
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    if (shape[i] >= 0)
      appendInt(out, shape[i]);
    else
      out += dim::str(shape[i]);
  }
  if (shape.size() == 1)
    out += ',';
  out += ')';
}

std::string tensorTypeStr(const Tensor &t) {
  std::string s = dtypeName(t.dtype()).str();
  appendShape(s, t.shape());
  return s;
}

void appendTree(std::string &out, const TreeDef &t) {
  size_t next = 0;
  t.printTo(out, [](std::string &, size_t) {}, &next, false);
}

std::string treeRepr(const TreeDef &t) {
  std::string s;
  appendTree(s, t);
  return s;
}

void appendNodeInfo(std::string &out, const Node &n) {
  out += '%';
  appendInt(out, n.id());
  out += ' ';
  appendPyStringRepr(out, n.name());
  out += ' ';
  if (auto *t = llvm::dyn_cast<TensorNode>(&n)) {
    if (t->hasDType())
      out += dtypeName(t->dtype());
    else
      out += '?';
    if (t->shape())
      appendShape(out, *t->shape());
  } else {
    out += "module<";
    out += llvm::cast<ModuleNode>(n).moduleType().name;
    out += '>';
  }
  out += ' ';
  appendPyStringRepr(out, n.qualname());
}

std::string nodeInfoStr(const Node &n) {
  std::string s;
  appendNodeInfo(s, n);
  return s;
}

std::string printTmir(const TracedModule &m, const TmirWriteOptions &opts) {
  return Printer(opts).run(m);
}

void printTmir(const TracedModule &m, const TmirWriteOptions &opts,
               llvm::function_ref<void(llvm::StringRef)> sink) {
  std::string rest = Printer(opts, sink).run(m);
  if (!rest.empty())
    sink(rest);
}

} // namespace tmg
