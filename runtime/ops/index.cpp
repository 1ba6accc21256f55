//===- index.cpp - Lowering of the indexing family --------------*- C++ -*-===//
//
// gather, take, embedding (a take along axis 0 of the weight), scatter and
// scatter_nd with their reductions, and `x[...]` with constant ints,
// slices (whose bounds may be tensors, read at run time), None and Ellipsis
// (read as a view; tensor indices are not supported).
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

/// A slice bound of a `__getitem__` index given as a tensor node (MegEngine
/// takes `x[a:b]` with tensors a and b), read when the step runs: the item,
/// which bound (0 start, 1 stop, 2 step) and the tensor.
struct NodeBound {
  size_t item;
  int which;
  Src t;
};

/// The items of a `__getitem__` index whose slice bounds are constants or
/// tensor nodes (those recorded in `bounds`, the item holding a placeholder).
std::vector<IndexItem> indexItems(const ArgRef &idx, const Args &a,
                                  std::vector<NodeBound> &bounds) {
  std::vector<TreeDef> items;
  if (idx.def.kind() == TreeDef::Kind::Tuple)
    for (size_t i = 0; i < idx.def.numChildren(); ++i)
      items.push_back(idx.def.child(i));
  else
    items.push_back(idx.def);
  std::vector<IndexItem> out;
  size_t leaf = idx.firstLeaf;
  auto opt = [&](const TreeDef &t, int which) -> std::optional<int64_t> {
    if (t.isLeaf()) {
      bounds.push_back({out.size(), which, a.tensorOf(ArgRef{&a.expr(), t, leaf++})});
      return std::nullopt;
    }
    if (t.isConst() && t.value().isNone())
      return std::nullopt;
    if (t.isConst() && t.value().isInt())
      return t.value().getInt();
    a.fail(fmt::format("slice bounds must be integers, tensors or None, got {}", t.str()));
  };
  for (const TreeDef &t : items) {
    if (t.isConst() && t.value().isInt())
      out.push_back(IndexItem::at(t.value().getInt()));
    else if (t.isConst() && t.value().isNone())
      out.push_back(IndexItem::newAxis());
    else if (t.isConst() && t.value().kind() == Scalar::Kind::Ellipsis)
      out.push_back(IndexItem::ellipsis());
    else if (t.kind() == TreeDef::Kind::Slice) {
      auto b = opt(t.child(0), 0), e = opt(t.child(1), 1), step = opt(t.child(2), 2);
      out.push_back(IndexItem::range(b, e, step.value_or(1)));
    } else
      a.fail(fmt::format("unsupported index {} (tensor indices are not supported)", t.str()));
  }
  return out;
}

/// `items` with the bounds read from their tensors.
std::vector<IndexItem> withBounds(std::vector<IndexItem> items,
                                  const std::vector<NodeBound> &bounds, const Value *s) {
  for (const NodeBound &b : bounds) {
    std::vector<int64_t> v = tensorInts(b.t.get(s), "a slice bound");
    if (v.size() != 1)
      raise("getitem: a slice bound must be one integer, got {}", v.size());
    IndexItem &it = items[b.item];
    if (b.which == 0)
      it.start = v[0];
    else if (b.which == 1)
      it.stop = v[0];
    else
      it.step = v[0];
  }
  return items;
}

StepFn lowerGetItem(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  auto idx = a.ref("index");
  if (!idx)
    a.fail("missing argument 'index'");
  std::vector<NodeBound> bounds;
  std::vector<IndexItem> items = indexItems(*idx, a, bounds);
  Src x = a.tensor("self").asView();
  if (bounds.empty())
    return unaryStep(x, outSlot(e, ctx), [items](const Tensor &t) { return getitem(t, items); });
  return [x, items, bounds, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = getitem(x.get(s), withBounds(items, bounds, s));
  };
}

StepFn lowerGather(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t axis = a.integer("axis");
  return binaryStep(a.tensor("inp"), a.tensor("index"), outSlot(e, ctx),
                    [axis](const Tensor &x, const Tensor &i) { return gather(x, axis, i); });
}

StepFn lowerTake(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t axis = a.integer("axis");
  return binaryStep(a.tensor("inp"), a.tensor("indices"), outSlot(e, ctx),
                    [axis](const Tensor &x, const Tensor &i) { return take(x, i, axis); });
}

StepFn lowerEmbedding(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp"), w = a.tensor("weight");
  return binaryStep(x, w, outSlot(e, ctx), [](const Tensor &idx, const Tensor &wt) {
    return take(wt, idx, 0);
  });
}

ScatterReduce scatterReduction(const Args &a) {
  std::string r = a.string("reduction");
  std::optional<ScatterReduce> red = parseScatterReduce(r);
  if (!red)
    a.fail(fmt::format("unknown reduction '{}' (none, add, mul, max or min)", r));
  return *red;
}

StepFn lowerScatter(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ScatterReduce red = scatterReduction(a);
  Src x = a.tensor("inp"), u = a.tensor("source"), i = a.tensor("index");
  int64_t axis = a.integer("axis");
  uint32_t o = outSlot(e, ctx);
  return [x, i, u, axis, red, o](Value *s, RunState &) {
    s[o].tensor = scatter(x.get(s), axis, i.get(s), u.get(s), red);
  };
}

StepFn lowerScatterNd(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  ScatterReduce red = scatterReduction(a);
  Src x = a.tensor("inp"), u = a.tensor("updates"), i = a.tensor("indices");
  uint32_t o = outSlot(e, ctx);
  return [x, i, u, red, o](Value *s, RunState &) {
    s[o].tensor = scatterNd(x.get(s), i.get(s), u.get(s), red);
  };
}

} // namespace

void registerIndexLowering(LowerTable &t) {
  t.add("index", {OpKind::MGetItem}, lowerGetItem);
  t.add("index", {OpKind::Gather}, lowerGather);
  t.add("index", {OpKind::Take}, lowerTake);
  t.add("index", {OpKind::Embedding}, lowerEmbedding);
  t.add("index", {OpKind::Scatter}, lowerScatter);
  t.add("index", {OpKind::ScatterNd}, lowerScatterNd);
}

} // namespace tmg::rt
