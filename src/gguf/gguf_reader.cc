// GGUF reader implementation. A bounded Cursor does every read; nothing is allocated before the
// bytes that justify it have been checked to exist in the file.
#include "gguf/gguf_reader.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/utf8.h"

namespace trine {
namespace {

constexpr int kMaxArrayDepth = 4;
constexpr uint64_t kMaxSplits = 9999;
// GGUF spec: a key is at most 2^16-1 bytes.
constexpr uint64_t kMaxKeyBytes = 65535;
// Containers are never sized from a count read from the file: at most this many slots are
// reserved up front, the rest grow as elements are actually parsed, so memory follows the bytes
// present in the file and not what its header claims.
constexpr uint64_t kMaxReserve = 4096;
// Arrays of arrays (which llama.cpp does not read at all) cost ~150 bytes of memory per 12-byte
// element; their total element count per file is capped so a small file cannot expand 10x.
constexpr uint64_t kMaxNestedItems = 1u << 20;

// Bounded little-endian reader over one file; every failure records what and where.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path)
      : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status Fail(const std::string& what) const { return FailAt(pos_, what); }
  Status FailAt(uint64_t at, const std::string& what) const {
    return InvalidFile(path_ + ": " + what + " (at byte " + std::to_string(at) + ")");
  }

  Status Bytes(void* out, uint64_t n, const std::string& what) {
    if (n > remaining()) {
      return Fail("file truncated while reading " + what + ": need " + std::to_string(n) +
                  " bytes, " + std::to_string(remaining()) + " left");
    }
    if (n != 0) std::memcpy(out, data_ + pos_, static_cast<size_t>(n));
    pos_ += n;
    return Status::Ok();
  }
  template <typename T>
  Status Read(T* out, const std::string& what) {
    return Bytes(out, sizeof(T), what);
  }
  Status String(std::string* out, const std::string& what) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    TRINE_RETURN_IF_ERROR(Read(&len, what + " length"));
    if (len > remaining()) {
      return FailAt(at, what + " length " + std::to_string(len) + " exceeds the " +
                            std::to_string(remaining()) + " bytes left in the file");
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return Status::Ok();
  }
  Status Skip(uint64_t n, const std::string& what) {
    if (n > remaining()) return Fail("file truncated in " + what);
    pos_ += n;
    return Status::Ok();
  }
  const uint8_t* here() const { return data_ + pos_; }

  // Budget shared by all nested arrays of one file; false once it is spent.
  bool TakeNestedItems(uint64_t n) {
    if (n > nested_left_) return false;
    nested_left_ -= n;
    return true;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
  uint64_t nested_left_ = kMaxNestedItems;
};

Status ReadValue(Cursor* c, GgufType type, const std::string& key, int depth, GgufValue* out);

Status ReadArray(Cursor* c, const std::string& key, int depth, GgufValue* out) {
  const uint64_t at = c->pos();
  uint32_t elem_raw = 0;
  uint64_t count = 0;
  TRINE_RETURN_IF_ERROR(c->Read(&elem_raw, "array element type of '" + key + "'"));
  TRINE_RETURN_IF_ERROR(c->Read(&count, "array length of '" + key + "'"));
  if (elem_raw >= static_cast<uint32_t>(GgufType::kCount)) {
    return c->FailAt(at, "key '" + key + "': unknown array element type " + std::to_string(elem_raw));
  }
  const GgufType elem = static_cast<GgufType>(elem_raw);
  const size_t scalar = GgufScalarSize(elem);
  // Smallest encoding of one element: a scalar's size, 8 bytes for a string's length, 12 for a
  // nested array's header. The count must fit in what is left of the file.
  const uint64_t min_elem = scalar ? scalar : (elem == GgufType::kString ? 8 : 12);
  if (count > c->remaining() / min_elem) {
    return c->FailAt(at, "key '" + key + "': array of " + std::to_string(count) + " " +
                             GgufTypeName(elem) + " cannot fit in the " +
                             std::to_string(c->remaining()) + " bytes left in the file");
  }
  if (scalar) {
    std::vector<uint8_t> raw(static_cast<size_t>(count * scalar));
    TRINE_RETURN_IF_ERROR(c->Bytes(raw.data(), raw.size(), "array '" + key + "'"));
    if (elem == GgufType::kBool) {
      for (uint8_t b : raw) {
        if (b > 1) return c->Fail("key '" + key + "': bool array element is " + std::to_string(b));
      }
    }
    *out = GgufValue::ScalarArray(elem, count, std::move(raw));
    return Status::Ok();
  }
  if (elem == GgufType::kString) {
    std::vector<std::string> strs;
    strs.reserve(static_cast<size_t>(std::min(count, kMaxReserve)));
    for (uint64_t i = 0; i < count; ++i) {
      strs.emplace_back();
      TRINE_RETURN_IF_ERROR(c->String(&strs.back(), "element " + std::to_string(i) + " of '" + key + "'"));
    }
    *out = GgufValue::StringArray(std::move(strs));
    return Status::Ok();
  }
  // Nested arrays.
  if (depth + 1 > kMaxArrayDepth) {
    return c->FailAt(at, "key '" + key + "': arrays nested deeper than " + std::to_string(kMaxArrayDepth));
  }
  if (!c->TakeNestedItems(count)) {
    return c->FailAt(at, "key '" + key + "': more than " + std::to_string(kMaxNestedItems) +
                             " nested array elements in the file");
  }
  std::vector<GgufValue> items;
  items.reserve(static_cast<size_t>(std::min(count, kMaxReserve)));
  for (uint64_t i = 0; i < count; ++i) {
    items.emplace_back();
    TRINE_RETURN_IF_ERROR(ReadArray(c, key, depth + 1, &items.back()));
  }
  *out = GgufValue::ArrayArray(std::move(items));
  return Status::Ok();
}

Status ReadValue(Cursor* c, GgufType type, const std::string& key, int depth, GgufValue* out) {
  switch (type) {
    case GgufType::kString: {
      std::string s;
      TRINE_RETURN_IF_ERROR(c->String(&s, "value of '" + key + "'"));
      *out = GgufValue::String(std::move(s));
      return Status::Ok();
    }
    case GgufType::kArray:
      return ReadArray(c, key, depth, out);
    case GgufType::kBool: {
      uint8_t b = 0;
      TRINE_RETURN_IF_ERROR(c->Read(&b, "value of '" + key + "'"));
      if (b > 1) return c->Fail("key '" + key + "': bool value is " + std::to_string(b));
      *out = GgufValue::Bool(b != 0);
      return Status::Ok();
    }
    default: {
      const size_t sz = GgufScalarSize(type);
      if (sz == 0) return c->Fail("key '" + key + "': unknown value type");
      uint8_t raw[8] = {0};
      TRINE_RETURN_IF_ERROR(c->Bytes(raw, sz, "value of '" + key + "'"));
      switch (type) {
        case GgufType::kU8: *out = GgufValue::U8(raw[0]); break;
        case GgufType::kI8: { int8_t v; std::memcpy(&v, raw, 1); *out = GgufValue::I8(v); break; }
        case GgufType::kU16: { uint16_t v; std::memcpy(&v, raw, 2); *out = GgufValue::U16(v); break; }
        case GgufType::kI16: { int16_t v; std::memcpy(&v, raw, 2); *out = GgufValue::I16(v); break; }
        case GgufType::kU32: { uint32_t v; std::memcpy(&v, raw, 4); *out = GgufValue::U32(v); break; }
        case GgufType::kI32: { int32_t v; std::memcpy(&v, raw, 4); *out = GgufValue::I32(v); break; }
        case GgufType::kU64: { uint64_t v; std::memcpy(&v, raw, 8); *out = GgufValue::U64(v); break; }
        case GgufType::kI64: { int64_t v; std::memcpy(&v, raw, 8); *out = GgufValue::I64(v); break; }
        case GgufType::kF32: { float v; std::memcpy(&v, raw, 4); *out = GgufValue::F32(v); break; }
        case GgufType::kF64: { double v; std::memcpy(&v, raw, 8); *out = GgufValue::F64(v); break; }
        default: break;
      }
      return Status::Ok();
    }
  }
}

// Matches "<prefix>-00001-of-00003.gguf"; fills prefix, index (1-based) and count. Parsed by
// hand: std::regex recurses per input character and overflows the stack on long paths.
bool ParseSplitName(const std::string& path, std::string* prefix, int* index, int* count) {
  static const char kTail[] = "-NNNNN-of-NNNNN.gguf";
  const size_t tail = sizeof(kTail) - 1;
  if (path.size() < tail) return false;
  const size_t base = path.size() - tail;
  int idx = 0, cnt = 0;
  for (size_t i = 0; i < tail; ++i) {
    const char c = path[base + i];
    if (kTail[i] == 'N') {
      if (c < '0' || c > '9') return false;
      int& v = i < 6 ? idx : cnt;
      v = v * 10 + (c - '0');
    } else if (c != kTail[i]) {
      return false;
    }
  }
  *prefix = path.substr(0, base);
  *index = idx;
  *count = cnt;
  return idx >= 1 && cnt >= 1 && idx <= cnt;
}

std::string SplitName(const std::string& prefix, int index, int count) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05d-of-%05d.gguf", index, count);
  return prefix + buf;
}

}  // namespace

std::string GgufTensorInfo::ShapeString() const {
  std::string s = "[";
  for (int i = 0; i < n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(ne[i]);
  }
  return s + "]";
}

uint64_t GgufFile::file_size() const {
  uint64_t total = 0;
  for (const auto& f : files_) total += f->size();
  return total;
}

bool GgufFile::is_mmapped() const {
  for (const auto& f : files_) {
    if (!f->is_mmapped()) return false;
  }
  return !files_.empty();
}

const GgufValue* GgufFile::Find(const std::string& key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

void GgufFile::DropMetadata(const std::string& key) {
  auto it = kv_index_.find(key);
  if (it == kv_index_.end()) return;
  kv_.erase(kv_.begin() + static_cast<std::ptrdiff_t>(it->second));
  kv_index_.clear();
  for (size_t i = 0; i < kv_.size(); ++i) kv_index_.emplace(kv_[i].first, i);
}

const GgufTensorInfo* GgufFile::FindTensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Status GgufFile::GetInt(const std::string& key, int64_t* out, bool* found) const {
  const GgufValue* v = Find(key);
  *found = v != nullptr;
  if (!v) return Status::Ok();
  if (!v->is_integer()) {
    return InvalidFile(path_ + ": key '" + key + "' must be an integer, found " + GgufTypeName(v->type()));
  }
  if (!v->AsInt(out)) {  // a u64 past INT64_MAX
    uint64_t u = 0;
    v->AsUint(&u);
    return InvalidFile(path_ + ": key '" + key + "' = " + std::to_string(u) + " is out of range");
  }
  return Status::Ok();
}

Status GgufFile::GetFloat(const std::string& key, double* out, bool* found) const {
  const GgufValue* v = Find(key);
  *found = v != nullptr;
  if (!v) return Status::Ok();
  if (!v->AsDouble(out)) {
    return InvalidFile(path_ + ": key '" + key + "' must be a number, found " + GgufTypeName(v->type()));
  }
  return Status::Ok();
}

Status GgufFile::GetString(const std::string& key, std::string* out, bool* found) const {
  const GgufValue* v = Find(key);
  *found = v != nullptr;
  if (!v) return Status::Ok();
  if (!v->is_string()) {
    return InvalidFile(path_ + ": key '" + key + "' must be a string, found " + GgufTypeName(v->type()));
  }
  *out = v->str();
  return Status::Ok();
}

Status GgufFile::GetBool(const std::string& key, bool* out, bool* found) const {
  const GgufValue* v = Find(key);
  *found = v != nullptr;
  if (!v) return Status::Ok();
  if (!v->AsBool(out)) {
    return InvalidFile(path_ + ": key '" + key + "' must be a bool, found " + GgufTypeName(v->type()));
  }
  return Status::Ok();
}

Status GgufFile::ParseOne(const MappedFile& file, int split_index,
                          std::vector<std::pair<std::string, GgufValue>>* kv,
                          std::vector<GgufTensorInfo>* tensors, uint32_t* alignment,
                          uint64_t* data_offset) {
  const std::string& path = file.path();
  Cursor c(file.data(), file.size(), path);
  char magic[4];
  if (file.size() < 4) {
    return InvalidFile(path + ": not a GGUF file: only " + std::to_string(file.size()) + " bytes");
  }
  TRINE_RETURN_IF_ERROR(c.Bytes(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return InvalidFile(path + ": not a GGUF file (bad magic at byte 0)");
  }
  uint32_t version = 0;
  TRINE_RETURN_IF_ERROR(c.Read(&version, "version"));
  if (version == 0x03000000u || version == 0x02000000u) {
    return c.FailAt(4, "big-endian GGUF files are not supported");
  }
  if (version == 1) return c.FailAt(4, "GGUF version 1 is not supported (re-convert the model)");
  if (version != 2 && version != 3) {
    return c.FailAt(4, "unsupported GGUF version " + std::to_string(version) + " (expected 2 or 3)");
  }
  if (split_index == 0) version_ = version;

  uint64_t n_tensors = 0, n_kv = 0;
  TRINE_RETURN_IF_ERROR(c.Read(&n_tensors, "tensor count"));
  TRINE_RETURN_IF_ERROR(c.Read(&n_kv, "metadata count"));
  // Smallest key/value: 8-byte key length + 1 key byte + 4-byte type + 1-byte value.
  if (n_kv > c.remaining() / 14) {
    return c.FailAt(16, "metadata count " + std::to_string(n_kv) + " cannot fit in a file of " +
                            std::to_string(file.size()) + " bytes");
  }
  // Smallest tensor info: 8+1 name, 4 n_dims, 8 ne, 4 type, 8 offset.
  if (n_tensors > c.remaining() / 33) {
    return c.FailAt(8, "tensor count " + std::to_string(n_tensors) + " cannot fit in a file of " +
                           std::to_string(file.size()) + " bytes");
  }

  std::unordered_map<std::string, size_t> seen;
  kv->reserve(static_cast<size_t>(std::min(n_kv, kMaxReserve)));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key;
    TRINE_RETURN_IF_ERROR(c.String(&key, "key of metadata entry " + std::to_string(i)));
    if (key.empty()) return c.FailAt(at, "metadata entry " + std::to_string(i) + " has an empty key");
    if (key.size() > kMaxKeyBytes) {
      return c.FailAt(at, "metadata entry " + std::to_string(i) + " key is " + std::to_string(key.size()) +
                              " bytes (limit " + std::to_string(kMaxKeyBytes) + ")");
    }
    if (!IsValidUtf8(key)) return c.FailAt(at, "metadata entry " + std::to_string(i) + " key is not valid UTF-8");
    if (seen.count(key)) return c.FailAt(at, "duplicate metadata key '" + key + "'");
    uint32_t type_raw = 0;
    const uint64_t type_at = c.pos();
    TRINE_RETURN_IF_ERROR(c.Read(&type_raw, "type of '" + key + "'"));
    if (type_raw >= static_cast<uint32_t>(GgufType::kCount)) {
      return c.FailAt(type_at, "key '" + key + "': unknown value type " + std::to_string(type_raw));
    }
    GgufValue value;
    TRINE_RETURN_IF_ERROR(ReadValue(&c, static_cast<GgufType>(type_raw), key, 0, &value));
    seen.emplace(key, kv->size());
    kv->emplace_back(std::move(key), std::move(value));
  }

  // Alignment and architecture come from this split's own metadata.
  std::string arch;
  *alignment = kGgufDefaultAlignment;
  if (auto it = seen.find("general.alignment"); it != seen.end()) {
    const GgufValue& v = (*kv)[it->second].second;
    uint64_t a = 0;
    if (v.type() != GgufType::kU32 || !v.AsUint(&a)) {
      return InvalidFile(path + ": key 'general.alignment' must be u32, found " + GgufTypeName(v.type()));
    }
    if (a == 0 || (a & (a - 1)) != 0) {
      return InvalidFile(path + ": general.alignment " + std::to_string(a) + " is not a power of two");
    }
    *alignment = static_cast<uint32_t>(a);
  }
  if (auto it = seen.find("general.architecture"); it != seen.end()) {
    const GgufValue& v = (*kv)[it->second].second;
    if (!v.is_string()) {
      return InvalidFile(path + ": key 'general.architecture' must be a string, found " + GgufTypeName(v.type()));
    }
    arch = v.str();
  } else if (split_index > 0) {
    arch = architecture_;
  }

  std::unordered_map<std::string, size_t> names;
  const size_t first = tensors->size();
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    GgufTensorInfo t;
    t.split = split_index;
    TRINE_RETURN_IF_ERROR(c.String(&t.name, "name of tensor " + std::to_string(i)));
    if (t.name.empty()) return c.FailAt(at, "tensor " + std::to_string(i) + " has an empty name");
    if (t.name.size() > kGgufMaxNameBytes) {
      return c.FailAt(at, "tensor " + std::to_string(i) + " name is " + std::to_string(t.name.size()) +
                              " bytes (limit " + std::to_string(kGgufMaxNameBytes) + ")");
    }
    if (!IsValidUtf8(t.name)) return c.FailAt(at, "tensor " + std::to_string(i) + " name is not valid UTF-8");
    const std::string tn = "tensor '" + t.name + "'";
    if (names.count(t.name)) return c.FailAt(at, "duplicate " + tn);
    uint32_t n_dims = 0;
    TRINE_RETURN_IF_ERROR(c.Read(&n_dims, tn + " dimension count"));
    if (n_dims == 0 || n_dims > kGgufMaxDims) {
      return c.FailAt(c.pos() - 4, tn + ": " + std::to_string(n_dims) + " dimensions (must be 1 to 4)");
    }
    t.n_dims = static_cast<int>(n_dims);
    uint64_t n_elems = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = 0;
      TRINE_RETURN_IF_ERROR(c.Read(&ne, tn + " dimension " + std::to_string(d)));
      if (ne == 0) return c.FailAt(c.pos() - 8, tn + ": dimension " + std::to_string(d) + " is zero");
      if (ne > static_cast<uint64_t>(INT64_MAX) / n_elems) {
        return c.FailAt(c.pos() - 8, tn + ": shape overflows 64-bit element count");
      }
      n_elems *= ne;
      t.ne[d] = static_cast<int64_t>(ne);
    }
    t.n_elems = static_cast<int64_t>(n_elems);
    TRINE_RETURN_IF_ERROR(c.Read(&t.ggml_type, tn + " type"));
    if (!TypeFromGgmlId(t.ggml_type, arch, &t.type)) {
      return c.FailAt(c.pos() - 4, tn + ": unsupported or unknown tensor type id " +
                                       std::to_string(t.ggml_type) +
                                       (t.ggml_type == 36 ? " (I2_S is read only in bitnet-b1.58 files)" : ""));
    }
    const TypeTraits& tr = GetTypeTraits(t.type);
    if (t.ne[0] % tr.block_elems != 0) {
      return c.FailAt(at, tn + ": row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
                              tr.name + " block size " + std::to_string(tr.block_elems));
    }
    if (!TensorBytes(t.type, t.n_elems, &t.n_bytes)) {
      return c.FailAt(at, tn + ": byte size overflows");
    }
    TRINE_RETURN_IF_ERROR(c.Read(&t.offset, tn + " offset"));
    names.emplace(t.name, i);
    tensors->push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  const uint64_t end_of_infos = c.pos();
  const uint64_t pad = (*alignment - end_of_infos % *alignment) % *alignment;
  *data_offset = end_of_infos + pad;
  const uint64_t fsize = file.size();
  if (n_tensors > 0 && *data_offset > fsize) {
    return InvalidFile(path + ": data section would start at byte " + std::to_string(*data_offset) +
                       ", past the end of the file (" + std::to_string(fsize) + " bytes)");
  }
  const uint64_t data_size = n_tensors > 0 ? fsize - *data_offset : 0;
  std::vector<size_t> order;
  for (size_t i = first; i < tensors->size(); ++i) {
    GgufTensorInfo& t = (*tensors)[i];
    const std::string tn = "tensor '" + t.name + "'";
    if (t.offset % *alignment != 0) {
      return InvalidFile(path + ": " + tn + " offset " + std::to_string(t.offset) +
                         " is not a multiple of the alignment " + std::to_string(*alignment));
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      return InvalidFile(path + ": " + tn + " data (offset " + std::to_string(t.offset) + ", " +
                         std::to_string(t.n_bytes) + " bytes) extends past the end of the file (data section is " +
                         std::to_string(data_size) + " bytes from byte " + std::to_string(*data_offset) + ")");
    }
    t.file_offset = *data_offset + t.offset;
    t.data = file.data() + t.file_offset;
    order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return (*tensors)[a].offset < (*tensors)[b].offset;
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& a = (*tensors)[order[k - 1]];
    const GgufTensorInfo& b = (*tensors)[order[k]];
    if (a.offset + a.n_bytes > b.offset) {
      return InvalidFile(path + ": tensor '" + a.name + "' (bytes " + std::to_string(a.offset) + "+" +
                         std::to_string(a.n_bytes) + ") overlaps tensor '" + b.name + "' at offset " +
                         std::to_string(b.offset));
    }
  }
  if (split_index == 0) architecture_ = arch;
  return Status::Ok();
}

Status GgufFile::Open(const std::string& path, const GgufOpenOptions& options,
                      std::unique_ptr<GgufFile>* out) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->path_ = path;

  std::vector<std::string> paths{path};
  std::string prefix;
  int index = 0, count = 0;
  if (options.follow_splits && ParseSplitName(path, &prefix, &index, &count) && count > 1) {
    paths.clear();
    for (int i = 1; i <= count; ++i) paths.push_back(SplitName(prefix, i, count));
    g->path_ = paths[0];
  }

  for (size_t s = 0; s < paths.size(); ++s) {
    std::unique_ptr<MappedFile> f;
    TRINE_RETURN_IF_ERROR(MappedFile::Open(paths[s], options.use_mmap, &f));
    std::vector<std::pair<std::string, GgufValue>> kv;
    uint32_t alignment = 0;
    uint64_t data_offset = 0;
    TRINE_RETURN_IF_ERROR(
        g->ParseOne(*f, static_cast<int>(s), &kv, &g->tensors_, &alignment, &data_offset));
    if (s == 0) {
      g->kv_ = std::move(kv);
      g->alignment_ = alignment;
      g->data_offset_ = data_offset;
      for (size_t i = 0; i < g->kv_.size(); ++i) g->kv_index_.emplace(g->kv_[i].first, i);
    } else {
      // Each part names its place in the set; a part from another set is refused.
      for (const auto& [k, v] : kv) {
        if (k != "split.no") continue;
        int64_t no = -1;
        if (!v.AsInt(&no) || no != static_cast<int64_t>(s)) {
          return InvalidFile(paths[s] + ": split.no is " + v.ToDisplayString() + ", expected " + std::to_string(s));
        }
      }
    }
    g->files_.push_back(std::move(f));
  }
  if (paths.size() > 1) {
    const GgufValue* sc = g->Find("split.count");
    int64_t n = 0;
    if (!sc || !sc->AsInt(&n) || n != static_cast<int64_t>(paths.size())) {
      return InvalidFile(g->path_ + ": split.count does not match the " + std::to_string(paths.size()) +
                         " files named by the split pattern");
    }
  } else if (const GgufValue* sc = g->Find("split.count")) {
    int64_t n = 0;
    if (sc->AsInt(&n) && n > 1 && static_cast<uint64_t>(n) <= kMaxSplits) {
      return InvalidFile(g->path_ + ": this is part of a " + std::to_string(n) +
                         "-file split set; open it by its -00001-of-" + std::to_string(n) + ".gguf name");
    }
  }
  for (size_t i = 0; i < g->tensors_.size(); ++i) {
    if (!g->tensor_index_.emplace(g->tensors_[i].name, i).second) {
      return InvalidFile(g->path_ + ": tensor '" + g->tensors_[i].name + "' appears in more than one split");
    }
  }
  *out = std::move(g);
  return Status::Ok();
}

}  // namespace trine
