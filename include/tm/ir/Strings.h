//===- Strings.h - The interned string table of the string dtype -*- C++ -*-===//
//
// A tensor of dtype string stores one int64 per element: the id of its text
// in one process-wide table. Equal texts have equal ids, an id stays valid
// and means the same text for the life of the process, and id 0 is the
// empty string (so a zero-filled string tensor holds empty strings). The
// table is thread-safe and append-only: it only grows, so a long-running
// process that creates many distinct strings keeps all of them.
//
// Only Cast, StringNormalizer, printing and the file formats look at the
// text; every other kernel either moves ids (reshape, gather, concat, ...),
// compares them (equal) or refuses the dtype (opAcceptsStrings).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/Tensor.h"

namespace tmg {

enum class OpKind : uint16_t;

/// The id of `s` (added to the table on first use).
int64_t intern(llvm::StringRef s);
/// The text of id `id`; throws tmg::Error for an id the table never gave.
/// The reference stays valid for the life of the process.
llvm::StringRef text(int64_t id);
/// Number of distinct strings interned so far.
int64_t internedCount();

/// A dense string tensor of `shape` holding `values` (row-major).
Tensor stringTensor(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<std::string> values);
/// Element i (row-major, any layout) of a string tensor.
llvm::StringRef stringAt(const Tensor &t, int64_t i);

/// `s` as a double-quoted literal with C escapes (\\ \" \n \t \r, \xHH for
/// other bytes below 0x20 and 0x7f); UTF-8 stays as it is.
std::string quoteString(llvm::StringRef s);

/// Whether op `k` takes string tensors: data movement (reshape, transpose,
/// concat, gather, slice, where, ...), equality, casts and the string ops.
/// Every other op refuses a string operand when types are inferred and when
/// the interpreter lowers it (tmg::Error naming the op, the expr and the
/// dtype).
bool opAcceptsStrings(OpKind k);

} // namespace tmg
