//===- BenchHeap.h - Heap preparation shared by the benchmarks -----------===//
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
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
