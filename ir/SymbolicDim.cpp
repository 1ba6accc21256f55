//===- SymbolicDim.cpp - Interned polynomial dimensions -------------------===//
//
// A symbolic dimension is an interned polynomial: a sum of terms, each an
// integer coefficient times a product of atoms. An atom is a named symbol or
// floor(p / c) of another interned polynomial p and a constant c > 1. The
// canonical form (terms sorted by their sorted atom lists, no zero
// coefficients, the constant term first) makes equal expressions intern to
// one id; id i is the dimension value -2 - i.
//
//===----------------------------------------------------------------------===//
#include "tm/ir/SymbolicDim.h"

#include <algorithm>
#include <cctype>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include <fmt/format.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SmallVector.h>

#include "tm/ir/Tensor.h"

namespace tmg {
namespace {

struct Term {
  llvm::SmallVector<uint32_t, 2> atoms; // sorted, with repetition
  int64_t coeff = 0;
};
using Poly = std::vector<Term>;

struct Atom {
  std::string name; // a symbol; empty for a floor division
  uint32_t poly = 0;
  int64_t divisor = 0;
};

/// Terms above which a result is not kept (unknown instead).
constexpr size_t kMaxTerms = 16;

/// The process's interned atoms and polynomials. Entries are never removed,
/// so the ids handed out stay valid; a deque keeps references stable while
/// others append.
class Table {
public:
  static Table &get() {
    static Table t;
    return t;
  }

  uint32_t atom(Atom a) {
    std::string key = a.name.empty() ? fmt::format("/{}/{}", a.poly, a.divisor) : "$" + a.name;
    {
      std::shared_lock l(mu_);
      if (auto it = atomIds_.find(key); it != atomIds_.end())
        return it->second;
    }
    std::unique_lock l(mu_);
    auto [it, fresh] = atomIds_.try_emplace(key, uint32_t(atoms_.size()));
    if (fresh)
      atoms_.push_back(std::move(a));
    return it->second;
  }

  /// The dimension value of a canonical polynomial.
  int64_t intern(const Poly &p) {
    if (p.empty())
      return 0;
    if (p.size() == 1 && p[0].atoms.empty())
      return p[0].coeff >= 0 ? p[0].coeff : kUnknownDim;
    std::string key;
    for (const Term &t : p) {
      key += std::to_string(t.coeff);
      for (uint32_t a : t.atoms)
        key += "," + std::to_string(a);
      key += ";";
    }
    {
      std::shared_lock l(mu_);
      if (auto it = polyIds_.find(key); it != polyIds_.end())
        return -2 - int64_t(it->second);
    }
    std::unique_lock l(mu_);
    auto [it, fresh] = polyIds_.try_emplace(key, uint32_t(polys_.size()));
    if (fresh)
      polys_.push_back(p);
    return -2 - int64_t(it->second);
  }

  /// The polynomial of a size or symbolic dim (not of kUnknownDim).
  Poly poly(int64_t d) const {
    if (d >= 0)
      return d == 0 ? Poly{} : Poly{Term{{}, d}};
    std::shared_lock l(mu_);
    return polys_.at(size_t(-2 - d));
  }
  bool known(int64_t d) const {
    std::shared_lock l(mu_);
    return d >= 0 || size_t(-2 - d) < polys_.size();
  }
  Atom atomAt(uint32_t i) const {
    std::shared_lock l(mu_);
    return atoms_.at(i);
  }

private:
  mutable std::shared_mutex mu_;
  std::deque<Atom> atoms_;
  std::deque<Poly> polys_;
  std::unordered_map<std::string, uint32_t> atomIds_, polyIds_;
};

bool lessAtoms(const Term &a, const Term &b) {
  return std::lexicographical_compare(a.atoms.begin(), a.atoms.end(), b.atoms.begin(),
                                      b.atoms.end());
}

/// Sorts terms, merges equal ones and drops zeros; false on overflow.
bool canonicalize(Poly &p) {
  std::sort(p.begin(), p.end(), [](const Term &a, const Term &b) {
    if (a.atoms.size() != b.atoms.size())
      return a.atoms.size() < b.atoms.size();
    return lessAtoms(a, b);
  });
  Poly out;
  for (Term &t : p) {
    if (!out.empty() && out.back().atoms == t.atoms) {
      if (__builtin_add_overflow(out.back().coeff, t.coeff, &out.back().coeff))
        return false;
    } else {
      out.push_back(std::move(t));
    }
    if (out.back().coeff == 0)
      out.pop_back();
  }
  p = std::move(out);
  return p.size() <= kMaxTerms;
}

int64_t finish(Poly p) {
  if (!canonicalize(p))
    return kUnknownDim;
  return Table::get().intern(p);
}

bool known(int64_t a) { return a != kUnknownDim; }

} // namespace

bool provablySameShape(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  if (a.size() != b.size())
    return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] || a[i] == kUnknownDim)
      return false;
  return true;
}

namespace dim {

int64_t symbol(llvm::StringRef name) {
  Table &t = Table::get();
  uint32_t a = t.atom(Atom{name.str(), 0, 0});
  return t.intern(Poly{Term{{a}, 1}});
}

int64_t add(int64_t a, int64_t b) {
  if (!known(a) || !known(b))
    return kUnknownDim;
  if (a >= 0 && b >= 0) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? kUnknownDim : r;
  }
  Poly p = Table::get().poly(a), q = Table::get().poly(b);
  p.insert(p.end(), q.begin(), q.end());
  return finish(std::move(p));
}

int64_t sub(int64_t a, int64_t b) {
  if (!known(a) || !known(b))
    return kUnknownDim;
  if (a >= 0 && b >= 0)
    return a >= b ? a - b : kUnknownDim;
  Poly p = Table::get().poly(a), q = Table::get().poly(b);
  for (Term &t : q) {
    if (t.coeff == INT64_MIN)
      return kUnknownDim;
    t.coeff = -t.coeff;
    p.push_back(std::move(t));
  }
  return finish(std::move(p));
}

int64_t mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0)
    return 0;
  if (!known(a) || !known(b))
    return kUnknownDim;
  if (a >= 0 && b >= 0) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? kUnknownDim : r;
  }
  Poly p = Table::get().poly(a), q = Table::get().poly(b), out;
  if (p.size() * q.size() > kMaxTerms)
    return kUnknownDim;
  for (const Term &x : p)
    for (const Term &y : q) {
      Term t;
      if (__builtin_mul_overflow(x.coeff, y.coeff, &t.coeff))
        return kUnknownDim;
      t.atoms = x.atoms;
      t.atoms.append(y.atoms.begin(), y.atoms.end());
      std::sort(t.atoms.begin(), t.atoms.end());
      out.push_back(std::move(t));
    }
  return finish(std::move(out));
}

int64_t floorDiv(int64_t a, int64_t c) {
  if (!known(a) || c <= 0)
    return kUnknownDim;
  if (c == 1)
    return a;
  if (a >= 0)
    return a / c;
  Poly p = Table::get().poly(a);
  bool exact = std::all_of(p.begin(), p.end(), [&](const Term &t) { return t.coeff % c == 0; });
  if (exact) {
    for (Term &t : p)
      t.coeff /= c;
    return finish(std::move(p));
  }
  // Whole multiples of c leave the division: floor((c*q + r)/c) = q +
  // floor(r/c) for integer q. Symbolic terms keep a remainder in [0, c); a
  // non-negative constant splits the same way, a negative one stays inside
  // the floor (`(H-1)//2`).
  Poly result, rest;
  int64_t constant = 0;
  for (const Term &t : p) {
    if (t.atoms.empty()) {
      constant = t.coeff;
      continue;
    }
    int64_t r = ((t.coeff % c) + c) % c, q = (t.coeff - r) / c;
    if (q)
      result.push_back(Term{t.atoms, q});
    if (r)
      rest.push_back(Term{t.atoms, r});
  }
  if (rest.empty()) {
    // Only the constant is left under the floor.
    int64_t f = constant >= 0 ? constant / c : -((-constant + c - 1) / c);
    if (f)
      result.push_back(Term{{}, f});
    return finish(std::move(result));
  }
  if (constant >= 0) {
    if (constant / c)
      result.push_back(Term{{}, constant / c});
    if (constant % c)
      rest.push_back(Term{{}, constant % c});
  } else {
    rest.push_back(Term{{}, constant});
  }
  int64_t restDim = finish(std::move(rest));
  if (!isSymbolicDim(restDim))
    return kUnknownDim;
  uint32_t at = Table::get().atom(Atom{"", uint32_t(-2 - restDim), c});
  result.push_back(Term{{at}, 1});
  return finish(std::move(result));
}

int64_t ceilDiv(int64_t a, int64_t c) {
  if (c <= 0)
    return kUnknownDim;
  return floorDiv(add(a, c - 1), c);
}

std::optional<int64_t> exactDiv(int64_t a, int64_t b) {
  if (!known(a) || !known(b) || b == 0)
    return std::nullopt;
  if (a >= 0 && b >= 0)
    return a % b == 0 ? std::optional(a / b) : std::nullopt;
  Poly p = Table::get().poly(a), q = Table::get().poly(b);
  if (q.size() != 1)
    return a == b ? std::optional<int64_t>(1) : std::nullopt;
  const Term &d = q[0];
  for (Term &t : p) {
    if (t.coeff % d.coeff)
      return std::nullopt;
    t.coeff /= d.coeff;
    for (uint32_t at : d.atoms) {
      auto it = std::find(t.atoms.begin(), t.atoms.end(), at);
      if (it == t.atoms.end())
        return std::nullopt;
      t.atoms.erase(it);
    }
  }
  int64_t r = finish(std::move(p));
  return r == kUnknownDim ? std::nullopt : std::optional(r);
}

int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t r = 1;
  for (int64_t d : dims)
    r = mul(r, d);
  return r;
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

namespace {

bool isIdent(llvm::StringRef s) {
  if (s.empty() || !(std::isalpha(uint8_t(s[0])) || s[0] == '_'))
    return false;
  return llvm::all_of(s, [](char c) { return std::isalnum(uint8_t(c)) || c == '_'; });
}

std::string polyStr(const Poly &p);

std::string atomStr(uint32_t i) {
  Atom a = Table::get().atomAt(i);
  if (!a.name.empty()) {
    if (isIdent(a.name))
      return a.name;
    std::string q = "'";
    for (char c : a.name) {
      if (c == '\'' || c == '\\')
        q += '\\';
      q += c;
    }
    return q + "'";
  }
  Poly inner = Table::get().poly(-2 - int64_t(a.poly));
  std::string s = polyStr(inner);
  bool single = inner.size() == 1 && inner[0].coeff == 1 && inner[0].atoms.size() == 1;
  return (single ? s : "(" + s + ")") + "//" + std::to_string(a.divisor);
}

/// A term's atoms in name order (ids depend on the order of interning; the
/// text must not), then its coefficient: `H*W*3`.
std::string atomsStr(const Term &t) {
  std::vector<std::string> parts;
  for (uint32_t a : t.atoms)
    parts.push_back(atomStr(a));
  std::sort(parts.begin(), parts.end());
  std::string s;
  for (const std::string &x : parts)
    s += (s.empty() ? "" : "*") + x;
  return s;
}

std::string polyStr(const Poly &p) {
  // Symbolic terms first in text order, the constant last: `N*197+1`.
  std::vector<std::pair<std::string, int64_t>> terms;
  int64_t constant = 0;
  for (const Term &t : p) {
    if (t.atoms.empty())
      constant = t.coeff;
    else
      terms.emplace_back(atomsStr(t), t.coeff);
  }
  std::sort(terms.begin(), terms.end());
  std::string s;
  for (const auto &[atoms, coeff] : terms) {
    int64_t c = coeff < 0 ? -coeff : coeff;
    s += coeff < 0 ? "-" : s.empty() ? "" : "+";
    s += atoms + (c != 1 ? "*" + std::to_string(c) : "");
  }
  if (constant)
    s += (constant < 0 ? "-" : s.empty() ? "" : "+") +
         std::to_string(constant < 0 ? -constant : constant);
  return s.empty() ? "0" : s;
}

/// A recursive-descent reader of the expressions `str` prints.
class Parser {
public:
  explicit Parser(llvm::StringRef s) : s_(s) {}

  std::optional<int64_t> all() {
    skip();
    if (s_.substr(i_) == "?" ) {
      i_ = s_.size();
      return kUnknownDim;
    }
    auto v = expr();
    skip();
    if (v && i_ != s_.size())
      return fail("unexpected '" + s_.substr(i_, 1).str() + "' in a dimension");
    return v;
  }
  std::string error;
  size_t pos = 0;

private:
  std::optional<int64_t> fail(std::string msg) {
    if (error.empty()) {
      error = std::move(msg);
      pos = i_;
    }
    return std::nullopt;
  }
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ')
      ++i_;
  }
  bool eat(llvm::StringRef tok) {
    skip();
    if (s_.substr(i_).startswith(tok)) {
      i_ += tok.size();
      return true;
    }
    return false;
  }
  std::optional<int64_t> expr() {
    bool neg = eat("-");
    auto v = term();
    if (!v)
      return v;
    int64_t acc = neg ? sub(0, *v) : *v;
    if (neg && *v != 0 && acc == kUnknownDim)
      return fail("a dimension cannot be negative");
    while (true) {
      bool plus = eat("+");
      if (!plus && !eat("-"))
        return acc;
      auto r = term();
      if (!r)
        return r;
      acc = plus ? add(acc, *r) : sub(acc, *r);
    }
  }
  std::optional<int64_t> term() {
    auto v = factor();
    while (v) {
      if (eat("//")) {
        size_t at = i_;
        auto r = factor();
        if (!r)
          return r;
        if (*r <= 0) {
          i_ = at;
          return fail("'//' needs a positive size on its right");
        }
        v = floorDiv(*v, *r);
      } else if (eat("*")) {
        auto r = factor();
        if (!r)
          return r;
        v = mul(*v, *r);
      } else {
        break;
      }
    }
    return v;
  }
  std::optional<int64_t> factor() {
    skip();
    if (i_ >= s_.size())
      return fail("expected a dimension");
    char c = s_[i_];
    if (c == '(') {
      ++i_;
      auto v = expr();
      if (v && !eat(")"))
        return fail("expected ')'");
      return v;
    }
    if (std::isdigit(uint8_t(c))) {
      size_t b = i_;
      while (i_ < s_.size() && std::isdigit(uint8_t(s_[i_])))
        ++i_;
      int64_t v;
      if (s_.substr(b, i_ - b).getAsInteger(10, v)) {
        i_ = b;
        return fail("size out of range");
      }
      return v;
    }
    if (c == '\'') {
      std::string name;
      for (++i_; i_ < s_.size() && s_[i_] != '\''; ++i_) {
        if (s_[i_] == '\\' && i_ + 1 < s_.size())
          ++i_;
        name += s_[i_];
      }
      if (i_ >= s_.size())
        return fail("unterminated quoted symbol");
      ++i_;
      if (name.empty())
        return fail("empty symbol name");
      return symbol(name);
    }
    if (std::isalpha(uint8_t(c)) || c == '_') {
      size_t b = i_;
      while (i_ < s_.size() && (std::isalnum(uint8_t(s_[i_])) || s_[i_] == '_'))
        ++i_;
      return symbol(s_.substr(b, i_ - b));
    }
    return fail(fmt::format("unexpected '{}' in a dimension", c));
  }

  llvm::StringRef s_;
  size_t i_ = 0;
};

} // namespace

std::string str(int64_t d) {
  if (d >= 0)
    return std::to_string(d);
  if (d == kUnknownDim)
    return "?";
  if (!Table::get().known(d)) // not a dim this process made: the number
    return std::to_string(d);
  return polyStr(Table::get().poly(d));
}

std::string dimsStr(llvm::ArrayRef<int64_t> dims) {
  std::string s = "(";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + str(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

std::optional<int64_t> parse(llvm::StringRef text, std::string *error, size_t *pos) {
  Parser p(text);
  auto v = p.all();
  if (!v) {
    if (error)
      *error = p.error;
    if (pos)
      *pos = p.pos;
  }
  return v;
}

std::optional<std::string> symbolName(int64_t d) {
  if (!isSymbolicDim(d))
    return std::nullopt;
  Poly p = Table::get().poly(d);
  if (p.size() != 1 || p[0].coeff != 1 || p[0].atoms.size() != 1)
    return std::nullopt;
  Atom a = Table::get().atomAt(p[0].atoms[0]);
  if (a.name.empty())
    return std::nullopt;
  return a.name;
}

namespace {

/// The value of polynomial `p` under `env`; nullopt when a symbol is
/// unbound or the value is out of range.
std::optional<int64_t> evalPoly(const Poly &p, const std::map<std::string, int64_t> &env) {
  int64_t acc = 0;
  for (const Term &t : p) {
    int64_t v = t.coeff;
    for (uint32_t ai : t.atoms) {
      Atom a = Table::get().atomAt(ai);
      int64_t x;
      if (!a.name.empty()) {
        auto it = env.find(a.name);
        if (it == env.end())
          return std::nullopt;
        x = it->second;
      } else {
        auto inner = evalPoly(Table::get().poly(-2 - int64_t(a.poly)), env);
        if (!inner)
          return std::nullopt;
        x = *inner / a.divisor; // evalPoly gives no negative values
      }
      if (__builtin_mul_overflow(v, x, &v))
        return std::nullopt;
    }
    if (__builtin_add_overflow(acc, v, &acc))
      return std::nullopt;
  }
  if (acc < 0)
    return std::nullopt;
  return acc;
}

} // namespace

std::optional<int64_t> eval(int64_t d, const std::map<std::string, int64_t> &env) {
  if (d >= 0)
    return d;
  if (d == kUnknownDim)
    return std::nullopt;
  return evalPoly(Table::get().poly(d), env);
}

int64_t substitute(int64_t d, const std::map<std::string, int64_t> &env) {
  if (!isSymbolicDim(d))
    return d;
  if (auto v = eval(d, env))
    return *v;
  // Rebuild the expression from its terms with the bound symbols replaced.
  Poly p = Table::get().poly(d);
  int64_t acc = 0;
  for (const Term &t : p) {
    int64_t term = t.coeff < 0 ? -t.coeff : t.coeff;
    for (uint32_t ai : t.atoms) {
      Atom a = Table::get().atomAt(ai);
      int64_t x;
      if (!a.name.empty()) {
        auto it = env.find(a.name);
        x = it == env.end() ? symbol(a.name) : it->second;
      } else {
        x = floorDiv(substitute(-2 - int64_t(a.poly), env), a.divisor);
      }
      term = mul(term, x);
    }
    acc = t.coeff < 0 ? sub(acc, term) : add(acc, term);
    if (acc == kUnknownDim)
      return kUnknownDim;
  }
  return acc;
}

} // namespace dim

//===----------------------------------------------------------------------===//
// ShapeBinder
//===----------------------------------------------------------------------===//

std::string ShapeBinder::bind(llvm::StringRef what, llvm::ArrayRef<int64_t> declared,
                              llvm::ArrayRef<int64_t> actual, bool sizes) {
  if (declared.size() != actual.size())
    return fmt::format("{}: rank {} in the graph {}, got rank {} {}", what.str(),
                       declared.size(), dim::dimsStr(declared), actual.size(), shapeStr(actual));
  for (size_t i = 0; i < declared.size(); ++i) {
    int64_t d = declared[i], a = actual[i];
    if (d >= 0) {
      if (sizes && d != a)
        return fmt::format("{}: dim {} is {} in the graph, got {}", what.str(), i, d, a);
    } else if (auto name = dim::symbolName(d)) {
      auto [it, fresh] = env_.try_emplace(*name, a);
      if (fresh)
        boundBy_[*name] = fmt::format("{} dim {}", what.str(), i);
      else if (it->second != a)
        return fmt::format("{}: dim {} is {} = {} (from {}), got {}", what.str(), i, *name,
                           it->second, boundBy_[*name], a);
    } else if (d != kUnknownDim) {
      pending_.push_back(Pending{what.str(), i, d, a});
    }
  }
  return {};
}

std::string ShapeBinder::finish() {
  for (const Pending &p : pending_) {
    auto v = dim::eval(p.dim, env_);
    if (v && *v != p.actual)
      return fmt::format("{}: dim {} is {} = {} in the graph, got {}", p.what, p.index,
                         dim::str(p.dim), *v, p.actual);
  }
  return {};
}

} // namespace tmg
