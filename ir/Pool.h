//===- Pool.h - Size-class pool for IR objects (private) --------*- C++ -*-===//
//
// Kept: bench/vs-mlir-opt.sh (10^6 exprs), tm-opt -p compile takes 14%
// more CPU from .tmir (8.64 vs 7.60 s) and 6% more from ONNX without it.
//
// Exprs, Nodes and their name blocks are created and destroyed by the
// million. The pool hands out fixed-size blocks per 16-byte size class,
// carved in order from 256 KiB slabs, and a free pushes the block on a
// free list of its class (O(1), touching only the block). Each thread
// keeps its own free lists and slab (no locking on the fast path); a
// thread that exits hands them to a global reserve that other threads
// draw from. Memory goes back to the pool, not to the system.
//
// Under AddressSanitizer the pool forwards to ::operator new/delete, so
// use-after-free and leaks of IR objects stay visible to the sanitizer.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

namespace tmg::detail {

/// A block of at least `size` bytes, aligned to 16.
void *poolAllocate(size_t size);
/// Returns a block from poolAllocate(size) (same size).
void poolDeallocate(void *p, size_t size) noexcept;

} // namespace tmg::detail
