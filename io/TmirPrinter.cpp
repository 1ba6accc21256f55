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

#include "TmirCommon.h"

namespace tmg {
namespace {

class Printer {
public:
  explicit Printer(const TmirWriteOptions &o) : opts_(o) {}

  std::string run(const TracedModule &m) {
    out_ += fmt::format("tmir {}\n", TmirVersion);
    if (opts_.weights && !opts_.weightsFile.empty())
      out_ += "weights " + pyStringRepr(opts_.weightsFile) + "\n";
    auto [nn, ne] = m.totalIds();
    out_ += fmt::format("ids {} {}\n", nn, ne);
    std::string header = "module " + m.typeName().str() + " traced";
    if (m.isTop())
      header += " top";
    if (!m.name().empty())
      header += " name=" + pyStringRepr(m.name());
    out_ += header + " {\n";
    moduleBody(m, 1, "");
    out_ += "}\n";
    return std::move(out_);
  }

private:
  static std::string indent(int depth) { return std::string(2 * depth, ' '); }

  std::string tensorData(const Tensor &t, const std::string &key) {
    if (opts_.inlineMaxElements >= 0 && t.numel() <= opts_.inlineMaxElements) {
      std::string s = "[";
      for (int64_t i = 0; i < t.numel(); ++i) {
        if (i)
          s += ", ";
        double v = t.at(i);
        s += isFloat(t.dtype()) ? pyFloatRepr(v) : std::to_string(int64_t(v));
      }
      return s + "]";
    }
    if (opts_.weights)
      opts_.weights->tensors.emplace_back(key, t);
    return "@" + pyStringRepr(key);
  }

  std::string tensorValue(llvm::StringRef word, const Tensor &t,
                          const std::string &key) {
    return word.str() + "(" + tensorTypeStr(t) + ", " + tensorData(t, key) + ")";
  }

  /// `module(Type, {'attr': value, ...})` for a module constant.
  std::string inlineModule(const Module &m, const std::string &keyPrefix) {
    std::string s = "module(" + m.typeName().str() + ", {";
    bool first = true;
    for (const auto &a : m.attrs()) {
      if (!first)
        s += ", ";
      first = false;
      s += pyStringRepr(a.name) + ": ";
      switch (a.kind) {
      case ModuleAttr::Kind::Value: s += treeRepr(a.value); break;
      case ModuleAttr::Kind::Parameter:
        s += tensorValue("param", a.tensor, keyPrefix + a.name);
        break;
      case ModuleAttr::Kind::Buffer:
        s += tensorValue("buffer", a.tensor, keyPrefix + a.name);
        break;
      case ModuleAttr::Kind::Submodule:
        raise("module constant '{}' has a submodule '{}': not supported in "
              ".tmir",
              m.typeName().str(), a.name);
      }
    }
    return s + "})";
  }

  void moduleBody(const Module &m, int depth, const std::string &path) {
    for (const auto &a : m.attrs()) {
      std::string key = path.empty() ? a.name : path + "." + a.name;
      std::string line = indent(depth) + a.name + " = ";
      switch (a.kind) {
      case ModuleAttr::Kind::Value:
        out_ += line + treeRepr(a.value) + "\n";
        break;
      case ModuleAttr::Kind::Parameter:
        out_ += line + tensorValue("param", a.tensor, key) + "\n";
        break;
      case ModuleAttr::Kind::Buffer:
        out_ += line + tensorValue("buffer", a.tensor, key) + "\n";
        break;
      case ModuleAttr::Kind::Submodule: {
        const Module &c = *a.module;
        const char *kind = c.isBuiltin() ? "builtin"
                           : llvm::isa<TracedModule>(&c) ? "traced"
                                                         : "plain";
        std::string h = line + c.typeName().str() + " " + kind;
        if (!c.name().empty())
          h += " name=" + pyStringRepr(c.name());
        out_ += h + " {\n";
        moduleBody(c, depth + 1, key);
        out_ += indent(depth) + "}\n";
        break;
      }
      }
    }
    if (auto *t = llvm::dyn_cast<TracedModule>(&m))
      for (const auto &sig : t->signatures())
        graph(sig);
  }

  std::string nodeList(llvm::ArrayRef<Node *> nodes) {
    std::string s = "[";
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (i)
        s += ", ";
      s += nodeInfoStr(*nodes[i]);
    }
    return s + "]";
  }

  void graph(const TracedModule::Signature &sig) {
    const InternalGraph &g = *sig.graph;
    std::string d = "graph name=" + pyStringRepr(g.name()) +
                    " qualname=" + pyStringRepr(g.qualname()) +
                    " argdef=" + sig.argDef.str() + " outdef=" + sig.outDef.str() +
                    " inputs=[";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Node *n = g.input(i);
      if (i)
        d += ", ";
      d += nodeInfoStr(*n) + " #" + std::to_string(n->expr()->id()) + " " +
           pyStringRepr(llvm::cast<Input>(n->expr())->name());
    }
    d += "]";
    // Names the namespace holds besides the nodes' own: the qualname helpers
    // ("method_add") and names of erased nodes, which stay taken.
    llvm::StringSet<> own;
    for (Node *n : g.inputs())
      own.insert(n->name());
    for (Expr *e : g)
      for (Node *n : e->outputs())
        own.insert(n->name());
    std::vector<std::string> reserved;
    for (const auto &e : g.ns().usedNames())
      if (!own.count(e.getKey()))
        reserved.push_back(e.getKey().str());
    std::sort(reserved.begin(), reserved.end());
    d += " reserved=[";
    for (size_t i = 0; i < reserved.size(); ++i)
      d += (i ? ", " : "") + pyStringRepr(reserved[i]);
    out_ += d + "]\n";

    // Header line (as InternalGraph::str), expr lines with annotations,
    // return line, closing brace; appended to one buffer.
    if (!g.name().empty())
      out_ += g.name() + ".Graph";
    out_ += " (";
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      if (i)
        out_ += ", ";
      out_ += g.input(i)->str();
    }
    out_ += ") {\n";
    if (g.empty())
      out_ += "\t\n";
    for (Expr *e : g) {
      out_ += '\t';
      e->print(out_);
      out_ += "\t;; ";
      out_ += annotations(*e);
      out_ += '\n';
    }
    std::string ret = "\treturn ";
    std::string ids = "[";
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      ret += (i ? ", " : "") + g.output(i)->str();
      ids += (i ? ", %" : "%") + std::to_string(g.output(i)->id());
    }
    out_ += ret + "\t;; outs=" + ids + "]\n}\n";
  }

  std::string annotations(const Expr &e) {
    std::string a;
    auto args = [&]() {
      std::string s;
      size_t next = 0;
      e.argDef()->print(
          s, [&](size_t i) { return "%" + std::to_string(e.input(i)->id()); },
          &next, false);
      return s;
    };
    switch (e.kind()) {
    case Expr::Kind::GetAttr:
      a = "getattr=" + pyStringRepr(llvm::cast<GetAttr>(e).attrName()) +
          " base=%" + std::to_string(e.input(0)->id());
      break;
    case Expr::Kind::CallMethod: {
      auto &cm = llvm::cast<CallMethod>(e);
      a = cm.isModuleCall() ? std::string("call") : "method=" + cm.method().str();
      a += " args=" + args();
      break;
    }
    case Expr::Kind::CallFunction:
      a = "fn=" + llvm::cast<CallFunction>(e).func().printName().str() +
          " args=" + args();
      break;
    case Expr::Kind::Constant: {
      auto &c = llvm::cast<Constant>(e);
      std::string key = "__constants__." + std::to_string(constants_++);
      a = "const=" + pyStringRepr(c.name()) + " value=" +
          (c.isTensor() ? tensorValue("tensor", c.tensor(), key)
                        : inlineModule(*c.module(), key + "."));
      break;
    }
    case Expr::Kind::Apply: {
      auto &ap = llvm::cast<Apply>(e);
      a = "opdef=" + ap.opdef().name().str() + " attrs=" + treeRepr(ap.attrs()) +
          " inputs=[";
      for (size_t i = 0; i < e.numInputs(); ++i)
        a += (i ? ", %" : "%") + std::to_string(e.input(i)->id());
      a += "]";
      break;
    }
    case Expr::Kind::Input:
      raise("Input exprs are printed in the graph directive");
    }
    a += " outs=" + nodeList(e.outputs());
    if (e.outDef())
      a += " outdef=" + e.outDef()->str();
    if (e.removeDisabled())
      a += " keep";
    return a;
  }

  const TmirWriteOptions &opts_;
  std::string out_;
  size_t constants_ = 0;
};

} // namespace

std::string tensorTypeStr(const Tensor &t) {
  return dtypeName(t.dtype()).str() + shapeStr(t.shape());
}

std::string treeRepr(const TreeDef &t) {
  std::string s;
  size_t next = 0;
  t.print(s, [](size_t) { return std::string(); }, &next, false);
  return s;
}

std::string nodeInfoStr(const Node &n) {
  std::string type;
  if (auto *t = llvm::dyn_cast<TensorNode>(&n)) {
    type = t->hasDType() ? dtypeName(t->dtype()).str() : "?";
    if (t->shape())
      type += shapeStr(*t->shape());
  } else {
    type = "module<" + llvm::cast<ModuleNode>(n).moduleType().name + ">";
  }
  return "%" + std::to_string(n.id()) + " " + pyStringRepr(n.name()) + " " +
         type + " " + pyStringRepr(n.qualname());
}

std::string printTmir(const TracedModule &m, const TmirWriteOptions &opts) {
  return Printer(opts).run(m);
}

} // namespace tmg
