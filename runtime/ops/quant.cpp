//===- quant.cpp - Lowering of the quantisation family ----------*- C++ -*-===//
//
// fake_quant: per-tensor (scale and zero point read from element 0) or
// per-channel along `axis`.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {
namespace {

StepFn lowerFakeQuantize(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp"), sc = a.tensor("scale"), zp = a.tensor("zero_point");
  int64_t qmin = a.integer("qmin"), qmax = a.integer("qmax");
  std::optional<int64_t> axis;
  if (!a.isNone("axis"))
    axis = a.integer("axis");
  uint32_t o = outSlot(e, ctx);
  return [x, sc, zp, qmin, qmax, axis, o](Value *s, RunState &) {
    const Tensor &scale = sc.get(s), &zero = zp.get(s);
    if (axis)
      s[o].tensor = fakeQuantizePerChannel(x.get(s), scale, zero, *axis, qmin, qmax);
    else
      s[o].tensor = fakeQuantize(x.get(s), float(scale.at(0)), int64_t(zero.at(0)),
                                 qmin, qmax);
  };
}

} // namespace

void registerQuantLowering(LowerTable &t) {
  t.add("quant", {OpKind::FakeQuantize}, lowerFakeQuantize);
}

} // namespace tmg::rt
