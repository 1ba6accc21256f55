//===- ShapeValue.cpp - Values of shape-computing integer tensors ---------===//
//
// Exported models compute reshape and expand targets at run time from the
// shapes of other tensors: Shape -> Gather -> Unsqueeze -> Concat ->
// Reshape, with arithmetic (`c // heads`) and ONNX's "0 copies the input
// dim" written as Equal/Where. shapeValue() evaluates such a chain over
// symbolic dims, so the reshape's output keeps `(batch, seq, 3, 4, 8)`
// where the values are only known at run time. The evaluation looks at a
// bounded number of producing exprs per query, so inferring a graph stays
// linear in its size.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

#include <algorithm>
#include <cmath>

#include "tm/ir/IndexSpec.h"
#include "tm/ir/Node.h"

namespace tmg::shapes {

namespace {

/// Producing exprs one query may look at, and elements it tracks.
constexpr int kBudget = 64;
constexpr size_t kMaxElems = 64;

SymInt unknownInt() { return SymInt{}; }
SymInt intOfValue(int64_t v) { return SymInt{SymInt::Int, v}; }

/// A dim as an element: a size is an int, a symbol stays a symbol.
SymInt fromDim(int64_t d) {
  if (isKnownDim(d))
    return intOfValue(d);
  if (isSymbolicDim(d))
    return SymInt{SymInt::Sym, d};
  return unknownInt();
}

/// An element usable as a dim (a size >= 0 or a symbol).
std::optional<int64_t> asDim(const SymInt &s) {
  if ((s.kind == SymInt::Int && s.v >= 0) || s.kind == SymInt::Sym)
    return s.v;
  return std::nullopt;
}

SymInt addInts(const SymInt &a, const SymInt &b) {
  if (a.kind == SymInt::Int && b.kind == SymInt::Int) {
    int64_t r;
    return __builtin_add_overflow(a.v, b.v, &r) ? unknownInt() : intOfValue(r);
  }
  if (a.kind == SymInt::Sym && b.kind == SymInt::Int)
    return fromDim(dim::offset(a.v, b.v));
  if (b.kind == SymInt::Sym && a.kind == SymInt::Int)
    return fromDim(dim::offset(b.v, a.v));
  if (a.kind == SymInt::Sym && b.kind == SymInt::Sym)
    return fromDim(dim::add(a.v, b.v));
  return unknownInt();
}

SymInt subInts(const SymInt &a, const SymInt &b) {
  if (a.kind == SymInt::Int && b.kind == SymInt::Int) {
    int64_t r;
    return __builtin_sub_overflow(a.v, b.v, &r) ? unknownInt() : intOfValue(r);
  }
  if (a.kind == SymInt::Sym && b.kind == SymInt::Int && b.v != INT64_MIN)
    return fromDim(dim::offset(a.v, -b.v));
  auto da = asDim(a), db = asDim(b);
  return da && db ? fromDim(dim::sub(*da, *db)) : unknownInt();
}

SymInt mulInts(const SymInt &a, const SymInt &b) {
  if (a.kind == SymInt::Int && b.kind == SymInt::Int) {
    int64_t r;
    return __builtin_mul_overflow(a.v, b.v, &r) ? unknownInt() : intOfValue(r);
  }
  auto da = asDim(a), db = asDim(b);
  return da && db ? fromDim(dim::mul(*da, *db)) : unknownInt();
}

/// Python's floor division (the divisor a nonzero int; a symbol only over
/// a positive one).
SymInt floorDivInts(const SymInt &a, const SymInt &b) {
  if (b.kind != SymInt::Int || b.v == 0)
    return unknownInt();
  if (a.kind == SymInt::Int) {
    if (a.v == INT64_MIN && b.v == -1)
      return unknownInt();
    int64_t q = a.v / b.v;
    if ((a.v % b.v != 0) && ((a.v < 0) != (b.v < 0)))
      --q;
    return intOfValue(q);
  }
  if (a.kind == SymInt::Sym && b.v > 0)
    return fromDim(dim::floorDiv(a.v, b.v));
  return unknownInt();
}

/// 1, 0 or unknown. A dim is never negative, so it differs from every
/// negative int.
SymInt equalInts(const SymInt &a, const SymInt &b) {
  if (a.kind == SymInt::Unknown || b.kind == SymInt::Unknown)
    return unknownInt();
  if (a.kind == b.kind && a.v == b.v)
    return intOfValue(1);
  if (a.kind == SymInt::Int && b.kind == SymInt::Int)
    return intOfValue(0);
  const SymInt &i = a.kind == SymInt::Int ? a : b;
  return i.v < 0 ? intOfValue(0) : unknownInt();
}

/// The value of one integer tensor as far as it is known.
struct Value {
  SymInts elems;
  bool scalar = false; // rank 0 (else rank 1)
};

class Evaluator {
public:
  std::optional<Value> node(const Node *n);

private:
  std::optional<Value> expr(const Expr &e, const TensorNode &out);
  std::optional<Value> arg(const std::optional<ArgRef> &a);
  std::optional<Value> binary(const Expr &e, OpKind k);
  std::optional<Value> floorOfDivision(const Node *n);
  std::optional<Value> index(const Value &x, const IndexSpec &idx);
  std::optional<Value> take(const Value &x, const Value &idx);
  std::optional<Value> concat(const Expr &e);

  int budget_ = kBudget;
};

bool isIntegerLike(DType t) { return isInteger(t) || t == DType::Bool; }

/// Elementwise `f` with NumPy broadcasting of rank-0/1 values.
template <typename F>
std::optional<Value> zipWith(const Value &a, const Value &b, F f) {
  size_t n = std::max(a.elems.size(), b.elems.size());
  if ((a.elems.size() != n && a.elems.size() != 1) ||
      (b.elems.size() != n && b.elems.size() != 1))
    return std::nullopt;
  Value out;
  out.scalar = a.scalar && b.scalar;
  for (size_t i = 0; i < n; ++i)
    out.elems.push_back(f(a.elems[a.elems.size() == 1 ? 0 : i],
                          b.elems[b.elems.size() == 1 ? 0 : i]));
  return out;
}

std::optional<Value> Evaluator::arg(const std::optional<ArgRef> &a) {
  if (!a)
    return std::nullopt;
  if (Node *n = a->node())
    return node(n);
  if (auto i = intOf(a->def)) {
    Value v;
    v.scalar = true;
    v.elems.push_back(intOfValue(*i));
    return v;
  }
  if (a->def.isConst() && a->def.value().kind() == Scalar::Kind::Bool) {
    Value v;
    v.scalar = true;
    v.elems.push_back(intOfValue(a->def.value().getBool() ? 1 : 0));
    return v;
  }
  return std::nullopt;
}

std::optional<Value> Evaluator::node(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  if (!t || !t->expr() || --budget_ < 0)
    return std::nullopt;
  if (t->shape() && t->shape()->size() > 1)
    return std::nullopt;
  auto v = expr(*t->expr(), *t);
  if (!v && t->staticShape() && size_t(shapeNumel(*t->staticShape())) <= kMaxElems) {
    // Not derivable, but its length is known: unknown elements keep the
    // positions of the others (concat) known.
    v.emplace();
    v->elems.resize(size_t(shapeNumel(*t->staticShape())));
  }
  if (!v || v->elems.size() > kMaxElems)
    return std::nullopt;
  // The node's own shape, when known, says the rank (reshape, squeeze).
  if (t->shape())
    v->scalar = t->shape()->empty();
  if (v->scalar && v->elems.size() != 1)
    return std::nullopt;
  return v;
}

std::optional<Value> Evaluator::expr(const Expr &e, const TensorNode &out) {
  if (auto *k = llvm::dyn_cast<Constant>(&e)) {
    const Tensor &c = k->tensor();
    if (!k->isTensor() || !c.defined() || !isIntegerLike(c.dtype()) || c.rank() > 1 ||
        size_t(c.numel()) > kMaxElems)
      return std::nullopt;
    Value v;
    v.scalar = c.rank() == 0;
    for (int64_t i = 0; i < c.numel(); ++i) {
      double d = c.at(i);
      // Beyond 2^53 a double need not hold the int exactly.
      v.elems.push_back(std::fabs(d) < 9007199254740992.0 ? intOfValue(int64_t(d))
                                                          : unknownInt());
    }
    return v;
  }
  const OpSchema *op = e.opSchema();
  if (!op || e.numOutputs() != 1 || e.output(0) != &out)
    return std::nullopt;
  OpKind k = op->kind();
  switch (k) {
  case OpKind::GetVarShape: {
    auto *x = e.numInputs() == 1 ? llvm::dyn_cast<TensorNode>(e.input(0)) : nullptr;
    if (!x || !x->shape())
      return std::nullopt;
    Value v;
    for (int64_t d : *x->shape())
      v.elems.push_back(fromDim(d));
    return v;
  }
  case OpKind::MAstype: {
    if (!isIntegerLike(out.dtype()))
      return std::nullopt;
    const Node *x = e.input(0);
    auto *xt = llvm::dyn_cast<TensorNode>(x);
    if (xt && isFloat(xt->dtype()))
      return floorOfDivision(x); // a float to int cast truncates
    return node(x);
  }
  case OpKind::Floor:
    return floorOfDivision(e.input(0));
  case OpKind::ExpandDims:
  case OpKind::Squeeze:
  case OpKind::Flatten:
  case OpKind::Reshape:
  case OpKind::MReshape:
    return node(e.input(0));
  case OpKind::MGetItem: {
    auto idx = e.numArgs() == 2 ? decodeIndex(e.arg(1)) : std::nullopt;
    if (!idx || idx->size() != 1)
      return std::nullopt;
    auto x = node(e.input(0));
    return x ? index(*x, (*idx)[0]) : std::nullopt;
  }
  case OpKind::Take:
  case OpKind::Gather: {
    auto axis = e.namedArg("axis");
    if (!axis || intOf(axis->def).value_or(-1) != 0)
      return std::nullopt;
    auto x = arg(e.namedArg("inp"));
    auto idx = arg(e.namedArg(k == OpKind::Take ? "indices" : "index"));
    return x && idx ? take(*x, *idx) : std::nullopt;
  }
  case OpKind::Concat:
  case OpKind::Stack:
    return concat(e);
  case OpKind::Add:
  case OpKind::MAdd:
  case OpKind::Sub:
  case OpKind::MSub:
  case OpKind::Mul:
  case OpKind::MMul:
  case OpKind::FloorDiv:
  case OpKind::MFloorDiv:
  case OpKind::Equal:
    return binary(e, k);
  case OpKind::Where: {
    auto m = arg(e.namedArg("mask")), x = arg(e.namedArg("x")), y = arg(e.namedArg("y"));
    if (!m || !x || !y)
      return std::nullopt;
    size_t n = std::max({m->elems.size(), x->elems.size(), y->elems.size()});
    for (const Value *v : {&*m, &*x, &*y})
      if (v->elems.size() != n && v->elems.size() != 1)
        return std::nullopt;
    auto at = [](const Value &v, size_t i) { return v.elems[v.elems.size() == 1 ? 0 : i]; };
    Value r;
    r.scalar = m->scalar && x->scalar && y->scalar;
    for (size_t i = 0; i < n; ++i) {
      SymInt c = at(*m, i), a = at(*x, i), b = at(*y, i);
      // A known mask picks; an unknown one still gives the value both
      // branches agree on.
      if (c.kind == SymInt::Int)
        r.elems.push_back(c.v ? a : b);
      else
        r.elems.push_back(a.kind != SymInt::Unknown && a.kind == b.kind && a.v == b.v
                              ? a
                              : unknownInt());
    }
    return r;
  }
  case OpKind::Prod: {
    auto axis = e.namedArg("axis");
    if (!axis || !(isNoneDef(axis->def) || intOf(axis->def).value_or(1) == 0))
      return std::nullopt;
    auto x = node(e.input(0));
    if (!x)
      return std::nullopt;
    SymInt p = intOfValue(1);
    for (const SymInt &s : x->elems)
      p = mulInts(p, s);
    Value v;
    v.scalar = true;
    v.elems.push_back(p);
    return v;
  }
  default:
    return std::nullopt;
  }
}

std::optional<Value> Evaluator::binary(const Expr &e, OpKind k) {
  bool method = llvm::isa<CallMethod>(e);
  auto a = method ? arg(e.numArgs() ? std::optional<ArgRef>(e.arg(0)) : std::nullopt)
                  : arg(e.namedArg("x"));
  auto b = arg(e.namedArg(method ? "value" : "y"));
  if (!a || !b)
    return std::nullopt;
  switch (k) {
  case OpKind::Add:
  case OpKind::MAdd:
    return zipWith(*a, *b, addInts);
  case OpKind::Sub:
  case OpKind::MSub:
    return zipWith(*a, *b, subInts);
  case OpKind::Mul:
  case OpKind::MMul:
    return zipWith(*a, *b, mulInts);
  case OpKind::FloorDiv:
  case OpKind::MFloorDiv:
    return zipWith(*a, *b, floorDivInts);
  default:
    return zipWith(*a, *b, equalInts);
  }
}

/// floor(a / b) for `n` = a true division of two integer values (ONNX's
/// integer Div imports as a division then a cast; dims are not negative,
/// so truncation and floor agree where this answers).
std::optional<Value> Evaluator::floorOfDivision(const Node *n) {
  auto *e = n && llvm::isa<TensorNode>(n) ? n->expr() : nullptr;
  if (!e || !e->opSchema() || --budget_ < 0)
    return std::nullopt;
  OpKind k = e->opSchema()->kind();
  if (k != OpKind::Div && k != OpKind::MTrueDiv)
    return std::nullopt;
  bool method = k == OpKind::MTrueDiv;
  auto a = method ? arg(e->numArgs() ? std::optional<ArgRef>(e->arg(0)) : std::nullopt)
                  : arg(e->namedArg("x"));
  auto b = arg(e->namedArg(method ? "value" : "y"));
  if (!a || !b)
    return std::nullopt;
  return zipWith(*a, *b, [](const SymInt &x, const SymInt &y) {
    // Truncation equals floor only when the quotient is not negative.
    bool nonNeg = (x.kind == SymInt::Sym || (x.kind == SymInt::Int && x.v >= 0)) &&
                  y.kind == SymInt::Int && y.v > 0;
    return nonNeg ? floorDivInts(x, y) : unknownInt();
  });
}

std::optional<Value> Evaluator::index(const Value &x, const IndexSpec &idx) {
  if (x.scalar)
    return std::nullopt;
  int64_t n = int64_t(x.elems.size());
  if (idx.kind == IndexSpec::Kind::Index) {
    int64_t j = idx.index < 0 ? idx.index + n : idx.index;
    if (j < 0 || j >= n)
      return std::nullopt;
    Value v;
    v.scalar = true;
    v.elems.push_back(x.elems[size_t(j)]);
    return v;
  }
  if (idx.kind != IndexSpec::Kind::Slice)
    return std::nullopt;
  // A bound is a constant, None, or a node whose value is a known int.
  auto part = [&](const IndexBound &b, int64_t dflt) -> std::optional<int64_t> {
    if (b.isNone())
      return dflt;
    if (b.value)
      return b.value;
    auto v = node(b.node());
    if (v && v->elems.size() == 1 && v->elems[0].kind == SymInt::Int)
      return v->elems[0].v;
    return std::nullopt;
  };
  auto step = part(idx.step, 1);
  if (!step || *step == 0)
    return std::nullopt;
  bool up = *step > 0;
  auto start = part(idx.start, up ? 0 : n - 1);
  auto stop = part(idx.stop, up ? n : -n - 1);
  if (!start || !stop)
    return std::nullopt;
  // Python's slice.indices.
  auto clampIdx = [&](int64_t v) {
    if (v < 0)
      v = std::max<int64_t>(v + n, up ? 0 : -1);
    return std::min<int64_t>(v, up ? n : n - 1);
  };
  int64_t s = clampIdx(*start), e = clampIdx(*stop);
  // A step past the length takes one element either way (and cannot
  // overflow the index).
  int64_t st = std::clamp<int64_t>(*step, -n - 1, n + 1);
  Value v;
  for (int64_t i = s; up ? i < e : i > e; i += st)
    v.elems.push_back(x.elems[size_t(i)]);
  return v;
}

std::optional<Value> Evaluator::take(const Value &x, const Value &idx) {
  if (x.scalar)
    return std::nullopt;
  int64_t n = int64_t(x.elems.size());
  Value v;
  v.scalar = idx.scalar;
  for (const SymInt &i : idx.elems) {
    if (i.kind != SymInt::Int)
      return std::nullopt;
    int64_t j = i.v < 0 ? i.v + n : i.v;
    if (j < 0 || j >= n)
      return std::nullopt;
    v.elems.push_back(x.elems[size_t(j)]);
  }
  return v;
}

std::optional<Value> Evaluator::concat(const Expr &e) {
  auto list = e.namedArg("inps");
  auto axis = e.namedArg("axis");
  if (!list || !axis || intOf(axis->def).value_or(-1) != 0 ||
      (list->def.kind() != TreeDef::Kind::List && list->def.kind() != TreeDef::Kind::Tuple))
    return std::nullopt;
  bool stack = e.opSchema()->kind() == OpKind::Stack;
  Value out;
  size_t leaf = list->firstLeaf;
  for (size_t i = 0; i < list->def.numChildren(); ++i) {
    if (!list->def.child(i).isLeaf())
      return std::nullopt;
    auto v = node(e.input(leaf++));
    if (!v || v->scalar != stack || out.elems.size() + v->elems.size() > kMaxElems)
      return std::nullopt;
    out.elems.append(v->elems.begin(), v->elems.end());
  }
  return out;
}

} // namespace

std::optional<SymInts> shapeValue(const Node *n) {
  Evaluator ev;
  auto v = ev.node(n);
  if (!v)
    return std::nullopt;
  return std::move(v->elems);
}

} // namespace tmg::shapes
