// Context: the mutable state of one inference stream over a Model: KV cache, activation buffers,
// logits. Not thread-safe; one context per thread of the caller (the model can be shared).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/weight_streamer.h"

namespace trine {

// KV cache precision (llama.cpp's -ctk / -ctv types). Q8_0 and Q4_0 store each row as 32-value
// blocks and need head_dim % 32 == 0; F32 is for K and V together only.
enum class KvType { kF16, kF32, kQ8_0, kQ4_0 };

const char* KvTypeName(KvType type);                     // "f16", "f32", "q8_0", "q4_0"
bool ParseKvType(const std::string& name, KvType* type);  // the names above
// Bytes of one position of one layer's K (or V) rows of kv_dim values.
size_t KvRowBytes(KvType type, int kv_dim);

struct ContextParams {
  int n_ctx = 0;      // 0: the model's training context, capped at 4096
  int n_batch = 512;  // tokens evaluated per forward pass; longer inputs are split
  int n_threads = 0;  // 0: number of cores
  KvType kv_type = KvType::kF16;        // K cache, and V cache unless kv_type_v is set
  std::optional<KvType> kv_type_v;      // V cache when it differs from K (llama.cpp's -ctv)
  // Ring buffers of the weight streamer, when the model has streamed layers (>= 1; 2 reads the
  // next streamed layer while the current one computes).
  int stream_slots = 2;
};

// KV cache: K and V for every layer and position, (n_layer, n_ctx, n_head_kv * head_dim), each
// position a row of KvRowBytes(type, kv_dim) bytes (fp16, fp32, or Q8_0/Q4_0 blocks).
struct KvCache {
  KvType type = KvType::kF16;    // K rows
  KvType type_v = KvType::kF16;  // V rows
  int n_ctx = 0;
  int kv_dim = 0;
  size_t k_row = 0, v_row = 0;  // bytes per position
  std::vector<uint8_t> k, v;

  // Checks the combination (F32 only for both; block types need head_dim % 32 == 0) and sizes
  // the cache (zeroed) for n_layer x n_ctx positions of n_head_kv * head_dim values.
  Status Allocate(KvType type_k, KvType type_v, int n_layer, int n_ctx, int n_head_kv, int head_dim);
  // Bytes the cache would take (0 = invalid sizes).
  static double Bytes(KvType type_k, KvType type_v, int n_layer, int n_ctx, int kv_dim);

  const uint8_t* KRow(int layer, int pos) const {
    return k.data() + (static_cast<size_t>(layer) * static_cast<size_t>(n_ctx) + static_cast<size_t>(pos)) * k_row;
  }
  const uint8_t* VRow(int layer, int pos) const {
    return v.data() + (static_cast<size_t>(layer) * static_cast<size_t>(n_ctx) + static_cast<size_t>(pos)) * v_row;
  }
  uint8_t* KRow(int layer, int pos) { return const_cast<uint8_t*>(static_cast<const KvCache*>(this)->KRow(layer, pos)); }
  uint8_t* VRow(int layer, int pos) { return const_cast<uint8_t*>(static_cast<const KvCache*>(this)->VRow(layer, pos)); }
  void Store(int layer, int pos, const float* k, const float* v);
  // Copies `n` values of position `pos` of layer `layer`, from element `offset`, into fp32
  // (for the block types, offset and n must be multiples of 32).
  void LoadK(int layer, int pos, int offset, int n, float* dst) const;
  void LoadV(int layer, int pos, int offset, int n, float* dst) const;
};

// Buffers of one forward pass over a batch of n_tokens (shapes in comments are per batch).
struct ForwardState {
  const Model* model = nullptr;
  KvCache* kv = nullptr;
  int n_tokens = 0;
  int n_past = 0;    // position of the first token of the batch
  int n_threads = 1;
  std::vector<float> x;     // (n_tokens, E) residual stream
  std::vector<float> xb;    // (n_tokens, E) normed input of a sublayer
  std::vector<float> q;     // (n_tokens, H * hd)
  std::vector<float> k;     // (n_tokens, Hkv * hd)
  std::vector<float> v;     // (n_tokens, Hkv * hd)
  std::vector<float> att;   // (n_tokens, H * hd) attention output
  std::vector<float> proj;  // (n_tokens, E) sublayer output before the residual add
  std::vector<float> hb;    // (n_tokens, F) gate
  std::vector<float> hb2;   // (n_tokens, F) up
  std::vector<uint8_t> act; // quantized activations scratch
  WeightStreamer* streamer = nullptr;  // for the model's streamed layers (null: none)
  const LayerWeights* w = nullptr;     // the layer being computed (set by ForwardLayer)

  // Sizes every buffer for a batch of n tokens of `model` at position n_past.
  void Resize(const Model& m, int n, int past);
};

class Context {
 public:
  static Status Create(const Model& model, const ContextParams& params, std::unique_ptr<Context>* out);

  // Evaluates `n` tokens at positions n_past() .. n_past()+n-1 (split into n_batch pieces).
  // With all_logits, logits(i) holds every token's logits; otherwise only the last one's (i = 0).
  Status Decode(const int32_t* tokens, int n, bool all_logits);

  const float* logits(int i = 0) const { return logits_.data() + static_cast<size_t>(i) * n_vocab_; }
  int n_vocab() const { return n_vocab_; }
  int n_past() const { return n_past_; }
  int n_ctx() const { return params_.n_ctx; }
  int n_threads() const { return params_.n_threads; }
  // Forgets every position >= n (n <= n_past()).
  void Truncate(int n);
  const Model& model() const { return *model_; }
  // The weight streamer of this context (null when the model streams no layer).
  const WeightStreamer* streamer() const { return streamer_.get(); }

 private:
  Context() = default;
  Status DecodeBatch(const int32_t* tokens, int n, bool all_logits, int logits_row0);
  // (Re)creates the streamer when the model's placements changed since.
  Status SyncStreamer();

  const Model* model_ = nullptr;
  ContextParams params_;
  KvCache kv_;
  ForwardState st_;
  std::vector<float> logits_;  // (n_out, n_vocab)
  std::vector<float> final_norm_;
  std::unique_ptr<WeightStreamer> streamer_;
  int n_vocab_ = 0;
  int n_past_ = 0;
};

// Per-architecture layer functions (src/model/arch/*.cc): one transformer block over st, with the
// weights st.w (the model's layer when null).
void LlamaLayer(ForwardState& st, int layer);
void BitnetLayer(ForwardState& st, int layer);
// One layer of the forward pass: acquires a streamed layer's weights from st.streamer (waiting for
// its read), runs the architecture's layer function, releases them. Errors: streaming reads, a
// streamed layer without a streamer.
Status ForwardLayer(ForwardState& st, int layer);

// Steps the layer functions share. ReserveLayerActivations sizes st.act for every matmul of `w`
// over st.n_tokens tokens, before the layer's parallel region (whose Team forms do not allocate),
// and returns it. The Team steps (src/model/ops.h), called by every thread of that region:
// NormQkvAttentionTeam normalizes st.x (attn_norm) into st.xb, computes Q, K and V from it (times
// qkv_scale) and attention over the cache into st.att; NormGateUpTeam normalizes st.x (ffn_norm)
// into st.xb and computes the gate into st.hb and up into st.hb2 (times gate_up_scale).
uint8_t* ReserveLayerActivations(ForwardState& st, const LayerWeights& w);
void NormQkvAttentionTeam(ForwardState& st, const LayerWeights& w, int layer, const float qkv_scale[3], uint8_t* act);
void NormGateUpTeam(ForwardState& st, const LayerWeights& w, const float gate_up_scale[2], uint8_t* act);

// Causal attention of the batch's queries over the KV cache (positions 0 .. n_past + t), after
// RoPE on q and k and the cache write. A Team form (src/model/ops.h): called by every thread of the
// layer's parallel region, returns after a barrier.
void AttentionOverCache(ForwardState& st, int layer);

}  // namespace trine
