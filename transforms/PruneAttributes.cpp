//===- PruneAttributes.cpp - Drop parameters and buffers nothing reads ----===//
//
// After the folds, a module can hold tensors no graph reads any more: the
// (in, out) weight an ONNX MatMul read, now a linear layer's transposed
// constant; a convolution's weight before a batch norm was folded into
// it. Kept, they double a transformer's memory and the weights file
// `tm-opt -p optimize` writes. This pass removes every parameter and
// buffer that
//  - no GetAttr of any graph reads (by its path, or through a submodule
//    read as a module),
//  - shares its storage with no Constant of any graph (attr-to-constant's
//    constants are the attributes' own storage),
//  - belongs to no module that an expr uses as a module value (a call of
//    a builtin or traced submodule, a module passed to a method), nor to a
//    submodule of one: such a module may read any of its attributes;
//  - belongs to no builtin module (its attributes are part of its type,
//    even when nothing calls it any more).
// Linear in the graphs and the module tree; like ONNX Runtime's removal of
// unused initializers, it changes the state dict (the pruned keys go).
//
//===----------------------------------------------------------------------===//
#include "Passes.h"
#include "Utils.h"

#include <llvm/ADT/DenseSet.h>

namespace tmg {

namespace {

/// The first byte of `t`'s storage: one value per storage, whatever view
/// of it `t` is.
const void *storageOf(const Tensor &t) {
  return static_cast<const char *>(t.viewData()) -
         t.storageOffset() * int64_t(dtypeSize(t.dtype()));
}

} // namespace

FailureOr<bool> PruneAttributesPass::run(TracedModule &m, PassContext &ctx) {
  llvm::DenseSet<const Module *> whole; // every attribute may be read
  llvm::DenseSet<const Tensor *> read;  // attributes read by a GetAttr
  llvm::DenseSet<const void *> constantStorage;
  for (InternalGraph *g : xf::allGraphs(m)) {
    for (Node *o : g->outputs())
      if (auto *mn = llvm::dyn_cast<ModuleNode>(o); mn && mn->owner())
        whole.insert(mn->owner());
    for (Expr *e : g->body()) {
      if (auto *ga = llvm::dyn_cast<GetAttr>(e)) {
        auto *base = llvm::dyn_cast<ModuleNode>(ga->input(0));
        if (!base || !base->owner()) {
          ctx.remark(Diagnostic(Location::atExpr(ga->id()),
                                "prune-attributes: an attribute read from an "
                                "unknown module: nothing pruned",
                                Diagnostic::Severity::Remark));
          return false;
        }
        if (const Tensor *t = base->owner()->resolveTensor(ga->attrName()))
          read.insert(t);
        // A submodule read as a module value is marked where it is used.
        continue;
      }
      if (auto *c = llvm::dyn_cast<Constant>(e)) {
        if (c->isTensor() && c->tensor().defined())
          constantStorage.insert(storageOf(c->tensor()));
        else if (c->module())
          whole.insert(c->module());
        continue;
      }
      for (Node *in : e->inputs())
        if (auto *mn = llvm::dyn_cast<ModuleNode>(in); mn && mn->owner())
          whole.insert(mn->owner());
    }
  }
  size_t removed = 0;
  // Pre-order: a module used whole keeps its subtree.
  std::function<void(Module &, bool)> visit = [&](Module &mod, bool keepAll) {
    keepAll = keepAll || whole.count(&mod);
    if (!keepAll && !mod.isBuiltin())
      removed += mod.removeAttrsIf([&](const ModuleAttr &a) {
        if (a.kind != ModuleAttr::Kind::Parameter &&
            a.kind != ModuleAttr::Kind::Buffer)
          return false;
        return !read.count(&a.tensor) &&
               !(a.tensor.defined() &&
                 constantStorage.count(storageOf(a.tensor)));
      });
    for (const ModuleAttr &a : mod.attrs())
      if (a.kind == ModuleAttr::Kind::Submodule && a.module)
        visit(*a.module, keepAll);
  };
  visit(m, false);
  if (removed)
    ctx.count("attributes-pruned", int64_t(removed));
  return removed > 0;
}

} // namespace tmg
