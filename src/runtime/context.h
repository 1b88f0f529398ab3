// Context: the mutable state of one inference stream over a Model: KV cache, activation buffers,
// logits. Not thread-safe; one context per thread of the caller (the model can be shared).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "model/model.h"
#include "runtime/weight_streamer.h"

namespace trine {

enum class KvType { kF16, kF32 };

struct ContextParams {
  int n_ctx = 0;      // 0: the model's training context, capped at 4096
  int n_batch = 512;  // tokens evaluated per forward pass; longer inputs are split
  int n_threads = 0;  // 0: number of cores
  KvType kv_type = KvType::kF16;
  // Ring buffers of the weight streamer, when the model has streamed layers (>= 1; 2 reads the
  // next streamed layer while the current one computes).
  int stream_slots = 2;
};

// KV cache: K and V for every layer and position, (n_layer, n_ctx, n_head_kv * head_dim).
struct KvCache {
  KvType type = KvType::kF16;
  int n_ctx = 0;
  int kv_dim = 0;
  std::vector<uint16_t> k16, v16;  // used when type is kF16
  std::vector<float> k32, v32;     // used when type is kF32

  void Store(int layer, int pos, const float* k, const float* v);
  // Copies `n` values of position `pos` of layer `layer`, from element `offset`, into fp32.
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

// Causal attention of the batch's queries over the KV cache (positions 0 .. n_past + t).
void AttentionOverCache(ForwardState& st, int layer);

}  // namespace trine
