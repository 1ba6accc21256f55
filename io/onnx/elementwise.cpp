//===- elementwise.cpp - ONNX mapping of elementwise ops --------*- C++ -*-===//
//
// The ONNX importers and exporters of the elementwise family: unary math,
// binary arithmetic and comparisons (with pre-opset-7 broadcasting),
// variadic Max/Min/Sum/Mean, Clip, Where, Cast and Shrink.
//
//===----------------------------------------------------------------------===//
#include "Import.h"

namespace tmg::io::onnxdetail {
namespace {

void importUnary(NodeCx &c, const char *fn) { c.out(0, c.call(fn, {c.node(0)})); }

void importBinary(NodeCx &c, const char *fn) {
  Node *a = c.node(0), *b = c.node(1);
  if (c.opset < 7 && c.ai("broadcast", 0) && c.hasAttr("axis")) {
    // Legacy broadcasting: B aligned at `axis` of A.
    int64_t ra = c.rank(0), rb = c.rank(1), ax = c.axis(c.ai("axis", 0), ra);
    Shape s = c.shape(1);
    for (int64_t i = ax + rb; i < ra; ++i)
      s.push_back(1);
    b = c.call("tensor.reshape", {b, tupleOf(s)});
  }
  c.out(0, c.call(fn, {a, b}));
}

/// Div and Pow: ONNX keeps the first operand's dtype (integer Div truncates).
void importKeepDType(NodeCx &c, const char *fn) {
  auto dt = c.dtype(0);
  importBinary(c, fn);
  Val &o = c.cx.vals[c.n.output(0)];
  if (dt && o.dtype && *o.dtype != *dt)
    c.out(0, c.astype(o.node, *dt));
}

void importMod(NodeCx &c) {
  Node *a = c.node(0), *b = c.node(1);
  c.out(0, c.call(c.ai("fmod", 0) ? "elemwise.fmod" : "elemwise.mod", {a, b}));
}

/// Max, Min, Sum, Mean of any number of inputs.
void importVariadic(NodeCx &c) {
  const std::string &op = c.n.op_type();
  const char *fn = op == "Max" ? "elemwise.maximum" : op == "Min" ? "elemwise.minimum"
                                                                  : "elemwise.add";
  if (c.numIn() == 1 && op != "Mean")
    return c.outAlias(0, c.val(0));
  Node *acc = c.node(0);
  for (size_t i = 1; i < c.numIn(); ++i)
    acc = c.call(fn, {acc, c.node(i)});
  if (op == "Mean" && c.numIn() > 1)
    acc = c.call("elemwise.div", {acc, double(c.numIn())});
  if (op == "Mean" && c.numIn() == 1)
    return c.outAlias(0, c.val(0));
  c.out(0, acc);
}

void importIsInf(NodeCx &c) {
  c.out(0, c.call("math.isinf", {c.node(0)},
                  {{"detect_positive", bool(c.ai("detect_positive", 1))},
                   {"detect_negative", bool(c.ai("detect_negative", 1))}}));
}

/// Clip before opset 11: bounds are attributes.
void importClipAttrs(NodeCx &c) {
  Arg lo = c.hasAttr("min") ? Arg(c.af("min", 0)) : Arg::none();
  Arg hi = c.hasAttr("max") ? Arg(c.af("max", 0)) : Arg::none();
  c.out(0, c.call("elemwise.clip", {c.node(0)}, {{"lower", lo}, {"upper", hi}}));
}

/// Clip from opset 11: bounds are inputs; unknown ones become max/min.
void importClipInputs(NodeCx &c) {
  Node *x = c.node(0);
  bool cmin = !c.has(1) || c.val(1).cst, cmax = !c.has(2) || c.val(2).cst;
  if (cmin && cmax) {
    bool integer = c.dtype(0) && !isFloat(*c.dtype(0));
    auto bound = [&](size_t i) -> Arg {
      if (!c.has(i))
        return Arg::none();
      double v = c.cst(i).at(0);
      return integer ? Arg(int64_t(v)) : Arg(v);
    };
    return c.out(0, c.call("elemwise.clip", {x}, {{"lower", bound(1)}, {"upper", bound(2)}}));
  }
  if (c.has(1))
    x = c.call("elemwise.maximum", {x, c.node(1)});
  if (c.has(2))
    x = c.call("elemwise.minimum", {x, c.node(2)});
  c.out(0, x);
}

void importWhere(NodeCx &c) {
  c.out(0, c.call("tensor.where", {c.node(0), c.node(1), c.node(2)}));
}

void importCast(NodeCx &c) {
  int32_t t = int32_t(c.ai("to", 0));
  std::optional<DType> to = fromOnnxType(t);
  if (!to)
    c.fail(fmt::format("cast to {} is not supported", onnxTypeName(t)));
  c.out(0, c.astype(c.node(0), *to));
}

void importCastLike(NodeCx &c) {
  std::optional<DType> to = c.dtype(1);
  if (!to)
    c.fail(fmt::format("cast to {} is not supported", onnxTypeName(0)));
  c.out(0, c.astype(c.node(0), *to));
}

void importShrink(NodeCx &c) {
  double l = c.af("lambd", 0.5), bias = c.af("bias", 0.0);
  DType dt = c.dtype(0).value_or(DType::Float32);
  auto num = [&](double v) { return c.constant(Tensor::full({}, v, dt)); };
  Node *x = c.node(0);
  Node *hi = c.call("tensor.where", {c.call("elemwise.greater", {x, num(l)}),
                                     c.call("elemwise.sub", {x, num(bias)}), num(0)});
  c.out(0, c.call("tensor.where", {c.call("elemwise.less", {x, num(-l)}),
                                   c.call("elemwise.add", {x, num(bias)}), hi}));
}

} // namespace

void registerElementwiseOnnxImport(OnnxImportTable &t) {
  static const std::pair<const char *, const char *> unary[] = {
      {"Tanh", "elemwise.tanh"},   {"Erf", "elemwise.erf"},
      {"Exp", "elemwise.exp"},     {"Log", "elemwise.log"},
      {"Sqrt", "elemwise.sqrt"},   {"Neg", "elemwise.neg"},
      {"Abs", "elemwise.abs"},     {"Floor", "elemwise.floor"},
      {"Ceil", "elemwise.ceil"},   {"Round", "elemwise.round"},
      {"Sin", "elemwise.sin"},     {"Cos", "elemwise.cos"},
      {"Tan", "elemwise.tan"},     {"Asin", "elemwise.asin"},
      {"Acos", "elemwise.acos"},   {"Atan", "elemwise.atan"},
      {"Sinh", "elemwise.sinh"},   {"Cosh", "elemwise.cosh"},
      {"Asinh", "elemwise.asinh"}, {"Acosh", "elemwise.acosh"},
      {"Atanh", "elemwise.atanh"}, {"Sign", "math.sign"},
      {"Reciprocal", "elemwise.reciprocal"}, {"Not", "elemwise.logical_not"},
      {"IsNaN", "math.isnan"}};
  static const std::pair<const char *, const char *> binary[] = {
      {"Add", "elemwise.add"},         {"Sub", "elemwise.sub"},
      {"Mul", "elemwise.mul"},         {"Equal", "elemwise.equal"},
      {"Less", "elemwise.less"},       {"Greater", "elemwise.greater"},
      {"LessOrEqual", "elemwise.less_equal"}, {"GreaterOrEqual", "elemwise.greater_equal"},
      {"And", "elemwise.logical_and"}, {"Or", "elemwise.logical_or"},
      {"Xor", "elemwise.logical_xor"}};
  for (auto [op, fn] : unary)
    t.add(op, 1, kMaxOpset, [fn = fn](NodeCx &c) { importUnary(c, fn); });
  for (auto [op, fn] : binary)
    t.add(op, 1, kMaxOpset, [fn = fn](NodeCx &c) { importBinary(c, fn); });
  t.add("Div", 1, kMaxOpset, [](NodeCx &c) { importKeepDType(c, "elemwise.div"); });
  t.add("Pow", 1, kMaxOpset, [](NodeCx &c) { importKeepDType(c, "elemwise.pow"); });
  t.add("Mod", 1, kMaxOpset, importMod);
  for (const char *op : {"Max", "Min", "Sum", "Mean"})
    t.add(op, 1, kMaxOpset, importVariadic);
  t.add("IsInf", 1, kMaxOpset, importIsInf);
  t.add("Clip", 1, 10, importClipAttrs);
  t.add("Clip", 11, kMaxOpset, importClipInputs);
  t.add("Where", 1, kMaxOpset, importWhere);
  t.add("Cast", 1, kMaxOpset, importCast);
  t.add("CastLike", 1, kMaxOpset, importCastLike);
  t.add("Shrink", 1, kMaxOpset, importShrink);
}

} // namespace tmg::io::onnxdetail
