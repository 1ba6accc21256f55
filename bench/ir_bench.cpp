//===- ir_bench.cpp - Scaling benchmark of the graph IR -------------------===//
//
// Times the whole-graph operations that passes and tools run on large models
// (building with GraphBuilder, compile, mergeGetAttrs, replaceNode, flatten,
// printing, cloning) on chain and branching graphs of 1e4, 1e5 and 1e6
// exprs, and checks that they scale linearly: every 10x step in size may
// cost at most 13x the time, and compiling a 1e6-expr chain must take under
// 0.5 s. Times are the thread's CPU time (the machine is shared), each the
// minimum over a few runs; every run starts from a
// freshly built input with cold caches, and results are destroyed after the
// clock stops. The heap is reserved and pre-faulted up front (see
// reserveHeap in BenchHeap.h) so that page faults and TLB misses of the
// machine do not masquerade as non-linear algorithms.
//
//   tm-ir-bench [--max-size N] [--reps R] [--only TEXT]
//
// --max-size (default 1000000) drops the larger sizes for a quick run;
// --reps R (default 3) sets the runs per size: 3R at 1e4, R at 1e5 and
// max(1, R/3) at 1e6, which keeps a default run within ~2 minutes;
// --only times just the operations whose name contains TEXT (for
// profiling: with TM_PERF_CTL, see BenchHeap.h, perf records only them).
//
// Exits with 1 when a target is missed, 2 on bad usage or a broken fixture.
//
//===----------------------------------------------------------------------===//

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>
#include <llvm/ADT/StringRef.h>

#include "BenchHeap.h"
#include "tm/ir/IR.h"

using namespace tmg;

namespace {

constexpr std::array<size_t, 3> Sizes = {10000, 100000, 1000000};
constexpr const char *SizeLabels[] = {"1e4", "1e5", "1e6"};
constexpr size_t Size1e6 = 2; ///< index of 1e6 in Sizes
constexpr double MaxGrowth = 13.0;
constexpr double MaxCompile1e6Sec = 0.5;
/// Peak heap use of a run per expr of the largest size (measured: ~2.6 KiB
/// when flattening, which holds the hierarchy, its clone and the result).
constexpr size_t PeakHeapPerExpr = 3072;
/// Exprs per sub-graph of the flatten hierarchy, leaving room for the
/// getattr and the call of each block in the top graph (~100 per block).
constexpr size_t BlockBodySize = 98;

[[noreturn]] void fail(const std::string &msg) {
  fmt::print(stderr, "tm-ir-bench: {}\n", msg);
  std::exit(2);
}

enum class Topology { Chain, Branching };

/// What a body holds besides its live core ops, so that the operation under
/// test has work to do.
enum class Extra {
  None,
  /// An unused `neg` after every core expr: compile removes ~half the body.
  DeadCode,
  /// Core ops read weights through duplicated and chained GetAttrs.
  GetAttrs,
  /// Every ~10th expr is an unused stand-in for the value just computed,
  /// placed before that value's users so replaceNode can rewire them.
  Replacements,
};

/// Appends core ops of a topology to a graph until it holds `size` exprs.
/// Chain: x -> relu -> +1 -> relu -> +1 ... Branching: each step forks `v`
/// into `a = relu(v)` and `b = v * 2` and joins them in `a + b`, so every
/// value has two users and every add two producers.
class BodyBuilder {
public:
  BodyBuilder(GraphBuilder &b, Topology t, Extra x)
      : b_(b), topo_(t), extra_(x) {}

  /// Returns the last value.
  Node *build(Node *in, size_t size) {
    Node *v = in;
    while (b_.graph().size() < size)
      v = step(v);
    return v;
  }

  /// (old, new) pairs for replaceNode (Extra::Replacements).
  const std::vector<std::pair<Node *, Node *>> &replacements() const {
    return replacements_;
  }
  /// Number of exprs nothing depends on (Extra::DeadCode).
  size_t numDead() const { return numDead_; }

private:
  Node *step(Node *v) {
    Node *next;
    if (topo_ == Topology::Chain) {
      next = (numSteps_ % 2 == 0) ? b_.callFunction("relu", {v})
                                  : b_.callMethod(v, "__add__", {operand(1)});
      addDead(next);
    } else {
      Node *a = b_.callFunction("relu", {v});
      addDead(a);
      Node *m = b_.callMethod(v, "__mul__", {operand(2)});
      addDead(m);
      next = b_.callMethod(a, "__add__", {m});
      addDead(next);
    }
    ++numSteps_;
    // The stand-in depends on `v`, not on `next`, so rewiring `next`'s
    // users (all created by later steps) to it makes no cycle.
    if (extra_ == Extra::Replacements &&
        b_.graph().size() + 1 >= 10 * (replacements_.size() + 1))
      replacements_.emplace_back(next, b_.callFunction("neg", {v}));
    return next;
  }

  /// The constant operand of a core op, or with Extra::GetAttrs an
  /// attribute read alternately as `getattr(getattr(self, "blk"), "w")`
  /// (a chain mergeGetAttrs rewrites to "blk.w") and `getattr(self,
  /// "scale")`; every read after the first of a path is a duplicate.
  Arg operand(int constant) {
    if (extra_ != Extra::GetAttrs)
      return constant;
    if (numGetAttrReads_++ % 2 == 0)
      return b_.getAttr(b_.getAttr(b_.self(), "blk"), "w");
    return b_.getAttr(b_.self(), "scale");
  }

  void addDead(Node *n) {
    if (extra_ != Extra::DeadCode)
      return;
    b_.callFunction("neg", {n});
    ++numDead_;
  }

  GraphBuilder &b_;
  Topology topo_;
  Extra extra_;
  size_t numSteps_ = 0, numGetAttrReads_ = 0, numDead_ = 0;
  std::vector<std::pair<Node *, Node *>> replacements_;
};

/// A module with one graph `x -> body -> out` of `size` exprs.
struct Net {
  std::unique_ptr<TracedModule> mod;
  std::vector<std::pair<Node *, Node *>> replacements;
  size_t expectedRewired = 0;
  size_t numDead = 0;
};

/// Builds a Net. With `finish`, the graph goes through the builder's
/// finish() as a traced model would (compile, refs, ids); without, it is
/// left as built so that dead code and unmerged GetAttrs survive.
Net makeNet(Topology t, Extra x, size_t size, bool finish) {
  auto blk = std::make_unique<Module>("Blk");
  blk->registerParameter("w", Tensor::zeros({1}));
  auto plain = std::make_unique<Module>("Net");
  plain->registerBuffer("scale", Tensor::zeros({1}));
  plain->registerModule("blk", std::move(blk));
  Net net;
  net.mod = TracedModule::fromModule(std::move(plain));
  GraphBuilder b = GraphBuilder::top(*net.mod, {{"x"}});
  BodyBuilder body(b, t, x);
  Node *out = body.build(b.arg(0), size);
  if (finish)
    b.finish(out);
  else
    b.setOutputs(out);
  net.replacements = body.replacements();
  for (const auto &r : net.replacements)
    net.expectedRewired += r.first->numUsers();
  net.numDead = body.numDead();
  return net;
}

/// A top module calling `size / 100` instances of a traced submodule
/// ("blk0", "blk1", ...) in sequence, each with a ~100-expr graph: ~`size`
/// exprs in all. The submodules are registered directly: converting a plain
/// module with TracedModule::fromModule is quadratic in the number of
/// submodules (each Module::takeModule shifts the attribute vector and
/// rebuilds its index), ~10 s of setup for the 10^4 blocks of 1e6.
std::unique_ptr<TracedModule> makeHierarchy(Topology t, size_t size) {
  auto top = std::make_unique<TracedModule>("Net");
  size_t numBlocks = std::max<size_t>(1, size / (BlockBodySize + 2));
  for (size_t i = 0; i < numBlocks; ++i)
    top->registerModule("blk" + std::to_string(i),
                        std::make_unique<TracedModule>("Block", false));
  GraphBuilder b = GraphBuilder::top(*top, {{"x"}});
  auto blockBody = [t](GraphBuilder &sb) {
    BodyBuilder body(sb, t, Extra::None);
    sb.setOutputs(body.build(sb.arg(0), BlockBodySize));
  };
  Node *v = b.arg(0);
  for (size_t i = 0; i < numBlocks; ++i) {
    Node *m = b.getAttr(b.self(), "blk" + std::to_string(i));
    v = b.callModule(m, {v}, {}, blockBody, {"x"});
  }
  b.finish(v);
  return top;
}

/// Exprs left after flattening `m`, whose top graph holds only block
/// GetAttrs (dead once their calls are inlined) and calls: the exprs of each
/// called sub-graph, once per call.
size_t inlinedSize(const TracedModule &m) {
  size_t n = 0;
  for (Expr *e : m.graph())
    if (auto *cm = llvm::dyn_cast<CallMethod>(e))
      if (InternalGraph *sub = cm->calleeGraph())
        n += sub->size();
  return n;
}

using Clock = std::chrono::steady_clock;

/// CPU time of this thread in ms: the machine the figures come from is
/// shared, and wall time there measures the other tenants as much as this
/// code. (Cache and memory-bandwidth interference from them remains.)
double threadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

/// A timing: the thread's CPU ms and the share of the wall-clock time it
/// was on a CPU, which tells how much other processes competed with it.
struct Timing {
  double ms = std::numeric_limits<double>::quiet_NaN();
  double cpuShare = 1;
};

/// The fastest of `reps` runs of `op(input)`. Each run gets a fresh
/// `setup()` so mutating operations start from the same graph; the result
/// is checked with `check(input, result)` and destroyed after the clock
/// stops, as is the input.
template <typename Setup, typename Op, typename Check>
Timing bestOf(int reps, Setup setup, Op op, Check check) {
  Timing best;
  for (int r = 0; r < reps; ++r) {
    auto input = setup();
    flushCaches();
    perfToggle(true);
    double c0 = threadCpuMs();
    auto t0 = Clock::now();
    auto result = op(input);
    auto t1 = Clock::now();
    double ms = threadCpuMs() - c0;
    perfToggle(false);
    check(input, result);
    double wallMs = std::chrono::duration<double, std::milli>(t1 - t0).count();
    if (!(ms >= best.ms)) // also replaces the initial NaN
      best = {ms, std::min(1.0, ms / wallMs)};
  }
  return best;
}

enum Operation {
  OpBuild,
  OpCompile,
  OpMergeGetAttrs,
  OpReplaceNode,
  OpFlatten,
  OpStr,
  OpClone,
  NumOperations
};

constexpr const char *OperationNames[NumOperations] = {
    "build (GraphBuilder+finish)",
    "compile (1/2 dead)",
    "mergeGetAttrs",
    "replaceNode (10% of nodes)",
    "flatten (N/100 x 100)",
    "str",
    "cloneTraced",
};

/// Operations whose name contains this are timed (all when empty).
llvm::StringRef OnlyOps;

/// Below this CPU share a timing is marked as disturbed by other load.
constexpr double MinCpuShare = 0.9;

/// Timing of an operation on a graph of Sizes[i] exprs; NaN when not run.
using Row = std::array<Timing, Sizes.size()>;
using Table = std::array<Row, NumOperations>;

/// Runs every operation at Sizes[sizeIdx] on `topo` `reps` times; each
/// cell of `table` keeps the minimum over all calls.
void measure(Topology topo, size_t sizeIdx, int reps, Table &table) {
  size_t n = Sizes[sizeIdx];
  auto noCheck = [](auto &, auto &) {};
  auto record = [&](Operation op, auto setup, auto run, auto check) {
    if (!llvm::StringRef(OperationNames[op]).contains(OnlyOps))
      return;
    Timing t = bestOf(reps, setup, run, check);
    Timing &cell = table[op][sizeIdx];
    if (!(t.ms >= cell.ms)) // also replaces the initial NaN
      cell = t;
  };

  record(
      OpBuild, [] { return 0; },
      [&](int) { return makeNet(topo, Extra::None, n, true); }, noCheck);

  record(
      OpCompile, [&] { return makeNet(topo, Extra::DeadCode, n, false); },
      [](Net &net) { return net.mod->graph().compile(); },
      [](Net &net, size_t removed) {
        if (removed != net.numDead)
          fail(fmt::format("compile removed {} exprs, expected {}", removed,
                           net.numDead));
      });

  record(
      OpMergeGetAttrs, [&] { return makeNet(topo, Extra::GetAttrs, n, false); },
      [](Net &net) { return net.mod->graph().mergeGetAttrs(); },
      [](Net &, bool changed) {
        if (!changed)
          fail("mergeGetAttrs changed nothing");
      });

  record(
      OpReplaceNode,
      [&] { return makeNet(topo, Extra::Replacements, n, false); },
      [](Net &net) { return net.mod->graph().replaceNode(net.replacements); },
      [](Net &net, const ReplaceReport &report) {
        if (!report.complete() || report.rewired != net.expectedRewired)
          fail(fmt::format("replaceNode rewired {} uses, expected {}:\n{}",
                           report.rewired, net.expectedRewired, report.str()));
      });

  // flatten, str and cloneTraced do not modify their input: build it once.
  auto hierarchy = makeHierarchy(topo, n);
  size_t flatSize = inlinedSize(*hierarchy);
  record(
      OpFlatten, [&] { return hierarchy.get(); },
      [](const TracedModule *m) { return m->flatten(); },
      [&](const TracedModule *, const std::unique_ptr<TracedModule> &flat) {
        if (flat->graph().size() != flatSize)
          fail(fmt::format("flatten left {} exprs, expected {}",
                           flat->graph().size(), flatSize));
      });
  hierarchy.reset();

  Net net = makeNet(topo, Extra::None, n, true);
  record(
      OpStr, [&] { return net.mod.get(); },
      [](const TracedModule *m) { return m->graph().str(); }, noCheck);
  record(
      OpClone, [&] { return net.mod.get(); },
      [](const TracedModule *m) { return m->cloneTraced(); }, noCheck);
}

/// Runs per measurement at `size`; the figure is their minimum. Sizes
/// compared by a growth factor get the same count below 1e6 (a minimum over
/// more runs is lower in a noisy machine, which would bias the factor);
/// a 1e6 run takes seconds, so it gets a third of them.
int repsFor(size_t size, int reps) {
  if (size < Sizes[Size1e6])
    return 3 * reps;
  return reps;
}

std::string cell(double v, const char *fmtSpec) {
  return std::isnan(v) ? "-" : fmt::format(fmt::runtime(fmtSpec), v);
}

/// Prints one topology's table; returns the growth factors above the
/// target as "title: op 1e4->1e5: 14.2x" lines. Counts timings disturbed by
/// other load in `numDisturbed`.
std::vector<std::string> printTable(const char *title, const Table &table,
                                    size_t &numDisturbed) {
  std::vector<std::string> violations;
  fmt::print("\n{:<30}", title);
  for (const char *s : SizeLabels)
    fmt::print("{:>11}", std::string(s) + " ms");
  for (size_t i = 0; i + 1 < Sizes.size(); ++i)
    fmt::print("{:>11}", std::string(SizeLabels[i]) + "->" + SizeLabels[i + 1]);
  fmt::print("\n");
  for (int op = 0; op < NumOperations; ++op) {
    fmt::print("{:<30}", OperationNames[op]);
    const Row &row = table[op];
    for (const Timing &t : row) {
      bool disturbed = t.cpuShare < MinCpuShare;
      numDisturbed += disturbed;
      fmt::print("{:>11}", cell(t.ms, disturbed ? "{:.2f}*" : "{:.2f}"));
    }
    for (size_t i = 0; i + 1 < Sizes.size(); ++i) {
      double g = row[i + 1].ms / row[i].ms;
      bool bad = g > MaxGrowth;
      fmt::print("{:>11}", cell(g, bad ? "{:.1f}x !" : "{:.1f}x"));
      if (bad)
        violations.push_back(fmt::format("{}: {} {}->{}: {:.1f}x", title,
                                         OperationNames[op], SizeLabels[i],
                                         SizeLabels[i + 1], g));
    }
    fmt::print("\n");
  }
  return violations;
}

size_t parseCount(llvm::StringRef flag, const char *value) {
  unsigned long long v = 0;
  if (!value || llvm::StringRef(value).getAsInteger(10, v) || v == 0)
    fail(fmt::format("{} needs a positive integer", flag.str()));
  return size_t(v);
}

} // namespace

int main(int argc, char **argv) {
  const char *usage =
      "usage: tm-ir-bench [--max-size N] [--reps R] [--only TEXT]";
  size_t maxSize = Sizes[Size1e6];
  int reps = 3;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    const char *value = i + 1 < argc ? argv[++i] : nullptr;
    if (a == "--max-size")
      maxSize = parseCount(a, value);
    else if (a == "--reps")
      reps = int(parseCount(a, value));
    else if (a == "--only" && value)
      OnlyOps = value;
    else
      fail(fmt::format("unknown argument '{}'\n{}", a.str(), usage));
  }
  if (maxSize < Sizes[0])
    fail(fmt::format("--max-size must be at least {}\n{}", Sizes[0], usage));

  auto t0 = Clock::now();
  size_t largest = 0;
  for (size_t n : Sizes)
    if (n <= maxSize)
      largest = n;
  if (!reserveHeap(largest * PeakHeapPerExpr))
    fail("cannot reserve the heap");
  fmt::print("tm-ir-bench: pre-faulted {} MiB of heap in {:.1f} s; min of "
             "{}/{}/{} runs at 1e4/1e5/1e6\n",
             (largest * PeakHeapPerExpr) >> 20,
             std::chrono::duration<double>(Clock::now() - t0).count(),
             repsFor(Sizes[0], reps), repsFor(Sizes[1], reps),
             repsFor(Sizes[2], reps));

  // Rounds, each running every size once: the sizes a growth factor
  // compares are sampled in the same stretches of time, so a quiet or a
  // busy minute on the shared machine moves both. The 1e6 runs (a third as
  // many) are spread over the rounds.
  std::array<Table, 2> tables; // chain, branching
  int rounds = repsFor(Sizes[0], reps);
  for (int r = 0; r < rounds; ++r)
    for (size_t s = 0; s < Sizes.size() && Sizes[s] <= maxSize; ++s) {
      int every = rounds / repsFor(Sizes[s], reps);
      if (r % every != every / 2 % every)
        continue;
      for (Topology topo : {Topology::Chain, Topology::Branching})
        measure(topo, s, 1, tables[size_t(topo)]);
    }

  size_t numDisturbed = 0;
  std::vector<std::string> violations =
      printTable("chain", tables[0], numDisturbed);
  for (std::string &v : printTable("branching", tables[1], numDisturbed))
    violations.push_back(std::move(v));

  fmt::print("\n");
  if (numDisturbed)
    fmt::print("* {} timings got less than {:.0f}% of a CPU: other processes "
               "competed (CPU time excludes their share, not their cache "
               "and memory traffic)\n",
               numDisturbed, 100 * MinCpuShare);
  bool pass = violations.empty();
  double compileMs = tables[size_t(Topology::Chain)][OpCompile][Size1e6].ms;
  if (std::isnan(compileMs)) {
    fmt::print("compile 1e6 (chain): not measured (--max-size < 1000000)\n");
  } else {
    bool ok = compileMs / 1000 < MaxCompile1e6Sec;
    fmt::print("compile 1e6 (chain): {:.3f} s  [target < {} s: {}]\n",
               compileMs / 1000, MaxCompile1e6Sec, ok ? "PASS" : "FAIL");
    pass &= ok;
  }
  fmt::print("growth factors <= {}x: {}\n", MaxGrowth,
             violations.empty() ? "PASS" : "FAIL");
  for (const std::string &v : violations)
    fmt::print("  {}\n", v);
  fmt::print("RESULT: {}\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}
