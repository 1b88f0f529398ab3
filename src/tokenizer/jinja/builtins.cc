// Filters, tests, methods and global functions, with Python's and Jinja2's semantics.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "tokenizer/jinja/interpreter.h"

namespace trine::jinja {
namespace {

[[noreturn]] void Fail(const std::string& what, int line) { throw Error(what, line); }

bool IsPySpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string Strip(const std::string& s, const Value* chars, bool left, bool right) {
  const auto strip_char = [&](char c) {
    if (chars == nullptr || chars->is_none() || chars->is_undefined()) return IsPySpace(c);
    return chars->str().find(c) != std::string::npos;
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_char(s[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(s[e - 1])) --e;
  }
  return s.substr(b, e - b);
}

std::string AsciiMap(std::string s, int (*f)(int)) {
  for (char& c : s) {
    if (static_cast<unsigned char>(c) < 0x80) c = static_cast<char>(f(static_cast<unsigned char>(c)));
  }
  return s;
}
int ToUpper(int c) { return c >= 'a' && c <= 'z' ? c - 32 : c; }
int ToLower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

bool IsAlpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }

std::string Capitalize(const std::string& s) {
  std::string out = AsciiMap(s, ToLower);
  if (!out.empty()) out[0] = static_cast<char>(ToUpper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string Title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && IsAlpha(u)) {
      c = static_cast<char>(prev_cased ? ToLower(u) : ToUpper(u));
      prev_cased = true;
    } else {
      prev_cased = u >= 0x80 && prev_cased;
    }
  }
  return out;
}

// Jinja's title filter (not str.title()): words start after whitespace, '-', '(', '{', '[' or
// '<'; the first letter goes up, the rest down.
std::string TitleFilter(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      start = true;
      continue;
    }
    c = static_cast<char>(start ? ToUpper(u) : ToLower(u));
    start = false;
  }
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count,
                    Interpreter& in) {
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    const std::vector<std::string> cps = CodePoints(s);
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < cps.size()) out += cps[i];
      in.CheckSize(out.size());
    }
    return out;
  }
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    in.CheckSize(out.size());
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value Split(const std::string& s, const Value* sep_v, int64_t maxsplit, int line) {
  Array parts;
  if (sep_v == nullptr || sep_v->is_none()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && IsPySpace(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = s.size();
        while (e > i && IsPySpace(s[e - 1])) --e;
        parts.emplace_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < s.size() && !IsPySpace(s[j])) ++j;
      parts.emplace_back(s.substr(i, j - i));
      i = j;
    }
    return Value::MakeArray(std::move(parts));
  }
  if (!sep_v->is_string()) Fail("split() separator must be a string", line);
  const std::string& sep = sep_v->str();
  if (sep.empty()) Fail("split() with an empty separator", line);
  size_t pos = 0;
  while (true) {
    const size_t hit = s.find(sep, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
  }
  parts.emplace_back(s.substr(pos));
  return Value::MakeArray(std::move(parts));
}

int64_t IntArg(const Args& a, size_t pos, const char* name, int64_t def, int line) {
  const Value* v = a.Get(pos, name);
  if (v == nullptr || v->is_none()) return def;
  if (!v->is_int()) Fail(std::string("argument '") + name + "' must be an integer", line);
  return v->as_int();
}

bool BoolArg(const Args& a, size_t pos, const char* name, bool def) {
  const Value* v = a.Get(pos, name);
  return v == nullptr ? def : v->Truthy();
}

std::string StrArg(const Args& a, size_t pos, const char* name, const std::string& def, int line) {
  const Value* v = a.Get(pos, name);
  if (v == nullptr) return def;
  if (!v->is_string()) Fail(std::string("argument '") + name + "' must be a string", line);
  return v->str();
}

const Value* Keyword(const Args& a, const char* name) {
  for (const auto& kv : a.keyword) {
    if (kv.first == name) return &kv.second;
  }
  return nullptr;
}

const Value& Need(const Args& a, size_t pos, const char* name, const char* fn, int line) {
  const Value* v = a.Get(pos, name);
  if (v == nullptr) Fail(std::string(fn) + "() is missing its argument '" + name + "'", line);
  return *v;
}

// Python's normalisation of slice bounds for a sequence of length n.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start, const Value& stop, const Value& step_v, int line) {
  int64_t step = 1;
  if (!step_v.is_none()) {
    if (!step_v.is_int()) Fail("slice step must be an integer", line);
    step = step_v.as_int();
    if (step == 0) Fail("slice step cannot be zero", line);
  }
  const auto bound = [&](const Value& v, int64_t def_pos, int64_t def_neg) -> int64_t {
    if (v.is_none()) return step > 0 ? def_pos : def_neg;
    if (!v.is_int()) Fail("slice indices must be integers or none", line);
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = bound(start, 0, n - 1);
  const int64_t e = bound(stop, n, -1);
  std::vector<int64_t> idx;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) idx.push_back(i);
  return idx;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", static_cast<unsigned char>(c));
          out += b;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void ToJsonInto(const Value& v, int indent, int level, const std::string& item_sep, const std::string& key_sep,
                bool sort_keys, int line, std::string* out) {
  if (level > 100) Fail("tojson: value nested too deeply", line);
  const auto newline = [&](int lv) {
    if (indent >= 0) *out += "\n" + std::string(static_cast<size_t>(indent * lv), ' ');
  };
  switch (v.kind()) {
    case Value::Kind::kNone: *out += "null"; return;
    case Value::Kind::kBool: *out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::kInt: *out += std::to_string(v.as_int()); return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : FloatRepr(d);
      return;
    }
    case Value::Kind::kString: *out += JsonString(v.str()); return;
    case Value::Kind::kArray: {
      const Array& a = v.array();
      if (a.empty()) {
        *out += "[]";
        return;
      }
      *out += "[";
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        ToJsonInto(a[i], indent, level + 1, item_sep, key_sep, sort_keys, line, out);
      }
      newline(level);
      *out += "]";
      return;
    }
    case Value::Kind::kObject: {
      if (v.object().is_namespace) Fail("tojson: a namespace() is not JSON serializable", line);
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.object().items) items.push_back(&kv);
      if (sort_keys) std::sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (items.empty()) {
        *out += "{}";
        return;
      }
      *out += "{";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) *out += item_sep;
        newline(level + 1);
        *out += JsonString(items[i]->first) + key_sep;
        ToJsonInto(items[i]->second, indent, level + 1, item_sep, key_sep, sort_keys, line, out);
      }
      newline(level);
      *out += "}";
      return;
    }
    case Value::Kind::kUndefined: Fail("tojson: an undefined value is not JSON serializable", line);
    case Value::Kind::kFunction: Fail("tojson: a function is not JSON serializable", line);
  }
}

// The value at a dotted attribute path ("function.name"), as Jinja's attribute= arguments read it.
Value AttrPath(Interpreter& in, const Value& v, const std::string& path, int line) {
  Value cur = v;
  size_t pos = 0;
  while (true) {
    const size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (cur.is_undefined()) return cur;
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric && cur.is_array() ? GetItem(cur, Value(static_cast<int64_t>(std::stoll(part))), line) : GetAttr(in, cur, part, line);
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

std::vector<Value> Sorted(Interpreter& in, std::vector<Value> items, bool reverse, bool case_sensitive,
                          const std::string& attribute, int line) {
  const auto key = [&](const Value& v) {
    Value k = attribute.empty() ? v : AttrPath(in, v, attribute, line);
    if (!case_sensitive && k.is_string()) return Value(AsciiMap(k.str(), ToLower));
    return k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? Less(key(b), key(a), line) : Less(key(a), key(b), line);
  });
  return items;
}

std::string FormatPercent(Interpreter& in, const std::string& fmt, const std::vector<Value>& values, int line) {
  std::string out;
  size_t next = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (i + 1 >= fmt.size()) Fail("format: incomplete % at the end", line);
    const char c = fmt[++i];
    if (c == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) Fail("format: not enough arguments for the format string", line);
    const Value& v = values[next++];
    if (c == 's') {
      out += v.ToString();
    } else if ((c == 'd' || c == 'i') && v.is_number()) {
      out += std::to_string(v.is_int() ? v.as_int() : static_cast<int64_t>(v.as_double()));
    } else if (c == 'f' && v.is_number()) {
      char b[64];
      std::snprintf(b, sizeof(b), "%f", v.as_double());
      out += b;
    } else {
      Fail(std::string("format: unsupported conversion %") + c, line);
    }
    in.CheckSize(out.size());
  }
  return out;
}

int64_t Length(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kString: return static_cast<int64_t>(CodePoints(v.str()).size());
    case Value::Kind::kArray: return static_cast<int64_t>(v.array().size());
    case Value::Kind::kObject: return static_cast<int64_t>(v.object().items.size());
    case Value::Kind::kUndefined: return 0;
    default: Fail(std::string("object of type '") + v.TypeName() + "' has no len()", line);
  }
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

const char* const kFilters[] = {"abs",       "attr",    "capitalize", "count",   "d",         "default",   "dictsort",
                                "e",         "escape",  "first",      "float",   "format",    "indent",    "int",
                                "items",     "join",    "last",       "length",  "list",      "lower",     "map",
                                "max",       "min",     "reject",     "rejectattr", "replace", "reverse",  "round",
                                "safe",      "select",  "selectattr", "sort",    "string",    "sum",       "title",
                                "tojson",    "trim",    "unique",     "upper",   "wordcount", "__slice__"};
const char* const kTests[] = {"boolean", "callable", "defined",  "divisibleby", "eq",       "equalto", "escaped",
                              "even",    "false",    "float",    "ge",          "gt",       "greaterthan", "in",
                              "integer", "iterable", "le",       "lower",       "lessthan", "lt",      "mapping",
                              "ne",      "none",     "number",   "odd",         "sameas",   "sequence", "string",
                              "true",    "undefined", "upper",   "==",          "!=",       "<",       "<=",
                              ">",       ">="};

std::vector<Value> SelectOrReject(Interpreter& in, const Value& input, const Args& a, bool by_attr, bool keep,
                                  int line) {
  std::vector<Value> out;
  const std::string attr = by_attr ? StrArg(a, 0, "attribute", "", line) : "";
  if (by_attr && attr.empty()) Fail("selectattr/rejectattr need an attribute name", line);
  const size_t test_pos = by_attr ? 1 : 0;
  Args test_args;
  std::string test;
  if (a.positional.size() > test_pos) {
    if (!a.positional[test_pos].is_string()) Fail("the test name must be a string", line);
    test = a.positional[test_pos].str();
    if (!IsKnownTest(test)) Fail("unknown test '" + test + "'", line);
    test_args.positional.assign(a.positional.begin() + static_cast<std::ptrdiff_t>(test_pos + 1), a.positional.end());
  }
  for (const Value& item : Iterate(input, line)) {
    const Value subject = by_attr ? AttrPath(in, item, attr, line) : item;
    const bool pass = test.empty() ? subject.Truthy() : ApplyTest(in, test, subject, test_args, line);
    if (pass == keep) out.push_back(item);
  }
  return out;
}

}  // namespace

bool IsKnownFilter(const std::string& name) {
  for (const char* f : kFilters) {
    if (name == f) return true;
  }
  return false;
}

bool IsKnownTest(const std::string& name) {
  for (const char* t : kTests) {
    if (name == t) return true;
  }
  return false;
}

std::vector<Value> Iterate(const Value& v, int line) {
  switch (v.kind()) {
    case Value::Kind::kArray: return v.array();
    case Value::Kind::kObject: {
      if (v.object().is_namespace) Fail("a namespace() is not iterable", line);
      std::vector<Value> keys;
      for (const auto& kv : v.object().items) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (auto& cp : CodePoints(v.str())) chars.emplace_back(std::move(cp));
      return chars;
    }
    case Value::Kind::kUndefined: return {};
    default: Fail(std::string("'") + v.TypeName() + "' object is not iterable", line);
  }
}

bool Less(const Value& a, const Value& b, int line) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() < b.as_int();
    return a.as_double() < b.as_double();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_array() && b.is_array()) {
    const Array& x = a.array();
    const Array& y = b.array();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!x[i].Equals(y[i])) return Less(x[i], y[i], line);
    }
    return x.size() < y.size();
  }
  Fail(std::string("'<' not supported between '") + a.TypeName() + "' and '" + b.TypeName() + "'", line);
}

std::string ToJson(const Value& v, int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys,
                   int line) {
  std::string out;
  ToJsonInto(v, indent, 0, item_sep, key_sep, sort_keys, line, &out);
  return out;
}

Value GetItem(const Value& obj, const Value& key, int line) {
  if (obj.is_object()) {
    if (!key.is_string()) return Value();
    const Value* v = obj.object().Find(key.str());
    return v ? *v : Value();
  }
  if (obj.is_array() || obj.is_string()) {
    if (!key.is_int()) {
      if (key.is_string()) return Value();  // obj['x'] on a list: undefined, as Jinja's getattr fallback
      Fail(std::string("indices must be integers, not '") + key.TypeName() + "'", line);
    }
    if (obj.is_array()) {
      const int64_t n = static_cast<int64_t>(obj.array().size());
      int64_t i = key.as_int();
      if (i < 0) i += n;
      return i >= 0 && i < n ? obj.array()[static_cast<size_t>(i)] : Value();
    }
    const std::vector<std::string> cps = CodePoints(obj.str());
    const int64_t n = static_cast<int64_t>(cps.size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    return i >= 0 && i < n ? Value(cps[static_cast<size_t>(i)]) : Value();
  }
  return Value();
}

Value GetAttr(Interpreter& in, const Value& obj, const std::string& name, int line) {
  if (obj.is_undefined()) Fail("'" + name + "' of an undefined value", line);
  Interpreter* interp = &in;
  const auto method = [&](auto fn) {
    Value self = obj;
    return Value::MakeFunction(name, [self, fn, interp, line](const Args& a) -> Value { return fn(*interp, self, a, line); });
  };
  if (obj.is_object() && !obj.object().is_namespace) {
    if (name == "items") {
      return method([](Interpreter&, const Value& s, const Args&, int) {
        Array out;
        for (const auto& kv : s.object().items) out.push_back(Value::MakeTuple({Value(kv.first), kv.second}));
        return Value::MakeArray(std::move(out));
      });
    }
    if (name == "keys" || name == "values") {
      const bool keys = name == "keys";
      return method([keys](Interpreter&, const Value& s, const Args&, int) {
        Array out;
        for (const auto& kv : s.object().items) out.push_back(keys ? Value(kv.first) : kv.second);
        return Value::MakeArray(std::move(out));
      });
    }
    if (name == "get") {
      return method([](Interpreter&, const Value& s, const Args& a, int ln) {
        const Value& k = Need(a, 0, "key", "get", ln);
        const Value* v = k.is_string() ? s.object().Find(k.str()) : nullptr;
        if (v != nullptr) return *v;
        const Value* def = a.Get(1, "default");
        return def ? *def : Value::None();
      });
    }
  }
  if (obj.is_object()) {
    const Value* v = obj.object().Find(name);
    return v ? *v : Value();
  }
  if (obj.is_string()) {
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return method([l, r](Interpreter&, const Value& s, const Args& a, int) {
        return Value(Strip(s.str(), a.Get(0, "chars"), l, r));
      });
    }
    if (name == "upper" || name == "lower") {
      const bool up = name == "upper";
      return method([up](Interpreter&, const Value& s, const Args&, int) {
        return Value(AsciiMap(s.str(), up ? ToUpper : ToLower));
      });
    }
    if (name == "title") return method([](Interpreter&, const Value& s, const Args&, int) { return Value(Title(s.str())); });
    if (name == "capitalize") {
      return method([](Interpreter&, const Value& s, const Args&, int) { return Value(Capitalize(s.str())); });
    }
    if (name == "startswith" || name == "endswith") {
      const bool start = name == "startswith";
      return method([start](Interpreter&, const Value& s, const Args& a, int ln) {
        const Value& p = Need(a, 0, "prefix", start ? "startswith" : "endswith", ln);
        std::vector<Value> options = p.is_array() ? p.array() : std::vector<Value>{p};
        for (const Value& o : options) {
          if (!o.is_string()) Fail("startswith/endswith need a string or a tuple of strings", ln);
          const std::string& x = o.str();
          const std::string& t = s.str();
          if (x.size() <= t.size() && (start ? t.compare(0, x.size(), x) == 0 : t.compare(t.size() - x.size(), x.size(), x) == 0)) {
            return Value(true);
          }
        }
        return Value(false);
      });
    }
    if (name == "split" || name == "rsplit") {
      return method([](Interpreter&, const Value& s, const Args& a, int ln) {
        return Split(s.str(), a.Get(0, "sep"), IntArg(a, 1, "maxsplit", -1, ln), ln);
      });
    }
    if (name == "splitlines") {
      return method([](Interpreter&, const Value& s, const Args&, int ln) {
        Array lines;
        size_t pos = 0;
        const std::string& t = s.str();
        while (pos < t.size()) {
          size_t e = t.find_first_of("\r\n", pos);
          if (e == std::string::npos) {
            lines.emplace_back(t.substr(pos));
            break;
          }
          lines.emplace_back(t.substr(pos, e - pos));
          pos = e + ((t[e] == '\r' && e + 1 < t.size() && t[e + 1] == '\n') ? 2 : 1);
        }
        return Value::MakeArray(std::move(lines));
      });
    }
    if (name == "replace") {
      return method([](Interpreter& i, const Value& s, const Args& a, int ln) {
        const Value& from = Need(a, 0, "old", "replace", ln);
        const Value& to = Need(a, 1, "new", "replace", ln);
        if (!from.is_string() || !to.is_string()) Fail("replace() needs strings", ln);
        return Value(Replace(s.str(), from.str(), to.str(), IntArg(a, 2, "count", -1, ln), i));
      });
    }
    if (name == "find" || name == "count") {
      const bool find = name == "find";
      return method([find](Interpreter&, const Value& s, const Args& a, int ln) {
        const Value& sub = Need(a, 0, "sub", find ? "find" : "count", ln);
        if (!sub.is_string()) Fail("find()/count() need a string", ln);
        if (find) {
          const size_t at = s.str().find(sub.str());
          if (at == std::string::npos) return Value(int64_t{-1});
          return Value(static_cast<int64_t>(CodePoints(s.str().substr(0, at)).size()));
        }
        if (sub.str().empty()) return Value(static_cast<int64_t>(CodePoints(s.str()).size() + 1));
        int64_t n = 0;
        for (size_t p = s.str().find(sub.str()); p != std::string::npos; p = s.str().find(sub.str(), p + sub.str().size())) ++n;
        return Value(n);
      });
    }
    if (name == "join") {
      return method([](Interpreter& i, const Value& s, const Args& a, int ln) {
        std::string out;
        bool first = true;
        for (const Value& v : Iterate(Need(a, 0, "iterable", "join", ln), ln)) {
          if (!v.is_string()) Fail("join() needs strings", ln);
          if (!first) out += s.str();
          out += v.str();
          first = false;
          i.CheckSize(out.size());
        }
        return Value(std::move(out));
      });
    }
    if (name == "format") Fail("str.format() is not supported; use ~ or the format filter", line);
    if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
      const std::string which = name;
      return method([which](Interpreter&, const Value& s, const Args&, int) {
        if (s.str().empty()) return Value(false);
        for (unsigned char c : s.str()) {
          const bool digit = c >= '0' && c <= '9';
          const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
          const bool ok = which == "isdigit" ? digit : which == "isspace" ? IsPySpace(static_cast<char>(c))
                          : which == "isalpha" ? alpha : (alpha || digit);
          if (!ok) return Value(false);
        }
        return Value(true);
      });
    }
    return Value();
  }
  if (obj.is_array() && (name == "append" || name == "pop" || name == "extend" || name == "insert" || name == "remove")) {
    Fail("list." + name + "() would modify a list: chat templates run in an immutable sandbox", line);
  }
  return Value();
}

bool ApplyTest(Interpreter& in, const std::string& name, const Value& v, const Args& a, int line) {
  (void)in;
  const auto arg = [&]() -> const Value& { return Need(a, 0, "value", name.c_str(), line); };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.kind() == Value::Kind::kInt;
  if (name == "float") return v.kind() == Value::Kind::kFloat;
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object() && !v.object().is_namespace;
  if (name == "iterable") return v.is_array() || v.is_string() || (v.is_object() && !v.object().is_namespace);
  if (name == "sequence") return v.is_array() || v.is_string() || (v.is_object() && !v.object().is_namespace);
  if (name == "callable") return v.is_function();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return false;
    const std::string s = v.str();
    return s == AsciiMap(s, name == "lower" ? ToLower : ToUpper);
  }
  if (name == "even" || name == "odd") {
    if (!v.is_int()) Fail("'" + name + "' test needs an integer", line);
    return (v.as_int() % 2 == 0) == (name == "even");
  }
  if (name == "divisibleby") {
    const Value& d = arg();
    if (!v.is_int() || !d.is_int() || d.as_int() == 0) Fail("divisibleby needs integers and a non-zero divisor", line);
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "sameas") {
    const Value& o = arg();
    if (v.is_array() || v.is_object()) return (v.is_array() && o.is_array() && &v.array() == &o.array()) ||
                                              (v.is_object() && o.is_object() && &v.object() == &o.object());
    return v.kind() == o.kind() && v.Equals(o);
  }
  if (name == "eq" || name == "equalto" || name == "==") return v.Equals(arg());
  if (name == "ne" || name == "!=") return !v.Equals(arg());
  if (name == "lt" || name == "lessthan" || name == "<") return Less(v, arg(), line);
  if (name == "le" || name == "<=") return !Less(arg(), v, line);
  if (name == "gt" || name == "greaterthan" || name == ">") return Less(arg(), v, line);
  if (name == "ge" || name == ">=") return !Less(v, arg(), line);
  if (name == "in") {
    const Value& c = arg();
    if (c.is_string()) return v.is_string() && c.str().find(v.str()) != std::string::npos;
    if (c.is_object()) return v.is_string() && c.object().Find(v.str()) != nullptr;
    for (const Value& x : Iterate(c, line)) {
      if (x.Equals(v)) return true;
    }
    return false;
  }
  Fail("unknown test '" + name + "'", line);
}

Value ApplyFilter(Interpreter& in, const std::string& name, const Value& v, const Args& a, int line) {
  in.Step();
  if (name == "__slice__") {
    if (v.is_undefined()) Fail("cannot slice an undefined value", line);
    if (v.is_string()) {
      const std::vector<std::string> cps = CodePoints(v.str());
      std::string out;
      for (int64_t i : SliceIndices(static_cast<int64_t>(cps.size()), a.positional[0], a.positional[1], a.positional[2], line)) {
        out += cps[static_cast<size_t>(i)];
      }
      return Value(std::move(out));
    }
    if (!v.is_array()) Fail(std::string("'") + v.TypeName() + "' object cannot be sliced", line);
    Array out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(v.array().size()), a.positional[0], a.positional[1], a.positional[2], line)) {
      out.push_back(v.array()[static_cast<size_t>(i)]);
    }
    return v.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeArray(std::move(out));
  }
  if (name == "default" || name == "d") {
    const bool boolean = BoolArg(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.Truthy())) {
      const Value* def = a.Get(0, "default_value");
      return def ? *def : Value("");
    }
    return v;
  }
  if (name == "length" || name == "count") return Value(Length(v, line));
  if (name == "string") return Value(v.ToString());
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return Value(HtmlEscape(v.ToString()));
  if (name == "trim") {
    if (!v.is_string() && !v.is_undefined()) return Value(Strip(v.ToString(), a.Get(0, "chars"), true, true));
    return Value(Strip(v.str(), a.Get(0, "chars"), true, true));
  }
  if (name == "upper") return Value(AsciiMap(v.ToString(), ToUpper));
  if (name == "lower") return Value(AsciiMap(v.ToString(), ToLower));
  if (name == "capitalize") return Value(Capitalize(v.ToString()));
  if (name == "title") return Value(TitleFilter(v.ToString()));
  if (name == "replace") {
    const Value& from = Need(a, 0, "old", "replace", line);
    const Value& to = Need(a, 1, "new", "replace", line);
    return Value(Replace(v.ToString(), from.ToString(), to.ToString(), IntArg(a, 2, "count", -1, line), in));
  }
  if (name == "tojson") {
    const Value* ind = a.Get(0, "indent");
    int indent = -1;
    if (ind != nullptr && !ind->is_none()) {
      if (!ind->is_int() || ind->as_int() < 0 || ind->as_int() > 64) Fail("tojson: indent must be an integer 0-64", line);
      indent = static_cast<int>(ind->as_int());
    }
    std::string item_sep = indent >= 0 ? "," : ", ", key_sep = ": ";
    if (const Value* seps = a.Get(1, "separators"); seps != nullptr && !seps->is_none()) {
      if (!seps->is_array() || seps->array().size() != 2 || !seps->array()[0].is_string() || !seps->array()[1].is_string()) {
        Fail("tojson: separators must be a pair of strings", line);
      }
      item_sep = seps->array()[0].str();
      key_sep = seps->array()[1].str();
    }
    std::string out = ToJson(v, indent, item_sep, key_sep, BoolArg(a, 2, "sort_keys", false), line);
    in.CheckSize(out.size());
    return Value(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::MakeArray();
    if (!v.is_object()) Fail(std::string("items: expected a mapping, got '") + v.TypeName() + "'", line);
    Array out;
    for (const auto& kv : v.object().items) out.push_back(Value::MakeTuple({Value(kv.first), kv.second}));
    return Value::MakeArray(std::move(out));
  }
  if (name == "dictsort") {
    if (!v.is_object()) Fail("dictsort: expected a mapping", line);
    Array out;
    for (const auto& kv : v.object().items) out.push_back(Value::MakeTuple({Value(kv.first), kv.second}));
    const bool by_value = StrArg(a, 1, "by", "key", line) == "value";
    const bool cs = BoolArg(a, 0, "case_sensitive", false);
    const bool rev = BoolArg(a, 2, "reverse", false);
    return Value::MakeArray(Sorted(in, std::move(out), rev, cs, by_value ? "1" : "0", line));
  }
  if (name == "list") return Value::MakeArray(Iterate(v, line));
  if (name == "first" || name == "last") {
    const std::vector<Value> items = Iterate(v, line);
    if (items.empty()) return Value();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> cps = CodePoints(v.str());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value(std::move(out));
    }
    std::vector<Value> items = Iterate(v, line);
    std::reverse(items.begin(), items.end());
    return Value::MakeArray(std::move(items));
  }
  if (name == "sort") {
    const Value* attr = a.Get(2, "attribute");
    return Value::MakeArray(Sorted(in, Iterate(v, line), BoolArg(a, 0, "reverse", false), BoolArg(a, 1, "case_sensitive", false),
                                   attr && attr->is_string() ? attr->str() : "", line));
  }
  if (name == "unique") {
    Array out;
    for (const Value& x : Iterate(v, line)) {
      bool seen = false;
      for (const Value& y : out) seen = seen || (x.is_string() && y.is_string() ? AsciiMap(x.str(), ToLower) == AsciiMap(y.str(), ToLower) : x.Equals(y));
      if (!seen) out.push_back(x);
    }
    return Value::MakeArray(std::move(out));
  }
  if (name == "join") {
    const std::string sep = StrArg(a, 0, "d", "", line);
    const Value* attr = a.Get(1, "attribute");
    std::string out;
    bool first = true;
    for (const Value& x : Iterate(v, line)) {
      if (!first) out += sep;
      out += (attr && attr->is_string() ? AttrPath(in, x, attr->str(), line) : x).ToString();
      first = false;
      in.CheckSize(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "map") {
    Array out;
    const Value* attr = Keyword(a, "attribute");
    if (attr != nullptr) {
      const Value* def = Keyword(a, "default");
      for (const Value& x : Iterate(v, line)) {
        Value y = AttrPath(in, x, attr->ToString(), line);
        out.push_back(y.is_undefined() && def ? *def : y);
      }
      return Value::MakeArray(std::move(out));
    }
    if (a.positional.empty() || !a.positional[0].is_string()) Fail("map needs a filter name or attribute=", line);
    const std::string filter = a.positional[0].str();
    if (!IsKnownFilter(filter) || filter == "__slice__") Fail("unknown filter '" + filter + "'", line);
    Args rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    for (const Value& x : Iterate(v, line)) out.push_back(ApplyFilter(in, filter, x, rest, line));
    return Value::MakeArray(std::move(out));
  }
  if (name == "select" || name == "reject") return Value::MakeArray(SelectOrReject(in, v, a, false, name == "select", line));
  if (name == "selectattr" || name == "rejectattr") {
    return Value::MakeArray(SelectOrReject(in, v, a, true, name == "selectattr", line));
  }
  if (name == "attr") return GetAttr(in, v, StrArg(a, 0, "name", "", line), line);
  if (name == "int") {
    const int64_t def = IntArg(a, 0, "default", 0, line);
    if (v.is_int()) return Value(v.as_int());
    if (v.kind() == Value::Kind::kFloat) return std::isfinite(v.as_double()) ? Value(static_cast<int64_t>(v.as_double())) : Value(def);
    if (v.is_string()) {
      const std::string s = Strip(v.str(), nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      const long long x = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && end != nullptr && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(x));
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end != nullptr && *end == '\0' && std::isfinite(d) && std::fabs(d) < 9e18) return Value(static_cast<int64_t>(d));
    }
    return Value(def);
  }
  if (name == "float") {
    if (v.is_number()) return Value(v.as_double());
    if (v.is_string()) {
      const std::string s = Strip(v.str(), nullptr, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && end != nullptr && *end == '\0') return Value(d);
    }
    const Value* def = a.Get(0, "default");
    return def ? *def : Value(0.0);
  }
  if (name == "abs") {
    if (v.is_int()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    if (v.is_number()) return Value(std::fabs(v.as_double()));
    Fail(std::string("bad operand type for abs(): '") + v.TypeName() + "'", line);
  }
  if (name == "round") {
    if (!v.is_number()) Fail("round needs a number", line);
    const int64_t prec = IntArg(a, 0, "precision", 0, line);
    const std::string method = StrArg(a, 1, "method", "common", line);
    const double scale = std::pow(10.0, static_cast<double>(std::clamp<int64_t>(prec, -300, 300)));
    const double x = v.as_double() * scale;
    // "common" is Python's round(): halves go to the even neighbour (the default FE_TONEAREST).
    const double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / scale);
  }
  if (name == "sum") {
    const Value* attr = a.Get(0, "attribute");
    Value total = a.Get(1, "start") ? *a.Get(1, "start") : Value(int64_t{0});
    for (const Value& x : Iterate(v, line)) {
      const Value y = attr && attr->is_string() ? AttrPath(in, x, attr->str(), line) : x;
      if (!y.is_number() || !total.is_number()) Fail("sum needs numbers", line);
      total = total.is_int() && y.is_int() ? Value(total.as_int() + y.as_int()) : Value(total.as_double() + y.as_double());
    }
    return total;
  }
  if (name == "min" || name == "max") {
    std::vector<Value> items = Iterate(v, line);
    if (items.empty()) return Value();
    const Value* attr = a.Get(1, "attribute");
    items = Sorted(in, std::move(items), false, BoolArg(a, 0, "case_sensitive", false), attr && attr->is_string() ? attr->str() : "", line);
    return name == "min" ? items.front() : items.back();
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(Split(v.ToString(), nullptr, -1, line).array().size()));
  if (name == "indent") {
    const Value* w = a.Get(0, "width");
    const std::string pad = w == nullptr ? "    " : w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(w->is_int() ? w->as_int() : 4, 0, 256)), ' ');
    const bool first = BoolArg(a, 1, "first", false);
    const bool blank = BoolArg(a, 2, "blank", false);
    const std::string s = v.ToString();
    std::string out;
    size_t pos = 0;
    bool is_first = true;
    while (pos <= s.size()) {
      size_t e = s.find('\n', pos);
      const std::string line_text = s.substr(pos, e == std::string::npos ? std::string::npos : e - pos);
      if ((!is_first || first) && (blank || !line_text.empty())) out += pad;
      out += line_text;
      if (e == std::string::npos) break;
      out += '\n';
      pos = e + 1;
      is_first = false;
      in.CheckSize(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(FormatPercent(in, v.ToString(), a.positional, line));
  Fail("unknown filter '" + name + "'", line);
}

void AddGlobalFunctions(Interpreter& in, Object* builtins) {
  Interpreter* interp = &in;
  builtins->Set("range", Value::MakeFunction("range", [interp](const Args& a) -> Value {
                  int64_t start = 0, stop = 0, step = 1;
                  for (const Value& v : a.positional) {
                    if (!v.is_int()) throw Error("range() arguments must be integers");
                  }
                  if (a.positional.size() == 1) {
                    stop = a.positional[0].as_int();
                  } else if (a.positional.size() == 2 || a.positional.size() == 3) {
                    start = a.positional[0].as_int();
                    stop = a.positional[1].as_int();
                    if (a.positional.size() == 3) step = a.positional[2].as_int();
                  } else {
                    throw Error("range() takes 1 to 3 arguments");
                  }
                  if (step == 0) throw Error("range() step must not be zero");
                  Array out;
                  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                    if (static_cast<int64_t>(out.size()) >= interp->options().limits.max_range) {
                      throw Error("range() longer than " + std::to_string(interp->options().limits.max_range));
                    }
                    out.emplace_back(i);
                  }
                  return Value::MakeArray(std::move(out));
                }));
  builtins->Set("namespace", Value::MakeFunction("namespace", [](const Args& a) -> Value {
                  Value ns = Value::MakeObject();
                  ns.object().is_namespace = true;
                  for (const Value& p : a.positional) {
                    if (!p.is_object()) throw Error("namespace() takes a dict or keyword arguments");
                    for (const auto& kv : p.object().items) ns.object().Set(kv.first, kv.second);
                  }
                  for (const auto& kv : a.keyword) ns.object().Set(kv.first, kv.second);
                  return ns;
                }));
  builtins->Set("dict", Value::MakeFunction("dict", [](const Args& a) -> Value {
                  Value d = Value::MakeObject();
                  for (const Value& p : a.positional) {
                    if (!p.is_object()) throw Error("dict() takes a dict or keyword arguments");
                    for (const auto& kv : p.object().items) d.object().Set(kv.first, kv.second);
                  }
                  for (const auto& kv : a.keyword) d.object().Set(kv.first, kv.second);
                  return d;
                }));
  builtins->Set("raise_exception", Value::MakeFunction("raise_exception", [](const Args& a) -> Value {
                  throw Error("raise_exception: " + (a.positional.empty() ? std::string("(no message)") : a.positional[0].ToString()));
                }));
  builtins->Set("strftime_now", Value::MakeFunction("strftime_now", [interp](const Args& a) -> Value {
                  if (a.positional.empty() || !a.positional[0].is_string()) throw Error("strftime_now() needs a format string");
                  const std::time_t t = interp->options().now != 0 ? interp->options().now : std::time(nullptr);
                  std::tm tm{};
                  localtime_r(&t, &tm);
                  char buf[256];
                  const size_t n = std::strftime(buf, sizeof(buf), a.positional[0].str().c_str(), &tm);
                  return Value(std::string(buf, n));
                }));
}

}  // namespace trine::jinja
