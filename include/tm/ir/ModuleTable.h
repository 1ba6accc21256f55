//===- ModuleTable.h - Per-layer code of builtin module types ---*- C++ -*-===//
//
// What a layer does for a builtin module type (its shape rule, its check,
// its lowering, its ONNX export) is one table per layer keyed by the type,
// as the op tables are keyed by OpKind: no chain of isa tests. A type
// without an entry of its own uses its nearest base's (a subclass of
// Conv2d is a Conv2d to a layer that has nothing more specific).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include <llvm/ADT/DenseMap.h>

#include "tm/ir/Module.h"

namespace tmg {

template <typename Fn> class ModuleTable {
public:
  ModuleTable(std::initializer_list<std::pair<const ModuleType *, Fn>> entries) {
    for (const auto &[type, fn] : entries)
      map_.try_emplace(type, fn);
  }
  /// The entry of `t` or of its nearest base; nullptr when none.
  const Fn *find(const ModuleType &t) const {
    for (const ModuleType *k = &t; k; k = k->base)
      if (auto it = map_.find(k); it != map_.end())
        return &it->second;
    return nullptr;
  }
  const Fn *find(const Module &m) const { return find(m.type()); }
  /// The types with an entry of their own.
  std::vector<const ModuleType *> types() const {
    std::vector<const ModuleType *> out;
    for (const auto &kv : map_)
      out.push_back(kv.first);
    return out;
  }

private:
  llvm::DenseMap<const ModuleType *, Fn> map_;
};

} // namespace tmg
