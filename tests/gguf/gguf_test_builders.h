// Builders for GGUF test files: a raw byte writer that can emit any header field (wrong counts,
// lengths, types, offsets), a declarative raw file with one or more tensor infos, and a complete
// valid tiny `llama` model (E 64, 2 layers, 4 heads, 2 kv heads, F 128, 32 SentencePiece tokens,
// all tensors F32) written with GgufWriter whose keys and tensors tests can mutate.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf_value.h"
#include "gguf/gguf_writer.h"
#include "tensor/dtype.h"

namespace trine::testing {

// Little-endian byte sink with a fluent interface.
class Bytes {
 public:
  Bytes& U8(uint8_t x) { return Put(&x, 1); }
  Bytes& U32(uint32_t x) { return Put(&x, 4); }
  Bytes& U64(uint64_t x) { return Put(&x, 8); }
  Bytes& I32(int32_t x) { return Put(&x, 4); }
  Bytes& F32(float x) { return Put(&x, 4); }
  Bytes& Raw(const std::string& s) { return Put(s.data(), s.size()); }
  // A GGUF string: u64 length then the bytes.
  Bytes& Str(const std::string& s) { return U64(s.size()).Raw(s); }
  Bytes& Cat(const Bytes& o) { return Put(o.v.data(), o.v.size()); }
  Bytes& Zeros(size_t n) {
    v.resize(v.size() + n, 0);
    return *this;
  }
  Bytes& PadTo(size_t align) { return Zeros((align - v.size() % align) % align); }
  Bytes& Put(const void* p, size_t n) {
    if (n == 0) return *this;
    const size_t at = v.size();
    v.resize(at + n);
    std::memcpy(v.data() + at, p, n);
    return *this;
  }
  std::vector<uint8_t> v;
};

// One metadata pair: key, value type, then the encoded value body.
inline Bytes Kv(const std::string& key, uint32_t type, const Bytes& body) {
  Bytes b;
  b.Str(key).U32(type).Cat(body);
  return b;
}
inline Bytes KvU32(const std::string& key, uint32_t v) { return Kv(key, 4, Bytes().U32(v)); }
inline Bytes KvStr(const std::string& key, const std::string& s) { return Kv(key, 8, Bytes().Str(s)); }

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;  // ggml type id
  uint64_t offset = 0;
  std::optional<uint32_t> n_dims;       // default: ne.size()
  std::optional<uint64_t> name_length;  // default: name.size()
};

// A GGUF file described field by field. Defaults give a valid file.
struct RawFile {
  std::string magic = "GGUF";
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;  // default: tensors.size()
  std::optional<uint64_t> n_kv;       // default: kvs.size()
  std::vector<Bytes> kvs;
  std::vector<RawTensor> tensors;
  uint32_t alignment = 32;  // padding before the data section
  bool pad = true;          // write the padding (and data) at all
  uint64_t data_bytes = 256;

  std::vector<uint8_t> Encode() const {
    Bytes b;
    b.Raw(magic).U32(version);
    b.U64(n_tensors.value_or(tensors.size())).U64(n_kv.value_or(kvs.size()));
    for (const auto& kv : kvs) b.Cat(kv);
    for (const auto& t : tensors) {
      b.U64(t.name_length.value_or(t.name.size())).Raw(t.name);
      b.U32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
      for (uint64_t d : t.ne) b.U64(d);
      b.U32(t.type).U64(t.offset);
    }
    if (pad) b.PadTo(alignment).Zeros(static_cast<size_t>(data_bytes));
    return b.v;
  }
};

// A valid reader-level file: architecture llama, one F32 tensor "t" of 32 elements (128 bytes).
inline RawFile MinimalRaw() {
  RawFile f;
  f.kvs.push_back(KvStr("general.architecture", "llama"));
  f.tensors.push_back({"t", {32}, 0, 0, {}, {}});
  return f;
}

// ---- The valid tiny llama model -------------------------------------------------------------

constexpr int64_t kE = 64, kLayers = 2, kHeads = 4, kKvHeads = 2, kHeadDim = 16, kF = 128, kVocab = 32;

struct TensorSpec {
  std::string name;
  TypeId type;
  std::vector<int64_t> ne;
};

struct ModelSpec {
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<TensorSpec> tensors;

  void Set(const std::string& key, GgufValue value) {
    for (auto& p : kv) {
      if (p.first == key) {
        p.second = std::move(value);
        return;
      }
    }
    kv.emplace_back(key, std::move(value));
  }
  void Remove(const std::string& key) {
    kv.erase(std::remove_if(kv.begin(), kv.end(), [&](const auto& p) { return p.first == key; }), kv.end());
  }
  TensorSpec* Tensor(const std::string& name) {
    for (auto& t : tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  void RemoveTensor(const std::string& name) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(), [&](const auto& t) { return t.name == name; }),
                  tensors.end());
  }
};

inline std::vector<std::string> SpmTokens(int n) {
  std::vector<std::string> t;
  for (int i = 0; i < n; ++i) {
    if (i == 0) {
      t.push_back("<unk>");
    } else if (i == 1) {
      t.push_back("<s>");
    } else if (i == 2) {
      t.push_back("</s>");
    } else {
      t.push_back("\xe2\x96\x81" + std::string(1, static_cast<char>('a' + (i - 3) % 26)) + std::to_string(i));
    }
  }
  return t;
}
inline std::vector<float> SpmScores(int n) {
  std::vector<float> s;
  for (int i = 0; i < n; ++i) s.push_back(-static_cast<float>(i));
  return s;
}
inline std::vector<int32_t> SpmTypes(int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i == 0 ? 2 : (i < 3 ? 3 : 1));
  return t;
}
inline void SetVocab(ModelSpec* m, int n) {
  m->Set("tokenizer.ggml.tokens", GgufValue::StringArray(SpmTokens(n)));
  m->Set("tokenizer.ggml.scores", GgufValue::ArrayOf<float>(GgufType::kF32, SpmScores(n)));
  m->Set("tokenizer.ggml.token_type", GgufValue::ArrayOf<int32_t>(GgufType::kI32, SpmTypes(n)));
}

inline ModelSpec BaseModel() {
  ModelSpec m;
  m.Set("general.architecture", GgufValue::String("llama"));
  m.Set("general.name", GgufValue::String("malformed-base"));
  m.Set("general.file_type", GgufValue::U32(0));
  m.Set("general.alignment", GgufValue::U32(32));
  m.Set("llama.context_length", GgufValue::U32(128));
  m.Set("llama.embedding_length", GgufValue::U32(kE));
  m.Set("llama.block_count", GgufValue::U32(kLayers));
  m.Set("llama.feed_forward_length", GgufValue::U32(kF));
  m.Set("llama.attention.head_count", GgufValue::U32(kHeads));
  m.Set("llama.attention.head_count_kv", GgufValue::U32(kKvHeads));
  m.Set("llama.rope.dimension_count", GgufValue::U32(kHeadDim));
  m.Set("llama.rope.freq_base", GgufValue::F32(10000.0f));
  m.Set("llama.attention.layer_norm_rms_epsilon", GgufValue::F32(1e-5f));
  m.Set("tokenizer.ggml.model", GgufValue::String("llama"));
  SetVocab(&m, kVocab);
  m.Set("tokenizer.ggml.bos_token_id", GgufValue::U32(1));
  m.Set("tokenizer.ggml.eos_token_id", GgufValue::U32(2));
  m.Set("tokenizer.ggml.unknown_token_id", GgufValue::U32(0));

  const int64_t kv_dim = kKvHeads * kHeadDim;
  m.tensors.push_back({"token_embd.weight", TypeId::kF32, {kE, kVocab}});
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.tensors.push_back({p + "attn_norm.weight", TypeId::kF32, {kE}});
    m.tensors.push_back({p + "attn_q.weight", TypeId::kF32, {kE, kE}});
    m.tensors.push_back({p + "attn_k.weight", TypeId::kF32, {kE, kv_dim}});
    m.tensors.push_back({p + "attn_v.weight", TypeId::kF32, {kE, kv_dim}});
    m.tensors.push_back({p + "attn_output.weight", TypeId::kF32, {kE, kE}});
    m.tensors.push_back({p + "ffn_norm.weight", TypeId::kF32, {kE}});
    m.tensors.push_back({p + "ffn_gate.weight", TypeId::kF32, {kE, kF}});
    m.tensors.push_back({p + "ffn_up.weight", TypeId::kF32, {kE, kF}});
    m.tensors.push_back({p + "ffn_down.weight", TypeId::kF32, {kF, kE}});
  }
  m.tensors.push_back({"output_norm.weight", TypeId::kF32, {kE}});
  m.tensors.push_back({"output.weight", TypeId::kF32, {kE, kVocab}});
  return m;
}

// Serialises a spec with GgufWriter. Tensor contents are a deterministic pattern (F32: small
// floats; other types: a byte pattern). Returns an empty vector if the writer refuses the spec.
inline std::vector<uint8_t> BuildModel(const ModelSpec& m) {
  GgufWriter w;
  for (const auto& [k, v] : m.kv) w.Set(k, v);
  for (const auto& t : m.tensors) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    uint64_t bytes = 0;
    if (!TensorBytes(t.type, n, &bytes)) return {};
    std::vector<uint8_t> data(static_cast<size_t>(bytes));
    if (t.type == TypeId::kF32) {
      for (int64_t i = 0; i < n; ++i) {
        const float x = static_cast<float>((i * 37) % 101 - 50) / 512.0f;
        std::memcpy(data.data() + 4 * i, &x, 4);
      }
    } else {
      for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
    }
    if (!w.AddTensor(t.name, t.type, t.ne, data.data(), data.size()).ok()) return {};
  }
  return w.WriteToBuffer();
}

// Index of the first occurrence of `needle` in `hay`, or SIZE_MAX.
inline size_t FindBytes(const std::vector<uint8_t>& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end());
  return it == hay.end() ? SIZE_MAX : static_cast<size_t>(it - hay.begin());
}

}  // namespace trine::testing
