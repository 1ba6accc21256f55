//===- Targets.cpp - Properties checked on every reader -------------------===//
#include "Targets.h"

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tm/io/Npy.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/ir/ModuleCheck.h"
#include "tm/ir/Verifier.h"
#include "tm/runtime/Common.h"
#include "tm/runtime/Inputs.h"
#include "tm/runtime/Interpreter.h"
#include "tm/passes/RulePasses.h"
#include "tm/passes/PassManager.h"
#ifdef TM_HAVE_ONNX
#include "tm/io/Onnx.h"
#endif

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

/// What a fuzz input may make a reader allocate: well inside libFuzzer's
/// -rss_limit_mb=2048 (scripts/fuzz.sh), so that a file asking for more is
/// a refusal, not an out-of-memory finding.
SizeLimits fuzzLimits() {
  SizeLimits l;
  l.maxTensorBytes = int64_t(256) << 20;
  l.maxModelBytes = int64_t(512) << 20;
  return l;
}

/// The structural passes (the fuzz targets link no transforms), built once.
const PassRegistry &structuralPasses() {
  static const PassRegistry r = [] {
    PassRegistry reg;
    registerBuiltinPasses(reg);
    return reg;
  }();
  return r;
}

/// What a model may make the run targets allocate and compute: every
/// declared tensor and bound input at most 1 MiB (symbolic dims bound as
/// 2), inputs 16 MiB in all, each tensor of the run 4 MiB and 32 MiB alive
/// at once, so that one run takes milliseconds.
constexpr int64_t RunTensorBytes = int64_t(1) << 20;
constexpr int64_t RunInputBytes = int64_t(16) << 20;
constexpr int64_t RunIntermediateBytes = int64_t(4) << 20;
constexpr int64_t RunLiveBytes = int64_t(32) << 20;

SizeLimits runLimits() {
  SizeLimits l;
  l.maxTensorBytes = RunTensorBytes;
  l.maxModelBytes = RunInputBytes;
  return l;
}

/// Runs `m` as tm-run --random-inputs does, on one thread: the module
/// verifies (the reader promised it), then the builtin-module and node
/// size checks, the plan, the inputs and the run each succeed or refuse
/// with a tmg::Error. Any other exception is a finding.
void verifyAndRun(TracedModule &m, const char *reader) {
  auto diags = verify(m);
  if (!diags.empty())
    finding((std::string("a module accepted by ") + reader + " does not verify").c_str(),
            diags[0].str());
  checkNodeSizes(m, runLimits(), diags);
  if (!diags.empty())
    return;
  static const bool oneThread = (rt::setNumThreads(1), true);
  (void)oneThread;
  try {
    const InternalGraph &g = m.graph();
    rt::InterpreterOptions io;
    io.maxTensorBytes = RunIntermediateBytes;
    io.maxLiveBytes = RunLiveBytes;
    rt::Interpreter interp(m, io);
    interp.prepare(g);
    rt::RandomInputOptions ro;
    ro.seed = 1;
    ro.symbolicDimSize = 2;
    ro.limits = runLimits();
    std::vector<Tensor> args;
    int64_t total = 0;
    llvm::ArrayRef<Node *> ins = g.inputs().drop_front();
    for (size_t i = 0; i < ins.size(); ++i) {
      auto t = rt::randomInput(*ins[i], i, ro);
      if (t.failed() || (total += t->nbytes()) > RunInputBytes)
        return;
      args.push_back(std::move(*t));
    }
    rt::RunResult r = interp.run(g, args);
    if (r.outputs.size() != g.outputs().size())
      finding("a run returned a different number of outputs than the graph has",
              std::to_string(r.outputs.size()) + " vs " + std::to_string(g.outputs().size()));
  } catch (const Error &) {
    // A diagnosed refusal: unsupported op, kernel rejecting its inputs, a
    // tensor over the run's limits.
  } catch (const std::exception &e) {
    finding("an exception other than tmg::Error escaped the run", e.what());
  }
}

/// Read options for fuzz input: no weights file, referenced weights read
/// as zeros, the given limits.
TmirReadOptions tmirOptions(const SizeLimits &limits) {
  TmirReadOptions opts;
  opts.missingWeightsAsZeros = true;
  opts.baseDir = "/nonexistent-tmgraph-fuzz-dir";
  opts.limits = limits;
  return opts;
}

} // namespace

// parseTmir never crashes or throws; what it accepts prints, and the print
// parses back to an equal module.
int fuzzTmir(const uint8_t *data, size_t size) {
  TmirReadOptions opts = tmirOptions(fuzzLimits());
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

// What parseTmir accepts verifies, and verifying, planning and running it
// on small random inputs succeeds or refuses with a diagnostic.
int fuzzTmirRun(const uint8_t *data, size_t size) {
  auto m = parseTmir(bytes(data, size), "<fuzz>", tmirOptions(runLimits()));
  if (failed(m))
    return 0;
  verifyAndRun(**m, "parseTmir");
  return 0;
}

// Pipeline::parse never crashes or throws; an accepted pipeline prints
// canonical text that parses back to the same text.
int fuzzPipeline(const uint8_t *data, size_t size) {
  const PassRegistry &registry = structuralPasses();
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
  const PassRegistry &registry = structuralPasses();
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

namespace {
/// The graph rules are applied to: conv, relu chains, adds and muls with
/// constants, a reshape; small enough to run each input in microseconds.
const char *RuleSubject = R"(tmir 1
ids 9 9
module Net traced top {
  w = param(float32(2,), [0.5, -1.0])
graph name='Net' qualname='Net' argdef=((Module, Tensor), {}) outdef=Tensor inputs=[%0 'self' module<Module> 'Net' #0 'self', %1 'x' float32(2,) 'Net.[x]' #1 'x'] reserved=['func_neg', 'func_relu', 'method_add', 'method_mul']
Net.Graph (self, x) {
	%2:	w = getattr(self, "w") -> (Tensor)	;; getattr='w' base=%0 outs=[%2 'w' float32(2,) 'Net.w']
	%3:	add_out = x.__add__(w, )	;; method=__add__ args=((%1, %2), {}) outs=[%3 'add_out' float32(2,) 'Net.[method_add]'] outdef=Tensor
	%4:	relu_out = nn.relu(add_out, )	;; fn=nn.relu args=((%3,), {}) outs=[%4 'relu_out' float32(2,) 'Net.[func_relu]'] outdef=Tensor
	%5:	relu_out_1 = nn.relu(relu_out, )	;; fn=nn.relu args=((%4,), {}) outs=[%5 'relu_out_1' float32(2,) 'Net.[func_relu]'] outdef=Tensor
	%6:	mul_out = relu_out_1.__mul__(2, )	;; method=__mul__ args=((%5, 2), {}) outs=[%6 'mul_out' float32(2,) 'Net.[method_mul]'] outdef=Tensor
	%7:	mul_out_1 = mul_out.__mul__(x, )	;; method=__mul__ args=((%6, %1), {}) outs=[%7 'mul_out_1' float32(2,) 'Net.[method_mul]'] outdef=Tensor
	%8:	neg_out = elemwise.neg(mul_out_1, )	;; fn=elemwise.neg args=((%7,), {}) outs=[%8 'neg_out' float32(2,) 'Net.[func_neg]'] outdef=Tensor
	return neg_out	;; outs=[%8]
}
}
)";
} // namespace

// Declarative rules: the input's first line is `match`, the second
// `replace`, further lines are `where` constraints. Compiling never
// crashes or throws past its diagnostic; a rule that compiles, applied by
// the greedy driver, leaves a module that verifies or fails with a
// diagnostic (and, the rewriter being transactional, a verifying module).
int fuzzRules(const uint8_t *data, size_t size) {
  llvm::StringRef text = bytes(data, size);
  RuleDecl rule;
  rule.name = "fuzz";
  auto [match, rest] = text.split('\n');
  auto [replace, where] = rest.split('\n');
  rule.match = match.str();
  rule.replace = replace.str();
  rule.loc = rule.matchLoc = rule.replaceLoc = Location::inFile("<fuzz>", 1, 1);
  while (!where.empty()) {
    auto [w, more] = where.split('\n');
    rule.where.push_back(w.str());
    rule.whereLocs.push_back(rule.loc);
    where = more;
  }
  ApplyRulesPass pass;
  // A replacement that contains what it matches (`$x * $y` =>
  // `$x * $x * -1`) grows the graph to the growth limit, 16x + 4096 exprs:
  // ~2000 rewrites, 45 ms in a release build but over the fuzzer's 10 s
  // under ASan, coverage and a loaded machine; 256 rewrites of a 40-op
  // replacement (`$x * ----...-$x * -9`) still took 1 s alone and 12 s
  // beside other jobs, and 64 of a 200-op one 0.7 s. The driver's limits
  // are what bounds such rules; the fuzzer spends about the same work on
  // every unit: 64 rewrites of a short replacement, fewer of a long one.
  int64_t budget = std::clamp<int64_t>(8192 / int64_t(std::max<size_t>(replace.size(), 1)), 1, 64);
  if (failed(pass.setOption("max-rewrites", budget)))
    finding("apply-rules lost its max-rewrites option", "");
  if (failed(pass.setRules({rule})))
    return 0;
  static const std::string subject = RuleSubject;
  TmirReadOptions opts;
  auto m = parseTmir(subject, "<rule-subject>", opts);
  if (failed(m))
    finding("the rule subject does not parse", m.diagnostic().str());
  PassContext ctx;
  FailureOr<bool> r = false;
  try {
    r = pass.run(**m, ctx);
  } catch (const Error &) {
    // A diagnosed failure of a rewrite: the module must still verify.
  }
  auto diags = verify(**m);
  if (!diags.empty())
    finding("a rule left a module that does not verify",
            diags[0].str() + "\n" + printTmir(**m));
  (void)r;
  return 0;
}

#ifdef TM_HAVE_ONNX
// importOnnxBytes never crashes or throws; what it accepts verifies and
// prints as .tmir that parses back.
int fuzzOnnx(const uint8_t *data, size_t size) {
  io::OnnxImportOptions o;
  o.limits = fuzzLimits();
  auto m = io::importOnnxBytes(std::string(bytes(data, size)), "<fuzz>", o);
  if (failed(m))
    return 0;
  auto diags = verify(*m->module);
  if (!diags.empty())
    finding("an imported model does not verify", diags[0].str());
  TmirWriteOptions w;
  w.inlineMaxElements = int64_t(1) << 20;
  std::string text = printTmir(*m->module, w);
  if (failed(parseTmir(text, "<fuzz-onnx-reprint>")))
    finding("an imported model's .tmir does not parse back", text);
  return 0;
}

// What importOnnxBytes accepts (shape inference included) verifies, and
// verifying, planning and running it on small random inputs succeeds or
// refuses with a diagnostic.
int fuzzOnnxRun(const uint8_t *data, size_t size) {
  io::OnnxImportOptions o;
  o.limits = runLimits();
  auto m = io::importOnnxBytes(std::string(bytes(data, size)), "<fuzz>", o);
  if (failed(m))
    return 0;
  verifyAndRun(*m->module, "importOnnxBytes");
  return 0;
}
#endif

llvm::ArrayRef<Target> targets() {
  static const Target all[] = {
      {"fuzz_tmir", fuzzTmir},
      {"fuzz_tmir_run", fuzzTmirRun},
      {"fuzz_safetensors", fuzzSafetensors},
      {"fuzz_npy", fuzzNpy},
      {"fuzz_pipeline", fuzzPipeline},
      {"fuzz_pipeline_toml", fuzzPipelineToml},
      {"fuzz_rules", fuzzRules},
#ifdef TM_HAVE_ONNX
      {"fuzz_onnx", fuzzOnnx},
      {"fuzz_onnx_run", fuzzOnnxRun},
#endif
  };
  return all;
}

} // namespace tmg::fuzz
