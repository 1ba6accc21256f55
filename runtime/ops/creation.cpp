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
/// A shape read at run time, checked: no negative size, no overflow.
std::vector<int64_t> checkedShape(const IntsArg &shape, const Value *s, const char *op) {
  std::vector<int64_t> v = shape.get(s);
  int64_t n = 1;
  for (int64_t d : v)
    if (d < 0 || __builtin_mul_overflow(n, d, &n))
      raise("{}: invalid shape {}", op, shapeStr(v));
  return v;
}

template <int Fill> StepFn lowerFull(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  IntsArg shape = a.intsArg("shape");
  DType dt = a.dtype("dtype");
  double v = Fill >= 0 ? double(Fill) : a.number("value");
  if (!shape.runtime())
    return constantStep(full(shape.fixed, v, dt), outSlot(e, ctx));
  return [shape, v, dt, o = outSlot(e, ctx)](Value *s, RunState &) {
    s[o].tensor = full(checkedShape(shape, s, "full"), v, dt);
  };
}

/// A number argument, or a tensor node of one value read at run time.
struct NumberArg {
  double fixed = 0;
  Src t;
  std::string name;
  double get(const Value *s) const {
    if (!t.defined())
      return fixed;
    Tensor v = t.get(s);
    if (v.numel() != 1)
      raise("arange: '{}' must hold one value, got shape {}", name, shapeStr(v.shape()));
    return v.at(0);
  }
};

NumberArg numberArg(const Args &a, const char *name) {
  NumberArg n;
  n.name = name;
  if (auto r = a.ref(name); r && r->node())
    n.t = a.tensor(name);
  else
    n.fixed = a.number(name);
  return n;
}

StepFn lowerArange(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  NumberArg start = numberArg(a, "start"), step = numberArg(a, "step"), stop;
  if (a.isNone("stop")) {
    stop = start;
    start = NumberArg();
  } else {
    stop = numberArg(a, "stop");
  }
  DType dt = a.dtype("dtype");
  uint32_t o = outSlot(e, ctx);
  if (!start.t.defined() && !stop.t.defined() && !step.t.defined())
    return constantStep(arange(start.fixed, stop.fixed, step.fixed, dt), o);
  return [start, stop, step, dt, o](Value *s, RunState &) {
    s[o].tensor = arange(start.get(s), stop.get(s), step.get(s), dt);
  };
}

} // namespace

void registerCreationLowering(LowerTable &t) {
  t.add("creation", {OpKind::Zeros}, lowerFull<0>);
  t.add("creation", {OpKind::Ones}, lowerFull<1>);
  t.add("creation", {OpKind::Full}, lowerFull<-1>);
  t.add("creation", {OpKind::Arange}, lowerArange);
}

} // namespace tmg::rt
