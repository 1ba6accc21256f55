//===- Targets.h - Properties checked on every reader of outside data -----===//
//
// One function per reader. Each feeds the bytes to the reader and checks
// its contract: success or a diagnostic, never a crash or an escaping
// exception; what is accepted round-trips. A violated property prints what
// and aborts (so libFuzzer keeps the input). The same functions run under
// libFuzzer (fuzz/FuzzMain.cpp) and, in the default test run, over the seed
// corpora and every minimised finding (tests/io/test_fuzz_inputs.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

namespace tmg::fuzz {

using TargetFn = int (*)(const uint8_t *data, size_t size);

int fuzzTmir(const uint8_t *data, size_t size);
int fuzzTmirRun(const uint8_t *data, size_t size);
int fuzzSafetensors(const uint8_t *data, size_t size);
int fuzzNpy(const uint8_t *data, size_t size);
int fuzzPipeline(const uint8_t *data, size_t size);
int fuzzPipelineToml(const uint8_t *data, size_t size);
int fuzzRules(const uint8_t *data, size_t size);
#ifdef TM_HAVE_ONNX
int fuzzOnnx(const uint8_t *data, size_t size);
int fuzzOnnxRun(const uint8_t *data, size_t size);
#endif

struct Target {
  const char *name; ///< directory name under fuzz/corpus and fuzz/regressions
  TargetFn fn;
};
llvm::ArrayRef<Target> targets();

} // namespace tmg::fuzz
