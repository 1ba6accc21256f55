//===- HugePages.h - Large buffers on transparent huge pages ----*- C++ -*-===//
//
// Filling a fresh buffer costs a page fault per 4 KiB page, and on virtual
// machines a fault costs microseconds: reading a 165 MB `.tmir` file, or
// building the IR of a 10^6-expr graph, spent a third of its time in them.
// Buffers that are large and filled at once (file contents, printed text,
// weights, the heap before a big model is read) are marked for transparent
// huge pages, one fault per 2 MiB, where the system allows it (Linux
// `madvise` mode or `always`). Nothing here changes what a buffer holds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstddef>

namespace tmg {

/// The transparent huge page size assumed (x86-64, AArch64 with 4 KiB pages).
inline constexpr size_t HugePageBytes = size_t(2) << 20;

/// Marks the whole huge pages inside [p, p + bytes) for transparent huge
/// pages. Call it before the range is first written; a range smaller than
/// a huge page, or a system without them, is left as it is.
void adviseHugePages(void *p, size_t bytes);

/// Grows the process's heap once by `bytes` of address space marked for
/// huge pages, and hands it back to malloc (kept in the heap, not returned
/// to the system): the millions of small allocations that follow come from
/// huge pages. Pages are backed only when written. For tools about to read
/// a large model; glibc only, a no-op elsewhere or below 32 MiB; at most
/// 4 GiB.
void reserveHugePageHeap(size_t bytes);

} // namespace tmg
