//===- test_strings.cpp - The string dtype --------------------------------===//
//
// Interning, .npy and .tmir round trips, casts to and from strings, and the
// refusal of numeric kernels. Expected values are written by hand: float
// texts are NumPy's str() of the float32 (the shortest text that reads
// back as the same float32, as the ONNX backend suite's Cast outputs are).
//
//===----------------------------------------------------------------------===//
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "tm/io/Npy.h"
#include "tm/io/Safetensors.h"
#include "tm/io/Tmir.h"
#include "tm/ir/Builder.h"
#include "tm/ir/IR.h"
#include "tm/ir/Strings.h"
#include "tm/runtime/Elementwise.h"
#include "tm/runtime/Interpreter.h"

using namespace tmg;

namespace {

std::vector<std::string> texts(const Tensor &t) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < t.numel(); ++i)
    out.push_back(stringAt(t, i).str());
  return out;
}

std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.diagnostic().str();
  }
  return "(no error)";
}

/// A version-1 .npy file: header dict padded to 64 bytes, then `data`.
std::string npyFile(const std::string &dict, const std::string &data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64)
    h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += char(h.size() & 0xff);
  out += char(h.size() >> 8);
  return out + h + data;
}

/// x.astype(to) run by the interpreter (the explicit cast: rt::cast
/// itself refuses strings).
Tensor astype(const Tensor &x, DType to) {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Cast"));
  GraphBuilder b = GraphBuilder::top(
      *tm, {{"x", Shape(x.shape().begin(), x.shape().end()), x.dtype()}});
  b.finish(b.callMethod(b.arg(0), "astype", {dtypeName(to).str()}));
  rt::Interpreter interp(*tm);
  return interp.run({x}).outputs[0];
}

} // namespace

TEST_CASE("strings: equal texts have equal ids, from any thread", "[strings]") {
  CHECK(intern("") == 0);
  int64_t a = intern("apple");
  CHECK(intern("apple") == a);
  CHECK(intern("apples") != a);
  CHECK(text(a) == "apple");
  CHECK(text(intern(llvm::StringRef("a\0b", 3))) == llvm::StringRef("a\0b", 3));
  CHECK(errorOf([] { (void)text(-1); }).find("invalid string id -1") != std::string::npos);

  // Four threads intern the same 200 words in different orders; every
  // thread must see the same id for a word.
  std::vector<std::vector<int64_t>> ids(4, std::vector<int64_t>(200));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &ids] {
      for (int k = 0; k < 2000; ++k) {
        int w = (k * (t + 1) * 7) % 200;
        ids[size_t(t)][size_t(w)] = intern("thread-word-" + std::to_string(w));
      }
    });
  for (auto &th : threads)
    th.join();
  for (int w = 0; w < 200; ++w) {
    int64_t id = intern("thread-word-" + std::to_string(w));
    CHECK(text(id) == "thread-word-" + std::to_string(w));
    for (int t = 0; t < 4; ++t)
      if (ids[size_t(t)][size_t(w)] != 0) // every word is reached by each thread's walk
        CHECK(ids[size_t(t)][size_t(w)] == id);
  }
}

TEST_CASE("strings: a zero-filled string tensor holds empty strings", "[strings]") {
  Tensor z = Tensor::zeros({2}, DType::String);
  CHECK(texts(z) == std::vector<std::string>{"", ""});
  CHECK(dtypeSize(DType::String) == 8);
  CHECK(parseDType("string") == DType::String);
}

TEST_CASE("strings: .npy round trip writes '<U{n}' and reads '<U' and '|S'", "[strings][npy]") {
  // "héllo" is 5 code points (6 UTF-8 bytes): the width is 5.
  Tensor x = stringTensor({2, 2}, {"a", "h\xc3\xa9llo", "", "tab\there"});
  std::string bytes = serializeNpy(x);
  CHECK(bytes.find("'descr': '<U8'") != std::string::npos); // "tab\there" is 8
  auto back = parseNpy(bytes);
  REQUIRE(back.succeeded());
  CHECK(back->dtype() == DType::String);
  CHECK(back->shape() == llvm::ArrayRef<int64_t>{2, 2});
  CHECK(texts(*back) == texts(x));
  // Bytes that are not UTF-8 (a lone 0xff, an overlong NUL, an encoded
  // surrogate) go through '<U' as U+DC80..U+DCFF (Python's surrogateescape)
  // and come back as the same bytes.
  Tensor raw = stringTensor({3}, {"a\xff", "\xc0\x80", "\xed\xa0\x80"});
  std::string rawBytes = serializeNpy(raw);
  CHECK(rawBytes.find("'descr': '<U3'") != std::string::npos);
  CHECK(rawBytes.find(std::string("\xff\xdc\0\0", 4)) != std::string::npos);
  auto rawBack = parseNpy(rawBytes);
  REQUIRE(rawBack.succeeded());
  CHECK(texts(*rawBack) == texts(raw));
  // A transposed view is written dense.
  auto t = parseNpy(serializeNpy(x.permuted({1, 0})));
  REQUIRE(t.succeeded());
  CHECK(texts(*t) == std::vector<std::string>{"a", "", "h\xc3\xa9llo", "tab\there"});

  // As np.save writes np.array([b'ab', b'cde']) and np.array(['x', '\u00e9t']).
  auto s = parseNpy(npyFile("{'descr': '|S3', 'fortran_order': False, 'shape': (2,), }",
                            std::string("ab\0cde", 6)));
  REQUIRE(s.succeeded());
  CHECK(texts(*s) == std::vector<std::string>{"ab", "cde"});
  std::string u("x\0\0\0\0\0\0\0\xe9\0\0\0t\0\0\0", 16);
  auto w = parseNpy(npyFile("{'descr': '<U2', 'fortran_order': False, 'shape': (2,), }", u));
  REQUIRE(w.succeeded());
  CHECK(texts(*w) == std::vector<std::string>{"x", "\xc3\xa9t"});
  auto bad = parseNpy(npyFile("{'descr': '<U2', 'fortran_order': False, 'shape': (3,), }", u));
  REQUIRE(bad.failed());
  CHECK(bad.diagnostic().message.find("needs 24 bytes of data, the file has 16") !=
        std::string::npos);
}

TEST_CASE("strings: safetensors refuses them", "[strings][safetensors]") {
  WeightFile w;
  w.tensors.emplace_back("s", stringTensor({1}, {"x"}));
  auto r = serializeSafetensors(w);
  REQUIRE(r.failed());
  CHECK(r.diagnostic().message.find("safetensors cannot hold") != std::string::npos);
}

TEST_CASE("strings: .tmir round trip of a string constant", "[strings][tmir]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{3}, DType::String}});
  Node *c = b.constant(stringTensor({3}, {"say \"hi\"", "new\nline\\", "caf\xc3\xa9"}), "words");
  b.finish(b.callFunction("elemwise.equal", {b.arg(0), c}));
  std::string text = printTmir(*tm);
  INFO(text);
  CHECK(text.find(R"(tensor(string(3,), ["say \"hi\"", "new\nline\\", "caf)" "\xc3\xa9" R"("]))") !=
        std::string::npos);
  auto parsed = parseTmir(text, "strings.tmir");
  if (parsed.failed())
    FAIL(parsed.diagnostic().str());
  CHECK(printTmir(**parsed) == text);
  rt::Interpreter interp(**parsed);
  Tensor y = interp.run({stringTensor({3}, {"say \"hi\"", "new\nline", "caf\xc3\xa9"})}).outputs[0];
  REQUIRE(y.dtype() == DType::Bool);
  CHECK(y.at(0) == 1);
  CHECK(y.at(1) == 0);
  CHECK(y.at(2) == 1);
}

TEST_CASE("strings: numeric kernels refuse them, naming the op", "[strings]") {
  auto tm = TracedModule::fromModule(std::make_unique<Module>("Net"));
  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{2}, DType::String}});
  std::string e = errorOf([&] { b.finish(b.callFunction("elemwise.add", {b.arg(0), b.arg(0)})); });
  INFO(e);
  CHECK(e.find("add") != std::string::npos);
  CHECK(e.find("has dtype string, which this op does not support") != std::string::npos);

  Tensor s = stringTensor({2}, {"a", "b"});
  CHECK(errorOf([&] { rt::add(s, s); }).find("a string tensor reached a kernel that computes on "
                                             "numbers") != std::string::npos);
  CHECK(errorOf([&] { rt::less(s, s); }).find("dtype string supports only equal and not_equal") !=
        std::string::npos);
  CHECK(errorOf([&] { rt::add(s, Tensor::fromFloats({2}, {1, 2})); })
            .find("strings do not mix with numbers") != std::string::npos);
  CHECK(errorOf([&] { rt::cast(s, DType::Float32); })
            .find("strings convert to and from numbers only by an explicit astype") !=
        std::string::npos);
  CHECK(errorOf([&] { rt::exp(s); }).find("string") != std::string::npos);
  Tensor eq = rt::equal(s, stringTensor({2}, {"a", "c"}));
  CHECK(eq.at(0) == 1);
  CHECK(eq.at(1) == 0);
}

TEST_CASE("strings: cast float -> string -> float round-trips", "[strings][cast]") {
  float inf = INFINITY, nan = NAN;
  Tensor x = Tensor::fromFloats({6}, {0.9767611f, -2.5f, 1e-05f, 3.0f, inf, -inf});
  Tensor s = astype(x, DType::String);
  REQUIRE(s.dtype() == DType::String);
  CHECK(texts(s) ==
        std::vector<std::string>{"0.9767611", "-2.5", "1e-05", "3", "INF", "-INF"});
  Tensor back = astype(s, DType::Float32);
  CHECK(back.bitwiseEqual(x));
  CHECK(texts(astype(Tensor::fromFloats({1}, {nan}), DType::String)) ==
        std::vector<std::string>{"NaN"});
  // The backend suite's inputs: "NaN", "INF", "+INF", "-INF".
  Tensor special = astype(stringTensor({4}, {"NaN", "INF", "+INF", "-INF"}), DType::Float32);
  CHECK(std::isnan(special.at(0)));
  CHECK(special.at(1) == inf);
  CHECK(special.at(2) == inf);
  CHECK(special.at(3) == -inf);
  // Integers and bools.
  CHECK(texts(astype(Tensor::fromInts({2}, {-42, 9007199254740993}), DType::String)) ==
        std::vector<std::string>{"-42", "9007199254740993"});
  Tensor i = astype(stringTensor({2}, {"17", "9007199254740993"}), DType::Int64);
  CHECK(i.data<int64_t>()[0] == 17);
  CHECK(i.data<int64_t>()[1] == 9007199254740993);
  CHECK(texts(astype(Tensor::fromInts({2}, {1, 0}, DType::Bool), DType::String)) ==
        std::vector<std::string>{"True", "False"});
  CHECK(errorOf([] { astype(stringTensor({1}, {"abc"}), DType::Float32); })
            .find("string \"abc\" is not a number") != std::string::npos);
}
