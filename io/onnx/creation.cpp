//===- creation.cpp - ONNX mapping of tensor creation -----------*- C++ -*-===//
//
// The ONNX importers and exporters of the creation family:
// ConstantOfShape (full), Range (arange), and EyeLike and Trilu, whose
// masks of the static shape are computed at import time (Trilu's k may be
// read at run time), and the window functions HannWindow, HammingWindow
// and BlackmanWindow (a cosine sum over arange(size)). A shape, bound or
// size known only at run time is passed to full or arange as a tensor node.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

#include "tm/runtime/Kernels.h"

namespace tmg::io::onnxdetail {
namespace {

void importConstantOfShape(NodeCx &c) {
  Arg shape = c.runtime(0) ? Arg(c.intsNode(0)) : tupleOf(c.ints(0));
  double v = 0;
  DType dt = DType::Float32;
  if (auto *a = c.attr("value")) {
    Tensor t = tensorFromProto(a->t());
    dt = t.dtype();
    v = t.numel() ? t.at(0) : 0.0;
  }
  c.out(0, c.call("tensor.full", {shape, v}, {{"dtype", dtypeName(dt).str()}}));
}

/// Range: start, limit and delta known at import time, or read at run time.
void importRange(NodeCx &c) {
  std::optional<DType> dt = c.dtype(0);
  if (!dt)
    c.fail("the dtype of 'start' is not known");
  std::vector<Arg> bounds;
  for (size_t i = 0; i < 3; ++i)
    bounds.push_back(c.runtime(i) ? Arg(c.node(i)) : Arg(c.cst(i).at(0)));
  c.out(0, c.call("tensor.arange", bounds, {{"dtype", dtypeName(*dt).str()}}));
}

/// Trilu with k read at run time: the mask compares the constant diagonal
/// offsets j - i of the static shape with k.
void importTriluRuntime(NodeCx &c) {
  const Shape &s = c.shape(0);
  int64_t M = s[s.size() - 2], N = s.back();
  Tensor off = Tensor::zeros({M, N}, DType::Int64);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      off.data<int64_t>()[i * N + j] = j - i;
  Node *k = c.intsNode(1);
  Node *mask = c.call(c.ai("upper", 1) ? "elemwise.greater_equal" : "elemwise.less_equal",
                      {c.constant(off), k});
  DType dt = c.dtype(0).value_or(DType::Float32);
  c.out(0, c.call("tensor.where", {mask, c.node(0), c.constant(Tensor::zeros({}, dt))}));
}

/// Trilu and EyeLike: a mask (or the eye) of the static shape.
void importMask(NodeCx &c, bool eye) {
  const Shape &s = c.shape(0);
  if (s.size() < 2)
    c.fail("the input needs rank >= 2");
  if (!eye && c.runtime(1))
    return importTriluRuntime(c);
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

/// The generalized cosine windows of opset 17: y[n] = a0 - a1 cos(2 pi n /
/// N) + a2 cos(4 pi n / N) for n in [0, size), N = size when periodic, else
/// size - 1; computed in float64 and cast to output_datatype (default
/// float32).
void importWindow(NodeCx &c, double a0, double a1, double a2) {
  if (auto t = c.dtype(0); !t || (*t != DType::Int32 && *t != DType::Int64))
    c.fail("size must be an int32 or int64 scalar");
  std::optional<DType> dt = fromOnnxType(int32_t(c.ai("output_datatype", 1)));
  if (!dt)
    c.fail(fmt::format("unsupported output_datatype {}", c.ai("output_datatype", 1)));
  bool periodic = c.ai("periodic", 1);
  Arg size = c.runtime(0) ? Arg(c.intsNode(0)) : Arg(double(c.ints(0).at(0)));
  Node *n = c.call("tensor.arange", {0.0, size, 1.0}, {{"dtype", "float64"}});
  Node *len = c.runtime(0) ? c.astype(c.intsNode(0), DType::Float64)
                           : c.constant(Tensor::full({}, double(c.ints(0).at(0)), DType::Float64));
  if (!periodic)
    len = c.call("elemwise.sub", {len, 1.0});
  Node *phase = c.call("elemwise.div", {c.call("elemwise.mul", {n, 2.0 * M_PI}), len});
  Node *y = c.call("elemwise.sub",
                   {a0, c.call("elemwise.mul", {c.call("elemwise.cos", {phase}), a1})});
  if (a2 != 0.0)
    y = c.call("elemwise.add",
               {y, c.call("elemwise.mul",
                          {c.call("elemwise.cos", {c.call("elemwise.mul", {phase, 2.0})}), a2})});
  c.out(0, c.astype(y, *dt));
}

} // namespace

void registerCreationOnnxImport(OnnxImportTable &t) {
  t.add("ConstantOfShape", 1, kMaxOpset, importConstantOfShape);
  t.add("Range", 1, kMaxOpset, importRange);
  t.add("Trilu", 1, kMaxOpset, [](NodeCx &c) { importMask(c, false); });
  t.add("EyeLike", 1, kMaxOpset, [](NodeCx &c) { importMask(c, true); });
  t.add("HannWindow", 17, kMaxOpset, [](NodeCx &c) { importWindow(c, 0.5, 0.5, 0.0); });
  t.add("HammingWindow", 17, kMaxOpset,
        [](NodeCx &c) { importWindow(c, 25.0 / 46.0, 21.0 / 46.0, 0.0); });
  t.add("BlackmanWindow", 17, kMaxOpset, [](NodeCx &c) { importWindow(c, 0.42, 0.5, 0.08); });
}

// -- Export -------------------------------------------------------------------

namespace {

void attrTensor(onnx::NodeProto *n, const Tensor &t) {
  auto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  tensorToProto(t, *a->mutable_t());
}

bool holdsNode(const ExportCall &c, const char *name) {
  auto a = c.e.namedArg(name);
  return a && a->node();
}

/// arange with a bound read at run time: Range on bounds of dtype `dt`.
void exportRuntimeArange(ExportCall &c, DType dt) {
  auto bound = [&](const char *name, double dflt) {
    if (holdsNode(c, name))
      return c.operand(name, dt);
    double v = c.isNone(name) ? dflt : c.number(name);
    return c.init(Tensor::full({}, v, dt), c.out + "_" + name);
  };
  std::vector<std::string> ins = {bound("start", 0), bound("stop", 0), bound("step", 1)};
  if (c.isNone("stop"))
    ins = {c.init(Tensor::full({}, 0, dt), c.out + "_start"), ins[0], ins[2]};
  c.simple("Range", ins);
}

/// Creation ops with a shape or bound read at run time: ConstantOfShape or
/// Range; false for constant arguments.
bool exportRuntimeCreation(ExportCall &c, DType dt) {
  if (c.k == OpKind::Arange) {
    if (!holdsNode(c, "start") && !holdsNode(c, "stop") && !holdsNode(c, "step"))
      return false;
    exportRuntimeArange(c, dt);
    return true;
  }
  if (!holdsNode(c, "shape"))
    return false;
  double v = c.k == OpKind::Zeros ? 0.0 : c.k == OpKind::Ones ? 1.0 : c.number("value");
  attrTensor(c.simple("ConstantOfShape", {c.operand("shape", DType::Int64)}),
             Tensor::full({1}, v, dt));
  return true;
}

/// Creation ops with constant arguments: a Constant node of their value.
void exportCreation(ExportCall &c) {
  OpKind k = c.k;
  auto dt2 = parseDType(c.string("dtype"));
  if (!dt2)
    c.fail("unknown dtype");
  if (exportRuntimeCreation(c, *dt2))
    return;
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
  attrTensor(n, t);
  c.bind(o);
}

} // namespace

void registerCreationOnnxExport(OnnxExportTable &t) {
  t.add("creation", {OpKind::Zeros, OpKind::Ones, OpKind::Full, OpKind::Arange},
        exportCreation);
}

} // namespace tmg::io::onnxdetail
