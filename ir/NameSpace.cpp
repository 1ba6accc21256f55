//===- NameSpace.cpp - Unique names within a graph ------------------------===//
#include "tm/ir/NameSpace.h"

#include <cctype>

#include <llvm/ADT/StringSet.h>

#include "tm/ir/Diagnostic.h"
#include "tm/ir/Expr.h"
#include "tm/ir/Module.h"

namespace tmg {

// Python keywords, the names of `builtins` and "inf", "nan", "NoneType",
// which the reference never hands out (`_is_builtin_name`).
static const char *const ReservedNames[] = {
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

bool isReservedName(llvm::StringRef name) {
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

static std::string sanitize(llvm::StringRef raw) {
  std::string out;
  out.reserve(raw.size() + 1);
  bool inRun = false;
  for (char c : raw) {
    bool ok = std::isalnum((unsigned char)c) || c == '_';
    if (ok) {
      out += c;
      inRun = false;
    } else if (!inRun) {
      out += '_';
      inRun = true;
    }
  }
  if (!out.empty() && std::isdigit((unsigned char)out[0]))
    out.insert(out.begin(), '_');
  return out;
}

std::string NameSpace::createUniqueName(llvm::StringRef raw) {
  if (raw.empty())
    raise("cannot create a unique name from an empty name in graph '{}'",
          name_);
  std::string name = sanitize(raw);
  if (!used_.count(name) && !isReservedName(name)) {
    used_.insert(name);
    return name;
  }
  // Split "base_<digits>" as the reference's regex (.*)_(\d+)$ does.
  llvm::StringRef ref(name);
  llvm::StringRef base = ref;
  uint64_t num = 0;
  size_t us = ref.rfind('_');
  if (us != llvm::StringRef::npos && us + 1 < ref.size()) {
    llvm::StringRef digits = ref.drop_front(us + 1);
    bool allDigits = true;
    for (char c : digits)
      allDigits &= bool(std::isdigit((unsigned char)c));
    if (allDigits && !digits.getAsInteger(10, num))
      base = ref.take_front(us);
    else
      num = 0;
  }
  uint64_t start = num + 1;
  uint64_t &probe = probe_.try_emplace(base, 1).first->second;
  uint64_t k = std::max(start, probe);
  std::string cand;
  for (;; ++k) {
    cand = base.str() + "_" + std::to_string(k);
    if (!used_.count(cand) && !isReservedName(cand))
      break;
  }
  // Every base_j with j < k is now known taken when the searched range
  // [start, k) joins the known-taken prefix [1, probe).
  if (start <= probe)
    probe = k + 1;
  used_.insert(cand);
  return cand;
}

void NameSpace::release(llvm::StringRef name) {
  if (!used_.erase(name))
    return;
  // "base_k" free again: the known-taken prefix of base ends before k.
  size_t us = name.rfind('_');
  if (us == llvm::StringRef::npos || us + 1 >= name.size())
    return;
  uint64_t k = 0;
  if (name.drop_front(us + 1).getAsInteger(10, k))
    return;
  auto it = probe_.find(name.take_front(us));
  if (it != probe_.end() && k < it->second)
    it->second = k;
}

void NameSpace::merge(const NameSpace &other) {
  for (const auto &e : other.used_)
    used_.insert(e.getKey());
}

static std::string stripUnderscores(llvm::StringRef s) {
  return s.trim('_').str();
}

void NameSpace::autoNameOutputs(Expr &e) {
  std::string name, qualname;
  bool addSuffix = true;
  if (auto *cm = llvm::dyn_cast<CallMethod>(&e)) {
    if (cm->isModuleCall()) {
      Node *callNode = e.input(0);
      qualname = callNode->qualname().str() + ".[out]";
      name = callNode->name();
    } else {
      name = stripUnderscores(cm->method());
      qualname = qualname_ + ".[" + createUniqueName("method_" + name) + "]";
    }
  } else if (auto *cf = llvm::dyn_cast<CallFunction>(&e)) {
    name = cf->func().name().str();
    qualname = qualname_ + ".[" + createUniqueName("func_" + name) + "]";
  } else if (auto *ap = llvm::dyn_cast<Apply>(&e)) {
    name = llvm::StringRef(ap->opdef().name()).lower();
    qualname = qualname_ + ".[" + createUniqueName("def_" + name) + "]";
  } else if (auto *ga = llvm::dyn_cast<GetAttr>(&e)) {
    qualname = e.input(0)->qualname().str() + "." + ga->attrName();
    if (!getSuffixName(qualname_, qualname, name))
      raiseAt(Location::atExpr(e.id()),
              "getattr qualname '{}' is not under graph qualname '{}'",
              qualname, qualname_);
    addSuffix = false;
  } else if (auto *c = llvm::dyn_cast<Constant>(&e)) {
    if (!c->name().empty())
      name = c->name();
    else if (c->isTensor())
      name = "const_tensor";
    else
      name = "const_" + llvm::StringRef(c->module()->typeName()).lower();
    qualname = qualname_ + ".[" + name + "]";
    addSuffix = false;
  } else if (auto *in = llvm::dyn_cast<Input>(&e)) {
    name = in->name();
    qualname = qualname_ + ".[" + name + "]";
    addSuffix = false;
  }
  SharedString sharedQual(qualname); // one block for all outputs
  for (Node *n : e.outputs()) {
    std::string cur = !n->name().empty() ? n->name().str()
                      : addSuffix        ? name + "_out"
                                         : name;
    if (cur.empty())
      cur = "_";
    n->setNameInternal(createUniqueName(cur));
    if (n->qualname().empty())
      n->setQualname(sharedQual);
  }
}

} // namespace tmg
