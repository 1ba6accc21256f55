//===- reduce.cpp - Shape rules of the reductions -------------------------===//
//
// Output types of the reduce family: sum, mean, max, min and prod over
// given axes (or all), keeping reduced dims as 1 on request; argmax and
// argmin the same with an int64 result; cumsum keeps its input's type;
// topk gives k values (or the kth) along the last axis and their int64
// indices.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {
namespace {

Types reduceShape(const ShapeContext &c, bool toIndex) {
  auto x = c.first();
  std::optional<DType> dt;
  if (toIndex)
    dt = DType::Int64;
  else if (x)
    dt = x->dtype;
  if (auto a = c.arg("axis"); a && a->node())
    return c.one(std::nullopt, dt); // axes read at run time
  auto ax = c.constArg("axis");
  auto kd = c.constArg("keepdims");
  if (!x || !x->shape || !ax || !kd || !kd->isConst())
    return std::nullopt;
  bool keep = kd->value().isBool() && kd->value().getBool();
  const Shape &xs = *x->shape;
  std::vector<bool> drop(xs.size(), false);
  if (isNoneDef(*ax)) {
    drop.assign(xs.size(), true);
  } else {
    auto axes = intsOf(*ax);
    if (!axes)
      return std::nullopt;
    for (int64_t a : *axes) {
      int64_t r = int64_t(xs.size());
      if (a < -r || a >= r)
        c.fail(fmt::format("axis {} is out of range for {}", a, dim::dimsStr(xs)));
      drop[a < 0 ? a + r : a] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!drop[i])
      out.push_back(xs[i]);
    else if (keep)
      out.push_back(1);
  return c.one(out, dt);
}

Types topk(const ShapeContext &c, OpKind) {
  auto x = c.first();
  auto kd = c.constArg("k"), kth = c.constArg("kth_only");
  std::optional<int64_t> ko;
  if (kd)
    ko = intOf(*kd);
  if (auto a = c.arg("k"); x && a && a->node()) { // k read at run time
    TensorTypes out;
    out.push_back(TensorType{std::nullopt, x->dtype});
    out.push_back(TensorType{std::nullopt, DType::Int64});
    return out;
  }
  if (!x || !x->shape || !ko || !kth || !kth->isConst())
    return std::nullopt;
  Shape s = *x->shape;
  int64_t k = ko.value_or(0);
  if (s.empty() || k < 0 || (isKnownDim(s.back()) && k > s.back()))
    c.fail(fmt::format("k = {} is out of range for the last axis of {}", k, dim::dimsStr(s)));
  if (kth->value().isBool() && kth->value().getBool())
    s.pop_back();
  else
    s.back() = k;
  TensorTypes out;
  out.push_back(TensorType{s, x->dtype});
  out.push_back(TensorType{s, DType::Int64});
  return out;
}

} // namespace

void registerReduceShapeRules(ShapeRuleTable &t) {
  t.add("reduce",
        {OpKind::Sum, OpKind::Mean, OpKind::Max, OpKind::Min, OpKind::Prod,
         OpKind::MSum, OpKind::MMean, OpKind::MMax, OpKind::MMin,
         OpKind::MProd},
        symbolic([](const ShapeContext &c, OpKind) { return reduceShape(c, false); }));
  t.add("reduce", {OpKind::Argmax, OpKind::Argmin},
        symbolic([](const ShapeContext &c, OpKind) { return reduceShape(c, true); }));
  t.add("reduce", {OpKind::Cumsum},
        symbolic([](const ShapeContext &c, OpKind) { return c.same(); }));
  t.add("reduce", {OpKind::Topk}, symbolic(topk));
}

} // namespace tmg::shapes
