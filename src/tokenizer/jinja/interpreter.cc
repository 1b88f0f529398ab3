#include "tokenizer/jinja/interpreter.h"

#include <cmath>

#include "tokenizer/jinja/lexer.h"
#include "tokenizer/jinja/parser.h"

namespace trine::jinja {
namespace {

[[noreturn]] void Fail(const std::string& what, int line) { throw Error(what, line); }

// Filters and tests are checked when the template is parsed, as Jinja2 does at compile time, so a
// template with an unknown one fails at load even if that branch never runs.
void CheckExpr(const Expr* e) {
  if (e == nullptr) return;
  if (e->kind == Expr::Kind::kFilter && !IsKnownFilter(e->name)) Fail("unknown filter '" + e->name + "'", e->line);
  if (e->kind == Expr::Kind::kTest && !IsKnownTest(e->name)) Fail("unknown test '" + e->name + "'", e->line);
  for (const auto& k : e->kids) CheckExpr(k.get());
}

void CheckBody(const Body& body) {
  for (const auto& n : body) {
    CheckExpr(n->expr.get());
    CheckExpr(n->cond.get());
    for (const auto& b : n->branches) {
      CheckExpr(b.first.get());
      CheckBody(b.second);
    }
    for (const auto& p : n->params) CheckExpr(p.second.get());
    CheckBody(n->body);
    CheckBody(n->else_body);
  }
}

std::string WithLine(const Error& e) {
  return e.line() > 0 ? "line " + std::to_string(e.line()) + ": " + e.what() : std::string(e.what());
}

// raise_exception() in a template: its message is the whole error.
class TemplateRaised : public Error {
 public:
  using Error::Error;
};

}  // namespace

Status Template::Parse(const std::string& source, std::unique_ptr<Template>* out) {
  try {
    auto t = std::unique_ptr<Template>(new Template());
    t->body_ = jinja::Parse(Lex(source));
    CheckBody(t->body_);
    *out = std::move(t);
    return Status::Ok();
  } catch (const Error& e) {
    return InvalidArgument("chat template: " + WithLine(e));
  }
}

Status Template::Render(const Object& globals, const RenderOptions& options, std::string* out) const {
  out->clear();
  try {
    Interpreter in(globals, options);
    in.Render(body_, out);
    return Status::Ok();
  } catch (const Error& e) {
    out->clear();
    if (std::string(e.what()).rfind("raise_exception: ", 0) == 0) {
      return InvalidArgument("the chat template refused the conversation: " + std::string(e.what()).substr(17));
    }
    return InvalidArgument("chat template: " + WithLine(e));
  }
}

Interpreter::Interpreter(const Object& globals, const RenderOptions& options) : options_(options) {
  auto g = std::make_shared<Object>(globals);
  scopes_.push_back(std::move(g));
  AddGlobalFunctions(*this, &builtins_);
}

void Interpreter::Render(const Body& body, std::string* out) { Exec(body, out); }

void Interpreter::CheckSize(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes) {
    throw Error("the template's output passed " + std::to_string(options_.limits.max_output_bytes >> 20) + " MiB");
  }
}

// Nested statements and expressions (macros calling macros, each with nested blocks) recurse in
// C++; beyond this depth the render stops rather than risk the stack.
constexpr int kMaxNesting = 3000;

Interpreter::Nesting::Nesting(Interpreter* interp) : in(interp) {
  if (++in->depth_ > kMaxNesting) {
    --in->depth_;
    throw Error("the template nests more than " + std::to_string(kMaxNesting) + " levels deep while rendering");
  }
}

void Interpreter::Step() {
  if (++steps_ > options_.limits.max_steps) {
    throw Error("the template ran more than " + std::to_string(options_.limits.max_steps) + " steps");
  }
}

void Interpreter::Emit(const std::string& s, std::string* out) const {
  CheckSize(out->size() + s.size());
  *out += s;
}

Value Interpreter::Lookup(const std::string& name, int line) const {
  (void)line;
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (const Value* v = (*it)->Find(name)) return *v;
  }
  if (const Value* v = builtins_.Find(name)) return *v;
  return Value();
}

void Interpreter::Assign(const std::string& name, Value v) { scopes_.back()->Set(name, std::move(v)); }

Interpreter::Flow Interpreter::Exec(const Body& body, std::string* out) {
  for (const auto& n : body) {
    const Flow f = ExecNode(*n, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::ExecNode(const Node& n, std::string* out) {
  Step();
  Nesting nesting(this);
  try {
    switch (n.kind) {
      case Node::Kind::kText: Emit(n.text, out); return Flow::kNormal;
      case Node::Kind::kOutput: Emit(Eval(*n.expr).ToString(), out); return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& b : n.branches) {
          if (b.first == nullptr || Eval(*b.first).Truthy()) return Exec(b.second, out);
        }
        return Flow::kNormal;
      case Node::Kind::kFor: return ExecFor(n, out);
      case Node::Kind::kSet: ExecSet(n, Eval(*n.expr)); return Flow::kNormal;
      case Node::Kind::kSetBlock: {
        std::string text;
        Exec(n.body, &text);
        Value v(std::move(text));
        if (n.cond) v = ApplyFilterChain(*n.cond, std::move(v));
        Assign(n.targets[0], std::move(v));
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: Assign(n.text, MakeMacro(n)); return Flow::kNormal;
      case Node::Kind::kCallBlock: {
        // caller() renders the block's body where the {% call %} stands.
        const auto saved = scopes_;
        const Node* node = &n;
        Value caller = Value::MakeFunction("caller", [this, node, saved](const Args& args) -> Value {
          auto inner = scopes_;
          scopes_ = saved;
          scopes_.push_back(std::make_shared<Object>());
          BindParams(*node, args);
          std::string text;
          Exec(node->body, &text);
          scopes_ = inner;
          return Value(std::move(text));
        });
        const Expr& call = *n.expr;
        Value fn = Eval(*call.kids[0]);
        Args args = EvalArgs(call, 1);
        args.keyword.emplace_back("caller", caller);
        Emit(CallFunction(fn, args, call.line).ToString(), out);
        return Flow::kNormal;
      }
      case Node::Kind::kFilterBlock: {
        std::string text;
        Exec(n.body, &text);
        Value v(std::move(text));
        Emit(ApplyFilterChain(*n.expr, std::move(v)).ToString(), out);
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
      case Node::Kind::kScope: return Exec(n.body, out);
    }
  } catch (Error& e) {
    if (e.line() == 0) e.set_line(n.line);
    throw;
  }
  return Flow::kNormal;
}

Value Interpreter::ApplyFilterChain(const Expr& chain, Value v) {
  // A block's chain `a | b` is parsed outermost first, with a null input at the innermost filter.
  std::vector<const Expr*> filters;
  for (const Expr* f = &chain; f != nullptr; f = f->kids[0].get()) filters.push_back(f);
  for (auto it = filters.rbegin(); it != filters.rend(); ++it) v = ApplyFilter(*this, (*it)->name, v, EvalArgs(**it, 1), (*it)->line);
  return v;
}

void Interpreter::AssignTargets(const std::vector<std::string>& targets, const Value& v, int line) {
  if (targets.size() == 1) {
    Assign(targets[0], v);
    return;
  }
  const std::vector<Value> parts = Iterate(v, line);
  if (parts.size() != targets.size()) {
    Fail("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(targets.size()) +
             " variables",
         line);
  }
  for (size_t k = 0; k < parts.size(); ++k) Assign(targets[k], parts[k]);
}

void Interpreter::BindParams(const Node& n, const Args& args) {
  for (size_t k = 0; k < n.params.size(); ++k) {
    const std::string& name = n.params[k].first;
    const Value* given = args.Get(k, name.c_str());
    Assign(name, given != nullptr ? *given : n.params[k].second ? Eval(*n.params[k].second) : Value());
  }
}

Interpreter::Flow Interpreter::ExecFor(const Node& n, std::string* out) {
  std::vector<Value> items = Iterate(Eval(*n.expr), n.line);
  if (n.cond) {
    // {% for x in xs if cond %}: the filter runs before the loop, so loop.length counts survivors.
    std::vector<Value> kept;
    for (const Value& item : items) {
      scopes_.push_back(std::make_shared<Object>());
      AssignTargets(n.targets, item, n.line);
      const bool keep = Eval(*n.cond).Truthy();
      scopes_.pop_back();
      if (keep) kept.push_back(item);
    }
    items = std::move(kept);
  }
  // The else block stands outside the loop: a break or continue there belongs to an outer loop.
  if (items.empty()) return Exec(n.else_body, out);
  const int64_t len = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < len; ++i) {
    Step();
    auto frame = std::make_shared<Object>();
    Value loop = Value::MakeObject();
    Object& lo = loop.object();
    lo.Set("index", Value(i + 1));
    lo.Set("index0", Value(i));
    lo.Set("revindex", Value(len - i));
    lo.Set("revindex0", Value(len - i - 1));
    lo.Set("first", Value(i == 0));
    lo.Set("last", Value(i == len - 1));
    lo.Set("length", Value(len));
    lo.Set("depth", Value(1));
    lo.Set("depth0", Value(0));
    lo.Set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value());
    lo.Set("nextitem", i + 1 < len ? items[static_cast<size_t>(i + 1)] : Value());
    lo.Set("cycle", Value::MakeFunction("loop.cycle", [i](const Args& a) -> Value {
             if (a.positional.empty()) throw Error("loop.cycle() needs at least one value");
             return a.positional[static_cast<size_t>(i) % a.positional.size()];
           }));
    frame->Set("loop", loop);
    scopes_.push_back(frame);
    AssignTargets(n.targets, items[static_cast<size_t>(i)], n.line);
    const Flow f = Exec(n.body, out);
    scopes_.pop_back();
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Interpreter::ExecSet(const Node& n, Value v) {
  if (!n.target_object.empty()) {
    Value obj = Lookup(n.target_object, n.line);
    if (!obj.is_object() || !obj.object().is_namespace) {
      Fail("cannot assign attribute '" + n.target_attr + "' on '" + n.target_object + "': not a namespace()", n.line);
    }
    obj.object().Set(n.target_attr, std::move(v));
    return;
  }
  AssignTargets(n.targets, v, n.line);
}

Value Interpreter::MakeMacro(const Node& n) {
  const Node* node = &n;
  return Value::MakeFunction(n.text, [this, node](const Args& args) -> Value {
    if (args.positional.size() > node->params.size()) {
      throw Error("macro '" + node->text + "' takes " + std::to_string(node->params.size()) + " arguments, " +
                  std::to_string(args.positional.size()) + " given");
    }
    if (call_depth_ + 1 > options_.limits.max_call_depth) {
      throw Error("macro calls nested more than " + std::to_string(options_.limits.max_call_depth) + " deep");
    }
    // A macro sees the template's globals and its own parameters, not its caller's locals.
    ++call_depth_;
    std::vector<std::shared_ptr<Object>> saved;
    saved.swap(scopes_);
    scopes_.push_back(saved[0]);
    scopes_.push_back(std::make_shared<Object>());
    BindParams(*node, args);
    for (const auto& kw : args.keyword) {
      bool known = kw.first == "caller";
      for (const auto& p : node->params) known = known || p.first == kw.first;
      if (!known) throw Error("macro '" + node->text + "' has no parameter '" + kw.first + "'");
      if (kw.first == "caller") Assign("caller", kw.second);
    }
    std::string text;
    Exec(node->body, &text);
    scopes_.swap(saved);
    --call_depth_;
    return Value(std::move(text));
  });
}

Value Interpreter::CallFunction(const Value& fn, const Args& args, int line) {
  if (fn.is_undefined()) Fail("called an undefined function", line);
  if (!fn.is_function()) Fail(std::string("'") + fn.TypeName() + "' object is not callable", line);
  return fn.function()(args);
}

Args Interpreter::EvalArgs(const Expr& e, size_t first) {
  Args a;
  const size_t n_kw = e.kwnames.size();
  const size_t n_pos = e.kids.size() - first - n_kw;
  for (size_t k = 0; k < n_pos; ++k) a.positional.push_back(Eval(*e.kids[first + k]));
  for (size_t k = 0; k < n_kw; ++k) a.keyword.emplace_back(e.kwnames[k], Eval(*e.kids[first + n_pos + k]));
  return a;
}

Value Interpreter::EvalCall(const Expr& e) {
  Value fn = Eval(*e.kids[0]);
  if (fn.is_undefined()) {
    const Expr& callee = *e.kids[0];
    Fail(callee.kind == Expr::Kind::kName ? "'" + callee.name + "' is undefined"
         : callee.kind == Expr::Kind::kGetAttr ? "no method '" + callee.name + "' on this value"
                                                : std::string("called an undefined value"),
         e.line);
  }
  return CallFunction(fn, EvalArgs(e, 1), e.line);
}

Value Interpreter::Eval(const Expr& e) {
  Step();
  Nesting nesting(this);
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: return Lookup(e.name, e.line);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      Array items;
      for (const auto& k : e.kids) items.push_back(Eval(*k));
      return e.kind == Expr::Kind::kTuple ? Value::MakeTuple(std::move(items)) : Value::MakeArray(std::move(items));
    }
    case Expr::Kind::kDict: {
      Value d = Value::MakeObject();
      for (size_t k = 0; k + 1 < e.kids.size(); k += 2) {
        Value key = Eval(*e.kids[k]);
        if (!key.is_string()) Fail(std::string("dict keys must be strings, not '") + key.TypeName() + "'", e.line);
        d.object().Set(key.str(), Eval(*e.kids[k + 1]));
      }
      return d;
    }
    case Expr::Kind::kGetAttr: return GetAttr(*this, Eval(*e.kids[0]), e.name, e.line);
    case Expr::Kind::kGetItem: {
      Value obj = Eval(*e.kids[0]);
      Value key = Eval(*e.kids[1]);
      if (obj.is_undefined()) Fail("cannot index an undefined value with " + key.Repr(), e.line);
      return GetItem(obj, key, e.line);
    }
    case Expr::Kind::kSlice: {
      Value obj = Eval(*e.kids[0]);
      Args a;
      for (int k = 1; k <= 3; ++k) a.positional.push_back(e.kids[k] ? Eval(*e.kids[k]) : Value::None());
      return ApplyFilter(*this, "__slice__", obj, a, e.line);
    }
    case Expr::Kind::kCall: return EvalCall(e);
    case Expr::Kind::kFilter: return ApplyFilter(*this, e.name, Eval(*e.kids[0]), EvalArgs(e, 1), e.line);
    case Expr::Kind::kTest: {
      const bool r = ApplyTest(*this, e.name, Eval(*e.kids[0]), EvalArgs(e, 1), e.line);
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::kUnary: {
      Value v = Eval(*e.kids[0]);
      if (e.name == "not") return Value(!v.Truthy());
      if (!v.is_number()) Fail(std::string("bad operand type for unary ") + e.name + ": '" + v.TypeName() + "'", e.line);
      if (e.name == "+") return v.is_int() ? Value(v.as_int()) : v;
      return v.is_int() ? Value(-v.as_int()) : Value(-v.as_double());
    }
    case Expr::Kind::kBinary: return EvalBinary(e);
    case Expr::Kind::kCondition:
      if (Eval(*e.kids[0]).Truthy()) return Eval(*e.kids[1]);
      return e.kids[2] ? Eval(*e.kids[2]) : Value();
  }
  return Value();
}

namespace {

bool Contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (!item.is_string()) Fail(std::string("'in <string>' requires a string, not '") + item.TypeName() + "'", line);
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_array()) {
    for (const Value& v : container.array()) {
      if (v.Equals(item)) return true;
    }
    return false;
  }
  if (container.is_object()) return item.is_string() && container.object().Find(item.str()) != nullptr;
  if (container.is_undefined()) return false;
  Fail(std::string("argument of type '") + container.TypeName() + "' is not iterable", line);
}

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

Value Interpreter::EvalBinary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value l = Eval(*e.kids[0]);
    return l.Truthy() ? Eval(*e.kids[1]) : l;
  }
  if (op == "or") {
    Value l = Eval(*e.kids[0]);
    return l.Truthy() ? l : Eval(*e.kids[1]);
  }
  Value l = Eval(*e.kids[0]);
  Value r = Eval(*e.kids[1]);
  if (op == "==") return Value(l.Equals(r));
  if (op == "!=") return Value(!l.Equals(r));
  if (op == "<") return Value(Less(l, r, e.line));
  if (op == ">") return Value(Less(r, l, e.line));
  if (op == "<=") return Value(!Less(r, l, e.line));
  if (op == ">=") return Value(!Less(l, r, e.line));
  if (op == "in") return Value(Contains(r, l, e.line));
  if (op == "not in") return Value(!Contains(r, l, e.line));
  if (op == "~") {
    std::string s = l.ToString();
    const std::string rs = r.ToString();
    CheckSize(s.size() + rs.size());
    return Value(s + rs);
  }
  const auto type_error = [&]() {
    if (l.is_undefined() || r.is_undefined()) Fail("an undefined value used with '" + op + "'", e.line);
    Fail("unsupported operand types for " + op + ": '" + l.TypeName() + "' and '" + r.TypeName() + "'", e.line);
  };
  if (op == "+") {
    if (l.is_string() && r.is_string()) {
      CheckSize(l.str().size() + r.str().size());
      return Value(l.str() + r.str());
    }
    if (l.is_array() && r.is_array()) {
      Array a = l.array();
      a.insert(a.end(), r.array().begin(), r.array().end());
      CheckSize(a.size());
      return Value::MakeArray(std::move(a));
    }
    if (!l.is_number() || !r.is_number()) type_error();
    if (l.is_int() && r.is_int()) return Value(static_cast<int64_t>(static_cast<uint64_t>(l.as_int()) + static_cast<uint64_t>(r.as_int())));
    return Value(l.as_double() + r.as_double());
  }
  if (op == "*") {
    if ((l.is_string() || l.is_array()) && r.is_int()) std::swap(l, r);
    if (l.is_int() && (r.is_string() || r.is_array())) {
      const int64_t n = std::max<int64_t>(0, l.as_int());
      const size_t unit = r.is_string() ? r.str().size() : r.array().size();
      if (unit != 0 && static_cast<uint64_t>(n) > options_.limits.max_output_bytes / unit) CheckSize(options_.limits.max_output_bytes + 1);
      if (r.is_string()) {
        std::string s;
        for (int64_t k = 0; k < n; ++k) s += r.str();
        return Value(std::move(s));
      }
      Array a;
      for (int64_t k = 0; k < n; ++k) a.insert(a.end(), r.array().begin(), r.array().end());
      return Value::MakeArray(std::move(a));
    }
    if (!l.is_number() || !r.is_number()) type_error();
    if (l.is_int() && r.is_int()) return Value(static_cast<int64_t>(static_cast<uint64_t>(l.as_int()) * static_cast<uint64_t>(r.as_int())));
    return Value(l.as_double() * r.as_double());
  }
  if (op == "%" && l.is_string()) {
    Args a;
    if (r.is_array()) {
      a.positional = r.array();
    } else {
      a.positional.push_back(r);
    }
    return ApplyFilter(*this, "format", l, a, e.line);
  }
  if (!l.is_number() || !r.is_number()) type_error();
  if (op == "-") {
    if (l.is_int() && r.is_int()) return Value(static_cast<int64_t>(static_cast<uint64_t>(l.as_int()) - static_cast<uint64_t>(r.as_int())));
    return Value(l.as_double() - r.as_double());
  }
  if (op == "/") {
    if (r.as_double() == 0.0) Fail("division by zero", e.line);
    return Value(l.as_double() / r.as_double());
  }
  if (op == "//" || op == "%") {
    if (r.as_double() == 0.0) Fail(op == "//" ? "integer division by zero" : "modulo by zero", e.line);
    if (l.is_int() && r.is_int()) {
      if (r.as_int() == -1) return op == "//" ? Value(static_cast<int64_t>(0 - static_cast<uint64_t>(l.as_int()))) : Value(int64_t{0});
      const int64_t q = FloorDiv(l.as_int(), r.as_int());
      return op == "//" ? Value(q) : Value(l.as_int() - q * r.as_int());
    }
    const double q = std::floor(l.as_double() / r.as_double());
    return op == "//" ? Value(q) : Value(l.as_double() - q * r.as_double());
  }
  if (op == "**") {
    if (l.is_int() && r.is_int() && r.as_int() >= 0) {
      if (r.as_int() > 63 && (l.as_int() > 1 || l.as_int() < -1)) Fail("integer power too large", e.line);
      int64_t acc = 1;
      for (int64_t k = 0; k < r.as_int() && k < 64; ++k) acc = static_cast<int64_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(l.as_int()));
      return Value(acc);
    }
    return Value(std::pow(l.as_double(), r.as_double()));
  }
  Fail("unknown operator '" + op + "'", e.line);
}

}  // namespace trine::jinja
