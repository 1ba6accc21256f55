//===- ModuleCheck.cpp - Builtin modules have what their kernels read -----===//
#include "tm/ir/ModuleCheck.h"

#include <optional>

#include "tm/ir/CheckedSize.h"
#include "tm/ir/IR.h"
#include "tm/ir/ModuleTable.h"

namespace tmg {
namespace {

/// Checks of one module's attributes; each problem becomes a Diagnostic
/// "module 'path' (Type): ...".
class AttrChecker {
public:
  AttrChecker(const Module &m, llvm::StringRef path, std::vector<Diagnostic> &diags)
      : m_(m), diags_(diags) {
    prefix_ = fmt::format("module '{}' ({})", path.empty() ? "<top>" : path.str(),
                          m.typeName().str());
  }

  template <typename... Args> void error(fmt::format_string<Args...> f, Args &&...args) {
    diags_.emplace_back(Location(),
                        prefix_ + ": " + fmt::format(f, std::forward<Args>(args)...));
  }

  /// A parameter or buffer of rank `rank` (-1: any) and a float dtype;
  /// nullptr (after reporting it when `required`) when absent or wrong.
  const Tensor *tensor(const char *name, bool required, int64_t rank) {
    const Tensor *t = m_.tensor(name);
    if (!t || !t->defined()) {
      if (m_.hasAttr(name))
        error("attribute '{}' must be a parameter or buffer tensor", name);
      else if (required)
        error("has no '{}' parameter, which its kernel reads", name);
      return nullptr;
    }
    if (rank >= 0 && int64_t(t->rank()) != rank) {
      error("'{}' must have rank {}, got shape {}", name, rank, shapeStr(t->shape()));
      return nullptr;
    }
    if (!isFloat(t->dtype())) {
      error("'{}' must be a float tensor, got {}", name, dtypeName(t->dtype()).str());
      return nullptr;
    }
    return t;
  }

  /// A rank-1 tensor of `size` elements, when present.
  void vector(const char *name, int64_t size, bool required = false) {
    const Tensor *t = tensor(name, required, 1);
    if (t && size >= 0 && t->dim(0) != size)
      error("'{}' has {} elements, expected {}", name, t->dim(0), size);
  }

  const TreeDef *value(const char *name) {
    const TreeDef *v = m_.value(name);
    if (!v)
      error("has no '{}' attribute, which its kernel reads", name);
    return v;
  }

  /// An int, or a tuple/list of 1 or 2 ints, each >= `min`.
  void pair(const char *name, int64_t min) {
    const TreeDef *v = value(name);
    if (!v)
      return;
    std::vector<int64_t> xs;
    if (!intsOf(*v, xs) || xs.empty() || xs.size() > 2) {
      error("'{}' must be an int or a pair of ints, got {}", name, v->str());
      return;
    }
    for (int64_t x : xs)
      if (x < min) {
        error("'{}' must be at least {}, got {}", name, min, v->str());
        return;
      }
  }

  std::optional<int64_t> integer(const char *name, std::optional<int64_t> min = {}) {
    const TreeDef *v = value(name);
    if (!v)
      return std::nullopt;
    if (!v->isConst() || !v->value().isInt()) {
      error("'{}' must be an int, got {}", name, v->str());
      return std::nullopt;
    }
    int64_t x = v->value().getInt();
    if (min && x < *min) {
      error("'{}' must be at least {}, got {}", name, *min, x);
      return std::nullopt;
    }
    return x;
  }

  void scalarOf(const char *name, bool (Scalar::*is)() const, const char *kind,
                bool noneOk = false) {
    const TreeDef *v = value(name);
    if (v && !(v->isConst() && ((v->value().*is)() || (noneOk && v->value().isNone()))))
      error("'{}' must be {}, got {}", name, kind, v->str());
  }
  void number(const char *name) { scalarOf(name, &Scalar::isNumber, "a number"); }
  void string(const char *name) { scalarOf(name, &Scalar::isString, "a string"); }

  /// The ints of an int or a tuple/list of ints.
  static bool intsOf(const TreeDef &v, std::vector<int64_t> &out) {
    if (v.isConst() && v.value().isInt()) {
      out.push_back(v.value().getInt());
      return true;
    }
    if (v.kind() != TreeDef::Kind::Tuple && v.kind() != TreeDef::Kind::List)
      return false;
    for (size_t i = 0; i < v.numChildren(); ++i) {
      const TreeDef &c = v.child(i);
      if (!c.isConst() || !c.value().isInt())
        return false;
      out.push_back(c.value().getInt());
    }
    return true;
  }

  const Module &m_;

private:
  std::string prefix_;
  std::vector<Diagnostic> &diags_;
};

void checkConv(AttrChecker &c, bool transposed) {
  const Tensor *w = c.tensor("weight", true, 4);
  std::optional<int64_t> groups = c.integer("groups", 1);
  c.pair("stride", 1);
  c.pair("padding", 0);
  c.pair("dilation", 1);
  if (transposed)
    c.pair("output_padding", 0);
  else
    c.string("padding_mode");
  if (!w || !groups)
    return;
  if (w->dim(0) % *groups)
    c.error("weight {} does not split into {} groups", shapeStr(w->shape()), *groups);
  c.vector("bias", transposed ? w->dim(1) * *groups : w->dim(0));
}

void checkBatchNorm(AttrChecker &c) {
  c.number("eps");
  const TreeDef *track = c.m_.value("track_running_stats");
  bool needStats = !track || !track->isConst() || !track->value().isBool() ||
                   track->value().getBool();
  const Tensor *mean = c.tensor("running_mean", needStats, 1);
  const Tensor *var = c.tensor("running_var", needStats || mean, 1);
  int64_t size = mean ? mean->dim(0) : var ? var->dim(0) : -1;
  if (var && size >= 0 && var->dim(0) != size)
    c.error("running_var has {} elements but running_mean {}", var->dim(0), size);
  c.vector("weight", size);
  c.vector("bias", size);
}

void checkLayerNorm(AttrChecker &c) {
  c.number("eps");
  const TreeDef *ns = c.value("normalized_shape");
  std::vector<int64_t> dims;
  if (ns && (!AttrChecker::intsOf(*ns, dims) || dims.empty())) {
    c.error("'normalized_shape' must be an int or a tuple of ints, got {}", ns->str());
    return;
  }
  for (const char *name : {"weight", "bias"})
    if (const Tensor *t = c.tensor(name, false, -1); t && ns && t->shape() != llvm::ArrayRef(dims))
      c.error("'{}' has shape {}, expected normalized_shape {}", name, shapeStr(t->shape()),
              shapeStr(dims));
}

void checkLinear(AttrChecker &c) {
  if (const Tensor *w = c.tensor("weight", true, 2))
    c.vector("bias", w->dim(0));
}
void checkConv2d(AttrChecker &c) { checkConv(c, false); }
void checkConvTranspose2d(AttrChecker &c) { checkConv(c, true); }
void checkEmbedding(AttrChecker &c) { c.tensor("weight", true, 2); }
void checkMaxPool(AttrChecker &c) {
  c.pair("kernel_size", 1);
  c.pair("stride", 1);
  c.pair("padding", 0);
}
void checkAvgPool(AttrChecker &c) {
  checkMaxPool(c);
  c.string("mode");
}
void checkAdaptivePool(AttrChecker &c) { c.pair("oshp", 1); }
void checkFlatten(AttrChecker &c) {
  c.integer("start_axis");
  c.integer("end_axis");
}
void checkSoftmax(AttrChecker &c) {
  c.scalarOf("axis", &Scalar::isInt, "an int or None", /*noneOk=*/true);
}
void checkElemwise(AttrChecker &c) { c.string("method"); }

/// What each builtin module type needs to run; types without an entry
/// need no attribute.
const ModuleTable<void (*)(AttrChecker &)> &moduleChecks() {
  static const ModuleTable<void (*)(AttrChecker &)> t = {
      {&Linear::staticType(), checkLinear},
      {&Conv2d::staticType(), checkConv2d},
      {&ConvTranspose2d::staticType(), checkConvTranspose2d},
      {&BatchNorm2d::staticType(), checkBatchNorm},
      {&LayerNorm::staticType(), checkLayerNorm},
      {&Embedding::staticType(), checkEmbedding},
      {&MaxPool2d::staticType(), checkMaxPool},
      {&AvgPool2d::staticType(), checkAvgPool},
      {&AdaptiveAvgPool2d::staticType(), checkAdaptivePool},
      {&Flatten::staticType(), checkFlatten},
      {&Softmax::staticType(), checkSoftmax},
      {&Elemwise::staticType(), checkElemwise},
  };
  return t;
}

} // namespace

void verifyBuiltinModule(const Module &m, llvm::StringRef path, std::vector<Diagnostic> &diags) {
  if (!m.isBuiltin())
    return;
  if (auto *check = moduleChecks().find(m)) {
    AttrChecker c(m, path, diags);
    (*check)(c);
  }
}

void verifyBuiltinModules(const Module &root, std::vector<Diagnostic> &diags) {
  const_cast<Module &>(root).namedModules(
      [&](const std::string &path, Module &m) { verifyBuiltinModule(m, path, diags); });
}

void checkNodeSizes(const TracedModule &m, const SizeLimits &limits,
                    std::vector<Diagnostic> &diags) {
  SizeLimits limit = limits.resolved();
  auto check = [&](const Node *n, const Expr *e) {
    auto *t = llvm::dyn_cast<TensorNode>(n);
    if (!t || !t->shape() || !t->hasDType())
      return; // symbolic dims count as 1 until they have values
    auto bytes = checkTensorBytes("node '" + t->name().str() + "'", knownSizes(*t->shape()), t->dtype(),
                                  limit);
    if (bytes.failed())
      diags.emplace_back(Location::atExpr(e->id()), bytes.diagnostic().message);
  };
  for (const auto &s : m.signatures()) {
    for (const Node *n : s.graph->inputs())
      check(n, n->expr());
    for (const Expr *e : s.graph->exprs(true).asList())
      for (const Node *n : e->outputs())
        check(n, e);
  }
}

} // namespace tmg
