//===- TmirLoaders.cpp - Upgrading older .tmir files ----------------------===//
#include "tm/io/TmirLoaders.h"

#include <algorithm>

#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// TmirCall
//===----------------------------------------------------------------------===//

TmirArg *TmirCall::kwarg(llvm::StringRef n) {
  for (auto &[k, v] : kwargs)
    if (k == n)
      return &v;
  return nullptr;
}

void TmirCall::setKwarg(llvm::StringRef n, TmirArg v) {
  if (TmirArg *a = kwarg(n))
    *a = std::move(v);
  else
    kwargs.emplace_back(n.str(), std::move(v));
}

bool TmirCall::eraseKwarg(llvm::StringRef n) {
  auto it = std::find_if(kwargs.begin(), kwargs.end(),
                         [&](const auto &kv) { return kv.first == n; });
  if (it == kwargs.end())
    return false;
  kwargs.erase(it);
  return true;
}

void TmirCall::moveToKeywords(size_t index, llvm::ArrayRef<std::string> names) {
  for (size_t i = index; i < args.size() && i - index < names.size(); ++i)
    setKwarg(names[i - index], std::move(args[i]));
  if (index < args.size())
    args.resize(index);
}

TmirCall splitCallArgs(const TreeDef &args, llvm::ArrayRef<int64_t> nodes) {
  TmirCall c;
  size_t next = 0;
  auto take = [&](const TreeDef &d) {
    TmirArg a{d, {}};
    size_t n = std::min(d.numLeaves(), nodes.size() - next);
    a.nodes.assign(nodes.begin() + next, nodes.begin() + next + n);
    next += n;
    return a;
  };
  const TreeDef &pos = args.child(0);
  for (size_t i = 0; i < pos.numChildren(); ++i)
    c.args.push_back(take(pos.child(i)));
  const TreeDef &kw = args.child(1);
  for (size_t i = 0; i < kw.numChildren(); ++i)
    c.kwargs.emplace_back(kw.key(i).getString(), take(kw.child(i)));
  return c;
}

TreeDef joinCallArgs(const TmirCall &c, std::vector<int64_t> &nodes) {
  nodes.clear();
  std::vector<TreeDef> pos;
  for (const TmirArg &a : c.args) {
    pos.push_back(a.def);
    nodes.insert(nodes.end(), a.nodes.begin(), a.nodes.end());
  }
  std::vector<const std::pair<std::string, TmirArg> *> kws;
  for (const auto &kv : c.kwargs)
    kws.push_back(&kv);
  std::sort(kws.begin(), kws.end(), [](auto *a, auto *b) { return a->first < b->first; });
  std::vector<std::pair<Scalar, TreeDef>> kw;
  for (const auto *kv : kws) {
    kw.emplace_back(Scalar(kv->first), kv->second.def);
    nodes.insert(nodes.end(), kv->second.nodes.begin(), kv->second.nodes.end());
  }
  return makeArgDef(std::move(pos), std::move(kw));
}

//===----------------------------------------------------------------------===//
// Registries
//===----------------------------------------------------------------------===//

template <typename Fn>
void TmirLoaders::add(Table<Fn> &t, llvm::StringRef key, int64_t upTo, Fn fn,
                      llvm::StringRef what) {
  if (!fn)
    raise("a {} loader for '{}' needs a function", what.str(), key.str());
  auto &list = t[key.str()];
  for (const auto &e : list)
    if (e.upTo == upTo)
      raise("a {} loader for '{}' up to version {} is already registered", what.str(),
            key.str(), upTo);
  list.push_back({upTo, std::move(fn)});
  std::stable_sort(list.begin(), list.end(),
                   [](const auto &a, const auto &b) { return a.upTo < b.upTo; });
}

void TmirLoaders::registerFunctionLoader(llvm::StringRef n, int64_t upTo, CallLoader fn) {
  add(functions_, n, upTo, std::move(fn), "function");
}
void TmirLoaders::registerTensorMethodLoader(llvm::StringRef n, int64_t upTo, CallLoader fn) {
  add(methods_, n, upTo, std::move(fn), "tensor method");
}
void TmirLoaders::registerOpDefLoader(llvm::StringRef n, int64_t upTo, CallLoader fn) {
  add(opdefs_, n, upTo, std::move(fn), "op def");
}
void TmirLoaders::registerModuleLoader(llvm::StringRef n, int64_t upTo, ModuleLoader fn) {
  add(modules_, n, upTo, std::move(fn), "module");
}

void TmirLoaders::registerGraphLoader(int64_t upTo, GraphHeaderLoader header,
                                      GraphLoader body) {
  if (!header && !body)
    raise("a graph loader needs a header or a body function");
  for (const auto &e : graphs_)
    if (e.upTo == upTo)
      raise("a graph loader up to version {} is already registered", upTo);
  graphs_.push_back({upTo, {std::move(header), std::move(body)}});
  std::stable_sort(graphs_.begin(), graphs_.end(),
                   [](const auto &a, const auto &b) { return a.upTo < b.upTo; });
}

const TmirLoaders::Table<TmirLoaders::CallLoader> &
TmirLoaders::calls(TmirLoaderKind kind) const {
  switch (kind) {
  case TmirLoaderKind::Function: return functions_;
  case TmirLoaderKind::TensorMethod: return methods_;
  case TmirLoaderKind::OpDef: return opdefs_;
  case TmirLoaderKind::Module:
  case TmirLoaderKind::Graph: break;
  }
  raise("no call loaders for modules or graphs");
}

bool TmirLoaders::hasCallLoader(TmirLoaderKind kind, llvm::StringRef name,
                                int64_t version) const {
  const auto &t = calls(kind);
  if (t.empty())
    return false;
  auto it = t.find(name);
  return it != t.end() && !it->second.empty() && it->second.back().upTo >= version;
}

void TmirLoaders::upgradeCall(TmirLoaderKind kind, TmirCall &c) const {
  const auto &t = calls(kind);
  // A loader may rename the call; loaders of the new name continue from the
  // version after the renaming loader's.
  int64_t from = c.version;
  for (size_t renames = 0; renames < 16; ++renames) {
    auto it = t.find(c.name);
    if (it == t.end())
      return;
    std::string name = c.name;
    bool renamed = false;
    for (const auto &e : it->second) {
      if (e.upTo < from)
        continue;
      e.fn(c);
      if (c.name != name) {
        from = e.upTo + 1;
        renamed = true;
        break;
      }
    }
    if (!renamed)
      return;
  }
  throw Error(c.loc, fmt::format("loaders rename '{}' in a cycle", c.name));
}

void TmirLoaders::upgradeModule(Module &m, int64_t version) const {
  auto it = modules_.find(m.typeName());
  if (it == modules_.end())
    return;
  for (const auto &e : it->second)
    if (e.upTo >= version)
      e.fn(m, version);
}

void TmirLoaders::upgradeGraphHeader(TmirGraphHeader &h) const {
  for (const auto &e : graphs_)
    if (e.upTo >= h.version && e.fn.first)
      e.fn.first(h);
}

void TmirLoaders::upgradeGraph(InternalGraph &g, int64_t version) const {
  for (const auto &e : graphs_)
    if (e.upTo >= version && e.fn.second)
      e.fn.second(g, version);
}

//===----------------------------------------------------------------------===//
// tmgraph's own upgrades
//===----------------------------------------------------------------------===//

namespace {

/// Version 0 wrote a graph's qualname as `module_name` and its name without
/// the `prefix_name` of its parent, as MegEngine's old pickles
/// (`_module_name`, `_prefix_name`).
void v0GraphHeader(TmirGraphHeader &h) {
  auto take = [&](const char *k, std::string &to) {
    auto it = h.legacyFields.find(k);
    if (it == h.legacyFields.end())
      return false;
    to = it->second;
    h.legacyFields.erase(it);
    return true;
  };
  std::string qual, prefix;
  if (take("module_name", qual)) {
    h.qualname = qual;
    h.hasQualname = true;
  }
  if (take("prefix_name", prefix) && !prefix.empty())
    h.name = prefix + "_" + h.name;
}

/// Version 0 stored node names relative to their module (`_orig_name`);
/// they become qualnames as the reference's Node `__setstate__` does.
void v0GraphBody(InternalGraph &g, int64_t) {
  std::vector<Node *> nodes = g.nodes(false).asList();
  for (Node *n : nodes) {
    if (!llvm::isa<TensorNode>(n))
      continue;
    llvm::StringRef orig = n->qualname();
    auto [modPath, last] = orig.rsplit('.');
    bool dotted = orig.contains('.');
    if (!dotted) {
      last = orig;
      modPath = "";
    }
    std::string q = last.str();
    if (!llvm::isa<GetAttr>(n->expr()) && !q.empty())
      q = "[" + q + "]";
    if (dotted)
      q = modPath.str() + "." + q;
    n->setQualname(q);
  }
  for (Node *n : nodes) {
    if (isCallModule(n->expr())) {
      n->setQualname(n->expr()->input(0)->qualname().str() + ".[out]");
      continue;
    }
    std::string q = g.qualname();
    if (!n->qualname().empty())
      q += "." + n->qualname().str();
    n->setQualname(q);
  }
}

/// Up to version 1, `tensor.zeros/ones/full/arange` took dtype and device
/// positionally; they are keyword-only, as in MegEngine (whose compat.py
/// makes the same move for `arange` and `full`).
TmirLoaders::CallLoader creationKeywords(size_t firstKeyword) {
  return [firstKeyword](TmirCall &c) {
    static const std::string names[] = {"dtype", "device"};
    if (c.args.size() > firstKeyword + 2)
      throw Error(c.loc, fmt::format("{} takes {} positional arguments, not {}", c.name,
                                     firstKeyword + 2, c.args.size()));
    c.moveToKeywords(firstKeyword, names);
  };
}

/// Up to version 2 five functions, up to version 3 `einsum`, were printed
/// under a functional submodule other than the one MegEngine defines them
/// in; the printed prefix is the reference's `func.__module__`.
TmirLoaders::CallLoader renamedTo(std::string name) {
  return [name = std::move(name)](TmirCall &c) { c.name = name; };
}

TmirLoaders makeBuiltin() {
  TmirLoaders l;
  l.registerGraphLoader(0, v0GraphHeader, v0GraphBody);
  l.registerFunctionLoader("tensor.zeros", 1, creationKeywords(1));
  l.registerFunctionLoader("tensor.ones", 1, creationKeywords(1));
  l.registerFunctionLoader("tensor.full", 1, creationKeywords(2));
  l.registerFunctionLoader("tensor.arange", 1, creationKeywords(3));
  l.registerFunctionLoader("elemwise.sign", 2, renamedTo("math.sign"));
  l.registerFunctionLoader("elemwise.isnan", 2, renamedTo("math.isnan"));
  l.registerFunctionLoader("elemwise.isinf", 2, renamedTo("math.isinf"));
  l.registerFunctionLoader("math.cumsum", 2, renamedTo("tensor.cumsum"));
  l.registerFunctionLoader("nn.interpolate", 2, renamedTo("vision.interpolate"));
  l.registerFunctionLoader("math.einsum", 3, renamedTo("einsum.einsum"));
  return l;
}

} // namespace

const TmirLoaders &TmirLoaders::builtin() {
  static const TmirLoaders l = makeBuiltin();
  return l;
}

} // namespace tmg
