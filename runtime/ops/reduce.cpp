//===- reduce.cpp - Lowering of the reduction family ------------*- C++ -*-===//
//
// sum, mean, max, min and prod (functions and tensor methods; axis None
// reduces every axis), argmax/argmin, and cumsum.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

template <ReduceOp Op> StepFn lowerReduce(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> axes = a.axes("axis");
  bool keep = a.boolean("keepdims");
  return unaryStep(a.first(), outSlot(e, ctx), [axes, keep](const Tensor &x) {
    return reduce(Op, x, axes, keep);
  });
}

template <bool Max> StepFn lowerArgReduce(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> axes = a.axes("axis");
  bool keep = a.boolean("keepdims");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [axes, keep](const Tensor &x) {
    return Max ? argmax(x, axes, keep) : argmin(x, axes, keep);
  });
}

StepFn lowerCumsum(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  int64_t axis = a.integer("axis");
  bool ex = a.boolean("exclusive"), rev = a.boolean("reverse");
  return unaryStep(a.tensor("inp"), outSlot(e, ctx),
                   [axis, ex, rev](const Tensor &t) { return cumsum(t, axis, ex, rev); });
}

} // namespace

void registerReduceLowering(LowerTable &t) {
  using K = OpKind;
  t.add("reduce", {K::Sum, K::MSum}, lowerReduce<ReduceOp::Sum>);
  t.add("reduce", {K::Mean, K::MMean}, lowerReduce<ReduceOp::Mean>);
  t.add("reduce", {K::Max, K::MMax}, lowerReduce<ReduceOp::Max>);
  t.add("reduce", {K::Min, K::MMin}, lowerReduce<ReduceOp::Min>);
  t.add("reduce", {K::Prod, K::MProd}, lowerReduce<ReduceOp::Prod>);
  t.add("reduce", {K::Argmax}, lowerArgReduce<true>);
  t.add("reduce", {K::Argmin}, lowerArgReduce<false>);
  t.add("reduce", {K::Cumsum}, lowerCumsum);
}

} // namespace tmg::rt
