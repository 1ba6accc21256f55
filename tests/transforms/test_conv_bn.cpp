//===- test_conv_bn.cpp - MegEngine's test_passes.py, in C++ -------------===//
//
// The fixture of test_passes.py: MyBlock(conv_cls, bn_cls) with two
// conv -> bn -> relu branches scaled by scale[0] / scale[1], summed, `+ 4`,
// `scale[0] +`, relu, `* 3`; MyModule = block_0(x) + block_1(x), reshape
// to (-1), `* 3`. Built with the GraphBuilder as the tracer records it, for
// builtin and non-builtin (traced, hence functional after flatten) conv and
// batch-norm classes, then flattened.
//
//===----------------------------------------------------------------------===//
#include "Common.h"

using namespace tmg;
using namespace xt;

namespace {

Tensor positive(Shape s, uint64_t seed) {
  Tensor t = Tensor::randn(s, seed);
  float *p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i)
    p[i] = 0.5f + std::abs(p[i]);
  return t;
}

/// A batch norm with non-trivial statistics (builtin) or its traced
/// subclass `mybn` (a plain module whose forward calls F.batch_norm).
std::unique_ptr<Module> makeBn(bool builtin, uint64_t seed) {
  std::unique_ptr<Module> m;
  if (builtin)
    m = std::make_unique<BatchNorm2d>(3);
  else
    m = std::make_unique<Module>("mybn");
  m->registerParameter("weight", positive({3}, seed));
  m->registerParameter("bias", Tensor::randn({3}, seed + 1));
  m->registerBuffer("running_mean", Tensor::randn({3}, seed + 2));
  m->registerBuffer("running_var", positive({3}, seed + 3));
  return m;
}

std::unique_ptr<Module> makeConv(bool builtin, uint64_t seed) {
  if (builtin) {
    auto c = std::make_unique<Conv2d>(3, 3, 1, 1, 0, 1, 1, true, seed);
    c->registerParameter("bias", Tensor::randn({3}, seed + 7));
    return c;
  }
  auto m = std::make_unique<Module>("myconv");
  m->registerParameter("weight", Tensor::randn({3, 3, 1, 1}, seed));
  m->registerParameter("bias", Tensor::randn({3}, seed + 7));
  return m;
}

// myconv.forward(x) = F.conv2d(x, self.weight, self.bias, 1, 0, 1, 1)
void myconvBody(GraphBuilder &b) {
  Node *w = b.getAttr(b.self(), "weight");
  Node *bias = b.getAttr(b.self(), "bias");
  b.setOutputs(b.callFunction("conv2d", {b.arg(0), w, bias, 1, 0, 1, 1}));
}

// mybn.forward(x) = F.batch_norm(x, running_mean, running_var, weight, bias,
//                                training=False, eps=1e-5)
void mybnBody(GraphBuilder &b) {
  Node *rm = b.getAttr(b.self(), "running_mean");
  Node *rv = b.getAttr(b.self(), "running_var");
  Node *w = b.getAttr(b.self(), "weight");
  Node *bias = b.getAttr(b.self(), "bias");
  b.setOutputs(b.callFunction("batch_norm", {b.arg(0), rm, rv, w, bias},
                              {{"training", false}, {"eps", 1e-5}}));
}

struct Classes {
  bool builtinConv, builtinBn;
};

std::unique_ptr<Module> makeBlock(Classes c, uint64_t seed) {
  auto m = std::make_unique<Module>("MyBlock");
  m->registerModule("conv", makeConv(c.builtinConv, seed));
  m->registerModule("conv2", makeConv(c.builtinConv, seed + 10));
  m->registerModule("bn", makeBn(c.builtinBn, seed + 20));
  m->registerModule("bn2", makeBn(c.builtinBn, seed + 30));
  m->registerBuffer("scale", Tensor::fromFloats({2}, {3.0f, 4.0f}));
  return m;
}

GraphBuilder::BodyFn blockBody(Classes c) {
  return [c](GraphBuilder &b) {
    auto call = [&](const char *attr, bool builtin, GraphBuilder::BodyFn body, Node *x) {
      Node *mod = b.getAttr(b.self(), attr);
      return builtin ? b.callModule(mod, {x}) : b.callModule(mod, {x}, {}, body, {"x"});
    };
    Node *x = b.arg(0);
    Node *scale = b.getAttr(b.self(), "scale");
    Node *s0 = b.callMethod(scale, "__getitem__", {0});
    Node *x1 = b.callFunction(
        "relu", {call("bn", c.builtinBn, mybnBody, call("conv", c.builtinConv, myconvBody, x))});
    x1 = b.callMethod(x1, "__mul__", {s0});
    Node *scale2 = b.getAttr(b.self(), "scale");
    Node *s1 = b.callMethod(scale2, "__getitem__", {1});
    Node *x2 = b.callFunction(
        "relu",
        {call("bn2", c.builtinBn, mybnBody, call("conv2", c.builtinConv, myconvBody, x))});
    x2 = b.callMethod(x2, "__mul__", {s1});
    Node *y = b.callMethod(x1, "__add__", {x2});
    y = b.callFunction("add", {y, 4});
    Node *scale3 = b.getAttr(b.self(), "scale");
    Node *s2 = b.callMethod(scale3, "__getitem__", {0});
    y = b.callMethod(s2, "__add__", {y});
    y = b.callFunction("relu", {y});
    y = b.callMethod(y, "__mul__", {3});
    b.setOutputs(y);
  };
}

std::unique_ptr<TracedModule> flatMyModule(Classes c) {
  auto m = std::make_unique<Module>("MyModule");
  m->registerModule("block_0", makeBlock(c, 100));
  m->registerModule("block_1", makeBlock(c, 200));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 32, 32}}});
  Node *b0 = b.getAttr(b.self(), "block_0");
  Node *y0 = b.callModule(b0, {b.arg(0)}, {}, blockBody(c), {"x"});
  Node *b1 = b.getAttr(b.self(), "block_1");
  Node *y1 = b.callModule(b1, {b.arg(0)}, {}, blockBody(c), {"x"});
  Node *y = b.callMethod(y0, "__add__", {y1});
  y = b.callFunction("reshape", {y, -1});
  y = b.callMethod(y, "__mul__", {3});
  b.finish(y);
  return tm->flatten();
}

size_t batchNorms(const TracedModule &m) {
  return countFn(m, OpKind::BatchNorm) +
         m.graph().getModuleByType(BatchNorm2d::staticType()).asCount();
}

const Classes AllClasses[] = {{true, true}, {true, false}, {false, true}, {false, false}};

std::string name(Classes c) {
  return std::string(c.builtinConv ? "Conv2d" : "myconv") + "+" +
         (c.builtinBn ? "BatchNorm2d" : "mybn");
}

} // namespace

TEST_CASE("test_fuse_bn: no batch norm remains, outputs equal", "[transforms][fuse-conv-bn]") {
  for (Classes c : AllClasses) {
    SECTION(name(c)) {
      auto flat = flatMyModule(c);
      checkVerified(*flat);
      REQUIRE(batchNorms(*flat) == 4);
      auto opt = checkDifferential(*flat, "fuse-conv-bn", {{1, 3, 32, 32}});
      CHECK(batchNorms(*opt) == 0);
      // Every conv survives, functional or module.
      CHECK(countFn(*opt, OpKind::Conv2d) +
                opt->graph().getModuleByType(Conv2d::staticType()).asCount() ==
            4);
    }
  }
}

TEST_CASE("optimize preset on the test_passes fixture", "[transforms][optimize]") {
  for (Classes c : AllClasses) {
    SECTION(name(c)) {
      auto flat = flatMyModule(c);
      auto opt = checkDifferential(*flat, "optimize", {{1, 3, 32, 32}});
      CHECK(batchNorms(*opt) == 0);
      CHECK(opt->graph().size() < flat->graph().size());
    }
  }
}

TEST_CASE("fuse-conv-bn refuses a training-mode batch norm", "[transforms][fuse-conv-bn]") {
  auto flat = flatMyModule({true, true});
  // Mark one batch norm as training (the module's `training` value).
  flat->resolveModule("block_0.bn")->setValue("training", Scalar(true));
  auto opt = flat->cloneTraced();
  std::string remarks = run(*opt, "fuse-conv-bn");
  CHECK(batchNorms(*opt) == 1);
  CHECK_THAT(remarks, Catch::Contains("training mode"));
}

TEST_CASE("fuse-conv-bn copies a conv module called more than once",
          "[transforms][fuse-conv-bn]") {
  // y = bn(conv(x)) + conv(x): the folded conv is a copy `conv_fused`; the
  // second call keeps the original weights.
  auto m = std::make_unique<Module>("Net");
  m->registerModule("conv", makeConv(true, 5));
  m->registerModule("bn", makeBn(true, 6));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 8, 8}}});
  Node *conv = b.getAttr(b.self(), "conv");
  Node *c1 = b.callModule(conv, {b.arg(0)});
  Node *bn = b.getAttr(b.self(), "bn");
  Node *y = b.callModule(bn, {c1});
  Node *conv2 = b.getAttr(b.self(), "conv");
  Node *c2 = b.callModule(conv2, {b.arg(0)});
  b.finish(b.callMethod(y, "__add__", {c2}));
  Tensor w = *tm->resolveTensor("conv.weight");
  auto opt = checkDifferential(*tm, "fuse-conv-bn", {{2, 3, 8, 8}});
  CHECK(batchNorms(*opt) == 0);
  REQUIRE(opt->resolveModule("conv_fused"));
  CHECK(opt->resolveTensor("conv.weight")->bitwiseEqual(w));
  CHECK(!opt->resolveTensor("conv_fused.weight")->bitwiseEqual(w));
  CHECK(opt->graph().str().find("getattr(self, \"conv_fused\")") != std::string::npos);
}

TEST_CASE("fuse-conv-bn keeps every conv attribute and gives a bias",
          "[transforms][fuse-conv-bn]") {
  // A strided, dilated, grouped, padded conv without bias.
  auto m = std::make_unique<Module>("Net");
  m->addModule<Conv2d>("conv", 4, 6, 3, 2, 2, 2, 2, false, 9);
  m->registerModule("bn", std::make_unique<BatchNorm2d>(6));
  auto *bnm = m->module("bn");
  bnm->registerBuffer("running_mean", Tensor::randn({6}, 1));
  bnm->registerBuffer("running_var", positive({6}, 2));
  bnm->registerParameter("weight", Tensor::randn({6}, 3));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 4, 11, 13}}});
  Node *conv = b.getAttr(b.self(), "conv");
  Node *bn = b.getAttr(b.self(), "bn");
  b.finish(b.callModule(bn, {b.callModule(conv, {b.arg(0)})}));
  std::vector<std::pair<std::string, TreeDef>> before;
  for (const ModuleAttr &a : tm->module("conv")->attrs())
    if (a.kind == ModuleAttr::Kind::Value)
      before.emplace_back(a.name, a.value);
  auto opt = checkDifferential(*tm, "fuse-conv-bn", {{1, 4, 11, 13}});
  CHECK(batchNorms(*opt) == 0);
  Module *c = opt->module("conv");
  for (const auto &[n, v] : before) {
    INFO(n);
    REQUIRE(c->value(n));
    CHECK(*c->value(n) == v);
  }
  REQUIRE(c->tensor("bias"));
  CHECK(c->tensor("bias")->numel() == 6);
}

TEST_CASE("fuse-conv-bn refuses a conv used elsewhere and builtin subclasses",
          "[transforms][fuse-conv-bn]") {
  auto m = std::make_unique<Module>("Net");
  m->registerModule("conv", makeConv(true, 5));
  m->registerModule("bn", makeBn(true, 6));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 4, 4}}});
  Node *conv = b.getAttr(b.self(), "conv");
  Node *c1 = b.callModule(conv, {b.arg(0)});
  Node *bn = b.getAttr(b.self(), "bn");
  Node *y = b.callModule(bn, {c1});
  b.finish(b.callMethod(y, "__add__", {c1})); // conv output used twice
  auto opt = tm->cloneTraced();
  std::string remarks = run(*opt, "fuse-conv-bn");
  CHECK(batchNorms(*opt) == 1);
  CHECK_THAT(remarks, Catch::Contains("other uses"));
}

TEST_CASE("test_backward_fold_scale: no __mul__ remains, outputs equal",
          "[transforms][backward-fold-scale]") {
  for (Classes c : AllClasses) {
    SECTION(name(c)) {
      auto flat = flatMyModule(c);
      REQUIRE(countMethod(*flat, "__mul__") == 7);
      // As the reference's optimize(): FuseConvBn is forced before it.
      auto opt = checkDifferential(*flat, "fuse-conv-bn,backward-fold-scale", {{1, 3, 32, 32}});
      CHECK(countMethod(*opt, "__mul__") == 0);
      CHECK(countFn(*opt, OpKind::Mul) == 0);
      CHECK(batchNorms(*opt) == 0);
    }
  }
}

TEST_CASE("backward-fold-scale: conv without bias, DAGs, negative scales",
          "[transforms][backward-fold-scale]") {
  // y = relu(conv_nobias(x)) * 2 ; z = relu(F.conv2d(x, w)) * -3 ;
  // shared = F.conv2d(x, w2) used by two muls (a DAG: must not loop).
  auto m = std::make_unique<Module>("Net");
  m->addModule<Conv2d>("conv", 3, 4, 3, 1, 1, 1, 1, false, 1);
  m->registerBuffer("w", Tensor::randn({4, 3, 1, 1}, 2));
  m->registerBuffer("w2", Tensor::randn({4, 3, 1, 1}, 3));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 6, 6}}});
  Node *x = b.arg(0);
  Node *y = b.callMethod(
      b.callFunction("relu", {b.callModule(b.getAttr(b.self(), "conv"), {x})}), "__mul__", {2});
  Node *z = b.callMethod(
      b.callFunction("relu", {b.callFunction("conv2d", {x, b.getAttr(b.self(), "w")})}),
      "__mul__", {-3});
  Node *s = b.callFunction("conv2d", {x, b.getAttr(b.self(), "w2")});
  Node *s1 = b.callMethod(s, "__mul__", {5});
  Node *s2 = b.callMethod(s, "__mul__", {7});
  b.finish(Arg::tuple({y, z, b.callMethod(s1, "__add__", {s2})}));
  auto opt = checkDifferential(*tm, "backward-fold-scale", {{1, 3, 6, 6}});
  // y's scale went into the conv (no bias needed); z's negative scale cannot
  // cross the relu; the shared conv output keeps both muls.
  CHECK(countMethod(*opt, "__mul__") == 3);
  CHECK(!opt->module("conv")->tensor("bias"));
}

TEST_CASE("norm-elemwise: every spelling becomes x + c or x * c",
          "[transforms][norm-elemwise]") {
  auto m = std::make_unique<Module>("Net");
  m->registerBuffer("c", Tensor::fromFloats({1}, {4.0f}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}});
  Node *x = b.arg(0), *y = b.arg(1);
  Node *c = b.getAttr(b.self(), "c");
  std::vector<Node *> outs = {
      b.callFunction("add", {x, 4}),         b.callMethod(c, "__add__", {x}),
      b.callMethod(x, "__radd__", {2}),      b.callFunction("sub", {x, c}),
      b.callMethod(x, "__rsub__", {3}),      b.callMethod(x, "__sub__", {y}),
      b.callFunction("div", {x, 2}),         b.callMethod(x, "__rtruediv__", {c}),
      b.callMethod(x, "__truediv__", {y}),   b.callFunction("mul", {c, y}),
  };
  std::vector<Arg> args(outs.begin(), outs.end());
  b.finish(Arg::tuple(args));
  auto opt = checkDifferential(*tm, "norm-elemwise", {{2, 3}, {2, 3}}, 1e-5);
  for (Expr *e : opt->graph().body()) {

    if (auto *cm = llvm::dyn_cast<CallMethod>(e))
      if (!cm->isModuleCall()) {
        INFO(e->str());
        CHECK((cm->method() == "__add__" || cm->method() == "__mul__"));
        CHECK(!llvm::isa<Constant>(e->input(0)->expr()));
      }
    CHECK(!isCallFunction(e, &op(OpKind::Add)));
    CHECK(!isCallFunction(e, &op(OpKind::Sub)));
    CHECK(!isCallFunction(e, &op(OpKind::Div)));
    CHECK(!isCallFunction(e, &op(OpKind::Mul)));
  }
}
