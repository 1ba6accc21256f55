//===- Compare.cpp - Structural equality of traced modules ----------------===//
#include <optional>

#include "TmirCommon.h"

namespace tmg {
namespace {

struct Comparer {
  std::optional<std::string> diff;

  bool fail(std::string what) {
    if (!diff)
      diff = std::move(what);
    return false;
  }

  bool nodes(const Node *a, const Node *b, const std::string &where) {
    if (nodeInfoStr(*a) != nodeInfoStr(*b))
      return fail(fmt::format("{}: node {} differs from {}", where,
                              nodeInfoStr(*a), nodeInfoStr(*b)));
    return true;
  }

  bool tensors(const Tensor &a, const Tensor &b, const std::string &where) {
    if (!a.bitwiseEqual(b))
      return fail(fmt::format("{}: tensors differ ({} vs {})", where, a.str(), b.str()));
    return true;
  }

  bool modules(const Module &a, const Module &b, const std::string &path) {
    std::string where = path.empty() ? "module" : "module '" + path + "'";
    if (a.typeName() != b.typeName() || a.kind() != b.kind() ||
        a.name() != b.name() || &a.type() != &b.type())
      return fail(fmt::format("{}: type {} vs {}", where, a.typeName().str(),
                              b.typeName().str()));
    if (a.attrs().size() != b.attrs().size())
      return fail(fmt::format("{}: {} attributes vs {}", where, a.attrs().size(),
                              b.attrs().size()));
    for (size_t i = 0; i < a.attrs().size(); ++i) {
      const ModuleAttr &x = a.attrs()[i], &y = b.attrs()[i];
      std::string ap = path.empty() ? x.name : path + "." + x.name;
      if (x.name != y.name || x.kind != y.kind)
        return fail(fmt::format("{}: attribute {} is '{}' vs '{}'", where, i,
                                x.name, y.name));
      switch (x.kind) {
      case ModuleAttr::Kind::Value:
        if (x.value != y.value)
          return fail(fmt::format("{}: value {} vs {}", ap, x.value.str(), y.value.str()));
        break;
      case ModuleAttr::Kind::Parameter:
      case ModuleAttr::Kind::Buffer:
        if (!tensors(x.tensor, y.tensor, ap))
          return false;
        break;
      case ModuleAttr::Kind::Submodule:
        if (!modules(*x.module, *y.module, ap))
          return false;
        break;
      case ModuleAttr::Kind::Alias:
        if (x.target != y.target)
          return fail(fmt::format("{}: alias of '{}' vs '{}'", ap, x.target, y.target));
        break;
      }
    }
    auto *ta = llvm::dyn_cast<TracedModule>(&a);
    auto *tb = llvm::dyn_cast<TracedModule>(&b);
    if (!ta)
      return true;
    if (ta->isTop() != tb->isTop())
      return fail(where + ": top flags differ");
    if (ta->numGraphs() != tb->numGraphs())
      return fail(fmt::format("{}: {} graphs vs {}", where, ta->numGraphs(), tb->numGraphs()));
    for (size_t i = 0; i < ta->numGraphs(); ++i) {
      const auto &sa = ta->signatures()[i], &sb = tb->signatures()[i];
      if (sa.argDef != sb.argDef || sa.outDef != sb.outDef)
        return fail(fmt::format("{}: signature {} -> {} vs {} -> {}", where,
                                sa.argDef.str(), sa.outDef.str(), sb.argDef.str(),
                                sb.outDef.str()));
      if (!graphs(*sa.graph, *sb.graph))
        return false;
    }
    return true;
  }

  bool graphs(const InternalGraph &a, const InternalGraph &b) {
    std::string where = "graph '" + a.name() + "'";
    if (a.name() != b.name() || a.qualname() != b.qualname())
      return fail(fmt::format("{}: name/qualname {} {} vs {} {}", where, a.name(),
                              a.qualname(), b.name(), b.qualname()));
    if (a.inputs().size() != b.inputs().size() || a.size() != b.size() ||
        a.outputs().size() != b.outputs().size())
      return fail(where + ": sizes differ");
    for (size_t i = 0; i < a.inputs().size(); ++i) {
      if (!nodes(a.input(i), b.input(i), where))
        return false;
      if (a.input(i)->expr()->id() != b.input(i)->expr()->id())
        return fail(where + ": input expr ids differ");
    }
    for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
      const Expr *x = *ia, *y = *ib;
      if (x->kind() != y->kind() || x->id() != y->id() || x->str() != y->str())
        return fail(fmt::format("{}: expr '{}' vs '{}'", where, x->str(), y->str()));
      if (x->argDef() != y->argDef() || x->outDef() != y->outDef() ||
          x->removeDisabled() != y->removeDisabled())
        return fail(fmt::format("{}: expr %{} structure differs", where, x->id()));
      if (x->numInputs() != y->numInputs() || x->numOutputs() != y->numOutputs())
        return fail(fmt::format("{}: expr %{} arity differs", where, x->id()));
      for (size_t i = 0; i < x->numInputs(); ++i)
        if (x->input(i)->id() != y->input(i)->id())
          return fail(fmt::format("{}: expr %{} input {} differs", where, x->id(), i));
      for (size_t i = 0; i < x->numOutputs(); ++i)
        if (!nodes(x->output(i), y->output(i), where))
          return false;
      if (auto *c = llvm::dyn_cast<Constant>(x)) {
        auto *d = llvm::cast<Constant>(y);
        if (c->isTensor() != d->isTensor())
          return fail(where + ": constant kinds differ");
        if (c->isTensor() ? !tensors(c->tensor(), d->tensor(), where)
                          : !modules(*c->module(), *d->module(), where + " constant"))
          return false;
      }
      if (auto *p = llvm::dyn_cast<Apply>(x))
        if (p->attrs() != llvm::cast<Apply>(y)->attrs())
          return fail(where + ": op-def attributes differ");
    }
    for (size_t i = 0; i < a.outputs().size(); ++i)
      if (a.output(i)->id() != b.output(i)->id())
        return fail(where + ": outputs differ");
    std::vector<std::string> na, nb;
    a.ns().forEachUsedName([&](llvm::StringRef n) { na.push_back(n.str()); });
    b.ns().forEachUsedName([&](llvm::StringRef n) { nb.push_back(n.str()); });
    std::sort(na.begin(), na.end());
    std::sort(nb.begin(), nb.end());
    if (na != nb)
      return fail(where + ": namespaces differ");
    return true;
  }
};

} // namespace

std::optional<std::string> compareModules(const TracedModule &a,
                                          const TracedModule &b) {
  Comparer c;
  if (a.totalIds() != b.totalIds())
    return fmt::format("total ids ({}, {}) vs ({}, {})", a.totalIds().first,
                       a.totalIds().second, b.totalIds().first, b.totalIds().second);
  c.modules(a, b, "");
  return c.diff;
}

} // namespace tmg
