//===- Dot.cpp - Graphviz output ------------------------------------------===//
#include "tm/io/Dot.h"

#include <llvm/ADT/DenseMap.h>

#include "TmirCommon.h"

namespace tmg {

static std::string escape(llvm::StringRef s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\t') {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out;
}

static std::string typeLabel(const Node *n) {
  if (auto *t = llvm::dyn_cast<TensorNode>(n)) {
    std::string s = t->hasDType() ? dtypeName(t->dtype()).str() : "?";
    if (t->shape())
      s += dim::dimsStr(*t->shape());
    return s;
  }
  return llvm::cast<ModuleNode>(n)->moduleType().name;
}

namespace {

/// The op family of `e` for --dot-color, from its op or module type name.
const char *familyColor(const Expr *e) {
  std::string name;
  if (auto *cm = llvm::dyn_cast<CallMethod>(e)) {
    if (cm->isModuleCall()) {
      auto *mod = llvm::dyn_cast<ModuleNode>(cm->input(0));
      name = mod ? llvm::StringRef(mod->moduleType().name).lower() : "";
      if (name.empty())
        return "lightcyan";
    } else {
      name = cm->method().str();
    }
  } else if (llvm::isa<CallFunction>(e) || llvm::isa<Apply>(e)) {
    name = e->opSchema()->name().lower();
  } else if (llvm::isa<Constant>(e) || llvm::isa<GetAttr>(e)) {
    return "grey92";
  } else {
    return nullptr;
  }
  llvm::StringRef n(name);
  auto any = [&](std::initializer_list<const char *> ks) {
    for (const char *k : ks)
      if (n.contains(k))
        return true;
    return false;
  };
  if (any({"conv", "linear", "matmul", "gemm", "bmm", "einsum"}))
    return "lightskyblue";
  if (any({"norm"}))
    return "plum";
  if (any({"pool"}))
    return "orange";
  if (any({"relu", "sigmoid", "tanh", "gelu", "silu", "swish", "softmax", "elu", "hardswish",
           "hsigmoid", "clip", "erf"}))
    return "palegreen";
  if (any({"reshape", "flatten", "transpose", "permute", "view", "concat", "split", "squeeze",
           "expand", "broadcast", "getitem", "gather", "slice", "shape", "stack", "pad"}))
    return "lightgrey";
  if (any({"sum", "mean", "max", "min", "prod", "reduce", "argm"}))
    return "khaki";
  if (any({"add", "sub", "mul", "div", "pow", "neg", "sqrt", "exp", "log", "abs"}))
    return "lightyellow";
  return "white";
}

/// Whether `e` is left out under `opts` (its edges go with it).
bool hidden(const Expr *e, const DotOptions &opts) {
  if (auto *ga = llvm::dyn_cast<GetAttr>(e))
    return opts.hideGetAttrs || (opts.hideParams && llvm::isa<TensorNode>(ga->output(0)));
  if (auto *c = llvm::dyn_cast<Constant>(e))
    return opts.hideParams && c->isTensor();
  return false;
}

int depthOf(const std::string &qualifiedName) {
  return qualifiedName.empty() ? 0 : 1 + int(llvm::StringRef(qualifiedName).count('.'));
}

} // namespace

std::string printDot(const TracedModule &m, const DotOptions &opts) {
  std::string out = "digraph tmgraph {\n  compound=true;\n  rankdir=TB;\n"
                    "  node [fontname=\"monospace\", fontsize=10];\n"
                    "  edge [fontname=\"monospace\", fontsize=9];\n";
  llvm::DenseMap<const InternalGraph *, size_t> clusterOf;
  std::vector<const InternalGraph *> graphs;
  const_cast<TracedModule &>(m).namedModules([&](const std::string &name, Module &x) {
    if (opts.maxDepth >= 0 && depthOf(name) > opts.maxDepth)
      return;
    if (auto *t = llvm::dyn_cast<TracedModule>(&x))
      for (const auto &s : t->signatures()) {
        if (clusterOf.count(s.graph.get()))
          continue;
        clusterOf[s.graph.get()] = graphs.size();
        graphs.push_back(s.graph.get());
      }
  });
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const InternalGraph &g = *graphs[gi];
    auto id = [&](const Expr *e) { return fmt::format("g{}_e{}", gi, e->id()); };
    out += fmt::format("  subgraph cluster_{} {{\n    label=\"{}.Graph\";\n"
                       "    style=rounded;\n",
                       gi, escape(g.name()));
    for (Node *in : g.inputs())
      out += fmt::format("    {} [shape=ellipse, label=\"{}\"];\n", id(in->expr()),
                         escape(in->str()));
    for (Expr *e : g) {
      if (hidden(e, opts))
        continue;
      std::string label = e->str();
      label = label.substr(label.find('\t') + 1);
      const char *color = opts.colorByOp ? familyColor(e) : nullptr;
      out += fmt::format("    {} [shape=box, label=\"%{}: {}\"{}];\n", id(e), e->id(),
                         escape(label),
                         color ? fmt::format(", style=filled, fillcolor={}", color) : "");
    }
    std::string ret = fmt::format("g{}_return", gi);
    out += fmt::format("    {} [shape=ellipse, style=dashed, label=\"return\"];\n", ret);
    for (Expr *e : g) {
      if (hidden(e, opts))
        continue;
      for (size_t i = 0; i < e->numInputs(); ++i) {
        Node *n = e->input(i);
        if (hidden(n->expr(), opts))
          continue;
        out += fmt::format("    {} -> {} [label=\"{}\"];\n", id(n->expr()), id(e),
                           escape(typeLabel(n)));
      }
    }
    for (Node *o : g.outputs())
      if (!hidden(o->expr(), opts))
        out += fmt::format("    {} -> {} [label=\"{}\"];\n", id(o->expr()), ret,
                           escape(typeLabel(o)));
    out += "  }\n";
  }
  // Module calls point at the graph they run (when it is drawn).
  for (size_t gi = 0; gi < graphs.size(); ++gi)
    for (Expr *e : *graphs[gi])
      if (auto *cm = llvm::dyn_cast<CallMethod>(e))
        if (InternalGraph *callee = cm->calleeGraph()) {
          auto it = clusterOf.find(callee);
          if (it == clusterOf.end() || callee->inputs().empty())
            continue;
          out += fmt::format("  g{}_e{} -> g{}_e{} [style=dotted, lhead=cluster_{}];\n",
                             gi, e->id(), it->second, callee->input(0)->expr()->id(),
                             it->second);
        }
  return out + "}\n";
}

} // namespace tmg
