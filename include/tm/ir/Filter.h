//===- Filter.h - Chainable expr and node filters ---------------*- C++ -*-===//
//
// The reference's ExprFilter / NodeFilter: the result of `graph.exprs()` or
// `graph.nodes()`, refined by chained filters and consumed by `asList`,
// `asDict`, `asUnique` and `asCount`. Each filter step is one linear pass;
// id filters use hash sets (the reference's `in list` is quadratic).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Casting.h>

namespace tmg {

class Expr;
class Node;
class OpSchema;
struct ModuleType;

class ExprFilter {
public:
  explicit ExprFilter(std::vector<Expr *> items) : items_(std::move(items)) {}

  /// CallFunction exprs of `fn` (all CallFunctions when `fn` is null).
  ExprFilter callFunction(const OpSchema *fn = nullptr) const;
  /// By function name, "relu" or "nn.relu".
  ExprFilter callFunction(llvm::StringRef fn) const;
  /// CallMethod exprs whose method is `method` (all when empty); module
  /// calls have method "__call__".
  ExprFilter callMethod(llvm::StringRef method = {}) const;
  /// Exprs whose id is in `ids`.
  ExprFilter exprId(llvm::ArrayRef<int64_t> ids) const;
  /// Any predicate.
  ExprFilter where(const std::function<bool(const Expr *)> &pred) const;

  std::vector<Expr *> asList() const { return items_; }
  /// id -> expr in iteration order.
  llvm::MapVector<int64_t, Expr *> asDict() const;
  /// The single element; throws tmg::Error "N elements found" otherwise.
  Expr *asUnique() const;
  size_t asCount() const { return items_.size(); }

  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

private:
  std::vector<Expr *> items_;
};

class NodeFilter {
public:
  explicit NodeFilter(std::vector<Node *> items) : items_(std::move(items)) {}

  /// ModuleNodes whose owner is of type `t` or a subtype (the reference's
  /// `isinstance(node.owner, cls)`).
  NodeFilter type(const ModuleType &t) const;
  template <typename T> NodeFilter type() const { return type(T::staticType()); }
  NodeFilter nodeId(llvm::ArrayRef<int64_t> ids) const;
  /// Full name "<graph name>_<node name>" equal to `pattern` or matching it
  /// as a glob (`*`, `?`, `[seq]`, `[!seq]`), case-insensitive by default.
  NodeFilter name(llvm::StringRef pattern, bool ignoreCase = true) const;
  NodeFilter where(const std::function<bool(const Node *)> &pred) const;

  std::vector<Node *> asList() const { return items_; }
  llvm::MapVector<int64_t, Node *> asDict() const;
  Node *asUnique() const;
  size_t asCount() const { return items_.size(); }

  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

private:
  std::vector<Node *> items_;
};

/// fnmatch-style glob match of the whole `text` (Python's fnmatch.translate
/// semantics).
bool globMatch(llvm::StringRef pattern, llvm::StringRef text,
               bool ignoreCase);

} // namespace tmg
