// Context: KV cache, batch splitting, the forward pass driver and attention over the cache.
#include "runtime/context.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <cstring>

#include "core/fp16.h"
#include "core/team.h"
#include "kernels.h"
#include "runtime/ops.h"
#include "runtime/tensor_dump.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine {

void ForwardState::Resize(const Model& m, int n, int past) {
  const ModelConfig& c = m.config();
  model = &m;
  n_tokens = n;
  n_past = past;
  const size_t N = static_cast<size_t>(n);
  const size_t E = static_cast<size_t>(c.n_embd);
  const size_t qd = static_cast<size_t>(c.n_head) * static_cast<size_t>(c.head_dim);
  const size_t kvd = static_cast<size_t>(c.n_head_kv) * static_cast<size_t>(c.head_dim);
  const size_t F = static_cast<size_t>(c.n_ff);
  x.resize(N * E);
  xb.resize(N * E);
  q.resize(N * qd);
  k.resize(N * kvd);
  v.resize(N * kvd);
  att.resize(N * qd);
  proj.resize(N * E);
  hb.resize(N * F);
  hb2.resize(N * F);
  pos.resize(N);
  seq.assign(N, 0);
  for (int t = 0; t < n; ++t) pos[static_cast<size_t>(t)] = past + t;
}

Status Context::Create(const Model& model, const ContextParams& params, std::unique_ptr<Context>* out) {
  const ModelConfig& c = model.config();
  ContextParams p = params;
  if (p.n_ctx < 0) return InvalidArgument("context size must be positive, got " + std::to_string(p.n_ctx));
  if (p.n_ctx == 0) p.n_ctx = std::min(c.n_ctx_train, 4096);
  if (p.n_ctx > (1 << 20)) return InvalidArgument("context size " + std::to_string(p.n_ctx) + " is too large");
  if (p.n_batch <= 0) return InvalidArgument("batch size must be positive, got " + std::to_string(p.n_batch));
  if (p.n_threads < 0) return InvalidArgument("thread count must be positive, got " + std::to_string(p.n_threads));
  if (p.n_threads == 0) p.n_threads = omp_get_num_procs();
  if (p.n_threads > 1024) return InvalidArgument("thread count " + std::to_string(p.n_threads) + " is too large");
  if (p.n_seq_max < 1 || p.n_seq_max > 4096) {
    return InvalidArgument("n_seq_max must be in [1, 4096], got " + std::to_string(p.n_seq_max));
  }
  if (p.kv_pool < 0) return InvalidArgument("KV pool size must be >= 0, got " + std::to_string(p.kv_pool));
  if (p.kv_pool == 0) p.kv_pool = p.n_ctx;
  if (p.kv_pool > (1 << 24)) return InvalidArgument("KV pool of " + std::to_string(p.kv_pool) + " positions is too large");
  if (p.n_seq_max == 1) p.n_batch = std::min(p.n_batch, p.n_ctx);

  std::unique_ptr<Context> ctx(new Context());
  ctx->model_ = &model;
  ctx->params_ = p;
  ctx->n_vocab_ = c.n_vocab;
  const KvType type_v = p.kv_type_v.value_or(p.kv_type);
  const double kv_bytes = KvCache::Bytes(p.kv_type, type_v, c.n_layer, p.kv_pool, c.n_head_kv * c.head_dim);
  if (kv_bytes > 64.0 * (1ull << 30)) {
    return InvalidArgument("KV cache of " + std::to_string(p.kv_pool) + " positions would need " +
                           std::to_string(static_cast<long long>(kv_bytes / (1 << 20))) + " MiB");
  }
  if (p.stream_slots < 1) return InvalidArgument("stream slots must be >= 1, got " + std::to_string(p.stream_slots));
  TRINE_RETURN_IF_ERROR(
      ctx->kv_.Allocate(p.kv_type, type_v, c.n_layer, p.n_ctx, c.n_head_kv, c.head_dim, p.n_seq_max, p.kv_pool));
  ctx->st_.model = &model;
  ctx->st_.kv = &ctx->kv_;
  ctx->st_.n_threads = p.n_threads;
  ctx->tuner_ = std::make_unique<ThreadTuner>(p.n_threads, !p.fixed_threads);
  TRINE_RETURN_IF_ERROR(ctx->SyncStreamer());
  *out = std::move(ctx);
  return Status::Ok();
}

Status Context::Decode(const int32_t* tokens, int n, bool all_logits) {
  if (n <= 0) return InvalidArgument("no tokens to decode");
  if (tokens == nullptr) return InvalidArgument("token array is null");
  single_.Clear();
  for (int i = 0; i < n; ++i) single_.Add(tokens[i], -1, 0, all_logits || i == n - 1);
  return Decode(single_);
}

int Context::LogitsRow(int i) const {
  return i >= 0 && i < static_cast<int>(out_rows_.size()) ? out_rows_[static_cast<size_t>(i)] : -1;
}

Status Context::Decode(const Batch& b) {
  const int n = b.size();
  if (n <= 0) return InvalidArgument("no tokens to decode");
  if (b.pos.size() != b.token.size() || b.seq.size() != b.token.size() || b.logits.size() != b.token.size()) {
    return InvalidArgument("batch arrays differ in length");
  }
  // Each sequence's next position as the batch goes, starting where it stands; each token's
  // position goes to pos_ for the passes.
  std::vector<int32_t> next(static_cast<size_t>(params_.n_seq_max), -1);
  pos_.resize(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const int32_t t = b.token[static_cast<size_t>(i)], s = b.seq[static_cast<size_t>(i)];
    if (t < 0 || t >= n_vocab_) {
      return InvalidArgument("token id " + std::to_string(t) + " at index " + std::to_string(i) +
                             " is out of range [0, " + std::to_string(n_vocab_) + ")");
    }
    if (s < 0 || s >= params_.n_seq_max) {
      return InvalidArgument("sequence id " + std::to_string(s) + " at index " + std::to_string(i) +
                             " is out of range [0, " + std::to_string(params_.n_seq_max) + ") (n_seq_max)");
    }
    int32_t& nx = next[static_cast<size_t>(s)];
    if (nx < 0) nx = kv_.SeqPos(s);
    const int32_t p = b.pos[static_cast<size_t>(i)];
    if (p >= 0 && p != nx) {
      return InvalidArgument("token " + std::to_string(i) + " of sequence " + std::to_string(s) + " is at position " +
                             std::to_string(p) + "; the sequence continues at " + std::to_string(nx));
    }
    if (nx >= params_.n_ctx) {
      return InvalidArgument("context is full: sequence " + std::to_string(s) + " holds " +
                             std::to_string(kv_.SeqPos(s)) + " positions and " + std::to_string(nx + 1 - kv_.SeqPos(s)) +
                             " more exceed the context size " + std::to_string(params_.n_ctx) + " (use -c)");
    }
    pos_[static_cast<size_t>(i)] = nx++;
  }
  // Blocks reserved for the batch but not written go back to the pool (Truncate at a sequence's
  // own count drops them).
  const auto release_unwritten = [&](int up_to) {
    for (int s = 0; s < up_to; ++s) {
      if (next[static_cast<size_t>(s)] >= 0) kv_.Truncate(s, kv_.SeqPos(s));
    }
  };
  // Room for every sequence's new positions, or for none of them.
  for (int s = 0; s < params_.n_seq_max; ++s) {
    if (next[static_cast<size_t>(s)] < 0) continue;
    Status st = kv_.Reserve(s, next[static_cast<size_t>(s)]);
    if (!st.ok()) {
      release_unwritten(s);
      return st;
    }
  }
  out_rows_.assign(static_cast<size_t>(n), -1);
  int rows = 0;
  for (int i = 0; i < n; ++i) {
    if (b.logits[static_cast<size_t>(i)] != 0) out_rows_[static_cast<size_t>(i)] = rows++;
  }
  logits_.assign(static_cast<size_t>(rows) * static_cast<size_t>(n_vocab_), 0.0f);
  int row0 = 0;
  for (int i = 0; i < n; i += params_.n_batch) {
    const int m = std::min(params_.n_batch, n - i);
    Status st = DecodeChunk(b, i, m, row0);
    if (!st.ok()) {
      // Positions of this chunk may be partly written; they lie beyond each sequence's count, so
      // the next decode overwrites them.
      release_unwritten(params_.n_seq_max);
      return st;
    }
    for (int j = i; j < i + m; ++j) row0 += b.logits[static_cast<size_t>(j)] != 0 ? 1 : 0;
  }
  return Status::Ok();
}

Status Context::SyncStreamer() {
  const bool want = model_->has_streamed_layers();
  if (streamer_ && (!want || streamer_->epoch() != model_->placement_epoch())) streamer_.reset();
  if (want && !streamer_) TRINE_RETURN_IF_ERROR(WeightStreamer::Create(*model_, params_.stream_slots, &streamer_));
  st_.streamer = streamer_.get();
  return Status::Ok();
}

Status ForwardLayer(ForwardState& st, int layer) {
  const Model& m = *st.model;
  const LayerWeights* w = &m.layers()[static_cast<size_t>(layer)];
  const bool streamed = m.placement(layer) == Placement::kStreamed;
  if (streamed) {
    if (st.streamer == nullptr || !st.streamer->streams(layer)) {
      return Status(StatusCode::kInternal,
                    "layer " + std::to_string(layer) + " is streamed but this forward pass has no streamer for it");
    }
    TRINE_RETURN_IF_ERROR(st.streamer->Acquire(layer, &w));
  }
  st.w = w;
  st.layer = layer;
  if (m.config().arch != Arch::kLlama) {
    BitnetLayer(st, layer);
  } else {
    LlamaLayer(st, layer);
  }
  st.w = nullptr;
  if (streamed) st.streamer->Release(layer);
  return Status::Ok();
}

uint8_t* ReserveLayerActivations(ForwardState& st, const LayerWeights& w) {
  const kernels::WeightView* all[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
  ops::ReserveActivations(all, 7, st.n_tokens, &st.act);
  return st.act.data();
}

void NormQkvAttentionTeam(ForwardState& st, const LayerWeights& w, int layer, const float qkv_scale[3], uint8_t* act) {
  const ModelConfig& c = st.model->config();
  ops::RmsNormTeam(st.x.data(), w.attn_norm.data(), st.xb.data(), st.n_tokens, c.n_embd, c.rms_eps);
  const kernels::WeightView* qkv[] = {&w.wq, &w.wk, &w.wv};
  float* const qkv_out[] = {st.q.data(), st.k.data(), st.v.data()};
  ops::MatMulSharedTeam(qkv, qkv_out, qkv_scale, 3, st.xb.data(), st.n_tokens, act);
  const bool dump = TensorDumpActive();
  const int64_t qd = static_cast<int64_t>(c.n_head) * c.head_dim, kvd = static_cast<int64_t>(c.n_head_kv) * c.head_dim;
  if (dump) {
    TensorDumpTeam("attn_norm", layer, st.xb.data(), st.n_tokens, c.n_embd);
    TensorDumpTeam("Qcur", layer, st.q.data(), st.n_tokens, qd);
    TensorDumpTeam("Kcur", layer, st.k.data(), st.n_tokens, kvd);
    TensorDumpTeam("Vcur", layer, st.v.data(), st.n_tokens, kvd);
  }
  AttentionOverCache(st, layer);
  if (dump) {
    TensorDumpTeam("Qcur_rope", layer, st.q.data(), st.n_tokens, qd);
    TensorDumpTeam("Kcur_rope", layer, st.k.data(), st.n_tokens, kvd);
    TensorDumpTeam("kqv_out", layer, st.att.data(), st.n_tokens, qd);
  }
}

void NormGateUpTeam(ForwardState& st, const LayerWeights& w, const float gate_up_scale[2], uint8_t* act) {
  const ModelConfig& c = st.model->config();
  ops::RmsNormTeam(st.x.data(), w.ffn_norm.data(), st.xb.data(), st.n_tokens, c.n_embd, c.rms_eps);
  const kernels::WeightView* gate_up[] = {&w.w_gate, &w.w_up};
  float* const gate_up_out[] = {st.hb.data(), st.hb2.data()};
  ops::MatMulSharedTeam(gate_up, gate_up_out, gate_up_scale, 2, st.xb.data(), st.n_tokens, act);
  if (TensorDumpActive()) {
    TensorDumpTeam("ffn_norm", st.layer, st.xb.data(), st.n_tokens, c.n_embd);
    TensorDumpTeam("ffn_gate", st.layer, st.hb.data(), st.n_tokens, c.n_ff);
    TensorDumpTeam("ffn_up", st.layer, st.hb2.data(), st.n_tokens, c.n_ff);
  }
}

Status Context::DecodeChunk(const Batch& b, int i0, int n, int row0) {
  const ModelConfig& c = model_->config();
  ForwardState& st = st_;
  TRINE_RETURN_IF_ERROR(SyncStreamer());
  st.Resize(*model_, n, pos_[static_cast<size_t>(i0)]);
  const size_t E = static_cast<size_t>(c.n_embd);
  std::copy_n(b.seq.begin() + i0, n, st.seq.begin());
  std::copy_n(pos_.begin() + i0, n, st.pos.begin());

  for (int t = 0; t < n; ++t) model_->EmbedToken(b.token[static_cast<size_t>(i0 + t)], st.x.data() + static_cast<size_t>(t) * E);
  st.n_threads = tuner_->Pick(n);
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t slept0 = TeamSleepNanos();
  const auto report = [&] {
    tuner_->Report(n, st.n_threads, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   static_cast<double>(TeamSleepNanos() - slept0) * 1e-9);
  };
  TensorDumpBeginPass();
  if (TensorDumpActive()) {
    RunTeam(1, [&] { TensorDumpTeam("embd", -1, st.x.data(), n, c.n_embd); });
  }
  for (int l = 0; l < c.n_layer; ++l) TRINE_RETURN_IF_ERROR(ForwardLayer(st, l));
  // A sequence's tokens come in position order: its last one here sets its count.
  for (int t = 0; t < n; ++t) kv_.SetSeqPos(st.seq[static_cast<size_t>(t)], st.pos[static_cast<size_t>(t)] + 1);
  // Final norm and LM head, for the tokens whose logits are wanted (gathered in batch order).
  int rows = 0;
  for (int t = 0; t < n; ++t) rows += b.logits[static_cast<size_t>(i0 + t)] != 0 ? 1 : 0;
  if (rows == 0) {
    report();
    return Status::Ok();
  }
  head_in_.resize(static_cast<size_t>(rows) * E);
  final_norm_.resize(static_cast<size_t>(rows) * E);
  for (int t = 0, r = 0; t < n; ++t) {
    if (b.logits[static_cast<size_t>(i0 + t)] == 0) continue;
    std::copy_n(st.x.data() + static_cast<size_t>(t) * E, E, head_in_.data() + static_cast<size_t>(r++) * E);
  }
  const kernels::WeightView* head[] = {&model_->output()};
  ops::ReserveActivations(head, 1, rows, &st.act);
  RunTeam(st.n_threads, [&] {
    ops::RmsNormTeam(head_in_.data(), model_->output_norm().data(), final_norm_.data(), rows, c.n_embd, c.rms_eps);
    ops::MatMulTeam(model_->output(), final_norm_.data(), logits_.data() + static_cast<size_t>(row0) * n_vocab_, rows,
                    st.act.data());
    if (TensorDumpActive()) {
      TensorDumpTeam("result_norm", -1, final_norm_.data(), rows, c.n_embd);
      TensorDumpTeam("result_output", -1, logits_.data() + static_cast<size_t>(row0) * n_vocab_, rows, n_vocab_);
    }
  });
  report();
  return Status::Ok();
}

void AttentionOverCache(ForwardState& st, int layer) {
  const ModelConfig& c = st.model->config();
  const int hd = c.head_dim;
  const int kvd = c.n_head_kv * hd;
  const int qd = c.n_head * hd;
  const int group = c.n_head / c.n_head_kv;
  ops::RopeParams rp;
  rp.n_rot = c.n_rot;
  rp.freq_base = c.rope_freq_base;
  rp.freq_scale = c.rope_freq_scale;
  rp.neox = c.rope_neox;
  rp.freq_factors = st.model->rope_freqs().empty() ? nullptr : st.model->rope_freqs().data();
  KvCache& kv = *st.kv;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const kernels::AttnFn attn = kernels::SelectAttn(st.model->isa());
  const bool f32_cache = kv.type == KvType::kF32;
  const kernels::KvRowType k_type = KvRowTypeOf(kv.type), v_type = KvRowTypeOf(kv.type_v);
  // Heads per item: w query heads of one KV head go through the grouped kernel together (each
  // head's result is the same as alone); w divides the GQA group so an item never spans two KV heads.
  const kernels::AttnGroupFn attn_group = kernels::SelectAttnGroup(st.model->isa());
  int w = 1;
  if (!f32_cache && attn_group != nullptr) {
    const int width = kernels::AttnGroupWidth(st.model->isa(), k_type, v_type, hd);
    for (int d = width < group ? width : group; d > 1; --d) {
      if (group % d == 0) {
        w = d;
        break;
      }
    }
  }
  const int items_per_token = c.n_head / w;
  const int n_items = st.n_tokens * items_per_token;
  {
    // RoPE and the cache rows of each token (distinct rows per token), then attention once
    // every row is stored.
    for (int64_t ti = TeamFirst(st.n_tokens); ti < st.n_tokens; ti = TeamNext(st.n_tokens, ti)) {
      const int t = static_cast<int>(ti);
      const int pos = st.pos[static_cast<size_t>(t)];
      ops::Rope(st.q.data() + static_cast<size_t>(t) * qd, c.n_head, hd, pos, rp);
      ops::Rope(st.k.data() + static_cast<size_t>(t) * kvd, c.n_head_kv, hd, pos, rp);
      kv.Store(st.seq[static_cast<size_t>(t)], layer, pos, st.k.data() + static_cast<size_t>(t) * kvd,
               st.v.data() + static_cast<size_t>(t) * kvd);
    }
    TeamSync();
    std::vector<float> kbuf(static_cast<size_t>(hd)), vbuf(static_cast<size_t>(hd)), acc(static_cast<size_t>(hd));
    // Items claimed one at a time: with causal attention a token's cost grows with its position,
    // and every sequence of a batch has its own length.
    for (int64_t it = TeamFirst(n_items); it < n_items; it = TeamNext(n_items, it)) {
      const int item = static_cast<int>(it);
      const int t = item / items_per_token;
      const int h = item % items_per_token * w;  // the item's first head
      const int kvh = h / group;
      const int seq = st.seq[static_cast<size_t>(t)];
      const int n_kv = st.pos[static_cast<size_t>(t)] + 1;  // causal: positions 0 .. pos of its sequence
      const float* q = st.q.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      float* out = st.att.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      if (!f32_cache) {
        // llama.cpp's flash-attention numerics for F16 / Q8_0 / Q4_0 rows (kernels/ref/attention_ref.h).
        const kernels::KvHead kh = kv.KHead(seq, layer, kernels::KvRowBytes(k_type, kvh * hd), k_type);
        const kernels::KvHead vh = kv.VHead(seq, layer, kernels::KvRowBytes(v_type, kvh * hd), v_type);
        if (w > 1) {
          attn_group(q, w, kh, vh, n_kv, hd, scale, out);
        } else {
          attn(q, kh, vh, n_kv, hd, scale, out);
        }
        continue;
      }
      // fp32 cache: a plain online softmax in fp32.
      std::fill(acc.begin(), acc.end(), 0.0f);
      float max_s = -std::numeric_limits<float>::infinity();
      float sum = 0.0f;
      for (int p = 0; p < n_kv; ++p) {
        kv.LoadK(seq, layer, p, kvh * hd, hd, kbuf.data());
        float s = 0.0f;
        for (int i = 0; i < hd; ++i) s += kbuf[i] * q[i];
        s *= scale;
        float ms = 1.0f, vs = 1.0f;
        if (s > max_s) {
          ms = std::exp(max_s - s);
          max_s = s;
          for (int i = 0; i < hd; ++i) acc[i] *= ms;
        } else {
          vs = std::exp(s - max_s);
        }
        kv.LoadV(seq, layer, p, kvh * hd, hd, vbuf.data());
        for (int i = 0; i < hd; ++i) acc[i] += vbuf[i] * vs;
        sum = sum * ms + vs;
      }
      const float inv = 1.0f / sum;
      for (int i = 0; i < hd; ++i) out[i] = acc[i] * inv;
    }
    TeamSync();
  }
}

}  // namespace trine
