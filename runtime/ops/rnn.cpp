//===- rnn.cpp - Lowering of the recurrent family ---------------*- C++ -*-===//
//
// ONNX RNN, GRU and LSTM, and their kernel. Per direction, one GEMM computes
// X W^T plus the biases that do not depend on the state for every time
// step at once; each step then computes H R^T with one GEMM over the batch
// and applies the gates row by row. A sequence shorter than the input
// (sequence_lens) stops early: its later outputs are zero and its final
// state is the one after its last step (zero for a length of 0); the
// reverse direction runs each sequence from its own last step.
//
//===----------------------------------------------------------------------===//
#include "../Internal.h"
#include "KernelUtil.h"
#include "Lowering.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <memory>

namespace tmg::rt {

using namespace detail;

// ---- Activations --------------------------------------------------------------

namespace {

enum class ActKind : uint8_t {
  Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu,
  Softsign, Softplus
};

struct ActInfo {
  const char *name; ///< ONNX's spelling
  ActKind kind;
  bool hasAlpha, hasBeta;
  double alpha, beta; ///< the defaults of the ONNX operator of that name
};

constexpr ActInfo kActs[] = {
    {"Sigmoid", ActKind::Sigmoid, false, false, 0, 0},
    {"Tanh", ActKind::Tanh, false, false, 0, 0},
    {"Relu", ActKind::Relu, false, false, 0, 0},
    {"Affine", ActKind::Affine, true, true, 1.0, 0.0},
    {"LeakyRelu", ActKind::LeakyRelu, true, false, 0.01, 0},
    {"ThresholdedRelu", ActKind::ThresholdedRelu, true, false, 1.0, 0},
    {"ScaledTanh", ActKind::ScaledTanh, true, true, 1.0, 1.0},
    {"HardSigmoid", ActKind::HardSigmoid, true, true, 0.2, 0.5},
    {"Elu", ActKind::Elu, true, false, 1.0, 0},
    {"Softsign", ActKind::Softsign, false, false, 0, 0},
    {"Softplus", ActKind::Softplus, false, false, 0, 0},
};

const ActInfo &actInfo(llvm::StringRef name) {
  for (const ActInfo &a : kActs)
    if (name.equals_insensitive(a.name))
      return a;
  raise("unknown recurrent activation '{}' (expected Sigmoid, Tanh, Relu, Affine, LeakyRelu, "
        "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign or Softplus)",
        name.str());
}

/// An activation resolved for the kernel.
template <typename T> struct Act {
  ActKind kind;
  T alpha, beta;
};

/// p[0, n) = act(clip(p[0, n))); clip <= 0 means no clipping.
template <typename T> void activate(const Act<T> &a, T clip, T *p, int64_t n) {
  if (clip > 0)
    for (int64_t i = 0; i < n; ++i)
      p[i] = std::min(std::max(p[i], -clip), clip);
  const T al = a.alpha, be = a.beta;
  switch (a.kind) {
  case ActKind::Sigmoid:
    for (int64_t i = 0; i < n; ++i)
      p[i] = T(1) / (T(1) + std::exp(-p[i]));
    break;
  case ActKind::Tanh:
    for (int64_t i = 0; i < n; ++i)
      p[i] = std::tanh(p[i]);
    break;
  case ActKind::Relu:
    for (int64_t i = 0; i < n; ++i)
      p[i] = std::max(p[i], T(0));
    break;
  case ActKind::Affine:
    for (int64_t i = 0; i < n; ++i)
      p[i] = al * p[i] + be;
    break;
  case ActKind::LeakyRelu:
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] >= T(0) ? p[i] : al * p[i];
    break;
  case ActKind::ThresholdedRelu:
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] > al ? p[i] : T(0);
    break;
  case ActKind::ScaledTanh:
    for (int64_t i = 0; i < n; ++i)
      p[i] = al * std::tanh(be * p[i]);
    break;
  case ActKind::HardSigmoid:
    for (int64_t i = 0; i < n; ++i)
      p[i] = std::min(std::max(al * p[i] + be, T(0)), T(1));
    break;
  case ActKind::Elu:
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] >= T(0) ? p[i] : al * (std::exp(p[i]) - T(1));
    break;
  case ActKind::Softsign:
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] / (T(1) + std::abs(p[i]));
    break;
  case ActKind::Softplus:
    for (int64_t i = 0; i < n; ++i)
      p[i] = p[i] > T(0) ? p[i] + std::log1p(std::exp(-p[i])) : std::log1p(std::exp(p[i]));
    break;
  }
}

} // namespace

RnnActivation rnnActivation(llvm::StringRef name, std::optional<double> alpha,
                            std::optional<double> beta) {
  const ActInfo &a = actInfo(name);
  return RnnActivation{a.name, alpha.value_or(a.alpha), beta.value_or(a.beta)};
}

bool rnnActivationHasAlpha(llvm::StringRef name) { return actInfo(name).hasAlpha; }
bool rnnActivationHasBeta(llvm::StringRef name) { return actInfo(name).hasBeta; }

int64_t rnnActivationCount(RnnCell cell) {
  return cell == RnnCell::Rnn ? 1 : cell == RnnCell::Gru ? 2 : 3;
}

// ---- Kernel -------------------------------------------------------------------

namespace {

const char *cellName(RnnCell c) {
  return c == RnnCell::Rnn ? "rnn" : c == RnnCell::Gru ? "gru" : "lstm";
}

int64_t gateCount(RnnCell c) { return c == RnnCell::Rnn ? 1 : c == RnnCell::Gru ? 3 : 4; }

/// C (m x n) = A (m x k) * B^T (B n x k) on the calling thread.
void gemmBT(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *b,
            int64_t ldb, float *c, int64_t ldc) {
  sgemmSerial(false, true, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemmBT(int64_t m, int64_t n, int64_t k, const double *a, int64_t lda, const double *b,
            int64_t ldb, double *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      std::fill_n(c + i * ldc, n, 0.0);
    return;
  }
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0, a, int(lda),
              b, int(ldb), 0.0, c, int(ldc));
}
/// The same product split over threads where that pays (float32).
void gemmBTParallel(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                    const float *b, int64_t ldb, float *c, int64_t ldc) {
  parallelSgemm(false, true, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
void gemmBTParallel(int64_t m, int64_t n, int64_t k, const double *a, int64_t lda,
                    const double *b, int64_t ldb, double *c, int64_t ldc) {
  gemmBT(m, n, k, a, lda, b, ldb, c, ldc);
}

/// The checked sizes of one call.
struct RnnDims {
  int64_t seq, batch, input, hidden, gates, dirs;
};

/// The shape `want` of input `what`, or an error naming the op.
void requireShape(const char *op, const char *what, const Tensor &t,
                  llvm::ArrayRef<int64_t> want) {
  if (t.shape() != want)
    raise("{}: {} must have shape {}, got {}", op, what, shapeStr(want), shapeStr(t.shape()));
}

RnnDims checkInputs(const RnnParams &p, const Tensor &x, const Tensor &w, const Tensor &r,
                    const Tensor &b, const Tensor &lens, const Tensor &h0, const Tensor &c0,
                    const Tensor &pp) {
  const char *op = cellName(p.cell);
  requireDef(op, x);
  requireDef(op, w);
  requireDef(op, r);
  if (p.direction != "forward" && p.direction != "reverse" && p.direction != "bidirectional")
    raise("{}: direction must be forward, reverse or bidirectional, got '{}'", op, p.direction);
  if (x.rank() != 3 || w.rank() != 3 || r.rank() != 3)
    raise("{}: the input {}, weight {} and recurrent weight {} must be 3-d", op,
          shapeStr(x.shape()), shapeStr(w.shape()), shapeStr(r.shape()));
  RnnDims d;
  d.seq = p.batchFirst ? x.dim(1) : x.dim(0);
  d.batch = p.batchFirst ? x.dim(0) : x.dim(1);
  d.input = x.dim(2);
  d.dirs = p.direction == "bidirectional" ? 2 : 1;
  d.gates = gateCount(p.cell);
  d.hidden = p.hiddenSize > 0 ? p.hiddenSize : r.dim(2);
  int64_t gh = d.gates * d.hidden;
  requireShape(op, "the weight", w, {d.dirs, gh, d.input});
  requireShape(op, "the recurrent weight", r, {d.dirs, gh, d.hidden});
  if (b.defined())
    requireShape(op, "the bias", b, {d.dirs, 2 * gh});
  std::vector<int64_t> state = p.batchFirst ? std::vector<int64_t>{d.batch, d.dirs, d.hidden}
                                            : std::vector<int64_t>{d.dirs, d.batch, d.hidden};
  if (h0.defined())
    requireShape(op, "the initial h", h0, state);
  if (c0.defined())
    requireShape(op, "the initial c", c0, state);
  if (pp.defined())
    requireShape(op, "the peephole weight", pp, {d.dirs, 3 * d.hidden});
  if (lens.defined()) {
    requireShape(op, "sequence_lens", lens, {d.batch});
    if (lens.dtype() != DType::Int32 && lens.dtype() != DType::Int64)
      raise("{}: sequence_lens must be int32 or int64, got {}", op, dtypeName(lens.dtype()).str());
  }
  return d;
}

/// The activations of every direction (rnnActivationCount per direction).
template <typename T>
std::vector<Act<T>> resolveActs(const RnnParams &p, int64_t dirs) {
  const char *op = cellName(p.cell);
  int64_t n = rnnActivationCount(p.cell);
  std::vector<RnnActivation> given = p.activations;
  if (given.empty()) {
    const char *defaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int64_t i = 0; i < n; ++i)
      given.push_back(rnnActivation(p.cell == RnnCell::Rnn ? "Tanh" : defaults[i]));
  }
  if (int64_t(given.size()) == n && dirs == 2) {
    std::vector<RnnActivation> one = given;
    given.insert(given.end(), one.begin(), one.end());
  }
  if (int64_t(given.size()) != n * dirs)
    raise("{}: {} activations given, expected {} per direction", op, p.activations.size(), n);
  std::vector<Act<T>> out;
  for (const RnnActivation &a : given)
    out.push_back(Act<T>{actInfo(a.name).kind, T(a.alpha), T(a.beta)});
  return out;
}

/// One call's data in the compute dtype T, and the recurrence over it.
template <typename T> struct Recurrence {
  const RnnParams &p;
  RnnDims d;
  const T *x, *w, *r, *bias, *h0, *c0, *peep;
  std::vector<int64_t> lens;
  std::vector<Act<T>> acts;
  T clip;
  T *y, *yh, *yc;

  int64_t gh() const { return d.gates * d.hidden; }
  /// The row of X (and of X W^T) of step t, batch entry b.
  int64_t xRow(int64_t t, int64_t b) const {
    return p.batchFirst ? b * d.seq + t : t * d.batch + b;
  }
  /// Offset of Y's hidden vector of step t, direction dir, batch entry b.
  int64_t yOff(int64_t t, int64_t dir, int64_t b) const {
    return (p.batchFirst ? (b * d.seq + t) * d.dirs + dir : (t * d.dirs + dir) * d.batch + b) *
           d.hidden;
  }
  /// Offset of a state vector (initial h and c, Y_h, Y_c).
  int64_t stateOff(int64_t dir, int64_t b) const {
    return (p.batchFirst ? b * d.dirs + dir : dir * d.batch + b) * d.hidden;
  }
  /// GRU with linear_before_reset: the recurrent bias of the h gate stays
  /// inside the reset product.
  bool lbr() const { return p.cell == RnnCell::Gru && p.linearBeforeReset; }

  /// xw (seq * batch rows of gh) = X W^T + the state-independent biases.
  void inputProducts(int64_t dir, T *xw) const {
    int64_t n = gh(), h = d.hidden;
    gemmBTParallel(d.seq * d.batch, n, d.input, x, d.input, w + dir * n * d.input, d.input, xw,
                   n);
    if (!bias)
      return;
    std::vector<T> sum(n);
    const T *wb = bias + dir * 2 * n, *rb = wb + n;
    for (int64_t j = 0; j < n; ++j)
      sum[j] = wb[j] + (lbr() && j >= 2 * h ? T(0) : rb[j]);
    int64_t rows = d.seq * d.batch;
    parallelFor(rows, std::max<int64_t>(1, ElementwiseGrain / std::max<int64_t>(n, 1)),
                [&](int64_t r0, int64_t r1) {
                  for (int64_t row = r0; row < r1; ++row) {
                    T *q = xw + row * n;
                    for (int64_t j = 0; j < n; ++j)
                      q[j] += sum[j];
                  }
                });
  }

  /// The steps of direction `dir` over xw.
  void run(int64_t dir, const T *xw) const {
    int64_t B = d.batch, H = d.hidden, n = gh();
    bool reverse = p.direction == "reverse" || dir == 1;
    const Act<T> *act = acts.data() + dir * rnnActivationCount(p.cell);
    const T *rw = r + dir * n * H;
    std::vector<T> h(B * H, T(0)), c(B * H, T(0)), hr(B * n, T(0)), g(B * n, T(0));
    for (int64_t b = 0; b < B; ++b) {
      if (h0)
        std::copy_n(h0 + stateOff(dir, b), H, h.data() + b * H);
      if (c0)
        std::copy_n(c0 + stateOff(dir, b), H, c.data() + b * H);
    }
    // GRU without linear_before_reset: (r . H) R_h^T, a second product.
    std::vector<T> rh, rhr;
    bool gru = p.cell == RnnCell::Gru, split = gru && !lbr();
    if (split) {
      rh.assign(B * H, T(0));
      rhr.assign(B * H, T(0));
    }
    int64_t steps = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
    for (int64_t s = 0; s < steps; ++s) {
      gemmBT(B, split ? 2 * H : n, H, h.data(), H, rw, H, hr.data(), n);
      for (int64_t b = 0; b < B; ++b) {
        if (s >= lens[b])
          continue;
        int64_t t = reverse ? lens[b] - 1 - s : s;
        const T *xr = xw + xRow(t, b) * n;
        T *gb = g.data() + b * n, *hb = h.data() + b * H, *cb = c.data() + b * H;
        const T *hrb = hr.data() + b * n;
        switch (p.cell) {
        case RnnCell::Rnn:
          rnnStep(act, xr, hrb, hb);
          break;
        case RnnCell::Lstm:
          lstmStep(dir, act, xr, hrb, gb, hb, cb);
          break;
        case RnnCell::Gru:
          if (split)
            gruGates(act, xr, hrb, gb, hb, rh.data() + b * H);
          else
            gruStep(dir, act, xr, hrb, gb, hb, nullptr);
          break;
        }
      }
      if (split) {
        gemmBT(B, H, H, rh.data(), H, rw + 2 * H * H, H, rhr.data(), H);
        for (int64_t b = 0; b < B; ++b)
          if (s < lens[b])
            gruStep(dir, act, xw + xRow(reverse ? lens[b] - 1 - s : s, b) * n, nullptr,
                    g.data() + b * n, h.data() + b * H, rhr.data() + b * H);
      }
      for (int64_t b = 0; b < B; ++b)
        if (s < lens[b])
          std::copy_n(h.data() + b * H, H, y + yOff(reverse ? lens[b] - 1 - s : s, dir, b));
    }
    for (int64_t b = 0; b < B; ++b) {
      bool any = lens[b] > 0;
      for (int64_t j = 0; j < H; ++j) {
        if (yh)
          yh[stateOff(dir, b) + j] = any ? h[b * H + j] : T(0);
        if (yc)
          yc[stateOff(dir, b) + j] = any ? c[b * H + j] : T(0);
      }
    }
  }

  /// H = f(X W^T + H R^T + biases).
  void rnnStep(const Act<T> *act, const T *xr, const T *hrb, T *hb) const {
    int64_t H = d.hidden;
    for (int64_t j = 0; j < H; ++j)
      hb[j] = xr[j] + hrb[j];
    activate(act[0], clip, hb, H);
  }

  /// Gates i, o, f, c; peepholes i, o, f.
  void lstmStep(int64_t dir, const Act<T> *act, const T *xr, const T *hrb, T *g, T *hb,
                T *cb) const {
    int64_t H = d.hidden;
    for (int64_t j = 0; j < 4 * H; ++j)
      g[j] = xr[j] + hrb[j];
    T *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
    const T *pi = peep ? peep + dir * 3 * H : nullptr, *po = pi ? pi + H : nullptr,
            *pf = pi ? pi + 2 * H : nullptr;
    if (pi)
      for (int64_t j = 0; j < H; ++j) {
        gi[j] += pi[j] * cb[j];
        gf[j] += pf[j] * cb[j];
      }
    activate(act[0], clip, gi, H);
    if (p.inputForget)
      for (int64_t j = 0; j < H; ++j)
        gf[j] = T(1) - gi[j];
    else
      activate(act[0], clip, gf, H);
    activate(act[1], clip, gc, H);
    for (int64_t j = 0; j < H; ++j)
      cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
    if (po)
      for (int64_t j = 0; j < H; ++j)
        go[j] += po[j] * cb[j];
    activate(act[0], clip, go, H);
    std::copy_n(cb, H, gc);
    activate(act[2], T(0), gc, H); // h(C): C itself is not clipped
    for (int64_t j = 0; j < H; ++j)
      hb[j] = go[j] * gc[j];
  }

  /// GRU gates z and r; rh = r . H for the split h-gate product.
  void gruGates(const Act<T> *act, const T *xr, const T *hrb, T *g, const T *hb, T *rh) const {
    int64_t H = d.hidden;
    for (int64_t j = 0; j < 2 * H; ++j)
      g[j] = xr[j] + hrb[j];
    activate(act[0], clip, g, 2 * H);
    for (int64_t j = 0; j < H; ++j)
      rh[j] = g[H + j] * hb[j];
  }

  /// The GRU's h gate and new state: with linear_before_reset from hrb (all
  /// three gates of H R^T), otherwise from rhr = (r . H) R_h^T after
  /// gruGates.
  void gruStep(int64_t dir, const Act<T> *act, const T *xr, const T *hrb, T *g, T *hb,
               const T *rhr) const {
    int64_t H = d.hidden;
    T *gz = g, *gr = g + H, *gh = g + 2 * H;
    if (!rhr) {
      for (int64_t j = 0; j < 2 * H; ++j)
        g[j] = xr[j] + hrb[j];
      activate(act[0], clip, g, 2 * H);
      const T *rbh = bias ? bias + dir * 6 * H + 5 * H : nullptr;
      for (int64_t j = 0; j < H; ++j)
        gh[j] = xr[2 * H + j] + gr[j] * (hrb[2 * H + j] + (rbh ? rbh[j] : T(0)));
    } else {
      for (int64_t j = 0; j < H; ++j)
        gh[j] = xr[2 * H + j] + rhr[j];
    }
    activate(act[1], clip, gh, H);
    for (int64_t j = 0; j < H; ++j)
      hb[j] = (T(1) - gz[j]) * gh[j] + gz[j] * hb[j];
  }
};

/// `t` in dtype `to`, contiguous; undefined stays undefined.
Tensor prepared(const Tensor &t, DType to) {
  return t.defined() ? asDType(t, to).contiguous() : Tensor();
}

template <typename T>
std::vector<Tensor> runRecurrence(const RnnParams &p, const RnnDims &d, DType ct,
                                  const Tensor &x0, const Tensor &w0, const Tensor &r0,
                                  const Tensor &b0, const Tensor &lens, const Tensor &h00,
                                  const Tensor &c00, const Tensor &p0) {
  Tensor x = prepared(x0, ct), w = prepared(w0, ct), r = prepared(r0, ct), b = prepared(b0, ct),
         h0 = prepared(h00, ct), c0 = prepared(c00, ct), pp = prepared(p0, ct);
  Shape yShape = p.batchFirst ? Shape{d.batch, d.seq, d.dirs, d.hidden}
                              : Shape{d.seq, d.dirs, d.batch, d.hidden};
  Shape sShape = p.batchFirst ? Shape{d.batch, d.dirs, d.hidden} : Shape{d.dirs, d.batch, d.hidden};
  std::vector<Tensor> out = {Tensor::zeros(yShape, ct), Tensor::zeros(sShape, ct)};
  if (p.cell == RnnCell::Lstm)
    out.push_back(Tensor::zeros(sShape, ct));
  auto ptr = [](const Tensor &t) { return t.defined() ? t.data<T>() : nullptr; };
  Recurrence<T> rec{p,        d,        x.data<T>(), w.data<T>(), r.data<T>(),
                    ptr(b),   ptr(h0),  ptr(c0),     ptr(pp),     {},
                    {},       T(0),     out[0].data<T>(), out[1].data<T>(),
                    p.cell == RnnCell::Lstm ? out[2].data<T>() : nullptr};
  if (p.clip) {
    if (!(*p.clip > 0))
      raise("{}: clip must be positive, got {}", cellName(p.cell), *p.clip);
    rec.clip = T(*p.clip);
  }
  rec.acts = resolveActs<T>(p, d.dirs);
  rec.lens.assign(d.batch, d.seq);
  if (lens.defined()) {
    Tensor l = lens.contiguous();
    for (int64_t i = 0; i < d.batch; ++i) {
      int64_t v = l.dtype() == DType::Int64 ? l.data<int64_t>()[i] : l.data<int32_t>()[i];
      if (v < 0 || v > d.seq)
        raise("{}: sequence_lens[{}] = {} is outside [0, {}]", cellName(p.cell), i, v, d.seq);
      rec.lens[i] = v;
    }
  }
  if (!omp_in_parallel())
    ensureSerialBlas();
  // X W^T per direction; the GEMM writes every element.
  std::vector<std::unique_ptr<T[]>> xw;
  for (int64_t dir = 0; dir < d.dirs; ++dir) {
    xw.emplace_back(new T[size_t(d.seq * d.batch * rec.gh())]);
    rec.inputProducts(dir, xw[dir].get());
  }
  // The directions are independent: one thread each.
#pragma omp parallel for num_threads(int(d.dirs)) if (d.dirs > 1 && !omp_in_parallel())
  for (int64_t dir = 0; dir < d.dirs; ++dir)
    rec.run(dir, xw[dir].get());
  return out;
}

} // namespace

std::vector<Tensor> recurrent(const RnnParams &p, const Tensor &x, const Tensor &weight,
                              const Tensor &recurrentWeight, const Tensor &bias,
                              const Tensor &sequenceLens, const Tensor &initialH,
                              const Tensor &initialC, const Tensor &peephole) {
  const char *op = cellName(p.cell);
  RnnDims d = checkInputs(p, x, weight, recurrentWeight, bias, sequenceLens, initialH, initialC,
                          peephole);
  if (p.cell != RnnCell::Lstm && (initialC.defined() || peephole.defined()))
    raise("{}: initial c and peephole weights are LSTM inputs", op);
  if (!isFloat(x.dtype()))
    raise("{}: the input must be floating point (float32, float64, float16 or bfloat16), got {}",
          op, dtypeName(x.dtype()).str());
  DType ct = x.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
  std::vector<Tensor> out =
      ct == DType::Float64
          ? runRecurrence<double>(p, d, ct, x, weight, recurrentWeight, bias, sequenceLens,
                                  initialH, initialC, peephole)
          : runRecurrence<float>(p, d, ct, x, weight, recurrentWeight, bias, sequenceLens,
                                 initialH, initialC, peephole);
  if (x.dtype() != ct)
    for (Tensor &t : out)
      t = cast(t, x.dtype());
  return out;
}

// ---- Lowering -----------------------------------------------------------------

namespace {

RnnCell cellOf(OpKind k) {
  return k == OpKind::Lstm ? RnnCell::Lstm : k == OpKind::Gru ? RnnCell::Gru : RnnCell::Rnn;
}

/// Numbers of a constant tuple argument (None: none).
std::vector<double> numbersArg(const Args &a, llvm::StringRef name) {
  std::vector<double> out;
  if (a.isNone(name))
    return out;
  TreeDef t = a.constant(name);
  for (size_t i = 0; i < t.numChildren(); ++i) {
    const TreeDef &c = t.child(i);
    if (!c.isConst() || !c.value().isNumber())
      a.fail(fmt::format("'{}' must be a tuple of numbers, got {}", name.str(), t.str()));
    out.push_back(c.value().toDouble());
  }
  return out;
}

/// The attributes of a call, checked.
RnnParams rnnParams(const Args &a, OpKind k) {
  RnnParams p;
  p.cell = cellOf(k);
  p.hiddenSize = a.isNone("hidden_size") ? 0 : a.integer("hidden_size");
  if (p.hiddenSize < 0)
    a.fail(fmt::format("hidden_size must be positive, got {}", p.hiddenSize));
  p.direction = a.string("direction");
  if (p.direction != "forward" && p.direction != "reverse" && p.direction != "bidirectional")
    a.fail(fmt::format("direction must be 'forward', 'reverse' or 'bidirectional', got '{}'",
                       p.direction));
  int64_t layout = a.integer("layout");
  if (layout != 0 && layout != 1)
    a.fail(fmt::format("layout must be 0 or 1, got {}", layout));
  p.batchFirst = layout == 1;
  if (!a.isNone("clip")) {
    p.clip = a.number("clip");
    if (!(*p.clip > 0))
      a.fail(fmt::format("clip must be positive, got {}", *p.clip));
  }
  if (p.cell == RnnCell::Lstm)
    p.inputForget = a.boolean("input_forget");
  if (p.cell == RnnCell::Gru)
    p.linearBeforeReset = a.boolean("linear_before_reset");
  if (a.isNone("activations"))
    return p;
  TreeDef names = a.constant("activations");
  std::vector<double> alpha = numbersArg(a, "activation_alpha"),
                      beta = numbersArg(a, "activation_beta");
  size_t n = names.numChildren();
  if ((!alpha.empty() && alpha.size() != n) || (!beta.empty() && beta.size() != n))
    a.fail(fmt::format("activation_alpha and activation_beta need one value per activation "
                       "({}), got {} and {}",
                       n, alpha.size(), beta.size()));
  int64_t per = rnnActivationCount(p.cell), dirs = p.direction == "bidirectional" ? 2 : 1;
  if (int64_t(n) != per && int64_t(n) != per * dirs)
    a.fail(fmt::format("{} activations given, expected {} per direction", n, per));
  for (size_t i = 0; i < n; ++i) {
    const TreeDef &c = names.child(i);
    if (!c.isConst() || !c.value().isString())
      a.fail(fmt::format("'activations' must be a tuple of names, got {}", names.str()));
    try {
      p.activations.push_back(rnnActivation(c.value().getString(),
                                            alpha.empty() ? std::nullopt : std::optional(alpha[i]),
                                            beta.empty() ? std::nullopt : std::optional(beta[i])));
    } catch (const Error &e) {
      a.fail(e.diagnostic().message);
    }
  }
  return p;
}

StepFn lowerRecurrent(const Expr &e, OpKind k, LowerContext &ctx) {
  Args a(e, ctx);
  RnnParams p = rnnParams(a, k);
  bool lstm = p.cell == RnnCell::Lstm;
  Src x = a.tensor("inp"), w = a.tensor("weight"), r = a.tensor("recurrent_weight"),
      b = a.optTensor("bias"), lens = a.optTensor("sequence_lens"), h0 = a.optTensor("initial_h");
  Src c0, pp;
  if (lstm) {
    c0 = a.optTensor("initial_c");
    pp = a.optTensor("peephole");
  }
  size_t most = lstm ? 3 : 2;
  if (e.numOutputs() > most)
    a.fail(fmt::format("{} has {} outputs, the expr has {}", cellName(p.cell), most,
                       e.numOutputs()));
  std::vector<uint32_t> outs;
  for (size_t i = 0; i < e.numOutputs(); ++i)
    outs.push_back(outSlot(e, ctx, i));
  return [=](Value *s, RunState &) {
    std::vector<Tensor> res = recurrent(p, x.get(s), w.get(s), r.get(s), b.getOr(s),
                                        lens.getOr(s), h0.getOr(s), c0.getOr(s), pp.getOr(s));
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(res[i]);
  };
}

} // namespace

void registerRnnLowering(LowerTable &t) {
  t.add("rnn", {OpKind::Lstm, OpKind::Gru, OpKind::Rnn}, lowerRecurrent);
}

} // namespace tmg::rt
