//===- Filter.cpp - Chainable expr and node filters -----------------------===//
#include "tm/ir/Filter.h"

#include <cctype>

#include <llvm/ADT/DenseSet.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/InternalGraph.h"
#include "tm/ir/Module.h"

namespace tmg {

ExprFilter ExprFilter::callFunction(const OpSchema *fn) const {
  return where([fn](const Expr *e) { return isCallFunction(e, fn); });
}

ExprFilter ExprFilter::callFunction(llvm::StringRef fn) const {
  return callFunction(&functionOp(fn));
}

ExprFilter ExprFilter::callMethod(llvm::StringRef method) const {
  std::string m = method.str();
  return where([m](const Expr *e) {
    auto *cm = llvm::dyn_cast<CallMethod>(e);
    return cm && (m.empty() || cm->method() == m);
  });
}

ExprFilter ExprFilter::exprId(llvm::ArrayRef<int64_t> ids) const {
  llvm::DenseSet<int64_t> set(ids.begin(), ids.end());
  return where([&set](const Expr *e) { return set.count(e->id()) != 0; });
}

ExprFilter ExprFilter::where(const std::function<bool(const Expr *)> &pred) const {
  std::vector<Expr *> out;
  for (Expr *e : items_)
    if (pred(e))
      out.push_back(e);
  return ExprFilter(std::move(out));
}

llvm::MapVector<int64_t, Expr *> ExprFilter::asDict() const {
  llvm::MapVector<int64_t, Expr *> d;
  for (Expr *e : items_)
    d[e->id()] = e;
  return d;
}

Expr *ExprFilter::asUnique() const {
  if (items_.size() != 1)
    raise("{} elements found", items_.size());
  return items_[0];
}

NodeFilter NodeFilter::type(const ModuleType &t) const {
  return where([&t](const Node *n) {
    auto *mn = llvm::dyn_cast<ModuleNode>(n);
    return mn && mn->owner() && mn->owner()->type().isa(t);
  });
}

NodeFilter NodeFilter::nodeId(llvm::ArrayRef<int64_t> ids) const {
  llvm::DenseSet<int64_t> set(ids.begin(), ids.end());
  return where([&set](const Node *n) { return set.count(n->id()) != 0; });
}

NodeFilter NodeFilter::name(llvm::StringRef pattern, bool ignoreCase) const {
  std::string p = pattern.str();
  return where([p, ignoreCase](const Node *n) {
    InternalGraph *g = n->graph();
    std::string full = (g ? g->name() : std::string()) + "_" + n->name().str();
    return full == p || globMatch(p, full, ignoreCase);
  });
}

NodeFilter NodeFilter::where(const std::function<bool(const Node *)> &pred) const {
  std::vector<Node *> out;
  for (Node *n : items_)
    if (pred(n))
      out.push_back(n);
  return NodeFilter(std::move(out));
}

llvm::MapVector<int64_t, Node *> NodeFilter::asDict() const {
  llvm::MapVector<int64_t, Node *> d;
  for (Node *n : items_)
    d[n->id()] = n;
  return d;
}

Node *NodeFilter::asUnique() const {
  if (items_.size() != 1)
    raise("{} elements found", items_.size());
  return items_[0];
}

static char fold(char c, bool ic) {
  return ic ? char(std::tolower((unsigned char)c)) : c;
}

/// Matches one `[...]` class at p[pi] against c; advances pi past it.
/// Returns -1 when the class is unterminated (then '[' is literal).
static int matchClass(llvm::StringRef p, size_t &pi, char c, bool ic) {
  size_t j = pi + 1;
  bool negate = false;
  if (j < p.size() && p[j] == '!') {
    negate = true;
    ++j;
  }
  size_t start = j;
  if (j < p.size() && p[j] == ']')
    ++j;
  while (j < p.size() && p[j] != ']')
    ++j;
  if (j >= p.size())
    return -1;
  bool hit = false;
  for (size_t k = start; k < j; ++k) {
    if (k + 2 < j && p[k + 1] == '-') {
      char lo = fold(p[k], ic), hi = fold(p[k + 2], ic), x = fold(c, ic);
      if (lo <= x && x <= hi)
        hit = true;
      k += 2;
    } else if (fold(p[k], ic) == fold(c, ic)) {
      hit = true;
    }
  }
  pi = j + 1;
  return hit != negate;
}

bool globMatch(llvm::StringRef p, llvm::StringRef t, bool ic) {
  // Iterative matcher with single-star backtracking: O(|p| * |t|) worst case.
  size_t pi = 0, ti = 0, starP = llvm::StringRef::npos, starT = 0;
  while (ti < t.size()) {
    if (pi < p.size()) {
      char pc = p[pi];
      if (pc == '*') {
        starP = ++pi;
        starT = ti;
        continue;
      }
      if (pc == '?') {
        ++pi;
        ++ti;
        continue;
      }
      if (pc == '[') {
        size_t save = pi;
        int r = matchClass(p, pi, t[ti], ic);
        if (r == 1) {
          ++ti;
          continue;
        }
        if (r == -1) {
          pi = save;
          if (fold('[', ic) == fold(t[ti], ic)) {
            ++pi;
            ++ti;
            continue;
          }
        } else {
          pi = save;
        }
      } else if (fold(pc, ic) == fold(t[ti], ic)) {
        ++pi;
        ++ti;
        continue;
      }
    }
    if (starP != llvm::StringRef::npos) {
      pi = starP;
      ti = ++starT;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*')
    ++pi;
  return pi == p.size();
}

} // namespace tmg
