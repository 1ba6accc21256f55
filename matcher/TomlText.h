//===- TomlText.h - Reading TOML files with located errors ------*- C++ -*-===//
//
// Private to the matcher and the pass manager, which both read TOML (rule
// files, pipeline files): the file's text, parsing with errors at
// file:line:col, and failing at a node.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include <llvm/ADT/StringRef.h>
#include <toml++/toml.h>

#include "tm/ir/Diagnostic.h"

namespace tmg::tomltext {

inline Location at(const std::string &file, const toml::source_region &r) {
  return Location::inFile(file, int64_t(r.begin.line), int64_t(r.begin.column));
}

[[noreturn]] inline void fail(const std::string &file, const toml::node &n,
                              const std::string &msg) {
  throw Error(at(file, n.source()), msg);
}

/// Parses `text`; malformed TOML throws tmg::Error at its position.
inline toml::table parse(llvm::StringRef text, const std::string &file) {
  try {
    return toml::parse(std::string_view(text.data(), text.size()), file);
  } catch (const toml::parse_error &e) {
    throw Error(at(file, e.source()), fmt::format("malformed TOML: {}", e.description()));
  }
}

/// The whole of `path`; `what` names the file in the error ("rules file").
inline FailureOr<std::string> readText(const std::string &path, const char *what) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return Diagnostic(Location::inFile(path),
                      fmt::format("cannot open {}: {}", what, std::strerror(errno)));
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    text.append(buf, n);
  std::fclose(f);
  return text;
}

} // namespace tmg::tomltext
