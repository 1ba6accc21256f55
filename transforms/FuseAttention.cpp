//===- FuseAttention.cpp - matmul-softmax-matmul => attention -------------===//
//
// matmul(softmax(matmul(q, k^T) [* c | / c], axis=-1), v), q optionally
// `q * c` (the scale PyTorch's exports put on the query), becomes one
// `nn.scaled_dot_product_attention(q, k, v, scale)` call, the scales
// multiplied into `scale`. k^T is `matmul`'s transpose_b flag, or a
// transpose whose last two axes swapped give k (k is then a transpose of
// the same input, or that input itself), or any other value (k is its
// transpose). Float32 operands of rank >= 2 only; every intermediate must
// have no other use. The runtime runs the op as one kernel that never
// writes out the scores (runtime/Attention.cpp).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

namespace tmg {

namespace {

using namespace pat;

/// The static rank of float32 tensor `n`, or -1.
int64_t float32Rank(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  if (!t || !t->shape() || t->dtype() != DType::Float32)
    return -1;
  return int64_t(t->shape()->size());
}

/// A literal number or one-element float Constant, else nullopt.
std::optional<double> scalarOf(const Match &m, llvm::StringRef name) {
  if (const TreeDef *lit = m.literal(name))
    return lit->isConst() && lit->value().isNumber()
               ? std::optional(lit->value().toDouble())
               : std::nullopt;
  const Tensor *t = xf::constantTensor(m.node(name));
  if (!t || t->numel() != 1 || !isFloat(t->dtype()))
    return std::nullopt;
  return t->contiguous().at(0);
}

/// Whether matmul `e` sets its boolean flag `name` (`@` has none).
bool flagSet(const Expr *e, const char *name) {
  auto a = e->namedArg(name);
  return a && a->isConst() && a->scalar().isBool() && a->scalar().getBool();
}

/// A plain matmul: math.matmul without the transpose_a flag, or `@`.
bool plainMatmul(const Expr *e, bool allowTransposeB) {
  return !flagSet(e, "transpose_a") &&
         (allowTransposeB || !flagSet(e, "transpose_b"));
}

bool soleUse(const Node *n, const llvm::DenseSet<const Node *> &outputs) {
  return n->numUsers() == 1 && !outputs.count(n);
}

} // namespace

void FuseAttentionPass::populate(PatternSet &set) const {
  auto mm = [](const Pat &a, const Pat &b) {
    return fn("matmul")(a, b).prefix() | method("__matmul__")(a, b);
  };
  Pat scores = mm(any("a"), any("b")).bind("scores");
  Pat scaled = (method("__mul__")(scores, any("c")).bind("scale") |
                method("__truediv__")(scores, any("c")).bind("scale") | scores);
  Pat probs = fn("softmax")(scaled).prefix().bind("probs");
  Pat root = mm(probs, any("v")).bind("out");
  set.add(
      "attention", Pattern(root),
      [](const Match &m, Rewriter &rw) -> LogicalResult {
        Expr *out = m.expr("out"), *sm = m.expr("probs"),
             *qk = m.expr("scores");
        Expr *sc = m.expr("scale");
        if (!out || !sm || !qk || !plainMatmul(out, false) ||
            !plainMatmul(qk, true))
          return failure();
        auto outputs = xf::outputSet(rw.graph());
        Node *a = m.node("a"), *b = m.node("b"), *v = m.node("v");
        int64_t rs = float32Rank(qk->output(0));
        if (rs < 2 || float32Rank(a) < 2 || float32Rank(b) < 2 ||
            float32Rank(v) < 2 || !soleUse(qk->output(0), outputs) ||
            !soleUse(sm->output(0), outputs) ||
            (sc && !soleUse(sc->output(0), outputs)))
          return failure();
        auto axis = sm->namedArg("axis");
        if (!axis || !axis->isConst() || !axis->scalar().isInt() ||
            (axis->scalar().getInt() != -1 &&
             axis->scalar().getInt() != rs - 1))
          return failure();
        double scale = 1.0;
        if (sc) {
          auto c = scalarOf(m, "c");
          if (!c || *c == 0.0)
            return failure();
          scale = sc->opSchema()->kind() == OpKind::MTrueDiv ? 1.0 / *c : *c;
        }
        // The query: `q * c` folds c into the scale.
        Node *q = a;
        if (auto *mul = llvm::dyn_cast_or_null<CallMethod>(a->expr());
            mul && mul->opSchema() && mul->opSchema()->kind() == OpKind::MMul &&
            soleUse(a, outputs)) {
          auto self = mul->namedArg("self"), value = mul->namedArg("value");
          const TreeDef *lit =
              value && value->isConst() ? &value->def : nullptr;
          if (self && self->node() && lit && lit->value().isNumber() &&
              float32Rank(self->node()) >= 2) {
            q = self->node();
            scale *= lit->value().toDouble();
          }
        }
        // The key: b is k^T unless transpose_b is set.
        Node *k = b;
        if (!flagSet(qk, "transpose_b")) {
          size_t rb = size_t(float32Rank(b));
          std::vector<int64_t> perm;
          Node *src = b;
          auto *tr = llvm::dyn_cast_or_null<CallFunction>(b->expr());
          if (tr && tr->func().kind() == OpKind::Transpose) {
            auto p = tr->namedArg("pattern");
            if (p && p->def.numLeaves() == 0 && p->def.numChildren() == rb) {
              for (size_t i = 0; i < rb; ++i) {
                const TreeDef &d = p->def.child(i);
                if (!d.isConst() || !d.value().isInt())
                  return failure();
                perm.push_back(d.value().getInt());
              }
              src = tr->namedArg("inp")->node();
            }
          }
          if (perm.empty())
            for (size_t i = 0; i < rb; ++i)
              perm.push_back(int64_t(i));
          std::swap(perm[rb - 1], perm[rb - 2]);
          bool identity = true;
          for (size_t i = 0; i < rb; ++i)
            identity &= perm[i] == int64_t(i);
          rw.setInsertionPoint(qk);
          k = identity ? src
                       : rw.callFunction(tmg::op(OpKind::Transpose),
                                         {src, Arg::ints(perm)});
        }
        rw.setInsertionPoint(out);
        Node *y = rw.callFunction(tmg::op(OpKind::ScaledDotProductAttention),
                                  {q, k, v, scale});
        return rw.replaceAllUsesWith(out->output(0), y);
      });
}

} // namespace tmg
