//===- test_onnx.cpp - ONNX import and export unit tests ------------------===//
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include <unistd.h>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include "tm/io/Onnx.h"
#include "tm/ir/Builder.h"
#include "tm/ir/IR.h"
#include "tm/ir/Strings.h"
#include "tm/ir/Verifier.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;

namespace {

/// A small ONNX model built in memory.
struct ModelBuilder {
  onnx::ModelProto m;
  onnx::GraphProto *g;
  explicit ModelBuilder(int64_t opset) {
    m.set_ir_version(8);
    auto *o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    g = m.mutable_graph();
    g->set_name("test_graph");
  }
  void value(onnx::ValueInfoProto *v, const std::string &name, std::vector<int64_t> shape,
             int32_t type = onnx::TensorProto::FLOAT) {
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    auto *s = t->mutable_shape();
    for (int64_t d : shape)
      s->add_dim()->set_dim_value(d);
  }
  void input(const std::string &n, std::vector<int64_t> s, int32_t t = onnx::TensorProto::FLOAT) {
    value(g->add_input(), n, s, t);
  }
  void output(const std::string &n, std::vector<int64_t> s, int32_t t = onnx::TensorProto::FLOAT) {
    value(g->add_output(), n, s, t);
  }
  onnx::TensorProto *init(const std::string &n, std::vector<int64_t> dims, std::vector<float> v) {
    auto *t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims)
      t->add_dims(d);
    for (float x : v)
      t->add_float_data(x);
    return t;
  }
  onnx::TensorProto *initInts(const std::string &n, std::vector<int64_t> v) {
    auto *t = g->add_initializer();
    t->set_name(n);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(v.size()));
    for (int64_t x : v)
      t->add_int64_data(x);
    return t;
  }
  onnx::NodeProto *node(const std::string &op, std::vector<std::string> in,
                        std::vector<std::string> out, const std::string &name = "") {
    auto *n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto &i : in)
      n->add_input(i);
    for (auto &o : out)
      n->add_output(o);
    return n;
  }
  static void attrF(onnx::NodeProto *n, const char *name, float v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  std::string bytes() const {
    std::string s;
    m.SerializeToString(&s);
    return s;
  }
  FailureOr<io::OnnxModel> import(const io::OnnxImportOptions &o = {}) const {
    return io::importOnnxBytes(bytes(), "test.onnx", o);
  }
};

Tensor ramp(llvm::ArrayRef<int64_t> shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = 0.25f * float(i % 11) - 1.0f;
  return t;
}

std::vector<Tensor> run(const TracedModule &m, std::vector<Tensor> in) {
  rt::Interpreter interp(m);
  return interp.run(in).outputs;
}

} // namespace

TEST_CASE("import: names, parameters, constants and shapes", "[onnx]") {
  ModelBuilder b(13);
  b.input("input", {2, 3});
  b.init("fc.weight", {4, 3}, std::vector<float>(12, 0.5f));
  b.init("fc.bias", {4}, {1, 2, 3, 4});
  auto *gemm = b.node("Gemm", {"input", "fc.weight", "fc.bias"}, {"h"}, "fc");
  auto *a = gemm->add_attribute();
  a->set_name("transB");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  auto *c = b.node("Constant", {}, {"two"}, "two");
  auto *ca = c->add_attribute();
  ca->set_name("value_float");
  ca->set_type(onnx::AttributeProto::FLOAT);
  ca->set_f(2.0f);
  b.node("Mul", {"h", "two"}, {"y"}, "scale");
  b.output("y", {2, 4});
  auto r = b.import();
  REQUIRE(r.succeeded());
  TracedModule &m = *r->module;
  CHECK(verify(m).empty());
  InternalGraph &g = m.graph();
  // "input" is a Python builtin name: the node becomes input_1.
  REQUIRE(g.inputs().size() == 2);
  CHECK(g.input(1)->name() == "input_1");
  CHECK(r->names.inputs == std::vector<std::string>{"input"});
  CHECK(r->names.outputs == std::vector<std::string>{"y"});
  // Initializers are parameters with sanitised names, reached by GetAttr.
  CHECK(m.tensor("fc_weight") != nullptr);
  CHECK(m.tensor("fc_bias") != nullptr);
  std::string text = g.str();
  CHECK_THAT(text, Catch::Contains("getattr(self, \"fc_weight\")"));
  CHECK_THAT(text, Catch::Contains("nn.linear("));
  CHECK_THAT(text, Catch::Contains("Constant("));
  // Every tensor node has a static shape.
  for (const Expr *e : g.body())
    for (Node *n : e->outputs())
      if (auto *t = llvm::dyn_cast<TensorNode>(n)) {
        INFO(n->name().str());
        CHECK(t->shape().has_value());
      }
  Tensor x = ramp({2, 3});
  Tensor y = run(m, {x})[0];
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t o = 0; o < 4; ++o) {
      double acc = o + 1;
      for (int64_t k = 0; k < 3; ++k)
        acc += 0.5 * x.at(i * 3 + k);
      CHECK(y.at(i * 4 + o) == Approx(2 * acc));
    }
}

TEST_CASE("import: the node-name map lists the nodes that survive dead code removal", "[onnx]") {
  // The import deletes dead nodes; their names (read from freed nodes, they
  // were garbage) must not reach onnx_node_names.
  ModelBuilder b(13);
  b.input("x", {2});
  b.node("Relu", {"x"}, {"h"}, "live_relu");
  b.node("Neg", {"x"}, {"unused"}, "dead_neg");
  b.node("Exp", {"h"}, {"y"}, "live_exp");
  b.output("y", {2});
  auto r = b.import();
  REQUIRE(r.succeeded());
  const TreeDef *names = r->module->value("onnx_node_names");
  REQUIRE(names != nullptr);
  REQUIRE(names->numChildren() == 2);
  std::set<std::string> onnxNames;
  for (size_t i = 0; i < names->numChildren(); ++i) {
    onnxNames.insert(names->child(i).value().getString());
    CHECK(!names->key(i).getString().empty());
  }
  CHECK(onnxNames == std::set<std::string>{"live_exp", "live_relu"});
}

TEST_CASE("import: Clip bounds as attributes (opset 6) and inputs (opset 13)", "[onnx]") {
  for (int64_t opset : {6, 13}) {
    ModelBuilder b(opset);
    b.input("x", {5});
    onnx::NodeProto *n;
    if (opset == 6) {
      n = b.node("Clip", {"x"}, {"y"});
      ModelBuilder::attrF(n, "min", -0.5f);
      ModelBuilder::attrF(n, "max", 0.25f);
    } else {
      b.init("lo", {}, {-0.5f});
      b.init("hi", {}, {0.25f});
      b.node("Clip", {"x", "lo", "hi"}, {"y"});
    }
    b.output("y", {5});
    auto r = b.import();
    REQUIRE(r.succeeded());
    Tensor x = ramp({5});
    Tensor y = run(*r->module, {x})[0];
    for (int64_t i = 0; i < 5; ++i)
      CHECK(y.at(i) == Approx(std::clamp(x.at(i), -0.5, 0.25)));
  }
}

TEST_CASE("import: Dropout in training mode is the identity only with ratio 0", "[onnx]") {
  // PyTorch exports F.dropout(x, p=0.0, training=True) (swin_t's attention)
  // as Dropout(x, ratio=0, training_mode=true).
  for (float ratio : {0.0f, 0.1f}) {
    ModelBuilder b(13);
    b.input("x", {5});
    b.init("ratio", {}, {ratio});
    auto *t = b.g->add_initializer();
    t->set_name("training");
    t->set_data_type(onnx::TensorProto::BOOL);
    t->add_int32_data(1);
    b.node("Dropout", {"x", "ratio", "training"}, {"y"}, "drop");
    b.output("y", {5});
    auto r = b.import();
    if (ratio == 0.0f) {
      REQUIRE(r.succeeded());
      Tensor x = ramp({5});
      Tensor y = run(*r->module, {x})[0];
      for (int64_t i = 0; i < 5; ++i)
        CHECK(y.at(i) == x.at(i));
    } else {
      REQUIRE(r.failed());
      CHECK_THAT(r.diagnostic().message, Catch::Contains("node 'drop' (Dropout): training mode"));
    }
  }
}

TEST_CASE("import: ScatterND and ScatterElements with reductions", "[onnx]") {
  ModelBuilder b(16);
  b.input("x", {4, 2});
  b.initInts("rows", {2, 0});
  auto *rows = b.g->mutable_initializer(0);
  rows->clear_dims();
  rows->add_dims(2);
  rows->add_dims(1);
  b.init("u", {2, 2}, {10, 20, 30, 40});
  auto *n = b.node("ScatterND", {"x", "rows", "u"}, {"y"});
  auto *a = n->add_attribute();
  a->set_name("reduction");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("add");
  b.output("y", {4, 2});
  auto r = b.import();
  REQUIRE(r.succeeded());
  Tensor x = ramp({4, 2});
  Tensor y = run(*r->module, {x})[0];
  // rows 2 and 0 get u added, rows 1 and 3 are copied (values by hand).
  CHECK(y.at(4) == Approx(x.at(4) + 10));
  CHECK(y.at(5) == Approx(x.at(5) + 20));
  CHECK(y.at(0) == Approx(x.at(0) + 30));
  CHECK(y.at(1) == Approx(x.at(1) + 40));
  CHECK(y.at(2) == x.at(2));
  CHECK(y.at(7) == x.at(7));
  a->set_s("sum");
  auto bad = b.import();
  REQUIRE(bad.failed());
  CHECK_THAT(bad.diagnostic().message, Catch::Contains("unknown reduction 'sum'"));
}

TEST_CASE("import: symbolic input dims are fixed by inputShapes", "[onnx]") {
  // x: (N, 3) with a symbolic batch, as PyTorch writes dynamic_axes.
  ModelBuilder b(13);
  auto *in = b.g->add_input();
  b.value(in, "x", {0, 3});
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  b.init("w", {3, 2}, {1, 2, 3, 4, 5, 6});
  b.node("MatMul", {"x", "w"}, {"y"}, "mm");
  b.node("Shape", {"x"}, {"s"}, "shape");
  b.node("Flatten", {"x"}, {"f"}, "flat");
  auto *out = b.g->add_output();
  b.value(out, "y", {0, 2});
  out->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  b.output("s", {2}, onnx::TensorProto::INT64);
  auto *f = b.g->add_output();
  f->set_name("f");
  f->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);

  // Without them the graph keeps N and runs at any batch.
  auto r = b.import();
  REQUIRE(r.succeeded());
  const auto *xs = llvm::cast<TensorNode>(r->module->graph().inputs()[1]);
  REQUIRE(xs->shape());
  CHECK(dim::dimsStr(*xs->shape()) == "(N, 3)");
  auto symOuts = run(*r->module, {ramp({4, 3})});
  CHECK(symOuts[0].shape() == llvm::ArrayRef<int64_t>{4, 2});
  CHECK(symOuts[1].at(0) == 4);
  for (const char *key : {"x", "0"}) {
    io::OnnxImportOptions o;
    o.inputShapes[key] = Shape{2, 3};
    auto ok = b.import(o);
    REQUIRE(ok.succeeded());
    const auto *x = llvm::cast<TensorNode>(ok->module->graph().inputs()[1]);
    REQUIRE(x->shape());
    CHECK(*x->shape() == Shape{2, 3});
    auto outs = run(*ok->module, {ramp({2, 3})});
    REQUIRE(outs[0].shape() == llvm::ArrayRef<int64_t>{2, 2});
    // row 0 of ramp is (-1, -0.75, -0.5): times column 0 of w (1, 3, 5)
    CHECK(outs[0].at(0) == Approx(-1 - 2.25 - 2.5));
    CHECK(outs[1].at(0) == 2);
    CHECK(outs[1].at(1) == 3);
  }
  auto bad = [&](Shape s, const char *key) {
    io::OnnxImportOptions o;
    o.inputShapes[key] = s;
    auto r2 = b.import(o);
    REQUIRE(r2.failed());
    return r2.diagnostic().message;
  };
  CHECK_THAT(bad({2, 3, 1}, "x"), Catch::Contains("has shape (N, 3) of rank 2; the shape given "
                                                  "for it, (2, 3, 1), has rank 3"));
  CHECK_THAT(bad({2, 4}, "x"), Catch::Contains("differs in dimension 1"));
  CHECK_THAT(bad({2, 3}, "z"), Catch::Contains("graph input 'z', which the model does not have"));
}

TEST_CASE("import: every unsupported op is listed with its node name", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {4});
  b.node("Relu", {"x"}, {"a"}, "ok");
  b.node("Multinomial", {"a"}, {"b"}, "first_bad");
  b.node("Bernoulli", {"b"}, {"y"}, "second_bad");
  b.output("y", {1});
  auto r = b.import();
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().message, Catch::Contains("Multinomial (node 'first_bad')"));
  CHECK_THAT(r.diagnostic().message, Catch::Contains("Bernoulli (node 'second_bad')"));
  CHECK(r.diagnostic().loc.file == "test.onnx");
}

TEST_CASE("import: corrupt, truncated, sparse and external data are errors", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {4});
  b.init("w", {4}, {1, 2, 3, 4});
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y", {4});
  std::string bytes = b.bytes();
  auto t = io::importOnnxBytes(bytes.substr(0, bytes.size() / 2), "half.onnx");
  REQUIRE(t.failed());
  CHECK_THAT(t.diagnostic().str(), Catch::Contains("truncated or corrupt"));
  auto g = io::importOnnxBytes(std::string("\xff\xff\xff garbage", 12), "junk.onnx");
  CHECK(g.failed());
  CHECK(io::importOnnx("/nonexistent/model.onnx").failed());

  ModelBuilder e = b;
  e.g = e.m.mutable_graph();
  auto *w = e.g->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto *kv = w->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  auto r = e.import();
  REQUIRE(r.failed());
  // From memory there is no directory to find the data in.
  CHECK_THAT(r.diagnostic().message,
             Catch::Contains("external file 'weights.bin'") && Catch::Contains("no directory"));

  ModelBuilder s = b;
  s.g = s.m.mutable_graph();
  s.g->add_sparse_initializer()->mutable_values()->set_name("sp");
  auto rs = s.import();
  REQUIRE(rs.failed());
  CHECK_THAT(rs.diagnostic().message, Catch::Contains("sparse"));
}

TEST_CASE("import: a corrupt node is named, whether the model is read from "
          "bytes or a file",
          "[onnx]") {
  // Nodes are kept serialized and parsed one at a time: a node whose bytes
  // are not a NodeProto, inside a model whose framing is intact, is still
  // an error that names it.
  ModelBuilder b(13);
  b.input("x", {4});
  b.node("Relu", {"x"}, {"a"}, "first");
  b.node("Neg", {"a"}, {"b"}, "second");
  b.node("Abs", {"b"}, {"y"}, "third");
  b.output("y", {4});
  std::string bytes = b.bytes();
  std::string node = b.g->node(1).SerializeAsString();
  size_t at = bytes.find(node);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes[at] == '\x0a'); // field 1 (input), length-delimited
  bytes[at] = '\x0f';           // field 1 with wire type 7: not the wire format
  auto r = io::importOnnxBytes(bytes, "bad_node.onnx");
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().str(), Catch::Contains("bad_node.onnx"));
  CHECK_THAT(r.diagnostic().message, Catch::Contains("truncated or corrupt"));
  CHECK_THAT(r.diagnostic().message, Catch::Contains("node #1"));

  std::string path =
      (std::filesystem::temp_directory_path() /
       ("tmgraph-bad-node-" + std::to_string(::getpid()) + ".onnx"))
          .string();
  {
    std::ofstream f(path, std::ios::binary);
    f << bytes;
  }
  auto rf = io::importOnnx(path);
  std::filesystem::remove(path);
  REQUIRE(rf.failed());
  CHECK_THAT(rf.diagnostic().message, Catch::Contains("node #1"));
}

TEST_CASE("import: a model the split cannot walk is parsed whole and imports "
          "the same",
          "[onnx]") {
  // An unknown field encoded as a group (wire types 3 and 4, which protobuf
  // still reads) stops the importer's own walk of the wire format: the
  // model is then parsed whole, nodes included.
  ModelBuilder b(13);
  b.input("x", {4});
  b.init("w", {4}, {1, -2, 3, -4});
  b.node("Mul", {"x", "w"}, {"a"}, "scale");
  b.node("Relu", {"a"}, {"y"}, "act");
  b.output("y", {4});
  std::string plain = b.bytes();
  std::string grouped =
      plain + std::string("\xa3\x06\xa4\x06", 4); // field 100: start, end group
  onnx::ModelProto check;
  REQUIRE(check.ParseFromString(grouped));
  auto p = io::importOnnxBytes(plain, "plain.onnx");
  auto g = io::importOnnxBytes(grouped, "grouped.onnx");
  REQUIRE(p.succeeded());
  REQUIRE(g.succeeded());
  CHECK(g->module->str() == p->module->str());
  Tensor x = ramp({4});
  auto yp = run(*p->module, {x}), yg = run(*g->module, {x});
  REQUIRE(yg.size() == 1);
  CHECK(std::memcmp(yg[0].rawData(), yp[0].rawData(), yp[0].nbytes()) == 0);
  for (auto *m : {&*p, &*g}) {
    const TreeDef *names = m->module->value("onnx_node_names");
    REQUIRE(names != nullptr);
    CHECK(names->numChildren() == 2);
  }
}

namespace {

/// A model `y = (x + w) * s` with w (2048 floats, mapped when imported)
/// and s (one float, read) as external data in `dir/weights.bin`, w at
/// byte `offset` (after s and padding); the model is `dir/m.onnx`.
struct ExternalModel {
  std::filesystem::path dir;
  ModelBuilder b{13};
  std::vector<float> w = std::vector<float>(2048);
  explicit ExternalModel(const std::string &tag) {
    dir = std::filesystem::temp_directory_path() /
          ("tmgraph-external-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = float(i % 7) - 3.0f;
    b.input("x", {2048});
    b.init("w", {2048}, {});
    b.init("s", {1}, {});
    b.node("Add", {"x", "w"}, {"h"});
    b.node("Mul", {"h", "s"}, {"y"});
    b.output("y", {2048});
  }
  ~ExternalModel() { std::filesystem::remove_all(dir); }
  /// Sets initializer `i`'s external_data entries ({key, value} pairs).
  void external(int i, std::vector<std::pair<std::string, std::string>> kvs) {
    auto *t = b.g->mutable_initializer(i);
    t->clear_external_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto &[k, v] : kvs) {
      auto *e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    }
  }
  /// Writes weights.bin (s at 0, w at `offset`) and m.onnx pointing there.
  std::string write(int64_t offset = 64) {
    std::string data(size_t(offset), '\0');
    float s = 0.5f;
    std::memcpy(data.data(), &s, 4);
    data.append(reinterpret_cast<const char *>(w.data()), w.size() * 4);
    std::ofstream((dir / "weights.bin").string(), std::ios::binary) << data;
    external(0, {{"location", "weights.bin"},
                 {"offset", std::to_string(offset)},
                 {"length", std::to_string(w.size() * 4)}});
    external(1, {{"location", "weights.bin"}, {"offset", "0"}, {"length", "4"}});
    return save();
  }
  std::string save() {
    std::string path = (dir / "m.onnx").string();
    std::ofstream(path, std::ios::binary) << b.bytes();
    return path;
  }
  std::string fileBytes(const std::string &name) const {
    std::ifstream f((dir / name).string(), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  }
  /// Runs `m` on x = 1, 2, 3, ... and checks y = (x + w) * 0.5.
  void check(const TracedModule &m) const {
    Tensor x = Tensor::empty({2048});
    for (int64_t i = 0; i < 2048; ++i)
      x.data<float>()[i] = float(i);
    Tensor y = run(m, {x})[0];
    REQUIRE(y.numel() == 2048);
    for (int64_t i = 0; i < 2048; ++i)
      REQUIRE(y.data<float>()[i] == (float(i) + w[size_t(i)]) * 0.5f);
  }
};

} // namespace

TEST_CASE("import: external data is mapped from its file, not copied", "[onnx][external]") {
  for (int64_t offset : {64, 66}) { // aligned: a view of the mapping; odd: a copy
    CAPTURE(offset);
    ExternalModel em("map" + std::to_string(offset));
    std::string path = em.write(offset);
    std::string before = em.fileBytes("weights.bin");
    auto r = io::importOnnx(path);
    REQUIRE(r.succeeded());
    em.check(*r->module);
    const Tensor *w = nullptr;
    r->module->namedTensors([&](const std::string &, const Tensor &t) {
      if (t.numel() == 2048)
        w = &t;
    });
    REQUIRE(w);
    // The mapping is private: writing to the tensor leaves the file alone.
    const_cast<Tensor *>(w)->data<float>()[0] = 1e6f;
    CHECK(em.fileBytes("weights.bin") == before);
    const_cast<Tensor *>(w)->data<float>()[0] = em.w[0];
    // The tensors keep the mapping: the file may go.
    std::filesystem::remove(em.dir / "weights.bin");
    em.check(*r->module);
  }
}

TEST_CASE("import: bad external data names the initializer and the file", "[onnx][external]") {
  auto error = [](ExternalModel &em) {
    auto r = io::importOnnx(em.save());
    REQUIRE(r.failed());
    return r.diagnostic().message;
  };
  using Catch::Contains;
  ExternalModel em("errors");
  em.write();
  std::string len = std::to_string(2048 * 4);
  em.external(0, {{"location", "weights.bin"}, {"offset", "64"}, {"length", "100"}});
  CHECK_THAT(error(em), Contains("initializer 'w' of shape (2048,) (FLOAT): its external data "
                                 "holds 100 bytes, expected 8192"));
  em.external(0, {{"location", "weights.bin"}, {"offset", "128"}, {"length", len}});
  CHECK_THAT(error(em), Contains("initializer 'w': external data [128, 8320) lies beyond the "
                                 "end of") &&
                            Contains("weights.bin' (8256 bytes)"));
  em.external(0, {{"location", "weights.bin"}, {"offset", "99999"}});
  CHECK_THAT(error(em), Contains("initializer 'w': external data [99999,"));
  em.external(0, {{"location", "weights.bin"}, {"offset", "-4"}});
  CHECK_THAT(error(em), Contains("initializer 'w': external data offset '-4' is not a "
                                 "non-negative integer"));
  em.external(0, {{"location", "weights.bin"}, {"length", "12abc"}});
  CHECK_THAT(error(em), Contains("external data length '12abc' is not a non-negative integer"));
  em.external(0, {{"offset", "64"}});
  CHECK_THAT(error(em), Contains("initializer 'w': external data without a location"));
  for (const char *loc : {"../weights.bin", "/etc/passwd", "sub/../../weights.bin"}) {
    em.external(0, {{"location", loc}});
    CHECK_THAT(error(em), Contains(fmt::format("initializer 'w': external data location '{}' "
                                               "must be a relative path inside the model's "
                                               "directory",
                                               loc)));
  }
  em.external(0, {{"location", "missing.bin"}});
  CHECK_THAT(error(em), Contains("initializer 'w': its external data file '") &&
                            Contains("missing.bin': cannot open file: No such file or directory"));
  em.external(0, {{"location", "."}});
  CHECK_THAT(error(em), Contains("initializer 'w': its external data file '") &&
                            Contains("not a regular file"));

  // The key by which the importer marks raw_data left in the mapped model
  // file, written into a file by hand, is range-checked like the rest.
  ExternalModel own("inline");
  own.b.g->mutable_initializer(0)->set_raw_data(
      std::string(reinterpret_cast<const char *>(own.w.data()), own.w.size() * 4));
  own.external(1, {{"tmgraph.inline_raw_data", "1"}, {"offset", "99999"}, {"length", "4"}});
  CHECK_THAT(error(own), Contains("initializer 's': its data (4 bytes at offset 99999) lies "
                                  "beyond the end of the model file"));
}

TEST_CASE("export: external data round trip, over the very files imported",
          "[onnx][external]") {
  ExternalModel em("export");
  auto r = io::importOnnx(em.write());
  REQUIRE(r.succeeded());
  io::OnnxExportOptions eo;
  eo.externalData = "out.data";
  std::string out = (em.dir / "out.onnx").string();
  REQUIRE(io::exportOnnx(*r->module, out, eo).succeeded());
  // The side file holds w (s is below externalDataMinBytes, inline).
  CHECK(std::filesystem::file_size(em.dir / "out.data") == 2048 * 4);
  CHECK(std::filesystem::file_size(out) < 2048);
  auto back = io::importOnnx(out);
  REQUIRE(back.succeeded());
  em.check(*back->module);
  // Written again over the files `back` maps (a new file renamed over the
  // old one, never truncated under the mapping): its tensors still read,
  // and the new files read back.
  REQUIRE(io::exportOnnx(*back->module, out, eo).succeeded());
  em.check(*back->module);
  auto again = io::importOnnx(out);
  REQUIRE(again.succeeded());
  em.check(*again->module);
}

namespace {

void attrI(onnx::NodeProto *n, const char *name, int64_t v) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

/// An int64 graph input and the values it is bound to.
struct IntsIn {
  std::string name;
  std::vector<int64_t> shape, values;
};

void untypedOutput(ModelBuilder &b, int32_t type = onnx::TensorProto::FLOAT) {
  auto *o = b.g->add_output();
  o->set_name("y");
  o->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

/// Imports `op(x, ins...)` (an empty name: an input left out), where the
/// int64 graph inputs `ins` decide the output's shape and the output's
/// shape is not declared, and runs it with them bound.
Tensor runWithInts(const std::string &op, const Tensor &x, const std::vector<IntsIn> &ins,
                   std::function<void(onnx::NodeProto *)> attrs = {}) {
  ModelBuilder b(13);
  b.input("x", std::vector<int64_t>(x.shape().begin(), x.shape().end()));
  std::vector<std::string> names = {"x"};
  std::vector<Tensor> vals = {x};
  for (const IntsIn &i : ins) {
    names.push_back(i.name);
    if (i.name.empty())
      continue;
    b.input(i.name, i.shape, onnx::TensorProto::INT64);
    vals.push_back(Tensor::fromInts(i.shape, i.values, DType::Int64));
  }
  auto *n = b.node(op, names, {"y"}, "n");
  if (attrs)
    attrs(n);
  untypedOutput(b);
  auto r = b.import();
  REQUIRE(r.succeeded());
  CHECK(r->names.inputs.size() == vals.size());
  return run(*r->module, vals)[0];
}

/// runWithInts with one int64 input `k` of shape `kShape`.
Tensor runShapeIn(const std::string &op, const Tensor &x, std::vector<int64_t> kShape,
                  std::vector<int64_t> kv, std::function<void(onnx::NodeProto *)> attrs = {}) {
  return runWithInts(op, x, {{"k", kShape, kv}}, std::move(attrs));
}

Tensor iota(llvm::ArrayRef<int64_t> shape) {
  Tensor t = Tensor::empty(shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = float(i + 1);
  return t;
}

std::vector<double> valuesOf(const Tensor &t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i)
    v.push_back(t.at(i));
  return v;
}

} // namespace

TEST_CASE("import: a shape input of Reshape is read at run time; it can be bound", "[onnx]") {
  Tensor x = iota({2, 6});
  Tensor y = runShapeIn("Reshape", x, {2}, {3, -1});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({3, 4}));
  CHECK(valuesOf(y) == valuesOf(x));
  // 0 copies the input's dim unless allowzero.
  y = runShapeIn("Reshape", x, {3}, {0, -1, 2});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({2, 3, 2}));
  CHECK(runShapeIn("Reshape", iota({0, 3}), {2}, {3, 0}, [](auto *n) {
          attrI(n, "allowzero", 1);
        }).shape() == llvm::ArrayRef<int64_t>({3, 0}));
  CHECK_THROWS_WITH(runShapeIn("Reshape", x, {2}, {5, -1}),
                    Catch::Contains("reshape: cannot infer the -1"));
  CHECK_THROWS_WITH(runShapeIn("Reshape", x, {2}, {-2, 6}),
                    Catch::Contains("reshape: invalid dimension -2"));
  // Bound as a constant, the shape is folded and the output shape static.
  ModelBuilder b(13);
  b.input("x", {2, 6});
  b.input("shape", {2}, onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.output("y", {3, 4});
  io::OnnxImportOptions o;
  o.constantInputs["shape"] = Tensor::fromInts({2}, {3, -1});
  auto ok = b.import(o);
  REQUIRE(ok.succeeded());
  CHECK(ok->names.inputs == std::vector<std::string>{"x"});
  CHECK_THAT(ok->module->graph().str(), Catch::Contains("tensor.reshape(x, (3, 4)"));
}

TEST_CASE("import: Expand, Tile, Squeeze and Unsqueeze read their input at run time",
          "[onnx]") {
  Tensor x = iota({3, 1});
  // Expand broadcasts both ways: (3, 1) to (2, 1, 4) is (2, 3, 4).
  Tensor y = runShapeIn("Expand", x, {3}, {2, 1, 4});
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i)
    CHECK(y.at(i) == double(i / 4 % 3 + 1));
  CHECK(runShapeIn("Expand", x, {1}, {5}).shape() == llvm::ArrayRef<int64_t>({3, 5}));
  CHECK_THROWS_WITH(runShapeIn("Expand", x, {2}, {2, 4}), Catch::Contains("broadcast_to"));
  y = runShapeIn("Tile", iota({2, 2}), {2}, {1, 2});
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({2, 4}));
  CHECK(valuesOf(y) == std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4});
  y = runShapeIn("Tile", iota({1, 2}), {2}, {3, 1});
  CHECK(valuesOf(y) == std::vector<double>{1, 2, 1, 2, 1, 2});
  CHECK_THROWS_WITH(runShapeIn("Tile", iota({2, 2}), {2}, {-1, 2}),
                    Catch::Contains("invalid target shape"));
  y = runShapeIn("Unsqueeze", iota({2, 3}), {2}, {0, -1});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 2, 3, 1}));
  y = runShapeIn("Squeeze", iota({1, 3, 1}), {1}, {-1});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 3}));
  CHECK_THROWS_WITH(runShapeIn("Squeeze", iota({1, 3, 1}), {1}, {1}),
                    Catch::Contains("has size 3, not 1"));
}

TEST_CASE("import: reduction axes and the CumSum axis are read at run time", "[onnx]") {
  Tensor x = iota({2, 3});
  auto noKeep = [](onnx::NodeProto *n) { attrI(n, "keepdims", 0); };
  Tensor y = runShapeIn("ReduceSum", x, {1}, {1}, noKeep);
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({2}));
  CHECK(valuesOf(y) == std::vector<double>{6, 15});
  y = runShapeIn("ReduceSum", x, {1}, {-2});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 3}));
  CHECK(valuesOf(y) == std::vector<double>{5, 7, 9});
  y = runShapeIn("ReduceSum", x, {0}, {}); // no axes: every axis
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({1, 1}));
  CHECK(valuesOf(y) == std::vector<double>{21});
  y = runShapeIn("ReduceSum", x, {0}, {}, [](auto *n) { attrI(n, "noop_with_empty_axes", 1); });
  CHECK(valuesOf(y) == valuesOf(x));
  y = runShapeIn("CumSum", x, {}, {1});
  CHECK(valuesOf(y) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK_THROWS_WITH(runShapeIn("CumSum", x, {}, {2}), Catch::Contains("out of range"));
}

TEST_CASE("import: Pad reads its pads and value at run time", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {2, 2});
  b.input("pads", {4}, onnx::TensorProto::INT64);
  b.input("v", {}, onnx::TensorProto::FLOAT);
  b.node("Pad", {"x", "pads", "v"}, {"y"});
  untypedOutput(b);
  auto r = b.import();
  REQUIRE(r.succeeded());
  // (begin0, begin1, end0, end1) = (0, 1, 1, 0).
  Tensor y = run(*r->module, {iota({2, 2}), Tensor::fromInts({4}, {0, 1, 1, 0}, DType::Int64),
                              Tensor::full({}, 9.0)})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({3, 3}));
  CHECK(valuesOf(y) == std::vector<double>{9, 1, 2, 9, 3, 4, 9, 9, 9});
  CHECK_THROWS_WITH(run(*r->module, {iota({2, 2}), Tensor::fromInts({4}, {0, -3, 0, 0}, DType::Int64),
                                     Tensor::full({}, 9.0)}),
                    Catch::Contains("pad: padding"));
}

TEST_CASE("import: Slice reads its starts, ends, axes and steps at run time", "[onnx]") {
  Tensor x = iota({3, 4});
  // Rows 0..1; columns from 3 down to (but not at) -5 + 4 = -1, by 2.
  Tensor y = runWithInts("Slice", x,
                         {{"s", {2}, {0, 3}}, {"e", {2}, {2, -5}}, {"a", {2}, {0, -1}},
                          {"st", {2}, {1, -2}}});
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({2, 2}));
  CHECK(valuesOf(y) == std::vector<double>{4, 2, 8, 6});
  // Axes and steps left out; bounds past the ends are clamped.
  y = runWithInts("Slice", x, {{"s", {1}, {-2}}, {"e", {1}, {100}}});
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({2, 4}));
  CHECK(valuesOf(y) == std::vector<double>{5, 6, 7, 8, 9, 10, 11, 12});
  CHECK_THROWS_WITH(runWithInts("Slice", x,
                                {{"s", {1}, {0}}, {"e", {1}, {2}}, {"", {}, {}}, {"st", {1}, {0}}}),
                    Catch::Contains("step"));
}

TEST_CASE("import: Trilu's k and Resize's scales and sizes are read at run time", "[onnx]") {
  Tensor x = iota({3, 3});
  CHECK(valuesOf(runShapeIn("Trilu", x, {}, {1})) ==
        std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0});
  CHECK(valuesOf(runShapeIn("Trilu", x, {}, {-1}, [](auto *n) { attrI(n, "upper", 0); })) ==
        std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0});
  auto nearest = [](onnx::NodeProto *n) {
    for (auto [k, v] : {std::pair<const char *, const char *>{"coordinate_transformation_mode",
                                                               "asymmetric"},
                        {"nearest_mode", "floor"}}) {
      auto *a = n->add_attribute();
      a->set_name(k);
      a->set_type(onnx::AttributeProto::STRING);
      a->set_s(v);
    }
  };
  const std::vector<double> up = {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4};
  Tensor y = runWithInts("Resize", iota({1, 1, 2, 2}),
                         {{"", {}, {}}, {"", {}, {}}, {"sz", {4}, {1, 1, 4, 4}}}, nearest);
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 4, 4}));
  CHECK(valuesOf(y) == up);
  // Scales: a float graph input.
  ModelBuilder b(13);
  b.input("x", {1, 1, 2, 2});
  b.input("sc", {4});
  nearest(b.node("Resize", {"x", "", "sc"}, {"y"}));
  untypedOutput(b);
  auto r = b.import();
  REQUIRE(r.succeeded());
  y = run(*r->module, {iota({1, 1, 2, 2}), Tensor::fromFloats({4}, {1, 1, 2, 2})})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 4, 4}));
  CHECK(valuesOf(y) == up);
  CHECK_THROWS_WITH(run(*r->module, {iota({1, 1, 2, 2}), Tensor::fromFloats({4}, {1, 1, -2, 2})}),
                    Catch::Contains("not a positive size factor"));
}

TEST_CASE("import: Range and ConstantOfShape read their inputs at run time", "[onnx]") {
  ModelBuilder b(13);
  for (const char *n : {"s", "l", "d"})
    b.input(n, {}, onnx::TensorProto::INT64);
  b.node("Range", {"s", "l", "d"}, {"y"});
  untypedOutput(b, onnx::TensorProto::INT64);
  auto r = b.import();
  REQUIRE(r.succeeded());
  auto i64 = [](int64_t v) { return Tensor::fromInts({}, {v}, DType::Int64); };
  Tensor y = run(*r->module, {i64(10), i64(1), i64(-3)})[0];
  CHECK(y.dtype() == DType::Int64);
  CHECK(valuesOf(y) == std::vector<double>{10, 7, 4});
  CHECK_THROWS_WITH(run(*r->module, {i64(0), i64(3), i64(0)}), Catch::Contains("non-zero"));

  ModelBuilder c(13);
  c.input("shape", {2}, onnx::TensorProto::INT64);
  auto *n = c.node("ConstantOfShape", {"shape"}, {"y"});
  auto *a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(2.5f);
  untypedOutput(c);
  r = c.import();
  REQUIRE(r.succeeded());
  y = run(*r->module, {Tensor::fromInts({2}, {2, 3}, DType::Int64)})[0];
  CHECK(y.shape() == llvm::ArrayRef<int64_t>({2, 3}));
  CHECK(valuesOf(y) == std::vector<double>(6, 2.5));
  CHECK_THROWS_WITH(run(*r->module, {Tensor::fromInts({2}, {2, -3}, DType::Int64)}),
                    Catch::Contains("full: invalid shape"));
}

TEST_CASE("import: Split reads its sizes at run time", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {2, 5});
  b.input("sizes", {2}, onnx::TensorProto::INT64);
  attrI(b.node("Split", {"x", "sizes"}, {"y0", "y1"}), "axis", 1);
  for (const char *o : {"y0", "y1"}) {
    auto *v = b.g->add_output();
    v->set_name(o);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  auto r = b.import();
  REQUIRE(r.succeeded());
  auto ys = run(*r->module, {iota({2, 5}), Tensor::fromInts({2}, {2, 3}, DType::Int64)});
  REQUIRE(ys.size() == 2);
  CHECK(ys[0].shape() == llvm::ArrayRef<int64_t>({2, 2}));
  CHECK(valuesOf(ys[0]) == std::vector<double>{1, 2, 6, 7});
  CHECK(valuesOf(ys[1]) == std::vector<double>{3, 4, 5, 8, 9, 10});
  ys = run(*r->module, {iota({2, 5}), Tensor::fromInts({2}, {0, 5}, DType::Int64)});
  CHECK(ys[0].shape() == llvm::ArrayRef<int64_t>({2, 0}));
  CHECK_THROWS_WITH(run(*r->module, {iota({2, 5}), Tensor::fromInts({2}, {-1, 6}, DType::Int64)}),
                    Catch::Contains("not ascending"));
}

TEST_CASE("import: a shape computed from a symbolic dimension is read at run time", "[onnx]") {
  // y = reshape(x, concat(unsqueeze(shape(x)[0]), [-1])) and
  // z = reshape(x, [0, 2, -1]) with x of shape (N, 3, 4), N symbolic.
  ModelBuilder b(13);
  b.input("x", {1, 3, 4});
  b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  b.initInts("zero", {0});
  b.initInts("minus1", {-1});
  b.initInts("zt", {0, 2, -1});
  b.g->mutable_initializer(0)->clear_dims(); // a 0-d index
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  b.node("Unsqueeze", {"n", "minus1"}, {"n1"}); // axes [-1]
  attrI(b.node("Concat", {"n1", "minus1"}, {"t"}), "axis", 0);
  b.node("Reshape", {"x", "t"}, {"y"});
  b.node("Reshape", {"x", "zt"}, {"z"});
  for (const char *o : {"y", "z"}) {
    auto *v = b.g->add_output();
    v->set_name(o);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  auto r = b.import();
  REQUIRE(r.succeeded());
  for (int64_t n : {2, 5}) {
    auto ys = run(*r->module, {iota({n, 3, 4})});
    CHECK(ys[0].shape() == llvm::ArrayRef<int64_t>({n, 12}));
    CHECK(ys[1].shape() == llvm::ArrayRef<int64_t>({n, 2, 6}));
    CHECK(valuesOf(ys[0]) == valuesOf(iota({n, 3, 4})));
  }
}

TEST_CASE("import: shape arithmetic is folded at import time", "[onnx]") {
  // y = reshape(x, concat(shape(x)[0:1], [-1])): what exporters emit for a
  // flatten; no Shape/Concat survives in the graph.
  ModelBuilder b(13);
  b.input("x", {2, 3, 4});
  b.initInts("zero", {0});
  b.initInts("minus1", {-1});
  b.node("Shape", {"x"}, {"s"});
  auto *ga = b.node("Gather", {"s", "zero"}, {"n"});
  (void)ga;
  b.node("Concat", {"n", "minus1"}, {"target"})->add_attribute()->set_name("axis");
  b.g->mutable_node(2)->mutable_attribute(0)->set_type(onnx::AttributeProto::INT);
  b.g->mutable_node(2)->mutable_attribute(0)->set_i(0);
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y", {2, 12});
  auto r = b.import();
  REQUIRE(r.succeeded());
  std::string text = r->module->graph().str();
  CHECK_THAT(text, Catch::Contains("tensor.reshape(x, (2, 12)"));
  CHECK_THAT(text, !Catch::Contains("concat"));
}

TEST_CASE("export: a hierarchical traced module goes out and comes back", "[onnx]") {
  // Net: y = relu(block(x)) + x, block: conv 3x3 then sigmoid.
  auto net = std::make_unique<Module>("Net");
  auto blk = std::make_unique<Module>("Block");
  blk->registerParameter("weight", Tensor::randn({3, 3, 3, 3}, 1));
  blk->registerParameter("bias", Tensor::randn({3}, 2));
  net->registerModule("block", std::move(blk));
  auto tm = TracedModule::fromModule(std::move(net));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 6, 6}}});
  Node *block = b.getAttr(b.self(), "block");
  Node *h = b.callModule(
      block, {b.arg(0)}, {},
      [](GraphBuilder &sb) {
        Node *w = sb.getAttr(sb.self(), "weight"), *bi = sb.getAttr(sb.self(), "bias");
        Node *c = sb.callFunction("nn.conv2d", {sb.arg(0), w, bi}, {{"padding", 1}});
        sb.setOutputs(sb.callFunction("nn.sigmoid", {c}));
      },
      {"x"});
  Node *y = b.callMethod(b.callFunction("nn.relu", {h}), "__add__", {b.arg(0)});
  b.finish(b.callFunction("math.mean", {y}, {{"axis", 1}, {"keepdims", true}}));
  auto bytes = io::exportOnnxBytes(*tm);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto mp;
  REQUIRE(mp.ParseFromString(*bytes));
  CHECK_NOTHROW(onnx::checker::check_model(mp));
  CHECK(mp.graph().input(0).name() == "x");
  bool named = false;
  for (const auto &i : mp.graph().initializer())
    named |= i.name() == "block.weight";
  CHECK(named);
  auto back = io::importOnnxBytes(*bytes, "exported.onnx");
  REQUIRE(back.succeeded());
  Tensor x = Tensor::randn({1, 3, 6, 6}, 3);
  Tensor want = run(*tm, {x})[0], got = run(*back->module, {x})[0];
  REQUIRE(got.shape() == want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    CHECK(got.at(i) == Approx(want.at(i)).margin(1e-6));
}

TEST_CASE("export: fused conv2d_act and linear_act go out as two ONNX ops", "[onnx]") {
  // What `-p optimize` (fuse-conv-activation) leaves: every activation.
  for (const char *act : {"none", "relu", "relu6", "sigmoid", "silu", "hardswish", "hardsigmoid",
                          "gelu", "gelu_tanh"}) {
    INFO(act);
    auto net = std::make_unique<Module>("Net");
    net->registerParameter("w", Tensor::randn({4, 2, 3, 3}, 1));
    net->registerParameter("b", Tensor::randn({4}, 2));
    net->registerParameter("lw", Tensor::randn({5, 4}, 3));
    net->registerParameter("lb", Tensor::randn({5}, 4));
    auto tm = TracedModule::fromModule(std::move(net));
    GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 2, 5, 5}}});
    Node *w = b.getAttr(b.self(), "w"), *bi = b.getAttr(b.self(), "b");
    Node *c = b.callFunction("nn.conv2d_act", {b.arg(0), w, bi},
                             {{"padding", 1}, {"stride", 2}, {"activation", std::string(act)}});
    Node *m = b.callFunction("math.mean", {c}, {{"axis", Arg::tuple({2, 3})}});
    Node *lw = b.getAttr(b.self(), "lw"), *lb = b.getAttr(b.self(), "lb");
    b.finish(b.callFunction("nn.linear_act", {m, lw, lb}, {{"activation", std::string(act)}}));
    auto bytes = io::exportOnnxBytes(*tm);
    REQUIRE(bytes.succeeded());
    onnx::ModelProto mp;
    REQUIRE(mp.ParseFromString(*bytes));
    CHECK_NOTHROW(onnx::checker::check_model(mp));
    auto back = io::importOnnxBytes(*bytes, "fused.onnx");
    REQUIRE(back.succeeded());
    Tensor x = Tensor::randn({1, 2, 5, 5}, 5);
    Tensor want = run(*tm, {x})[0], got = run(*back->module, {x})[0];
    REQUIRE(got.shape() == want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      CHECK(got.at(i) == Approx(want.at(i)).margin(1e-5));
  }
}

TEST_CASE("export: scaled_dot_product_attention goes out as the ops it fuses",
          "[onnx]") {
  // What `-p optimize` (fuse-attention) leaves: an explicit scale and the
  // default 1 / sqrt(E); 4-D and 2-D operands.
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"q", Shape{1, 2, 5, 8}},
                                           {"k", Shape{1, 2, 7, 8}},
                                           {"v", Shape{1, 2, 7, 3}}});
  Node *y1 = b.callFunction("nn.scaled_dot_product_attention",
                            {b.arg(0), b.arg(1), b.arg(2), 0.3});
  Node *q2 = b.callFunction("reshape", {b.arg(0), Arg::ints({10, 8})});
  Node *k2 = b.callFunction("reshape", {b.arg(1), Arg::ints({14, 8})});
  Node *v2 = b.callFunction("reshape", {b.arg(2), Arg::ints({14, 3})});
  Node *y2 = b.callFunction("nn.scaled_dot_product_attention", {q2, k2, v2});
  b.finish(Arg::tuple({y1, y2}));
  auto bytes = io::exportOnnxBytes(*tm);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto mp;
  REQUIRE(mp.ParseFromString(*bytes));
  CHECK_NOTHROW(onnx::checker::check_model(mp));
  size_t softmaxes = 0;
  for (const auto &n : mp.graph().node())
    softmaxes += n.op_type() == "Softmax";
  CHECK(softmaxes == 2);
  auto back = io::importOnnxBytes(*bytes, "attention.onnx");
  REQUIRE(back.succeeded());
  std::vector<Tensor> xs = {Tensor::randn({1, 2, 5, 8}, 1),
                            Tensor::randn({1, 2, 7, 8}, 2),
                            Tensor::randn({1, 2, 7, 3}, 3)};
  auto want = run(*tm, xs), got = run(*back->module, xs);
  REQUIRE(got.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    REQUIRE(got[k].shape() == want[k].shape());
    for (int64_t i = 0; i < want[k].numel(); ++i)
      CHECK(got[k].at(i) == Approx(want[k].at(i)).margin(1e-5));
  }
}

TEST_CASE("export: ops without an ONNX form are errors naming the expr", "[onnx]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{4}}});
  b.finish(b.callFunction("elemwise.mod", {b.arg(0), 2.0}));
  auto r = io::exportOnnxBytes(*tm);
  REQUIRE(r.failed());
  CHECK(r.diagnostic().loc.exprId >= 0);
  CHECK_THAT(r.diagnostic().message, Catch::Contains("modulo"));
}

TEST_CASE("export: gelu and gelu_tanh go out as their opset-17 formulas", "[onnx]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3, 7}}});
  Node *g = b.callFunction("nn.gelu", {b.arg(0)});
  Node *t = b.callFunction("nn.gelu_tanh", {b.arg(0)});
  b.finish(Arg::tuple({g, t}));
  auto bytes = io::exportOnnxBytes(*tm);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto mp;
  REQUIRE(mp.ParseFromString(*bytes));
  CHECK_NOTHROW(onnx::checker::check_model(mp));
  auto back = io::importOnnxBytes(*bytes, "gelu.onnx");
  REQUIRE(back.succeeded());
  Tensor x = Tensor::randn({3, 7}, 11);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] *= 3.0f; // into the tails, where the forms differ most
  auto want = run(*tm, {x}), got = run(*back->module, {x});
  REQUIRE(got.size() == 2);
  for (size_t k = 0; k < 2; ++k)
    for (int64_t i = 0; i < x.numel(); ++i)
      CHECK(got[k].at(i) == Approx(want[k].at(i)).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("readOnnxTensor reads raw and typed TensorProto data", "[onnx]") {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::DOUBLE);
  t.add_dims(2);
  t.add_double_data(1.5);
  t.add_double_data(-2.25);
  std::string path = "onnx_tensor_test.pb";
  {
    std::string s;
    t.SerializeToString(&s);
    FILE *f = std::fopen(path.c_str(), "wb");
    std::fwrite(s.data(), 1, s.size(), f);
    std::fclose(f);
  }
  auto r = io::readOnnxTensor(path);
  REQUIRE(r.succeeded());
  CHECK(r->dtype() == DType::Float64);
  CHECK(r->at(0) == 1.5);
  CHECK(r->at(1) == -2.25);
  CHECK(*io::onnxTensorTypeName(path) == "DOUBLE");
  std::remove(path.c_str());
}

namespace {

void attrS(onnx::NodeProto *n, const char *name, const std::string &v) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

/// Imports `b`, runs it on `in` and exports it back: both runs' outputs.
std::pair<std::vector<Tensor>, std::vector<Tensor>> runAndRoundTrip(const ModelBuilder &b,
                                                                     std::vector<Tensor> in) {
  auto r = b.import();
  REQUIRE(r.succeeded());
  std::vector<Tensor> got = run(*r->module, in);
  auto bytes = io::exportOnnxBytes(*r->module);
  INFO((bytes.failed() ? bytes.diagnostic().message : std::string()));
  REQUIRE(bytes.succeeded());
  auto back = io::importOnnxBytes(*bytes, "back.onnx");
  REQUIRE(back.succeeded());
  return {got, run(*back->module, in)};
}

} // namespace

TEST_CASE("import: TopK along a leading axis, smallest first", "[onnx]") {
  ModelBuilder b(11);
  b.input("x", {3, 2});
  b.initInts("k", {2});
  auto *n = b.node("TopK", {"x", "k"}, {"v", "i"});
  attrI(n, "axis", 0);
  attrI(n, "largest", 0);
  b.output("v", {2, 2});
  b.output("i", {2, 2}, onnx::TensorProto::INT64);
  Tensor x = Tensor::fromFloats({3, 2}, {5, 1, 2, 4, 3, 0});
  auto [got, back] = runAndRoundTrip(b, {x});
  // Column 0: 2 (row 1), 3 (row 2); column 1: 0 (row 2), 1 (row 0).
  const double v[] = {2, 0, 3, 1}, i[] = {1, 2, 2, 0};
  for (int k = 0; k < 4; ++k) {
    CHECK(got[0].at(k) == v[k]);
    CHECK(got[1].at(k) == i[k]);
    CHECK(back[0].at(k) == v[k]);
    CHECK(back[1].at(k) == i[k]);
  }
}

TEST_CASE("import: OneHot with an axis and (off, on) values", "[onnx]") {
  ModelBuilder b(11);
  b.input("idx", {2}, onnx::TensorProto::INT64);
  b.init("depth", {}, {3});
  b.init("values", {2}, {2, 5});
  attrI(b.node("OneHot", {"idx", "depth", "values"}, {"y"}), "axis", 0);
  b.output("y", {3, 2});
  auto [got, back] = runAndRoundTrip(b, {Tensor::fromInts({2}, {-1, 1})});
  // y[c, j] = 5 where c is index j (-1 wraps to 2), else 2.
  const double want[] = {2, 2, 2, 5, 5, 2};
  REQUIRE(got[0].shape() == llvm::ArrayRef<int64_t>({3, 2}));
  for (int k = 0; k < 6; ++k) {
    CHECK(got[0].at(k) == want[k]);
    CHECK(back[0].at(k) == want[k]);
  }
}

TEST_CASE("import: Einsum, Det, GatherND, ReverseSequence and LRN", "[onnx]") {
  ModelBuilder b(16);
  b.input("a", {2, 2});
  b.input("c", {2, 2});
  attrS(b.node("Einsum", {"a", "c"}, {"e"}), "equation", "ij,jk->ik");
  b.node("Det", {"a"}, {"d"});
  b.initInts("gi", {1, 0});
  b.g->mutable_initializer(0)->clear_dims();
  b.g->mutable_initializer(0)->add_dims(2);
  b.g->mutable_initializer(0)->add_dims(1);
  b.node("GatherND", {"a", "gi"}, {"g"});
  b.initInts("lens", {2, 1});
  attrI(b.node("ReverseSequence", {"a", "lens"}, {"r"}), "batch_axis", 0);
  attrI(b.g->mutable_node(3), "time_axis", 1);
  b.node("Unsqueeze", {"a", "ax"}, {"a4"});
  b.initInts("ax", {0, 3});
  attrI(b.node("LRN", {"a4"}, {"l"}), "size", 1);
  b.output("e", {2, 2});
  b.output("d", {});
  b.output("g", {2, 2});
  b.output("r", {2, 2});
  b.output("l", {1, 2, 2, 1});
  Tensor a = Tensor::fromFloats({2, 2}, {1, 2, 3, 4}), c = Tensor::fromFloats({2, 2}, {5, 6, 7, 8});
  auto [got, back] = runAndRoundTrip(b, {a, c});
  for (const auto &outs : {got, back}) {
    CHECK(outs[0].at(3) == 50);
    CHECK(outs[1].at(0) == Approx(-2));
    CHECK(outs[2].at(0) == 3); // row 1 first
    CHECK(outs[3].at(0) == 2); // row 0 reversed over 2 entries
    CHECK(outs[3].at(2) == 3); // row 1 over 1 entry: unchanged
    // size 1, bias 1, alpha 1e-4, beta 0.75: x / (1 + 1e-4 x^2)^0.75.
    CHECK(outs[4].at(3) == Approx(4 / std::pow(1 + 1e-4 * 16, 0.75)));
  }
}

TEST_CASE("import: Compress with a known condition, MaxUnpool and GridSample", "[onnx]") {
  ModelBuilder b(16);
  b.input("x", {1, 1, 2, 2});
  auto *cond = b.initInts("cond", {0, 1});
  cond->set_data_type(onnx::TensorProto::BOOL);
  cond->clear_int64_data();
  cond->add_int32_data(0);
  cond->add_int32_data(1);
  attrI(b.node("Compress", {"x", "cond"}, {"cx"}), "axis", 3);
  auto *ind = b.initInts("ind", {0, 3, 8, 15});
  ind->clear_dims();
  for (int64_t d : {1, 1, 2, 2})
    ind->add_dims(d);
  auto *un = b.node("MaxUnpool", {"x", "ind"}, {"u"});
  auto *ks = un->add_attribute();
  ks->set_name("kernel_shape");
  ks->set_type(onnx::AttributeProto::INTS);
  ks->add_ints(2);
  ks->add_ints(2);
  auto *st = un->add_attribute();
  st->set_name("strides");
  st->set_type(onnx::AttributeProto::INTS);
  st->add_ints(2);
  st->add_ints(2);
  b.init("grid", {1, 1, 1, 2}, {0, 0});
  attrI(b.node("GridSample", {"x", "grid"}, {"s"}), "align_corners", 1);
  b.output("cx", {1, 1, 2, 1});
  b.output("u", {1, 1, 4, 4});
  b.output("s", {1, 1, 1, 1});
  Tensor x = Tensor::fromFloats({1, 1, 2, 2}, {1, 2, 3, 4});
  auto [got, back] = runAndRoundTrip(b, {x});
  for (const auto &outs : {got, back}) {
    REQUIRE(outs[0].shape() == llvm::ArrayRef<int64_t>({1, 1, 2, 1}));
    CHECK(outs[0].at(0) == 2);
    CHECK(outs[0].at(1) == 4);
    REQUIRE(outs[1].shape() == llvm::ArrayRef<int64_t>({1, 1, 4, 4}));
    CHECK(outs[1].at(3) == 2);
    CHECK(outs[1].at(15) == 4);
    CHECK(outs[1].at(1) == 0);
    CHECK(outs[2].at(0) == Approx(2.5));
  }
}

TEST_CASE("import: NonMaxSuppression reads its limits at run time", "[onnx]") {
  ModelBuilder b(11);
  b.input("boxes", {1, 6, 4});
  b.input("scores", {1, 1, 6});
  b.input("max", {1}, onnx::TensorProto::INT64);
  b.input("iou", {1});
  b.node("NonMaxSuppression", {"boxes", "scores", "max", "iou"}, {"sel"});
  b.output("sel", {3, 3}, onnx::TensorProto::INT64);
  // The ONNX suppress_by_IOU example.
  Tensor boxes = Tensor::fromFloats({1, 6, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                                0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101});
  Tensor scores = Tensor::fromFloats({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  Tensor iou = Tensor::fromFloats({1}, {0.5f});
  auto [got, back] = runAndRoundTrip(b, {boxes, scores, Tensor::fromInts({1}, {3}), iou});
  const double want[] = {0, 0, 3, 0, 0, 0, 0, 0, 5};
  for (const auto &outs : {got, back}) {
    REQUIRE(outs[0].shape() == llvm::ArrayRef<int64_t>({3, 3}));
    for (int k = 0; k < 9; ++k)
      CHECK(outs[0].at(k) == want[k]);
  }
  // At most 2 boxes per class, given at run time.
  std::vector<Tensor> two = runAndRoundTrip(b, {boxes, scores, Tensor::fromInts({1}, {2}), iou}).first;
  CHECK(two[0].dim(0) == 2);
}

namespace {

/// A graph output `name` with a dtype and no declared shape.
void untypedOut(ModelBuilder &b, const char *name, int32_t type = onnx::TensorProto::FLOAT) {
  auto *o = b.g->add_output();
  o->set_name(name);
  o->mutable_type()->mutable_tensor_type()->set_elem_type(type);
}

void attrInts(onnx::NodeProto *n, const char *name, std::vector<int64_t> v) {
  auto *a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v)
    a->add_ints(x);
}

} // namespace

TEST_CASE("import: TopK reads K at run time", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {2, 4});
  b.input("k", {1}, onnx::TensorProto::INT64);
  b.node("TopK", {"x", "k"}, {"v", "i"});
  untypedOut(b, "v");
  untypedOut(b, "i", onnx::TensorProto::INT64);
  Tensor x = Tensor::fromFloats({2, 4}, {3, 1, 4, 1, 5, 9, 2, 6});
  auto r = b.import();
  REQUIRE(r.succeeded());
  auto outs = run(*r->module, {x, Tensor::fromInts({1}, {2})});
  // Row 0: 4 (col 2), 3 (col 0); row 1: 9 (col 1), 6 (col 3).
  REQUIRE(outs[0].shape() == llvm::ArrayRef<int64_t>({2, 2}));
  CHECK(valuesOf(outs[0]) == std::vector<double>{4, 3, 9, 6});
  CHECK(valuesOf(outs[1]) == std::vector<double>{2, 0, 1, 3});
  Tensor v3 = run(*r->module, {x, Tensor::fromInts({1}, {3})})[0];
  CHECK(valuesOf(v3) == std::vector<double>{4, 3, 1, 9, 6, 5});
  CHECK_THROWS_WITH(run(*r->module, {x, Tensor::fromInts({1}, {-1})}),
                    Catch::Contains("topk: k = -1 is out of range"));
  CHECK_THROWS_WITH(run(*r->module, {x, Tensor::fromInts({2}, {1, 2})}),
                    Catch::Contains("input 'k': dim 0 is 1 in the graph, got 2"));
}

TEST_CASE("import: OneHot reads its depth and values at run time", "[onnx]") {
  ModelBuilder b(11);
  b.input("idx", {3}, onnx::TensorProto::INT64);
  b.input("depth", {}, onnx::TensorProto::INT64);
  b.input("vals", {2});
  b.node("OneHot", {"idx", "depth", "vals"}, {"y"});
  untypedOut(b, "y");
  auto r = b.import();
  REQUIRE(r.succeeded());
  Tensor idx = Tensor::fromInts({3}, {0, 2, -1}), vals = Tensor::fromFloats({2}, {1, 5});
  auto i64 = [](int64_t v) { return Tensor::fromInts({}, {v}); };
  // off 1, on 5; -1 wraps to depth - 1.
  Tensor y = run(*r->module, {idx, i64(3), vals})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({3, 3}));
  CHECK(valuesOf(y) == std::vector<double>{5, 1, 1, 1, 1, 5, 1, 1, 5});
  // Depth 4: -1 is class 3, and the values change per run.
  y = run(*r->module, {idx, i64(4), Tensor::fromFloats({2}, {0, 2})})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({3, 4}));
  CHECK(valuesOf(y) == std::vector<double>{2, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 2});
  CHECK_THROWS_WITH(run(*r->module, {idx, i64(0), vals}),
                    Catch::Contains("one_hot: num_classes must be positive, got 0"));
}

namespace {

/// The ONNX MaxUnpool example: x (1, 1, 2, 2) = 5..8 at flat indices
/// 5, 7, 13 and 15 of the (1, 1, 4, 4) the pooling formula gives; the
/// output_shape an int64 graph input, or the constant `shape`.
ModelBuilder unpoolModel(std::optional<std::vector<int64_t>> shape) {
  ModelBuilder b(11);
  b.input("x", {1, 1, 2, 2});
  auto *ind = b.initInts("ind", {5, 7, 13, 15});
  ind->clear_dims();
  for (int64_t d : {1, 1, 2, 2})
    ind->add_dims(d);
  if (shape)
    b.initInts("os", *shape);
  else
    b.input("os", {4}, onnx::TensorProto::INT64);
  auto *n = b.node("MaxUnpool", {"x", "ind", "os"}, {"y"});
  attrInts(n, "kernel_shape", {2, 2});
  attrInts(n, "strides", {2, 2});
  untypedOut(b, "y");
  return b;
}

} // namespace

TEST_CASE("import: MaxUnpool's output_shape pads the pooling formula's shape, read at run "
          "time", "[onnx]") {
  auto r = unpoolModel(std::nullopt).import();
  REQUIRE(r.succeeded());
  Tensor x = Tensor::fromFloats({1, 1, 2, 2}, {5, 6, 7, 8});
  // Indices address the 4x4 shape: (1, 1), (1, 3), (3, 1), (3, 3); in the
  // 5x5 output these are flat 6, 8, 16 and 18 (ONNX's reference result).
  Tensor y = run(*r->module, {x, Tensor::fromInts({4}, {1, 1, 5, 5})})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 5, 5}));
  std::vector<double> want(25, 0);
  want[6] = 5, want[8] = 6, want[16] = 7, want[18] = 8;
  CHECK(valuesOf(y) == want);
  y = run(*r->module, {x, Tensor::fromInts({4}, {1, 1, 4, 4})})[0];
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 4, 4}));
  std::vector<double> same(16, 0);
  same[5] = 5, same[7] = 6, same[13] = 7, same[15] = 8;
  CHECK(valuesOf(y) == same);
  CHECK_THROWS_WITH(run(*r->module, {x, Tensor::fromInts({4}, {1, 1, 3, 3})}),
                    Catch::Contains("reshape: cannot reshape input (1, 1, 4, 4)"));
  // Known at import: the same padding, checked there.
  auto [got, back] = runAndRoundTrip(unpoolModel(std::vector<int64_t>{1, 1, 5, 5}), {x});
  CHECK(valuesOf(got[0]) == want);
  CHECK(valuesOf(back[0]) == want);
  auto small = unpoolModel(std::vector<int64_t>{1, 1, 3, 3}).import();
  REQUIRE(small.failed());
  CHECK_THAT(small.diagnostic().message, Catch::Contains("smaller than the unpooled shape"));
}

namespace {

/// MaxPool (Y, Indices) of a (1, C, H, W) input with 2x2 windows.
ModelBuilder poolIndicesModel(std::vector<int64_t> shape, std::vector<int64_t> pads,
                              int64_t storageOrder,
                              int32_t type = onnx::TensorProto::FLOAT) {
  ModelBuilder b(12);
  b.input("x", shape, type);
  auto *n = b.node("MaxPool", {"x"}, {"y", "i"});
  attrInts(n, "kernel_shape", {2, 2});
  attrInts(n, "pads", pads);
  attrI(n, "storage_order", storageOrder);
  untypedOut(b, "y", type);
  untypedOut(b, "i", onnx::TensorProto::INT64);
  return b;
}

} // namespace

TEST_CASE("import: MaxPool's Indices output", "[onnx]") {
  // Channel 0 [[1, 5, 2], [7, 3, 9], [4, 8, 6]]; channel 1 [[9, 1, 1],
  // [1, 1, 1], [1, 1, 2]], its indices offset by 9; ties take the first.
  Tensor x = Tensor::fromFloats({1, 2, 3, 3}, {1, 5, 2, 7, 3, 9, 4, 8, 6,  //
                                               9, 1, 1, 1, 1, 1, 1, 1, 2});
  auto r = poolIndicesModel({1, 2, 3, 3}, {0, 0, 0, 0}, 0).import();
  REQUIRE(r.succeeded());
  auto outs = run(*r->module, {x});
  REQUIRE(outs[1].shape() == llvm::ArrayRef<int64_t>({1, 2, 2, 2}));
  CHECK(outs[1].dtype() == DType::Int64);
  CHECK(valuesOf(outs[0]) == std::vector<double>{7, 9, 8, 9, 9, 1, 1, 2});
  CHECK(valuesOf(outs[1]) == std::vector<double>{3, 5, 7, 5, 9, 10, 12, 17});
  // Column-major: h + 3 w.
  r = poolIndicesModel({1, 2, 3, 3}, {0, 0, 0, 0}, 1).import();
  REQUIRE(r.succeeded());
  CHECK(valuesOf(run(*r->module, {x})[1]) ==
        std::vector<double>{1, 7, 5, 7, 9, 12, 10, 17});
  // Padding never wins, even over negative values: [[-1, -2], [-3, -4]]
  // padded by 1 gives a 3x3 output.
  r = poolIndicesModel({1, 1, 2, 2}, {1, 1, 1, 1}, 0).import();
  REQUIRE(r.succeeded());
  outs = run(*r->module, {Tensor::fromFloats({1, 1, 2, 2}, {-1, -2, -3, -4})});
  CHECK(valuesOf(outs[0]) == std::vector<double>{-1, -1, -2, -1, -1, -2, -3, -3, -4});
  CHECK(valuesOf(outs[1]) == std::vector<double>{0, 0, 1, 0, 0, 1, 2, 2, 3});
  auto bad = poolIndicesModel({1, 1, 2, 2}, {0, 0, 0, 0}, 0, onnx::TensorProto::INT8).import();
  REQUIRE(bad.failed());
  CHECK_THAT(bad.diagnostic().message, Catch::Contains("needs a float input"));
}

TEST_CASE("import: QuantizeLinear and DequantizeLinear, per tensor and per axis", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {1, 2, 3});
  b.input("s", {2});
  b.input("z", {2}, onnx::TensorProto::UINT8);
  b.node("QuantizeLinear", {"x", "s", "z"}, {"q"});
  b.node("DequantizeLinear", {"q", "s", "z"}, {"d"});
  untypedOut(b, "q", onnx::TensorProto::UINT8);
  untypedOut(b, "d");
  auto r = b.import();
  REQUIRE(r.succeeded());
  Tensor x = Tensor::fromFloats({1, 2, 3}, {0.5f, 1.5f, -3.0f, 2.0f, 1000.0f, 2.5f});
  Tensor s = Tensor::fromFloats({2}, {1.0f, 0.5f});
  Tensor z = Tensor::fromInts({2}, {10, 0}, DType::UInt8);
  auto outs = run(*r->module, {x, s, z});
  REQUIRE(outs[0].dtype() == DType::UInt8);
  // Channel 0 (scale 1, zero point 10): round-half-even(0.5, 1.5, -3) + 10.
  // Channel 1 (scale 0.5, zero point 0): 4, 2000 saturates to 255, 5.
  CHECK(valuesOf(outs[0]) == std::vector<double>{10, 12, 7, 4, 255, 5});
  CHECK(valuesOf(outs[1]) == std::vector<double>{0, 2, -3, 2, 127.5, 2.5});
}

TEST_CASE("import: DynamicQuantizeLinear", "[onnx]") {
  ModelBuilder b(13);
  b.input("x", {4});
  b.node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
  untypedOut(b, "y", onnx::TensorProto::UINT8);
  untypedOut(b, "s");
  untypedOut(b, "z", onnx::TensorProto::UINT8);
  auto r = b.import();
  REQUIRE(r.succeeded());
  auto outs = run(*r->module, {Tensor::fromFloats({4}, {-1.0f, 0.0f, 1.0f, 1.55f})});
  // Range [-1, 1.55]: scale 2.55 / 255 = 0.01, zero point round(1 / 0.01) = 100.
  CHECK(outs[1].at(0) == Approx(0.01).epsilon(1e-6));
  CHECK(valuesOf(outs[2]) == std::vector<double>{100});
  CHECK(valuesOf(outs[0]) == std::vector<double>{0, 100, 200, 255});
}

namespace {

/// A typed graph input and the value it is bound to.
struct TypedIn {
  std::string name;
  int32_t type;
  Tensor value;
};

/// Imports the one-node model `op(ins...)` with output y of dtype `outType`
/// (shape not declared) and runs it on the inputs' values.
Tensor runTyped(int64_t opset, const std::string &op, const std::vector<TypedIn> &ins,
                int32_t outType, std::function<void(onnx::NodeProto *)> attrs = {}) {
  ModelBuilder b(opset);
  std::vector<std::string> names;
  std::vector<Tensor> vals;
  for (const TypedIn &i : ins) {
    names.push_back(i.name);
    b.input(i.name, std::vector<int64_t>(i.value.shape().begin(), i.value.shape().end()), i.type);
    vals.push_back(i.value);
  }
  auto *n = b.node(op, names, {"y"}, "n");
  if (attrs)
    attrs(n);
  untypedOut(b, "y", outType);
  auto r = b.import();
  INFO((r.failed() ? r.diagnostic().message : std::string()));
  REQUIRE(r.succeeded());
  return run(*r->module, vals)[0];
}

constexpr int32_t kU8 = onnx::TensorProto::UINT8, kI8 = onnx::TensorProto::INT8,
                  kI32 = onnx::TensorProto::INT32, kF32 = onnx::TensorProto::FLOAT;

// Shared operands of the MatMulInteger and QLinearMatMul tests: uint8 A with
// a per-row zero point, int8 B with a per-column zero point.
const std::vector<TypedIn> &mmA() {
  static const std::vector<TypedIn> v = {
      {"a", kU8, Tensor::fromInts({2, 3}, {10, 20, 30, 255, 0, 128}, DType::UInt8)},
      {"a_zero_point", kU8, Tensor::fromInts({2}, {10, 128}, DType::UInt8)}};
  return v;
}
const std::vector<TypedIn> &mmB() {
  static const std::vector<TypedIn> v = {
      {"b", kI8, Tensor::fromInts({3, 2}, {-128, 127, 1, -1, 0, 5}, DType::Int8)},
      {"b_zero_point", kI8, Tensor::fromInts({2}, {-128, 3}, DType::Int8)}};
  return v;
}

// Shared operands of the ConvInteger and QLinearConv tests: int8 x with a
// scalar zero point, int8 w (2 output channels) with per-channel zero points.
const TypedIn convX{"x", kI8,
                    Tensor::fromInts({1, 1, 3, 3}, {-128, -1, 0, 1, 2, 3, 127, 50, -50},
                                     DType::Int8)};
const TypedIn convXZp{"x_zero_point", kI8, Tensor::fromInts({}, {-1}, DType::Int8)};
const TypedIn convW{"w", kI8,
                    Tensor::fromInts({2, 1, 2, 2}, {1, 2, 3, 4, -128, 127, 0, -5}, DType::Int8)};
const TypedIn convWZp{"w_zero_point", kI8, Tensor::fromInts({2}, {0, -128}, DType::Int8)};

} // namespace

// Expected values of the four tests below computed once with NumPy:
// (A - a_zp[:, None]) @ (B - b_zp[None, :]) in int32, the 2x2 valid
// correlation of (x - x_zp) with (w - w_zp[:, None, None, None]) in int64,
// and for the QLinear ops np.clip(np.rint(acc * np.float32(scales product /
// y_scale) + y_zp), lo, hi).
TEST_CASE("import: MatMulInteger with per-row and per-column zero points, uint8 by int8",
          "[onnx]") {
  std::vector<TypedIn> ins = {mmA()[0], mmB()[0], mmA()[1], mmB()[1]};
  Tensor y = runTyped(10, "MatMulInteger", ins, kI32);
  REQUIRE(y.dtype() == DType::Int32);
  CHECK(valuesOf(y) == std::vector<double>{3850, 0, -16512, 16260});
}

TEST_CASE("import: MatMulInteger is exact over K = 4096 (sums far above 2^24)", "[onnx]") {
  int64_t M = 2, K = 4096, N = 3;
  std::vector<int64_t> a(size_t(M * K)), b(size_t(K * N));
  for (int64_t i = 0; i < M * K; ++i)
    a[size_t(i)] = 255 - (i % 7);
  for (int64_t i = 0; i < K * N; ++i)
    b[size_t(i)] = 127 - (i % 5);
  std::vector<double> want;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t acc = 0; // exact: plain integer arithmetic
      for (int64_t k = 0; k < K; ++k)
        acc += a[size_t(m * K + k)] * b[size_t(k * N + n)];
      want.push_back(double(acc));
    }
  CHECK(want[0] > double(1 << 26)); // float32 holds integers exactly only up to 2^24
  Tensor y = runTyped(10, "MatMulInteger",
                      {{"a", kU8, Tensor::fromInts({M, K}, a, DType::UInt8)},
                       {"b", kI8, Tensor::fromInts({K, N}, b, DType::Int8)}},
                      kI32);
  REQUIRE(y.dtype() == DType::Int32);
  CHECK(valuesOf(y) == want);
}

TEST_CASE("import: ConvInteger on int8 with per-channel weight zero points", "[onnx]") {
  Tensor y = runTyped(10, "ConvInteger", {convX, convW, convXZp, convWZp}, kI32);
  REQUIRE(y.dtype() == DType::Int32);
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 2, 2, 2}));
  CHECK(valuesOf(y) == std::vector<double>{-109, 27, 596, -32, 625, 1131, 23422, 1521});
}

TEST_CASE("import: QLinearMatMul with per-row and per-column scales", "[onnx]") {
  std::vector<TypedIn> ins = {
      mmA()[0],
      {"a_scale", kF32, Tensor::fromFloats({2}, {0.1f, 0.2f})},
      mmA()[1],
      mmB()[0],
      {"b_scale", kF32, Tensor::fromFloats({2}, {0.5f, 0.25f})},
      mmB()[1],
      {"y_scale", kF32, Tensor::fromFloats({}, {30.0f})},
      {"y_zero_point", kU8, Tensor::fromInts({}, {128}, DType::UInt8)}};
  Tensor y = runTyped(10, "QLinearMatMul", ins, kU8);
  REQUIRE(y.dtype() == DType::UInt8);
  // Before rounding: 134.4167, 128, 72.96, 155.1.
  CHECK(valuesOf(y) == std::vector<double>{134, 128, 73, 155});
}

TEST_CASE("import: QLinearConv on int8, per-channel weight scales, bias, saturation", "[onnx]") {
  std::vector<TypedIn> ins = {
      convX,
      {"x_scale", kF32, Tensor::fromFloats({}, {0.5f})},
      convXZp,
      convW,
      {"w_scale", kF32, Tensor::fromFloats({2}, {0.125f, 0.0625f})},
      convWZp,
      {"y_scale", kF32, Tensor::fromFloats({}, {0.25f})},
      {"y_zero_point", kI8, Tensor::fromInts({}, {5}, DType::Int8)},
      {"bias", kI32, Tensor::fromInts({2}, {100, -1000}, DType::Int32)}};
  Tensor y = runTyped(10, "QLinearConv", ins, kI8);
  REQUIRE(y.dtype() == DType::Int8);
  // Before rounding and saturation: 2.75, 36.75, 179, 22, -41.875, 21.375,
  // 2807.75, 70.125.
  CHECK(valuesOf(y) == std::vector<double>{3, 37, 127, 22, -42, 21, 127, 70});
}

TEST_CASE("import: the quantized ops refuse mismatched zero points and float operands",
          "[onnx]") {
  ModelBuilder b(10);
  b.input("a", {2, 3}, kU8);
  b.input("b", {3, 2}, kU8);
  b.input("z", {}, kI8);
  b.node("MatMulInteger", {"a", "b", "z"}, {"y"}, "mm");
  untypedOut(b, "y", kI32);
  auto r = b.import();
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().message, Catch::Contains("must have the type of input 0"));

  ModelBuilder f(10);
  f.input("a", {2, 3});
  f.input("b", {3, 2}, kU8);
  f.node("MatMulInteger", {"a", "b"}, {"y"}, "mm");
  untypedOut(f, "y", kI32);
  auto rf = f.import();
  REQUIRE(rf.failed());
  CHECK_THAT(rf.diagnostic().message, Catch::Contains("must be uint8 or int8"));

  ModelBuilder q(10);
  q.input("x", {1, 1, 3, 3}, kU8);
  q.input("xs", {2});
  q.input("xz", {}, kU8);
  q.input("w", {1, 1, 1, 1}, kU8);
  q.input("ws", {});
  q.input("wz", {}, kU8);
  q.input("ys", {});
  q.input("yz", {}, kU8);
  q.node("QLinearConv", {"x", "xs", "xz", "w", "ws", "wz", "ys", "yz"}, {"y"}, "qc");
  untypedOut(q, "y", kU8);
  auto rq = q.import();
  REQUIRE(rq.failed());
  CHECK_THAT(rq.diagnostic().message, Catch::Contains("must be scalars (per-tensor)"));
}

TEST_CASE("import: NonZero of a float tensor (NaN counts, -0 does not)", "[onnx]") {
  float nan = std::nanf("");
  Tensor y = runTyped(13, "NonZero",
                      {{"x", kF32, Tensor::fromFloats({2, 1, 3}, {0, 1.5f, -0.0f, nan, 0, -2})}},
                      onnx::TensorProto::INT64);
  // Flat positions 1, 3 and 5 of shape (2, 1, 3): (0, 0, 1), (1, 0, 0), (1, 0, 2).
  REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({3, 3}));
  CHECK(valuesOf(y) == std::vector<double>{0, 1, 1, 0, 0, 0, 1, 0, 2});
}

TEST_CASE("import: HannWindow with a size known at import", "[onnx]") {
  for (int64_t periodic : {1, 0}) {
    ModelBuilder b(17);
    b.initInts("size", {4});
    attrI(b.node("HannWindow", {"size"}, {"y"}), "periodic", periodic);
    untypedOut(b, "y");
    auto r = b.import();
    REQUIRE(r.succeeded());
    Tensor y = run(*r->module, {})[0];
    // 0.5 - 0.5 cos(2 pi n / N): N = 4 (periodic) or 3 (symmetric).
    std::vector<double> want = periodic ? std::vector<double>{0, 0.5, 1, 0.5}
                                        : std::vector<double>{0, 0.75, 0.75, 0};
    REQUIRE(y.numel() == 4);
    for (int64_t i = 0; i < 4; ++i)
      CHECK(y.at(i) == Approx(want[size_t(i)]).margin(1e-7));
  }
}

TEST_CASE("import: BatchNormalization's running statistics outputs (opset 9)", "[onnx]") {
  ModelBuilder b(9);
  b.input("x", {2, 1, 2});
  b.init("scale", {1}, {1});
  b.init("bias", {1}, {0});
  b.init("mean", {1}, {0});
  b.init("var", {1}, {1});
  b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"}, "bn");
  untypedOut(b, "y");
  untypedOut(b, "rm");
  untypedOut(b, "rv");
  auto r = b.import();
  INFO((r.failed() ? r.diagnostic().message : std::string()));
  REQUIRE(r.succeeded());
  auto outs = run(*r->module, {Tensor::fromFloats({2, 1, 2}, {1, 2, 3, 6})});
  // Batch mean 3, biased variance (4 + 1 + 0 + 9) / 4 = 3.5; momentum 0.9:
  // running mean 0.9 * 0 + 0.1 * 3, running variance 0.9 * 1 + 0.1 * 3.5.
  CHECK(outs[1].at(0) == Approx(0.3));
  CHECK(outs[2].at(0) == Approx(1.25));
  CHECK(outs[0].at(0) == Approx(-2.0 / std::sqrt(3.5 + 1e-5)));
  CHECK(outs[0].at(3) == Approx(3.0 / std::sqrt(3.5 + 1e-5)));

  ModelBuilder saved(9);
  saved.input("x", {2, 1, 2});
  for (const char *n : {"scale", "bias", "mean", "var"})
    saved.init(n, {1}, {1});
  saved.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"},
             {"y", "rm", "rv", "sm", "sv"}, "bn");
  for (const char *n : {"y", "rm", "rv", "sm", "sv"})
    untypedOut(saved, n);
  auto rs = saved.import();
  REQUIRE(rs.failed());
  CHECK_THAT(rs.diagnostic().message, Catch::Contains("saved_mean and saved_var"));
}

TEST_CASE("import: Resize tf_crop_and_resize, roi and sizes at run time or known, "
          "extrapolation", "[onnx]") {
  // x = arange(12) as (1, 1, 3, 4); roi crops rows [-0.2, 1.2] (outside the
  // input: extrapolated) and columns [0.1, 0.7]; sizes (1, 1, 4, 3).
  // Expected values from a NumPy loop over the ONNX formula x = start * (n - 1)
  // + o * (end - start) * (n - 1) / (m - 1), 9.5 outside [0, n - 1]
  // (bilinear; nearest rounding half down).
  const std::vector<double> linear = {9.5, 9.5, 9.5, 2.4333333, 3.3333333, 4.2333333,
                                      6.1666667, 7.0666667, 7.9666667, 9.5, 9.5, 9.5};
  const std::vector<double> nearest = {9.5, 9.5, 9.5, 4, 5, 6, 4, 5, 6, 9.5, 9.5, 9.5};
  std::vector<float> roi = {0, 0, -0.2f, 0.1f, 1, 1, 1.2f, 0.7f};
  Tensor x = Tensor::empty({1, 1, 3, 4});
  for (int64_t i = 0; i < 12; ++i)
    x.data<float>()[i] = float(i);
  for (bool runtime : {true, false}) {
    ModelBuilder b(13);
    b.input("x", {1, 1, 3, 4});
    std::vector<Tensor> in = {x};
    if (runtime) {
      b.input("roi", {8});
      b.input("sizes", {4}, onnx::TensorProto::INT64);
      in.push_back(Tensor::fromFloats({8}, roi));
      in.push_back(Tensor::fromInts({4}, {1, 1, 4, 3}));
    } else {
      b.init("roi", {8}, roi);
      b.initInts("sizes", {1, 1, 4, 3});
    }
    auto *n = b.node("Resize", {"x", "roi", "", "sizes"}, {"y"}, "rs");
    attrS(n, "coordinate_transformation_mode", "tf_crop_and_resize");
    attrS(n, "mode", runtime ? "linear" : "nearest");
    ModelBuilder::attrF(n, "extrapolation_value", 9.5f);
    untypedOut(b, "y");
    auto r = b.import();
    INFO((r.failed() ? r.diagnostic().message : std::string()));
    REQUIRE(r.succeeded());
    Tensor y = run(*r->module, in)[0];
    REQUIRE(y.shape() == llvm::ArrayRef<int64_t>({1, 1, 4, 3}));
    const std::vector<double> &want = runtime ? linear : nearest;
    for (int64_t i = 0; i < 12; ++i)
      CHECK(y.at(i) == Approx(want[size_t(i)]).epsilon(1e-5));
  }
}

TEST_CASE("dynamic axes: symbols through import, run and export", "[onnx][symbolic]") {
  // x: (N, 3, 8, 8) -> Conv (4 out, 3x3, pad 1) -> Relu -> GlobalAveragePool
  // -> Flatten -> Gemm (4 -> 2) -> y: (N, 2).
  ModelBuilder mb(13);
  mb.input("x", {1, 3, 8, 8});
  mb.output("y", {1, 2});
  for (auto *v : {mb.g->mutable_input(0), mb.g->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("N");
  mb.m.set_producer_name("symbolic-test");
  std::vector<float> w(4 * 3 * 3 * 3), fc(2 * 4), bias = {0.5f, -0.25f};
  for (size_t i = 0; i < w.size(); ++i)
    w[i] = 0.05f * float(int(i % 7) - 3);
  for (size_t i = 0; i < fc.size(); ++i)
    fc[i] = 0.1f * float(i + 1);
  mb.init("conv_w", {4, 3, 3, 3}, w);
  mb.init("fc_w", {2, 4}, fc);
  mb.init("fc_b", {2}, bias);
  auto *conv = mb.node("Conv", {"x", "conv_w"}, {"c"}, "conv0");
  auto *pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 4; ++i)
    pads->add_ints(1);
  mb.node("Relu", {"c"}, {"r"}, "relu0");
  mb.node("GlobalAveragePool", {"r"}, {"p"}, "gap");
  mb.node("Flatten", {"p"}, {"f"}, "flat");
  auto *gemm = mb.node("Gemm", {"f", "fc_w", "fc_b"}, {"y"}, "fc");
  auto *tb = gemm->add_attribute();
  tb->set_name("transB");
  tb->set_type(onnx::AttributeProto::INT);
  tb->set_i(1);
  auto imported = mb.import();
  REQUIRE(imported.succeeded());
  TracedModule &tm = *imported->module;
  const InternalGraph &g = tm.graph();
  auto *x = llvm::cast<TensorNode>(g.input(1));
  REQUIRE(x->shape());
  CHECK(dim::dimsStr(*x->shape()) == "(N, 3, 8, 8)");
  auto *y = llvm::cast<TensorNode>(g.output(0));
  REQUIRE(y->shape());
  CHECK(dim::dimsStr(*y->shape()) == "(N, 2)");

  // The reference: the same arithmetic written out here.
  auto reference = [&](const Tensor &in) {
    int64_t n = in.dim(0);
    Tensor out = Tensor::empty({n, 2});
    for (int64_t b = 0; b < n; ++b) {
      float feat[4] = {0, 0, 0, 0};
      for (int oc = 0; oc < 4; ++oc)
        for (int i = 0; i < 8; ++i)
          for (int j = 0; j < 8; ++j) {
            float acc = 0;
            for (int ic = 0; ic < 3; ++ic)
              for (int ki = 0; ki < 3; ++ki)
                for (int kj = 0; kj < 3; ++kj) {
                  int ii = i + ki - 1, jj = j + kj - 1;
                  if (ii < 0 || jj < 0 || ii >= 8 || jj >= 8)
                    continue;
                  acc += in.data<float>()[((b * 3 + ic) * 8 + ii) * 8 + jj] *
                         w[size_t(((oc * 3 + ic) * 3 + ki) * 3 + kj)];
                }
            feat[oc] += std::max(acc, 0.0f) / 64.0f;
          }
      for (int o = 0; o < 2; ++o) {
        float acc = bias[size_t(o)];
        for (int k = 0; k < 4; ++k)
          acc += feat[k] * fc[size_t(o * 4 + k)];
        out.data<float>()[b * 2 + o] = acc;
      }
    }
    return out;
  };
  rt::Interpreter interp(tm);
  for (int64_t n : {1, 5}) {
    INFO("batch " << n);
    Tensor in = Tensor::randn({n, 3, 8, 8}, uint64_t(n));
    Tensor got = interp.run({in}).outputs[0], want = reference(in);
    REQUIRE(got.shape() == want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      CHECK(got.at(i) == Approx(want.at(i)).margin(1e-5));
  }
  try {
    interp.run({Tensor::randn({2, 4, 8, 8}, 1)});
    FAIL("a wrong channel count was accepted");
  } catch (const Error &e) {
    CHECK_THAT(e.diagnostic().message, Catch::Contains("input 'x': dim 1 is 3 in the graph, got 4"));
  }

  // Export keeps the symbol, the names and the model info.
  auto bytes = io::exportOnnxBytes(tm);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto mp;
  REQUIRE(mp.ParseFromString(*bytes));
  CHECK_NOTHROW(onnx::checker::check_model(mp));
  const auto &in0 = mp.graph().input(0).type().tensor_type().shape();
  REQUIRE(in0.dim_size() == 4);
  CHECK(in0.dim(0).dim_param() == "N");
  CHECK(in0.dim(1).dim_value() == 3);
  const auto &out0 = mp.graph().output(0).type().tensor_type().shape();
  REQUIRE(out0.dim_size() == 2);
  CHECK(out0.dim(0).dim_param() == "N");
  CHECK(mp.graph().output(0).name() == "y");
  CHECK(mp.producer_name() == "symbolic-test");
  auto back = io::importOnnxBytes(*bytes, "back.onnx");
  INFO((back.failed() ? back.diagnostic().message : std::string()));
  REQUIRE(back.succeeded());
  Tensor in = Tensor::randn({3, 3, 8, 8}, 9);
  Tensor a = run(tm, {in})[0], b2 = run(*back->module, {in})[0];
  REQUIRE(a.shape() == b2.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    CHECK(b2.at(i) == Approx(a.at(i)).margin(1e-6));
}

TEST_CASE("dynamic axes: shape-reading subgraphs stay generic", "[onnx][symbolic]") {
  // PyTorch's export of x.reshape(x.shape[0], -1): Shape -> Gather(0) ->
  // Unsqueeze -> Concat with -1 -> Reshape, on x: (N, 2, 3).
  ModelBuilder mb(13);
  mb.input("x", {1, 2, 3});
  mb.output("y", {1, 6});
  for (auto *v : {mb.g->mutable_input(0), mb.g->mutable_output(0)})
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  mb.initInts("zero", {0});
  mb.initInts("minus1", {-1});
  auto *zs = mb.g->add_initializer();
  zs->set_name("idx0");
  zs->set_data_type(onnx::TensorProto::INT64);
  zs->add_int64_data(0);
  mb.node("Shape", {"x"}, {"s"});
  mb.node("Gather", {"s", "idx0"}, {"n"});
  mb.node("Unsqueeze", {"n", "zero"}, {"n1"});
  auto *cat = mb.node("Concat", {"n1", "minus1"}, {"target"});
  auto *ax = cat->add_attribute();
  ax->set_name("axis");
  ax->set_type(onnx::AttributeProto::INT);
  ax->set_i(0);
  mb.node("Reshape", {"x", "target"}, {"y"});
  auto imported = mb.import();
  REQUIRE(imported.succeeded());
  rt::Interpreter interp(*imported->module);
  for (int64_t n : {1, 4}) {
    Tensor in = ramp({n, 2, 3});
    Tensor got = interp.run({in}).outputs[0];
    REQUIRE(got.shape() == llvm::ArrayRef<int64_t>{n, 6});
    for (int64_t i = 0; i < in.numel(); ++i)
      CHECK(got.at(i) == in.at(i));
  }
}

TEST_CASE("import: LSTM and GRU attributes survive an export round trip", "[onnx][rnn]") {
  // A bidirectional, batch-first LSTM with sequence_lens, clip and
  // activations that read alpha and beta: HardSigmoid takes alpha 0.3 and
  // beta 0.6, LeakyRelu alpha 0.2 (ONNX lists values only for them).
  auto rampFloats = [](llvm::ArrayRef<int64_t> shape) {
    Tensor t = ramp(shape);
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  };
  ModelBuilder b(14);
  b.input("x", {2, 3, 2});
  b.init("w", {2, 8, 2}, rampFloats({2, 8, 2}));
  b.init("r", {2, 8, 2}, rampFloats({2, 8, 2}));
  b.init("bias", {2, 16}, rampFloats({2, 16}));
  auto *lens = b.g->add_initializer();
  lens->set_name("lens");
  lens->set_data_type(onnx::TensorProto::INT32);
  lens->add_dims(2);
  lens->add_int32_data(3);
  lens->add_int32_data(2);
  auto *n = b.node("LSTM", {"x", "w", "r", "bias", "lens"}, {"y", "yh", "yc"}, "lstm");
  attrI(n, "hidden_size", 2);
  attrI(n, "layout", 1);
  attrS(n, "direction", "bidirectional");
  ModelBuilder::attrF(n, "clip", 5.0f);
  auto *acts = n->add_attribute();
  acts->set_name("activations");
  acts->set_type(onnx::AttributeProto::STRINGS);
  for (const char *s : {"HardSigmoid", "Tanh", "Tanh", "Sigmoid", "LeakyRelu", "Tanh"})
    acts->add_strings(s);
  auto floatsAttr = [&](const char *name, std::vector<float> v) {
    auto *a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOATS);
    for (float f : v)
      a->add_floats(f);
  };
  floatsAttr("activation_alpha", {0.3f, 0.2f});
  floatsAttr("activation_beta", {0.6f});
  // An opset-14 GRU with linear_before_reset on the LSTM's output.
  b.init("gw", {1, 6, 4}, rampFloats({1, 6, 4}));
  b.init("gr", {1, 6, 2}, rampFloats({1, 6, 2}));
  b.node("Reshape", {"yh", "shape"}, {"yh2"});
  b.initInts("shape", {1, 2, 4});
  auto *g = b.node("GRU", {"yh2", "gw", "gr"}, {"", "gh"}, "gru");
  attrI(g, "hidden_size", 2);
  attrI(g, "linear_before_reset", 1);
  b.output("y", {2, 3, 2, 2});
  b.output("yc", {2, 2, 2});
  b.output("gh", {1, 2, 2});
  Tensor x = ramp({2, 3, 2});
  auto [got, back] = runAndRoundTrip(b, {x});
  REQUIRE(got.size() == 3);
  REQUIRE(got[0].shape() == llvm::ArrayRef<int64_t>({2, 3, 2, 2}));
  REQUIRE(got[2].shape() == llvm::ArrayRef<int64_t>({1, 2, 2}));
  for (size_t k = 0; k < 3; ++k) {
    REQUIRE(back[k].shape() == got[k].shape());
    for (int64_t i = 0; i < got[k].numel(); ++i)
      CHECK(back[k].at(i) == got[k].at(i));
  }
  // Batch entry 1 has 2 steps: its step 2 is zero in both directions.
  for (int64_t i = 20; i < 24; ++i)
    CHECK(got[0].at(i) == 0);
  CHECK(got[0].at(0) != 0);

  // The exported node keeps the attributes, alpha and beta the ONNX way.
  auto r = b.import();
  REQUIRE(r.succeeded());
  auto bytes = io::exportOnnxBytes(*r->module);
  REQUIRE(bytes.succeeded());
  onnx::ModelProto mp;
  REQUIRE(mp.ParseFromString(*bytes));
  CHECK_NOTHROW(onnx::checker::check_model(mp));
  const onnx::NodeProto *lstm = nullptr;
  for (const auto &node : mp.graph().node())
    if (node.op_type() == "LSTM")
      lstm = &node;
  REQUIRE(lstm);
  std::map<std::string, const onnx::AttributeProto *> attrs;
  for (const auto &a : lstm->attribute())
    attrs[a.name()] = &a;
  REQUIRE(attrs.count("activations"));
  CHECK(attrs["activations"]->strings_size() == 6);
  CHECK(attrs["activations"]->strings(4) == "LeakyRelu");
  REQUIRE(attrs.count("activation_alpha"));
  REQUIRE(attrs["activation_alpha"]->floats_size() == 2);
  CHECK(attrs["activation_alpha"]->floats(1) == Approx(0.2));
  REQUIRE(attrs.count("activation_beta"));
  CHECK(attrs["activation_beta"]->floats_size() == 1);
  CHECK(attrs["hidden_size"]->i() == 2);
  CHECK(attrs["layout"]->i() == 1);
  CHECK(attrs["direction"]->s() == "bidirectional");
  CHECK(attrs["clip"]->f() == Approx(5.0));
  CHECK(lstm->input(4) != "");
  CHECK(lstm->input_size() == 5);
}

TEST_CASE("import: recurrent ops with bad attributes are errors naming the node", "[onnx][rnn]") {
  ModelBuilder b(7);
  b.input("x", {1, 1, 2});
  b.init("w", {1, 2, 2}, {1, 0, 0, 1});
  b.init("r", {1, 2, 2}, {1, 0, 0, 1});
  auto *n = b.node("RNN", {"x", "w", "r"}, {"y"}, "cell");
  attrI(n, "hidden_size", 2);
  auto *acts = n->add_attribute();
  acts->set_name("activations");
  acts->set_type(onnx::AttributeProto::STRINGS);
  acts->add_strings("Gelu");
  b.output("y", {1, 1, 1, 2});
  auto r = b.import();
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().message, Catch::Contains("node 'cell' (RNN)"));
  CHECK_THAT(r.diagnostic().message, Catch::Contains("unknown recurrent activation 'Gelu'"));
}

TEST_CASE("strings: a string initializer and StringNormalizer round-trip through ONNX",
          "[onnx][strings]") {
  // y = StringNormalizer(x, LOWER, stopwords ["the"]) == ["foo", "bar", "baz"]
  // Expected values worked out by hand from the ONNX spec.
  ModelBuilder mb(17);
  mb.input("x", {4}, onnx::TensorProto::STRING);
  mb.output("n", {3}, onnx::TensorProto::STRING);
  mb.output("y", {3}, onnx::TensorProto::BOOL);
  auto *w = mb.g->add_initializer();
  w->set_name("words");
  w->set_data_type(onnx::TensorProto::STRING);
  w->add_dims(3);
  for (const char *s : {"foo", "bar", "baz"})
    w->add_string_data(s);
  auto *sn = mb.node("StringNormalizer", {"x"}, {"n"}, "norm");
  auto *a = sn->add_attribute();
  a->set_name("case_change_action");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("LOWER");
  a = sn->add_attribute();
  a->set_name("stopwords");
  a->set_type(onnx::AttributeProto::STRINGS);
  a->add_strings("the");
  mb.node("Equal", {"n", "words"}, {"y"}, "eq");
  auto m = mb.import();
  if (m.failed())
    FAIL(m.diagnostic().str());
  Tensor x = stringTensor({4}, {"Foo", "THE", "BAR", "qux"});
  auto check = [&](const TracedModule &tm) {
    std::vector<Tensor> out = run(tm, {x});
    REQUIRE(out.size() == 2);
    REQUIRE(out[0].dtype() == DType::String);
    REQUIRE(out[0].numel() == 3);
    CHECK(stringAt(out[0], 0) == "foo");
    CHECK(stringAt(out[0], 1) == "bar");
    CHECK(stringAt(out[0], 2) == "qux");
    REQUIRE(out[1].dtype() == DType::Bool);
    CHECK(out[1].at(0) == 1);
    CHECK(out[1].at(1) == 1);
    CHECK(out[1].at(2) == 0);
  };
  check(*m->module);
  auto bytes = io::exportOnnxBytes(*m->module);
  if (bytes.failed())
    FAIL(bytes.diagnostic().str());
  onnx::ModelProto res;
  REQUIRE(res.ParseFromString(*bytes));
  bool sawNormalizer = false, sawWords = false;
  for (const auto &n : res.graph().node())
    if (n.op_type() == "StringNormalizer") {
      sawNormalizer = true;
      for (const auto &at : n.attribute()) {
        if (at.name() == "stopwords")
          CHECK((at.strings_size() == 1 && at.strings(0) == "the"));
        if (at.name() == "case_change_action")
          CHECK(at.s() == "LOWER");
      }
    }
  for (const auto &i : res.graph().initializer())
    if (i.data_type() == onnx::TensorProto::STRING && i.string_data_size() == 3) {
      sawWords = true;
      CHECK(i.string_data(2) == "baz");
    }
  for (const auto &n : res.graph().node())
    if (n.op_type() == "Constant")
      for (const auto &at : n.attribute())
        if (at.t().data_type() == onnx::TensorProto::STRING)
          sawWords = true;
  CHECK(sawNormalizer);
  CHECK(sawWords);
  CHECK(res.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::STRING);
  auto again = io::importOnnxBytes(*bytes, "again.onnx");
  if (again.failed())
    FAIL(again.diagnostic().str());
  check(*again->module);
}

TEST_CASE("export: every builtin module with an ONNX form goes out and computes the same",
          "[onnx]") {
  // One graph per module: x -> module -> y, checked by ONNX's checker and
  // by running the import against the interpreter on the original.
  struct Case {
    std::unique_ptr<Module> mod;
    Shape in;
    bool intInput = false;
  };
  std::vector<Case> cases;
  cases.push_back({std::make_unique<ConvTranspose2d>(4, 6, IntPair{3, 3}, IntPair{2, 2},
                                                     IntPair{1, 1}, IntPair{1, 1}, IntPair{1, 1},
                                                     2, true, 5),
                   Shape{1, 4, 5, 5}});
  cases.push_back({std::make_unique<ReLU6>(), Shape{2, 9}});
  cases.push_back({std::make_unique<SiLU>(), Shape{2, 9}});
  cases.push_back({std::make_unique<GELU>(), Shape{2, 9}});
  cases.push_back({std::make_unique<Hardswish>(), Shape{2, 9}});
  cases.push_back({std::make_unique<Softmax>(), Shape{2, 3, 4}});
  cases.push_back({std::make_unique<LayerNorm>(std::vector<int64_t>{8}), Shape{2, 3, 8}});
  cases.push_back({std::make_unique<Embedding>(10, 4, 7), Shape{2, 3}, true});
  for (auto &c : cases) {
    std::string type = c.mod->typeName().str();
    INFO(type);
    auto net = std::make_unique<Module>("Net");
    net->registerModule("m", std::move(c.mod));
    auto tm = TracedModule::fromModule(std::move(net));
    GraphBuilder b = GraphBuilder::top(
        *tm, {{"x", c.in, c.intInput ? DType::Int64 : DType::Float32}});
    b.finish(b.callModule(b.getAttr(b.self(), "m"), {b.arg(0)}));
    auto bytes = io::exportOnnxBytes(*tm);
    REQUIRE(bytes.succeeded());
    onnx::ModelProto mp;
    REQUIRE(mp.ParseFromString(*bytes));
    CHECK_NOTHROW(onnx::checker::check_model(mp));
    auto back = io::importOnnxBytes(*bytes, type + ".onnx");
    REQUIRE(back.succeeded());
    Tensor x = c.intInput ? Tensor::fromInts({2, 3}, {0, 3, 9, 1, 1, 5})
                          : Tensor::randn(std::vector<int64_t>(c.in.begin(), c.in.end()), 3);
    Tensor want = run(*tm, {x})[0], got = run(*back->module, {x})[0];
    REQUIRE(got.shape() == want.shape());
    for (int64_t i = 0; i < want.numel(); ++i)
      CHECK(got.at(i) == Approx(want.at(i)).margin(1e-5));
  }
}

TEST_CASE("export: Elemwise modules go out in every mode the interpreter runs", "[onnx]") {
  // mode, operands, integer operands
  struct Case {
    const char *mode;
    int arity;
    bool ints = false;
  };
  const Case cases[] = {
      {"RELU", 1},         {"ABS", 1},          {"EXP", 1},         {"LOG", 1},
      {"NEGATE", 1},       {"SIGMOID", 1},      {"TANH", 1},        {"FAST_TANH", 1},
      {"ERF", 1},          {"H_SWISH", 1},      {"SQRT", 1},        {"ACOS", 1},
      {"ASIN", 1},         {"CEIL", 1},         {"COS", 1},         {"FLOOR", 1},
      {"SIN", 1},          {"SINH", 1},         {"COSH", 1},        {"ASINH", 1},
      {"ACOSH", 1},        {"ATANH", 1},        {"TAN", 1},         {"SOFTPLUS", 1},
      {"SIGN", 1},         {"ISNAN", 1},        {"ISINF", 1},       {"SILU", 1},
      {"GELU", 1},         {"RELU6", 1},        {"HSIGMOID", 1},    {"SQUARE", 1},
      {"LOGSIGMOID", 1},   {"ADD", 2},          {"SUB", 2},         {"MUL", 2},
      {"TRUE_DIV", 2},     {"TRUE_DIV", 2, true}, {"POW", 2},       {"MAX", 2},
      {"MIN", 2},          {"LT", 2},           {"LEQ", 2},         {"EQ", 2},
      {"NEQ", 2},          {"AND", 2, true},    {"OR", 2, true},    {"XOR", 2, true},
      {"NOT", 1, true},    {"MOD", 2, true},    {"PRELU", 2},       {"FUSE_ADD_RELU", 2},
      {"FUSE_ADD_SIGMOID", 2}, {"FUSE_ADD_TANH", 2}, {"FUSE_ADD_H_SWISH", 2},
      {"SWITCH_GT0", 2},   {"LOG_SUM_EXP", 2},  {"FUSE_MUL_ADD3", 3}, {"FUSE_MUL_ADD4", 4},
      {"COND_LEQ_MOV", 3}, {"COND_LT_MOV", 3},  {"CLIP", 3},
  };
  for (const Case &c : cases) {
    INFO(c.mode << (c.ints ? " (int64)" : ""));
    auto net = std::make_unique<Module>("Net");
    net->registerModule("m", std::make_unique<Elemwise>(c.mode));
    auto tm = TracedModule::fromModule(std::move(net));
    std::vector<InputSpec> specs;
    std::vector<Tensor> xs;
    for (int i = 0; i < c.arity; ++i) {
      specs.push_back({"x" + std::to_string(i), Shape{2, 6}, c.ints ? DType::Int64 : DType::Float32});
      // Floats in (-1, 1) and beside 1.5, so that every mode has points in
      // its domain; integers with both signs and no zero divisor.
      std::vector<double> v;
      for (int j = 0; j < 12; ++j)
        v.push_back(c.ints ? double((j * 7 + i * 3) % 9 - 4 + (j % 9 == 4 - i ? 1 : 0))
                           : (j < 6 ? 0.9 * std::sin(1.0 + j + 3 * i) : 1.5 + 0.1 * (j + i)));
      if (c.ints) {
        for (double &d : v)
          if (d == 0)
            d = 3;
        xs.push_back(Tensor::fromInts({2, 6}, std::vector<int64_t>(v.begin(), v.end())));
      } else {
        xs.push_back(Tensor::fromFloats({2, 6}, std::vector<float>(v.begin(), v.end())));
      }
    }
    GraphBuilder b = GraphBuilder::top(*tm, specs);
    std::vector<Arg> args;
    for (int i = 0; i < c.arity; ++i)
      args.push_back(b.arg(i));
    b.finish(b.callModule(b.getAttr(b.self(), "m"), args));
    auto bytes = io::exportOnnxBytes(*tm);
    if (bytes.failed())
      FAIL(bytes.diagnostic().str());
    onnx::ModelProto mp;
    REQUIRE(mp.ParseFromString(*bytes));
    CHECK_NOTHROW(onnx::checker::check_model(mp));
    auto back = io::importOnnxBytes(*bytes, std::string(c.mode) + ".onnx");
    if (back.failed())
      FAIL(back.diagnostic().str());
    Tensor want = run(*tm, xs)[0], got = run(*back->module, xs)[0];
    REQUIRE(got.shape() == want.shape());
    CHECK(got.dtype() == want.dtype());
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (std::isnan(want.at(i)))
        CHECK(std::isnan(got.at(i)));
      else
        CHECK(got.at(i) == Approx(want.at(i)).margin(1e-5));
    }
  }
}

TEST_CASE("export: an Elemwise mode without an ONNX form is an error naming it", "[onnx]") {
  auto net = std::make_unique<Module>("Net");
  net->registerModule("m", std::make_unique<Elemwise>("MOD"));
  auto tm = TracedModule::fromModule(std::move(net));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3}}, {"y", Shape{3}}});
  b.finish(b.callModule(b.getAttr(b.self(), "m"), {b.arg(0), b.arg(1)}));
  auto bytes = io::exportOnnxBytes(*tm);
  REQUIRE(bytes.failed());
  CHECK_THAT(bytes.diagnostic().str(), Catch::Contains("MOD of floats"));
}
