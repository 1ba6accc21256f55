//===- quant.cpp - ONNX mapping of quantisation ops -------------*- C++ -*-===//
//
// The ONNX importers and exporters of the quant family. QuantizeLinear,
// DequantizeLinear and DynamicQuantizeLinear import as the float32
// arithmetic ONNX defines them by (divide, round half to even, add the
// zero point, saturate, cast); scales and zero points may be graph inputs.
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

/// saturate(round(x / scale) + zeroPoint) as `t` (x, scale, zeroPoint float32).
Node *quantize(NodeCx &c, Node *x, Node *scale, Node *zeroPoint, DType t) {
  Node *q = c.call("elemwise.round", {c.call("elemwise.div", {x, scale})});
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

} // namespace

void registerQuantOnnxImport(OnnxImportTable &t) {
  t.add("QuantizeLinear", 10, kMaxOpset, importQuantizeLinear);
  t.add("DequantizeLinear", 10, kMaxOpset, importDequantizeLinear);
  t.add("DynamicQuantizeLinear", 11, kMaxOpset, importDynamicQuantizeLinear);
}

// -- Export -------------------------------------------------------------------

void registerQuantOnnxExport(OnnxExportTable &) {}

} // namespace tmg::io::onnxdetail
