//===- CanonicalizeOnnx.cpp - ONNX idioms => tmgraph's own ops ------------===//
//
// ONNX exporters spell many ops as small subgraphs; the importer maps each
// ONNX node on its own, so the graph holds the spelling, not the op, and the
// rules written for tmgraph's ops (canonicalize, fuse-add-mul,
// fuse-conv-activation) do not see it. Each idiom below is a matcher pattern
// run by the greedy driver (dead exprs are erased by the driver):
//
//   add/sub/mul/div(x, c), c a float32 Constant or constant getattr with one
//     element that does not change x's shape       => the op with literal c
//     (x first for add and mul)
//   clip(x, 0, 6)                                  => relu6(x)
//   clip(x, 0, None) / clip(x, 0, +inf)            => relu(x)
//   x * hard_sigmoid(x; alpha=1/6, beta=0.5), x * hsigmoid(x),
//   x * relu6(x + 3) / 6 (or * 1/6, in any association) => hswish(x)
//   x * sigmoid(x)                                 => silu(x)
//   matmul(x, W), W static 2-D, x of rank >= 2     => linear(x, W^T), W^T a
//     new Constant per use (cse merges those of a shared W)
//   linear(x, W) + b, b static with W's out features => linear(x, W, b)
//   0.5 * x * (1 + erf(x / sqrt 2))                => gelu(x)
//   0.5 * x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) => gelu_tanh(x)
//     (products in any association and operand order, x * (1/sqrt 2) for
//     the division, (x * p) / 2 for the halving, x^3 as pow or products)
//   (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps), means over the last
//     axis with keepdims (square as pow 2 or a product; also
//     * rsqrt(...))                                => layer_norm(x, eps)
//   layer_norm(x) * w, w of the normalized shape    => layer_norm(x, w)
//   layer_norm(x, w) + b                            => layer_norm(x, w, b)
//
// Constants compare within 1e-6 relative (exporters round them to
// float32). Every rewrite needs float32 operands of known shape and keeps
// the output shape.
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <cmath>

#include "tm/matcher/Driver.h"

namespace tmg {

namespace {

using namespace pat;

Pat opk(OpKind k) { return op(tmg::op(k)); }

/// `n` as a float32 tensor node of known shape, else nullptr.
const TensorNode *floatTensor(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  return t && t->hasDType() && t->dtype() == DType::Float32 && t->shape() ? t : nullptr;
}

/// True when both nodes are float32 tensors of provably the same shape
/// (equal sizes or symbols, no unknown dim).
bool sameFloatShape(const Node *a, const Node *b) {
  const TensorNode *ta = floatTensor(a), *tb = floatTensor(b);
  return ta && tb && provablySameShape(*ta->shape(), *tb->shape());
}

/// A float32 tensor known at compile time with exactly one element.
const Tensor *singleConstant(const Node *n) {
  const Tensor *t = xf::staticTensor(n);
  return t && t->numel() == 1 && t->dtype() == DType::Float32 ? t : nullptr;
}

/// The number a scalar operand stands for: a numeric literal, or a
/// single-element float32 tensor known at compile time.
std::optional<double> scalarValue(const Node *n, const TreeDef *lit) {
  if (lit) {
    if (lit->isConst() && lit->value().isNumber() && !lit->value().isBool())
      return lit->value().toDouble();
    return std::nullopt;
  }
  if (const Tensor *t = singleConstant(n))
    return t->at(0);
  return std::nullopt;
}

bool near(double got, double want) {
  return std::abs(got - want) <= 1e-6 * std::abs(want);
}

/// A scalar operand equal to `v` within 1e-6 relative.
Pat scalar(double v) {
  return any().where(fmt::format("scalar ~ {}", pyFloatRepr(v)),
                     [v](const Node *n, const TreeDef *l) {
                       auto s = scalarValue(n, l);
                       return s && near(*s, v);
                     });
}

/// The literal number bound to parameter `name` of `e` (`dflt` when the
/// argument is absent or None).
std::optional<double> numberArg(const Expr *e, llvm::StringRef name,
                                std::optional<double> dflt = std::nullopt) {
  auto a = e->namedArg(name);
  if (!a || (a->isConst() && a->scalar().isNone()))
    return dflt;
  if (a->isConst() && a->scalar().isNumber() && !a->scalar().isBool())
    return a->scalar().toDouble();
  return std::nullopt;
}

bool isNoneArg(const Expr *e, llvm::StringRef name) {
  auto a = e->namedArg(name);
  return !a || (a->isConst() && a->scalar().isNone());
}

/// The integers of an int or a tuple/list of ints.
std::optional<std::vector<int64_t>> intsOf(const TreeDef &t) {
  std::vector<int64_t> out;
  if (t.isConst()) {
    if (!t.value().isInt())
      return std::nullopt;
    return std::vector<int64_t>{t.value().getInt()};
  }
  for (size_t i = 0; i < t.numChildren(); ++i) {
    const TreeDef &c = t.child(i);
    if (!c.isConst() || !c.value().isInt())
      return std::nullopt;
    out.push_back(c.value().getInt());
  }
  return out;
}

LogicalResult replaceRoot(const Match &m, Rewriter &rw, Node *y) {
  return rw.replaceAllUsesWith(m.rootExpr()->output(0), y);
}

// -- Scalar constants ---------------------------------------------------------------

/// op(a, b) with one operand a single-element constant => op(x, literal).
LogicalResult scalarOperand(const Match &m, Rewriter &rw, OpKind k) {
  Node *a = m.node("a"), *b = m.node("b");
  Expr *root = m.rootExpr();
  bool commutative = k == OpKind::Add || k == OpKind::Mul;
  const Tensor *c = singleConstant(b);
  Node *x = a;
  bool constFirst = false;
  if (!c) {
    c = singleConstant(a);
    x = b;
    constFirst = true;
  }
  if (!c || !x || singleConstant(x) || !sameFloatShape(x, root->output(0)))
    return failure();
  double v = c->at(0);
  std::vector<Arg> args = {x, v};
  if (constFirst && !commutative)
    args = {v, x};
  return replaceRoot(m, rw, rw.callFunction(tmg::op(k), std::move(args)));
}

// -- Activations -------------------------------------------------------------------------

/// clip(x, 0, 6) => relu6(x); clip(x, 0, None | +inf) => relu(x).
LogicalResult clipToRelu(const Match &m, Rewriter &rw) {
  Expr *e = m.rootExpr();
  Node *x = m.node("x");
  if (!sameFloatShape(x, e->output(0)))
    return failure();
  auto lo = numberArg(e, "lower", std::nullopt);
  auto hi = numberArg(e, "upper", INFINITY);
  if (!lo || *lo != 0.0 || !hi)
    return failure();
  if (*hi == INFINITY)
    return replaceRoot(m, rw, rw.callFunction(tmg::op(OpKind::Relu), {x}));
  if (*hi == 6.0)
    return replaceRoot(m, rw, rw.callFunction(tmg::op(OpKind::Relu6), {x}));
  return failure();
}

/// x * hard_sigmoid(x) with PyTorch's slope and offset, or x * hsigmoid(x).
LogicalResult hardswish(const Match &m, Rewriter &rw) {
  Node *x = m.node("x");
  Expr *hs = m.expr("hs");
  if (!sameFloatShape(x, m.rootExpr()->output(0)) || !hs)
    return failure();
  if (hs->opSchema() && hs->opSchema()->kind() == OpKind::HardSigmoid) {
    auto alpha = numberArg(hs, "alpha", 0.2), beta = numberArg(hs, "beta", 0.5);
    if (!alpha || !beta || !near(*alpha, 1.0 / 6.0) || *beta != 0.5)
      return failure();
  }
  return replaceRoot(m, rw, rw.callFunction(tmg::op(OpKind::Hswish), {x}));
}

/// Replaces the root by fn(x) when x keeps the root's shape.
RewriteFn unaryOf(OpKind fn) {
  return [fn](const Match &m, Rewriter &rw) -> LogicalResult {
    Node *x = m.node("x");
    if (!sameFloatShape(x, m.rootExpr()->output(0)))
      return failure();
    return replaceRoot(m, rw, rw.callFunction(tmg::op(fn), {x}));
  };
}

/// 0.5 * x * p as exporters write it: (x * p) * h, (x * h) * p, x * (p * h)
/// (each product in either operand order) or (x * p) / 2. `x * 0.5` may
/// have other users (the exporter merges equal subexpressions): it then
/// stays for them.
Pat halfProduct(const Pat &x, const Pat &p) {
  Pat mul = opk(OpKind::Mul), h = scalar(0.5);
  return mul(mul(x, p), h) | mul(mul(x, h).checkUsers(false), p) | mul(x, mul(p, h)) |
         opk(OpKind::Div)(mul(x, p), scalar(2.0)).ordered();
}

Pat geluErf(const Pat &x) {
  Pat scaled = opk(OpKind::Div)(x, scalar(std::sqrt(2.0))).ordered() |
               opk(OpKind::Mul)(x, scalar(std::sqrt(0.5)));
  Pat onePlus = opk(OpKind::Add)(opk(OpKind::Erf)(scaled), scalar(1.0));
  return halfProduct(x, onePlus);
}

Pat geluTanh(const Pat &x) {
  Pat mul = opk(OpKind::Mul);
  Pat cube = mul(x, mul(x, x)) | opk(OpKind::Pow)(x, scalar(3.0)).ordered();
  Pat inner = opk(OpKind::Add)(x, mul(cube, scalar(0.044715)));
  Pat arg = mul(inner, scalar(std::sqrt(2.0 / M_PI)));
  Pat onePlus = opk(OpKind::Add)(opk(OpKind::Tanh)(arg), scalar(1.0));
  return halfProduct(x, onePlus);
}

// -- Linear ------------------------------------------------------------------------------

/// matmul(x, W) with W static and 2-D => linear(x, W^T).
LogicalResult matmulToLinear(const Match &m, Rewriter &rw) {
  Expr *e = m.rootExpr();
  Node *x = m.node("x"), *wn = m.node("w");
  const Tensor *w = xf::staticTensor(wn);
  const TensorNode *xt = floatTensor(x);
  auto ta = e->namedArg("transpose_a"), tb = e->namedArg("transpose_b");
  auto flag = [](const std::optional<ArgRef> &f) -> std::optional<bool> {
    if (!f)
      return false;
    if (!f->isConst() || !f->scalar().isBool())
      return std::nullopt;
    return f->scalar().getBool();
  };
  auto fa = flag(ta), fb = flag(tb);
  if (!w || w->rank() != 2 || w->dtype() != DType::Float32 || !xt || xt->shape()->size() < 2 ||
      !fa || *fa || !fb || !floatTensor(e->output(0)))
    return failure();
  // linear wants (out, in); matmul without transpose_b has (in, out).
  Node *weight = wn;
  if (!*fb)
    weight = rw.constant(w->permuted({1, 0}).contiguous(), wn->name().str() + "_t");
  Node *y = rw.callFunction(tmg::op(OpKind::Linear), {x, weight}, {{"bias", Arg::none()}});
  if (!sameFloatShape(y, e->output(0)))
    return failure();
  return replaceRoot(m, rw, y);
}

/// linear(x, W) + b, b static with one entry per output feature.
LogicalResult linearBias(const Match &m, Rewriter &rw) {
  Expr *lin = m.expr("lin");
  Node *bn = m.node("b");
  const Tensor *b = xf::staticTensor(bn);
  const TensorNode *out = floatTensor(lin ? lin->output(0) : nullptr);
  if (!lin || !isNoneArg(lin, "bias") || !b || b->dtype() != DType::Float32 || !out ||
      out->shape()->empty() || !isKnownDim(out->shape()->back()) ||
      !sameFloatShape(lin->output(0), m.rootExpr()->output(0)))
    return failure();
  int64_t features = out->shape()->back();
  if (b->numel() != features || (b->rank() > 0 && b->shape().back() != features))
    return failure();
  Node *bias = bn;
  if (b->rank() != 1)
    bias = rw.constant(b->reshaped({features}), bn->name());
  std::vector<KwArg> kw = {{"bias", bias}};
  if (auto cm = lin->namedArg("compute_mode"); cm && cm->isConst())
    kw.push_back({"compute_mode", Arg(cm->scalar())});
  Node *y = rw.callFunction(tmg::op(OpKind::Linear), {m.node("x"), m.node("w")}, std::move(kw));
  return replaceRoot(m, rw, y);
}

// -- Layer norm --------------------------------------------------------------------------

/// True when mean expr `e` reduces the last axis of a rank-`r` input with
/// keepdims.
bool meanOverLastAxis(const Expr *e, size_t r) {
  auto axis = e->namedArg("axis");
  auto keep = e->namedArg("keepdims");
  if (!axis || !keep || !keep->isConst() || !keep->scalar().isBool() || !keep->scalar().getBool())
    return false;
  auto ax = intsOf(axis->def);
  return ax && ax->size() == 1 && ((*ax)[0] == int64_t(r) - 1 || (*ax)[0] == -1);
}

/// The normalisation core => layer_norm(x, (D,), eps) without weight/bias.
LogicalResult layerNormCore(const Match &m, Rewriter &rw) {
  Node *x = m.node("x");
  const TensorNode *xt = floatTensor(x);
  auto eps = scalarValue(m.node("eps"), m.literal("eps"));
  if (!xt || xt->shape()->empty() || !isKnownDim(xt->shape()->back()) || !eps || !(*eps >= 0) ||
      !sameFloatShape(x, m.rootExpr()->output(0)))
    return failure();
  size_t r = xt->shape()->size();
  if (!meanOverLastAxis(m.expr("mean"), r) || !meanOverLastAxis(m.expr("var"), r))
    return failure();
  Node *y = rw.callFunction(tmg::op(OpKind::LayerNorm), {x, Arg::ints({xt->shape()->back()})},
                            {{"affine", true},
                             {"weight", Arg::none()},
                             {"bias", Arg::none()},
                             {"eps", *eps}});
  return replaceRoot(m, rw, y);
}

/// `p` of the normalized shape `ns`: the node itself when its shape is
/// exactly `ns`, a reshaped Constant when it is static with leading 1s.
Node *affineParam(Rewriter &rw, Node *p, const Shape &ns) {
  if (const TensorNode *t = floatTensor(p); t && *t->shape() == ns)
    return p;
  const Tensor *s = xf::staticTensor(p);
  if (!s || s->dtype() != DType::Float32 || s->numel() != shapeNumel(ns) ||
      s->rank() < ns.size() || s->shape().take_back(ns.size()) != llvm::ArrayRef<int64_t>(ns))
    return nullptr;
  return rw.constant(s->reshaped(ns), p->name());
}

/// layer_norm(x) * w => layer_norm(x, w); layer_norm(x, w) + b =>
/// layer_norm(x, w, b) (a missing weight becomes ones).
RewriteFn layerNormAffine(bool bias) {
  return [bias](const Match &m, Rewriter &rw) -> LogicalResult {
    Expr *ln = m.expr("ln");
    auto nsArg = ln ? ln->namedArg("normalized_shape") : std::nullopt;
    auto ns = nsArg ? intsOf(nsArg->def) : std::nullopt;
    auto eps = ln ? numberArg(ln, "eps", 1e-5) : std::nullopt;
    auto affine = ln ? ln->namedArg("affine") : std::nullopt;
    bool isAffine = !affine || (affine->isConst() && affine->scalar().isBool() &&
                                affine->scalar().getBool());
    if (!ln || !ns || !eps || !isAffine || !isNoneArg(ln, "bias") ||
        (!bias && !isNoneArg(ln, "weight")) ||
        !sameFloatShape(ln->output(0), m.rootExpr()->output(0)))
      return failure();
    Shape s(ns->begin(), ns->end());
    Node *p = affineParam(rw, m.node("p"), s);
    if (!p)
      return failure();
    Arg w = Arg::none(), b = Arg::none();
    if (!bias) {
      w = p;
    } else {
      auto wa = ln->namedArg("weight");
      w = wa && wa->node() ? Arg(wa->node()) : Arg(rw.constant(Tensor::full(s, 1.0), "ones"));
      b = p;
    }
    Node *y = rw.callFunction(tmg::op(OpKind::LayerNorm), {m.node("x"), Arg::ints(*ns)},
                              {{"affine", true}, {"weight", w}, {"bias", b}, {"eps", *eps}});
    return replaceRoot(m, rw, y);
  };
}

void addLayerNorm(PatternSet &set) {
  Pat x = any("x");
  Pat mean = opk(OpKind::Mean)(x).bind("mean");
  Pat d = opk(OpKind::Sub)(x, mean).ordered();
  Pat square = opk(OpKind::Pow)(d, scalar(2.0)).ordered() | opk(OpKind::Mul)(d, d);
  Pat var = opk(OpKind::Mean)(square).bind("var");
  Pat shifted = opk(OpKind::Add)(var, any("eps"));
  Pat core = opk(OpKind::Div)(d, opk(OpKind::Sqrt)(shifted)).ordered() |
             opk(OpKind::Mul)(d, opk(OpKind::Rsqrt)(shifted));
  set.add("layer-norm", Pattern(core), layerNormCore, 2);
  Pat ln = opk(OpKind::LayerNorm)(any("x")).prefix().bind("ln");
  set.add("layer-norm-weight", Pattern(opk(OpKind::Mul)(ln, any("p"))), layerNormAffine(false));
  set.add("layer-norm-bias", Pattern(opk(OpKind::Add)(ln, any("p"))), layerNormAffine(true));
}

} // namespace

void CanonicalizeOnnxPass::populate(PatternSet &set) const {
  for (OpKind k : {OpKind::Add, OpKind::Sub, OpKind::Mul, OpKind::Div})
    set.add(fmt::format("scalar-{}", tmg::op(k).name().str()),
            Pattern(opk(k)(any("a"), any("b")).ordered()),
            [k](const Match &m, Rewriter &rw) { return scalarOperand(m, rw, k); });
  set.add("clip-relu", Pattern(opk(OpKind::Clip)(any("x"))), clipToRelu);
  Pat x = any("x");
  Pat hs = (opk(OpKind::HardSigmoid)(x) | opk(OpKind::Hsigmoid)(x)).bind("hs");
  set.add("hardswish", Pattern(opk(OpKind::Mul)(x, hs)), hardswish, 2);
  // clip(x + 3, 0, 6) is a relu6 by then: the clip comes first in the graph.
  Pat gate = opk(OpKind::Relu6)(opk(OpKind::Add)(x, scalar(3.0)));
  Pat mul = opk(OpKind::Mul), div = opk(OpKind::Div);
  set.add("hardswish-relu6",
          Pattern(div(mul(x, gate), scalar(6.0)).ordered() | mul(mul(x, gate), scalar(1.0 / 6.0)) |
                  mul(x, div(gate, scalar(6.0)).ordered()) | mul(x, mul(gate, scalar(1.0 / 6.0)))),
          unaryOf(OpKind::Hswish), 2);
  set.add("silu", Pattern(opk(OpKind::Mul)(x, opk(OpKind::Sigmoid)(x))), unaryOf(OpKind::Silu),
          2);
  set.add("gelu-erf", Pattern(geluErf(x)), unaryOf(OpKind::Gelu), 3);
  set.add("gelu-tanh", Pattern(geluTanh(x)), unaryOf(OpKind::GeluTanh), 3);
  set.add("matmul-linear",
          Pattern(opk(OpKind::Matmul)(any("x"), any("w")).ordered()), matmulToLinear);
  set.add("linear-bias",
          Pattern(opk(OpKind::Add)(opk(OpKind::Linear)(any("x"), any("w")).bind("lin"),
                                   any("b"))),
          linearBias, 2);
  addLayerNorm(set);
}

} // namespace tmg
