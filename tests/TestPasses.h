//===- TestPasses.h - The pass registry of one test program -----*- C++ -*-===//
//
// Tests parse pipelines against a registry of their own: the structural
// passes, plus whatever the program's tests register in it.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "tm/passes/Pass.h"

namespace tmg::test {

inline PassRegistry &testPasses() {
  static PassRegistry r = [] {
    PassRegistry reg;
    registerBuiltinPasses(reg);
    return reg;
  }();
  return r;
}

} // namespace tmg::test
