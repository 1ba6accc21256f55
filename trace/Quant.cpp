//===- Quant.cpp - Observers, fake quantisation, QAT checks ---------------===//
#include "tm/trace/Quant.h"

#include <algorithm>
#include <cmath>

#include "State.h"
#include "tm/ir/Diagnostic.h"
#include "tm/runtime/Eval.h"
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
/// The module passed as argument `i` of `_apply_fakequant_with_observer`,
/// or nullptr for None.
const Module *moduleArg(const Expr &e, size_t i, const char *param) {
  if (e.arg(i).isConst())
    return nullptr;
  auto *n = llvm::dyn_cast_or_null<ModuleNode>(e.arg(i).node());
  if (!n || !n->owner())
    raiseAt(Location::atExpr(e.id()),
            "_apply_fakequant_with_observer: '{}' must be a module or None", param);
  return n->owner();
}

/// The interpreter's kernel of `_apply_fakequant_with_observer(self, target,
/// fake_quant, observer)`: observers pass their input through (they record
/// statistics only when run eagerly); a FakeQuantize fake-quantises with its
/// parameters.
std::vector<Tensor> fakeQuantWithObserverKernel(const Expr &e, llvm::ArrayRef<Tensor> ins) {
  if (e.numArgs() != 4 || !e.kwargNames().empty())
    raiseAt(Location::atExpr(e.id()),
            "_apply_fakequant_with_observer takes (self, target, fake_quant, observer), "
            "positionally");
  Node *target = e.arg(1).node();
  if (!target || !llvm::isa<TensorNode>(target))
    raiseAt(Location::atExpr(e.id()), "_apply_fakequant_with_observer: 'target' must be a tensor");
  Tensor x;
  for (size_t i = 0; i < e.numInputs(); ++i)
    if (e.input(i) == target)
      x = ins[i];
  moduleArg(e, 3, "observer"); // checked; the value passes through
  const Module *fq = moduleArg(e, 2, "fake_quant");
  if (!fq)
    return {x};
  if (fq->typeName() != "FakeQuantize")
    raiseAt(Location::atExpr(e.id()),
            "_apply_fakequant_with_observer: the interpreter runs FakeQuantize "
            "fake-quantisers, not '{}'",
            fq->typeName().str());
  trace::StateGuard off(nullptr);
  Var y = F::fake_quant(Var(x), fq->floatValue("scale"), fq->intValue("zero_point"),
                        fq->intValue("qmin"), fq->intValue("qmax"));
  return {y.value()};
}

/// Observers and FakeQuantize are builtin (registered once, with factories
/// so that the interpreter runs them); the QAT helper is a function with a
/// kernel.
struct RegisterQuantBuiltins {
  const OpSchema *fn;
  RegisterQuantBuiltins() {
    registerAsBuiltin<MinMaxObserver>();
    registerAsBuiltin<FakeQuantize>();
    trace::registerBuiltinLayerType("MinMaxObserver", typeid(MinMaxObserver));
    trace::registerBuiltinLayerType("FakeQuantize", typeid(FakeQuantize));
    fn = &OpRegistry::instance().registerFunction(
        "module", "_apply_fakequant_with_observer", {"self", "target", "fake_quant", "observer"});
    rt::registerFunctionKernel(*fn, fakeQuantWithObserverKernel);
  }
};
const RegisterQuantBuiltins &ensureRegistered() {
  static RegisterQuantBuiltins once;
  return once;
}
} // namespace

const OpSchema &fakeQuantWithObserverFunction() { return *ensureRegistered().fn; }

// Registered when the library loads, so that a .tmir file with QAT modules
// and helper calls reads and runs in any program linking the tracer.
static const bool quantRegisteredAtLoad = (ensureRegistered(), true);

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
  return applyFakeQuantWithObserver(std::move(x), "act_fake_quant", "act_observer");
}

Var QATLayer::applyWeight(Var w) {
  return applyFakeQuantWithObserver(std::move(w), "weight_fake_quant", "weight_observer");
}

Var QATLayer::applyFakeQuantWithObserver(Var t, llvm::StringRef fakeQuant,
                                         llvm::StringRef observer) {
  trace::State *st = trace::current();
  if (!st) {
    if (module(observer))
      t = mod(observer)(t);
    if (module(fakeQuant))
      t = mod(fakeQuant)(t);
    return t;
  }
  if (st->scope().user != this)
    raise("{}.applyFakeQuantWithObserver while the forward of '{}' is traced: a forward "
          "quantises only with its own observers and fake-quantisers",
          typeName().str(),
          st->scope().user ? st->scope().user->typeName().str() : std::string("a graph"));
  // Python evaluates `self._apply_fakequant_with_observer(target,
  // self.fake_quant, self.observer)` left to right: the target, then the
  // GetAttr of the fake-quantiser, then that of the observer.
  Node *target = trace::traceLeaf(*st, t);
  Arg fq = Arg::none(), obs = Arg::none();
  if (module(fakeQuant))
    fq = Arg(mod(fakeQuant).node());
  if (module(observer))
    obs = Arg(mod(observer).node());
  trace::Scope &sc = st->scope();
  OutputType type;
  type.shape = t.shape();
  type.dtype = t.dtype();
  auto outs = sc.b.callFunctionN(fakeQuantWithObserverFunction(),
                                 {Arg(sc.b.self()), Arg(target), std::move(fq), std::move(obs)},
                                 {}, 1, {type});
  Expr &e = *outs[0]->expr();
  st->created(&e);
  if (st->checkExprs && t.hasValue()) {
    // The expr checker compares the recorded call with this module's own
    // observer and fake-quantiser run on the value (recording nothing).
    Var y(t.value());
    {
      trace::StateGuard off(nullptr);
      trace::ProbeGuard probing;
      for (llvm::StringRef name : {observer, fakeQuant})
        if (auto *l = dynamic_cast<Layer *>(module(name))) {
          CallArgs c;
          c.add(y);
          y = l->forwardValues(c).var();
        }
    }
    st->values[outs[0]] = y.value();
    trace::checkExpr(*st, e);
  } else {
    trace::computeValues(*st, e);
  }
  return Var(outs[0]);
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
