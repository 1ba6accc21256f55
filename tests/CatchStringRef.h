// Included in every test executable (tests/meson.build, -include): node
// names and qualnames are llvm::StringRef, and Catch prints them in a failed
// comparison as the quoted string instead of "{?}".
#pragma once

#include <catch2/catch.hpp>
#include <llvm/ADT/StringRef.h>

namespace Catch {
template <> struct StringMaker<llvm::StringRef> {
  static std::string convert(llvm::StringRef s) { return StringMaker<std::string>::convert(s.str()); }
};
} // namespace Catch
