//===- Quant.h - Quantisation-aware modules ---------------------*- C++ -*-===//
//
// Observers and fake quantisation for quantisation-aware (QAT) Layers, with
// the reference's tracing rules:
//  * MinMaxObserver and FakeQuantize (tmgraph's, the reference's
//    `traced_module.fake_quant.FakeQuantize`) are builtin: one CallMethod.
//  * A QATLayer whose act/weight observer or fake-quantiser is not of a
//    builtin class (e.g. a user subclass) gets, when it is traced, a
//    FakeQuantize with the same dtype and quantisation parameters in place
//    of both, on the user's module too (the reference's `_check_qat_module`).
//  * Observer + fake-quantiser of one tensor is one CallFunction,
//    `module._apply_fakequant_with_observer(self, t, fake_quant, observer)`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>

#include "tm/ir/OpSchema.h"
#include "tm/trace/Layer.h"

namespace tmg {

/// Scale and zero point of a quantised dtype.
struct QParams {
  double scale = 1.0;
  int64_t zeroPoint = 0;
};

/// Something that knows its quantisation parameters.
class QuantSource {
public:
  virtual ~QuantSource() = default;
  virtual QParams qparams() const = 0;
  /// "qint8" (-128..127), "quint8" (0..255), "qint4", "quint4".
  virtual std::string qdtype() const = 0;
};

/// qmin and qmax of a quantised dtype (throws tmg::Error when unknown).
std::pair<int64_t, int64_t> qrange(llvm::StringRef qdtype);

/// MegEngine's MinMaxObserver: passes its input through and, when run
/// eagerly (not while tracing or probing), records the running min and max
/// (buffers `min_val`, `max_val`). qparams: symmetric for signed dtypes,
/// asymmetric for unsigned ones.
class MinMaxObserver : public LayerOf<MinMaxObserver>, public QuantSource {
public:
  explicit MinMaxObserver(std::string qdtype = "qint8");
  Var forward(Var x);
  QParams qparams() const override;
  std::string qdtype() const override { return scalar("dtype").getString(); }
};

/// Fake quantisation with fixed parameters (values `scale`, `zero_point`,
/// `qmin`, `qmax`, `dtype`): `nn.fake_quant` of the input.
class FakeQuantize : public LayerOf<FakeQuantize>, public QuantSource {
public:
  explicit FakeQuantize(std::string qdtype = "qint8", QParams q = {});
  Var forward(Var x);
  void setQParams(QParams q);
  QParams qparams() const override;
  std::string qdtype() const override { return scalar("dtype").getString(); }
};

/// The function the reference records for its QAT helper,
/// `QATModule._apply_fakequant_with_observer(self, target, fake_quant,
/// observer)`, printed `module._apply_fakequant_with_observer` (the last part
/// of `megengine.module.qat.module`). The interpreter runs it: the observer
/// passes its input through, then the fake-quantiser (a FakeQuantize)
/// quantises with its own parameters.
const OpSchema &fakeQuantWithObserverFunction();

/// Base of QAT modules: optional submodules `act_observer`,
/// `act_fake_quant`, `weight_observer`, `weight_fake_quant`.
class QATLayer : public Layer {
public:
  QATLayer(std::string typeName, std::vector<std::string> forwardParams, bool withWeight,
           bool withAct);
  bool withWeight() const { return boolValue("with_weight"); }
  bool withAct() const { return boolValue("with_act"); }
  /// The reference's `apply_quant_activation` / `apply_quant_weight`:
  /// applyFakeQuantWithObserver with `act_fake_quant`, `act_observer` /
  /// `weight_fake_quant`, `weight_observer`.
  Var applyAct(Var x);
  Var applyWeight(Var w);
  /// `_apply_fakequant_with_observer(self, t, fake_quant, observer)` with
  /// the submodules of those names (either may be absent). Eagerly: the
  /// observer (recording statistics), then the fake-quantiser. While
  /// tracing: one CallFunction of fakeQuantWithObserverFunction() with the
  /// module arguments as the reference records them: `self`, the GetAttrs of
  /// the fake-quantiser and the observer (in that order), `None` for an
  /// absent one.
  Var applyFakeQuantWithObserver(Var t, llvm::StringRef fakeQuant, llvm::StringRef observer);
};

/// The reference's `_check_qat_module` (the tracer calls it on each
/// QATLayer it meets). Returns true when something was replaced.
bool checkQATModule(QATLayer &m);

} // namespace tmg
