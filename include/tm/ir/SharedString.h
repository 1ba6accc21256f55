//===- SharedString.h - Immutable reference-counted strings -----*- C++ -*-===//
//
// Node names and qualnames are created, copied (clone, flatten, snapshots)
// and destroyed by the million. A SharedString is one pointer to an
// immutable heap block holding a reference count, the size and the
// characters: copying shares the block (one atomic increment) instead of
// copying the bytes, destroying the last copy frees it. The empty string
// holds no block.
//
// The count is atomic: a module may be cloned by several threads at once
// (read-only use of a shared model), and blocks may be released by another
// thread than the one that made them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <llvm/ADT/StringRef.h>

namespace tmg {

class SharedString {
public:
  SharedString() = default;
  SharedString(llvm::StringRef s) : rep_(make(s)) {}
  SharedString(const std::string &s) : rep_(make(s)) {}
  SharedString(const char *s) : rep_(make(s)) {}
  /// The concatenation of `a` and `b` (one block; nodes keep their name
  /// and qualname this way).
  SharedString(llvm::StringRef a, llvm::StringRef b) : rep_(make(a, b)) {}
  SharedString(const SharedString &o) noexcept : rep_(o.rep_) {
    if (rep_)
      rep_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  SharedString(SharedString &&o) noexcept : rep_(std::exchange(o.rep_, nullptr)) {}
  SharedString &operator=(const SharedString &o) noexcept {
    SharedString(o).swap(*this);
    return *this;
  }
  SharedString &operator=(SharedString &&o) noexcept {
    SharedString(std::move(o)).swap(*this);
    return *this;
  }
  ~SharedString() {
    if (rep_)
      release(rep_);
  }
  void swap(SharedString &o) noexcept { std::swap(rep_, o.rep_); }

  llvm::StringRef ref() const {
    return rep_ ? llvm::StringRef(chars(rep_), rep_->size) : llvm::StringRef();
  }
  operator llvm::StringRef() const { return ref(); }
  std::string str() const { return ref().str(); }
  const char *data() const { return rep_ ? chars(rep_) : ""; }
  size_t size() const { return rep_ ? rep_->size : 0; }
  bool empty() const { return rep_ == nullptr; }

  friend bool operator==(const SharedString &a, const SharedString &b) {
    return a.rep_ == b.rep_ || a.ref() == b.ref();
  }
  friend bool operator==(const SharedString &a, llvm::StringRef b) { return a.ref() == b; }

private:
  struct Rep {
    std::atomic<uint32_t> refs;
    uint32_t size;
  };
  static char *chars(Rep *r) { return reinterpret_cast<char *>(r + 1); }
  static Rep *make(llvm::StringRef s, llvm::StringRef tail = {});
  static void release(Rep *r) noexcept;
  Rep *rep_ = nullptr;
};

} // namespace tmg

/// Formats llvm::StringRef (and so node names) like a string.
template <> struct fmt::formatter<llvm::StringRef> : fmt::formatter<fmt::string_view> {
  template <typename Ctx> auto format(llvm::StringRef s, Ctx &ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
template <> struct fmt::formatter<tmg::SharedString> : fmt::formatter<llvm::StringRef> {
  template <typename Ctx> auto format(const tmg::SharedString &s, Ctx &ctx) const {
    return fmt::formatter<llvm::StringRef>::format(s.ref(), ctx);
  }
};
