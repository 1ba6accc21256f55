//===- Common.h - Helpers of the transform tests -------------------------===//
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../TestPasses.h"
#include "tm/ir/IR.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"
#include "tm/transforms/Transforms.h"

namespace xt {
using namespace tmg;

inline PassRegistry &reg() {
  static PassRegistry &r = [] () -> PassRegistry & {
    registerTransformPasses(test::testPasses());
    return test::testPasses();
  }();
  return r;
}

/// Runs pipeline `text` on `m` (verifying after each pass); returns the
/// pass context's remarks joined.
inline std::string run(TracedModule &m, llvm::StringRef text) {
  auto p = Pipeline::parse(text, reg());
  if (p.failed())
    FAIL(p.diagnostic().str());
  PipelineOptions o;
  o.verifyEach = true;
  o.output = [](const std::string &) {};
  PassManager pm(std::move(*p), o);
  if (auto r = pm.run(m); r.failed())
    FAIL(r.diagnostic().str());
  std::string remarks;
  for (const Diagnostic &r : pm.context().remarks())
    remarks += r.str() + "\n";
  return remarks;
}

inline void checkVerified(const TracedModule &m) {
  auto diags = verify(m);
  std::string all;
  for (const auto &d : diags)
    all += d.str() + "\n";
  INFO(all);
  CHECK(diags.empty());
}

inline std::vector<Tensor> eval(const TracedModule &m, const std::vector<Tensor> &in) {
  rt::Interpreter interp(m);
  return interp.run(in).outputs;
}

/// max over elements of |a - b| - rtol |a| (inf when shapes differ): with
/// atol, NumPy's allclose(b, a, rtol, atol) is `maxDiff(a, b, rtol) <= atol`.
/// rtol 1e-5 allows float32 rounding of large outputs (the test_passes
/// outputs reach ~2000, where one ulp is 1.2e-4).
inline double maxDiff(const Tensor &a, const Tensor &b, double rtol = 1e-5) {
  if (a.shape() != b.shape() || a.numel() != b.numel())
    return INFINITY;
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(a.at(i) - b.at(i)) - rtol * std::abs(a.at(i)));
  return m;
}

/// Differential check: `pipeline` on a copy of `m` keeps the outputs on
/// `trials` seeded random inputs within `tol`. Returns the optimised copy.
inline std::unique_ptr<TracedModule> checkDifferential(const TracedModule &m,
                                                       llvm::StringRef pipeline,
                                                       std::vector<Shape> inputShapes,
                                                       double tol = 1e-4, int trials = 3) {
  auto opt = m.cloneTraced();
  run(*opt, pipeline);
  checkVerified(*opt);
  for (int t = 0; t < trials; ++t) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < inputShapes.size(); ++i)
      in.push_back(Tensor::randn(inputShapes[i], 1000 + 17 * t + i));
    auto want = eval(m, in), got = eval(*opt, in);
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
      INFO("pipeline " << pipeline.str() << ", trial " << t << ", output " << i);
      CHECK(maxDiff(want[i], got[i], tol == 0 ? 0 : 1e-5) <= tol);
    }
  }
  return opt;
}

inline size_t countFn(const TracedModule &m, OpKind k) {
  return m.graph().getFunctionByType(&op(k)).asCount();
}
inline size_t countMethod(const TracedModule &m, llvm::StringRef name) {
  return m.graph().getMethodByType(name).asCount();
}

} // namespace xt
