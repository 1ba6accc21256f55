//===- Lower.cpp - From exprs to kernel calls -----------------------------===//
//
// Each expr becomes a closure with its argument slots and constant
// arguments decoded once, when the plan is built. Python scalars in tensor
// positions become 0-d tensors typed after the other operand (the
// reference's weak scalar typing).
//
//===----------------------------------------------------------------------===//
#include "ElemwiseModule.h"
#include "FusedOps.h"
#include "Plan.h"

#include <cmath>

#include "tm/runtime/Eval.h"
#include "tm/runtime/Extra.h"
#include "tm/runtime/Kernels.h"

namespace tmg::rt {
namespace {

/// A 0-d tensor holding `s`, typed after `like` when given.
Tensor scalarTensor(const Scalar &s, std::optional<DType> like) {
  DType t = s.isFloat() ? DType::Float32 : s.isBool() ? DType::Bool : DType::Int64;
  if (like && !(s.isFloat() && !isFloat(*like)))
    t = *like;
  return Tensor::full({}, s.toDouble(), t);
}

/// The tensor argument `name` of `e` holds the same tensor on every run
/// (a module attribute read by getattr, or a constant), so values derived
/// from it may be cached across runs (checked against its identity).
static bool stableTensorArg(const Expr &e, llvm::StringRef name) {
  auto a = e.namedArg(name);
  Node *n = a ? a->node() : nullptr;
  const Expr *def = n ? n->expr() : nullptr;
  return def && (llvm::isa<GetAttr>(def) || llvm::isa<Constant>(def));
}

class Args {
public:
  Args(const Expr &e, LowerContext &ctx) : e_(e), ctx_(ctx) {}

  [[noreturn]] void fail(const std::string &msg) const {
    raiseAt(Location::atExpr(e_.id()), "{}", msg);
  }

  std::optional<ArgRef> ref(llvm::StringRef name) const { return e_.namedArg(name); }

  /// A tensor argument (node) or a scalar constant typed after `like`.
  Src tensor(llvm::StringRef name, std::optional<DType> like = std::nullopt) const {
    auto a = ref(name);
    if (!a)
      fail(fmt::format("missing argument '{}'", name.str()));
    return tensorOf(*a, like);
  }
  Src tensorOf(const ArgRef &a, std::optional<DType> like = std::nullopt) const {
    Src s;
    if (Node *n = a.node()) {
      if (!llvm::isa<TensorNode>(n))
        fail(fmt::format("argument '{}' must be a tensor", n->str()));
      s.slot = ctx_.slot(n);
      return s;
    }
    if (a.def.isConst() && a.def.value().isNumber()) {
      s.constant = scalarTensor(a.def.value(), like);
      return s;
    }
    fail(fmt::format("expected a tensor or a number, got {}", a.str()));
  }
  /// An optional tensor argument (None -> undefined).
  Src optTensor(llvm::StringRef name) const {
    auto a = ref(name);
    if (!a || (a->def.isConst() && a->def.value().isNone()))
      return Src();
    return tensorOf(*a);
  }
  std::optional<DType> dtypeOf(llvm::StringRef name) const {
    auto a = ref(name);
    if (!a)
      return std::nullopt;
    if (auto *t = llvm::dyn_cast_or_null<TensorNode>(a->node()); t && t->hasDType())
      return t->dtype();
    return std::nullopt;
  }
  TreeDef constant(llvm::StringRef name) const {
    auto a = ref(name);
    if (!a)
      fail(fmt::format("missing argument '{}'", name.str()));
    if (a->def.numLeaves())
      fail(fmt::format("argument '{}' must be a constant, not a tensor", name.str()));
    return a->def;
  }
  bool isNone(llvm::StringRef name) const {
    auto a = ref(name);
    return !a || (a->def.isConst() && a->def.value().isNone());
  }
  static std::vector<int64_t> ints(const TreeDef &t, const Args &self, llvm::StringRef what) {
    if (t.isConst() && t.value().isInt())
      return {t.value().getInt()};
    std::vector<int64_t> out;
    if (t.kind() == TreeDef::Kind::Tuple || t.kind() == TreeDef::Kind::List) {
      for (size_t i = 0; i < t.numChildren(); ++i) {
        const TreeDef &c = t.child(i);
        if (!c.isConst() || !c.value().isInt())
          self.fail(fmt::format("'{}' must be integers, got {}", what.str(), t.str()));
        out.push_back(c.value().getInt());
      }
      return out;
    }
    self.fail(fmt::format("'{}' must be an integer or integers, got {}", what.str(), t.str()));
  }
  std::vector<int64_t> ints(llvm::StringRef name) const {
    return ints(constant(name), *this, name);
  }
  int64_t integer(llvm::StringRef name) const {
    auto v = ints(name);
    if (v.size() != 1)
      fail(fmt::format("'{}' must be one integer", name.str()));
    return v[0];
  }
  Int2 pair(llvm::StringRef name) const { return pairOf(constant(name), name); }
  Int2 pairOf(const TreeDef &t, llvm::StringRef name) const {
    auto v = ints(t, *this, name);
    if (v.size() == 1)
      return Int2(v[0]);
    if (v.size() == 2)
      return Int2(v[0], v[1]);
    fail(fmt::format("'{}' must be an int or a pair", name.str()));
  }
  double number(llvm::StringRef name) const {
    TreeDef t = constant(name);
    if (!t.isConst() || !t.value().isNumber())
      fail(fmt::format("'{}' must be a number, got {}", name.str(), t.str()));
    return t.value().toDouble();
  }
  bool boolean(llvm::StringRef name) const {
    TreeDef t = constant(name);
    if (!t.isConst() || !t.value().isBool())
      fail(fmt::format("'{}' must be True or False, got {}", name.str(), t.str()));
    return t.value().getBool();
  }
  std::string string(llvm::StringRef name) const {
    TreeDef t = constant(name);
    if (!t.isConst() || !t.value().isString())
      fail(fmt::format("'{}' must be a string, got {}", name.str(), t.str()));
    return t.value().getString();
  }
  /// Axes: None -> {}, an int, or a tuple.
  std::vector<int64_t> axes(llvm::StringRef name) const {
    return isNone(name) ? std::vector<int64_t>{} : ints(name);
  }
  /// Tensor slots of a list argument.
  std::vector<Src> list(llvm::StringRef name) const {
    auto a = ref(name);
    if (!a || (a->def.kind() != TreeDef::Kind::List && a->def.kind() != TreeDef::Kind::Tuple))
      fail(fmt::format("'{}' must be a list of tensors", name.str()));
    std::vector<Src> out;
    size_t leaf = a->firstLeaf;
    for (size_t i = 0; i < a->def.numChildren(); ++i) {
      if (!a->def.child(i).isLeaf())
        fail(fmt::format("'{}' must hold tensors only", name.str()));
      Src s;
      s.slot = ctx_.slot(e_.input(leaf++));
      out.push_back(s);
    }
    return out;
  }

private:
  const Expr &e_;
  LowerContext &ctx_;
};

/// The slot of output `i`.
uint32_t outSlot(const Expr &e, LowerContext &ctx, size_t i) {
  return ctx.slot(e.output(i));
}

StepFn unaryStep(Src x, uint32_t out, std::function<Tensor(const Tensor &)> f) {
  return [x, out, f](Value *s, RunState &) { s[out].tensor = f(x.get(s)); };
}

StepFn binaryStep(Src a, Src b, uint32_t out,
                  std::function<Tensor(const Tensor &, const Tensor &)> f) {
  return [a, b, out, f](Value *s, RunState &) { s[out].tensor = f(a.get(s), b.get(s)); };
}

/// MegEngine's softmax default axis: 0 for rank 0, 1 and 3, else 1.
int64_t defaultSoftmaxAxis(size_t rank) {
  return (rank == 0 || rank == 1 || rank == 3) ? 0 : 1;
}

PadMode padMode(const std::string &m, const Args &a) {
  if (m == "constant")
    return PadMode::Constant;
  if (m == "reflect")
    return PadMode::Reflect;
  if (m == "edge" || m == "replicate")
    return PadMode::Edge;
  a.fail(fmt::format("unsupported pad mode '{}'", m));
}

std::vector<IndexItem> indexItems(const TreeDef &idx, const Args &a) {
  std::vector<TreeDef> items;
  if (idx.kind() == TreeDef::Kind::Tuple)
    for (size_t i = 0; i < idx.numChildren(); ++i)
      items.push_back(idx.child(i));
  else
    items.push_back(idx);
  std::vector<IndexItem> out;
  auto opt = [&](const TreeDef &t) -> std::optional<int64_t> {
    if (t.isConst() && t.value().isNone())
      return std::nullopt;
    if (t.isConst() && t.value().isInt())
      return t.value().getInt();
    a.fail(fmt::format("slice bounds must be integers or None, got {}", t.str()));
  };
  for (const TreeDef &t : items) {
    if (t.isConst() && t.value().isInt())
      out.push_back(IndexItem::at(t.value().getInt()));
    else if (t.isConst() && t.value().isNone())
      out.push_back(IndexItem::newAxis());
    else if (t.isConst() && t.value().kind() == Scalar::Kind::Ellipsis)
      out.push_back(IndexItem::ellipsis());
    else if (t.kind() == TreeDef::Kind::Slice) {
      auto step = opt(t.child(2));
      out.push_back(IndexItem::range(opt(t.child(0)), opt(t.child(1)), step.value_or(1)));
    } else
      a.fail(fmt::format("unsupported index {} (tensor indices are not supported)", t.str()));
  }
  return out;
}

StepFn lowerExtraOp(const Expr &e, OpKind k, LowerContext &ctx);

/// The kernel of a function or tensor method.
StepFn lowerOp(const Expr &e, OpKind k, LowerContext &ctx) {
  Args a(e, ctx);
  bool method = llvm::isa<CallMethod>(e);
  auto out = [&](size_t i = 0) { return outSlot(e, ctx, i); };
  // Binary operands: (x, y) for functions, (self, value) for methods.
  auto lhs = [&] { return method ? a.tensor("self") : a.tensor("x", a.dtypeOf("y")); };
  auto rhs = [&] {
    return method ? a.tensor("value", a.dtypeOf("self")) : a.tensor("y", a.dtypeOf("x"));
  };
  auto bin = [&](BinaryOp op, bool swap = false) {
    Src x = lhs().asView(), y = rhs().asView();
    if (swap)
      std::swap(x, y);
    return binaryStep(x, y, out(), [op](const Tensor &p, const Tensor &q) {
      return binary(op, p, q);
    });
  };
  auto cmp = [&](CompareOp op) {
    return binaryStep(lhs().asView(), rhs().asView(), out(), [op](const Tensor &p, const Tensor &q) {
      return compare(op, p, q);
    });
  };
  auto un = [&](UnaryOp op) {
    Src x = method ? a.tensor("self") : a.tensor("x");
    return unaryStep(x, out(), [op](const Tensor &t) { return unary(op, t); });
  };
  auto first = [&]() {
    return method ? a.tensor("self") : a.tensorOf(e.arg(0));
  };
  switch (k) {
  case OpKind::Add: case OpKind::MAdd: case OpKind::MRAdd: case OpKind::MIAdd:
    return bin(BinaryOp::Add, k == OpKind::MRAdd);
  case OpKind::Sub: case OpKind::MSub: case OpKind::MISub:
    return bin(BinaryOp::Sub);
  case OpKind::MRSub: return bin(BinaryOp::Sub, true);
  case OpKind::Mul: case OpKind::MMul: case OpKind::MRMul: case OpKind::MIMul:
    return bin(BinaryOp::Mul, k == OpKind::MRMul);
  case OpKind::Div: case OpKind::MTrueDiv: case OpKind::MITrueDiv:
    return bin(BinaryOp::Div);
  case OpKind::MRTrueDiv: return bin(BinaryOp::Div, true);
  case OpKind::Pow: case OpKind::MPow: return bin(BinaryOp::Pow);
  case OpKind::MRPow: return bin(BinaryOp::Pow, true);
  case OpKind::Maximum: return bin(BinaryOp::Maximum);
  case OpKind::Minimum: return bin(BinaryOp::Minimum);
  case OpKind::Equal: case OpKind::MEq: return cmp(CompareOp::Equal);
  case OpKind::NotEqual: case OpKind::MNe: return cmp(CompareOp::NotEqual);
  case OpKind::Less: case OpKind::MLt: return cmp(CompareOp::Less);
  case OpKind::LessEqual: case OpKind::MLe: return cmp(CompareOp::LessEqual);
  case OpKind::Greater: case OpKind::MGt: return cmp(CompareOp::Greater);
  case OpKind::GreaterEqual: case OpKind::MGe: return cmp(CompareOp::GreaterEqual);
  case OpKind::Neg: case OpKind::MNeg: return un(UnaryOp::Neg);
  case OpKind::Abs: case OpKind::MAbs: return un(UnaryOp::Abs);
  case OpKind::Exp: return un(UnaryOp::Exp);
  case OpKind::Log: return un(UnaryOp::Log);
  case OpKind::Sqrt: return un(UnaryOp::Sqrt);
  case OpKind::Rsqrt: return un(UnaryOp::Rsqrt);
  case OpKind::Erf: return un(UnaryOp::Erf);
  case OpKind::Tanh: return un(UnaryOp::Tanh);
  case OpKind::Sigmoid: return un(UnaryOp::Sigmoid);
  case OpKind::Relu: return un(UnaryOp::Relu);
  case OpKind::Relu6: return un(UnaryOp::Relu6);
  case OpKind::Gelu: return un(UnaryOp::Gelu);
  case OpKind::GeluTanh: return un(UnaryOp::GeluTanh);
  case OpKind::Silu: return un(UnaryOp::Silu);
  case OpKind::Hswish: return un(UnaryOp::Hardswish);
  case OpKind::Hsigmoid: return un(UnaryOp::Hardsigmoid);
  case OpKind::MPos: case OpKind::MDetach: case OpKind::Copy:
    return unaryStep(first().asView(), out(), [](const Tensor &t) { return t; });
  case OpKind::LeakyRelu: {
    double slope = a.number("negative_slope");
    return unaryStep(a.tensor("inp"), out(),
                     [slope](const Tensor &t) { return leakyRelu(t, slope); });
  }
  case OpKind::Clip: {
    std::optional<double> lo, hi;
    if (!a.isNone("lower"))
      lo = a.number("lower");
    if (!a.isNone("upper"))
      hi = a.number("upper");
    return unaryStep(a.tensor("x"), out(), [lo, hi](const Tensor &t) { return clip(t, lo, hi); });
  }
  case OpKind::Where: {
    Src m = a.tensor("mask").asView(), x = a.tensor("x", a.dtypeOf("y")).asView(),
        y = a.tensor("y", a.dtypeOf("x")).asView();
    uint32_t o = out();
    return [m, x, y, o](Value *s, RunState &) { s[o].tensor = where(m.get(s), x.get(s), y.get(s)); };
  }
  case OpKind::Softmax:
  case OpKind::LogSoftmax: {
    Src x = a.tensor("inp");
    std::optional<int64_t> axis;
    if (!a.isNone("axis"))
      axis = a.integer("axis");
    bool lg = k == OpKind::LogSoftmax;
    return unaryStep(x, out(), [axis, lg](const Tensor &t) {
      int64_t ax = axis ? *axis : defaultSoftmaxAxis(t.rank());
      return lg ? logSoftmax(t, ax) : softmax(t, ax);
    });
  }
  case OpKind::Conv2d:
  case OpKind::Conv1d:
  case OpKind::ConvTranspose2d: {
    ConvCall c;
    c.x = a.tensor("inp");
    c.w = a.tensor("weight");
    c.b = a.optTensor("bias");
    c.stableWeight = stableTensorArg(e, "weight");
    if (k == OpKind::Conv1d) {
      c.kind = ConvCall::Kind::Conv1d;
      c.p1.stride = a.integer("stride");
      c.p1.padding = a.integer("padding");
      c.p1.dilation = a.integer("dilation");
      c.p1.groups = a.integer("groups");
    } else if (k == OpKind::Conv2d) {
      if (a.string("conv_mode") != "cross_correlation")
        a.fail("only conv_mode='cross_correlation' is supported");
      c.p2.stride = a.pair("stride");
      c.p2.padding = a.pair("padding");
      c.p2.dilation = a.pair("dilation");
      c.p2.groups = a.integer("groups");
    } else {
      c.kind = ConvCall::Kind::ConvTranspose2d;
      c.pt.stride = a.pair("stride");
      c.pt.padding = a.pair("padding");
      c.pt.outputPadding = a.pair("output_padding");
      c.pt.dilation = a.pair("dilation");
      c.pt.groups = a.integer("groups");
    }
    return convStep(e, c, ctx);
  }
  case OpKind::Conv2dAct:
  case OpKind::LinearAct:
    return lowerFusedOp(e, k, ctx);
  case OpKind::Linear: {
    Src x = a.tensor("inp"), w = a.tensor("weight"), b = a.optTensor("bias");
    uint32_t o = out();
    return [x, w, b, o](Value *s, RunState &) {
      s[o].tensor = linear(x.get(s), w.get(s), b.defined() ? b.get(s) : Tensor());
    };
  }
  case OpKind::Matmul:
  case OpKind::MMatmul: {
    bool ta = !method && a.boolean("transpose_a"), tb = !method && a.boolean("transpose_b");
    Src x = method ? a.tensor("self") : a.tensor("inp1");
    Src y = method ? a.tensor("value") : a.tensor("inp2");
    return binaryStep(x, y, out(), [ta, tb](const Tensor &p, const Tensor &q) {
      return matmul(p, q, ta, tb);
    });
  }
  case OpKind::MaxPool2d:
  case OpKind::AvgPool2d: {
    Pool2dParams p;
    p.kernel = a.pair("kernel_size");
    if (!a.isNone("stride"))
      p.stride = a.pair("stride");
    p.padding = a.pair("padding");
    bool avg = k == OpKind::AvgPool2d;
    if (avg) {
      std::string mode = a.string("mode");
      if (mode != "average" && mode != "average_count_exclude_padding")
        a.fail(fmt::format("unsupported avg_pool2d mode '{}'", mode));
      p.countIncludePad = mode == "average";
    }
    return unaryStep(a.tensor("inp"), out(), [p, avg](const Tensor &t) {
      return avg ? avgPool2d(t, p) : maxPool2d(t, p);
    });
  }
  case OpKind::AdaptiveAvgPool2d:
  case OpKind::AdaptiveMaxPool2d: {
    Int2 o2 = a.pair("oshp");
    bool avg = k == OpKind::AdaptiveAvgPool2d;
    return unaryStep(a.tensor("inp"), out(), [o2, avg](const Tensor &t) {
      return avg ? adaptiveAvgPool2d(t, o2) : adaptiveMaxPool2d(t, o2);
    });
  }
  case OpKind::BatchNorm: {
    if (a.boolean("training"))
      a.fail("batch_norm with training=True is not supported by the inference "
             "runtime");
    Src x = a.tensor("inp"), m = a.optTensor("running_mean"), v = a.optTensor("running_var"),
        w = a.optTensor("weight"), b = a.optTensor("bias");
    if (!m.defined() || !v.defined())
      a.fail("batch_norm needs running_mean and running_var at inference");
    double eps = a.number("eps");
    uint32_t o = out();
    return [x, m, v, w, b, eps, o](Value *s, RunState &) {
      s[o].tensor = batchNorm(x.get(s), m.get(s), v.get(s), w.defined() ? w.get(s) : Tensor(),
                              b.defined() ? b.get(s) : Tensor(), eps);
    };
  }
  case OpKind::LayerNorm: {
    std::vector<int64_t> shape = a.ints("normalized_shape");
    bool affine = a.boolean("affine");
    Src x = a.tensor("inp"), w = a.optTensor("weight"), b = a.optTensor("bias");
    double eps = a.number("eps");
    uint32_t o = out();
    return [x, w, b, shape, affine, eps, o](Value *s, RunState &) {
      s[o].tensor = layerNorm(x.get(s), shape, affine && w.defined() ? w.get(s) : Tensor(),
                              affine && b.defined() ? b.get(s) : Tensor(), eps);
    };
  }
  case OpKind::Dropout:
    // Inference: dropout is the identity.
    return unaryStep(a.tensor("inp").asView(), out(), [](const Tensor &t) { return t; });
  case OpKind::FakeQuantize: {
    Src x = a.tensor("inp"), sc = a.tensor("scale"), zp = a.tensor("zero_point");
    int64_t qmin = a.integer("qmin"), qmax = a.integer("qmax");
    std::optional<int64_t> axis;
    if (!a.isNone("axis"))
      axis = a.integer("axis");
    uint32_t o = out();
    return [x, sc, zp, qmin, qmax, axis, o](Value *s, RunState &) {
      const Tensor &scale = sc.get(s), &zero = zp.get(s);
      if (axis)
        s[o].tensor = fakeQuantizePerChannel(x.get(s), scale, zero, *axis, qmin, qmax);
      else
        s[o].tensor = fakeQuantize(x.get(s), float(scale.at(0)), int64_t(zero.at(0)),
                                   qmin, qmax);
    };
  }
  case OpKind::Embedding: {
    Src x = a.tensor("inp"), w = a.tensor("weight");
    return binaryStep(x, w, out(), [](const Tensor &idx, const Tensor &wt) {
      return take(wt, idx, 0);
    });
  }
  case OpKind::Pad: {
    std::vector<std::pair<int64_t, int64_t>> pw;
    TreeDef t = a.constant("pad_width");
    for (size_t i = 0; i < t.numChildren(); ++i) {
      auto v = Args::ints(t.child(i), a, "pad_width");
      if (v.size() != 2)
        a.fail("pad_width needs (before, after) pairs");
      pw.emplace_back(v[0], v[1]);
    }
    PadMode mode = padMode(a.string("mode"), a);
    double value = a.number("constant_value");
    return unaryStep(a.tensor("src"), out(), [pw, mode, value](const Tensor &x) {
      return pad(x, pw, mode, value);
    });
  }
  case OpKind::Interpolate: {
    std::string mode = a.string("mode");
    ResizeMode rm = mode == "nearest" ? ResizeMode::Nearest
                    : (mode == "bilinear" || mode == "linear") ? ResizeMode::Bilinear
                                                               : ResizeMode::Nearest;
    if (mode != "nearest" && mode != "bilinear" && mode != "linear")
      a.fail(fmt::format("unsupported interpolate mode '{}'", mode));
    bool align = !a.isNone("align_corners") && a.boolean("align_corners");
    if (!a.isNone("size")) {
      Int2 size = a.pair("size");
      return unaryStep(a.tensor("inp"), out(), [size, rm, align](const Tensor &x) {
        return resize(x, size, rm, align);
      });
    }
    TreeDef f = a.constant("scale_factor");
    double fh, fw;
    if (f.isConst() && f.value().isNumber()) {
      fh = fw = f.value().toDouble();
    } else if (f.numChildren() == 2 && f.child(0).isConst() && f.child(1).isConst()) {
      fh = f.child(0).value().toDouble();
      fw = f.child(1).value().toDouble();
    } else {
      a.fail("interpolate needs size or scale_factor");
    }
    return unaryStep(a.tensor("inp"), out(), [fh, fw, rm, align](const Tensor &x) {
      return upsample(x, fh, fw, rm, align);
    });
  }
  case OpKind::Sum: case OpKind::Mean: case OpKind::Max: case OpKind::Min:
  case OpKind::Prod: case OpKind::MSum: case OpKind::MMean: case OpKind::MMax:
  case OpKind::MMin: case OpKind::MProd: {
    ReduceOp op = (k == OpKind::Sum || k == OpKind::MSum)     ? ReduceOp::Sum
                  : (k == OpKind::Mean || k == OpKind::MMean) ? ReduceOp::Mean
                  : (k == OpKind::Max || k == OpKind::MMax)   ? ReduceOp::Max
                  : (k == OpKind::Min || k == OpKind::MMin)   ? ReduceOp::Min
                                                              : ReduceOp::Prod;
    std::vector<int64_t> axes = a.axes("axis");
    bool keep = a.boolean("keepdims");
    return unaryStep(first(), out(), [op, axes, keep](const Tensor &x) {
      return reduce(op, x, axes, keep);
    });
  }
  case OpKind::Argmax:
  case OpKind::Argmin: {
    std::vector<int64_t> axes = a.axes("axis");
    bool keep = a.boolean("keepdims"), mx = k == OpKind::Argmax;
    return unaryStep(a.tensor("inp"), out(), [axes, keep, mx](const Tensor &x) {
      return mx ? argmax(x, axes, keep) : argmin(x, axes, keep);
    });
  }
  case OpKind::Reshape: {
    std::vector<int64_t> shape = a.ints("target_shape");
    return unaryStep(a.tensor("inp").asView(), out(), [shape](const Tensor &x) { return reshape(x, shape); });
  }
  case OpKind::MReshape: {
    std::vector<int64_t> shape;
    for (size_t i = 1; i < e.numArgs(); ++i) {
      auto v = Args::ints(e.arg(i).def, a, "shape");
      shape.insert(shape.end(), v.begin(), v.end());
    }
    return unaryStep(a.tensor("self").asView(), out(), [shape](const Tensor &x) { return reshape(x, shape); });
  }
  case OpKind::Flatten: {
    int64_t s0 = a.integer("start_axis"), s1 = a.integer("end_axis");
    return unaryStep(a.tensor("inp").asView(), out(), [s0, s1](const Tensor &x) { return flatten(x, s0, s1); });
  }
  case OpKind::MFlatten:
    return unaryStep(a.tensor("self").asView(), out(), [](const Tensor &x) { return flatten(x, 0, -1); });
  case OpKind::Transpose: {
    std::vector<int64_t> perm = a.ints("pattern");
    return unaryStep(a.tensor("inp").asView(), out(), [perm](const Tensor &x) { return transpose(x, perm); });
  }
  case OpKind::MTranspose: {
    std::vector<int64_t> perm;
    for (size_t i = 1; i < e.numArgs(); ++i) {
      auto v = Args::ints(e.arg(i).def, a, "pattern");
      perm.insert(perm.end(), v.begin(), v.end());
    }
    return unaryStep(a.tensor("self").asView(), out(), [perm](const Tensor &x) { return transpose(x, perm); });
  }
  case OpKind::BroadcastTo: {
    std::vector<int64_t> shape = a.ints("shape");
    return unaryStep(a.tensor("inp").asView(), out(), [shape](const Tensor &x) { return broadcastTo(x, shape); });
  }
  case OpKind::Concat:
  case OpKind::Stack: {
    std::vector<Src> xs = a.list("inps");
    int64_t axis = a.integer("axis");
    bool st = k == OpKind::Stack;
    uint32_t o = out();
    return [xs, axis, st, o](Value *s, RunState &) {
      std::vector<Tensor> ts;
      ts.reserve(xs.size());
      for (const Src &x : xs)
        ts.push_back(x.get(s));
      s[o].tensor = st ? stack(ts, axis) : concat(ts, axis);
    };
  }
  case OpKind::Split: {
    TreeDef ns = a.constant("nsplits_or_sections");
    int64_t axis = a.integer("axis");
    Src x = a.tensor("inp");
    std::vector<uint32_t> outs;
    for (size_t i = 0; i < e.numOutputs(); ++i)
      outs.push_back(out(i));
    bool equal = ns.isConst();
    std::vector<int64_t> v = Args::ints(ns, a, "nsplits_or_sections");
    return [x, outs, equal, v, axis](Value *s, RunState &) {
      std::vector<Tensor> parts = equal ? split(x.get(s), v[0], axis) : splitAt(x.get(s), v, axis);
      if (parts.size() != outs.size())
        raise("split produced {} parts for {} outputs", parts.size(), outs.size());
      for (size_t i = 0; i < outs.size(); ++i)
        s[outs[i]].tensor = std::move(parts[i]);
    };
  }
  case OpKind::Squeeze: {
    std::vector<int64_t> axes = a.axes("axis");
    return unaryStep(a.tensor("inp").asView(), out(), [axes](const Tensor &x) { return squeeze(x, axes); });
  }
  case OpKind::ExpandDims: {
    std::vector<int64_t> axes = a.ints("axis");
    return unaryStep(a.tensor("inp").asView(), out(), [axes](const Tensor &x) { return expandDims(x, axes); });
  }
  case OpKind::Gather: {
    int64_t axis = a.integer("axis");
    return binaryStep(a.tensor("inp"), a.tensor("index"), out(),
                      [axis](const Tensor &x, const Tensor &i) { return gather(x, axis, i); });
  }
  case OpKind::Zeros: case OpKind::Ones: case OpKind::Full: {
    std::vector<int64_t> shape = a.ints("shape");
    auto dt = parseDType(a.string("dtype"));
    if (!dt)
      a.fail(fmt::format("unknown dtype '{}'", a.string("dtype")));
    double v = k == OpKind::Zeros ? 0.0 : k == OpKind::Ones ? 1.0 : a.number("value");
    Tensor t = full(shape, v, *dt);
    uint32_t o = out();
    return [t, o](Value *s, RunState &) { s[o].tensor = t; };
  }
  case OpKind::Arange: {
    double start = a.number("start"), step = a.number("step"), stop;
    if (a.isNone("stop")) {
      stop = start;
      start = 0;
    } else {
      stop = a.number("stop");
    }
    auto dt = parseDType(a.string("dtype"));
    if (!dt)
      a.fail(fmt::format("unknown dtype '{}'", a.string("dtype")));
    Tensor t = arange(start, stop, step, *dt);
    uint32_t o = out();
    return [t, o](Value *s, RunState &) { s[o].tensor = t; };
  }
  case OpKind::MAstype: {
    auto dt = parseDType(a.string("dtype"));
    if (!dt)
      a.fail(fmt::format("unknown dtype '{}'", a.string("dtype")));
    DType to = *dt;
    return unaryStep(a.tensor("self").asView(), out(), [to](const Tensor &x) { return cast(x, to); });
  }
  case OpKind::MGetItem: {
    std::vector<IndexItem> items = indexItems(a.constant("index"), a);
    return unaryStep(a.tensor("self").asView(), out(), [items](const Tensor &x) { return getitem(x, items); });
  }
  // ---- ONNX block (issue 9): kernels of runtime/Extra.cpp ----
  case OpKind::Floor: case OpKind::Ceil: case OpKind::Round: case OpKind::Sin:
  case OpKind::Cos: case OpKind::Sign: case OpKind::Reciprocal: case OpKind::Tan:
  case OpKind::Asin: case OpKind::Acos: case OpKind::Atan: case OpKind::Sinh:
  case OpKind::Cosh: case OpKind::Asinh: case OpKind::Acosh: case OpKind::Atanh:
  case OpKind::Softsign: case OpKind::Softplus:
    return lowerExtraOp(e, k, ctx);
  case OpKind::Elu: case OpKind::Selu: case OpKind::Celu: case OpKind::HardSigmoid:
  case OpKind::ThresholdedRelu: case OpKind::Prelu: case OpKind::LogicalAnd:
  case OpKind::LogicalOr: case OpKind::LogicalXor: case OpKind::LogicalNot:
  case OpKind::IsNan: case OpKind::IsInf: case OpKind::Mod: case OpKind::Fmod:
  case OpKind::Take: case OpKind::ConvNd: case OpKind::ConvTransposeNd:
  case OpKind::MaxPoolNd: case OpKind::AvgPoolNd: case OpKind::ResizeNd:
  case OpKind::Cumsum: case OpKind::Scatter: case OpKind::ScatterNd:
    return lowerExtraOp(e, k, ctx);
  default:
    a.fail(fmt::format("the runtime does not implement '{}'",
                       llvm::isa<CallFunction>(e) ? llvm::cast<CallFunction>(e).func().printName().str()
                                                  : llvm::cast<CallMethod>(e).method().str()));
  }
}

// Lowering of the ops added for ONNX import (kernels in Extra.cpp).
#include "LowerExtra.inc"

/// The step of a builtin class registered at run time: its kernel gets the
/// inputs.
static StepFn moduleKernelStep(const Expr &e, const Module &m, ModuleKernel k,
                               LowerContext &ctx) {
  ctx.readsModule(&m);
  std::vector<uint32_t> ins, outs;
  for (size_t i = 1; i < e.numInputs(); ++i)
    ins.push_back(ctx.slot(e.input(i)));
  for (size_t i = 0; i < e.numOutputs(); ++i)
    outs.push_back(ctx.slot(e.output(i)));
  const Expr *ep = &e;
  const Module *mp = &m;
  return [k, ins, outs, ep, mp](Value *s, RunState &) {
    std::vector<Tensor> args;
    for (uint32_t a : ins)
      args.push_back(s[a].tensor);
    std::vector<Tensor> res = k(*mp, *ep, args);
    if (res.size() != outs.size())
      raiseAt(Location::atExpr(ep->id()), "{} returned {} tensors for {} outputs",
              mp->typeName().str(), res.size(), outs.size());
    for (size_t i = 0; i < outs.size(); ++i)
      s[outs[i]].tensor = std::move(res[i]);
  };
}

/// A call of a builtin module: its attributes are read once, its tensors
/// through pointers that stay valid while the module's version holds.
StepFn lowerBuiltinCall(const Expr &e, const Module &m, LowerContext &ctx) {
  if (ModuleKernel k = lookupModuleKernel(m.type()))
    return moduleKernelStep(e, m, k, ctx);
  if (llvm::isa<Elemwise>(&m))
    return lowerElemwiseModule(e, m, ctx);
  if (e.numArgs() != 2 || e.numOutputs() != 1)
    raiseAt(Location::atExpr(e.id()), "{} takes one tensor argument and returns one tensor",
            m.typeName().str());
  ctx.readsModule(&m);
  Node *in = e.arg(1).node();
  if (!in || !llvm::isa<TensorNode>(in))
    raiseAt(Location::atExpr(e.id()), "{} needs a tensor argument", m.typeName().str());
  uint32_t x = ctx.slot(in), o = ctx.slot(e.output(0));
  auto tensorAttr = [&](const char *n) { return m.tensor(n); };
  // Modules from files are verified on loading (ModuleCheck.h); these
  // checks keep a module edited in memory from being dereferenced blindly.
  auto requiredTensor = [&](const char *n) {
    const Tensor *t = m.tensor(n);
    if (!t || !t->defined())
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' parameter", m.typeName().str(), n);
    return t;
  };
  auto valueAttr = [&](const char *n) -> const TreeDef & {
    const TreeDef *v = m.value(n);
    if (!v)
      raiseAt(Location::atExpr(e.id()), "{} has no '{}' attribute", m.typeName().str(), n);
    return *v;
  };
  auto pairAttr = [&](const char *n) { return Args(e, ctx).pairOf(valueAttr(n), n); };
  Src xs;
  xs.slot = x;
  auto fn = [&](std::function<Tensor(const Tensor &)> f) -> StepFn {
    return [xs, o, f](Value *s, RunState &) { s[o].tensor = f(xs.get(s)); };
  };
  auto tensorOr = [](const Tensor *t) { return t ? *t : Tensor(); };
  if (llvm::isa<Conv2d>(&m) || llvm::isa<ConvTranspose2d>(&m)) {
    ConvCall c;
    c.x.slot = x;
    c.w.attr = tensorAttr("weight");
    c.b.attr = tensorAttr("bias");
    if (!c.w.attr)
      raiseAt(Location::atExpr(e.id()), "{} has no weight", m.typeName().str());
    if (llvm::isa<Conv2d>(&m)) {
      if (m.scalar("padding_mode").getString() != "zeros")
        raiseAt(Location::atExpr(e.id()), "Conv2d padding_mode '{}' is not supported",
                m.scalar("padding_mode").getString());
      c.p2.stride = pairAttr("stride");
      c.p2.padding = pairAttr("padding");
      c.p2.dilation = pairAttr("dilation");
      c.p2.groups = m.intValue("groups");
    } else {
      c.kind = ConvCall::Kind::ConvTranspose2d;
      c.pt.stride = pairAttr("stride");
      c.pt.padding = pairAttr("padding");
      c.pt.outputPadding = pairAttr("output_padding");
      c.pt.dilation = pairAttr("dilation");
      c.pt.groups = m.intValue("groups");
    }
    return convStep(e, c, ctx);
  }
  if (llvm::isa<Linear>(&m)) {
    const Tensor *w = requiredTensor("weight"), *b = tensorAttr("bias");
    return fn([w, b, tensorOr](const Tensor &t) { return linear(t, *w, tensorOr(b)); });
  }
  if (llvm::isa<BatchNorm2d>(&m)) {
    const Tensor *mean = tensorAttr("running_mean"), *var = tensorAttr("running_var"),
                 *w = tensorAttr("weight"), *b = tensorAttr("bias");
    if (!mean || !var)
      raiseAt(Location::atExpr(e.id()), "BatchNorm2d without running statistics cannot run "
                                        "at inference");
    double eps = m.floatValue("eps");
    return fn([mean, var, w, b, eps, tensorOr](const Tensor &t) {
      return batchNorm(t, *mean, *var, tensorOr(w), tensorOr(b), eps);
    });
  }
  if (llvm::isa<LayerNorm>(&m)) {
    auto shape = Args::ints(valueAttr("normalized_shape"), Args(e, ctx), "normalized_shape");
    const Tensor *w = tensorAttr("weight"), *b = tensorAttr("bias");
    double eps = m.floatValue("eps");
    return fn([shape, w, b, eps, tensorOr](const Tensor &t) {
      return layerNorm(t, shape, tensorOr(w), tensorOr(b), eps);
    });
  }
  if (llvm::isa<MaxPool2d>(&m) || llvm::isa<AvgPool2d>(&m)) {
    Pool2dParams p;
    p.kernel = pairAttr("kernel_size");
    p.stride = pairAttr("stride");
    p.padding = pairAttr("padding");
    bool avg = llvm::isa<AvgPool2d>(&m);
    if (avg)
      p.countIncludePad = m.scalar("mode").getString() == "average";
    return fn([p, avg](const Tensor &t) { return avg ? avgPool2d(t, p) : maxPool2d(t, p); });
  }
  if (llvm::isa<AdaptiveAvgPool2d>(&m)) {
    Int2 o2 = pairAttr("oshp");
    return fn([o2](const Tensor &t) { return adaptiveAvgPool2d(t, o2); });
  }
  if (llvm::isa<Flatten>(&m)) {
    int64_t s0 = m.intValue("start_axis"), s1 = m.intValue("end_axis");
    return fn([s0, s1](const Tensor &t) { return flatten(t, s0, s1); });
  }
  if (llvm::isa<Embedding>(&m)) {
    const Tensor *w = requiredTensor("weight");
    return fn([w](const Tensor &t) { return take(*w, t, 0); });
  }
  if (llvm::isa<Softmax>(&m)) {
    const Scalar &ax = m.scalar("axis");
    std::optional<int64_t> axis;
    if (ax.isInt())
      axis = ax.getInt();
    return fn([axis](const Tensor &t) {
      return softmax(t, axis ? *axis : defaultSoftmaxAxis(t.rank()));
    });
  }
  if (llvm::isa<ReLU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Relu, t); });
  if (llvm::isa<ReLU6>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Relu6, t); });
  if (llvm::isa<GELU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Gelu, t); });
  if (llvm::isa<Sigmoid>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Sigmoid, t); });
  if (llvm::isa<SiLU>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Silu, t); });
  if (llvm::isa<Hardswish>(&m))
    return fn([](const Tensor &t) { return unary(UnaryOp::Hardswish, t); });
  if (llvm::isa<Identity>(&m) || llvm::isa<Dropout>(&m))
    return fn([](const Tensor &t) { return t; });
  raiseAt(Location::atExpr(e.id()), "the runtime does not implement module '{}'",
          m.typeName().str());
}

/// The step of `e` on its own, unfused.
StepFn lowerSingle(const Expr &e, LowerContext &ctx) {
  switch (e.kind()) {
  case Expr::Kind::Input:
    raiseAt(Location::atExpr(e.id()), "Input exprs are not steps");
  case Expr::Kind::GetAttr: {
    auto &ga = llvm::cast<GetAttr>(e);
    auto *base = llvm::dyn_cast<ModuleNode>(e.input(0));
    Module *owner = base ? base->owner() : nullptr;
    if (!owner)
      raiseAt(Location::atExpr(e.id()), "getattr base '{}' has no module",
              e.input(0)->str());
    uint32_t o = ctx.slot(e.output(0));
    if (llvm::isa<ModuleNode>(e.output(0))) {
      Module *m = owner->resolveModule(ga.attrName());
      if (!m)
        raiseAt(Location::atExpr(e.id()), "module '{}' has no submodule '{}'",
                owner->typeName().str(), ga.attrName());
      // Every module on the path: a removed or replaced attribute invalidates.
      for (Module *p = m; p && p != owner; p = p->parent())
        ctx.readsModule(p->parent());
      return [m, o](Value *s, RunState &) { s[o].module = m; };
    }
    const Tensor *t = owner->resolveTensor(ga.attrName());
    if (!t)
      raiseAt(Location::atExpr(e.id()), "module '{}' has no tensor '{}'",
              owner->typeName().str(), ga.attrName());
    Module *holder = owner->resolveModule(
        llvm::StringRef(ga.attrName()).contains('.') ? llvm::StringRef(ga.attrName()).rsplit('.').first
                                                     : llvm::StringRef());
    for (Module *p = holder; p; p = p == owner ? nullptr : p->parent())
      ctx.readsModule(p);
    return [t, o](Value *s, RunState &) { s[o].tensor = *t; };
  }
  case Expr::Kind::Constant: {
    auto &c = llvm::cast<Constant>(e);
    uint32_t o = ctx.slot(e.output(0));
    if (c.isTensor()) {
      Tensor t = c.tensor();
      return [t, o](Value *s, RunState &) { s[o].tensor = t; };
    }
    Module *m = c.module();
    return [m, o](Value *s, RunState &) { s[o].module = m; };
  }
  case Expr::Kind::Apply: {
    auto &ap = llvm::cast<Apply>(e);
    if (ap.opdef().kind() == OpKind::GetVarShape && e.numInputs() == 1 && e.numOutputs() == 1) {
      uint32_t x = ctx.slot(e.input(0)), o = ctx.slot(e.output(0));
      return [x, o](Value *s, RunState &) {
        const Tensor &t = s[x].tensor;
        std::vector<int64_t> dims(t.shape().begin(), t.shape().end());
        s[o].tensor = Tensor::fromInts({int64_t(dims.size())}, dims, DType::Int32);
      };
    }
    raiseAt(Location::atExpr(e.id()), "the runtime does not implement op def '{}'",
            ap.opdef().name().str());
  }
  case Expr::Kind::CallFunction: {
    const OpSchema &fn = llvm::cast<CallFunction>(e).func();
    if (fn.kind() == OpKind::Custom)
      if (FunctionKernel k = lookupFunctionKernel(fn)) {
        // A user function (tmg::wrap): its kernel gets every input tensor.
        std::vector<uint32_t> ins, outs;
        for (size_t i = 0; i < e.numInputs(); ++i)
          ins.push_back(ctx.slot(e.input(i)));
        for (size_t i = 0; i < e.numOutputs(); ++i)
          outs.push_back(ctx.slot(e.output(i)));
        const Expr *ep = &e;
        return [k, ins, outs, ep](Value *s, RunState &) {
          std::vector<Tensor> args;
          for (uint32_t a : ins)
            args.push_back(s[a].tensor);
          std::vector<Tensor> res = k(*ep, args);
          if (res.size() != outs.size())
            raiseAt(Location::atExpr(ep->id()), "{} returned {} tensors for {} outputs",
                    llvm::cast<CallFunction>(ep)->func().printName().str(), res.size(),
                    outs.size());
          for (size_t i = 0; i < outs.size(); ++i)
            s[outs[i]].tensor = std::move(res[i]);
        };
      }
    return lowerOp(e, fn.kind(), ctx);
  }
  case Expr::Kind::CallMethod: {
    auto &cm = llvm::cast<CallMethod>(e);
    if (!cm.isModuleCall())
      return lowerOp(e, cm.methodSchema()->kind(), ctx);
    ModuleNode *mn = cm.moduleNode();
    Module *m = mn ? mn->owner() : nullptr;
    if (!m)
      raiseAt(Location::atExpr(e.id()), "module call on '{}' without a module",
              e.input(0)->str());
    if (m->isBuiltin())
      return lowerBuiltinCall(e, *m, ctx);
    InternalGraph *callee = cm.calleeGraph();
    if (!callee)
      raiseAt(Location::atExpr(e.id()), "'{}' has no graph for this call's signature",
              mn->str());
    std::shared_ptr<const ExecutionPlan> plan = ctx.interp.planFor(*callee);
    ctx.plan.callees.push_back(plan);
    std::vector<uint32_t> args, outs;
    for (size_t i = 0; i < e.numInputs(); ++i)
      args.push_back(ctx.slot(e.input(i)));
    for (size_t i = 0; i < e.numOutputs(); ++i)
      outs.push_back(ctx.slot(e.output(i)));
    const ExecutionPlan *raw = plan.get();
    return [raw, args, outs](Value *s, RunState &st) {
      std::vector<Value> in;
      in.reserve(args.size());
      for (uint32_t a : args)
        in.push_back(s[a]);
      std::vector<Value> res = execute(*raw, in, st);
      for (size_t i = 0; i < outs.size(); ++i)
        s[outs[i]] = std::move(res[i]);
    };
  }
  }
  raiseAt(Location::atExpr(e.id()), "unknown expr kind");
}

} // namespace

StepFn lowerExpr(const Expr &e, LowerContext &ctx) {
  StepFn single = lowerSingle(e, ctx);
  auto it = ctx.absorbed.find(&e);
  if (it == ctx.absorbed.end())
    return single;
  // Absorbed into a fused chain: the value already is in the input slot.
  uint32_t in = it->second, o = ctx.slot(e.output(0));
  return [single, in, o](Value *s, RunState &st) {
    if (st.observable)
      single(s, st);
    else
      s[o].tensor = s[in].tensor;
  };
}

} // namespace tmg::rt
