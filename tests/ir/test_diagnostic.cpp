// The result types of the error model (Diagnostic.h): FailureOr<T>, its
// payload-free form FailureOr<void>, and LogicalResult.
#include <catch2/catch.hpp>

#include <type_traits>

#include "tm/ir/Diagnostic.h"

using namespace tmg;

namespace {
FailureOr<void> checkPositive(int v) {
  if (v <= 0)
    return Diagnostic(Location::inFile("in.txt", 3, 7), "value must be positive")
        .note("got " + std::to_string(v));
  return {};
}

FailureOr<void> throwsError() { return Error(Location::atExpr(4), "bad expr"); }

/// Forwards a failure of the void form from a function with a payload.
FailureOr<int> doubled(int v) {
  if (auto r = checkPositive(v); r.failed())
    return r.diagnostic();
  return 2 * v;
}
} // namespace

TEST_CASE("FailureOr<void>: success", "[ir][diagnostic]") {
  FailureOr<void> r = checkPositive(1);
  CHECK(r.succeeded());
  CHECK_FALSE(r.failed());
  CHECK(bool(r));
  CHECK_NOTHROW(r.value());
  CHECK_THROWS_AS(r.diagnostic(), std::logic_error);
  LogicalResult l = r;
  CHECK(succeeded(l));
  CHECK(succeeded(checkPositive(2)));
  CHECK(FailureOr<void>().succeeded());
}

TEST_CASE("FailureOr<void>: failure carries the diagnostic", "[ir][diagnostic]") {
  FailureOr<void> r = checkPositive(-2);
  CHECK(r.failed());
  CHECK_FALSE(r.succeeded());
  CHECK_FALSE(bool(r));
  CHECK(r.diagnostic().message == "value must be positive");
  CHECK(r.diagnostic().loc.file == "in.txt");
  CHECK(r.diagnostic().loc.line == 3);
  CHECK(r.diagnostic().loc.column == 7);
  CHECK(r.diagnostic().notes == std::vector<std::string>{"got -2"});
  CHECK(r.diagnostic().str() == "in.txt:3:7: error: value must be positive\n  note: got -2");
  CHECK_THROWS_WITH(r.value(), "in.txt:3:7: error: value must be positive\n  note: got -2");
  LogicalResult l = r;
  CHECK(failed(l));
  CHECK(failed(checkPositive(0)));

  FailureOr<void> e = throwsError();
  REQUIRE(e.failed());
  CHECK(e.diagnostic().loc.exprId == 4);
  CHECK(e.diagnostic().message == "bad expr");
}

TEST_CASE("FailureOr<void> and FailureOr<T> pass diagnostics to each other",
          "[ir][diagnostic]") {
  CHECK(*doubled(4) == 8);
  FailureOr<int> d = doubled(-1);
  REQUIRE(d.failed());
  CHECK(d.diagnostic().message == "value must be positive");
  FailureOr<void> back = d.diagnostic();
  CHECK(back.failed());
  CHECK(back.diagnostic().loc.line == 3);
  // Both are results that must be looked at.
  STATIC_REQUIRE(std::is_convertible_v<FailureOr<void>, LogicalResult>);
  STATIC_REQUIRE(std::is_convertible_v<FailureOr<int>, LogicalResult>);
}
