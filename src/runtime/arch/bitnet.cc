// BitNet transformer block, llama.cpp's `bitnet` and bitnet.cpp's `bitnet-b1.58`: as llama, plus
// an RMSNorm (attn_sub_norm) on the attention output before Wo and one (ffn_sub_norm) on the
// gated FFN activation before Wdown; NEOX RoPE; optional per-tensor output scales. The gate
// activation is SiLU for `bitnet` and ReLU^2 for `bitnet-b1.58`.
#include "core/team.h"
#include "runtime/ops.h"
#include "runtime/context.h"

namespace trine {

void BitnetLayer(ForwardState& st, int layer) {
  const ModelConfig& c = st.model->config();
  const LayerWeights& w = st.w != nullptr ? *st.w : st.model->layers()[static_cast<size_t>(layer)];
  const int n = st.n_tokens;
  const int64_t E = c.n_embd, F = c.n_ff;

  uint8_t* act = ReserveLayerActivations(st, w);
  // One parallel region for the whole block (fork/join once, barriers between the steps).
  RunTeam(st.n_threads, [&] {
    const float qkv_scale[] = {w.s_q, w.s_k, w.s_v};
    NormQkvAttentionTeam(st, w, layer, qkv_scale, act);
    ops::RmsNormTeam(st.att.data(), w.attn_sub_norm.data(), st.att.data(), n, c.n_embd, c.rms_eps);
    ops::MatMulTeam(w.wo, st.att.data(), st.proj.data(), n, act, w.s_o);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);

    const float gate_up_scale[] = {w.s_gate, w.s_up};
    NormGateUpTeam(st, w, gate_up_scale, act);
    if (c.arch == Arch::kBitnetB158) {
      ops::ReluSqrGluTeam(st.hb.data(), st.hb2.data(), st.hb.data(), n * F);
    } else {
      ops::SwiGluTeam(st.hb.data(), st.hb2.data(), st.hb.data(), n, F);
    }
    ops::RmsNormTeam(st.hb.data(), w.ffn_sub_norm.data(), st.hb.data(), n, c.n_ff, c.rms_eps);
    ops::MatMulTeam(w.w_down, st.hb.data(), st.proj.data(), n, act, w.s_down);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);
  });
}

}  // namespace trine
