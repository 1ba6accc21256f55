//===- Profile.cpp - Time per expr and per op kind ------------------------===//
#include "tm/runtime/Profile.h"

#include <algorithm>

#include <fmt/format.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/ADT/StringMap.h>

#include "tm/ir/Module.h"
#include "tm/ir/Node.h"

namespace tmg::rt {

namespace {

const Shape *shapeOf(const Node *n) {
  auto *t = llvm::dyn_cast_or_null<TensorNode>(n);
  return t ? t->staticShape() : nullptr; // FLOPs need sizes
}

/// The weight of a conv or linear: the function's second input, or the
/// called builtin module's `weight`.
const Shape *weightShape(const Expr *e, Shape &storage) {
  if (llvm::isa<CallFunction>(e))
    return e->numInputs() > 1 ? shapeOf(e->input(1)) : nullptr;
  auto *mod = llvm::dyn_cast<ModuleNode>(e->input(0));
  if (!mod || !mod->owner())
    return nullptr;
  const Tensor *w = mod->owner()->tensor("weight");
  if (!w || !w->defined())
    return nullptr;
  storage.assign(w->shape().begin(), w->shape().end());
  return &storage;
}

bool isTracedCall(const Expr *e) {
  auto *cm = llvm::dyn_cast<CallMethod>(e);
  return cm && cm->calleeGraph() != nullptr;
}

int64_t nowNs(Profile::Clock::time_point t, Profile::Clock::time_point base) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t - base).count();
}

} // namespace

std::string Profile::kindOf(const Expr *e) {
  switch (e->kind()) {
  case Expr::Kind::GetAttr:
    return "getattr";
  case Expr::Kind::Constant:
    return "constant";
  case Expr::Kind::Input:
    return "input";
  default:
    break;
  }
  if (auto *cm = llvm::dyn_cast<CallMethod>(e)) {
    if (!cm->isModuleCall())
      return cm->method().str();
    auto *mod = llvm::dyn_cast<ModuleNode>(cm->input(0));
    return cm->calleeGraph() ? "call" : mod ? mod->moduleType().name : "module";
  }
  return e->opSchema() ? e->opSchema()->name().str() : "?";
}

double Profile::flopsOf(const Expr *e) {
  if (e->numOutputs() == 0)
    return 0;
  const Shape *out = shapeOf(e->output(0));
  if (!out)
    return 0;
  double outN = double(shapeNumel(*out));
  std::string kind = llvm::StringRef(kindOf(e)).lower();
  llvm::StringRef k(kind);
  Shape storage;
  if (k.startswith("conv_transpose") || k.startswith("convtranspose")) {
    const Shape *w = weightShape(e, storage);
    const Shape *in = e->numInputs() > 0 ? shapeOf(e->input(llvm::isa<CallFunction>(e) ? 0 : 1))
                                         : nullptr;
    if (!w || !in || w->empty() || (*w)[0] == 0)
      return 0;
    return 2.0 * double(shapeNumel(*in)) * double(shapeNumel(*w) / (*w)[0]);
  }
  if (k.startswith("conv")) {
    const Shape *w = weightShape(e, storage);
    if (!w || w->empty() || (*w)[0] == 0)
      return 0;
    return 2.0 * outN * double(shapeNumel(*w) / (*w)[0]);
  }
  if (k.startswith("linear")) {
    const Shape *w = weightShape(e, storage);
    return w && w->size() == 2 ? 2.0 * outN * double((*w)[1]) : 0;
  }
  if (k == "scaled_dot_product_attention") {
    // Scores (L x S, depth E) and their product with value (L x Ev, depth S).
    const Shape *key = e->numInputs() > 1 ? shapeOf(e->input(1)) : nullptr;
    if (!key || key->size() < 2 || out->empty() || out->back() == 0)
      return 0;
    double s = double((*key)[key->size() - 2]), dE = double(key->back());
    return 2.0 * outN * s + 2.0 * (outN / double(out->back())) * s * dE;
  }
  if (k == "matmul" || k == "__matmul__" || k == "bmm") {
    const Shape *b = e->numInputs() > 1 ? shapeOf(e->input(1)) : nullptr;
    if (!b || b->empty())
      return 0;
    return 2.0 * outN * double(b->size() >= 2 ? (*b)[b->size() - 2] : (*b)[0]);
  }
  return 0;
}

void Profile::beginRun() {
  ++runs_;
  lastRun_.clear();
  runStart_ = Clock::now();
}

void Profile::record(const Expr *e, Clock::time_point start, Clock::time_point end, int depth) {
  lastRun_.push_back({e, nowNs(start, runStart_), nowNs(end, runStart_), depth});
  auto [it, fresh] = index_.try_emplace(e, stats_.size());
  if (fresh) {
    ExprStats s;
    s.expr = e;
    s.kind = kindOf(e);
    s.flops = flopsOf(e);
    stats_.push_back(std::move(s));
    isCall_.push_back(isTracedCall(e));
  }
  ExprStats &s = stats_[it->second];
  ++s.calls;
  s.seconds += std::chrono::duration<double>(end - start).count();
}

std::vector<Profile::ExprStats> Profile::exprs() const {
  std::vector<ExprStats> out;
  for (size_t i = 0; i < stats_.size(); ++i)
    if (!isCall_[i])
      out.push_back(stats_[i]);
  return out;
}

std::vector<Profile::KindStats> Profile::kinds() const {
  std::vector<KindStats> out;
  llvm::StringMap<size_t> at;
  for (const ExprStats &s : exprs()) {
    auto [it, fresh] = at.try_emplace(s.kind, out.size());
    if (fresh)
      out.push_back({s.kind, 0, 0, 0, 0});
    KindStats &k = out[it->second];
    ++k.exprs;
    k.calls += s.calls;
    k.seconds += s.seconds;
    k.flops += s.flops * double(s.calls);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const KindStats &a, const KindStats &b) { return a.seconds > b.seconds; });
  return out;
}

double Profile::totalSeconds() const {
  double t = 0;
  for (const ExprStats &s : exprs())
    t += s.seconds;
  return t;
}

std::string Profile::report(size_t topExprs) const {
  double runs = double(std::max<int64_t>(runs_, 1)), total = totalSeconds();
  std::string out = fmt::format("=== profile: {} run(s), {:.3f} ms per run in exprs ===\n",
                                runs_, 1e3 * total / runs);
  std::vector<KindStats> ks = kinds();
  size_t width = 24; // the op kind column fits the longest name
  for (const KindStats &k : ks)
    width = std::max(width, k.kind.size());
  out += fmt::format("{:<{}} {:>6} {:>11} {:>7} {:>9}\n", "op kind", width,
                     "exprs", "ms per run", "share", "GFLOP/s");
  for (const KindStats &k : ks) {
    std::string gflops = k.flops > 0 && k.seconds > 0
                             ? fmt::format("{:.1f}", k.flops / k.seconds / 1e9)
                             : "";
    out += fmt::format("{:<{}} {:>6} {:>11.3f} {:>6.1f}% {:>9}\n", k.kind,
                       width, k.exprs, 1e3 * k.seconds / runs,
                       total > 0 ? 100 * k.seconds / total : 0.0, gflops);
  }
  std::vector<ExprStats> es = exprs();
  std::stable_sort(es.begin(), es.end(),
                   [](const ExprStats &a, const ExprStats &b) { return a.seconds > b.seconds; });
  if (es.size() > topExprs)
    es.resize(topExprs);
  out += fmt::format("slowest exprs (ms per run, GFLOP/s):\n");
  for (const ExprStats &s : es) {
    std::string text = s.expr->str();
    text = text.substr(text.find('\t') + 1);
    if (text.size() > 100)
      text = text.substr(0, 97) + "...";
    std::string gflops =
        s.flops > 0 && s.seconds > 0
            ? fmt::format("{:.1f}", s.flops * double(s.calls) / s.seconds / 1e9)
            : "";
    out += fmt::format("  {:>9.3f} {:>7}  %{:<6} {}\n", 1e3 * s.seconds / runs,
                       gflops, s.expr->id(), text);
  }
  return out;
}

static std::string jsonString(llvm::StringRef s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", int(c));
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string Profile::chromeTrace() const {
  std::string out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < lastRun_.size(); ++i) {
    const Event &ev = lastRun_[i];
    std::string text = ev.expr->str();
    text = text.substr(text.find('\t') + 1);
    // The FLOP count record() worked out for the expr, where it has one.
    double flops = stats_[index_.lookup(ev.expr)].flops;
    std::string flopsArg =
        flops > 0 ? fmt::format(", \"flops\": {:.0f}", flops) : std::string();
    out += fmt::format(
        "  {{\"name\": {}, \"cat\": {}, \"ph\": \"X\", \"ts\": {:.3f}, "
        "\"dur\": {:.3f}, "
        "\"pid\": 0, \"tid\": 0, \"args\": {{\"expr\": {}, \"id\": {}, "
        "\"depth\": {}{}}}}}{}\n",
        jsonString(kindOf(ev.expr)), jsonString(ev.depth ? "nested" : "top"),
        double(ev.startNs) / 1e3, double(ev.endNs - ev.startNs) / 1e3,
        jsonString(text), ev.expr->id(), ev.depth, flopsArg,
        i + 1 < lastRun_.size() ? "," : "");
  }
  return out + "], \"displayTimeUnit\": \"ms\"}\n";
}

} // namespace tmg::rt
