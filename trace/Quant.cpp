//===- Quant.cpp - Observers, fake quantisation, QAT checks ---------------===//
#include "tm/trace/Quant.h"

#include <algorithm>
#include <cmath>

#include "tm/ir/Diagnostic.h"
#include "tm/trace/Trace.h"

namespace tmg {

std::pair<int64_t, int64_t> qrange(llvm::StringRef d) {
  if (d == "qint8")
    return {-128, 127};
  if (d == "quint8")
    return {0, 255};
  if (d == "qint4")
    return {-8, 7};
  if (d == "quint4")
    return {0, 15};
  raise("unknown quantised dtype '{}' (qint8, quint8, qint4, quint4)", d.str());
}

namespace {
/// Observers and FakeQuantize are builtin (registered once, with factories
/// so that the interpreter runs them).
struct RegisterQuantBuiltins {
  RegisterQuantBuiltins() {
    registerAsBuiltin<MinMaxObserver>();
    registerAsBuiltin<FakeQuantize>();
  }
};
void ensureRegistered() { static RegisterQuantBuiltins once; }
} // namespace

MinMaxObserver::MinMaxObserver(std::string qdtype) : LayerOf("MinMaxObserver", {"x"}) {
  ensureRegistered();
  qrange(qdtype);
  setValue("dtype", Scalar(std::move(qdtype)));
  registerBuffer("min_val", Tensor::full({}, INFINITY));
  registerBuffer("max_val", Tensor::full({}, -INFINITY));
}

Var MinMaxObserver::forward(Var x) {
  if (!isTracing() && !isProbing() && x.hasValue()) {
    const Tensor &t = x.value();
    Tensor &lo = *tensor("min_val"), &hi = *tensor("max_val");
    float mn = lo.at(0), mx = hi.at(0);
    for (int64_t i = 0; i < t.numel(); ++i) {
      mn = std::min(mn, float(t.at(i)));
      mx = std::max(mx, float(t.at(i)));
    }
    registerBuffer("min_val", Tensor::full({}, mn));
    registerBuffer("max_val", Tensor::full({}, mx));
  }
  return x;
}

QParams MinMaxObserver::qparams() const {
  auto [qmin, qmax] = qrange(qdtype());
  double mn = std::min(0.0, tensor("min_val")->at(0));
  double mx = std::max(0.0, tensor("max_val")->at(0));
  if (!std::isfinite(mn) || !std::isfinite(mx))
    raise("MinMaxObserver: no statistics recorded yet");
  QParams q;
  if (qmin < 0) {
    double m = std::max(std::fabs(mn), std::fabs(mx));
    q.scale = std::max(m / ((qmax - qmin) / 2.0), 1e-12);
    q.zeroPoint = 0;
  } else {
    q.scale = std::max((mx - mn) / double(qmax - qmin), 1e-12);
    q.zeroPoint = std::clamp<int64_t>(qmin - int64_t(std::lround(mn / q.scale)), qmin, qmax);
  }
  return q;
}

FakeQuantize::FakeQuantize(std::string qdtype, QParams q) : LayerOf("FakeQuantize", {"x"}) {
  ensureRegistered();
  auto [qmin, qmax] = qrange(qdtype);
  setValue("dtype", Scalar(std::move(qdtype)));
  setValue("qmin", Scalar(qmin));
  setValue("qmax", Scalar(qmax));
  setQParams(q);
}

void FakeQuantize::setQParams(QParams q) {
  if (!(q.scale > 0) || !std::isfinite(q.scale))
    raise("FakeQuantize: scale must be finite and positive, got {}", q.scale);
  setValue("scale", Scalar(q.scale));
  setValue("zero_point", Scalar(q.zeroPoint));
}

QParams FakeQuantize::qparams() const {
  return {floatValue("scale"), intValue("zero_point")};
}

Var FakeQuantize::forward(Var x) {
  return F::fake_quant(x, floatValue("scale"), intValue("zero_point"), intValue("qmin"),
                       intValue("qmax"));
}

QATLayer::QATLayer(std::string typeName, std::vector<std::string> forwardParams,
                   bool withWeight, bool withAct)
    : Layer(std::move(typeName), std::move(forwardParams)) {
  ensureRegistered();
  setValue("with_weight", Scalar(withWeight));
  setValue("with_act", Scalar(withAct));
}

Var QATLayer::applyAct(Var x) {
  if (module("act_observer"))
    x = mod("act_observer")(x);
  if (module("act_fake_quant"))
    x = mod("act_fake_quant")(x);
  return x;
}

Var QATLayer::applyWeight(Var w) {
  if (module("weight_observer"))
    w = mod("weight_observer")(w);
  if (module("weight_fake_quant"))
    w = mod("weight_fake_quant")(w);
  return w;
}

static bool isBuiltinQuant(const Module *m) {
  return !m || m->isBuiltin() || isRegisteredBuiltin(std::type_index(typeid(*m)));
}

static bool checkPair(QATLayer &m, const char *observer, const char *fakeQuant) {
  Module *obs = m.module(observer), *fq = m.module(fakeQuant);
  if (isBuiltinQuant(obs) && isBuiltinQuant(fq))
    return false;
  // qparams and dtype from the observer when it has them, else from the
  // fake-quantiser.
  const QuantSource *src = dynamic_cast<const QuantSource *>(obs);
  if (!src)
    src = dynamic_cast<const QuantSource *>(fq);
  if (!src)
    raise("QAT module '{}': neither '{}' nor '{}' provides quantisation parameters",
          m.typeName().str(), observer, fakeQuant);
  QParams q = src->qparams();
  std::string dtype = src->qdtype();
  m.takeModule(observer);
  m.takeModule(fakeQuant);
  m.registerModule(fakeQuant, std::make_unique<FakeQuantize>(dtype, q));
  return true;
}

bool checkQATModule(QATLayer &m) {
  bool changed = false;
  if (m.withAct())
    changed |= checkPair(m, "act_observer", "act_fake_quant");
  if (m.withWeight())
    changed |= checkPair(m, "weight_observer", "weight_fake_quant");
  return changed;
}

} // namespace tmg
