//===- TmirParser.cpp - Reading .tmir text --------------------------------===//
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <ostream>
#include <unordered_map>

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/StringSet.h>

#include "TmirCommon.h"
#include "tm/io/MappedFile.h"
#include "tm/ir/ModuleCheck.h"

namespace tmg {

//===----------------------------------------------------------------------===//
// LineParser
//===----------------------------------------------------------------------===//

void LineParser::fail(const std::string &msg, size_t at) const {
  size_t c = at == ~size_t(0) ? base_ + pos_ + 1 : at;
  throw Error(loc(c), msg);
}

void LineParser::expect(llvm::StringRef t) {
  if (!eat(t))
    fail(fmt::format("expected '{}'", t.str()));
}

static bool isIdentChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '.';
}

llvm::StringRef LineParser::identRef() {
  skipWs();
  size_t b = pos_;
  while (pos_ < s_.size() && isIdentChar((unsigned char)s_[pos_]))
    ++pos_;
  if (b == pos_)
    fail("expected a name");
  return s_.slice(b, pos_);
}

std::string LineParser::ident() { return identRef().str(); }

int64_t LineParser::integer() {
  skipWs();
  size_t b = pos_;
  if (pos_ < s_.size() && (s_[pos_] == '-' || s_[pos_] == '+'))
    ++pos_;
  size_t d = pos_;
  while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9')
    ++pos_;
  // Up to 18 plain digits cannot overflow: the common case, without
  // getAsInteger's generic radix handling.
  if (d == b && pos_ > d && pos_ - d <= 18) {
    int64_t v = 0;
    for (size_t i = d; i < pos_; ++i)
      v = v * 10 + (s_[i] - '0');
    return v;
  }
  int64_t v;
  if (s_.slice(b, pos_).getAsInteger(10, v))
    fail("expected an integer", base_ + b + 1);
  return v;
}

int64_t LineParser::id(const char *what) {
  skipWs();
  size_t c = col();
  int64_t v = integer();
  if (v < 0 || v >= TmirIdLimit)
    fail(fmt::format("{} {} is out of range (ids are 0 to 2^62 - 1)", what, v), c);
  return v;
}

std::string LineParser::string() {
  skipWs();
  if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
    fail("expected a quoted string");
  char q = s_[pos_++];
  std::string out;
  // Most strings (names, qualnames) have no escapes: one copy.
  size_t end = pos_;
  while (end < s_.size() && s_[end] != q && s_[end] != '\\')
    ++end;
  if (end < s_.size() && s_[end] == q) {
    out.assign(s_.data() + pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }
  while (pos_ < s_.size() && s_[pos_] != q) {
    char c = s_[pos_++];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= s_.size())
      break;
    char e = s_[pos_++];
    switch (e) {
    case 'n': out += '\n'; break;
    case 't': out += '\t'; break;
    case 'r': out += '\r'; break;
    case 'x': {
      if (pos_ + 2 > s_.size())
        fail("truncated \\x escape");
      unsigned v;
      if (s_.substr(pos_, 2).getAsInteger(16, v))
        fail("bad \\x escape");
      out += char(v);
      pos_ += 2;
      break;
    }
    default: out += e;
    }
  }
  if (pos_ >= s_.size())
    fail("unterminated string");
  ++pos_;
  return out;
}

Shape LineParser::shapeTuple() {
  expect("(");
  Shape s;
  while (!eat(")")) {
    if (!s.empty())
      expect(",");
    if (eat(")"))
      break;
    skipWs();
    size_t start = pos_;
    if (pos_ < s_.size() && (std::isdigit(uint8_t(s_[pos_])) || s_[pos_] == '-')) {
      int64_t d = integer();
      if (d < 0)
        fail("dimensions must be non-negative", base_ + start + 1);
      skipWs();
      if (peek(",") || peek(")")) {
        s.push_back(d);
        continue;
      }
      pos_ = start; // an expression such as 2*N
    }
    // A symbolic dim up to the next ',' or ')' outside parentheses and quotes.
    int depth = 0;
    bool quoted = false;
    for (; pos_ < s_.size(); ++pos_) {
      char ch = s_[pos_];
      if (quoted) {
        if (ch == '\\')
          ++pos_;
        else if (ch == '\'')
          quoted = false;
      } else if (ch == '\'') {
        quoted = true;
      } else if (ch == '(') {
        ++depth;
      } else if (ch == ')' || ch == ',') {
        if (depth == 0)
          break;
        if (ch == ')')
          --depth;
      }
    }
    std::string err;
    size_t at = 0;
    auto d = dim::parse(s_.slice(start, pos_).rtrim(' '), &err, &at);
    if (!d)
      fail(err, base_ + start + at + 1);
    s.push_back(*d);
  }
  return s;
}

LineParser::NodeType LineParser::nodeType() {
  NodeType t;
  if (eat("module<")) {
    t.isModule = true;
    t.moduleType = ident();
    expect(">");
    return t;
  }
  if (!eat("?")) {
    size_t c = col();
    llvm::StringRef dt = identRef();
    t.dtype = parseDType(dt);
    if (!t.dtype)
      fail(fmt::format("unknown dtype '{}'", dt.str()), c);
  }
  if (peek("(")) {
    size_t c = col();
    t.shape = shapeTuple();
    if (isStaticShape(*t.shape) &&
        !(t.dtype ? checkedByteSize(*t.shape, *t.dtype) : checkedNumel(*t.shape)))
      fail(fmt::format("shape {} is too large: its {} does not fit in 64 bits",
                       shapeStr(*t.shape), t.dtype ? "byte size" : "element count"),
           c);
  }
  return t;
}

/// The numbers of an inline tensor, up to and including the closing ']'
/// (the '[' is read). Written by the printer as Python reprs: integers,
/// floats, inf, -inf, nan. A tensor of a million elements is read without
/// building a value per element.
void LineParser::stringList(std::vector<std::string> &out) {
  while (!eat("]")) {
    if (!out.empty())
      expect(",");
    out.push_back(string());
  }
}

void LineParser::numberList(std::vector<double> &out, llvm::ArrayRef<int64_t> shape) {
  int64_t numel = 1;
  for (int64_t d : shape)
    numel = d >= 0 && numel <= (int64_t(1) << 40) / std::max<int64_t>(d, 1) ? numel * d : -1;
  // Each element takes at least two characters ("0,"); a claimed size
  // beyond that is not trusted for the reservation.
  if (numel > 0)
    out.reserve(size_t(std::min<int64_t>(numel, int64_t(s_.size() - pos_) / 2 + 1)));
  bool comma = true;
  while (!eat("]")) {
    if (!comma)
      fail("expected ',' or ']'");
    skipWs();
    size_t b = pos_;
    while (pos_ < s_.size() && s_[pos_] != ',' && s_[pos_] != ']' && s_[pos_] != ' ' &&
           s_[pos_] != '\t')
      ++pos_;
    llvm::StringRef tok = s_.slice(b, pos_);
    double d = 0;
    const char *first = tok.data(), *last = tok.data() + tok.size();
    if (tok.startswith("+"))
      ++first;
    auto [end, ec] = std::from_chars(first, last, d);
    if (tok == "inf" || tok == "-inf" || tok == "nan")
      d = tok == "nan" ? NAN : (tok == "inf" ? HUGE_VAL : -HUGE_VAL);
    else if (tok.empty() || ec != std::errc() || end != last)
      fail(tok.empty() ? "tensor data must be numbers"
                       : fmt::format("malformed number '{}'", tok.str()),
           base_ + b + 1);
    out.push_back(d);
    comma = eat(",");
  }
}

PyVal LineParser::value() {
  skipWs();
  if (depth_ >= MaxValueNesting)
    fail(fmt::format("values nest deeper than {} levels", MaxValueNesting));
  struct Nest {
    size_t &d;
    explicit Nest(size_t &d) : d(++d) {}
    ~Nest() { --d; }
  } nest(depth_);
  PyVal v;
  v.col = col();
  if (pos_ >= s_.size())
    fail("expected a value");
  char c = s_[pos_];
  auto seq = [&](char close, PyVal::Kind k) {
    v.kind = k;
    ++pos_;
    bool comma = true;
    while (!eat(std::string(1, close))) {
      if (!comma)
        fail(fmt::format("expected ',' or '{}'", close));
      v.items.push_back(value());
      comma = eat(",");
    }
    return v;
  };
  if (c == '(')
    return seq(')', PyVal::Kind::Tuple);
  if (c == '[')
    return seq(']', PyVal::Kind::List);
  if (c == '{') {
    v.kind = PyVal::Kind::Dict;
    ++pos_;
    bool comma = true;
    while (!eat("}")) {
      if (!comma)
        fail("expected ',' or '}'");
      PyVal k = value();
      if (k.kind != PyVal::Kind::Scalar)
        fail("dict keys must be constants", k.col);
      expect(":");
      v.keys.push_back(k.scalar);
      v.items.push_back(value());
      comma = eat(",");
    }
    return v;
  }
  if (c == '%') {
    ++pos_;
    v.kind = PyVal::Kind::NodeRef;
    v.nodeId = id("node id");
    return v;
  }
  if (c == '\'' || c == '"') {
    v.scalar = Scalar(string());
    return v;
  }
  if (c == '-' || c == '+' || c == '.' || std::isdigit((unsigned char)c)) {
    size_t b = pos_;
    ++pos_;
    while (pos_ < s_.size() &&
           (std::isalnum((unsigned char)s_[pos_]) || s_[pos_] == '.' ||
            ((s_[pos_] == '-' || s_[pos_] == '+') &&
             (s_[pos_ - 1] == 'e' || s_[pos_ - 1] == 'E'))))
      ++pos_;
    llvm::StringRef tok = s_.slice(b, pos_);
    int64_t iv;
    double dv;
    if (!tok.getAsInteger(10, iv))
      v.scalar = Scalar(iv);
    else if (tok == "-inf")
      v.scalar = Scalar(-HUGE_VAL);
    else if (!tok.getAsDouble(dv))
      v.scalar = Scalar(dv);
    else
      fail(fmt::format("malformed number '{}'", tok.str()), base_ + b + 1);
    return v;
  }
  std::string w = ident();
  if (w == "None")
    return v;
  if (w == "True" || w == "False") {
    v.scalar = Scalar(w == "True");
    return v;
  }
  if (w == "Ellipsis") {
    v.scalar = Scalar::ellipsis();
    return v;
  }
  if (w == "inf" || w == "nan") {
    v.scalar = Scalar(w == "inf" ? HUGE_VAL : NAN);
    return v;
  }
  if (w == "Tensor" || w == "Module") {
    v.kind = PyVal::Kind::Placeholder;
    v.leafType = w == "Tensor" ? TreeDef::LeafType::Tensor : TreeDef::LeafType::Module;
    return v;
  }
  if (w == "slice") {
    v.kind = PyVal::Kind::Slice;
    expect("(");
    for (int i = 0; i < 3; ++i) {
      if (i)
        expect(",");
      v.items.push_back(value());
    }
    expect(")");
    return v;
  }
  if (w == "param" || w == "buffer" || w == "tensor") {
    v.kind = PyVal::Kind::TensorVal;
    v.word = w;
    expect("(");
    size_t tc = col();
    NodeType t = nodeType();
    if (t.isModule || !t.dtype || !t.shape || !isStaticShape(*t.shape))
      fail("a tensor value needs a dtype and sizes, e.g. float32(3, 4)", tc);
    v.dtype = t.dtype;
    v.shape = *t.shape;
    v.hasShape = true;
    expect(",");
    if (eat("@")) {
      v.ref = string();
    } else if (eat("zeros")) {
      v.hasData = true; // all zeros
    } else {
      if (!eat("["))
        fail("tensor data must be @\"key\", zeros or a list of numbers");
      isString(*v.dtype) ? stringList(v.strings) : numberList(v.data, v.shape);
      v.hasData = true;
    }
    expect(")");
    return v;
  }
  if (w == "module") {
    v.kind = PyVal::Kind::ModuleVal;
    expect("(");
    v.word = ident();
    expect(",");
    PyVal d = value();
    if (d.kind != PyVal::Kind::Dict)
      fail("module(...) needs a dict of attributes", d.col);
    v.items = std::move(d.items);
    v.keys = std::move(d.keys);
    expect(")");
    return v;
  }
  fail(fmt::format("unexpected '{}'", w), v.col);
}

TreeDef toTreeDef(const PyVal &v, const LineParser &p,
                  llvm::SmallVectorImpl<int64_t> *ids) {
  switch (v.kind) {
  case PyVal::Kind::Scalar: return TreeDef::constant(v.scalar);
  case PyVal::Kind::Placeholder: return TreeDef::leaf(v.leafType);
  case PyVal::Kind::NodeRef:
    if (!ids)
      p.fail("a node reference is not allowed here", v.col);
    ids->push_back(v.nodeId);
    return TreeDef(); // leaf type fixed by the caller from the node
  case PyVal::Kind::Tuple:
  case PyVal::Kind::List: {
    std::vector<TreeDef> c;
    for (const auto &x : v.items)
      c.push_back(toTreeDef(x, p, ids));
    return v.kind == PyVal::Kind::Tuple ? TreeDef::tuple(std::move(c))
                                        : TreeDef::list(std::move(c));
  }
  case PyVal::Kind::Dict: {
    std::vector<std::pair<Scalar, TreeDef>> c;
    for (size_t i = 0; i < v.items.size(); ++i)
      c.emplace_back(v.keys[i], toTreeDef(v.items[i], p, ids));
    // Keys are printed sorted; anything else was written by hand wrongly.
    for (size_t i = 1; i < v.keys.size(); ++i)
      if (v.keys[i] < v.keys[i - 1] || v.keys[i] == v.keys[i - 1])
        p.fail("dict keys must be sorted and unique", v.col);
    return TreeDef::dict(std::move(c));
  }
  case PyVal::Kind::Slice: {
    // In order: the leaves are numbered start, stop, step.
    TreeDef start = toTreeDef(v.items[0], p, ids), stop = toTreeDef(v.items[1], p, ids);
    return TreeDef::slice(std::move(start), std::move(stop), toTreeDef(v.items[2], p, ids));
  }
  case PyVal::Kind::TensorVal:
  case PyVal::Kind::ModuleVal:
    p.fail("a tensor or module value is not allowed here", v.col);
  }
  return TreeDef();
}

//===----------------------------------------------------------------------===//
// The file parser
//===----------------------------------------------------------------------===//

namespace {

/// Sets the leaf types of a TreeDef whose leaves are the nodes `nodes`.
TreeDef retypeLeaves(const TreeDef &t, llvm::ArrayRef<Node *> nodes, size_t &next) {
  switch (t.kind()) {
  case TreeDef::Kind::Leaf: {
    Node *n = nodes[next++];
    return TreeDef::leaf(llvm::isa<ModuleNode>(n) ? TreeDef::LeafType::Module
                                                  : TreeDef::LeafType::Tensor);
  }
  case TreeDef::Kind::Const: return t;
  case TreeDef::Kind::Tuple:
  case TreeDef::Kind::List: {
    std::vector<TreeDef> c;
    for (size_t i = 0; i < t.numChildren(); ++i)
      c.push_back(retypeLeaves(t.child(i), nodes, next));
    return t.kind() == TreeDef::Kind::Tuple ? TreeDef::tuple(std::move(c))
                                            : TreeDef::list(std::move(c));
  }
  case TreeDef::Kind::Dict:
  case TreeDef::Kind::OrderedDict: {
    std::vector<std::pair<Scalar, TreeDef>> c;
    for (size_t i = 0; i < t.numChildren(); ++i)
      c.emplace_back(t.key(i), retypeLeaves(t.child(i), nodes, next));
    return t.kind() == TreeDef::Kind::Dict ? TreeDef::dict(std::move(c))
                                           : TreeDef::orderedDict(std::move(c));
  }
  case TreeDef::Kind::Slice: {
    TreeDef start = retypeLeaves(t.child(0), nodes, next);
    TreeDef stop = retypeLeaves(t.child(1), nodes, next);
    return TreeDef::slice(std::move(start), std::move(stop), retypeLeaves(t.child(2), nodes, next));
  }
  }
  return t;
}

class FileParser {
public:
  FileParser(llvm::StringRef text, std::string file, const TmirReadOptions &o)
      : file_(std::move(file)), opts_(o) {
    llvm::SmallVector<llvm::StringRef, 0> ls;
    text.split(ls, '\n');
    lines_.assign(ls.begin(), ls.end());
    // A trailing newline leaves one empty last piece.
    if (!lines_.empty() && lines_.back().empty())
      lines_.pop_back();
  }

  std::unique_ptr<TracedModule> run() {
    LineParser h = at(0);
    if (!h.eat("tmir"))
      h.fail("not a .tmir file: the first line must be 'tmir <version>'");
    version_ = h.integer();
    if (version_ < 0 || version_ > TmirVersion)
      h.fail(fmt::format("unsupported .tmir version {} (this build reads 0 to {})",
                         version_, TmirVersion));
    endOfLine(h);
    ++cur_;
    if (cur_ < lines_.size() && lines_[cur_].startswith("weights ")) {
      LineParser w = at(cur_);
      w.expect("weights");
      weightsFile_ = w.string();
      endOfLine(w);
      ++cur_;
    }
    LineParser ids = at(cur_);
    ids.expect("ids");
    size_t nc = ids.col();
    int64_t nn = ids.integer();
    size_t ec = ids.col();
    int64_t ne = ids.integer();
    if (nn < 0 || nn > TmirIdLimit)
      ids.fail(fmt::format("node id total {} is out of range (0 to 2^62)", nn), nc + 1);
    if (ne < 0 || ne > TmirIdLimit)
      ids.fail(fmt::format("expr id total {} is out of range (0 to 2^62)", ne), ec + 1);
    endOfLine(ids);
    ++cur_;
    // Bounded by the text so a bogus `ids` line cannot allocate much.
    size_t cap = 4 * lines_.size() + 1024;
    nodeById_.assign(std::min<size_t>(size_t(std::max<int64_t>(nn, 0)), cap), nullptr);
    exprIdSeen_.assign(std::min<size_t>(size_t(std::max<int64_t>(ne, 0)), cap), 0);
    loadWeights();
    LineParser m = at(cur_);
    m.expect("module");
    std::string type = m.ident();
    m.expect("traced");
    bool top = m.eat("top");
    auto root = std::make_unique<TracedModule>(type, top);
    if (m.eat("name="))
      root->setName(m.string());
    m.expect("{");
    endOfLine(m);
    ++cur_;
    moduleBody(*root, "");
    if (cur_ < lines_.size()) {
      LineParser extra = at(cur_);
      extra.fail("unexpected text after the top module");
    }
    root->setTotalIds(nn, ne);
    root->updateRefs();
    auto diags = verify(*root);
    if (!diags.empty()) {
      Diagnostic d = diags[0];
      if (d.loc.exprId >= 0) {
        // First line that defined this expr id (only looked up on error).
        for (const auto &[id, line] : exprLines_)
          if (id == d.loc.exprId) {
            d.loc.file = file_;
            d.loc.line = int64_t(line + 1);
            d.loc.column = 1;
            break;
          }
      }
      for (size_t i = 1; i < diags.size(); ++i)
        d.note(diags[i].str());
      throw Error(d);
    }
    return root;
  }

private:
  const TmirLoaders &loaders() const {
    return opts_.loaders ? *opts_.loaders : TmirLoaders::builtin();
  }

  LineParser at(size_t i) {
    if (i >= lines_.size())
      throw Error(Location::inFile(file_, int64_t(std::max<size_t>(lines_.size(), 1)), 1),
                  "unexpected end of file");
    return LineParser(lines_[i], file_, i + 1);
  }
  void endOfLine(LineParser &p) {
    if (!p.atEnd())
      p.fail("unexpected text at the end of the line");
  }

  void loadWeights() {
    if (opts_.weights) {
      weights_ = opts_.weights;
      return;
    }
    if (weightsFile_.empty())
      return;
    std::string path = weightsFile_;
    if (!path.empty() && path[0] != '/')
      path = opts_.baseDir + "/" + path;
    auto w = readSafetensors(path);
    if (w.failed())
      throw Error(w.diagnostic());
    ownWeights_ = std::move(*w);
    weights_ = &ownWeights_;
  }

  /// Checks a tensor value's size against the read limits before it is
  /// allocated (`zeros` and references need no data in the text).
  void checkTensorSize(const PyVal &v, const LineParser &p, const std::string &what) {
    auto bytes = checkTensorBytes(what, v.shape, *v.dtype, limits_);
    if (bytes.failed())
      p.fail(bytes.diagnostic().message, v.col);
    if (auto r = budget_.add(what, *bytes); r.failed())
      p.fail(r.diagnostic().message, v.col);
  }

  /// The tensor of a `param(...)` / `buffer(...)` / `tensor(...)` value;
  /// `what` names it in errors.
  Tensor tensorFrom(const PyVal &v, const LineParser &p, const std::string &what) {
    checkTensorSize(v, p, what);
    if (!v.ref.empty()) {
      const Tensor *t = weights_ ? weights_->find(v.ref) : nullptr;
      if (!t) {
        if (opts_.missingWeightsAsZeros)
          return Tensor::zeros(v.shape, *v.dtype);
        p.fail(weights_ ? fmt::format("tensor '{}' is not in the weights file", v.ref)
                        : fmt::format("tensor '{}' needs a weights file, but none "
                                      "was given",
                                      v.ref),
               v.col);
      }
      if (t->dtype() != *v.dtype || t->shape() != llvm::ArrayRef<int64_t>(v.shape))
        p.fail(fmt::format("tensor '{}' is {} in the weights file but {} here",
                           v.ref, tensorTypeStr(*t),
                           dtypeName(*v.dtype).str() + shapeStr(v.shape)),
               v.col);
      return *t;
    }
    // Inline values are counted before the tensor is allocated: a short
    // list must not cost the size its shape claims.
    int64_t numel = shapeNumel(v.shape);
    if (isString(*v.dtype) && !v.strings.empty()) {
      if (int64_t(v.strings.size()) != numel)
        p.fail(fmt::format("tensor of shape {} needs {} strings, got {}", shapeStr(v.shape), numel,
                           v.strings.size()),
               v.col);
      return stringTensor(v.shape, v.strings);
    }
    if (isString(*v.dtype) && !v.data.empty())
      p.fail("a string tensor's data is a list of quoted strings", v.col);
    if (!v.data.empty() && int64_t(v.data.size()) != numel)
      p.fail(fmt::format("tensor of shape {} needs {} values, got {}",
                         shapeStr(v.shape), numel, v.data.size()),
             v.col);
    Tensor t = Tensor::zeros(v.shape, *v.dtype);
    if (v.data.empty())
      return t;
    visitDType(t.dtype(), [&](auto tag) {
      constexpr DType D = decltype(tag)::value;
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<StorageT<D>>()[i] = fromDouble<D>(v.data[i]);
    });
    return t;
  }

  /// Sets attribute `name` of `m` from a parsed value.
  void setAttr(Module &m, const std::string &name, const PyVal &v,
               const LineParser &p) {
    if (m.hasAttr(name))
      p.fail(fmt::format("duplicate attribute '{}'", name), v.col);
    if (v.kind == PyVal::Kind::TensorVal) {
      Tensor t = tensorFrom(v, p, fmt::format("{} '{}'", v.word, name));
      if (v.word == "param")
        m.registerParameter(name, t);
      else if (v.word == "buffer")
        m.registerBuffer(name, t);
      else
        p.fail("module attributes are param(...) or buffer(...)", v.col);
      return;
    }
    if (v.kind == PyVal::Kind::ModuleVal)
      p.fail("submodules are written as blocks, not module(...)", v.col);
    m.setValue(name, toTreeDef(v, p));
  }

  std::unique_ptr<Module> makeModule(const std::string &type, const std::string &kind,
                                     const LineParser &p, size_t col) {
    if (kind == "traced")
      return std::make_unique<TracedModule>(type, false);
    if (kind == "plain")
      return std::make_unique<Module>(type);
    if (kind != "builtin")
      p.fail(fmt::format("unknown module kind '{}' (builtin, traced or plain)", kind), col);
    const ModuleType *t = ModuleTypeRegistry::instance().lookup(type);
    if (!t || !t->builtin || !t->factory)
      p.fail(fmt::format("unknown builtin module type '{}'", type), col);
    auto m = t->factory();
    while (!m->attrs().empty())
      m->removeAttr(m->attrs().front().name);
    return m;
  }

  void moduleBody(Module &m, const std::string &path) {
    while (true) {
      LineParser p = at(cur_);
      if (p.eat("}")) {
        endOfLine(p);
        ++cur_;
        return;
      }
      if (p.peek("graph ")) {
        auto *t = llvm::dyn_cast<TracedModule>(&m);
        if (!t)
          p.fail("only traced modules have graphs");
        graph(*t);
        continue;
      }
      std::string name = p.ident();
      p.expect("=");
      size_t c = p.col();
      if (p.eat("alias ")) { // `b = alias a`: submodule a under a second name
        p.skipWs();
        size_t tc = p.col();
        std::string target = p.ident();
        endOfLine(p);
        if (m.hasAttr(name))
          p.fail(fmt::format("duplicate attribute '{}'", name), c);
        if (!m.module(target))
          p.fail(fmt::format("alias '{}' names '{}', which is not a submodule declared "
                             "before it",
                             name, target),
                 tc);
        m.registerModuleAlias(name, target);
        ++cur_;
        continue;
      }
      // A submodule block: `name = Type kind [name='x'] {`: a capitalised
      // word that is not a Python constant.
      llvm::StringRef after = p.rest().ltrim();
      if (!after.empty() && std::isupper((unsigned char)after[0]) && !p.peek("None") &&
          !p.peek("True") && !p.peek("False") && !p.peek("Ellipsis")) {
        p.skipWs();
        size_t tc = p.col();
        std::string type = p.ident();
        size_t kc = p.col();
        std::string kind = p.ident();
        auto child = makeModule(type, kind, p, kc);
        if (p.eat("name="))
          child->setName(p.string());
        p.expect("{");
        endOfLine(p);
        if (m.hasAttr(name))
          p.fail(fmt::format("duplicate attribute '{}'", name), c);
        size_t header = cur_++;
        Module &ref = m.registerModule(name, std::move(child));
        std::string sub = path.empty() ? name : path + "." + name;
        moduleBody(ref, sub);
        // Upgraded first: the builtin checks are those of the current version.
        if (version_ < TmirVersion)
          loaders().upgradeModule(ref, version_);
        checkBuiltin(ref, sub, header, tc);
        continue;
      }
      PyVal v = p.value();
      endOfLine(p);
      setAttr(m, name, v, p);
      ++cur_;
    }
  }

  /// A builtin module must have what its kernel reads (ModuleCheck.h);
  /// errors point at the module's header line.
  void checkBuiltin(const Module &m, const std::string &path, size_t header, size_t col) {
    std::vector<Diagnostic> diags;
    verifyBuiltinModule(m, path, diags);
    if (diags.empty())
      return;
    Diagnostic d(Location::inFile(file_, int64_t(header + 1), int64_t(col)),
                 diags[0].message);
    for (size_t i = 1; i < diags.size(); ++i)
      d.note(diags[i].message);
    throw Error(d);
  }

  std::unique_ptr<Node> makeNode(LineParser &p, int64_t &id) {
    p.expect("%");
    id = p.id("node id");
    std::string name = p.string();
    size_t tc = p.col();
    LineParser::NodeType t = p.nodeType();
    std::string qual = p.string();
    std::unique_ptr<Node> n;
    if (t.isModule) {
      auto mn = std::make_unique<ModuleNode>(nullptr, id);
      const ModuleType *mt = ModuleTypeRegistry::instance().lookup(t.moduleType);
      if (!mt)
        p.fail(fmt::format("unknown module type '{}'", t.moduleType), tc);
      mn->setModuleType(*mt);
      n = std::move(mn);
    } else {
      if (t.dtype && t.shape) {
        auto bytes = checkTensorBytes(fmt::format("node %{} '{}'", id, name), knownSizes(*t.shape),
                                      *t.dtype, limits_);
        if (bytes.failed())
          p.fail(bytes.diagnostic().message, tc);
      }
      auto tn = std::make_unique<TensorNode>(nullptr, id);
      if (t.dtype) {
        tn->setDType(*t.dtype);
        tn->setHasDType(true);
      }
      tn->setShape(t.shape);
      n = std::move(tn);
    }
    n->setNamesInternal(name, qual);
    return n;
  }

  struct GraphState {
    InternalGraph *g = nullptr;
    /// Ids outside the dense range of nodeById_ / exprIdSeen_.
    llvm::DenseMap<int64_t, Node *> nodes;
    llvm::DenseSet<int64_t> exprIds;
    /// Dense entries set by this graph (cleared when it ends).
    std::vector<int64_t> denseNodes, denseExprs;
  };

  void defineNode(GraphState &st, Node *n, LineParser &p, size_t col) {
    int64_t id = n->id();
    bool fresh;
    if (id >= 0 && size_t(id) < nodeById_.size()) {
      fresh = !nodeById_[id];
      if (fresh) {
        nodeById_[id] = n;
        st.denseNodes.push_back(id);
      }
    } else {
      fresh = st.nodes.try_emplace(id, n).second;
    }
    if (!fresh)
      p.fail(fmt::format("node id %{} is defined twice in graph '{}'", n->id(),
                         st.g->name()),
             col);
  }

  Node *useNode(GraphState &st, int64_t id, LineParser &p, size_t col) {
    Node *n = nullptr;
    if (id >= 0 && size_t(id) < nodeById_.size()) {
      n = nodeById_[id];
    } else {
      auto it = st.nodes.find(id);
      if (it != st.nodes.end())
        n = it->second;
    }
    if (!n)
      p.fail(fmt::format("undefined node %{} in graph '{}'", id, st.g->name()), col);
    return n;
  }

  /// Records expr id `id`; false when the graph already has it.
  bool defineExprId(GraphState &st, int64_t id) {
    if (id >= 0 && size_t(id) < exprIdSeen_.size()) {
      if (exprIdSeen_[id])
        return false;
      exprIdSeen_[id] = 1;
      st.denseExprs.push_back(id);
      return true;
    }
    return st.exprIds.insert(id).second;
  }

  void endGraph(GraphState &st) {
    for (int64_t id : st.denseNodes)
      nodeById_[id] = nullptr;
    for (int64_t id : st.denseExprs)
      exprIdSeen_[id] = 0;
    st.denseNodes.clear();
    st.denseExprs.clear();
  }

  /// Parses `key=value` annotations (and bare flags) into a map.
  /// Annotations of one line; a handful of keys, so a flat vector.
  struct Annot {
    llvm::SmallVector<std::pair<llvm::StringRef, std::pair<PyVal, size_t>>, 4> items;
    llvm::SmallVector<llvm::StringRef, 2> flags;
    /// `args=` / `outdef=` found in the caches (then not in `items`).
    std::optional<TreeDef> args, outdef;
    llvm::SmallVector<int64_t, 4> argIds;
    /// Cache keys of `args=` / `outdef=` parsed the slow way (empty when
    /// the text is not cacheable).
    std::string argsKey, outdefKey;
    bool has(llvm::StringRef k) const {
      if ((k == "args" && args) || (k == "outdef" && outdef))
        return true;
      for (const auto &i : items)
        if (i.first == k)
          return true;
      return false;
    }
    const std::pair<PyVal, size_t> *find(llvm::StringRef k) const {
      for (const auto &i : items)
        if (i.first == k)
          return &i.second;
      return nullptr;
    }
    bool flag(llvm::StringRef f) const {
      return std::find(flags.begin(), flags.end(), f) != flags.end();
    }
    std::vector<std::pair<std::unique_ptr<Node>, size_t>> outs;
    bool hasOuts = false;
  };

  /// The fields of a graph's header line.
  struct GraphHeader {
    std::string name, qual;
    bool hasName = false, hasQual = false;
    std::map<std::string, std::string> legacy; ///< fields of older versions
    std::optional<TreeDef> argDef, outDef;
    std::vector<std::string> reserved;
    struct In {
      std::unique_ptr<Node> node;
      int64_t exprId;
      std::string inputName;
      size_t col;
    };
    std::vector<In> ins;
  };

  /// `reserved=[...]`: a list of plain strings (about one per expr) takes a
  /// fast path; anything else goes through value() for its exact errors.
  void reservedNames(LineParser &d, std::vector<std::string> &reserved) {
    size_t start = d.pos();
    if (d.eat("[")) {
      bool ok = true, first = true;
      while (!d.eat("]")) {
        if (!first && !d.eat(",")) {
          ok = false;
          break;
        }
        first = false;
        if (d.eat("]"))
          break;
        if (!d.peek("'") && !d.peek("\"")) {
          ok = false;
          break;
        }
        reserved.push_back(d.string());
      }
      if (ok)
        return;
      reserved.clear();
      d.setPos(start);
    }
    PyVal v = d.value();
    for (const auto &x : v.items)
      if (x.kind == PyVal::Kind::Scalar && x.scalar.isString())
        reserved.push_back(x.scalar.getString());
      else
        d.fail("reserved names must be strings", x.col);
  }

  /// `inputs=[%0:Net #0 'self', ...]`.
  void graphInputs(LineParser &d, std::vector<GraphHeader::In> &ins) {
    d.expect("[");
    bool first = true;
    while (!d.eat("]")) {
      if (!first)
        d.expect(",");
      first = false;
      GraphHeader::In in;
      in.col = d.col();
      int64_t id;
      in.node = makeNode(d, id);
      d.expect("#");
      in.exprId = d.id("expr id");
      in.inputName = d.string();
      ins.push_back(std::move(in));
    }
  }

  /// The `graph name=... qualname=... argdef=... outdef=... inputs=[...]`
  /// line (older versions' fields are upgraded).
  GraphHeader graphHeader(LineParser &d) {
    d.expect("graph");
    GraphHeader h;
    while (!d.atEnd()) {
      size_t kc = d.col();
      std::string key = d.ident();
      d.expect("=");
      if (key == "name") {
        h.name = d.string();
        h.hasName = true;
      } else if (key == "qualname" && version_ >= 1) {
        h.qual = d.string();
        h.hasQual = true;
      } else if (key == "argdef") {
        h.argDef = toTreeDef(d.value(), d);
      } else if (key == "outdef") {
        h.outDef = toTreeDef(d.value(), d);
      } else if (key == "reserved") {
        reservedNames(d, h.reserved);
      } else if (key == "inputs") {
        graphInputs(d, h.ins);
      } else if (version_ < TmirVersion && (d.peek("'") || d.peek("\""))) {
        // A field of an older version: the graph loaders take it.
        if (!h.legacy.emplace(key, d.string()).second)
          d.fail(fmt::format("duplicate graph field '{}'", key), kc);
      } else {
        d.fail(fmt::format("unknown graph field '{}'", key), kc);
      }
    }
    if (version_ < TmirVersion)
      upgradeHeader(d, h.name, h.qual, h.hasQual, std::move(h.legacy));
    if (!h.hasName || !h.hasQual || !h.argDef || !h.outDef)
      d.fail("a graph needs name, qualname, argdef and outdef");
    return h;
  }

  /// The `\treturn %a, %b` line.
  void returnLine(GraphState &st, llvm::StringRef visible, LineParser &a) {
    a.expect("outs=");
    PyVal outs = a.value();
    endOfLine(a);
    std::vector<Node *> onodes;
    for (const auto &o : outs.items) {
      if (o.kind != PyVal::Kind::NodeRef)
        a.fail("return outs must be node references", o.col);
      onodes.push_back(useNode(st, o.nodeId, a, o.col));
    }
    st.g->setOutputsInternal(onodes);
    std::string ret = "\treturn ";
    for (size_t i = 0; i < onodes.size(); ++i)
      ret += (i ? ", " : "") + onodes[i]->str();
    checkLine(visible, ret, cur_);
  }

  /// The expr lines and the return line, up to the closing '}'.
  void graphBody(GraphState &st) {
    bool returned = false;
    while (true) {
      llvm::StringRef line = at(cur_).rest();
      if (line == "}") {
        if (!returned)
          at(cur_).fail("graph ends without a return line");
        ++cur_;
        break;
      }
      if (returned)
        at(cur_).fail("expected '}' after the return line");
      if (line.trim().empty()) {
        ++cur_;
        continue;
      }
      size_t split = rfindAnnotations(line);
      if (split == llvm::StringRef::npos)
        at(cur_).fail("missing the '\\t;; ' annotations of this line");
      llvm::StringRef visible = line.take_front(split);
      LineParser a(line.drop_front(split + 4), file_, cur_ + 1, split + 4);
      if (visible.startswith("\treturn")) {
        returnLine(st, visible, a);
        returned = true;
      } else {
        exprLine(st, visible, a);
      }
      ++cur_;
    }
  }

  void graph(TracedModule &tm) {
    LineParser d = at(cur_);
    GraphHeader h = graphHeader(d);
    if (tm.graphFor(*h.argDef))
      d.fail(fmt::format("module '{}' already has a graph for signature {}",
                         tm.typeName().str(), h.argDef->str()));
    InternalGraph &g = tm.addGraph(*h.argDef, h.name, h.qual);
    GraphState st;
    st.g = &g;
    for (auto &in : h.ins) {
      auto e = std::make_unique<Input>(in.exprId, in.inputName);
      Node *n = e->addOutput(std::move(in.node));
      defineNode(st, n, d, in.col);
      if (!defineExprId(st, in.exprId))
        d.fail(fmt::format("expr id %{} is used twice in graph '{}'", in.exprId, h.name), in.col);
      exprLines_.emplace_back(in.exprId, cur_);
      g.adoptInputInternal(std::move(e));
    }
    if (g.inputs().empty() || !llvm::isa<ModuleNode>(g.input(0)))
      d.fail("a graph's first input must be the self module node");
    ++cur_;
    // The reference's header line.
    std::string text = g.str();
    std::string header = text.substr(0, text.find("{\n") + 1);
    checkLine(at(cur_).rest(), header, cur_);
    ++cur_;
    graphBody(st);
    // Names: every node name, plus reserved ones.
    for (Node *n : g.inputs())
      g.ns().reserve(n->name());
    for (Expr *e : g)
      for (Node *n : e->outputs())
        g.ns().reserve(n->name());
    for (const auto &r : h.reserved)
      g.ns().reserve(r);
    size_t leaves = h.outDef->numLeaves();
    if (leaves != g.outputs().size())
      at(cur_ - 1).fail(fmt::format("outdef {} has {} leaves but the graph returns {} nodes",
                                    h.outDef->str(), leaves, g.outputs().size()));
    size_t next = 0;
    tm.setOutDef(*h.argDef, retypeLeaves(*h.outDef, g.outputs(), next));
    if (version_ < TmirVersion)
      loaders().upgradeGraph(g, version_);
    endGraph(st);
  }

  /// Scans the value at the start of `t` ('(', '[' or '{' balanced, or a
  /// bare word), writing its text with node-id digits dropped ("%12" ->
  /// "%") to `key` and the ids to `ids` (node references make it
  /// uncacheable when `ids` is null). Returns the value's length, or 0 when
  /// the text is anything else: the caller then uses value(), which
  /// reports errors.
  static size_t scanValue(llvm::StringRef t, std::string &key,
                          llvm::SmallVectorImpl<int64_t> *ids) {
    key.clear();
    if (t.empty())
      return 0;
    size_t i = 0;
    if (isIdentChar((unsigned char)t[0]) && !(t[0] >= '0' && t[0] <= '9')) {
      while (i < t.size() && isIdentChar((unsigned char)t[i]))
        ++i;
      if (i < t.size() && t[i] != ' ' && t[i] != '\t')
        return 0;
      key.assign(t.data(), i);
      return i;
    }
    if (t[0] != '(' && t[0] != '[' && t[0] != '{')
      return 0;
    size_t depth = 0;
    while (i < t.size()) {
      char c = t[i];
      if (c == '(' || c == '[' || c == '{') {
        ++depth;
      } else if (c == ')' || c == ']' || c == '}') {
        if (--depth == 0) {
          key += c;
          return i + 1;
        }
      } else if (c == '\'' || c == '"') {
        size_t j = i + 1;
        while (j < t.size() && t[j] != c)
          j += t[j] == '\\' ? 2 : 1;
        if (j >= t.size())
          return 0;
        key.append(t.data() + i, j + 1 - i);
        i = j + 1;
        continue;
      } else if (c == '%') {
        if (!ids)
          return 0;
        size_t j = i + 1;
        while (j < t.size() && t[j] >= '0' && t[j] <= '9')
          ++j;
        if (j == i + 1 || j - i - 1 > 18)
          return 0;
        int64_t v = 0;
        for (size_t k = i + 1; k < j; ++k)
          v = v * 10 + (t[k] - '0');
        ids->push_back(v);
        key += '%';
        i = j;
        continue;
      }
      key += c;
      ++i;
    }
    return 0;
  }

  Annot annotations(LineParser &a) {
    Annot an;
    while (!a.atEnd()) {
      size_t c = a.col();
      llvm::StringRef key = a.identRef();
      if (a.eat("=")) {
        size_t vc = a.col();
        if (key == "args" || key == "outdef") {
          bool isArgs = key == "args";
          // As for other keys, a duplicate is reported after its value.
          bool dup = an.has(key);
          auto &cache = isArgs ? argsCache_ : outdefCache_;
          if (isArgs)
            an.argIds.clear();
          size_t len = scanValue(a.rest(), keyBuf_, isArgs ? &an.argIds : nullptr);
          if (len) {
            auto it = cache.find(keyBuf_);
            if (it != cache.end()) {
              a.setPos(a.pos() + len);
              if (dup)
                a.fail(fmt::format("duplicate annotation '{}'", key.str()), c);
              (isArgs ? an.args : an.outdef) = it->second;
              continue;
            }
          }
          if (isArgs)
            an.argIds.clear();
          size_t start = a.pos();
          PyVal v = a.value();
          // Cacheable when the scan saw exactly the value's text.
          if (dup)
            a.fail(fmt::format("duplicate annotation '{}'", key.str()), c);
          if (len && a.pos() == start + len)
            (isArgs ? an.argsKey : an.outdefKey) = keyBuf_;
          an.items.emplace_back(key, std::make_pair(std::move(v), c));
          continue;
        }
        PyVal v;
        if (key == "outs") {
          if (an.hasOuts)
            a.fail("duplicate annotation 'outs'", c);
          an.hasOuts = true;
          a.expect("[");
          bool first = true;
          while (!a.eat("]")) {
            if (!first)
              a.expect(",");
            first = false;
            size_t nc = a.col();
            int64_t nid;
            an.outs.emplace_back(makeNode(a, nid), nc);
          }
          continue;
        }
        if (key == "fn" || key == "method" || key == "opdef") {
          v.kind = PyVal::Kind::Scalar;
          v.col = vc;
          v.scalar = Scalar(a.ident());
        } else {
          v = a.value();
        }
        if (an.has(key))
          a.fail(fmt::format("duplicate annotation '{}'", key.str()), c);
        an.items.emplace_back(key, std::make_pair(std::move(v), c));
      } else {
        an.flags.push_back(key);
      }
    }
    return an;
  }

  const PyVal &need(Annot &an, const char *key, LineParser &a) {
    const auto *it = an.find(key);
    if (!it)
      a.fail(fmt::format("missing annotation '{}='", key));
    return it->first;
  }

  void exprLine(GraphState &st, llvm::StringRef visible, LineParser &a) {
    LineParser v(visible, file_, cur_ + 1);
    v.expect("%");
    int64_t id = v.id("expr id");
    v.expect(":");
    Annot an = annotations(a);
    std::unique_ptr<Expr> e;
    llvm::SmallVector<int64_t, 4> argIds;
    bool upgraded = false; // a loader rewrote the call: the printed part is the old one
    auto str = [&](const char *k) {
      const PyVal &x = need(an, k, a);
      if (x.kind != PyVal::Kind::Scalar || !x.scalar.isString())
        a.fail(fmt::format("'{}' must be a string", k), x.col);
      return x.scalar.getString();
    };
    std::optional<TreeDef> argDef;
    if (an.has("getattr")) {
      e = std::make_unique<GetAttr>(id, str("getattr"));
      const PyVal &b = need(an, "base", a);
      if (b.kind != PyVal::Kind::NodeRef)
        a.fail("base must be a node reference", b.col);
      argIds.push_back(b.nodeId);
    } else if (an.flag("call") || an.has("method") || an.has("fn")) {
      if (an.args) {
        // A cached structure: checked when it was first parsed.
        argDef = an.args;
        argIds.assign(an.argIds.begin(), an.argIds.end());
      } else {
        const PyVal &args = need(an, "args", a);
        argDef = toTreeDef(args, a, &argIds);
        if (argDef->kind() != TreeDef::Kind::Tuple || argDef->numChildren() != 2 ||
            argDef->child(0).kind() != TreeDef::Kind::Tuple ||
            argDef->child(1).kind() != TreeDef::Kind::Dict)
          a.fail("args must be (positional tuple, kwargs dict)", args.col);
        if (!an.argsKey.empty())
          argsCache_.try_emplace(an.argsKey, *argDef);
      }
      e = makeCall(an, id, *argDef, argIds, a, upgraded);
    } else if (an.has("const")) {
      std::string name = str("const");
      const PyVal &val = need(an, "value", a);
      if (val.kind == PyVal::Kind::TensorVal && val.word == "tensor") {
        e = std::make_unique<Constant>(id, tensorFrom(val, a, "constant '" + name + "'"), name);
      } else if (val.kind == PyVal::Kind::ModuleVal) {
        auto m = makeModule(val.word, "builtin", a, val.col);
        for (size_t i = 0; i < val.items.size(); ++i) {
          if (!val.keys[i].isString())
            a.fail("module attribute names must be strings", val.col);
          setAttr(*m, val.keys[i].getString(), val.items[i], a);
        }
        if (version_ < TmirVersion)
          loaders().upgradeModule(*m, version_);
        e = std::make_unique<Constant>(id, std::move(m), name);
      } else {
        a.fail("value must be tensor(...) or module(...)", val.col);
      }
    } else if (an.has("opdef")) {
      const PyVal &f = need(an, "opdef", a);
      TreeDef attrs = an.has("attrs") ? toTreeDef(need(an, "attrs", a), a)
                                           : TreeDef::dict({});
      const PyVal &inputs = need(an, "inputs", a);
      for (const auto &x : inputs.items) {
        if (x.kind != PyVal::Kind::NodeRef)
          a.fail("inputs must be node references", x.col);
        argIds.push_back(x.nodeId);
      }
      std::string oname = upgradeCall(TmirLoaderKind::OpDef, f.scalar.getString(), nullptr,
                                      &attrs, argIds, a, f.col, upgraded);
      const OpSchema *s = OpRegistry::instance().lookupOpDef(oname);
      if (!s)
        a.fail(fmt::format("unknown op def '{}'", oname), f.col);
      e = std::make_unique<Apply>(id, *s, attrs);
    } else {
      a.fail("the annotations name no expr kind (getattr=, call, method=, fn=, "
             "const=, opdef=)");
    }
    for (size_t i = 0; i < argIds.size(); ++i)
      e->addInput(useNode(st, argIds[i], a, a.col()));
    if (argDef) {
      // Parsed leaves are Tensor leaves; only module inputs need retyping.
      bool allTensors = true;
      for (size_t i = 0; i < e->numInputs(); ++i)
        allTensors &= llvm::isa<TensorNode>(e->input(i));
      if (allTensors && argDef->numLeaves() == e->numInputs()) {
        e->setArgDef(std::move(argDef));
      } else {
        size_t next = 0;
        llvm::SmallVector<Node *, 4> ins = e->inputs();
        e->setArgDef(retypeLeaves(*argDef, ins, next));
      }
    }
    if (!an.hasOuts)
      a.fail("missing annotation 'outs=[...]'");
    Expr *raw = e.get();
    for (auto &[n, c] : an.outs) {
      Node *out = raw->addOutput(std::move(n));
      defineNode(st, out, a, c);
    }
    if ((llvm::isa<GetAttr>(raw) || llvm::isa<Constant>(raw)) && raw->numOutputs() != 1)
      a.fail(fmt::format("a {} has exactly one output, not {}",
                         llvm::isa<GetAttr>(raw) ? "getattr" : "constant",
                         raw->numOutputs()));
    if (an.has("outdef")) {
      TreeDef od;
      bool tensorLeaves = true; // od's leaves are all Tensor placeholders
      if (an.outdef) {
        od = *an.outdef; // cached only when tensorLeaves
      } else {
        od = toTreeDef(need(an, "outdef", a), a);
        std::vector<TreeDef::LeafType> types;
        od.collectLeafTypes(types);
        for (auto t : types)
          tensorLeaves &= t == TreeDef::LeafType::Tensor;
        if (tensorLeaves && !an.outdefKey.empty())
          outdefCache_.try_emplace(an.outdefKey, od);
      }
      if (od.numLeaves() != raw->numOutputs())
        a.fail(fmt::format("outdef {} does not match {} outputs", od.str(),
                           raw->numOutputs()));
      bool allTensors = tensorLeaves;
      for (Node *o : raw->outputs())
        allTensors &= llvm::isa<TensorNode>(o);
      if (allTensors) {
        raw->setOutDef(std::move(od));
      } else {
        size_t next = 0;
        raw->setOutDef(retypeLeaves(od, raw->outputs(), next));
      }
    }
    if (an.flag("keep"))
      raw->disableRemove();
    for (const auto &f : an.flags)
      if (f != "keep" && f != "call")
        a.fail(fmt::format("unknown annotation '{}'", f));
    if (!defineExprId(st, id))
      v.fail(fmt::format("expr id %{} is used twice in graph '{}'", id, st.g->name()), 2);
    exprLines_.emplace_back(id, cur_);
    st.g->insertExpr(std::move(e), nullptr);
    if (upgraded)
      return;
    checkBuf_.assign(1, '\t');
    raw->print(checkBuf_);
    checkLine(visible, checkBuf_, cur_);
  }

  /// Runs the graph-header loaders of an older file; every old field must
  /// be consumed.
  void upgradeHeader(LineParser &d, std::string &name, std::string &qual, bool &hasQual,
                     std::map<std::string, std::string> legacy) {
    TmirGraphHeader h{name, qual, hasQual, std::move(legacy), version_};
    loaders().upgradeGraphHeader(h);
    if (!h.legacyFields.empty())
      d.fail(fmt::format("unknown graph field '{}' in a version-{} file",
                         h.legacyFields.begin()->first, version_));
    name = std::move(h.name);
    qual = std::move(h.qualname);
    hasQual = h.hasQualname;
  }

  /// The expr of a `fn=`, `method=` or `call` line, after the loaders of
  /// an older file ran on its name and arguments.
  std::unique_ptr<Expr> makeCall(Annot &an, int64_t id, TreeDef &argDef,
                                 llvm::SmallVectorImpl<int64_t> &argIds, LineParser &a,
                                 bool &upgraded) {
    if (!an.has("fn") && !an.has("method"))
      return std::make_unique<CallMethod>(id);
    bool isFn = an.has("fn");
    const PyVal &f = need(an, isFn ? "fn" : "method", a);
    std::string fname =
        upgradeCall(isFn ? TmirLoaderKind::Function : TmirLoaderKind::TensorMethod,
                    f.scalar.getString(), &argDef, nullptr, argIds, a, f.col, upgraded);
    const OpSchema *s = isFn ? OpRegistry::instance().lookupFunction(fname)
                             : OpRegistry::instance().lookupMethod(fname);
    if (!s)
      a.fail(fmt::format("unknown {} '{}'", isFn ? "function" : "tensor method", fname), f.col);
    if (isFn)
      return std::make_unique<CallFunction>(id, *s);
    return std::make_unique<CallMethod>(id, *s);
  }

  /// Runs the loaders of an older file on a call: `args` (calls) or the
  /// inputs in `ids` and `attrs` (op defs) may change. Returns the name to
  /// look up; sets `changed` when a loader ran.
  std::string upgradeCall(TmirLoaderKind kind, std::string name, TreeDef *args,
                          TreeDef *attrs, llvm::SmallVectorImpl<int64_t> &ids,
                          LineParser &a, size_t col, bool &changed) {
    if (version_ >= TmirVersion || !loaders().hasCallLoader(kind, name, version_))
      return name;
    TmirCall c;
    if (args) {
      c = splitCallArgs(*args, ids);
    } else {
      for (int64_t id : ids)
        c.args.push_back({TreeDef::leaf(), {id}});
      c.attrs = *attrs;
    }
    c.name = std::move(name);
    c.version = version_;
    c.loc = a.loc(col);
    loaders().upgradeCall(kind, c);
    std::vector<int64_t> nodes;
    if (args) {
      *args = joinCallArgs(c, nodes);
    } else {
      for (const TmirArg &x : c.args) {
        if (x.def.kind() != TreeDef::Kind::Leaf || x.nodes.size() != 1)
          a.fail("an op def loader left an input that is not one node", col);
        nodes.push_back(x.nodes[0]);
      }
      *attrs = c.attrs;
    }
    ids.assign(nodes.begin(), nodes.end());
    changed = true;
    return c.name;
  }

  /// line.rfind("\t;; ") without a memcmp per position.
  static size_t rfindAnnotations(llvm::StringRef line) {
    for (size_t i = line.size(); i >= 4; --i) {
      const char *p = line.data() + i - 4;
      if (p[0] == '\t' && p[1] == ';' && p[2] == ';' && p[3] == ' ')
        return i - 4;
    }
    return llvm::StringRef::npos;
  }

  void checkLine(llvm::StringRef got, const std::string &want, size_t lineIdx) {
    if (got == want)
      return;
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i])
      ++i;
    throw Error(Location::inFile(file_, int64_t(lineIdx + 1), int64_t(i + 1)),
                fmt::format("the printed form does not match the annotations: "
                            "expected '{}'",
                            want));
  }

  std::vector<llvm::StringRef> lines_;
  /// Reused buffer for the printed form of each expr line.
  std::string checkBuf_;
  std::string file_;
  const TmirReadOptions &opts_;
  SizeLimits limits_ = opts_.limits.resolved();
  ModelBytesBudget budget_{limits_};
  size_t cur_ = 0;
  int64_t version_ = TmirVersion;
  std::string weightsFile_;
  const WeightFile *weights_ = nullptr;
  WeightFile ownWeights_;
  /// (expr id, line index) in file order, to place verifier errors.
  std::vector<std::pair<int64_t, size_t>> exprLines_;
  /// Node and expr ids below denseIds_ (the `ids` line's counts, bounded by
  /// the line count) are looked up in these vectors instead of hash maps:
  /// ids are small integers, and a 10^6-expr graph's maps outgrow the
  /// caches. Entries are cleared after each graph.
  size_t denseIds_ = 0;
  std::vector<Node *> nodeById_;
  std::vector<uint8_t> exprIdSeen_;
  /// Parsed `args=` / `outdef=` TreeDefs by their text, node ids left out
  /// ("((%, 1), {})"): a graph has a handful of distinct structures, so
  /// most lines skip the generic value parser.
  llvm::StringMap<TreeDef> argsCache_, outdefCache_;
  std::string keyBuf_;
};

} // namespace

FailureOr<std::unique_ptr<TracedModule>>
parseTmir(llvm::StringRef text, llvm::StringRef filename, const TmirReadOptions &opts) {
  try {
    return FileParser(text, filename.str(), opts).run();
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

static std::string dirOf(const std::string &path) {
  size_t s = path.rfind('/');
  return s == std::string::npos ? "." : path.substr(0, s);
}

FailureOr<std::unique_ptr<TracedModule>> loadTmir(const std::string &path,
                                                  const TmirReadOptions &opts) {
  auto text = FileBytes::open(path);
  if (text.failed())
    return text.diagnostic();
  TmirReadOptions o = opts;
  o.baseDir = dirOf(path);
  return parseTmir(text->bytes(), path, o);
}

FailureOr<std::unique_ptr<TracedModule>> loadTmir(const std::string &path) {
  return loadTmir(path, TmirReadOptions());
}

FailureOr<void> saveTmir(const TracedModule &m, const std::string &path) {
  auto stream = [&](const TmirWriteOptions &o, std::ostream &out) {
    printTmir(m, o, [&](llvm::StringRef piece) {
      out.write(piece.data(), std::streamsize(piece.size()));
    });
  };
  // A device or a FIFO (/dev/null, a pipe) has no directory entry beside
  // it for the weights: they go inline, as on stdout.
  if (isSpecialFile(path)) {
    TmirWriteOptions o;
    o.inlineMaxElements = std::numeric_limits<int64_t>::max();
    return writeFileWith(path, [&](std::ostream &out) { stream(o, out); });
  }
  std::string stem = path;
  if (llvm::StringRef(stem).endswith(".tmir"))
    stem.resize(stem.size() - 5);
  std::string weightsPath = stem + ".safetensors";
  size_t slash = weightsPath.rfind('/');
  WeightFile w;
  w.metadata["format"] = "tmgraph";
  TmirWriteOptions o;
  o.weights = &w;
  o.weightsFile = slash == std::string::npos ? weightsPath : weightsPath.substr(slash + 1);
  // The text streams to its temporary file as it is printed; the weights it
  // collected are written before the text is renamed into place.
  return writeFileWith(path, [&](std::ostream &out) {
    stream(o, out);
    if (auto r = writeSafetensors(weightsPath, w); r.failed())
      throw Error(r.diagnostic());
  });
}

} // namespace tmg

namespace tmg {

FailureOr<void> writeReproducer(const std::string &path, const TracedModule &m,
                                const std::string &pipeline) {
  std::string model = path + ".tmir";
  if (auto r = saveTmir(m, model); r.failed())
    return r;
  size_t slash = model.rfind('/');
  std::string text = "tmgraph-reproducer 1\nmodel " +
                     pyStringRepr(slash == std::string::npos ? model : model.substr(slash + 1)) +
                     "\npipeline " + pyStringRepr(pipeline) + "\n";
  return writeFileBytes(path, text);
}

FailureOr<std::pair<std::unique_ptr<TracedModule>, std::string>>
readReproducer(const std::string &path) {
  auto text = readFileBytes(path);
  if (text.failed())
    return text.diagnostic();
  llvm::SmallVector<llvm::StringRef, 4> lines;
  llvm::StringRef(*text).split(lines, '\n', -1, false);
  if (lines.size() != 3 || lines[0] != "tmgraph-reproducer 1")
    return Diagnostic(Location::inFile(path, 1, 1),
                      "not a tmgraph reproducer (expected 'tmgraph-reproducer 1', "
                      "'model ...' and 'pipeline ...' lines)");
  try {
    LineParser m(lines[1], path, 2), p(lines[2], path, 3);
    m.expect("model");
    std::string model = m.string();
    p.expect("pipeline");
    std::string pipeline = p.string();
    size_t slash = path.rfind('/');
    std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
    auto mod = loadTmir(model[0] == '/' ? model : dir + "/" + model);
    if (mod.failed())
      return mod.diagnostic();
    return std::make_pair(std::move(*mod), pipeline);
  } catch (const Error &e) {
    return e.diagnostic();
  }
}

} // namespace tmg
