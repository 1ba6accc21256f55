//===- Rules.cpp - Compiling declarative rules -----------------------------===//
#include "tm/matcher/Rules.h"

#include <map>

#include "RuleAst.h"
#include "tm/ir/Suggest.h"

namespace tmg {

using namespace rules;
using PN = pat::PatternNode;

namespace {

/// Re-raises a DSL error without a location at `pos` of `src`.
template <typename F> auto at(const Source &src, size_t pos, F &&f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error &e) {
    if (!e.diagnostic().loc.empty())
      throw;
    std::string msg = e.diagnostic().message;
    if (llvm::StringRef(msg).startswith("pattern: "))
      msg = msg.substr(9);
    src.error(pos, msg);
  }
}

pat::Pat toPat(const Ast &a, const Source &src, std::map<std::string, pat::Pat> &caps) {
  pat::Pat p;
  switch (a.k) {
  case Ast::K::Capture: {
    auto it = caps.find(a.name);
    if (it != caps.end()) {
      if (a.inner)
        src.error(a.pos, fmt::format("'${}' is defined twice; use '${}' alone to refer to it",
                                     a.name, a.name));
      p = it->second;
    } else {
      p = a.inner ? toPat(*a.inner, src, caps).bind(a.name) : pat::any(a.name);
      caps[a.name] = p;
    }
    break;
  }
  case Ast::K::Any: p = pat::any(); break;
  case Ast::K::Var: p = pat::var(); break;
  case Ast::K::Const: p = pat::constant(); break;
  case Ast::K::LitAny: p = pat::lit(); break;
  case Ast::K::Lit: p = pat::lit(a.literal); break;
  case Ast::K::Or: {
    p = toPat(*a.alts[0], src, caps);
    for (size_t i = 1; i < a.alts.size(); ++i)
      p = p | toPat(*a.alts[i], src, caps);
    break;
  }
  case Ast::K::Call: {
    switch (a.target) {
    case PN::OpTarget::Schema: p = pat::op(*a.schema); break;
    case PN::OpTarget::Module: p = pat::module(*a.module); break;
    case PN::OpTarget::AnyModule: p = pat::anyModule(); break;
    }
    std::vector<pat::PatArg> args;
    for (const auto &x : a.args)
      args.emplace_back(toPat(*x, src, caps));
    p = p(std::move(args));
    for (const auto &k : a.kwargs) {
      pat::Pat v = toPat(*k.value, src, caps);
      p = at(src, k.pos, [&] { return p.kwarg(k.name, v); });
    }
    if (a.prefix)
      p = p.prefix();
    if (a.ordered)
      p = p.ordered();
    if (a.output >= 0)
      p = p.output(a.output);
    for (const auto &[n, v] : a.attrs)
      p = p.hasAttr(n, v);
    break;
  }
  }
  if (a.checkUsers)
    p = p.checkUsers(*a.checkUsers);
  return p;
}

/// Checks a replacement: captures bound by the match, functions and
/// methods only.
void checkReplacement(const Ast &a, const Source &src,
                      const std::map<std::string, pat::Pat> &caps) {
  switch (a.k) {
  case Ast::K::Capture:
    if (a.inner)
      src.error(a.pos, "a replacement cannot define captures ('$name=...')");
    if (!caps.count(a.name)) {
      std::vector<std::string> names;
      for (const auto &[n, p] : caps)
        names.push_back(n);
      src.error(a.pos, fmt::format("'${}' is not captured by the match{}", a.name,
                                   names.empty()
                                       ? std::string(" (it captures nothing)")
                                       : fmt::format("; did you mean '${}'?",
                                                     closestName(a.name, names))));
    }
    return;
  case Ast::K::Lit:
    return;
  case Ast::K::Call:
    if (a.target != PN::OpTarget::Schema || a.schema->opClass() == OpClass::OpDef)
      src.error(a.pos, "a replacement can call functions and tensor methods only");
    if (a.prefix || a.hasModifiers)
      src.error(a.pos, "a replacement call takes no '...' or modifiers");
    if (a.schema->opClass() == OpClass::TensorMethod && a.args.empty())
      src.error(a.pos, "a method call needs a receiver");
    for (const auto &x : a.args)
      checkReplacement(*x, src, caps);
    for (const auto &k : a.kwargs)
      checkReplacement(*k.value, src, caps);
    return;
  default:
    src.error(a.pos, "a replacement holds captures, literals and calls only (no wildcards or "
                     "alternatives)");
  }
}

Arg argFromLiteral(const TreeDef &t) {
  switch (t.kind()) {
  case TreeDef::Kind::Const: return Arg(t.value());
  case TreeDef::Kind::Tuple:
  case TreeDef::Kind::List: {
    std::vector<Arg> items;
    for (size_t i = 0; i < t.numChildren(); ++i)
      items.push_back(argFromLiteral(t.child(i)));
    return t.kind() == TreeDef::Kind::Tuple ? Arg::tuple(std::move(items))
                                            : Arg::list(std::move(items));
  }
  default:
    raise("replacement: literal {} cannot be passed as an argument", t.str());
  }
}

/// A value of a `where` operand.
struct Val {
  enum K : uint8_t { Unknown, Num, Str, Tuple, None } k = Unknown;
  double num = 0;
  std::string str;
  std::vector<double> tuple;
};

Val fromLiteral(const TreeDef &t) {
  Val v;
  if (t.isConst()) {
    const Scalar &s = t.value();
    if (s.isNumber()) {
      v.k = Val::Num;
      v.num = s.toDouble();
    } else if (s.isString()) {
      v.k = Val::Str;
      v.str = s.getString();
    } else if (s.isNone()) {
      v.k = Val::None;
    }
    return v;
  }
  if (t.kind() == TreeDef::Kind::Tuple || t.kind() == TreeDef::Kind::List) {
    v.k = Val::Tuple;
    for (size_t i = 0; i < t.numChildren(); ++i) {
      const TreeDef &c = t.child(i);
      if (!c.isConst() || !c.value().isNumber())
        return Val{};
      v.tuple.push_back(c.value().toDouble());
    }
  }
  return v;
}

Val evalOperand(const WhereOperand &o, const Match &m, uint32_t id) {
  if (!o.isCapture)
    return fromLiteral(o.literal);
  Node *n = m.nodeAt(id);
  const TreeDef *l = m.literalAt(id);
  Val v;
  if (o.prop.empty() || o.prop == "value") {
    if (l)
      return fromLiteral(*l);
    if (o.prop == "value" && n)
      if (auto *c = llvm::dyn_cast<Constant>(n->expr()))
        if (c->isTensor() && c->tensor().numel() == 1) {
          v.k = Val::Num;
          v.num = c->tensor().at(0);
        }
    return v;
  }
  if (o.prop == "users") {
    if (n) {
      v.k = Val::Num;
      v.num = double(n->numUsers());
    }
    return v;
  }
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  if (!t)
    return v;
  if (o.prop == "dtype") {
    if (t->hasDType()) {
      v.k = Val::Str;
      v.str = dtypeName(t->dtype()).str();
    }
    return v;
  }
  if (!t->shape())
    return v;
  const Shape &s = *t->shape();
  if (o.prop == "rank") {
    v.k = Val::Num;
    v.num = double(s.size());
  } else if (o.index) {
    int64_t i = *o.index < 0 ? *o.index + int64_t(s.size()) : *o.index;
    if (i >= 0 && i < int64_t(s.size())) {
      v.k = Val::Num;
      v.num = double(s[i]);
    }
  } else {
    v.k = Val::Tuple;
    for (int64_t d : s)
      v.tuple.push_back(double(d));
  }
  return v;
}

bool compare(const Val &a, const Val &b, const std::string &op) {
  if (a.k == Val::Unknown || b.k == Val::Unknown)
    return false;
  if (a.k != b.k)
    return op == "!=";
  if (a.k == Val::Num) {
    if (op == "==") return a.num == b.num;
    if (op == "!=") return a.num != b.num;
    if (op == "<") return a.num < b.num;
    if (op == "<=") return a.num <= b.num;
    if (op == ">") return a.num > b.num;
    return a.num >= b.num;
  }
  bool eq = a.k == Val::Str ? a.str == b.str : a.k == Val::Tuple ? a.tuple == b.tuple : true;
  if (op == "==")
    return eq;
  if (op == "!=")
    return !eq;
  return false;
}

struct CompiledWhere {
  WhereClause clause;
  uint32_t lhsId = 0, rhsId = 0;
  bool holds(const Match &m) const {
    return compare(evalOperand(clause.lhs, m, lhsId), evalOperand(clause.rhs, m, rhsId),
                   clause.op);
  }
};

class RulePattern : public RewritePattern {
public:
  RulePattern(std::string name, Pattern p, int benefit, std::unique_ptr<Ast> repl,
              std::vector<CompiledWhere> where, std::map<std::string, uint32_t> ids)
      : RewritePattern(std::move(name), std::move(p), benefit), repl_(std::move(repl)),
        where_(std::move(where)), ids_(std::move(ids)) {}

  LogicalResult rewrite(const Match &m, Rewriter &rw) const override {
    for (const auto &w : where_)
      if (!w.holds(m))
        return failure();
    Expr *root = m.rootExpr();
    if (root->numOutputs() != 1)
      return failure();
    Node *n = nullptr;
    (void)eval(*repl_, m, rw, &n);
    if (!n)
      return failure();
    return rw.replaceAllUsesWith(root->output(0), n);
  }

private:
  /// Evaluates a replacement expression; `*node` is the node it denotes
  /// (nullptr for a literal).
  Arg eval(const Ast &a, const Match &m, Rewriter &rw, Node **node) const {
    *node = nullptr;
    switch (a.k) {
    case Ast::K::Capture: {
      uint32_t id = ids_.at(a.name);
      if (Node *n = m.nodeAt(id)) {
        *node = n;
        return Arg(n);
      }
      if (const TreeDef *l = m.literalAt(id))
        return argFromLiteral(*l);
      raise("replacement: '${}' is unbound", a.name);
    }
    case Ast::K::Lit:
      return argFromLiteral(a.literal);
    case Ast::K::Call: {
      std::vector<Arg> args;
      Node *self = nullptr;
      for (size_t i = 0; i < a.args.size(); ++i) {
        Node *n = nullptr;
        args.push_back(eval(*a.args[i], m, rw, &n));
        if (i == 0)
          self = n;
      }
      std::vector<KwArg> kwargs;
      for (const auto &k : a.kwargs) {
        Node *n = nullptr;
        kwargs.emplace_back(k.name, eval(*k.value, m, rw, &n));
      }
      Node *out;
      if (a.schema->opClass() == OpClass::TensorMethod) {
        if (!self)
          raise("replacement: the receiver of {} is not a tensor", a.schema->name().str());
        args.erase(args.begin());
        out = rw.callMethod(self, a.schema->name(), std::move(args), std::move(kwargs));
      } else {
        out = rw.callFunction(*a.schema, std::move(args), std::move(kwargs));
      }
      *node = out;
      return Arg(out);
    }
    default:
      raise("replacement: unexpected expression");
    }
  }

  std::unique_ptr<Ast> repl_;
  std::vector<CompiledWhere> where_;
  std::map<std::string, uint32_t> ids_;
};

} // namespace

pat::Pat parsePattern(llvm::StringRef text, const Location &loc) {
  Source src{text, loc};
  std::unique_ptr<Ast> a = parseExpr(src);
  std::map<std::string, pat::Pat> caps;
  return toPat(*a, src, caps);
}

std::vector<std::unique_ptr<RewritePattern>> compileRules(const std::vector<RuleDecl> &rules) {
  std::vector<std::unique_ptr<RewritePattern>> out;
  for (const RuleDecl &r : rules) {
    Source msrc{r.match, r.matchLoc};
    std::unique_ptr<Ast> ma = parseExpr(msrc);
    std::map<std::string, pat::Pat> caps;
    pat::Pat root = toPat(*ma, msrc, caps);
    Pattern p = at(msrc, ma->pos, [&] { return Pattern(root); });
    std::map<std::string, uint32_t> ids;
    for (const auto &[n, h] : caps) {
      // A capture whose pattern node did not survive compilation (e.g. `$c`
      // in `$x=$c`, where the outer capture takes its place) has no slot in
      // a match: a rule error, not an index past the match's slots (found
      // by fuzz_rules).
      int64_t id = p.idOf(&h.node());
      if (id < 0)
        msrc.error(ma->pos, fmt::format("capture '${}' cannot be referenced: it is "
                                        "nested directly in another capture",
                                        n));
      ids[n] = uint32_t(id);
    }
    Source rsrc{r.replace, r.replaceLoc};
    std::unique_ptr<Ast> ra = parseExpr(rsrc);
    checkReplacement(*ra, rsrc, caps);
    if (ra->k == Ast::K::Lit)
      rsrc.error(ra->pos, "a replacement must produce a tensor, not a literal");
    std::vector<CompiledWhere> where;
    for (size_t i = 0; i < r.where.size(); ++i) {
      Source wsrc{r.where[i], i < r.whereLocs.size() ? r.whereLocs[i] : r.loc};
      CompiledWhere w{parseWhere(wsrc)};
      for (WhereOperand *o : {&w.clause.lhs, &w.clause.rhs}) {
        if (!o->isCapture)
          continue;
        auto it = ids.find(o->capture);
        if (it == ids.end())
          wsrc.error(o->pos, fmt::format("'${}' is not captured by the match", o->capture));
        (o == &w.clause.lhs ? w.lhsId : w.rhsId) = it->second;
      }
      where.push_back(std::move(w));
    }
    out.push_back(std::make_unique<RulePattern>(ruleName(r), std::move(p), int(r.benefit),
                                                std::move(ra), std::move(where),
                                                std::move(ids)));
  }
  return out;
}

std::string ruleName(const RuleDecl &r) {
  if (!r.name.empty())
    return r.name;
  const Location &l = r.matchLoc.empty() ? r.loc : r.matchLoc;
  return l.empty() ? "unnamed rule" : "rule at " + l.str();
}

FailureOr<std::shared_ptr<const FrozenPatternSet>>
compileRuleSet(const std::vector<RuleDecl> &rules) {
  try {
    PatternSet set;
    for (auto &p : compileRules(rules))
      set.add(std::move(p));
    return std::make_shared<const FrozenPatternSet>(std::move(set));
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

} // namespace tmg
