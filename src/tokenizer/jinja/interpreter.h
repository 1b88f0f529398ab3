// The tree-walking evaluator behind Template::Render, and the built-ins (filters, tests, methods,
// global functions) it dispatches to. Internal to src/tokenizer/jinja.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja/ast.h"
#include "tokenizer/jinja/template.h"
#include "tokenizer/jinja/value.h"

namespace trine::jinja {

class Interpreter {
 public:
  Interpreter(const Object& globals, const RenderOptions& options);
  void Render(const Body& body, std::string* out);

  // Used by the built-ins.
  const RenderOptions& options() const { return options_; }
  void CheckSize(size_t bytes) const;
  void Step();
  Value CallFunction(const Value& fn, const Args& args, int line);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow Exec(const Body& body, std::string* out);
  Flow ExecNode(const Node& n, std::string* out);
  Flow ExecFor(const Node& n, std::string* out);
  void ExecSet(const Node& n, Value v);
  // Binds a for loop's or set's names to v (unpacked when there are several).
  void AssignTargets(const std::vector<std::string>& targets, const Value& v, int line);
  // Binds a macro's or call block's parameters: the given argument, else the default, else undefined.
  void BindParams(const Node& n, const Args& args);
  Value MakeMacro(const Node& n);
  // The input of {% filter a | b %} or {% set x | a | b %} through the chain.
  Value ApplyFilterChain(const Expr& chain, Value v);
  Value Eval(const Expr& e);
  Value EvalBinary(const Expr& e);
  Value EvalCall(const Expr& e);
  Args EvalArgs(const Expr& e, size_t first);
  Value Lookup(const std::string& name, int line) const;
  void Assign(const std::string& name, Value v);
  void Emit(const std::string& s, std::string* out) const;
  struct Nesting {
    explicit Nesting(Interpreter* in);
    ~Nesting() { --in->depth_; }
    Interpreter* in;
  };

  RenderOptions options_;
  Object builtins_;
  // [0] = template globals, innermost last. An Error ends the whole render (Template::Render
  // discards the interpreter), so scopes are not unwound on the way out.
  std::vector<std::shared_ptr<Object>> scopes_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;  // statements and expressions being evaluated, nested (bounds the C++ stack)
};

// ---- Built-ins (builtins.cc) -------------------------------------------------------------------

bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);
Value ApplyFilter(Interpreter& in, const std::string& name, const Value& input, const Args& args, int line);
bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, const Args& args, int line);
// obj.name: a dict entry, a bound method of str/list/dict, or undefined. Raises on undefined obj.
Value GetAttr(Interpreter& in, const Value& obj, const std::string& name, int line);
// obj[key] with Python's indexing (negative indices); undefined when absent.
Value GetItem(const Value& obj, const Value& key, int line);
// range, namespace, dict, raise_exception, strftime_now.
void AddGlobalFunctions(Interpreter& in, Object* builtins);
// Iteration as a for loop sees it: list items, dict keys, string code points, nothing for undefined.
std::vector<Value> Iterate(const Value& v, int line);
// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as Hugging Face's tojson.
std::string ToJson(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep,
                   bool sort_keys, int line);
// Python's a < b for numbers, strings and lists (raises for other pairs).
bool Less(const Value& a, const Value& b, int line);

}  // namespace trine::jinja
