//===- RuleParser.cpp - Parsing rule texts --------------------------------===//
#include <cctype>
#include <cstdlib>

#include "RuleAst.h"
#include "tm/ir/Suggest.h"

namespace tmg::rules {

Location Source::at(size_t off) const {
  Location l = loc;
  if (l.line == 0)
    return l;
  for (size_t i = 0; i < off && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++l.line;
      l.column = 1;
    } else {
      ++l.column;
    }
  }
  return l;
}

void Source::error(size_t off, const std::string &msg) const { throw Error(at(off), msg); }

namespace {

struct Tok {
  enum K : uint8_t { End, Ident, Int, Float, Str, Punct };
  K k = End;
  size_t pos = 0;
  std::string text;
};

class Lexer {
public:
  explicit Lexer(const Source &s) : src_(s) { advance(); }
  const Tok &peek() const { return tok_; }
  Tok take() {
    Tok t = tok_;
    advance();
    return t;
  }
  bool isPunct(llvm::StringRef p) const { return tok_.k == Tok::Punct && tok_.text == p; }
  bool accept(llvm::StringRef p) {
    if (!isPunct(p))
      return false;
    advance();
    return true;
  }
  void expect(llvm::StringRef p, const char *what) {
    if (!accept(p))
      src_.error(tok_.pos, fmt::format("expected '{}' {}, found {}", p.str(), what, describe()));
  }
  std::string describe() const {
    switch (tok_.k) {
    case Tok::End: return "the end of the text";
    case Tok::Str: return "a string";
    default: return "'" + tok_.text + "'";
    }
  }
  /// The token after the current one is `p` (for `name=` lookahead).
  bool nextIsPunct(llvm::StringRef p) const {
    size_t i = pos_;
    while (i < src_.text.size() && std::isspace((unsigned char)src_.text[i]))
      ++i;
    if (!src_.text.substr(i).startswith(p))
      return false;
    // `==` is not `=`.
    return !(p == "=" && src_.text.substr(i).startswith("=="));
  }
  const Source &src() const { return src_; }

private:
  void advance() {
    llvm::StringRef t = src_.text;
    while (pos_ < t.size() && std::isspace((unsigned char)t[pos_]))
      ++pos_;
    tok_ = Tok{};
    tok_.pos = pos_;
    if (pos_ >= t.size())
      return;
    char c = t[pos_];
    if (std::isalpha((unsigned char)c) || c == '_') {
      size_t s = pos_;
      while (pos_ < t.size() && (std::isalnum((unsigned char)t[pos_]) || t[pos_] == '_'))
        ++pos_;
      tok_.k = Tok::Ident;
      tok_.text = t.substr(s, pos_ - s).str();
      return;
    }
    if (std::isdigit((unsigned char)c) ||
        (c == '.' && pos_ + 1 < t.size() && std::isdigit((unsigned char)t[pos_ + 1]))) {
      size_t s = pos_;
      bool isFloat = false;
      while (pos_ < t.size() && std::isdigit((unsigned char)t[pos_]))
        ++pos_;
      if (pos_ < t.size() && t[pos_] == '.' && !t.substr(pos_).startswith("...")) {
        isFloat = true;
        ++pos_;
        while (pos_ < t.size() && std::isdigit((unsigned char)t[pos_]))
          ++pos_;
      }
      if (pos_ < t.size() && (t[pos_] == 'e' || t[pos_] == 'E')) {
        size_t e = pos_ + 1;
        if (e < t.size() && (t[e] == '+' || t[e] == '-'))
          ++e;
        if (e < t.size() && std::isdigit((unsigned char)t[e])) {
          isFloat = true;
          pos_ = e;
          while (pos_ < t.size() && std::isdigit((unsigned char)t[pos_]))
            ++pos_;
        }
      }
      tok_.k = isFloat ? Tok::Float : Tok::Int;
      tok_.text = t.substr(s, pos_ - s).str();
      return;
    }
    if (c == '\'' || c == '"') {
      size_t s = pos_++;
      std::string v;
      while (pos_ < t.size() && t[pos_] != c) {
        if (t[pos_] == '\\' && pos_ + 1 < t.size())
          ++pos_;
        v += t[pos_++];
      }
      if (pos_ >= t.size())
        src_.error(s, "unterminated string");
      ++pos_;
      tok_.k = Tok::Str;
      tok_.text = v;
      return;
    }
    static const char *puncts[] = {"...", "==", "!=", "<=", ">=", "(", ")", ",", ".", "=", "|",
                                   "+",   "-",  "*",  "/",  "$",  "[", "]", "<", ">"};
    for (const char *p : puncts)
      if (t.substr(pos_).startswith(p)) {
        tok_.k = Tok::Punct;
        tok_.text = p;
        pos_ += std::strlen(p);
        return;
      }
    src_.error(pos_, fmt::format("unexpected character '{}'", c));
  }

  const Source &src_;
  size_t pos_ = 0;
  Tok tok_;
};

std::unique_ptr<Ast> node(Ast::K k, size_t pos) {
  auto a = std::make_unique<Ast>();
  a->k = k;
  a->pos = pos;
  return a;
}

std::unique_ptr<Ast> call(const OpSchema &s, size_t pos) {
  auto a = node(Ast::K::Call, pos);
  a->schema = &s;
  return a;
}

std::vector<std::string> allOpNames() {
  std::vector<std::string> names;
  for (const OpSchema *s : OpRegistry::instance().all())
    names.push_back(s->opClass() == OpClass::Function ? s->printName().str() : s->name().str());
  for (const ModuleType *t : ModuleTypeRegistry::instance().all())
    names.push_back(t->name);
  return names;
}

class Parser {
public:
  explicit Parser(const Source &s) : lex_(s), src_(s) {}

  std::unique_ptr<Ast> parseTop() {
    auto a = parseAlt();
    if (lex_.peek().k != Tok::End)
      src_.error(lex_.peek().pos, fmt::format("unexpected {} after the expression",
                                              lex_.describe()));
    return a;
  }

  std::unique_ptr<Ast> parseAlt() {
    auto first = parseSum();
    if (!lex_.isPunct("|"))
      return first;
    auto o = node(Ast::K::Or, first->pos);
    o->alts.push_back(std::move(first));
    while (lex_.accept("|"))
      o->alts.push_back(parseSum());
    return o;
  }

  std::unique_ptr<Ast> binary(OpKind k, std::unique_ptr<Ast> l, std::unique_ptr<Ast> r,
                              size_t pos) {
    auto c = call(tmg::op(k), pos);
    c->args.push_back(std::move(l));
    c->args.push_back(std::move(r));
    return c;
  }

  std::unique_ptr<Ast> parseSum() {
    auto l = parseProduct();
    for (;;) {
      size_t pos = lex_.peek().pos;
      if (lex_.accept("+"))
        l = binary(OpKind::MAdd, std::move(l), parseProduct(), pos);
      else if (lex_.accept("-"))
        l = binary(OpKind::MSub, std::move(l), parseProduct(), pos);
      else
        return l;
    }
  }

  std::unique_ptr<Ast> parseProduct() {
    auto l = parseUnary();
    for (;;) {
      size_t pos = lex_.peek().pos;
      if (lex_.accept("*"))
        l = binary(OpKind::MMul, std::move(l), parseUnary(), pos);
      else if (lex_.accept("/"))
        l = binary(OpKind::MTrueDiv, std::move(l), parseUnary(), pos);
      else
        return l;
    }
  }

  /// Bounds the recursion (every cycle of the grammar passes through
  /// parseUnary or parsePostfix): deep nesting is an error at its place,
  /// not a stack overflow. Found by fuzz_rules.
  static constexpr size_t MaxDepth = 200;
  struct Nest {
    Parser &p;
    Nest(Parser &p) : p(p) {
      if (++p.depth_ > MaxDepth) {
        --p.depth_;
        p.src_.error(p.lex_.peek().pos,
                     fmt::format("the expression nests deeper than {} levels", MaxDepth));
      }
    }
    ~Nest() { --p.depth_; }
  };

  std::unique_ptr<Ast> parseUnary() {
    Nest nest(*this);
    size_t pos = lex_.peek().pos;
    if (lex_.accept("-")) {
      auto x = parseUnary();
      if (x->k == Ast::K::Lit && x->literal.isConst() && x->literal.value().isInt()) {
        x->literal = TreeDef::constant(Scalar(-x->literal.value().getInt()));
        x->pos = pos;
        return x;
      }
      if (x->k == Ast::K::Lit && x->literal.isConst() && x->literal.value().isFloat()) {
        x->literal = TreeDef::constant(Scalar(-x->literal.value().getFloat()));
        x->pos = pos;
        return x;
      }
      auto c = call(tmg::op(OpKind::MNeg), pos);
      c->args.push_back(std::move(x));
      return c;
    }
    return parsePostfix();
  }

  TreeDef literalArg(const char *what) {
    size_t pos = lex_.peek().pos;
    auto a = parseAlt();
    if (a->k != Ast::K::Lit)
      src_.error(pos, fmt::format("{} expects a literal", what));
    return a->literal;
  }

  std::unique_ptr<Ast> parsePostfix() {
    Nest nest(*this);
    auto a = parsePrimary();
    while (lex_.isPunct(".")) {
      lex_.take();
      Tok id = lex_.take();
      if (id.k != Tok::Ident)
        src_.error(id.pos, "expected a method or modifier name after '.'");
      const std::string &n = id.text;
      if (n == "output" || n == "has_attr" || n == "check_users" || n == "ordered") {
        lex_.expect("(", fmt::format("after '{}'", n).c_str());
        a->hasModifiers = true;
        if (n == "output") {
          Tok t = lex_.take();
          if (t.k != Tok::Int)
            src_.error(t.pos, "output() expects an output index");
          if (a->k != Ast::K::Call)
            src_.error(id.pos, "output() applies to an op pattern");
          a->output = std::atoi(t.text.c_str());
        } else if (n == "check_users") {
          Tok t = lex_.take();
          if (t.k != Tok::Ident || (t.text != "true" && t.text != "false" && t.text != "True" &&
                                    t.text != "False"))
            src_.error(t.pos, "check_users() expects true or false");
          a->checkUsers = t.text == "true" || t.text == "True";
        } else if (n == "ordered") {
          if (a->k != Ast::K::Call)
            src_.error(id.pos, "ordered() applies to an op pattern");
          a->ordered = true;
        } else {
          if (a->k != Ast::K::Call || a->target == pat::PatternNode::OpTarget::Schema)
            src_.error(id.pos, "has_attr() applies to a module pattern");
          do {
            Tok k = lex_.take();
            if (k.k != Tok::Ident)
              src_.error(k.pos, "has_attr() expects name=value pairs");
            lex_.expect("=", "after the attribute name");
            a->attrs.emplace_back(k.text, literalArg("has_attr()"));
          } while (lex_.accept(","));
        }
        lex_.expect(")", fmt::format("to close '{}('", n).c_str());
        continue;
      }
      const OpSchema *m = OpRegistry::instance().lookupMethod(n);
      if (!m) {
        std::vector<std::string> names;
        for (const OpSchema *s : OpRegistry::instance().all())
          if (s->opClass() == OpClass::TensorMethod)
            names.push_back(s->name().str());
        src_.error(id.pos, fmt::format("unknown tensor method '{}'; did you mean '{}'?", n,
                                       closestName(n, names)));
      }
      auto c = call(*m, id.pos);
      c->args.push_back(std::move(a));
      parseArgs(*c);
      a = std::move(c);
    }
    return a;
  }

  void parseArgs(Ast &c) {
    lex_.expect("(", "to start the arguments");
    if (lex_.accept(")"))
      return;
    do {
      size_t pos = lex_.peek().pos;
      if (lex_.accept("...")) {
        c.prefix = true;
        if (!lex_.isPunct(")"))
          src_.error(lex_.peek().pos, "'...' must be the last argument");
        break;
      }
      if (lex_.peek().k == Tok::Ident && lex_.nextIsPunct("=")) {
        Tok k = lex_.take();
        lex_.expect("=", "after the parameter name");
        c.kwargs.push_back({k.text, k.pos, parseAlt()});
        continue;
      }
      if (!c.kwargs.empty())
        src_.error(pos, "a positional argument follows a keyword argument");
      c.args.push_back(parseAlt());
    } while (lex_.accept(","));
    lex_.expect(")", "to close the arguments");
  }

  std::unique_ptr<Ast> lit(TreeDef v, size_t pos) {
    auto a = node(Ast::K::Lit, pos);
    a->literal = std::move(v);
    return a;
  }

  std::unique_ptr<Ast> parsePrimary() {
    Tok t = lex_.peek();
    switch (t.k) {
    case Tok::End:
      src_.error(t.pos, "expected a pattern, found the end of the text");
    case Tok::Int:
      lex_.take();
      return lit(TreeDef::constant(Scalar(int64_t(std::strtoll(t.text.c_str(), nullptr, 10)))),
                 t.pos);
    case Tok::Float:
      lex_.take();
      return lit(TreeDef::constant(Scalar(std::strtod(t.text.c_str(), nullptr))), t.pos);
    case Tok::Str:
      lex_.take();
      return lit(TreeDef::constant(Scalar(t.text)), t.pos);
    case Tok::Punct:
      if (lex_.accept("$")) {
        Tok n = lex_.take();
        if (n.k != Tok::Ident)
          src_.error(n.pos, "expected a capture name after '$'");
        auto c = node(Ast::K::Capture, t.pos);
        c->name = n.text;
        if (lex_.accept("="))
          c->inner = parsePostfix();
        return c;
      }
      if (lex_.accept("*"))
        return node(Ast::K::Any, t.pos);
      if (lex_.accept("(")) {
        auto first = parseAlt();
        if (!lex_.isPunct(",")) {
          lex_.expect(")", "to close '('");
          return first;
        }
        std::vector<TreeDef> items;
        auto add = [&](std::unique_ptr<Ast> a) {
          if (a->k != Ast::K::Lit)
            src_.error(a->pos, "tuples may hold literals only");
          items.push_back(a->literal);
        };
        add(std::move(first));
        while (lex_.accept(",")) {
          if (lex_.isPunct(")"))
            break;
          add(parseAlt());
        }
        lex_.expect(")", "to close the tuple");
        return lit(TreeDef::tuple(std::move(items)), t.pos);
      }
      src_.error(t.pos, fmt::format("expected a pattern, found {}", lex_.describe()));
    case Tok::Ident:
      break;
    }
    lex_.take();
    const std::string &w = t.text;
    if (w == "None")
      return lit(TreeDef::constant(Scalar()), t.pos);
    if (w == "True" || w == "true")
      return lit(TreeDef::constant(Scalar(true)), t.pos);
    if (w == "False" || w == "false")
      return lit(TreeDef::constant(Scalar(false)), t.pos);
    if (!lex_.isPunct("(")) {
      if (w == "_")
        return node(Ast::K::Any, t.pos);
      if (w == "var")
        return node(Ast::K::Var, t.pos);
      if (w == "const")
        return node(Ast::K::Const, t.pos);
      if (w == "lit")
        return node(Ast::K::LitAny, t.pos);
    }
    // A callee: `a.b.c(` is a qualified function; `name(` a bare name.
    std::string name = w;
    bool dotted = false;
    while (lex_.isPunct(".")) {
      lex_.take();
      Tok n = lex_.take();
      if (n.k != Tok::Ident)
        src_.error(n.pos, "expected a name after '.'");
      name += "." + n.text;
      dotted = true;
    }
    if (!lex_.isPunct("("))
      src_.error(lex_.peek().pos,
                 fmt::format("expected '(' after '{}' (an op), found {}", name, lex_.describe()));
    std::unique_ptr<Ast> c;
    if (dotted) {
      const OpSchema *s = OpRegistry::instance().lookupFunction(name);
      if (!s)
        src_.error(t.pos, fmt::format("unknown function '{}'; did you mean '{}'?", name,
                                      closestName(name, allOpNames())));
      c = call(*s, t.pos);
    } else if (name == "module") {
      c = node(Ast::K::Call, t.pos);
      c->target = pat::PatternNode::OpTarget::AnyModule;
    } else if (const ModuleType *mt = ModuleTypeRegistry::instance().lookup(name)) {
      c = node(Ast::K::Call, t.pos);
      c->target = pat::PatternNode::OpTarget::Module;
      c->module = mt;
    } else if (const OpSchema *s = OpRegistry::instance().lookupMethod(name)) {
      c = call(*s, t.pos);
    } else if (const OpSchema *s2 = OpRegistry::instance().lookupOpDef(name)) {
      c = call(*s2, t.pos);
    } else if (const OpSchema *s3 = OpRegistry::instance().lookupFunction(name)) {
      c = call(*s3, t.pos);
    } else {
      src_.error(t.pos, fmt::format("unknown op '{}'; did you mean '{}'?", name,
                                    closestName(name, allOpNames())));
    }
    parseArgs(*c);
    return c;
  }

private:
  Lexer lex_;
  const Source &src_;
  size_t depth_ = 0;
};

} // namespace

std::unique_ptr<Ast> parseExpr(const Source &src) {
  Parser p(src);
  return p.parseTop();
}

WhereClause parseWhere(const Source &src) {
  Lexer lex(src);
  WhereClause w;
  w.text = src.text.str();
  auto operand = [&](WhereOperand &o) {
    Tok t = lex.peek();
    o.pos = t.pos;
    if (lex.accept("$")) {
      Tok n = lex.take();
      if (n.k != Tok::Ident)
        src.error(n.pos, "expected a capture name after '$'");
      o.isCapture = true;
      o.capture = n.text;
      if (lex.accept(".")) {
        Tok p = lex.take();
        static const std::vector<std::string> props = {"rank", "shape", "dtype", "value",
                                                       "users"};
        if (p.k != Tok::Ident ||
            std::find(props.begin(), props.end(), p.text) == props.end())
          src.error(p.pos, fmt::format("unknown property '{}'; did you mean '{}'? (rank, "
                                       "shape, dtype, value, users)",
                                       p.text, closestName(p.text, props)));
        o.prop = p.text;
        if (lex.accept("[")) {
          Tok i = lex.peek();
          bool neg = lex.accept("-");
          i = lex.take();
          if (i.k != Tok::Int || o.prop != "shape")
            src.error(i.pos, "only shape takes an index: $x.shape[i]");
          o.index = std::strtoll(i.text.c_str(), nullptr, 10) * (neg ? -1 : 1);
          lex.expect("]", "to close the index");
        }
      }
      return;
    }
    // Literals: numbers, strings, tuples, None/True/False, bare words.
    bool neg = lex.accept("-");
    Tok v = lex.take();
    switch (v.k) {
    case Tok::Int:
      o.literal = TreeDef::constant(
          Scalar(int64_t(std::strtoll(v.text.c_str(), nullptr, 10)) * (neg ? -1 : 1)));
      return;
    case Tok::Float:
      o.literal = TreeDef::constant(Scalar(std::strtod(v.text.c_str(), nullptr) * (neg ? -1 : 1)));
      return;
    case Tok::Str:
      o.literal = TreeDef::constant(Scalar(v.text));
      return;
    case Tok::Ident:
      if (v.text == "None")
        o.literal = TreeDef::constant(Scalar());
      else if (v.text == "True" || v.text == "true")
        o.literal = TreeDef::constant(Scalar(true));
      else if (v.text == "False" || v.text == "false")
        o.literal = TreeDef::constant(Scalar(false));
      else {
        o.literal = TreeDef::constant(Scalar(v.text));
        o.bareWord = true;
      }
      return;
    case Tok::Punct:
      if (v.text == "(") {
        std::vector<TreeDef> items;
        while (!lex.accept(")")) {
          bool n2 = lex.accept("-");
          Tok x = lex.take();
          if (x.k == Tok::Int)
            items.push_back(TreeDef::constant(
                Scalar(int64_t(std::strtoll(x.text.c_str(), nullptr, 10)) * (n2 ? -1 : 1))));
          else if (x.k == Tok::Float)
            items.push_back(
                TreeDef::constant(Scalar(std::strtod(x.text.c_str(), nullptr) * (n2 ? -1 : 1))));
          else
            src.error(x.pos, "tuples in 'where' hold numbers only");
          if (!lex.accept(",")) {
            lex.expect(")", "to close the tuple");
            break;
          }
        }
        o.literal = TreeDef::tuple(std::move(items));
        return;
      }
      [[fallthrough]];
    default:
      src.error(v.pos, fmt::format("expected '$name' or a literal, found '{}'", v.text));
    }
  };
  operand(w.lhs);
  Tok op = lex.take();
  static const std::vector<std::string> ops = {"==", "!=", "<", "<=", ">", ">="};
  if (op.k != Tok::Punct || std::find(ops.begin(), ops.end(), op.text) == ops.end())
    src.error(op.pos, "expected a comparison (== != < <= > >=)");
  w.op = op.text;
  operand(w.rhs);
  if (lex.peek().k != Tok::End)
    src.error(lex.peek().pos, "unexpected text after the comparison");
  return w;
}

} // namespace tmg::rules
