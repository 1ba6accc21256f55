//===- HugePages.cpp - Large buffers on transparent huge pages ------------===//
#include "tm/ir/HugePages.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tmg {

void adviseHugePages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  if (!p || bytes < HugePageBytes || raw > UINTPTR_MAX - bytes)
    return;
  uintptr_t begin = (raw + HugePageBytes - 1) & ~(HugePageBytes - 1);
  uintptr_t end = (raw + bytes) & ~(HugePageBytes - 1);
  if (end > begin)
    (void)madvise(reinterpret_cast<void *>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p;
  (void)bytes;
#endif
}

void reserveHugePageHeap(size_t bytes) {
#if defined(__GLIBC__)
  // The heap grows by blocks below malloc's mmap threshold, so they come
  // from the main heap, one after the other. The last one stays allocated,
  // so that freeing the others leaves one free range inside the heap, which
  // malloc does not trim, rather than at its top. No mallopt: that
  // would stop glibc from adapting its mmap threshold, which tensor
  // allocations rely on.
  constexpr size_t Block = size_t(120) << 10;
  if (bytes < 16 * HugePageBytes)
    return;
  bytes = std::min(bytes, size_t(4) << 30);
  std::vector<void *> blocks;
  blocks.reserve(bytes / Block);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (size_t i = 0; i < bytes / Block; ++i) {
    void *p = std::malloc(Block);
    if (!p)
      break;
    blocks.push_back(p);
    lo = std::min(lo, reinterpret_cast<uintptr_t>(p));
    hi = std::max(hi, reinterpret_cast<uintptr_t>(p) + Block);
  }
  if (blocks.empty())
    return;
  {
    // The last block, at the heap's top, stays allocated.
    static std::mutex lock;
    // Reachable, so not a leak, up to LeakSanitizer's check at exit: never
    // destroyed (a static vector's destructor runs first).
    static auto *sentinels = new std::vector<void *>;
    std::lock_guard<std::mutex> g(lock);
    sentinels->push_back(blocks.back());
    blocks.pop_back();
  }
  // Only a contiguous range is advised (a heap that could not grow in place
  // has gaps).
  if (hi - lo < bytes + bytes / 8)
    adviseHugePages(reinterpret_cast<void *>(lo), hi - lo);
  for (void *p : blocks)
    std::free(p);
  // Growing the heap wrote a chunk header every block, so every 2 MiB of
  // the range already has a small page and would never get a huge one:
  // malloc_trim gives back the free range's pages (MADV_DONTNEED), and
  // the next touch of each 2 MiB maps a huge page.
  malloc_trim(0);
#else
  (void)bytes;
#endif
}

} // namespace tmg
