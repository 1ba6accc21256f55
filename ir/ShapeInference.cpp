//===- ShapeInference.cpp - Output types from input types -----------------===//
//
// The entry point of type inference: `inferTypes` finds the rule of a
// call's op in the shape rule table, which every op family fills from its
// `ir/ops/<family>.cpp`, and infers calls of builtin modules here. Ops
// without a rule are left untyped; `opsWithoutShapeRule` lists them.
//
//===----------------------------------------------------------------------===//
#include "tm/ir/ShapeInference.h"
#include "tm/ir/Strings.h"
#include "tm/ir/ElemwiseModes.h"

#include <algorithm>

#include "ops/ShapeRules.h"
#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"
#include "tm/ir/ModuleTable.h"

namespace tmg {

std::optional<Shape> broadcastShapes(llvm::ArrayRef<int64_t> a,
                                     llvm::ArrayRef<int64_t> b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x == y || y == 1)
      out[i] = x;
    else if (x == 1)
      out[i] = y;
    else if (x >= 0 && y >= 0)
      return std::nullopt;
    else if (x >= 0 || y >= 0)
      out[i] = std::max(x, y); // a size other than 1: the other dim is 1 or equal
    else
      out[i] = kUnknownDim; // two different symbols: either may be 1
  }
  return out;
}

namespace shapes {

const ShapeRuleTable &shapeRuleTable() {
  static const ShapeRuleTable table = [] {
    ShapeRuleTable t("shape");
    registerElementwiseShapeRules(t);
    registerActivationShapeRules(t);
    registerLinalgShapeRules(t);
    registerConvShapeRules(t);
    registerPoolShapeRules(t);
    registerNormShapeRules(t);
    registerReduceShapeRules(t);
    registerShapeShapeRules(t);
    registerIndexShapeRules(t);
    registerCreationShapeRules(t);
    registerResizeShapeRules(t);
    registerQuantShapeRules(t);
    registerRnnShapeRules(t);
    return t;
  }();
  return table;
}

} // namespace shapes

namespace {

using shapes::Operand;
using shapes::ShapeContext;
using shapes::Types;

/// The output type of an op call: its rule, when its op has one.
Types opCall(const Expr &e, const OpSchema &schema, llvm::StringRef name) {
  if (!opAcceptsStrings(schema.kind()))
    for (size_t i = 0; i < e.numInputs(); ++i)
      if (auto *t = llvm::dyn_cast<TensorNode>(e.input(i)); t && t->hasDType() && isString(t->dtype()))
        raiseAt(Location::atExpr(e.id()), "{}: input '{}' has dtype string, which this op does not support "
                "(string tensors support data movement, equality, cast and string_normalizer)",
                name.str(), t->name().str());
  const shapes::ShapeRule *rule =
      shapes::shapeRuleTable().lookup(schema.kind());
  if (!rule || !rule->fn)
    return std::nullopt;
  return rule->fn(ShapeContext(e, name, rule->symbolic), schema.kind());
}

/// `Elemwise(method)(*inputs)`: the NumPy broadcast of every input, the
/// promoted dtype (bool for predicates).
Types elemwiseModule(const ShapeContext &c, const CallMethod &cm,
                     const Module &m) {
  const TreeDef *method = m.value("method");
  const ElemwiseMode *mode =
      method && method->isConst() && method->value().isString()
          ? lookupElemwiseMode(method->value().getString())
          : nullptr;
  if (!mode)
    c.fail(fmt::format("unknown Elemwise method {}",
                       method ? method->str() : "(none)"));
  size_t n = cm.numArgs() - 1;
  if (n != size_t(mode->arity))
    c.fail(fmt::format("Elemwise mode {} takes {} inputs, got {}", mode->name,
                       mode->arity, n));
  std::optional<Operand> acc;
  for (size_t i = 1; i < cm.numArgs(); ++i) {
    auto x = c.operand(cm.arg(i));
    if (!x)
      return std::nullopt;
    if (!acc) {
      acc = std::move(x);
      continue;
    }
    if (acc->shape && x->shape) {
      auto b = broadcastShapes(*acc->shape, *x->shape);
      if (!b)
        c.fail(fmt::format("shapes {} and {} do not broadcast",
                           dim::dimsStr(*acc->shape), dim::dimsStr(*x->shape)));
      acc->shape = std::move(b);
    } else {
      acc->shape.reset();
    }
    if (acc->dtype && x->dtype)
      acc->dtype = shapes::promote(*acc, *x);
    else
      acc->dtype.reset();
    acc->weak = acc->weak && x->weak;
  }
  if (mode->predicate)
    acc->dtype = DType::Bool;
  else if (mode->toFloat && acc->dtype && !isFloat(*acc->dtype))
    acc->dtype = DType::Float32;
  return c.one(std::move(acc->shape), acc->dtype);
}

/// The weight of a builtin module as an operand (nullopt when it has none).
std::optional<Operand> weightOperand(const Module &m) {
  const Tensor *w = m.tensor("weight");
  if (!w)
    return std::nullopt;
  Operand wo;
  wo.shape = Shape(w->shape().begin(), w->shape().end());
  wo.dtype = w->dtype();
  return wo;
}

/// What a module type rule sees: the call, the module, its input x.
struct ModuleCall {
  ShapeContext &c;
  const CallMethod &cm;
  const Module &m;
  std::optional<Operand> x;
  TreeDef val(const char *n) const { return m.value(n) ? *m.value(n) : TreeDef(); }
};
using ModuleRule = Types (*)(ModuleCall &);

Types convModule(ModuleCall &k) {
  auto wo = weightOperand(k.m);
  if (!wo)
    return std::nullopt;
  bool tr = llvm::isa<ConvTranspose2d>(&k.m);
  return shapes::convShape(k.c, k.x, wo, 2, k.val("stride"), k.val("padding"),
                           k.val("dilation"), k.m.intValue("groups"), tr,
                           tr ? k.val("output_padding") : TreeDef::constant(Scalar(0)));
}

Types linearModule(ModuleCall &k) {
  const Tensor *w = k.m.tensor("weight");
  auto &x = k.x;
  if (!x || !x->shape || !w)
    return std::nullopt;
  if (x->shape->empty() || (isKnownDim(x->shape->back()) && x->shape->back() != w->dim(1)))
    k.c.fail(fmt::format("input {} does not fit weight {} (out, in)", dim::dimsStr(*x->shape),
                         dim::dimsStr(w->shape())));
  Shape out = *x->shape;
  out.back() = w->dim(0);
  return k.c.one(out, x->dtype);
}

Types batchNormModule(ModuleCall &k) {
  auto &x = k.x;
  if (x && x->shape &&
      (x->shape->size() < 2 ||
       (isKnownDim((*x->shape)[1]) && (*x->shape)[1] != k.m.intValue("num_features"))))
    k.c.fail(fmt::format("input {} does not have {} channels", dim::dimsStr(*x->shape),
                         k.m.intValue("num_features")));
  return x ? k.c.one(std::move(x->shape), x->dtype) : std::nullopt;
}

Types poolModule(ModuleCall &k) {
  return shapes::poolShape(k.c, k.x, k.val("kernel_size"), k.val("stride"), k.val("padding"));
}

Types adaptivePoolModule(ModuleCall &k) {
  return shapes::adaptivePoolShape(k.c, k.x, k.val("oshp"));
}

Types flattenModule(ModuleCall &k) {
  return shapes::flattenShape(k.c, k.x, k.m.intValue("start_axis"), k.m.intValue("end_axis"));
}

Types embeddingModule(ModuleCall &k) {
  const Tensor *w = k.m.tensor("weight");
  if (!k.x || !k.x->shape || !w)
    return std::nullopt;
  Shape out = *k.x->shape;
  out.push_back(w->dim(1));
  return k.c.one(out, w->dtype());
}

Types elemwiseModuleRule(ModuleCall &k) { return elemwiseModule(k.c, k.cm, k.m); }

/// Activations, normalisations over the last axes, identities.
Types sameTypeModule(ModuleCall &k) {
  return k.x ? k.c.one(std::move(k.x->shape), k.x->dtype) : std::nullopt;
}

const ModuleTable<ModuleRule> &moduleRules() {
  static const ModuleTable<ModuleRule> t = {
      {&Conv2d::staticType(), convModule},
      {&ConvTranspose2d::staticType(), convModule},
      {&Linear::staticType(), linearModule},
      {&BatchNorm2d::staticType(), batchNormModule},
      {&MaxPool2d::staticType(), poolModule},
      {&AvgPool2d::staticType(), poolModule},
      {&AdaptiveAvgPool2d::staticType(), adaptivePoolModule},
      {&Flatten::staticType(), flattenModule},
      {&Embedding::staticType(), embeddingModule},
      {&Elemwise::staticType(), elemwiseModuleRule},
      {&ReLU::staticType(), sameTypeModule},
      {&ReLU6::staticType(), sameTypeModule},
      {&GELU::staticType(), sameTypeModule},
      {&Sigmoid::staticType(), sameTypeModule},
      {&SiLU::staticType(), sameTypeModule},
      {&Hardswish::staticType(), sameTypeModule},
      {&Identity::staticType(), sameTypeModule},
      {&Softmax::staticType(), sameTypeModule},
      {&Dropout::staticType(), sameTypeModule},
      {&LayerNorm::staticType(), sameTypeModule},
  };
  return t;
}

/// A call of a builtin module: the type rule of its module type.
Types moduleCall(const CallMethod &cm) {
  ModuleNode *mn = cm.moduleNode();
  Module *m = mn ? mn->owner() : nullptr;
  if (!m || !m->isBuiltin() || cm.numArgs() < 2)
    return std::nullopt;
  const ModuleRule *rule = moduleRules().find(*m);
  if (!rule)
    return std::nullopt;
  ShapeContext c(cm, m->typeName());
  ModuleCall k{c, cm, *m, c.operand(cm.arg(1))};
  return (*rule)(k);
}

} // namespace

std::optional<TensorTypes> inferTypes(const Expr &e) {
  if (auto *cf = llvm::dyn_cast<CallFunction>(&e))
    return opCall(e, cf->func(), cf->func().printName());
  if (auto *cm = llvm::dyn_cast<CallMethod>(&e)) {
    if (cm->isModuleCall())
      return moduleCall(*cm);
    return opCall(e, *cm->methodSchema(), cm->method());
  }
  if (auto *ap = llvm::dyn_cast<Apply>(&e))
    return opCall(e, ap->opdef(), ap->opdef().name());
  return std::nullopt;
}

std::vector<const ModuleType *> modulesWithShapeRule() { return moduleRules().types(); }

std::vector<OpKind> opsWithoutShapeRule() {
  return shapes::shapeRuleTable().missing();
}

llvm::StringRef shapeRuleFamily(OpKind k) {
  return shapes::shapeRuleTable().family(k);
}

} // namespace tmg
