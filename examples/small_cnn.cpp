//===- small_cnn.cpp - The bundled example model -------------------------===//
//
// Builds a small CNN as a traced module with the GraphBuilder (what the
// tracer records for the equivalent MegEngine module), prints its graphs in
// the reference's format, verifies it, flattens it and prints the result.
//
//   class ConvBlock(M.Module):          # conv-bn-relu with a residual add
//       def forward(self, x):
//           y = F.relu(self.bn(self.conv(x)))
//           return y + x
//   class SmallCNN(M.Module):
//       def forward(self, x):
//           x = F.relu(self.stem_bn(self.stem(x)))
//           x = self.block1(x)
//           x = self.block2(x)
//           x = F.flatten(self.pool(x), 1)
//           return self.fc(x)
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <string>

#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"

using namespace tmg;

static std::unique_ptr<Module> convBlock(int64_t ch, uint64_t seed) {
  auto m = std::make_unique<Module>("ConvBlock");
  m->addModule<Conv2d>("conv", ch, ch, 3, 1, 1, 1, 1, false, seed);
  m->addModule<BatchNorm2d>("bn", ch);
  return m;
}

static void convBlockBody(GraphBuilder &b) {
  Node *x = b.arg(0);
  Node *conv = b.getAttr(b.self(), "conv");
  Node *bn = b.getAttr(b.self(), "bn");
  Node *y = b.callFunction("relu", {b.callModule(bn, {b.callModule(conv, {x})})});
  b.setOutputs(b.callMethod(y, "__add__", {x}));
}

std::unique_ptr<TracedModule> buildSmallCnn() {
  auto net = std::make_unique<Module>("SmallCNN");
  net->addModule<Conv2d>("stem", 3, 16, 3, 2, 1, 1, 1, false, 1);
  net->addModule<BatchNorm2d>("stem_bn", 16);
  net->registerModule("block1", convBlock(16, 2));
  net->registerModule("block2", convBlock(16, 3));
  net->addModule<AdaptiveAvgPool2d>("pool", IntPair{1, 1});
  net->addModule<Linear>("fc", 16, 10, true, 4);
  auto tm = TracedModule::fromModule(std::move(net));

  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 32, 32}}});
  Node *stem = b.getAttr(b.self(), "stem");
  Node *stemBn = b.getAttr(b.self(), "stem_bn");
  Node *x = b.callFunction("relu", {b.callModule(stemBn, {b.callModule(stem, {b.arg(0)})})});
  for (const char *blk : {"block1", "block2"})
    x = b.callModule(b.getAttr(b.self(), blk), {x}, {}, convBlockBody, {"x"});
  Node *pool = b.getAttr(b.self(), "pool");
  x = b.callFunction("flatten", {b.callModule(pool, {x}), 1});
  Node *fc = b.getAttr(b.self(), "fc");
  b.finish(b.callModule(fc, {x}));
  return tm;
}

int main(int argc, char **argv) {
  // `tm-example -o small_cnn.tmir` also writes the model (and its weights).
  std::string save = argc == 3 && std::string(argv[1]) == "-o" ? argv[2] : "";
  if (argc != 1 && save.empty()) {
    std::fprintf(stderr, "usage: tm-example [-o MODEL.tmir]\n");
    return 2;
  }
  try {
    auto tm = buildSmallCnn();
    std::printf("== traced module (one graph per module and call signature)\n%s\n\n",
                tm->str().c_str());
    if (auto r = verifyOrReport(*tm); r.failed()) {
      std::fprintf(stderr, "%s\n", r.diagnostic().str().c_str());
      return 1;
    }
    auto flat = tm->flatten();
    if (auto r = verifyOrReport(*flat); r.failed()) {
      std::fprintf(stderr, "%s\n", r.diagnostic().str().c_str());
      return 1;
    }
    std::printf("== flattened, with ids ({:i})\n%s\n\n",
                fmt::format("{:i}", flat->graph()).c_str());
    std::printf("%zu exprs before flattening (all graphs), %zu after; %zu "
                "parameters and buffers\n",
                tm->graph().exprs(true).asCount(), flat->graph().exprs().asCount(),
                [&] {
                  size_t n = 0;
                  flat->namedTensors([&](const std::string &, const Tensor &) { ++n; });
                  return n;
                }());
    if (!save.empty()) {
      if (auto r = saveTmir(*tm, save); r.failed()) {
        std::fprintf(stderr, "%s\n", r.diagnostic().str().c_str());
        return 1;
      }
      std::printf("wrote %s\n", save.c_str());
    }
    return 0;
  } catch (const Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
