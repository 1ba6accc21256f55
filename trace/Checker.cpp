//===- Checker.cpp - The expr checker of tracing --------------------------===//
//
// The reference's checker.py: every expr recorded while tracing is also
// interpreted, on the values its inputs had, and compared with the value
// forward computed eagerly; so is the whole traced module at the end. What
// it catches is a traced call that would not compute what forward saw: a
// builtin Layer whose forward reads state its module attributes do not
// carry, a wrapped function with hidden state, an argument the graph
// records differently from the call.
//
//===----------------------------------------------------------------------===//
#include "State.h"

#include "tm/runtime/Compare.h"
#include "tm/runtime/Eval.h"
#include "tm/runtime/Interpreter.h"

namespace tmg::trace {

namespace {

/// "%4 `scale_out = scale(add_out, )`": the id and the printed expr.
std::string describe(const Expr &e) {
  std::string s = e.str();
  size_t tab = s.find('\t');
  return fmt::format("%{} `{}`", e.id(), tab == std::string::npos ? s : s.substr(tab + 1));
}

[[noreturn]] void mismatch(const State &st, Location loc, const std::string &what,
                           const rt::CompareReport &r) {
  std::string why;
  if (r.shapeMismatch)
    why = fmt::format("shape {} where the eager value is {}", shapeStr(r.gotShape),
                      shapeStr(r.wantShape));
  else if (r.dtypeMismatch)
    why = fmt::format("dtype {} where the eager value is {}", dtypeName(r.gotDType).str(),
                      dtypeName(r.wantDType).str());
  else
    why = fmt::format("max error {:g} (rtol {:g}, atol {:g}; {} of {} elements outside)",
                      r.maxAbs, st.checkRtol, st.checkAtol, r.outside, r.numel);
  Diagnostic d(loc, fmt::format("expr checker: {} differs from the eager value: {}", what, why));
  if (r.worstIndex >= 0)
    d.note(fmt::format("worst element {}: interpreted {:g}, eager {:g}", shapeStr(r.worstCoords),
                       r.worstGot, r.worstWant));
  throw Error(d);
}

} // namespace

void checkValues(State &st, const Expr &e, llvm::ArrayRef<Tensor> got,
                 llvm::ArrayRef<Tensor> want) {
  rt::Tolerance tol{st.checkRtol, st.checkAtol};
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    rt::CompareReport r = rt::compareTensors(got[i], want[i], tol);
    if (!r.ok())
      mismatch(st, Location::atExpr(e.id()),
               fmt::format("{} (output {})", describe(e), i), r);
  }
}

void checkExpr(State &st, const Expr &e) {
  if (!st.checkExprs)
    return;
  std::vector<Tensor> ins, want;
  if (!inputValues(st, e, ins))
    return;
  for (const Node *n : e.outputs()) {
    auto it = st.values.find(n);
    if (it == st.values.end())
      return;
    want.push_back(it->second);
  }
  std::vector<Tensor> got;
  try {
    got = rt::evalExpr(e, ins);
  } catch (const Error &err) {
    Diagnostic d(Location::atExpr(e.id()),
                 fmt::format("expr checker: {} cannot be interpreted", describe(e)));
    d.note(err.diagnostic().str());
    throw Error(d);
  }
  if (got.size() != want.size())
    raiseAt(Location::atExpr(e.id()),
            "expr checker: {} interprets to {} outputs, forward saw {}", describe(e), got.size(),
            want.size());
  checkValues(st, e, got, want);
}

void checkOutputs(State &st, const TracedModule &tm, llvm::ArrayRef<Tensor> inputs,
                  llvm::ArrayRef<Tensor> want) {
  rt::Interpreter interp(tm);
  std::vector<Tensor> got = interp.run(inputs).outputs;
  rt::Tolerance tol{st.checkRtol, st.checkAtol};
  if (got.size() != want.size())
    raise("expr checker: the traced module returns {} tensors, forward returned {}",
          got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    rt::CompareReport r = rt::compareTensors(got[i], want[i], tol);
    if (!r.ok()) {
      const Node *out = tm.graph().outputs()[i];
      mismatch(st, out->expr() ? Location::atExpr(out->expr()->id()) : Location(),
               fmt::format("traced output {} ('{}')", i, out->name()), r);
    }
  }
}

} // namespace tmg::trace
