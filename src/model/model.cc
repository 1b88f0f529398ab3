// Model loading: validation (ModelConfig, Vocab), then weight binding by tensor name.
#include "model/model.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <system_error>

#include "core/page_memory.h"
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

bool NeedsRepack(const kernels::WeightView& w) { return kernels::NeedsTernaryRepack(w) && w.cols % kQK_K == 0; }

// The TQ2_0 view RepackToTq2 makes of `w`, without its data (for streamed layers).
kernels::WeightView Tq2Shape(const kernels::WeightView& w) {
  kernels::WeightView v = w;
  v.type = TypeId::kTQ2_0;
  v.data = nullptr;
  v.row_bytes = static_cast<size_t>(w.cols / kQK_K) * sizeof(BlockTQ2_0);
  v.interleave = 0;
  v.group_bytes = 0;
  return v;
}

// `layout`'s data and layout with `bound`'s kernel choices (gemm, f32 activations). The kernels
// read plain or interleaved rows alike, so a bound kernel survives a change of layout.
kernels::WeightView WithKernel(const kernels::WeightView& bound, kernels::WeightView layout) {
  layout.gemm = bound.gemm;
  layout.f32_activations = bound.f32_activations;
  return layout;
}

}  // namespace

const char* PlacementName(Placement p) {
  switch (p) {
    case Placement::kResident: return "resident";
    case Placement::kStreamed: return "streamed";
    case Placement::kPageCache: break;
  }
  return "page_cache";
}

bool ParsePlacement(const std::string& name, Placement* out) {
  for (Placement p : {Placement::kPageCache, Placement::kResident, Placement::kStreamed}) {
    if (name == PlacementName(p)) {
      *out = p;
      return true;
    }
  }
  return false;
}

bool Model::has_streamed_layers() const {
  for (Placement p : placements_) {
    if (p == Placement::kStreamed) return true;
  }
  return false;
}

namespace {

// Where a kernel view's bytes come from, for KernelBinding::layout.
enum LayoutSource { kMapped, kCopied, kStreamed };

// KernelBinding::layout of a kernel view made from a file tensor of type file_type; `how` says
// how a different type was made ("repacked", "requantized").
std::string LayoutName(TypeId file_type, const kernels::WeightView& w, LayoutSource source, const char* how) {
  const std::string made = std::string(how) + " from " + TypeName(file_type);
  if (source == kStreamed) return "streamed from disk" + (w.type != file_type ? ", " + made : std::string());
  std::string s = w.type != file_type ? made : source == kCopied ? "copied" : "mapped";
  if (w.interleave == 16) s = w.type != file_type ? s + ", 16-row interleave" : "16-row interleave";
  if (w.interleave == kernels::kInterleaveLut) {
    s = w.type != file_type ? s + ", lookup-table layout" : "lookup-table layout";
  }
  return s;
}

}  // namespace

bool Model::ReadsX16(TypeId type, int64_t cols, kernels::TernaryVariant variant) const {
  const int64_t elems = kernels::X16BlockElems(type);
  return kernels::WantsX16(type, isa_, variant) && elems > 0 && cols % elems == 0;
}

Status Model::MakeKernelLayout(const std::string& name, kernels::TernaryVariant variant, kernels::WeightView* w) {
  const GgufTensorInfo* t = file_->FindTensor(name);
  PageBuffer storage;
  bool copied = false;
  auto wants_x16 = [&](const kernels::WeightView& v) { return ReadsX16(v.type, v.cols, variant); };
  // TQ1_0 read in place (AVX-512 VBMI) needs no TQ2_0 step; anywhere else it is repacked.
  if (NeedsRepack(*w) && !wants_x16(*w)) {
    TRINE_RETURN_IF_ERROR(kernels::RepackToTq2(*w, &storage, w));
    copied = true;
  }
  if (wants_x16(*w) && !defer_head_layout_) {
    // The AVX-512 kernels' 16-row interleave (TQ1_0, TQ2_0, Q4_0, Q4_K); it replaces a TQ1_0 / I2_S repack.
    // At load, consecutive layouts share one arena, so that small tensors and tails sit in whole
    // 2 MiB units too (PageArena).
    PageBuffer interleaved = load_arena_ != nullptr ? load_arena_->Allocate(kernels::X16Bytes(*w)) : PageBuffer();
    TRINE_RETURN_IF_ERROR(kernels::InterleaveX16(*w, &interleaved, w));
    storage = std::move(interleaved);
    copied = true;
  }
  if (kernels::WantsLutLayout(w->type, isa_, variant) && kernels::LutBytes(*w) > 0) {
    // The lookup-table kernels' layout (AVX2, NEON; TQ1_0 / I2_S repacked to TQ2_0 above).
    PageBuffer lut = load_arena_ != nullptr ? load_arena_->Allocate(kernels::LutBytes(*w)) : PageBuffer();
    TRINE_RETURN_IF_ERROR(kernels::InterleaveLut(*w, &lut, w));
    storage = std::move(lut);
    copied = true;
  }
  if (!copied) return Status::Ok();
  repacked_[name] = std::move(storage);  // moving a buffer keeps its pages: w->data stays valid
  // The kernels read the copy only: drop the file pages the copy faulted in from the resident set.
  if (t != nullptr && file_->is_mmapped()) ReleaseFilePages(t->data, t->n_bytes);
  return Status::Ok();
}

Status Model::BindKernel(const std::string& name, kernels::WeightView* w, kernels::TernaryVariant variant,
                         bool streamed) {
  KernelBinding b;
  b.tensor = name;
  const TypeId file_type = w->type;
  if (streamed) {
    // The streamer repacks after each read and delivers plain rows (no x16 interleave: the
    // kernels read either layout, and a streamed layer is bound by the disk, not the kernel).
    if (NeedsRepack(*w)) *w = Tq2Shape(*w);
  } else {
    TRINE_RETURN_IF_ERROR(MakeKernelLayout(name, variant, w));
  }
  w->gemm = kernels::SelectGemm(w->type, isa_, variant, &b.kernel);
  b.layout = LayoutName(file_type, *w, streamed ? kStreamed : kMapped, "repacked");
  bindings_.push_back(std::move(b));
  views_.emplace_back(name, w);
  return Status::Ok();
}

std::vector<std::string> Model::MatrixNames() const {
  std::vector<std::string> names;
  for (const auto& v : views_) names.push_back(v.first);
  return names;
}

Status Model::AttachLayer(int layer) {
  LayerWeights& L = layers_[static_cast<size_t>(layer)];
  const auto views = L.Matrices();
  const std::vector<StreamMatrix>& sms = stream_matrices_[static_cast<size_t>(layer)];
  for (size_t i = 0; i < sms.size(); ++i) {
    const StreamMatrix& sm = sms[i];
    const GgufTensorInfo* t = file_->FindTensor(sm.name);
    if (t == nullptr) return Status(StatusCode::kInternal, "attach: no tensor " + sm.name);
    kernels::WeightView v = sm.file_view;
    v.data = t->data;
    TRINE_RETURN_IF_ERROR(MakeKernelLayout(sm.name, variant_, &v));
    *views[i] = WithKernel(*views[i], v);
  }
  return Status::Ok();
}

void Model::DetachLayer(int layer) {
  LayerWeights& L = layers_[static_cast<size_t>(layer)];
  const auto views = L.Matrices();
  const std::vector<StreamMatrix>& sms = stream_matrices_[static_cast<size_t>(layer)];
  for (size_t i = 0; i < sms.size(); ++i) {
    // Back to the layout the streamer delivers: plain (TQ2_0 when repacked) rows.
    kernels::WeightView v = sms[i].file_view;
    if (sms[i].repack) v = Tq2Shape(v);
    v.data = nullptr;
    *views[i] = WithKernel(*views[i], v);
    repacked_.erase(sms[i].name);
    const GgufTensorInfo* t = file_->FindTensor(sms[i].name);
    if (t != nullptr && file_->is_mmapped()) ReleaseFilePages(t->data, t->n_bytes);
  }
}

Status Model::SetLayerPlacement(int layer, Placement p, bool try_mlock) {
  PromotionPause pause(this);
  if (layer < 0 || layer >= static_cast<int>(layers_.size())) {
    return InvalidArgument("no layer " + std::to_string(layer) + " (the model has " + std::to_string(layers_.size()) +
                           ")");
  }
  if (p == Placement::kStreamed && !file_->is_mmapped()) {
    return Unsupported(file_->path() + ": streaming weights needs a memory-mapped model file (drop --no-mmap / "
                       "use_mmap = false)");
  }
  const Placement old = placements_[static_cast<size_t>(layer)];
  if (old == Placement::kStreamed && p != Placement::kStreamed) TRINE_RETURN_IF_ERROR(AttachLayer(layer));
  if (p == Placement::kStreamed && old != Placement::kStreamed) DetachLayer(layer);
  placements_[static_cast<size_t>(layer)] = p;
  if (old != p) ++placement_epoch_;
  if ((old == Placement::kStreamed) != (p == Placement::kStreamed)) UpdateLayerLayouts(layer);
  if (p == Placement::kStreamed) return Status::Ok();
  const LayerWeights& L = layers_[static_cast<size_t>(layer)];
  const auto views = L.Matrices();
  const std::vector<StreamMatrix>& sms = stream_matrices_[static_cast<size_t>(layer)];
  for (size_t i = 0; i < sms.size(); ++i) {
    const size_t bytes = static_cast<size_t>(views[i]->rows) * views[i]->row_bytes;
    const bool mapped = repacked_.count(sms[i].name) == 0 && file_->is_mmapped();  // copies are anonymous memory
    if (p == Placement::kResident) {
      if (mapped) PrefaultPages(views[i]->data, bytes);
      if (try_mlock) {
        if (LockPages(views[i]->data, bytes)) {
          ++mlock_ok_;
        } else {
          ++mlock_failed_;
        }
      }
    } else if (mapped) {
      AdvisePages(views[i]->data, bytes, MADV_NORMAL);
    }
  }
  return Status::Ok();
}

void Model::UpdateLayerLayouts(int layer) {
  const bool streamed = placements_[static_cast<size_t>(layer)] == Placement::kStreamed;
  const auto views = layers_[static_cast<size_t>(layer)].Matrices();
  const std::vector<StreamMatrix>& sms = stream_matrices_[static_cast<size_t>(layer)];
  for (size_t i = 0; i < sms.size() && i < views.size(); ++i) {
    const std::string layout = LayoutName(sms[i].file_view.type, *views[i], streamed ? kStreamed : kMapped, "repacked");
    for (auto& b : bindings_) {
      if (b.tensor == sms[i].name) b.layout = layout;
    }
  }
}

Status Model::SetF32Activations(const std::string& tensor, bool on) {
  for (auto& [name, w] : views_) {
    if (name != tensor) continue;
    if (w->f32_activations == on) return Status::Ok();
    w->f32_activations = on;
    w->gemm = on ? kernels::SelectGemmF32Act(w->type, isa_, nullptr) : kernels::SelectGemm(w->type, isa_, variant_, nullptr);
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

void Model::DropSpareOutputHead() {
  PromotionPause pause(this);
  output_spare_type_ = TypeId::kCount;
  output_spare_data_.Reset();
  // The file's head is a spare too when a requantized one is in use: back to the mapped bytes
  // (the embedding lookup then reads only the rows it needs from the file).
  if (!head_copy_.empty() && output_.data != output_file_.data) {
    if (token_embd_.data == head_copy_.data()) token_embd_.data = output_mapped_.data;
    output_file_ = output_mapped_;
    head_copy_.Reset();
  }
}

Model::~Model() { StopHugePagePromotion(); }

void Model::WaitForHugePages() {
  if (promoter_.joinable()) promoter_.join();
}

void Model::StopHugePagePromotion() {
  promoter_stop_.store(true, std::memory_order_relaxed);
  if (promoter_.joinable()) promoter_.join();
}

void Model::StartHugePagePromotion() {
  StopHugePagePromotion();
  // Also runs from PromotionPause's destructor, so nothing may escape: without the list or the
  // thread (std::bad_alloc, std::system_error) the buffers stay on small pages, still correct.
  try {
    std::vector<uint8_t*> units;
    auto add = [&units](PageBuffer& b) {
      for (size_t off = 0; off < b.huge_bytes(); off += PageBuffer::kHugePage) units.push_back(b.data() + off);
    };
    units = arena_units_;
    for (auto& entry : repacked_) add(entry.second);  // those outside the arena
    add(head_copy_);
    add(output_requant_);  // not the spare: it is not read
    if (units.empty()) return;
    promoter_stop_.store(false, std::memory_order_relaxed);
    promoter_ = std::thread([this, units = std::move(units)] {
      for (uint8_t* u : units) {
        if (promoter_stop_.load(std::memory_order_relaxed)) return;
        (void)PromoteToHugePage(u);  // refused: the unit stays on small pages
      }
    });
  } catch (const std::exception&) {
  }
}

Status Model::CopyFileHead() {
  const std::string name = config_.tied_output ? "token_embd.weight" : "output.weight";
  const GgufTensorInfo* t = file_->FindTensor(name);
  const size_t bytes = static_cast<size_t>(output_file_.rows) * output_file_.row_bytes;
  if (t == nullptr || output_file_.data != t->data || output_.data != output_file_.data ||
      output_file_.interleave != 0) {
    return Status::Ok();
  }
  output_mapped_ = output_file_;
  if (ReadsX16(output_file_.type, output_file_.cols, variant_)) {
    // The head's kernel reads the x16 layout (Q6_K on AVX-512): the copy is that layout; the
    // embedding lookup gathers its rows from it too (EmbedToken), so the file's pages go for good.
    kernels::WeightView x16;
    // Step by step, each step's file pages released once copied: the load's resident peak grows
    // by one step over the copy, not by the whole head (bitnet-2b: 263 MiB of Q6_K).
    const uint8_t* file_bytes = output_file_.data;
    kernels::X16StepDone release;
    if (file_->is_mmapped()) release = [file_bytes](size_t off, size_t n) { ReleaseFilePages(file_bytes + off, n); };
    TRINE_RETURN_IF_ERROR(kernels::InterleaveX16(output_file_, &head_copy_, &x16, release));
    x16.gemm = output_file_.gemm;
    output_file_ = x16;
    output_ = x16;
    for (auto& b : bindings_) {
      if (b.tensor == name) b.layout = LayoutName(x16.type, x16, kCopied, "");
    }
    return Status::Ok();
  }
  if (!HugePagesEnabled() || !file_->is_mmapped() || bytes < PageBuffer::kHugePage) return Status::Ok();
  PageBuffer copy(bytes);
  // In 16 MiB steps, each step's file pages released as soon as they are copied: the resident
  // set grows by at most one step over the head's size.
  constexpr size_t kStep = size_t{16} << 20;
  for (size_t off = 0; off < bytes; off += kStep) {
    const size_t n = std::min(kStep, bytes - off);
    std::memcpy(copy.data() + off, output_file_.data + off, n);
    ReleaseFilePages(output_file_.data + off, n);
  }
  if (token_embd_.data == output_file_.data) token_embd_.data = copy.data();
  output_file_.data = copy.data();
  output_.data = copy.data();
  head_copy_ = std::move(copy);
  for (auto& b : bindings_) {
    if (b.tensor == name) b.layout = LayoutName(output_.type, output_, kCopied, "");
  }
  return Status::Ok();
}

Status Model::SetOutputType(TypeId type) {
  PromotionPause pause(this);
  if (type == TypeId::kCount) return InvalidArgument("no output type given");
  if (type == output_.type) return Status::Ok();
  const std::string name = config_.tied_output ? "token_embd.weight" : "output.weight";
  const bool f32_act = output_.f32_activations;
  const bool requantize = type != output_file_.type && type != output_spare_type_;
  const TypeTraits& src = GetTypeTraits(output_file_.type);
  const TypeTraits& dst = GetTypeTraits(type);
  const DequantizeRowFn dequantize = kernels::ActiveDequantizeRow(output_file_.type);
  const QuantizeRowFn quantize = kernels::ActiveQuantizeRow(type);
  if (requantize) {
    if (quantize == nullptr || dequantize == nullptr) {
      return InvalidArgument(std::string("cannot requantize the output head from ") + src.name + " to " + dst.name);
    }
    if (output_file_.cols % dst.block_elems != 0) {
      return InvalidArgument(std::string("cannot requantize the output head to ") + dst.name + ": rows of " +
                             std::to_string(output_file_.cols) + " values are not a whole number of " +
                             std::to_string(dst.block_elems) + "-value blocks");
    }
  }
  // The wanted head is the file's, the spare, or requantized below; the head in use becomes the
  // spare (the file's own needs no copy), replacing the old one before a new buffer is allocated
  // (at most two requantized heads exist at once). Moving a buffer keeps its pages, so the views
  // stay valid.
  kernels::WeightView next = output_file_;
  PageBuffer next_data;
  if (type == output_spare_type_) {
    next = output_spare_;
    next_data = std::move(output_spare_data_);
  }
  output_spare_type_ = output_.type == output_file_.type ? TypeId::kCount : output_.type;
  output_spare_ = output_;
  output_spare_data_ = std::move(output_requant_);
  output_requant_.Reset();
  if (requantize) {
    const size_t row_bytes = static_cast<size_t>(output_file_.cols / dst.block_elems * dst.block_bytes);
    const kernels::WeightView from = output_file_;
    kernels::WeightView shape = output_file_;
    shape.type = type;
    shape.data = nullptr;
    shape.row_bytes = row_bytes;
    shape.tensor_scale = 1.0f;
    shape.interleave = 0;
    shape.group_bytes = 0;
    // One source row requantized into `out` (the calling thread's scratch).
    auto requant_row = [&](int64_t r, uint8_t* out) {
      thread_local std::vector<float> row;
      thread_local std::vector<uint8_t> scratch;  // rows of an interleaved head are gathered
      row.resize(static_cast<size_t>(from.cols));
      scratch.resize(from.row_bytes);
      dequantize(kernels::RowData(from, r, scratch.data()), row.data(), from.cols);
      quantize(row.data(), out, from.cols);
    };
    if (ReadsX16(type, shape.cols, variant_)) {
      // Straight into the kernels' 16-row interleave, a group at a time (no plain copy of the head).
      TRINE_RETURN_IF_ERROR(kernels::InterleaveX16Rows(
          shape,
          [&](int64_t r0, int n, uint8_t* rows) {
            for (int i = 0; i < n; ++i) requant_row(r0 + i, rows + static_cast<size_t>(i) * row_bytes);
          },
          &next_data, &next));
    } else {
      next_data = PageBuffer(row_bytes * static_cast<size_t>(from.rows));
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < from.rows; ++r) requant_row(r, next_data.data() + static_cast<size_t>(r) * row_bytes);
      next = shape;
      next.data = next_data.data();
    }
  }
  output_ = next;
  output_requant_ = std::move(next_data);
  std::string kname;
  output_.f32_activations = false;
  output_.gemm = kernels::SelectGemm(output_.type, isa_, variant_, &kname);
  for (auto& b : bindings_) {
    if (b.tensor == name) {
      b.kernel = kname;
      b.layout = LayoutName(output_file_.type, output_,
                            !head_copy_.empty() && output_.data == head_copy_.data() ? kCopied : kMapped, "requantized");
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
  Vocab vocab;
  TRINE_RETURN_IF_ERROR(LoadVocab(f, &vocab));
  m->vocab_ = std::make_shared<const Vocab>(std::move(vocab));
  // The vocabulary holds what these said; the file stays open for its tensors only.
  for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.scores",
                          "tokenizer.ggml.token_type"}) {
    m->file_->DropMetadata(key);
  }
  const ModelConfig& c = m->config_;
  TRINE_RETURN_IF_ERROR(kernels::ActiveIsaStatus());
  TRINE_RETURN_IF_ERROR(kernels::TernaryVariantStatus());
  m->isa_ = kernels::ActiveIsa();
  m->variant_ = options.ternary_variant;
  if (m->vocab_->size() > c.n_vocab) {
    return InvalidFile(path + ": tokenizer has " + std::to_string(m->vocab_->size()) +
                       " tokens but token_embd.weight has only " + std::to_string(c.n_vocab) + " rows");
  }
  // Room for every kernel layout (none is over 1.3x its file bytes); only address space until used.
  PageArena arena(f.file_size() / 2 * 3 + (size_t{64} << 20));
  m->load_arena_ = &arena;
  TRINE_RETURN_IF_ERROR(BindMatrix(f, "token_embd.weight", &m->token_embd_));
  if (c.tied_output) {
    m->output_ = m->token_embd_;
  } else {
    TRINE_RETURN_IF_ERROR(BindMatrix(f, "output.weight", &m->output_));
  }
  // The head's x16 copy (Q6_K, 269 MB for bitnet-2b) is made at the end (CopyFileHead),
  // after the placement hook has measured the process's own memory without it.
  m->defer_head_layout_ = true;
  const Status head_bound = m->BindKernel(c.tied_output ? "token_embd.weight" : "output.weight", &m->output_,
                                          options.ternary_variant, false);
  m->defer_head_layout_ = false;
  TRINE_RETURN_IF_ERROR(head_bound);
  m->output_file_ = m->output_;
  if (options.output_type != TypeId::kCount) TRINE_RETURN_IF_ERROR(m->SetOutputType(options.output_type));
  TRINE_RETURN_IF_ERROR(ReadVector(f, "output_norm.weight", &m->output_norm_));
  if (c.has_rope_freqs) TRINE_RETURN_IF_ERROR(ReadVector(f, "rope_freqs.weight", &m->rope_freqs_));

  std::vector<Placement> placements = options.layer_placements;
  if (options.placement_hook) TRINE_RETURN_IF_ERROR(options.placement_hook(f, c, &placements));
  if (placements.empty()) placements.assign(static_cast<size_t>(c.n_layer), Placement::kPageCache);
  if (placements.size() != static_cast<size_t>(c.n_layer)) {
    return InvalidArgument(path + ": " + std::to_string(placements.size()) + " layer placements for " +
                           std::to_string(c.n_layer) + " layers");
  }
  for (Placement p : placements) {
    if (p == Placement::kStreamed && !f.is_mmapped()) {
      return Unsupported(path + ": streaming weights needs a memory-mapped model file (drop --no-mmap / "
                         "use_mmap = false)");
    }
  }
  m->placements_.assign(placements.size(), Placement::kPageCache);
  m->stream_matrices_.resize(placements.size());

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
    const bool streamed = placements[static_cast<size_t>(l)] == Placement::kStreamed;
    for (const Matrix& mx : matrices) {
      const std::string name = p + mx.name;
      TRINE_RETURN_IF_ERROR(BindMatrix(f, name + ".weight", mx.view));
      const GgufTensorInfo* t = f.FindTensor(name + ".weight");
      StreamMatrix sm;
      sm.name = name + ".weight";
      sm.split = t->split;
      sm.file_offset = t->file_offset;
      sm.n_bytes = t->n_bytes;
      sm.file_view = *mx.view;
      sm.file_view.data = nullptr;
      sm.repack = NeedsRepack(*mx.view);
      m->stream_matrices_[static_cast<size_t>(l)].push_back(std::move(sm));
      TRINE_RETURN_IF_ERROR(m->BindKernel(name + ".weight", mx.view, options.ternary_variant, streamed));
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
  for (int l = 0; l < c.n_layer; ++l) {
    TRINE_RETURN_IF_ERROR(m->SetLayerPlacement(l, placements[static_cast<size_t>(l)], options.mlock_resident));
  }
  m->load_arena_ = nullptr;
  m->arena_units_ = arena.Units();
  TRINE_RETURN_IF_ERROR(m->CopyFileHead());
  m->promote_ = true;
  m->StartHugePagePromotion();
  m->placement_epoch_ = 0;
  *out = std::move(m);
  return Status::Ok();
}

void Model::EmbedToken(int32_t token, float* dst) const {
  const TypeTraits& tr = GetTypeTraits(token_embd_.type);
  if (config_.tied_output && output_file_.interleave == 16 && output_file_.type == token_embd_.type &&
      output_file_.rows == token_embd_.rows) {
    // The tied embedding's x16 head copy holds the same rows (CopyFileHead): the row is gathered
    // from it, so the file's pages of the embedding, released after the copy, stay out of memory.
    // Read from the file instead, each new token faulted in its page plus the kernel's fault-around
    // (~100 KB a token on bitnet-2b: RSS grew by 15 MB in 150 tokens, towards the whole 263 MB).
    thread_local std::vector<uint8_t> scratch;
    if (scratch.size() < output_file_.row_bytes) scratch.resize(output_file_.row_bytes);
    tr.dequantize_row(kernels::RowData(output_file_, token, scratch.data()), dst, token_embd_.cols);
    return;
  }
  tr.dequantize_row(token_embd_.data + static_cast<size_t>(token) * token_embd_.row_bytes, dst, token_embd_.cols);
}

}  // namespace trine
