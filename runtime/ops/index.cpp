//===- index.cpp - Lowering of the indexing family --------------*- C++ -*-===//
//
// gather, take, embedding (a take along axis 0 of the weight), scatter and
// scatter_nd with their reductions, and `x[...]` with constant ints,
// slices, None and Ellipsis (read as a view; tensor indices are not
// supported).
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

/// The items of a constant `__getitem__` index.
std::vector<IndexItem> indexItems(const TreeDef &idx, const Args &a) {
  std::vector<TreeDef> items;
  if (idx.kind() == TreeDef::Kind::Tuple)
    for (size_t i = 0; i < idx.numChildren(); ++i)
      items.push_back(idx.child(i));
  else
    items.push_back(idx);
  std::vector<IndexItem> out;
  auto opt = [&](const TreeDef &t) -> std::optional<int64_t> {
    if (t.isConst() && t.value().isNone())
      return std::nullopt;
    if (t.isConst() && t.value().isInt())
      return t.value().getInt();
    a.fail(fmt::format("slice bounds must be integers or None, got {}", t.str()));
  };
  for (const TreeDef &t : items) {
    if (t.isConst() && t.value().isInt())
      out.push_back(IndexItem::at(t.value().getInt()));
    else if (t.isConst() && t.value().isNone())
      out.push_back(IndexItem::newAxis());
    else if (t.isConst() && t.value().kind() == Scalar::Kind::Ellipsis)
      out.push_back(IndexItem::ellipsis());
    else if (t.kind() == TreeDef::Kind::Slice) {
      auto step = opt(t.child(2));
      out.push_back(IndexItem::range(opt(t.child(0)), opt(t.child(1)), step.value_or(1)));
    } else
      a.fail(fmt::format("unsupported index {} (tensor indices are not supported)", t.str()));
  }
  return out;
}

StepFn lowerGetItem(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<IndexItem> items = indexItems(a.constant("index"), a);
  return unaryStep(a.tensor("self").asView(), outSlot(e, ctx),
                   [items](const Tensor &x) { return getitem(x, items); });
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
