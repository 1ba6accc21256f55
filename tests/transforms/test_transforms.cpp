//===- test_transforms.cpp - attr-to-constant, fold-constant, cse, ... ---===//
#include "Common.h"

using namespace tmg;
using namespace xt;

namespace {

/// Net(x: (64, 4)): t2 = a * 2 + b (constants after attr-to-constant);
/// y = (x + t2) * broadcast_to(t2, (64, 4)); parts = split(t2, 2);
/// return y, concat([parts[1], parts[0]]), sin(a) + x
std::unique_ptr<TracedModule> foldNet() {
  auto m = std::make_unique<Module>("Net");
  m->registerBuffer("a", Tensor::randn({4}, 1));
  m->registerBuffer("b", Tensor::randn({4}, 2));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{64, 4}}});
  Node *a = b.getAttr(b.self(), "a");
  Node *bb = b.getAttr(b.self(), "b");
  Node *t1 = b.callMethod(a, "__mul__", {2});
  Node *t2 = b.callMethod(t1, "__add__", {bb});
  Node *y = b.callMethod(b.arg(0), "__add__", {t2});
  Node *w = b.callFunction("broadcast_to", {t2, Arg::ints({64, 4})});
  y = b.callMethod(y, "__mul__", {w});
  auto parts = b.callFunctionN(op(OpKind::Split), {t2, 2}, {}, 2);
  Node *cat = b.callFunction("concat", {Arg::list({parts[1], parts[0]})});
  b.finish(Arg::tuple({y, cat}));
  return tm;
}

} // namespace

TEST_CASE("attr-to-constant: tensor getattrs become constants, names kept",
          "[transforms][attr-to-constant]") {
  auto m = std::make_unique<Module>("MyModule");
  m->registerBuffer("param", Tensor::randn({3, 4}, 3));
  m->addModule<Linear>("linear", 4, 5);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 4}}});
  Node *linear = b.getAttr(b.self(), "linear");
  Node *param = b.getAttr(b.self(), "param");
  Node *add = b.callMethod(b.arg(0), "__add__", {param});
  b.finish(b.callFunction("relu", {b.callModule(linear, {add})}));
  auto opt = checkDifferential(*tm, "attr-to-constant", {{3, 4}});
  CHECK(opt->graph().str() ==
        "MyModule.Graph (self, x) {\n"
        "\t%2:\tlinear = getattr(self, \"linear\") -> (Linear)\n"
        "\t%7:\tparam = Constant(param) -> (Tensor)\n"
        "\t%4:\tadd_out = x.__add__(param, )\n"
        "\t%5:\tlinear_out = linear(add_out, )\n"
        "\t%6:\trelu_out = nn.relu(linear_out, )\n"
        "\treturn relu_out\n"
        "}");
}

TEST_CASE("fold-constant folds chains, every output of a multi-output op",
          "[transforms][fold-constant]") {
  auto tm = foldNet();
  auto opt = checkDifferential(*tm, "fold-constant", {{64, 4}});
  const InternalGraph &g = opt->graph();
  CHECK(countFn(*opt, OpKind::Split) == 0);
  CHECK(countFn(*opt, OpKind::Concat) == 0);
  CHECK(countFn(*opt, OpKind::BroadcastTo) == 0);
  // Left: x + t2, * w, and the constants t2, w, concat_out.
  CHECK(countMethod(*opt, "__add__") == 1);
  CHECK(countMethod(*opt, "__mul__") == 1);
  size_t constants = 0;
  for (Expr *e : g.body())
    constants += llvm::isa<Constant>(e);
  CHECK(constants == 3);
  CHECK(g.size() == 5);
}

TEST_CASE("fold-constant respects max-bytes", "[transforms][fold-constant]") {
  auto tm = foldNet();
  // broadcast_to gives 64 * 4 * 4 = 1024 bytes: kept, its input folded.
  auto opt = checkDifferential(*tm, "fold-constant{max-bytes=100}", {{64, 4}});
  CHECK(countFn(*opt, OpKind::BroadcastTo) == 1);
  CHECK(countFn(*opt, OpKind::Split) == 0);
  CHECK(countMethod(*opt, "__add__") == 1);
  Expr *bc = opt->graph().getFunctionByType(&op(OpKind::BroadcastTo)).asUnique();
  CHECK(llvm::isa<Constant>(bc->input(0)->expr()));
}

TEST_CASE("fold-constant leaves what the runtime cannot evaluate",
          "[transforms][fold-constant]") {
  auto m = std::make_unique<Module>("Net");
  m->registerBuffer("a", Tensor::randn({4}, 1));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
  Node *a = b.getAttr(b.self(), "a");
  Node *t = b.callMethod(a, "__mul__", {3});
  OpRegistry::instance().registerFunction("test_fold", "no_kernel", {"x"});
  Node *s = b.callFunction("test_fold.no_kernel", {t}); // a function without a kernel
  Node *y = b.callMethod(b.arg(0), "__add__", {t});
  b.finish(Arg::tuple({y, s}));
  auto opt = tm->cloneTraced();
  std::string remarks = run(*opt, "fold-constant");
  CHECK(countMethod(*opt, "__mul__") == 0);
  CHECK(opt->graph().getFunctionByType(&functionOp("test_fold.no_kernel")).asCount() == 1);
  CHECK_THAT(remarks, Catch::Contains("not folded"));
}

TEST_CASE("cse merges duplicates, commutative operands in either order",
          "[transforms][cse]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}, {"y", Shape{2, 3}}});
  Node *x = b.arg(0), *y = b.arg(1);
  Node *a = b.callMethod(x, "__add__", {y});
  Node *a2 = b.callMethod(y, "__add__", {x}); // same as a
  Node *s = b.callMethod(x, "__sub__", {y});
  Node *s2 = b.callMethod(y, "__sub__", {x}); // not the same
  Node *r = b.callFunction("relu", {a});
  Node *r2 = b.callFunction("relu", {a2}); // same after a2 := a
  Node *p1 = b.callMethod(x, "__add__", {1});
  Node *p2 = b.callMethod(x, "__add__", {2}); // different literal
  Node *out = b.callMethod(r, "__mul__", {r2});
  out = b.callMethod(out, "__add__", {b.callMethod(s, "__mul__", {s2})});
  out = b.callMethod(out, "__add__", {b.callMethod(p1, "__mul__", {p2})});
  b.finish(out);
  auto opt = checkDifferential(*tm, "cse", {{2, 3}, {2, 3}});
  CHECK(countFn(*opt, OpKind::Relu) == 1);
  CHECK(countMethod(*opt, "__sub__") == 2);
  // x+y, x+1, x+2, and the three sums of the output.
  CHECK(countMethod(*opt, "__add__") == 5);
}

TEST_CASE("cse merges equal constants and getattrs", "[transforms][cse]") {
  auto m = std::make_unique<Module>("Net");
  m->registerBuffer("a", Tensor::fromFloats({2}, {1.0f, 2.0f}));
  m->registerBuffer("b", Tensor::fromFloats({2}, {1.0f, 2.0f}));
  m->registerBuffer("c", Tensor::fromFloats({2}, {1.0f, 3.0f}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}}});
  Node *x = b.arg(0);
  Node *y = b.callMethod(x, "__add__", {b.getAttr(b.self(), "a")});
  Node *z = b.callMethod(x, "__add__", {b.getAttr(b.self(), "b")});
  Node *w = b.callMethod(x, "__add__", {b.getAttr(b.self(), "c")});
  b.finish(b.callMethod(b.callMethod(y, "__mul__", {z}), "__mul__", {w}));
  auto opt = checkDifferential(*tm, "attr-to-constant,cse", {{2}});
  // a and b are equal constants: one constant, one x + a.
  CHECK(countMethod(*opt, "__add__") == 2);
}

TEST_CASE("fix-input-shape turns GetVarShape of a static shape into a constant",
          "[transforms][fix-input-shape]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 5, 7}}});
  Node *shape = b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0];
  b.finish(Arg::tuple({b.callFunction("relu", {b.arg(0)}), shape}));
  auto opt = checkDifferential(*tm, "fix-input-shape", {{2, 5, 7}}, 0);
  CHECK(opt->graph().str().find("GetVarShape") == std::string::npos);
  Tensor s = eval(*opt, {Tensor::zeros({2, 5, 7})})[1];
  CHECK(s.dtype() == DType::Int32);
  CHECK(s.numel() == 3);
  CHECK(s.at(0) == 2);
  CHECK(s.at(2) == 7);
}

TEST_CASE("prune-attributes removes the tensors nothing reads",
          "[transforms][prune-attributes]") {
  // read: a getattr (kept); shared: a constant's storage after
  // attr-to-constant, through a reshaped view (kept); folded: read only by
  // a subgraph fold-constant replaced (removed); unused (removed); the
  // called Linear's unread attribute (kept: a called module may read any);
  // an uncalled BatchNorm2d (kept: a builtin's attributes are its type's);
  // a plain submodule's unread buffer (removed).
  auto m = std::make_unique<Module>("Net");
  m->registerParameter("read", Tensor::randn({4}, 1));
  m->registerParameter("shared", Tensor::randn({2, 2}, 2));
  m->registerBuffer("folded", Tensor::randn({4}, 3));
  m->registerBuffer("unused", Tensor::randn({4}, 4));
  m->addModule<Linear>("linear", 4, 4)
      .registerBuffer("extra", Tensor::randn({2}, 5));
  m->addModule<BatchNorm2d>("bn", 4);
  m->addModule<Module>("holder", "Holder")
      .registerBuffer("stale", Tensor::randn({3}, 6));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 4}}});
  Node *x = b.callMethod(b.arg(0), "__add__", {b.getAttr(b.self(), "read")});
  Node *sh = b.callFunction("reshape",
                            {b.getAttr(b.self(), "shared"), Arg::ints({4})});
  x = b.callMethod(x, "__mul__", {sh});
  Node *f = b.callMethod(b.getAttr(b.self(), "folded"), "__mul__", {2});
  x = b.callMethod(x, "__sub__", {f});
  b.finish(b.callModule(b.getAttr(b.self(), "linear"), {x}));
  auto opt = checkDifferential(
      *tm, "attr-to-constant,fold-constant,compile,prune-attributes", {{3, 4}});
  CHECK(opt->hasAttr("read"));
  CHECK(opt->hasAttr("shared"));
  CHECK_FALSE(opt->hasAttr("folded"));
  CHECK_FALSE(opt->hasAttr("unused"));
  CHECK(opt->module("linear")->hasAttr("extra"));
  CHECK(opt->module("bn")->hasAttr("running_mean"));
  CHECK_FALSE(opt->module("holder")->hasAttr("stale"));
  checkVerified(*opt);
  // Nothing left to remove.
  size_t attrs = opt->attrs().size();
  run(*opt, "prune-attributes");
  CHECK(opt->attrs().size() == attrs);
}

TEST_CASE("the optimize preset expands in the pipeline text", "[transforms][optimize]") {
  auto p = Pipeline::parse("flatten,optimize,verify", reg());
  REQUIRE(p.succeeded());
  CHECK(p->str() == std::string("flatten,") + optimizePipelineText() + ",verify");
  auto bad = Pipeline::parse("optimise", reg());
  REQUIRE(bad.failed());
  CHECK(bad.diagnostic().str() ==
        "<pipeline>:1:1: error: unknown pass 'optimise'; did you mean 'optimize'?");
}

TEST_CASE("canonicalize: identities, shape chains, neutral arithmetic",
          "[transforms][canonicalize]") {
  auto m = std::make_unique<Module>("Net");
  m->addModule<Identity>("id");
  m->addModule<Dropout>("drop", 0.5);
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 4}}});
  Node *x = b.arg(0);
  Node *i = b.callModule(b.getAttr(b.self(), "id"), {x});
  Node *d = b.callFunction("dropout", {i, 0.5}, {{"training", false}});
  d = b.callModule(b.getAttr(b.self(), "drop"), {d});
  Node *r = b.callFunction("reshape", {d, Arg::ints({6, 4})});
  r = b.callMethod(r, "reshape", {24});
  r = b.callFunction("reshape", {r, Arg::ints({4, 6})});       // => reshape(x, (4, 6))
  Node *t = b.callFunction("transpose", {x, Arg::ints({1, 0, 2})});
  t = b.callFunction("transpose", {t, Arg::ints({1, 0, 2})});  // => x
  Node *u = b.callFunction("transpose", {x, Arg::ints({2, 0, 1})});
  u = b.callFunction("transpose", {u, Arg::ints({2, 0, 1})});  // => transpose(x, (1, 2, 0))
  Node *a = b.callMethod(x, "__add__", {0});
  a = b.callMethod(a, "__mul__", {1.0});                        // => x
  Node *n = b.callFunction("neg", {b.callFunction("neg", {x})}); // => x
  Node *rr = b.callFunction("relu", {b.callFunction("relu", {x})});
  Node *f = b.callFunction("flatten", {b.callFunction("reshape", {x, Arg::ints({6, 4})}), 1});
  Node *k = b.callMethod(x, "__mul__", {2});                    // kept
  b.finish(Arg::tuple({r, t, u, a, n, rr, f, k}));
  auto opt = checkDifferential(*tm, "canonicalize", {{2, 3, 4}}, 0);
  CHECK(opt->graph().getModuleByType(Identity::staticType()).asCount() == 0);
  CHECK(opt->graph().getModuleByType(Dropout::staticType()).asCount() == 0);
  CHECK(countFn(*opt, OpKind::Dropout) == 0);
  CHECK(countFn(*opt, OpKind::Reshape) == 2); // x -> (4, 6), and f's inner one
  CHECK(countMethod(*opt, "reshape") == 0);
  CHECK(countFn(*opt, OpKind::Flatten) == 1);  // start_axis=1: kept
  CHECK(countFn(*opt, OpKind::Transpose) == 1);
  CHECK(countFn(*opt, OpKind::Neg) == 0);
  CHECK(countFn(*opt, OpKind::Relu) == 1);
  CHECK(countMethod(*opt, "__add__") == 0);
  CHECK(countMethod(*opt, "__mul__") == 1);
  const InternalGraph &g = opt->graph();
  // t, a and n are x itself.
  CHECK(g.output(1) == g.input(1));
  CHECK(g.output(3) == g.input(1));
  CHECK(g.output(4) == g.input(1));
  Expr *tr = g.getFunctionByType(&op(OpKind::Transpose)).asUnique();
  CHECK(tr->str().find("(1, 2, 0)") != std::string::npos);
}

TEST_CASE("canonicalize keeps training-mode dropout and int arithmetic",
          "[transforms][canonicalize]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}, DType::Int32}});
  Node *x = b.arg(0);
  Node *a = b.callMethod(x, "__mul__", {1.0}); // int * 1.0 is float: kept
  Node *d = b.callFunction("dropout", {a, 0.5}, {{"training", true}});
  b.finish(d);
  auto opt = tm->cloneTraced();
  run(*opt, "canonicalize");
  CHECK(countFn(*opt, OpKind::Dropout) == 1);
  CHECK(countMethod(*opt, "__mul__") == 1);
}

TEST_CASE("fuse-conv-activation: every activation, module and functional forms",
          "[transforms][fuse-conv-activation]") {
  auto m = std::make_unique<Module>("Net");
  m->addModule<Conv2d>("c1", 3, 8, 3, 1, 1, 1, 1, true, 1);
  m->registerBuffer("w2", Tensor::randn({8, 4, 3, 3}, 2));
  m->registerBuffer("b2", Tensor::randn({8}, 3));
  m->addModule<Conv2d>("c3", 8, 8, 1, 1, 0, 1, 1, false, 4);
  m->addModule<Hardswish>("hs");
  m->registerBuffer("w4", Tensor::randn({6, 8, 3, 3}, 5));
  m->addModule<Linear>("fc", 6 * 4 * 4, 10, true, 6);
  m->addModule<ReLU6>("r6");
  m->registerBuffer("w5", Tensor::randn({7, 10}, 7));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3, 8, 8}}});
  Node *y = b.callFunction("relu", {b.callModule(b.getAttr(b.self(), "c1"), {b.arg(0)})});
  y = b.callFunction("conv2d", {y, b.getAttr(b.self(), "w2"), b.getAttr(b.self(), "b2"), 1, 1,
                                1, 2});
  y = b.callFunction("sigmoid", {y});
  y = b.callModule(b.getAttr(b.self(), "hs"), {b.callModule(b.getAttr(b.self(), "c3"), {y})});
  y = b.callFunction("conv2d", {y, b.getAttr(b.self(), "w4"), Arg::none(), 2, 1});
  y = b.callFunction("silu", {y});
  y = b.callFunction("flatten", {y, 1});
  y = b.callModule(b.getAttr(b.self(), "r6"), {b.callModule(b.getAttr(b.self(), "fc"), {y})});
  y = b.callFunction("hswish", {b.callFunction("linear", {y, b.getAttr(b.self(), "w5")})});
  b.finish(y);
  auto opt = checkDifferential(*tm, "fuse-conv-activation", {{2, 3, 8, 8}});
  CHECK(countFn(*opt, OpKind::Conv2dAct) == 4);
  CHECK(countFn(*opt, OpKind::LinearAct) == 2);
  CHECK(countFn(*opt, OpKind::Conv2d) == 0);
  CHECK(countFn(*opt, OpKind::Relu) + countFn(*opt, OpKind::Sigmoid) +
            countFn(*opt, OpKind::Silu) + countFn(*opt, OpKind::Hswish) ==
        0);
  CHECK(opt->graph().getModuleByType(Conv2d::staticType()).asCount() == 0);
  std::string text = opt->graph().str();
  CHECK(text.find("getattr(self, \"c1.weight\")") != std::string::npos);
  CHECK(text.find("hardswish, )") != std::string::npos);
  INFO(text);
  // Every conv argument kept: the grouped conv still has groups=2, stride 1, padding 1.
  CHECK(text.find(", 1, 1, 1, 2, cross_correlation, default, sigmoid, )") != std::string::npos);
}

TEST_CASE("fuse-conv-activation leaves shared conv outputs and padded modes",
          "[transforms][fuse-conv-activation]") {
  auto m = std::make_unique<Module>("Net");
  m->addModule<Conv2d>("c1", 3, 4, 3, 1, 1, 1, 1, true, 1);
  m->addModule<Conv2d>("c2", 3, 4, 3, 1, 1, 1, 1, true, 2);
  m->module("c2")->setValue("padding_mode", Scalar("reflect"));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 5, 5}}});
  Node *c = b.callModule(b.getAttr(b.self(), "c1"), {b.arg(0)});
  Node *r = b.callFunction("relu", {c});
  Node *c2 = b.callModule(b.getAttr(b.self(), "c2"), {b.arg(0)});
  Node *r2 = b.callFunction("relu", {c2});
  b.finish(Arg::tuple({b.callMethod(r, "__add__", {c}), r2}));
  auto opt = tm->cloneTraced();
  run(*opt, "fuse-conv-activation");
  CHECK(countFn(*opt, OpKind::Conv2dAct) == 0);
  CHECK(countFn(*opt, OpKind::Relu) == 2);
}

TEST_CASE(
    "fuse-attention: the scale on the query or the scores, every form of key^T",
    "[transforms][fuse-attention]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  // q, v (2, 10, 8); kr (10, 2, 8), the heads' layout of a fused
  // projection before its transpose.
  GraphBuilder b = GraphBuilder::top(*tm, {{"q", Shape{2, 10, 8}},
                                           {"kr", Shape{10, 2, 8}},
                                           {"v", Shape{2, 10, 8}}});
  Node *q = b.arg(0), *kr = b.arg(1), *v = b.arg(2);
  Node *k = b.callFunction("transpose", {kr, Arg::ints({1, 0, 2})});
  auto attend = [&](Node *scores, int64_t axis) {
    return b.callFunction("matmul",
                          {b.callFunction("softmax", {scores, axis}), v});
  };
  // PyTorch's export (ViT): the query scaled, key^T a transpose of kr.
  Node *y1 = attend(
      b.callFunction("matmul",
                     {b.callMethod(q, "__mul__", {0.125}),
                      b.callFunction("transpose", {kr, Arg::ints({1, 2, 0})})}),
      -1);
  // transpose_b, the scores divided, softmax's axis as rank - 1.
  Node *s2 = b.callFunction("matmul", {q, k, false, true});
  Node *y2 = attend(b.callMethod(s2, "__truediv__", {4.0}), 2);
  // `@` with key^T a plain transpose of k (k is used as it is), scores scaled.
  Node *s3 =
      b.callMethod(q, "__matmul__",
                   {b.callFunction("transpose", {k, Arg::ints({0, 2, 1})})});
  Node *y3 = attend(b.callMethod(s3, "__mul__", {0.5}), -1);
  // key^T not a transpose: the pass transposes it.
  Node *kt = b.callMethod(
      b.callFunction("transpose", {k, Arg::ints({0, 2, 1})}), "__add__", {1.0});
  Node *y4 = attend(b.callFunction("matmul", {q, kt}), -1);
  b.finish(Arg::tuple({y1, y2, y3, y4}));
  auto opt = checkDifferential(*tm, "fuse-attention",
                               {{2, 10, 8}, {10, 2, 8}, {2, 10, 8}});
  CHECK(countFn(*opt, OpKind::ScaledDotProductAttention) == 4);
  CHECK(countFn(*opt, OpKind::Softmax) == 0);
  CHECK(countFn(*opt, OpKind::Matmul) == 0);
  std::string text = opt->graph().str();
  INFO(text);
  CHECK(text.find("nn.scaled_dot_product_attention(q, ") != std::string::npos);
  CHECK(text.find(", 0.125, )") != std::string::npos);
  CHECK(text.find(", 0.25, )") != std::string::npos);
  CHECK(text.find(", 0.5, )") != std::string::npos);
}

TEST_CASE("fuse-attention leaves shared scores, other softmax axes and "
          "transposed queries",
          "[transforms][fuse-attention]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b =
      GraphBuilder::top(*tm, {{"q", Shape{2, 6, 4}}, {"k", Shape{2, 6, 4}}});
  Node *q = b.arg(0), *k = b.arg(1);
  Node *s1 = b.callFunction("matmul", {q, k, false, true});
  Node *y1 = b.callFunction("matmul", {b.callFunction("softmax", {s1, -1}), k});
  Node *s2 = b.callFunction("matmul", {q, k, false, true});
  Node *y2 = b.callFunction("matmul", {b.callFunction("softmax", {s2, 1}), k});
  Node *s3 = b.callFunction("matmul", {q, k, true, false});
  Node *y3 = b.callFunction(
      "matmul", {b.callFunction("softmax", {s3, -1}),
                 b.callFunction("transpose", {k, Arg::ints({0, 2, 1})})});
  b.finish(Arg::tuple({y1, s1, y2, y3}));
  auto opt = tm->cloneTraced();
  run(*opt, "fuse-attention");
  CHECK(countFn(*opt, OpKind::ScaledDotProductAttention) == 0);
  CHECK(countFn(*opt, OpKind::Softmax) == 3);
}

TEST_CASE("fuse-add-mul folds constant chains", "[transforms][fuse-add-mul]") {
  auto m = std::make_unique<Module>("Net");
  m->registerBuffer("c", Tensor::fromFloats({1}, {1.5f}));
  auto tm = TracedModule::fromModule(std::move(m));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2, 3}}});
  Node *x = b.arg(0);
  Node *a = b.callMethod(b.callMethod(b.callMethod(x, "__add__", {1}), "__add__", {2}), "__add__",
                         {b.getAttr(b.self(), "c")});            // x + 4.5 (tensor)
  Node *m1 = b.callMethod(b.callMethod(x, "__mul__", {2}), "__mul__", {0.5}); // x
  Node *n = b.callMethod(b.callFunction("neg", {x}), "__mul__", {3});        // x * -3
  Node *shared = b.callMethod(x, "__add__", {1});
  Node *s = b.callMethod(shared, "__add__", {1}); // shared has two uses: kept
  b.finish(Arg::tuple({a, m1, n, s, shared}));
  auto opt = checkDifferential(*tm, "fuse-add-mul", {{2, 3}}, 1e-5);
  const InternalGraph &g = opt->graph();
  CHECK(g.output(1) == g.input(1));
  CHECK(countFn(*opt, OpKind::Neg) == 0);
  CHECK(countMethod(*opt, "__mul__") == 1);
  CHECK(countMethod(*opt, "__add__") == 3);
  CHECK(g.output(0)->expr()->input(0) == g.input(1));
}
