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
#include "runtime/kv_cache.h"
#include "runtime/thread_tuner.h"
#include "runtime/weight_streamer.h"

namespace trine {

struct ContextParams {
  int n_ctx = 0;      // positions of one sequence; 0: the model's training context, capped at 4096
  int n_batch = 512;  // tokens evaluated per forward pass; longer inputs are split
  int n_threads = 0;  // 0: number of cores
  KvType kv_type = KvType::kF16;        // K cache, and V cache unless kv_type_v is set
  std::optional<KvType> kv_type_v;      // V cache when it differs from K (llama.cpp's -ctv)
  int n_seq_max = 1;  // sequences the context holds at once (ids 0 .. n_seq_max - 1)
  // false: each pass may run fewer threads than n_threads when that measures faster (cores taken
  // by other processes; runtime/thread_tuner.h); true: always n_threads.
  bool fixed_threads = false;
  int kv_pool = 0;    // positions in the KV pool the sequences share; 0: n_ctx
  // Ring buffers of the weight streamer, when the model has streamed layers (>= 1; 2 reads the
  // next streamed layer while the current one computes).
  int stream_slots = 2;
};

// The tokens of one forward pass over several sequences (llama.cpp's llama_batch): token i is
// token[i] at position pos[i] of sequence seq[i], and its logits are kept when logits[i] != 0.
struct Batch {
  std::vector<int32_t> token;
  std::vector<int32_t> pos;     // -1: the next position of the sequence
  std::vector<int32_t> seq;
  std::vector<uint8_t> logits;

  int size() const { return static_cast<int>(token.size()); }
  void Add(int32_t t, int32_t p, int32_t s, bool want_logits) {
    token.push_back(t);
    pos.push_back(p);
    seq.push_back(s);
    logits.push_back(want_logits ? 1 : 0);
  }
  void Reserve(int n) {
    token.reserve(static_cast<size_t>(n));
    pos.reserve(static_cast<size_t>(n));
    seq.reserve(static_cast<size_t>(n));
    logits.reserve(static_cast<size_t>(n));
  }
  void Clear() {
    token.clear();
    pos.clear();
    seq.clear();
    logits.clear();
  }
};

// Buffers of one forward pass over a batch of n_tokens (shapes in comments are per batch).
struct ForwardState {
  const Model* model = nullptr;
  KvCache* kv = nullptr;
  int n_tokens = 0;
  int n_past = 0;    // position of the first token of the batch (Resize's single sequence)
  std::vector<int32_t> pos;  // (n_tokens) position of each token in its sequence
  std::vector<int32_t> seq;  // (n_tokens) sequence of each token
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
  int layer = -1;                      // its index (set by ForwardLayer; names tensor dumps)

  // Sizes every buffer for a batch of n tokens of `model`: tokens of sequence 0 at positions
  // past .. past + n - 1 (a multi-sequence batch then sets pos and seq).
  void Resize(const Model& m, int n, int past);
};

class Context {
 public:
  static Status Create(const Model& model, const ContextParams& params, std::unique_ptr<Context>* out);

  // Evaluates `n` tokens of sequence 0 at positions n_past() .. n_past()+n-1 (split into n_batch
  // pieces). With all_logits, logits(i) holds every token's logits; otherwise only the last one's.
  Status Decode(const int32_t* tokens, int n, bool all_logits);
  // Evaluates a batch of tokens of several sequences in one forward pass per n_batch tokens: every
  // matrix is read once for all of them; each token attends to its own sequence's positions. A
  // sequence's tokens must continue where it stands, in order. Logits rows follow the batch order
  // of the tokens that asked for them (LogitsRow). Errors leave every sequence as it was:
  // invalid tokens/sequences/positions (INVALID_ARGUMENT), KV pool full (OUT_OF_MEMORY).
  Status Decode(const Batch& batch);

  const float* logits(int row = 0) const { return logits_.data() + static_cast<size_t>(row) * n_vocab_; }
  // The logits row of token i of the last batch (-1 when it asked for none), and the rows held.
  int LogitsRow(int i) const;
  int n_outputs() const { return static_cast<int>(logits_.size() / static_cast<size_t>(n_vocab_)); }
  int n_vocab() const { return n_vocab_; }
  int n_past() const { return kv_.SeqPos(0); }
  int n_ctx() const { return params_.n_ctx; }
  int n_threads() const { return params_.n_threads; }
  int n_batch() const { return params_.n_batch; }
  int n_seq_max() const { return params_.n_seq_max; }
  // Forgets every position >= n of sequence 0 (n <= n_past()).
  void Truncate(int n) { kv_.Truncate(0, n); }
  // Positions held by `seq`; forgetting positions >= p; `dst` := the first n positions of `src`
  // (blocks shared until one of them writes). Sequence ids are checked by the caller.
  int SeqPos(int seq) const { return kv_.SeqPos(seq); }
  void SeqTruncate(int seq, int p) { kv_.Truncate(seq, p); }
  Status SeqFork(int src, int dst, int n) { return kv_.Fork(src, dst, n); }
  const KvCache& kv() const { return kv_; }
  const Model& model() const { return *model_; }
  // The weight streamer of this context (null when the model streams no layer).
  const WeightStreamer* streamer() const { return streamer_.get(); }

 private:
  Context() = default;
  // One forward pass over batch tokens [i0, i0 + n), their logits into rows from row0.
  Status DecodeChunk(const Batch& b, int i0, int n, int row0);
  // (Re)creates the streamer when the model's placements changed since.
  Status SyncStreamer();

  const Model* model_ = nullptr;
  ContextParams params_;
  KvCache kv_;
  ForwardState st_;
  std::vector<float> logits_;  // (n_out, n_vocab)
  std::vector<float> head_in_;     // (rows, E) residual rows whose logits are wanted
  std::vector<float> final_norm_;  // (rows, E)
  std::vector<int32_t> out_rows_;  // (batch size) logits row of each token of the last batch, or -1
  std::vector<int32_t> pos_;       // (batch size) position of each token of the batch in flight
  Batch single_;                   // the batch Decode(tokens, n) builds
  std::unique_ptr<WeightStreamer> streamer_;
  std::unique_ptr<ThreadTuner> tuner_;  // the team size of each pass
  int n_vocab_ = 0;
};

// Per-architecture layer functions (src/runtime/arch/*.cc): one transformer block over st, with the
// weights st.w (the model's layer when null).
void LlamaLayer(ForwardState& st, int layer);
void BitnetLayer(ForwardState& st, int layer);
// One layer of the forward pass: acquires a streamed layer's weights from st.streamer (waiting for
// its read), runs the architecture's layer function, releases them. Errors: streaming reads, a
// streamed layer without a streamer.
Status ForwardLayer(ForwardState& st, int layer);

// Steps the layer functions share. ReserveLayerActivations sizes st.act for every matmul of `w`
// over st.n_tokens tokens, before the layer's parallel region (whose Team forms do not allocate),
// and returns it. The Team steps (src/runtime/ops.h), called by every thread of that region:
// NormQkvAttentionTeam normalizes st.x (attn_norm) into st.xb, computes Q, K and V from it (times
// qkv_scale) and attention over the cache into st.att; NormGateUpTeam normalizes st.x (ffn_norm)
// into st.xb and computes the gate into st.hb and up into st.hb2 (times gate_up_scale).
uint8_t* ReserveLayerActivations(ForwardState& st, const LayerWeights& w);
void NormQkvAttentionTeam(ForwardState& st, const LayerWeights& w, int layer, const float qkv_scale[3], uint8_t* act);
void NormGateUpTeam(ForwardState& st, const LayerWeights& w, const float gate_up_scale[2], uint8_t* act);

// Causal attention of the batch's queries over the KV cache (positions 0 .. n_past + t), after
// RoPE on q and k and the cache write. A Team form (src/runtime/ops.h): called by every thread of the
// layer's parallel region, returns after a barrier.
void AttentionOverCache(ForwardState& st, int layer);

}  // namespace trine
