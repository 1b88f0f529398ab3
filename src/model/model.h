// Model: a validated GGUF file bound to per-layer weight views (zero copy over the mapping), with
// norm vectors and scales converted to fp32 once at load time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "gguf/gguf_reader.h"
#include "model/model_config.h"
#include "kernels.h"
#include "ref/matmul_ref.h"
#include "tokenizer/vocab.h"

namespace trine {

struct LayerWeights {
  std::vector<float> attn_norm;      // (E)
  std::vector<float> attn_sub_norm;  // (E), bitnet only
  std::vector<float> ffn_norm;       // (E)
  std::vector<float> ffn_sub_norm;   // (F), bitnet only
  kernels::WeightView wq;            // (H*hd rows, E cols)
  kernels::WeightView wk;            // (Hkv*hd, E)
  kernels::WeightView wv;            // (Hkv*hd, E)
  kernels::WeightView wo;            // (E, H*hd)
  kernels::WeightView w_gate;        // (F, E)
  kernels::WeightView w_up;          // (F, E)
  kernels::WeightView w_down;        // (E, F)
  // bitnet's optional per-tensor `.scale` multipliers of each matmul output (1 when absent).
  float s_q = 1, s_k = 1, s_v = 1, s_o = 1, s_gate = 1, s_up = 1, s_down = 1;
};

struct ModelLoadOptions {
  bool use_mmap = true;
  // Called with a fraction in [0, 1]; returning false cancels the load (kCancelled).
  std::function<bool(float)> progress;
  // Ternary kernel strategy (int8 dot or multiplication-free); kDefault picks the ISA's fastest.
  kernels::TernaryVariant ternary_variant = kernels::TernaryVariant::kDefault;
  // Weights whose matmuls keep fp32 activations (against dequantized weights) instead of the
  // int8/fp16 activation quantization llama.cpp uses; names as in the file ("blk.3.ffn_down.weight").
  // This is how a precision plan (trine profile) is applied.
  std::vector<std::string> f32_activation_tensors;
  // The output head's weight type: kCount keeps the file's; another type (f16, q8_0, q6_k, q4_0 ...)
  // requantizes the head at load (SetOutputType), as a plan's "output_type" says.
  TypeId output_type = TypeId::kCount;
};

// What the loader bound to one weight matrix (for `trine inspect --kernels`).
struct KernelBinding {
  std::string tensor;
  std::string kernel;  // e.g. "tq2_0: ternary x q8_K int8 dot (avx512)"
  bool repacked = false;
};

class Model {
 public:
  static Status Load(const std::string& path, const ModelLoadOptions& options, std::unique_ptr<Model>* out);

  const ModelConfig& config() const { return config_; }
  const Vocab& vocab() const { return vocab_; }
  const GgufFile& file() const { return *file_; }

  const kernels::WeightView& token_embd() const { return token_embd_; }  // (V rows, E cols)
  const kernels::WeightView& output() const { return output_; }          // token_embd when tied
  const std::vector<float>& output_norm() const { return output_norm_; }  // (E)
  const std::vector<float>& rope_freqs() const { return rope_freqs_; }    // (n_rot/2) or empty
  const std::vector<LayerWeights>& layers() const { return layers_; }

  // Writes row `token` of the embedding as fp32 (E values).
  void EmbedToken(int32_t token, float* dst) const;

  kernels::Isa isa() const { return isa_; }

  // Names of the weight matrices the forward pass multiplies by (bound views), in load order.
  std::vector<std::string> MatrixNames() const;
  // Switches one weight matrix between quantized and fp32 activations. For profilers: call only
  // while no context of this model is decoding (a model is otherwise immutable and shareable).
  Status SetF32Activations(const std::string& tensor, bool on);
  const std::vector<KernelBinding>& bindings() const { return bindings_; }

  // Requantizes the output head (output.weight, or the tied embedding; the embedding lookup is
  // unaffected) from the file's weights to `type` and rebinds its kernel; the file's own type
  // restores the original view. The activation precision setting is kept. Errors when the row
  // length is not a whole number of the type's blocks or the type has no row quantizer. For
  // profilers and loaders: call only while no context of this model is decoding.
  Status SetOutputType(TypeId type);
  TypeId output_type() const { return output_.type; }
  TypeId output_file_type() const { return output_file_.type; }
  // Bytes of the head's weights as bound now.
  uint64_t output_bytes() const { return static_cast<uint64_t>(output_.rows) * output_.row_bytes; }

 private:
  Model() = default;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  Vocab vocab_;
  kernels::WeightView token_embd_;
  kernels::WeightView output_;
  kernels::WeightView output_file_;    // the head as in the file (SetOutputType's source)
  std::vector<uint8_t> output_requant_;  // owned requantized head
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;
  std::vector<LayerWeights> layers_;
  kernels::Isa isa_ = kernels::Isa::kRef;
  kernels::TernaryVariant variant_ = kernels::TernaryVariant::kDefault;
  std::vector<KernelBinding> bindings_;
  std::vector<std::pair<std::string, kernels::WeightView*>> views_;  // into layers_ / output_
  std::vector<std::vector<uint8_t>> repacked_;  // owned TQ2_0 copies of TQ1_0 / I2_S weights

  Status BindKernel(const std::string& name, kernels::WeightView* w, kernels::TernaryVariant variant);
};

}  // namespace trine
