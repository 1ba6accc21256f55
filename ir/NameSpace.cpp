//===- NameSpace.cpp - Unique names within a graph ------------------------===//
#include "tm/ir/NameSpace.h"

#include <llvm/ADT/SmallString.h>

#include <cctype>

#include <llvm/ADT/StringSet.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"

namespace tmg {

// Python keywords, the names of `builtins` and "inf", "nan", "NoneType",
// which the reference never hands out (`_is_builtin_name`).
static constexpr const char *ReservedNames[] = {
    "ArithmeticError", "AssertionError", "AttributeError", "BaseException",
    "BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError",
    "BytesWarning", "ChildProcessError", "ConnectionAbortedError",
    "ConnectionError", "ConnectionRefusedError", "ConnectionResetError",
    "DeprecationWarning", "EOFError", "Ellipsis", "EncodingWarning",
    "EnvironmentError", "Exception", "ExceptionGroup", "False",
    "FileExistsError", "FileNotFoundError", "FloatingPointError",
    "FutureWarning", "GeneratorExit", "IOError", "ImportError", "ImportWarning",
    "IndentationError", "IndexError", "InterruptedError", "IsADirectoryError",
    "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError",
    "ModuleNotFoundError", "NameError", "None", "NoneType",
    "NotADirectoryError", "NotImplemented", "NotImplementedError", "OSError",
    "OverflowError", "PendingDeprecationWarning", "PermissionError",
    "ProcessLookupError", "RecursionError", "ReferenceError", "ResourceWarning",
    "RuntimeError", "RuntimeWarning", "StopAsyncIteration", "StopIteration",
    "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError",
    "TimeoutError", "True", "TypeError", "UnboundLocalError",
    "UnicodeDecodeError", "UnicodeEncodeError", "UnicodeError",
    "UnicodeTranslateError", "UnicodeWarning", "UserWarning", "ValueError",
    "Warning", "ZeroDivisionError", "__build_class__", "__debug__", "__doc__",
    "__import__", "__loader__", "__name__", "__package__", "__spec__", "abs",
    "aiter", "all", "and", "anext", "any", "as", "ascii", "assert", "async",
    "await", "bin", "bool", "break", "breakpoint", "bytearray", "bytes",
    "callable", "chr", "class", "classmethod", "compile", "complex", "continue",
    "copyright", "credits", "def", "del", "delattr", "dict", "dir", "divmod",
    "elif", "else", "enumerate", "eval", "except", "exec", "exit", "filter",
    "finally", "float", "for", "format", "from", "frozenset", "getattr",
    "global", "globals", "hasattr", "hash", "help", "hex", "id", "if", "import",
    "in", "inf", "input", "int", "is", "isinstance", "issubclass", "iter",
    "lambda", "len", "license", "list", "locals", "map", "max", "memoryview",
    "min", "nan", "next", "nonlocal", "not", "object", "oct", "open", "or",
    "ord", "pass", "pow", "print", "property", "quit", "raise", "range", "repr",
    "return", "reversed", "round", "set", "setattr", "slice", "sorted",
    "staticmethod", "str", "sum", "super", "try", "tuple", "type", "vars",
    "while", "with", "yield", "zip",
};

static constexpr bool noReservedNameEndsInADigit() {
  for (const char *n : ReservedNames) {
    const char *e = n;
    while (*e)
      ++e;
    if (e != n && e[-1] >= '0' && e[-1] <= '9')
      return false;
  }
  return true;
}
static_assert(noReservedNameEndsInADigit(), "isReservedName's shortcut");

bool isReservedName(llvm::StringRef name) {
  // No reserved name ends in a digit (static_assert above): the
  // counted names "relu_out_7" skip the table.
  if (name.empty() || (name.back() >= '0' && name.back() <= '9'))
    return false;
  static const llvm::StringSet<> set = [] {
    llvm::StringSet<> s;
    for (const char *n : ReservedNames)
      s.insert(n);
    return s;
  }();
  return set.count(name) != 0;
}

bool getSuffixName(llvm::StringRef prefix, llvm::StringRef name,
                   std::string &suffix) {
  if (prefix == name) {
    suffix.clear();
    return true;
  }
  if (name.size() > prefix.size() + 1 && name.startswith(prefix) &&
      name[prefix.size()] == '.') {
    suffix = name.drop_front(prefix.size() + 1).str();
    return true;
  }
  return false;
}

/// The reference's sanitising: `raw` itself when it is already a clean
/// identifier (no copy), else the cleaned text written into `buf`.
/// Identifier characters ([A-Za-z0-9_]), by byte.
static constexpr struct IdentChars {
  bool ok[256] = {};
  constexpr IdentChars() {
    for (int c = 0; c < 256; ++c)
      ok[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_';
  }
} identChars;

static llvm::StringRef sanitize(llvm::StringRef raw, llvm::SmallVectorImpl<char> &buf) {
  // Every created name passes here: one table lookup per byte.
  bool clean = !raw.empty() && !std::isdigit((unsigned char)raw[0]);
  for (char c : raw)
    clean &= identChars.ok[(unsigned char)c];
  if (clean)
    return raw;
  buf.clear();
  bool inRun = false;
  for (char c : raw) {
    bool ok = std::isalnum((unsigned char)c) || c == '_';
    if (ok) {
      buf.push_back(c);
      inRun = false;
    } else if (!inRun) {
      buf.push_back('_');
      inRun = true;
    }
  }
  if (!buf.empty() && std::isdigit((unsigned char)buf[0]))
    buf.insert(buf.begin(), '_');
  return llvm::StringRef(buf.data(), buf.size());
}

namespace {

/// Splits "base_k" as the counter writes it (k >= 1, decimal without a
/// leading zero, at most 18 digits).
bool splitCounted(llvm::StringRef n, llvm::StringRef &base, uint64_t &k) {
  size_t us = n.rfind('_');
  if (us == llvm::StringRef::npos || us + 1 >= n.size())
    return false;
  llvm::StringRef d = n.drop_front(us + 1);
  if (d[0] == '0' || d.size() > 18)
    return false;
  uint64_t v = 0;
  for (char c : d) {
    if (c < '0' || c > '9')
      return false;
    v = v * 10 + uint64_t(c - '0');
  }
  base = n.take_front(us);
  k = v;
  return true;
}

/// "base_k" into `buf`.
llvm::StringRef countedName(llvm::SmallVectorImpl<char> &buf, llvm::StringRef base,
                            uint64_t k) {
  char digits[24];
  char *end = digits + sizeof digits, *p = end;
  do {
    *--p = char('0' + k % 10);
    k /= 10;
  } while (k);
  buf.assign(base.begin(), base.end());
  buf.push_back('_');
  buf.append(p, end);
  return llvm::StringRef(buf.data(), buf.size());
}

} // namespace

bool NameSpace::isUsed(llvm::StringRef n) const {
  if (!used_.empty() && used_.count(n))
    return true;
  llvm::StringRef base;
  uint64_t k;
  if (!splitCounted(n, base, k))
    return false;
  auto it = counted_.find(base);
  return it != counted_.end() && k < it->second.next &&
         (holes_.empty() || !holes_.count(n));
}

void NameSpace::extend(Counter &c, llvm::StringRef base) {
  ++c.next;
  // Names of used_ that now continue the range join it.
  llvm::SmallString<64> buf;
  while (c.above && used_.erase(countedName(buf, base, c.next))) {
    --c.above;
    ++c.next;
  }
}

bool NameSpace::take(llvm::StringRef n) {
  // By the invariants, b_k is free when k is the counter's next, taken when
  // below it unless a hole (a released name), and in used_ when above it.
  // A counter made for a base here is made only for a free name.
  llvm::StringRef base;
  uint64_t k;
  if (!splitCounted(n, base, k))
    return used_.insert(n).second;
  HotName &hot = hot_.slot(base);
  if (!hot.c || hot.name != base) {
    hot.name = base;
    hot.c = &counted_.try_emplace(base).first->second;
    hot.inUsed = false;
  }
  Counter &c = *hot.c;
  if (k < c.next) {
    if (c.holes && holes_.erase(n)) {
      --c.holes;
      return true;
    }
    return false;
  }
  if (k == c.next) {
    extend(c, base);
    return true;
  }
  if (!used_.insert(n).second)
    return false;
  ++c.above;
  return true;
}

std::string NameSpace::createUniqueName(llvm::StringRef raw) {
  llvm::SmallString<64> out;
  return createUniqueName(raw, out).str();
}

llvm::StringRef NameSpace::createUniqueName(llvm::StringRef raw,
                                            llvm::SmallVectorImpl<char> &out) {
  if (raw.empty())
    raise("cannot create a unique name from an empty name in graph '{}'",
          name_);
  llvm::SmallString<64> cleanBuf;
  llvm::StringRef name = sanitize(raw, cleanBuf);
  HotName &hot = hot_.slot(name);
  if (hot.c && hot.inUsed && hot.c->holes == 0 && hot.name == name) {
    llvm::StringRef r = countedName(out, name, hot.c->next);
    extend(*hot.c, name);
    return r;
  }
  // (No reserved name ends in a digit, so counted names skip the table.)
  auto tryTake = [&](llvm::StringRef n) {
    bool digitLast = !n.empty() && n.back() >= '0' && n.back() <= '9';
    return (digitLast || !isReservedName(n)) && take(n);
  };
  if (tryTake(name)) {
    if (!name.empty() && !std::isdigit((unsigned char)name.back())) {
      // A name without a numeric suffix, now in used_: the next request
      // for it (flatten asks for each inlined name once per node) gets
      // name_(next) from the hot cache, without the two lookups that find
      // it taken. (A counter made here has next 1: any name_k taken before
      // would have made it. Names ending in a digit, "x_07" too, are split
      // by the reference's rule instead.)
      hot.name = name;
      hot.c = &counted_.try_emplace(name).first->second;
      hot.inUsed = true;
    }
    out.assign(name.begin(), name.end());
    return llvm::StringRef(out.data(), out.size());
  }
  // Split "base_<digits>" as the reference's regex (.*)_(\d+)$ does.
  llvm::StringRef base = name;
  uint64_t num = 0;
  size_t us = name.rfind('_');
  if (us != llvm::StringRef::npos && us + 1 < name.size()) {
    llvm::StringRef digits = name.drop_front(us + 1);
    bool allDigits = true;
    for (char c : digits)
      allDigits &= bool(std::isdigit((unsigned char)c));
    if (allDigits && !digits.getAsInteger(10, num))
      base = name.take_front(us);
    else
      num = 0;
  }
  // The reference tries base_(num+1), base_(num+2), ...: below the counted
  // range everything is taken unless a name of it was released.
  uint64_t start = num + 1;
  uint64_t k = start;
  auto it = counted_.find(base);
  if (it != counted_.end() && it->second.holes == 0) {
    Counter &c = it->second;
    if (start <= c.next) {
      // base_(next) is free (the invariants: used_ holds no base_k with
      // k <= next, no hole of base, and reserved names end in a letter):
      // taken without a lookup.
      if (base.size() == name.size()) { // no counter suffix: cache it
        hot.name = name;
        hot.c = &c;
        hot.inUsed = true;
      }
      llvm::StringRef r = countedName(out, base, c.next);
      extend(c, base);
      return r;
    }
  }
  llvm::StringRef cand;
  for (;; ++k) {
    cand = countedName(out, base, k);
    if (tryTake(cand))
      return cand;
  }
}

void NameSpace::release(llvm::StringRef n) {
  hot_.clear();
  llvm::StringRef base;
  uint64_t k = 0;
  bool counted = splitCounted(n, base, k);
  if (used_.erase(n)) {
    if (counted) {
      auto it = counted_.find(base);
      if (it != counted_.end() && k > it->second.next)
        --it->second.above;
    }
    return;
  }
  if (!counted)
    return;
  auto it = counted_.find(base);
  if (it == counted_.end() || k >= it->second.next || holes_.count(n))
    return;
  Counter &c = it->second;
  if (k + 1 < c.next) {
    holes_.insert(n);
    ++c.holes;
    return;
  }
  // The last of the range: the range shrinks, over released names too.
  --c.next;
  llvm::SmallString<64> buf;
  while (c.holes && holes_.erase(countedName(buf, base, c.next - 1))) {
    --c.holes;
    --c.next;
  }
}

size_t NameSpace::size() const {
  size_t n = used_.size();
  for (const auto &e : counted_)
    n += e.second.next - 1;
  return n - holes_.size();
}

void NameSpace::forEachUsedName(llvm::function_ref<void(llvm::StringRef)> f) const {
  for (const auto &e : used_)
    f(e.getKey());
  llvm::SmallString<64> buf;
  for (const auto &e : counted_)
    for (uint64_t k = 1; k < e.second.next; ++k) {
      llvm::StringRef n = countedName(buf, e.getKey(), k);
      if (holes_.empty() || !holes_.count(n))
        f(n);
    }
}

void NameSpace::merge(const NameSpace &other) {
  other.forEachUsedName([&](llvm::StringRef n) { reserve(n); });
}


void NameSpace::autoNameOutputs(Expr &e) {
  // Runs for every created expr: the names are built in stack buffers.
  llvm::SmallString<64> name, qualname, key, unique;
  bool addSuffix = true;
  // "<graph qualname>.[<what>]".
  auto bracketed = [&](llvm::StringRef what) {
    qualname = qualname_;
    qualname += ".[";
    qualname += what;
    qualname += "]";
  };
  auto keyedQualname = [&](llvm::StringRef prefix, llvm::StringRef what) {
    key = prefix;
    key += what;
    bracketed(createUniqueName(key, unique));
  };
  if (auto *cm = llvm::dyn_cast<CallMethod>(&e)) {
    if (cm->isModuleCall()) {
      Node *callNode = e.input(0);
      qualname = callNode->qualname();
      qualname += ".[out]";
      name = callNode->name();
    } else {
      name = cm->method().trim('_');
      keyedQualname("method_", name);
    }
  } else if (auto *cf = llvm::dyn_cast<CallFunction>(&e)) {
    name = cf->func().name();
    keyedQualname("func_", name);
  } else if (auto *ap = llvm::dyn_cast<Apply>(&e)) {
    name = llvm::StringRef(ap->opdef().name()).lower();
    keyedQualname("def_", name);
  } else if (auto *ga = llvm::dyn_cast<GetAttr>(&e)) {
    qualname = e.input(0)->qualname();
    qualname += ".";
    qualname += ga->attrName();
    std::string suffix;
    if (!getSuffixName(qualname_, qualname, suffix))
      raiseAt(Location::atExpr(e.id()),
              "getattr qualname '{}' is not under graph qualname '{}'",
              qualname.str().str(), qualname_);
    name = suffix;
    addSuffix = false;
  } else if (auto *c = llvm::dyn_cast<Constant>(&e)) {
    if (!c->name().empty())
      name = c->name();
    else if (c->isTensor())
      name = "const_tensor";
    else {
      name = "const_";
      name += llvm::StringRef(c->module()->typeName()).lower();
    }
    bracketed(name);
    addSuffix = false;
  } else if (auto *in = llvm::dyn_cast<Input>(&e)) {
    name = in->name();
    bracketed(name);
    addSuffix = false;
  }
  for (Node *n : e.outputs()) {
    llvm::SmallString<64> cur;
    if (!n->name().empty())
      cur = n->name();
    else {
      cur = name;
      if (addSuffix)
        cur += "_out";
    }
    if (cur.empty())
      cur = "_";
    // One block for both names (an explicit qualname stays).
    llvm::StringRef qual = n->qualname().empty() ? llvm::StringRef(qualname) : n->qualname();
    n->setNamesInternal(createUniqueName(cur, unique), qual);
  }
}

} // namespace tmg
