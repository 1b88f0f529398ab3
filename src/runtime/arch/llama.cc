// `llama` transformer block (Llama 2/3, TinyLlama): pre-RMSNorm attention with NORM RoPE and GQA,
// then pre-RMSNorm SwiGLU FFN, each with a residual add.
#include "core/team.h"
#include "runtime/ops.h"
#include "runtime/context.h"
#include "runtime/tensor_dump.h"

namespace trine {

void LlamaLayer(ForwardState& st, int layer) {
  const ModelConfig& c = st.model->config();
  const LayerWeights& w = st.w != nullptr ? *st.w : st.model->layers()[static_cast<size_t>(layer)];
  const int n = st.n_tokens;
  const int64_t E = c.n_embd, F = c.n_ff;

  uint8_t* act = ReserveLayerActivations(st, w);
  // One parallel region for the whole block (fork/join once, barriers between the steps).
  RunTeam(st.n_threads, [&] {
    const float ones[] = {1.0f, 1.0f, 1.0f};
    const bool dump = TensorDumpActive();  // TRINE_DUMP_TENSORS (runtime/tensor_dump.h)
    NormQkvAttentionTeam(st, w, layer, ones, act);
    ops::MatMulTeam(w.wo, st.att.data(), st.proj.data(), n, act);
    if (dump) TensorDumpTeam("attn_out", layer, st.proj.data(), n, E);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);
    if (dump) TensorDumpTeam("ffn_inp", layer, st.x.data(), n, E);

    NormGateUpTeam(st, w, ones, act);
    ops::SwiGluTeam(st.hb.data(), st.hb2.data(), st.hb.data(), n, F);
    if (dump) TensorDumpTeam("ffn_swiglu", layer, st.hb.data(), n, F);
    ops::MatMulTeam(w.w_down, st.hb.data(), st.proj.data(), n, act);
    if (dump) TensorDumpTeam("ffn_out", layer, st.proj.data(), n, E);
    ops::AddInPlaceTeam(st.x.data(), st.proj.data(), n * E);
    if (dump) TensorDumpTeam("l_out", layer, st.x.data(), n, E);
  });
}

}  // namespace trine
