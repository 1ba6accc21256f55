//===- StateDict.cpp - state_dict and load_state_dict of modules ---------===//
//
// MegEngine's `Module.state_dict` / `load_state_dict`: the order is that of
// `Module._flatten` (attribute names sorted, a list's items in index
// order), and identity decides what counts once.
//
//===----------------------------------------------------------------------===//
#include "tm/ir/StateDict.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>

namespace tmg {

namespace {

/// One state-dict entry and the attribute slot it reads.
struct Entry {
  std::string key;
  const Tensor *slot;
};

void collect(const Module &m, const std::string &prefix, std::vector<Entry> &out) {
  std::vector<const ModuleAttr *> order = flattenOrder(m);
  // Tensors first, then submodules, each seen once per module.
  std::map<TensorIdentity, bool> seen;
  for (const ModuleAttr *a : order)
    if (a->kind == ModuleAttr::Kind::Parameter || a->kind == ModuleAttr::Kind::Buffer)
      if (seen.emplace(identityOf(a->tensor), true).second)
        out.push_back({prefix + a->name, &a->tensor});
  // A submodule under two names (an alias) is one object: listed under the
  // first name in `_flatten` order.
  llvm::SmallPtrSet<const Module *, 8> seenModules;
  for (const ModuleAttr *a : order)
    if (a->kind == ModuleAttr::Kind::Submodule || a->kind == ModuleAttr::Kind::Alias)
      if (const Module *sub = m.module(a->name); sub && seenModules.insert(sub).second)
        collect(*sub, prefix + a->name + ".", out);
}

std::string describe(const Tensor &t) {
  return fmt::format("{} {}", dtypeName(t.dtype()).str(), shapeStr(t.shape()));
}

/// Every tensor slot of the tree rooted at `m`, by identity (a tensor
/// shared by several attributes has several slots).
void slotsByIdentity(Module &m, std::map<TensorIdentity, std::vector<Tensor *>> &out) {
  for (const ModuleAttr &a : m.attrs()) {
    if (a.kind == ModuleAttr::Kind::Parameter || a.kind == ModuleAttr::Kind::Buffer)
      out[identityOf(a.tensor)].push_back(m.tensor(a.name));
    else if (a.kind == ModuleAttr::Kind::Submodule && a.module)
      slotsByIdentity(*a.module, out);
  }
}

} // namespace

StateDict stateDict(const Module &m) {
  std::vector<Entry> entries;
  collect(m, "", entries);
  StateDict sd;
  sd.reserve(entries.size());
  for (Entry &e : entries)
    sd.emplace_back(std::move(e.key), *e.slot);
  return sd;
}

FailureOr<LoadStateReport> loadStateDict(Module &m, const StateDict &sd, bool strict) {
  std::vector<Entry> entries;
  collect(m, "", entries);
  llvm::StringMap<size_t> given;
  for (size_t i = 0; i < sd.size(); ++i)
    if (!given.try_emplace(sd[i].first, i).second)
      return Diagnostic(Location(), fmt::format("load_state_dict: key '{}' is given twice",
                                                sd[i].first));
  LoadStateReport report;
  std::vector<std::string> problems;
  llvm::StringMap<bool> known;
  std::vector<std::pair<const Entry *, const Tensor *>> plan;
  for (const Entry &e : entries) {
    known[e.key] = true;
    auto it = given.find(e.key);
    if (it == given.end()) {
      report.missing.push_back(e.key);
      continue;
    }
    const Tensor &want = *e.slot, &got = sd[it->second].second;
    if (!got.defined() || got.shape() != want.shape() || got.dtype() != want.dtype()) {
      problems.push_back(fmt::format("key '{}': the module holds {} but the state dict "
                                     "gives {}",
                                     e.key, describe(want),
                                     got.defined() ? describe(got) : "an undefined tensor"));
      continue;
    }
    plan.emplace_back(&e, &got);
  }
  for (const auto &[key, value] : sd)
    if (!known.count(key))
      report.unexpected.push_back(key);
  if (strict) {
    for (const std::string &k : report.missing)
      problems.push_back(fmt::format("missing key '{}'", k));
    for (const std::string &k : report.unexpected)
      problems.push_back(fmt::format("unexpected key '{}'", k));
  }
  if (!problems.empty()) {
    Diagnostic d(Location(), fmt::format("load_state_dict into '{}': {} problem{}{}",
                                         m.typeName().str(), problems.size(),
                                         problems.size() == 1 ? "" : "s",
                                         strict ? " (strict)" : ""));
    for (std::string &p : problems)
      d.note(std::move(p));
    return d;
  }
  // Identities are taken before any slot changes, so that every slot of a
  // shared tensor gets the new value, whichever key names it.
  std::map<TensorIdentity, std::vector<Tensor *>> slots;
  slotsByIdentity(m, slots);
  std::vector<TensorIdentity> ids;
  for (const auto &[entry, value] : plan)
    ids.push_back(identityOf(*entry->slot));
  for (size_t i = 0; i < plan.size(); ++i) {
    Tensor fresh = plan[i].second->contiguous().clone();
    for (Tensor *slot : slots[ids[i]])
      *slot = fresh;
    report.loaded.push_back(plan[i].first->key);
  }
  return report;
}

} // namespace tmg
