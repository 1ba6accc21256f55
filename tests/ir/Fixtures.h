//===- Fixtures.h - Graphs of the reference's tests and docstrings -------===//
//
// Each fixture builds, with the GraphBuilder, the graph the reference's
// tracer produces for a module of its docstrings or tests
// (`test/unit/traced_module/*`), in the same expr order as Python evaluates
// the forward method.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <catch2/catch.hpp>

#include "tm/ir/IR.h"

namespace fixtures {
using namespace tmg;

/// MyBlock of test_modification.py: conv1 -> bn1 -> relu + 1 -> nothing
/// (an IdentityMod returning its input). `b` builds inside the caller.
inline std::unique_ptr<Module> makeMyBlockModule(int64_t in = 3, int64_t ch = 3) {
  auto m = std::make_unique<Module>("MyBlock");
  m->addModule<Conv2d>("conv1", in, ch, 3, 1, 1, 1, 1, false);
  m->addModule<BatchNorm2d>("bn1", ch);
  m->registerModule("nothing", std::make_unique<Module>("IdentityMod"));
  return m;
}

/// IdentityMod.forward(x) = x.
inline void identityBody(GraphBuilder &b) { b.setOutputs(b.arg(0)); }

inline void myBlockBody(GraphBuilder &b) {
  Node *x = b.arg(0);
  Node *conv1 = b.getAttr(b.self(), "conv1");
  Node *c = b.callModule(conv1, {x});
  Node *bn1 = b.getAttr(b.self(), "bn1");
  Node *bn = b.callModule(bn1, {c});
  Node *r = b.callFunction("relu", {bn});
  Node *a = b.callMethod(r, "__add__", {1});
  Node *nothing = b.getAttr(b.self(), "nothing");
  Node *out = b.callModule(nothing, {a}, {}, identityBody, {"x"});
  b.setOutputs(out);
}

/// MyBlock traced alone.
inline std::unique_ptr<TracedModule> tracedMyBlock() {
  auto tm = TracedModule::fromModule(makeMyBlockModule());
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 3, 3}}});
  myBlockBody(b);
  b.finish(b.graph().outputs()[0]);
  return tm;
}

/// MyModule of test_modification.py: block0 -> block1 -> nothing.
inline std::unique_ptr<TracedModule> tracedMyModule() {
  auto m = std::make_unique<Module>("MyModule");
  m->registerModule("block0", makeMyBlockModule());
  m->registerModule("block1", makeMyBlockModule());
  m->registerModule("nothing", std::make_unique<Module>("IdentityMod"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 3, 3}}});
  Node *x = b.arg(0);
  Node *b0 = b.getAttr(b.self(), "block0");
  x = b.callModule(b0, {x}, {}, myBlockBody, {"x"});
  Node *b1 = b.getAttr(b.self(), "block1");
  x = b.callModule(b1, {x}, {}, myBlockBody, {"x"});
  Node *n = b.getAttr(b.self(), "nothing");
  x = b.callModule(n, {x}, {}, identityBody, {"x"});
  b.finish(x);
  return tm;
}

/// The InternalGraph docstring: relu(linear(x + param)).
inline std::unique_ptr<TracedModule> docstringMyModule() {
  auto m = std::make_unique<Module>("MyModule");
  m->registerBuffer("param", Tensor::randn({3, 4}));
  m->addModule<Linear>("linear", 4, 5);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 4}}});
  Node *linear = b.getAttr(b.self(), "linear");
  Node *param = b.getAttr(b.self(), "param");
  Node *add = b.callMethod(b.arg(0), "__add__", {param});
  Node *lo = b.callModule(linear, {add});
  b.finish(b.callFunction("relu", {lo}));
  return tm;
}

/// `x = x + 1; return x` (reset_outputs / add_output_node docstrings).
inline std::unique_ptr<TracedModule> addOneModule() {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("MyModule"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1}}});
  b.finish(b.callMethod(b.arg(0), "__add__", {1}));
  return tm;
}

/// Users of every node equal the exprs using it (the reference's
/// `_check_expr_users`), for every graph of the hierarchy.
inline void checkExprUsers(TracedModule &m) {
  m.namedModules([](const std::string &, Module &x) {
    auto *t = llvm::dyn_cast<TracedModule>(&x);
    if (!t)
      return;
    for (const auto &s : t->signatures()) {
      InternalGraph &g = *s.graph;
      std::unordered_map<const Node *, std::vector<int64_t>> expect;
      for (Expr *e : g)
        for (size_t i = 0; i < e->numInputs(); ++i)
          expect[e->input(i)].push_back(e->id());
      for (Node *n : g.nodes(false)) {
        std::vector<int64_t> got;
        for (Expr *u : n->users())
          got.push_back(u->id());
        std::sort(got.begin(), got.end());
        auto want = expect[n];
        std::sort(want.begin(), want.end());
        CHECK(got == want);
      }
    }
  });
}

/// Ids unique and dense below totalIds (the reference's `_check_id`).
inline void checkIds(TracedModule &m) {
  auto ex = m.graph().exprs(true).asList();
  auto ns = m.graph().nodes(true).asList();
  std::set<int64_t> eids, nids;
  for (Expr *e : ex)
    eids.insert(e->id());
  for (Node *n : ns)
    nids.insert(n->id());
  CHECK(eids.size() == ex.size());
  CHECK(nids.size() == ns.size());
  auto [nextNode, nextExpr] = m.totalIds();
  CHECK(*eids.rbegin() + 1 == nextExpr);
  CHECK(*nids.rbegin() + 1 == nextNode);
}

/// Node names unique in the (flat) graph (the reference's `_check_name`).
inline void checkNames(TracedModule &m) {
  std::set<std::string> names;
  size_t count = 0;
  for (Node *n : m.graph().nodes(false)) {
    names.insert(n->name().str());
    ++count;
  }
  CHECK(names.size() == count);
}

inline void checkVerified(const TracedModule &m) {
  auto diags = verify(m);
  std::string all;
  for (const auto &d : diags)
    all += d.str() + "\n";
  INFO(all);
  CHECK(diags.empty());
}

} // namespace fixtures
