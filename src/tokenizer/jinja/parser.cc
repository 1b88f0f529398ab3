#include "tokenizer/jinja/parser.h"

#include <initializer_list>

namespace trine::jinja {
namespace {

using T = Token::Type;

// Nesting deeper than this is refused: it guards the recursive descent's stack against inputs like
// "((((((...". Real templates nest a few levels.
constexpr int kMaxDepth = 200;
// Expression trees deeper than this are refused: chains such as 1+1+1+... or a.b.c.d... build
// them without recursion here, but evaluating and freeing them recurses.
constexpr int kMaxExprDepth = 400;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : t_(tokens) {}

  Body ParseTemplate() {
    std::string end_tag;
    Body body = ParseBody({}, &end_tag);
    return body;
  }

 private:
  const Token& Cur() const { return t_[pos_]; }
  const Token& Next() const { return t_[pos_ + 1 < t_.size() ? pos_ + 1 : pos_]; }
  bool IsOp(const char* op) const { return Cur().type == T::kOp && Cur().text == op; }
  bool IsName(const char* name) const { return Cur().type == T::kName && Cur().text == name; }
  void Advance() {
    if (pos_ + 1 < t_.size()) ++pos_;
  }

  [[noreturn]] void Fail(const std::string& what) const { throw Error(what, Cur().line); }

  std::string Describe(const Token& t) const {
    switch (t.type) {
      case T::kText: return "text";
      case T::kExprOpen: return "'{{'";
      case T::kExprClose: return "'}}'";
      case T::kStmtOpen: return "'{%'";
      case T::kStmtClose: return "'%}'";
      case T::kName: return "'" + t.text + "'";
      case T::kString: return "a string";
      case T::kInt:
      case T::kFloat: return "the number " + t.text;
      case T::kOp: return "'" + t.text + "'";
      case T::kEnd: return "the end of the template";
    }
    return "?";
  }

  void ExpectOp(const char* op) {
    if (!IsOp(op)) Fail(std::string("expected '") + op + "', found " + Describe(Cur()));
    Advance();
  }
  void ExpectStmtClose(const char* stmt) {
    if (Cur().type != T::kStmtClose) Fail(std::string("expected '%}' to end {% ") + stmt + " %}, found " + Describe(Cur()));
    Advance();
  }
  std::string ExpectName(const char* what) {
    if (Cur().type != T::kName) Fail(std::string("expected ") + what + ", found " + Describe(Cur()));
    std::string n = Cur().text;
    Advance();
    return n;
  }

  struct DepthGuard {
    explicit DepthGuard(Parser* parser) : p(parser) {
      if (++p->depth_ > kMaxDepth) p->Fail("template nested too deeply (more than 200 levels)");
    }
    ~DepthGuard() { --p->depth_; }
    Parser* p;
  };

  // Parses nodes until a {% tag %} whose name is in `ends` (left after its name) or the end.
  Body ParseBody(std::initializer_list<const char*> ends, std::string* end_tag) {
    DepthGuard guard(this);
    Body body;
    while (true) {
      const Token& tok = Cur();
      if (tok.type == T::kEnd) {
        if (ends.size() != 0) {
          std::string want;
          for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "{% " + e + " %}";
          Fail("unexpected end of template: expected " + want);
        }
        end_tag->clear();
        return body;
      }
      if (tok.type == T::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->line = tok.line;
        n->text = tok.text;
        body.push_back(std::move(n));
        Advance();
      } else if (tok.type == T::kExprOpen) {
        Advance();
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = Cur().line;
        n->expr = ParseExpression();
        if (Cur().type != T::kExprClose) Fail("expected '}}', found " + Describe(Cur()));
        Advance();
        body.push_back(std::move(n));
      } else if (tok.type == T::kStmtOpen) {
        Advance();
        if (Cur().type != T::kName) Fail("expected a statement name after '{%', found " + Describe(Cur()));
        const std::string name = Cur().text;
        for (const char* e : ends) {
          if (name == e) {
            Advance();
            *end_tag = name;
            return body;
          }
        }
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected " + Describe(tok));
      }
    }
  }

  NodePtr ParseStatement() {
    const std::string name = Cur().text;
    const int line = Cur().line;
    auto n = std::make_unique<Node>();
    n->line = line;
    Advance();
    if (name == "if") {
      n->kind = Node::Kind::kIf;
      ExprPtr cond = ParseExpression();
      ExpectStmtClose("if");
      while (true) {
        std::string end;
        Body b = ParseBody({"elif", "else", "endif"}, &end);
        n->branches.emplace_back(std::move(cond), std::move(b));
        if (end == "endif") break;
        if (end == "elif") {
          cond = ParseExpression();
          ExpectStmtClose("elif");
        } else {
          ExpectStmtClose("else");
          Body eb = ParseBody({"endif"}, &end);
          n->branches.emplace_back(nullptr, std::move(eb));
          break;
        }
      }
      ExpectStmtClose("endif");
    } else if (name == "for") {
      n->kind = Node::Kind::kFor;
      n->targets = ParseTargets();
      if (!IsName("in")) Fail("expected 'in' in {% for %}, found " + Describe(Cur()));
      Advance();
      n->expr = ParseOr();
      if (IsName("if")) {
        Advance();
        n->cond = ParseExpression();
      }
      if (IsName("recursive")) Fail("recursive for loops are not supported");
      ExpectStmtClose("for");
      std::string end;
      n->body = ParseBody({"else", "endfor"}, &end);
      if (end == "else") {
        ExpectStmtClose("else");
        n->else_body = ParseBody({"endfor"}, &end);
      }
      ExpectStmtClose("endfor");
    } else if (name == "set") {
      ParseSet(n.get());
    } else if (name == "macro") {
      n->kind = Node::Kind::kMacro;
      n->text = ExpectName("a macro name");
      ParseParams(n.get());
      ExpectStmtClose("macro");
      std::string end;
      n->body = ParseBody({"endmacro"}, &end);
      if (Cur().type == T::kName) Advance();  // {% endmacro name %}
      ExpectStmtClose("endmacro");
    } else if (name == "call") {
      n->kind = Node::Kind::kCallBlock;
      if (IsOp("(")) ParseParams(n.get());
      n->expr = ParseExpression();
      if (n->expr->kind != Expr::Kind::kCall) Fail("{% call %} needs a macro call");
      ExpectStmtClose("call");
      std::string end;
      n->body = ParseBody({"endcall"}, &end);
      ExpectStmtClose("endcall");
    } else if (name == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      n->expr = ParseFilterChain(nullptr);
      ExpectStmtClose("filter");
      std::string end;
      n->body = ParseBody({"endfilter"}, &end);
      ExpectStmtClose("endfilter");
    } else if (name == "break" || name == "continue") {
      n->kind = name == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      ExpectStmtClose(name.c_str());
    } else if (name == "generation") {
      // Hugging Face's marker around assistant text (for training masks); renders its body.
      n->kind = Node::Kind::kScope;
      ExpectStmtClose("generation");
      std::string end;
      n->body = ParseBody({"endgeneration"}, &end);
      ExpectStmtClose("endgeneration");
    } else if (name == "extends" || name == "include" || name == "import" || name == "from" || name == "block") {
      Fail("{% " + name + " %} is not supported: a chat template is one self-contained template");
    } else {
      Fail("unknown statement {% " + name + " %}");
    }
    return n;
  }

  std::vector<std::string> ParseTargets() {
    std::vector<std::string> targets;
    const bool paren = IsOp("(");
    if (paren) Advance();
    targets.push_back(ExpectName("a loop variable"));
    while (IsOp(",")) {
      Advance();
      targets.push_back(ExpectName("a loop variable"));
    }
    if (paren) ExpectOp(")");
    return targets;
  }

  void ParseSet(Node* n) {
    const std::string first = ExpectName("a variable name after {% set");
    if (IsOp(".")) {
      Advance();
      n->kind = Node::Kind::kSet;
      n->target_object = first;
      n->target_attr = ExpectName("an attribute name");
      ExpectOp("=");
      n->expr = ParseExpression();
      ExpectStmtClose("set");
      return;
    }
    n->targets.push_back(first);
    while (IsOp(",")) {
      Advance();
      n->targets.push_back(ExpectName("a variable name"));
    }
    if (IsOp("=")) {
      Advance();
      n->kind = Node::Kind::kSet;
      n->expr = ParseTupleOrExpression();
      ExpectStmtClose("set");
      return;
    }
    if (n->targets.size() != 1) Fail("a {% set %} block assigns one variable");
    n->kind = Node::Kind::kSetBlock;
    if (IsOp("|")) {
      Advance();
      n->cond = ParseFilterChain(nullptr);
    }
    ExpectStmtClose("set");
    std::string end;
    n->body = ParseBody({"endset"}, &end);
    ExpectStmtClose("endset");
  }

  void ParseParams(Node* n) {
    ExpectOp("(");
    while (!IsOp(")")) {
      std::string p = ExpectName("a parameter name");
      ExprPtr def;
      if (IsOp("=")) {
        Advance();
        def = ParseExpression();
      }
      n->params.emplace_back(std::move(p), std::move(def));
      if (!IsOp(",")) break;
      Advance();
    }
    ExpectOp(")");
  }

  // ---- Expressions -------------------------------------------------------------------------------

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  ExprPtr ParseTupleOrExpression() {
    ExprPtr first = ParseExpression();
    if (!IsOp(",")) return first;
    ExprPtr tuple = Make(Expr::Kind::kTuple, first->line);
    tuple->kids.push_back(std::move(first));
    while (IsOp(",")) {
      Advance();
      if (Cur().type == T::kStmtClose) break;
      tuple->kids.push_back(ParseExpression());
    }
    return tuple;
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(this);
    ExprPtr e = ParseOr();
    while (IsName("if")) {
      const int line = Cur().line;
      Advance();
      ExprPtr c = Make(Expr::Kind::kCondition, line);
      c->kids.push_back(ParseOr());
      c->kids.push_back(std::move(e));
      if (IsName("else")) {
        Advance();
        c->kids.push_back(ParseExpression());
      } else {
        c->kids.push_back(nullptr);
      }
      e = Deepen(std::move(c));
    }
    return e;
  }

  // Sets e's depth from its children's.
  ExprPtr Deepen(ExprPtr e) {
    for (const auto& k : e->kids) {
      if (k && k->depth + 1 > e->depth) e->depth = k->depth + 1;
    }
    if (e->depth > kMaxExprDepth) Fail("expression nested too deeply (more than 400 levels)");
    return e;
  }

  ExprPtr Binary(const std::string& op, ExprPtr lhs, ExprPtr rhs, int line) {
    ExprPtr b = Make(Expr::Kind::kBinary, line);
    b->name = op;
    b->kids.push_back(std::move(lhs));
    b->kids.push_back(std::move(rhs));
    return Deepen(std::move(b));
  }

  // One left-associative level of binary operators: `next` (op `next`)*, where `is_name` says the
  // operators are words (or, and) rather than symbols.
  ExprPtr ParseLevel(std::initializer_list<const char*> ops, bool is_name, ExprPtr (Parser::*next)()) {
    ExprPtr e = (this->*next)();
    while (true) {
      const char* op = nullptr;
      for (const char* o : ops) {
        if (is_name ? IsName(o) : IsOp(o)) op = o;
      }
      if (op == nullptr) return e;
      const int line = Cur().line;
      Advance();
      e = Binary(op, std::move(e), (this->*next)(), line);
    }
  }

  ExprPtr ParseOr() { return ParseLevel({"or"}, true, &Parser::ParseAnd); }
  ExprPtr ParseAnd() { return ParseLevel({"and"}, true, &Parser::ParseNot); }

  ExprPtr ParseNot() {
    DepthGuard guard(this);
    if (IsName("not")) {
      ExprPtr u = Make(Expr::Kind::kUnary, Cur().line);
      Advance();
      u->name = "not";
      u->kids.push_back(ParseNot());
      return Deepen(std::move(u));
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    ExprPtr e = ParseMath1();
    while (true) {
      const int line = Cur().line;
      if (Cur().type == T::kOp && (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" ||
                                   Cur().text == ">" || Cur().text == "<=" || Cur().text == ">=")) {
        const std::string op = Cur().text;
        Advance();
        e = Binary(op, std::move(e), ParseMath1(), line);
      } else if (IsName("in")) {
        Advance();
        e = Binary("in", std::move(e), ParseMath1(), line);
      } else if (IsName("not") && Next().type == T::kName && Next().text == "in") {
        Advance();
        Advance();
        e = Binary("not in", std::move(e), ParseMath1(), line);
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseMath1() { return ParseLevel({"+", "-"}, false, &Parser::ParseConcat); }
  ExprPtr ParseConcat() { return ParseLevel({"~"}, false, &Parser::ParseMath2); }
  ExprPtr ParseMath2() { return ParseLevel({"*", "/", "//", "%"}, false, &Parser::ParsePow); }
  ExprPtr ParsePow() { return ParseLevel({"**"}, false, &Parser::ParseUnaryWithFilters); }
  ExprPtr ParseUnaryWithFilters() { return ParseUnary(true); }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this);
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Make(Expr::Kind::kUnary, Cur().line);
      e->name = Cur().text;
      Advance();
      e->kids.push_back(ParseUnary(false));
      e = Deepen(std::move(e));
    } else {
      e = ParsePrimary();
    }
    e = ParsePostfix(std::move(e));
    if (with_filter) e = ParseFilterAndTest(std::move(e));
    return e;
  }

  ExprPtr ParsePrimary() {
    const Token& tok = Cur();
    const int line = tok.line;
    if (tok.type == T::kName) {
      ExprPtr e;
      const std::string& n = tok.text;
      if (n == "true" || n == "True" || n == "false" || n == "False") {
        e = Make(Expr::Kind::kLiteral, line);
        e->literal = Value(n == "true" || n == "True");
      } else if (n == "none" || n == "None") {
        e = Make(Expr::Kind::kLiteral, line);
        e->literal = Value::None();
      } else {
        e = Make(Expr::Kind::kName, line);
        e->name = n;
      }
      Advance();
      return e;
    }
    if (tok.type == T::kString) {
      std::string s = tok.text;
      Advance();
      while (Cur().type == T::kString) {  // adjacent literals concatenate
        s += Cur().text;
        Advance();
      }
      ExprPtr e = Make(Expr::Kind::kLiteral, line);
      e->literal = Value(std::move(s));
      return e;
    }
    if (tok.type == T::kInt || tok.type == T::kFloat) {
      ExprPtr e = Make(Expr::Kind::kLiteral, line);
      e->literal = tok.type == T::kInt ? Value(tok.int_value) : Value(tok.float_value);
      Advance();
      return e;
    }
    if (IsOp("(")) {
      Advance();
      if (IsOp(")")) {
        Advance();
        return Make(Expr::Kind::kTuple, line);
      }
      ExprPtr first = ParseExpression();
      if (IsOp(")")) {
        Advance();
        return first;
      }
      ExprPtr tuple = Make(Expr::Kind::kTuple, line);
      tuple->kids.push_back(std::move(first));
      while (IsOp(",")) {
        Advance();
        if (IsOp(")")) break;
        tuple->kids.push_back(ParseExpression());
      }
      ExpectOp(")");
      return Deepen(std::move(tuple));
    }
    if (IsOp("[")) {
      Advance();
      ExprPtr list = Make(Expr::Kind::kList, line);
      while (!IsOp("]")) {
        list->kids.push_back(ParseExpression());
        if (!IsOp(",")) break;
        Advance();
      }
      ExpectOp("]");
      return Deepen(std::move(list));
    }
    if (IsOp("{")) {
      Advance();
      ExprPtr dict = Make(Expr::Kind::kDict, line);
      while (!IsOp("}")) {
        dict->kids.push_back(ParseExpression());
        ExpectOp(":");
        dict->kids.push_back(ParseExpression());
        if (!IsOp(",")) break;
        Advance();
      }
      ExpectOp("}");
      return Deepen(std::move(dict));
    }
    Fail("unexpected " + Describe(tok) + " in an expression");
  }

  ExprPtr ParsePostfix(ExprPtr e) {
    while (true) {
      const int line = Cur().line;
      if (IsOp(".")) {
        Advance();
        ExprPtr g = Make(Expr::Kind::kGetAttr, line);
        if (Cur().type == T::kInt) {  // x.0 is x[0] in Jinja
          g->kind = Expr::Kind::kGetItem;
          g->kids.push_back(std::move(e));
          ExprPtr idx = Make(Expr::Kind::kLiteral, line);
          idx->literal = Value(Cur().int_value);
          g->kids.push_back(std::move(idx));
          Advance();
        } else {
          g->name = ExpectName("an attribute name after '.'");
          g->kids.push_back(std::move(e));
        }
        e = Deepen(std::move(g));
      } else if (IsOp("[")) {
        Advance();
        e = Deepen(ParseSubscript(std::move(e), line));
      } else if (IsOp("(")) {
        ExprPtr call = Make(Expr::Kind::kCall, line);
        call->kids.push_back(std::move(e));
        ParseCallArgs(call.get());
        e = Deepen(std::move(call));
      } else {
        return e;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    int n_colons = 0;
    for (int i = 0; i < 3; ++i) {
      if (!IsOp(":") && !IsOp("]")) parts[i] = ParseExpression();
      if (i < 2 && IsOp(":")) {
        ++n_colons;
        Advance();
      } else {
        break;
      }
    }
    ExpectOp("]");
    if (n_colons == 0) {
      if (!parts[0]) Fail("empty subscript []");
      ExprPtr g = Make(Expr::Kind::kGetItem, line);
      g->kids.push_back(std::move(target));
      g->kids.push_back(std::move(parts[0]));
      return g;
    }
    ExprPtr s = Make(Expr::Kind::kSlice, line);
    s->kids.push_back(std::move(target));
    for (auto& p : parts) s->kids.push_back(std::move(p));
    return s;
  }

  // (a, b, name=c): positional arguments first, then keyword arguments.
  void ParseCallArgs(Expr* call) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (IsOp("*") || IsOp("**")) Fail("*args and **kwargs in calls are not supported");
      if (Cur().type == T::kName && Next().type == T::kOp && Next().text == "=") {
        call->kwnames.push_back(Cur().text);
        Advance();
        Advance();
        call->kids.push_back(ParseExpression());
      } else {
        if (!call->kwnames.empty()) Fail("a positional argument follows a keyword argument");
        call->kids.push_back(ParseExpression());
      }
      if (!IsOp(",")) break;
      Advance();
    }
    ExpectOp(")");
  }

  ExprPtr ParseFilterChain(ExprPtr input) {
    // {% filter a | b %} starts without the '|'; x | a | b with it.
    bool first = input == nullptr;
    do {
      if (!first) Advance();  // '|'
      first = false;
      ExprPtr f = Make(Expr::Kind::kFilter, Cur().line);
      f->name = ExpectName("a filter name");
      while (IsOp(".") && Next().type == T::kName) {  // dotted filter names
        Advance();
        f->name += "." + Cur().text;
        Advance();
      }
      f->kids.push_back(std::move(input));
      if (IsOp("(")) ParseCallArgs(f.get());
      input = Deepen(std::move(f));
    } while (IsOp("|"));
    return input;
  }

  ExprPtr ParseFilterAndTest(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        e = ParseFilterChain(std::move(e));
        e = ParsePostfix(std::move(e));
      } else if (IsName("is")) {
        ExprPtr t = Make(Expr::Kind::kTest, Cur().line);
        Advance();
        if (IsName("not")) {
          t->negated = true;
          Advance();
        }
        t->name = ExpectName("a test name after 'is'");
        t->kids.push_back(std::move(e));
        if (IsOp("(")) {
          ParseCallArgs(t.get());
        } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInt ||
                    Cur().type == T::kFloat || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Fail("tests cannot be chained with 'is'");
          t->kids.push_back(ParsePostfix(ParsePrimary()));
        }
        e = Deepen(std::move(t));
      } else {
        return e;
      }
    }
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace trine::jinja
