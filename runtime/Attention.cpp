//===- Attention.cpp - Scaled dot-product attention -----------------------===//
//
// softmax((query * scale) @ key^T) @ value over the last two axes. With
// float32 operands of the same batch shape on the micro-kernel (AVX-512),
// a work item is one batch entry (a head) and a block of up to 48
// queries: the block's scores (S x 48) are computed, exponentiated and
// multiplied by value while they are in cache, never written out (see
// attentionMicro). A thread packs a batch entry's key and value once for
// all its blocks of that entry. Any strides are read as they are (the
// heads of a fused QKV projection are strided views). Broadcast batch axes,
// empty sizes and CPUs without AVX-512 run the ops one by one: mul, matmul,
// softmax, matmul. Float32 only, as softmax.
//
//===----------------------------------------------------------------------===//
#include "Gemm.h"
#include "Internal.h"
#include "VecMath.h"

#include <cmath>
#include <limits>

#include "tm/ir/ShapeInference.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Linalg.h"
#include "tm/runtime/Norm.h"

namespace tmg::rt {
using namespace detail;

namespace {

constexpr const char *Op = "scaled_dot_product_attention";

/// Element offset of each batch entry of `t` (all axes but the last two),
/// in row-major order of the batch axes.
std::vector<int64_t> batchOffsets(const Tensor &t) {
  size_t nb = t.rank() - 2;
  int64_t count = shapeNumel(t.shape().take_front(nb));
  std::vector<int64_t> off(size_t(count), 0);
  llvm::SmallVector<int64_t, 6> idx(nb, 0);
  for (int64_t b = 0; b < count; ++b) {
    int64_t o = 0;
    for (size_t i = 0; i < nb; ++i)
      o += idx[i] * t.strides()[i];
    off[size_t(b)] = o;
    for (size_t i = nb; i-- > 0;) {
      if (++idx[i] < t.dim(i))
        break;
      idx[i] = 0;
    }
  }
  return off;
}

/// The softmax of each column of scores (S x cols, row stride GemmNR)
/// without its division: e = exp(x - max) in place, inv[i] = 1 / sum.
TM_VECTOR_CLONES
void columnSoftmax(float *scores, int64_t S, int64_t cols, float *inv) {
  float mx[GemmNR], sum[GemmNR];
  for (int64_t i = 0; i < cols; ++i) {
    mx[i] = -std::numeric_limits<float>::infinity();
    sum[i] = 0.0f;
  }
  for (int64_t j = 0; j < S; ++j) {
    const float *row = scores + j * GemmNR;
    for (int64_t i = 0; i < cols; ++i)
      mx[i] = (row[i] > mx[i] || row[i] != row[i]) ? row[i] : mx[i];
  }
  for (int64_t j = 0; j < S; ++j) {
    float *row = scores + j * GemmNR;
    for (int64_t i = 0; i < cols; ++i)
      row[i] -= mx[i];
    vecMath(VecFn::Exp, row, row, cols);
    for (int64_t i = 0; i < cols; ++i)
      sum[i] += row[i];
  }
  for (int64_t i = 0; i < cols; ++i)
    inv[i] = 1.0f / sum[i];
}

/// The fused kernel (see the file comment), in the transposed form that
/// keeps the micro-kernel's 48-column strips full: a block of 48 queries
/// is the columns, so scores^T (S x 48) = key (S x E) @ (query * scale)^T
/// and out^T (Ev x 48) = value^T (Ev x S) @ e, e the exponentials of the
/// scores, each column divided by its sum on the way out. key and value^T
/// are the packed A operands (once per batch entry and thread).
Tensor attentionMicro(const Tensor &q, const Tensor &k, const Tensor &v,
                      float scale, Shape outShape) {
  size_t r = q.rank();
  int64_t L = q.dim(r - 2), E = q.dim(r - 1), S = k.dim(r - 2),
          Ev = v.dim(r - 1);
  Tensor out = Tensor::empty(outShape, DType::Float32);
  std::vector<int64_t> qo = batchOffsets(q), ko = batchOffsets(k),
                       vo = batchOffsets(v);
  int64_t batches = int64_t(qo.size());
  const float *qp = static_cast<const float *>(q.viewData());
  const float *kp = static_cast<const float *>(k.viewData());
  const float *vp = static_cast<const float *>(v.viewData());
  float *op = out.data<float>();
  int64_t qsL = q.strides()[r - 2], qsE = q.strides()[r - 1];
  int64_t ksS = k.strides()[r - 2], ksE = k.strides()[r - 1];
  int64_t vsS = v.strides()[r - 2], vsE = v.strides()[r - 1];

  int64_t blocks = (L + GemmNR - 1) / GemmNR;
  int64_t items = batches * blocks;
  int64_t kPanels = (S + GemmMR - 1) / GemmMR,
          vPanels = (Ev + GemmMR - 1) / GemmMR;
  // Per thread: key and value^T packed, the block's scaled queries (one
  // strip), its scores^T, out^T and the inverse sums.
  int64_t keyFloats = kPanels * GemmMR * E, valueFloats = vPanels * GemmMR * S;
  int64_t perThread =
      keyFloats + valueFloats + (E + S + vPanels * GemmMR + 1) * GemmNR;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  Tensor scratchT = Tensor::empty({perThread * threads}, DType::Float32);
  float *scratch = scratchT.data<float>();
  std::vector<int64_t> packedBatch(size_t(threads), -1);

#pragma omp parallel for schedule(static)                                      \
    num_threads(threads) if (items > 1 && threads > 1)
  for (int64_t item = 0; item < items; ++item) {
    int t = omp_get_thread_num();
    int64_t b = item / blocks, i0 = (item % blocks) * GemmNR;
    int64_t cols = std::min(GemmNR, L - i0);
    float *keyA = scratch + t * perThread, *valueA = keyA + keyFloats;
    float *qT = valueA + valueFloats, *scoresT = qT + E * GemmNR;
    float *outT = scoresT + S * GemmNR, *inv = outT + vPanels * GemmMR * GemmNR;
    if (packedBatch[size_t(t)] != b) {
      packPanelRange(kp + ko[size_t(b)], S, E, 0, kPanels, keyA, ksS, ksE);
      packPanelRange(vp + vo[size_t(b)], Ev, S, 0, vPanels, valueA, vsE, vsS);
      packedBatch[size_t(t)] = b;
    }
    const float *qb = qp + qo[size_t(b)] + i0 * qsL;
    for (int64_t i = 0; i < cols; ++i)
      for (int64_t e = 0; e < E; ++e)
        qT[e * GemmNR + i] = qb[i * qsL + e * qsE] * scale;
    gemmPackedA(keyA, kPanels, 0, S, cols, E, GemmB{qT, E * GemmNR, GemmNR},
                scoresT, GemmNR, nullptr, Activation::None);
    columnSoftmax(scoresT, S, cols, inv);
    gemmPackedA(valueA, vPanels, 0, Ev, cols, S,
                GemmB{scoresT, S * GemmNR, GemmNR}, outT, GemmNR, nullptr,
                Activation::None);
    float *ob = op + (b * L + i0) * Ev;
    for (int64_t c = 0; c < Ev; ++c)
      for (int64_t i = 0; i < cols; ++i)
        ob[i * Ev + c] = outT[c * GemmNR + i] * inv[i];
  }
  return out;
}

} // namespace

Tensor scaledDotProductAttention(const Tensor &query, const Tensor &key,
                                 const Tensor &value,
                                 std::optional<double> scale) {
  requireFloat32(Op, query, "query");
  requireFloat32(Op, key, "key");
  requireFloat32(Op, value, "value");
  for (auto [t, what] :
       {std::pair{&query, "query"}, {&key, "key"}, {&value, "value"}})
    if (t->rank() < 2)
      raise("{}: {} must have at least 2 dimensions (..., rows, features)", Op,
            describe(what, *t));
  size_t rq = query.rank(), rk = key.rank(), rv = value.rank();
  int64_t E = query.dim(rq - 1), S = key.dim(rk - 2);
  if (key.dim(rk - 1) != E)
    raise("{}: {} and {} have different feature sizes {} and {}", Op,
          describe("query", query), describe("key", key), E, key.dim(rk - 1));
  if (value.dim(rv - 2) != S)
    raise("{}: {} and {} have different numbers of keys {} and {}", Op,
          describe("key", key), describe("value", value), S, value.dim(rv - 2));
  auto batchOf = [](const Tensor &t) { return t.shape().drop_back(2); };
  auto qk = tmg::broadcastShapes(batchOf(query), batchOf(key));
  auto batch = qk ? tmg::broadcastShapes(*qk, batchOf(value)) : std::nullopt;
  if (!batch)
    raise("{}: the batch dimensions of {}, {} and {} do not broadcast", Op,
          describe("query", query), describe("key", key),
          describe("value", value));
  double sc = scale.value_or(E > 0 ? 1.0 / std::sqrt(double(E)) : 1.0);
  Shape outShape = *batch;
  outShape.push_back(query.dim(rq - 2));
  outShape.push_back(value.dim(rv - 1));
  bool fused = gemmMicroKernelAvailable() && batchOf(query) == batchOf(key) &&
               batchOf(key) == batchOf(value) && E > 0 && S > 0 &&
               shapeNumel(outShape) > 0;
  if (fused) {
    return attentionMicro(query, key, value, float(sc), outShape);
  }
  Tensor q = query.contiguous();
  if (sc != 1.0)
    q = binary(BinaryOp::Mul, q, Tensor::full({}, sc));
  return matmul(softmax(matmul(q, key.contiguous(), false, true), -1),
                value.contiguous());
}

} // namespace tmg::rt
