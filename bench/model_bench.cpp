//===- model_bench.cpp - Whole-model latency: ResNet-18, MobileNetV2 -----===//
//
// Builds torchvision's ResNet-18 and MobileNetV2 with the GraphBuilder, as
// the tracer would record them: blocks are traced submodules called from the
// top graph, convs / batch norms / activations are builtin modules. Runs
// them with rt::Interpreter, hierarchical and flattened, at 1 and 2 threads,
// and prints min / median latency. With --torch it runs
// bench/torch_latency.py (the same architectures in PyTorch) and prints the
// tmgraph / torch ratio; with --weights DIR (written by
// `torch_latency.py --dump DIR`) it loads torch's ResNet-18 weights and
// input and compares the output with torch's.
//
// Not a test: it takes tens of seconds and an optional PyTorch install.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tm/ir/IR.h"
#include "tm/runtime/Common.h"
#include "tm/runtime/Conv.h"
#include "tm/runtime/Interpreter.h"

#ifndef TM_SOURCE_DIR
#define TM_SOURCE_DIR "."
#endif

using namespace tmg;

namespace {

//===----------------------------------------------------------------------===//
// Model construction
//===----------------------------------------------------------------------===//

/// Every conv gets its own seed so that no two layers share weights.
struct Seeds {
  uint64_t next = 1;
  uint64_t operator()() { return next++; }
};

/// A BatchNorm2d whose affine parameters and running statistics are not the
/// identity: with the defaults (mean 0, var 1, weight 1, bias 0) a kernel
/// that ignored them would go unnoticed.
std::unique_ptr<BatchNorm2d> makeBn(int64_t c, Seeds &seeds) {
  auto bn = std::make_unique<BatchNorm2d>(c);
  auto scaled = [&](double scale, double offset, bool positive) {
    Tensor t = Tensor::randn({c}, seeds());
    float *p = t.data<float>();
    for (int64_t i = 0; i < c; ++i)
      p[i] = float(offset + scale * (positive ? std::fabs(p[i]) : p[i]));
    return t;
  };
  bn->registerParameter("weight", scaled(0.1, 1.0, false));
  bn->registerParameter("bias", scaled(0.1, 0.0, false));
  bn->registerBuffer("running_mean", scaled(0.1, 0.0, false));
  bn->registerBuffer("running_var", scaled(0.2, 0.5, true));
  return bn;
}

void addConv(Module &m, llvm::StringRef name, int64_t in, int64_t out,
             int64_t k, int64_t stride, int64_t groups, Seeds &seeds) {
  m.addModule<Conv2d>(name, in, out, k, stride, k / 2, 1, groups,
                      /*bias=*/false, seeds());
}

Node *call(GraphBuilder &b, llvm::StringRef attr, Node *x) {
  return b.callModule(b.getAttr(b.self(), attr), {x});
}

// -- ResNet-18 ----------------------------------------------------------------

/// torchvision's BasicBlock; `downsample_0/1` (conv 1x1 + bn) only on blocks
/// that change the shape.
std::unique_ptr<Module> basicBlock(int64_t in, int64_t out, int64_t stride,
                                   Seeds &seeds) {
  auto m = std::make_unique<Module>("BasicBlock");
  addConv(*m, "conv1", in, out, 3, stride, 1, seeds);
  m->registerModule("bn1", makeBn(out, seeds));
  m->addModule<ReLU>("relu");
  addConv(*m, "conv2", out, out, 3, 1, 1, seeds);
  m->registerModule("bn2", makeBn(out, seeds));
  if (stride != 1 || in != out) {
    addConv(*m, "downsample_0", in, out, 1, stride, 1, seeds);
    m->registerModule("downsample_1", makeBn(out, seeds));
  }
  return m;
}

void basicBlockBody(GraphBuilder &b) {
  Node *x = b.arg(0);
  Node *y = call(b, "relu", call(b, "bn1", call(b, "conv1", x)));
  y = call(b, "bn2", call(b, "conv2", y));
  Node *identity = x;
  if (b.graph().owner()->hasAttr("downsample_0"))
    identity = call(b, "downsample_1", call(b, "downsample_0", x));
  b.setOutputs(call(b, "relu", b.callMethod(y, "__add__", {identity})));
}

std::unique_ptr<TracedModule> buildResNet18() {
  Seeds seeds;
  auto net = std::make_unique<Module>("ResNet");
  addConv(*net, "conv1", 3, 64, 7, 2, 1, seeds);
  net->registerModule("bn1", makeBn(64, seeds));
  net->addModule<ReLU>("relu");
  net->addModule<MaxPool2d>("maxpool", 3, 2, 1);
  std::vector<std::string> blocks;
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    int64_t out = int64_t(64) << stage;
    for (int j = 0; j < 2; ++j) {
      int64_t stride = stage > 0 && j == 0 ? 2 : 1;
      blocks.push_back("layer" + std::to_string(stage + 1) + "_" + std::to_string(j));
      net->registerModule(blocks.back(), basicBlock(in, out, stride, seeds));
      in = out;
    }
  }
  net->addModule<AdaptiveAvgPool2d>("avgpool", IntPair{1, 1});
  net->addModule<Linear>("fc", 512, 1000, true, seeds());
  auto tm = TracedModule::fromModule(std::move(net));

  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 224, 224}}});
  Node *x = call(b, "relu", call(b, "bn1", call(b, "conv1", b.arg(0))));
  x = call(b, "maxpool", x);
  for (const std::string &blk : blocks)
    x = b.callModule(b.getAttr(b.self(), blk), {x}, {}, basicBlockBody, {"x"});
  x = b.callFunction("flatten", {call(b, "avgpool", x), 1});
  b.finish(call(b, "fc", x));
  return tm;
}

// -- MobileNetV2 --------------------------------------------------------------

/// torchvision's Conv2dNormActivation with ReLU6 (stem and last conv).
std::unique_ptr<Module> convBnRelu6(int64_t in, int64_t out, int64_t k,
                                    int64_t stride, Seeds &seeds) {
  auto m = std::make_unique<Module>("ConvBNReLU");
  addConv(*m, "conv", in, out, k, stride, 1, seeds);
  m->registerModule("bn", makeBn(out, seeds));
  m->addModule<ReLU6>("act");
  return m;
}

void convBnRelu6Body(GraphBuilder &b) {
  b.setOutputs(call(b, "act", call(b, "bn", call(b, "conv", b.arg(0)))));
}

/// torchvision's InvertedResidual: [expand 1x1 + bn + relu6] (when the
/// expansion is not 1), depthwise 3x3 + bn + relu6, project 1x1 + bn, and a
/// residual add when the shape is kept.
std::unique_ptr<Module> invertedResidual(int64_t in, int64_t out, int64_t stride,
                                         int64_t expand, Seeds &seeds) {
  auto m = std::make_unique<Module>("InvertedResidual");
  int64_t hidden = in * expand;
  if (expand != 1) {
    addConv(*m, "expand", in, hidden, 1, 1, 1, seeds);
    m->registerModule("expand_bn", makeBn(hidden, seeds));
  }
  addConv(*m, "dw", hidden, hidden, 3, stride, hidden, seeds);
  m->registerModule("dw_bn", makeBn(hidden, seeds));
  addConv(*m, "project", hidden, out, 1, 1, 1, seeds);
  m->registerModule("project_bn", makeBn(out, seeds));
  m->addModule<ReLU6>("act");
  m->setValue("use_res_connect", Scalar(stride == 1 && in == out));
  return m;
}

void invertedResidualBody(GraphBuilder &b) {
  Module &self = *b.graph().owner();
  Node *x = b.arg(0), *y = x;
  if (self.hasAttr("expand"))
    y = call(b, "act", call(b, "expand_bn", call(b, "expand", y)));
  y = call(b, "act", call(b, "dw_bn", call(b, "dw", y)));
  y = call(b, "project_bn", call(b, "project", y));
  if (self.boolValue("use_res_connect"))
    y = b.callMethod(x, "__add__", {y});
  b.setOutputs(y);
}

std::unique_ptr<TracedModule> buildMobileNetV2() {
  Seeds seeds;
  auto net = std::make_unique<Module>("MobileNetV2");
  net->registerModule("stem", convBnRelu6(3, 32, 3, 2, seeds));
  // (expansion t, channels c, repeats n, first stride s), torchvision's table.
  const int64_t settings[7][4] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},
                                  {6, 64, 4, 2},  {6, 96, 3, 1},  {6, 160, 3, 2},
                                  {6, 320, 1, 1}};
  std::vector<std::string> blocks;
  int64_t in = 32;
  for (const auto &[t, c, n, s] : settings)
    for (int64_t i = 0; i < n; ++i) {
      blocks.push_back("block" + std::to_string(blocks.size() + 1));
      net->registerModule(blocks.back(), invertedResidual(in, c, i == 0 ? s : 1, t, seeds));
      in = c;
    }
  net->registerModule("last", convBnRelu6(320, 1280, 1, 1, seeds));
  net->addModule<AdaptiveAvgPool2d>("avgpool", IntPair{1, 1});
  net->addModule<Linear>("fc", 1280, 1000, true, seeds());
  auto tm = TracedModule::fromModule(std::move(net));

  GraphBuilder b = GraphBuilder::top(*tm, {{"x", Shape{1, 3, 224, 224}}});
  Node *x = b.callModule(b.getAttr(b.self(), "stem"), {b.arg(0)}, {},
                         convBnRelu6Body, {"x"});
  for (const std::string &blk : blocks)
    x = b.callModule(b.getAttr(b.self(), blk), {x}, {}, invertedResidualBody, {"x"});
  x = b.callModule(b.getAttr(b.self(), "last"), {x}, {}, convBnRelu6Body, {"x"});
  x = b.callFunction("flatten", {call(b, "avgpool", x), 1});
  b.finish(call(b, "fc", x));
  return tm;
}

//===----------------------------------------------------------------------===//
// Weights from torch (--weights DIR)
//===----------------------------------------------------------------------===//

/// Reads a little-endian float32 C-order .npy (all torch_latency.py writes).
/// A dozen lines here rather than a dependency on tmgraph-io, which the
/// benchmark otherwise does not need.
Tensor readFloatNpy(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), {});
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0)
    raise("{}: not an .npy file", path);
  size_t hlen = bytes[6] == 1 ? size_t(uint8_t(bytes[8])) | size_t(uint8_t(bytes[9])) << 8
                              : *reinterpret_cast<const uint32_t *>(&bytes[8]);
  size_t start = bytes[6] == 1 ? 10 : 12;
  std::string header = bytes.substr(start, hlen);
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos)
    raise("{}: expected little-endian float32 in C order: {}", path, header);
  size_t open = header.find('(', header.find("'shape'")), close = header.find(')', open);
  std::vector<int64_t> shape;
  std::stringstream dims(header.substr(open + 1, close - open - 1));
  for (std::string d; std::getline(dims, d, ',');)
    if (d.find_first_not_of(' ') != std::string::npos)
      shape.push_back(std::stoll(d));
  Tensor t = Tensor::empty(shape);
  if (bytes.size() - start - hlen != t.nbytes())
    raise("{}: {} data bytes for shape of {} bytes", path, bytes.size() - start - hlen,
          t.nbytes());
  std::copy_n(bytes.data() + start + hlen, t.nbytes(), static_cast<char *>(t.rawData()));
  return t;
}

/// Our attribute path -> torchvision's state_dict key: "layer2_0.conv1.weight"
/// -> "layer2.0.conv1.weight", "downsample_1.bias" -> "downsample.1.bias".
std::string torchKey(std::string name) {
  if (name.rfind("layer", 0) == 0 && name.size() > 7 && name[6] == '_')
    name[6] = '.';
  if (size_t p = name.find("downsample_"); p != std::string::npos)
    name[p + 10] = '.';
  return name;
}

void loadTorchWeights(TracedModule &tm, const std::string &dir) {
  std::vector<std::string> names;
  tm.namedTensors([&](const std::string &n, const Tensor &) { names.push_back(n); });
  for (const std::string &n : names) {
    Tensor t = readFloatNpy(dir + "/" + torchKey(n) + ".npy");
    size_t dot = n.rfind('.');
    Module *owner = dot == std::string::npos ? &tm : tm.resolveModule(n.substr(0, dot));
    Tensor *dst = owner ? owner->tensor(n.substr(dot + 1)) : nullptr;
    if (!dst || dst->shape() != t.shape())
      raise("{}: shape {} does not match the model's", n, t.str());
    *dst = t;
  }
}

//===----------------------------------------------------------------------===//
// Timing
//===----------------------------------------------------------------------===//

struct Latency {
  double minMs = 0, medianMs = 0;
  /// Median process CPU time per run (all threads): on a shared machine
  /// the 1-thread figure is what the run would take without contention.
  double cpuMs = 0;
  /// Minimum process CPU time per run: on a loaded machine, the run that
  /// was least disturbed.
  double cpuMinMs = 0;
};

double cpuNowMs() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

Latency timeRuns(const rt::Interpreter &interp, const Tensor &x, int warmup,
                 int repeat) {
  for (int i = 0; i < warmup; ++i)
    interp.run({x});
  std::vector<double> ms, cpu;
  for (int i = 0; i < repeat; ++i) {
    double c0 = cpuNowMs();
    auto t0 = std::chrono::steady_clock::now();
    interp.run({x});
    auto t1 = std::chrono::steady_clock::now();
    cpu.push_back(cpuNowMs() - c0);
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  return {ms.front(), ms[ms.size() / 2], cpu[cpu.size() / 2], cpu.front()};
}

/// The one line format shared with torch_latency.py, which model_bench
/// parses back: "<model> <impl> threads=<T> min=<ms> ms median=<ms> ms
/// cpu=<ms> ms cpumin=<ms> ms".
void printLatency(const std::string &model, const std::string &impl, int threads,
                  Latency l) {
  std::printf("%-12s %-13s threads=%d min=%.2f ms median=%.2f ms cpu=%.2f ms "
              "cpumin=%.2f ms\n",
              model.c_str(), impl.c_str(), threads, l.minMs, l.medianMs, l.cpuMs,
              l.cpuMinMs);
  std::fflush(stdout);
}

bool allFinite(const Tensor &t) {
  const float *p = t.data<float>();
  return std::all_of(p, p + t.numel(), [](float v) { return std::isfinite(v); });
}

/// Runs torch_latency.py for one thread count and returns its latency per
/// model (empty when it failed, e.g. PyTorch is not installed).
std::map<std::string, Latency> runTorch(const std::string &script, int repeat,
                                        int threads) {
  std::string cmd = "/usr/bin/python3 '" + script + "' --repeat " +
                    std::to_string(repeat) + " --threads " + std::to_string(threads);
  std::map<std::string, Latency> out;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p)
    return out;
  char line[512];
  while (std::fgets(line, sizeof line, p)) {
    std::fputs(line, stdout);
    char model[64], impl[64];
    int t;
    Latency l;
    if (std::sscanf(line,
                    "%63s %63s threads=%d min=%lf ms median=%lf ms cpu=%lf ms "
                    "cpumin=%lf ms",
                    model, impl, &t, &l.minMs, &l.medianMs, &l.cpuMs, &l.cpuMinMs) >= 5)
      out[model] = l;
  }
  if (pclose(p) != 0)
    std::fprintf(stderr, "warning: '%s' failed\n", cmd.c_str());
  return out;
}

} // namespace

int main(int argc, char **argv) {
  int repeat = 20, warmup = 3;
  bool torch = false;
  // Also time the models with their convolutions on OpenBLAS (the path
  // before the micro-kernel), in the same run.
  bool blasConv = false;
  std::string only; // run just this model (for profiling)
  std::string script = std::string(TM_SOURCE_DIR) + "/bench/torch_latency.py";
  std::string weights;
  std::vector<int> threadCounts = {1, 2};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc)
      repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--warmup" && i + 1 < argc)
      warmup = std::max(0, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc)
      threadCounts = {std::max(1, std::atoi(argv[++i]))};
    else if (a == "--torch")
      torch = true;
    else if (a == "--blas-conv")
      blasConv = true;
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else if (a == "--torch-script" && i + 1 < argc)
      script = argv[++i];
    else if (a == "--weights" && i + 1 < argc)
      weights = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: tm-model-bench [--repeat N] [--warmup N] [--threads T] "
                   "[--torch] [--blas-conv] [--only MODEL] [--torch-script PATH] "
                   "[--weights DIR]\n");
      return 2;
    }
  }

  try {
    struct Model {
      std::string name;
      std::unique_ptr<TracedModule> tm;
    };
    std::vector<Model> models;
    if (only.empty() || only == "resnet18")
      models.push_back({"resnet18", buildResNet18()});
    if (only.empty() || only == "mobilenet_v2")
      models.push_back({"mobilenet_v2", buildMobileNetV2()});
    Tensor x = Tensor::randn({1, 3, 224, 224}, 12345);
    if (!weights.empty()) {
      loadTorchWeights(*models[0].tm, weights);
      x = readFloatNpy(weights + "/input.npy");
    }

    // tmgraph latency per model and thread count; results[model][threads].
    std::map<std::string, std::map<int, Latency>> results;
    bool ok = true;
    for (Model &m : models) {
      if (auto r = verifyOrReport(*m.tm); r.failed()) {
        std::fprintf(stderr, "%s: %s\n", m.name.c_str(), r.diagnostic().str().c_str());
        return 1;
      }
      auto flat = m.tm->flatten();
      // fastMath: batch norms folded into convs at plan time, as ONNX
      // Runtime folds them, so both run the same arithmetic.
      rt::InterpreterOptions fast{.fastMath = true};
      rt::Interpreter hier(*m.tm, fast), flatInterp(*flat, fast);
      for (int threads : threadCounts) {
        rt::setNumThreads(threads);
        Tensor yh = hier.run({x}).outputs[0], yf = flatInterp.run({x}).outputs[0];
        // Flattening only inlines graphs: the same kernels run in the same
        // order on the same data, so the results must agree bit for bit.
        if (!allFinite(yh) || !yh.bitwiseEqual(yf)) {
          std::fprintf(stderr, "%s: output not finite or flat != hierarchical\n",
                       m.name.c_str());
          ok = false;
        }
        Latency lh = timeRuns(hier, x, warmup, repeat);
        printLatency(m.name, "tmgraph", threads, lh);
        printLatency(m.name, "tmgraph-flat", threads, timeRuns(flatInterp, x, warmup, repeat));
        results[m.name][threads] = lh;
        if (blasConv) {
          rt::Interpreter blas(*m.tm, {.fastMath = true, .convGemm = rt::ConvGemm::Blas});
          printLatency(m.name, "tmgraph-blas", threads, timeRuns(blas, x, warmup, repeat));
        }
      }
      if (m.name == "resnet18" && !weights.empty()) {
        Tensor ref = readFloatNpy(weights + "/output.npy");
        Tensor y = hier.run({x}).outputs[0];
        double maxAbs = 0, maxRef = 0;
        for (int64_t i = 0; i < y.numel(); ++i) {
          maxAbs = std::max(maxAbs, std::fabs(y.at(i) - ref.at(i)));
          maxRef = std::max(maxRef, std::fabs(ref.at(i)));
        }
        std::printf("resnet18 vs torch: max |diff| %.3g (max |torch| %.3g)\n", maxAbs,
                    maxRef);
        ok &= maxAbs <= 1e-3 * std::max(1.0, maxRef);
      }
    }

    if (torch) {
      std::vector<std::string> table;
      for (int threads : threadCounts) {
        auto ref = runTorch(script, repeat, threads);
        for (auto &[name, byThreads] : results) {
          if (!ref.count(name))
            continue;
          Latency t = byThreads[threads], r = ref[name];
          char row[300];
          std::snprintf(row, sizeof row,
                        "%-12s %7d %14.2f %14.2f %7.2f %12.2f %12.2f %7.2f %7.2f %7.2f",
                        name.c_str(), threads, t.medianMs, r.medianMs, t.medianMs / r.medianMs,
                        t.cpuMs, r.cpuMs, r.cpuMs > 0 ? t.cpuMs / r.cpuMs : 0.0,
                        t.minMs / r.minMs, r.cpuMinMs > 0 ? t.cpuMinMs / r.cpuMinMs : 0.0);
          table.push_back(row);
        }
      }
      // Printed after all torch output so the summary reads as one table.
      std::printf("\nmedian latency and median process CPU time per run, ratio = tmgraph / "
                  "torch; last two columns: ratios of the minimum latency and of the "
                  "minimum CPU time\n%-12s %7s %14s %14s %7s %12s %12s %7s %7s %7s\n",
                  "model", "threads", "tmgraph ms", "torch ms", "ratio", "tmgraph cpu",
                  "torch cpu", "ratio", "min", "cpumin");
      for (const std::string &row : table)
        std::printf("%s\n", row.c_str());
    }
    return ok ? 0 : 1;
  } catch (const Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
