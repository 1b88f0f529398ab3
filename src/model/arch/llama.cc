// `llama` transformer block (Llama 2/3, TinyLlama): pre-RMSNorm attention with NORM RoPE and GQA,
// then pre-RMSNorm SwiGLU FFN, each with a residual add.
#include "model/ops.h"
#include "runtime/context.h"

namespace trine {

void LlamaLayer(ForwardState& st, int layer) {
  const ModelConfig& c = st.model->config();
  const LayerWeights& w = st.w != nullptr ? *st.w : st.model->layers()[static_cast<size_t>(layer)];
  const int n = st.n_tokens;
  const int64_t E = c.n_embd, F = c.n_ff;

  const kernels::WeightView* all[] = {&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down};
  ops::ReserveActivations(all, 7, n, &st.act);
  uint8_t* act = st.act.data();
  // One parallel region for the whole block (fork/join once, barriers between the steps).
#pragma omp parallel num_threads(st.n_threads)
  {
    ops::RmsNormTeam(st.x.data(), w.attn_norm.data(), st.xb.data(), n, c.n_embd, c.rms_eps);
    const kernels::WeightView* qkv[] = {&w.wq, &w.wk, &w.wv};
    float* const qkv_out[] = {st.q.data(), st.k.data(), st.v.data()};
    const float ones[] = {1.0f, 1.0f, 1.0f};
    ops::MatMulSharedTeam(qkv, qkv_out, ones, 3, st.xb.data(), n, act);
    AttentionOverCache(st, layer);
    ops::MatMulTeam(w.wo, st.att.data(), st.proj.data(), n, act);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);

    ops::RmsNormTeam(st.x.data(), w.ffn_norm.data(), st.xb.data(), n, c.n_embd, c.rms_eps);
    const kernels::WeightView* gate_up[] = {&w.w_gate, &w.w_up};
    float* const gate_up_out[] = {st.hb.data(), st.hb2.data()};
    ops::MatMulSharedTeam(gate_up, gate_up_out, ones, 2, st.xb.data(), n, act);
    ops::SwiGluTeam(st.hb.data(), st.hb2.data(), st.hb.data(), n, F);
    ops::MatMulTeam(w.w_down, st.hb.data(), st.proj.data(), n, act);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);
  }
}

}  // namespace trine
