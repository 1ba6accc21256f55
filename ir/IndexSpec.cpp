//===- IndexSpec.cpp - The items of a __getitem__ index -------------------===//
#include "tm/ir/IndexSpec.h"

namespace tmg {

std::optional<std::vector<IndexSpec>> decodeIndex(const ArgRef &idx) {
  std::vector<TreeDef> items;
  if (idx.def.kind() == TreeDef::Kind::Tuple)
    for (size_t i = 0; i < idx.def.numChildren(); ++i)
      items.push_back(idx.def.child(i));
  else
    items.push_back(idx.def);
  size_t leaf = idx.firstLeaf;
  bool ok = true;
  auto bound = [&](const TreeDef &t) {
    IndexBound b;
    if (t.isLeaf())
      b.leaf = ArgRef{idx.expr, t, leaf++};
    else if (t.isConst() && t.value().isInt())
      b.value = t.value().getInt();
    else if (!(t.isConst() && t.value().isNone()))
      ok = false;
    return b;
  };
  std::vector<IndexSpec> out;
  for (const TreeDef &t : items) {
    IndexSpec s;
    if (t.isConst() && t.value().isInt()) {
      s.kind = IndexSpec::Kind::Index;
      s.index = t.value().getInt();
    } else if (t.isConst() && t.value().isNone()) {
      s.kind = IndexSpec::Kind::NewAxis;
    } else if (t.isConst() && t.value().kind() == Scalar::Kind::Ellipsis) {
      s.kind = IndexSpec::Kind::Ellipsis;
    } else if (t.kind() == TreeDef::Kind::Slice) {
      s.start = bound(t.child(0));
      s.stop = bound(t.child(1));
      s.step = bound(t.child(2));
    } else {
      return std::nullopt;
    }
    if (!ok)
      return std::nullopt;
    out.push_back(std::move(s));
  }
  return out;
}

} // namespace tmg
