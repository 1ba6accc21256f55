//===- linalg.cpp - ONNX mapping of linear algebra ops ----------*- C++ -*-===//
//
// The ONNX importers and exporters of the linalg family: Gemm (as linear
// when it is one, else matmul with scaling), MatMul, Einsum and Det, and
// the export of linear, matmul, linear with a fused activation, einsum,
// det and scaled dot-product attention (as the ops it fuses).
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

namespace tmg::io::onnxdetail {
namespace {

void importGemm(NodeCx &c) {
  double alpha = c.af("alpha", 1.0), beta = c.af("beta", 1.0);
  bool ta = c.ai("transA", 0), tb = c.ai("transB", 0);
  Node *A = c.node(0), *B = c.node(1);
  if (!ta && tb && alpha == 1.0 && beta == 1.0 && c.rank(0) == 2 &&
      (!c.has(2) || c.rank(2) == 1))
    return c.out(0, c.call("nn.linear", {A, B},
                           {{"bias", c.has(2) ? Arg(c.node(2)) : Arg::none()}}));
  Node *y = c.call("math.matmul", {A, B}, {{"transpose_a", ta}, {"transpose_b", tb}});
  if (alpha != 1.0)
    y = c.call("elemwise.mul", {y, alpha});
  if (c.has(2)) {
    Node *C = c.node(2);
    if (beta != 1.0)
      C = c.call("elemwise.mul", {C, beta});
    y = c.call("elemwise.add", {y, C});
  }
  c.out(0, y);
}

} // namespace

void registerLinalgOnnxImport(OnnxImportTable &t) {
  t.add("Gemm", 1, kMaxOpset, importGemm);
  t.add("MatMul", 1, kMaxOpset,
        [](NodeCx &c) { c.out(0, c.call("math.matmul", {c.node(0), c.node(1)})); });
  t.add("Einsum", 12, kMaxOpset, [](NodeCx &c) {
    std::vector<Arg> xs;
    for (size_t i = 0; i < c.numIn(); ++i)
      xs.push_back(c.node(i));
    c.out(0, c.call("einsum.einsum", {c.as("equation", ""), Arg::list(xs)}));
  });
  t.add("Det", 11, kMaxOpset, [](NodeCx &c) { c.out(0, c.call("math.det", {c.node(0)})); });
}

// -- Export -------------------------------------------------------------------

namespace {

void exportLinear(ExportCall &c) {
  std::string x = c.operand("inp"), w = c.operand("weight");
  const Shape &xs = c.shapeOf(c.e.input(0));
  if (xs.size() == 2) {
    std::vector<std::string> ins = {x, w};
    if (!c.isNone("bias"))
      ins.push_back(c.operand("bias"));
    c.simple("Gemm", ins);
    Exporter::attrI(c.n, "transB", 1);
    return;
  }
  onnx::NodeProto *t;
  std::string wt = c.emit("Transpose", {w}, c.out + "_wt", &t);
  Exporter::attrIs(t, "perm", {1, 0});
  if (c.isNone("bias"))
    return (void)c.simple("MatMul", {x, wt});
  std::string mm = c.emit("MatMul", {x, wt}, c.out + "_mm");
  c.simple("Add", {mm, c.operand("bias")});
}

void exportMatmul(ExportCall &c) {
  bool method = c.method;
  std::string a = method ? c.operand("self") : c.operand("inp1");
  std::string b = method ? c.operand("value") : c.operand("inp2");
  auto tr = [&](std::string v, const Node *nd, const char *flag) {
    if (method || !c.boolean(flag))
      return v;
    size_t r = c.shapeOf(nd).size();
    std::vector<int64_t> perm;
    for (size_t i = 0; i < r; ++i)
      perm.push_back(int64_t(i));
    std::swap(perm[r - 1], perm[r - 2]);
    onnx::NodeProto *t;
    std::string o = c.emit("Transpose", {v}, c.out + "_t", &t);
    Exporter::attrIs(t, "perm", perm);
    return o;
  };
  const Expr &e = c.e;
  a = tr(a, method ? e.namedArg("self")->node() : e.namedArg("inp1")->node(), "transpose_a");
  b = tr(b, method ? e.namedArg("value")->node() : e.namedArg("inp2")->node(), "transpose_b");
  c.simple("MatMul", {a, b});
}

/// scaled_dot_product_attention as the ops it fuses: Mul by the scale,
/// MatMul with key's last two axes transposed, Softmax over the last axis,
/// MatMul with value.
void exportAttention(ExportCall &c) {
  std::string q = c.operand("query"), k = c.operand("key"),
              v = c.operand("value");
  const Shape &qs = c.shapeOf(c.e.namedArg("query")->node());
  const Shape &ks = c.shapeOf(c.e.namedArg("key")->node());
  if (qs.back() < 0 && c.isNone("scale"))
    c.fail("the default scale needs a static feature size");
  double scale = c.isNone("scale") ? 1.0 / std::sqrt(double(qs.back()))
                                   : c.number("scale");
  std::vector<int64_t> perm;
  for (size_t i = 0; i < ks.size(); ++i)
    perm.push_back(int64_t(i));
  std::swap(perm[ks.size() - 1], perm[ks.size() - 2]);
  onnx::NodeProto *t;
  std::string kt = c.emit("Transpose", {k}, c.out + "_kt", &t);
  Exporter::attrIs(t, "perm", perm);
  std::string qsc = c.emit(
      "Mul",
      {q, c.init(Tensor::full({}, scale, DType::Float32), c.out + "_scale")},
      c.out + "_q");
  std::string scores = c.emit("MatMul", {qsc, kt}, c.out + "_scores");
  onnx::NodeProto *sm;
  std::string p = c.emit("Softmax", {scores}, c.out + "_p", &sm);
  Exporter::attrI(sm, "axis", -1);
  c.simple("MatMul", {p, v});
}

} // namespace

void registerLinalgOnnxExport(OnnxExportTable &t) {
  t.add("linalg", {OpKind::ScaledDotProductAttention}, exportAttention);
  t.add("linalg", {OpKind::Linear}, exportLinear);
  t.add("linalg", {OpKind::Matmul, OpKind::MMatmul}, exportMatmul);
  t.add("linalg", {OpKind::LinearAct},
        [](ExportCall &c) { exportFusedActivation(c, OpKind::Linear); });
  t.add("linalg", {OpKind::Einsum}, [](ExportCall &c) {
    auto a = c.e.namedArg("operands");
    std::vector<std::string> ins;
    for (size_t i = 0; a && i < a->def.numChildren(); ++i)
      ins.push_back(c.nameOf(c.e.input(a->firstLeaf + i)));
    c.simple("Einsum", ins);
    Exporter::attrS(c.n, "equation", c.string("equation"));
  });
  t.add("linalg", {OpKind::Det}, [](ExportCall &c) { c.simple("Det", {c.operand("inp")}); });
}

} // namespace tmg::io::onnxdetail
