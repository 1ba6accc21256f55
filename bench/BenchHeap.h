//===- BenchHeap.h - Heap preparation shared by the benchmarks -----------===//
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>
#include <vector>

#ifdef __GLIBC__
#include <malloc.h>
#include <sys/mman.h>
#endif

/// Keeps freed memory in the process and pre-faults `bytes` of heap, asking
/// for 2 MiB pages, so that timed regions reuse resident pages. Both remove
/// costs of the virtual machine this runs on, not of the IR, that grow
/// faster than the graph: a first-touch page fault costs 2-14 us per 4 KiB
/// page depending on what the host did with it before, and with 4 KiB pages
/// a 1e6-expr graph (~1 GiB) misses the TLB and the page-walk caches on
/// nearly every node, making e.g. printing 1.8x slower per expr than at 1e5.
inline bool reserveHeap(size_t bytes) {
#ifdef __GLIBC__
  // All allocations from the brk heap (mmap'd blocks are unmapped on free),
  // and the heap never shrinks.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);
  auto *p = static_cast<char *>(std::malloc(bytes));
  if (!p)
    return false;
  constexpr uintptr_t HugePage = uintptr_t(2) << 20;
  uintptr_t begin = (uintptr_t(p) + HugePage - 1) & ~(HugePage - 1);
  uintptr_t end = (uintptr_t(p) + bytes) & ~(HugePage - 1);
  // Best effort: without transparent huge pages this fails and changes
  // nothing.
  if (begin < end)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
  volatile char *touch = p;
  for (size_t i = 0; i < bytes; i += 4096)
    touch[i] = 0;
  // Back to the top of the heap, where later allocations are carved from.
  std::free(p);
#else
  (void)bytes;
#endif
  return true;
}

/// Evicts everything the timed operation is about to touch from the caches,
/// so every size starts cold. Without it a 1e4-expr graph (a few MiB) is
/// timed from a warm L2/L3 and larger ones from memory, and the 1e4->1e5
/// growth factor measures the cache size, not the algorithm; on machines
/// whose L3 holds a 1e5-expr graph (the 105 MiB L3 of the CI machine) the
/// same happens one step later. Writes twice the L3 the machine reports
/// (at least 64 MiB), one byte per 64-byte line, two passes.
inline void flushCaches() {
  static std::vector<char> buf = [] {
    long l3 = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    size_t bytes = std::max<size_t>(size_t(64) << 20, l3 > 0 ? 2 * size_t(l3) : 0);
    return std::vector<char>(bytes, 0);
  }();
  // Twice: the L3 of recent Intel cores resists scans (lines touched once
  // are inserted at low priority and evict each other first), so one pass
  // left part of a 1e5-expr graph cached in some runs and not in others.
  volatile char *p = buf.data();
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < buf.size(); i += 64)
      p[i] = char(p[i] + 1);
}

/// Profiling of the timed region alone: with TM_PERF_CTL=FIFO in the
/// environment, writes `enable` / `disable` to that fifo, the control fifo
/// of `perf record -D -1 --control=fifo:FIFO[,ACK]`; with TM_PERF_ACK=ACK
/// as well it waits for perf's acknowledgement, so that the profile starts
/// and stops with the region (perf reads the fifo asynchronously: without
/// the ack, work after a 1 ms region lands in the profile).
inline void perfToggle(bool on) {
  static int fd = [] {
    const char *path = std::getenv("TM_PERF_CTL");
    return path ? ::open(path, O_WRONLY) : -1;
  }();
  static int ack = [] {
    const char *path = std::getenv("TM_PERF_ACK");
    return fd >= 0 && path ? ::open(path, O_RDONLY) : -1;
  }();
  if (fd < 0)
    return;
  const char *msg = on ? "enable\n" : "disable\n";
  ssize_t w = ::write(fd, msg, on ? 7 : 8);
  (void)w;
  char buf[8];
  if (ack >= 0)
    w = ::read(ack, buf, sizeof buf);
}
