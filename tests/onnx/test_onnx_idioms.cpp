//===- test_onnx_idioms.cpp - PyTorch-exported models through -p optimize -===//
//
// tests/onnx/idioms/NAME.onnx are tiny PyTorch models exported by
// torch.onnx.export (scripts/make-idiom-models.py), with PyTorch's input and
// output (NAME_x.npy, NAME_y.npy). After the optimize preset no Clip, Erf or
// mean reduction is left, every conv or linear followed by an activation is
// one fused op, and the outputs still match PyTorch's and the unoptimised
// model's.
//
//===----------------------------------------------------------------------===//
#include <cmath>
#include <set>

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>

#include "../TestPasses.h"
#include "tm/io/Npy.h"
#include "tm/io/Onnx.h"
#include "tm/io/Safetensors.h"
#include "tm/ir/IR.h"
#include "tm/passes/PassManager.h"
#include "tm/runtime/Interpreter.h"
#include "tm/transforms/Transforms.h"

using namespace tmg;

namespace {

const std::string Dir = TM_IDIOMS_DIR "/";

size_t count(const TracedModule &m, OpKind k) {
  return m.graph().getFunctionByType(&op(k)).asCount();
}

/// Activations fuse-conv-activation folds into a producing conv or linear.
bool isActivation(const Expr *e) {
  const OpSchema *s = e->opSchema();
  if (!s || !llvm::isa<CallFunction>(e))
    return false;
  switch (s->kind()) {
  case OpKind::Relu: case OpKind::Relu6: case OpKind::Sigmoid: case OpKind::Silu:
  case OpKind::Hswish: case OpKind::Hsigmoid: case OpKind::HardSigmoid: case OpKind::Gelu:
  case OpKind::GeluTanh: case OpKind::Clip:
    return true;
  default:
    return false;
  }
}

/// conv2d / linear calls whose only user is an activation.
size_t unfusedConvActivations(const TracedModule &m) {
  size_t n = 0;
  for (Expr *e : m.graph().body()) {
    const OpSchema *s = e->opSchema();
    if (!s || (s->kind() != OpKind::Conv2d && s->kind() != OpKind::Linear) ||
        e->output(0)->numUsers() != 1)
      continue;
    n += isActivation((*e->output(0)->users().begin()));
  }
  return n;
}

/// max |a - b| - rtol |b|.
double excess(const Tensor &a, const Tensor &b, double rtol) {
  REQUIRE(a.shape() == b.shape());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(a.at(i) - b.at(i)) - rtol * std::abs(b.at(i)));
  return m;
}

struct Expected {
  const char *name;
  size_t convAct, linearAct;
};

} // namespace

TEST_CASE("PyTorch-exported idioms are gone after -p optimize", "[onnx][idioms]") {
  registerTransformPasses(test::testPasses());
  for (Expected want : {Expected{"conv_bn_relu6", 3, 0},
                        Expected{"inverted_residual_hardswish", 4, 0},
                        Expected{"silu_block", 4, 0}, Expected{"encoder_layer_gelu", 0, 1},
                        Expected{"gelu_forms", 0, 0}}) {
    std::string name = want.name;
    INFO(name);
    auto imported = io::importOnnx(Dir + name + ".onnx");
    REQUIRE(imported.succeeded());
    TracedModule &before = *imported->module;
    auto after = before.cloneTraced();
    auto p = Pipeline::parse("optimize", test::testPasses());
    REQUIRE(p.succeeded());
    PipelineOptions o;
    o.verifyEach = true;
    o.output = [](const std::string &) {};
    PassManager pm(std::move(*p), o);
    auto r = pm.run(*after);
    if (r.failed())
      FAIL(r.diagnostic().str());
    INFO(after->graph().str());
    CHECK(count(*after, OpKind::Clip) == 0);
    CHECK(count(*after, OpKind::Erf) == 0);
    CHECK(count(*after, OpKind::Tanh) == 0);
    CHECK(count(*after, OpKind::Mean) == 0);
    CHECK(count(*after, OpKind::Matmul) == 0);
    CHECK(count(*after, OpKind::Softmax) == 0);
    CHECK(count(*after, OpKind::ScaledDotProductAttention) ==
          (name == "encoder_layer_gelu" ? 1 : 0));
    CHECK(unfusedConvActivations(*after) == 0);
    CHECK(count(*after, OpKind::Conv2dAct) == want.convAct);
    CHECK(count(*after, OpKind::LinearAct) == want.linearAct);

    auto x = readNpy(Dir + name + "_x.npy"), y = readNpy(Dir + name + "_y.npy");
    REQUIRE(x.succeeded());
    REQUIRE(y.succeeded());
    std::vector<Tensor> in = {*x};
    Tensor got = rt::Interpreter(*after).run(in).outputs.at(0);
    Tensor ref = rt::Interpreter(before).run(in).outputs.at(0);
    CHECK(excess(got, ref, 1e-5) <= 1e-6);   // the passes keep the numerics
    CHECK(excess(got, *y, 1e-4) <= 1e-5);    // and PyTorch's result
  }
}

TEST_CASE("after -p optimize the ONNX model keeps its names and information", "[onnx][idioms]") {
  // A drop-in replacement: same input and output names, weights no pass
  // changed as initializers under their original names (never Constant
  // nodes), the names of the ONNX nodes that survive, producer and graph
  // name.
  registerTransformPasses(test::testPasses());
  std::string path = Dir + "inverted_residual_hardswish.onnx";
  auto bytes = readFileBytes(path);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto orig;
  REQUIRE(orig.ParseFromString(*bytes));
  auto imported = io::importOnnx(path);
  REQUIRE(imported.succeeded());
  TracedModule &m = *imported->module;
  auto p = Pipeline::parse("optimize", test::testPasses());
  REQUIRE(p.succeeded());
  PipelineOptions o;
  o.output = [](const std::string &) {};
  PassManager pm(std::move(*p), o);
  REQUIRE(succeeded(pm.run(m)));
  auto out = io::exportOnnxBytes(m);
  INFO((out.failed() ? out.diagnostic().str() : ""));
  REQUIRE(out.succeeded());
  onnx::ModelProto res;
  REQUIRE(res.ParseFromString(*out));

  CHECK(res.producer_name() == orig.producer_name());
  CHECK(res.graph().name() == orig.graph().name());
  REQUIRE(res.graph().input_size() == 1);
  CHECK(res.graph().input(0).name() == orig.graph().input(0).name());
  REQUIRE(res.graph().output_size() == 1);
  CHECK(res.graph().output(0).name() == orig.graph().output(0).name());

  std::set<std::string> origInits, origNodes;
  for (const auto &i : orig.graph().initializer())
    origInits.insert(i.name());
  for (const auto &n : orig.graph().node())
    origNodes.insert(n.name());
  std::set<std::string> resInits;
  for (const auto &i : res.graph().initializer())
    resInits.insert(i.name());
  size_t keptNodes = 0;
  for (const auto &n : res.graph().node()) {
    CHECK(n.op_type() != "Constant");
    keptNodes += origNodes.count(n.name());
    // The convs' weights are untouched by optimize (the model has no batch
    // norm left to fold): same names, same bytes.
    if (n.op_type() == "Conv") {
      INFO(n.name() << " reads " << n.input(1));
      CHECK(origInits.count(n.input(1)) == 1);
    }
  }
  // Most nodes were fused into new ones; those that survive keep names.
  CHECK(keptNodes >= 2);
  // Without passes, every node keeps its name.
  auto again = io::importOnnx(path);
  REQUIRE(again.succeeded());
  auto rt = io::exportOnnxBytes(*again->module);
  REQUIRE(rt.succeeded());
  onnx::ModelProto plain;
  REQUIRE(plain.ParseFromString(*rt));
  std::set<std::string> plainNodes;
  for (const auto &n : plain.graph().node())
    plainNodes.insert(n.name());
  for (const std::string &n : origNodes)
    CHECK(plainNodes.count(n) == 1);
  for (const auto &i : orig.graph().initializer())
    if (resInits.count(i.name()))
      for (const auto &j : res.graph().initializer())
        if (j.name() == i.name()) {
          INFO(i.name());
          CHECK(std::vector<int64_t>(i.dims().begin(), i.dims().end()) ==
                std::vector<int64_t>(j.dims().begin(), j.dims().end()));
          CHECK(i.raw_data() == j.raw_data());
        }
}
