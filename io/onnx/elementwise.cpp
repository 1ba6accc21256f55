//===- elementwise.cpp - ONNX mapping of elementwise ops --------*- C++ -*-===//
//
// The ONNX importers and exporters of the elementwise family: unary math,
// binary arithmetic and comparisons (with pre-opset-7 broadcasting),
// variadic Max/Min/Sum/Mean, Clip, Where, Cast and Shrink.
//
//===----------------------------------------------------------------------===//
#include "Import.h"
#include "Export.h"

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

/// BitShift on unsigned integers: the tensor methods << and >>.
void importBitShift(NodeCx &c) {
  std::string dir = c.as("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    c.fail(fmt::format("direction must be LEFT or RIGHT, got '{}'", dir));
  c.out(0, c.method(c.node(0), dir == "LEFT" ? "__lshift__" : "__rshift__", {c.node(1)}));
}

void importMod(NodeCx &c) {
  Node *a = c.node(0), *b = c.node(1);
  c.out(0, c.call(c.ai("fmod", 0) ? "elemwise.fmod" : "elemwise.mod", {a, b}));
}

/// Max, Min, Sum, Mean of any number of inputs: `fn` folds them, and the
/// mean divides by their number.
void importVariadic(NodeCx &c, const char *fn, bool mean) {
  if (c.numIn() == 1 && !mean)
    return c.outAlias(0, c.val(0));
  Node *acc = c.node(0);
  for (size_t i = 1; i < c.numIn(); ++i)
    acc = c.call(fn, {acc, c.node(i)});
  if (mean && c.numIn() > 1)
    acc = c.call("elemwise.div", {acc, double(c.numIn())});
  if (mean && c.numIn() == 1)
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

/// StringNormalizer: the attributes become the op's constant arguments
/// (stopwords a tuple of strings, None when there are none).
void importStringNormalizer(NodeCx &c) {
  std::vector<Arg> stop;
  if (const onnx::AttributeProto *a = c.attr("stopwords"))
    for (const std::string &w : a->strings())
      stop.emplace_back(w);
  c.out(0, c.call("tensor.string_normalizer", {c.node(0)},
                  {{"case_change_action", Arg(c.as("case_change_action", "NONE"))},
                   {"is_case_sensitive", Arg(c.ai("is_case_sensitive", 0) != 0)},
                   {"stopwords", stop.empty() ? Arg::none() : Arg::tuple(std::move(stop))},
                   {"locale", Arg(c.as("locale", ""))}}));
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
  t.add("BitShift", 11, kMaxOpset, importBitShift);
  t.add("Max", 1, kMaxOpset, [](NodeCx &c) { importVariadic(c, "elemwise.maximum", false); });
  t.add("Min", 1, kMaxOpset, [](NodeCx &c) { importVariadic(c, "elemwise.minimum", false); });
  t.add("Sum", 1, kMaxOpset, [](NodeCx &c) { importVariadic(c, "elemwise.add", false); });
  t.add("Mean", 1, kMaxOpset, [](NodeCx &c) { importVariadic(c, "elemwise.add", true); });
  t.add("IsInf", 1, kMaxOpset, importIsInf);
  t.add("Clip", 1, 10, importClipAttrs);
  t.add("Clip", 11, kMaxOpset, importClipInputs);
  t.add("Where", 1, kMaxOpset, importWhere);
  t.add("Cast", 1, kMaxOpset, importCast);
  t.add("CastLike", 1, kMaxOpset, importCastLike);
  t.add("Shrink", 1, kMaxOpset, importShrink);
  t.add("StringNormalizer", 10, kMaxOpset, importStringNormalizer);
}

// -- Export -------------------------------------------------------------------

namespace {

/// Floor, Ceil, Round: computed in float32, then cast to the output dtype.
void exportRounding(ExportCall &c, const char *op) {
  c.simple(op, {c.first(DType::Float32)});
  if (c.od != DType::Float32)
    c.bind(c.cast(c.nameOf(c.e.output(0)), c.od));
}

void exportClip(ExportCall &c) {
  std::string x = c.first();
  auto bound = [&](const char *name) -> std::string {
    if (c.isNone(name))
      return "";
    return c.init(Tensor::full({}, c.number(name), c.od), c.out + "_" + name);
  };
  c.simple("Clip", {x, bound("lower"), bound("upper")});
}

void exportLogical(ExportCall &c) {
  const char *op = c.k == OpKind::LogicalAnd ? "And" : c.k == OpKind::LogicalOr ? "Or" : "Xor";
  c.simple(op, {c.operand("x", DType::Bool), c.operand("y", DType::Bool)});
}

void exportBitShift(ExportCall &c) {
  if (!isUnsigned(c.od))
    c.fail(fmt::format("ONNX BitShift shifts unsigned integers only, not {}",
                       dtypeName(c.od).str()));
  auto *n = c.simple("BitShift", c.binArgs(c.od, false));
  auto *a = n->add_attribute();
  a->set_name("direction");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(c.k == OpKind::MLShift ? "LEFT" : "RIGHT");
}

void registerArithmeticExports(OnnxExportTable &t) {
  const char *f = "elementwise";
  t.add(f, {OpKind::MLShift, OpKind::MRShift}, exportBitShift);
  t.add(f, {OpKind::Add, OpKind::MAdd, OpKind::MRAdd, OpKind::MIAdd},
        [](ExportCall &c) { c.arith("Add", c.k == OpKind::MRAdd); });
  t.add(f, {OpKind::Sub, OpKind::MSub, OpKind::MISub}, [](ExportCall &c) { c.arith("Sub"); });
  t.add(f, {OpKind::MRSub}, [](ExportCall &c) { c.arith("Sub", true); });
  t.add(f, {OpKind::Mul, OpKind::MMul, OpKind::MRMul, OpKind::MIMul},
        [](ExportCall &c) { c.arith("Mul", c.k == OpKind::MRMul); });
  t.add(f, {OpKind::Div, OpKind::MTrueDiv, OpKind::MITrueDiv},
        [](ExportCall &c) { c.arith("Div"); });
  t.add(f, {OpKind::MRTrueDiv}, [](ExportCall &c) { c.arith("Div", true); });
  t.add(f, {OpKind::Pow, OpKind::MPow}, [](ExportCall &c) { c.arith("Pow"); });
  t.add(f, {OpKind::MRPow}, [](ExportCall &c) { c.arith("Pow", true); });
  t.add(f, {OpKind::Maximum}, [](ExportCall &c) { c.arith("Max"); });
  t.add(f, {OpKind::Minimum}, [](ExportCall &c) { c.arith("Min"); });
  t.add(f, {OpKind::Mod}, [](ExportCall &c) {
    if (isFloat(c.od))
      c.fail("Python-style modulo of floats has no ONNX form");
    c.simple("Mod", c.binArgs(c.od, false));
  });
  t.add(f, {OpKind::Fmod}, [](ExportCall &c) {
    c.simple("Mod", c.binArgs(c.od, false));
    Exporter::attrI(c.n, "fmod", 1);
  });
}

void registerComparisonExports(OnnxExportTable &t) {
  const char *f = "elementwise";
  t.add(f, {OpKind::Equal, OpKind::MEq}, [](ExportCall &c) { c.cmp("Equal"); });
  t.add(f, {OpKind::NotEqual, OpKind::MNe}, [](ExportCall &c) { c.cmp("Equal", true); });
  t.add(f, {OpKind::Less, OpKind::MLt}, [](ExportCall &c) { c.cmp("Less"); });
  t.add(f, {OpKind::LessEqual, OpKind::MLe}, [](ExportCall &c) { c.cmp("LessOrEqual"); });
  t.add(f, {OpKind::Greater, OpKind::MGt}, [](ExportCall &c) { c.cmp("Greater"); });
  t.add(f, {OpKind::GreaterEqual, OpKind::MGe},
        [](ExportCall &c) { c.cmp("GreaterOrEqual"); });
  t.add(f, {OpKind::LogicalAnd, OpKind::LogicalOr, OpKind::LogicalXor}, exportLogical);
  t.add(f, {OpKind::LogicalNot},
        [](ExportCall &c) { c.simple("Not", {c.operand("x", DType::Bool)}); });
}

void registerUnaryExports(OnnxExportTable &t) {
  const char *f = "elementwise";
  static const std::pair<OpKind, const char *> unary[] = {
      {OpKind::Exp, "Exp"},     {OpKind::Log, "Log"},     {OpKind::Sqrt, "Sqrt"},
      {OpKind::Erf, "Erf"},     {OpKind::Tanh, "Tanh"},   {OpKind::Sin, "Sin"},
      {OpKind::Cos, "Cos"},     {OpKind::Tan, "Tan"},     {OpKind::Asin, "Asin"},
      {OpKind::Acos, "Acos"},   {OpKind::Atan, "Atan"},   {OpKind::Sinh, "Sinh"},
      {OpKind::Cosh, "Cosh"},   {OpKind::Asinh, "Asinh"}, {OpKind::Acosh, "Acosh"},
      {OpKind::Atanh, "Atanh"}, {OpKind::Reciprocal, "Reciprocal"}};
  for (auto [k, op] : unary)
    t.add(f, {k}, [op = op](ExportCall &c) { c.un(op); });
  // Computed in the output dtype whatever it is.
  static const std::pair<OpKind, const char *> inOutDType[] = {
      {OpKind::Neg, "Neg"}, {OpKind::MNeg, "Neg"}, {OpKind::Abs, "Abs"},
      {OpKind::MAbs, "Abs"}, {OpKind::Sign, "Sign"}};
  for (auto [k, op] : inOutDType)
    t.add(f, {k}, [op = op](ExportCall &c) { c.simple(op, {c.first(c.od)}); });
  t.add(f, {OpKind::Rsqrt}, [](ExportCall &c) {
    std::string s = c.emit("Sqrt", {c.first(c.od)}, c.out + "_sqrt");
    c.simple("Reciprocal", {s});
  });
  t.add(f, {OpKind::Floor}, [](ExportCall &c) { exportRounding(c, "Floor"); });
  t.add(f, {OpKind::Ceil}, [](ExportCall &c) { exportRounding(c, "Ceil"); });
  t.add(f, {OpKind::Round}, [](ExportCall &c) { exportRounding(c, "Round"); });
  t.add(f, {OpKind::IsNan},
        [](ExportCall &c) { c.simple("IsNaN", {c.first(DType::Float32)}); });
  t.add(f, {OpKind::IsInf}, [](ExportCall &c) {
    c.simple("IsInf", {c.first(DType::Float32)});
    Exporter::attrI(c.n, "detect_positive", c.boolean("detect_positive"));
    Exporter::attrI(c.n, "detect_negative", c.boolean("detect_negative"));
  });
}

} // namespace

void registerElementwiseOnnxExport(OnnxExportTable &t) {
  registerArithmeticExports(t);
  registerComparisonExports(t);
  registerUnaryExports(t);
  const char *f = "elementwise";
  t.add(f, {OpKind::Clip}, exportClip);
  t.add(f, {OpKind::Where}, [](ExportCall &c) {
    c.simple("Where", {c.operand("mask", DType::Bool), c.operand("x", c.od),
                       c.operand("y", c.od)});
  });
  t.add(f, {OpKind::Copy, OpKind::MPos, OpKind::MDetach},
        [](ExportCall &c) { c.simple("Identity", {c.first()}); });
  t.add(f, {OpKind::StringNormalizer}, [](ExportCall &c) {
    onnx::NodeProto *n = c.simple("StringNormalizer", {c.operand("inp")});
    Exporter::attrS(n, "case_change_action", c.string("case_change_action"));
    Exporter::attrI(n, "is_case_sensitive", c.boolean("is_case_sensitive"));
    if (!c.isNone("stopwords")) {
      TreeDef sw = c.constant("stopwords");
      auto *a = n->add_attribute();
      a->set_name("stopwords");
      a->set_type(onnx::AttributeProto::STRINGS);
      for (size_t i = 0; i < sw.numChildren(); ++i)
        if (sw.child(i).isConst() && sw.child(i).value().isString())
          a->add_strings(sw.child(i).value().getString());
    }
    std::string locale = c.string("locale");
    if (!locale.empty())
      Exporter::attrS(n, "locale", locale);
  });
  t.add(f, {OpKind::MAstype}, [](ExportCall &c) {
    c.simple("Cast", {c.operand("self")});
    Exporter::attrI(c.n, "to", toOnnxType(c.od));
  });
}

} // namespace tmg::io::onnxdetail
