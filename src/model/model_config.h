// ModelConfig: hyperparameters read from GGUF metadata, plus the model-level checks that make a
// file safe to run: required keys present with the right types, dimensions consistent, every
// expected tensor present with the right shape.
#pragma once

#include <string>

#include "core/status.h"
#include "gguf/gguf_reader.h"

namespace trine {

enum class Arch {
  kLlama,       // llama.cpp `llama`: RMSNorm, NORM RoPE, SwiGLU
  kBitnet,      // llama.cpp `bitnet`: sub-norms, NEOX RoPE, SiLU gate, tied output
  kBitnetB158,  // bitnet.cpp `bitnet-b1.58` / `bitnet-25`: as kBitnet with ReLU^2
};

struct ModelConfig {
  std::string arch_name;  // general.architecture as written
  Arch arch = Arch::kLlama;
  int n_layer = 0;
  int n_embd = 0;       // E
  int n_head = 0;       // H
  int n_head_kv = 0;    // Hkv
  int n_ff = 0;         // F
  int head_dim = 0;     // E / H for llama; key_length when present
  int n_rot = 0;        // rotated dims per head
  int n_ctx_train = 0;
  int n_vocab = 0;      // rows of token_embd
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // linear scaling: positions are multiplied by this
  bool rope_neox = false;         // NEOX pairs (x[i], x[i+n_rot/2]) instead of adjacent pairs
  bool tied_output = true;        // logits use token_embd (no output.weight)
  bool has_rope_freqs = false;    // rope_freqs.weight (Llama-3 long-context factors)
  bool has_scales = false;        // per-tensor `.scale` multipliers (bitnet)
};

// Reads and validates everything a forward pass needs. Errors name the file and key or tensor.
Status LoadModelConfig(const GgufFile& file, ModelConfig* config);

// True when trine can run general.architecture `arch`.
bool IsSupportedArch(const std::string& arch);

}  // namespace trine
