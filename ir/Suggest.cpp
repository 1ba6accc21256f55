//===- Suggest.cpp - "Did you mean" suggestions ---------------------------===//
#include "tm/ir/Suggest.h"

namespace tmg {

std::string closestName(llvm::StringRef name, const std::vector<std::string> &candidates) {
  std::string best;
  unsigned bestD = ~0u;
  for (const auto &c : candidates) {
    unsigned d = name.edit_distance(c, true, bestD);
    if (d < bestD) {
      bestD = d;
      best = c;
    }
  }
  return best;
}

} // namespace tmg
