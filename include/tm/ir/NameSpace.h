//===- NameSpace.h - Unique names within a graph ----------------*- C++ -*-===//
//
// The reference's NameSpace: `createUniqueName` sanitises a name (runs of
// characters outside [0-9a-zA-Z_] become "_", a leading digit gets a "_"
// prefix) and, while the name is taken or is a Python keyword/builtin name
// (or inf, nan, NoneType), bumps a numeric suffix: "x" -> "x_1" -> "x_2";
// "x_7" -> "x_8". Per base name the namespace keeps how far the suffixes
// are taken (see the members): a thousand "add_out"s cost O(1) each instead
// of O(k), and no hash-table entry each.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/ADT/StringSet.h>
#include <llvm/Support/Allocator.h>

namespace tmg {

class Expr;

/// True for Python keywords, builtins and "inf", "nan", "NoneType".
bool isReservedName(llvm::StringRef name);

/// The reference's `get_suffix_name`: "" when `name == prefix`, the rest
/// after "prefix." when `name` starts with it, nullopt-like (false) else.
bool getSuffixName(llvm::StringRef prefix, llvm::StringRef name,
                   std::string &suffix);

/// The allocator of a NameSpace's string tables: a bump allocator whose
/// blocks are freed together with the namespace (Deallocate is a no-op). A
/// copy of a table starts an arena of its own (StringMap copies entry by
/// entry into its own allocator); moves take the blocks along.
class NameArena {
public:
  NameArena() = default;
  NameArena(const NameArena &) {}
  NameArena(NameArena &&) = default;
  NameArena &operator=(NameArena &&) = default;
  NameArena &operator=(const NameArena &) = delete;
  void *Allocate(size_t size, size_t align) { return bump_.Allocate(size, llvm::Align(align)); }
  void Deallocate(const void *, size_t, size_t) {}

private:
  llvm::BumpPtrAllocator bump_;
};

class NameSpace {
public:
  using NameSet = llvm::StringSet<NameArena>;

  NameSpace(std::string name, std::string qualname)
      : name_(std::move(name)), qualname_(std::move(qualname)) {}

  const std::string &name() const { return name_; }
  const std::string &qualname() const { return qualname_; }
  void setQualname(std::string q) { qualname_ = std::move(q); }

  /// Returns a sanitised, unused, non-reserved name and reserves it. Throws
  /// tmg::Error for an empty name.
  std::string createUniqueName(llvm::StringRef name);
  /// The same, written into `buf` (no allocation for names of up to its
  /// inline size); returns the name, valid while `buf` is. `name` must not
  /// point into `buf`.
  llvm::StringRef createUniqueName(llvm::StringRef name, llvm::SmallVectorImpl<char> &buf);
  bool isUsed(llvm::StringRef name) const;
  /// Reserves `name` as is (no sanitising). No-op when used.
  void reserve(llvm::StringRef name) { take(name); }
  /// Frees `name` again (an edit that created it was rolled back): later
  /// createUniqueName calls may hand it out. No-op when unused.
  void release(llvm::StringRef name);
  /// Adds every name of `other` (the reference's `merge`).
  void merge(const NameSpace &other);
  /// The number of names in use.
  size_t size() const;
  /// Calls `f` with every name in use, in no particular order. The
  /// StringRef is valid during the call only.
  void forEachUsedName(llvm::function_ref<void(llvm::StringRef)> f) const;

  /// Names the outputs of `e` and fills their qualnames, as the reference's
  /// `auto_naming_for_outputs`: a module call's outputs are "<module>_out"
  /// with qualname "<module qualname>.[out]"; tensor methods "add_out" with
  /// ".[method_add]"; functions "relu_out" with ".[func_relu]"; op defs
  /// "<opdef>_out" with ".[def_<opdef>]"; GetAttr and Constant outputs their
  /// attribute path or constant name. A name already set on an output is
  /// kept when unused, made unique otherwise.
  void autoNameOutputs(Expr &e);

private:
  std::string name_, qualname_;
  /// Marks `name` as used when it is free (reserved names aside); false
  /// when it was used already. One counter lookup and at most one set
  /// operation (see the invariants below).
  bool take(llvm::StringRef name);

  // A graph takes two names per expr: its output's ("relu_out_41") and the
  // qualname key ("func_relu_41"). Nearly all of them are a base and the
  // next number of its counter, so a name "b_k" (k >= 1, no leading zero)
  // is in use when k < counted_[b].next and it is not in holes_; the
  // other names are kept one by one in used_. A thousand "relu_out"s then
  // cost one counter, not a thousand hash-table entries (which at 10^6
  // exprs missed the caches on every lookup and insertion, and were freed
  // one by one with the graph).
  //
  // Invariants: used_ holds no b_k with k <= counted_[b].next (taking b_next
  // extends the range and absorbs the names of used_ that continue it);
  // holes_ holds released names inside a range (`holes` of them for b);
  // `above` counts the names b_k of used_ with k above the range (zero:
  // nothing to absorb).
  struct Counter {
    uint64_t next = 1;
    uint32_t above = 0;
    uint32_t holes = 0;
  };
  /// Takes base_(c.next), the next name of the counter.
  void extend(Counter &c, llvm::StringRef base);

  // Entries come from per-namespace bump allocators, freed with the graph.
  NameSet used_;
  llvm::StringMap<Counter, NameArena> counted_;
  NameSet holes_;

  // The base names used last ("relu_out", "func_relu", "b3_relu_out"),
  // each with its counter `c` (entries of counted_ are never erased and do
  // not move): take() finds the counter of "b3_relu_out_7" here without a
  // hash lookup (flatten names every inlined node so, and at 10^6 nodes
  // the lookup missed the caches). An entry `inUsed` also says its name is
  // in used_ and ends in no counter suffix, so the next unique name from
  // it is name_(c->next) without the two lookups. release() clears the
  // cache; copies and moves of a namespace start with it empty.
  struct HotName {
    llvm::SmallString<24> name;
    Counter *c = nullptr;
    bool inUsed = false;
  };
  struct HotNames {
    static constexpr size_t Size = 8;
    HotName e[Size];
    HotNames() = default;
    HotNames(const HotNames &) {}
    HotNames &operator=(const HotNames &) {
      clear();
      return *this;
    }
    void clear() {
      for (HotName &h : e)
        h.c = nullptr;
    }
    /// The entry of `n`, or the one to replace (round robin): fully
    /// associative, as a graph cycles through a few base names at a time.
    HotName &slot(llvm::StringRef n) {
      for (HotName &h : e)
        if (h.c && h.name.size() == n.size() && h.name == n)
          return h;
      return e[next++ % Size];
    }
    size_t next = 0;
  };
  HotNames hot_;
};

} // namespace tmg
