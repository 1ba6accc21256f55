//===- Compare.cpp - Comparing outputs with references --------------------===//
#include "tm/runtime/Compare.h"

#include <cmath>

#include <fmt/format.h>

#include "tm/ir/Strings.h"

namespace tmg::rt {

namespace {

/// How far `d` (an absolute error) lies beyond the tolerance for `want`;
/// <= 0 when within. NaN and infinity rules as documented in the header.
double excess(double got, double want, const Tolerance &tol) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? -1 : INFINITY;
  if (std::isinf(got) || std::isinf(want))
    return got == want ? -1 : INFINITY;
  return std::fabs(got - want) - (tol.atol + tol.rtol * std::fabs(want));
}

Shape unravel(int64_t flat, llvm::ArrayRef<int64_t> shape) {
  Shape c(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    c[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return c;
}

std::string quoted(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string num(double v) {
  if (std::isnan(v))
    return "\"nan\"";
  if (std::isinf(v))
    return v > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{:.9g}", v);
}

std::string dims(llvm::ArrayRef<int64_t> s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

} // namespace

CompareReport compareTensors(const Tensor &got, const Tensor &want, const Tolerance &tol,
                             std::string name) {
  CompareReport r;
  r.name = std::move(name);
  r.tol = tol;
  r.gotShape.assign(got.shape().begin(), got.shape().end());
  r.wantShape.assign(want.shape().begin(), want.shape().end());
  r.gotDType = got.dtype();
  r.wantDType = want.dtype();
  r.shapeMismatch = r.gotShape != r.wantShape;
  r.dtypeMismatch = got.dtype() != want.dtype();
  if (r.shapeMismatch || r.dtypeMismatch)
    return r;
  r.numel = got.numel();
  if (isString(got.dtype())) {
    r.strings = true;
    for (int64_t j = 0; j < r.numel; ++j) {
      llvm::StringRef a = stringAt(got, j), b = stringAt(want, j);
      if (a == b)
        continue;
      if (r.outside++ == 0) {
        r.worstIndex = j;
        r.worstGotText = a.str();
        r.worstWantText = b.str();
        r.worstCoords = unravel(j, r.gotShape);
      }
    }
    return r;
  }
  double worstEx = 0, worstD = -1, sumAbs = 0, sumRel = 0;
  int64_t exIndex = -1, dIndex = -1;
  for (int64_t j = 0; j < r.numel; ++j) {
    double a = got.at(j), b = want.at(j);
    double ex = excess(a, b, tol);
    double d = std::fabs(a - b);
    if (std::isfinite(d)) {
      r.maxAbs = std::max(r.maxAbs, d);
      sumAbs += d;
      double rel = b != 0 ? d / std::fabs(b) : (d == 0 ? 0 : INFINITY);
      if (std::isfinite(rel)) {
        r.maxRel = std::max(r.maxRel, rel);
        sumRel += rel;
      }
    }
    if (ex > 0) {
      ++r.outside;
      if (ex > worstEx) {
        worstEx = ex;
        exIndex = j;
      }
    }
    if (!(d <= worstD)) {
      worstD = d;
      dIndex = j;
    }
  }
  // Within tolerance everywhere, the worst is the largest absolute error.
  r.worstIndex = exIndex >= 0 ? exIndex : dIndex;
  if (r.worstIndex >= 0) {
    r.worstGot = got.at(r.worstIndex);
    r.worstWant = want.at(r.worstIndex);
    r.meanAbs = sumAbs / double(r.numel);
    r.meanRel = sumRel / double(r.numel);
    r.worstCoords = unravel(r.worstIndex, r.gotShape);
  }
  return r;
}

std::string CompareReport::str() const {
  std::string head = fmt::format("compare '{}'", name);
  if (shapeMismatch || dtypeMismatch)
    return fmt::format("{}: got {}{}, the reference is {}{}: MISMATCH", head,
                       dtypeName(gotDType).str(), shapeStr(gotShape),
                       dtypeName(wantDType).str(), shapeStr(wantShape));
  if (strings) {
    if (ok())
      return fmt::format("{}: {} strings, all equal: ok", head, numel);
    return fmt::format("{}: {} of {} strings differ: MISMATCH\n  first at {} (flat {}): got {}, "
                       "want {}",
                       head, outside, numel, dims(worstCoords), worstIndex,
                       quoteString(worstGotText), quoteString(worstWantText));
  }
  std::string s = fmt::format("{}: max abs error {:.3g}, mean {:.3g}; max rel error {:.3g}, "
                              "mean {:.3g} (rtol {:g}, atol {:g}): {}",
                              head, maxAbs, meanAbs, maxRel, meanRel, tol.rtol, tol.atol,
                              ok() ? "ok" : "OUTSIDE TOLERANCE");
  if (!ok())
    s += fmt::format("\n  {} of {} elements ({:.3g}%) outside |got - want| <= atol + rtol * "
                     "|want|; worst at {} (flat {}): got {:.9g}, want {:.9g}",
                     outside, numel, 100.0 * double(outside) / double(std::max<int64_t>(numel, 1)),
                     dims(worstCoords), worstIndex, worstGot, worstWant);
  return s;
}

std::string CompareReport::json() const {
  std::string s = fmt::format("{{\"name\": {}, \"ok\": {}, \"rtol\": {}, \"atol\": {}", quoted(name),
                              ok() ? "true" : "false", num(tol.rtol), num(tol.atol));
  if (shapeMismatch || dtypeMismatch)
    return s + fmt::format(", \"got\": {{\"dtype\": {}, \"shape\": {}}}, \"want\": {{\"dtype\": "
                           "{}, \"shape\": {}}}}}",
                           quoted(dtypeName(gotDType).str()), dims(gotShape),
                           quoted(dtypeName(wantDType).str()), dims(wantShape));
  if (strings) {
    s += fmt::format(", \"elements\": {}, \"outside\": {}", numel, outside);
    if (outside)
      s += fmt::format(", \"worst\": {{\"index\": {}, \"flat_index\": {}, \"got\": {}, "
                       "\"want\": {}}}",
                       dims(worstCoords), worstIndex, quoted(worstGotText), quoted(worstWantText));
    return s + "}";
  }
  s += fmt::format(", \"elements\": {}, \"outside\": {}, \"outside_share\": {}, "
                   "\"max_abs\": {}, \"mean_abs\": {}, \"max_rel\": {}, \"mean_rel\": {}",
                   numel, outside, num(double(outside) / double(std::max<int64_t>(numel, 1))),
                   num(maxAbs), num(meanAbs), num(maxRel), num(meanRel));
  if (worstIndex >= 0)
    s += fmt::format(", \"worst\": {{\"index\": {}, \"flat_index\": {}, \"got\": {}, \"want\": "
                     "{}}}",
                     dims(worstCoords), worstIndex, num(worstGot), num(worstWant));
  return s + "}";
}

} // namespace tmg::rt
