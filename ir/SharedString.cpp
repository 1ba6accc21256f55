//===- SharedString.cpp - Immutable reference-counted strings -------------===//
#include "tm/ir/SharedString.h"

#include "Pool.h"

#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>

namespace tmg {

SharedString::Rep *SharedString::make(llvm::StringRef s, llvm::StringRef tail) {
  size_t size = s.size() + tail.size();
  if (size == 0)
    return nullptr;
  if (size > UINT32_MAX)
    throw std::length_error("tmg::SharedString: string longer than 4 GiB");
  auto *r = static_cast<Rep *>(detail::poolAllocate(sizeof(Rep) + size));
  r->refs.store(1, std::memory_order_relaxed);
  r->size = uint32_t(size);
  // (An empty StringRef may hold a null pointer, which memcpy must not get.)
  if (!s.empty())
    std::memcpy(chars(r), s.data(), s.size());
  if (!tail.empty())
    std::memcpy(chars(r) + s.size(), tail.data(), tail.size());
  return r;
}

void SharedString::release(Rep *r) noexcept {
  // The last reference (most blocks have one: a node's name) needs no
  // locked decrement: no other thread holds a copy, so none can change the
  // count. A plain load lets the misses of a loop that destroys many nodes
  // overlap, where the locked instruction waited for each in turn.
  if (r->refs.load(std::memory_order_acquire) == 1 ||
      r->refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
    detail::poolDeallocate(r, sizeof(Rep) + r->size);
}

} // namespace tmg
