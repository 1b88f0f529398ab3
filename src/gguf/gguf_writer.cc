// GGUF writer implementation: one Emit() template serves both the file and the buffer sinks.
#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace trine {
namespace {

struct BufferSink {
  std::vector<uint8_t>* out;
  void Write(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    out->insert(out->end(), b, b + n);
  }
};

struct FileSink {
  std::FILE* f;
  bool ok = true;
  void Write(const void* p, size_t n) {
    if (ok && n && std::fwrite(p, 1, n, f) != n) ok = false;
  }
};

template <typename Sink, typename T>
void Put(Sink& s, T v) {
  s.Write(&v, sizeof(T));
}

template <typename Sink>
void PutString(Sink& s, const std::string& str) {
  Put<Sink, uint64_t>(s, str.size());
  s.Write(str.data(), str.size());
}

template <typename Sink>
void PutValueBody(Sink& s, const GgufValue& v);

template <typename Sink>
void PutArrayBody(Sink& s, const GgufValue& v) {
  Put<Sink, uint32_t>(s, static_cast<uint32_t>(v.elem_type()));
  Put<Sink, uint64_t>(s, v.count());
  if (v.elem_type() == GgufType::kString) {
    for (const auto& str : v.strings()) PutString(s, str);
  } else if (v.elem_type() == GgufType::kArray) {
    for (const auto& item : v.items()) PutArrayBody(s, item);
  } else {
    s.Write(v.raw().data(), v.raw().size());
  }
}

template <typename Sink>
void PutValueBody(Sink& s, const GgufValue& v) {
  if (v.is_string()) {
    PutString(s, v.str());
  } else if (v.is_array()) {
    PutArrayBody(s, v);
  } else {
    // Scalars: re-encode through the typed accessors to the declared width.
    const size_t sz = GgufScalarSize(v.type());
    uint8_t raw[8] = {0};
    if (v.type() == GgufType::kF32) {
      double d = 0;
      v.AsDouble(&d);
      float f = static_cast<float>(d);
      std::memcpy(raw, &f, 4);
    } else if (v.type() == GgufType::kF64) {
      double d = 0;
      v.AsDouble(&d);
      std::memcpy(raw, &d, 8);
    } else if (v.type() == GgufType::kU64) {
      uint64_t u = 0;
      v.AsUint(&u);
      std::memcpy(raw, &u, 8);
    } else {
      int64_t i = 0;
      v.AsInt(&i);
      std::memcpy(raw, &i, sz);  // little-endian truncation to the declared width
    }
    s.Write(raw, sz);
  }
}

}  // namespace

void GgufWriter::Set(const std::string& key, GgufValue value) {
  for (auto& kv : kv_) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

void GgufWriter::Remove(const std::string& key) {
  for (size_t i = 0; i < kv_.size(); ++i) {
    if (kv_[i].first == key) {
      kv_.erase(kv_.begin() + static_cast<long>(i));
      return;
    }
  }
}

const GgufValue* GgufWriter::Find(const std::string& key) const {
  for (const auto& kv : kv_) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

Status GgufWriter::AddTensor(const std::string& name, TypeId type, const std::vector<int64_t>& ne,
                             const void* data, size_t n_bytes, bool copy) {
  if (ne.empty() || ne.size() > 4) return InvalidArgument("tensor '" + name + "': 1 to 4 dimensions");
  int64_t n = 1;
  for (int64_t d : ne) {
    if (d <= 0) return InvalidArgument("tensor '" + name + "': non-positive dimension");
    n *= d;
  }
  uint64_t need = 0;
  if (!TensorBytes(type, n, &need) || ne[0] % GetTypeTraits(type).block_elems != 0) {
    return InvalidArgument("tensor '" + name + "': shape is not a whole number of " + TypeName(type) + " blocks");
  }
  if (need != n_bytes) {
    return InvalidArgument("tensor '" + name + "': " + std::to_string(n_bytes) + " bytes given, " +
                           std::to_string(need) + " expected for " + TypeName(type));
  }
  for (const auto& t : tensors_) {
    if (t.name == name) return InvalidArgument("duplicate tensor '" + name + "'");
  }
  Tensor t{name, type, ne, data, n_bytes, {}};
  if (copy) {
    t.owned.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n_bytes);
    t.data = nullptr;
  }
  tensors_.push_back(std::move(t));
  return Status::Ok();
}

template <typename Sink>
void GgufWriter::Emit(Sink& s) const {
  s.Write("GGUF", 4);
  Put<Sink, uint32_t>(s, 3);
  Put<Sink, uint64_t>(s, tensors_.size());
  Put<Sink, uint64_t>(s, kv_.size());
  for (const auto& [key, value] : kv_) {
    PutString(s, key);
    Put<Sink, uint32_t>(s, static_cast<uint32_t>(value.type()));
    PutValueBody(s, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    PutString(s, t.name);
    Put<Sink, uint32_t>(s, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<Sink, uint64_t>(s, static_cast<uint64_t>(d));
    Put<Sink, uint32_t>(s, GetTypeTraits(t.type).ggml_id);
    Put<Sink, uint64_t>(s, offset);
    offset += (t.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
}

std::vector<uint8_t> GgufWriter::WriteToBuffer() const {
  std::vector<uint8_t> out;
  BufferSink s{&out};
  Emit(s);
  const std::vector<uint8_t> zeros(alignment_, 0);
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  for (const auto& t : tensors_) {
    const uint8_t* p = t.owned.empty() ? static_cast<const uint8_t*>(t.data) : t.owned.data();
    s.Write(p, t.n_bytes);
    const size_t pad = (alignment_ - t.n_bytes % alignment_) % alignment_;
    s.Write(zeros.data(), pad);
  }
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return IoError(path + ": cannot create: " + std::strerror(errno));
  FileSink s{f};
  std::vector<uint8_t> header;
  BufferSink hs{&header};
  Emit(hs);
  header.resize((header.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  s.Write(header.data(), header.size());
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const auto& t : tensors_) {
    const uint8_t* p = t.owned.empty() ? static_cast<const uint8_t*>(t.data) : t.owned.data();
    s.Write(p, t.n_bytes);
    s.Write(zeros.data(), (alignment_ - t.n_bytes % alignment_) % alignment_);
  }
  const bool closed = std::fclose(f) == 0;
  if (!s.ok || !closed) return IoError(path + ": write failed: " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace trine
