//===- Common.h - Helpers of the matcher tests ---------------------------===//
#pragma once

#include <functional>
#include <memory>

#include <catch2/catch.hpp>

#include "tm/ir/IR.h"
#include "tm/matcher/Driver.h"
#include "tm/matcher/Rules.h"

namespace mtest {
using namespace tmg;

/// A one-graph module "Net" with tensor inputs of `shape`, built by `body`
/// (which returns the output).
inline std::unique_ptr<TracedModule>
net(const std::function<Node *(GraphBuilder &)> &body, size_t inputs = 1,
    Shape shape = {2, 3}) {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  std::vector<InputSpec> specs;
  const char *names[] = {"x", "y", "z", "w"};
  for (size_t i = 0; i < inputs; ++i)
    specs.emplace_back(names[i], shape);
  GraphBuilder b = GraphBuilder::top(*tm, specs);
  b.finish(body(b));
  return tm;
}

/// The first body expr printed as `text` (the part after "= ").
inline Expr *exprNamed(InternalGraph &g, llvm::StringRef outName) {
  for (Expr *e : g.body())
    for (Node *n : e->outputs())
      if (n->name() == outName)
        return e;
  FAIL("no expr defines " << outName.str());
  return nullptr;
}

inline void requireVerified(const TracedModule &m) {
  if (auto r = verifyOrReport(m); r.failed())
    FAIL(r.diagnostic().str());
}

} // namespace mtest
