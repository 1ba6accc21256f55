//===- Matcher.cpp - Compiling and matching patterns ----------------------===//
#include "tm/matcher/Matcher.h"

#include <llvm/ADT/DenseSet.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/InternalGraph.h"

namespace tmg {

using PN = pat::PatternNode;

namespace {
/// The key of "any module call" patterns.
const char AnyModuleKeyTag = 0;
} // namespace

RootKey anyModuleRootKey() { return &AnyModuleKeyTag; }

/// True when one of `e`'s inputs from `first` on is produced by `op` (the
/// quick checks: an argument pattern naming an op needs such a producer).
static bool someInputProducedBy(const Expr *e, size_t first, const OpSchema *op) {
  for (size_t j = first; j < e->numInputs(); ++j)
    if (e->input(j)->expr()->opSchema() == op)
      return true;
  return false;
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

uint32_t Pattern::compile(Data &d, const pat::PatternRef &p, bool isRoot) {
  auto &ids = d.ids;
  auto &nodes_ = d.nodes;
  auto &keep_ = d.keep;
  auto &names_ = d.names;
  auto &keys_ = d.keys;
  auto &children_ = d.children;
  auto it = ids.find(p.get());
  if (it != ids.end())
    return it->second;
  uint32_t id = uint32_t(nodes_.size());
  ids[p.get()] = id;
  keep_.push_back(p);
  nodes_.push_back(CNode{p.get()});
  // A name may label several sub-patterns (one per alternative); lookups
  // by name return the one that is bound.
  if (!p->name.empty())
    names_.emplace_back(id, p->name);
  if (p->key)
    keys_.emplace_back(p->key.get(), id);
  std::vector<uint32_t> kids;
  if (p->kind == PN::Kind::Op) {
    for (const auto &a : p->args)
      kids.push_back(compile(d, a, false));
    for (const auto &k : p->kwargs)
      kids.push_back(compile(d, k.pattern, false));
  } else if (p->kind == PN::Kind::Or) {
    for (const auto &a : p->alts)
      kids.push_back(compile(d, a, isRoot));
  }
  CNode &c = nodes_[id];
  c.kind = p->kind;
  c.target = p->target;
  c.schema = p->schema;
  c.commutative = p->commutative;
  c.allArgs = p->allArgs;
  c.outputIndex = p->outputIndex;
  c.constrained = !p->preds.empty() || p->key != nullptr;
  c.hasAttrs = !p->attrs.empty();
  c.firstChild = uint32_t(children_.size());
  if (p->kind == PN::Kind::Op) {
    c.numArgs = uint16_t(p->args.size());
    c.numKw = uint16_t(p->kwargs.size());
  } else if (p->kind == PN::Kind::Or) {
    c.numAlts = uint16_t(p->alts.size());
  }
  children_.insert(children_.end(), kids.begin(), kids.end());
  // MegEngine checks users of every matched pattern except constants and
  // the root; leaves here are the match's inputs, so they are not checked
  // unless asked.
  c.checkUsers = p->checkUsers ? *p->checkUsers : p->kind == PN::Kind::Op;
  if (p->kind == PN::Kind::Op) {
    bool bounded = p->kwargs.empty();
    for (const auto &a : p->args) {
      if (a->kind == PN::Kind::Var || a->kind == PN::Kind::Const || a->kind == PN::Kind::Op)
        ++c.nodeOnlyArgs;
      else if (a->kind != PN::Kind::Lit)
        bounded = false; // any() and alternatives may cover a container
    }
    c.maxCover = bounded ? int32_t(c.nodeOnlyArgs) : -1;
  }
  if (isRoot)
    c.checkUsers = false;
  return id;
}

static void collectRootKeys(const PN &p, std::vector<RootKey> &out) {
  if (p.kind == PN::Kind::Or) {
    for (const auto &a : p.alts)
      collectRootKeys(*a, out);
    return;
  }
  if (p.kind != PN::Kind::Op)
    raise("pattern: a root must be an op or alternatives of ops, not '{}'", p.str());
  switch (p.target) {
  case PN::OpTarget::Schema: out.push_back(p.schema); break;
  case PN::OpTarget::Module: out.push_back(p.moduleType); break;
  case PN::OpTarget::AnyModule: out.push_back(anyModuleRootKey()); break;
  }
}

Pattern::Pattern(const pat::Pat &root) : Pattern(std::vector<pat::Pat>{root}) {}

Pattern::Pattern(std::vector<pat::Pat> roots) {
  if (roots.empty())
    raise("pattern: no root");
  auto data = std::make_shared<Data>();
  Data &d = *data;
  auto &ids = d.ids;
  auto &nodes_ = d.nodes;
  auto &children_ = d.children;
  auto &roots_ = d.roots;
  auto &anchors_ = d.anchors;
  auto &rootKeys_ = d.rootKeys;
  for (size_t i = 0; i < roots.size(); ++i) {
    if (!roots[i].valid())
      raise("pattern: root {} is empty", i);
    std::vector<RootKey> keys;
    collectRootKeys(roots[i].node(), keys);
    if (i == 0) {
      rootKeys_ = keys;
      std::sort(rootKeys_.begin(), rootKeys_.end());
      rootKeys_.erase(std::unique(rootKeys_.begin(), rootKeys_.end()), rootKeys_.end());
    }
    size_t before = nodes_.size();
    if (ids.count(roots[i].ref().get()))
      raise("pattern: root {} ('{}') is also a sub-pattern of an earlier root", i,
            roots[i].str());
    uint32_t r = compile(d, roots[i].ref(), true);
    roots_.push_back(r);
    anchors_.push_back(0);
    if (i == 0)
      continue;
    // Find a value of an earlier root that this root uses: its users are
    // where this root's expr is searched.
    bool found = false;
    std::vector<uint32_t> stack = {r};
    llvm::DenseSet<uint32_t> seen;
    while (!stack.empty() && !found) {
      uint32_t id = stack.back();
      stack.pop_back();
      if (!seen.insert(id).second)
        continue;
      const CNode &c = nodes_[id];
      for (uint32_t k = 0; k < uint32_t(c.numArgs + c.numKw + c.numAlts); ++k) {
        uint32_t ch = children_[c.firstChild + k];
        if (ch < before && nodes_[ch].p->kind != PN::Kind::Lit) {
          anchors_.back() = ch;
          found = true;
          break;
        }
        stack.push_back(ch);
      }
    }
    if (!found)
      raise("pattern: root {} ('{}') shares no sub-pattern with the roots before it", i,
            roots[i].str());
  }
  // The quick check of the first root: one entry per alternative.
  std::vector<uint32_t> alts = {roots_[0]};
  while (!alts.empty()) {
    const CNode &c = nodes_[alts.back()];
    alts.pop_back();
    if (c.kind == PN::Kind::Or) {
      for (uint16_t k = c.numAlts; k-- > 0;)
        alts.push_back(children_[c.firstChild + k]);
      continue;
    }
    RootCheck rc;
    if (c.target == PN::OpTarget::Schema) {
      rc.op = c.schema;
      rc.nodeOnlyArgs = c.nodeOnlyArgs;
      rc.maxInputs = c.allArgs ? c.maxCover : -1;
      for (uint16_t k = 0; k < c.numArgs && rc.numArgOps < 4; ++k) {
        const CNode &a = nodes_[children_[c.firstChild + k]];
        if (a.kind == PN::Kind::Op && a.target == PN::OpTarget::Schema)
          rc.argOps[rc.numArgOps++] = a.schema;
      }
    }
    d.rootChecks.push_back(rc);
  }
  d_ = std::move(data);
}

bool Pattern::quickAccepts(const Expr *e) const {
  const OpSchema *op = e->opSchema();
  size_t n = e->numInputs();
  for (const RootCheck &rc : d_->rootChecks) {
    if (!rc.op)
      return true;
    if (rc.op != op || rc.nodeOnlyArgs > n || (rc.maxInputs >= 0 && n > size_t(rc.maxInputs)))
      continue;
    bool all = true;
    for (uint8_t k = 0; k < rc.numArgOps && all; ++k)
      all = someInputProducedBy(e, 0, rc.argOps[k]);
    if (all)
      return true;
  }
  return false;
}

std::string Pattern::str() const {
  std::string out;
  for (size_t i = 0; i < numRoots(); ++i) {
    if (i)
      out += "; ";
    out += d_->nodes[d_->roots[i]].p->str();
  }
  return out;
}

int64_t Pattern::idOfName(llvm::StringRef name) const {
  for (const auto &[id, n] : d_->names)
    if (n == name)
      return id;
  return -1;
}
int64_t Pattern::idOfKey(const pat::CaptureKey *k) const {
  for (const auto &[key, id] : d_->keys)
    if (key == k)
      return id;
  return -1;
}
int64_t Pattern::idOf(const PN *n) const {
  auto it = d_->ids.find(n);
  return it == d_->ids.end() ? -1 : int64_t(it->second);
}

//===----------------------------------------------------------------------===//
// Matching
//===----------------------------------------------------------------------===//

namespace {

bool scalarEqual(const Scalar &a, const Scalar &b) {
  if (a.isNumber() && b.isNumber())
    return a.toDouble() == b.toDouble();
  return a == b;
}

/// Structural equality of constant TreeDefs, numbers by value.
bool literalEqual(const TreeDef &a, const TreeDef &b) {
  if (a.isConst() || b.isConst())
    return a.isConst() && b.isConst() && scalarEqual(a.value(), b.value());
  if (a.kind() != b.kind() || a.numChildren() != b.numChildren() || a.isLeaf())
    return false;
  bool keyed = a.kind() == TreeDef::Kind::Dict || a.kind() == TreeDef::Kind::OrderedDict;
  for (size_t i = 0; i < a.numChildren(); ++i) {
    if (keyed && a.key(i) != b.key(i))
      return false;
    if (!literalEqual(a.child(i), b.child(i)))
      return false;
  }
  return true;
}

std::string describe(const Expr *e) {
  std::string s = e->str();
  for (char &c : s)
    if (c == '\t')
      c = ' ';
  return s;
}

std::string describe(const Node *n) {
  return fmt::format("'{}' ({})", n->str(), describe(n->expr()));
}

std::string literalText(const TreeDef &t) {
  std::string out;
  size_t next = 0;
  t.print(out, [](size_t) { return std::string("_"); }, &next, false);
  return out;
}

std::string indent(const std::string &s) {
  std::string out = "  ";
  for (char c : s) {
    out += c;
    if (c == '\n')
      out += "  ";
  }
  return out;
}

/// One argument slot of a call: a node, or a constant or container TreeDef.
struct Slot {
  const TreeDef *def = nullptr; ///< nullptr: a plain input (Apply)
  Node *node = nullptr;         ///< set when the slot is a single node leaf
  size_t leaves = 0;            ///< node leaves in the slot
};

} // namespace

// Explanations are formatted only in explain mode: a failed attempt costs
// no string work otherwise.
#define TM_WHY(...)                                                             \
  do {                                                                         \
    if (m.explain_)                                                            \
      m.why_ = fmt::format(__VA_ARGS__);                                       \
  } while (0)
#define TM_CONTEXT(...)                                                         \
  do {                                                                         \
    if (m.explain_)                                                            \
      context(fmt::format(__VA_ARGS__));                                       \
  } while (0)

/// The matching algorithm, over a Match's buffers.
/// A necessary condition of op pattern `c` matching at `e`, from the input
/// count and the inputs' producers alone (no argument TreeDef read, no
/// binding): true when `c` cannot match there. The op itself is not
/// compared (the caller did, or the full match does).
static bool quickReject(const Pattern &p, const Pattern::CNode &c, const Expr *e) {
  size_t skipIn = c.target != PN::OpTarget::Schema ? 1 : 0;
  if (e->numInputs() < skipIn)
    return true;
  size_t tensors = e->numInputs() - skipIn;
  if (c.nodeOnlyArgs > tensors || (c.allArgs && c.maxCover >= 0 && tensors > size_t(c.maxCover)))
    return true;
  for (uint16_t k = 0; k < c.numArgs; ++k) {
    const Pattern::CNode &a = p.cnode(p.child(c.firstChild + k));
    if (a.kind == PN::Kind::Op && a.target == PN::OpTarget::Schema &&
        !someInputProducedBy(e, skipIn, a.schema))
      return true;
  }
  return false;
}

struct MatchImpl {
  Match &m;
  const Pattern &p;
  /// The root expr at which Match::match checked the first root with
  /// Pattern::quickAccepts (an op pattern there is not checked again).
  const Expr *prechecked = nullptr;

  bool explain() const { return m.explain_; }
  void fail(std::string why) {
    if (m.explain_)
      m.why_ = std::move(why);
  }
  /// Wraps the current explanation with a context line.
  void context(const std::string &line) {
    if (m.explain_)
      m.why_ = line + "\n" + indent(m.why_);
  }

  void bindNode(uint32_t id, Node *n, Expr *e) {
    m.b_[id].node = n;
    m.b_[id].expr = e;
    m.trail_.push_back(id << 1);
  }
  void bindLit(uint32_t id, const TreeDef *t) {
    m.b_[id].lit = t;
    m.trail_.push_back(id << 1);
  }
  void addEdge(uint32_t id) {
    ++m.b_[id].edges;
    m.trail_.push_back((id << 1) | 1);
  }
  bool bound(uint32_t id) const {
    const Match::Binding &b = m.b_[id];
    return b.node || b.expr || b.lit;
  }

  /// The predicates and capture type of pattern `id` hold for `n` (or the
  /// literal `lit`). Inline for the usual unconstrained pattern node.
  bool checkPreds(uint32_t id, const Node *n, const TreeDef *lit) {
    return !p.cnode(id).constrained || checkConstraints(id, n, lit);
  }
  [[gnu::noinline]] bool checkConstraints(uint32_t id, const Node *n, const TreeDef *lit) {
    const PN &pn = *p.cnode(id).p;
    for (const auto &pr : pn.preds)
      if (!pr.fn(n, lit)) {
        TM_WHY("{}: {} fails the predicate '{}'", pn.str(),
                         n ? describe(n) : "literal " + literalText(*lit), pr.description);
        return false;
      }
    if (pn.key) {
      using CT = pat::CaptureType;
      bool ok = true;
      switch (pn.key->type) {
      case CT::Node: ok = n != nullptr; break;
      case CT::Tensor: ok = n && llvm::isa<TensorNode>(n); break;
      case CT::Module: ok = n && llvm::isa<ModuleNode>(n); break;
      case CT::Expr: ok = n && pn.key->exprIsa(n->expr()); break;
      }
      if (!ok) {
        TM_WHY("{}: {} does not have the type of its capture handle", pn.str(),
                         n ? describe(n) : "literal " + literalText(*lit));
        return false;
      }
    }
    return true;
  }

  /// Matches pattern `id` against an argument slot.
  bool matchSlot(uint32_t id, const Slot &s) {
    if (s.node)
      return matchNode(id, s.node, true);
    const PN &pn = *p.cnode(id).p;
    // A constant or a container argument.
    if (bound(id)) {
      if (m.b_[id].lit && literalEqual(*m.b_[id].lit, *s.def))
        return true;
      TM_WHY("{}: already bound to another value than {}", pn.str(),
                       literalText(*s.def));
      return false;
    }
    switch (pn.kind) {
    case PN::Kind::Any:
      break;
    case PN::Kind::Lit:
      if (!s.def->isConst() && s.leaves != 0) {
        TM_WHY("{}: the argument {} holds tensors, not a literal", pn.str(),
                         literalText(*s.def));
        return false;
      }
      if (pn.literal && !literalEqual(*pn.literal, *s.def)) {
        TM_WHY("{}: the argument is {}, not {}", pn.str(), literalText(*s.def),
                         literalText(*pn.literal));
        return false;
      }
      break;
    case PN::Kind::Or: {
      size_t mark = m.trail_.size();
      std::string whys;
      for (uint16_t k = 0; k < p.cnode(id).numAlts; ++k) {
        uint32_t alt = p.child(p.cnode(id).firstChild + k);
        if (matchSlot(alt, s)) {
          if (!checkPreds(id, nullptr, s.def)) {
            m.undo(mark);
            return false;
          }
          bindLit(id, s.def);
          return true;
        }
        m.undo(mark);
        if (explain())
          whys += "\n" + indent(m.why_);
      }
      TM_WHY("{}: no alternative matches the argument {}:{}", pn.str(),
                       literalText(*s.def), whys);
      return false;
    }
    default:
      TM_WHY("{}: expected a tensor, got the literal argument {}", pn.str(),
                       literalText(*s.def));
      return false;
    }
    if (!checkPreds(id, nullptr, s.def))
      return false;
    bindLit(id, s.def);
    return true;
  }

  /// Matches pattern `id` against node `n` (used by a call of the match when
  /// `edge`).
  bool matchNode(uint32_t id, Node *n, bool edge) {
    const Pattern::CNode &c = p.cnode(id);
    const PN &pn = *c.p;
    if (bound(id)) {
      const Match::Binding &b = m.b_[id];
      bool same = c.kind == PN::Kind::Op && c.outputIndex < 0 ? b.expr == n->expr()
                                                              : b.node == n;
      if (!same) {
        TM_WHY("{}: already bound to {}, not {}", pn.str(),
                         b.node ? describe(b.node) : std::string("a literal"), describe(n));
        return false;
      }
      if (edge && (c.kind == PN::Kind::Op || c.checkUsers))
        addEdge(id);
      return true;
    }
    switch (c.kind) {
    case PN::Kind::Any:
      break;
    case PN::Kind::Var:
      if (llvm::isa<Constant>(n->expr())) {
        TM_WHY("var: {} is produced by a Constant", describe(n));
        return false;
      }
      break;
    case PN::Kind::Const:
      if (!llvm::isa<Constant>(n->expr())) {
        TM_WHY("const: {} is not produced by a Constant", describe(n));
        return false;
      }
      break;
    case PN::Kind::Lit:
      TM_WHY("{}: expected a literal argument, got the tensor {}", pn.str(),
                       describe(n));
      return false;
    case PN::Kind::Op: {
      Expr *e = n->expr();
      if (c.outputIndex >= 0 &&
          (size_t(c.outputIndex) >= e->numOutputs() || e->output(c.outputIndex) != n)) {
        TM_WHY("{}: {} is not output {} of its expr", pn.str(), describe(n),
                         pn.outputIndex);
        return false;
      }
      if (!matchOp(id, e, n))
        return false;
      if (edge)
        addEdge(id);
      return true;
    }
    case PN::Kind::Or: {
      size_t mark = m.trail_.size();
      std::string whys;
      for (uint16_t k = 0; k < c.numAlts; ++k) {
        uint32_t alt = p.child(c.firstChild + k);
        if (matchNode(alt, n, edge)) {
          if (!checkPreds(id, n, nullptr)) {
            m.undo(mark);
            return false;
          }
          bindNode(id, n, n->expr());
          return true;
        }
        m.undo(mark);
        if (explain())
          whys += "\n" + indent(m.why_);
      }
      TM_WHY("{}: no alternative matches {}:{}", pn.str(), describe(n), whys);
      return false;
    }
    }
    if (!checkPreds(id, n, nullptr))
      return false;
    bindNode(id, n, n->expr());
    // A leaf with checkUsers counts its uses inside the match.
    if (edge && c.checkUsers)
      addEdge(id);
    return true;
  }

  /// Matches op (or alternatives) pattern `id` against expr `e`; `n` is the
  /// node through which it was reached (nullptr for roots).
  bool matchExprAt(uint32_t id, Expr *e, Node *n) {
    const Pattern::CNode &c = p.cnode(id);
    if (c.kind == PN::Kind::Or) {
      size_t mark = m.trail_.size();
      std::string whys;
      for (uint16_t k = 0; k < c.numAlts; ++k) {
        uint32_t alt = p.child(c.firstChild + k);
        if (matchExprAt(alt, e, n)) {
          Node *out = n ? n : (e->numOutputs() ? e->output(0) : nullptr);
          if (!checkPreds(id, out, nullptr)) {
            m.undo(mark);
            return false;
          }
          bindNode(id, out, e);
          return true;
        }
        m.undo(mark);
        if (explain())
          whys += "\n" + indent(m.why_);
      }
      TM_WHY("{}: no alternative matches {}:{}", c.p->str(), describe(e), whys);
      return false;
    }
    return matchOp(id, e, n);
  }

  bool targetMatches(const Pattern::CNode &c, const Expr *e) {
    const PN &pn = *c.p;
    switch (c.target) {
    case PN::OpTarget::Schema:
      return e->opSchema() == c.schema;
    case PN::OpTarget::Module: {
      auto *cm = llvm::dyn_cast<CallMethod>(e);
      if (!cm || !cm->isModuleCall() || cm->numInputs() == 0)
        return false;
      auto *mn = llvm::dyn_cast<ModuleNode>(cm->input(0));
      return mn && mn->moduleType().isa(*pn.moduleType);
    }
    case PN::OpTarget::AnyModule: {
      auto *cm = llvm::dyn_cast<CallMethod>(e);
      return cm && cm->isModuleCall();
    }
    }
    return false;
  }

  /// The slot of `e` that keyword pattern `kwp` names: the positional
  /// argument of that parameter, the keyword argument, or else the
  /// parameter's default. False when `e` passes none and there is no
  /// default.
  static bool keywordSlot(const PN::Keyword &kwp, const OpSchema *schema, Expr *e,
                          const TreeDef *pos, const TreeDef *kw, size_t numPos, Slot &s) {
    if (pos && schema && kwp.paramIndex >= 0 && !schema->params()[kwp.paramIndex].keywordOnly &&
        !schema->params()[kwp.paramIndex].variadic && size_t(kwp.paramIndex) < numPos) {
      size_t lf = 0;
      for (size_t j = 0; j < size_t(kwp.paramIndex); ++j)
        lf += pos->child(j).numLeaves();
      s.def = &pos->child(kwp.paramIndex);
      s.leaves = s.def->numLeaves();
      if (s.def->isLeaf())
        s.node = e->input(lf);
      return true;
    }
    if (kw) {
      int64_t ki = kw->findStringKey(kwp.name);
      if (ki >= 0) {
        size_t lf = pos ? pos->numLeaves() : 0;
        for (int64_t j = 0; j < ki; ++j)
          lf += kw->child(j).numLeaves();
        s.def = &kw->child(ki);
        s.leaves = s.def->numLeaves();
        if (s.def->isLeaf())
          s.node = e->input(lf);
        return true;
      }
    }
    // An unbound parameter with a default is matched against it.
    if (schema && kwp.paramIndex >= 0 && schema->params()[kwp.paramIndex].hasDefault) {
      s.def = &schema->params()[kwp.paramIndex].defaultValue;
      return true;
    }
    return false;
  }

  bool matchOp(uint32_t id, Expr *e, Node *n) {
    const Pattern::CNode &c = p.cnode(id);
    const PN &pn = *c.p;
    if (!targetMatches(c, e)) {
      TM_WHY("{}: {} is a different op", pn.str(), describe(e));
      return false;
    }
    bool isModuleCall = c.target != PN::OpTarget::Schema;
    if (c.hasAttrs) {
      Module *mod = llvm::cast<ModuleNode>(e->input(0))->owner();
      for (const auto &[a, v] : pn.attrs) {
        const TreeDef *have = mod ? mod->value(a) : nullptr;
        if (!have || !literalEqual(*have, v)) {
          TM_WHY("{}: the module's attribute '{}' is {}, not {}", pn.str(), a,
                           have ? literalText(*have) : std::string("absent"),
                           literalText(v));
          return false;
        }
      }
    }
    // Quick rejection from the input count and the inputs' producers, before
    // the argument TreeDefs are read (in explain mode the full path below
    // gives the detailed reason).
    if (!m.explain_ && !(e == prechecked && id == p.root(0)) && quickReject(p, c, e))
      return false;
    size_t mark = m.trail_.size();
    // The argument slots.
    const TreeDef *pos = nullptr, *kw = nullptr;
    const auto &ad = e->argDef();
    if (ad && ad->kind() == TreeDef::Kind::Tuple && ad->numChildren() == 2) {
      pos = &ad->child(0);
      kw = &ad->child(1);
    }
    size_t skip = isModuleCall ? 1 : 0;
    size_t numPos = pos ? pos->numChildren() : e->numInputs();
    size_t totalInputs = e->numInputs() - (isModuleCall ? 1 : 0);
    if (c.numArgs + skip > numPos) {
      TM_WHY("{}: {} has {} arguments, the pattern {}", pn.str(), describe(e),
                       numPos - skip, c.numArgs);
      return false;
    }
    // Leaf offsets of the positional slots the pattern names.
    llvm::SmallVector<Slot, 4> slots;
    size_t leaf = 0;
    for (size_t j = 0; j < skip + c.numArgs; ++j) {
      Slot s;
      if (pos) {
        s.def = &pos->child(j);
        s.leaves = s.def->numLeaves();
        if (s.def->isLeaf())
          s.node = e->input(leaf);
      } else {
        s.node = e->input(j);
        s.leaves = 1;
      }
      leaf += s.leaves;
      if (j >= skip)
        slots.push_back(s);
    }
    size_t covered = 0;
    auto tryArgs = [&](bool swapped) {
      covered = 0;
      for (uint16_t k = 0; k < c.numArgs; ++k) {
        uint32_t child = p.child(c.firstChild + k);
        const Slot &s = slots[swapped ? 1 - k : k];
        if (!matchSlot(child, s)) {
          TM_CONTEXT("in argument {} of {} at {}:", swapped ? 1 - k : k, pn.str(),
                              describe(e));
          return false;
        }
        covered += s.leaves;
      }
      return true;
    };
    if (!tryArgs(false)) {
      if (!c.commutative) {
        m.undo(mark);
        return false;
      }
      std::string first = m.explain_ ? m.why_ : std::string();
      m.undo(mark);
      if (!tryArgs(true)) {
        if (m.explain_)
          m.why_ = fmt::format("{}: neither operand order matches {}:\n{}\n{}", pn.str(),
                               describe(e), indent(first), indent(m.why_));
        m.undo(mark);
        return false;
      }
    }
    // Keyword patterns (`kwarg`, `has_params`).
    for (uint16_t k = 0; k < c.numKw; ++k) {
      const auto &kwp = pn.kwargs[k];
      uint32_t child = p.child(c.firstChild + c.numArgs + k);
      Slot s;
      const OpSchema *schema = pn.schema;
      bool found = keywordSlot(kwp, schema, e, pos, kw, numPos, s);
      if (!found) {
        TM_WHY("{}: {} passes no argument '{}'", pn.str(), describe(e), kwp.name);
        m.undo(mark);
        return false;
      }
      if (!matchSlot(child, s)) {
        TM_CONTEXT("in argument '{}' of {} at {}:", kwp.name, pn.str(), describe(e));
        m.undo(mark);
        return false;
      }
      // A keyword slot that is also a named positional slot is not counted
      // twice.
      if (!(kwp.paramIndex >= 0 && size_t(kwp.paramIndex) < c.numArgs + skip))
        covered += s.leaves;
    }
    if (c.allArgs && covered < totalInputs) {
      TM_WHY("{}: {} has {} tensor inputs, the pattern covers {} (add '...' or "
                       "prefix() to allow more)",
                       pn.str(), describe(e), totalInputs, covered);
      m.undo(mark);
      return false;
    }
    Node *out = n ? n : (e->numOutputs() ? e->output(c.outputIndex > 0 ? c.outputIndex : 0)
                                         : nullptr);
    if (!checkPreds(id, out, nullptr)) {
      m.undo(mark);
      return false;
    }
    bindNode(id, out, e);
    return true;
  }

  bool checkUsers() {
    for (uint32_t id = 0; id < p.size(); ++id) {
      const Pattern::CNode &c = p.cnode(id);
      if (!c.checkUsers)
        continue;
      const Match::Binding &b = m.b_[id];
      Expr *e = b.expr;
      if (!e || c.kind == PN::Kind::Or)
        continue;
      if (c.kind != PN::Kind::Op) {
        // A checked leaf (checkUsers(true) on var(), any(), constant()):
        // every use of its node is an edge of the match.
        Node *n = b.node;
        if (n && n->numUsers() != b.edges) {
          TM_WHY("{}: {} has {} uses but only {} inside the match (check_users)", c.p->str(),
                 describe(n), n->numUsers(), b.edges);
          return false;
        }
        continue;
      }
      // The value the match reached: for a multi-output expr, the selected
      // output (MegEngine skips multi-output exprs altogether).
      Node *n = b.node;
      size_t uses = 0;
      if (n)
        uses = n->numUsers();
      else
        for (Node *o : e->outputs())
          uses += o->numUsers();
      if (uses != b.edges) {
        TM_WHY("{}: {} has {} uses but only {} inside the match (check_users)",
                         c.p->str(), describe(e), uses, b.edges);
        return false;
      }
      if (InternalGraph *g = e->graph())
        for (Node *o : g->outputs())
          if (n ? o == n : o->expr() == e) {
            TM_WHY("{}: {} is a graph output (check_users)", c.p->str(),
                             describe(e));
            return false;
          }
    }
    return true;
  }

  bool run(Expr *root) {
    if (!matchExprAt(p.root(0), root, nullptr))
      return false;
    llvm::SmallVector<Expr *, 4> roots = {root};
    for (size_t r = 1; r < p.numRoots(); ++r) {
      Node *anchor = m.b_[p.anchor(r)].node;
      bool ok = false;
      std::string whys;
      if (anchor) {
        Expr *last = nullptr;
        for (Expr *u : anchor->users()) {
          if (u == last || llvm::is_contained(roots, u))
            continue;
          last = u;
          size_t mark = m.trail_.size();
          if (matchExprAt(p.root(r), u, nullptr)) {
            roots.push_back(u);
            ok = true;
            break;
          }
          m.undo(mark);
          if (explain())
            whys += "\n" + indent(m.why_);
        }
      }
      if (!ok) {
        TM_WHY("root {} ({}): no user of {} matches{}", r,
                         p.cnode(p.root(r)).p->str(),
                         anchor ? describe(anchor) : std::string("the shared value"), whys);
        return false;
      }
    }
    return checkUsers();
  }
};

void Match::reset(const Pattern &p) {
  // Every binding is recorded on the trail, and a failed match undoes its
  // own: the slots are clean except for those the trail of the last
  // successful (or interrupted) match lists. Undoing them is cheaper than
  // clearing every slot of every attempt, most of which fail early.
  undo(0);
  if (b_.size() < p.size())
    b_.resize(p.size());
}

void Match::undo(size_t mark) {
  while (trail_.size() > mark) {
    uint32_t t = trail_.back();
    trail_.pop_back();
    uint32_t id = t >> 1;
    Binding &b = b_[id];
    if (t & 1) {
      --b.edges;
    } else {
      b.node = nullptr;
      b.expr = nullptr;
      b.lit = nullptr;
    }
  }
}

bool Match::match(const Pattern &p, Expr *root) {
  pattern_ = nullptr;
  if (explain_)
    why_.clear();
  if (!root || p.numRoots() == 0)
    return false;
  // Most attempts fail on the root's op or inputs' producers: told before
  // the match state is set up (the explain mode takes the full path for
  // its reason).
  MatchImpl impl{*this, p};
  if (!explain_) {
    if (!p.quickAccepts(root))
      return false;
    const Pattern::CNode &c = p.cnode(p.root(0));
    if (c.kind == PN::Kind::Op && c.target == PN::OpTarget::Schema)
      impl.prechecked = root;
  }
  reset(p);
  if (!impl.run(root)) {
    if (explain_)
      why_ = fmt::format("pattern {} does not match {}:\n{}", p.str(), describe(root),
                         indent(why_));
    undo(0);
    return false;
  }
  // (The driver matches the same patterns over and over: a copy of the
  // pattern it has is not taken again, which would cost two atomic updates
  // of the reference count per success.)
  if (!matched_.sameAs(p))
    matched_ = p;
  pattern_ = &matched_;
  return true;
}

Expr *Match::rootExpr(size_t i) const {
  return pattern_ && i < pattern_->numRoots() ? b_[pattern_->root(i)].expr : nullptr;
}
Node *Match::node(llvm::StringRef name) const {
  if (pattern_)
    for (const auto &[id, n] : pattern_->names())
      if (n == name && (b_[id].node || b_[id].lit))
        return b_[id].node;
  return nullptr;
}
Expr *Match::expr(llvm::StringRef name) const {
  if (pattern_)
    for (const auto &[id, n] : pattern_->names())
      if (n == name && b_[id].expr)
        return b_[id].expr;
  return nullptr;
}
const TreeDef *Match::literal(llvm::StringRef name) const {
  if (pattern_)
    for (const auto &[id, n] : pattern_->names())
      if (n == name && (b_[id].node || b_[id].lit))
        return b_[id].lit;
  return nullptr;
}
Node *Match::node(const pat::Pat &h) const {
  int64_t id = pattern_ && h.valid() ? pattern_->idOf(&h.node()) : -1;
  return id < 0 ? nullptr : b_[id].node;
}
Expr *Match::expr(const pat::Pat &h) const {
  int64_t id = pattern_ && h.valid() ? pattern_->idOf(&h.node()) : -1;
  return id < 0 ? nullptr : b_[id].expr;
}
const TreeDef *Match::literal(const pat::Pat &h) const {
  int64_t id = pattern_ && h.valid() ? pattern_->idOf(&h.node()) : -1;
  return id < 0 ? nullptr : b_[id].lit;
}
llvm::SmallVector<Expr *, 8> Match::matchedExprs() const {
  llvm::SmallVector<Expr *, 8> out;
  if (!pattern_)
    return out;
  for (uint32_t id = 0; id < pattern_->size(); ++id)
    if (Expr *e = b_[id].expr;
        e && pattern_->cnode(id).kind == PN::Kind::Op && !llvm::is_contained(out, e))
      out.push_back(e);
  return out;
}

} // namespace tmg
