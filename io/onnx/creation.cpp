//===- creation.cpp - ONNX mapping of tensor creation -----------*- C++ -*-===//
//
// The ONNX importers and exporters of the creation family:
// ConstantOfShape (full), Range (arange), and EyeLike and Trilu, whose
// masks of the static shape are computed at import time.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

#include "tm/runtime/Kernels.h"

namespace tmg::io::onnxdetail {
namespace {

void importConstantOfShape(NodeCx &c) {
  std::vector<int64_t> shape = c.ints(0);
  double v = 0;
  DType dt = DType::Float32;
  if (auto *a = c.attr("value")) {
    Tensor t = tensorFromProto(a->t());
    dt = t.dtype();
    v = t.numel() ? t.at(0) : 0.0;
  }
  c.out(0, c.call("tensor.full", {tupleOf(shape), v}, {{"dtype", dtypeName(dt).str()}}));
}

void importRange(NodeCx &c) {
  DType dt = c.cst(0).dtype();
  double st = c.cst(0).at(0), lim = c.cst(1).at(0), dl = c.cst(2).at(0);
  c.out(0, c.call("tensor.arange", {st, lim, dl}, {{"dtype", dtypeName(dt).str()}}));
}

/// Trilu and EyeLike: a mask (or the eye) of the static shape.
void importMask(NodeCx &c, bool eye) {
  const Shape &s = c.shape(0);
  if (s.size() < 2)
    c.fail("the input needs rank >= 2");
  int64_t k = !eye ? (c.has(1) ? c.ints(1).at(0) : 0) : c.ai("k", 0);
  bool upper = c.ai("upper", 1);
  int64_t M = s[s.size() - 2], N = s.back();
  Tensor mask = Tensor::zeros({M, N}, DType::Bool);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      mask.data<uint8_t>()[i * N + j] = eye ? j - i == k : upper ? j - i >= k : j - i <= k;
  if (eye) {
    std::optional<DType> dt =
        c.hasAttr("dtype") ? fromOnnxType(int32_t(c.ai("dtype", 1))) : c.dtype(0);
    if (!dt)
      c.fail("unsupported dtype");
    return c.outConst(0, rt::cast(mask, *dt));
  }
  DType dt = c.dtype(0).value_or(DType::Float32);
  c.out(0, c.call("tensor.where",
                  {c.constant(mask), c.node(0), c.constant(Tensor::zeros({}, dt))}));
}

} // namespace

void registerCreationOnnxImport(OnnxImportTable &t) {
  t.add("ConstantOfShape", 1, kMaxOpset, importConstantOfShape);
  t.add("Range", 1, kMaxOpset, importRange);
  t.add("Trilu", 1, kMaxOpset, [](NodeCx &c) { importMask(c, false); });
  t.add("EyeLike", 1, kMaxOpset, [](NodeCx &c) { importMask(c, true); });
}

// -- Export -------------------------------------------------------------------

namespace {

/// Creation ops with constant arguments: a Constant node of their value.
void exportCreation(ExportCall &c) {
  OpKind k = c.k;
  auto dt2 = parseDType(c.string("dtype"));
  if (!dt2)
    c.fail("unknown dtype");
  Tensor t;
  if (k == OpKind::Arange) {
    double start = c.number("start"), step = c.number("step"), stop;
    if (c.isNone("stop")) {
      stop = start;
      start = 0;
    } else {
      stop = c.number("stop");
    }
    t = rt::arange(start, stop, step, *dt2);
  } else {
    double v = k == OpKind::Zeros ? 0.0 : k == OpKind::Ones ? 1.0 : c.number("value");
    t = rt::full(c.ints("shape"), v, *dt2);
  }
  onnx::NodeProto *n;
  std::string o = c.emit("Constant", {}, c.out, &n);
  auto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  tensorToProto(t, *a->mutable_t());
  c.bind(o);
}

} // namespace

void registerCreationOnnxExport(OnnxExportTable &t) {
  t.add("creation", {OpKind::Zeros, OpKind::Ones, OpKind::Full, OpKind::Arange},
        exportCreation);
}

} // namespace tmg::io::onnxdetail
