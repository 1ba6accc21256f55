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
  out.push_back(dim::product(llvm::ArrayRef<int64_t>(xs).slice(b, e - b + 1)));
  out.append(xs.begin() + e + 1, xs.end());
  return c.one(out, x->dtype);
}

namespace {

/// How the rank of an output shaped at run time is known.
enum class RuntimeRank {
  None,      // not at all (squeeze)
  OfInput,   // the input's (pad)
  OfShapeArg // the length of the 1-d shape argument (reshape, broadcast_to)
};

/// An op whose argument `name` (a shape, axes or paddings) is a tensor node:
/// its values, and so the output dims, are known only at run time; the
/// dtype is the first operand's and the rank is kept where `rank` says.
std::optional<Types> runtimeShaped(const ShapeContext &c, llvm::StringRef name,
                                   RuntimeRank rank = RuntimeRank::None) {
  auto a = c.arg(name);
  if (!a || !a->node())
    return std::nullopt;
  auto x = c.first();
  std::optional<Shape> s;
  if (rank == RuntimeRank::OfInput && x && x->shape)
    s = Shape(x->shape->size(), kUnknownDim);
  if (rank == RuntimeRank::OfShapeArg)
    if (auto t = c.operand(a->node()); t && t->shape && t->shape->size() == 1 &&
                                       isKnownDim((*t->shape)[0]))
      s = Shape(size_t((*t->shape)[0]), kUnknownDim);
  return c.one(std::move(s), x ? x->dtype : std::nullopt);
}

/// The dim a traced integer node stands for (`y.shape[i]`, or any scalar
/// shapeValue derives); unknown otherwise.
int64_t dimOfNode(const Node *n) {
  auto v = shapeValue(n);
  if (!v || v->size() != 1)
    return kUnknownDim;
  const SymInt &d = (*v)[0];
  return d.kind == SymInt::Sym || (d.kind == SymInt::Int && d.v >= 0) ? d.v : kUnknownDim;
}

/// The target of a reshape or broadcast given as a 1-d integer node, as far
/// as shapeValue knows its elements: nullopt when it knows none.
std::optional<SymInts> nodeTarget(const ShapeContext &c, llvm::StringRef name) {
  auto a = c.arg(name);
  if (!a || !a->node())
    return std::nullopt;
  auto v = shapeValue(a->node());
  if (!v || llvm::all_of(*v, [](const SymInt &s) { return s.kind == SymInt::Unknown; }))
    return std::nullopt;
  return v;
}

/// A tuple argument of ints and traced integer nodes (`(x.shape[0], -1)`):
/// each entry's dim, with the position of a -1 in `inferAt`; nullopt when
/// `name` is not such a tuple.
std::optional<Shape> mixedTarget(const ShapeContext &c, llvm::StringRef name,
                                 std::optional<size_t> &inferAt) {
  auto a = c.arg(name);
  if (!a || a->node() || !a->def.numLeaves() ||
      (a->def.kind() != TreeDef::Kind::Tuple && a->def.kind() != TreeDef::Kind::List))
    return std::nullopt;
  Shape out;
  size_t leaf = a->firstLeaf;
  for (size_t i = 0; i < a->def.numChildren(); ++i) {
    const TreeDef &ch = a->def.child(i);
    if (ch.isLeaf()) {
      out.push_back(dimOfNode(c.expr().input(leaf++)));
      continue;
    }
    auto v = intOf(ch);
    if (!v || *v < -1)
      return std::nullopt;
    if (*v == -1) {
      if (inferAt)
        c.fail("at most one dimension may be -1");
      inferAt = i;
    }
    out.push_back(*v);
  }
  return out;
}

/// Reshape to a tuple of ints and traced dims.
Types reshapeMixed(const ShapeContext &c, const std::optional<Operand> &x, const char *name) {
  std::optional<size_t> at;
  auto t = mixedTarget(c, name, at);
  if (!t || !x)
    return std::nullopt;
  if (at) {
    Shape others = *t;
    others.erase(others.begin() + long(*at));
    (*t)[*at] = x->shape ? dim::exactDiv(dim::product(*x->shape), dim::product(others))
                               .value_or(kUnknownDim)
                         : kUnknownDim;
  }
  return c.one(std::move(*t), x->dtype);
}

Types reshapeShape(const ShapeContext &c, const std::optional<Operand> &x,
                   std::vector<int64_t> target) {
  if (!x || !x->shape)
    return std::nullopt;
  int64_t known = 1, infer = -1;
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
  if (!isStaticShape(*x->shape)) {
    // The -1 dim is the element count over the others, when that division
    // is exact as an expression (N*197*768 / 768 = N*197).
    if (infer >= 0)
      target[infer] = known == 0 ? kUnknownDim
                                 : dim::exactDiv(dim::product(*x->shape), known)
                                       .value_or(kUnknownDim);
    return c.one(Shape(target.begin(), target.end()), x->dtype);
  }
  int64_t n = shapeNumel(*x->shape);
  if (infer >= 0) {
    if (known == 0 || n % known)
      c.fail(fmt::format("cannot reshape {} to {}", dim::dimsStr(*x->shape),
                         intsStr(target)));
    target[infer] = n / known;
  } else if (known != n) {
    c.fail(fmt::format("cannot reshape {} ({} elements) to {}",
                       dim::dimsStr(*x->shape), n, intsStr(target)));
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
  if (auto r = runtimeShaped(c, "pad_width", RuntimeRank::OfInput))
    return *r;
  auto x = c.operand(c.arg("src"));
  auto pw = c.constArg("pad_width");
  if (!x || !x->shape || !pw)
    return std::nullopt;
  Shape out = *x->shape;
  if (pw->numChildren() != out.size())
    c.fail(
        fmt::format("pad_width {} needs one (before, after) pair per dim of {}",
                    pw->str(), dim::dimsStr(out)));
  for (size_t i = 0; i < out.size(); ++i) {
    auto pr = intsOf(pw->child(i));
    if (!pr || pr->size() != 2)
      return std::nullopt;
    out[i] = dim::offset(out[i], (*pr)[0] + (*pr)[1]);
  }
  return c.one(out, x->dtype);
}

/// Reshape to a target computed at run time whose elements shapeValue
/// knows in part: known ints, symbols, a -1 inferred where the division is
/// exact, unknown dims elsewhere.
Types reshapeToValue(const ShapeContext &c, const std::optional<Operand> &x,
                     const SymInts &v) {
  if (!x)
    return std::nullopt;
  if (llvm::all_of(v, [](const SymInt &s) { return s.kind == SymInt::Int; })) {
    std::vector<int64_t> ints;
    for (const SymInt &s : v)
      ints.push_back(s.v);
    return reshapeShape(c, x, std::move(ints));
  }
  Shape out;
  std::optional<size_t> infer;
  bool othersKnown = true;
  for (size_t i = 0; i < v.size(); ++i) {
    const SymInt &s = v[i];
    if (s.kind == SymInt::Int && s.v == -1) {
      if (infer)
        c.fail("at most one dimension may be -1");
      infer = i;
      out.push_back(kUnknownDim);
    } else if (s.kind == SymInt::Int && s.v < -1) {
      c.fail(fmt::format("invalid target dimension {}", s.v));
    } else if (s.kind == SymInt::Unknown) {
      othersKnown = false; // may be the -1 at run time
      out.push_back(kUnknownDim);
    } else {
      out.push_back(s.v);
    }
  }
  if (infer && othersKnown && x->shape) {
    Shape others = out;
    others.erase(others.begin() + long(*infer));
    out[*infer] = dim::exactDiv(dim::product(*x->shape), dim::product(others))
                      .value_or(kUnknownDim);
  }
  return c.one(std::move(out), x->dtype);
}

Types reshape(const ShapeContext &c, OpKind) {
  if (auto v = nodeTarget(c, "target_shape"))
    return reshapeToValue(c, c.first(), *v);
  if (auto r = runtimeShaped(c, "target_shape", RuntimeRank::OfShapeArg))
    return *r;
  if (auto r = reshapeMixed(c, c.first(), "target_shape"))
    return r;
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
  return c.one(Shape{dim::product(*x->shape)}, x->dtype);
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
    c.fail(fmt::format("pattern {} does not match rank of {}", intsStr(*perm),
                       dim::dimsStr(xs)));
  Shape out;
  std::vector<bool> seen(xs.size(), false);
  for (int64_t p : *perm) {
    int64_t a = c.normAxis(p, xs.size());
    if (seen[a])
      c.fail(fmt::format("pattern {} repeats axis {}", intsStr(*perm), p));
    seen[a] = true;
    out.push_back(xs[a]);
  }
  return c.one(out, x->dtype);
}

/// broadcast_to(x, shape) and x._broadcast(*shape).
Types broadcastTo(const ShapeContext &c, OpKind k) {
  if (auto v = k == OpKind::BroadcastTo ? nodeTarget(c, "shape") : std::nullopt) {
    auto x = c.first();
    if (!x)
      return std::nullopt;
    // An unknown target dim is still the input's where that is a size
    // other than 1 (anything else would not broadcast).
    size_t n = v->size(), r = x->shape ? x->shape->size() : 0;
    Shape out;
    for (size_t i = 0; i < n; ++i) {
      const SymInt &s = (*v)[i];
      int64_t xd = x->shape && i + r >= n ? (*x->shape)[i + r - n] : kUnknownDim;
      if (s.kind == SymInt::Sym || (s.kind == SymInt::Int && s.v >= 0))
        out.push_back(s.v);
      else
        out.push_back(isKnownDim(xd) && xd != 1 ? xd : kUnknownDim);
    }
    return c.one(std::move(out), x->dtype);
  }
  if (auto r = runtimeShaped(c, "shape", RuntimeRank::OfShapeArg))
    return *r;
  std::optional<size_t> at;
  if (auto t = k == OpKind::BroadcastTo ? mixedTarget(c, "shape", at) : std::nullopt) {
    auto x0 = c.first();
    if (at)
      c.fail("a broadcast target cannot hold -1");
    return x0 ? c.one(std::move(*t), x0->dtype) : std::nullopt;
  }
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
  bool fits = b && b->size() == v->size();
  for (size_t i = 0; fits && i < v->size(); ++i)
    fits = (*b)[i] == (*v)[i] || !isKnownDim((*b)[i]); // a symbol may be 1
  if (!fits)
    c.fail(fmt::format("cannot broadcast {} to {}", dim::dimsStr(*x->shape),
                       intsStr(*v)));
  return c.one(Shape(v->begin(), v->end()), x->dtype);
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
    for (size_t d = 0; ok && d < s.size(); ++d) {
      if (!stack && int64_t(d) == axis)
        continue;
      int64_t a = s[d], b = out[d];
      ok = a == b || a < 0 || b < 0;
      if (ok && a != b) // a symbol and a size, or two symbols: keep what is surest
        out[d] = b >= 0 ? b : a >= 0 ? a : kUnknownDim;
    }
    if (!ok)
      c.fail(fmt::format("input {} does not match {} along the other axes",
                         dim::dimsStr(s), dim::dimsStr(*(*xs)[0].shape)));
    if (!stack)
      out[axis] = dim::add(out[axis], s[axis]);
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
  if (auto n = intOf(*ns); n && *n > 0 && !isKnownDim(xs[axis])) {
    sizes.assign(size_t(*n), dim::exactDiv(xs[axis], *n).value_or(kUnknownDim));
  } else if (auto sec = intsOf(*ns); sec && !isKnownDim(xs[axis]) && !n) {
    int64_t prev = 0;
    for (int64_t s : *sec) {
      if (s < prev)
        c.fail(fmt::format("split points {} must be increasing", intsStr(*sec)));
      sizes.push_back(s - prev);
      prev = s;
    }
    sizes.push_back(dim::offset(xs[axis], -prev));
  } else if (n) {
    if (*n <= 0 || xs[axis] % *n)
      c.fail(fmt::format("cannot split dim {} of size {} into {} equal parts",
                         axis, xs[axis], *n));
    sizes.assign(size_t(*n), xs[axis] / *n);
  } else if (auto sec = intsOf(*ns)) {
    int64_t prev = 0;
    for (int64_t s : *sec) {
      if (s < prev || s > xs[axis])
        c.fail(fmt::format("split points {} must be increasing within {}",
                           intsStr(*sec), xs[axis]));
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
    if (!isStaticShape(xs)) // whether a symbol is 1 is known at run time
      return c.one(std::nullopt, x->dtype);
    for (size_t i = 0; i < xs.size(); ++i)
      drop[i] = xs[i] == 1;
  } else if (auto axes = intsOf(*ax)) {
    for (int64_t a : *axes) {
      int64_t n = c.normAxis(a, xs.size());
      if (isKnownDim(xs[n]) && xs[n] != 1)
        c.fail(fmt::format("cannot squeeze axis {} of {}: its size is not 1", a,
                           dim::dimsStr(xs)));
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
  t.add("shape", {OpKind::Pad}, symbolic(pad));
  t.add("shape", {OpKind::Reshape}, symbolic(reshape));
  t.add("shape", {OpKind::MReshape}, symbolic(reshapeMethod));
  t.add("shape", {OpKind::Flatten}, symbolic(flatten));
  t.add("shape", {OpKind::MFlatten}, symbolic(flattenMethod));
  t.add("shape", {OpKind::Transpose, OpKind::MTranspose}, symbolic(transpose));
  t.add("shape", {OpKind::BroadcastTo, OpKind::MBroadcast}, symbolic(broadcastTo));
  t.add("shape", {OpKind::Concat, OpKind::Stack}, symbolic(concatOrStack));
  t.add("shape", {OpKind::Split}, symbolic(split));
  t.add("shape", {OpKind::Squeeze}, symbolic(squeeze));
  t.add("shape", {OpKind::ExpandDims}, symbolic(expandDims));
  t.add("shape", {OpKind::GetVarShape}, symbolic(getVarShape));
}

} // namespace tmg::shapes
