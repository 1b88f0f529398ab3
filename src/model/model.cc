// Model loading: validation (ModelConfig, Vocab), then weight binding by tensor name.
#include "model/model.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "repack.h"
#include "tensor/blocks.h"

namespace trine {
namespace {

Status BindMatrix(const GgufFile& f, const std::string& name, kernels::WeightView* w) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (!t) return InvalidFile(f.path() + ": missing tensor '" + name + "'");
  if (t->n_dims != 2) return InvalidFile(f.path() + ": tensor '" + name + "' must be 2-D, found " + t->ShapeString());
  w->type = t->type;
  w->cols = t->ne[0];
  w->rows = t->ne[1];
  w->data = t->data;
  const TypeTraits& tr = GetTypeTraits(t->type);
  w->row_bytes = static_cast<size_t>(t->ne[0] / tr.block_elems * tr.block_bytes);
  w->tensor_scale = 1.0f;
  if (t->type == TypeId::kI2_S) {
    // The fp32 scale sits right after the codes (byte n/4).
    std::memcpy(&w->tensor_scale, t->data + t->n_elems / 4, 4);
    if (!(w->tensor_scale == w->tensor_scale) || w->tensor_scale < 0.0f) {
      return InvalidFile(f.path() + ": tensor '" + name + "' has an invalid I2_S scale");
    }
  }
  return Status::Ok();
}

Status ReadVector(const GgufFile& f, const std::string& name, std::vector<float>* out) {
  const GgufTensorInfo* t = f.FindTensor(name);
  if (!t) return InvalidFile(f.path() + ": missing tensor '" + name + "'");
  out->resize(static_cast<size_t>(t->n_elems));
  return DequantizeTensor(t->type, t->data, t->n_bytes, t->n_elems, out->data());
}

Status ReadScale(const GgufFile& f, const std::string& name, float* out) {
  if (!f.FindTensor(name)) return Status::Ok();
  std::vector<float> v;
  TRINE_RETURN_IF_ERROR(ReadVector(f, name, &v));
  *out = v[0];
  return Status::Ok();
}

}  // namespace

Status Model::BindKernel(const std::string& name, kernels::WeightView* w, kernels::TernaryVariant variant) {
  KernelBinding b;
  b.tensor = name;
  const TypeId file_type = w->type;
  const uint8_t* file_data = w->data;
  const size_t file_bytes = static_cast<size_t>(w->rows) * w->row_bytes;
  if (kernels::NeedsTernaryRepack(*w) && w->cols % kQK_K == 0) {
    repacked_.emplace_back();
    TRINE_RETURN_IF_ERROR(kernels::RepackToTq2(*w, &repacked_.back(), w));
    b.repacked = true;
  }
  if (kernels::WantsX16(w->type, isa_, variant) && kernels::X16BlockElems(w->type) > 0 &&
      w->cols % kernels::X16BlockElems(w->type) == 0) {
    // The AVX-512 kernels' 16-row interleave (TQ2_0, Q4_0); a TQ1_0 / I2_S repack is replaced by it.
    std::vector<uint8_t> storage;
    TRINE_RETURN_IF_ERROR(kernels::InterleaveX16(*w, &storage, w));
    if (b.repacked) {
      repacked_.back().swap(storage);
    } else {
      repacked_.push_back(std::move(storage));
    }
    b.repacked = true;
  }
  if (b.repacked && file_ && file_->is_mmapped()) {
    // The kernels read the repacked copy only: drop the file pages the repack faulted in, so
    // they do not stay resident next to it (a later read faults them back from the file).
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(file_data) + page - 1) / page * page;
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(file_data) + file_bytes) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  }
  std::string kname;
  w->gemm = kernels::SelectGemm(w->type, isa_, variant, &kname);
  if (w->interleave == 16) kname += ", 16-row interleave";
  b.kernel = b.repacked ? std::string(TypeName(file_type)) + " -> " + kname : kname;
  bindings_.push_back(std::move(b));
  views_.emplace_back(name, w);
  return Status::Ok();
}

std::vector<std::string> Model::MatrixNames() const {
  std::vector<std::string> names;
  for (const auto& v : views_) names.push_back(v.first);
  return names;
}

Status Model::SetF32Activations(const std::string& tensor, bool on) {
  for (auto& [name, w] : views_) {
    if (name != tensor) continue;
    if (w->f32_activations == on) return Status::Ok();
    w->f32_activations = on;
    w->gemm = on ? kernels::GemmDequantF32 : kernels::SelectGemm(w->type, isa_, variant_, nullptr);
    for (auto& b : bindings_) {
      if (b.tensor == tensor) {
        const std::string suffix = " + f32 activations";
        if (on) {
          b.kernel += suffix;
        } else if (b.kernel.size() > suffix.size()) {
          b.kernel.resize(b.kernel.size() - suffix.size());
        }
      }
    }
    return Status::Ok();
  }
  return InvalidArgument("no weight matrix named '" + tensor + "'");
}

Status Model::Load(const std::string& path, const ModelLoadOptions& options, std::unique_ptr<Model>* out) {
  std::unique_ptr<Model> m(new Model());
  GgufOpenOptions oo;
  oo.use_mmap = options.use_mmap;
  TRINE_RETURN_IF_ERROR(GgufFile::Open(path, oo, &m->file_));
  const GgufFile& f = *m->file_;
  TRINE_RETURN_IF_ERROR(LoadModelConfig(f, &m->config_));
  TRINE_RETURN_IF_ERROR(LoadVocab(f, &m->vocab_));
  const ModelConfig& c = m->config_;
  TRINE_RETURN_IF_ERROR(kernels::ActiveIsaStatus());
  m->isa_ = kernels::ActiveIsa();
  m->variant_ = options.ternary_variant;
  if (m->vocab_.size() > c.n_vocab) {
    return InvalidFile(path + ": tokenizer has " + std::to_string(m->vocab_.size()) +
                       " tokens but token_embd.weight has only " + std::to_string(c.n_vocab) + " rows");
  }
  TRINE_RETURN_IF_ERROR(BindMatrix(f, "token_embd.weight", &m->token_embd_));
  if (c.tied_output) {
    m->output_ = m->token_embd_;
  } else {
    TRINE_RETURN_IF_ERROR(BindMatrix(f, "output.weight", &m->output_));
  }
  TRINE_RETURN_IF_ERROR(m->BindKernel(c.tied_output ? "token_embd.weight" : "output.weight", &m->output_,
                                      options.ternary_variant));
  TRINE_RETURN_IF_ERROR(ReadVector(f, "output_norm.weight", &m->output_norm_));
  if (c.has_rope_freqs) TRINE_RETURN_IF_ERROR(ReadVector(f, "rope_freqs.weight", &m->rope_freqs_));

  const bool bitnet = c.arch != Arch::kLlama;
  m->layers_.resize(static_cast<size_t>(c.n_layer));
  for (int l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = m->layers_[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    TRINE_RETURN_IF_ERROR(ReadVector(f, p + "attn_norm.weight", &L.attn_norm));
    TRINE_RETURN_IF_ERROR(ReadVector(f, p + "ffn_norm.weight", &L.ffn_norm));
    struct Matrix {
      const char* name;
      kernels::WeightView* view;
      float* scale;  // bitnet's optional per-tensor output multiplier
    };
    const Matrix matrices[] = {{"attn_q", &L.wq, &L.s_q},          {"attn_k", &L.wk, &L.s_k},
                               {"attn_v", &L.wv, &L.s_v},          {"attn_output", &L.wo, &L.s_o},
                               {"ffn_gate", &L.w_gate, &L.s_gate}, {"ffn_up", &L.w_up, &L.s_up},
                               {"ffn_down", &L.w_down, &L.s_down}};
    for (const Matrix& mx : matrices) {
      const std::string name = p + mx.name;
      TRINE_RETURN_IF_ERROR(BindMatrix(f, name + ".weight", mx.view));
      TRINE_RETURN_IF_ERROR(m->BindKernel(name + ".weight", mx.view, options.ternary_variant));
      if (bitnet) {
        TRINE_RETURN_IF_ERROR(ReadScale(f, name + ".scale", mx.scale));
      }
    }
    if (bitnet) {
      TRINE_RETURN_IF_ERROR(ReadVector(f, p + "attn_sub_norm.weight", &L.attn_sub_norm));
      TRINE_RETURN_IF_ERROR(ReadVector(f, p + "ffn_sub_norm.weight", &L.ffn_sub_norm));
    }
    if (options.progress && !options.progress(static_cast<float>(l + 1) / static_cast<float>(c.n_layer))) {
      return Status(StatusCode::kCancelled, path + ": load cancelled");
    }
  }
  for (const std::string& name : options.f32_activation_tensors) {
    TRINE_RETURN_IF_ERROR(m->SetF32Activations(name, true));
  }
  *out = std::move(m);
  return Status::Ok();
}

void Model::EmbedToken(int32_t token, float* dst) const {
  const TypeTraits& tr = GetTypeTraits(token_embd_.type);
  tr.dequantize_row(token_embd_.data + static_cast<size_t>(token) * token_embd_.row_bytes, dst, token_embd_.cols);
}

}  // namespace trine
