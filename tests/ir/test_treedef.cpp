//===- test_treedef.cpp - Scalars and TreeDefs ---------------------------===//
#include <cmath>
#include <unordered_set>

#include "Fixtures.h"

using namespace tmg;

TEST_CASE("Python float repr", "[ir][treedef]") {
  CHECK(pyFloatRepr(1.0) == "1.0");
  CHECK(pyFloatRepr(0.5) == "0.5");
  CHECK(pyFloatRepr(1e-05) == "1e-05");
  CHECK(pyFloatRepr(0.0001) == "0.0001");
  CHECK(pyFloatRepr(0.9) == "0.9");
  CHECK(pyFloatRepr(-2.5) == "-2.5");
  CHECK(pyFloatRepr(1e16) == "1e+16");
  CHECK(pyFloatRepr(1234567890123456.0) == "1234567890123456.0");
  CHECK(pyFloatRepr(1.5e300) == "1.5e+300");
  CHECK(pyFloatRepr(0.1 + 0.2) == "0.30000000000000004");
  CHECK(pyFloatRepr(100.0) == "100.0");
  CHECK(pyFloatRepr(0.0) == "0.0");
  CHECK(pyFloatRepr(-0.0) == "-0.0");
  CHECK(pyFloatRepr(INFINITY) == "inf");
  CHECK(pyFloatRepr(-INFINITY) == "-inf");
  CHECK(pyFloatRepr(NAN) == "nan");
}

TEST_CASE("Scalar str and repr follow Python", "[ir][treedef]") {
  CHECK(Scalar().str() == "None");
  CHECK(Scalar(true).str() == "True");
  CHECK(Scalar(int64_t(-3)).str() == "-3");
  CHECK(Scalar("default").str() == "default");
  CHECK(Scalar("default").repr() == "'default'");
  CHECK(Scalar("it's").repr() == "\"it's\"");
  CHECK(Scalar("a\nb").repr() == "'a\\nb'");
  CHECK(Scalar::ellipsis().str() == "Ellipsis");
  // Types matter for equality, as the reference's LeafDef.
  CHECK(Scalar(1) != Scalar(1.0));
  CHECK(Scalar(1) != Scalar(true));
  CHECK(Scalar(2) == Scalar(int64_t(2)));
}

TEST_CASE("TreeDef equality, hashing and leaf counts", "[ir][treedef]") {
  TreeDef a = makeArgDef({TreeDef::leaf(TreeDef::LeafType::Module), TreeDef(),
                          TreeDef::constant(Scalar(1))});
  TreeDef b = makeArgDef({TreeDef::leaf(TreeDef::LeafType::Module), TreeDef(),
                          TreeDef::constant(Scalar(1))});
  TreeDef c = makeArgDef({TreeDef::leaf(TreeDef::LeafType::Module), TreeDef(),
                          TreeDef::constant(Scalar(2))});
  CHECK(a == b);
  CHECK(a.hash() == b.hash());
  CHECK(a != c); // a module called with 1 and with 2 has two graphs
  CHECK(a.numLeaves() == 2);
  CHECK(a.str() == "((Module, Tensor, 1), {})");
  std::unordered_set<TreeDef> set = {a, b, c};
  CHECK(set.size() == 2);
  CHECK(TreeDef::tuple({TreeDef()}) != TreeDef::list({TreeDef()}));
  CHECK(TreeDef::leaf(TreeDef::LeafType::Module) != TreeDef());
}

TEST_CASE("dicts are flattened in sorted key order", "[ir][treedef]") {
  TreeDef d = TreeDef::dict({{Scalar("b"), TreeDef()}, {Scalar("a"), TreeDef::constant(Scalar(3))}});
  CHECK(d.key(0) == Scalar("a"));
  CHECK(d.str() == "{'a': 3, 'b': Tensor}");
  TreeDef o = TreeDef::orderedDict({{Scalar("b"), TreeDef()}, {Scalar("a"), TreeDef()}});
  CHECK(o.key(0) == Scalar("b"));
  CHECK_THROWS_AS(TreeDef::dict({{Scalar("a"), TreeDef()}, {Scalar("a"), TreeDef()}}), Error);
  CHECK_THROWS_AS(TreeDef::orderedDict({{Scalar("a"), TreeDef()},
                                       {Scalar(1), TreeDef()},
                                       {Scalar("a"), TreeDef()}}),
                  Error);
  // Keys of different types are different keys; 10^5 keys take linear time
  // (an ONNX model's node-name dict has one per node).
  std::vector<std::pair<Scalar, TreeDef>> many;
  for (int64_t i = 0; i < 100000; ++i)
    many.emplace_back(i % 2 ? Scalar(i) : Scalar("k" + std::to_string(i)), TreeDef());
  CHECK(TreeDef::orderedDict(many).numLeaves() == 100000);
}

TEST_CASE("TreeDef prints nested structures as Python", "[ir][treedef]") {
  TreeDef t = TreeDef::tuple({TreeDef(), TreeDef::list({TreeDef(), TreeDef::constant(Scalar("s"))}),
                              TreeDef::slice(TreeDef::constant(Scalar(1)), TreeDef::constant(Scalar()),
                                             TreeDef::constant(Scalar()))});
  std::string out;
  size_t next = 0;
  t.print(out, [](size_t i) { return "n" + std::to_string(i); }, &next, true);
  CHECK(out == "(n0, [n1, 's'], slice(1, None, None))");
  CHECK(next == 2);
  CHECK(TreeDef::tuple({TreeDef()}).str() == "(Tensor,)");
}

TEST_CASE("Python literals and op parameter specs parse", "[ir][treedef]") {
  CHECK(parsePyLiteral("(1, 2)").str() == "(1, 2)");
  CHECK(parsePyLiteral("'x'").value() == Scalar("x"));
  CHECK(parsePyLiteral("None").value().isNone());
  CHECK(parsePyLiteral("1e-05").value() == Scalar(1e-05));
  CHECK(parsePyLiteral("[1, (2,)]").str() == "[1, (2,)]");
  CHECK_THROWS_AS(parsePyLiteral("(1, "), Error);
  CHECK_THROWS_AS(parsePyLiteral("foo"), Error);
  OpParam p = parseOpParam("stride=1");
  CHECK(p.name == "stride");
  CHECK(p.hasDefault);
  CHECK(parseOpParam("*args").variadic);
  CHECK_THROWS_AS(parseOpParam("a b"), Error);
}

TEST_CASE("op registry: builtin and user ops", "[ir][ops]") {
  const OpSchema &relu = functionOp("relu");
  CHECK(relu.printName() == "nn.relu");
  CHECK(&functionOp("nn.relu") == &relu);
  CHECK(relu.kind() == OpKind::Relu);
  CHECK(op(OpKind::Add).isCommutative());
  CHECK(!op(OpKind::Sub).isCommutative());
  CHECK(methodOp("__add__").isCommutative());
  try {
    functionOp("rellu");
    FAIL("expected an error");
  } catch (const Error &e) {
    CHECK(std::string(e.what()).find("did you mean 'relu'") != std::string::npos);
  }
  auto &reg = OpRegistry::instance();
  const OpSchema &mine = reg.registerFunction("__main__", "my_relu6", {"x"});
  CHECK(mine.printName() == "__main__.my_relu6");
  CHECK(&reg.registerFunction("__main__", "my_relu6", {"x"}) == &mine);
  CHECK_THROWS_AS(reg.registerFunction("__main__", "my_relu6", {"x", "y"}), Error);
  CHECK_THROWS_AS(reg.registerFunction("m", "bad", {"a=1", "b"}), Error);
}

TEST_CASE("tensors: shapes, storage, half floats", "[ir][tensor]") {
  Tensor t = Tensor::zeros({2, 3});
  CHECK(t.numel() == 6);
  CHECK(t.nbytes() == 24);
  CHECK(reinterpret_cast<uintptr_t>(t.rawData()) % 64 == 0);
  Tensor u = t; // shares storage
  CHECK(u.sharesStorage(t));
  Tensor v = t.clone();
  CHECK(!v.sharesStorage(t));
  CHECK(v.bitwiseEqual(t));
  CHECK(shapeStr({5}) == "(5,)");
  CHECK(shapeStr({}) == "()");
  CHECK(Tensor::zeros({0, 3}).numel() == 0);
  CHECK_THROWS_AS(Tensor::zeros({-1}), Error);
  CHECK_THROWS_AS(t.reshaped({4}), Error);
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    CHECK(halfToFloat(floatToHalf(f)) == f);
  CHECK(std::isinf(halfToFloat(floatToHalf(1e6f))));
  Tensor r1 = Tensor::randn({16}, 7), r2 = Tensor::randn({16}, 7);
  CHECK(r1.bitwiseEqual(r2));
}

TEST_CASE("dicts refuse a key given twice, sorted or ordered", "[ir][treedef]") {
  auto item = [](Scalar k) { return std::pair<Scalar, TreeDef>(k, TreeDef::constant(Scalar(1))); };
  CHECK_THROWS_WITH(TreeDef::dict({item(Scalar("b")), item(Scalar("a")), item(Scalar("b"))}),
                    Catch::Contains("duplicate dict key 'b'"));
  CHECK_THROWS_WITH(TreeDef::dict({item(Scalar(int64_t(3))), item(Scalar(int64_t(1))),
                                   item(Scalar("x")), item(Scalar(int64_t(3)))}),
                    Catch::Contains("duplicate dict key 3"));
  CHECK_THROWS_WITH(TreeDef::dict({item(Scalar(0.0)), item(Scalar(1.5)), item(Scalar(-0.0))}),
                    Catch::Contains("duplicate dict key"));
  CHECK_THROWS_WITH(TreeDef::orderedDict({item(Scalar("b")), item(Scalar("a")), item(Scalar("b"))}),
                    Catch::Contains("duplicate dict key 'b'"));
  CHECK_NOTHROW(TreeDef::dict({item(Scalar("b")), item(Scalar("a")), item(Scalar(int64_t(1))),
                               item(Scalar(1.0))}));
}
