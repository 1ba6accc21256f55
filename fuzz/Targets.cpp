//===- Targets.cpp - Properties checked on every reader -------------------===//
#include "Targets.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tm/io/Npy.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/passes/PassManager.h"

namespace tmg::fuzz {
namespace {

llvm::StringRef bytes(const uint8_t *data, size_t size) {
  return llvm::StringRef(reinterpret_cast<const char *>(data), size);
}

[[noreturn]] void finding(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fuzz finding: %s\n%s\n", what, detail.c_str());
  std::abort();
}

bool sameTensor(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         a.nbytes() == b.nbytes() &&
         (!a.nbytes() || std::memcmp(a.rawData(), b.rawData(), a.nbytes()) == 0);
}

} // namespace

// parseTmir never crashes or throws; what it accepts prints, and the print
// parses back to an equal module.
int fuzzTmir(const uint8_t *data, size_t size) {
  TmirReadOptions opts;
  opts.missingWeightsAsZeros = true;
  opts.baseDir = "/nonexistent-tmgraph-fuzz-dir";
  auto m = parseTmir(bytes(data, size), "<fuzz>", opts);
  if (failed(m))
    return 0;
  TmirWriteOptions w;
  w.inlineMaxElements = int64_t(1) << 20;
  std::string text = printTmir(**m, w);
  auto again = parseTmir(text, "<fuzz-reprint>", opts);
  if (failed(again))
    finding("printed module does not parse back",
            again.diagnostic().str() + "\n" + text);
  if (auto diff = compareModules(**m, **again))
    finding("round trip changed the module", *diff + "\n" + text);
  return 0;
}

// parseSafetensors never crashes or throws; what it accepts serialises and
// parses back with the same keys, dtypes, shapes and bytes.
int fuzzSafetensors(const uint8_t *data, size_t size) {
  auto w = parseSafetensors(bytes(data, size), "<fuzz>");
  if (failed(w))
    return 0;
  auto out = serializeSafetensors(*w);
  if (failed(out))
    finding("accepted weights do not serialise", out.diagnostic().str());
  auto again = parseSafetensors(*out, "<fuzz-reserialised>");
  if (failed(again))
    finding("serialised weights do not parse back", again.diagnostic().str());
  if (again->tensors.size() != w->tensors.size())
    finding("round trip changed the tensor count", "");
  for (const auto &[key, t] : w->tensors) {
    const Tensor *u = again->find(key);
    if (!u || !sameTensor(t, *u))
      finding("round trip changed a tensor", key);
  }
  return 0;
}

// parseNpy never crashes or throws; what it accepts serialises and parses
// back to the same dtype, shape and bytes.
int fuzzNpy(const uint8_t *data, size_t size) {
  auto t = parseNpy(bytes(data, size), "<fuzz>");
  if (failed(t))
    return 0;
  auto u = parseNpy(serializeNpy(*t), "<fuzz-reserialised>");
  if (failed(u))
    finding("serialised array does not parse back", u.diagnostic().str());
  if (!sameTensor(*t, *u))
    finding("round trip changed the array", "");
  return 0;
}

// Pipeline::parse never crashes or throws; an accepted pipeline prints
// canonical text that parses back to the same text.
int fuzzPipeline(const uint8_t *data, size_t size) {
  const PassRegistry &registry = PassRegistry::global();
  auto p = Pipeline::parse(bytes(data, size), registry, "<fuzz>");
  if (failed(p))
    return 0;
  std::string text = p->str();
  auto again = Pipeline::parse(text, registry, "<fuzz-reprint>");
  if (failed(again))
    finding("canonical pipeline text does not parse back",
            again.diagnostic().str() + "\n" + text);
  if (again->str() != text)
    finding("canonical text is not a fixed point", text + "\n" + again->str());
  return 0;
}

// parsePipelineToml never crashes or throws; an accepted file's pipeline
// prints canonical text that parses back.
int fuzzPipelineToml(const uint8_t *data, size_t size) {
  const PassRegistry &registry = PassRegistry::global();
  auto f = parsePipelineToml(bytes(data, size), "<fuzz>", registry);
  if (failed(f))
    return 0;
  std::string text = f->pipeline.str();
  auto again = Pipeline::parse(text, registry, "<fuzz-reprint>");
  if (failed(again))
    finding("canonical pipeline text does not parse back",
            again.diagnostic().str() + "\n" + text);
  return 0;
}

llvm::ArrayRef<Target> targets() {
  static const Target all[] = {
      {"fuzz_tmir", fuzzTmir},
      {"fuzz_safetensors", fuzzSafetensors},
      {"fuzz_npy", fuzzNpy},
      {"fuzz_pipeline", fuzzPipeline},
      {"fuzz_pipeline_toml", fuzzPipelineToml},
  };
  return all;
}

} // namespace tmg::fuzz
