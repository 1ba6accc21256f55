//===- Flatten.cpp - TracedModule::flatten --------------------------------===//
//
// The reference's `TracedModule.flatten`: every call of a traced submodule
// reached through a GetAttr is inlined into the top graph (recursively),
// inlined nodes are renamed "<module node>_<name>", then compile() (the
// getattr merge, dead exprs removed) and the ids are renumbered.
//
// Two implementations of one semantics:
//
// - The plain algorithm (PlainInliner): copy the top graph, then inline each
//   call by inserting a copy of its sub-graph before it, then compile. It
//   is the reference's algorithm, kept as the oracle that the differential
//   test compares the fast one against, and as the fallback for the one
//   case the fast one does not build (see FlatBuilder::run).
//
// - FlatBuilder, what flatten() runs: one walk that appends the flat body
//   to a new graph in its final order, inlining calls as it meets them. It
//   does at once what the plain algorithm does in later walks over the
//   whole flat graph, which at 10^5 exprs and more no longer fits in the
//   caches: it does not copy exprs dead in their sub-graph, nor duplicate
//   GetAttrs (it merges them as it copies), nor the calls themselves; and
//   appending keeps the GetAttr list in order. The result
//   is the plain algorithm's, use-list order included (see UseKey).
//
//===----------------------------------------------------------------------===//
#include <atomic>
#include <type_traits>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/Support/Allocator.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

namespace {

/// The callee graph of module call `cm` whose module node has owner
/// `owner`: its graph for the call's signature when `owner` is traced.
InternalGraph *calleeOf(const CallMethod &cm, Module *owner) {
  if (!owner || !cm.argDef())
    return nullptr;
  auto *t = llvm::dyn_cast<TracedModule>(owner);
  if (!t)
    return nullptr;
  // A traced QAT module stays a call (the reference's `is_qat`): its
  // observers and fake-quantisers stay attached to one module.
  const TreeDef *qat = t->value("is_qat");
  if (qat && qat->isConst() && qat->value().isBool() && qat->value().getBool())
    return nullptr;
  return t->graphFor(*cm.argDef());
}

void checkCallArity(const CallMethod &call, const InternalGraph &sub) {
  if (sub.inputs().size() != call.numInputs())
    raiseAt(Location::atExpr(call.id()),
            "flatten: call passes {} values but graph '{}' takes {}",
            call.numInputs(), sub.name(), sub.inputs().size());
  if (sub.outputs().size() != call.numOutputs())
    raiseAt(Location::atExpr(call.id()),
            "flatten: call has {} outputs but graph '{}' returns {}",
            call.numOutputs(), sub.name(), sub.outputs().size());
}

//===----------------------------------------------------------------------===//
// The plain algorithm
//===----------------------------------------------------------------------===//

/// Inlines calls of traced submodules into one top graph, in place: each
/// call's sub-graph is copied before the call, every expr of it.
class PlainInliner {
public:
  PlainInliner(TracedModule &root, InternalGraph &top) : root_(root), top_(top) {}

  /// The callee graph when `e` is a call to inline: a module call whose
  /// module node comes from a GetAttr and whose owner is a TracedModule
  /// with a graph for the call's signature.
  static InternalGraph *inlinable(Expr *e) {
    auto *cm = llvm::dyn_cast<CallMethod>(e);
    if (!cm || !cm->isModuleCall())
      return nullptr;
    ModuleNode *mn = cm->moduleNode();
    if (!mn || !llvm::isa<GetAttr>(mn->expr()))
      return nullptr;
    return calleeOf(*cm, mn->owner());
  }

  /// Inlines every call of the top graph, nested calls included, then
  /// removes what became dead.
  void run() {
    std::vector<Expr *> calls;
    for (Expr *e : top_)
      if (inlinable(e))
        calls.push_back(e);
    for (Expr *e : calls)
      inlineCall(llvm::cast<CallMethod>(e), *inlinable(e));
    top_.compile();
  }

private:
  /// Returns, per output of `call`, the node now carrying its value (a
  /// nested inlining may replace a node the caller mapped to: the caller
  /// re-maps with this).
  llvm::SmallVector<Node *, 2> inlineCall(CallMethod *call, InternalGraph &sub) {
    checkCallArity(*call, sub);
    std::string prefix = call->input(0)->name().str();
    llvm::SmallString<64> nameBuf, uniqueBuf;
    auto inlinedName = [&](const Node *o) {
      nameBuf.assign(prefix.begin(), prefix.end());
      nameBuf.push_back('_');
      nameBuf.append(o->name().begin(), o->name().end());
      return top_.ns().createUniqueName(nameBuf, uniqueBuf);
    };
    llvm::DenseMap<const Node *, Node *> vmap;
    for (size_t i = 0; i < sub.inputs().size(); ++i)
      vmap[sub.input(i)] = call->input(i);
    // Sub-graph outputs: pass-through inputs are rewired now; the others
    // become the call's output nodes, adopted by their new producers.
    llvm::DenseMap<const Node *, size_t> adopt;
    for (size_t k = 0; k < sub.outputs().size(); ++k) {
      Node *so = sub.output(k);
      Node *co = call->output(k);
      Node *target = nullptr;
      if (!so->expr()->inBody())
        target = vmap.lookup(so);
      else if (adopt.count(so))
        target = call->output(adopt[so]);
      if (target) {
        redirect(co, target);
        continue;
      }
      adopt[so] = k;
      if (llvm::isa<TensorNode>(co))
        co->setQualname(so->qualname());
    }
    for (Expr *e : sub) {
      auto ne = cloneExprShallow(*e, root_.nextExprId());
      for (size_t i = 0; i < e->numInputs(); ++i) {
        Node *m = vmap.lookup(e->input(i));
        if (!m)
          raiseAt(Location::atExpr(e->id()),
                  "flatten: input '{}' is not defined in graph '{}'",
                  e->input(i)->str(), sub.name());
        ne->addInput(m);
      }
      Expr *raw = ne.get();
      for (Node *o : e->outputs()) {
        auto it = adopt.find(o);
        Node *n;
        if (it != adopt.end()) {
          // Move the call's output node to its new producer; the call keeps
          // an unused placeholder until it is erased.
          std::unique_ptr<Node> owned = call->swapOutput(
              it->second, cloneNodeShallow(*call->output(it->second), -1));
          n = raw->addOutput(std::move(owned));
        } else {
          n = raw->addOutput(cloneNodeShallow(*o, root_.nextNodeId(), inlinedName(o)));
        }
        vmap[o] = n;
      }
      top_.insertExpr(std::move(ne), call);
      if (InternalGraph *inner = inlinable(raw)) {
        auto res = inlineCall(llvm::cast<CallMethod>(raw), *inner);
        for (size_t j = 0; j < e->numOutputs(); ++j)
          vmap[e->output(j)] = res[j];
      }
    }
    llvm::SmallVector<Node *, 2> result;
    for (Node *so : sub.outputs())
      result.push_back(vmap.lookup(so));
    call->dropAllInputs();
    top_.removeExpr(call).reset();
    return result;
  }

  /// Moves every use of `from` (and graph outputs) to `to`.
  void redirect(Node *from, Node *to) {
    std::vector<Use *> uses;
    for (Use *u = from->firstUse(); u; u = u->nextUse())
      uses.push_back(u);
    for (Use *u : uses)
      u->user()->replaceUse(u, to);
    std::vector<Node *> outs(top_.outputs().begin(), top_.outputs().end());
    bool changed = false;
    for (Node *&o : outs)
      if (o == from) {
        o = to;
        changed = true;
      }
    if (changed)
      top_.setOutputsInternal(std::move(outs));
  }

  TracedModule &root_;
  InternalGraph &top_;
};

//===----------------------------------------------------------------------===//
// The one-walk builder
//===----------------------------------------------------------------------===//

/// Where a use sits in the plain algorithm's use list of its node, which
/// the builder, creating every use in body order, must reproduce. The
/// plain algorithm copies the top graph first, so a node's uses by
/// top-level exprs come before those by inlined ones; inlining a call
/// whose output is a pass-through input moves the users of the output
/// (top-level ones) to the input at that moment; the getattr merge then
/// appends the users of each duplicate GetAttr of a path, in body order,
/// to the first's, and moves the re-pointed GetAttrs' uses of self to the
/// end. Hence the key: `k`, the position of the GetAttr the use came
/// through among those of its path (0 for other nodes), then `seq`: 0 for
/// a top-level user, 2*id+2 for an inlined one (inlined exprs are numbered
/// in creation order), 2*s+1 for a top-level user moved by a redirect when
/// expr id s was next (after the inlined exprs created before it, before
/// those created after), SelfLast+n for the n-th re-pointed GetAttr.
/// Sorting a use list stably by key gives the plain algorithm's order.
struct UseKey {
  uint32_t k = 0;
  uint64_t seq = 0;
  /// Among top-level users: their order keys (set when re-sorting: they
  /// are created in body order, except pending GetAttrs linked at the end).
  uint64_t pos = 0;
  bool operator<(const UseKey &o) const {
    return k != o.k ? k < o.k : seq != o.seq ? seq < o.seq : pos < o.pos;
  }
};
constexpr uint64_t SelfLast = uint64_t(1) << 62;

/// Builds the flat version of a top graph into a new graph.
class FlatBuilder {
public:
  FlatBuilder(TracedModule &root, InternalGraph &out)
      : root_(root), out_(out), nodeIdStart_(root.totalIds().first) {}

  /// Builds the flat copy of `top` (read only, as every sub-graph) into the
  /// empty graph `out`, compiled (and numbered, see finishNumbering).
  /// Builds nothing, leaving `out` unusable, in the one case the plain
  /// algorithm has to build: a duplicate GetAttr (not copied, its users
  /// merged into the first of its path) whose node the plain algorithm
  /// leaves as a graph output, through a pass-through; and top-level node
  /// ids at or above the node id counter (counters set by hand).
  /// What run() built: nothing (the plain algorithm must), the flat
  /// graph, or the flat graph numbered as resetIds() would number it.
  enum class Built { Nothing, Graph, Numbered };
  Built run(const InternalGraph &top) {
    Frame f;
    f.g = &top;
    f.top = true;
    llvm::DenseMap<const Node *, Node *> inputs;
    cloneGraphInputsInto(top, out_, inputs);
    f.map.reserve(top.inputs().size() + top.size() + top.size() / 4);
    for (auto &[from, to] : inputs) {
      f.map[from] = to;
      idsClash_ |= from->id() >= nodeIdStart_;
    }
    for (Node *o : top.outputs())
      topOutputs_.insert(o);
    // Re-pointed GetAttrs move to the end of self's use list.
    if (!out_.inputs().empty() && llvm::isa<ModuleNode>(out_.input(0))) {
      selfRef_ = tracked(out_.input(0));
      f.map[top.input(0)] = selfRef_;
    }
    emitBody(f);
    std::vector<Node *> outs;
    outs.reserve(top.outputs().size());
    for (Node *o : top.outputs()) {
      Node *v = f.map.lookup(o);
      if (!v)
        raise("clone: output '{}' is not defined in graph '{}'", o->str(), top.name());
      if (isRef(v)) {
        v = asRef(v)->own;
        if (!v)
          return Built::Nothing;
      }
      outs.push_back(v);
    }
    out_.setOutputsInternal(std::move(outs));
    linkPending();
    // New node ids come from the counter: with old ones at or above it
    // (counters set by hand) they repeat, and the order renumbering gives
    // equal ids depends on which nodes exist, which differs here (dead and
    // merged copies are not made).
    if (idsClash_)
      return Built::Nothing;
    restoreUseOrder();
    // The GetAttrs are merged already: what compile has left to do.
    if (out_.removeDeadExprs())
      numbered_ = false;
    if (numbered_ && finishNumbering())
      return Built::Numbered;
    return Built::Graph;
  }

private:
  /// Node-map values are nodes or, with the low bit set, Refs.
  struct Ref {
    /// What users use: the first GetAttr of the path, or the node a
    /// pass-through output was redirected to.
    Node *node;
    /// The node the plain algorithm has here: `node`, or for a duplicate
    /// GetAttr its own output; null when the duplicate was not copied.
    Node *own;
    uint32_t track;
    uint32_t k = 0;
    /// For top-level users: the id that was next when the plain algorithm
    /// moved them here (-1: not moved).
    int64_t redirect = -1;
    /// For a duplicate not copied whose node would have been a module
    /// node: its index in moduleDups_ (a call through it is inlined with
    /// that owner and name as prefix); NoModule otherwise.
    uint32_t module = NoModule;
  };
  static constexpr uint32_t NoModule = ~uint32_t(0);
  static_assert(std::is_trivially_destructible_v<Ref>, "refs_ is freed in slabs");
  static bool isRef(Node *v) { return reinterpret_cast<uintptr_t>(v) & 1; }
  static Ref *asRef(Node *v) {
    return reinterpret_cast<Ref *>(reinterpret_cast<uintptr_t>(v) & ~uintptr_t(1));
  }
  static Node *tag(Ref &r) {
    return reinterpret_cast<Node *>(reinterpret_cast<uintptr_t>(&r) | 1);
  }

  /// A use made through a Ref. The notes of a node are chained in
  /// creation order (`next`, an index into notes_; NoNote ends it): one
  /// array for all nodes, not a vector each.
  static constexpr uint32_t NoNote = ~uint32_t(0);
  struct Note {
    Expr *user;
    uint32_t idx;
    uint32_t next = NoNote;
    UseKey key;
    bool top;
  };
  /// The uses a node got through Refs (first and last of its chain);
  /// `dirty` when some use was created with a smaller key than the use
  /// before it.
  struct Track {
    Node *node;
    uint32_t head = NoNote, tail = NoNote;
    bool dirty = false;
  };

  struct Frame {
    const InternalGraph *g = nullptr;
    bool top = false;
    std::string prefix;
    llvm::DenseMap<const Node *, Node *> map;
    /// Sub-graph outputs -> the call output node their producer takes.
    llvm::DenseMap<const Node *, std::unique_ptr<Node>> adopt;
  };

  uint32_t trackOf(Node *n) {
    auto [it, inserted] = trackIndex_.try_emplace(n, uint32_t(tracks_.size()));
    if (inserted)
      tracks_.push_back(Track{n});
    return it->second;
  }
  Node *newRef(Ref r) {
    return tag(*new (refs_.Allocate<Ref>()) Ref(r));
  }
  /// `v` as a Ref (a tracked node: its later uses are noted).
  Node *tracked(Node *v) {
    if (isRef(v))
      return v;
    return newRef(Ref{v, v, trackOf(v)});
  }
  /// `v` with its top-level users moved at `seq`.
  Node *redirected(Node *v, int64_t seq) {
    Ref r = isRef(v) ? *asRef(v) : Ref{v, v, trackOf(v)};
    r.redirect = seq;
    return newRef(std::move(r));
  }

  /// Copies are numbered as renumbering will number them when nothing
  /// is inserted or removed later: inputs first, then the body in order.
  int64_t nextId() const { return int64_t(out_.inputs().size() + out_.size()); }
  /// A copy of `e` numbered nextId() (or `id`), marked when it is a
  /// top-level copy (scratch flag 0; UseKey tells them apart).
  std::unique_ptr<Expr> copyOf(const Frame &f, const Expr &e, int64_t id) {
    auto ne = cloneExprShallow(e, id);
    ne->setScratchFlag(TopCopy, f.top);
    return ne;
  }
  static constexpr unsigned TopCopy = 0;
  static bool isTopCopy(const Expr *e) { return e->scratchFlag(TopCopy); }

  /// Appends `ne` to the flat body, recording its output nodes (with
  /// their old ids, for the final numbering) and module references.
  void append(std::unique_ptr<Expr> ne) {
    Expr *raw = ne.get();
    out_.insertExpr(std::move(ne), nullptr);
    for (Node *o : raw->outputs())
      nodeKeys_.emplace_back(o->id(), o);
    if (detail::isModuleRefExpr(raw)) {
      refExprs_.push_back(raw);
      if (auto *cm = llvm::dyn_cast<CallMethod>(raw); cm && cm->calleeGraph())
        numbered_ = false; // renumbering visits its callee after it
    }
  }

  UseKey defaultKey(const Expr *user) const {
    return isTopCopy(user) ? UseKey{} : UseKey{0, 2 * uint64_t(user->id()) + 2};
  }

  /// Adds input `v` to `user` (a top-level expr when `top`), noting the
  /// key of a use made through a Ref (`key` when given).
  void addUse(Expr *user, Node *v, bool top, const UseKey *key = nullptr) {
    if (!isRef(v)) {
      user->addInput(v);
      return;
    }
    const Ref &r = *asRef(v);
    UseKey kk;
    if (key)
      kk = *key;
    else if (!top)
      kk = UseKey{r.k, 2 * uint64_t(user->id()) + 2};
    else
      kk = UseKey{r.k, r.redirect >= 0 ? 2 * uint64_t(r.redirect) + 1 : 0};
    Track &t = tracks_[r.track];
    if (Use *prev = r.node->lastUse()) {
      Expr *pu = prev->user();
      const Note *last = t.tail == NoNote ? nullptr : &notes_[t.tail];
      bool noted = last && last->user == pu && last->idx == pu->useIndex(prev);
      if (kk < (noted ? last->key : defaultKey(pu)))
        t.dirty = true;
    }
    uint32_t n = uint32_t(notes_.size());
    notes_.push_back({user, uint32_t(user->numInputs()), NoNote, kk, top});
    (t.tail == NoNote ? t.head : notes_[t.tail].next) = n;
    t.tail = n;
    user->addInput(r.node);
  }

  /// Puts the use lists that got out of the plain algorithm's order back
  /// in it (see UseKey): only the nodes whose uses were created out of
  /// key order.
  void restoreUseOrder() {
    std::vector<std::pair<UseKey, Use *>> keyed;
    std::vector<Use *> order;
    for (Track &t : tracks_) {
      if (!t.dirty)
        continue;
      keyed.clear();
      uint32_t next = t.head;
      for (Use *u = t.node->firstUse(); u; u = u->nextUse()) {
        Expr *user = u->user();
        uint32_t idx = uint32_t(user->useIndex(u));
        UseKey key;
        bool top;
        if (next != NoNote && notes_[next].user == user && notes_[next].idx == idx) {
          key = notes_[next].key;
          top = notes_[next].top;
          next = notes_[next].next;
        } else {
          key = defaultKey(user);
          top = isTopCopy(user);
        }
        if (top)
          key.pos = user->orderKey();
        keyed.push_back({key, u});
      }
      std::stable_sort(keyed.begin(), keyed.end(),
                       [](const auto &a, const auto &b) { return a.first < b.first; });
      order.clear();
      for (auto &p : keyed)
        order.push_back(p.second);
      t.node->reorderUsesInternal(order);
    }
  }

  /// "<prefix>_<name>" made unique in the flat namespace; valid until the
  /// next call.
  llvm::StringRef inlinedName(const Frame &f, const Node *o) {
    nameBuf_.assign(f.prefix.begin(), f.prefix.end());
    nameBuf_.push_back('_');
    nameBuf_.append(o->name().begin(), o->name().end());
    return out_.ns().createUniqueName(nameBuf_, uniqueBuf_);
  }

  Node *lookup(const Frame &f, const Expr &e, size_t i) {
    Node *v = f.map.lookup(e.input(i));
    if (!v)
      raiseAt(Location::atExpr(e.id()), "flatten: input '{}' is not defined in graph '{}'",
              e.input(i)->str(), f.g->name());
    return v;
  }

  /// The output node a copy of `o` gets: the call output node it adopts,
  /// or a new node (top level: `o`'s id and name; inlined: a new id and
  /// the prefixed name).
  std::unique_ptr<Node> outputFor(Frame &f, const Node *o) {
    auto it = f.adopt.find(o);
    if (it != f.adopt.end() && it->second)
      return std::move(it->second);
    if (f.top) {
      idsClash_ |= o->id() >= nodeIdStart_;
      return cloneNodeShallow(*o, o->id());
    }
    return cloneNodeShallow(*o, root_.nextNodeId(), inlinedName(f, o));
  }

  /// Copies `e` with mapped inputs and appends it; its outputs map to
  /// their copies.
  Expr *emitCopy(Frame &f, const Expr &e) {
    auto ne = copyOf(f, e, nextId());
    Expr *raw = ne.get();
    for (size_t i = 0; i < e.numInputs(); ++i)
      addUse(raw, lookup(f, e, i), f.top);
    for (Node *o : e.outputs())
      f.map[o] = raw->addOutput(outputFor(f, o));
    append(std::move(ne));
    return raw;
  }

  void emitBody(Frame &f) {
    llvm::ArrayRef<const Expr *> dead;
    if (!f.top)
      dead = deadExprs(*f.g);
    size_t nextDead = 0;
    auto copyOne = [&](Expr *e) {
      if (nextDead < dead.size() && dead[nextDead] == e) {
        ++nextDead;
        // Dead in every inlined copy: compile would delete it. Its output
        // names are taken all the same, so that the names of what stays
        // are the ones a full inlining gives.
        for (Node *o : e->outputs())
          inlinedName(f, o);
        return;
      }
      if (auto *cm = llvm::dyn_cast<CallMethod>(e); cm && cm->isModuleCall() && e->numInputs()) {
        Node *mv = lookup(f, *e, 0);
        if (InternalGraph *callee = inlinableCallee(*cm, mv)) {
          inlineCall(f, *cm, mv, *callee);
          return;
        }
      }
      if (auto *ga = llvm::dyn_cast<GetAttr>(e); ga && ga->numOutputs() == 1 && ga->numInputs() == 1) {
        emitGetAttr(f, *ga);
        return;
      }
      emitCopy(f, *e);
    };
    for (Expr *e : *f.g)
      copyOne(e);
  }

  /// True when `ga` (of the top graph, the first of its path) has a module
  /// output used only as the module of calls that are inlined, and is
  /// neither disable_remove nor a graph output.
  bool onlyInlinedUsers(const GetAttr &ga) const {
    auto *o = llvm::dyn_cast<ModuleNode>(ga.output(0));
    if (!o || ga.removeDisabled() || topOutputs_.count(o) || !o->hasUsers())
      return false;
    for (Use *u = o->firstUse(); u; u = u->nextUse()) {
      auto *cm = llvm::dyn_cast<CallMethod>(u->user());
      if (!cm || !cm->isModuleCall() || cm->useIndex(u) != 0 || !calleeOf(*cm, o->owner()))
        return false;
      for (size_t i = 1; i < cm->numInputs(); ++i)
        if (cm->input(i) == o)
          return false;
    }
    return true;
  }

  /// The numbering resetIds() would give, without its walk over the flat
  /// graph: when nothing was inserted in the middle or removed and no call
  /// left has a callee graph (which renumbering visits after the call),
  /// the copies' ids (nextId()) are final, and the nodes are numbered in
  /// the order of their old ids from the list kept as they were appended.
  /// The module-reference list is the one kept too. False (nothing
  /// numbered) when old node ids are negative or repeat.
  bool finishNumbering() {
    std::vector<std::pair<int64_t, Node *>> keyed;
    keyed.reserve(out_.inputs().size() + nodeKeys_.size());
    for (Node *in : out_.inputs())
      for (Node *o : in->expr()->outputs())
        keyed.emplace_back(o->id(), o);
    keyed.insert(keyed.end(), nodeKeys_.begin(), nodeKeys_.end());
    int64_t nodes = detail::renumberNodesByOldId(keyed);
    if (nodes < 0)
      return false;
    for (size_t i = 0; i < out_.inputs().size(); ++i)
      out_.input(i)->expr()->setIdInternal(int64_t(i));
    root_.setTotalIds(nodes, nextId());
    out_.setModuleRefExprsInternal(std::move(refExprs_));
    return true;
  }

  /// Links the pending GetAttrs that something uses after all, each where
  /// it was met (after its anchor); the others are dropped with the
  /// builder. Their input uses are created now, out of order: the nodes
  /// they use are re-sorted (restoreUseOrder places top-level users by
  /// body position).
  void linkPending() {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      Pending &p = *it;
      if (!p.e->output(0)->isNeeded())
        continue;
      Expr *raw = p.e.get();
      addUse(raw, p.in, true, p.repoint ? &p.selfKey : nullptr);
      tracks_[asRef(p.in)->track].dirty = true;
      out_.insertExpr(std::move(p.e), p.anchor ? p.anchor->nextInGraph() : out_.front());
      numbered_ = false;
    }
  }

  /// The graph to inline for module call `cm` whose module value is `mv`:
  /// as the plain algorithm decides on its copy, whose module node is the
  /// one plain has at `mv`.
  InternalGraph *inlinableCallee(const CallMethod &cm, Node *mv) {
    if (isRef(mv) && !asRef(mv)->own) {
      const Ref &r = *asRef(mv); // a duplicate GetAttr not copied
      return r.module != NoModule ? calleeOf(cm, moduleDups_[r.module].first) : nullptr;
    }
    Node *n = isRef(mv) ? asRef(mv)->own : mv;
    auto *mn = llvm::dyn_cast<ModuleNode>(n);
    if (!mn || !mn->expr() || !llvm::isa<GetAttr>(mn->expr()))
      return nullptr;
    return calleeOf(cm, mn->owner());
  }

  /// A GetAttr, merged as it is copied (the getattr merge of compile): the
  /// first of its path is copied, re-pointed at self with the path as its
  /// name when they differ; a later one is not copied (unless
  /// disable_remove or a graph output keeps it): its users use the first.
  void emitGetAttr(Frame &f, const GetAttr &ga) {
    const Node *o = ga.output(0);
    auto ad = f.adopt.find(o);
    const Node *outNode = ad != f.adopt.end() && ad->second ? ad->second.get() : o;
    llvm::StringRef path = detail::attrPathOf(outNode->qualname(), out_.qualname(), ga.id(), *outNode);
    auto [git, first] = paths_.try_emplace(path, Group{});
    Group &grp = git->second;
    if (first) {
      bool repoint = path != ga.attrName();
      if (repoint && !selfRef_)
        (void)out_.self(); // throws: no self to point at
      bool pend = f.top && onlyInlinedUsers(ga);
      auto ne = copyOf(f, ga, pend ? -1 : nextId());
      auto *raw = llvm::cast<GetAttr>(ne.get());
      Node *in = lookup(f, ga, 0);
      UseKey selfKey;
      if (repoint) {
        raw->setAttrName(path.str());
        selfKey = UseKey{0, SelfLast + repointed_++};
      }
      Node *n = raw->addOutput(outputFor(f, o));
      if (pend) {
        // Its module node goes with the calls it feeds, which are
        // inlined; the copy would be dead, for compile to delete (a
        // deletion in the middle of the body, which also drops the body
        // index): linked at the end only if something uses it after all.
        pending_.push_back({std::move(ne), repoint ? selfRef_ : tracked(in), repoint, selfKey,
                            out_.back()});
      } else {
        if (repoint)
          addUse(raw, selfRef_, f.top, &selfKey);
        else
          addUse(raw, in, f.top);
        append(std::move(ne));
      }
      grp.base = n;
      grp.track = trackOf(n);
      f.map[o] = newRef(Ref{n, n, grp.track});
      return;
    }
    uint32_t k = ++grp.count;
    bool outputBound = f.top ? topOutputs_.count(o) != 0
                             : outNode != o && boundToOutput_.count(outNode) != 0;
    if (ga.removeDisabled() || outputBound) {
      // Kept by the plain algorithm (a disable_remove expr, or a graph
      // output), with its users moved to the first.
      Expr *raw = emitCopy(f, ga);
      f.map[o] = newRef(Ref{grp.base, raw->output(0), grp.track, k});
      return;
    }
    (void)lookup(f, ga, 0);
    Ref r{grp.base, nullptr, grp.track, k};
    // The name the copy's node had is taken all the same (its id is not:
    // ids are renumbered in order).
    llvm::StringRef name;
    const Node *own = o;
    if (ad != f.adopt.end() && ad->second) {
      own = ad->second.get();
      name = own->name();
      discarded_.push_back(std::move(ad->second));
    } else {
      name = f.top ? o->name() : inlinedName(f, o);
    }
    if (auto *mn = llvm::dyn_cast<ModuleNode>(own)) {
      r.module = uint32_t(moduleDups_.size());
      moduleDups_.push_back({mn->owner(), name.str()});
    }
    f.map[o] = newRef(r);
  }

  /// Inlines the call `cm` of graph `f.g`, whose module value is `mv`, of
  /// `callee`: its body is emitted with the call's inputs for its inputs;
  /// the call's outputs map to what the callee returns.
  void inlineCall(Frame &f, const CallMethod &cm, Node *mv, const InternalGraph &callee) {
    checkCallArity(cm, callee);
    // The call's output nodes, as the plain algorithm's copy of the call
    // has them (ids and names taken now, in its order).
    size_t nOut = cm.numOutputs();
    std::vector<std::unique_ptr<Node>> pre(nOut);
    for (size_t j = 0; j < nOut; ++j) {
      const Node *o = cm.output(j);
      pre[j] = outputFor(f, o);
      if (f.top ? topOutputs_.count(o) != 0 : boundToOutput_.count(pre[j].get()) != 0)
        boundToOutput_.insert(pre[j].get());
    }
    Frame c;
    c.g = &callee;
    if (isRef(mv) && !asRef(mv)->own)
      c.prefix = moduleDups_[asRef(mv)->module].second;
    else
      c.prefix = (isRef(mv) ? asRef(mv)->own : mv)->name().str();
    c.map.reserve(callee.inputs().size() + callee.size() + callee.size() / 4);
    for (size_t i = 0; i < callee.inputs().size(); ++i) {
      Node *v = lookup(f, cm, i);
      if (f.top) {
        // Top-level users of the value after the call must stay before the
        // inlined ones: its later uses are noted.
        v = tracked(v);
        f.map[cm.input(i)] = v;
      }
      c.map[callee.input(i)] = v;
    }
    int64_t seq = nextId();
    std::vector<int> sameAs(nOut, -1);
    for (size_t k = 0; k < nOut; ++k) {
      Node *so = callee.output(k);
      if (!so->expr()->inBody())
        continue; // a pass-through input
      auto [it, inserted] = c.adopt.try_emplace(so);
      if (!inserted) {
        // Returned twice: the plain algorithm moves this output's users to
        // the first's node.
        for (size_t j = 0; j < k; ++j)
          if (callee.output(j) == so)
            sameAs[k] = int(j);
        continue;
      }
      if (llvm::isa<TensorNode>(pre[k].get()))
        pre[k]->setQualname(so->qualname());
      it->second = std::move(pre[k]);
    }
    emitBody(c);
    for (auto &p : pre)
      if (p)
        discarded_.push_back(std::move(p));
    for (size_t k = 0; k < nOut; ++k) {
      Node *so = callee.output(k);
      Node *v;
      if (!so->expr()->inBody()) {
        v = redirected(c.map.lookup(so), seq);
      } else if (sameAs[k] >= 0) {
        v = redirected(c.map.lookup(callee.output(sameAs[k])), seq);
      } else {
        v = c.map.lookup(so);
        if (f.top)
          v = tracked(v);
      }
      f.map[cm.output(k)] = v;
    }
  }

  /// The body exprs of `sub` that no inlined copy needs, in body order:
  /// those no graph output and no disable_remove expr depends on, GetAttrs
  /// and module calls aside. They are dead wherever `sub` is inlined
  /// (compile, which flatten ends with, would delete each copy), so they
  /// are not copied. GetAttrs stay because the getattr merge keeps the
  /// first GetAttr of a path even when unused, and module calls because
  /// inlining one names the nodes of its callee. Nothing else of a copy
  /// depends on its dead exprs: ids are renumbered after flatten, use
  /// lists keep their order, and the dead nodes' names are taken all the
  /// same.
  ///
  /// Found from the graph's unused list (a dead expr's users are all dead,
  /// so the dead exprs are what repeatedly taking unused ones gives, as in
  /// compile), counting down the uses of each producer met: the cost is
  /// the dead exprs and their producers, nothing for a graph without dead
  /// code. Computed once per graph. (The array stays valid while nested
  /// inlinings add entries: a growing map moves the vectors, whose
  /// buffers stay where they are.)
  llvm::ArrayRef<const Expr *> deadExprs(const InternalGraph &sub) {
    auto [it, inserted] = dead_.try_emplace(&sub);
    std::vector<const Expr *> &dead = it->second;
    if (!inserted)
      return dead;
    auto kept = [](const Expr *e) {
      if (e->removeDisabled() || llvm::isa<GetAttr>(e))
        return true;
      auto *cm = llvm::dyn_cast<CallMethod>(e);
      return cm && cm->isModuleCall();
    };
    std::vector<const Expr *> work;
    for (const Expr *e : sub.unusedExprs())
      if (!kept(e))
        work.push_back(e);
    // Uses of a producer's outputs not yet known to be dead; a graph
    // output never goes.
    constexpr uint32_t Forever = ~uint32_t(0);
    llvm::DenseMap<const Expr *, uint32_t> pending;
    while (!work.empty()) {
      const Expr *e = work.back();
      work.pop_back();
      dead.push_back(e);
      for (size_t i = 0; i < e->numInputs(); ++i) {
        const Expr *p = e->input(i)->expr();
        if (!p->inBody() || kept(p))
          continue;
        auto [pit, first] = pending.try_emplace(p, 0);
        uint32_t &left = pit->second;
        if (first)
          for (const Node *o : p->outputs())
            left = o->graphOutputRefs() || left == Forever
                       ? Forever
                       : left + uint32_t(o->numUsers());
        if (left != Forever && --left == 0)
          work.push_back(p);
      }
    }
    std::sort(dead.begin(), dead.end(), [](const Expr *a, const Expr *b) {
      return a->orderKey() < b->orderKey();
    });
    return dead;
  }

  /// The GetAttrs of one attribute path met so far.
  struct Group {
    Node *base = nullptr;
    uint32_t track = 0;
    uint32_t count = 0;
  };

  TracedModule &root_;
  InternalGraph &out_;
  /// Whether the copies' ids are final (see run()); the nodes of the
  /// body in order with their old ids, and its module-reference exprs.
  bool numbered_ = true;
  int64_t nodeIdStart_;
  bool idsClash_ = false;
  std::vector<std::pair<int64_t, Node *>> nodeKeys_;
  std::vector<Expr *> refExprs_;
  /// Call output nodes no copy adopted (their names and ids are taken),
  /// kept to the end so that boundToOutput_ never sees their address
  /// again.
  std::vector<std::unique_ptr<Node>> discarded_;
  /// Top-level GetAttrs not linked yet (see onlyInlinedUsers): the expr
  /// with its output, the value its input will be (a Ref), the key of a
  /// use of self (when re-pointed), the expr it follows (null: first).
  struct Pending {
    std::unique_ptr<Expr> e;
    Node *in;
    bool repoint;
    UseKey selfKey;
    Expr *anchor;
  };
  std::vector<Pending> pending_;
  Node *selfRef_ = nullptr;
  uint64_t repointed_ = 0;
  /// One per GetAttr and pass-through met: bump-allocated, freed in a
  /// few slabs.
  llvm::BumpPtrAllocator refs_;
  std::vector<std::pair<Module *, std::string>> moduleDups_;
  std::vector<Track> tracks_;
  std::vector<Note> notes_;
  llvm::DenseMap<Node *, uint32_t> trackIndex_;
  llvm::StringMap<Group, llvm::BumpPtrAllocator> paths_;
  /// The top graph's outputs, and the call output nodes that are (through
  /// adoption) one of them.
  llvm::DenseSet<const Node *> topOutputs_;
  llvm::DenseSet<const Node *> boundToOutput_;
  llvm::DenseMap<const InternalGraph *, std::vector<const Expr *>> dead_;
  llvm::SmallString<64> nameBuf_, uniqueBuf_;
};

} // namespace

static std::atomic<uint64_t> plainFallbacks{0};

uint64_t TracedModule::flattenFallbacksForTesting() { return plainFallbacks.load(); }

void TracedModule::replaceTopWithFlat(bool plain) {
  InternalGraph &old = graph();
  auto ids = totalIds();
  auto freshGraph = [&] {
    auto g = std::make_unique<InternalGraph>(old.name(), old.qualname());
    g->setOwnerInternal(this);
    return g;
  };
  // Built beside the old graph, which is only read: a failure part-way
  // leaves the module as it was.
  std::unique_ptr<InternalGraph> fresh;
  bool numbered = false;
  try {
    if (!plain) {
      fresh = freshGraph();
      auto built = FlatBuilder(*this, *fresh).run(old);
      numbered = built == FlatBuilder::Built::Numbered;
      if (built == FlatBuilder::Built::Nothing) {
        ++plainFallbacks;
        fresh.reset();
        setTotalIds(ids.first, ids.second);
      }
    }
    if (!fresh) {
      fresh = freshGraph();
      cloneGraphInto(old, *fresh, nullptr);
      PlainInliner(*this, *fresh).run();
    }
  } catch (...) {
    setTotalIds(ids.first, ids.second);
    throw;
  }
  sigs_.front().graph = std::move(fresh);
  // The builder numbered the flat graph and listed its module references
  // (InternalGraph::moduleRefExprs) unless it inserted or removed in the
  // middle; renumbering then does both in its walk. Either way updateRefs
  // walks no graph: the others did not change. (Renumbering follows the
  // calls left through their module nodes' owners, which are this
  // tree's: flatten() fixes the refs of its copy first.)
  if (!numbered)
    graph().resetIds();
  updateRefs();
}

std::unique_ptr<TracedModule> TracedModule::flatten() const {
  auto nm = cloneImpl();
  nm->fixClonedRefs();
  nm->replaceTopWithFlat(false);
  return nm;
}

std::unique_ptr<TracedModule> TracedModule::flattenCopyingDeadExprsForTesting() const {
  auto nm = cloneImpl();
  nm->fixClonedRefs();
  nm->replaceTopWithFlat(true);
  return nm;
}

bool TracedModule::flattenInPlace() {
  bool any = false;
  for (Expr *e : graph())
    any |= PlainInliner::inlinable(e) != nullptr;
  if (!any)
    return false;
  // Only the top graph is replaced: the sub-modules' graphs are read,
  // never changed.
  replaceTopWithFlat(false);
  return true;
}

} // namespace tmg
