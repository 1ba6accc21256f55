//===- Trace.h - Tracing C++ modules into TracedModules ---------*- C++ -*-===//
//
// The reference's `trace_module`, `wrap`, `register_as_builtin` and
// `insert_exprs`, for modules written in C++ (tm/trace/Layer.h):
//
//   MyModule net;
//   auto tm = tmg::traceModule(net, tmg::Var::meta({3, 4}));
//   fmt::print("{}\n", tm->graph());
//
// Tracing runs `forward` once; every op of tmg::F, every tensor method and
// operator, every module call and attribute access records an expr through
// the GraphBuilder (the same naming, argument normalisation and type
// inference as every other graph producer). Shapes and dtypes come from
// the op schemas, so no kernel needs to run; with `computeValues` and
// concrete inputs the values are computed too (Var::value() works inside
// forward). The tracing state belongs to the calling thread: two threads may
// trace at once; nothing is global except the registries.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <typeindex>
#include <vector>

#include "tm/ir/IR.h"
#include "tm/trace/Functional.h"
#include "tm/trace/Layer.h"
#include "tm/trace/Quant.h"
#include "tm/trace/Var.h"

namespace tmg {

struct TraceOptions {
  /// Run the kernels while tracing when the inputs have values, so that
  /// forward may read them (Var::value()).
  bool computeValues = false;
  /// The reference's expr checker (`enable_expr_checker`); implies
  /// computeValues and needs inputs with values. Each recorded call is
  /// computed eagerly (what forward sees), then interpreted from the
  /// recorded expr on its inputs' values, and the two compared; at the end
  /// the traced module, interpreted from the inputs, is compared with
  /// forward's outputs. A difference beyond the tolerance (elementwise
  /// |got - want| <= checkAtol + checkRtol * |want|) throws tmg::Error
  /// naming the expr (%id), its printed form and the max error.
  bool checkExprs = false;
  double checkRtol = 1e-5;
  double checkAtol = 1e-6;
};

/// Traces `net.forward(args...)` into a new TracedModule (the module tree is
/// copied: parameters share storage with `net`, which is left unchanged).
/// Inputs: Vars holding tensors or `Var::meta(shape)`, plain values,
/// containers, `kw(name, value)`. Throws tmg::Error (with the trace
/// discarded) when forward does something that cannot be traced.
std::unique_ptr<TracedModule> traceModule(Layer &net, CallArgs args,
                                          TraceOptions opts = {});
template <typename... A>
std::unique_ptr<TracedModule> traceModule(Layer &net, A &&...a) {
  CallArgs c;
  (c.add(std::forward<A>(a)), ...);
  return traceModule(net, std::move(c));
}

/// Tracing a TracedModule (the reference's re-trace): its graph for the
/// call's signature is already the trace, so the result is a copy, top, with
/// ids reset. Throws tmg::Error listing its signatures when it has no graph
/// for this call.
std::unique_ptr<TracedModule> traceModule(TracedModule &m, CallArgs args,
                                          TraceOptions opts = {});
template <typename... A>
std::unique_ptr<TracedModule> traceModule(TracedModule &m, A &&...a) {
  CallArgs c;
  (c.add(std::forward<A>(a)), ...);
  return traceModule(m, std::move(c));
}

/// True while this thread traces or edits a graph.
bool isTracing();

/// Makes the C++ class T (a Layer) opaque to tracing: its calls are one
/// CallMethod on a ModuleNode, its module a BuiltinModule of its class name.
/// Exact type, as the reference: subclasses of T are traced.
/// With a factory (default-constructible T), the interpreter can run the
/// recorded calls too: it makes an instance, gives it the traced module's
/// attributes and calls its forward.
void registerAsBuiltin(std::type_index t, std::function<std::unique_ptr<Layer>()> factory = {});
template <typename T> void registerAsBuiltin() {
  if constexpr (std::is_default_constructible_v<T>)
    registerAsBuiltin(std::type_index(typeid(T)), [] { return std::make_unique<T>(); });
  else
    registerAsBuiltin(std::type_index(typeid(T)));
}
bool isRegisteredBuiltin(std::type_index t);
/// True while the tracer runs the forward of a builtin Layer or a wrapped
/// function on placeholder inputs to learn its outputs (observers do not
/// record statistics then).
bool isProbing();

/// A user function registered as a builtin function (the reference's
/// `wrap`): calls are recorded as one CallFunction `module.name(...)` and
/// executed by calling the function (eagerly, while tracing, and by the
/// interpreter).
class WrappedFunction {
public:
  using Impl = std::function<Value(const CallArgs &)>;
  WrappedFunction(const OpSchema &schema, Impl impl);
  const OpSchema &schema() const { return *schema_; }
  template <typename... A> Value operator()(A &&...a) const {
    CallArgs c;
    (c.add(std::forward<A>(a)), ...);
    return call(std::move(c));
  }
  Value call(CallArgs args) const;

private:
  const OpSchema *schema_;
  Impl impl_;
};

namespace detail {
template <typename T> struct CallableTraits : CallableTraits<decltype(&T::operator())> {};
template <typename C, typename R, typename... A>
struct CallableTraits<R (C::*)(A...) const> {
  static constexpr size_t Arity = sizeof...(A);
  using Args = std::tuple<std::decay_t<A>...>;
};
template <typename C, typename R, typename... A>
struct CallableTraits<R (C::*)(A...)> : CallableTraits<R (C::*)(A...) const> {};
template <typename R, typename... A> struct CallableTraits<R (*)(A...)> {
  static constexpr size_t Arity = sizeof...(A);
  using Args = std::tuple<std::decay_t<A>...>;
};
const OpSchema &registerWrapped(llvm::StringRef qualname,
                                const std::vector<std::string> &params);
std::vector<std::optional<Value>> bindParams(const CallArgs &args,
                                             const std::vector<std::string> &params,
                                             llvm::StringRef fn);
} // namespace detail

/// `wrap(fn, "my_func", {"x", "y"})`: `qualname` is "name" (printed
/// `__main__.name`) or "module.name"; `params` name fn's parameters.
template <typename Fn>
WrappedFunction wrap(Fn fn, llvm::StringRef qualname, std::vector<std::string> params) {
  using FT = detail::CallableTraits<Fn>;
  if (params.size() != FT::Arity)
    raise("wrap('{}'): {} parameter names for a function of {} parameters",
          qualname.str(), params.size(), FT::Arity);
  const OpSchema &s = detail::registerWrapped(qualname, params);
  std::string name = s.printName().str();
  return WrappedFunction(s, [fn, params, name](const CallArgs &args) -> Value {
    auto bound = detail::bindParams(args, params, name);
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return detail::toValue(fn(detail::boundArg<std::tuple_element_t<I, typename FT::Args>>(
          bound[I], params[I], name)...));
    }(std::make_index_sequence<FT::Arity>{});
  });
}

/// The reference's `with graph.insert_exprs(after):`. While the scope lives,
/// ops on Vars of `graph`'s nodes (`Var(node)`) and calls through
/// `ModuleRef(moduleNode)` record new exprs in `graph`. On commit they are
/// placed, in order and contiguous, right after `after` (at the start of the
/// body without `after`) but never before the last producer of a node they
/// use (the reference's `_InsertExprs.__exit__`). Names go to the graph's namespace,
/// ids continue from the top module's counters; calls of non-builtin
/// modules (a Layer attached to the module tree with registerModule becomes
/// a TracedModule) produce their graphs.
///
/// `commit()` (or the destructor when no exception is in flight) checks
/// that every node the new exprs use is of `graph` and places them; on
/// failure, or when the scope is left by an exception, the new exprs are
/// removed and the graph is as before. Call replaceNode after the scope
/// (before commit the new exprs may not be at their place yet).
class InsertScope {
public:
  InsertScope(InternalGraph &g, Expr *after = nullptr);
  InsertScope(const InsertScope &) = delete;
  InsertScope &operator=(const InsertScope &) = delete;
  ~InsertScope() noexcept(false);

  /// Places the new exprs and ends the scope; throws tmg::Error (after
  /// rolling back) when they cannot be placed.
  void commit();
  /// Removes the new exprs and ends the scope.
  void rollback();
  /// The exprs recorded so far in the graph (creation order).
  const std::vector<Expr *> &newExprs() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
  int uncaught_;
};

/// `auto scope = tmg::insertExprs(graph, relu);`
inline InsertScope insertExprs(InternalGraph &g, Expr *after = nullptr) {
  return InsertScope(g, after);
}

} // namespace tmg
