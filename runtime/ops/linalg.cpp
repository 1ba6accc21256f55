//===- linalg.cpp - Lowering of the linear-algebra family -------*- C++ -*-===//
//
// linear (x @ w^T + b), matmul as a function (with its transpose flags) and
// as the `@` method, einsum (as batched matmuls) and det, whose kernels
// live here; linear_act is lowered in FusedOps.cpp, and the kernel of
// scaled_dot_product_attention is in Attention.cpp.
//
//===----------------------------------------------------------------------===//
#include "../FusedOps.h"
#include "../Internal.h"
#include "KernelUtil.h"
#include "Lowering.h"
#include "../Gemm.h"

#include <algorithm>
#include <cmath>

#include <llvm/ADT/STLExtras.h>

namespace tmg::rt {

using namespace detail;

// ---- Kernels ------------------------------------------------------------------

namespace {

/// Einsum labels: letters 0..51, the axes "..." stands for from 64 on.
using Labels = std::vector<int>;
constexpr int kEllipsisLabel = 64;

int labelOf(char ch) {
  if (ch >= 'a' && ch <= 'z')
    return ch - 'a';
  if (ch >= 'A' && ch <= 'Z')
    return 26 + (ch - 'A');
  return -1;
}

/// The ASCII order of a letter label (NumPy's implicit output order).
int asciiOf(int l) { return l < 26 ? 'a' + l : 'A' + (l - 26); }

/// The labels of `term`, its "..." standing for `ell` axes right-aligned
/// among `maxEll`.
Labels termLabels(llvm::StringRef eq, llvm::StringRef term, int64_t ell, int64_t maxEll) {
  Labels out;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == ' ')
      continue;
    if (term.substr(i).startswith("...")) {
      for (int64_t j = 0; j < ell; ++j)
        out.push_back(kEllipsisLabel + int(maxEll - ell + j));
      i += 2;
      continue;
    }
    int l = labelOf(term[i]);
    if (l < 0)
      raise("einsum: '{}' in equation '{}' is not a letter", term[i], eq.str());
    out.push_back(l);
  }
  return out;
}

struct EinsumSpec {
  std::vector<Labels> ins;
  Labels out;
};

/// Implicit output: the "..." axes, then the letters used once, in order.
Labels implicitOutput(const std::vector<Labels> &ins, int64_t maxEll) {
  Labels out;
  for (int64_t j = 0; j < maxEll; ++j)
    out.push_back(kEllipsisLabel + int(j));
  std::vector<int> count(kEllipsisLabel, 0), once;
  for (const Labels &l : ins)
    for (int x : l)
      if (x < kEllipsisLabel)
        ++count[size_t(x)];
  for (int x = 0; x < kEllipsisLabel; ++x)
    if (count[size_t(x)] == 1)
      once.push_back(x);
  std::sort(once.begin(), once.end(), [](int a, int b) { return asciiOf(a) < asciiOf(b); });
  out.insert(out.end(), once.begin(), once.end());
  return out;
}

EinsumSpec parseEinsum(llvm::StringRef eq, llvm::ArrayRef<Tensor> xs) {
  auto [lhs, rhs] = eq.split("->");
  llvm::SmallVector<llvm::StringRef, 4> terms;
  lhs.split(terms, ',');
  if (terms.size() != xs.size())
    raise("einsum: equation '{}' has {} operands, got {} tensors", eq.str(), terms.size(),
          xs.size());
  std::vector<int64_t> ell(xs.size());
  int64_t maxEll = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    int64_t letters = llvm::count_if(terms[i], [](char ch) { return labelOf(ch) >= 0; });
    ell[i] = int64_t(xs[i].rank()) - letters;
    if (ell[i] < 0 || (!terms[i].contains("...") && ell[i] != 0))
      raise("einsum: term '{}' does not fit operand {} of shape {}", terms[i].str(), i,
            shapeStr(xs[i].shape()));
    maxEll = std::max(maxEll, ell[i]);
  }
  EinsumSpec s;
  for (size_t i = 0; i < xs.size(); ++i)
    s.ins.push_back(termLabels(eq, terms[i], ell[i], maxEll));
  if (!eq.contains("->"))
    s.out = implicitOutput(s.ins, maxEll);
  else
    s.out = termLabels(eq, rhs, maxEll, maxEll);
  for (size_t i = 0; i < s.out.size(); ++i) {
    bool used = llvm::any_of(s.ins, [&](const Labels &l) { return llvm::is_contained(l, s.out[i]); });
    if (!used || llvm::is_contained(llvm::ArrayRef<int>(s.out).take_front(i), s.out[i]))
      raise("einsum: output '{}' of equation '{}' repeats a label or has one no input has",
            rhs.str(), eq.str());
  }
  return s;
}

/// An operand with one label per axis.
struct Labeled {
  Tensor t;
  Labels l;
};

/// Repeated labels of one operand reduced to their diagonal (a view).
void takeDiagonal(Labeled &x) {
  Labels u;
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t d = 0; d < x.l.size(); ++d) {
    auto it = llvm::find(u, x.l[d]);
    if (it == u.end()) {
      u.push_back(x.l[d]);
      shape.push_back(x.t.dim(d));
      strides.push_back(x.t.strides()[d]);
      continue;
    }
    size_t j = size_t(it - u.begin());
    if (shape[j] != x.t.dim(d))
      raise("einsum: a repeated label has sizes {} and {}", shape[j], x.t.dim(d));
    strides[j] += x.t.strides()[d];
  }
  if (u.size() != x.l.size())
    x = {x.t.asStrided(shape, strides, x.t.storageOffset()), u};
}

/// Sums the axes whose label `keep` rejects.
template <typename Keep> void sumOut(Labeled &x, Keep keep) {
  std::vector<int64_t> axes;
  Labels rest;
  for (size_t d = 0; d < x.l.size(); ++d)
    if (keep(x.l[d]))
      rest.push_back(x.l[d]);
    else
      axes.push_back(int64_t(d));
  if (axes.empty())
    return;
  x = {sum(x.t.contiguous(), axes), rest};
}

int64_t sizeOf(const Labeled &x, int l) {
  auto it = llvm::find(x.l, l);
  return it == x.l.end() ? 0 : x.t.dim(size_t(it - x.l.begin()));
}

/// Permuted to `order` (labels of x) and reshaped to the products of
/// the three groups' sizes.
Tensor grouped(const Labeled &x, const Labels &g0, const Labels &g1, const Labels &g2) {
  std::vector<int64_t> perm;
  int64_t n[3] = {1, 1, 1};
  const Labels *gs[3] = {&g0, &g1, &g2};
  for (int g = 0; g < 3; ++g)
    for (int l : *gs[g]) {
      perm.push_back(llvm::find(x.l, l) - x.l.begin());
      n[g] *= sizeOf(x, l);
    }
  return x.t.permuted(perm).contiguous().reshaped({n[0], n[1], n[2]});
}

/// Shared labels of size 1 in one operand broadcast to the other's size.
void broadcastShared(Labeled &a, const Labeled &b) {
  Shape s(a.t.shape().begin(), a.t.shape().end());
  for (size_t d = 0; d < a.l.size(); ++d) {
    int64_t o = sizeOf(b, a.l[d]);
    if (o && o != s[d] && s[d] == 1)
      s[d] = o;
    else if (o && o != s[d])
      raise("einsum: a label has sizes {} and {}", s[d], o);
  }
  a.t = a.t.expanded(s);
}

/// a and b contracted by one batched matmul: the labels both have that
/// `keep` accepts are batch axes, the other shared ones are summed.
template <typename Keep> Labeled contract(Labeled a, Labeled b, Keep keep) {
  sumOut(a, [&](int l) { return keep(l) || llvm::is_contained(b.l, l); });
  sumOut(b, [&](int l) { return keep(l) || llvm::is_contained(a.l, l); });
  broadcastShared(a, b);
  broadcastShared(b, a);
  Labels batch, red, ka, kb;
  for (int l : a.l)
    (llvm::is_contained(b.l, l) ? (keep(l) ? batch : red) : ka).push_back(l);
  for (int l : b.l)
    if (!llvm::is_contained(a.l, l))
      kb.push_back(l);
  Tensor y = matmul(grouped(a, batch, ka, red), grouped(b, batch, red, kb));
  Labeled out{Tensor(), batch};
  out.l.insert(out.l.end(), ka.begin(), ka.end());
  out.l.insert(out.l.end(), kb.begin(), kb.end());
  Shape s;
  for (int l : out.l)
    s.push_back(std::max(sizeOf(a, l), sizeOf(b, l)));
  out.t = y.reshaped(s);
  return out;
}

Tensor einsumFloat(const EinsumSpec &s, llvm::ArrayRef<Tensor> xs) {
  std::vector<Labeled> ops;
  for (size_t i = 0; i < xs.size(); ++i) {
    ops.push_back({xs[i], s.ins[i]});
    takeDiagonal(ops.back());
  }
  // A label is kept while the output or an operand not yet folded has it.
  auto keeper = [&](size_t next) {
    return [&s, &ops, next](int l) {
      if (llvm::is_contained(s.out, l))
        return true;
      for (size_t j = next; j < ops.size(); ++j)
        if (llvm::is_contained(ops[j].l, l))
          return true;
      return false;
    };
  };
  Labeled cur = ops[0];
  sumOut(cur, [&](int l) { return keeper(1)(l); });
  for (size_t i = 1; i < ops.size(); ++i)
    cur = contract(cur, ops[i], keeper(i + 1));
  std::vector<int64_t> perm;
  for (int l : s.out)
    perm.push_back(llvm::find(cur.l, l) - cur.l.begin());
  return cur.t.permuted(perm).contiguous();
}

} // namespace

Tensor einsum(llvm::StringRef equation, llvm::ArrayRef<Tensor> operands) {
  if (operands.empty())
    raise("einsum: no operands");
  // The product of all operands' dtypes, float64 computed in itself and
  // 16-bit floats in float32.
  DType dt = operands[0].defined() ? operands[0].dtype() : DType::Float32;
  for (const Tensor &x : operands) {
    requireDef("einsum", x);
    if (!isFloat(x.dtype()))
      raise("einsum: operands must be floating point (float32, float64, float16 or "
            "bfloat16), got {}",
            dtypeName(x.dtype()).str());
    dt = promoteTypes(dt, x.dtype());
  }
  DType ct = floatComputeType(dt);
  std::vector<Tensor> xs;
  for (const Tensor &x : operands)
    xs.push_back(asDType(x, ct));
  Tensor y = einsumFloat(parseEinsum(equation, xs), xs);
  return dt == ct ? y : cast(y, dt);
}

namespace {

/// The determinant of the n x n row-major matrix m (overwritten).
double luDet(double *m, int64_t n) {
  double d = 1.0;
  for (int64_t c = 0; c < n; ++c) {
    int64_t p = c;
    for (int64_t r = c + 1; r < n; ++r)
      if (std::fabs(m[r * n + c]) > std::fabs(m[p * n + c]))
        p = r;
    if (m[p * n + c] == 0.0)
      return 0.0;
    if (p != c) {
      std::swap_ranges(m + p * n, m + p * n + n, m + c * n);
      d = -d;
    }
    d *= m[c * n + c];
    for (int64_t r = c + 1; r < n; ++r) {
      double f = m[r * n + c] / m[c * n + c];
      for (int64_t k = c; k < n; ++k)
        m[r * n + k] -= f * m[c * n + k];
    }
  }
  return d;
}

} // namespace

namespace {

/// The determinants of `count` n x n matrices of x into y, both of dtype T,
/// each computed in double.
template <typename T> void detInto(const Tensor &x, Tensor &y, int64_t n, int64_t count) {
  const T *px = x.data<T>();
  T *py = y.data<T>();
  parallelFor(count, std::max<int64_t>(1, 4096 / std::max<int64_t>(n * n * n, 1)),
              [&](int64_t b0, int64_t b1) {
                std::vector<double> m(size_t(n * n));
                for (int64_t b = b0; b < b1; ++b) {
                  std::copy(px + b * n * n, px + (b + 1) * n * n, m.begin());
                  py[b] = T(luDet(m.data(), n));
                }
              });
}

} // namespace

Tensor det(const Tensor &x0) {
  requireDef("det", x0);
  if (x0.rank() < 2 || x0.dim(x0.rank() - 1) != x0.dim(x0.rank() - 2))
    raise("det: input must hold square matrices in its last two axes, got {}",
          shapeStr(x0.shape()));
  if (!isFloat(x0.dtype()))
    raise("det: input must be floating point, got {}", dtypeName(x0.dtype()).str());
  DType ct = floatComputeType(x0.dtype());
  Tensor x = asDType(x0, ct).contiguous();
  int64_t n = x.shape().back(), count = shapeNumel(x.shape().drop_back(2));
  Tensor y = Tensor::empty(x.shape().drop_back(2), ct);
  if (ct == DType::Float64)
    detInto<double>(x, y, n, count);
  else
    detInto<float>(x, y, n, count);
  return x0.dtype() == ct ? y : cast(y, x0.dtype());
}

// ---- Lowering -----------------------------------------------------------------

namespace {

StepFn lowerLinear(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src x = a.tensor("inp"), w = a.tensor("weight"), b = a.optTensor("bias");
  uint32_t o = outSlot(e, ctx);
  // A weight that persists across runs is packed once for the micro-kernel.
  auto pack = w.slot < 0 || stableTensorArg(e, "weight")
                  ? std::make_shared<detail::LinearWeightPack>()
                  : nullptr;
  std::optional<LinearResidual> res;
  if (auto it = ctx.linearResiduals.find(&e); it != ctx.linearResiduals.end())
    res = it->second;
  return [x, w, b, o, pack, res](Value *s, RunState &st) {
    const Tensor &xt = x.get(s);
    Tensor wt = w.get(s), bt = b.defined() ? b.get(s) : Tensor();
    auto packed = pack ? pack->get(wt) : nullptr;
    s[o].tensor = linearWithResidual(
        res ? &*res : nullptr, s, st, xt, wt, bt, [&](const Tensor &addend) {
          return detail::linearWithPack(xt, wt, bt, Activation::None,
                                        packed.get(), {}, addend);
        });
  };
}

StepFn lowerMatmul(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  bool method = a.isMethod();
  bool ta = !method && a.boolean("transpose_a"), tb = !method && a.boolean("transpose_b");
  Src x = method ? a.tensor("self") : a.tensor("inp1");
  Src y = method ? a.tensor("value") : a.tensor("inp2");
  // A B that persists across runs (an exported linear layer's weight) is
  // packed once for the micro-kernel, as linear's weight is.
  if (ta || tb ||
      !(y.slot < 0 || stableTensorArg(e, method ? "value" : "inp2")))
    return binaryStep(x, y, outSlot(e, ctx),
                      [ta, tb](const Tensor &p, const Tensor &q) {
                        return matmul(p, q, ta, tb);
                      });
  auto pack = std::make_shared<detail::LinearWeightPack>();
  return binaryStep(
      x, y, outSlot(e, ctx), [pack](const Tensor &p, const Tensor &q) {
        Tensor packed = detail::matmulPackedB(p, q, *pack);
        return packed.defined() ? packed : matmul(p, q, false, false);
      });
}

StepFn lowerEinsum(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  std::string eq = a.string("equation");
  std::vector<Src> xs = a.list("operands");
  uint32_t o = outSlot(e, ctx);
  return [eq, xs, o](Value *s, RunState &) {
    std::vector<Tensor> ts;
    for (const Src &x : xs)
      ts.push_back(x.get(s));
    s[o].tensor = einsum(eq, ts);
  };
}

StepFn lowerAttention(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  Src q = a.tensor("query"), k = a.tensor("key"), v = a.tensor("value");
  std::optional<double> scale;
  if (!a.isNone("scale"))
    scale = a.number("scale");
  uint32_t o = outSlot(e, ctx);
  return [q, k, v, scale, o](Value *s, RunState &) {
    s[o].tensor =
        scaledDotProductAttention(q.get(s), k.get(s), v.get(s), scale);
  };
}

StepFn lowerDet(const Expr &e, OpKind, LowerContext &ctx) {
  Args a(e, ctx);
  return unaryStep(a.tensor("inp"), outSlot(e, ctx), [](const Tensor &x) { return det(x); });
}

} // namespace

void registerLinalgLowering(LowerTable &t) {
  t.add("linalg", {OpKind::Einsum}, lowerEinsum);
  t.add("linalg", {OpKind::Det}, lowerDet);
  t.add("linalg", {OpKind::ScaledDotProductAttention}, lowerAttention);
  t.add("linalg", {OpKind::Linear}, lowerLinear);
  t.add("linalg", {OpKind::LinearAct}, lowerLinearAct);
  t.add("linalg", {OpKind::Matmul, OpKind::MMatmul}, lowerMatmul);
}

} // namespace tmg::rt
