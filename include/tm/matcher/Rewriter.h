//===- Rewriter.h - Transactional graph edits with listeners ----*- C++ -*-===//
//
// Every edit a rewrite pattern makes goes through a Rewriter: creating exprs
// (through the GraphBuilder, at the rewriter's insertion point), rewiring
// uses, erasing exprs. The rewriter journals each edit, so a rewrite either
// completes (commit) or leaves the graph as it was (rollback: created exprs
// go, rewired uses and graph outputs return, erased exprs come back at
// their place). Listeners (the greedy driver's worklist, statistics, debug
// logs) hear about committed edits only, in order.
//
//   Rewriter rw(graph);
//   rw.begin();
//   rw.setInsertionPoint(root);
//   Node *y = rw.callFunction("relu6", {x});
//   if (failed(rw.replaceAllUsesWith(root->output(0), y)))
//     rw.rollback();                       // the graph is unchanged
//   else
//     rw.commit();
//
// Outside a transaction every edit commits at once. Rollback restores the
// printed graph exactly; the ids and names the rolled-back exprs took are
// not reused, and a restored use sits at the end of its node's user list.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/ir/Builder.h"
#include "tm/ir/Diagnostic.h"

namespace tmg {

/// Hears about committed edits.
class RewriteListener {
public:
  virtual ~RewriteListener();
  /// `e` was created.
  virtual void notifyInserted(Expr *e) {}
  /// An input of `user` now refers to another node.
  virtual void notifyInputsChanged(Expr *user) {}
  /// `n` lost a use (rewired away or its user was erased).
  virtual void notifyUseRemoved(Node *n) {}
  /// `e` is about to be destroyed (it is no longer in the graph; its inputs
  /// were `inputs`).
  virtual void notifyErased(Expr *e, llvm::ArrayRef<Node *> inputs) {}
};

class Rewriter {
public:
  explicit Rewriter(InternalGraph &g);
  /// Rolls back an open transaction.
  ~Rewriter();
  Rewriter(const Rewriter &) = delete;
  Rewriter &operator=(const Rewriter &) = delete;

  InternalGraph &graph() const { return *g_; }
  void addListener(RewriteListener *l) { listeners_.push_back(l); }

  // -- Transactions ------------------------------------------------------------
  void begin();
  /// Keeps the edits and tells the listeners.
  void commit();
  /// Undoes every edit since begin().
  void rollback();
  bool inTransaction() const { return open_; }
  /// Runs `f` in a transaction: true when `f` succeeds (committed), false
  /// when it returns failure (rolled back: it did not apply), the
  /// diagnostic when it throws tmg::Error (rolled back).
  FailureOr<bool> transact(const std::function<LogicalResult()> &f);

  // -- Where new exprs go ----------------------------------------------------------
  void setInsertionPoint(Expr *before) { before_ = before; }
  void setInsertionPointAfter(Expr *e) {
    before_ = e ? e->nextInGraph() : g_->front();
  }
  void setInsertionPointToEnd() { before_ = nullptr; }
  Expr *insertionPoint() const { return before_; }

  // -- Creating exprs (the GraphBuilder's calls, journaled) --------------------------
  Node *callFunction(const OpSchema &fn, std::vector<Arg> args,
                     std::vector<KwArg> kwargs = {});
  Node *callFunction(llvm::StringRef fn, std::vector<Arg> args,
                     std::vector<KwArg> kwargs = {});
  Node *callMethod(Node *self, llvm::StringRef method, std::vector<Arg> args,
                   std::vector<KwArg> kwargs = {});
  Node *constant(Tensor t, llvm::StringRef name = "");
  Node *getAttr(Node *base, llvm::StringRef attr);
  /// Anything else the builder offers: every expr `f` creates at the
  /// insertion point is journaled.
  void build(const std::function<void(GraphBuilder &)> &f);

  // -- Edits ------------------------------------------------------------------------
  /// Rewires every use of `old` (and graph outputs equal to it) to `nw`.
  /// Fails, changing nothing, when a user of `old` comes at or before the
  /// expr defining `nw` (the rewired graph would not be in order).
  LogicalResult replaceAllUsesWith(Node *old, Node *nw);
  /// Replaces output i of `e` by `nodes[i]` (nullptr: keep), then erases `e`
  /// when nothing uses it any more.
  LogicalResult replaceExpr(Expr *e, llvm::ArrayRef<Node *> nodes);
  /// Sets input `i` of `user` to `n`.
  void setInput(Expr *user, size_t i, Node *n);
  /// Erases `e`; throws tmg::Error when one of its outputs is still used or
  /// is a graph output.
  void eraseExpr(Expr *e);
  /// Erases `e` when it is dead (outputs unused, not graph outputs, not
  /// `disable_remove`), then its producers that became dead. Returns how
  /// many exprs were erased.
  size_t eraseIfDead(Expr *e);
  /// True when `e` could be erased by eraseIfDead.
  bool isDead(const Expr *e) const;

  /// Runs `f` when the transaction commits (dropped on rollback; at once
  /// outside a transaction). For changes the journal does not cover, such
  /// as module attributes: a conv-bn folding pass sets the folded weights
  /// here, so a rewrite that fails later leaves the weights alone too.
  void onCommit(std::function<void()> f);

  /// Why the last failing edit failed (for debug output).
  const std::string &lastFailure() const { return why_; }

  /// With a `keep` predicate, an expr erased by a committed transaction
  /// for which `keep(e)` held when it was erased (still in the graph) is
  /// not destroyed at the commit but kept, out of the graph (`inBody()`
  /// false), until releaseErased(): a caller holding pointers to some exprs,
  /// such as the greedy driver's worklist, can then test them without a
  /// side table, and their addresses are not reused meanwhile. Other erased
  /// exprs are destroyed at the commit, as without a predicate.
  void setKeepErased(std::function<bool(const Expr *)> keep) { keep_ = std::move(keep); }
  /// Destroys the kept erased exprs.
  void releaseErased() { erased_.clear(); }

private:
  struct Entry {
    enum Kind : uint8_t { Insert, Rewire, Outputs, Erase };
    Kind kind = Insert;
    Expr *expr = nullptr;
    size_t index = 0;
    Node *node = nullptr;
    llvm::SmallVector<Node *, 2> nodes;
    std::unique_ptr<Expr> owned;
    Expr *next = nullptr;
    bool keep = false;
  };
  struct BuildScope;
  /// Appends a journal entry of `kind` to fill.
  Entry &record(Entry::Kind kind);
  void journalCreated(Expr *prevBefore, size_t sizeBefore);
  /// eraseExpr once its checks passed.
  void eraseValid(Expr *e);
  void flush(size_t from);
  void undoEntry(Entry &e);
  bool isGraphOutput(const Node *n) const;

  InternalGraph *g_;
  GraphBuilder b_;
  Expr *before_ = nullptr;
  bool open_ = false;
  std::vector<Entry> journal_;
  std::vector<RewriteListener *> listeners_;
  std::vector<std::function<void()>> deferred_;
  std::string why_;
  std::function<bool(const Expr *)> keep_;
  std::vector<std::unique_ptr<Expr>> erased_;
};

} // namespace tmg
