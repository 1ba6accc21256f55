//===- Pool.h - Size-class pool for IR objects ------------------*- C++ -*-===//
//
// Exprs and Nodes are created and destroyed by the million (building,
// cloning, flattening, compile removing dead code). The general-purpose heap
// pays for that twice: every free coalesces neighbouring chunks (glibc's
// unlink_chunk/malloc_consolidate were ~40% of `compile` on a 1e6-expr
// graph), and objects of one graph end up interleaved with their strings
// and vectors. The pool hands out fixed-size blocks per 16-byte size class,
// carved in order from 256 KiB slabs, so the objects of a graph sit next to
// each other in creation order, and frees push the block on a free list of
// its class (O(1), touching only the block).
//
// Each thread keeps its own free lists and slab (no locking on the fast
// path); a thread that exits hands them to a global reserve that other
// threads draw from, so blocks freed by a worker thread of the pass manager
// are reused, not lost. Memory goes back to the pool, not to the system.
//
// Under AddressSanitizer (and with TM_IR_NO_POOL) the pool forwards to
// ::operator new/delete, so use-after-free and leaks of IR objects stay
// visible to the sanitizer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmg::detail {

/// A block of at least `size` bytes, aligned to 16.
void *poolAllocate(size_t size);
/// Returns a block from poolAllocate(size) (same size).
void poolDeallocate(void *p, size_t size) noexcept;

/// Sorts the calling thread's free lists and the global reserve by
/// address, so that the next allocations of each size class take freed
/// blocks in ascending order. Free lists are LIFO: after graphs have been
/// built, edited and destroyed in various orders, consecutive allocations
/// come from all over the heap, and a graph built then is walked 2-3x
/// slower than one built in a fresh process (a 10^6-expr print: 66 against
/// 187 ms). Worth calling between jobs after large graphs were freed;
/// tm-ir-bench and tm-pass-bench call it before building each input, so
/// that every run starts from the same heap state. O(n log n) in the free
/// blocks, which it reads and relinks; a no-op without the pool
/// (sanitizer builds).
void poolSortFreeLists();
/// False in builds where the pool forwards to ::operator new (sanitizers,
/// TM_IR_NO_POOL).
bool poolEnabled();

} // namespace tmg::detail

/// Class-specific allocation through the pool. Sized delete gets the dynamic
/// size through the virtual destructor, so derived classes share it.
#define TM_POOL_ALLOCATED                                                      \
  static void *operator new(size_t size) {                                     \
    return ::tmg::detail::poolAllocate(size);                                  \
  }                                                                            \
  static void operator delete(void *p, size_t size) noexcept {                 \
    ::tmg::detail::poolDeallocate(p, size);                                    \
  }
