//===- Shape.h - Shape and data-movement kernels ----------------*- C++ -*-===//
//
// Kernels that move or create data without arithmetic. They work on every
// dtype (index tensors must be int32 or int64). Axis arguments may be
// negative (counting from the end) unless stated otherwise.
//
// Views (the result shares the input's storage, O(1), no copy): transpose
// and broadcast_to always; slice and getitem unless a step is negative;
// reshape, flatten, squeeze and unsqueeze whenever the input's strides
// allow (always for a contiguous input). They accept strided inputs. Every
// other kernel returns a new tensor.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Common.h"

namespace tmg::rt {

//===-- Views -------------------------------------------------------------===//

/// New shape with the same element count; at most one entry may be -1 and
/// is inferred. View.
Tensor reshape(const Tensor &x, llvm::ArrayRef<int64_t> shape);
/// Merges axes startAxis..endAxis (inclusive) into one. A scalar becomes
/// (1,). View.
Tensor flatten(const Tensor &x, int64_t startAxis = 0, int64_t endAxis = -1);
/// Removes the listed size-1 axes, or every size-1 axis when `axes` is
/// empty. View.
Tensor squeeze(const Tensor &x, llvm::ArrayRef<int64_t> axes = {});
/// Inserts size-1 axes so that they sit at positions `axes` of the result
/// (negative positions count from the end of the result). View.
Tensor unsqueeze(const Tensor &x, llvm::ArrayRef<int64_t> axes);
inline Tensor expandDims(const Tensor &x, llvm::ArrayRef<int64_t> axes) {
  return unsqueeze(x, axes);
}

//===-- Permutation and broadcasting --------------------------------------===//

/// out.shape[i] = x.shape[perm[i]]; `perm` is a permutation of 0..rank-1.
Tensor transpose(const Tensor &x, llvm::ArrayRef<int64_t> perm);
inline Tensor permute(const Tensor &x, llvm::ArrayRef<int64_t> perm) {
  return transpose(x, perm);
}
/// Copies x broadcast (NumPy rules, x's shape aligned to the right) to
/// `shape`.
Tensor broadcastTo(const Tensor &x, llvm::ArrayRef<int64_t> shape);

/// `x` when it is dense, else a dense copy of the view made with the
/// runtime's parallel strided copy (transposing views are copied in cache
/// tiles). The interpreter's conversion point for kernels that need dense
/// inputs.
Tensor contiguous(const Tensor &x);

//===-- Joining and splitting ---------------------------------------------===//

/// Joins tensors of one dtype and rank whose shapes agree except along
/// `axis`.
Tensor concat(llvm::ArrayRef<Tensor> xs, int64_t axis = 0);
/// Joins tensors of one shape and dtype along a new axis at `axis` (in the
/// result's numbering).
Tensor stack(llvm::ArrayRef<Tensor> xs, int64_t axis = 0);
/// `sections` equal parts along `axis` (sections must divide the size).
std::vector<Tensor> split(const Tensor &x, int64_t sections, int64_t axis = 0);
/// Parts of the given sizes along `axis` (they must sum to the size).
std::vector<Tensor> splitSizes(const Tensor &x, llvm::ArrayRef<int64_t> sizes,
                               int64_t axis = 0);
/// NumPy/MegEngine split at the given ascending indices: [0, i0), [i0, i1),
/// ..., [ik, n); indices are clamped to [0, n] as NumPy does.
std::vector<Tensor> splitAt(const Tensor &x, llvm::ArrayRef<int64_t> indices,
                            int64_t axis = 0);

//===-- Indexing ----------------------------------------------------------===//

/// A Python slice on one axis: start/stop default to the whole axis in the
/// direction of `step` (which must not be 0); negative values count from
/// the end and out-of-range values clamp, exactly as Python's slice.indices.
struct AxisSlice {
  int64_t axis = 0;
  std::optional<int64_t> start;
  std::optional<int64_t> stop;
  int64_t step = 1;
};

/// Applies one slice per listed axis (each axis at most once); other axes
/// are kept whole.
Tensor slice(const Tensor &x, llvm::ArrayRef<AxisSlice> slices);

/// One item of a basic Python index expression `x[i, a:b:s, ..., None]`.
struct IndexItem {
  enum class Kind : uint8_t { Index, Slice, Ellipsis, NewAxis };
  Kind kind = Kind::Slice;
  int64_t index = 0; ///< Kind::Index; negative counts from the end
  std::optional<int64_t> start, stop; ///< Kind::Slice
  int64_t step = 1;                   ///< Kind::Slice

  static IndexItem at(int64_t i) {
    IndexItem it;
    it.kind = Kind::Index;
    it.index = i;
    return it;
  }
  static IndexItem range(std::optional<int64_t> start,
                         std::optional<int64_t> stop, int64_t step = 1) {
    IndexItem it;
    it.kind = Kind::Slice;
    it.start = start;
    it.stop = stop;
    it.step = step;
    return it;
  }
  /// `:`
  static IndexItem all() { return range(std::nullopt, std::nullopt); }
  static IndexItem ellipsis() {
    IndexItem it;
    it.kind = Kind::Ellipsis;
    return it;
  }
  static IndexItem newAxis() {
    IndexItem it;
    it.kind = Kind::NewAxis;
    return it;
  }
};

/// `x[items...]` with NumPy basic-indexing rules: an integer removes its
/// axis (out of range throws), a slice keeps it, one ellipsis stands for the
/// axes not otherwise indexed, NewAxis inserts a size-1 axis; axes after the
/// last item are kept whole.
Tensor getitem(const Tensor &x, llvm::ArrayRef<IndexItem> items);

/// torch.gather / MegEngine gather: index has x's rank, index.shape[d] <=
/// x.shape[d] for d != axis, and out[i..., j, k...] = x[i..., index[i...,
/// j, k...], k...] along `axis`; out has index's shape. Negative indices
/// count from the end; out-of-range ones throw.
Tensor gather(const Tensor &x, int64_t axis, const Tensor &index);

/// NumPy take / ONNX Gather: selects slices along `axis` by `index` (any
/// shape); out.shape = x.shape[:axis] + index.shape + x.shape[axis+1:].
/// Negative indices count from the end; out-of-range ones throw.
Tensor take(const Tensor &x, const Tensor &index, int64_t axis = 0);

/// How a scatter combines an update with the value already there.
enum class ScatterReduce { None, Add, Mul, Max, Min };
/// "none", "add", "mul", "max", "min" (ONNX's and torch's spellings).
std::optional<ScatterReduce> parseScatterReduce(llvm::StringRef s);

/// torch.scatter / MegEngine scatter / ONNX ScatterElements: a copy of x
/// where out[i..., index[i..., j, k...], k...] (index at `axis`) takes
/// updates[i..., j, k...], combined by `reduce`. index and updates have one
/// shape, x's rank, and sizes no larger than x's outside `axis`. Updates
/// are applied in index order: with duplicate indices and no reduction the
/// last one wins.
Tensor scatter(const Tensor &x, int64_t axis, const Tensor &index,
               const Tensor &updates, ScatterReduce reduce = ScatterReduce::None);

/// ONNX ScatterND (torch index_put): indices has shape [..., k] with
/// k <= rank(x); each index row selects x[idx[0], ..., idx[k-1]] (a slice
/// of shape x.shape[k:]) which takes the matching slice of updates, whose
/// shape is indices.shape[:-1] + x.shape[k:]. Rows are applied in order.
Tensor scatterNd(const Tensor &x, const Tensor &indices, const Tensor &updates,
                 ScatterReduce reduce = ScatterReduce::None);

//===-- Padding and resizing ----------------------------------------------===//

enum class PadMode : uint8_t {
  Constant, ///< fill with a value
  Reflect,  ///< mirror without repeating the edge (needs pad < size)
  Edge,     ///< repeat the edge element (needs size > 0)
};

/// Pads every axis by (before, after) elements: padWidth has one pair per
/// axis. Negative amounts crop. Output sizes must stay >= 0.
Tensor pad(const Tensor &x,
           llvm::ArrayRef<std::pair<int64_t, int64_t>> padWidth,
           PadMode mode = PadMode::Constant, double value = 0.0);

enum class ResizeMode : uint8_t { Nearest, Bilinear };

/// Spatial resizing of float32 (N, C, H, W), PyTorch `interpolate`
/// semantics: nearest takes src = min(floor(dst * scale), in - 1);
/// bilinear with alignCorners maps the corner pixels onto each other (src =
/// dst * (in - 1) / (out - 1)), without it uses half-pixel centres (src =
/// (dst + 0.5) * scale - 0.5, clamped at 0). `scale` is in / out.
Tensor resize(const Tensor &x, Int2 size, ResizeMode mode = ResizeMode::Nearest,
              bool alignCorners = false);
/// Output size floor(in * factor) per axis; source coordinates use 1 /
/// factor (PyTorch with recompute_scale_factor=False). Factors must be > 0.
Tensor upsample(const Tensor &x, double factorH, double factorW,
                ResizeMode mode = ResizeMode::Nearest,
                bool alignCorners = false);

//===-- Creation ----------------------------------------------------------===//

/// start, start + step, ... up to but excluding stop: ceil((stop - start) /
/// step) elements (0 when negative). step must not be 0. Values are
/// computed as start + i * step in double, then converted to dtype.
Tensor arange(double start, double stop, double step = 1.0,
              DType dtype = DType::Float32);
Tensor zeros(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32);
Tensor ones(llvm::ArrayRef<int64_t> shape, DType dtype = DType::Float32);
Tensor full(llvm::ArrayRef<int64_t> shape, double value,
            DType dtype = DType::Float32);

} // namespace tmg::rt
