// Model-level validation of GGUF files: hyperparameters and tensor shapes per architecture.
#include "model/model_config.h"

#include <cmath>
#include <vector>

namespace trine {
namespace {

constexpr int64_t kMaxDim = 1 << 20;  // sanity bound on any single model dimension
constexpr int64_t kMaxLayers = 4096;

struct KeyReader {
  const GgufFile& f;
  const std::string prefix;  // "<arch>."

  Status Int(const std::string& key, bool required, int64_t lo, int64_t hi, int64_t* out) const {
    const std::string full = prefix + key;
    bool found = false;
    TRINE_RETURN_IF_ERROR(f.GetInt(full, out, &found));
    if (!found) {
      if (required) return InvalidFile(f.path() + ": missing required key '" + full + "'");
      return Status::Ok();
    }
    if (*out < lo || *out > hi) {
      return InvalidFile(f.path() + ": key '" + full + "' = " + std::to_string(*out) + " is out of range [" +
                         std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return Status::Ok();
  }
  Status Float(const std::string& key, bool required, double lo, double hi, double* out) const {
    const std::string full = prefix + key;
    bool found = false;
    TRINE_RETURN_IF_ERROR(f.GetFloat(full, out, &found));
    if (!found) {
      if (required) return InvalidFile(f.path() + ": missing required key '" + full + "'");
      return Status::Ok();
    }
    if (!std::isfinite(*out) || *out < lo || *out > hi) {
      return InvalidFile(f.path() + ": key '" + full + "' = " + std::to_string(*out) + " is out of range");
    }
    return Status::Ok();
  }
};

Status ExpectTensor(const GgufFile& f, const std::string& name, std::vector<int64_t> shape, bool required,
                    bool* present = nullptr) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (present) *present = t != nullptr;
  if (!t) {
    if (required) return InvalidFile(f.path() + ": missing tensor '" + name + "'");
    return Status::Ok();
  }
  // Trailing dims of 1 are equivalent ([E] == [E, 1]).
  bool ok = true;
  for (int d = 0; d < kGgufMaxDims; ++d) {
    const int64_t want = d < static_cast<int>(shape.size()) ? shape[d] : 1;
    if (t->ne[d] != want) ok = false;
  }
  if (!ok) {
    std::string want = "[";
    for (size_t i = 0; i < shape.size(); ++i) want += (i ? ", " : "") + std::to_string(shape[i]);
    want += "]";
    return InvalidFile(f.path() + ": tensor '" + name + "' has shape " + t->ShapeString() + ", expected " + want);
  }
  return Status::Ok();
}

}  // namespace

bool IsSupportedArch(const std::string& arch) {
  return arch == "llama" || arch == "bitnet" || arch == "bitnet-b1.58" || arch == "bitnet-25";
}

Status LoadModelConfig(const GgufFile& f, ModelConfig* out) {
  ModelConfig c;
  bool found = false;
  TRINE_RETURN_IF_ERROR(f.GetString("general.architecture", &c.arch_name, &found));
  if (!found) return InvalidFile(f.path() + ": missing required key 'general.architecture'");
  if (c.arch_name == "llama") {
    c.arch = Arch::kLlama;
  } else if (c.arch_name == "bitnet") {
    c.arch = Arch::kBitnet;
  } else if (c.arch_name == "bitnet-b1.58" || c.arch_name == "bitnet-25") {
    c.arch = Arch::kBitnetB158;
  } else {
    return Unsupported(f.path() + ": architecture '" + c.arch_name +
                       "' is not supported (trine runs llama, bitnet, bitnet-b1.58)");
  }
  const KeyReader k{f, c.arch_name + "."};
  int64_t v = 0;
  TRINE_RETURN_IF_ERROR(k.Int("block_count", true, 1, kMaxLayers, &v));
  c.n_layer = static_cast<int>(v);
  TRINE_RETURN_IF_ERROR(k.Int("embedding_length", true, 1, kMaxDim, &v));
  c.n_embd = static_cast<int>(v);
  TRINE_RETURN_IF_ERROR(k.Int("context_length", true, 1, 1 << 24, &v));
  c.n_ctx_train = static_cast<int>(v);
  TRINE_RETURN_IF_ERROR(k.Int("feed_forward_length", true, 1, kMaxDim, &v));
  c.n_ff = static_cast<int>(v);
  TRINE_RETURN_IF_ERROR(k.Int("attention.head_count", true, 1, kMaxDim, &v));
  c.n_head = static_cast<int>(v);
  v = c.n_head;
  TRINE_RETURN_IF_ERROR(k.Int("attention.head_count_kv", false, 1, kMaxDim, &v));
  c.n_head_kv = static_cast<int>(v);
  if (c.n_embd % c.n_head != 0) {
    return InvalidFile(f.path() + ": embedding_length " + std::to_string(c.n_embd) +
                       " is not divisible by attention.head_count " + std::to_string(c.n_head));
  }
  if (c.n_head % c.n_head_kv != 0) {
    return InvalidFile(f.path() + ": attention.head_count " + std::to_string(c.n_head) +
                       " is not divisible by attention.head_count_kv " + std::to_string(c.n_head_kv));
  }
  c.head_dim = c.n_embd / c.n_head;
  v = c.head_dim;
  TRINE_RETURN_IF_ERROR(k.Int("attention.key_length", false, 1, kMaxDim, &v));
  if (v != c.head_dim) {
    return Unsupported(f.path() + ": attention.key_length " + std::to_string(v) + " differs from embedding/heads " +
                       std::to_string(c.head_dim));
  }
  v = c.head_dim;
  TRINE_RETURN_IF_ERROR(k.Int("rope.dimension_count", false, 1, kMaxDim, &v));
  if (v != c.head_dim) {
    return InvalidFile(f.path() + ": rope.dimension_count " + std::to_string(v) + " must equal the head size " +
                       std::to_string(c.head_dim));
  }
  c.n_rot = static_cast<int>(v);
  if (c.n_rot % 2 != 0) return InvalidFile(f.path() + ": rope dimension count must be even");
  double d = 0;
  TRINE_RETURN_IF_ERROR(k.Float("attention.layer_norm_rms_epsilon", true, 0.0, 1.0, &d));
  c.rms_eps = static_cast<float>(d);
  d = 10000.0;
  TRINE_RETURN_IF_ERROR(k.Float("rope.freq_base", false, 1e-3, 1e12, &d));
  c.rope_freq_base = static_cast<float>(d);
  std::string scaling;
  TRINE_RETURN_IF_ERROR(f.GetString(c.arch_name + ".rope.scaling.type", &scaling, &found));
  if (found && scaling != "none" && scaling != "linear" && scaling != "llama3" && scaling != "") {
    return Unsupported(f.path() + ": rope scaling type '" + scaling + "' is not supported");
  }
  d = 1.0;
  TRINE_RETURN_IF_ERROR(k.Float("rope.scaling.factor", false, 1e-6, 1e6, &d));
  if (scaling == "linear") c.rope_freq_scale = static_cast<float>(1.0 / d);
  c.rope_neox = c.arch != Arch::kLlama;

  const GgufTensorInfo* embd = f.FindTensor("token_embd.weight");
  if (!embd) return InvalidFile(f.path() + ": missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd) {
    return InvalidFile(f.path() + ": tensor 'token_embd.weight' has shape " + embd->ShapeString() +
                       ", expected [" + std::to_string(c.n_embd) + ", n_vocab]");
  }
  if (embd->type == TypeId::kI2_S) {
    return Unsupported(f.path() + ": tensor 'token_embd.weight' in I2_S is not supported");
  }
  if (embd->ne[1] > (1 << 24)) return InvalidFile(f.path() + ": vocabulary of " + std::to_string(embd->ne[1]) + " rows is too large");
  c.n_vocab = static_cast<int>(embd->ne[1]);
  TRINE_RETURN_IF_ERROR(k.Int("vocab_size", false, c.n_vocab, c.n_vocab, &v));
  // Every token id the tokenizer can produce indexes a row of token_embd (and of the output).
  if (const GgufValue* toks = f.Find("tokenizer.ggml.tokens"); toks && toks->is_array() &&
                                                                  toks->count() > static_cast<uint64_t>(c.n_vocab)) {
    return InvalidFile(f.path() + ": tokenizer has " + std::to_string(toks->count()) +
                       " tokens but token_embd.weight has " + std::to_string(c.n_vocab) + " rows");
  }

  const int64_t E = c.n_embd, F = c.n_ff, V = c.n_vocab;
  const int64_t q_dim = static_cast<int64_t>(c.n_head) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  bool has_output = false;
  TRINE_RETURN_IF_ERROR(ExpectTensor(f, "output_norm.weight", {E}, true));
  TRINE_RETURN_IF_ERROR(ExpectTensor(f, "output.weight", {E, V}, false, &has_output));
  if (has_output && c.arch != Arch::kLlama) {
    // llama.cpp's bitnet graph always ties the output; an extra output.weight is ignored there.
    has_output = false;
  }
  c.tied_output = !has_output;
  TRINE_RETURN_IF_ERROR(ExpectTensor(f, "rope_freqs.weight", {c.n_rot / 2}, false, &c.has_rope_freqs));

  const bool bitnet = c.arch != Arch::kLlama;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_norm.weight", {E}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_q.weight", {E, q_dim}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_k.weight", {E, kv_dim}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_v.weight", {E, kv_dim}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_output.weight", {q_dim, E}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "ffn_norm.weight", {E}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "ffn_gate.weight", {E, F}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "ffn_up.weight", {E, F}, true));
    TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "ffn_down.weight", {F, E}, true));
    if (bitnet) {
      TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "attn_sub_norm.weight", {E}, true));
      TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + "ffn_sub_norm.weight", {F}, true));
      for (const char* w : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
        bool has = false;
        TRINE_RETURN_IF_ERROR(ExpectTensor(f, p + w + ".scale", {1}, false, &has));
        if (has) c.has_scales = true;
      }
    }
  }
  // Norm vectors, scales and rope factors are read as floats by the forward pass.
  for (const auto& t : f.tensors()) {
    const bool vec = t.name.find("norm.weight") != std::string::npos || t.name.find(".scale") != std::string::npos ||
                     t.name == "rope_freqs.weight";
    if (vec && t.type != TypeId::kF32 && t.type != TypeId::kF16 && t.type != TypeId::kBF16) {
      return InvalidFile(f.path() + ": tensor '" + t.name + "' must be f32, f16 or bf16, found " + TypeName(t.type));
    }
  }
  *out = c;
  return Status::Ok();
}

}  // namespace trine
