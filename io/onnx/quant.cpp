//===- quant.cpp - ONNX mapping of quantisation ops -------------*- C++ -*-===//
//
// The ONNX importers and exporters of the quant family. QuantizeLinear,
// DequantizeLinear and DynamicQuantizeLinear import as the float32
// arithmetic ONNX defines them by (divide, round half to even, add the
// zero point, saturate, cast); MatMulInteger, ConvInteger, QLinearMatMul
// and QLinearConv as exact float64 products of the operands less their zero
// points (cast to int32, or requantized); scales and zero points may be
// graph inputs.
// FakeQuantize has no ONNX form yet; the coverage lists
// (opsWithoutOnnxExport) show it.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {

namespace {

/// A per-axis scale or zero point (1-D, one value per slice along `axis` of
/// the input) reshaped to broadcast against the input; a scalar as it is.
Node *alongAxis(NodeCx &c, size_t i, size_t data) {
  Node *v = c.astype(c.node(i), DType::Float32);
  if (!c.val(i).shape || c.val(i).shape->empty())
    return v;
  int64_t r = c.rank(data), ax = c.axis(c.ai("axis", 1), r);
  Shape s(size_t(r), 1);
  s[size_t(ax)] = (*c.val(i).shape)[0];
  return c.call("tensor.reshape", {v, tupleOf(s)});
}

/// The integer dtype of a quantized value: the zero point's, else uint8.
DType quantType(NodeCx &c, size_t zeroPoint) {
  auto t = c.has(zeroPoint) ? c.dtype(zeroPoint) : std::optional<DType>(DType::UInt8);
  if (!t || (*t != DType::UInt8 && *t != DType::Int8))
    c.fail("the zero point must be uint8 or int8");
  return *t;
}

/// saturate(round(x / scale) + zeroPoint) as `t` (x, scale, zeroPoint of
/// one float dtype); no division without a scale (x already scaled).
Node *quantize(NodeCx &c, Node *x, Node *scale, Node *zeroPoint, DType t) {
  Node *q = c.call("elemwise.round", {scale ? c.call("elemwise.div", {x, scale}) : x});
  if (zeroPoint)
    q = c.call("elemwise.add", {q, zeroPoint});
  bool u8 = t == DType::UInt8;
  q = c.call("elemwise.clip", {q}, {{"lower", Arg(u8 ? 0.0 : -128.0)}, {"upper", Arg(u8 ? 255.0 : 127.0)}});
  return c.astype(q, t);
}

void importQuantizeLinear(NodeCx &c) {
  DType t = quantType(c, 2);
  Node *x = c.astype(c.node(0), DType::Float32);
  Node *zp = c.has(2) ? alongAxis(c, 2, 0) : nullptr;
  c.out(0, quantize(c, x, alongAxis(c, 1, 0), zp, t));
}

void importDequantizeLinear(NodeCx &c) {
  Node *x = c.astype(c.node(0), DType::Float32);
  if (c.has(2))
    x = c.call("elemwise.sub", {x, alongAxis(c, 2, 0)});
  c.out(0, c.call("elemwise.mul", {x, alongAxis(c, 1, 0)}));
}

/// scale = (max(0, max x) - min(0, min x)) / 255, zero point =
/// saturate(round(-min(0, min x) / scale)), y = quantize(x) to uint8.
void importDynamicQuantizeLinear(NodeCx &c) {
  Node *x = c.astype(c.node(0), DType::Float32);
  Node *hi = c.call("elemwise.maximum", {c.call("math.max", {x}), 0.0});
  Node *lo = c.call("elemwise.minimum", {c.call("math.min", {x}), 0.0});
  Node *scale = c.call("elemwise.div", {c.call("elemwise.sub", {hi, lo}), 255.0});
  Node *zp = quantize(c, c.call("elemwise.neg", {lo}), scale, nullptr, DType::UInt8);
  c.out(0, quantize(c, x, scale, c.astype(zp, DType::Float32), DType::UInt8));
  c.out(1, scale);
  c.out(2, zp);
}

// -- Integer and quantized linear algebra ---------------------------------------
//
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv subtract the zero
// points and multiply in float64: the 8-bit operands less their zero points
// lie in [-255, 255], so every product and every sum of fewer than 2^37 of
// them is an integer below 2^53 and exact in float64 (matmul runs on dgemm,
// conv_nd has a float64 loop). The *Integer ops cast the exact sums to
// int32; the QLinear ops requantize them (round half to even, saturate).

/// Fails unless input `i` is uint8 or int8; returns its dtype.
DType int8Type(NodeCx &c, size_t i, const char *what) {
  auto t = c.dtype(i);
  if (!t || (*t != DType::UInt8 && *t != DType::Int8))
    c.fail(fmt::format("{} must be uint8 or int8, got {}", what,
                       t ? dtypeName(*t).str() : std::string("an unknown dtype")));
  return *t;
}

/// Scale or zero point input `i` as dtype `t`, shaped to broadcast against
/// the tensor it applies to: a scalar as it is; a 1-D tensor (one value per
/// row or output channel) reshaped to (n, 1 x `trailing`); higher ranks (the
/// broadcastable forms of newer opsets) as they are.
Node *perSlice(NodeCx &c, size_t i, DType t, int64_t trailing) {
  Node *v = c.astype(c.node(i), t);
  if (c.rank(i) != 1 || trailing == 0)
    return v;
  std::vector<int64_t> s(size_t(trailing) + 1, 1);
  s[0] = -1;
  return c.call("tensor.reshape", {v, tupleOf(s)});
}

/// Input `x` less zero point input `zp` (when given), as float64. The zero
/// point must have x's dtype.
Node *centred(NodeCx &c, size_t x, size_t zp, int64_t trailing) {
  DType t = int8Type(c, x, "the quantized input");
  Node *v = c.astype(c.node(x), DType::Float64);
  if (!c.has(zp))
    return v;
  if (c.dtype(zp) != t)
    c.fail(fmt::format("zero point input {} must have the type of input {} ({})", zp, x,
                       dtypeName(t).str()));
  return c.call("elemwise.sub", {v, perSlice(c, zp, DType::Float64, trailing)});
}

/// (a - a_zero_point) @ (b - b_zero_point) in float64; a's zero point per
/// row (M), b's per column (N).
Node *integerMatmul(NodeCx &c, size_t a, size_t aZp, size_t b, size_t bZp) {
  Node *x = centred(c, a, aZp, c.rank(a) >= 2 ? 1 : 0);
  Node *y = centred(c, b, bZp, 0);
  return c.call("math.matmul", {x, y});
}

/// conv_nd((x - x_zero_point), (w - w_zero_point), bias) in float64 with
/// Conv's attributes; x's zero point per tensor, w's per output channel.
Node *integerConv(NodeCx &c, size_t x, size_t xZp, size_t w, size_t wZp, Node *bias) {
  const Shape &xs = c.dims(x), &ws = c.shape(w);
  if (xs.size() < 3 || ws.size() != xs.size())
    c.fail(fmt::format("input {} and weight {} do not fit", dim::dimsStr(xs), dim::dimsStr(ws)));
  if (c.has(xZp) && c.rank(xZp) != 0 && c.dims(xZp) != Shape{1})
    c.fail("the input's zero point must be a scalar (per-tensor)");
  size_t nd = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
  if (auto ks = c.ais("kernel_shape"); ks && *ks != k)
    c.fail("kernel_shape does not match the weight");
  std::vector<int64_t> s = c.ais("strides").value_or(std::vector<int64_t>(nd, 1));
  std::vector<int64_t> d = c.ais("dilations").value_or(std::vector<int64_t>(nd, 1));
  std::string autoPad = c.as("auto_pad", "NOTSET");
  checkSamePads(c, autoPad, in, s);
  checkWindow(c, in, k, s, d);
  std::vector<int64_t> p = windowPads(autoPad, c.ais("pads"), in, k, s, d);
  checkWindowValues(c, "pads", p);
  Node *xv = centred(c, x, xZp, 0);
  Node *wv = centred(c, w, wZp, int64_t(nd) + 1);
  return c.call("nn.conv_nd", {xv, wv, bias ? Arg(bias) : Arg::none()},
                {{"stride", tupleOf(s)}, {"padding", tupleOf(p)}, {"dilation", tupleOf(d)},
                 {"groups", c.ai("group", 1)}});
}

void importMatMulInteger(NodeCx &c) {
  c.out(0, c.astype(integerMatmul(c, 0, 2, 1, 3), DType::Int32));
}

void importConvInteger(NodeCx &c) {
  c.out(0, c.astype(integerConv(c, 0, 2, 1, 3, nullptr), DType::Int32));
}

/// The requantization multiplier a_scale * b_scale / y_scale, computed in
/// float32 as the reference does, as float64; `trailing` as perSlice's.
Node *multiplier(NodeCx &c, size_t aScale, int64_t aTrailing, size_t bScale, int64_t bTrailing,
                 size_t yScale, int64_t yTrailing) {
  for (size_t i : {aScale, bScale, yScale})
    if (auto t = c.dtype(i); !t || !isFloat(*t))
      c.fail(fmt::format("scale input {} must be a float tensor", i));
  Node *m = c.call("elemwise.mul", {perSlice(c, aScale, DType::Float32, aTrailing),
                                    perSlice(c, bScale, DType::Float32, bTrailing)});
  m = c.call("elemwise.div", {m, perSlice(c, yScale, DType::Float32, yTrailing)});
  return c.astype(m, DType::Float64);
}

/// The exact float64 sums `acc` requantized to y's type: saturate(round(acc
/// * multiplier) + y_zero_point).
Node *requantize(NodeCx &c, Node *acc, Node *mult, size_t yZp, int64_t yTrailing) {
  DType t = quantType(c, yZp);
  Node *zp = c.has(yZp) ? perSlice(c, yZp, DType::Float64, yTrailing) : nullptr;
  return quantize(c, c.call("elemwise.mul", {acc, mult}), nullptr, zp, t);
}

/// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale,
/// y_zero_point. a's and y's scales and zero points per tensor or per row,
/// b's per tensor or per column.
void importQLinearMatMul(NodeCx &c) {
  int64_t aRows = c.rank(0) >= 2 ? 1 : 0, yRows = c.rank(0) >= 2 && c.rank(3) >= 2 ? 1 : 0;
  Node *acc = integerMatmul(c, 0, 2, 3, 5);
  c.out(0, requantize(c, acc, multiplier(c, 1, aRows, 4, 0, 6, yRows), 7, yRows));
}

/// Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
/// y_zero_point, B. x's and y's scale and zero point per tensor, w's per
/// tensor or per output channel; B int32, quantized with scale x_scale *
/// w_scale and zero point 0.
void importQLinearConv(NodeCx &c) {
  for (size_t i : {size_t(1), size_t(6), size_t(7)})
    if (c.has(i) && c.rank(i) != 0 && c.dims(i) != Shape{1})
      c.fail("the input's scale and the output's scale and zero point must be scalars "
             "(per-tensor)");
  Node *bias = nullptr;
  if (c.has(8)) {
    if (c.dtype(8) != DType::Int32)
      c.fail("the bias must be int32");
    bias = c.astype(c.node(8), DType::Float64);
  }
  Node *acc = integerConv(c, 0, 2, 3, 5, bias);
  int64_t spatial = c.rank(0) - 2;
  c.out(0, requantize(c, acc, multiplier(c, 1, 0, 4, spatial, 6, 0), 7, 0));
}

} // namespace

void registerQuantOnnxImport(OnnxImportTable &t) {
  t.add("QuantizeLinear", 10, kMaxOpset, importQuantizeLinear);
  t.add("DequantizeLinear", 10, kMaxOpset, importDequantizeLinear);
  t.add("DynamicQuantizeLinear", 11, kMaxOpset, importDynamicQuantizeLinear);
  t.add("MatMulInteger", 10, kMaxOpset, importMatMulInteger);
  t.add("ConvInteger", 10, kMaxOpset, importConvInteger);
  t.add("QLinearMatMul", 10, kMaxOpset, importQLinearMatMul);
  t.add("QLinearConv", 10, kMaxOpset, importQLinearConv);
}

// -- Export -------------------------------------------------------------------

void registerQuantOnnxExport(OnnxExportTable &) {}

} // namespace tmg::io::onnxdetail
