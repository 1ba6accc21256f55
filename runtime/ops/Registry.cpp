//===- Registry.cpp - The runtime's lowering table --------------*- C++ -*-===//
//
// The one place the lowering table is built: every family's register
// function adds its ops, once, the first time the table is asked for; the
// table is read-only afterwards. The op-coverage queries of
// tm/runtime/OpCoverage.h read it.
//
//===----------------------------------------------------------------------===//
#include "tm/runtime/OpCoverage.h"

#include "Lowering.h"

namespace tmg::rt {

namespace {

LowerTable buildLowerTable() {
  LowerTable t("runtime");
  registerElementwiseLowering(t);
  registerActivationLowering(t);
  registerLinalgLowering(t);
  registerConvLowering(t);
  registerPoolLowering(t);
  registerNormLowering(t);
  registerReduceLowering(t);
  registerShapeLowering(t);
  registerIndexLowering(t);
  registerCreationLowering(t);
  registerResizeLowering(t);
  registerQuantLowering(t);
  registerRnnLowering(t);
  return t;
}

} // namespace

const LowerTable &lowerTable() {
  static const LowerTable table = buildLowerTable();
  return table;
}

std::vector<OpKind> opsWithoutKernel() { return lowerTable().missing(); }

llvm::StringRef kernelFamily(OpKind k) { return lowerTable().family(k); }

} // namespace tmg::rt
