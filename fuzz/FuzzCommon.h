//===- FuzzCommon.h - Shared helpers of the libFuzzer targets ---*- C++ -*-===//
//
// Every target feeds bytes to one reader of outside data. A reader must
// answer with success or a diagnostic: an escaping exception, a crash, a
// sanitizer report, a hang or a broken round trip is a finding.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <llvm/ADT/StringRef.h>

namespace tmg::fuzz {

inline llvm::StringRef bytes(const uint8_t *data, size_t size) {
  return llvm::StringRef(reinterpret_cast<const char *>(data), size);
}

/// A violated property: print what and abort so libFuzzer keeps the input.
[[noreturn]] inline void finding(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fuzz finding: %s\n%s\n", what, detail.c_str());
  std::abort();
}

} // namespace tmg::fuzz
