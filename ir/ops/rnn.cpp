//===- rnn.cpp - Shape rules of the recurrent ops -------------------------===//
//
// Output types of the rnn family: lstm, gru and rnn give y (seq, dirs,
// batch, hidden) and y_h (dirs, batch, hidden), lstm also y_c; with layout
// 1 the batch comes first: y (batch, seq, dirs, hidden), y_h (batch, dirs,
// hidden). seq and batch are the input's dims (they may be symbolic), the
// hidden size is hidden_size or the recurrent weight's last dim.
//
//===----------------------------------------------------------------------===//
#include "ShapeRules.h"

namespace tmg::shapes {
namespace {

/// A constant string argument, or `d`.
std::string stringArg(const ShapeContext &c, llvm::StringRef name, const char *d) {
  auto t = c.constArg(name);
  if (!t || !t->isConst() || !t->value().isString())
    return d;
  return t->value().getString();
}

Types recurrent(const ShapeContext &c, OpKind k) {
  auto x = c.operand(c.arg("inp")), w = c.operand(c.arg("weight")),
       r = c.operand(c.arg("recurrent_weight"));
  if (!x)
    return std::nullopt;
  size_t outputs = k == OpKind::Lstm ? 3 : 2;
  auto unknown = [&] {
    TensorTypes out;
    for (size_t i = 0; i < outputs; ++i)
      out.push_back(TensorType{std::nullopt, x->dtype});
    return Types(out);
  };
  std::string direction = stringArg(c, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    c.fail(fmt::format("direction must be 'forward', 'reverse' or 'bidirectional', got '{}'",
                       direction));
  int64_t dirs = direction == "bidirectional" ? 2 : 1;
  auto layoutArg = c.constArg("layout");
  std::optional<int64_t> layout = layoutArg ? intOf(*layoutArg) : std::optional<int64_t>(0);
  if (!layout)
    return unknown();
  if (*layout != 0 && *layout != 1)
    c.fail(fmt::format("layout must be 0 or 1, got {}", *layout));
  int64_t gates = k == OpKind::Lstm ? 4 : k == OpKind::Gru ? 3 : 1;
  int64_t hidden = kUnknownDim;
  if (auto h = c.constArg("hidden_size"); h && !isNoneDef(*h)) {
    auto v = intOf(*h);
    if (!v)
      return unknown();
    if (*v <= 0)
      c.fail(fmt::format("hidden_size must be positive, got {}", *v));
    hidden = *v;
  } else if (r && r->shape && r->shape->size() == 3) {
    hidden = (*r->shape)[2];
  }
  if (r && r->shape) {
    const Shape &rs = *r->shape;
    if (rs.size() != 3)
      c.fail(fmt::format("the recurrent weight {} must be 3-d", dim::dimsStr(rs)));
    c.checkDim(rs[0], dirs,
               fmt::format("the recurrent weight {} does not have {} direction(s)",
                           dim::dimsStr(rs), dirs));
    if (isKnownDim(hidden))
      c.checkDim(rs[1], gates * hidden,
                 fmt::format("the recurrent weight {} does not have {} gates of hidden size {}",
                             dim::dimsStr(rs), gates, hidden));
  }
  if (!x->shape)
    return unknown();
  const Shape &xs = *x->shape;
  if (xs.size() != 3)
    c.fail(fmt::format("the input {} must be 3-d", dim::dimsStr(xs)));
  if (w && w->shape) {
    const Shape &ws = *w->shape;
    if (ws.size() != 3)
      c.fail(fmt::format("the weight {} must be 3-d", dim::dimsStr(ws)));
    c.checkDim(ws[2], xs[2],
               fmt::format("the weight {} does not fit the input {}", dim::dimsStr(ws),
                           dim::dimsStr(xs)));
  }
  bool batchFirst = *layout == 1;
  int64_t seq = batchFirst ? xs[1] : xs[0], batch = batchFirst ? xs[0] : xs[1];
  Shape y = batchFirst ? Shape{batch, seq, dirs, hidden} : Shape{seq, dirs, batch, hidden};
  Shape state = batchFirst ? Shape{batch, dirs, hidden} : Shape{dirs, batch, hidden};
  TensorTypes out;
  out.push_back(TensorType{y, x->dtype});
  for (size_t i = 1; i < outputs; ++i)
    out.push_back(TensorType{state, x->dtype});
  return out;
}

} // namespace

void registerRnnShapeRules(ShapeRuleTable &t) {
  t.add("rnn", {OpKind::Lstm, OpKind::Gru, OpKind::Rnn}, symbolic(recurrent));
}

} // namespace tmg::shapes
