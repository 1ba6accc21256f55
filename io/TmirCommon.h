//===- TmirCommon.h - Shared pieces of the .tmir reader and writer -------===//
#pragma once

#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include "tm/io/Tmir.h"
#include "tm/ir/IR.h"
#include "tm/ir/Strings.h"

namespace tmg {

/// "float32(3, 4)".
std::string tensorTypeStr(const Tensor &t);
/// Appending forms of shapeStr, treeRepr and nodeInfoStr (printer hot path).
void appendShape(std::string &out, llvm::ArrayRef<int64_t> shape);
void appendTree(std::string &out, const TreeDef &t);
void appendNodeInfo(std::string &out, const Node &n);
/// Sorts bytewise (as std::sort on StringRef) in time linear in the bytes
/// that tell the strings apart.
void sortStringsBytewise(std::vector<llvm::StringRef> &v);
/// Python repr of a constant TreeDef ("(3, 3)", "'default'").
std::string treeRepr(const TreeDef &t);
/// "%7 'relu_out' float32(3, 4) 'Net.[func_relu]'": id, name, type, qualname.
std::string nodeInfoStr(const Node &n);

/// A parsed value of an annotation or attribute line.
struct PyVal {
  enum class Kind {
    Scalar,
    Tuple,
    List,
    Dict,
    Slice,
    NodeRef,    ///< %12
    Placeholder,///< Tensor / Module (in argdef and outdef)
    TensorVal,  ///< param(...), buffer(...), tensor(...)
    ModuleVal,  ///< module(Type, {...})
  };
  Kind kind = Kind::Scalar;
  size_t col = 0; ///< 1-based column where it starts
  Scalar scalar;
  std::vector<PyVal> items;
  std::vector<Scalar> keys;
  int64_t nodeId = -1;
  TreeDef::LeafType leafType = TreeDef::LeafType::Tensor;
  // TensorVal
  std::string word; ///< param, buffer, tensor; or the module type name
  std::optional<DType> dtype;
  Shape shape;
  bool hasShape = false;
  std::string ref;               ///< @"key"
  std::vector<double> data;      ///< inline numbers
  std::vector<std::string> strings; ///< inline strings (dtype string)
  bool hasData = false;
};

/// Recursive-descent parser over one line. Errors raise tmg::Error with
/// `file:line:col`.
class LineParser {
public:
  /// `file` must outlive the parser (it is only read for error locations).
  LineParser(llvm::StringRef line, llvm::StringRef file, size_t lineNo,
             size_t colBase = 0)
      : s_(line), file_(file), line_(lineNo), base_(colBase) {}

  [[noreturn]] void fail(const std::string &msg, size_t at = ~size_t(0)) const;
  size_t col() const { return base_ + pos_ + 1; }
  void numberList(std::vector<double> &out, llvm::ArrayRef<int64_t> shape);
  /// Quoted strings up to ']' (after '['), escaped as string() reads them.
  void stringList(std::vector<std::string> &out);
  size_t pos() const { return pos_; }
  bool atEnd() { skipWs(); return pos_ >= s_.size(); }
  // Inline: called several times per token.
  void skipWs() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t'))
      ++pos_;
  }
  bool peek(llvm::StringRef t) {
    skipWs();
    return s_.size() - pos_ >= t.size() &&
           (t.empty() || std::memcmp(s_.data() + pos_, t.data(), t.size()) == 0);
  }
  bool eat(llvm::StringRef t) {
    if (!peek(t))
      return false;
    pos_ += t.size();
    return true;
  }
  void expect(llvm::StringRef t);
  std::string ident();
  /// ident() without a copy: the name as a slice of the line.
  llvm::StringRef identRef();
  int64_t integer();
  /// A node or expr id: an integer in [0, TmirIdLimit), else an error
  /// naming `what` at its column.
  int64_t id(const char *what);
  std::string string();
  PyVal value();
  /// A node type: "float32(3, 4)", "float32", "?", "module<Linear>".
  struct NodeType {
    bool isModule = false;
    std::string moduleType;
    std::optional<DType> dtype;
    std::optional<Shape> shape;
  };
  NodeType nodeType();
  llvm::StringRef rest() const { return s_.drop_front(pos_); }
  /// Moves back to a position returned by pos() (a fast path giving up).
  void setPos(size_t p) { pos_ = p; }
  Location loc(size_t col) const {
    return Location::inFile(file_.str(), int64_t(line_), int64_t(col));
  }

private:
  Shape shapeTuple();
  llvm::StringRef s_;
  llvm::StringRef file_;
  size_t line_;
  size_t base_;
  size_t pos_ = 0;
  size_t depth_ = 0; ///< nesting of value() calls (bounded: MaxValueNesting)
};

/// Node and expr ids of a .tmir file are below this (and the `ids` totals
/// at most this): far from INT64_MAX, whose neighbours are hash-map keys
/// reserved by llvm::DenseMap, and with room for ids created later.
constexpr int64_t TmirIdLimit = int64_t(1) << 62;

/// Values (tuples, lists, dicts) may nest this deep in .tmir text; deeper
/// input is an error at its column instead of exhausting the stack.
constexpr size_t MaxValueNesting = 200;

/// Converts a value to a TreeDef; node refs become leaves and their ids are
/// appended to `ids` (when given; else node refs are an error).
TreeDef toTreeDef(const PyVal &v, const LineParser &p,
                  llvm::SmallVectorImpl<int64_t> *ids = nullptr);

} // namespace tmg
