// Context: KV cache, batch splitting, the forward pass driver and attention over the cache.
#include "runtime/context.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include <cstring>

#include "core/fp16.h"
#include "core/team.h"
#include "kernels.h"
#include "model/ops.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF16:
      return "f16";
    case KvType::kF32:
      return "f32";
    case KvType::kQ8_0:
      return "q8_0";
    case KvType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

bool ParseKvType(const std::string& name, KvType* type) {
  for (KvType t : {KvType::kF16, KvType::kF32, KvType::kQ8_0, KvType::kQ4_0}) {
    if (name == KvTypeName(t)) {
      *type = t;
      return true;
    }
  }
  return false;
}

namespace {

kernels::KvRowType RowType(KvType t) {
  if (t == KvType::kQ8_0) return kernels::KvRowType::kQ8_0;
  if (t == KvType::kQ4_0) return kernels::KvRowType::kQ4_0;
  return kernels::KvRowType::kF16;
}

bool IsBlockType(KvType t) { return t == KvType::kQ8_0 || t == KvType::kQ4_0; }

void StoreRow(KvType type, const float* src, int n, uint8_t* dst) {
  switch (type) {
    case KvType::kF16:
      // fp16 rounding of every value: the active ISA's F16 activation quantizer (same bits).
      kernels::QuantizeActivations(TypeId::kF16, src, n, dst);
      break;
    case KvType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case KvType::kQ8_0:
      QuantizeRowQ8_0(src, dst, n);  // the cache write of llama.cpp (ggml_cpy to q8_0)
      break;
    case KvType::kQ4_0:
      QuantizeRowQ4_0(src, dst, n);
      break;
  }
}

void LoadRow(KvType type, const uint8_t* row, int offset, int n, float* dst) {
  switch (type) {
    case KvType::kF16: {
      const float* table = Fp16ToFp32Table();
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row) + offset;
      for (int i = 0; i < n; ++i) dst[i] = table[r[i]];
      break;
    }
    case KvType::kF32:
      std::memcpy(dst, reinterpret_cast<const float*>(row) + offset, static_cast<size_t>(n) * sizeof(float));
      break;
    case KvType::kQ8_0:
      DequantizeRowQ8_0(row + static_cast<size_t>(offset / kQK8_0) * sizeof(BlockQ8_0), dst, n);
      break;
    case KvType::kQ4_0:
      DequantizeRowQ4_0(row + static_cast<size_t>(offset / kQK4_0) * sizeof(BlockQ4_0), dst, n);
      break;
  }
}

}  // namespace

size_t KvRowBytes(KvType type, int kv_dim) {
  if (type == KvType::kF32) return static_cast<size_t>(kv_dim) * sizeof(float);
  return kernels::KvRowBytes(RowType(type), kv_dim);
}

double KvCache::Bytes(KvType type_k, KvType type_v, int n_layer, int n_ctx, int kv_dim) {
  return static_cast<double>(n_layer) * static_cast<double>(n_ctx) *
         static_cast<double>(KvRowBytes(type_k, kv_dim) + KvRowBytes(type_v, kv_dim));
}

Status KvCache::Allocate(KvType tk, KvType tv, int n_layer, int ctx, int n_head_kv, int head_dim) {
  if ((tk == KvType::kF32) != (tv == KvType::kF32)) {
    return InvalidArgument(std::string("KV cache types ") + KvTypeName(tk) + " (K) and " + KvTypeName(tv) +
                           " (V): f32 is only supported for K and V together");
  }
  if ((IsBlockType(tk) || IsBlockType(tv)) && head_dim % 32 != 0) {
    return InvalidArgument(std::string("KV cache type ") + KvTypeName(IsBlockType(tk) ? tk : tv) +
                           " needs a head size that is a multiple of 32; this model's is " +
                           std::to_string(head_dim) + " (use -ctk/-ctv f16)");
  }
  type = tk;
  type_v = tv;
  n_ctx = ctx;
  kv_dim = n_head_kv * head_dim;
  k_row = KvRowBytes(tk, kv_dim);
  v_row = KvRowBytes(tv, kv_dim);
  const size_t rows = static_cast<size_t>(n_layer) * static_cast<size_t>(ctx);
  k.assign(rows * k_row, 0);
  v.assign(rows * v_row, 0);
  return Status::Ok();
}

void KvCache::Store(int layer, int pos, const float* ks, const float* vs) {
  StoreRow(type, ks, kv_dim, KRow(layer, pos));
  StoreRow(type_v, vs, kv_dim, VRow(layer, pos));
}

void KvCache::LoadK(int layer, int pos, int offset, int n, float* dst) const {
  LoadRow(type, KRow(layer, pos), offset, n, dst);
}

void KvCache::LoadV(int layer, int pos, int offset, int n, float* dst) const {
  LoadRow(type_v, VRow(layer, pos), offset, n, dst);
}

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
  p.n_batch = std::min(p.n_batch, p.n_ctx);

  std::unique_ptr<Context> ctx(new Context());
  ctx->model_ = &model;
  ctx->params_ = p;
  ctx->n_vocab_ = c.n_vocab;
  const KvType type_v = p.kv_type_v.value_or(p.kv_type);
  const double kv_bytes = KvCache::Bytes(p.kv_type, type_v, c.n_layer, p.n_ctx, c.n_head_kv * c.head_dim);
  if (kv_bytes > 64.0 * (1ull << 30)) {
    return InvalidArgument("KV cache for a context of " + std::to_string(p.n_ctx) + " tokens would need " +
                           std::to_string(static_cast<long long>(kv_bytes / (1 << 20))) + " MiB");
  }
  if (p.stream_slots < 1) return InvalidArgument("stream slots must be >= 1, got " + std::to_string(p.stream_slots));
  TRINE_RETURN_IF_ERROR(ctx->kv_.Allocate(p.kv_type, type_v, c.n_layer, p.n_ctx, c.n_head_kv, c.head_dim));
  ctx->st_.model = &model;
  ctx->st_.kv = &ctx->kv_;
  ctx->st_.n_threads = p.n_threads;
  TRINE_RETURN_IF_ERROR(ctx->SyncStreamer());
  *out = std::move(ctx);
  return Status::Ok();
}

void Context::Truncate(int n) {
  if (n >= 0 && n < n_past_) n_past_ = n;
}

Status Context::Decode(const int32_t* tokens, int n, bool all_logits) {
  if (n <= 0) return InvalidArgument("no tokens to decode");
  if (tokens == nullptr) return InvalidArgument("token array is null");
  for (int i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab_) {
      return InvalidArgument("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is out of range [0, " + std::to_string(n_vocab_) + ")");
    }
  }
  if (n > params_.n_ctx - n_past_) {
    return InvalidArgument("context is full: " + std::to_string(n_past_) + " + " + std::to_string(n) +
                           " tokens exceed the context size " + std::to_string(params_.n_ctx) + " (use -c)");
  }
  logits_.assign(static_cast<size_t>(all_logits ? n : 1) * static_cast<size_t>(n_vocab_), 0.0f);
  for (int i = 0; i < n; i += params_.n_batch) {
    const int m = std::min(params_.n_batch, n - i);
    TRINE_RETURN_IF_ERROR(DecodeBatch(tokens + i, m, all_logits, all_logits ? i : 0));
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
  AttentionOverCache(st, layer);
}

void NormGateUpTeam(ForwardState& st, const LayerWeights& w, const float gate_up_scale[2], uint8_t* act) {
  const ModelConfig& c = st.model->config();
  ops::RmsNormTeam(st.x.data(), w.ffn_norm.data(), st.xb.data(), st.n_tokens, c.n_embd, c.rms_eps);
  const kernels::WeightView* gate_up[] = {&w.w_gate, &w.w_up};
  float* const gate_up_out[] = {st.hb.data(), st.hb2.data()};
  ops::MatMulSharedTeam(gate_up, gate_up_out, gate_up_scale, 2, st.xb.data(), st.n_tokens, act);
}

Status Context::DecodeBatch(const int32_t* tokens, int n, bool all_logits, int logits_row0) {
  const ModelConfig& c = model_->config();
  ForwardState& st = st_;
  TRINE_RETURN_IF_ERROR(SyncStreamer());
  st.Resize(*model_, n, n_past_);
  const size_t E = static_cast<size_t>(c.n_embd);

  for (int t = 0; t < n; ++t) model_->EmbedToken(tokens[t], st.x.data() + static_cast<size_t>(t) * E);
  for (int l = 0; l < c.n_layer; ++l) {
    Status s = ForwardLayer(st, l);
    if (!s.ok()) {
      // The KV cache rows of positions n_past .. n_past+n-1 may be partly written: they stay
      // beyond n_past, so the next decode overwrites them.
      return s;
    }
  }
  // Final norm and LM head, for the rows whose logits are wanted.
  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  final_norm_.resize(static_cast<size_t>(rows) * E);
  const kernels::WeightView* head[] = {&model_->output()};
  ops::ReserveActivations(head, 1, rows, &st.act);
  RunTeam(st.n_threads, [&] {
    ops::RmsNormTeam(st.x.data() + static_cast<size_t>(first) * E, model_->output_norm().data(), final_norm_.data(),
                     rows, c.n_embd, c.rms_eps);
    ops::MatMulTeam(model_->output(), final_norm_.data(),
                    logits_.data() + static_cast<size_t>(logits_row0) * n_vocab_, rows, st.act.data());
  });
  n_past_ += n;
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
  // Heads per item: w query heads of one KV head go through the grouped kernel together (each
  // head's result is the same as alone); w divides the GQA group so an item never spans two KV heads.
  const kernels::AttnGroupFn attn_group = kernels::SelectAttnGroup(st.model->isa());
  int w = 1;
  if (!f32_cache && attn_group != nullptr) {
    const int width = kernels::AttnGroupWidth(st.model->isa(), RowType(kv.type), RowType(kv.type_v), hd);
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
    int64_t t0, t1;
    TeamPart(st.n_tokens, 1, &t0, &t1);
    for (int t = static_cast<int>(t0); t < t1; ++t) {
      const int pos = st.n_past + t;
      ops::Rope(st.q.data() + static_cast<size_t>(t) * qd, c.n_head, hd, pos, rp);
      ops::Rope(st.k.data() + static_cast<size_t>(t) * kvd, c.n_head_kv, hd, pos, rp);
      kv.Store(layer, pos, st.k.data() + static_cast<size_t>(t) * kvd, st.v.data() + static_cast<size_t>(t) * kvd);
    }
    TeamSync();
    std::vector<float> kbuf(static_cast<size_t>(hd)), vbuf(static_cast<size_t>(hd)), acc(static_cast<size_t>(hd));
    // Round-robin items: with causal attention a token's cost grows with its position, so
    // contiguous blocks of tokens would leave the first thread idle for most of the loop.
    for (int item = omp_get_thread_num(); item < n_items; item += omp_get_num_threads()) {
      const int t = item / items_per_token;
      const int h = item % items_per_token * w;  // the item's first head
      const int kvh = h / group;
      const int n_kv = st.n_past + t + 1;  // causal: positions 0 .. pos
      const float* q = st.q.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      float* out = st.att.data() + static_cast<size_t>(t) * qd + static_cast<size_t>(h) * hd;
      if (!f32_cache) {
        // llama.cpp's flash-attention numerics for F16 / Q8_0 / Q4_0 rows (kernels/ref/attention_ref.h).
        kernels::KvHead kh, vh;
        kh.type = RowType(kv.type);
        kh.data = kv.KRow(layer, 0) + kernels::KvRowBytes(kh.type, kvh * hd);
        kh.stride = kv.k_row;
        vh.type = RowType(kv.type_v);
        vh.data = kv.VRow(layer, 0) + kernels::KvRowBytes(vh.type, kvh * hd);
        vh.stride = kv.v_row;
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
        kv.LoadK(layer, p, kvh * hd, hd, kbuf.data());
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
        kv.LoadV(layer, p, kvh * hd, hd, vbuf.data());
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
