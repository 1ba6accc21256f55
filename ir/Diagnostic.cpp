//===- Diagnostic.cpp - Errors, locations and results ---------------------===//
#include "tm/ir/Diagnostic.h"

namespace tmg {

std::string Location::str() const {
  std::vector<std::string> parts;
  if (!file.empty()) {
    std::string s = file;
    if (line > 0) {
      s += fmt::format(":{}", line);
      if (column > 0)
        s += fmt::format(":{}", column);
    }
    if (byteOffset >= 0)
      s += fmt::format("@byte {}", byteOffset);
    parts.push_back(std::move(s));
  } else if (byteOffset >= 0) {
    parts.push_back(fmt::format("byte {}", byteOffset));
  }
  if (exprId >= 0)
    parts.push_back(fmt::format("expr %{}", exprId));
  if (!pass.empty())
    parts.push_back(fmt::format("pass '{}'", pass));
  if (!option.empty())
    parts.push_back(fmt::format("option '{}'", option));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i)
      out += ", ";
    out += parts[i];
  }
  return out;
}

std::string Diagnostic::str() const {
  const char *sev = severity == Severity::Error     ? "error"
                    : severity == Severity::Warning ? "warning"
                                                    : "remark";
  std::string out;
  if (!loc.empty())
    out = loc.str() + ": ";
  out += fmt::format("{}: {}", sev, message);
  for (const auto &n : notes)
    out += "\n  note: " + n;
  return out;
}

} // namespace tmg
