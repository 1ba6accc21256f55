// Overflow-safe sizes (CheckedSize.h), the allocation guard of
// Tensor::empty and the builtin-module checks of the verifier.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "tm/ir/CheckedSize.h"
#include "tm/ir/HugePages.h"
#include "tm/ir/IR.h"
#include "tm/ir/ModuleCheck.h"

using namespace tmg;

static constexpr int64_t P61 = int64_t(1) << 61, P62 = int64_t(1) << 62;
static constexpr int64_t Max = std::numeric_limits<int64_t>::max();

TEST_CASE("checked sizes: element counts and byte sizes", "[ir][size]") {
  CHECK(checkedNumel({}) == 1);
  CHECK(checkedNumel({3, 4}) == 12);
  CHECK(checkedNumel({0, Max, Max}) == 0);
  CHECK(checkedNumel({Max}) == Max);
  CHECK(!checkedNumel({P62, 2}));
  CHECK(!checkedNumel({3, -1}));
  CHECK(checkedByteSize({3, 4}, DType::Float32) == 48);
  CHECK(checkedByteSize({P61, 2}, DType::UInt8) == P62);
  // Element counts that fit, byte sizes that do not.
  CHECK(!checkedByteSize({P61, 2}, DType::Float32));
  CHECK(!checkedByteSize({int64_t(1) << 31, int64_t(1) << 31}, DType::Float32));
  CHECK(!checkedByteSize({P62}, DType::Int64));
  CHECK(checkedByteSize({0, P62, P62}, DType::Int64) == 0);
}

TEST_CASE("checked sizes: limits name the tensor, the dims and the size", "[ir][size]") {
  SizeLimits l;
  l.maxTensorBytes = 1000;
  CHECK(checkTensorBytes("w", {10, 25}, DType::Float32, l).value() == 1000);
  auto big = checkTensorBytes("tensor 'w'", {10, 26}, DType::Float32, l);
  REQUIRE(big.failed());
  CHECK(big.diagnostic().message ==
        "tensor 'w': float32 tensor of shape (10, 26) needs 1040 bytes (1.0 KiB), more than "
        "the limit of 1000 bytes (SizeLimits::maxTensorBytes; by default the memory available "
        "when the file is read)");
  auto wrap = checkTensorBytes("x", {P61, 2}, DType::Float32);
  REQUIRE(wrap.failed());
  CHECK_THAT(wrap.diagnostic().message, Catch::Contains("does not fit in 64 bits"));
  // The default is the memory available; a negative limit is none.
  auto tb = checkTensorBytes("x", {int64_t(1) << 50}, DType::Float32);
  REQUIRE(tb.failed());
  CHECK_THAT(tb.diagnostic().message, Catch::Contains("more than the limit of"));
  CHECK(SizeLimits().resolved().maxTensorBytes > 0);
  CHECK(availableMemoryBytes() > 0);
  CHECK(availableMemoryBytes() <= physicalMemoryBytes());
  l.maxTensorBytes = -1;
  CHECK(checkTensorBytes("x", {int64_t(1) << 50}, DType::Float32, l).succeeded());

  l.maxModelBytes = 100;
  ModelBytesBudget budget(l);
  CHECK(succeeded(budget.add("a", 60)));
  auto r = budget.add("b", 60);
  REQUIRE(r.failed());
  CHECK_THAT(r.diagnostic().message, Catch::Contains("b: the model's tensors reach 120 bytes with this one "
                                        "(60 bytes), more than the limit of 100 bytes "
                                        "(SizeLimits::maxModelBytes"));
  CHECK(budget.total() == 60);
}

TEST_CASE("checked sizes: Tensor::empty refuses sizes that wrap or exceed memory",
          "[ir][size]") {
  CHECK_THROWS_WITH(Tensor::randn({P61, 2}),
                    Catch::Contains("float32 tensor of shape (2305843009213693952, 2): its "
                                    "byte size does not fit in 64 bits"));
  CHECK_THROWS_WITH(Tensor::empty({int64_t(1) << 31, int64_t(1) << 31}),
                    Catch::Contains("does not fit in 64 bits"));
  CHECK_THROWS_WITH(Tensor::zeros({int64_t(1) << 50}),
                    Catch::Contains("more than this machine's physical memory"));
  // Empty tensors of huge dims: no allocation, and strides that do not wrap.
  Tensor e = Tensor::empty({0, P62, P62});
  CHECK(e.numel() == 0);
  CHECK(e.isContiguous());
  CHECK(e.reshaped({P62, 0, P62}).numel() == 0);
}

TEST_CASE("module checks: builtin modules have what their kernels read", "[ir][verifier]") {
  auto lin = std::make_unique<Linear>(4, 3);
  std::vector<Diagnostic> diags;
  verifyBuiltinModule(*lin, "fc", diags);
  CHECK(diags.empty());

  lin->removeAttr("weight");
  verifyBuiltinModule(*lin, "fc", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "module 'fc' (Linear): has no 'weight' parameter, which its "
                            "kernel reads");

  diags.clear();
  lin->registerParameter("weight", Tensor::zeros({12}));
  verifyBuiltinModule(*lin, "fc", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "module 'fc' (Linear): 'weight' must have rank 2, got shape (12,)");

  diags.clear();
  lin->registerParameter("weight", Tensor::zeros({3, 4}));
  lin->registerParameter("bias", Tensor::zeros({5}));
  verifyBuiltinModule(*lin, "fc", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "module 'fc' (Linear): 'bias' has 5 elements, expected 3");

  diags.clear();
  Conv2d conv(4, 8, {3, 3});
  conv.setValue("stride", TreeDef::tuple({}));
  conv.setValue("groups", Scalar(int64_t(3)));
  verifyBuiltinModule(conv, "conv", diags);
  REQUIRE(diags.size() == 2);
  CHECK(diags[0].message == "module 'conv' (Conv2d): 'stride' must be an int or a pair of "
                            "ints, got ()");
  CHECK(diags[1].message == "module 'conv' (Conv2d): weight (8, 4, 3, 3) does not split into "
                            "3 groups");

  diags.clear();
  BatchNorm2d bn(4);
  bn.removeAttr("running_var");
  verifyBuiltinModule(bn, "bn", diags);
  REQUIRE(diags.size() == 1);
  CHECK(diags[0].message == "module 'bn' (BatchNorm2d): has no 'running_var' parameter, which "
                            "its kernel reads");
  diags.clear();
  BatchNorm2d training(4, 1e-5, 0.9, true, /*track=*/false);
  verifyBuiltinModule(training, "bn", diags);
  CHECK(diags.empty());
}

TEST_CASE("module checks: verify() reports a broken builtin in the tree", "[ir][verifier]") {
  auto top = std::make_unique<Module>("Net");
  top->addModule<Linear>("fc", 4, 3).removeAttr("weight");
  auto tm = TracedModule::fromModule(std::move(top));
  GraphBuilder b = GraphBuilder::top(*tm, {InputSpec("x")});
  b.setOutputs(b.arg(0));
  auto diags = verify(*tm);
  REQUIRE(diags.size() == 1);
  CHECK_THAT(diags[0].message, Catch::Contains("module 'fc' (Linear): has no 'weight'"));
}

TEST_CASE("huge-page advice changes no bytes; the reserved heap serves allocations",
          "[ir][memory]") {
  adviseHugePages(nullptr, size_t(64) << 20);
  std::vector<char> small(4096, 'a');
  adviseHugePages(small.data(), small.size());
  CHECK(small[4095] == 'a');

  std::vector<char> large(size_t(6) << 20, 'b');
  adviseHugePages(large.data(), large.size());
  CHECK(large.front() == 'b');
  CHECK(large.back() == 'b');

  reserveHugePageHeap(size_t(1) << 20); // below the threshold: nothing
  reserveHugePageHeap(size_t(96) << 20);
  std::vector<void *> blocks;
  for (int i = 0; i < 20000; ++i) {
    size_t n = 16 + size_t(i % 97) * 24;
    char *p = static_cast<char *>(std::malloc(n));
    REQUIRE(p);
    std::memset(p, i & 0xff, n);
    blocks.push_back(p);
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    size_t n = 16 + (i % 97) * 24;
    const char *p = static_cast<const char *>(blocks[i]);
    REQUIRE(p[0] == char(i & 0xff));
    REQUIRE(p[n - 1] == char(i & 0xff));
    std::free(blocks[i]);
  }
}
