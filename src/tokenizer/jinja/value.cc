#include "tokenizer/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tokenizer/unicode.h"

namespace trine::jinja {

const Value* Object::Find(const std::string& key) const {
  for (const auto& kv : items) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

void Object::Set(const std::string& key, Value v) {
  for (auto& kv : items) {
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* Args::Get(size_t pos, const char* name) const {
  for (const auto& kv : keyword) {
    if (kv.first == name) return &kv.second;
  }
  return pos < positional.size() ? &positional[pos] : nullptr;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double d) : kind_(Kind::kFloat), f_(d) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

Value Value::MakeArray(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  v.a_ = std::make_shared<Array>(std::move(items));
  return v;
}

Value Value::MakeTuple(Array items) {
  Value v = MakeArray(std::move(items));
  v.b_ = true;
  return v;
}

Value Value::MakeObject() {
  Value v;
  v.kind_ = Kind::kObject;
  v.o_ = std::make_shared<Object>();
  return v;
}

Value Value::MakeFunction(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Function>(std::move(fn));
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0.0;
    case Kind::kString: return !s_.empty();
    case Kind::kArray: return !a_->empty();  // b_ marks a tuple here
    case Kind::kObject: return !o_->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[40];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  // Python switches to exponent notation at 1e16 and below 1e-4; %g at the precision's digits.
  // Re-render the shortest digits in Python's layout.
  std::string s = buf;
  const size_t e = s.find('e');
  std::string mant = e == std::string::npos ? s : s.substr(0, e);
  int exp10 = e == std::string::npos ? 0 : std::atoi(s.c_str() + e + 1);
  const bool neg = !mant.empty() && mant[0] == '-';
  if (neg) mant.erase(0, 1);
  std::string digits;
  int point = 0;  // digits before the decimal point in `mant`
  bool seen_point = false;
  for (char c : mant) {
    if (c == '.') {
      seen_point = true;
    } else {
      digits += c;
      if (!seen_point) ++point;
    }
  }
  // Normalise: strip leading zeros, tracking the decimal exponent of the first digit.
  int lead = 0;
  while (lead + 1 < static_cast<int>(digits.size()) && digits[lead] == '0') ++lead;
  digits.erase(0, lead);
  point -= lead;
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decexp = point + exp10;  // value = 0.digits x 10^decexp
  std::string out = neg ? "-" : "";
  if (digits == "0") return out + "0.0";
  const int sci = decexp - 1;
  if (sci < -4 || sci >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[24];
    std::snprintf(eb, sizeof(eb), "e%c%02d", sci < 0 ? '-' : '+', std::abs(sci));
    return out + eb;
  }
  if (decexp <= 0) return out + "0." + std::string(static_cast<size_t>(-decexp), '0') + digits;
  if (static_cast<int>(digits.size()) <= decexp) {
    return out + digits + std::string(static_cast<size_t>(decexp) - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, static_cast<size_t>(decexp)) + "." + digits.substr(static_cast<size_t>(decexp));
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    // The lead byte's length (the tokenizer's table), when the whole sequence is there.
    size_t n = unicode::SeqLen(static_cast<uint8_t>(s[i]));
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
        n = 1;
        break;
      }
    }
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

namespace {

std::string QuoteString(const std::string& s) {
  // Python prefers single quotes and switches to double quotes when only single quotes occur.
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\x%02x", static_cast<unsigned char>(c));
          out += b;
        } else {
          out += c;
        }
    }
  }
  out += q;
  return out;
}

}  // namespace

std::string Value::ToString() const {
  switch (kind_) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b_ ? "True" : "False";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatRepr(f_);
    case Kind::kString: return s_;
    case Kind::kArray: {
      std::string out = b_ ? "(" : "[";
      for (size_t i = 0; i < a_->size(); ++i) out += (i ? ", " : "") + (*a_)[i].Repr();
      if (b_ && a_->size() == 1) out += ",";
      return out + (b_ ? ")" : "]");
    }
    case Kind::kObject: {
      if (o_->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < o_->items.size(); ++i) {
        out += (i ? ", " : "") + QuoteString(o_->items[i].first) + ": " + o_->items[i].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction: return "<function " + s_ + ">";
  }
  return "";
}

std::string Value::Repr() const {
  if (kind_ == Kind::kString) return QuoteString(s_);
  if (kind_ == Kind::kUndefined) return "Undefined";
  return ToString();
}

const char* Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kArray: return "list";
    case Kind::kObject: return o_->is_namespace ? "Namespace" : "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

bool Value::Equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ != Kind::kFloat && o.kind_ != Kind::kFloat) return as_int() == o.as_int();
    return as_double() == o.as_double();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kString: return s_ == o.s_;
    case Kind::kArray: {
      if (a_ == o.a_) return true;
      if (a_->size() != o.a_->size()) return false;
      for (size_t i = 0; i < a_->size(); ++i) {
        if (!(*a_)[i].Equals((*o.a_)[i])) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (o_ == o.o_) return true;
      if (o_->is_namespace || o.o_->is_namespace) return false;  // identity only, as Python objects
      if (o_->items.size() != o.o_->items.size()) return false;
      for (const auto& kv : o_->items) {
        const Value* other = o.o_->Find(kv.first);
        if (other == nullptr || !kv.second.Equals(*other)) return false;
      }
      return true;
    }
    case Kind::kFunction: return fn_ == o.fn_;
    default: return false;
  }
}

}  // namespace trine::jinja
