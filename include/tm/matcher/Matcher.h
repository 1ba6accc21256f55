//===- Matcher.h - Compiled patterns and match state ------------*- C++ -*-===//
//
// A `Pattern` is one or more root patterns compiled into a flat, immutable
// program (every pattern node numbered once, children by index, op
// identities as pointers). A `Match` is the state of matching: the value
// bound to each pattern node, a trail for backtracking, and the captures of
// the last successful match. Patterns can be matched from several threads
// at once, each with its own Match; a Match reuses its buffers across
// attempts, so a failed attempt allocates nothing.
//
//   Pattern p(pat::fn("relu")(pat::fn("relu")(pat::var("x"))));
//   Match m;
//   if (m.match(p, expr))
//     Node *x = m.node("x");
//   m.setExplain(true);
//   if (!m.match(p, other))
//     fmt::print("{}\n", m.explanation());   // which sub-pattern failed, why
//
// Semantics (MegEngine's matcher, with the differences listed in README):
//  * an op pattern's arguments match the call's argument slots: positional
//    arguments as the builder normalises them (defaults filled), after the
//    module for module calls, the inputs for Apply; a slot holding a node
//    is matched by node patterns, a constant slot by literal patterns;
//  * unless `prefix()`, every tensor input must be covered by the pattern;
//  * a pattern node used twice must bind the same value (DAG patterns);
//  * commutative ops (trait `Commutative`) try the swapped operand order
//    when the written order fails; alternatives are tried in order and the
//    first one that matches is kept (no backtracking into it from outside);
//  * `checkUsers` is checked after the structure matched: every use of
//    the matched expr's outputs is an edge of the match;
//  * captures and bindings are visible only after a successful match.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/matcher/Pattern.h"

namespace tmg {

/// The key patterns are indexed by: the op schema, or the module type of a
/// module call; nullptr for "any expr".
using RootKey = const void *;
/// The key of "any module call" roots (`pat::anyModule()`).
RootKey anyModuleRootKey();

/// A compiled, immutable pattern with one or more roots.
class Pattern {
public:
  Pattern() = default;
  /// Compiles `root`. Throws tmg::Error when the root is not an op (or
  /// alternatives of ops), or a literal is used where a node is expected.
  Pattern(const pat::Pat &root);
  /// A DAG pattern with several roots. Every root after the first must
  /// share a sub-pattern with an earlier root (that is how its expr is
  /// found: among the users of the shared value).
  Pattern(std::vector<pat::Pat> roots);

  size_t numRoots() const { return d_ ? d_->roots.size() : 0; }
  /// True when both are the same compiled pattern (copies of one another).
  bool sameAs(const Pattern &o) const { return d_ == o.d_; }
  size_t size() const { return d_ ? d_->nodes.size() : 0; }
  /// Keys of the first root (several for alternatives; {nullptr} when any
  /// expr may be a root).
  llvm::ArrayRef<RootKey> rootKeys() const { return d_->rootKeys; }
  /// The text form of each root, joined by "; ".
  std::string str() const;

  /// Compiled node (internal). What matching reads of a pattern node is copied here from the
  /// PatternNode (`p`, which holds the rest: argument patterns, literals,
  /// predicates, names), so that an attempt reads the pattern's compact
  /// node array, not pattern nodes spread over the heap.
  struct CNode {
    const pat::PatternNode *p;
    const OpSchema *schema = nullptr; ///< p->schema
    uint32_t firstChild = 0;  ///< into children_: args, then kwargs / alts
    uint16_t numArgs = 0;
    uint16_t numKw = 0;
    uint16_t numAlts = 0;
    pat::PatternNode::Kind kind = pat::PatternNode::Kind::Any;     ///< p->kind
    pat::PatternNode::OpTarget target = pat::PatternNode::OpTarget::Schema; ///< p->target
    bool checkUsers = false;
    bool commutative = false; ///< p->commutative
    bool allArgs = true;      ///< p->allArgs
    /// p has predicates or a typed capture key (checkPreds has work).
    bool constrained = false;
    bool hasAttrs = false;    ///< p->attrs is not empty
    int32_t outputIndex = -1; ///< p->outputIndex
    /// Op patterns: argument patterns that only match nodes, and the most
    /// tensor inputs the pattern can cover (-1: no bound), for a quick
    /// rejection before the argument structure is read.
    uint16_t nodeOnlyArgs = 0;
    int32_t maxCover = -1;
  };
  const CNode &cnode(uint32_t id) const { return d_->nodes[id]; }
  uint32_t child(uint32_t i) const { return d_->children[i]; }
  uint32_t root(size_t i) const { return d_->roots[i]; }
  /// Pattern id of a capture name, or -1.
  int64_t idOfName(llvm::StringRef name) const;
  int64_t idOfKey(const pat::CaptureKey *k) const;
  int64_t idOf(const pat::PatternNode *n) const;
  /// For root i > 0: a pattern id bound by earlier roots that root i uses.
  uint32_t anchor(size_t i) const { return d_->anchors[i]; }
  /// Capture names (id, name) in pattern order.
  const std::vector<std::pair<uint32_t, std::string>> &names() const { return d_->names; }

  /// False when the first root cannot match at `e`: no alternative of it
  /// has `e`'s op, the input count it needs, and the producers of the ops
  /// its arguments name among `e`'s inputs. A necessary condition only,
  /// from a flat table made at compilation (no pattern node is read).
  bool quickAccepts(const Expr *e) const;

private:
  /// One alternative of the first root, for quickAccepts.
  struct RootCheck {
    const OpSchema *op = nullptr; ///< nullptr: a module call (not checked)
    uint16_t nodeOnlyArgs = 0;
    int32_t maxInputs = -1; ///< -1: no bound
    uint8_t numArgOps = 0;
    const OpSchema *argOps[4] = {}; ///< ops that some input must produce
  };
  struct Data {
    std::vector<RootCheck> rootChecks;
    std::vector<CNode> nodes;
    std::vector<uint32_t> children;
    std::vector<uint32_t> roots;
    std::vector<uint32_t> anchors;
    std::vector<RootKey> rootKeys;
    std::vector<pat::PatternRef> keep; ///< keeps the pattern nodes alive
    std::vector<std::pair<uint32_t, std::string>> names;
    std::vector<std::pair<const pat::CaptureKey *, uint32_t>> keys;
    llvm::DenseMap<const pat::PatternNode *, uint32_t> ids;
  };
  uint32_t compile(Data &d, const pat::PatternRef &p, bool isRoot);
  /// Shared and immutable: copying a Pattern is cheap, and a Match keeps
  /// the pattern of its last success alive.
  std::shared_ptr<const Data> d_;
};

/// Match state and results. Not thread-safe; use one per thread.
class Match {
public:
  Match() = default;

  /// Matches `p` with its first root at `root`. On success the bindings are
  /// readable; on failure they are cleared (and, with explain on, the
  /// explanation says which sub-pattern failed and why).
  bool match(const Pattern &p, Expr *root);

  /// With explain on, a failed match records why.
  void setExplain(bool on) { explain_ = on; }
  const std::string &explanation() const { return why_; }

  // -- Results of the last successful match ----------------------------------------
  bool matched() const { return pattern_ != nullptr; }
  /// The pattern of the last success (kept alive by the Match).
  const Pattern &pattern() const { return *pattern_; }
  /// The expr matched by root i.
  Expr *rootExpr(size_t i = 0) const;
  /// The node captured under `name` (nullptr when unbound or a literal).
  Node *node(llvm::StringRef name) const;
  /// The expr producing the value captured under `name`.
  Expr *expr(llvm::StringRef name) const;
  /// The literal captured under `name` (nullptr when it is a node).
  const TreeDef *literal(llvm::StringRef name) const;
  /// By pattern handle (any sub-pattern of the compiled pattern).
  Node *node(const pat::Pat &p) const;
  Expr *expr(const pat::Pat &p) const;
  const TreeDef *literal(const pat::Pat &p) const;
  /// Typed handles.
  template <typename T> T *operator[](const pat::Capture<T> &c) const {
    int64_t id = pattern_ ? pattern_->idOfKey(c.key().get()) : -1;
    if (id < 0)
      return nullptr;
    if constexpr (std::is_base_of_v<Expr, T>)
      return llvm::cast_or_null<T>(b_[id].expr);
    else
      return llvm::cast_or_null<T>(b_[id].node);
  }
  /// By pattern id (internal, rules).
  Node *nodeAt(uint32_t id) const { return b_[id].node; }
  Expr *exprAt(uint32_t id) const { return b_[id].expr; }
  const TreeDef *literalAt(uint32_t id) const { return b_[id].lit; }
  /// Every expr matched by an op pattern (roots included), in pattern order.
  llvm::SmallVector<Expr *, 8> matchedExprs() const;

private:
  friend struct MatchImpl;
  void reset(const Pattern &p);
  void undo(size_t mark);

  const Pattern *pattern_ = nullptr; ///< &matched_ on success only
  Pattern matched_;
  /// What pattern node i is bound to (node, its expr, or a literal) and
  /// how many uses of it the match has reached, side by side: an attempt
  /// reads and undoes them together.
  struct Binding {
    Node *node = nullptr;
    Expr *expr = nullptr;
    const TreeDef *lit = nullptr;
    uint32_t edges = 0;
  };
  std::vector<Binding> b_;
  /// Undo log: (pattern id << 1) | isEdge.
  std::vector<uint32_t> trail_;
  bool explain_ = false;
  std::string why_;
};

} // namespace tmg
