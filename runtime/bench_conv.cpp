//===- bench_conv.cpp - conv2d against sgemm on ResNet-18 shapes ----------===//
//
// Times rt::conv2d on the distinct convolution shapes of ResNet-18 or
// ResNet-50 (batch 1, 224x224 input) and, for each, cblas_sgemm on the GEMM with the same
// arithmetic (M = out channels, N = Ho * Wo, K = in channels * kh * kw),
// using OpenBLAS's own threading with the same thread count. Prints GFLOP/s
// of both, their ratio, and conv2d's share of the machine's AVX-512 FMA
// peak measured in the same run (one FMA loop per thread).
//
//   tm-bench-conv [--net resnet18|resnet50] [--threads N]
//                 [--min-time SECONDS] [--rounds R] [--cpu]
//
// Each figure is the best, over R rounds (default 3), of the minimum time
// of a run of at least SECONDS (default 0.3); --cpu times process CPU time
// instead of wall clock.
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TM_BENCH_AVX512 1
#endif

#include <cblas.h>

#include <fmt/format.h>
#include <llvm/ADT/ArrayRef.h>

#include "tm/runtime/Kernels.h"

using namespace tmg;

namespace {

struct ConvShape {
  const char *where; ///< layers using the shape
  int64_t c, h, w, o, k, stride, pad;
};

// Every distinct conv of torchvision's resnet18 (the 3x3 s1 shapes repeat
// within a stage; downsample shortcuts are the 1x1 s2 ones).
const ConvShape ResNet18[] = {
    {"conv1", 3, 224, 224, 64, 7, 2, 3},
    {"layer1.*.conv*", 64, 56, 56, 64, 3, 1, 1},
    {"layer2.0.conv1", 64, 56, 56, 128, 3, 2, 1},
    {"layer2.0.downsample", 64, 56, 56, 128, 1, 2, 0},
    {"layer2.*.conv*", 128, 28, 28, 128, 3, 1, 1},
    {"layer3.0.conv1", 128, 28, 28, 256, 3, 2, 1},
    {"layer3.0.downsample", 128, 28, 28, 256, 1, 2, 0},
    {"layer3.*.conv*", 256, 14, 14, 256, 3, 1, 1},
    {"layer4.0.conv1", 256, 14, 14, 512, 3, 2, 1},
    {"layer4.0.downsample", 256, 14, 14, 512, 1, 2, 0},
    {"layer4.*.conv*", 512, 7, 7, 512, 3, 1, 1},
};

// Every distinct conv of torchvision's resnet50 (stride in the 3x3 conv).
const ConvShape ResNet50[] = {
    {"conv1", 3, 224, 224, 64, 7, 2, 3},
    {"layer1.0.conv1", 64, 56, 56, 64, 1, 1, 0},
    {"layer1.*.conv2", 64, 56, 56, 64, 3, 1, 1},
    {"layer1.*.conv3, downsample", 64, 56, 56, 256, 1, 1, 0},
    {"layer1.[12].conv1", 256, 56, 56, 64, 1, 1, 0},
    {"layer2.0.conv1", 256, 56, 56, 128, 1, 1, 0},
    {"layer2.0.conv2", 128, 56, 56, 128, 3, 2, 1},
    {"layer2.0.downsample", 256, 56, 56, 512, 1, 2, 0},
    {"layer2.*.conv3", 128, 28, 28, 512, 1, 1, 0},
    {"layer2.[123].conv1", 512, 28, 28, 128, 1, 1, 0},
    {"layer2.[123].conv2", 128, 28, 28, 128, 3, 1, 1},
    {"layer3.0.conv1", 512, 28, 28, 256, 1, 1, 0},
    {"layer3.0.conv2", 256, 28, 28, 256, 3, 2, 1},
    {"layer3.0.downsample", 512, 28, 28, 1024, 1, 2, 0},
    {"layer3.*.conv3", 256, 14, 14, 1024, 1, 1, 0},
    {"layer3.[1-5].conv1", 1024, 14, 14, 256, 1, 1, 0},
    {"layer3.[1-5].conv2", 256, 14, 14, 256, 3, 1, 1},
    {"layer4.0.conv1", 1024, 14, 14, 512, 1, 1, 0},
    {"layer4.0.conv2", 512, 14, 14, 512, 3, 2, 1},
    {"layer4.0.downsample", 1024, 14, 14, 2048, 1, 2, 0},
    {"layer4.*.conv3", 512, 7, 7, 2048, 1, 1, 0},
    {"layer4.[12].conv1", 2048, 7, 7, 512, 1, 1, 0},
    {"layer4.[12].conv2", 512, 7, 7, 512, 3, 1, 1},
};

using Clock = std::chrono::steady_clock;

/// With --cpu: time is the process's CPU time (all threads), which on a
/// loaded machine measures the work without the waits for a core.
bool useCpuTime = false;

double now() {
  if (useCpuTime) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

/// Minimum time of f over at least `minTime` seconds of wall clock (and 5
/// runs), after a warm-up of a quarter of that. The minimum, not the
/// median: other processes only ever add time.
template <typename F> double minSeconds(F f, double minTime) {
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  for (auto t0 = Clock::now(); since(t0) < minTime / 4;)
    f();
  double best = 1e30;
  int runs = 0;
  for (auto t0 = Clock::now(); since(t0) < minTime || runs < 5; ++runs) {
    double t = now();
    f();
    best = std::min(best, now() - t);
  }
  return best;
}

#ifdef TM_BENCH_AVX512
/// GFLOP/s of one thread's AVX-512 FMA loop: 12 independent accumulators
/// (more than FMA latency x FMA ports), nothing read from memory. The
/// empty asm keeps the compiler from merging the chains.
__attribute__((target("avx512f"))) double fmaLoopGflops(double minTime) {
  __m512 a0 = _mm512_set1_ps(1.0f), a1 = _mm512_set1_ps(1.1f),
         a2 = _mm512_set1_ps(1.2f), a3 = _mm512_set1_ps(1.3f),
         a4 = _mm512_set1_ps(1.4f), a5 = _mm512_set1_ps(1.5f),
         a6 = _mm512_set1_ps(1.6f), a7 = _mm512_set1_ps(1.7f),
         a8 = _mm512_set1_ps(1.8f), a9 = _mm512_set1_ps(1.9f),
         a10 = _mm512_set1_ps(2.0f), a11 = _mm512_set1_ps(2.1f);
  const __m512 mul = _mm512_set1_ps(0.9999999f), add = _mm512_set1_ps(1e-7f);
  int64_t iters = 0;
  auto t0 = Clock::now();
  double s = 0;
  do {
    for (int r = 0; r < 1 << 16; ++r) {
#define TM_FMA(x) x = _mm512_fmadd_ps(x, mul, add);
      TM_FMA(a0)
      TM_FMA(a1) TM_FMA(a2) TM_FMA(a3) TM_FMA(a4) TM_FMA(a5) TM_FMA(a6)
          TM_FMA(a7) TM_FMA(a8) TM_FMA(a9) TM_FMA(a10) TM_FMA(a11)
#undef TM_FMA
              asm(""
                  : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5),
                    "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10),
                    "+v"(a11));
    }
    iters += 1 << 16;
    s = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (s < minTime);
  __m512 sum = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
      _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  sum = _mm512_add_ps(
      sum, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  asm volatile("" : : "v"(sum));
  return double(iters) * 12 * 16 * 2 / s / 1e9;
}
#endif

/// The FMA peak of `threads` cores (0 without AVX-512): the sum of the
/// threads' rates, each running its own loop at the same time.
double fmaPeakGflops(int threads, double minTime) {
#ifdef TM_BENCH_AVX512
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f"))
    return 0;
  std::vector<double> rate(static_cast<size_t>(threads));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back(
        [&rate, t, minTime] { rate[size_t(t)] = fmaLoopGflops(minTime); });
  for (auto &t : pool)
    t.join();
  double sum = 0;
  for (double r : rate)
    sum += r;
  return sum;
#else
  (void)threads, (void)minTime;
  return 0;
#endif
}

struct Options {
  int threads = rt::numThreads();
  double minTime = 0.3;
  int rounds = 3;
  llvm::ArrayRef<ConvShape> shapes = ResNet18;
  const char *net = "ResNet-18";
};

/// The command line, or nullopt after printing what is wrong.
std::optional<Options> parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--net") && i + 1 < argc) {
      ++i;
      if (!std::strcmp(argv[i], "resnet18")) {
        o.shapes = ResNet18, o.net = "ResNet-18";
      } else if (!std::strcmp(argv[i], "resnet50")) {
        o.shapes = ResNet50, o.net = "ResNet-50";
      } else {
        std::fprintf(stderr, "tm-bench-conv: unknown --net '%s' (resnet18, resnet50)\n", argv[i]);
        return std::nullopt;
      }
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      o.threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--min-time") && i + 1 < argc) {
      o.minTime = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--cpu")) {
      useCpuTime = true;
    } else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) {
      o.rounds = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: tm-bench-conv [--net resnet18|resnet50] [--threads N] "
                           "[--min-time S] [--rounds R] [--cpu]\n");
      return std::nullopt;
    }
  }
  return o;
}

} // namespace

int main(int argc, char **argv) {
  std::optional<Options> opts = parseArgs(argc, argv);
  if (!opts)
    return 2;
  int threads = opts->threads, rounds = opts->rounds;
  double minTime = opts->minTime;
  llvm::ArrayRef<ConvShape> Shapes = opts->shapes;
  const char *net = opts->net;
  rt::setNumThreads(threads);
  std::printf("conv2d vs cblas_sgemm, %s shapes, batch 1, %d "
              "thread(s), OpenBLAS %s, best of %d rounds\n\n",
              net, threads, openblas_get_corename(), rounds);
  bool micro = rt::convMicroKernelAvailable();

  // conv2d: the default path, as the interpreter runs it (weights packed
  // once, before timing); the same with the weights packed on every call;
  // the micro-kernel's im2col path (forced: the default takes Winograd
  // for the 3x3 stride-1 shapes); the OpenBLAS path (forced). Each round times every conv2d, then every
  // sgemm reference: OpenBLAS's worker threads keep spinning for a while
  // after a threaded call and would steal cycles from the OpenMP threads of
  // a conv measured right after. On a shared machine the load varies, so
  // each figure keeps its best over the rounds.
  size_t count = Shapes.size();
  std::vector<double> tConv(count, 1e30), tCall(count, 1e30),
      tBlas(count, 1e30), tGemm(count, 1e30), tIm2col(count, 1e30),
      flops(count);
  std::vector<int64_t> ms(count), ns(count), ks(count);
  for (size_t i = 0; i < count; ++i) {
    const ConvShape &s = Shapes[i];
    int64_t oh = rt::convOutputSize(s.h, s.k, s.stride, s.pad, s.pad, 1);
    int64_t ow = rt::convOutputSize(s.w, s.k, s.stride, s.pad, s.pad, 1);
    ms[i] = s.o;
    ns[i] = oh * ow;
    ks[i] = s.c * s.k * s.k;
    flops[i] = 2.0 * double(ms[i]) * double(ns[i]) * double(ks[i]);
  }
  double peak = 0;
  for (int round = 0; round < rounds; ++round) {
    peak = std::max(peak, fmaPeakGflops(threads, minTime));
    for (size_t i = 0; i < count; ++i) {
      const ConvShape &s = Shapes[i];
      Tensor x = Tensor::randn({1, s.c, s.h, s.w}, 1);
      Tensor w = Tensor::randn({s.o, s.c, s.k, s.k}, 2);
      Tensor b = Tensor::randn({s.o}, 3);
      auto packed = rt::packConvWeight(w, 1);
      rt::Conv2dParams p{.stride = s.stride, .padding = s.pad};
      rt::Conv2dParams pp = p;
      pp.packed = packed.get();
      tConv[i] = std::min(
          tConv[i], minSeconds([&] { (void)rt::conv2d(x, w, b, pp); }, minTime));
      if (micro)
        tCall[i] = std::min(
            tCall[i], minSeconds([&] { (void)rt::conv2d(x, w, b, p); }, minTime));
      if (micro) {
        rt::Conv2dParams pi = pp;
        pi.gemm = rt::ConvGemm::Im2col;
        tIm2col[i] = std::min(
            tIm2col[i], minSeconds([&] { (void)rt::conv2d(x, w, b, pi); }, minTime));
      }
      rt::Conv2dParams pb = p;
      pb.gemm = rt::ConvGemm::Blas;
      tBlas[i] = std::min(
          tBlas[i], minSeconds([&] { (void)rt::conv2d(x, w, b, pb); }, minTime));
    }
    // The reference: one sgemm of the same size, OpenBLAS-threaded.
    openblas_set_num_threads(threads);
    for (size_t i = 0; i < count; ++i) {
      int64_t m = ms[i], n = ns[i], k = ks[i];
      std::vector<float> a(size_t(m * k), 0.5f), bm(size_t(k * n), 0.25f),
          c(size_t(m * n));
      tGemm[i] = std::min(
          tGemm[i], minSeconds(
                        [&] {
                          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans,
                                      int(m), int(n), int(k), 1.0f, a.data(),
                                      int(k), bm.data(), int(n), 0.0f, c.data(),
                                      int(n));
                        },
                        minTime));
    }
    openblas_set_num_threads(1);
  }

  if (peak > 0)
    std::printf("AVX-512 FMA peak of %d thread(s): %.1f GFLOP/s\n\n", threads,
                peak);
  std::printf(
      "| layer | input | weight | stride | GEMM M x N x K | "
      "conv2d ms | conv2d GFLOP/s | of FMA peak | sgemm GFLOP/s | ratio | "
      "packed per call | im2col path | OpenBLAS path |\n");
  std::printf(
      "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | "
      "---: | ---: | ---: |\n");
  auto ofPeak = [peak](double gflops) {
    return peak > 0 ? fmt::format("{:.0f}%", 100.0 * gflops / peak)
                    : std::string("-");
  };
  double convTotal = 0, callTotal = 0, blasTotal = 0, gemmTotal = 0,
         im2colTotal = 0, flopTotal = 0, minRatio = 1e30;
  auto orDash = [micro](double pctValue) {
    return micro ? fmt::format("{:.0f}%", pctValue) : std::string("-");
  };
  auto pct = [](double ref, double t) { return 100.0 * ref / t; };
  for (size_t i = 0; i < count; ++i) {
    const ConvShape &s = Shapes[i];
    convTotal += tConv[i];
    callTotal += tCall[i];
    blasTotal += tBlas[i];
    gemmTotal += tGemm[i];
    im2colTotal += tIm2col[i];
    flopTotal += flops[i];
    minRatio = std::min(minRatio, tGemm[i] / tConv[i]);
    std::printf(
        "| %s | (1, %lld, %lld, %lld) | (%lld, %lld, %lld, %lld) | "
        "%lld | %lld x %lld x %lld | %.3f | %.1f | %s | %.1f | %.0f%% | "
        "%s | %s | %.0f%% |\n",
        s.where, (long long)s.c, (long long)s.h, (long long)s.w, (long long)s.o,
        (long long)s.c, (long long)s.k, (long long)s.k, (long long)s.stride,
        (long long)ms[i], (long long)ns[i], (long long)ks[i], tConv[i] * 1e3,
        flops[i] / tConv[i] / 1e9, ofPeak(flops[i] / tConv[i] / 1e9).c_str(),
        flops[i] / tGemm[i] / 1e9, pct(tGemm[i], tConv[i]),
        orDash(pct(tGemm[i], tCall[i])).c_str(),
        orDash(pct(tGemm[i], tIm2col[i])).c_str(), pct(tGemm[i], tBlas[i]));
  }
  std::printf(
      "| all (one each) | | | | | %.3f | %.1f | %s | %.1f | %.0f%% | %s | "
      "%s | %.0f%% |\n",
      convTotal * 1e3, flopTotal / convTotal / 1e9,
      ofPeak(flopTotal / convTotal / 1e9).c_str(), flopTotal / gemmTotal / 1e9,
      pct(gemmTotal, convTotal), orDash(pct(gemmTotal, callTotal)).c_str(),
      orDash(pct(gemmTotal, im2colTotal)).c_str(), pct(gemmTotal, blasTotal));
  std::printf("\nlowest per-shape ratio (default path): %.0f%%; micro-kernel "
              "%s; times: %s\n",
              100.0 * minRatio, micro ? "on (AVX-512)" : "unavailable",
              useCpuTime ? "process CPU time, minimum" : "wall clock, minimum");
  return 0;
}
