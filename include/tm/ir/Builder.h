//===- Builder.h - Build graphs expr by expr --------------------*- C++ -*-===//
//
// GraphBuilder creates the graphs of a TracedModule one expr at a time, with
// the reference's naming (auto-named outputs, unique names, qualnames) and
// argument binding: a call is checked against the op schema as Python binds
// it and recorded as written (positional arguments, then keywords sorted by
// name; defaults not filled in: Expr::namedArg binds them). It is what
// tests, importers and passes use; tracing C++ modules builds on it.
//
//   auto tmod = tmg::TracedModule::fromModule(std::move(net));
//   tmg::GraphBuilder b = tmg::GraphBuilder::top(*tmod, {{"x", {3, 4}}});
//   tmg::Node *lin = b.getAttr(b.self(), "linear");
//   tmg::Node *y = b.callModule(lin, {b.arg(0)});
//   b.finish(b.callFunction("relu", {y}));
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include "tm/ir/ShapeInference.h"
#include "tm/ir/TracedModule.h"

namespace tmg {

/// A call argument: a node, a scalar, or a tuple/list/dict/slice of those.
class Arg {
public:
  Arg(Node *n) : kind_(Kind::Node), node_(n) {}
  Arg(Scalar s) : kind_(Kind::Scalar), scalar_(std::move(s)) {}
  Arg(int v) : Arg(Scalar(v)) {}
  Arg(int64_t v) : Arg(Scalar(v)) {}
  Arg(double v) : Arg(Scalar(v)) {}
  Arg(bool v) : Arg(Scalar(v)) {}
  Arg(const char *v) : Arg(Scalar(v)) {}
  Arg(std::string v) : Arg(Scalar(std::move(v))) {}
  static Arg none() { return Arg(Scalar()); }
  static Arg tuple(std::vector<Arg> items);
  static Arg list(std::vector<Arg> items);
  static Arg dict(std::vector<std::pair<Scalar, Arg>> items);
  static Arg slice(Arg start, Arg stop, Arg step);
  /// A tuple of ints: `Arg::ints({1, 3})` -> `(1, 3)`.
  static Arg ints(llvm::ArrayRef<int64_t> v);

  /// Appends this argument's TreeDef and its node leaves.
  TreeDef flatten(std::vector<Node *> &nodes) const;

private:
  enum class Kind : uint8_t { Node, Scalar, Tuple, List, Dict, Slice };
  Arg(Kind k) : kind_(k) {}
  Kind kind_;
  Node *node_ = nullptr;
  Scalar scalar_;
  std::vector<Arg> items_;
  std::vector<Scalar> keys_;
};

/// A keyword argument.
using KwArg = std::pair<std::string, Arg>;

/// A tensor input's name and static type.
struct InputSpec {
  std::string name;
  std::optional<Shape> shape;
  DType dtype = DType::Float32;
  InputSpec(std::string n, std::optional<Shape> s = {}, DType t = DType::Float32)
      : name(std::move(n)), shape(std::move(s)), dtype(t) {}
  InputSpec(const char *n) : name(n) {}
};

/// Type of a call's tensor output (each part when known). When a call is
/// given no types, they are inferred from the op's type rules.
using OutputType = TensorType;

class GraphBuilder {
public:
  /// Starts the top graph of `mod` (named after its class, or its name when
  /// set) for a call with tensor inputs `inputs` (positional). Ids restart
  /// from 0, as `trace_module`.
  static GraphBuilder top(TracedModule &mod, std::vector<InputSpec> inputs);

  /// Starts the top graph of `mod` for a call of signature `argDef`
  /// (`((self, *args), kwargs)`, as `TreeDef` with tensor leaves, constants
  /// and containers): inputs are named after `paramNames` as the reference's
  /// getcallargs (`x`; `x_0`, `x_1` for the leaves of a container; keyword
  /// arguments by their key), typed by `leaves` (one per tensor leaf after
  /// self, in flatten order). Ids restart from 0. The tracer uses it.
  static GraphBuilder top(TracedModule &mod, const TreeDef &argDef,
                          llvm::ArrayRef<std::string> paramNames,
                          llvm::ArrayRef<InputSpec> leaves);

  /// Builds into an existing graph (new exprs go to its insertion point,
  /// by default the end); ids come from the owning module's counters.
  /// Throws tm::Error when the graph has no owning module.
  static GraphBuilder into(InternalGraph &g);

  InternalGraph &graph() const { return *g_; }
  TracedModule &module() const { return *mod_; }
  ModuleNode *self() const { return g_->self(); }
  /// Flattened tensor input `i` (not counting self).
  Node *arg(size_t i) const { return g_->input(i + 1); }

  // -- Exprs --------------------------------------------------------------------
  /// `getattr(base, "a.b")`: resolves the attribute on base's owner to
  /// decide the node kind (throws tmg::Error when it does not exist).
  Node *getAttr(Node *base, llvm::StringRef attr);
  /// `name = Constant(name) -> (Tensor)`.
  Node *constant(Tensor t, llvm::StringRef name = "");
  /// A constant builtin module.
  Node *constant(std::unique_ptr<Module> m, llvm::StringRef name = "");

  /// `fn(args..., kwargs...)`; checked against the schema, recorded as written. `numOutputs`
  /// tensor outputs (a tuple when > 1). Throws on unknown ops or arguments
  /// that do not bind.
  llvm::SmallVector<Node *, 1> callFunctionN(const OpSchema &fn, std::vector<Arg> args,
                                             std::vector<KwArg> kwargs = {},
                                             size_t numOutputs = 1,
                                             std::vector<OutputType> types = {});
  Node *callFunction(const OpSchema &fn, std::vector<Arg> args,
                     std::vector<KwArg> kwargs = {},
                     std::optional<OutputType> type = {});
  Node *callFunction(llvm::StringRef fn, std::vector<Arg> args,
                     std::vector<KwArg> kwargs = {},
                     std::optional<OutputType> type = {});
  /// `self.method(args...)` on a tensor node.
  Node *callMethod(Node *self, llvm::StringRef method, std::vector<Arg> args,
                   std::vector<KwArg> kwargs = {},
                   std::optional<OutputType> type = {});
  /// A method call with no output (`__setitem__` returns the receiver, as
  /// the reference); returns the expr.
  CallMethod *callMethodExpr(Node *self, const OpSchema &method,
                             std::vector<Arg> args, std::vector<KwArg> kwargs,
                             size_t numOutputs, std::vector<OutputType> types);

  /// Body of a traced submodule's graph for a new signature.
  using BodyFn = std::function<void(GraphBuilder &)>;
  /// Calls the module behind `mod`. For a builtin module: one CallMethod
  /// with `numOutputs` outputs. For a TracedModule: the graph for this
  /// signature is reused when it exists, else created and `body` builds it
  /// (inputs named after `paramNames`, flattened containers as name_0,
  /// name_1, ...; keyword arguments by their key). Returns the outputs.
  llvm::SmallVector<Node *, 1> callModuleN(Node *mod, std::vector<Arg> args,
                                           std::vector<KwArg> kwargs = {},
                                           const BodyFn &body = {},
                                           std::vector<std::string> paramNames = {},
                                           size_t numOutputs = 1,
                                           std::vector<OutputType> types = {});
  Node *callModule(Node *mod, std::vector<Arg> args,
                   std::vector<KwArg> kwargs = {}, const BodyFn &body = {},
                   std::vector<std::string> paramNames = {},
                   std::optional<OutputType> type = {});

  /// `outs = OpDef(inputs)`.
  llvm::SmallVector<Node *, 1> apply(const OpSchema &opdef, llvm::ArrayRef<Node *> inputs,
                                     size_t numOutputs = 1, TreeDef attrs = TreeDef::dict({}));

  // -- Finishing ------------------------------------------------------------------
  /// Sets the graph outputs: a single node, or a structure.
  void setOutputs(Arg outputs);
  /// setOutputs, then (for the top graph) compile every graph as the
  /// reference's `build()` does and reset ids.
  void finish(Arg outputs);

  /// Where new exprs go (default: the end of the body).
  void setInsertionPointAfter(Expr *e) { g_->setInsertionPointAfter(e); }

private:
  GraphBuilder(TracedModule &m, InternalGraph &g, bool isTop)
      : mod_(&m), g_(&g), isTop_(isTop) {}
  TreeDef normalize(const OpSchema &schema, std::vector<Arg> &args,
                    std::vector<KwArg> &kwargs, bool isMethod,
                    std::vector<Node *> &nodes);
  /// Adds `n` tensor outputs to `e`, typed by `types` (moved from) when
  /// given.
  void addOutputs(Expr &e, size_t n, llvm::MutableArrayRef<OutputType> types);
  /// Gives `e` `n` outputs typed by `types` or, when empty, by inference;
  /// on a type error, erases `e` (the graph is left as it was) and throws.
  void finishCall(Expr &e, size_t n, std::vector<OutputType> types);

  TracedModule *mod_;
  InternalGraph *g_;
  bool isTop_;
};

} // namespace tmg
