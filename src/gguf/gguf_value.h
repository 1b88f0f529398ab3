// GGUF metadata values: the on-disk value type ids and an owning value used by both the reader
// and the writer. Scalar arrays are stored packed (as on disk) so a file cannot make the reader
// allocate more than a small multiple of its own size.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace trine {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
  kCount = 13,
};

const char* GgufTypeName(GgufType t);
// Size in bytes of a scalar value type; 0 for string and array.
size_t GgufScalarSize(GgufType t);
bool GgufTypeIsInteger(GgufType t);

class GgufValue {
 public:
  GgufValue() = default;

  static GgufValue U8(uint8_t v) { return Scalar(GgufType::kU8, &v); }
  static GgufValue I8(int8_t v) { return Scalar(GgufType::kI8, &v); }
  static GgufValue U16(uint16_t v) { return Scalar(GgufType::kU16, &v); }
  static GgufValue I16(int16_t v) { return Scalar(GgufType::kI16, &v); }
  static GgufValue U32(uint32_t v) { return Scalar(GgufType::kU32, &v); }
  static GgufValue I32(int32_t v) { return Scalar(GgufType::kI32, &v); }
  static GgufValue U64(uint64_t v) { return Scalar(GgufType::kU64, &v); }
  static GgufValue I64(int64_t v) { return Scalar(GgufType::kI64, &v); }
  static GgufValue F32(float v) { return Scalar(GgufType::kF32, &v); }
  static GgufValue F64(double v) { return Scalar(GgufType::kF64, &v); }
  static GgufValue Bool(bool v) {
    uint8_t b = v ? 1 : 0;
    return Scalar(GgufType::kBool, &b);
  }
  static GgufValue String(std::string s) {
    GgufValue v;
    v.type_ = GgufType::kString;
    v.str_ = std::move(s);
    return v;
  }
  // Array of scalars from packed little-endian bytes (count elements of elem_type).
  static GgufValue ScalarArray(GgufType elem_type, uint64_t count, std::vector<uint8_t> packed) {
    GgufValue v;
    v.type_ = GgufType::kArray;
    v.elem_type_ = elem_type;
    v.count_ = count;
    v.raw_ = std::move(packed);
    return v;
  }
  template <typename T>
  static GgufValue ArrayOf(GgufType elem_type, const std::vector<T>& values) {
    std::vector<uint8_t> raw(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(raw.data(), values.data(), raw.size());
    return ScalarArray(elem_type, values.size(), std::move(raw));
  }
  static GgufValue StringArray(std::vector<std::string> strings) {
    GgufValue v;
    v.type_ = GgufType::kArray;
    v.elem_type_ = GgufType::kString;
    v.count_ = strings.size();
    v.strs_ = std::move(strings);
    return v;
  }
  static GgufValue ArrayArray(std::vector<GgufValue> items) {
    GgufValue v;
    v.type_ = GgufType::kArray;
    v.elem_type_ = GgufType::kArray;
    v.count_ = items.size();
    v.items_ = std::move(items);
    return v;
  }

  GgufType type() const { return type_; }
  bool is_array() const { return type_ == GgufType::kArray; }
  bool is_string() const { return type_ == GgufType::kString; }
  bool is_integer() const { return GgufTypeIsInteger(type_); }
  bool is_float() const { return type_ == GgufType::kF32 || type_ == GgufType::kF64; }

  // Scalar accessors. AsInt: any integer or bool type; AsDouble: integer or float types.
  bool AsInt(int64_t* out) const;
  bool AsUint(uint64_t* out) const;  // false for negative values
  bool AsDouble(double* out) const;
  bool AsBool(bool* out) const;
  const std::string& str() const { return str_; }

  // Array accessors.
  GgufType elem_type() const { return elem_type_; }
  uint64_t count() const { return count_; }
  const std::vector<std::string>& strings() const { return strs_; }
  const std::vector<GgufValue>& items() const { return items_; }
  const std::vector<uint8_t>& raw() const { return raw_; }
  // Element i of a scalar array as a number (no bounds check beyond i < count()).
  bool IntAt(uint64_t i, int64_t* out) const;
  bool DoubleAt(uint64_t i, double* out) const;

  // One-line human-readable form; long arrays are summarised.
  std::string ToDisplayString(size_t max_items = 8) const;

 private:
  static GgufValue Scalar(GgufType t, const void* p) {
    GgufValue v;
    v.type_ = t;
    std::memcpy(&v.scalar_, p, GgufScalarSize(t));
    return v;
  }

  GgufType type_ = GgufType::kU8;
  uint64_t scalar_ = 0;  // raw little-endian bits of a scalar
  std::string str_;
  GgufType elem_type_ = GgufType::kU8;
  uint64_t count_ = 0;
  std::vector<uint8_t> raw_;          // packed scalar array elements
  std::vector<std::string> strs_;     // string array elements
  std::vector<GgufValue> items_;      // nested array elements
};

// Decodes a scalar of type t from raw little-endian bytes at p.
bool DecodeScalarInt(GgufType t, const uint8_t* p, int64_t* out);
bool DecodeScalarDouble(GgufType t, const uint8_t* p, double* out);

}  // namespace trine
