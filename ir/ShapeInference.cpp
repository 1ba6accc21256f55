//===- ShapeInference.cpp - Output types from input types -----------------===//
#include "tm/ir/ShapeInference.h"
#include "tm/ir/ElemwiseModes.h"

#include <algorithm>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"

namespace tmg {

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      return std::nullopt;
    out[i] = x == 1 ? y : x;
  }
  return out;
}

namespace {

using Types = std::optional<TensorTypes>;

/// A tensor operand, or a Python scalar (weakly typed, shape ()).
struct Operand {
  std::optional<Shape> shape;
  std::optional<DType> dtype;
  bool weak = false;
};

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

bool isNoneDef(const TreeDef &t) { return t.isConst() && t.value().isNone(); }

/// An int or an (a, b) pair, as conv and pool parameters are given.
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
  DType x = *a.dtype, y = *b.dtype;
  if (x == y)
    return x;
  if (isFloat(x) || isFloat(y))
    return DType::Float32;
  if (x == DType::Int64 || y == DType::Int64)
    return DType::Int64;
  if (x == DType::Bool)
    return y;
  if (y == DType::Bool)
    return x;
  return DType::Int32;
}

class Rules {
public:
  explicit Rules(const Expr &e) : e_(e) {}

  [[noreturn]] void fail(const std::string &msg) const {
    raiseAt(Location::atExpr(e_.id()), "{}: {}", name_.str(), msg);
  }

  Types run() {
    if (auto *cf = llvm::dyn_cast<CallFunction>(&e_)) {
      name_ = cf->func().printName();
      return op(cf->func().kind());
    }
    if (auto *cm = llvm::dyn_cast<CallMethod>(&e_)) {
      if (cm->isModuleCall())
        return moduleCall(*cm);
      name_ = cm->method();
      return op(cm->methodSchema()->kind());
    }
    if (auto *ap = llvm::dyn_cast<Apply>(&e_)) {
      name_ = ap->opdef().name();
      if (ap->opdef().kind() == OpKind::GetVarShape && e_.numInputs() == 1)
        if (auto *t = llvm::dyn_cast<TensorNode>(e_.input(0)); t && t->shape())
          return one(Shape{int64_t(t->shape()->size())}, DType::Int32);
      return std::nullopt;
    }
    return std::nullopt;
  }

private:
  Types one(std::optional<Shape> s, std::optional<DType> t) const {
    // Not an initializer list: that would copy the shape once more.
    TensorTypes v;
    v.push_back(TensorType{std::move(s), t});
    return v;
  }

  std::optional<ArgRef> arg(llvm::StringRef name) const { return e_.namedArg(name); }

  static std::optional<Operand> operand(const Node *n) {
    auto *t = llvm::dyn_cast<TensorNode>(n);
    if (!t)
      return std::nullopt;
    Operand o;
    o.shape = t->shape();
    if (t->hasDType())
      o.dtype = t->dtype();
    return o;
  }

  std::optional<Operand> operand(const std::optional<ArgRef> &a) const {
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
  /// too), found without binding names or copying TreeDefs. nullptr when
  /// the call is not of that form.
  const Node *firstPositionalNode() const {
    if (const auto &ad = e_.argDef(); ad && ad->kind() == TreeDef::Kind::Tuple &&
                                      ad->numChildren() == 2 && e_.numInputs() != 0) {
      const TreeDef &pos = ad->child(0), &kw = ad->child(1);
      if (kw.numChildren() == 0 && pos.numChildren() != 0 && pos.child(0).isLeaf() &&
          !llvm::isa<ModuleNode>(e_.input(0)))
        return e_.input(0);
    }
    return nullptr;
  }

  /// The receiver or first tensor argument.
  std::optional<Operand> first() const {
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

  std::optional<TreeDef> constArg(llvm::StringRef name) const {
    auto a = arg(name);
    if (!a || a->def.numLeaves() != 0)
      return std::nullopt;
    return a->def;
  }

  Types same() const {
    // The type of a tensor first argument, copied once, straight into the
    // result (every created elementwise expr comes here).
    if (auto *t = llvm::dyn_cast_or_null<TensorNode>(firstPositionalNode())) {
      Types r(std::in_place);
      TensorType &out = r->emplace_back();
      if (const std::optional<Shape> &s = t->shape())
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

  Types binary(bool toBool, bool toFloat) const {
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
        fail(fmt::format("shapes {} and {} do not broadcast", shapeStr(*a->shape),
                         shapeStr(*b->shape)));
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

  /// Output spatial size of a conv or pool.
  int64_t window(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                 const char *what) const {
    if (s <= 0 || d <= 0 || k <= 0 || p < 0)
      fail(fmt::format("{}: kernel {}, stride {}, dilation {} and padding {} "
                       "must be positive (padding non-negative)",
                       what, k, s, d, p));
    int64_t eff = d * (k - 1) + 1;
    if (in + 2 * p < eff)
      fail(fmt::format("{}: input size {} with padding {} is smaller than the "
                       "kernel extent {}",
                       what, in, p, eff));
    return (in + 2 * p - eff) / s + 1;
  }

  Types conv(const std::optional<Operand> &x, const std::optional<Operand> &w,
             size_t spatial, TreeDef stride, TreeDef pad, TreeDef dil,
             int64_t groups, bool transposed, TreeDef outPad = TreeDef::constant(Scalar(0))) {
    if (!x || !w || !x->shape || !w->shape)
      return std::nullopt;
    const Shape &xs = *x->shape, &ws = *w->shape;
    if (xs.size() != spatial + 2 || ws.size() != spatial + 2)
      fail(fmt::format("input {} and weight {} must have rank {}", shapeStr(xs),
                       shapeStr(ws), spatial + 2));
    if (groups <= 0)
      fail(fmt::format("groups must be positive, got {}", groups));
    int64_t inC = transposed ? ws[0] : ws[1] * groups;
    if (xs[1] != inC)
      fail(fmt::format("input {} has {} channels but weight {} expects {}",
                       shapeStr(xs), xs[1], shapeStr(ws), inC));
    auto st = intsOf(stride), pd = intsOf(pad), dl = intsOf(dil), op = intsOf(outPad);
    if (!st || !pd || !dl || !op)
      return std::nullopt;
    auto at = [&](const std::vector<int64_t> &v, size_t i) {
      return v.size() == 1 ? v[0] : v.at(i);
    };
    Shape out = {xs[0], transposed ? ws[1] * groups : ws[0]};
    for (size_t i = 0; i < spatial; ++i) {
      if ((st->size() != 1 && st->size() != spatial) ||
          (pd->size() != 1 && pd->size() != spatial) ||
          (dl->size() != 1 && dl->size() != spatial))
        fail("stride, padding and dilation need 1 or one value per spatial dim");
      int64_t k = ws[2 + i];
      if (transposed)
        out.push_back((xs[2 + i] - 1) * at(*st, i) - 2 * at(*pd, i) +
                      at(*dl, i) * (k - 1) + at(*op, i) + 1);
      else
        out.push_back(window(xs[2 + i], k, at(*st, i), at(*pd, i), at(*dl, i), "conv"));
    }
    return one(out, x->dtype);
  }

  Types pool(const std::optional<Operand> &x, TreeDef kernel, TreeDef stride,
             TreeDef pad) {
    if (!x || !x->shape)
      return std::nullopt;
    const Shape &xs = *x->shape;
    if (xs.size() != 4)
      fail(fmt::format("input {} must be NCHW", shapeStr(xs)));
    auto k = pairOf(kernel);
    auto s = isNoneDef(stride) ? k : pairOf(stride);
    auto p = pairOf(pad);
    if (!k || !s || !p)
      return std::nullopt;
    return one(Shape{xs[0], xs[1], window(xs[2], k->first, s->first, p->first, 1, "pool"),
                     window(xs[3], k->second, s->second, p->second, 1, "pool")},
               x->dtype);
  }

  /// Axes start..end (inclusive, negatives from the end) merged into one.
  Types flatten(const std::optional<Operand> &x, int64_t start, int64_t end) const {
    if (!x || !x->shape)
      return std::nullopt;
    const Shape &xs = *x->shape;
    if (xs.empty())
      return one(Shape{1}, x->dtype);
    int64_t b = normAxis(start, xs.size()), e = normAxis(end, xs.size());
    if (b > e)
      fail(fmt::format("start axis {} is after end axis {}", start, end));
    Shape out(xs.begin(), xs.begin() + b);
    int64_t m = 1;
    for (int64_t i = b; i <= e; ++i)
      m *= xs[i];
    out.push_back(m);
    out.append(xs.begin() + e + 1, xs.end());
    return one(out, x->dtype);
  }

  Types reduce(bool toIndex) {
    auto x = first();
    auto ax = constArg("axis");
    auto kd = constArg("keepdims");
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
          fail(fmt::format("axis {} is out of range for {}", a, shapeStr(xs)));
        drop[a < 0 ? a + r : a] = true;
      }
    }
    Shape out;
    for (size_t i = 0; i < xs.size(); ++i)
      if (!drop[i])
        out.push_back(xs[i]);
      else if (keep)
        out.push_back(1);
    return one(out, toIndex ? std::optional<DType>(DType::Int64) : x->dtype);
  }

  Types reshape(const std::optional<Operand> &x, std::vector<int64_t> target) {
    if (!x || !x->shape)
      return std::nullopt;
    int64_t n = shapeNumel(*x->shape), known = 1, infer = -1;
    for (size_t i = 0; i < target.size(); ++i) {
      if (target[i] == -1) {
        if (infer >= 0)
          fail("at most one dimension may be -1");
        infer = int64_t(i);
      } else if (target[i] < 0) {
        fail(fmt::format("invalid target dimension {}", target[i]));
      } else {
        known *= target[i];
      }
    }
    if (infer >= 0) {
      if (known == 0 || n % known)
        fail(fmt::format("cannot reshape {} to {}", shapeStr(*x->shape),
                         shapeStr(target)));
      target[infer] = n / known;
    } else if (known != n) {
      fail(fmt::format("cannot reshape {} ({} elements) to {}", shapeStr(*x->shape), n,
                       shapeStr(target)));
    }
    return one(Shape(target.begin(), target.end()), x->dtype);
  }

  int64_t normAxis(int64_t a, size_t rank) const {
    int64_t r = int64_t(rank);
    if (a < -r || a >= r)
      fail(fmt::format("axis {} is out of range for rank {}", a, rank));
    return a < 0 ? a + r : a;
  }

  /// Tensor operands of a list argument (concat, stack).
  std::optional<std::vector<Operand>> listOperands(llvm::StringRef name) const {
    auto a = arg(name);
    if (!a || (a->def.kind() != TreeDef::Kind::List && a->def.kind() != TreeDef::Kind::Tuple))
      return std::nullopt;
    std::vector<Operand> out;
    size_t leaf = a->firstLeaf;
    for (size_t i = 0; i < a->def.numChildren(); ++i) {
      if (!a->def.child(i).isLeaf())
        return std::nullopt;
      auto *t = llvm::dyn_cast<TensorNode>(e_.input(leaf++));
      if (!t || !t->shape())
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

  Types matmul(const std::optional<Operand> &a, const std::optional<Operand> &b,
               bool ta, bool tb) {
    if (!a || !b || !a->shape || !b->shape)
      return std::nullopt;
    Shape x = *a->shape, y = *b->shape;
    if (x.empty() || y.empty())
      fail("operands must have rank >= 1");
    bool vx = x.size() == 1, vy = y.size() == 1;
    if (vx)
      x.insert(x.begin(), 1);
    if (vy)
      y.push_back(1);
    if (ta)
      std::swap(x[x.size() - 1], x[x.size() - 2]);
    if (tb)
      std::swap(y[y.size() - 1], y[y.size() - 2]);
    if (x.back() != y[y.size() - 2])
      fail(fmt::format("{} @ {}: inner dimensions {} and {} differ",
                       shapeStr(*a->shape), shapeStr(*b->shape), x.back(), y[y.size() - 2]));
    auto batch = broadcastShapes(llvm::ArrayRef<int64_t>(x).drop_back(2),
                                 llvm::ArrayRef<int64_t>(y).drop_back(2));
    if (!batch)
      fail(fmt::format("batch dimensions of {} and {} do not broadcast",
                       shapeStr(*a->shape), shapeStr(*b->shape)));
    Shape out = *batch;
    if (!vx)
      out.push_back(x[x.size() - 2]);
    if (!vy)
      out.push_back(y.back());
    return one(out, a->dtype);
  }

  Types op(OpKind k) {
    switch (k) {
    case OpKind::Add: case OpKind::Sub: case OpKind::Mul: case OpKind::Pow:
    case OpKind::Maximum: case OpKind::Minimum: case OpKind::Mod:
    case OpKind::FloorDiv:
    case OpKind::MAdd: case OpKind::MRAdd: case OpKind::MIAdd: case OpKind::MSub:
    case OpKind::MRSub: case OpKind::MISub: case OpKind::MMul: case OpKind::MRMul:
    case OpKind::MIMul: case OpKind::MFloorDiv: case OpKind::MMod: case OpKind::MPow:
    case OpKind::MRPow:
      return binary(false, false);
    case OpKind::Div: case OpKind::MTrueDiv: case OpKind::MRTrueDiv:
    case OpKind::MITrueDiv:
      return binary(false, true);
    case OpKind::Equal: case OpKind::NotEqual: case OpKind::Less:
    case OpKind::LessEqual: case OpKind::Greater: case OpKind::GreaterEqual:
    case OpKind::LogicalAnd: case OpKind::LogicalOr: case OpKind::MEq:
    case OpKind::MNe: case OpKind::MLt: case OpKind::MLe: case OpKind::MGt:
    case OpKind::MGe: case OpKind::MAnd: case OpKind::MOr:
      return binary(true, false);
    case OpKind::LogicalNot: {
      auto x = first();
      return x ? one(std::move(x->shape), DType::Bool) : std::nullopt;
    }
    case OpKind::Neg: case OpKind::Abs: case OpKind::Exp: case OpKind::Log:
    case OpKind::Sqrt: case OpKind::Rsqrt: case OpKind::Erf: case OpKind::Tanh:
    case OpKind::Sin: case OpKind::Cos: case OpKind::Floor: case OpKind::Ceil:
    case OpKind::Round: case OpKind::Clip: case OpKind::Relu: case OpKind::Relu6:
    case OpKind::LeakyRelu: case OpKind::Gelu: case OpKind::GeluTanh:
    case OpKind::Sigmoid: case OpKind::Silu: case OpKind::Hswish:
    case OpKind::Hsigmoid: case OpKind::Softplus: case OpKind::Prelu:
    case OpKind::Softmax: case OpKind::LogSoftmax: case OpKind::BatchNorm:
    case OpKind::LayerNorm: case OpKind::Dropout: case OpKind::FakeQuantize:
    case OpKind::Copy: case OpKind::MNeg: case OpKind::MPos: case OpKind::MAbs:
    case OpKind::MInvert: case OpKind::MDetach: case OpKind::MSetItem:
      return same();
    case OpKind::Where: {
      auto m = operand(arg("mask")), x = operand(arg("x")), y = operand(arg("y"));
      if (!m || !x || !y || !m->shape || !x->shape || !y->shape)
        return std::nullopt;
      auto s = broadcastShapes(*m->shape, *x->shape);
      if (s)
        s = broadcastShapes(*s, *y->shape);
      if (!s)
        fail(fmt::format("shapes {}, {} and {} do not broadcast", shapeStr(*m->shape),
                         shapeStr(*x->shape), shapeStr(*y->shape)));
      return one(s, x->dtype && y->dtype ? std::optional<DType>(promote(*x, *y))
                                         : std::nullopt);
    }
    case OpKind::Conv1d:
    case OpKind::Conv2d:
    case OpKind::Conv2dAct:
    case OpKind::ConvTranspose2d: {
      auto g = constArg("groups");
      auto gi = g ? intOf(*g) : std::nullopt;
      auto s = constArg("stride"), p = constArg("padding"), d = constArg("dilation");
      if (!gi || !s || !p || !d)
        return std::nullopt;
      bool tr = k == OpKind::ConvTranspose2d;
      TreeDef op = tr ? constArg("output_padding").value_or(TreeDef::constant(Scalar(0)))
                      : TreeDef::constant(Scalar(0));
      return conv(operand(arg("inp")), operand(arg("weight")), k == OpKind::Conv1d ? 1 : 2,
                  *s, *p, *d, *gi, tr, op);
    }
    case OpKind::Linear:
    case OpKind::LinearAct: {
      auto x = operand(arg("inp")), w = operand(arg("weight"));
      if (!x || !w || !x->shape || !w->shape)
        return std::nullopt;
      if (w->shape->size() != 2 || x->shape->empty() ||
          x->shape->back() != (*w->shape)[1])
        fail(fmt::format("input {} does not fit weight {} (out, in)",
                         shapeStr(*x->shape), shapeStr(*w->shape)));
      Shape out = *x->shape;
      out.back() = (*w->shape)[0];
      return one(out, x->dtype);
    }
    case OpKind::Matmul: {
      auto ta = constArg("transpose_a"), tb = constArg("transpose_b");
      bool a = ta && ta->isConst() && ta->value().isBool() && ta->value().getBool();
      bool b = tb && tb->isConst() && tb->value().isBool() && tb->value().getBool();
      return matmul(operand(arg("inp1")), operand(arg("inp2")), a, b);
    }
    case OpKind::MMatmul:
      return matmul(operand(arg("self")), operand(arg("value")), false, false);
    case OpKind::MaxPool2d:
    case OpKind::AvgPool2d: {
      auto kk = constArg("kernel_size"), s = constArg("stride"), p = constArg("padding");
      if (!kk || !s || !p)
        return std::nullopt;
      return pool(operand(arg("inp")), *kk, *s, *p);
    }
    case OpKind::AdaptiveAvgPool2d:
    case OpKind::AdaptiveMaxPool2d: {
      auto x = operand(arg("inp"));
      auto o = constArg("oshp");
      auto pr = o ? pairOf(*o) : std::nullopt;
      if (!x || !x->shape || !pr)
        return std::nullopt;
      if (x->shape->size() != 4)
        fail(fmt::format("input {} must be NCHW", shapeStr(*x->shape)));
      return one(Shape{(*x->shape)[0], (*x->shape)[1], pr->first, pr->second}, x->dtype);
    }
    case OpKind::Embedding: {
      auto x = operand(arg("inp")), w = operand(arg("weight"));
      if (!x || !w || !x->shape || !w->shape || w->shape->size() != 2)
        return std::nullopt;
      Shape out = *x->shape;
      out.push_back((*w->shape)[1]);
      return one(out, w->dtype);
    }
    case OpKind::Pad: {
      auto x = operand(arg("src"));
      auto pw = constArg("pad_width");
      if (!x || !x->shape || !pw)
        return std::nullopt;
      Shape out = *x->shape;
      if (pw->numChildren() != out.size())
        fail(fmt::format("pad_width {} needs one (before, after) pair per dim of {}",
                         treeStr(*pw), shapeStr(out)));
      for (size_t i = 0; i < out.size(); ++i) {
        auto pr = intsOf(pw->child(i));
        if (!pr || pr->size() != 2)
          return std::nullopt;
        out[i] += (*pr)[0] + (*pr)[1];
      }
      return one(out, x->dtype);
    }
    case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min:
    case OpKind::Prod: case OpKind::MSum: case OpKind::MMean: case OpKind::MMax:
    case OpKind::MMin: case OpKind::MProd:
      return reduce(false);
    case OpKind::Argmax:
    case OpKind::Argmin:
      return reduce(true);
    case OpKind::Reshape: {
      auto t = constArg("target_shape");
      auto v = t ? intsOf(*t) : std::nullopt;
      return v ? reshape(first(), *v) : std::nullopt;
    }
    case OpKind::MReshape: {
      // x.reshape(2, 3) or x.reshape((2, 3)).
      std::vector<int64_t> target;
      for (size_t i = 1; i < e_.numArgs(); ++i) {
        ArgRef a = e_.arg(i);
        auto v = a.def.numLeaves() ? std::nullopt : intsOf(a.def);
        if (!v)
          return std::nullopt;
        target.insert(target.end(), v->begin(), v->end());
      }
      return reshape(first(), target);
    }
    case OpKind::Flatten: {
      auto s = constArg("start_axis"), en = constArg("end_axis");
      auto si = s ? intOf(*s) : std::nullopt, ei = en ? intOf(*en) : std::nullopt;
      if (!si || !ei)
        return std::nullopt;
      return flatten(first(), *si, *ei);
    }
    case OpKind::MFlatten: {
      auto x = first();
      if (!x || !x->shape)
        return std::nullopt;
      return one(Shape{shapeNumel(*x->shape)}, x->dtype);
    }
    case OpKind::Transpose:
    case OpKind::MTranspose: {
      auto x = first();
      std::optional<std::vector<int64_t>> perm;
      if (k == OpKind::Transpose) {
        auto p = constArg("pattern");
        perm = p ? intsOf(*p) : std::nullopt;
      } else {
        std::vector<int64_t> v;
        for (size_t i = 1; i < e_.numArgs(); ++i) {
          auto a = intsOf(e_.arg(i).def);
          if (!a)
            return std::nullopt;
          v.insert(v.end(), a->begin(), a->end());
        }
        perm = v;
      }
      if (!x || !x->shape || !perm)
        return std::nullopt;
      const Shape &xs = *x->shape;
      if (perm->size() != xs.size())
        fail(fmt::format("pattern {} does not match rank of {}", shapeStr(*perm),
                         shapeStr(xs)));
      Shape out;
      std::vector<bool> seen(xs.size(), false);
      for (int64_t p : *perm) {
        int64_t a = normAxis(p, xs.size());
        if (seen[a])
          fail(fmt::format("pattern {} repeats axis {}", shapeStr(*perm), p));
        seen[a] = true;
        out.push_back(xs[a]);
      }
      return one(out, x->dtype);
    }
    case OpKind::BroadcastTo: {
      auto x = first();
      auto s = constArg("shape");
      auto v = s ? intsOf(*s) : std::nullopt;
      if (!x || !x->shape || !v)
        return std::nullopt;
      auto b = broadcastShapes(*x->shape, *v);
      if (!b || llvm::ArrayRef<int64_t>(*b) != llvm::ArrayRef<int64_t>(*v))
        fail(fmt::format("cannot broadcast {} to {}", shapeStr(*x->shape), shapeStr(*v)));
      return one(*b, x->dtype);
    }
    case OpKind::Concat:
    case OpKind::Stack: {
      auto xs = listOperands("inps");
      auto ax = constArg("axis");
      auto a = ax ? intOf(*ax) : std::nullopt;
      if (!xs || !a)
        return std::nullopt;
      Shape out = *(*xs)[0].shape;
      bool stack = k == OpKind::Stack;
      int64_t axis = normAxis(*a, out.size() + (stack ? 1 : 0));
      for (size_t i = 1; i < xs->size(); ++i) {
        const Shape &s = *(*xs)[i].shape;
        bool ok = s.size() == out.size();
        for (size_t d = 0; ok && d < s.size(); ++d)
          ok = (stack || int64_t(d) != axis) ? s[d] == (*xs)[0].shape->data()[d] : true;
        if (!ok)
          fail(fmt::format("input {} does not match {} along the other axes",
                           shapeStr(s), shapeStr(*(*xs)[0].shape)));
        if (!stack)
          out[axis] += s[axis];
      }
      if (stack)
        out.insert(out.begin() + axis, int64_t(xs->size()));
      return one(out, (*xs)[0].dtype);
    }
    case OpKind::Split: {
      auto x = first();
      auto ns = constArg("nsplits_or_sections");
      auto ax = constArg("axis");
      auto a = ax ? intOf(*ax) : std::nullopt;
      if (!x || !x->shape || !ns || !a)
        return std::nullopt;
      Shape xs = *x->shape;
      int64_t axis = normAxis(*a, xs.size());
      std::vector<int64_t> sizes;
      if (auto n = intOf(*ns)) {
        if (*n <= 0 || xs[axis] % *n)
          fail(fmt::format("cannot split dim {} of size {} into {} equal parts",
                           axis, xs[axis], *n));
        sizes.assign(size_t(*n), xs[axis] / *n);
      } else if (auto sec = intsOf(*ns)) {
        int64_t prev = 0;
        for (int64_t s : *sec) {
          if (s < prev || s > xs[axis])
            fail(fmt::format("split points {} must be increasing within {}",
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
    case OpKind::Squeeze: {
      auto x = first();
      auto ax = constArg("axis");
      if (!x || !x->shape || !ax)
        return std::nullopt;
      const Shape &xs = *x->shape;
      std::vector<bool> drop(xs.size(), false);
      if (isNoneDef(*ax)) {
        for (size_t i = 0; i < xs.size(); ++i)
          drop[i] = xs[i] == 1;
      } else if (auto axes = intsOf(*ax)) {
        for (int64_t a : *axes) {
          int64_t n = normAxis(a, xs.size());
          if (xs[n] != 1)
            fail(fmt::format("cannot squeeze axis {} of {}: its size is not 1", a,
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
      return one(out, x->dtype);
    }
    case OpKind::ExpandDims: {
      auto x = first();
      auto ax = constArg("axis");
      auto axes = ax ? intsOf(*ax) : std::nullopt;
      if (!x || !x->shape || !axes)
        return std::nullopt;
      size_t rank = x->shape->size() + axes->size();
      std::vector<bool> isNew(rank, false);
      for (int64_t a : *axes)
        isNew[normAxis(a, rank)] = true;
      Shape out;
      size_t j = 0;
      for (size_t i = 0; i < rank; ++i)
        out.push_back(isNew[i] ? 1 : (*x->shape)[j++]);
      return one(out, x->dtype);
    }
    case OpKind::Gather: {
      auto x = first(), idx = operand(arg("index"));
      return x && idx ? one(idx->shape, x->dtype) : std::nullopt;
    }
    case OpKind::Zeros: case OpKind::Ones: case OpKind::Full: {
      auto s = constArg("shape"), dt = constArg("dtype");
      auto v = s ? intsOf(*s) : std::nullopt;
      std::optional<DType> t;
      if (dt && dt->isConst() && dt->value().isString())
        t = parseDType(dt->value().getString());
      if (!v)
        return std::nullopt;
      return one(Shape(v->begin(), v->end()), t);
    }
    case OpKind::Arange: {
      auto a = constArg("start"), b = constArg("stop"), c = constArg("step"),
           dt = constArg("dtype");
      if (!a || !b || !c || !a->isConst() || !c->isConst() ||
          !a->value().isNumber() || !c->value().isNumber())
        return std::nullopt;
      double start = a->value().toDouble(), step = c->value().toDouble(), stop;
      if (isNoneDef(*b)) {
        stop = start;
        start = 0;
      } else if (b->isConst() && b->value().isNumber()) {
        stop = b->value().toDouble();
      } else {
        return std::nullopt;
      }
      if (step == 0)
        fail("step must not be zero");
      int64_t n = std::max<int64_t>(0, int64_t(std::ceil((stop - start) / step)));
      std::optional<DType> t;
      if (dt && dt->isConst() && dt->value().isString())
        t = parseDType(dt->value().getString());
      return one(Shape{n}, t);
    }
    case OpKind::MAstype: {
      auto x = first();
      auto dt = constArg("dtype");
      if (!x || !dt || !dt->isConst() || !dt->value().isString())
        return std::nullopt;
      auto t = parseDType(dt->value().getString());
      if (!t)
        fail(fmt::format("unknown dtype '{}'", dt->value().getString()));
      return one(std::move(x->shape), t);
    }
    // ---- ONNX block (issue 9) ----
    case OpKind::Elu: case OpKind::Selu: case OpKind::Celu: case OpKind::Softsign:
    case OpKind::HardSigmoid: case OpKind::ThresholdedRelu: case OpKind::Sign:
    case OpKind::Reciprocal: case OpKind::Tan: case OpKind::Asin: case OpKind::Acos:
    case OpKind::Atan: case OpKind::Sinh: case OpKind::Cosh: case OpKind::Asinh:
    case OpKind::Acosh: case OpKind::Atanh: case OpKind::Cumsum:
    case OpKind::Scatter: case OpKind::ScatterNd:
      return same();
    case OpKind::IsNan: case OpKind::IsInf: {
      auto x = first();
      return x ? one(std::move(x->shape), DType::Bool) : std::nullopt;
    }
    case OpKind::LogicalXor:
      return binary(true, false);
    case OpKind::Fmod:
      return binary(false, false);
    case OpKind::Take: {
      auto x = first(), idx = operand(arg("indices"));
      auto ax = constArg("axis");
      std::optional<int64_t> a;
      if (ax)
        a = intOf(*ax);
      if (!x || !idx || !x->shape || !idx->shape || !a)
        return std::nullopt;
      int64_t a0 = a.value(), r = int64_t(x->shape->size()), axis = a0 < 0 ? a0 + r : a0;
      if (axis < 0 || axis >= r)
        fail(fmt::format("axis {} is out of range for {}", a0, shapeStr(*x->shape)));
      Shape out(x->shape->begin(), x->shape->begin() + axis);
      out.append(idx->shape->begin(), idx->shape->end());
      out.append(x->shape->begin() + axis + 1, x->shape->end());
      return one(out, x->dtype);
    }
    case OpKind::ResizeNd: {
      auto x = first();
      auto sz = constArg("size");
      auto v = sz ? intsOf(*sz) : std::nullopt;
      if (!x || !v)
        return std::nullopt;
      return one(Shape(v->begin(), v->end()), x->dtype);
    }
    case OpKind::ConvNd: case OpKind::ConvTransposeNd:
    case OpKind::MaxPoolNd: case OpKind::AvgPoolNd:
      return windowNd(k);
    case OpKind::MGetItem:
      return getitem();
    default:
      return std::nullopt;
    }
  }

  /// Output type of the N-d window ops (ONNX-style paddings).
  Types windowNd(OpKind k) {
    auto x = first();
    if (!x || !x->shape || x->shape->size() < 3)
      return std::nullopt;
    size_t nd = x->shape->size() - 2;
    bool conv = k == OpKind::ConvNd || k == OpKind::ConvTransposeNd;
    std::vector<int64_t> ks;
    std::optional<Operand> w;
    if (conv) {
      w = operand(arg("weight"));
      if (!w || !w->shape || w->shape->size() != nd + 2)
        return std::nullopt;
      ks.assign(w->shape->begin() + 2, w->shape->end());
    } else {
      auto kk = constArg("kernel_size");
      auto v = kk ? intsOf(*kk) : std::nullopt;
      if (!v)
        return std::nullopt;
      ks = *v;
    }
    auto expand = [&](const char *name, size_t n, int64_t dflt) -> std::optional<std::vector<int64_t>> {
      auto t = constArg(name);
      if (!t || isNoneDef(*t))
        return std::vector<int64_t>(n, dflt);
      auto v = intsOf(*t);
      if (!v)
        return std::nullopt;
      if (v->size() == 1)
        return std::vector<int64_t>(n, (*v)[0]);
      return v;
    };
    auto st = k == OpKind::ConvNd || k == OpKind::ConvTransposeNd ? expand("stride", nd, 1)
              : constArg("stride") && !isNoneDef(*constArg("stride")) ? expand("stride", nd, 1)
                                                                      : std::optional(ks);
    auto pd = expand("padding", 2 * nd, 0);
    auto dl = k == OpKind::AvgPoolNd ? std::optional(std::vector<int64_t>(nd, 1))
                                     : expand("dilation", nd, 1);
    if (!st || !pd || !dl || ks.size() != nd || st->size() != nd || dl->size() != nd)
      return std::nullopt;
    if (pd->size() == nd)
      pd->insert(pd->end(), pd->begin(), pd->end());
    if (pd->size() != 2 * nd)
      return std::nullopt;
    bool ceil = false;
    if (auto c = constArg("ceil_mode"); c && c->isConst() && c->value().isBool())
      ceil = c->value().getBool();
    Shape out{(*x->shape)[0], (*x->shape)[1]};
    if (conv) {
      auto g = constArg("groups");
      auto gi = g ? intOf(*g) : std::nullopt;
      if (!gi)
        return std::nullopt;
      out[1] = k == OpKind::ConvNd ? (*w->shape)[0] : (*w->shape)[1] * *gi;
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
        out.push_back((in - 1) * s - pb - pe + d * (ks[i] - 1) + op[i] + 1);
        continue;
      }
      int64_t span = in + pb + pe - (d * (ks[i] - 1) + 1);
      if (span < 0 || s < 1)
        fail(fmt::format("window {} does not fit input {}", ks[i], shapeStr(*x->shape)));
      int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
      if (ceil && (o - 1) * s >= in + pb)
        --o;
      out.push_back(o);
    }
    return one(out, x->dtype);
  }

  static std::string treeStr(const TreeDef &t) { return t.str(); }

  /// Basic indexing with constant ints, slices, Ellipsis and None.
  Types getitem() {
    auto x = first();
    auto idx = constArg("index");
    if (!x || !x->shape || !idx)
      return std::nullopt;
    std::vector<TreeDef> items;
    if (idx->kind() == TreeDef::Kind::Tuple)
      for (size_t i = 0; i < idx->numChildren(); ++i)
        items.push_back(idx->child(i));
    else
      items.push_back(*idx);
    const Shape &xs = *x->shape;
    size_t consumed = 0;
    for (const auto &it : items)
      if (!(it.isConst() && (it.value().isNone() || it.value().kind() == Scalar::Kind::Ellipsis)))
        ++consumed;
    if (consumed > xs.size())
      fail(fmt::format("too many indices for {}", shapeStr(xs)));
    Shape out;
    size_t dim = 0;
    for (const auto &it : items) {
      if (it.isConst() && it.value().kind() == Scalar::Kind::Ellipsis) {
        size_t skip = xs.size() - consumed;
        for (size_t i = 0; i < skip; ++i)
          out.push_back(xs[dim++]);
        consumed = xs.size();
        continue;
      }
      if (it.isConst() && it.value().isNone()) {
        out.push_back(1);
        continue;
      }
      if (auto i = intOf(it)) {
        if (*i < -xs[dim] || *i >= xs[dim])
          fail(fmt::format("index {} is out of range for dim {} of {}", *i, dim,
                           shapeStr(xs)));
        ++dim;
        continue;
      }
      if (it.kind() == TreeDef::Kind::Slice) {
        auto part = [&](size_t c) -> std::optional<std::optional<int64_t>> {
          const TreeDef &p = it.child(c);
          if (isNoneDef(p))
            return std::optional<int64_t>();
          if (auto v = intOf(p))
            return std::optional<int64_t>(*v);
          return std::nullopt;
        };
        auto b = part(0), en = part(1), st = part(2);
        if (!b || !en || !st)
          return std::nullopt;
        int64_t n = xs[dim], step = st->value_or(1);
        if (step == 0)
          fail("slice step cannot be zero");
        auto clampIdx = [&](std::optional<int64_t> v, int64_t dflt) {
          if (!v)
            return dflt;
          int64_t r = *v < 0 ? *v + n : *v;
          return step > 0 ? std::clamp<int64_t>(r, 0, n) : std::clamp<int64_t>(r, -1, n - 1);
        };
        int64_t s0 = clampIdx(*b, step > 0 ? 0 : n - 1);
        int64_t s1 = clampIdx(*en, step > 0 ? n : -1);
        int64_t len = step > 0 ? std::max<int64_t>(0, (s1 - s0 + step - 1) / step)
                               : std::max<int64_t>(0, (s0 - s1 - step - 1) / -step);
        out.push_back(len);
        ++dim;
        continue;
      }
      return std::nullopt; // tensor indices: data dependent
    }
    for (; dim < xs.size(); ++dim)
      out.push_back(xs[dim]);
    return one(out, x->dtype);
  }

  Types moduleCall(const CallMethod &cm) {
    ModuleNode *mn = cm.moduleNode();
    Module *m = mn ? mn->owner() : nullptr;
    if (!m || !m->isBuiltin() || cm.numArgs() < 2)
      return std::nullopt;
    name_ = m->typeName();
    ArgRef a = cm.arg(1);
    auto x = operand(a);
    auto val = [&](const char *n) { return m->value(n) ? *m->value(n) : TreeDef(); };
    if (llvm::isa<Conv2d>(m) || llvm::isa<ConvTranspose2d>(m)) {
      const Tensor *w = m->tensor("weight");
      if (!w)
        return std::nullopt;
      Operand wo;
      wo.shape = Shape(w->shape().begin(), w->shape().end());
      wo.dtype = w->dtype();
      bool tr = llvm::isa<ConvTranspose2d>(m);
      return conv(x, wo, 2, val("stride"), val("padding"), val("dilation"),
                  m->intValue("groups"), tr,
                  tr ? val("output_padding") : TreeDef::constant(Scalar(0)));
    }
    if (llvm::isa<Linear>(m)) {
      const Tensor *w = m->tensor("weight");
      if (!x || !x->shape || !w)
        return std::nullopt;
      if (x->shape->empty() || x->shape->back() != w->dim(1))
        fail(fmt::format("input {} does not fit weight {} (out, in)",
                         shapeStr(*x->shape), shapeStr(w->shape())));
      Shape out = *x->shape;
      out.back() = w->dim(0);
      return one(out, x->dtype);
    }
    if (llvm::isa<BatchNorm2d>(m)) {
      if (x && x->shape && (x->shape->size() < 2 ||
                            (*x->shape)[1] != m->intValue("num_features")))
        fail(fmt::format("input {} does not have {} channels", shapeStr(*x->shape),
                         m->intValue("num_features")));
      return x ? one(std::move(x->shape), x->dtype) : std::nullopt;
    }
    if (llvm::isa<MaxPool2d>(m) || llvm::isa<AvgPool2d>(m))
      return pool(x, val("kernel_size"), val("stride"), val("padding"));
    if (llvm::isa<AdaptiveAvgPool2d>(m)) {
      auto pr = pairOf(val("oshp"));
      if (!x || !x->shape || !pr)
        return std::nullopt;
      if (x->shape->size() != 4)
        fail(fmt::format("input {} must be NCHW", shapeStr(*x->shape)));
      return one(Shape{(*x->shape)[0], (*x->shape)[1], pr->first, pr->second}, x->dtype);
    }
    if (llvm::isa<Flatten>(m))
      return flatten(x, m->intValue("start_axis"), m->intValue("end_axis"));
    if (llvm::isa<Embedding>(m)) {
      const Tensor *w = m->tensor("weight");
      if (!x || !x->shape || !w)
        return std::nullopt;
      Shape out = *x->shape;
      out.push_back(w->dim(1));
      return one(out, w->dtype());
    }
    if (llvm::isa<Elemwise>(m))
      return elemwiseModule(cm, *m);
    if (llvm::isa<ReLU>(m) || llvm::isa<ReLU6>(m) || llvm::isa<GELU>(m) ||
        llvm::isa<Sigmoid>(m) || llvm::isa<SiLU>(m) || llvm::isa<Hardswish>(m) ||
        llvm::isa<Identity>(m) || llvm::isa<Softmax>(m) || llvm::isa<Dropout>(m) ||
        llvm::isa<LayerNorm>(m))
      return x ? one(std::move(x->shape), x->dtype) : std::nullopt;
    return std::nullopt;
  }

  /// `Elemwise(method)(*inputs)`: the NumPy broadcast of every input, the
  /// promoted dtype (bool for predicates).
  Types elemwiseModule(const CallMethod &cm, const Module &m) {
    const TreeDef *method = m.value("method");
    const ElemwiseMode *mode = method && method->isConst() && method->value().isString()
                                   ? lookupElemwiseMode(method->value().getString())
                                   : nullptr;
    if (!mode)
      fail(fmt::format("unknown Elemwise method {}", method ? method->str() : "(none)"));
    size_t n = cm.numArgs() - 1;
    if (n != size_t(mode->arity))
      fail(fmt::format("Elemwise mode {} takes {} inputs, got {}", mode->name, mode->arity, n));
    std::optional<Operand> acc;
    for (size_t i = 1; i < cm.numArgs(); ++i) {
      auto x = operand(cm.arg(i));
      if (!x)
        return std::nullopt;
      if (!acc) {
        acc = std::move(x);
        continue;
      }
      if (acc->shape && x->shape) {
        auto b = broadcastShapes(*acc->shape, *x->shape);
        if (!b)
          fail(fmt::format("shapes {} and {} do not broadcast", shapeStr(*acc->shape),
                           shapeStr(*x->shape)));
        acc->shape = std::move(b);
      } else {
        acc->shape.reset();
      }
      if (acc->dtype && x->dtype)
        acc->dtype = promote(*acc, *x);
      else
        acc->dtype.reset();
      acc->weak = acc->weak && x->weak;
    }
    if (mode->predicate)
      acc->dtype = DType::Bool;
    else if (mode->toFloat && acc->dtype && !isFloat(*acc->dtype))
      acc->dtype = DType::Float32;
    return one(std::move(acc->shape), acc->dtype);
  }

  const Expr &e_;
  /// What failures name (the op); refers to a schema or module type, which
  /// outlive the inference.
  llvm::StringRef name_;
};

} // namespace

std::optional<TensorTypes> inferTypes(const Expr &e) {
  return Rules(e).run();
}

} // namespace tmg
