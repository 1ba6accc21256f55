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
      s += shapeStr(*t->shape());
    return s;
  }
  return llvm::cast<ModuleNode>(n)->moduleType().name;
}

std::string printDot(const TracedModule &m) {
  std::string out = "digraph tmgraph {\n  compound=true;\n  rankdir=TB;\n"
                    "  node [fontname=\"monospace\", fontsize=10];\n"
                    "  edge [fontname=\"monospace\", fontsize=9];\n";
  llvm::DenseMap<const InternalGraph *, size_t> clusterOf;
  std::vector<const InternalGraph *> graphs;
  const_cast<TracedModule &>(m).namedModules([&](const std::string &, Module &x) {
    if (auto *t = llvm::dyn_cast<TracedModule>(&x))
      for (const auto &s : t->signatures()) {
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
      std::string label = e->str();
      label = label.substr(label.find('\t') + 1);
      out += fmt::format("    {} [shape=box, label=\"%{}: {}\"];\n", id(e), e->id(),
                         escape(label));
    }
    std::string ret = fmt::format("g{}_return", gi);
    out += fmt::format("    {} [shape=ellipse, style=dashed, label=\"return\"];\n", ret);
    for (Expr *e : g)
      for (size_t i = 0; i < e->numInputs(); ++i) {
        Node *n = e->input(i);
        out += fmt::format("    {} -> {} [label=\"{}\"];\n", id(n->expr()), id(e),
                           escape(typeLabel(n)));
      }
    for (Node *o : g.outputs())
      out += fmt::format("    {} -> {} [label=\"{}\"];\n", id(o->expr()), ret,
                         escape(typeLabel(o)));
    out += "  }\n";
  }
  // Module calls point at the graph they run.
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
