// Model loading: validation (ModelConfig, Vocab), then weight binding by tensor name.
#include "model/model.h"

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
  if (kernels::NeedsTernaryRepack(*w) && w->cols % kQK_K == 0) {
    repacked_.emplace_back();
    TRINE_RETURN_IF_ERROR(kernels::RepackToTq2(*w, &repacked_.back(), w));
    b.repacked = true;
  }
  std::string kname;
  w->gemm = kernels::SelectGemm(w->type, isa_, variant, &kname);
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

Status Model::SetOutputType(TypeId type) {
  if (type == TypeId::kCount) return InvalidArgument("no output type given");
  const std::string name = config_.tied_output ? "token_embd.weight" : "output.weight";
  const bool f32_act = output_.f32_activations;
  if (type == output_file_.type) {
    output_ = output_file_;
    output_requant_.clear();
    output_requant_.shrink_to_fit();
  } else {
    const TypeTraits& src = GetTypeTraits(output_file_.type);
    const TypeTraits& dst = GetTypeTraits(type);
    if (dst.quantize_row == nullptr || src.dequantize_row == nullptr) {
      return InvalidArgument(std::string("cannot requantize the output head from ") + src.name + " to " + dst.name);
    }
    if (output_file_.cols % dst.block_elems != 0) {
      return InvalidArgument(std::string("cannot requantize the output head to ") + dst.name + ": rows of " +
                             std::to_string(output_file_.cols) + " values are not a whole number of " +
                             std::to_string(dst.block_elems) + "-value blocks");
    }
    const size_t row_bytes = static_cast<size_t>(output_file_.cols / dst.block_elems * dst.block_bytes);
    std::vector<uint8_t> buf(row_bytes * static_cast<size_t>(output_file_.rows));
    const kernels::WeightView from = output_file_;
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(from.cols));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < from.rows; ++r) {
        src.dequantize_row(from.data + static_cast<size_t>(r) * from.row_bytes, row.data(), from.cols);
        dst.quantize_row(row.data(), buf.data() + static_cast<size_t>(r) * row_bytes, from.cols);
      }
    }
    output_requant_ = std::move(buf);
    output_ = output_file_;
    output_.type = type;
    output_.data = output_requant_.data();
    output_.row_bytes = row_bytes;
    output_.tensor_scale = 1.0f;
  }
  std::string kname;
  output_.f32_activations = false;
  output_.gemm = kernels::SelectGemm(output_.type, isa_, variant_, &kname);
  for (auto& b : bindings_) {
    if (b.tensor == name) {
      b.kernel = type == output_file_.type ? kname
                                           : std::string(TypeName(output_file_.type)) + " -> " + kname +
                                                 " (requantized at load)";
    }
  }
  if (f32_act) TRINE_RETURN_IF_ERROR(SetF32Activations(name, true));
  return Status::Ok();
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
  m->output_file_ = m->output_;
  if (options.output_type != TypeId::kCount) TRINE_RETURN_IF_ERROR(m->SetOutputType(options.output_type));
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
