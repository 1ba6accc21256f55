//===- shape.cpp - Shape rules of the shape ops ---------------------------===//
//
// Output types of the shape family: pad, reshape, flatten, transpose,
// broadcast_to, concat, stack, split, squeeze, expand_dims and GetVarShape.
// Each keeps its input's dtype except GetVarShape (int32). flattenShape is
// shared with the Flatten module.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {

Types flattenShape(const ShapeContext &c, const std::optional<Operand> &x,
                   int64_t start, int64_t end) {
  if (!x || !x->shape)
    return std::nullopt;
  const Shape &xs = *x->shape;
  if (xs.empty())
    return c.one(Shape{1}, x->dtype);
  int64_t b = c.normAxis(start, xs.size()), e = c.normAxis(end, xs.size());
  if (b > e)
    c.fail(fmt::format("start axis {} is after end axis {}", start, end));
  Shape out(xs.begin(), xs.begin() + b);
  int64_t m = 1;
  for (int64_t i = b; i <= e; ++i)
    m *= xs[i];
  out.push_back(m);
  out.append(xs.begin() + e + 1, xs.end());
  return c.one(out, x->dtype);
}

namespace {

/// An op whose argument `name` (a shape, axes or paddings) is a tensor node:
/// its values, and so the output shape, are known only at run time; the
/// dtype is the first operand's.
std::optional<Types> runtimeShaped(const ShapeContext &c, llvm::StringRef name) {
  auto a = c.arg(name);
  if (!a || !a->node())
    return std::nullopt;
  auto x = c.first();
  return c.one(std::nullopt, x ? x->dtype : std::nullopt);
}

Types reshapeShape(const ShapeContext &c, const std::optional<Operand> &x,
                   std::vector<int64_t> target) {
  if (!x || !x->shape)
    return std::nullopt;
  int64_t n = shapeNumel(*x->shape), known = 1, infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      if (infer >= 0)
        c.fail("at most one dimension may be -1");
      infer = int64_t(i);
    } else if (target[i] < 0) {
      c.fail(fmt::format("invalid target dimension {}", target[i]));
    } else {
      known *= target[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || n % known)
      c.fail(fmt::format("cannot reshape {} to {}", shapeStr(*x->shape),
                         shapeStr(target)));
    target[infer] = n / known;
  } else if (known != n) {
    c.fail(fmt::format("cannot reshape {} ({} elements) to {}",
                       shapeStr(*x->shape), n, shapeStr(target)));
  }
  return c.one(Shape(target.begin(), target.end()), x->dtype);
}

/// The constant ints of a method's arguments after its receiver, flattened
/// (`x.reshape(2, 3)`, `x.reshape((2, 3))`); nullopt when one is not.
/// `constOnly` also rejects arguments that hold nodes before reading them.
std::optional<std::vector<int64_t>> methodInts(const ShapeContext &c,
                                               bool constOnly) {
  std::vector<int64_t> v;
  const Expr &e = c.expr();
  for (size_t i = 1; i < e.numArgs(); ++i) {
    ArgRef a = e.arg(i);
    auto ints = constOnly && a.def.numLeaves() ? std::nullopt : intsOf(a.def);
    if (!ints)
      return std::nullopt;
    v.insert(v.end(), ints->begin(), ints->end());
  }
  return v;
}

Types pad(const ShapeContext &c, OpKind) {
  if (auto r = runtimeShaped(c, "pad_width"))
    return *r;
  auto x = c.operand(c.arg("src"));
  auto pw = c.constArg("pad_width");
  if (!x || !x->shape || !pw)
    return std::nullopt;
  Shape out = *x->shape;
  if (pw->numChildren() != out.size())
    c.fail(
        fmt::format("pad_width {} needs one (before, after) pair per dim of {}",
                    pw->str(), shapeStr(out)));
  for (size_t i = 0; i < out.size(); ++i) {
    auto pr = intsOf(pw->child(i));
    if (!pr || pr->size() != 2)
      return std::nullopt;
    out[i] += (*pr)[0] + (*pr)[1];
  }
  return c.one(out, x->dtype);
}

Types reshape(const ShapeContext &c, OpKind) {
  if (auto r = runtimeShaped(c, "target_shape"))
    return *r;
  auto t = c.constArg("target_shape");
  auto v = t ? intsOf(*t) : std::nullopt;
  return v ? reshapeShape(c, c.first(), *v) : std::nullopt;
}

/// x.reshape(2, 3) or x.reshape((2, 3)).
Types reshapeMethod(const ShapeContext &c, OpKind) {
  auto target = methodInts(c, true);
  if (!target)
    return std::nullopt;
  return reshapeShape(c, c.first(), *target);
}

Types flatten(const ShapeContext &c, OpKind) {
  auto s = c.constArg("start_axis"), en = c.constArg("end_axis");
  auto si = s ? intOf(*s) : std::nullopt, ei = en ? intOf(*en) : std::nullopt;
  if (!si || !ei)
    return std::nullopt;
  return flattenShape(c, c.first(), *si, *ei);
}

/// x.flatten(): every dim merged into one.
Types flattenMethod(const ShapeContext &c, OpKind) {
  auto x = c.first();
  if (!x || !x->shape)
    return std::nullopt;
  return c.one(Shape{shapeNumel(*x->shape)}, x->dtype);
}

/// transpose(x, pattern) and x.transpose(*pattern).
Types transpose(const ShapeContext &c, OpKind k) {
  auto x = c.first();
  std::optional<std::vector<int64_t>> perm;
  if (k == OpKind::Transpose) {
    auto p = c.constArg("pattern");
    perm = p ? intsOf(*p) : std::nullopt;
  } else {
    perm = methodInts(c, false);
    if (!perm)
      return std::nullopt;
  }
  if (!x || !x->shape || !perm)
    return std::nullopt;
  const Shape &xs = *x->shape;
  if (perm->size() != xs.size())
    c.fail(fmt::format("pattern {} does not match rank of {}", shapeStr(*perm),
                       shapeStr(xs)));
  Shape out;
  std::vector<bool> seen(xs.size(), false);
  for (int64_t p : *perm) {
    int64_t a = c.normAxis(p, xs.size());
    if (seen[a])
      c.fail(fmt::format("pattern {} repeats axis {}", shapeStr(*perm), p));
    seen[a] = true;
    out.push_back(xs[a]);
  }
  return c.one(out, x->dtype);
}

/// broadcast_to(x, shape) and x._broadcast(*shape).
Types broadcastTo(const ShapeContext &c, OpKind k) {
  if (auto r = runtimeShaped(c, "shape"))
    return *r;
  auto x = c.first();
  std::optional<std::vector<int64_t>> v;
  if (k == OpKind::MBroadcast) {
    v = methodInts(c, true);
  } else if (auto s = c.constArg("shape")) {
    v = intsOf(*s);
  }
  if (!x || !x->shape || !v)
    return std::nullopt;
  auto b = broadcastShapes(*x->shape, *v);
  if (!b || llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(*v))
    c.fail(fmt::format("cannot broadcast {} to {}", shapeStr(*x->shape),
                       shapeStr(*v)));
  return c.one(*b, x->dtype);
}

/// concat (sizes add up along axis) and stack (a new axis of the count).
Types concatOrStack(const ShapeContext &c, OpKind k) {
  auto xs = c.listOperands("inps");
  auto ax = c.constArg("axis");
  auto a = ax ? intOf(*ax) : std::nullopt;
  if (!xs || !a)
    return std::nullopt;
  Shape out = *(*xs)[0].shape;
  bool stack = k == OpKind::Stack;
  int64_t axis = c.normAxis(*a, out.size() + (stack ? 1 : 0));
  for (size_t i = 1; i < xs->size(); ++i) {
    const Shape &s = *(*xs)[i].shape;
    bool ok = s.size() == out.size();
    for (size_t d = 0; ok && d < s.size(); ++d)
      ok = (stack || int64_t(d) != axis) ? s[d] == (*xs)[0].shape->data()[d]
                                         : true;
    if (!ok)
      c.fail(fmt::format("input {} does not match {} along the other axes",
                         shapeStr(s), shapeStr(*(*xs)[0].shape)));
    if (!stack)
      out[axis] += s[axis];
  }
  if (stack)
    out.insert(out.begin() + axis, int64_t(xs->size()));
  return c.one(out, (*xs)[0].dtype);
}

/// split into n equal parts or at increasing split points: one output each.
Types split(const ShapeContext &c, OpKind) {
  auto x = c.first();

  auto ns = c.constArg("nsplits_or_sections");
  auto ax = c.constArg("axis");
  auto a = ax ? intOf(*ax) : std::nullopt;
  if (!x || !x->shape || !ns || !a)
    return std::nullopt;
  Shape xs = *x->shape;
  int64_t axis = c.normAxis(*a, xs.size());
  std::vector<int64_t> sizes;
  if (auto n = intOf(*ns)) {
    if (*n <= 0 || xs[axis] % *n)
      c.fail(fmt::format("cannot split dim {} of size {} into {} equal parts",
                         axis, xs[axis], *n));
    sizes.assign(size_t(*n), xs[axis] / *n);
  } else if (auto sec = intsOf(*ns)) {
    int64_t prev = 0;
    for (int64_t s : *sec) {
      if (s < prev || s > xs[axis])
        c.fail(fmt::format("split points {} must be increasing within {}",
                           shapeStr(*sec), xs[axis]));
      sizes.push_back(s - prev);
      prev = s;
    }
    sizes.push_back(xs[axis] - prev);
  } else {
    return std::nullopt;
  }
  TensorTypes out;
  for (int64_t s : sizes) {
    Shape o = xs;
    o[axis] = s;
    out.push_back(TensorType{o, x->dtype});
  }
  return out;
}

/// squeeze the given axes (each of size 1), or every axis of size 1.
Types squeeze(const ShapeContext &c, OpKind) {
  if (auto r = runtimeShaped(c, "axis"))
    return *r;
  auto x = c.first();
  auto ax = c.constArg("axis");
  if (!x || !x->shape || !ax)
    return std::nullopt;
  const Shape &xs = *x->shape;
  std::vector<bool> drop(xs.size(), false);
  if (isNoneDef(*ax)) {
    for (size_t i = 0; i < xs.size(); ++i)
      drop[i] = xs[i] == 1;
  } else if (auto axes = intsOf(*ax)) {
    for (int64_t a : *axes) {
      int64_t n = c.normAxis(a, xs.size());
      if (xs[n] != 1)
        c.fail(fmt::format("cannot squeeze axis {} of {}: its size is not 1", a,
                           shapeStr(xs)));
      drop[n] = true;
    }
  } else {
    return std::nullopt;
  }
  Shape out;
  for (size_t i = 0; i < xs.size(); ++i)
    if (!drop[i])
      out.push_back(xs[i]);
  return c.one(out, x->dtype);
}

/// expand_dims: new axes of size 1 at the given positions of the result.
Types expandDims(const ShapeContext &c, OpKind) {
  if (auto r = runtimeShaped(c, "axis"))
    return *r;
  auto x = c.first();
  auto ax = c.constArg("axis");
  auto axes = ax ? intsOf(*ax) : std::nullopt;
  if (!x || !x->shape || !axes)
    return std::nullopt;
  size_t rank = x->shape->size() + axes->size();
  std::vector<bool> isNew(rank, false);
  for (int64_t a : *axes)
    isNew[c.normAxis(a, rank)] = true;
  Shape out;
  size_t j = 0;
  for (size_t i = 0; i < rank; ++i)
    out.push_back(isNew[i] ? 1 : (*x->shape)[j++]);
  return c.one(out, x->dtype);
}

/// GetVarShape(x): the rank of x's shape, int32.
Types getVarShape(const ShapeContext &c, OpKind) {
  const Expr &e = c.expr();
  if (e.numInputs() == 1)
    if (auto *t = llvm::dyn_cast<TensorNode>(e.input(0)); t && t->shape())
      return c.one(Shape{int64_t(t->shape()->size())}, DType::Int32);
  return std::nullopt;
}

} // namespace

void registerShapeShapeRules(ShapeRuleTable &t) {
  t.add("shape", {OpKind::Pad}, pad);
  t.add("shape", {OpKind::Reshape}, reshape);
  t.add("shape", {OpKind::MReshape}, reshapeMethod);
  t.add("shape", {OpKind::Flatten}, flatten);
  t.add("shape", {OpKind::MFlatten}, flattenMethod);
  t.add("shape", {OpKind::Transpose, OpKind::MTranspose}, transpose);
  t.add("shape", {OpKind::BroadcastTo, OpKind::MBroadcast}, broadcastTo);
  t.add("shape", {OpKind::Concat, OpKind::Stack}, concatOrStack);
  t.add("shape", {OpKind::Split}, split);
  t.add("shape", {OpKind::Squeeze}, squeeze);
  t.add("shape", {OpKind::ExpandDims}, expandDims);
  t.add("shape", {OpKind::GetVarShape}, getVarShape);
}

} // namespace tmg::shapes
