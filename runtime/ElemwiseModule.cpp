//===- ElemwiseModule.cpp - The Elemwise builtin module -------------------===//
#include "ElemwiseModule.h"

#include "tm/ir/ElemwiseModes.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Extra.h"

namespace tmg::rt {

namespace {

Tensor zerosLike(const Tensor &x) { return cast(Tensor::fromFloats({}, {0}), x.dtype()); }

Tensor add(const Tensor &a, const Tensor &b) { return binary(BinaryOp::Add, a, b); }
Tensor mul(const Tensor &a, const Tensor &b) { return binary(BinaryOp::Mul, a, b); }

/// log(exp(a) + exp(b)) as max + log(exp(a - max) + exp(b - max)).
Tensor logSumExp(const Tensor &a, const Tensor &b) {
  Tensor m = binary(BinaryOp::Maximum, a, b);
  Tensor ea = unary(UnaryOp::Exp, binary(BinaryOp::Sub, a, m));
  Tensor eb = unary(UnaryOp::Exp, binary(BinaryOp::Sub, b, m));
  return add(m, unary(UnaryOp::Log, add(ea, eb)));
}

std::optional<Tensor> unaryMode(llvm::StringRef m, const Tensor &x) {
  static const std::pair<const char *, UnaryOp> U[] = {
      {"RELU", UnaryOp::Relu},       {"ABS", UnaryOp::Abs},     {"EXP", UnaryOp::Exp},
      {"LOG", UnaryOp::Log},         {"NEGATE", UnaryOp::Neg},  {"SIGMOID", UnaryOp::Sigmoid},
      {"TANH", UnaryOp::Tanh},       {"FAST_TANH", UnaryOp::Tanh}, {"ERF", UnaryOp::Erf},
      {"H_SWISH", UnaryOp::Hardswish}, {"SILU", UnaryOp::Silu}, {"GELU", UnaryOp::Gelu},
      {"RELU6", UnaryOp::Relu6},     {"HSIGMOID", UnaryOp::Hardsigmoid},
      {"SQRT", UnaryOp::Sqrt}};
  for (const auto &[n, op] : U)
    if (m == n)
      return unary(op, x);
  static const std::pair<const char *, MathOp> M[] = {
      {"ACOS", MathOp::Acos},   {"ASIN", MathOp::Asin},   {"CEIL", MathOp::Ceil},
      {"COS", MathOp::Cos},     {"FLOOR", MathOp::Floor}, {"SIN", MathOp::Sin},
      {"SINH", MathOp::Sinh},   {"COSH", MathOp::Cosh},   {"ASINH", MathOp::Asinh},
      {"ACOSH", MathOp::Acosh}, {"ATANH", MathOp::Atanh}, {"TAN", MathOp::Tan},
      {"SOFTPLUS", MathOp::Softplus}, {"SIGN", MathOp::Sign}};
  for (const auto &[n, op] : M)
    if (m == n)
      return mathUnary(op, x);
  if (m == "NOT")
    return logicalNot(x);
  if (m == "ISNAN")
    return isNan(x);
  if (m == "ISINF")
    return isInf(x);
  if (m == "SQUARE")
    return mul(x, x);
  if (m == "LOGSIGMOID")
    return unary(UnaryOp::Neg, mathUnary(MathOp::Softplus, unary(UnaryOp::Neg, x)));
  return std::nullopt;
}

std::optional<Tensor> binaryMode(llvm::StringRef m, const Tensor &a, const Tensor &b) {
  static const std::pair<const char *, BinaryOp> B[] = {
      {"ADD", BinaryOp::Add}, {"SUB", BinaryOp::Sub},     {"MUL", BinaryOp::Mul},
      {"TRUE_DIV", BinaryOp::Div}, {"POW", BinaryOp::Pow}, {"MAX", BinaryOp::Maximum},
      {"MIN", BinaryOp::Minimum}};
  for (const auto &[n, op] : B)
    if (m == n)
      return binary(op, a, b);
  static const std::pair<const char *, CompareOp> C[] = {
      {"LT", CompareOp::Less}, {"LEQ", CompareOp::LessEqual}, {"EQ", CompareOp::Equal},
      {"NEQ", CompareOp::NotEqual}};
  for (const auto &[n, op] : C)
    if (m == n)
      return compare(op, a, b);
  static const std::pair<const char *, LogicalOp> L[] = {
      {"AND", LogicalOp::And}, {"OR", LogicalOp::Or}, {"XOR", LogicalOp::Xor}};
  for (const auto &[n, op] : L)
    if (m == n)
      return logical(op, a, b);
  if (m == "MOD")
    return mod(a, b);
  if (m == "FUSE_ADD_RELU")
    return unary(UnaryOp::Relu, add(a, b));
  if (m == "FUSE_ADD_SIGMOID")
    return unary(UnaryOp::Sigmoid, add(a, b));
  if (m == "FUSE_ADD_TANH")
    return unary(UnaryOp::Tanh, add(a, b));
  if (m == "FUSE_ADD_H_SWISH")
    return unary(UnaryOp::Hardswish, add(a, b));
  if (m == "SWITCH_GT0") // a > 0 ? b : 0
    return where(compare(CompareOp::Greater, a, zerosLike(a)), b, zerosLike(b));
  if (m == "LOG_SUM_EXP")
    return logSumExp(a, b);
  if (m == "PRELU")
    return prelu(a, b);
  return std::nullopt;
}

std::optional<Tensor> naryMode(llvm::StringRef m, llvm::ArrayRef<Tensor> x) {
  if (m == "FUSE_MUL_ADD3")
    return add(mul(x[0], x[1]), x[2]);
  if (m == "FUSE_MUL_ADD4")
    return add(mul(x[0], x[1]), mul(x[2], x[3]));
  if (m == "COND_LEQ_MOV" || m == "COND_LT_MOV") { // x0 <= x1 ? x2 : 0
    CompareOp op = m == "COND_LEQ_MOV" ? CompareOp::LessEqual : CompareOp::Less;
    return where(compare(op, x[0], x[1]), x[2], zerosLike(x[2]));
  }
  if (m == "CLIP") // min(max(x, lower), upper)
    return binary(BinaryOp::Minimum, binary(BinaryOp::Maximum, x[0], x[1]), x[2]);
  return std::nullopt;
}

} // namespace

Tensor elemwiseMode(const Location &loc, llvm::StringRef name, llvm::ArrayRef<Tensor> ins) {
  const ElemwiseMode *mode = lookupElemwiseMode(name);
  if (!mode)
    raiseAt(loc, "unknown Elemwise mode '{}'", name.str());
  if (ins.size() != size_t(mode->arity))
    raiseAt(loc, "Elemwise mode {} takes {} inputs, got {}", mode->name, mode->arity,
            ins.size());
  llvm::StringRef m = mode->name;
  std::optional<Tensor> r = mode->arity == 1   ? unaryMode(m, ins[0])
                            : mode->arity == 2 ? binaryMode(m, ins[0], ins[1])
                                               : naryMode(m, ins);
  if (!r)
    raiseAt(loc, "the runtime does not implement Elemwise mode {}", m.str());
  return std::move(*r);
}

namespace {

/// The step of Elemwise mode `name` over the tensor nodes `ins` (the call's
/// inputs), checked when the plan is made so an unsupported mode or a wrong
/// number of inputs fails then.
StepFn elemwiseStep(const Expr &e, llvm::StringRef name, llvm::ArrayRef<Node *> ins,
                    LowerContext &ctx) {
  Location loc = Location::atExpr(e.id());
  const ElemwiseMode *mode = lookupElemwiseMode(name);
  if (!mode)
    raiseAt(loc, "unknown Elemwise mode '{}'", name.str());
  if (e.numOutputs() != 1 || ins.size() != size_t(mode->arity))
    raiseAt(loc, "Elemwise mode {} takes {} tensor inputs and returns one tensor",
            mode->name, mode->arity);
  std::vector<uint32_t> slots;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (!ins[i] || !llvm::isa<TensorNode>(ins[i]))
      raiseAt(loc, "Elemwise input {} is not a tensor", i);
    slots.push_back(ctx.slot(ins[i]));
  }
  std::vector<Tensor> probe(slots.size(), Tensor::fromFloats({}, {0}));
  elemwiseMode(loc, mode->name, probe);
  std::string mname = mode->name;
  uint32_t o = ctx.slot(e.output(0));
  return [slots, o, loc, mname](Value *s, RunState &) {
    std::vector<Tensor> args;
    args.reserve(slots.size());
    for (uint32_t a : slots)
      args.push_back(s[a].tensor);
    s[o].tensor = elemwiseMode(loc, mname, args);
  };
}

} // namespace

StepFn lowerElemwiseModule(const Expr &e, const Module &m, LowerContext &ctx) {
  const Scalar &method = m.scalar("method");
  if (!method.isString())
    raiseAt(Location::atExpr(e.id()), "Elemwise needs a string method, not {}", method.repr());
  ctx.readsModule(&m);
  std::vector<Node *> ins;
  for (size_t i = 1; i < e.numArgs(); ++i)
    ins.push_back(e.arg(i).node());
  return elemwiseStep(e, method.getString(), ins, ctx);
}

StepFn lowerElemwiseDef(const Expr &e, OpKind, LowerContext &ctx) {
  const TreeDef &attrs = llvm::cast<Apply>(e).attrs();
  int64_t k = attrs.findStringKey("mode");
  if (k < 0 || !attrs.child(size_t(k)).isConst() ||
      !attrs.child(size_t(k)).value().isString())
    raiseAt(Location::atExpr(e.id()), "Elemwise needs a string mode attribute");
  std::vector<Node *> ins;
  for (size_t i = 0; i < e.numInputs(); ++i)
    ins.push_back(e.input(i));
  return elemwiseStep(e, attrs.child(size_t(k)).value().getString(), ins, ctx);
}

} // namespace tmg::rt
