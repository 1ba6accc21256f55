//===- test_symbolic_dims.cpp - Symbolic dims and their propagation -------===//
//
// The dim expressions of tm/ir/SymbolicDim.h (canonical form, text, exact
// division, evaluation), the binder the interpreter checks inputs with, and
// shape inference through the common op families with symbolic inputs.
//
//===----------------------------------------------------------------------===//
#include <catch2/catch.hpp>

#include "tm/ir/IR.h"
#include "tm/ir/ShapeInference.h"
#include "tm/ir/SymbolicDim.h"

using namespace tmg;

namespace {

int64_t sym(const char *s) { return dim::symbol(s); }

std::string shapeOfNode(Node *n) {
  auto *t = llvm::cast<TensorNode>(n);
  return t->shape() ? dim::dimsStr(*t->shape()) : "unknown";
}

} // namespace

TEST_CASE("equal dim expressions are one value", "[ir][symbolic]") {
  int64_t n = sym("N"), s = sym("seq");
  CHECK(isSymbolicDim(n));
  CHECK(sym("N") == n);
  CHECK(n != s);
  CHECK(dim::mul(n, 197) == dim::mul(197, n));
  CHECK(dim::add(dim::mul(n, 2), dim::mul(n, 3)) == dim::mul(n, 5));
  CHECK(dim::mul(dim::add(n, 1), s) == dim::add(dim::mul(n, s), s));
  CHECK(dim::sub(dim::add(n, 4), 4) == n);
  CHECK(dim::sub(n, n) == 0);
  CHECK(dim::add(3, 4) == 7);
  CHECK(dim::mul(n, 0) == 0);
  CHECK(dim::mul(n, 1) == n);
}

TEST_CASE("unknown dims and impossible results stay unknown", "[ir][symbolic]") {
  int64_t n = sym("N");
  CHECK(dim::add(kUnknownDim, n) == kUnknownDim);
  CHECK(dim::mul(kUnknownDim, 3) == kUnknownDim);
  CHECK(dim::sub(2, 5) == kUnknownDim); // no negative sizes
  CHECK(dim::mul(int64_t(1) << 40, int64_t(1) << 40) == kUnknownDim);
  CHECK_FALSE(provablySameShape({kUnknownDim, 3}, {kUnknownDim, 3}));
  CHECK(provablySameShape({n, 3}, {n, 3}));
  CHECK_FALSE(provablySameShape({n, 3}, {sym("M"), 3}));
}

TEST_CASE("division of dims is exact or a floor term", "[ir][symbolic]") {
  int64_t n = sym("N"), h = sym("H");
  int64_t total = dim::mul(dim::mul(n, 197), 768);
  REQUIRE(dim::exactDiv(total, 768));
  CHECK(*dim::exactDiv(total, 768) == dim::mul(n, 197));
  CHECK(*dim::exactDiv(total, dim::mul(n, 768)) == 197);
  CHECK_FALSE(dim::exactDiv(total, 7));
  CHECK_FALSE(dim::exactDiv(dim::add(n, 1), n));
  CHECK(dim::floorDiv(dim::mul(n, 4), 2) == dim::mul(n, 2));
  // (2H + 3) // 2 = H + 1: the whole part leaves the division.
  CHECK(dim::floorDiv(dim::add(dim::mul(h, 2), 3), 2) == dim::add(h, 1));
  int64_t half = dim::floorDiv(dim::sub(h, 1), 2);
  CHECK(dim::str(half) == "(H-1)//2");
  CHECK(dim::str(dim::add(half, 1)) == "(H-1)//2+1");
  CHECK(dim::ceilDiv(dim::mul(h, 2), 2) == h);
  CHECK(dim::floorDiv(7, 2) == 3);
  CHECK(dim::ceilDiv(7, 2) == 4);
}

TEST_CASE("dims print and parse back", "[ir][symbolic]") {
  int64_t n = sym("N");
  CHECK(dim::str(n) == "N");
  CHECK(dim::str(dim::mul(n, 197)) == "N*197");
  CHECK(dim::str(dim::add(sym("seq"), 1)) == "seq+1");
  CHECK(dim::str(dim::sub(n, 1)) == "N-1");
  CHECK(dim::str(kUnknownDim) == "?");
  CHECK(dim::str(12) == "12");
  CHECK(dim::str(sym("batch size")) == "'batch size'");
  for (const char *text : {"N", "N*197", "seq+1", "(H-1)//2+1", "M*N+2", "'batch size'", "?", "7"}) {
    INFO(text);
    auto d = dim::parse(text);
    REQUIRE(d);
    CHECK(dim::str(*d) == text);
  }
  CHECK(*dim::parse("2*N") == dim::mul(n, 2));
  CHECK(*dim::parse(" N * 197 ") == dim::mul(n, 197));
  std::string err;
  size_t pos = 0;
  CHECK_FALSE(dim::parse("N+", &err, &pos));
  CHECK(err == "expected a dimension");
  CHECK(pos == 2);
  CHECK_FALSE(dim::parse("N//M", &err, &pos));
  CHECK(err == "'//' needs a positive size on its right");
  CHECK_FALSE(dim::parse("N)", &err, &pos));
  CHECK(dim::dimsStr({n, 3, 224, 224}) == "(N, 3, 224, 224)");
}

TEST_CASE("dims evaluate and substitute under bindings", "[ir][symbolic]") {
  int64_t n = sym("N"), s = sym("S");
  std::map<std::string, int64_t> env{{"N", 4}};
  CHECK(*dim::eval(dim::add(dim::mul(n, 197), 1), env) == 789);
  CHECK_FALSE(dim::eval(s, env));
  CHECK(*dim::eval(dim::floorDiv(dim::sub(n, 1), 2), env) == 1);
  CHECK(dim::substitute(dim::mul(n, s), env) == dim::mul(s, 4));
  CHECK(dim::symbolName(n) == std::optional<std::string>("N"));
  CHECK_FALSE(dim::symbolName(dim::mul(n, 2)));
}

TEST_CASE("the binder checks sizes, symbols and expressions", "[ir][symbolic]") {
  int64_t n = sym("N");
  {
    ShapeBinder b;
    CHECK(b.bind("input 'x'", {n, 3}, {2, 3}).empty());
    CHECK(b.bind("input 'y'", {n, dim::mul(n, 2)}, {2, 4}).empty());
    CHECK(b.finish().empty());
    CHECK(b.bindings().at("N") == 2);
  }
  {
    ShapeBinder b;
    CHECK(b.bind("input 'x'", {n, 3}, {2, 4}) == "input 'x': dim 1 is 3 in the graph, got 4");
  }
  {
    ShapeBinder b;
    CHECK(b.bind("input 'x'", {n, 3}, {2, 3}).empty());
    CHECK(b.bind("input 'y'", {n}, {5}) ==
          "input 'y': dim 0 is N = 2 (from input 'x' dim 0), got 5");
  }
  {
    ShapeBinder b;
    CHECK(b.bind("input 'x'", {n, dim::add(n, 1)}, {2, 4}).empty());
    CHECK(b.finish() == "input 'x': dim 1 is N+1 = 3 in the graph, got 4");
  }
  {
    ShapeBinder b;
    CHECK(b.bind("input 'x'", {n, 3}, {2}).find("rank 2 in the graph") != std::string::npos);
    CHECK(b.bind("input 'z'", {7}, {9}, /*sizes=*/false).empty());
  }
}

TEST_CASE("shape inference keeps symbols through a network", "[ir][symbolic]") {
  int64_t n = sym("N");
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{n, 3, 32, 32}}});
  Tensor w = Tensor::zeros({8, 3, 3, 3});
  Node *c = b.callFunction("nn.conv2d", {b.arg(0), b.constant(w)},
                           {{"stride", Arg::ints({2, 2})},
                            {"padding", Arg::ints({1, 1})},
                            {"dilation", Arg::ints({1, 1})},
                            {"groups", int64_t(1)}});
  CHECK(shapeOfNode(c) == "(N, 8, 16, 16)");
  Node *r = b.callFunction("nn.relu", {c});
  CHECK(shapeOfNode(r) == "(N, 8, 16, 16)");
  Node *f = b.callFunction("tensor.flatten", {r}, {{"start_axis", int64_t(1)}});
  CHECK(shapeOfNode(f) == "(N, 2048)");
  Node *rs = b.callFunction("tensor.reshape", {f, Arg::ints({-1, 32})});
  CHECK(shapeOfNode(rs) == "(N*64, 32)");
  Node *back = b.callFunction("tensor.reshape", {rs, Arg::ints({-1, 8, 256})});
  CHECK(shapeOfNode(back) == "(N, 8, 256)");
  Node *mm = b.callFunction("math.matmul", {back, b.constant(Tensor::zeros({256, 10}))});
  CHECK(shapeOfNode(mm) == "(N, 8, 10)");
  Node *sum = b.callFunction("math.sum", {mm}, {{"axis", int64_t(1)}, {"keepdims", false}});
  CHECK(shapeOfNode(sum) == "(N, 10)");
  Node *cat = b.callFunction("tensor.concat", {Arg::list({sum, sum})}, {{"axis", int64_t(0)}});
  CHECK(shapeOfNode(cat) == "(N*2, 10)");
  Node *add = b.callFunction("elemwise.add", {sum, b.constant(Tensor::zeros({1, 10}))});
  CHECK(shapeOfNode(add) == "(N, 10)");
  Node *sl = b.callMethod(sum, "__getitem__", {Arg::slice(int64_t(1), Arg::none(), Arg::none())});
  CHECK(shapeOfNode(sl) == "(N-1, 10)");
  Node *pooled = b.callFunction("nn.max_pool2d", {c, Arg::ints({2, 2})},
                                {{"stride", Arg::ints({2, 2})}, {"padding", Arg::ints({0, 0})}});
  CHECK(shapeOfNode(pooled) == "(N, 8, 8, 8)");
}

TEST_CASE("symbolic spatial dims follow the window arithmetic", "[ir][symbolic]") {
  int64_t h = sym("H"), w = sym("W");
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, h, w}}});
  Node *c = b.callFunction("nn.conv2d", {b.arg(0), b.constant(Tensor::zeros({4, 3, 3, 3}))},
                           {{"stride", Arg::ints({2, 1})},
                            {"padding", Arg::ints({1, 1})},
                            {"dilation", Arg::ints({1, 1})},
                            {"groups", int64_t(1)}});
  CHECK(shapeOfNode(c) == "(1, 4, (H-1)//2+1, W)");
  // Broadcasting two different symbols: either may be 1, so unknown.
  auto bs = broadcastShapes({h, 3}, {w, 3});
  REQUIRE(bs);
  CHECK(dim::dimsStr(*bs) == "(?, 3)");
  CHECK(dim::dimsStr(*broadcastShapes({h, 1}, {1, 5})) == "(H, 5)");
  CHECK_FALSE(broadcastShapes({2, 3}, {4, 3}));
}

TEST_CASE("recurrent ops keep symbolic seq and batch dims", "[ir][symbolic][rnn]") {
  int64_t s = sym("S"), n = sym("N");
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{s, n, 3}}, {"xb", Shape{n, s, 3}}});
  auto outs = b.callFunctionN(functionOp("nn.lstm"),
                              {b.arg(0), b.constant(Tensor::zeros({2, 20, 3})),
                               b.constant(Tensor::zeros({2, 20, 5}))},
                              {{"direction", "bidirectional"}}, 3);
  CHECK(shapeOfNode(outs[0]) == "(S, 2, N, 5)");
  CHECK(shapeOfNode(outs[1]) == "(2, N, 5)");
  CHECK(shapeOfNode(outs[2]) == "(2, N, 5)");
  // Batch first; the hidden size from the attribute.
  auto g = b.callFunctionN(functionOp("nn.gru"),
                           {b.arg(1), b.constant(Tensor::zeros({1, 12, 3})),
                            b.constant(Tensor::zeros({1, 12, 4}))},
                           {{"layout", int64_t(1)}, {"hidden_size", int64_t(4)}}, 2);
  CHECK(shapeOfNode(g[0]) == "(N, S, 1, 4)");
  CHECK(shapeOfNode(g[1]) == "(N, 1, 4)");
  // A recurrent weight that does not fit the hidden size is an error.
  CHECK_THROWS_WITH(b.callFunctionN(functionOp("nn.rnn"),
                                    {b.arg(0), b.constant(Tensor::zeros({1, 4, 3})),
                                     b.constant(Tensor::zeros({1, 4, 4}))},
                                    {{"hidden_size", int64_t(3)}}, 2),
                    Catch::Contains("does not have 1 gates of hidden size 3"));
}

TEST_CASE("rules that do not handle symbols see an unknown shape", "[ir][symbolic]") {
  int64_t n = sym("N");
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{n, n}}});
  // det's rule is not symbolic: no wrong size comes out of it.
  Node *d = b.callFunction("math.det", {b.arg(0)});
  auto *t = llvm::cast<TensorNode>(d);
  CHECK(!t->shape());
}

TEST_CASE("reshape targets computed from shapes keep their symbols", "[ir][symbolic]") {
  // As exporters write `x.reshape(b, t, 3, 4, c // 4)` and ONNX's "0 copies
  // the input dim": Shape, Gather, Unsqueeze, Concat, Equal/Where, Reshape.
  int64_t n = sym("batch"), s = sym("seq");
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{n, s, 96}}});
  auto i64 = [&](std::vector<int64_t> v, bool scalar = false) {
    Shape shp = scalar ? Shape{} : Shape{int64_t(v.size())};
    return b.constant(Tensor::fromInts(shp, v, DType::Int64));
  };
  Node *shape = b.callMethod(b.apply(op(OpKind::GetVarShape), {b.arg(0)})[0], "astype",
                             {Arg(std::string("int64"))});
  auto dimAt = [&](int64_t i) {
    Node *d = b.callFunction("tensor.take", {shape, i64({i}, true)}, {{"axis", int64_t(0)}});
    return b.callFunction("tensor.expand_dims", {d, Arg::ints({0})});
  };
  // c // 12 as ONNX's integer Div imports: a true division, then a cast.
  Node *c = b.callFunction("tensor.take", {shape, i64({2}, true)}, {{"axis", int64_t(0)}});
  Node *q = b.callMethod(b.callFunction("elemwise.div", {c, i64({12}, true)}), "astype",
                         {Arg(std::string("int64"))});
  Node *target = b.callFunction(
      "tensor.concat",
      {Arg::list({i64({0}), dimAt(1), i64({3}), i64({4}),
                  b.callFunction("tensor.expand_dims", {q, Arg::ints({0})})})},
      {{"axis", int64_t(0)}});
  // The 0 entry copies the input's dim: where(target == 0, shape[:5], target).
  Node *padded = b.callFunction("tensor.concat", {Arg::list({shape, i64({0, 0})})},
                                {{"axis", int64_t(0)}});
  Node *copy = b.callMethod(padded, "__getitem__", {Arg::slice(Arg::none(), int64_t(5), Arg::none())});
  Node *eq = b.callFunction("elemwise.equal", {target, i64({0}, true)});
  Node *fixed = b.callFunction("tensor.where", {eq, copy, target});
  Node *r = b.callFunction("tensor.reshape", {b.arg(0), fixed});
  // Entry 0 copies batch; entry 1 is seq whether or not seq is 0.
  CHECK(shapeOfNode(r) == "(batch, seq, 3, 4, 8)");

  // -1 is inferred by exact division; an entry nothing is known of stays ?.
  Node *t2 = b.callFunction("tensor.concat", {Arg::list({dimAt(0), i64({-1}), i64({4})})},
                            {{"axis", int64_t(0)}});
  Node *r2 = b.callFunction("tensor.reshape", {b.arg(0), t2});
  CHECK(shapeOfNode(r2) == "(batch, seq*24, 4)");
  Node *unknown = b.callFunction("math.argmax", {b.arg(0)});
  Node *t3 = b.callFunction("tensor.concat",
                            {Arg::list({dimAt(0), i64({-1}),
                                        b.callFunction("tensor.expand_dims",
                                                       {unknown, Arg::ints({0})})})},
                            {{"axis", int64_t(0)}});
  Node *r3 = b.callFunction("tensor.reshape", {b.arg(0), t3});
  CHECK(shapeOfNode(r3) == "(batch, ?, ?)");

  // broadcast_to: the target's symbols; an unknown entry is the input's dim
  // where that is a size other than 1.
  Node *bt = b.callFunction("tensor.broadcast_to",
                            {b.arg(0), b.callFunction("tensor.concat",
                                                      {Arg::list({dimAt(0), dimAt(1),
                                                                  b.callFunction("tensor.expand_dims", {unknown, Arg::ints({0})})})},
                                                      {{"axis", int64_t(0)}})});
  CHECK(shapeOfNode(bt) == "(batch, seq, 96)");

  // A slice bound read at run time leaves only its own dim unknown.
  Node *sl = b.callMethod(b.arg(0), "__getitem__",
                          {Arg::tuple({Arg::slice(Arg::none(), Arg::none(), Arg::none()),
                                       Arg::slice(Arg::none(), Arg(unknown), Arg::none()),
                                       Arg::slice(int64_t(1), Arg::none(), int64_t(2))})});
  CHECK(shapeOfNode(sl) == "(batch, ?, 48)");
}
