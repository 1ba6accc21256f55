//===- Builder.cpp - Build graphs expr by expr ----------------------------===//
#include "tm/ir/Builder.h"

#include <functional>

#include "tm/ir/Diagnostic.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// Arg
//===----------------------------------------------------------------------===//

Arg Arg::tuple(std::vector<Arg> items) {
  Arg a(Kind::Tuple);
  a.items_ = std::move(items);
  return a;
}
Arg Arg::list(std::vector<Arg> items) {
  Arg a(Kind::List);
  a.items_ = std::move(items);
  return a;
}
Arg Arg::dict(std::vector<std::pair<Scalar, Arg>> items) {
  Arg a(Kind::Dict);
  for (auto &[k, v] : items) {
    a.keys_.push_back(k);
    a.items_.push_back(std::move(v));
  }
  return a;
}
Arg Arg::slice(Arg start, Arg stop, Arg step) {
  Arg a(Kind::Slice);
  a.items_ = {std::move(start), std::move(stop), std::move(step)};
  return a;
}
Arg Arg::ints(llvm::ArrayRef<int64_t> v) {
  std::vector<Arg> items;
  for (int64_t x : v)
    items.emplace_back(x);
  return tuple(std::move(items));
}

TreeDef Arg::flatten(std::vector<Node *> &nodes) const {
  switch (kind_) {
  case Kind::Node:
    if (!node_)
      raise("argument node is null");
    nodes.push_back(node_);
    return TreeDef::leaf(llvm::isa<ModuleNode>(node_) ? TreeDef::LeafType::Module
                                                      : TreeDef::LeafType::Tensor);
  case Kind::Scalar:
    return TreeDef::constant(scalar_);
  case Kind::Tuple:
  case Kind::List: {
    std::vector<TreeDef> c;
    for (const Arg &a : items_)
      c.push_back(a.flatten(nodes));
    return kind_ == Kind::Tuple ? TreeDef::tuple(std::move(c))
                                : TreeDef::list(std::move(c));
  }
  case Kind::Dict: {
    // Python flattens dict values in sorted key order: sort first so the
    // node order matches the TreeDef.
    std::vector<size_t> order(items_.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return keys_[a] < keys_[b]; });
    std::vector<std::pair<Scalar, TreeDef>> c;
    for (size_t i : order)
      c.emplace_back(keys_[i], items_[i].flatten(nodes));
    return TreeDef::dict(std::move(c));
  }
  case Kind::Slice: {
    // In order: the leaves are numbered start, stop, step.
    TreeDef start = items_[0].flatten(nodes);
    TreeDef stop = items_[1].flatten(nodes);
    return TreeDef::slice(std::move(start), std::move(stop), items_[2].flatten(nodes));
  }
  }
  return TreeDef();
}

//===----------------------------------------------------------------------===//
// GraphBuilder
//===----------------------------------------------------------------------===//

GraphBuilder GraphBuilder::top(TracedModule &mod, std::vector<InputSpec> inputs) {
  if (mod.numGraphs() != 0)
    raise("module '{}' already has a graph; GraphBuilder::top builds the "
          "first one",
          mod.typeName().str());
  mod.setTop(true);
  mod.setTotalIds(0, 0);
  std::string qual = mod.name().empty() ? mod.typeName().str() : mod.name();
  std::vector<TreeDef> pos = {TreeDef::leaf(TreeDef::LeafType::Module)};
  for (size_t i = 0; i < inputs.size(); ++i)
    pos.push_back(TreeDef());
  NameSpace scope("top", qual);
  InternalGraph &g =
      mod.addGraph(makeArgDef(std::move(pos)), scope.createUniqueName(qual), qual);
  ModuleNode *self = g.addModuleInput("self", qual);
  self->setOwner(&mod);
  for (auto &in : inputs)
    g.addTensorInput(in.name, in.shape, in.dtype);
  return GraphBuilder(mod, g, true);
}

GraphBuilder GraphBuilder::into(InternalGraph &g) {
  if (!g.owner())
    raise("graph '{}' has no owning module to build into", g.name());
  return GraphBuilder(*g.owner(), g, false);
}

Node *GraphBuilder::getAttr(Node *base, llvm::StringRef attr) {
  auto *mn = llvm::dyn_cast_or_null<ModuleNode>(base);
  if (!mn)
    raise("getattr: the base '{}' is not a module node",
          base ? base->str() : "null");
  Module *owner = mn->owner();
  if (!owner)
    raise("getattr: module node '{}' has no module", mn->str());
  auto [path, last] = attr.rsplit('.');
  if (!attr.contains('.')) {
    path = "";
    last = attr;
  }
  Module *holder = owner->resolveModule(path);
  const ModuleAttr *a = holder ? holder->attr(last) : nullptr;
  if (!a || a->kind == ModuleAttr::Kind::Value ||
      (a->kind == ModuleAttr::Kind::Alias && !holder->module(last)))
    raise("module '{}' has no {}attribute '{}'", owner->typeName().str(),
          a ? "module or tensor " : "", attr.str());
  auto *e = g_->create<GetAttr>(attr.str());
  e->addInput(mn);
  if (Module *sub = holder->module(last)) { // a submodule, or an alias of one
    ModuleNode *out = g_->newModuleOutput(*e);
    out->setOwner(sub);
    out->setModuleType(sub->isBuiltin() ? sub->type() : moduleBaseType());
  } else {
    TensorNode *out = g_->newTensorOutput(*e);
    out->setShape(Shape(a->tensor.shape().begin(), a->tensor.shape().end()));
    out->setDType(a->tensor.dtype());
    out->setHasDType(true);
  }
  g_->ns().autoNameOutputs(*e);
  return e->output(0);
}

Node *GraphBuilder::constant(Tensor t, llvm::StringRef name) {
  if (!t.defined())
    raise("constant: tensor is undefined");
  auto *e = g_->create<Constant>(t, name.str());
  TensorNode *out = g_->newTensorOutput(*e);
  out->setShape(Shape(t.shape().begin(), t.shape().end()));
  out->setDType(t.dtype());
  out->setHasDType(true);
  g_->ns().autoNameOutputs(*e);
  return out;
}

Node *GraphBuilder::constant(std::unique_ptr<Module> m, llvm::StringRef name) {
  if (!m || !m->isBuiltin())
    raise("constant: only builtin modules can be constants");
  Module *raw = m.get();
  auto *e = g_->create<Constant>(std::move(m), name.str());
  ModuleNode *out = g_->newModuleOutput(*e);
  out->setOwner(raw);
  out->setModuleType(raw->type());
  g_->ns().autoNameOutputs(*e);
  return out;
}

namespace {

/// Binding positional-only calls, cached. With no keyword arguments, the
/// argument TreeDef of a call depends only on the schema and the given
/// arguments' TreeDefs (a node leaf, a constant, a tuple...): a graph makes
/// thousands of `add(x, y)` and `relu(x)`, and each would otherwise bind
/// parameters and build three TreeDefs. A small direct-mapped per-thread
/// cache keyed by the schema and the given TreeDefs (compared by value; it
/// changes no result).
/// Kept: bench/vs-mlir-opt.sh, tm-opt -p compile of the 2*10^5-expr .onnx
/// takes 15% more CPU without it and TreeDef interning (3.43 vs 2.99 s).
struct BindCache {
  static constexpr size_t MaxArgs = 6, Slots = 128;
  struct Entry {
    const OpSchema *schema = nullptr;
    size_t n = 0;
    TreeDef given[MaxArgs];
    TreeDef result;
  };
  Entry slots[Slots];
};

BindCache &bindCache() {
  static thread_local BindCache cache;
  return cache;
}

/// Binds a call to the parameters of `s` as Python does, for `n`
/// positional arguments: `positional(i)` gives the TreeDef of argument i
/// and `keyword(name)` that of a keyword argument (or nullopt), each
/// flattening its nodes when called. Returns the arguments as written,
/// `((positional...), {keyword...})` with the keywords in sorted key order
/// (the node order), defaults not filled in (readers take them from the
/// schema: Expr::namedArg), or raises the error Python raises for the call.
template <class Positional, class Keyword, class HasKeyword>
TreeDef bindArgs(const OpSchema &s, size_t n, Positional &&positional, Keyword &&keyword,
                 HasKeyword &&hasKeyword) {
  llvm::ArrayRef<uint32_t> params = s.positionalParams();
  if (n > params.size() && s.variadicParam() < 0)
    raise("{}() takes {} positional arguments but {} were given",
          s.printName().str(), params.size(), n);
  std::vector<TreeDef> pos;
  pos.reserve(n);
  for (size_t i = 0; i < n; ++i)
    pos.push_back(positional(i));
  std::vector<std::string> names;
  for (size_t i = n; i < params.size(); ++i) {
    const OpParam &p = s.params()[params[i]];
    if (hasKeyword(p.name))
      names.push_back(p.name);
    else if (!p.hasDefault)
      raise("{}() missing required argument '{}'", s.printName().str(), p.name);
  }
  for (uint32_t k : s.keywordOnlyParams()) {
    const OpParam &p = s.params()[k];
    if (hasKeyword(p.name))
      names.push_back(p.name);
    else if (!p.hasDefault)
      raise("{}() missing required keyword argument '{}'", s.printName().str(), p.name);
  }
  std::sort(names.begin(), names.end());
  std::vector<std::pair<Scalar, TreeDef>> kw;
  for (const std::string &name : names)
    kw.emplace_back(Scalar(name), *keyword(name));
  return makeArgDef(std::move(pos), std::move(kw));
}

} // namespace

TreeDef GraphBuilder::normalize(const OpSchema &s, std::vector<Arg> &args,
                                std::vector<KwArg> &kwargs, bool isMethod,
                                std::vector<Node *> &nodes) {
  (void)isMethod;
  if (kwargs.empty() && args.size() <= BindCache::MaxArgs) {
    // Without keywords the nodes flatten in argument order. (Only the n
    // TreeDefs given are constructed: each one costs reference counting.)
    llvm::SmallVector<TreeDef, BindCache::MaxArgs> given;
    const size_t n = args.size();
    uint64_t h = uint64_t(reinterpret_cast<uintptr_t>(&s)) ^ n;
    for (size_t i = 0; i < n; ++i) {
      given.push_back(args[i].flatten(nodes));
      h = (h ^ uint64_t(given[i].hash())) * 0x9E3779B97F4A7C15ull;
    }
    BindCache::Entry &e = bindCache().slots[(h >> 32) % BindCache::Slots];
    bool hit = e.schema == &s && e.n == n;
    for (size_t i = 0; hit && i < n; ++i)
      // (The hashes tell -0.0 from 0.0, which compare equal.)
      hit = e.given[i].hash() == given[i].hash() && e.given[i] == given[i];
    if (hit)
      return e.result;
    TreeDef r = bindArgs(
        s, n, [&](size_t i) { return given[i]; },
        [](const std::string &) { return std::optional<TreeDef>(); },
        [](const std::string &) { return false; });
    e.schema = &s;
    e.n = n;
    for (size_t i = 0; i < n; ++i)
      e.given[i] = std::move(given[i]);
    e.result = r;
    return r;
  }
  auto positional = [&](size_t i) {
    if (i < s.positionalParams().size()) {
      const std::string &name = s.params()[s.positionalParams()[i]].name;
      for (const auto &kw : kwargs)
        if (kw.first == name)
          raise("{}() got multiple values for argument '{}'", s.printName().str(), name);
    }
    return args[i].flatten(nodes);
  };
  auto keyword = [&](const std::string &name) -> std::optional<TreeDef> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it)
      if (it->first == name) {
        Arg a = std::move(it->second);
        kwargs.erase(it);
        return a.flatten(nodes);
      }
    return std::nullopt;
  };
  auto hasKeyword = [&](const std::string &name) {
    for (const auto &kw : kwargs)
      if (kw.first == name)
        return true;
    return false;
  };
  TreeDef def = bindArgs(s, args.size(), positional, keyword, hasKeyword);
  if (!kwargs.empty())
    raise("{}() got an unexpected keyword argument '{}'", s.printName().str(),
          kwargs.front().first);
  return def;
}

void GraphBuilder::addOutputs(Expr &e, size_t n, llvm::MutableArrayRef<OutputType> types) {
  if (!types.empty() && types.size() != n)
    raise("expr %{}: {} output types given for {} outputs", e.id(),
          types.size(), n);
  for (size_t i = 0; i < n; ++i) {
    TensorNode *o = g_->newTensorOutput(e);
    if (!types.empty()) {
      o->setShape(std::move(types[i].shape));
      if (types[i].dtype) {
        o->setDType(*types[i].dtype);
        o->setHasDType(true);
      }
    }
  }
  if (n == 1)
    e.setOutDef(TreeDef());
  else if (n > 1)
    e.setOutDef(TreeDef::tupleOfLeaves(n));
}

void GraphBuilder::finishCall(Expr &e, size_t n, std::vector<OutputType> types) {
  try {
    if (types.empty()) {
      if (std::optional<TensorTypes> inferred = inferTypes(e)) {
        if (inferred->size() != n)
          raiseAt(Location::atExpr(e.id()),
                  "{} produces {} outputs but {} were requested",
                  llvm::isa<CallFunction>(e)
                      ? llvm::cast<CallFunction>(e).func().printName().str()
                      : std::string(e.kindName()),
                  inferred->size(), n);
        addOutputs(e, n, *inferred);
        return;
      }
    }
    addOutputs(e, n, types);
  } catch (const Error &) {
    e.dropAllInputs();
    g_->removeExpr(&e).reset();
    throw;
  }
}

static void checkInGraph(InternalGraph &g, llvm::ArrayRef<Node *> nodes,
                         llvm::StringRef what) {
  for (Node *n : nodes)
    if (n->graph() != &g)
      raise("{}: node '{}' is not in graph '{}'", what.str(), n->str(),
            g.name());
}

llvm::SmallVector<Node *, 1>
GraphBuilder::callFunctionN(const OpSchema &fn, std::vector<Arg> args,
                            std::vector<KwArg> kwargs, size_t numOutputs,
                            std::vector<OutputType> types) {
  if (fn.opClass() != OpClass::Function)
    raise("'{}' is not a function", fn.printName().str());
  std::vector<Node *> nodes;
  TreeDef def = normalize(fn, args, kwargs, false, nodes);
  checkInGraph(*g_, nodes, fn.printName());
  auto *e = g_->create<CallFunction>(fn);
  e->setArgs(def, nodes);
  finishCall(*e, numOutputs, std::move(types));
  g_->ns().autoNameOutputs(*e);
  return llvm::SmallVector<Node *, 1>(e->outputs().begin(), e->outputs().end());
}

Node *GraphBuilder::callFunction(const OpSchema &fn, std::vector<Arg> args,
                                 std::vector<KwArg> kwargs,
                                 std::optional<OutputType> type) {
  std::vector<OutputType> types;
  if (type)
    types.push_back(*type);
  return callFunctionN(fn, std::move(args), std::move(kwargs), 1, types)[0];
}

Node *GraphBuilder::callFunction(llvm::StringRef fn, std::vector<Arg> args,
                                 std::vector<KwArg> kwargs,
                                 std::optional<OutputType> type) {
  return callFunction(functionOp(fn), std::move(args), std::move(kwargs), type);
}

CallMethod *GraphBuilder::callMethodExpr(Node *self, const OpSchema &method,
                                         std::vector<Arg> args,
                                         std::vector<KwArg> kwargs,
                                         size_t numOutputs,
                                         std::vector<OutputType> types) {
  if (method.opClass() != OpClass::TensorMethod)
    raise("'{}' is not a tensor method", method.printName().str());
  if (!llvm::isa_and_nonnull<TensorNode>(self))
    raise("{}: the receiver must be a tensor node", method.name().str());
  args.insert(args.begin(), Arg(self));
  std::vector<Node *> nodes;
  TreeDef def = normalize(method, args, kwargs, true, nodes);
  checkInGraph(*g_, nodes, method.name());
  auto *e = g_->create<CallMethod>(method);
  e->setArgs(def, nodes);
  finishCall(*e, numOutputs, std::move(types));
  g_->ns().autoNameOutputs(*e);
  return e;
}

Node *GraphBuilder::callMethod(Node *self, llvm::StringRef method,
                               std::vector<Arg> args, std::vector<KwArg> kwargs,
                               std::optional<OutputType> type) {
  std::vector<OutputType> types;
  if (type)
    types.push_back(*type);
  CallMethod *e = callMethodExpr(self, methodOp(method), std::move(args),
                                 std::move(kwargs), 1, types);
  return e->output(0);
}

/// Names graph inputs after forward's parameters (the reference's
/// getcallargs mapping): `name` for a single tensor, `name_0`, `name_1`...
/// for the leaves of a container. `add(name, leafIndex)` creates input
/// number `leafIndex` of the container.
static void addCallInputs(const TreeDef &def, const std::string &name,
                          const std::function<void(const std::string &)> &add) {
  size_t leaves = def.numLeaves();
  for (size_t i = 0; i < leaves; ++i)
    add(def.isLeaf() ? name : name + "_" + std::to_string(i));
}

/// Inputs of `sub` for the signature `pos`/`kw` (pos[0] is self), named
/// after `paramNames`; `add(name)` creates the next one.
static void addSignatureInputs(const TreeDef &argDef,
                               llvm::ArrayRef<std::string> paramNames,
                               const std::function<void(const std::string &)> &add) {
  const TreeDef &pos = argDef.child(0);
  for (size_t i = 1; i < pos.numChildren(); ++i) {
    std::string n = i - 1 < paramNames.size() ? paramNames[i - 1]
                                              : "arg_" + std::to_string(i - 1);
    addCallInputs(pos.child(i), n, add);
  }
  if (argDef.numChildren() > 1) {
    const TreeDef &kw = argDef.child(1);
    for (size_t i = 0; i < kw.numChildren(); ++i)
      addCallInputs(kw.child(i), kw.key(i).str(), add);
  }
}

GraphBuilder GraphBuilder::top(TracedModule &mod, const TreeDef &argDef,
                               llvm::ArrayRef<std::string> paramNames,
                               llvm::ArrayRef<InputSpec> leaves) {
  if (mod.numGraphs() != 0)
    raise("module '{}' already has a graph; GraphBuilder::top builds the "
          "first one",
          mod.typeName().str());
  if (argDef.kind() != TreeDef::Kind::Tuple || argDef.numChildren() != 2 ||
      argDef.child(0).kind() != TreeDef::Kind::Tuple ||
      argDef.child(0).numChildren() == 0)
    raise("GraphBuilder::top: {} is not a call signature ((self, *args), kwargs)",
          argDef.str());
  if (argDef.numLeaves() != leaves.size() + 1)
    raise("GraphBuilder::top: signature {} has {} tensor leaves but {} input "
          "types were given",
          argDef.str(), argDef.numLeaves() - 1, leaves.size());
  mod.setTop(true);
  mod.setTotalIds(0, 0);
  std::string qual = mod.name().empty() ? mod.typeName().str() : mod.name();
  NameSpace scope("top", qual);
  InternalGraph &g = mod.addGraph(argDef, scope.createUniqueName(qual), qual);
  ModuleNode *self = g.addModuleInput("self", qual);
  self->setOwner(&mod);
  size_t next = 0;
  addSignatureInputs(argDef, paramNames, [&](const std::string &n) {
    const InputSpec &in = leaves[next++];
    g.addTensorInput(n, in.shape, in.dtype);
  });
  return GraphBuilder(mod, g, true);
}

llvm::SmallVector<Node *, 1>
GraphBuilder::callModuleN(Node *mod, std::vector<Arg> args,
                          std::vector<KwArg> kwargs, const BodyFn &body,
                          std::vector<std::string> paramNames,
                          size_t numOutputs, std::vector<OutputType> types) {
  auto *mn = llvm::dyn_cast_or_null<ModuleNode>(mod);
  if (!mn)
    raise("module call: '{}' is not a module node", mod ? mod->str() : "null");
  Module *owner = mn->owner();
  if (!owner)
    raise("module call: module node '{}' has no module", mn->str());
  std::vector<Node *> nodes;
  std::vector<TreeDef> pos;
  pos.push_back(Arg(mod).flatten(nodes));
  for (const Arg &a : args)
    pos.push_back(a.flatten(nodes));
  std::vector<std::pair<Scalar, TreeDef>> kw;
  std::vector<std::pair<std::string, Arg>> sortedKw = kwargs;
  std::stable_sort(sortedKw.begin(), sortedKw.end(),
                   [](const auto &a, const auto &b) { return a.first < b.first; });
  for (const auto &[k, a] : sortedKw)
    kw.emplace_back(Scalar(k), a.flatten(nodes));
  TreeDef posDef = TreeDef::tuple(pos);
  TreeDef def = makeArgDef(pos, kw);
  checkInGraph(*g_, nodes, "module call");

  auto *e = g_->create<CallMethod>();
  e->setArgs(def, nodes);
  if (owner->isBuiltin()) {
    finishCall(*e, numOutputs, std::move(types));
  } else if (auto *tmod = llvm::dyn_cast<TracedModule>(owner)) {
    tmod->setTop(false);
    InternalGraph *sub = tmod->graphFor(def);
    if (!sub) {
      if (!body)
        raise("module call: '{}' has no graph for signature {} and no body "
              "was given to build one",
              mn->str(), def.str());
      std::string subQual = mn->qualname().str();
      sub = &tmod->addGraph(def, g_->ns().createUniqueName(subQual), subQual);
      sub->setParentInternal(g_);
      ModuleNode *self = sub->addModuleInput("self", subQual);
      self->setOwner(tmod);
      size_t next = 1; // nodes[0] is the module itself
      // Inputs take the types of the call's nodes.
      addSignatureInputs(def, paramNames, [&](const std::string &n) {
        Node *actual = nodes[next++];
        if (llvm::isa<ModuleNode>(actual)) {
          sub->addModuleInput(n, sub->qualname() + ".[" + n + "]");
          return;
        }
        auto *t = llvm::cast<TensorNode>(actual);
        TensorNode *in = sub->addTensorInput(n, t->shape(), t->dtype());
        in->setHasDType(t->hasDType());
      });
      GraphBuilder sb(*tmod, *sub, false);
      body(sb);
      if (!tmod->outDefFor(def) || sub->outputs().empty())
        raise("module call: the body of '{}' set no outputs", mn->str());
    }
    const TreeDef &outDef = *tmod->outDefFor(def);
    std::vector<OutputType> subTypes;
    for (Node *o : sub->outputs()) {
      OutputType t;
      if (auto *tn = llvm::dyn_cast<TensorNode>(o)) {
        t.shape = tn->shape();
        t.dtype = tn->hasDType() ? std::optional<DType>(tn->dtype()) : std::nullopt;
      }
      subTypes.push_back(t);
    }
    addOutputs(*e, sub->outputs().size(), subTypes);
    e->setOutDef(outDef);
  } else {
    raise("module call: '{}' ({}) is neither builtin nor traced",
          mn->str(), owner->typeName().str());
  }
  g_->ns().autoNameOutputs(*e);
  return llvm::SmallVector<Node *, 1>(e->outputs().begin(), e->outputs().end());
}

Node *GraphBuilder::callModule(Node *mod, std::vector<Arg> args,
                               std::vector<KwArg> kwargs, const BodyFn &body,
                               std::vector<std::string> paramNames,
                               std::optional<OutputType> type) {
  std::vector<OutputType> types;
  if (type)
    types.push_back(*type);
  auto outs = callModuleN(mod, std::move(args), std::move(kwargs), body,
                          std::move(paramNames), 1, types);
  if (outs.size() != 1)
    raise("module call: '{}' returns {} values; use callModuleN",
          mod->str(), outs.size());
  return outs[0];
}

llvm::SmallVector<Node *, 1> GraphBuilder::apply(const OpSchema &opdef,
                                                 llvm::ArrayRef<Node *> inputs,
                                                 size_t numOutputs,
                                                 TreeDef attrs) {
  if (opdef.opClass() != OpClass::OpDef)
    raise("'{}' is not an op def", opdef.name().str());
  checkInGraph(*g_, inputs, opdef.name());
  auto *e = g_->create<Apply>(opdef, std::move(attrs));
  for (Node *n : inputs)
    e->addInput(n);
  finishCall(*e, numOutputs, {});
  e->setOutDef(std::nullopt); // Apply prints its outputs as a flat list
  g_->ns().autoNameOutputs(*e);
  return llvm::SmallVector<Node *, 1>(e->outputs().begin(), e->outputs().end());
}

void GraphBuilder::setOutputs(Arg outputs) {
  std::vector<Node *> nodes;
  TreeDef def = outputs.flatten(nodes);
  std::vector<TreeDef::LeafType> unused;
  if (def.numLeaves() == 0)
    raise("graph '{}': outputs must contain at least one node", g_->name());
  // Outputs hold nodes only (the reference asserts tensors).
  std::function<void(const TreeDef &)> check = [&](const TreeDef &t) {
    if (t.isConst())
      raise("graph '{}': outputs must be nodes, got constant {}", g_->name(),
            t.value().repr());
    for (size_t i = 0; i < t.numChildren(); ++i)
      check(t.child(i));
  };
  check(def);
  checkInGraph(*g_, nodes, "outputs");
  g_->setOutputsInternal(nodes);
  const auto *sig = mod_->signatureOf(*g_);
  mod_->setOutDef(sig->argDef, def);
}

static void compileAll(TracedModule &m) {
  m.namedModules([](const std::string &, Module &x) {
    if (auto *t = llvm::dyn_cast<TracedModule>(&x))
      for (const auto &s : t->signatures())
        s.graph->compile();
  });
}

void GraphBuilder::finish(Arg outputs) {
  setOutputs(std::move(outputs));
  if (!isTop_)
    return;
  compileAll(*mod_);
  mod_->updateRefs();
  g_->resetIds();
}

} // namespace tmg
