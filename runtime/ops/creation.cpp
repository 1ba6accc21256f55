//===- creation.cpp - Lowering of the tensor-creation family ----*- C++ -*-===//
//
// zeros, ones, full and arange take only constants: the tensor is made once,
// when the plan is built, and every run hands out that same tensor.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

StepFn constantStep(Tensor t, uint32_t o) {
  return [t, o](Value *s, RunState &) { s[o].tensor = t; };
}

/// zeros (Fill 0), ones (Fill 1) and full (Fill < 0: the `value` argument).
template <int Fill> StepFn lowerFull(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::vector<int64_t> shape = a.ints("shape");
  DType dt = a.dtype("dtype");
  double v = Fill >= 0 ? double(Fill) : a.number("value");
  return constantStep(full(shape, v, dt), outSlot(e, ctx));
}

StepFn lowerArange(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  double start = a.number("start"), step = a.number("step"), stop;
  if (a.isNone("stop")) {
    stop = start;
    start = 0;
  } else {
    stop = a.number("stop");
  }
  DType dt = a.dtype("dtype");
  return constantStep(arange(start, stop, step, dt), outSlot(e, ctx));
}

} // namespace

void registerCreationLowering(LowerTable &t) {
  t.add("creation", {OpKind::Zeros}, lowerFull<0>);
  t.add("creation", {OpKind::Ones}, lowerFull<1>);
  t.add("creation", {OpKind::Full}, lowerFull<-1>);
  t.add("creation", {OpKind::Arange}, lowerArange);
}

} // namespace tmg::rt
