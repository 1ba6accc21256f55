//===- SymbolicDim.h - Dimensions that are symbols or expressions -*- C++ -*-===//
//
// A node's shape (tmg::Shape) holds, per dimension, one int64_t:
//   - a known size (>= 0);
//   - kUnknownDim (-1): nothing is known of it;
//   - a symbolic dimension (< -1): a named symbol such as `N` or `seq`, or a
//     polynomial expression over them (`N*197`, `seq+1`, `(H-1)//2+1`).
// Symbolic dimensions are interned: two equal expressions are the same
// int64_t in a process, so comparing shapes compares their symbols. The
// value stands for the expression in this process only; every file format
// writes the expression's text (`dim::str`) and reads it back (`dim::parse`).
//
// Arithmetic is exact or gives kUnknownDim, never a wrong constant: sums,
// differences and products of polynomials are kept in a canonical form,
// division by a constant is exact when every coefficient divides and is
// otherwise kept as a floor-division term, and anything else (overflow, a
// result that would be negative, too many terms) becomes unknown.
//
// Tensors (values) always have known sizes; only graph nodes carry symbols.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

namespace tmg {

/// A dimension nothing is known of (printed `?`).
inline constexpr int64_t kUnknownDim = -1;

inline bool isKnownDim(int64_t d) { return d >= 0; }
inline bool isSymbolicDim(int64_t d) { return d < kUnknownDim; }

/// Whether every dimension of `s` is a known size.
inline bool isStaticShape(llvm::ArrayRef<int64_t> s) {
  for (int64_t d : s)
    if (d < 0)
      return false;
  return true;
}

/// Whether `a` and `b` are provably the same shape: equal rank and, per
/// dim, the same size or the same symbolic expression (an unknown dim is
/// never provably equal to anything).
bool provablySameShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

namespace dim {

/// The dimension named `name` (a non-empty symbol).
int64_t symbol(llvm::StringRef name);

/// a + b, a - b, a * b over sizes and symbolic dims (unknown when either is
/// unknown or the result is not expressible).
int64_t add(int64_t a, int64_t b);
int64_t sub(int64_t a, int64_t b);
int64_t mul(int64_t a, int64_t b);
/// a + c for a constant c of either sign.
inline int64_t offset(int64_t a, int64_t c) { return c >= 0 ? add(a, c) : sub(a, -c); }
/// floor(a / c) and ceil(a / c) for a constant c > 0.
int64_t floorDiv(int64_t a, int64_t c);
int64_t ceilDiv(int64_t a, int64_t c);
/// a / b when it is exact as polynomials (b a single term: a size or a
/// product of symbols times a size); nullopt otherwise.
std::optional<int64_t> exactDiv(int64_t a, int64_t b);
/// The product of `dims` (1 for none).
int64_t product(llvm::ArrayRef<int64_t> dims);

/// The text of a dimension: `3`, `?`, `N`, `N*197`, `(H-1)//2+1`. Symbol
/// names that are not identifiers are quoted: `'batch size'`.
std::string str(int64_t d);
/// A node's shape as a Python tuple with its dims as `str` writes them:
/// "(N, 3, 224, 224)", "(?, 4)", "(5,)".
std::string dimsStr(llvm::ArrayRef<int64_t> dims);
/// Reads what `str` writes (also a plain identifier, a size or `?`). On
/// failure returns nullopt and, when `error` is given, sets it to a message
/// whose position is the byte offset in `pos`.
std::optional<int64_t> parse(llvm::StringRef text, std::string *error = nullptr,
                             size_t *pos = nullptr);

/// The value of `d` with the symbols bound in `env`; nullopt when `d` is
/// unknown, a symbol it uses is unbound, or it evaluates out of range.
std::optional<int64_t> eval(int64_t d, const std::map<std::string, int64_t> &env);
/// `d` with the symbols bound in `env` replaced by their values.
int64_t substitute(int64_t d, const std::map<std::string, int64_t> &env);
/// The symbol `d` is, when it is a plain named symbol.
std::optional<std::string> symbolName(int64_t d);

} // namespace dim

/// Binds the symbolic dims of declared shapes to the sizes of actual values
/// and checks that every known dim and every expression agrees: what the
/// interpreter and tools check run-time inputs with.
class ShapeBinder {
public:
  /// Binds `actual` (known sizes) against `declared`. Returns an empty
  /// string when they fit, else a message naming `what` and the dim
  /// (`input 'x': dim 1 is 3 in the graph, got 4`). Plain symbols bind on
  /// first sight; expressions are checked once all values are bound
  /// (`finish`). Known sizes are checked when `sizes` is set; the rank
  /// always is.
  std::string bind(llvm::StringRef what, llvm::ArrayRef<int64_t> declared,
                   llvm::ArrayRef<int64_t> actual, bool sizes = true);
  /// Checks the expression dims seen by `bind`; an empty string when all
  /// hold.
  std::string finish();
  const std::map<std::string, int64_t> &bindings() const { return env_; }

private:
  struct Pending {
    std::string what;
    size_t index;
    int64_t dim;
    int64_t actual;
  };
  std::map<std::string, int64_t> env_;
  std::map<std::string, std::string> boundBy_;
  std::vector<Pending> pending_;
};

} // namespace tmg
