//===- Module.cpp - Modules and builtin modules ---------------------------===//
#include "tm/ir/Module.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <tuple>

#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringSet.h>

#include "tm/ir/Diagnostic.h"

namespace tmg {

bool ModuleType::isa(const ModuleType &t) const {
  // Every module class derives from Module, builtins included (the
  // reference's isinstance(m, M.Module)).
  if (&t == &moduleBaseType())
    return true;
  for (const ModuleType *p = this; p; p = p->base)
    if (p == &t)
      return true;
  return false;
}

const ModuleType &moduleBaseType() {
  static const ModuleType t{"Module", false, nullptr, nullptr};
  return t;
}

//===----------------------------------------------------------------------===//
// Builtin module types
//===----------------------------------------------------------------------===//

#define TM_DEFINE_BUILTIN_TYPE(CLASS)                                          \
  const ModuleType &CLASS::staticType() {                                      \
    static const ModuleType t{#CLASS, true, nullptr,                           \
                              [] { return std::make_unique<CLASS>(); }};       \
    return t;                                                                  \
  }
TM_DEFINE_BUILTIN_TYPE(Linear)
TM_DEFINE_BUILTIN_TYPE(Conv2d)
TM_DEFINE_BUILTIN_TYPE(ConvTranspose2d)
TM_DEFINE_BUILTIN_TYPE(BatchNorm2d)
TM_DEFINE_BUILTIN_TYPE(LayerNorm)
TM_DEFINE_BUILTIN_TYPE(Embedding)
TM_DEFINE_BUILTIN_TYPE(MaxPool2d)
TM_DEFINE_BUILTIN_TYPE(AvgPool2d)
TM_DEFINE_BUILTIN_TYPE(AdaptiveAvgPool2d)
TM_DEFINE_BUILTIN_TYPE(Softmax)
TM_DEFINE_BUILTIN_TYPE(Dropout)
TM_DEFINE_BUILTIN_TYPE(Flatten)
TM_DEFINE_BUILTIN_TYPE(Elemwise)
TM_DEFINE_BUILTIN_TYPE(ReLU)
TM_DEFINE_BUILTIN_TYPE(ReLU6)
TM_DEFINE_BUILTIN_TYPE(GELU)
TM_DEFINE_BUILTIN_TYPE(Sigmoid)
TM_DEFINE_BUILTIN_TYPE(SiLU)
TM_DEFINE_BUILTIN_TYPE(Hardswish)
TM_DEFINE_BUILTIN_TYPE(Identity)
#undef TM_DEFINE_BUILTIN_TYPE

struct ModuleTypeRegistry::Impl {
  mutable std::shared_mutex mu;
  std::deque<ModuleType> owned;
  std::vector<const ModuleType *> order;
  llvm::StringMap<const ModuleType *> byName;
};

ModuleTypeRegistry::ModuleTypeRegistry() : impl_(new Impl) {
  for (const ModuleType *t :
       {&moduleBaseType(), &Linear::staticType(), &Conv2d::staticType(),
        &ConvTranspose2d::staticType(), &BatchNorm2d::staticType(),
        &LayerNorm::staticType(), &Embedding::staticType(),
        &MaxPool2d::staticType(), &AvgPool2d::staticType(),
        &AdaptiveAvgPool2d::staticType(), &Softmax::staticType(),
        &Dropout::staticType(), &Flatten::staticType(),
        &Elemwise::staticType(), &ReLU::staticType(), &ReLU6::staticType(),
        &GELU::staticType(), &Sigmoid::staticType(), &SiLU::staticType(),
        &Hardswish::staticType(), &Identity::staticType()}) {
    impl_->order.push_back(t);
    impl_->byName[t->name] = t;
  }
}

ModuleTypeRegistry &ModuleTypeRegistry::instance() {
  static ModuleTypeRegistry r;
  return r;
}

const ModuleType *ModuleTypeRegistry::lookup(llvm::StringRef name) const {
  std::shared_lock l(impl_->mu);
  auto it = impl_->byName.find(name);
  return it == impl_->byName.end() ? nullptr : it->second;
}

const ModuleType &ModuleTypeRegistry::add(ModuleType t) {
  std::unique_lock l(impl_->mu);
  auto it = impl_->byName.find(t.name);
  if (it != impl_->byName.end()) {
    if (it->second->builtin == t.builtin && it->second->base == t.base)
      return *it->second;
    raise("module type '{}' is already registered differently", t.name);
  }
  impl_->owned.push_back(std::move(t));
  const ModuleType *p = &impl_->owned.back();
  impl_->order.push_back(p);
  impl_->byName[p->name] = p;
  return *p;
}

std::vector<const ModuleType *> ModuleTypeRegistry::all() const {
  std::shared_lock l(impl_->mu);
  return impl_->order;
}

//===----------------------------------------------------------------------===//
// Module
//===----------------------------------------------------------------------===//

Module::Module(std::string typeName)
    : Module(Kind::Plain, moduleBaseType(), std::move(typeName)) {}

Module::Module(Kind k, const ModuleType &type, std::string typeName)
    : kind_(k), type_(&type), typeName_(std::move(typeName)) {
  if (typeName_.empty())
    raise("a module needs a class name");
}

Module::~Module() = default;

ModuleAttr &Module::upsert(llvm::StringRef name, ModuleAttr::Kind kind) {
  ++version_;
  if (name.empty())
    raise("module '{}': attribute names must not be empty", typeName_);
  if (name.contains('.'))
    raise("module '{}': attribute name '{}' must not contain '.'", typeName_,
          name.str());
  auto it = index_.find(name);
  if (it != index_.end()) {
    ModuleAttr &a = attrs_[it->second];
    if (a.module)
      a.module->parent_ = nullptr;
    if (a.kind == ModuleAttr::Kind::Submodule && kind != ModuleAttr::Kind::Submodule)
      checkNotAliased(name);
    a.kind = kind;
    a.tensor = Tensor();
    a.module.reset();
    a.value = TreeDef();
    a.target.clear();
    return a;
  }
  index_[name] = attrs_.size();
  attrs_.push_back(ModuleAttr{name.str(), kind, Tensor(), nullptr, TreeDef()});
  return attrs_.back();
}

Tensor &Module::registerParameter(llvm::StringRef name, Tensor t) {
  if (!t.defined())
    raise("module '{}': parameter '{}' is undefined", typeName_, name.str());
  ModuleAttr &a = upsert(name, ModuleAttr::Kind::Parameter);
  a.tensor = std::move(t);
  return a.tensor;
}

Tensor &Module::registerBuffer(llvm::StringRef name, Tensor t) {
  if (!t.defined())
    raise("module '{}': buffer '{}' is undefined", typeName_, name.str());
  ModuleAttr &a = upsert(name, ModuleAttr::Kind::Buffer);
  a.tensor = std::move(t);
  return a.tensor;
}

Module &Module::registerModule(llvm::StringRef name, std::unique_ptr<Module> m) {
  if (!m)
    raise("module '{}': submodule '{}' is null", typeName_, name.str());
  if (m->parent_)
    raise("module '{}': submodule '{}' already belongs to '{}'", typeName_,
          name.str(), m->parent_->typeName_);
  for (Module *p = this; p; p = p->parent_)
    if (p == m.get())
      raise("module '{}': registering '{}' would create a cycle", typeName_,
            name.str());
  ModuleAttr &a = upsert(name, ModuleAttr::Kind::Submodule);
  m->parent_ = this;
  m->attrName_ = name.str();
  a.module = std::move(m);
  return *a.module;
}

Module &Module::registerModuleAlias(llvm::StringRef name, llvm::StringRef target) {
  const ModuleAttr *t = attr(target);
  if (t && t->kind == ModuleAttr::Kind::Alias)
    t = attr(t->target);
  if (!t || t->kind != ModuleAttr::Kind::Submodule || !t->module)
    raise("module '{}': alias '{}' names '{}', which is not a submodule", typeName_,
          name.str(), target.str());
  if (t->name == name)
    raise("module '{}': '{}' cannot be an alias of itself", typeName_, name.str());
  std::string to = t->name;
  ModuleAttr &a = upsert(name, ModuleAttr::Kind::Alias);
  a.target = std::move(to);
  return *module(name);
}

void Module::checkNotAliased(llvm::StringRef name) const {
  for (const ModuleAttr &a : attrs_)
    if (a.kind == ModuleAttr::Kind::Alias && a.target == name)
      raise("module '{}': submodule '{}' is also named '{}' (an alias); remove "
            "the alias first",
            typeName_, name.str(), a.name);
}

void Module::setValue(llvm::StringRef name, TreeDef v) {
  if (v.numLeaves() != 0)
    raise("module '{}': value attribute '{}' must be a constant", typeName_,
          name.str());
  ModuleAttr &a = upsert(name, ModuleAttr::Kind::Value);
  a.value = std::move(v);
}

bool Module::removeAttr(llvm::StringRef name) {
  auto it = index_.find(name);
  if (it == index_.end())
    return false;
  size_t i = it->second;
  if (attrs_[i].kind == ModuleAttr::Kind::Submodule)
    checkNotAliased(name);
  ++version_;
  if (attrs_[i].module)
    attrs_[i].module->parent_ = nullptr;
  attrs_.erase(attrs_.begin() + i);
  index_.clear();
  for (size_t j = 0; j < attrs_.size(); ++j)
    index_[attrs_[j].name] = j;
  return true;
}

size_t Module::removeAttrsIf(const std::function<bool(const ModuleAttr &)> &pred) {
  std::vector<bool> gone(attrs_.size());
  llvm::StringSet<> goneModules;
  for (size_t i = 0; i < attrs_.size(); ++i)
    if ((gone[i] = pred(attrs_[i])) && attrs_[i].kind == ModuleAttr::Kind::Submodule)
      goneModules.insert(attrs_[i].name);
  for (size_t i = 0; i < attrs_.size(); ++i)
    if (!gone[i] && attrs_[i].kind == ModuleAttr::Kind::Alias &&
        goneModules.count(attrs_[i].target))
      raise("cannot remove submodule '{}' of '{}': alias '{}' names it",
            attrs_[i].target, typeName_, attrs_[i].name);
  size_t kept = 0;
  for (size_t i = 0; i < attrs_.size(); ++i) {
    if (gone[i]) {
      if (attrs_[i].module)
        attrs_[i].module->parent_ = nullptr;
      continue;
    }
    if (kept != i)
      attrs_[kept] = std::move(attrs_[i]);
    ++kept;
  }
  size_t removed = attrs_.size() - kept;
  if (!removed)
    return 0;
  attrs_.resize(kept);
  index_.clear();
  for (size_t j = 0; j < attrs_.size(); ++j)
    index_[attrs_[j].name] = j;
  ++version_;
  return removed;
}

std::unique_ptr<Module> Module::takeModule(llvm::StringRef name) {
  ModuleAttr *a = attr(name);
  if (!a || a->kind != ModuleAttr::Kind::Submodule)
    return nullptr;
  std::unique_ptr<Module> m = std::move(a->module);
  m->parent_ = nullptr;
  removeAttr(name);
  return m;
}

std::unique_ptr<Module> Module::releaseModule(llvm::StringRef name) {
  ModuleAttr *a = attr(name);
  if (!a || a->kind != ModuleAttr::Kind::Submodule || !a->module)
    return nullptr;
  ++version_;
  std::unique_ptr<Module> m = std::move(a->module);
  m->parent_ = nullptr;
  return m;
}

bool Module::hasAttr(llvm::StringRef name) const { return index_.count(name); }

const ModuleAttr *Module::attr(llvm::StringRef name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &attrs_[it->second];
}
ModuleAttr *Module::attr(llvm::StringRef name) {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &attrs_[it->second];
}

const Tensor *Module::tensor(llvm::StringRef name) const {
  const ModuleAttr *a = attr(name);
  if (!a || (a->kind != ModuleAttr::Kind::Parameter &&
             a->kind != ModuleAttr::Kind::Buffer))
    return nullptr;
  return &a->tensor;
}
Tensor *Module::tensor(llvm::StringRef name) {
  return const_cast<Tensor *>(static_cast<const Module *>(this)->tensor(name));
}

Module *Module::module(llvm::StringRef name) const {
  const ModuleAttr *a = attr(name);
  if (a && a->kind == ModuleAttr::Kind::Alias)
    a = attr(a->target);
  if (!a || a->kind != ModuleAttr::Kind::Submodule)
    return nullptr;
  return a->module.get();
}

const TreeDef *Module::value(llvm::StringRef name) const {
  const ModuleAttr *a = attr(name);
  if (!a || a->kind != ModuleAttr::Kind::Value)
    return nullptr;
  return &a->value;
}

const Scalar &Module::scalar(llvm::StringRef name) const {
  const TreeDef *v = value(name);
  if (!v)
    raise("module '{}' has no value attribute '{}'", typeName_, name.str());
  if (!v->isConst())
    raise("attribute '{}' of module '{}' is {}, not a scalar", name.str(),
          typeName_, v->str());
  return v->value();
}
int64_t Module::intValue(llvm::StringRef name) const {
  const Scalar &s = scalar(name);
  if (!s.isInt())
    raise("attribute '{}' of module '{}' is {}, not an int", name.str(),
          typeName_, s.repr());
  return s.getInt();
}
double Module::floatValue(llvm::StringRef name) const {
  return scalar(name).toDouble();
}
bool Module::boolValue(llvm::StringRef name) const {
  const Scalar &s = scalar(name);
  if (!s.isBool())
    raise("attribute '{}' of module '{}' is {}, not a bool", name.str(),
          typeName_, s.repr());
  return s.getBool();
}

Module *Module::resolveModule(llvm::StringRef path) const {
  const Module *m = this;
  if (path.empty())
    return const_cast<Module *>(m);
  while (!path.empty()) {
    auto [head, rest] = path.split('.');
    m = m->module(head);
    if (!m)
      return nullptr;
    path = rest;
  }
  return const_cast<Module *>(m);
}

const Tensor *Module::resolveTensor(llvm::StringRef path) const {
  llvm::StringRef modPath, name = path;
  if (path.contains('.'))
    std::tie(modPath, name) = path.rsplit('.');
  Module *m = resolveModule(modPath);
  return m ? m->tensor(name) : nullptr;
}

TensorIdentity identityOf(const Tensor &t) {
  return {t.defined() ? t.viewData() : nullptr,
          std::vector<int64_t>(t.shape().begin(), t.shape().end()),
          std::vector<int64_t>(t.strides().begin(), t.strides().end()), t.dtype()};
}

std::vector<const ModuleAttr *> flattenOrder(const Module &m) {
  std::vector<const ModuleAttr *> out;
  for (const ModuleAttr &a : m.attrs())
    out.push_back(&a);
  if (m.typeName() == "ModuleList")
    return out; // declaration order is index order
  std::stable_sort(out.begin(), out.end(), [](const ModuleAttr *a, const ModuleAttr *b) {
    return a->name < b->name;
  });
  return out;
}

namespace {
/// The reference's `Module._flatten`: pre-order in flattenOrder, every
/// module and tensor once (under the first key that reaches it), the
/// modules of aliases included.
struct FlattenWalk {
  llvm::DenseSet<const Module *> modules;
  std::set<TensorIdentity> tensors;

  void walk(const Module &m, const std::string &prefix,
            const std::function<void(const std::string &, Module &)> *onModule,
            const std::function<void(const std::string &, const Tensor &)> *onTensor) {
    for (const ModuleAttr *a : flattenOrder(m)) {
      std::string name = prefix.empty() ? a->name : prefix + "." + a->name;
      if (a->kind == ModuleAttr::Kind::Parameter || a->kind == ModuleAttr::Kind::Buffer) {
        if (onTensor && tensors.insert(identityOf(a->tensor)).second)
          (*onTensor)(name, a->tensor);
        continue;
      }
      if (a->kind != ModuleAttr::Kind::Submodule && a->kind != ModuleAttr::Kind::Alias)
        continue;
      Module *sub = m.module(a->name);
      if (!sub || !modules.insert(sub).second)
        continue;
      if (onModule)
        (*onModule)(name, *sub);
      walk(*sub, name, onModule, onTensor);
    }
  }
};
} // namespace

void Module::namedModules(
    const std::function<void(const std::string &, Module &)> &fn,
    const std::string &prefix) {
  fn(prefix, *this);
  FlattenWalk f;
  f.modules.insert(this);
  f.walk(*this, prefix, &fn, nullptr);
}

void Module::namedTensors(
    const std::function<void(const std::string &, const Tensor &)> &fn,
    const std::string &prefix) const {
  FlattenWalk f;
  f.modules.insert(this);
  f.walk(*this, prefix, nullptr, &fn);
}

void Module::adoptAttrsFrom(Module &src) {
  name_ = std::move(src.name_);
  attrs_ = std::move(src.attrs_);
  index_ = std::move(src.index_);
  src.attrs_.clear();
  src.index_.clear();
  for (auto &a : attrs_)
    if (a.kind == ModuleAttr::Kind::Submodule && a.module)
      a.module->parent_ = this;
  ++version_;
  ++src.version_;
}

void Module::cloneAttrsInto(Module &dst) const {
  dst.name_ = name_;
  for (const auto &a : attrs_) {
    switch (a.kind) {
    case ModuleAttr::Kind::Parameter: dst.registerParameter(a.name, a.tensor); break;
    case ModuleAttr::Kind::Buffer: dst.registerBuffer(a.name, a.tensor); break;
    case ModuleAttr::Kind::Value: dst.setValue(a.name, a.value); break;
    case ModuleAttr::Kind::Submodule:
      dst.registerModule(a.name, a.module->cloneTree());
      break;
    case ModuleAttr::Kind::Alias:
      if (dst.module(a.target))
        dst.registerModuleAlias(a.name, a.target);
      break;
    }
  }
  // An alias declared before its target comes after the submodules.
  for (const auto &a : attrs_)
    if (a.kind == ModuleAttr::Kind::Alias && !dst.hasAttr(a.name))
      dst.registerModuleAlias(a.name, a.target);
}

std::unique_ptr<Module> Module::clone() const {
  auto m = cloneTree();
  m->fixClonedRefs();
  return m;
}

std::unique_ptr<Module> Module::cloneTree() const {
  auto m = std::make_unique<Module>(typeName_);
  cloneAttrsInto(*m);
  return m;
}

void Module::fixClonedRefs() {
  for (const auto &a : attrs_)
    if (a.kind == ModuleAttr::Kind::Submodule)
      a.module->fixClonedRefs();
}

//===----------------------------------------------------------------------===//
// Builtins
//===----------------------------------------------------------------------===//

BuiltinModule::BuiltinModule(const ModuleType &type)
    : Module(Kind::Builtin, type, type.name) {}

std::unique_ptr<Module> BuiltinModule::cloneTree() const {
  std::unique_ptr<Module> m;
  if (type().factory)
    m = type().factory();
  else
    m = std::make_unique<BuiltinModule>(type());
  // Defaults set by the factory are replaced attribute by attribute.
  while (!m->attrs().empty())
    m->removeAttr(m->attrs().front().name);
  cloneAttrsInto(*m);
  return m;
}

static TreeDef pairValue(IntPair p) {
  return TreeDef::tuple({TreeDef::constant(Scalar(p.first)),
                         TreeDef::constant(Scalar(p.second))});
}

/// Kaiming-uniform-like deterministic init: randn scaled by 1/sqrt(fan_in).
static Tensor initWeight(llvm::ArrayRef<int64_t> shape, int64_t fanIn,
                         uint64_t seed) {
  Tensor t = Tensor::randn(shape, seed);
  float s = fanIn > 0 ? float(1.0 / std::sqrt(double(fanIn))) : 1.0f;
  float *p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] *= s;
  return t;
}

Linear::Linear(int64_t in, int64_t out, bool bias, uint64_t seed)
    : BuiltinModule(staticType()) {
  if (in <= 0 || out <= 0)
    raise("Linear({}, {}): feature counts must be positive", in, out);
  setValue("in_features", Scalar(in));
  setValue("out_features", Scalar(out));
  setValue("compute_mode", Scalar("default"));
  registerParameter("weight", initWeight({out, in}, in, seed));
  if (bias)
    registerParameter("bias", Tensor::zeros({out}));
}

Conv2d::Conv2d(int64_t in, int64_t out, IntPair k, IntPair stride,
               IntPair padding, IntPair dilation, int64_t groups, bool bias,
               uint64_t seed)
    : BuiltinModule(staticType()) {
  if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
    raise("Conv2d({}, {}, groups={}): channels must be positive multiples of "
          "groups",
          in, out, groups);
  if (k.first <= 0 || k.second <= 0 || stride.first <= 0 || stride.second <= 0 ||
      dilation.first <= 0 || dilation.second <= 0 || padding.first < 0 ||
      padding.second < 0)
    raise("Conv2d: kernel, stride and dilation must be positive and padding "
          "non-negative");
  setValue("in_channels", Scalar(in));
  setValue("out_channels", Scalar(out));
  setValue("kernel_size", pairValue(k));
  setValue("stride", pairValue(stride));
  setValue("padding", pairValue(padding));
  setValue("dilation", pairValue(dilation));
  setValue("groups", Scalar(groups));
  setValue("conv_mode", Scalar("cross_correlation"));
  setValue("compute_mode", Scalar("default"));
  setValue("padding_mode", Scalar("zeros"));
  registerParameter("weight", initWeight({out, in / groups, k.first, k.second},
                                         in / groups * k.first * k.second, seed));
  if (bias)
    registerParameter("bias", Tensor::zeros({out}));
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, IntPair k,
                                 IntPair stride, IntPair padding,
                                 IntPair outputPadding, IntPair dilation,
                                 int64_t groups, bool bias, uint64_t seed)
    : BuiltinModule(staticType()) {
  if (in <= 0 || out <= 0 || groups <= 0 || in % groups || out % groups)
    raise("ConvTranspose2d({}, {}, groups={}): channels must be positive "
          "multiples of groups",
          in, out, groups);
  setValue("in_channels", Scalar(in));
  setValue("out_channels", Scalar(out));
  setValue("kernel_size", pairValue(k));
  setValue("stride", pairValue(stride));
  setValue("padding", pairValue(padding));
  setValue("output_padding", pairValue(outputPadding));
  setValue("dilation", pairValue(dilation));
  setValue("groups", Scalar(groups));
  setValue("conv_mode", Scalar("cross_correlation"));
  setValue("compute_mode", Scalar("default"));
  registerParameter("weight", initWeight({in, out / groups, k.first, k.second},
                                         in / groups * k.first * k.second, seed));
  if (bias)
    registerParameter("bias", Tensor::zeros({out}));
}

BatchNorm2d::BatchNorm2d(int64_t c, double eps, double momentum, bool affine,
                         bool track)
    : BuiltinModule(staticType()) {
  if (c <= 0)
    raise("BatchNorm2d({}): num_features must be positive", c);
  setValue("num_features", Scalar(c));
  setValue("eps", Scalar(eps));
  setValue("momentum", Scalar(momentum));
  setValue("affine", Scalar(affine));
  setValue("track_running_stats", Scalar(track));
  if (affine) {
    registerParameter("weight", Tensor::full({c}, 1.0));
    registerParameter("bias", Tensor::zeros({c}));
  }
  if (track) {
    registerBuffer("running_mean", Tensor::zeros({c}));
    registerBuffer("running_var", Tensor::full({c}, 1.0));
  }
}

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps, bool affine)
    : BuiltinModule(staticType()) {
  std::vector<TreeDef> dims;
  for (int64_t d : shape) {
    if (d <= 0)
      raise("LayerNorm: normalized_shape dimensions must be positive");
    dims.push_back(TreeDef::constant(Scalar(d)));
  }
  setValue("normalized_shape", TreeDef::tuple(std::move(dims)));
  setValue("eps", Scalar(eps));
  setValue("affine", Scalar(affine));
  if (affine) {
    registerParameter("weight", Tensor::full(shape, 1.0));
    registerParameter("bias", Tensor::zeros(shape));
  }
}

Embedding::Embedding(int64_t n, int64_t dim, uint64_t seed)
    : BuiltinModule(staticType()) {
  if (n <= 0 || dim <= 0)
    raise("Embedding({}, {}): sizes must be positive", n, dim);
  setValue("num_embeddings", Scalar(n));
  setValue("embedding_dim", Scalar(dim));
  registerParameter("weight", Tensor::randn({n, dim}, seed));
}

MaxPool2d::MaxPool2d(IntPair k, IntPair stride, IntPair padding)
    : BuiltinModule(staticType()) {
  setValue("kernel_size", pairValue(k));
  setValue("stride", pairValue(stride));
  setValue("padding", pairValue(padding));
}

AvgPool2d::AvgPool2d(IntPair k, IntPair stride, IntPair padding,
                     std::string mode)
    : BuiltinModule(staticType()) {
  setValue("kernel_size", pairValue(k));
  setValue("stride", pairValue(stride));
  setValue("padding", pairValue(padding));
  setValue("mode", Scalar(std::move(mode)));
}

AdaptiveAvgPool2d::AdaptiveAvgPool2d(IntPair out)
    : BuiltinModule(staticType()) {
  setValue("oshp", pairValue(out));
}

} // namespace tmg
