//===- Conv.h - Convolutions ------------------------------------*- C++ -*-===//
//
// NCHW convolutions on float32, PyTorch/ONNX weight layouts:
//  * conv2d weight (out, in / groups, kh, kw), bias (out,);
//  * conv_transpose2d weight (in, out / groups, kh, kw), bias (out,);
//  * conv1d weight (out, in / groups, k), bias (out,).
// conv2d lowers each (image, group) to a GEMM: 1x1 stride-1 convolutions
// use the input directly as the GEMM operand; others are im2col'ed tile by
// tile (a slice of the patch matrix stays in L2), with the bias and the
// activation applied in the GEMM's store. Where the CPU has AVX-512 the
// GEMM is the runtime's own micro-kernel, on weights packed once
// (packConvWeight, kept per execution plan by the interpreter); elsewhere
// it is OpenBLAS sgemm. 3x3 stride-1 convolutions with enough channels use
// Winograd's F(2x2, 3x3) there instead: 16 GEMMs on transformed 4x4 input
// tiles, 2.25x fewer multiplications. Depthwise convolutions (groups == in
// channels, one input channel per group) use a direct kernel.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "tm/runtime/Common.h"

namespace tmg::rt {

class PackedConvWeight;

/// How the non-depthwise convolutions run. Auto (the default): where the
/// CPU has AVX-512, the micro-kernel with packed weights, through Winograd's
/// F(2x2, 3x3) for 3x3 stride-1 undilated ungrouped convolutions of at
/// least 8 input and output channels and a 6x6 output, otherwise reading
/// the input in place (1x1) or as an implicit GEMM over phase planes of
/// the input (most others; im2col's patch matrix for the rest); OpenBLAS
/// sgemm elsewhere. Im2col never uses Winograd nor the implicit GEMM (a
/// patch matrix for every conv that is not 1x1); Winograd uses it for
/// every 3x3 stride-1 undilated ungrouped convolution (and Auto's choice
/// for the rest); Blas forces OpenBLAS. The paths differ in rounding only.
enum class ConvGemm : uint8_t { Auto, Blas, Im2col, Winograd };

/// Attributes of conv2d.
struct Conv2dParams {
  Int2 stride = 1;
  Int2 padding = 0; ///< zeros before the input (top, left)
  /// Zeros after the input (bottom, right); defaults to `padding`. Set for
  /// ONNX's asymmetric pads.
  std::optional<Int2> paddingEnd;
  Int2 dilation = 1;
  int64_t groups = 1;
  Activation activation = Activation::None;
  /// The weight already packed by packConvWeight (borrowed; it must have
  /// been packed from this very weight tensor). Null: packed per call.
  const PackedConvWeight *packed = nullptr;
  ConvGemm gemm = ConvGemm::Auto;
  /// When defined, a float32 tensor of the output's shape added to conv +
  /// bias before the activation: act(conv(x) + bias + residual), a
  /// residual connection's add (and relu) done where each output tile is
  /// written. Bit for bit conv2d followed by the add and the activation.
  Tensor residual;
  /// When it is a float32 tensor of the output's shape, contiguous or with
  /// only its images strided (a channel slice of a larger (N, C, H, W)
  /// tensor, say), the output is written into it and conv2d returns it;
  /// otherwise it is ignored and a new tensor is returned.
  Tensor into;
};

/// Cross-correlation of input (N, C, H, W) with weight (O, C / groups, kh,
/// kw), plus bias (O,) when defined, then the activation. Output (N, O, Ho,
/// Wo) with Ho = (H + padTop + padBottom - dilation.h * (kh - 1) - 1) /
/// stride.h + 1 (floor), and likewise Wo. Throws on a rank, channel, group,
/// bias or residual mismatch, on non-positive strides or dilations, negative
/// padding, or a kernel larger than the padded input. The input may be any
/// view; a channels-last one (memory in (N, H, W, C) order, what transposing a
/// dense NHWC tensor by (0, 3, 1, 2) gives) of a depthwise convolution
/// gives a channels-last output (computed without transposing either, bit
/// for bit the (N, C, H, W) result), unless `residual` or `into` is set.
Tensor conv2d(const Tensor &input, const Tensor &weight,
              const Tensor &bias = {}, const Conv2dParams &params = {});

/// Attributes of conv1d (the 1-D analogue of Conv2dParams).
struct Conv1dParams {
  int64_t stride = 1;
  int64_t padding = 0;
  std::optional<int64_t> paddingEnd;
  int64_t dilation = 1;
  int64_t groups = 1;
  Activation activation = Activation::None;
  /// As Conv2dParams::packed.
  const PackedConvWeight *packed = nullptr;
  ConvGemm gemm = ConvGemm::Auto;
};

/// input (N, C, L), weight (O, C / groups, k), bias (O,) -> (N, O, Lo).
Tensor conv1d(const Tensor &input, const Tensor &weight,
              const Tensor &bias = {}, const Conv1dParams &params = {});

/// Attributes of conv_transpose2d (PyTorch semantics).
struct ConvTranspose2dParams {
  Int2 stride = 1;
  Int2 padding = 0;
  Int2 outputPadding = 0; ///< extra rows/columns at the bottom/right
  Int2 dilation = 1;
  int64_t groups = 1;
  Activation activation = Activation::None;
};

/// Transposed convolution (the gradient of conv2d with respect to its input)
/// of input (N, C, H, W) with weight (C, O / groups, kh, kw): output (N, O,
/// Ho, Wo) with Ho = (H - 1) * stride.h - 2 * padding.h + dilation.h * (kh -
/// 1) + outputPadding.h + 1. outputPadding must be smaller than the stride
/// or the dilation.
Tensor convTranspose2d(const Tensor &input, const Tensor &weight,
                       const Tensor &bias = {},
                       const ConvTranspose2dParams &params = {});

/// A conv2d / conv1d weight laid out for the runtime's GEMM micro-kernel,
/// in the form each path needs, made on the path's first use: for im2col,
/// panels of 8 output channels, depth-major; for Winograd (3x3 ungrouped
/// weights), the 16 transformed matrices G g G^T (out x in channels), each
/// packed the same way. It keeps the weight it was made from alive. One
/// packed weight serves any number of concurrent calls (each form is made
/// once, under a once_flag, and never changes); the interpreter keeps one
/// per conv step of an execution plan.
class PackedConvWeight {
public:
  PackedConvWeight(const Tensor &weight, int64_t groups);
  int64_t outChannels = 0, groups = 1;
  int64_t depth = 0; ///< in_channels / groups * kh * kw
  /// The im2col form.
  llvm::ArrayRef<float> panels() const;
  /// The Winograd form; requires a 3x3 weight and groups == 1.
  llvm::ArrayRef<float> winograd() const;
  /// The channels-last depthwise form: tap t (ki * kw + kj) of output
  /// channel oc at [t * out_channels + oc]; requires one input channel per
  /// group.
  llvm::ArrayRef<float> depthwiseTaps() const;

private:
  Tensor weight_; // contiguous
  mutable std::once_flag panelsOnce_, winogradOnce_, tapsOnce_;
  // Written once, without zero-filling first (fresh pages are the cost).
  mutable std::unique_ptr<float[]> panels_, winograd_, taps_;
  mutable size_t panelsSize_ = 0, winogradSize_ = 0, tapsSize_ = 0;
};

/// Packs `weight` (O, C / groups, kh, kw) or (O, C / groups, k) for a
/// convolution with `groups` groups. Returns null when this CPU has no
/// micro-kernel (no AVX-512): convolutions then use OpenBLAS and need no
/// packing. Throws when weight is not a float32 tensor of rank >= 3 whose
/// channels `groups` divides.
std::shared_ptr<const PackedConvWeight> packConvWeight(const Tensor &weight,
                                                       int64_t groups);

/// True when this CPU runs the GEMM micro-kernel.
bool convMicroKernelAvailable();

/// Output size of a convolution or pooling window along one axis:
/// floor((in + padBegin + padEnd - dilation * (kernel - 1) - 1) / stride) + 1,
/// which may be <= 0 when the window does not fit.
int64_t convOutputSize(int64_t in, int64_t kernel, int64_t stride,
                       int64_t padBegin, int64_t padEnd, int64_t dilation);

} // namespace tmg::rt
