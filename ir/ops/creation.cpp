//===- creation.cpp - Shape rules of the creation ops ---------------------===//
//
// Output types of the creation family: zeros, ones and full of a constant
// shape, and arange, whose length follows from constant start, stop and
// step; the dtype is the one named by the `dtype` argument. A shape or bound
// given as a tensor node is read at run time: the shape is then unknown.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include <algorithm>
#include <cmath>

namespace tmg::shapes {
namespace {

/// The dtype named by a constant `dtype` argument, when it is one.
std::optional<DType> namedDType(const std::optional<TreeDef> &dt) {
  std::optional<DType> t;
  if (dt && dt->isConst() && dt->value().isString())
    t = parseDType(dt->value().getString());
  return t;
}

/// zeros, ones and full.
Types filled(const ShapeContext &c, OpKind) {
  auto s = c.constArg("shape"), dt = c.constArg("dtype");
  auto v = s ? intsOf(*s) : std::nullopt;
  std::optional<DType> t = namedDType(dt);
  if (auto a = c.arg("shape"); a && a->node())
    return c.one(std::nullopt, t); // the shape is read at run time
  if (!v)
    return std::nullopt;
  return c.one(Shape(v->begin(), v->end()), t);
}

Types arange(const ShapeContext &c, OpKind) {
  auto a = c.constArg("start"), b = c.constArg("stop"), s = c.constArg("step"),
       dt = c.constArg("dtype");
  for (const char *name : {"start", "stop", "step"})
    if (auto r = c.arg(name); r && r->node())
      return c.one(std::nullopt, namedDType(dt)); // bounds read at run time
  if (!a || !b || !s || !a->isConst() || !s->isConst() ||
      !a->value().isNumber() || !s->value().isNumber())
    return std::nullopt;
  double start = a->value().toDouble(), step = s->value().toDouble(), stop;
  if (isNoneDef(*b)) {
    stop = start;
    start = 0;
  } else if (b->isConst() && b->value().isNumber()) {
    stop = b->value().toDouble();
  } else {
    return std::nullopt;
  }
  if (step == 0)
    c.fail("step must not be zero");
  int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
  return c.one(Shape{n}, namedDType(dt));
}

} // namespace

void registerCreationShapeRules(ShapeRuleTable &t) {
  t.add("creation", {OpKind::Zeros, OpKind::Ones, OpKind::Full}, symbolic(filled));
  t.add("creation", {OpKind::Arange}, symbolic(arange));
}

} // namespace tmg::shapes
