//===- Suggest.h - "Did you mean" suggestions -------------------*- C++ -*-===//
//
// The spelling suggestion every layer's errors give for an unknown name.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <string>
#include <vector>

#include <llvm/ADT/StringRef.h>

namespace tmg {

/// The closest of `candidates` to `name` by edit distance ("" if none).
/// O(candidates × |name|²).
std::string closestName(llvm::StringRef name, const std::vector<std::string> &candidates);

} // namespace tmg
