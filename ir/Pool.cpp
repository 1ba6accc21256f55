//===- Pool.cpp - Size-class pool for IR objects --------------------------===//
//
// See Pool.h.
//
//===----------------------------------------------------------------------===//
#include "Pool.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TM_IR_NO_POOL 1
#endif
#endif
// GCC defines __SANITIZE_ADDRESS__; clang answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define TM_IR_NO_POOL 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TM_IR_NO_POOL 1
#endif
#endif

namespace tmg::detail {

#ifdef TM_IR_NO_POOL

void *poolAllocate(size_t size) { return ::operator new(size); }
void poolDeallocate(void *p, size_t) noexcept {
  // Unsized: clang declares sized deallocation only with -fsized-deallocation.
  ::operator delete(p);
}

#else

namespace {

constexpr size_t Granule = 16;
constexpr size_t MaxPooled = 1024;
constexpr size_t NumClasses = MaxPooled / Granule;
constexpr size_t SlabBytes = size_t(256) << 10;

struct FreeBlock {
  FreeBlock *next;
};

size_t classOf(size_t size) { return (size + Granule - 1) / Granule - 1; }
size_t classBytes(size_t cls) { return (cls + 1) * Granule; }

/// Blocks and slab remainders given back by exited threads. Slabs are never
/// released: they stay reachable from here for leak checkers.
struct Global {
  std::mutex mu;
  FreeBlock *free[NumClasses] = {};
  FreeBlock *tail[NumClasses] = {}; ///< last block of free[k] when non-empty
  std::vector<std::pair<char *, char *>> remainders;
  std::vector<void *> slabs;

  /// A fresh or handed-back region for bumping (under `mu`).
  std::pair<char *, char *> region() {
    if (!remainders.empty()) {
      auto r = remainders.back();
      remainders.pop_back();
      return r;
    }
    char *s = static_cast<char *>(::operator new(SlabBytes));
    slabs.push_back(s);
    return {s, s + SlabBytes};
  }
};

/// Whether the global reserve holds blocks of a class (read without the
/// lock by every bump allocation; outside Global so that reading it needs
/// no initialisation guard).
std::atomic<bool> globalHasFree[NumClasses] = {};

Global &global() {
  // Never destroyed: blocks may be freed during static destruction.
  static Global *g = new Global;
  return *g;
}

/// Per-thread state, on the heap: the thread-local variable is a pointer.
struct Cache {
  FreeBlock *free[NumClasses];
  FreeBlock *tail[NumClasses]; ///< last block of free[k] when non-empty
  char *cur, *end;
};

/// The cache of every thread whose own cache was flushed at its exit:
/// empty and never written, so the fast paths fall through to the global
/// reserve (allocateDead, the isDead branch of poolDeallocate).
Cache deadCache = {{}, {}, nullptr, nullptr};
bool isDead(const Cache &c) { return &c == &deadCache; }

/// The thread's cache, allocated on the thread's first use.
thread_local Cache *tlCache = nullptr;

/// Hands the thread's blocks and slab remainder to the global reserve when
/// the thread exits.
struct Flusher {
  void touch() {}
  ~Flusher() {
    // Registered by newCache, so the thread has a live cache.
    Cache &c = *tlCache;
    Global &g = global();
    std::lock_guard lock(g.mu);
    for (size_t k = 0; k < NumClasses; ++k) {
      FreeBlock *head = c.free[k];
      if (!head)
        continue;
      // O(1) splice: the thread may have freed millions of blocks.
      c.tail[k]->next = g.free[k];
      if (!g.free[k])
        g.tail[k] = c.tail[k];
      g.free[k] = head;
      globalHasFree[k].store(true, std::memory_order_relaxed);
      c.free[k] = nullptr;
    }
    if (c.end - c.cur >= ptrdiff_t(MaxPooled))
      g.remainders.emplace_back(c.cur, c.end);
    tlCache = &deadCache;
    delete &c;
  }
};
thread_local Flusher tlFlusher;

/// The calling thread's cache, created on first use; the thread's exit
/// then hands its blocks to the global reserve (tlFlusher).
[[gnu::noinline]] Cache &newCache() {
  tlFlusher.touch(); // registers the thread-exit flush
  auto *c = new Cache{};
  tlCache = c;
  return *c;
}

inline Cache &cache() {
  Cache *c = tlCache;
  return c ? *c : newCache();
}

void *allocateDead(size_t cls) {
  // The thread's cache is gone (thread or static teardown): work on the
  // global reserve directly.
  Global &g = global();
  std::lock_guard lock(g.mu);
  if (FreeBlock *b = g.free[cls]) {
    g.free[cls] = b->next;
    return b;
  }
  return ::operator new(classBytes(cls));
}

[[gnu::noinline]] void *allocateSlow(Cache &c, size_t cls) {
  if (isDead(c))
    return allocateDead(cls);
  Global &g = global();
  size_t bytes = classBytes(cls);
  if (globalHasFree[cls].load(std::memory_order_relaxed)) {
    std::lock_guard lock(g.mu);
    if (FreeBlock *b = g.free[cls]) {
      c.free[cls] = b->next;
      c.tail[cls] = g.tail[cls];
      g.free[cls] = nullptr;
      globalHasFree[cls].store(false, std::memory_order_relaxed);
      return b;
    }
  }
  if (c.end - c.cur < ptrdiff_t(bytes)) {
    std::lock_guard lock(g.mu);
    auto [b, e] = g.region();
    c.cur = b;
    c.end = e;
  }
  void *p = c.cur;
  c.cur += bytes;
  return p;
}

} // namespace

/// Allocations the thread's free list and slab cannot serve: large ones,
/// a thread's first, a new slab, blocks from the global reserve.
[[gnu::noinline]] static void *allocateOther(size_t size) {
  if (size > MaxPooled)
    return ::operator new(size);
  return allocateSlow(cache(), classOf(size));
}

void *poolAllocate(size_t size) {
  // The dead cache has no slab and no free blocks: it always takes
  // allocateOther.
  Cache *c = tlCache;
  if (size <= MaxPooled && c) [[likely]] {
    size_t cls = classOf(size);
    if (FreeBlock *b = c->free[cls]) {
      c->free[cls] = b->next;
      return b;
    }
    size_t bytes = classBytes(cls);
    if (c->end - c->cur >= ptrdiff_t(bytes) &&
        !globalHasFree[cls].load(std::memory_order_relaxed)) {
      void *p = c->cur;
      c->cur += bytes;
      return p;
    }
  }
  return allocateOther(size);
}

/// Frees that the thread's cache cannot take: null, large, before the
/// thread's first allocation, or after its exit.
[[gnu::noinline]] static void deallocateSlow(void *p, size_t size) noexcept {
  if (!p)
    return;
  if (size > MaxPooled) {
    ::operator delete(p);
    return;
  }
  size_t cls = classOf(size);
  Cache &c = cache();
  auto *b = static_cast<FreeBlock *>(p);
  if (isDead(c)) {
    Global &g = global();
    std::lock_guard lock(g.mu);
    if (!g.free[cls])
      g.tail[cls] = b;
    b->next = g.free[cls];
    g.free[cls] = b;
    globalHasFree[cls].store(true, std::memory_order_relaxed);
    return;
  }
  if (!c.free[cls])
    c.tail[cls] = b;
  b->next = c.free[cls];
  c.free[cls] = b;
}

void poolDeallocate(void *p, size_t size) noexcept {
  Cache *c = tlCache;
  if (p && size <= MaxPooled && c && !isDead(*c)) [[likely]] {
    size_t cls = classOf(size);
    auto *b = static_cast<FreeBlock *>(p);
    FreeBlock *head = c->free[cls];
    if (!head)
      c->tail[cls] = b;
    b->next = head;
    c->free[cls] = b;
    return;
  }
  deallocateSlow(p, size);
}

#endif

} // namespace tmg::detail

