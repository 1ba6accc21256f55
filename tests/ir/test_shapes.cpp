//===- test_shapes.cpp - Type inference of ops and builtin modules -------===//
#include "Fixtures.h"

using namespace tmg;

namespace {
struct G {
  std::unique_ptr<TracedModule> tm;
  std::unique_ptr<GraphBuilder> b;
  explicit G(std::vector<InputSpec> ins, std::unique_ptr<Module> m = nullptr) {
    tm = TracedModule::fromModule(m ? std::move(m) : std::make_unique<Module>("Net"));
    b = std::make_unique<GraphBuilder>(GraphBuilder::top(*tm, std::move(ins)));
  }
  static std::string type(Node *n) {
    auto *t = llvm::cast<TensorNode>(n);
    std::string s = t->hasDType() ? dtypeName(t->dtype()).str() : "?";
    return s + (t->shape() ? shapeStr(*t->shape()) : "?");
  }
};
} // namespace

TEST_CASE("elementwise ops broadcast and promote", "[ir][shapes]") {
  G g({{"a", Shape{2, 1, 4}}, {"b", Shape{3, 1}}, {"i", Shape{3}, DType::Int32}});
  auto &b = *g.b;
  CHECK(G::type(b.callMethod(b.arg(0), "__add__", {b.arg(1)})) == "float32(2, 3, 4)");
  CHECK(G::type(b.callFunction("add", {b.arg(2), 1})) == "int32(3,)");
  CHECK(G::type(b.callFunction("add", {b.arg(2), 0.5})) == "float32(3,)");
  CHECK(G::type(b.callFunction("div", {b.arg(2), b.arg(2)})) == "float32(3,)");
  CHECK(G::type(b.callMethod(b.arg(0), "__lt__", {0})) == "bool(2, 1, 4)");
  CHECK(G::type(b.callFunction("relu", {b.arg(1)})) == "float32(3, 1)");
  CHECK(G::type(b.callMethod(b.arg(2), "astype", {"float16"})) == "float16(3,)");
  // A shape error names the expr and shapes, and leaves the graph as it was.
  size_t before = b.graph().size();
  CHECK_THROWS_WITH(b.callMethod(b.arg(0), "__add__", {b.arg(2)}),
                    Catch::Contains("__add__: shapes (2, 1, 4) and (3,) do not broadcast") &&
                        Catch::Contains("expr %"));
  CHECK(b.graph().size() == before);
  CHECK(b.arg(0)->numUsers() == 2);
}

TEST_CASE("conv, linear, matmul and pooling shapes", "[ir][shapes]") {
  G g({{"x", Shape{2, 8, 15, 15}}, {"w", Shape{16, 4, 3, 3}}, {"m", Shape{5, 3, 7}},
       {"n", Shape{7, 2}}, {"v", Shape{7}}});
  auto &b = *g.b;
  Node *c = b.callFunction("conv2d", {b.arg(0), b.arg(1)},
                           {{"stride", 2}, {"padding", 1}, {"groups", 2}});
  CHECK(G::type(c) == "float32(2, 16, 8, 8)");
  CHECK(G::type(b.callFunction("conv2d", {b.arg(0), b.arg(1)},
                               {{"dilation", 2}, {"groups", 2}})) == "float32(2, 16, 11, 11)");
  CHECK_THROWS_WITH(b.callFunction("conv2d", {b.arg(0), b.arg(1)}),
                    Catch::Contains("input (2, 8, 15, 15) has 8 channels but weight "
                                    "(16, 4, 3, 3) expects 4"));
  CHECK(G::type(b.callFunction("matmul", {b.arg(2), b.arg(3)})) == "float32(5, 3, 2)");
  CHECK(G::type(b.callFunction("matmul", {b.arg(2), b.arg(4)})) == "float32(5, 3)");
  CHECK_THROWS_WITH(b.callFunction("matmul", {b.arg(3), b.arg(3)}),
                    Catch::Contains("inner dimensions 2 and 7 differ"));
  CHECK(G::type(b.callFunction("max_pool2d", {c, 2})) == "float32(2, 16, 4, 4)");
  CHECK(G::type(b.callFunction("avg_pool2d", {c, 3}, {{"stride", 1}, {"padding", 1}})) ==
        "float32(2, 16, 8, 8)");
  CHECK(G::type(b.callFunction("adaptive_avg_pool2d", {c, Arg::ints({1, 1})})) ==
        "float32(2, 16, 1, 1)");
}

TEST_CASE("shape ops: reshape, flatten, transpose, concat, split, getitem", "[ir][shapes]") {
  G g({{"x", Shape{2, 3, 4}}, {"y", Shape{2, 5, 4}}});
  auto &b = *g.b;
  Node *x = b.arg(0);
  CHECK(G::type(b.callFunction("reshape", {x, Arg::ints({4, -1})})) == "float32(4, 6)");
  CHECK(G::type(b.callMethod(x, "reshape", {6, -1})) == "float32(6, 4)");
  CHECK_THROWS_WITH(b.callFunction("reshape", {x, Arg::ints({5, -1})}),
                    Catch::Contains("cannot reshape (2, 3, 4) to (5, -1)"));
  CHECK(G::type(b.callFunction("flatten", {x, 1})) == "float32(2, 12)");
  CHECK(G::type(b.callMethod(x, "flatten", {})) == "float32(24,)");
  CHECK(G::type(b.callFunction("transpose", {x, Arg::ints({2, 0, 1})})) == "float32(4, 2, 3)");
  CHECK(G::type(b.callFunction("concat", {Arg::list({x, b.arg(1)}), 1})) == "float32(2, 8, 4)");
  CHECK(G::type(b.callFunction("stack", {Arg::list({x, x})}, {{"axis", -1}})) ==
        "float32(2, 3, 4, 2)");
  auto parts = b.callFunctionN(functionOp("split"), {x, 2}, {{"axis", 2}}, 2);
  CHECK(G::type(parts[1]) == "float32(2, 3, 2)");
  CHECK(G::type(b.callFunction("expand_dims", {x, 0})) == "float32(1, 2, 3, 4)");
  CHECK(G::type(b.callFunction("sum", {x}, {{"axis", 1}, {"keepdims", true}})) ==
        "float32(2, 1, 4)");
  CHECK(G::type(b.callFunction("argmax", {x, -1})) == "int64(2, 3)");
  CHECK(G::type(b.callFunction("mean", {x})) == "float32()");
  using A = Arg;
  CHECK(G::type(b.callMethod(x, "__getitem__", {0})) == "float32(3, 4)");
  CHECK(G::type(b.callMethod(x, "__getitem__",
                             {A::tuple({A::slice(A::none(), A::none(), 2), Scalar::ellipsis(),
                                        A::slice(1, A::none(), A::none()), A::none()})})) ==
        "float32(1, 3, 3, 1)");
  CHECK(G::type(b.callMethod(x, "__getitem__", {A::slice(-1, A::none(), -1)})) ==
        "float32(2, 3, 4)");
  CHECK_THROWS_WITH(b.callMethod(x, "__getitem__", {A::tuple({0, 0, 0, 0})}),
                    Catch::Contains("too many indices"));
}

TEST_CASE("builtin module calls are typed from their attributes", "[ir][shapes]") {
  auto m = std::make_unique<Module>("Net");
  m->addModule<Conv2d>("conv", 3, 8, 3, 2, 1);
  m->addModule<BatchNorm2d>("bn", 8);
  m->addModule<AdaptiveAvgPool2d>("pool", IntPair{1, 1});
  m->addModule<Flatten>("flat", 1);
  m->addModule<Linear>("fc", 8, 10);
  G g({{"x", Shape{1, 3, 32, 32}}}, std::move(m));
  auto &b = *g.b;
  Node *x = b.callModule(b.getAttr(b.self(), "conv"), {b.arg(0)});
  CHECK(G::type(x) == "float32(1, 8, 16, 16)");
  x = b.callModule(b.getAttr(b.self(), "bn"), {x});
  x = b.callModule(b.getAttr(b.self(), "pool"), {x});
  x = b.callModule(b.getAttr(b.self(), "flat"), {x});
  CHECK(G::type(x) == "float32(1, 8)");
  CHECK(G::type(b.callModule(b.getAttr(b.self(), "fc"), {x})) == "float32(1, 10)");
  CHECK_THROWS_WITH(b.callModule(b.getAttr(b.self(), "fc"), {b.arg(0)}),
                    Catch::Contains("Linear: input (1, 3, 32, 32) does not fit weight (10, 8)"));
}
