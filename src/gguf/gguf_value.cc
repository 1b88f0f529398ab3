// GgufValue accessors and display.
#include "gguf/gguf_value.h"

#include <cstdio>

namespace trine {

const char* GgufTypeName(GgufType t) {
  static const char* kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32", "i32", "f32",
                                 "bool", "string", "array", "u64", "i64", "f64"};
  const uint32_t i = static_cast<uint32_t>(t);
  return i < static_cast<uint32_t>(GgufType::kCount) ? kNames[i] : "unknown";
}

size_t GgufScalarSize(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    default:
      return 0;
  }
}

bool GgufTypeIsInteger(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kU16:
    case GgufType::kI16:
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kU64:
    case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

bool DecodeScalarInt(GgufType t, const uint8_t* p, int64_t* out) {
  switch (t) {
    case GgufType::kU8: { uint8_t v; std::memcpy(&v, p, 1); *out = v; return true; }
    case GgufType::kI8: { int8_t v; std::memcpy(&v, p, 1); *out = v; return true; }
    case GgufType::kU16: { uint16_t v; std::memcpy(&v, p, 2); *out = v; return true; }
    case GgufType::kI16: { int16_t v; std::memcpy(&v, p, 2); *out = v; return true; }
    case GgufType::kU32: { uint32_t v; std::memcpy(&v, p, 4); *out = v; return true; }
    case GgufType::kI32: { int32_t v; std::memcpy(&v, p, 4); *out = v; return true; }
    case GgufType::kI64: { int64_t v; std::memcpy(&v, p, 8); *out = v; return true; }
    case GgufType::kU64: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      if (v > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    case GgufType::kBool: { uint8_t v; std::memcpy(&v, p, 1); *out = v != 0; return true; }
    default:
      return false;
  }
}

bool DecodeScalarDouble(GgufType t, const uint8_t* p, double* out) {
  if (t == GgufType::kF32) {
    float v;
    std::memcpy(&v, p, 4);
    *out = v;
    return true;
  }
  if (t == GgufType::kF64) {
    std::memcpy(out, p, 8);
    return true;
  }
  if (t == GgufType::kU64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    *out = static_cast<double>(v);
    return true;
  }
  int64_t i;
  if (!DecodeScalarInt(t, p, &i)) return false;
  *out = static_cast<double>(i);
  return true;
}

bool GgufValue::AsInt(int64_t* out) const {
  if (!is_integer() && type_ != GgufType::kBool) return false;
  return DecodeScalarInt(type_, reinterpret_cast<const uint8_t*>(&scalar_), out);
}

bool GgufValue::AsUint(uint64_t* out) const {
  if (type_ == GgufType::kU64) {
    std::memcpy(out, &scalar_, 8);
    return true;
  }
  int64_t v;
  if (!AsInt(&v) || v < 0) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}

bool GgufValue::AsDouble(double* out) const {
  if (!is_integer() && !is_float()) return false;
  return DecodeScalarDouble(type_, reinterpret_cast<const uint8_t*>(&scalar_), out);
}

bool GgufValue::AsBool(bool* out) const {
  if (type_ != GgufType::kBool) return false;
  *out = (scalar_ & 0xFF) != 0;
  return true;
}

bool GgufValue::IntAt(uint64_t i, int64_t* out) const {
  if (!is_array() || i >= count_) return false;
  const size_t sz = GgufScalarSize(elem_type_);
  if (sz == 0 || (i + 1) * sz > raw_.size()) return false;
  return DecodeScalarInt(elem_type_, raw_.data() + i * sz, out);
}

bool GgufValue::DoubleAt(uint64_t i, double* out) const {
  if (!is_array() || i >= count_) return false;
  const size_t sz = GgufScalarSize(elem_type_);
  if (sz == 0 || (i + 1) * sz > raw_.size()) return false;
  return DecodeScalarDouble(elem_type_, raw_.data() + i * sz, out);
}

static std::string Quote(const std::string& s, size_t max_len) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ >= max_len) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

static std::string ScalarToString(GgufType t, const uint8_t* p) {
  char buf[64];
  if (t == GgufType::kBool) return p[0] ? "true" : "false";
  if (t == GgufType::kF32 || t == GgufType::kF64) {
    double d = 0;
    DecodeScalarDouble(t, p, &d);
    std::snprintf(buf, sizeof(buf), "%g", d);
    return buf;
  }
  if (t == GgufType::kU64) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(v));
    return buf;
  }
  int64_t v = 0;
  DecodeScalarInt(t, p, &v);
  std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  return buf;
}

std::string GgufValue::ToDisplayString(size_t max_items) const {
  if (type_ == GgufType::kString) return Quote(str_, 120);
  if (type_ != GgufType::kArray) {
    return ScalarToString(type_, reinterpret_cast<const uint8_t*>(&scalar_));
  }
  std::string out = std::string("[") + GgufTypeName(elem_type_) + " x " + std::to_string(count_) + "]";
  if (count_ == 0) return out;
  out += " ";
  const uint64_t shown = count_ < max_items ? count_ : max_items;
  for (uint64_t i = 0; i < shown; ++i) {
    if (i) out += ", ";
    if (elem_type_ == GgufType::kString) {
      out += Quote(strs_[i], 40);
    } else if (elem_type_ == GgufType::kArray) {
      out += items_[i].ToDisplayString(3);
    } else {
      out += ScalarToString(elem_type_, raw_.data() + i * GgufScalarSize(elem_type_));
    }
  }
  if (shown < count_) out += ", ...";
  return out;
}

}  // namespace trine
