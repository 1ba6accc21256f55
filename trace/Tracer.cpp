//===- Tracer.cpp - Recording forward methods into graphs -----------------===//
//
// Every recorded call goes through the GraphBuilder of the current scope,
// so traced graphs are named, normalised and typed exactly as builder-made
// ones. Eager calls build a one-expr scratch graph with the same builder and
// run it with rt::evalExpr (the interpreter's lowering), so eager, traced
// and interpreted execution share one kernel dispatch.
//
//===----------------------------------------------------------------------===//
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "State.h"
#include "tm/trace/Quant.h"
#include "tm/ir/Diagnostic.h"
#include "tm/runtime/Eval.h"
#include "tm/runtime/Interpreter.h"

namespace tmg {
namespace trace {

static thread_local State *tls = nullptr;
State *current() { return tls; }
State *install(State *s) {
  State *p = tls;
  tls = s;
  return p;
}

//===----------------------------------------------------------------------===//
// Registries
//===----------------------------------------------------------------------===//

namespace {
struct BuiltinRegistry {
  std::mutex mu;
  std::unordered_set<std::type_index> types;
  std::unordered_map<std::type_index, std::function<std::unique_ptr<Layer>()>> factories;
  static BuiltinRegistry &get() {
    static BuiltinRegistry r;
    return r;
  }
};
} // namespace

//===----------------------------------------------------------------------===//
// Module trees
//===----------------------------------------------------------------------===//

static void registerLayerKernel(const ModuleType &type, std::type_index t);

const ModuleType &registerBuiltinLayerType(llvm::StringRef typeName, std::type_index layer) {
  ModuleType t;
  t.name = typeName.str();
  t.builtin = true;
  // The .tmir reader makes modules of the type (its kernel is the one
  // registered below).
  t.factory = [name = t.name]() -> std::unique_ptr<Module> {
    return std::make_unique<BuiltinModule>(*ModuleTypeRegistry::instance().lookup(name));
  };
  const ModuleType &type = ModuleTypeRegistry::instance().add(std::move(t));
  registerLayerKernel(type, layer);
  return type;
}
static Value fromTreeFn(const TreeDef &def, const std::function<Value(bool)> &leaf);
static TreeDef valueTree(const Value &v, std::vector<Var> &leaves);

static void copyAttrs(Module &from, Module &to, State &st) {
  for (const ModuleAttr &a : from.attrs()) {
    switch (a.kind) {
    case ModuleAttr::Kind::Parameter: to.registerParameter(a.name, a.tensor); break;
    case ModuleAttr::Kind::Buffer: to.registerBuffer(a.name, a.tensor); break;
    case ModuleAttr::Kind::Value: to.setValue(a.name, a.value); break;
    case ModuleAttr::Kind::Submodule:
      if (a.module)
        to.registerModule(a.name, convertTree(*a.module, false, st));
      break;
    case ModuleAttr::Kind::Alias: break;
    }
  }
  // One module under two names stays one module (the reference keeps the
  // object a builtin module is reached by; a traced one has one graph per
  // call signature, whichever name calls it).
  for (const ModuleAttr &a : from.attrs())
    if (a.kind == ModuleAttr::Kind::Alias && to.module(a.target))
      to.registerModuleAlias(a.name, a.target);
}

std::unique_ptr<Module> convertTree(Module &m, bool top, State &st) {
  std::unique_ptr<Module> out;
  // QAT modules with non-builtin observers or fake-quantisers get tmgraph's
  // FakeQuantize, in place (the reference's `_check_qat_module`).
  if (auto *q = dynamic_cast<QATLayer *>(&m))
    checkQATModule(*q);
  if (auto *t = llvm::dyn_cast<TracedModule>(&m)) {
    // A TracedModule called inside a trace is nested, not re-traced.
    auto c = t->cloneTraced();
    c->setTop(top);
    st.counterpart[&m] = c.get();
    return c;
  }
  if (m.isBuiltin()) {
    out = m.clone();
    st.counterpart[&m] = out.get();
    return out;
  }
  if (isRegisteredBuiltin(std::type_index(typeid(m)))) {
    out = std::make_unique<BuiltinModule>(
        registerBuiltinLayerType(m.typeName(), std::type_index(typeid(m))));
  } else {
    out = std::make_unique<TracedModule>(m.typeName().str(), top);
  }
  out->setName(m.name());
  st.counterpart[&m] = out.get();
  copyAttrs(m, *out, st);
  // A traced QAT module is marked as the reference's TracedModule.is_qat:
  // flatten() keeps its calls.
  if (dynamic_cast<QATLayer *>(&m) && llvm::isa<TracedModule>(out.get()))
    out->setValue("is_qat", Scalar(true));
  return out;
}

/// A ModuleList or ModuleDict (the reference's module containers keep
/// every item).
static bool isContainer(const Module &m) {
  return dynamic_cast<const ModuleList *>(&m) || dynamic_cast<const ModuleDict *>(&m) ||
         m.typeName() == "ModuleList" || m.typeName() == "ModuleDict";
}

void dropUnreached(State &st, TracedModule &top) {
  llvm::DenseMap<const Module *, const Module *> user;
  for (const auto &[from, to] : st.counterpart)
    user[to] = from;
  std::vector<Module *> work{&top};
  while (!work.empty()) {
    Module *m = work.back();
    work.pop_back();
    auto it = user.find(m);
    if (!llvm::isa<TracedModule>(m) || it == user.end() ||
        llvm::isa<TracedModule>(it->second) || isContainer(*it->second))
      continue;
    auto r = st.reached.find(it->second);
    auto wasReached = [&](llvm::StringRef n) {
      return r != st.reached.end() && r->second.count(n);
    };
    // An alias reached keeps its target.
    llvm::StringSet<> keep;
    for (const ModuleAttr &a : m->attrs())
      if (a.kind == ModuleAttr::Kind::Alias && wasReached(a.name))
        keep.insert(a.target);
    m->removeAttrsIf([&](const ModuleAttr &a) {
      return a.kind != ModuleAttr::Kind::Value && !wasReached(a.name) && !keep.count(a.name);
    });
    for (const ModuleAttr &a : m->attrs())
      if (a.kind == ModuleAttr::Kind::Submodule && a.module)
        work.push_back(a.module.get());
  }
}

//===----------------------------------------------------------------------===//
// Values <-> builder arguments
//===----------------------------------------------------------------------===//

static Value fromTreeFn(const TreeDef &def, const std::function<Value(bool)> &leaf) {
  switch (def.kind()) {
  case TreeDef::Kind::Leaf: return leaf(def.leafType() == TreeDef::LeafType::Module);
  case TreeDef::Kind::Const: return Value(def.value());
  case TreeDef::Kind::Tuple:
  case TreeDef::Kind::List: {
    std::vector<Value> items;
    for (size_t i = 0; i < def.numChildren(); ++i)
      items.push_back(fromTreeFn(def.child(i), leaf));
    return def.kind() == TreeDef::Kind::Tuple ? Value::tuple(std::move(items))
                                              : Value::list(std::move(items));
  }
  case TreeDef::Kind::Slice:
    return Value::slice(fromTreeFn(def.child(0), leaf), fromTreeFn(def.child(1), leaf),
                        fromTreeFn(def.child(2), leaf));
  default: {
    std::vector<std::pair<std::string, Value>> items;
    for (size_t i = 0; i < def.numChildren(); ++i)
      items.emplace_back(def.key(i).isString() ? def.key(i).getString() : def.key(i).str(),
                         fromTreeFn(def.child(i), leaf));
    return Value::dict(std::move(items));
  }
  }
}

Value fromTree(const TreeDef &def, llvm::ArrayRef<Node *> nodes, size_t &next) {
  return fromTreeFn(def, [&](bool) {
    Node *n = nodes[next++];
    return llvm::isa<ModuleNode>(n) ? Value() : Value(Var(n));
  });
}

void collectVars(const Value &v, std::vector<const Var *> &out) {
  if (v.isVar())
    out.push_back(&v.var());
  for (const Value &x : v.items())
    collectVars(x, out);
}

/// `leaf(var)` turns a Var into a node.
static Arg toArg(const Value &v, const std::function<Node *(const Var &)> &leaf) {
  switch (v.kind()) {
  case Value::Kind::Var:
    if (!v.var().defined())
      return Arg::none();
    return Arg(leaf(v.var()));
  case Value::Kind::Scalar: return Arg(v.scalar());
  case Value::Kind::Tuple:
  case Value::Kind::List: {
    std::vector<Arg> items;
    for (const Value &x : v.items())
      items.push_back(toArg(x, leaf));
    return v.kind() == Value::Kind::Tuple ? Arg::tuple(std::move(items))
                                          : Arg::list(std::move(items));
  }
  case Value::Kind::Slice:
    return Arg::slice(toArg(v[0], leaf), toArg(v[1], leaf), toArg(v[2], leaf));
  case Value::Kind::Dict: {
    std::vector<std::pair<Scalar, Arg>> items;
    for (size_t i = 0; i < v.size(); ++i)
      items.emplace_back(Scalar(v.keys()[i]), toArg(v[i], leaf));
    return Arg::dict(std::move(items));
  }
  }
  return Arg::none();
}

/// The node of `v` in the current scope: its own node, or a Constant for a
/// tensor no graph produced (the reference's mark_constant).
Node *traceLeaf(State &st, const Var &v) {
  if (Node *n = v.node())
    return n;
  if (v.isMeta())
    raise("a shape-only tensor (Var::meta) can only be an input of traceModule");
  Scope &sc = st.scope();
  const void *key = v.value().rawData();
  auto it = sc.attrs.find({nullptr, key});
  if (it != sc.attrs.end())
    return it->second;
  Node *n = sc.b.constant(v.value());
  st.created(n->expr());
  if (st.computeValues)
    st.values[n] = v.value();
  sc.attrs[{nullptr, key}] = n;
  return n;
}

/// Output nodes -> the value the caller sees.
static Value outputsValue(Expr &e) {
  llvm::SmallVector<Node *, 4> outs(e.outputs().begin(), e.outputs().end());
  size_t next = 0;
  if (e.outDef())
    return fromTree(*e.outDef(), outs, next);
  if (outs.size() == 1)
    return Value(Var(outs[0]));
  std::vector<Value> items;
  for (Node *n : outs)
    items.emplace_back(Var(n));
  return Value::tuple(std::move(items));
}

/// Computes the values of `e`'s outputs when every input has one.
void computeValues(State &st, Expr &e) {
  if (!st.computeValues)
    return;
  std::vector<Tensor> ins;
  if (!inputValues(st, e, ins))
    return;
  std::vector<Tensor> outs = rt::evalExpr(e, ins);
  for (size_t i = 0; i < outs.size(); ++i)
    st.values[e.output(i)] = std::move(outs[i]);
}

Value eagerOp(const OpSchema &schema, const CallArgs &args, size_t numOutputs);
Value eagerModuleCall(Module &m, const CallArgs &args);
static TreeDef valueTree(const Value &v, std::vector<Var> &leaves);

/// With the expr checker: computes `e`'s outputs eagerly from the call's
/// own arguments (`eager`), as forward sees them, and checks the recorded
/// expr against them. False when not checking or an argument has no value.
static bool eagerValues(State &st, Expr &e, const std::function<Value()> &eager,
                        const CallArgs &args) {
  if (!st.checkExprs)
    return false;
  std::vector<const Var *> vars;
  for (const Value &v : args.args)
    collectVars(v, vars);
  for (const Kw &k : args.kwargs)
    collectVars(k.value, vars);
  for (const Var *v : vars)
    if (!v->hasValue())
      return false;
  std::vector<Var> leaves;
  valueTree(eager(), leaves);
  for (size_t i = 0; i < leaves.size() && i < e.numOutputs(); ++i)
    st.values[e.output(i)] = leaves[i].value();
  checkExpr(st, e);
  return true;
}

/// Builds op `s` with the builder `b`; `leaf` turns Vars into nodes.
static Expr *buildOp(GraphBuilder &b, const OpSchema &s, const CallArgs &args,
                     size_t numOutputs, const std::function<Node *(const Var &)> &leaf) {
  std::vector<Arg> a;
  std::vector<KwArg> kw;
  bool method = s.opClass() == OpClass::TensorMethod;
  for (size_t i = method ? 1 : 0; i < args.args.size(); ++i)
    a.push_back(toArg(args.args[i], leaf));
  for (const Kw &k : args.kwargs)
    kw.emplace_back(k.name, toArg(k.value, leaf));
  if (method) {
    if (args.args.empty() || !args.args[0].isVar() || !args.args[0].var().defined())
      raise("{}: the receiver must be a tensor", s.name().str());
    Node *self = leaf(args.args[0].var());
    return b.callMethodExpr(self, s, std::move(a), std::move(kw), numOutputs, {});
  }
  if (s.opClass() == OpClass::OpDef) {
    std::vector<Node *> ins;
    for (const Value &v : args.args) {
      if (!v.isVar() || !v.var().defined())
        raise("{}: op def inputs must be tensors", s.name().str());
      ins.push_back(leaf(v.var()));
    }
    auto outs = b.apply(s, ins);
    if (outs.empty())
      raise("{} produced no output", s.name().str());
    return outs[0]->expr();
  }
  if (s.opClass() != OpClass::Function)
    raise("'{}' is not a function", s.name().str());
  auto outs = b.callFunctionN(s, std::move(a), std::move(kw), numOutputs);
  if (outs.empty())
    raise("{} produced no output", s.printName().str());
  return outs[0]->expr();
}

//===----------------------------------------------------------------------===//
// Eager execution
//===----------------------------------------------------------------------===//

namespace {
/// A scratch module and graph for one eager call.
struct Scratch {
  std::unique_ptr<TracedModule> tm = std::make_unique<TracedModule>("Eager");
  GraphBuilder b = GraphBuilder::top(*tm, std::vector<InputSpec>{});
  llvm::DenseMap<const Node *, Tensor> values;
  Node *leaf(const Var &v) {
    Node *n = b.constant(v.value());
    values[n] = v.value();
    return n;
  }
  std::vector<Tensor> run(Expr &e) {
    std::vector<Tensor> ins;
    for (size_t i = 0; i < e.numInputs(); ++i)
      ins.push_back(values.lookup(e.input(i)));
    return rt::evalExpr(e, ins);
  }
};

/// Value with the output tensors of `e` in place of its nodes.
Value eagerOutputs(Expr &e, std::vector<Tensor> outs) {
  size_t next = 0;
  auto leaf = [&](bool) { return Value(Var(outs[next++])); };
  if (e.outDef())
    return fromTreeFn(*e.outDef(), leaf);
  if (outs.size() == 1)
    return Value(Var(outs[0]));
  std::vector<Value> items;
  for (Tensor &t : outs)
    items.emplace_back(Var(t));
  return Value::tuple(std::move(items));
}
} // namespace

Value eagerOp(const OpSchema &schema, const CallArgs &args, size_t numOutputs) {
  Scratch s;
  Expr *e = buildOp(s.b, schema, args, numOutputs, [&](const Var &v) { return s.leaf(v); });
  return eagerOutputs(*e, s.run(*e));
}

/// The TreeDef of a call `((self, *args), kwargs)` and its tensor leaves.
static TreeDef valueTree(const Value &v, std::vector<Var> &leaves) {
  switch (v.kind()) {
  case Value::Kind::Var:
    if (!v.var().defined())
      return TreeDef::constant(Scalar());
    leaves.push_back(v.var());
    return TreeDef::leaf(TreeDef::LeafType::Tensor);
  case Value::Kind::Scalar: return TreeDef::constant(v.scalar());
  case Value::Kind::Tuple:
  case Value::Kind::List: {
    std::vector<TreeDef> c;
    for (const Value &x : v.items())
      c.push_back(valueTree(x, leaves));
    return v.kind() == Value::Kind::Tuple ? TreeDef::tuple(std::move(c))
                                          : TreeDef::list(std::move(c));
  }
  case Value::Kind::Slice: {
    // In order: the leaves are numbered start, stop, step.
    TreeDef start = valueTree(v[0], leaves), stop = valueTree(v[1], leaves);
    return TreeDef::slice(std::move(start), std::move(stop), valueTree(v[2], leaves));
  }
  case Value::Kind::Dict: {
    std::vector<std::pair<Scalar, TreeDef>> c;
    for (size_t i = 0; i < v.size(); ++i)
      c.emplace_back(Scalar(v.keys()[i]), valueTree(v[i], leaves));
    return TreeDef::dict(std::move(c));
  }
  }
  return TreeDef();
}

static TreeDef callTree(const CallArgs &args, std::vector<Var> &leaves) {
  std::vector<TreeDef> pos = {TreeDef::leaf(TreeDef::LeafType::Module)};
  for (const Value &a : args.args)
    pos.push_back(valueTree(a, leaves));
  std::vector<Kw> kws = args.kwargs;
  std::stable_sort(kws.begin(), kws.end(),
                   [](const Kw &a, const Kw &b) { return a.name < b.name; });
  std::vector<std::pair<Scalar, TreeDef>> kw;
  for (const Kw &k : kws)
    kw.emplace_back(Scalar(k.name), valueTree(k.value, leaves));
  return makeArgDef(std::move(pos), std::move(kw));
}

Value eagerModuleCall(Module &m, const CallArgs &args) {
  if (auto *layer = dynamic_cast<Layer *>(&m))
    return layer->forwardValues(args);
  if (auto *t = llvm::dyn_cast<TracedModule>(&m)) {
    std::vector<Var> leaves;
    TreeDef def = callTree(args, leaves);
    InternalGraph *g = t->graphFor(def);
    if (!g)
      raise("'{}' has no graph for the call signature {}; it has:\n{}",
            t->typeName().str(), def.str(), t->signaturesStr());
    std::vector<Tensor> ins;
    for (const Var &v : leaves)
      ins.push_back(v.value());
    rt::Interpreter interp(*t);
    std::vector<Tensor> outs = interp.run(*g, ins).outputs;
    size_t next = 0;
    return fromTreeFn(*t->outDefFor(def), [&](bool) { return Value(Var(outs[next++])); });
  }
  if (!m.isBuiltin())
    raise("module '{}' has no forward: only Layers, builtin modules and traced "
          "modules can be called",
          m.typeName().str());
  Scratch s;
  Node *mn = s.b.constant(m.clone());
  std::vector<Arg> a;
  std::vector<KwArg> kw;
  auto leaf = [&](const Var &v) { return s.leaf(v); };
  for (const Value &x : args.args)
    a.push_back(toArg(x, leaf));
  for (const Kw &k : args.kwargs)
    kw.emplace_back(k.name, toArg(k.value, leaf));
  auto outs = s.b.callModuleN(mn, std::move(a), std::move(kw));
  Expr &e = *outs[0]->expr();
  return eagerOutputs(e, s.run(e));
}

} // namespace trace

using trace::Scope;
using trace::State;

//===----------------------------------------------------------------------===//
// Ops
//===----------------------------------------------------------------------===//

namespace trace {
/// A C++ call cannot tell a default argument from one written out: the
/// trailing positional constants equal to their parameter's default count
/// as not written, so `x.mean()` records `x.mean(, )` as the reference's
/// Python call does. (Readers bind the defaults from the schema.)
static void dropTrailingDefaults(Expr &e, const OpSchema &s) {
  const auto &ad = e.argDef();
  if (!ad || ad->kind() != TreeDef::Kind::Tuple || ad->numChildren() != 2)
    return;
  const TreeDef &pos = ad->child(0);
  llvm::ArrayRef<uint32_t> params = s.positionalParams();
  size_t n = std::min(pos.numChildren(), params.size());
  size_t keep = n;
  while (keep > 0) {
    const OpParam &p = s.params()[params[keep - 1]];
    const TreeDef &a = pos.child(keep - 1);
    if (!p.hasDefault || a.numLeaves() != 0 || !(a == p.defaultValue))
      break;
    --keep;
  }
  if (keep == n || n != pos.numChildren())
    return;
  std::vector<TreeDef> kept;
  for (size_t i = 0; i < keep; ++i)
    kept.push_back(pos.child(i));
  const TreeDef &kw = ad->child(1);
  std::vector<std::pair<Scalar, TreeDef>> kws;
  for (size_t i = 0; i < kw.numChildren(); ++i)
    kws.emplace_back(kw.key(i), kw.child(i));
  e.setArgDef(makeArgDef(std::move(kept), std::move(kws)));
}
} // namespace trace

Value callOp(const OpSchema &schema, CallArgs args, size_t numOutputs) {
  State *st = trace::current();
  if (!st)
    return trace::eagerOp(schema, args, numOutputs);
  Expr *e = trace::buildOp(st->scope().b, schema, args, numOutputs,
                           [&](const Var &v) { return trace::traceLeaf(*st, v); });
  trace::dropTrailingDefaults(*e, schema);
  st->created(e);
  if (!trace::eagerValues(*st, *e, [&] { return trace::eagerOp(schema, args, numOutputs); },
                          args))
    trace::computeValues(*st, *e);
  return trace::outputsValue(*e);
}

std::vector<Var> F::split(const Var &x, int64_t sections, int64_t axis) {
  if (sections <= 0)
    raise("split: sections must be positive, got {}", sections);
  Value v = callOp(op(OpKind::Split), {{x, sections, axis}, {}}, size_t(sections));
  std::vector<Var> out;
  if (v.isVar())
    out.push_back(v.var());
  for (const Value &i : v.items())
    out.push_back(i.var());
  return out;
}

bool isTracing() { return trace::current() != nullptr; }

void registerAsBuiltin(std::type_index t, std::function<std::unique_ptr<Layer>()> factory) {
  auto &r = trace::BuiltinRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.types.insert(t);
  if (factory)
    r.factories[t] = std::move(factory);
}

namespace trace {
static thread_local bool probing = false;
ProbeGuard::ProbeGuard() : prev(probing) { probing = true; }
ProbeGuard::~ProbeGuard() { probing = prev; }

/// The interpreter's kernel for a registered builtin Layer class: a fresh
/// instance with the traced module's attributes runs its forward.
static void registerLayerKernel(const ModuleType &type, std::type_index t) {
  std::function<std::unique_ptr<Layer>()> factory;
  {
    auto &r = BuiltinRegistry::get();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.factories.find(t);
    if (it == r.factories.end())
      return;
    factory = it->second;
  }
  if (rt::lookupModuleKernel(type))
    return;
  rt::registerModuleKernel(type, [factory](const Module &m, const Expr &e,
                                           llvm::ArrayRef<Tensor> ins) {
    std::unique_ptr<Layer> inst = factory();
    std::vector<std::string> aliases; // the instance's own, gone before its targets
    for (const ModuleAttr &a : inst->attrs())
      if (a.kind == ModuleAttr::Kind::Alias)
        aliases.push_back(a.name);
    for (const std::string &n : aliases)
      inst->removeAttr(n);
    for (const ModuleAttr &a : m.attrs()) {
      switch (a.kind) {
      case ModuleAttr::Kind::Parameter: inst->registerParameter(a.name, a.tensor); break;
      case ModuleAttr::Kind::Buffer: inst->registerBuffer(a.name, a.tensor); break;
      case ModuleAttr::Kind::Value: inst->setValue(a.name, a.value); break;
      case ModuleAttr::Kind::Submodule:
        inst->takeModule(a.name);
        if (a.module)
          inst->registerModule(a.name, a.module->clone());
        break;
      case ModuleAttr::Kind::Alias: break;
      }
    }
    for (const ModuleAttr &a : m.attrs())
      if (a.kind == ModuleAttr::Kind::Alias)
        inst->registerModuleAlias(a.name, a.target);
    if (!e.argDef())
      raiseAt(Location::atExpr(e.id()), "a module call without arguments");
    size_t next = 0;
    Value all = fromTreeFn(*e.argDef(), [&](bool isModule) {
      return isModule ? Value() : Value(Var(ins[next++]));
    });
    CallArgs c;
    for (size_t i = 1; i < all[0].size(); ++i)
      c.args.push_back(all[0][i]);
    if (all.size() > 1)
      for (size_t i = 0; i < all[1].size(); ++i)
        c.kwargs.push_back({all[1].keys()[i], all[1][i]});
    Value out;
    {
      StateGuard off(nullptr);
      out = inst->forwardValues(c);
    }
    std::vector<Var> leaves;
    valueTree(out, leaves);
    std::vector<Tensor> res;
    for (const Var &v : leaves)
      res.push_back(v.value());
    return res;
  });
}
} // namespace trace

bool isProbing() { return trace::probing; }
bool isRegisteredBuiltin(std::type_index t) {
  auto &r = trace::BuiltinRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.types.count(t) != 0;
}

//===----------------------------------------------------------------------===//
// Modules
//===----------------------------------------------------------------------===//

Layer::Layer(std::string typeName, std::vector<std::string> forwardParams)
    : Module(std::move(typeName)), params_(std::move(forwardParams)) {}

std::vector<std::optional<Value>> detail::bindParams(const CallArgs &args,
                                                     const std::vector<std::string> &params,
                                                     llvm::StringRef fn) {
  if (args.args.size() > params.size())
    raise("{}() takes {} positional arguments but {} were given", fn.str(),
          params.size(), args.args.size());
  std::vector<std::optional<Value>> out(params.size());
  for (size_t i = 0; i < args.args.size(); ++i)
    out[i] = args.args[i];
  for (const Kw &k : args.kwargs) {
    auto it = std::find(params.begin(), params.end(), k.name);
    if (it == params.end())
      raise("{}() got an unexpected keyword argument '{}'", fn.str(), k.name);
    size_t i = size_t(it - params.begin());
    if (out[i])
      raise("{}() got multiple values for argument '{}'", fn.str(), k.name);
    out[i] = k.value;
  }
  return out;
}

std::vector<std::optional<Value>> Layer::bind(const CallArgs &args) const {
  return detail::bindParams(args, params_, typeName().str() + ".forward");
}

void detail::badValue(const Value &v, const char *want, llvm::StringRef where) {
  raise("{}: expected {}, got {}", where.str(), want, v.str());
}

ModuleRef::ModuleRef(Node *moduleNode) : mod_(nullptr), node_(moduleNode) {
  auto *mn = llvm::dyn_cast_or_null<ModuleNode>(moduleNode);
  if (!mn)
    raise("ModuleRef: '{}' is not a module node",
          moduleNode ? moduleNode->str() : std::string("null"));
  if (!mn->owner())
    raise("ModuleRef: module node '{}' has no module", mn->str());
  mod_ = mn->owner();
}

/// The node standing for `ref` in the current scope.
static Node *scopeNode(State &st, Module &m, Node *node) {
  if (node)
    return node;
  Scope &sc = st.scope();
  if (&m == sc.user || &m == sc.traced)
    return sc.b.self();
  raise("'{}' is used while tracing '{}' without being reached as an "
        "attribute (use mod(\"name\"))",
        m.typeName().str(), sc.user ? sc.user->typeName().str() : std::string("a graph"));
}

/// `getattr(base, name)`: a new GetAttr per access, as the reference (which
/// wraps the attribute again on every access); compile() merges duplicates,
/// and names keep the reference's numbering (`lin_1_out`).
static Node *recordGetAttr(State &st, Node *base, llvm::StringRef name) {
  Node *n = st.scope().b.getAttr(base, name);
  st.created(n->expr());
  return n;
}

std::vector<std::string> ModuleRef::moduleNames() const {
  std::vector<std::string> out;
  for (const ModuleAttr &a : mod_->attrs())
    if (a.kind == ModuleAttr::Kind::Submodule)
      out.push_back(a.name);
  return out;
}

/// Module containers hold modules only (the reference's check).
static void checkContainer(const Module &m) {
  if (!trace::isContainer(m))
    return;
  bool modules = false, others = false;
  for (const ModuleAttr &a : m.attrs())
    (a.kind == ModuleAttr::Kind::Submodule ? modules : others) = true;
  if (modules && others)
    raise("Can not trace the module that uses the same container to store "
          "Module and Non-Module objects ('{}' of '{}')",
          m.attrName(), m.parent() ? m.parent()->typeName().str() : std::string("?"));
}

ModuleRef ModuleRef::mod(llvm::StringRef name) const {
  Module *sub = mod_->module(name);
  if (!sub)
    raise("module '{}' has no submodule '{}'{}", mod_->typeName().str(), name.str(),
          mod_->tensor(name) ? " (it is a tensor: use attr)" : "");
  State *st = trace::current();
  if (st)
    checkContainer(*sub);
  if (!st)
    return ModuleRef(*sub);
  Node *base = scopeNode(*st, *mod_, node_);
  st->reached[mod_].insert(name);
  return ModuleRef(*sub, recordGetAttr(*st, base, name));
}

Var ModuleRef::attr(llvm::StringRef name) const {
  const Tensor *t = mod_->tensor(name);
  if (!t)
    raise("module '{}' has no tensor attribute '{}'{}", mod_->typeName().str(),
          name.str(), mod_->module(name) ? " (it is a module: use mod)" : "");
  State *st = trace::current();
  if (!st)
    return Var(*t);
  Node *base = scopeNode(*st, *mod_, node_);
  st->reached[mod_].insert(name);
  Node *n = recordGetAttr(*st, base, name);
  if (st->computeValues)
    st->values[n] = *t;
  return Var(n);
}

ModuleRef Layer::mod(llvm::StringRef name) {
  State *st = trace::current();
  if (st && st->scope().user != this)
    raise("{}.mod('{}') while the forward of '{}' is traced: a forward reaches "
          "only its own attributes",
          typeName().str(), name.str(),
          st->scope().user ? st->scope().user->typeName().str() : std::string("a graph"));
  return ModuleRef(*this).mod(name);
}
ModuleRef Layer::mod(Module &sub) {
  if (sub.parent() != this)
    raise("'{}' is not a submodule of '{}'", sub.typeName().str(), typeName().str());
  return mod(sub.attrName());
}
Var Layer::attr(llvm::StringRef name) {
  State *st = trace::current();
  if (st && st->scope().user != this)
    raise("{}.attr('{}') while the forward of '{}' is traced: a forward reaches "
          "only its own attributes",
          typeName().str(), name.str(),
          st->scope().user ? st->scope().user->typeName().str() : std::string("a graph"));
  return ModuleRef(*this).attr(name);
}

/// Rewrites qualnames under `src` to be under `dst` in every graph of `t`
/// (a copied TracedModule now living at another attribute path).
static void requalify(TracedModule &t, std::string src, std::string dst) {
  auto fix = [&](llvm::StringRef q) -> std::string {
    if (q == src)
      return dst;
    if (q.startswith(src + ".") || q.startswith(src + "_"))
      return dst + q.substr(src.size()).str();
    return q.str();
  };
  t.namedModules([&](const std::string &, Module &m) {
    if (auto *x = llvm::dyn_cast<TracedModule>(&m))
      for (const auto &s : x->signatures()) {
        s.graph->setQualnameInternal(fix(s.graph->qualname()));
        for (Node *n : s.graph->inputs())
          n->setQualname(fix(n->qualname()));
        for (Expr *e : *s.graph)
          for (Node *n : e->outputs())
            n->setQualname(fix(n->qualname()));
      }
  });
}

/// Output Value of a forward -> the graph's outputs.
static Arg forwardOutputs(State &st, const Value &out, llvm::StringRef who) {
  std::function<void(const Value &)> check = [&](const Value &v) {
    if (v.isScalar() || v.kind() == Value::Kind::Slice)
      raise("the forward of '{}' returns {} ({}): only tensors, and tuples, "
            "lists and dicts of tensors, can be returned",
            who.str(), v.str(), v.isNone() ? "None" : "a plain value");
    if (v.isVar() && !v.var().defined())
      raise("the forward of '{}' returns an undefined tensor", who.str());
    for (const Value &x : v.items())
      check(x);
  };
  check(out);
  return trace::toArg(out, [&](const Var &v) { return trace::traceLeaf(st, v); });
}

/// Attaches a Layer found in the traced tree (an insertion scope calling a
/// module the user attached with registerModule): it becomes a TracedModule.
static Module *attachLayer(State &st, Module &layer, Node *node) {
  Module *owner = layer.parent();
  if (!owner)
    raise("module '{}' is not attached to the traced module", layer.typeName().str());
  std::string name = layer.attrName();
  std::unique_ptr<Module> conv = trace::convertTree(layer, false, st);
  Module *raw = conv.get();
  std::unique_ptr<Module> released = owner->releaseModule(name);
  owner->registerModule(name, std::move(conv));
  st.attached.push_back({owner, name, std::move(released)});
  if (auto *mn = llvm::dyn_cast_or_null<ModuleNode>(node)) {
    mn->setOwner(raw);
    mn->setModuleType(raw->isBuiltin() ? raw->type() : moduleBaseType());
  }
  return raw;
}

/// `v` with every tensor leaf replaced by its value, or zeros of its type
/// (the inputs of a probe run of a builtin Layer's forward).
static void placeValues(Value &v) {
  if (v.isVar() && v.var().defined()) {
    const Var &x = v.var();
    v = Value(x.hasValue() ? x.value() : Tensor::zeros(x.shape(), x.dtype()));
  }
  // Containers: rebuild with placed items.
  if (v.isContainer() || v.kind() == Value::Kind::Slice) {
    std::vector<Value> items = v.items();
    for (Value &i : items)
      placeValues(i);
    if (v.kind() == Value::Kind::Dict) {
      std::vector<std::pair<std::string, Value>> d;
      for (size_t i = 0; i < items.size(); ++i)
        d.emplace_back(v.keys()[i], items[i]);
      v = Value::dict(std::move(d));
    } else if (v.kind() == Value::Kind::Tuple) {
      v = Value::tuple(std::move(items));
    } else if (v.kind() == Value::Kind::List) {
      v = Value::list(std::move(items));
    } else {
      v = Value::slice(items[0], items[1], items[2]);
    }
  }
}

/// Values of a traced submodule's call `e` (with the checker, compared with
/// what its forward produced when it ran).
static void subModuleValues(State &st, Expr &e, TracedModule &tmod, const CallArgs &args,
                            bool forwardRan, llvm::ArrayRef<Node *> outs) {
  std::vector<Var> flat;
  trace::callTree(args, flat);
  bool real = std::all_of(flat.begin(), flat.end(), [](const Var &v) { return v.hasValue(); });
  if (!real)
    return;
  std::vector<Tensor> ins;
  for (const Var &v : flat)
    ins.push_back(v.value());
  rt::Interpreter interp(tmod);
  InternalGraph &callee = *llvm::cast<CallMethod>(e).calleeGraph();
  auto res = interp.run(callee, ins).outputs;
  if (st.checkExprs && forwardRan) {
    // forward's values of the callee's outputs against the interpreted call.
    std::vector<Tensor> want;
    for (Node *n : callee.outputs()) {
      auto it = st.values.find(n);
      if (it == st.values.end())
        break;
      want.push_back(it->second);
    }
    if (want.size() == res.size())
      trace::checkValues(st, e, res, want);
  }
  for (size_t i = 0; i < res.size() && i < outs.size(); ++i)
    st.values[outs[i]] = res[i];
}

Value ModuleRef::call(CallArgs args) const {
  State *st = trace::current();
  if (!st)
    return trace::eagerModuleCall(*mod_, args);
  Node *node = scopeNode(*st, *mod_, node_);
  if (&*mod_ == st->scope().user)
    raise("'{}' calls itself while being traced", mod_->typeName().str());
  Module *target = nullptr;
  auto it = st->counterpart.find(mod_);
  if (it != st->counterpart.end())
    target = it->second;
  else if (dynamic_cast<Layer *>(mod_))
    target = attachLayer(*st, *mod_, node);
  else
    target = mod_;
  auto *layer = dynamic_cast<Layer *>(mod_);
  Scope &sc = st->scope();
  auto leaf = [&](const Var &v) { return trace::traceLeaf(*st, v); };
  std::vector<Arg> a;
  std::vector<KwArg> kw;
  for (const Value &x : args.args)
    a.push_back(trace::toArg(x, leaf));
  for (const Kw &k : args.kwargs)
    kw.emplace_back(k.name, trace::toArg(k.value, leaf));
  std::vector<const Var *> argVars;
  for (const Value &x : args.args)
    trace::collectVars(x, argVars);

  if (target->isBuiltin() && layer) {
    // A Layer registered as builtin: run its forward (outside tracing, on
    // the values or zero placeholders of the input types) to learn the
    // structure and types of its outputs, then record one call.
    CallArgs probe = args;
    for (Value &v : probe.args)
      placeValues(v);
    for (Kw &k : probe.kwargs)
      placeValues(k.value);
    Value out;
    {
      trace::StateGuard off(nullptr);
      trace::ProbeGuard probing;
      out = layer->forwardValues(probe);
    }
    std::vector<Var> leaves;
    TreeDef outDef = trace::valueTree(out, leaves);
    std::vector<OutputType> types;
    for (const Var &v : leaves) {
      OutputType t;
      t.shape = v.shape();
      t.dtype = v.dtype();
      types.push_back(t);
    }
    auto outs = sc.b.callModuleN(node, std::move(a), std::move(kw), {}, {},
                                 leaves.size(), types);
    Expr &e = *outs[0]->expr();
    e.setOutDef(outDef);
    st->created(&e);
    bool real = std::all_of(argVars.begin(), argVars.end(),
                            [](const Var *v) { return v->hasValue(); });
    if (st->computeValues && real) {
      for (size_t i = 0; i < leaves.size(); ++i)
        st->values[outs[i]] = leaves[i].value();
      trace::checkExpr(*st, e);
    }
    return trace::outputsValue(e);
  }

  if (target->isBuiltin()) {
    auto outs = sc.b.callModuleN(node, std::move(a), std::move(kw));
    Expr &e = *outs[0]->expr();
    st->created(&e);
    // The user's own module computes the eager value (the traced tree holds
    // a copy).
    Module &user = *mod_;
    if (!trace::eagerValues(*st, e, [&] { return trace::eagerModuleCall(user, args); }, args))
      trace::computeValues(*st, e);
    return trace::outputsValue(e);
  }

  auto *tmod = llvm::dyn_cast<TracedModule>(target);
  if (!tmod)
    raise("module '{}' is neither builtin nor traceable", mod_->typeName().str());
  GraphBuilder::BodyFn body;
  std::vector<std::string> params;
  bool forwardRan = false; // else the call reuses a graph: no eager values
  if (layer && layer != static_cast<Module *>(tmod)) {
    params = layer->forwardParams();
    body = [&](GraphBuilder &sb) {
      forwardRan = true;
      st->scopes.push_back(std::make_unique<Scope>(sb, layer, tmod));
      struct Pop {
        State &s;
        ~Pop() { s.scopes.pop_back(); }
      } pop{*st};
      InternalGraph &sub = sb.graph();
      if (st->insertGraph && sub.parent() == st->insertGraph)
        st->subGraphNames.emplace_back(sub.name(), tmod);
      const TreeDef &def = tmod->signatureOf(sub)->argDef;
      size_t next = 0;
      Value all = trace::fromTree(def, sub.inputs(), next);
      CallArgs fa;
      for (size_t i = 1; i < all[0].size(); ++i)
        fa.args.push_back(all[0][i]);
      if (all.size() > 1)
        for (size_t i = 0; i < all[1].size(); ++i)
          fa.kwargs.push_back({all[1].keys()[i], all[1][i]});
      if (st->computeValues) {
        // Sub-graph inputs take the values of the call's arguments (same
        // flatten order: positional leaves, then keyword leaves by key).
        std::vector<Var> flat;
        trace::callTree(args, flat);
        for (size_t i = 0; i < flat.size() && i + 1 < sub.inputs().size(); ++i)
          if (flat[i].hasValue())
            st->values[sub.input(i + 1)] = flat[i].value();
      }
      Value out = layer->forwardValues(fa);
      sb.setOutputs(forwardOutputs(*st, out, layer->typeName()));
    };
  } else if (tmod->numGraphs() && node->qualname() != tmod->signatures()[0].graph->qualname()) {
    requalify(*tmod, tmod->signatures()[0].graph->qualname(), node->qualname().str());
  }
  auto outs = sc.b.callModuleN(node, std::move(a), std::move(kw), body, params);
  Expr &e = *outs[0]->expr();
  st->created(&e);
  if (st->computeValues)
    subModuleValues(*st, e, *tmod, args, forwardRan, outs);
  return trace::outputsValue(e);
}

//===----------------------------------------------------------------------===//
// traceModule
//===----------------------------------------------------------------------===//

std::unique_ptr<TracedModule> traceModule(Layer &net, CallArgs args, TraceOptions opts) {
  if (trace::current())
    raise("traceModule: this thread is already tracing (traces do not nest)");
  State st;
  st.computeValues = opts.computeValues || opts.checkExprs;
  st.checkExprs = opts.checkExprs;
  st.checkRtol = opts.checkRtol;
  st.checkAtol = opts.checkAtol;
  std::unique_ptr<Module> tree = trace::convertTree(net, true, st);
  if (!llvm::isa<TracedModule>(tree.get()))
    raise("traceModule: '{}' is registered as builtin; trace a module that contains it",
          net.typeName().str());
  std::unique_ptr<TracedModule> tm(llvm::cast<TracedModule>(tree.release()));
  st.top = tm.get();
  std::vector<Var> leaves;
  TreeDef def = trace::callTree(args, leaves);
  std::vector<InputSpec> specs;
  for (const Var &v : leaves) {
    if (v.node())
      raise("traceModule: input '{}' is a node of another graph", v.node()->str());
    specs.emplace_back("", v.shape(), v.dtype());
  }
  GraphBuilder b = GraphBuilder::top(*tm, def, net.forwardParams(), specs);
  InternalGraph &g = b.graph();
  trace::StateGuard guard(&st);
  st.scopes.push_back(std::make_unique<Scope>(b, &net, tm.get()));
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (opts.checkExprs && !leaves[i].hasValue())
      raise("traceModule: the expr checker needs inputs with values (input {} has only a "
            "shape)",
            i);
    if (st.computeValues && leaves[i].hasValue())
      st.values[g.input(i + 1)] = leaves[i].value();
  }
  size_t next = 0;
  Value all = trace::fromTree(def, g.inputs(), next);
  CallArgs fa;
  for (size_t i = 1; i < all[0].size(); ++i)
    fa.args.push_back(all[0][i]);
  if (all.size() > 1)
    for (size_t i = 0; i < all[1].size(); ++i)
      fa.kwargs.push_back({all[1].keys()[i], all[1][i]});
  Value out = net.forwardValues(fa);
  b.finish(forwardOutputs(st, out, net.typeName()));
  trace::dropUnreached(st, *tm);
  if (opts.checkExprs) {
    std::vector<Var> outs;
    trace::valueTree(out, outs);
    std::vector<Tensor> ins, want;
    for (const Var &v : leaves)
      ins.push_back(v.value());
    for (size_t i = 0; i < outs.size(); ++i) {
      if (!outs[i].hasValue())
        raise("traceModule: forward's output {} has no value to check", i);
      want.push_back(outs[i].value());
    }
    trace::checkOutputs(st, *tm, ins, want);
  }
  return tm;
}

std::unique_ptr<TracedModule> traceModule(TracedModule &m, CallArgs args, TraceOptions) {
  if (trace::current())
    raise("traceModule: this thread is already tracing (traces do not nest)");
  std::vector<Var> leaves;
  TreeDef def = trace::callTree(args, leaves);
  if (!m.graphFor(def))
    raise("traceModule: '{}' has no graph for the call signature {}; it has:\n{}",
          m.typeName().str(), def.str(), m.signaturesStr());
  auto c = m.cloneTraced();
  c->setTop(true);
  c->updateRefs();
  c->graphFor(def)->resetIds();
  return c;
}

//===----------------------------------------------------------------------===//
// wrap
//===----------------------------------------------------------------------===//

const OpSchema &detail::registerWrapped(llvm::StringRef qualname,
                                        const std::vector<std::string> &params) {
  auto [mod, name] = qualname.rsplit('.');
  if (name.empty()) {
    name = mod;
    mod = "__main__";
  }
  return OpRegistry::instance().registerFunction(mod, name, params);
}

WrappedFunction::WrappedFunction(const OpSchema &schema, Impl impl)
    : schema_(&schema), impl_(std::move(impl)) {
  // The interpreter runs recorded calls with the function itself: its
  // arguments are rebuilt from the expr's (args, kwargs) structure.
  Impl fn = impl_;
  rt::registerFunctionKernel(schema, [fn](const Expr &e, llvm::ArrayRef<Tensor> ins) {
    if (!e.argDef())
      raiseAt(Location::atExpr(e.id()), "a wrapped function call without arguments");
    size_t next = 0;
    Value all = trace::fromTreeFn(*e.argDef(), [&](bool) { return Value(Var(ins[next++])); });
    CallArgs c;
    c.args = all[0].items();
    if (all.size() > 1)
      for (size_t i = 0; i < all[1].size(); ++i)
        c.kwargs.push_back({all[1].keys()[i], all[1][i]});
    Value out;
    {
      trace::StateGuard off(nullptr);
      out = fn(c);
    }
    std::vector<Var> leaves;
    trace::valueTree(out, leaves);
    std::vector<Tensor> res;
    for (const Var &v : leaves)
      res.push_back(v.value());
    return res;
  });
}

Value WrappedFunction::call(CallArgs args) const {
  State *st = trace::current();
  if (!st)
    return impl_(args);
  // Run the function outside tracing (values, or zero placeholders of the
  // input types) for its output structure, then record one CallFunction.
  CallArgs probe = args;
  bool real = true;
  std::function<Value(const Value &)> place = [&](const Value &v) -> Value {
    if (v.isVar() && v.var().defined()) {
      if (v.var().hasValue())
        return Value(v.var().value());
      real = false;
      return Value(Tensor::zeros(v.var().shape(), v.var().dtype()));
    }
    if (v.kind() == Value::Kind::Tuple || v.kind() == Value::Kind::List) {
      std::vector<Value> items;
      for (const Value &i : v.items())
        items.push_back(place(i));
      return v.kind() == Value::Kind::Tuple ? Value::tuple(std::move(items))
                                            : Value::list(std::move(items));
    }
    return v;
  };
  for (Value &v : probe.args)
    v = place(v);
  for (Kw &k : probe.kwargs)
    k.value = place(k.value);
  Value out;
  {
    trace::StateGuard off(nullptr);
    trace::ProbeGuard probing;
    out = impl_(probe);
  }
  std::vector<Var> leaves;
  TreeDef outDef = trace::valueTree(out, leaves);
  if (leaves.empty())
    raise("{} returns {}: a wrapped function must return tensors",
          schema_->printName().str(), out.str());
  std::vector<OutputType> types;
  for (const Var &v : leaves) {
    OutputType t;
    t.shape = v.shape();
    t.dtype = v.dtype();
    types.push_back(t);
  }
  auto leaf = [&](const Var &v) { return trace::traceLeaf(*st, v); };
  std::vector<Arg> a;
  std::vector<KwArg> kw;
  for (const Value &x : args.args)
    a.push_back(trace::toArg(x, leaf));
  for (const Kw &k : args.kwargs)
    kw.emplace_back(k.name, trace::toArg(k.value, leaf));
  auto outs = st->scope().b.callFunctionN(*schema_, std::move(a), std::move(kw),
                                          leaves.size(), types);
  Expr &e = *outs[0]->expr();
  e.setOutDef(outDef);
  st->created(&e);
  if (st->computeValues && real) {
    for (size_t i = 0; i < leaves.size(); ++i)
      st->values[outs[i]] = leaves[i].value();
    trace::checkExpr(*st, e);
  }
  return trace::outputsValue(e);
}

} // namespace tmg
