//===- Extra.h - Kernels added for ONNX coverage ----------------*- C++ -*-===//
//
// Elementwise math and activations with parameters, logical ops, PReLU,
// modulo, N-dimensional convolution, transposed convolution, pooling and
// resizing with ONNX's padding and coordinate conventions. Conventions are
// those of Common.h. Float kernels compute in float32: integer inputs are
// converted (the ops that keep integer dtypes say so), float16 inputs are
// converted and the result converted back.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tm/runtime/Common.h"
#include "tm/runtime/Conv.h"

namespace tmg::rt {

enum class MathOp : uint8_t {
  Floor, Ceil, Round, ///< Round: half to even; these three and Sign keep integer dtypes
  Sign,
  Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh, Atanh,
  Reciprocal,
  Softsign, ///< x / (1 + |x|)
  Softplus, ///< log(1 + exp(x)), computed without overflow
};
/// "floor", "sign", "softplus", ...
llvm::StringRef opName(MathOp op);
Tensor mathUnary(MathOp op, const Tensor &x);

/// x > 0 ? x : alpha * (exp(x) - 1).
Tensor elu(const Tensor &x, double alpha = 1.0);
/// scale * (x > 0 ? x : alpha * (exp(x) - 1)).
Tensor selu(const Tensor &x, double alpha, double scale);
/// max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
Tensor celu(const Tensor &x, double alpha = 1.0);
/// max(0, min(1, alpha * x + beta)).
Tensor hardSigmoid(const Tensor &x, double alpha = 0.2, double beta = 0.5);
/// x > alpha ? x : 0.
Tensor thresholdedRelu(const Tensor &x, double alpha = 1.0);
/// x < 0 ? slope * x : x, slope broadcast against x (NumPy rules).
Tensor prelu(const Tensor &x, const Tensor &slope);

enum class LogicalOp : uint8_t { And, Or, Xor };
/// Elementwise logic on truth values (non-zero is true), broadcasting;
/// bool result.
Tensor logical(LogicalOp op, const Tensor &a, const Tensor &b);
Tensor logicalNot(const Tensor &x);
/// Python's `&`, `|`, `^` and `~` on tensors: logical on bool tensors,
/// bitwise on integer ones (in the promoted dtype); floating-point operands
/// are an error, as in the reference.
Tensor bitwise(LogicalOp op, const Tensor &a, const Tensor &b);
Tensor invert(const Tensor &x);
/// a << b (left) or a >> b (logical for unsigned, arithmetic for signed
/// integers) in the promoted integer dtype; a shift by the dtype's width or
/// more gives 0 (-1 for a negative signed a shifted right), a negative
/// shift is an error.
Tensor bitShift(const Tensor &a, const Tensor &b, bool left);
/// Bool: NaN elements; infinite elements of the chosen signs.
Tensor isNan(const Tensor &x);
Tensor isInf(const Tensor &x, bool positive = true, bool negative = true);

/// Modulo with broadcasting. fmod = false: Python's % (result has the sign
/// of b); true: C's fmod (sign of a). Integer dtypes stay integer (the
/// result has the promoted dtype); integer division by zero throws.
Tensor mod(const Tensor &a, const Tensor &b, bool fmod = false);
/// Python's `//` with broadcasting: floor(a / b); integer dtypes stay
/// integer (division by zero is an error).
Tensor floorDiv(const Tensor &a, const Tensor &b);

/// Cumulative sum along `axis` (negative counts from the end): exclusive
/// leaves out the element itself, reverse sums from the end. Integer
/// dtypes are summed in int64 and keep their dtype; floats in double.
Tensor cumsum(const Tensor &x, int64_t axis, bool exclusive = false, bool reverse = false);

/// Parameters of the N-dimensional window ops; every vector has one entry
/// per spatial axis (padBegin/padEnd: padding before and after each axis).
struct WindowNd {
  std::vector<int64_t> kernel, stride, padBegin, padEnd, dilation;
  /// Pooling: output sizes rounded up (a window must start inside the
  /// input or its leading padding).
  bool ceilMode = false;
  /// Average pooling: divide by the window size including padding.
  bool countIncludePad = false;
};

/// Convolution of x (N, C, *spatial) with w (O, C / groups, *kernel) and an
/// optional bias (O), any number of spatial axes (kernel is taken from w).
/// Computes in float32, or in float64 (and returns float64) when one
/// operand is float64; sums accumulate in double either way.
Tensor convNd(const Tensor &x, const Tensor &w, const Tensor &bias, const WindowNd &p,
              int64_t groups = 1);
/// Transposed convolution: x (N, C, *spatial), w (C, O / groups, *kernel);
/// output size per axis (in - 1) * stride - padBegin - padEnd + dilation *
/// (k - 1) + outputPadding + 1.
Tensor convTransposeNd(const Tensor &x, const Tensor &w, const Tensor &bias,
                       const WindowNd &p, llvm::ArrayRef<int64_t> outputPadding,
                       int64_t groups = 1);
/// Max or average pooling of x (N, C, *spatial); the kernel comes from p.
Tensor maxPoolNd(const Tensor &x, const WindowNd &p);
/// maxPoolNd(conv2d(input, weight, bias, params), pool) (two spatial axes),
/// the convolution's output pooled in bands of rows as they are computed
/// and never whole (ResNet's stem at batch 8 neither writes nor reads back
/// its 25 MB): the same bits as the two ops. That runs where the conv takes
/// the micro-kernel's im2col path (AVX-512; not Winograd, depthwise or
/// grouped; no residual or `into`) and the window fits; elsewhere the two
/// ops run. `fused`, when given, tells which.
Tensor conv2dMaxPool(const Tensor &input, const Tensor &weight,
                     const Tensor &bias, const Conv2dParams &params,
                     const WindowNd &pool, bool *fused = nullptr);
Tensor avgPoolNd(const Tensor &x, const WindowNd &p);
/// Output size of one pooled axis (ceil mode as PyTorch and ONNX).
int64_t poolOutputSize(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                       bool ceilMode);

enum class ResizeInterp : uint8_t { Nearest, Linear, Cubic };
enum class ResizeCoord : uint8_t {
  HalfPixel,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNn ///< (o + 0.5) / scale (TensorFlow's nearest half-pixel)
};
enum class NearestRound : uint8_t { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };
struct ResizeParams {
  ResizeInterp mode = ResizeInterp::Nearest;
  ResizeCoord coord = ResizeCoord::HalfPixel;
  NearestRound nearest = NearestRound::RoundPreferFloor;
  double cubicA = -0.75;
  bool excludeOutside = false;
  /// Per-axis scales used by the coordinate transform (out / in when empty).
  std::vector<double> scales;
};
/// ONNX Resize of any float32 tensor to `size` (one entry per axis).
Tensor resizeNd(const Tensor &x, llvm::ArrayRef<int64_t> size, const ResizeParams &p);

/// The k smallest (descending: largest) elements along the last axis and
/// their int64 indices, in order; of equal elements the one with the lower
/// index comes first. noSort leaves the order unspecified (this kernel
/// sorts anyway). kthOnly: only element k - 1, the last axis removed.
std::pair<Tensor, Tensor> topk(const Tensor &x, int64_t k, bool descending = false,
                               bool kthOnly = false, bool noSort = false);

/// ONNX GatherND: indices (..., m) of int32 or int64 address the m axes of
/// x after its first batchDims axes (shared with indices); negative indices
/// count from the end. Result: indices.shape[:-1] + x.shape[batchDims + m:].
Tensor gatherNd(const Tensor &x, const Tensor &indices, int64_t batchDims = 0);

/// One-hot along a new last axis of size numClasses, in x's dtype: 1 where
/// the (truncated) index equals the position. Indices in [-numClasses, 0)
/// count from the end; other out-of-range indices give a row of zeros.
Tensor oneHot(const Tensor &x, int64_t numClasses);

/// Local response normalisation across the channels (axis 1) of x (N, C,
/// ...): x / (k + alpha / size * sum of squares)^beta, the sum over
/// channels c - (size - 1) / 2 .. c + size / 2 (ONNX LRN).
Tensor localResponseNorm(const Tensor &x, int64_t size, double k, double alpha,
                         double beta);

/// Einstein summation (NumPy's einsum) with an explicit ("ij,jk->ik") or
/// implicit output, "..." broadcasting and repeated labels (diagonals). Runs
/// as transposes, reductions and batched matmuls in the promoted dtype of the
/// operands (float64 in float64; float32, float16 and bfloat16 in float32).
Tensor einsum(llvm::StringRef equation, llvm::ArrayRef<Tensor> operands);

/// Determinants of the square matrices in the last two axes of x (float), by
/// LU decomposition with partial pivoting in double; the result has x's dtype.
Tensor det(const Tensor &x);

/// The slices of x along `axis` where condition (1-D, truth values) is
/// true; without an axis, the elements of flattened x. A condition shorter
/// than the axis selects nothing past its end.
Tensor compress(const Tensor &x, const Tensor &condition, std::optional<int64_t> axis);

/// Reverses the first lens[b] elements along timeAxis of each batch entry
/// b of batchAxis (ONNX ReverseSequence; timeAxis, batchAxis are 0 and 1).
Tensor reverseSequence(const Tensor &x, const Tensor &lens, int64_t batchAxis,
                       int64_t timeAxis);

/// Inverse of max pooling: zeros of shape (N, C, *outSpatial) with each
/// element of x written at its flat index (over the whole output) in
/// indices, as the Indices output of ONNX MaxPool.
Tensor maxUnpoolNd(const Tensor &x, const Tensor &indices,
                   llvm::ArrayRef<int64_t> outSpatial);

enum class GridSampleMode : uint8_t { Bilinear, Nearest, Bicubic };
enum class GridSamplePad : uint8_t { Zeros, Border, Reflection };
/// Samples x (N, C, H, W) at the normalised (x, y) points of grid (N, Ho,
/// Wo, 2) in [-1, 1]: the result is (N, C, Ho, Wo) (ONNX GridSample,
/// PyTorch grid_sample). float32 compute.
Tensor gridSample(const Tensor &x, const Tensor &grid, GridSampleMode mode,
                  GridSamplePad pad, bool alignCorners);

/// RoIAlign of x (N, C, H, W) over rois (K, 5) rows (batch index, x0, y0,
/// x1, y1) in input coordinates times spatialScale: (K, C, outH, outW),
/// each bin the average (or the maximum) of sampleH x sampleW bilinear
/// samples (0: ceil(bin size) samples). aligned shifts the boxes by -0.5
/// pixel (ONNX half_pixel).
Tensor roiAlign(const Tensor &x, const Tensor &rois, int64_t outH, int64_t outW, bool max,
                double spatialScale, int64_t sampleH, int64_t sampleW, bool aligned);

/// ONNX NonMaxSuppression: boxes (B, N, 4) as corners (y0, x0, y1, x1 in
/// either order) or centres (cx, cy, w, h), scores (B, C, N); per batch and
/// class at most maxPerClass boxes by descending score, each overlapping
/// none kept before by more than iouThreshold and scoring above
/// scoreThreshold. Result: (K, 3) int64 rows (batch, class, box).
Tensor nonMaxSuppression(const Tensor &boxes, const Tensor &scores, int64_t maxPerClass,
                         double iouThreshold, std::optional<double> scoreThreshold,
                         bool centerPointBox);

/// ONNX Unique of x flattened (no axis) or of its slices along axis: the
/// unique values (sorted, or in order of first occurrence), the index of
/// each one's first occurrence, each element's (slice's) index into the
/// unique values, and the counts; the last three int64.
std::vector<Tensor> unique(const Tensor &x, std::optional<int64_t> axis, bool sorted);


/// The cell of an ONNX recurrent op.
enum class RnnCell : uint8_t { Rnn, Gru, Lstm };

/// An activation of a recurrent op: an ONNX activation name (Relu, Tanh,
/// Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid,
/// Elu, Softsign, Softplus; any case) with its alpha and beta.
struct RnnActivation {
  std::string name;
  double alpha = 0, beta = 0;
};
/// The activation `name` with `alpha` and `beta`, or the defaults of its
/// ONNX operator when not given; an error for a name not listed above.
RnnActivation rnnActivation(llvm::StringRef name, std::optional<double> alpha = std::nullopt,
                            std::optional<double> beta = std::nullopt);
/// Whether the activation `name` reads alpha (beta).
bool rnnActivationHasAlpha(llvm::StringRef name);
bool rnnActivationHasBeta(llvm::StringRef name);
/// The activations of one direction: 1 for Rnn, 2 for Gru, 3 for Lstm.
int64_t rnnActivationCount(RnnCell cell);

/// The attributes of an ONNX RNN, GRU or LSTM.
struct RnnParams {
  RnnCell cell = RnnCell::Lstm;
  int64_t hiddenSize = 0;         ///< 0: taken from the recurrent weight
  std::string direction = "forward"; ///< or "reverse", "bidirectional"
  /// rnnActivationCount per direction, the forward one's first; empty: the
  /// ONNX defaults (Tanh; Sigmoid, Tanh; Sigmoid, Tanh, Tanh); one
  /// direction's list serves both directions.
  std::vector<RnnActivation> activations;
  std::optional<double> clip;     ///< clips the gate pre-activations to [-clip, clip]
  bool batchFirst = false;        ///< ONNX layout 1
  bool inputForget = false;       ///< LSTM: the forget gate is 1 - the input gate
  bool linearBeforeReset = false; ///< GRU
};

/// ONNX RNN, GRU or LSTM of x (seq, batch, input) or, batch first,
/// (batch, seq, input); weight (dirs, gates * hidden, input), recurrent
/// weight (dirs, gates * hidden, hidden); optional (undefined) bias
/// (dirs, 2 * gates * hidden), int32 or int64 sequence lengths (batch),
/// initial h and c (dirs, batch, hidden; batch first (batch, dirs,
/// hidden)) and LSTM peephole weights (dirs, 3 * hidden). Results: y
/// (seq, dirs, batch, hidden; batch first (batch, seq, dirs, hidden)),
/// zero past each sequence's length, the last valid h (and c for LSTM).
/// float32 and float64; float16 and bfloat16 compute in float32.
std::vector<Tensor> recurrent(const RnnParams &p, const Tensor &x, const Tensor &weight,
                              const Tensor &recurrentWeight, const Tensor &bias,
                              const Tensor &sequenceLens, const Tensor &initialH,
                              const Tensor &initialC = {}, const Tensor &peephole = {});

} // namespace tmg::rt
