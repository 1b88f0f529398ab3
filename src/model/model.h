// Model: a validated GGUF file bound to per-layer weight views (zero copy over the mapping), with
// norm vectors and scales converted to fp32 once at load time.
//
// Placement of each layer's weight matrices (a memory plan, see src/profiler/plan.h):
//   kPageCache  the default: the file mapping, faulted in on first use (madvise NORMAL)
//   kResident   the mapping prefaulted at placement time (MADV_WILLNEED + a read per page) and,
//               with try_mlock, mlock'd
//   kStreamed   not mapped at all: the views' data pointers are null and a WeightStreamer
//               (runtime/weight_streamer.h, one per Context) preads the layer into a small ring of
//               buffers, with read-ahead, each time the forward pass reaches it. The mapped pages
//               of the layer are released (MADV_DONTNEED), and repacked copies (TQ1_0 / I2_S ->
//               TQ2_0) are not kept: a streamed layer of those types is repacked after every read
//               (correct but slow; stream TQ2_0 files). Needs a mapped file (use_mmap).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/page_buffer.h"
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

  static constexpr int kMatrices = 7;
  // The seven matrices in this order: wq, wk, wv, wo, w_gate, w_up, w_down.
  std::array<kernels::WeightView*, kMatrices> Matrices() {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
  std::array<const kernels::WeightView*, kMatrices> Matrices() const {
    return {&wq, &wk, &wv, &wo, &w_gate, &w_up, &w_down};
  }
};

enum class Placement : uint8_t { kPageCache = 0, kResident = 1, kStreamed = 2 };
// "page_cache", "resident", "streamed" (the plan JSON's names).
const char* PlacementName(Placement p);
bool ParsePlacement(const std::string& name, Placement* out);

// One weight matrix of a layer as the file stores it: what a streaming reader preads.
struct StreamMatrix {
  std::string name;        // "blk.3.ffn_up.weight"
  int split = 0;           // file (split) index in the GgufFile
  uint64_t file_offset = 0;
  uint64_t n_bytes = 0;
  kernels::WeightView file_view;  // the file's type, shape, row bytes and I2_S scale; data null
  bool repack = false;            // bytes must go through kernels::RepackToTq2
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
  // Placement of each layer (empty: all kPageCache; otherwise n_layer entries). Streamed layers
  // are never touched or repacked at load.
  std::vector<Placement> layer_placements;
  // Called once the file's header, config and vocabulary are read and before any weight is
  // bound: may fill *placements (as layer_placements). For planners that hash the file first.
  std::function<Status(const GgufFile& file, const ModelConfig& config, std::vector<Placement>* placements)>
      placement_hook;
  // mlock resident layers (failures are counted, not errors).
  bool mlock_resident = false;
};

// What the loader bound to one weight matrix (for `trine inspect --kernels`).
struct KernelBinding {
  std::string tensor;
  std::string kernel;  // e.g. "tq2_0: ternary x q8_K int8 dot (avx512)"
  // What the kernel reads, against the file's bytes: "mapped", "copied" (the head on huge
  // pages), "16-row interleave", "repacked from tq1_0", "requantized from q6_K, 16-row interleave".
  std::string layout = "mapped";
};

class Model {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  // The kernel layouts (x16 interleaves, repacks, the head's copy) are filled on 4 KiB pages and
  // promoted to huge pages by a background thread started at load (core/page_buffer.h says why);
  // decode runs meanwhile, and gets faster as it goes (bitnet-2b: ~2-3 s on the Xeon VM, well
  // under a second on bare metal). This waits until it is done: for benchmarks of the steady state.
  void WaitForHugePages();
  static Status Load(const std::string& path, const ModelLoadOptions& options, std::unique_ptr<Model>* out);

  const ModelConfig& config() const { return config_; }
  const Vocab& vocab() const { return *vocab_; }
  // The same vocabulary for a Tokenizer to share (Tokenizer::Create) instead of copying.
  std::shared_ptr<const Vocab> shared_vocab() const { return vocab_; }
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
  // profilers and loaders: call only while no context of this model is decoding. The head it
  // switches away from, when requantized, is kept as a spare, so switching back (a profiler
  // trying candidates, then applying its plan) swaps it in instead of requantizing again;
  // DropSpareOutputHead frees it.
  Status SetOutputType(TypeId type);
  void DropSpareOutputHead();
  TypeId output_type() const { return output_.type; }
  TypeId output_file_type() const { return output_file_.type; }
  // Bytes of the head's weights as bound now.
  uint64_t output_bytes() const { return static_cast<uint64_t>(output_.rows) * output_.row_bytes; }
  // Placement of layer `l`, and the file ranges of its seven matrices (LayerWeights::Matrices order).
  Placement placement(int layer) const { return placements_[static_cast<size_t>(layer)]; }
  const std::vector<Placement>& placements() const { return placements_; }
  bool has_streamed_layers() const;
  const std::vector<StreamMatrix>& stream_matrices(int layer) const {
    return stream_matrices_[static_cast<size_t>(layer)];
  }
  // Changes a layer's placement (see the top of this file). Like SetF32Activations: only while no
  // context of this model is decoding; contexts notice the change (placement_epoch) at their
  // next decode and rebuild their streamer. kStreamed needs a mapped file (kUnsupported otherwise).
  Status SetLayerPlacement(int layer, Placement p, bool try_mlock);
  // Bumped by every SetLayerPlacement that changes something.
  uint64_t placement_epoch() const { return placement_epoch_; }
  // mlock results of resident placements so far.
  int mlock_ok() const { return mlock_ok_; }
  int mlock_failed() const { return mlock_failed_; }

 private:
  Model() = default;
  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::shared_ptr<const Vocab> vocab_;  // set by Load, never null after
  kernels::WeightView token_embd_;
  kernels::WeightView output_;
  kernels::WeightView output_file_;    // the head as in the file (SetOutputType's source)
  PageBuffer output_requant_;  // owned requantized head
  // The requantized head SetOutputType switched away from last (kCount: none): its type, its
  // view (pointing into output_spare_data_) and buffer.
  TypeId output_spare_type_ = TypeId::kCount;
  kernels::WeightView output_spare_;
  PageBuffer output_spare_data_;
  // The file's head copied at load (CopyFileHead): its x16 layout, or a plain copy on huge pages
  // that the tied embedding reads too; output_file_ points into it while it is held.
  PageBuffer head_copy_;
  kernels::WeightView output_mapped_;  // the file's head on the mapping (DropSpareOutputHead's way back)
  std::vector<float> output_norm_;
  std::vector<float> rope_freqs_;
  std::vector<LayerWeights> layers_;
  kernels::Isa isa_ = kernels::Isa::kRef;
  kernels::TernaryVariant variant_ = kernels::TernaryVariant::kDefault;
  std::vector<KernelBinding> bindings_;
  std::vector<std::pair<std::string, kernels::WeightView*>> views_;  // into layers_ / output_
  std::map<std::string, PageBuffer> repacked_;  // owned kernel layouts (MakeKernelLayout)
  std::vector<Placement> placements_;
  std::vector<std::vector<StreamMatrix>> stream_matrices_;
  uint64_t placement_epoch_ = 0;
  int mlock_ok_ = 0, mlock_failed_ = 0;

  // Refreshes KernelBinding::layout of a layer's matrices after a placement change.
  void UpdateLayerLayouts(int layer);
  Status BindKernel(const std::string& name, kernels::WeightView* w, kernels::TernaryVariant variant, bool streamed);
  // True when the kernel bound for `type` (rows of `cols` values) reads the x16 interleave: the
  // ISA's kernel wants it and the rows are whole x16 blocks.
  bool ReadsX16(TypeId type, int64_t cols, kernels::TernaryVariant variant) const;
  // Turns the file view *w of tensor `name` into the layout its kernel reads best (I2_S, and TQ1_0
  // without AVX-512 VBMI, repacked to TQ2_0; the AVX-512 x16 interleave, TQ1_0 as it is); a copy
  // is owned in repacked_[name] and the file's pages are released.
  Status MakeKernelLayout(const std::string& name, kernels::TernaryVariant variant, kernels::WeightView* w);
  // At the end of Load: when the file's head is in use and read from the file, copies it and
  // releases its mapped pages (the head is a third of a ternary model's decode bytes). Where its
  // kernel reads the x16 layout (Q6_K on AVX-512) the copy is that layout, always; otherwise a
  // plain copy on huge pages, made only where huge pages are on and the file is mapped (the
  // kernels stream it faster behind 2 MiB pages than the page cache's 4 KiB ones). No-op for
  // heads that are already copies (requantized, repacked).
  Status CopyFileHead();
  bool defer_head_layout_ = false;  // set while Load binds the head (its x16 copy comes later)
  // The background promotion (WaitForHugePages): Start snapshots every owned buffer's 2 MiB units
  // and collapses them one by one on its own thread; Stop makes it quit after the current unit
  // and joins. Methods that free or replace buffers hold a PromotionPause (stop now, start again
  // when they return) once the load has started it.
  void StartHugePagePromotion();
  void StopHugePagePromotion();
  struct PromotionPause {
    explicit PromotionPause(Model* m) : m_(m) { m_->StopHugePagePromotion(); }
    ~PromotionPause() {
      if (m_->promote_) m_->StartHugePagePromotion();
    }
    Model* m_;
  };
  bool promote_ = false;  // set at the end of Load
  // During Load: the arena the kernel layouts are carved from (PageArena; null otherwise), and
  // after it the whole 2 MiB units it handed out, for the promotion.
  PageArena* load_arena_ = nullptr;
  std::vector<uint8_t*> arena_units_;
  std::thread promoter_;
  std::atomic<bool> promoter_stop_{false};
  // Points the view at the mapped bytes (repacking when needed) / detaches it (streamed).
  Status AttachLayer(int layer);
  void DetachLayer(int layer);
};

}  // namespace trine
