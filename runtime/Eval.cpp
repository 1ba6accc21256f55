//===- Eval.cpp - Run one expr on given values ----------------------------===//
#include "tm/runtime/Eval.h"

#include "Plan.h"

#include <mutex>

namespace tmg::rt {

namespace {
struct KernelRegistry {
  std::mutex mu;
  llvm::DenseMap<const OpSchema *, FunctionKernel> kernels;
  llvm::DenseMap<const ModuleType *, ModuleKernel> modules;
  static KernelRegistry &get() {
    static KernelRegistry r;
    return r;
  }
};
} // namespace

void registerFunctionKernel(const OpSchema &fn, FunctionKernel k) {
  auto &r = KernelRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.kernels[&fn] = std::move(k);
}

FunctionKernel lookupFunctionKernel(const OpSchema &fn) {
  auto &r = KernelRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.kernels.find(&fn);
  return it == r.kernels.end() ? FunctionKernel() : it->second;
}

void registerModuleKernel(const ModuleType &type, ModuleKernel k) {
  auto &r = KernelRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  r.modules[&type] = std::move(k);
}

ModuleKernel lookupModuleKernel(const ModuleType &type) {
  auto &r = KernelRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.modules.find(&type);
  return it == r.modules.end() ? ModuleKernel() : it->second;
}

std::vector<Tensor> evalExpr(const Expr &e, llvm::ArrayRef<Tensor> inputs) {
  if (auto *cm = llvm::dyn_cast<CallMethod>(&e))
    if (cm->isModuleCall() && cm->moduleNode() && cm->moduleNode()->owner() &&
        !cm->moduleNode()->owner()->isBuiltin())
      raiseAt(Location::atExpr(e.id()),
              "evalExpr: '{}' calls a traced module; run it with an Interpreter",
              e.input(0)->str());
  if (inputs.size() != e.numInputs())
    raiseAt(Location::atExpr(e.id()), "evalExpr: {} values given for {} inputs",
            inputs.size(), e.numInputs());
  // A one-step plan: slots for the inputs (a node used twice shares one),
  // then the outputs. Lowering never needs the interpreter for these exprs,
  // but LowerContext wants one: a process-wide, never-run instance.
  static const TracedModule dummy("Eval");
  static const Interpreter interp(dummy);
  ExecutionPlan plan;
  std::vector<Value> slots;
  for (size_t i = 0; i < e.numInputs(); ++i) {
    auto [it, fresh] = plan.slotOf.try_emplace(e.input(i), uint32_t(slots.size()));
    if (fresh) {
      Value v;
      v.tensor = inputs[i];
      if (auto *mn = llvm::dyn_cast<ModuleNode>(e.input(i)))
        v.module = mn->owner();
      slots.push_back(std::move(v));
    }
  }
  for (Node *o : e.outputs()) {
    plan.slotOf[o] = uint32_t(slots.size());
    slots.emplace_back();
  }
  plan.numSlots = uint32_t(slots.size());
  LowerContext ctx(interp, plan);
  StepFn fn = lowerExpr(e, ctx);
  RunState st;
  st.interp = &interp;
  fn(slots.data(), st);
  std::vector<Tensor> out;
  for (Node *o : e.outputs())
    out.push_back(std::move(slots[plan.slotOf[o]].tensor));
  return out;
}

} // namespace tmg::rt
