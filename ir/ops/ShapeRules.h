//===- ShapeRules.h - What op shape rules are written with ------*- C++ -*-===//
//
// Private to the IR layer. A shape rule computes an op's output types from
// the expr being inferred, seen through a ShapeContext (its operands, its
// constant arguments, failure reporting). Each op family registers its rules
// in `ir/ops/<family>.cpp` through its `register<Family>ShapeRules`, and
// `inferTypes` (ShapeInference.cpp) finds them in one ShapeRuleTable. The
// helpers a family shares with the builtin-module rules (conv, pool and
// flatten arithmetic) are declared here too.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/StringRef.h>

#include "tm/ir/Expr.h"
#include "tm/ir/OpTable.h"
#include "tm/ir/ShapeInference.h"

namespace tmg::shapes {

using Types = std::optional<TensorTypes>;

/// A tensor operand, or a Python scalar (weakly typed, shape ()).
struct Operand {
  std::optional<Shape> shape;
  std::optional<DType> dtype;
  bool weak = false;
};

/// The int of a constant TreeDef.
std::optional<int64_t> intOf(const TreeDef &t);
/// An int, or a tuple or list of ints.
std::optional<std::vector<int64_t>> intsOf(const TreeDef &t);
bool isNoneDef(const TreeDef &t);
/// Ints as a Python tuple, as given (a -1 to infer, negative axes): "(5, -1)".
std::string intsStr(llvm::ArrayRef<int64_t> v);
/// An int or an (a, b) pair, as conv and pool parameters are given.
std::optional<std::pair<int64_t, int64_t>> pairOf(const TreeDef &t);
/// The result dtype of a binary op on `a` and `b` (both dtypes known); a
/// weak Python scalar takes the other operand's dtype.
DType promote(const Operand &a, const Operand &b);

/// One element of a small integer tensor as shape inference knows it: an
/// int (any sign), a symbolic dim (SymbolicDim.h: a size only known at run
/// time, never negative), or unknown.
struct SymInt {
  enum Kind : uint8_t { Unknown, Int, Sym } kind = Unknown;
  int64_t v = 0;
};
using SymInts = llvm::SmallVector<SymInt, 8>;

/// The elements of integer tensor node `n` (rank 0 or 1, at most 64
/// elements) as far as its producers determine them: constants, shapes of
/// tensors (GetVarShape), indexing, take/gather, concat/stack, expand_dims,
/// casts, integer arithmetic, equal and where. This is how a reshape or
/// broadcast target computed at run time from other shapes keeps its
/// symbols. nullopt when the value is not derivable; looks at a bounded
/// number of producing exprs (ShapeValue.cpp).
std::optional<SymInts> shapeValue(const Node *n);

/// The expr whose output types are inferred, with what rules read of it.
class ShapeContext {
public:
  /// `name` is what failures name (the op or module type); it refers to a
  /// schema or module type, which outlive the inference. A rule that is not
  /// `symbolic` sees shapes with a symbolic or unknown dim as unknown.
  ShapeContext(const Expr &e, llvm::StringRef name, bool symbolic = true)
      : e_(e), name_(name), symbolic_(symbolic) {}

  const Expr &expr() const { return e_; }

  /// Throws tmg::Error at the expr, naming the op.
  [[noreturn]] void fail(const std::string &msg) const;

  /// One output of shape `s` and dtype `t`.
  Types one(std::optional<Shape> s, std::optional<DType> t) const {
    // Not an initializer list: that would copy the shape once more.
    TensorTypes v;
    v.push_back(TensorType{std::move(s), t});
    return v;
  }

  std::optional<ArgRef> arg(llvm::StringRef name) const {
    return e_.namedArg(name);
  }

  /// A tensor node as an operand (nullopt for other nodes).
  std::optional<Operand> operand(const Node *n) const;
  /// An argument as an operand: a tensor node or a constant Python scalar.
  std::optional<Operand> operand(const std::optional<ArgRef> &a) const;
  /// The receiver or first tensor argument.
  std::optional<Operand> first() const;
  /// Argument `name` when it is a constant (holds no node).
  std::optional<TreeDef> constArg(llvm::StringRef name) const;

  /// The type of the first argument (unary elementwise ops).
  Types same() const;
  /// A broadcasting binary op on (x, y) or (self, value): bool results for
  /// predicates (`toBool`), float ones for true division (`toFloat`).
  Types binary(bool toBool, bool toFloat) const;

  /// `a` in [-rank, rank), made non-negative.
  int64_t normAxis(int64_t a, size_t rank) const;
  /// Output spatial size of a conv or pool (`in` may be symbolic).
  int64_t window(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                 const char *what) const;
  /// Fails with `msg` when dims `a` and `b` are known to differ (two sizes
  /// that are not equal); symbolic or unknown dims are taken to agree.
  void checkDim(int64_t a, int64_t b, const std::string &msg) const {
    if (a >= 0 && b >= 0 && a != b)
      fail(msg);
  }
  /// Tensor operands of a list argument (concat, stack).
  std::optional<std::vector<Operand>> listOperands(llvm::StringRef name) const;

private:
  const Node *firstPositionalNode() const;

  const Expr &e_;
  llvm::StringRef name_;
  bool symbolic_;
};

/// A shape rule: the output types of an expr of op `k`, nullopt when an
/// input type it needs is unknown. A rule is `symbolic` when it handles
/// symbolic and unknown dims (tm/ir/SymbolicDim.h): it keeps equal symbols
/// equal, computes with dim:: arithmetic and never turns an unknown into a
/// wrong size; other rules see such shapes as unknown.
struct ShapeRule {
  using Fn = Types (*)(const ShapeContext &c, OpKind k);
  ShapeRule(Fn f = nullptr, bool sym = false) : fn(f), symbolic(sym) {}
  Fn fn;
  bool symbolic;
};
/// A rule that handles symbolic dims.
inline ShapeRule symbolic(ShapeRule::Fn f) { return ShapeRule(f, true); }
using ShapeRuleTable = OpTable<ShapeRule>;

/// The rules of every builtin op that has one, built once.
const ShapeRuleTable &shapeRuleTable();

void registerElementwiseShapeRules(ShapeRuleTable &t);
void registerActivationShapeRules(ShapeRuleTable &t);
void registerLinalgShapeRules(ShapeRuleTable &t);
void registerConvShapeRules(ShapeRuleTable &t);
void registerPoolShapeRules(ShapeRuleTable &t);
void registerNormShapeRules(ShapeRuleTable &t);
void registerReduceShapeRules(ShapeRuleTable &t);
void registerShapeShapeRules(ShapeRuleTable &t);
void registerIndexShapeRules(ShapeRuleTable &t);
void registerCreationShapeRules(ShapeRuleTable &t);
void registerResizeShapeRules(ShapeRuleTable &t);
void registerQuantShapeRules(ShapeRuleTable &t);
void registerRnnShapeRules(ShapeRuleTable &t);

/// Conv or transposed conv over `spatial` dims (conv.cpp; also the Conv2d
/// and ConvTranspose2d modules).
Types convShape(const ShapeContext &c, const std::optional<Operand> &x,
                const std::optional<Operand> &w, size_t spatial, TreeDef stride,
                TreeDef pad, TreeDef dil, int64_t groups, bool transposed,
                TreeDef outPad = TreeDef::constant(Scalar(0)));
/// 2-d max or average pooling of NCHW `x` (pool.cpp; also the pool modules).
Types poolShape(const ShapeContext &c, const std::optional<Operand> &x,
                TreeDef kernel, TreeDef stride, TreeDef pad);
/// Adaptive pooling of NCHW `x` to the (h, w) or h of `oshp` (pool.cpp;
/// also the AdaptiveAvgPool2d module).
Types adaptivePoolShape(const ShapeContext &c, const std::optional<Operand> &x,
                        const TreeDef &oshp);
/// Axes start..end (inclusive, negatives from the end) merged into one
/// (shape.cpp; also the Flatten module).
Types flattenShape(const ShapeContext &c, const std::optional<Operand> &x,
                   int64_t start, int64_t end);
/// The N-d window ops with ONNX-style paddings: conv_nd, conv_transpose_nd
/// (conv family), max_pool_nd and avg_pool_nd (pool family).
Types windowNdShape(const ShapeContext &c, OpKind k);

} // namespace tmg::shapes
