//===- Node.h - TensorNode and ModuleNode -----------------------*- C++ -*-===//
//
// A Node is a value of a graph: a tensor (TensorNode) or a module
// (ModuleNode). It is defined by exactly one Expr (its producer, which owns
// it) and used by the inputs of other Exprs. Uses form an intrusive
// doubly-linked list per node, in the order they were added, so `users()`
// mirrors the reference's `node.users` list (multiplicity included) while
// adding or removing a use is O(1).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/iterator_range.h>
#include <llvm/Support/Casting.h>

#include "tm/ir/SharedString.h"
#include "tm/ir/Tensor.h"

namespace tmg {

class Expr;
class InternalGraph;
class Module;
struct ModuleType;
class Node;

/// One input slot of an Expr: links the expr into its node's use list.
class Use {
public:
  Node *get() const { return node_; }
  Expr *user() const { return user_; }
  Use *nextUse() const { return next_; }

private:
  friend class Node;
  friend class Expr;
  Node *node_ = nullptr;
  Expr *user_ = nullptr;
  Use *prev_ = nullptr;
  Use *next_ = nullptr;
};

/// How a node prints: "" -> name (or %id when unnamed), "i" -> %id_name,
/// "p" -> graphname_name, "ip" -> %id_graphname_name (the reference's
/// `__format__` specs).
struct NodeFormat {
  bool withId = false;
  bool withGraph = false;
  /// Parses "", "i", "p", "ip", "pi"; throws tmg::Error for anything else.
  static NodeFormat parse(llvm::StringRef spec);
};

class Node {
public:
  enum class Kind : uint8_t { Tensor, Module };
  /// From the IR's size-class pool (ir/Pool.h).
  static void *operator new(size_t size);
  static void operator delete(void *p, size_t size) noexcept;
  virtual ~Node();
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;

  Kind kind() const { return kind_; }
  /// The producer (an Input expr for graph inputs).
  Expr *expr() const { return expr_; }
  /// The graph that owns the producer (the reference's `top_graph`).
  InternalGraph *graph() const;

  int64_t id() const { return id_; }
  llvm::StringRef name() const { return names_.ref().take_front(nameSize_); }
  llvm::StringRef qualname() const { return names_.ref().drop_front(nameSize_); }
  /// Gives this node the name and qualname of `o` (sharing its block).
  void copyNamesFrom(const Node &o) {
    names_ = o.names_;
    nameSize_ = o.nameSize_;
  }
  /// Renames with the reference's checks: the name must not be in use in the
  /// graph's namespace (tmg::Error otherwise); it is then sanitised and
  /// registered.
  void setName(llvm::StringRef newName);

  /// Formats as the reference's `__format__`.
  std::string str(NodeFormat f = {}) const;

  // -- Users -----------------------------------------------------------------
  class UserIterator {
  public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Expr *;
    using difference_type = std::ptrdiff_t;
    using pointer = Expr **;
    using reference = Expr *;
    UserIterator() = default;
    explicit UserIterator(Use *u) : u_(u) {}
    Expr *operator*() const { return u_->user(); }
    UserIterator &operator++() {
      u_ = u_->nextUse();
      return *this;
    }
    UserIterator operator++(int) {
      auto t = *this;
      ++*this;
      return t;
    }
    bool operator==(const UserIterator &o) const { return u_ == o.u_; }
    bool operator!=(const UserIterator &o) const { return u_ != o.u_; }
    Use *use() const { return u_; }

  private:
    Use *u_ = nullptr;
  };
  /// Users in use order, one entry per use (an expr using this node twice
  /// appears twice).
  llvm::iterator_range<UserIterator> users() const {
    return {UserIterator(firstUse_), UserIterator()};
  }
  std::vector<Expr *> userList() const;
  size_t numUsers() const { return numUses_; }
  bool hasUsers() const { return numUses_ != 0; }
  /// How many times the node is listed among its graph's outputs.
  size_t graphOutputRefs() const { return outputRefs_; }
  /// Used by an expr or a graph output: what keeps its producer alive.
  bool isNeeded() const { return numUses_ != 0 || outputRefs_ != 0; }
  Use *firstUse() const { return firstUse_; }
  Use *lastUse() const { return lastUse_; }
  /// Relinks the use list in the order of `order`, which must hold every
  /// use of this node once (whole-graph builders that create uses out of
  /// the order they define: flatten). O(uses).
  void reorderUsesInternal(llvm::ArrayRef<Use *> order);

  // Internal (used by graph code).
  void setIdInternal(int64_t id) { id_ = id; }
  void setNameInternal(llvm::StringRef n) { setNamesInternal(n, qualname()); }
  /// Sets the qualname (a structural change of the node's graph: the getattr
  /// merge reads it).
  void setQualname(llvm::StringRef q);
  /// Sets both (builders and readers: one block).
  void setNamesInternal(llvm::StringRef name, llvm::StringRef qualname) {
    names_ = SharedString(name, qualname);
    nameSize_ = uint32_t(name.size());
  }
  void setExprInternal(Expr *e) { expr_ = e; }

protected:
  Node(Kind k, Expr *e, int64_t id) : kind_(k), expr_(e), id_(id) {}

private:
  friend class Expr;
  friend class InternalGraph;
  void linkUse(Use *u);
  void unlinkUse(Use *u);
  /// A graph's output list took or dropped this node.
  void retainAsOutput();
  void releaseAsOutput();

  Kind kind_;
  /// The name is the first nameSize_ characters of names_, the qualname
  /// the rest: one block per node for both (they are created, copied
  /// and destroyed together), its size kept in the padding after kind_.
  uint32_t nameSize_ = 0;
  Expr *expr_;
  int64_t id_;
  SharedString names_;
  Use *firstUse_ = nullptr;
  Use *lastUse_ = nullptr;
  uint32_t numUses_ = 0;
  uint32_t outputRefs_ = 0; ///< see graphOutputRefs (kept by InternalGraph)
};

class TensorNode : public Node {
public:
  TensorNode(Expr *e, int64_t id) : Node(Kind::Tensor, e, id) {}
  static bool classof(const Node *n) { return n->kind() == Kind::Tensor; }

  /// The shape when its rank is known (tracing records it; builders may
  /// leave it). Dims may be symbolic or unknown (tm/ir/SymbolicDim.h);
  /// staticShape() is the shape only when every dim is a known size.
  const std::optional<Shape> &shape() const { return shape_; }
  const Shape *staticShape() const {
    return shape_ && isStaticShape(*shape_) ? &*shape_ : nullptr;
  }
  void setShape(std::optional<Shape> &&s) { shape_ = std::move(s); }
  void setShape(const std::optional<Shape> &s) { shape_ = s; }
  DType dtype() const { return dtype_; }
  void setDType(DType t) { dtype_ = t; }
  bool hasDType() const { return hasDType_; }
  void setHasDType(bool b) { hasDType_ = b; }

private:
  std::optional<Shape> shape_;
  DType dtype_ = DType::Float32;
  bool hasDType_ = false;
};

class ModuleNode : public Node {
public:
  ModuleNode(Expr *e, int64_t id);
  static bool classof(const Node *n) { return n->kind() == Kind::Module; }

  /// The module class the node stands for: the builtin's type, or the base
  /// "Module" type for traced modules (as the reference).
  const ModuleType &moduleType() const { return *moduleType_; }
  void setModuleType(const ModuleType &t) { moduleType_ = &t; }
  /// The live module this node refers to (the reference's `owner`);
  /// recomputed by TracedModule::updateRefs().
  Module *owner() const { return owner_; }
  void setOwner(Module *m) { owner_ = m; }

private:
  const ModuleType *moduleType_;
  Module *owner_ = nullptr;
};

} // namespace tmg
