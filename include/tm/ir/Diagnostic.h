//===- Diagnostic.h - Errors, locations and results ------------*- C++ -*-===//
//
// The error model of tmgraph (DESIGN.md "Error model"):
//  * a Diagnostic is a message with a location (file:line:col, expr %id, pass
//    name, option) and notes;
//  * functions whose failure is expected return FailureOr<T>, or
//    FailureOr<void> when there is no payload: success or the Diagnostic;
//  * LogicalResult is for outcomes that are not errors ("did not apply");
//  * operator-style APIs that cannot return a status throw tmg::Error, which
//    carries the same Diagnostic.
// Asserts are reserved for internal invariants.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/format.h>

namespace tmg {

/// Where a diagnostic points. Every field is optional; `str()` prints the
/// ones that are set, most specific first (`file:line:col`, `%id`, pass).
struct Location {
  std::string file;
  int64_t line = 0;   ///< 1-based; 0 = unknown.
  int64_t column = 0; ///< 1-based; 0 = unknown.
  int64_t byteOffset = -1;
  int64_t exprId = -1;  ///< expr `%id` in a graph; -1 = none.
  std::string pass;     ///< pass name, when raised inside a pass.
  std::string option;   ///< option name, for pass/CLI option errors.

  static Location inFile(std::string file, int64_t line = 0, int64_t col = 0) {
    Location l;
    l.file = std::move(file);
    l.line = line;
    l.column = col;
    return l;
  }
  static Location atExpr(int64_t id) {
    Location l;
    l.exprId = id;
    return l;
  }
  static Location inPass(std::string pass) {
    Location l;
    l.pass = std::move(pass);
    return l;
  }
  bool empty() const {
    return file.empty() && exprId < 0 && pass.empty() && option.empty() &&
           byteOffset < 0;
  }
  /// "file:line:col", "file@byte 12", "expr %7", "pass 'compile'" joined by
  /// ", ".
  std::string str() const;
};

/// A user-facing error or remark with a location and notes.
struct Diagnostic {
  enum class Severity : uint8_t { Error, Warning, Remark };
  Severity severity = Severity::Error;
  Location loc;
  std::string message;
  std::vector<std::string> notes;

  Diagnostic() = default;
  Diagnostic(Location l, std::string msg, Severity s = Severity::Error)
      : severity(s), loc(std::move(l)), message(std::move(msg)) {}

  Diagnostic &note(std::string n) {
    notes.push_back(std::move(n));
    return *this;
  }
  /// "<loc>: error: <message>\n  note: ..." (the loc part is omitted when
  /// empty).
  std::string str() const;
};

/// Exception carrying a Diagnostic. Thrown only by APIs that cannot return a
/// status (builder misuse, graph edits with invalid arguments, ...).
class Error : public std::runtime_error {
public:
  explicit Error(Diagnostic d)
      : std::runtime_error(d.str()), diag_(std::move(d)) {}
  explicit Error(std::string message)
      : Error(Diagnostic(Location(), std::move(message))) {}
  Error(Location loc, std::string message)
      : Error(Diagnostic(std::move(loc), std::move(message))) {}

  const Diagnostic &diagnostic() const { return diag_; }

private:
  Diagnostic diag_;
};

/// Throws tmg::Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void raise(fmt::format_string<Args...> f, Args &&...args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
[[noreturn]] void raiseAt(Location loc, fmt::format_string<Args...> f,
                          Args &&...args) {
  throw Error(std::move(loc), fmt::format(f, std::forward<Args>(args)...));
}

/// Success or failure, without a payload (MLIR's LogicalResult).
class [[nodiscard]] LogicalResult {
public:
  static LogicalResult success(bool ok = true) { return LogicalResult(ok); }
  static LogicalResult failure(bool fail = true) { return LogicalResult(!fail); }
  bool succeeded() const { return ok_; }
  bool failed() const { return !ok_; }

private:
  explicit LogicalResult(bool ok) : ok_(ok) {}
  bool ok_;
};
inline LogicalResult success(bool ok = true) {
  return LogicalResult::success(ok);
}
inline LogicalResult failure(bool fail = true) {
  return LogicalResult::failure(fail);
}
inline bool succeeded(LogicalResult r) { return r.succeeded(); }
inline bool failed(LogicalResult r) { return r.failed(); }

/// A value or the Diagnostic explaining why there is none.
template <typename T> class [[nodiscard]] FailureOr {
public:
  FailureOr(T value) : v_(std::move(value)) {}
  FailureOr(Diagnostic d) : v_(std::move(d)) {}
  FailureOr(Error e) : v_(e.diagnostic()) {}

  bool succeeded() const { return v_.index() == 0; }
  bool failed() const { return v_.index() == 1; }
  explicit operator bool() const { return succeeded(); }

  T &value() & {
    if (failed())
      throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T &&value() && {
    if (failed())
      throw Error(std::get<1>(v_));
    return std::move(std::get<0>(v_));
  }
  const T &value() const & {
    if (failed())
      throw Error(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T operator*() && { return std::move(*this).value(); }
  T *operator->() { return &value(); }
  const Diagnostic &diagnostic() const { return std::get<1>(v_); }
  operator LogicalResult() const { return LogicalResult::success(succeeded()); }

private:
  std::variant<T, Diagnostic> v_;
};

/// Success, or the Diagnostic explaining the failure: the payload-free form
/// of FailureOr<T>, for fallible operations that produce nothing (write a
/// file, verify, set an option). It is a FailureOr rather than a separate
/// status type so that every fallible API has one shape: test it, read
/// diagnostic(), convert it to LogicalResult. `return {};` is success.
template <> class [[nodiscard]] FailureOr<void> {
public:
  FailureOr() = default;
  FailureOr(Diagnostic d) : d_(std::move(d)) {}
  FailureOr(Error e) : d_(e.diagnostic()) {}

  bool succeeded() const { return !d_.has_value(); }
  bool failed() const { return d_.has_value(); }
  explicit operator bool() const { return succeeded(); }

  /// Throws the diagnostic as tmg::Error on failure.
  void value() const {
    if (failed())
      throw Error(*d_);
  }
  /// The diagnostic; only valid on failure.
  const Diagnostic &diagnostic() const {
    if (!d_)
      throw std::logic_error("FailureOr<void>::diagnostic() on success");
    return *d_;
  }
  operator LogicalResult() const { return LogicalResult::success(succeeded()); }

private:
  std::optional<Diagnostic> d_;
};

} // namespace tmg
