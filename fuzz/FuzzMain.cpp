//===- FuzzMain.cpp - libFuzzer entry point of one target -----------------===//
//
// Built once per target with -DTM_FUZZ_TARGET=<function of Targets.h>.
//
//===----------------------------------------------------------------------===//
#include "Targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return tmg::fuzz::TM_FUZZ_TARGET(data, size);
}
