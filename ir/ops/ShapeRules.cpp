//===- ShapeRules.cpp - What op shape rules are written with --------------===//
//
// The ShapeContext accessors every family's shape rules use (operands,
// constant arguments, failures), the TreeDef and dtype helpers they share,
// and the window arithmetic common to the conv and pool families.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include <algorithm>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Module.h"

namespace tmg::shapes {

std::optional<int64_t> intOf(const TreeDef &t) {
  if (t.isConst() && t.value().isInt())
    return t.value().getInt();
  return std::nullopt;
}

std::optional<std::vector<int64_t>> intsOf(const TreeDef &t) {
  if (auto i = intOf(t))
    return std::vector<int64_t>{*i};
  if (t.kind() != TreeDef::Kind::Tuple && t.kind() != TreeDef::Kind::List)
    return std::nullopt;
  std::vector<int64_t> out;
  for (size_t i = 0; i < t.numChildren(); ++i) {
    auto v = intOf(t.child(i));
    if (!v)
      return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::string intsStr(llvm::ArrayRef<int64_t> v) {
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

bool isNoneDef(const TreeDef &t) { return t.isConst() && t.value().isNone(); }

std::optional<std::pair<int64_t, int64_t>> pairOf(const TreeDef &t) {
  auto v = intsOf(t);
  if (!v || v->empty() || v->size() > 2)
    return std::nullopt;
  return std::make_pair((*v)[0], v->size() == 2 ? (*v)[1] : (*v)[0]);
}

DType promote(const Operand &a, const Operand &b) {
  if (a.weak && !b.weak)
    return isFloat(*a.dtype) && !isFloat(*b.dtype) ? DType::Float32 : *b.dtype;
  if (b.weak && !a.weak)
    return isFloat(*b.dtype) && !isFloat(*a.dtype) ? DType::Float32 : *a.dtype;
  return promoteTypes(*a.dtype, *b.dtype);
}

//===----------------------------------------------------------------------===//
// ShapeContext
//===----------------------------------------------------------------------===//

void ShapeContext::fail(const std::string &msg) const {
  raiseAt(Location::atExpr(e_.id()), "{}: {}", name_.str(), msg);
}

std::optional<Operand> ShapeContext::operand(const Node *n) const {
  auto *t = llvm::dyn_cast<TensorNode>(n);
  if (!t)
    return std::nullopt;
  Operand o;
  if (symbolic_ || t->staticShape())
    o.shape = t->shape();
  if (t->hasDType())
    o.dtype = t->dtype();
  return o;
}

std::optional<Operand>
ShapeContext::operand(const std::optional<ArgRef> &a) const {
  if (!a)
    return std::nullopt;
  if (Node *n = a->node())
    return operand(n);
  if (!a->def.isConst())
    return std::nullopt;
  const Scalar &s = a->def.value();
  Operand o;
  o.shape = Shape{};
  o.weak = true;
  if (s.isInt())
    o.dtype = DType::Int64;
  else if (s.isFloat())
    o.dtype = DType::Float32;
  else if (s.isBool())
    o.dtype = DType::Bool;
  else
    return std::nullopt;
  return o;
}

/// The common case of first(), asked for every created elementwise expr:
/// the first positional argument is a node and no keyword is given, so it
/// is input 0 (the receiver of a method is its first positional argument
/// too), found without binding names or copying TreeDefs. nullptr when the
/// call is not of that form.
const Node *ShapeContext::firstPositionalNode() const {
  if (const auto &ad = e_.argDef(); ad && ad->kind() == TreeDef::Kind::Tuple &&
                                    ad->numChildren() == 2 &&
                                    e_.numInputs() != 0) {
    const TreeDef &pos = ad->child(0), &kw = ad->child(1);
    if (kw.numChildren() == 0 && pos.numChildren() != 0 &&
        pos.child(0).isLeaf() && !llvm::isa<ModuleNode>(e_.input(0)))
      return e_.input(0);
  }
  return nullptr;
}

std::optional<Operand> ShapeContext::first() const {
  if (const Node *n = firstPositionalNode())
    return operand(n);
  if (auto a = arg("self"))
    return operand(a);
  if (e_.numArgs() == 0) {
    // The first parameter passed by keyword, when the op has one.
    const OpSchema *s = nullptr;
    if (auto *cf = llvm::dyn_cast<CallFunction>(&e_))
      s = &cf->func();
    if (!s || s->positionalParams().empty())
      return std::nullopt;
    auto a = arg(s->params()[s->positionalParams()[0]].name);
    return operand(a);
  }
  return operand(e_.arg(0));
}

std::optional<TreeDef> ShapeContext::constArg(llvm::StringRef name) const {
  auto a = arg(name);
  if (!a || a->def.numLeaves() != 0)
    return std::nullopt;
  return a->def;
}

Types ShapeContext::same() const {
  // The type of a tensor first argument, copied once, straight into the
  // result (every created elementwise expr comes here).
  if (auto *t = llvm::dyn_cast_or_null<TensorNode>(firstPositionalNode())) {
    Types r(std::in_place);
    TensorType &out = r->emplace_back();
    if (const std::optional<Shape> &s = t->shape(); s && (symbolic_ || t->staticShape()))
      out.shape.emplace(s->begin(), s->end());
    else
      out.shape.reset();
    out.dtype = t->hasDType() ? std::optional<DType>(t->dtype()) : std::nullopt;
    return r;
  }
  auto x = first();
  if (!x)
    return std::nullopt;
  return one(std::move(x->shape), x->dtype);
}

Types ShapeContext::binary(bool toBool, bool toFloat) const {
  std::optional<Operand> a, b;
  if (auto self = arg("self")) {
    a = operand(self);
    b = operand(arg("value"));
  } else {
    a = operand(arg("x"));
    b = operand(arg("y"));
  }
  if (!a || !b)
    return std::nullopt;
  std::optional<Shape> s;
  if (a->shape && b->shape) {
    s = broadcastShapes(*a->shape, *b->shape);
    if (!s)
      fail(fmt::format("shapes {} and {} do not broadcast", dim::dimsStr(*a->shape),
                       dim::dimsStr(*b->shape)));
  }
  std::optional<DType> t;
  if (toBool)
    t = DType::Bool;
  else if (a->dtype && b->dtype) {
    t = promote(*a, *b);
    if (toFloat && !isFloat(*t))
      t = DType::Float32;
  }
  return one(s, t);
}

int64_t ShapeContext::normAxis(int64_t a, size_t rank) const {
  int64_t r = int64_t(rank);
  if (a < -r || a >= r)
    fail(fmt::format("axis {} is out of range for rank {}", a, rank));
  return a < 0 ? a + r : a;
}

int64_t ShapeContext::window(int64_t in, int64_t k, int64_t s, int64_t p,
                             int64_t d, const char *what) const {
  if (s <= 0 || d <= 0 || k <= 0 || p < 0)
    fail(fmt::format("{}: kernel {}, stride {}, dilation {} and padding {} "
                     "must be positive (padding non-negative)",
                     what, k, s, d, p));
  int64_t eff = d * (k - 1) + 1;
  if (in >= 0 && in + 2 * p < eff)
    fail(fmt::format("{}: input size {} with padding {} is smaller than the "
                     "kernel extent {}",
                     what, in, p, eff));
  return dim::add(dim::floorDiv(dim::sub(dim::add(in, 2 * p), eff), s), 1);
}

std::optional<std::vector<Operand>>
ShapeContext::listOperands(llvm::StringRef name) const {
  auto a = arg(name);
  if (!a || (a->def.kind() != TreeDef::Kind::List &&
             a->def.kind() != TreeDef::Kind::Tuple))
    return std::nullopt;
  std::vector<Operand> out;
  size_t leaf = a->firstLeaf;
  for (size_t i = 0; i < a->def.numChildren(); ++i) {
    if (!a->def.child(i).isLeaf())
      return std::nullopt;
    auto *t = llvm::dyn_cast<TensorNode>(e_.input(leaf++));
    if (!t || !t->shape() || (!symbolic_ && !t->staticShape()))
      return std::nullopt;
    Operand o;
    o.shape = t->shape();
    if (t->hasDType())
      o.dtype = t->dtype();
    out.push_back(o);
  }
  if (out.empty())
    fail("needs at least one tensor");
  return out;
}

//===----------------------------------------------------------------------===//
// N-d window ops
//===----------------------------------------------------------------------===//

Types windowNdShape(const ShapeContext &c, OpKind k) {
  auto x = c.first();
  if (!x || !x->shape || x->shape->size() < 3)
    return std::nullopt;
  size_t nd = x->shape->size() - 2;
  bool conv = k == OpKind::ConvNd || k == OpKind::ConvTransposeNd;
  std::vector<int64_t> ks;
  std::optional<Operand> w;
  if (conv) {
    w = c.operand(c.arg("weight"));
    if (!w || !w->shape || w->shape->size() != nd + 2)
      return std::nullopt;
    if (!isStaticShape(*w->shape)) // a weight computed at run time
      return c.one(std::nullopt, x->dtype);
    ks.assign(w->shape->begin() + 2, w->shape->end());
  } else {
    auto kk = c.constArg("kernel_size");
    auto v = kk ? intsOf(*kk) : std::nullopt;
    if (!v)
      return std::nullopt;
    ks = *v;
  }
  auto expand = [&](const char *name, size_t n,
                    int64_t dflt) -> std::optional<std::vector<int64_t>> {
    auto t = c.constArg(name);
    if (!t || isNoneDef(*t))
      return std::vector<int64_t>(n, dflt);
    auto v = intsOf(*t);
    if (!v)
      return std::nullopt;
    if (v->size() == 1)
      return std::vector<int64_t>(n, (*v)[0]);
    return v;
  };
  auto st = k == OpKind::ConvNd || k == OpKind::ConvTransposeNd
                ? expand("stride", nd, 1)
            : c.constArg("stride") && !isNoneDef(*c.constArg("stride"))
                ? expand("stride", nd, 1)
                : std::optional(ks);
  auto pd = expand("padding", 2 * nd, 0);
  auto dl = k == OpKind::AvgPoolNd ? std::optional(std::vector<int64_t>(nd, 1))
                                   : expand("dilation", nd, 1);
  if (!st || !pd || !dl || ks.size() != nd || st->size() != nd ||
      dl->size() != nd)
    return std::nullopt;
  if (pd->size() == nd)
    pd->insert(pd->end(), pd->begin(), pd->end());
  if (pd->size() != 2 * nd)
    return std::nullopt;
  bool ceil = false;
  if (auto cm = c.constArg("ceil_mode");
      cm && cm->isConst() && cm->value().isBool())
    ceil = cm->value().getBool();
  Shape out{(*x->shape)[0], (*x->shape)[1]};
  if (conv) {
    auto g = c.constArg("groups");
    auto gi = g ? intOf(*g) : std::nullopt;
    if (!gi)
      return std::nullopt;
    out[1] = k == OpKind::ConvNd ? (*w->shape)[0] : dim::mul((*w->shape)[1], *gi);
  }
  std::vector<int64_t> op(nd, 0);
  if (k == OpKind::ConvTransposeNd) {
    auto o = expand("output_padding", nd, 0);
    if (!o || o->size() != nd)
      return std::nullopt;
    op = *o;
  }
  for (size_t i = 0; i < nd; ++i) {
    int64_t in = (*x->shape)[i + 2], s = (*st)[i], d = (*dl)[i];
    int64_t pb = (*pd)[i], pe = (*pd)[i + nd];
    if (k == OpKind::ConvTransposeNd) {
      out.push_back(dim::offset(dim::mul(dim::offset(in, -1), s),
                                -pb - pe + d * (ks[i] - 1) + op[i] + 1));
      continue;
    }
    if (s < 1 || (isKnownDim(in) && in + pb + pe < d * (ks[i] - 1) + 1))
      c.fail(fmt::format("window {} does not fit input {}", ks[i],
                         dim::dimsStr(*x->shape)));
    if (!isKnownDim(in)) {
      // A ceil-mode window that would start in the end padding is dropped:
      // whether it does depends on the size, so the dim stays unknown.
      int64_t span = dim::offset(in, pb + pe - (d * (ks[i] - 1) + 1));
      out.push_back(ceil ? kUnknownDim : dim::offset(dim::floorDiv(span, s), 1));
      continue;
    }
    int64_t span = in + pb + pe - (d * (ks[i] - 1) + 1);
    int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
    if (ceil && (o - 1) * s >= in + pb)
      --o;
    out.push_back(o);
  }
  return c.one(out, x->dtype);
}

} // namespace tmg::shapes
