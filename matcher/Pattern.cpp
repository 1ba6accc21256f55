//===- Pattern.cpp - The pattern DSL --------------------------------------===//
#include "tm/matcher/Pattern.h"

#include <cmath>

#include "tm/ir/Diagnostic.h"

namespace tmg::pat {

namespace {

PatternRef make(PatternNode::Kind k, llvm::StringRef name = "") {
  auto n = std::make_shared<PatternNode>();
  n->kind = k;
  n->name = name.str();
  return n;
}

Pat opPattern(const OpSchema &s) {
  auto n = std::make_shared<PatternNode>();
  n->kind = PatternNode::Kind::Op;
  n->target = PatternNode::OpTarget::Schema;
  n->schema = &s;
  // Commutativity comes from the op's traits, never from its name.
  n->commutative = s.isCommutative();
  return Pat(n);
}

void printLiteral(std::string &out, const TreeDef &t) {
  size_t next = 0;
  t.print(out, [](size_t) { return std::string("_"); }, &next, false);
}

void printPattern(std::string &out, const PatternNode &n, bool top);

void printArgs(std::string &out, const PatternNode &n, size_t from) {
  bool first = true;
  for (size_t i = from; i < n.args.size(); ++i) {
    if (!first)
      out += ", ";
    first = false;
    printPattern(out, *n.args[i], false);
  }
  for (const auto &k : n.kwargs) {
    if (!first)
      out += ", ";
    first = false;
    out += k.name + "=";
    printPattern(out, *k.pattern, false);
  }
  if (!n.allArgs) {
    if (!first)
      out += ", ";
    out += "...";
  }
}

void printPattern(std::string &out, const PatternNode &n, bool top) {
  bool named = !n.name.empty();
  using K = PatternNode::Kind;
  if (named && n.kind == K::Any) {
    out += "$" + n.name;
  } else {
    if (named)
      out += "$" + n.name + "=";
    switch (n.kind) {
    case K::Any: out += "_"; break;
    case K::Var: out += "var"; break;
    case K::Const: out += "const"; break;
    case K::Lit:
      if (n.literal)
        printLiteral(out, *n.literal);
      else
        out += "lit";
      break;
    case K::Or:
      out += "(";
      for (size_t i = 0; i < n.alts.size(); ++i) {
        if (i)
          out += " | ";
        printPattern(out, *n.alts[i], false);
      }
      out += ")";
      break;
    case K::Op:
      if (n.target == PatternNode::OpTarget::Schema && n.schema->opClass() == OpClass::TensorMethod &&
          !n.args.empty()) {
        // Methods print as Python calls on their receiver.
        printPattern(out, *n.args[0], false);
        out += "." + n.schema->name().str() + "(";
        printArgs(out, n, 1);
        out += ")";
      } else {
        if (n.target == PatternNode::OpTarget::Module)
          out += n.moduleType->name;
        else if (n.target == PatternNode::OpTarget::AnyModule)
          out += "module";
        else if (n.schema->opClass() == OpClass::Function)
          out += n.schema->printName().str();
        else
          out += n.schema->name().str();
        out += "(";
        printArgs(out, n, 0);
        out += ")";
      }
      for (const auto &[a, v] : n.attrs) {
        out += ".has_attr(" + a + "=";
        printLiteral(out, v);
        out += ")";
      }
      if (n.outputIndex >= 0)
        out += ".output(" + std::to_string(n.outputIndex) + ")";
      if (n.target == PatternNode::OpTarget::Schema && n.schema->isCommutative() &&
          !n.commutative)
        out += ".ordered()";
      break;
    }
  }
  if (n.checkUsers)
    out += *n.checkUsers ? ".check_users(true)" : ".check_users(false)";
  for (const auto &p : n.preds)
    out += ".where(" + p.description + ")";
  (void)top;
}

bool isTensorWith(const Node *n, const std::function<bool(const TensorNode &)> &f) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  return t && f(*t);
}

} // namespace

std::string PatternNode::str() const {
  std::string out;
  printPattern(out, *this, true);
  return out;
}

PatArg::PatArg(Scalar v) : p_(lit(std::move(v))) {}

Pat Pat::modified(const std::function<void(PatternNode &)> &f) const {
  if (!n_)
    raise("pattern: modifying an empty pattern");
  auto copy = std::make_shared<PatternNode>(*n_);
  f(*copy);
  return Pat(copy);
}

Pat Pat::operator()(std::vector<PatArg> args) const {
  if (!n_ || n_->kind != PatternNode::Kind::Op)
    raise("pattern: only op patterns can be called (got '{}')", str());
  return modified([&](PatternNode &n) {
    n.args.clear();
    for (auto &a : args) {
      if (!a.pat().valid())
        raise("pattern: empty argument pattern in a call of '{}'", str());
      n.args.push_back(a.pat().ref());
    }
    // Operand swapping is for binary ops only.
    if (n.args.size() != 2)
      n.commutative = false;
  });
}

Pat Pat::kwarg(llvm::StringRef param, const PatArg &p) const {
  if (!n_ || n_->kind != PatternNode::Kind::Op)
    raise("pattern: kwarg() needs an op pattern (got '{}')", str());
  int64_t idx = -1;
  if (n_->target == PatternNode::OpTarget::Schema) {
    idx = n_->schema->paramIndex(param);
    if (idx < 0) {
      std::string best;
      unsigned bd = ~0u;
      for (const auto &q : n_->schema->params())
        if (unsigned d = llvm::StringRef(q.name).contains(param) ? 0 : param.edit_distance(q.name);
            !q.name.empty() && d < bd) {
          bd = d;
          best = q.name;
        }
      raise("pattern: {} has no parameter '{}'{}", n_->schema->printName().str(), param.str(),
            best.empty() ? std::string() : fmt::format("; did you mean '{}'?", best));
    }
  }
  return modified([&](PatternNode &n) {
    n.kwargs.push_back({param.str(), idx, p.pat().ref()});
  });
}

Pat Pat::bind(llvm::StringRef name) const {
  return modified([&](PatternNode &n) { n.name = name.str(); });
}
Pat Pat::checkUsers(bool on) const {
  return modified([&](PatternNode &n) { n.checkUsers = on; });
}
Pat Pat::prefix() const {
  return modified([&](PatternNode &n) { n.allArgs = false; });
}
Pat Pat::ordered() const {
  return modified([&](PatternNode &n) { n.commutative = false; });
}
Pat Pat::output(int i) const {
  if (!n_ || n_->kind != PatternNode::Kind::Op)
    raise("pattern: output() needs an op pattern (got '{}')", str());
  if (i < 0)
    raise("pattern: output index {} is negative", i);
  return modified([&](PatternNode &n) { n.outputIndex = i; });
}
Pat Pat::hasAttr(llvm::StringRef attr, TreeDef value) const {
  if (!n_ || n_->kind != PatternNode::Kind::Op || n_->target == PatternNode::OpTarget::Schema)
    raise("pattern: has_attr() is for module patterns (got '{}')", str());
  return modified([&](PatternNode &n) { n.attrs.emplace_back(attr.str(), std::move(value)); });
}
Pat Pat::hasParam(llvm::StringRef param, TreeDef value) const {
  if (!n_ || n_->kind != PatternNode::Kind::Op || n_->target != PatternNode::OpTarget::Schema)
    raise("pattern: has_params() is for function and method patterns (got '{}')", str());
  return kwarg(param, lit(std::move(value)));
}
Pat Pat::where(std::string description,
               std::function<bool(const Node *, const TreeDef *)> fn) const {
  return modified([&](PatternNode &n) {
    n.preds.push_back({std::move(description), std::move(fn)});
  });
}
Pat Pat::withShape(Shape s) const {
  std::string d = "shape == " + shapeStr(s);
  return where(d, [s](const Node *n, const TreeDef *) {
    return isTensorWith(n, [&](const TensorNode &t) { return t.shape() && *t.shape() == s; });
  });
}
Pat Pat::withRank(int64_t r) const {
  return where("rank == " + std::to_string(r), [r](const Node *n, const TreeDef *) {
    return isTensorWith(n, [&](const TensorNode &t) {
      return t.shape() && int64_t(t.shape()->size()) == r;
    });
  });
}
Pat Pat::withDType(DType dt) const {
  return where(fmt::format("dtype == {}", dtypeName(dt).str()), [dt](const Node *n, const TreeDef *) {
    return isTensorWith(n, [&](const TensorNode &t) { return t.hasDType() && t.dtype() == dt; });
  });
}
Pat Pat::withValue(double v) const {
  return where("value == " + pyFloatRepr(v), [v](const Node *n, const TreeDef *l) {
    if (l)
      return l->isConst() && l->value().isNumber() && l->value().toDouble() == v;
    auto *c = n ? llvm::dyn_cast<Constant>(n->expr()) : nullptr;
    if (!c || !c->isTensor() || c->tensor().numel() != 1)
      return false;
    return c->tensor().at(0) == v;
  });
}

Pat Pat::operator|(const Pat &o) const {
  if (!n_ || !o.n_)
    raise("pattern: '|' of an empty pattern");
  auto n = std::make_shared<PatternNode>();
  n->kind = PatternNode::Kind::Or;
  auto add = [&](const PatternRef &p) {
    // (a | b) | c flattens when the inner alternative is anonymous.
    if (p->kind == PatternNode::Kind::Or && p->name.empty() && p->preds.empty() &&
        !p->checkUsers && !p->key)
      for (const auto &a : p->alts)
        n->alts.push_back(a);
    else
      n->alts.push_back(p);
  };
  add(n_);
  add(o.n_);
  return Pat(n);
}

Pat any(llvm::StringRef name) { return Pat(make(PatternNode::Kind::Any, name)); }
Pat var(llvm::StringRef name) { return Pat(make(PatternNode::Kind::Var, name)); }
Pat constant(llvm::StringRef name) { return Pat(make(PatternNode::Kind::Const, name)); }
Pat lit() { return Pat(make(PatternNode::Kind::Lit)); }
Pat lit(TreeDef v) {
  if (v.numLeaves() != 0)
    raise("pattern: a literal cannot contain node leaves");
  auto n = std::make_shared<PatternNode>();
  n->kind = PatternNode::Kind::Lit;
  n->literal = std::move(v);
  return Pat(n);
}
Pat lit(Scalar v) { return lit(TreeDef::constant(std::move(v))); }

Pat fn(llvm::StringRef name) { return opPattern(functionOp(name)); }
Pat method(llvm::StringRef name) { return opPattern(methodOp(name)); }
Pat opdef(llvm::StringRef name) {
  const OpSchema *s = OpRegistry::instance().lookupOpDef(name);
  if (!s)
    raise("pattern: unknown op def '{}'", name.str());
  return opPattern(*s);
}
Pat op(const OpSchema &s) { return opPattern(s); }
Pat module(const ModuleType &t) {
  auto n = std::make_shared<PatternNode>();
  n->kind = PatternNode::Kind::Op;
  n->target = PatternNode::OpTarget::Module;
  n->moduleType = &t;
  return Pat(n);
}
Pat anyModule() {
  auto n = std::make_shared<PatternNode>();
  n->kind = PatternNode::Kind::Op;
  n->target = PatternNode::OpTarget::AnyModule;
  return Pat(n);
}
Pat isOp(llvm::StringRef name) {
  if (const ModuleType *t = ModuleTypeRegistry::instance().lookup(name))
    return module(*t);
  if (const OpSchema *s = OpRegistry::instance().lookupMethod(name))
    return opPattern(*s);
  if (const OpSchema *s = OpRegistry::instance().lookupOpDef(name))
    return opPattern(*s);
  return fn(name);
}

Pat operator+(const Pat &a, const PatArg &b) { return opPattern(tmg::op(OpKind::MAdd))(a, b); }
Pat operator-(const Pat &a, const PatArg &b) { return opPattern(tmg::op(OpKind::MSub))(a, b); }
Pat operator*(const Pat &a, const PatArg &b) { return opPattern(tmg::op(OpKind::MMul))(a, b); }
Pat operator/(const Pat &a, const PatArg &b) { return opPattern(tmg::op(OpKind::MTrueDiv))(a, b); }
Pat operator-(const Pat &a) { return opPattern(tmg::op(OpKind::MNeg))(a); }

} // namespace tmg::pat
