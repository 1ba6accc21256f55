//===- NameSpace.h - Unique names within a graph ----------------*- C++ -*-===//
//
// The reference's NameSpace: `createUniqueName` sanitises a name (runs of
// characters outside [0-9a-zA-Z_] become "_", a leading digit gets a "_"
// prefix) and, while the name is taken or is a Python keyword/builtin name
// (or inf, nan, NoneType), bumps a numeric suffix: "x" -> "x_1" -> "x_2";
// "x_7" -> "x_8". Names are never released, as in the reference, which lets
// us remember per base name how far the suffixes are known to be taken: a
// thousand "add_out"s cost O(1) each instead of O(k).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
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
  bool isUsed(llvm::StringRef name) const { return used_.count(name) != 0; }
  /// Reserves `name` as is (no sanitising).
  void reserve(llvm::StringRef name) { used_.insert(name); }
  /// Frees `name` again (an edit that created it was rolled back): later
  /// createUniqueName calls may hand it out. No-op when unused.
  void release(llvm::StringRef name);
  /// Adds every name of `other` (the reference's `merge`).
  void merge(const NameSpace &other);
  size_t size() const { return used_.size(); }
  const NameSet &usedNames() const { return used_; }

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
  // Entries come from per-namespace bump allocators: a graph reserves two
  // or three names per expr (its output's name, the "func_relu"-style
  // qualname key) and drops them all at once with the graph, so freeing
  // them one by one through malloc (with its chunk coalescing) was a third
  // of destroying a large module. A released name (a rolled-back edit)
  // leaves its few bytes in the allocator until the graph goes.
  NameSet used_;
  /// For base name b: every "b_k" with 1 <= k < probe_[b] is known taken.
  llvm::StringMap<uint64_t, NameArena> probe_;
};

} // namespace tmg
