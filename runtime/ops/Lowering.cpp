//===- Lowering.cpp - The argument decoder of the family lowerings --------===//
//
// Args reads a call's named arguments (tensor slots, Python scalars, ints,
// pairs, strings) once, when the plan is built, and reports a malformed
// argument at the expr; the N-d window helpers serve the conv and pool
// families.
//
//===----------------------------------------------------------------------===//
#include "Lowering.h"

namespace tmg::rt {

Tensor scalarTensor(const Scalar &s, std::optional<DType> like) {
  DType t = s.isFloat() ? DType::Float32 : s.isBool() ? DType::Bool : DType::Int64;
  if (like && !(s.isFloat() && !isFloat(*like)))
    t = *like;
  return Tensor::full({}, s.toDouble(), t);
}

bool stableTensorArg(const Expr &e, llvm::StringRef name) {
  auto a = e.namedArg(name);
  Node *n = a ? a->node() : nullptr;
  const Expr *def = n ? n->expr() : nullptr;
  return def && (llvm::isa<GetAttr>(def) || llvm::isa<Constant>(def));
}

void Args::fail(const std::string &msg) const {
  raiseAt(Location::atExpr(e_.id()), "{}", msg);
}

Src Args::tensor(llvm::StringRef name, std::optional<DType> like) const {
  auto a = ref(name);
  if (!a)
    fail(fmt::format("missing argument '{}'", name.str()));
  return tensorOf(*a, like);
}

Src Args::tensorOf(const ArgRef &a, std::optional<DType> like) const {
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

Src Args::optTensor(llvm::StringRef name) const {
  auto a = ref(name);
  if (!a || (a->def.isConst() && a->def.value().isNone()))
    return Src();
  return tensorOf(*a);
}

std::optional<DType> Args::dtypeOf(llvm::StringRef name) const {
  auto a = ref(name);
  if (!a)
    return std::nullopt;
  if (auto *t = llvm::dyn_cast_or_null<TensorNode>(a->node()); t && t->hasDType())
    return t->dtype();
  return std::nullopt;
}

TreeDef Args::constant(llvm::StringRef name) const {
  auto a = ref(name);
  if (!a)
    fail(fmt::format("missing argument '{}'", name.str()));
  if (a->def.numLeaves())
    fail(fmt::format("argument '{}' must be a constant, not a tensor", name.str()));
  return a->def;
}

bool Args::isNone(llvm::StringRef name) const {
  auto a = ref(name);
  return !a || (a->def.isConst() && a->def.value().isNone());
}

std::vector<int64_t> Args::ints(const TreeDef &t, const Args &self, llvm::StringRef what) {
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

int64_t Args::integer(llvm::StringRef name) const {
  auto v = ints(name);
  if (v.size() != 1)
    fail(fmt::format("'{}' must be one integer", name.str()));
  return v[0];
}

std::vector<int64_t> tensorInts(const Tensor &t, const std::string &what) {
  if (t.rank() > 1)
    raise("{} must be a 0-d or 1-d tensor of integers, got shape {}", what, shapeStr(t.shape()));
  if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32)
    raise("{} must be an int64 or int32 tensor, got {}", what, dtypeName(t.dtype()).str());
  std::vector<int64_t> out(t.numel());
  for (int64_t k = 0; k < t.numel(); ++k)
    out[k] = t.dtype() == DType::Int64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
  return out;
}

IntsArg Args::intsArg(llvm::StringRef name) const {
  IntsArg r;
  r.what = fmt::format("argument '{}'", name.str());
  auto a = ref(name);
  if (a && a->node()) {
    r.t = tensorOf(*a);
  } else if (a && a->def.numLeaves() &&
             (a->def.kind() == TreeDef::Kind::Tuple || a->def.kind() == TreeDef::Kind::List)) {
    // Ints and one-element tensors (traced dims), each child a leaf or an int.
    size_t leaf = a->firstLeaf;
    for (size_t i = 0; i < a->def.numChildren(); ++i) {
      const TreeDef &c = a->def.child(i);
      if (c.isLeaf()) {
        r.parts.emplace_back(i, tensorOf(ArgRef{&e_, c, leaf}));
        ++leaf;
        r.fixed.push_back(0);
      } else if (c.isConst() && c.value().isInt()) {
        r.fixed.push_back(c.value().getInt());
      } else {
        fail(fmt::format("'{}' must hold ints and integer tensors, got {}", name.str(),
                         a->def.str()));
      }
    }
  } else {
    r.fixed = ints(name);
  }
  return r;
}

IntsArg Args::axesArg(llvm::StringRef name) const {
  auto a = ref(name);
  if (a && a->node())
    return intsArg(name);
  IntsArg r;
  r.fixed = axes(name);
  return r;
}

Int2 Args::pairOf(const TreeDef &t, llvm::StringRef name) const {
  auto v = ints(t, *this, name);
  if (v.size() == 1)
    return Int2(v[0]);
  if (v.size() == 2)
    return Int2(v[0], v[1]);
  fail(fmt::format("'{}' must be an int or a pair", name.str()));
}

double Args::number(llvm::StringRef name) const {
  TreeDef t = constant(name);
  if (!t.isConst() || !t.value().isNumber())
    fail(fmt::format("'{}' must be a number, got {}", name.str(), t.str()));
  return t.value().toDouble();
}

bool Args::boolean(llvm::StringRef name) const {
  TreeDef t = constant(name);
  if (!t.isConst() || !t.value().isBool())
    fail(fmt::format("'{}' must be True or False, got {}", name.str(), t.str()));
  return t.value().getBool();
}

std::string Args::string(llvm::StringRef name) const {
  TreeDef t = constant(name);
  if (!t.isConst() || !t.value().isString())
    fail(fmt::format("'{}' must be a string, got {}", name.str(), t.str()));
  return t.value().getString();
}

std::vector<Src> Args::list(llvm::StringRef name) const {
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

DType Args::dtype(llvm::StringRef name) const {
  std::string s = string(name);
  auto dt = parseDType(s);
  if (!dt)
    fail(fmt::format("unknown dtype '{}'", s));
  return *dt;
}

std::vector<int64_t> ndPadding(const Args &a, llvm::StringRef name, size_t nd) {
  std::vector<int64_t> v = a.ints(name);
  if (v.size() == 1)
    return std::vector<int64_t>(2 * nd, v[0]);
  if (v.size() == nd) {
    std::vector<int64_t> both = v;
    both.insert(both.end(), v.begin(), v.end());
    return both;
  }
  if (v.size() != 2 * nd)
    a.fail(fmt::format("'{}' needs 1, {} or {} integers", name.str(), nd, 2 * nd));
  return v;
}

std::vector<int64_t> ndInts(const Args &a, llvm::StringRef name, size_t nd) {
  std::vector<int64_t> v = a.ints(name);
  if (v.size() == 1)
    return std::vector<int64_t>(nd, v[0]);
  if (v.size() != nd)
    a.fail(fmt::format("'{}' needs 1 or {} integers", name.str(), nd));
  return v;
}

} // namespace tmg::rt
