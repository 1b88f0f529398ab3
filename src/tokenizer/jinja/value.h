// The values a chat template computes with, modelled on the Python objects Jinja2 hands around:
// undefined, None, bool, int, float, str, list, dict (insertion-ordered, string keys), callables
// (built-in functions, bound methods, macros) and namespace() objects. Lists and dicts are shared
// by reference, as in Python, so `ns.items.append(x)` and `set ns.x = ...` are seen by every holder.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace trine::jinja {

// Raised inside the interpreter; Template::Parse/Render turn it into a Status. `line` is 1-based,
// 0 when unknown.
class Error : public std::runtime_error {
 public:
  Error(const std::string& what, int line = 0) : std::runtime_error(what), line_(line) {}
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  int line_;
};

class Value;
using Array = std::vector<Value>;

struct Object {
  std::vector<std::pair<std::string, Value>> items;  // insertion order, keys unique
  bool is_namespace = false;                          // namespace(): attributes may be assigned

  const Value* Find(const std::string& key) const;
  void Set(const std::string& key, Value v);
};

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  // The argument at `pos` or named `name`; nullptr when given neither way.
  const Value* Get(size_t pos, const char* name) const;
};

using Function = std::function<Value(const Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };

  Value() = default;  // undefined
  static Value None();
  Value(bool b);
  Value(int64_t i);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  static Value MakeArray(Array items = {});
  // A tuple is a list that prints with parentheses: (1, 2), ('key', 'value') from items().
  static Value MakeTuple(Array items);
  static Value MakeObject();
  static Value MakeFunction(std::string name, Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt || kind_ == Kind::kBool; }  // bool is an int, as in Python
  bool is_number() const { return is_int() || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_tuple() const { return kind_ == Kind::kArray && b_; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_function() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const { return s_; }
  Array& array() const { return *a_; }
  Object& object() const { return *o_; }
  const Function& function() const { return *fn_; }
  const std::string& function_name() const { return s_; }

  bool Truthy() const;
  // str(x) as Python prints it (what {{ x }} outputs); undefined prints as "".
  std::string ToString() const;
  // repr(x): strings quoted, as inside a printed list or dict.
  std::string Repr() const;
  // Python's type name, for error messages: 'str', 'list', 'dict', 'NoneType', ...
  const char* TypeName() const;

  bool Equals(const Value& other) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;  // the bool's value; for an array, whether it is a tuple
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;  // string value, or a function's name
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<Function> fn_;
};

// Python's repr of a float: the shortest text that reads back to the same double ("1.0", "0.1",
// "1e+16").
std::string FloatRepr(double d);
// Code points of a UTF-8 string (invalid bytes count one each), for len() and slicing.
std::vector<std::string> CodePoints(const std::string& s);

}  // namespace trine::jinja
