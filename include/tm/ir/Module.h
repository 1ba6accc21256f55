//===- Module.h - Modules and builtin modules -------------------*- C++ -*-===//
//
// A Module holds ordered attributes: parameters and buffers (Tensors),
// submodules (owned), and plain values (constant TreeDefs: ints, floats,
// strings, tuples of them). Attribute order is declaration order, as in the
// reference, because it decides printing and ids.
//
// Builtin modules (Linear, Conv2d, ...) are opaque to tracing: one CallMethod
// on a ModuleNode, no sub-graph. Every module class has a ModuleType
// descriptor; `llvm::isa<Conv2d>(m)` compares descriptors.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include <llvm/ADT/StringMap.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Casting.h>

#include "tm/ir/Tensor.h"
#include "tm/ir/TreeDef.h"

namespace tmg {

class Module;

/// Describes a module class: its name (what GetAttr prints: "Conv2d"),
/// whether it is builtin (opaque to tracing), and a factory that makes a
/// default instance (used by readers, which then set the attributes).
struct ModuleType {
  std::string name;
  bool builtin = false;
  const ModuleType *base = nullptr; ///< for subclass-inclusive isa
  std::function<std::unique_ptr<Module>()> factory;

  /// True when this type is `t` or derives from it.
  bool isa(const ModuleType &t) const;
};

/// Registry of module types by name (builtins are pre-registered).
class ModuleTypeRegistry {
public:
  static ModuleTypeRegistry &instance();
  /// nullptr when unknown.
  const ModuleType *lookup(llvm::StringRef name) const;
  /// Registers a type (returns the existing one for an identical name and
  /// builtin flag); throws tmg::Error on a conflicting re-registration.
  const ModuleType &add(ModuleType t);
  std::vector<const ModuleType *> all() const;

private:
  ModuleTypeRegistry();
  struct Impl;
  Impl *impl_;
};

/// The base `Module` type ("Module"): plain user modules and traced modules.
const ModuleType &moduleBaseType();

/// One attribute of a module. An Alias is a second name for a submodule of
/// the same module (Python's `self.b = self.a`): it holds the name of that
/// Submodule attribute and resolves through it.
struct ModuleAttr {
  enum class Kind : uint8_t { Parameter, Buffer, Submodule, Value, Alias };
  std::string name;
  Kind kind;
  Tensor tensor;                  ///< Parameter, Buffer
  std::unique_ptr<Module> module; ///< Submodule
  TreeDef value;                  ///< Value (a constant TreeDef)
  std::string target = {};        ///< Alias: the Submodule attribute it names
};

class Module {
public:
  enum class Kind : uint8_t { Plain, Builtin, Traced };

  /// A plain module of type `typeName` (its class name, e.g. "MyModule").
  explicit Module(std::string typeName);
  virtual ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  Kind kind() const { return kind_; }
  const ModuleType &type() const { return *type_; }
  /// Class name: "MyModule", "Conv2d".
  llvm::StringRef typeName() const { return typeName_; }
  bool isBuiltin() const { return kind_ == Kind::Builtin; }

  /// The module's own name (`_name` in the reference); empty by default.
  const std::string &name() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }

  /// Parent module and attribute name in it (nullptr for a root).
  Module *parent() const { return parent_; }
  const std::string &attrName() const { return attrName_; }

  // -- Attributes ------------------------------------------------------------
  /// Adds or replaces a parameter; returns a reference to the stored tensor.
  Tensor &registerParameter(llvm::StringRef name, Tensor t);
  Tensor &registerBuffer(llvm::StringRef name, Tensor t);
  /// Adds or replaces a submodule; returns it. The module must not have a
  /// parent already (throws tmg::Error).
  Module &registerModule(llvm::StringRef name, std::unique_ptr<Module> m);
  template <typename T, typename... Args>
  T &addModule(llvm::StringRef name, Args &&...args) {
    return static_cast<T &>(
        registerModule(name, std::make_unique<T>(std::forward<Args>(args)...)));
  }
  /// Makes `name` a second name for submodule `target` of this module (the
  /// reference's `self.b = self.a`): module(name) is module(target), one
  /// object reached by both paths. An alias of an alias names its target.
  /// Throws tmg::Error when `target` is not a submodule attribute.
  Module &registerModuleAlias(llvm::StringRef name, llvm::StringRef target);
  void setValue(llvm::StringRef name, TreeDef v);
  void setValue(llvm::StringRef name, Scalar v) {
    setValue(name, TreeDef::constant(std::move(v)));
  }
  /// Removes an attribute; returns false when absent. A submodule that an
  /// alias names cannot be removed before the alias (throws tmg::Error).
  bool removeAttr(llvm::StringRef name);
  /// Removes every attribute `pred` selects in one pass; returns how many.
  /// Throws tmg::Error (removing nothing) when a kept alias names a removed
  /// submodule.
  size_t removeAttrsIf(const std::function<bool(const ModuleAttr &)> &pred);
  /// Detaches and returns submodule `name` (nullptr when absent).
  /// O(attributes): the attribute is removed.
  std::unique_ptr<Module> takeModule(llvm::StringRef name);
  /// Detaches and returns submodule `name` in O(1), leaving its attribute
  /// slot empty (for converters that consume this module).
  std::unique_ptr<Module> releaseModule(llvm::StringRef name);

  bool hasAttr(llvm::StringRef name) const;
  const ModuleAttr *attr(llvm::StringRef name) const;
  ModuleAttr *attr(llvm::StringRef name);
  /// Tensor attribute (parameter or buffer) or nullptr.
  const Tensor *tensor(llvm::StringRef name) const;
  Tensor *tensor(llvm::StringRef name);
  /// Submodule (through an alias too) or nullptr.
  Module *module(llvm::StringRef name) const;
  /// Value attribute or nullptr.
  const TreeDef *value(llvm::StringRef name) const;
  /// Value attribute as a scalar (throws tmg::Error when absent or not one).
  const Scalar &scalar(llvm::StringRef name) const;
  int64_t intValue(llvm::StringRef name) const;
  double floatValue(llvm::StringRef name) const;
  bool boolValue(llvm::StringRef name) const;

  /// Attributes in declaration order.
  const std::vector<ModuleAttr> &attrs() const { return attrs_; }
  /// Bumped whenever an attribute is added, replaced or removed (pointers
  /// into attributes stay valid while it does not change).
  uint64_t version() const { return version_; }

  /// Resolves a dotted path ("block0.conv1.weight"); nullptr when a segment
  /// is missing. `module` resolves to a submodule, `tensor` to a tensor.
  Module *resolveModule(llvm::StringRef path) const;
  const Tensor *resolveTensor(llvm::StringRef path) const;

  /// This module and its submodules with their dotted names ("" for this
  /// module), as the reference's `named_modules`: pre-order, each module's
  /// attributes in sorted key order, a module reached under several names
  /// once, under the first of them in that order (an alias included).
  void namedModules(
      const std::function<void(const std::string &, Module &)> &fn,
      const std::string &prefix = "");
  /// Parameters and buffers with dotted names, as the reference's
  /// `named_tensors`: the order of namedModules with tensors and submodules
  /// interleaved by key, a tensor shared by several attributes once.
  /// stateDict() (tm/ir/StateDict.h) lists every key instead.
  void namedTensors(
      const std::function<void(const std::string &, const Tensor &)> &fn,
      const std::string &prefix = "") const;

  /// Deep copy of the module tree. Tensor storage is shared (tensors are
  /// values); everything else is copied.
  std::unique_ptr<Module> clone() const;

protected:
  Module(Kind k, const ModuleType &type, std::string typeName);
  /// The copy clone() makes before fixClonedRefs: the module nodes of its
  /// traced graphs still name the original modules.
  virtual std::unique_ptr<Module> cloneTree() const;
  /// Points the module nodes of every traced graph in this (cloned) tree
  /// at this tree's modules. Done once for the whole tree: fixing each
  /// traced module as it was copied walked a graph once per traced
  /// ancestor too (TracedModule::updateRefs covers its traced submodules).
  virtual void fixClonedRefs();
  /// Copies attributes (cloning submodules) into `dst`.
  void cloneAttrsInto(Module &dst) const;
  /// Replaces this module's name and attributes by `src`'s, moving them
  /// (submodules change parent); `src` is left without attributes.
  void adoptAttrsFrom(Module &src);

private:
  ModuleAttr &upsert(llvm::StringRef name, ModuleAttr::Kind kind);
  /// Throws when an alias names submodule `name`.
  void checkNotAliased(llvm::StringRef name) const;

  Kind kind_;
  const ModuleType *type_;
  std::string typeName_;
  std::string name_;
  Module *parent_ = nullptr;
  std::string attrName_;
  std::vector<ModuleAttr> attrs_;
  llvm::StringMap<size_t> index_;
  uint64_t version_ = 0;
};

/// `m`'s attributes in the reference's `Module._flatten` order: sorted by
/// name, except the items of a ModuleList ("0", "1", ...), in index order.
std::vector<const ModuleAttr *> flattenOrder(const Module &m);

/// What makes two tensor values one object, as identity does in the
/// reference: the same bytes seen the same way.
using TensorIdentity =
    std::tuple<const void *, std::vector<int64_t>, std::vector<int64_t>, DType>;
TensorIdentity identityOf(const Tensor &t);

//===----------------------------------------------------------------------===//
// Builtin modules
//===----------------------------------------------------------------------===//

/// Base of builtin modules; attributes are the reference's (MegEngine)
/// attribute names, stored as Value attributes so readers and printers treat
/// every builtin alike.
class BuiltinModule : public Module {
public:
  explicit BuiltinModule(const ModuleType &type);
  static bool classof(const Module *m) { return m->kind() == Kind::Builtin; }

protected:
  std::unique_ptr<Module> cloneTree() const override;
};

/// Declares a builtin module class with a static ModuleType and isa support.
#define TM_BUILTIN_MODULE_DECL(CLASS)                                          \
  static const ::tmg::ModuleType &staticType();                                 \
  static bool classof(const ::tmg::Module *m) {                                 \
    return m->type().isa(staticType());                                        \
  }

using IntPair = std::pair<int64_t, int64_t>;

class Linear : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Linear)
  Linear() : BuiltinModule(staticType()) {}
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true,
         uint64_t seed = 0);
};

class Conv2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Conv2d)
  Conv2d() : BuiltinModule(staticType()) {}
  Conv2d(int64_t in, int64_t out, IntPair kernel, IntPair stride = {1, 1},
         IntPair padding = {0, 0}, IntPair dilation = {1, 1},
         int64_t groups = 1, bool bias = true, uint64_t seed = 0);
  Conv2d(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1,
         bool bias = true, uint64_t seed = 0)
      : Conv2d(in, out, {kernel, kernel}, {stride, stride},
               {padding, padding}, {dilation, dilation}, groups, bias, seed) {}
};

class ConvTranspose2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(ConvTranspose2d)
  ConvTranspose2d() : BuiltinModule(staticType()) {}
  ConvTranspose2d(int64_t in, int64_t out, IntPair kernel,
                  IntPair stride = {1, 1}, IntPair padding = {0, 0},
                  IntPair outputPadding = {0, 0}, IntPair dilation = {1, 1},
                  int64_t groups = 1, bool bias = true, uint64_t seed = 0);
};

class BatchNorm2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(BatchNorm2d)
  BatchNorm2d() : BuiltinModule(staticType()) {}
  explicit BatchNorm2d(int64_t numFeatures, double eps = 1e-5,
                       double momentum = 0.9, bool affine = true,
                       bool trackRunningStats = true);
};

class LayerNorm : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(LayerNorm)
  LayerNorm() : BuiltinModule(staticType()) {}
  LayerNorm(std::vector<int64_t> normalizedShape, double eps = 1e-5,
            bool affine = true);
};

class Embedding : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Embedding)
  Embedding() : BuiltinModule(staticType()) {}
  Embedding(int64_t numEmbeddings, int64_t embeddingDim, uint64_t seed = 0);
};

class MaxPool2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(MaxPool2d)
  MaxPool2d() : BuiltinModule(staticType()) {}
  MaxPool2d(IntPair kernel, IntPair stride, IntPair padding = {0, 0});
  explicit MaxPool2d(int64_t kernel, int64_t stride = -1, int64_t padding = 0)
      : MaxPool2d({kernel, kernel},
                  {stride < 0 ? kernel : stride, stride < 0 ? kernel : stride},
                  {padding, padding}) {}
};

class AvgPool2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(AvgPool2d)
  AvgPool2d() : BuiltinModule(staticType()) {}
  AvgPool2d(IntPair kernel, IntPair stride, IntPair padding = {0, 0},
            std::string mode = "average_count_exclude_padding");
  explicit AvgPool2d(int64_t kernel, int64_t stride = -1, int64_t padding = 0)
      : AvgPool2d({kernel, kernel},
                  {stride < 0 ? kernel : stride, stride < 0 ? kernel : stride},
                  {padding, padding}) {}
};

class AdaptiveAvgPool2d : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(AdaptiveAvgPool2d)
  AdaptiveAvgPool2d() : BuiltinModule(staticType()) {}
  explicit AdaptiveAvgPool2d(IntPair outputSize);
};

class Softmax : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Softmax)
  Softmax() : BuiltinModule(staticType()) { setValue("axis", Scalar()); }
  explicit Softmax(int64_t axis) : BuiltinModule(staticType()) {
    setValue("axis", Scalar(axis));
  }
};

class Dropout : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Dropout)
  explicit Dropout(double dropProb = 0.0) : BuiltinModule(staticType()) {
    setValue("drop_prob", Scalar(dropProb));
  }
};

class Flatten : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Flatten)
  explicit Flatten(int64_t startAxis = 0, int64_t endAxis = -1)
      : BuiltinModule(staticType()) {
    setValue("start_axis", Scalar(startAxis));
    setValue("end_axis", Scalar(endAxis));
  }
};

class Elemwise : public BuiltinModule {
public:
  TM_BUILTIN_MODULE_DECL(Elemwise)
  Elemwise() : BuiltinModule(staticType()) {}
  /// `method` is a MegEngine Elemwise mode: "ADD", "RELU", "FUSE_ADD_RELU"...
  explicit Elemwise(std::string method) : BuiltinModule(staticType()) {
    setValue("method", Scalar(std::move(method)));
  }
};

/// Activation modules without attributes.
#define TM_SIMPLE_BUILTIN(CLASS)                                               \
  class CLASS : public BuiltinModule {                                         \
  public:                                                                      \
    TM_BUILTIN_MODULE_DECL(CLASS)                                              \
    CLASS() : BuiltinModule(staticType()) {}                                   \
  };
TM_SIMPLE_BUILTIN(ReLU)
TM_SIMPLE_BUILTIN(ReLU6)
TM_SIMPLE_BUILTIN(GELU)
TM_SIMPLE_BUILTIN(Sigmoid)
TM_SIMPLE_BUILTIN(SiLU)
TM_SIMPLE_BUILTIN(Hardswish)
TM_SIMPLE_BUILTIN(Identity)
#undef TM_SIMPLE_BUILTIN

} // namespace tmg
