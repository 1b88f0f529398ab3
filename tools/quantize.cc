// `trine quantize IN.gguf OUT.gguf TYPE [NTHREADS]`: converts a model's weights to another type
// with llama-quantize's per-tensor type choice (no importance matrix), so that for the same input
// and options the output file is byte-identical to llama-quantize's. The rules followed are those
// of llama.cpp's llama-quant.cpp (tensor order, which tensors are quantized, the default mixes,
// shape fallbacks, metadata edits); formats.md §2.6 summarises them.
#include <cxxopts.hpp>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "tensor/dtype.h"

namespace trine::cli {
namespace {

// A target file type: llama_ftype value written to general.file_type and the default tensor type.
struct FileType {
  const char* name;  // as accepted on the command line (case-insensitive)
  uint32_t ftype;    // llama_ftype (bitnet.cpp's fork for I2_S)
  TypeId type;       // default type of quantizable tensors
  const char* help;
};

const FileType kFileTypes[] = {
    {"F32", 0, TypeId::kF32, "32-bit float"},
    {"F16", 1, TypeId::kF16, "16-bit float"},
    {"BF16", 32, TypeId::kBF16, "bfloat16"},
    {"Q8_0", 7, TypeId::kQ8_0, "8.5 bpw, every 2-D weight Q8_0"},
    {"Q4_0", 2, TypeId::kQ4_0, "4.5 bpw, tied embedding / output in Q6_K"},
    {"Q4_K_M", 15, TypeId::kQ4_K, "Q4_K, with Q6_K for half of attn_v/ffn_down and the output"},
    {"Q4_K", 15, TypeId::kQ4_K, "alias for Q4_K_M"},
    {"Q6_K", 18, TypeId::kQ6_K, "6.56 bpw"},
    {"TQ1_0", 36, TypeId::kTQ1_0, "1.69 bpw ternary; untied token_embd Q4_K, output Q6_K"},
    {"TQ2_0", 37, TypeId::kTQ2_0, "2.06 bpw ternary; untied token_embd Q4_K, output Q6_K"},
    {"I2_S", 40, TypeId::kI2_S, "bitnet.cpp 2 bpw ternary, one scale per tensor (bitnet-b1.58 files only)"},
};

constexpr uint32_t kFtypeQ4_K_M = 15;
constexpr uint32_t kFtypeTQ1_0 = 36;
constexpr uint32_t kFtypeTQ2_0 = 37;
constexpr uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

bool EqualsIgnoreCase(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

const FileType* FindFileType(const std::string& name) {
  for (const auto& ft : kFileTypes) {
    if (EqualsIgnoreCase(name, ft.name)) return &ft;
  }
  return nullptr;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
bool Contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

bool IsBitnetCppArch(const std::string& arch) { return arch == "bitnet-b1.58" || arch == "bitnet-25"; }

// Tensor categories of llama-quant.cpp (broad roles, matched by name).
enum class Category { kTokenEmbd, kAttnQ, kAttnV, kAttnK, kAttnQkv, kAttnKvB, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOutput, kOther };

Category CategoryOf(const std::string& name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (Contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (Contains(name, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (Contains(name, "attn_v.weight")) return Category::kAttnV;
  if (Contains(name, "attn_k.weight")) return Category::kAttnK;
  if (Contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (Contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (Contains(name, "ffn_up")) return Category::kFfnUp;
  if (Contains(name, "ffn_gate")) return Category::kFfnGate;
  if (Contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

bool IsAttnVLike(Category c) { return c == Category::kAttnV || c == Category::kAttnQkv || c == Category::kAttnKvB; }

// ggml_n_dims: dimensions up to the last one above 1 (at least 1).
int EffectiveDims(const GgufTensorInfo& t) {
  for (int i = kGgufMaxDims - 1; i >= 1; --i) {
    if (t.ne[i] > 1) return i + 1;
  }
  return 1;
}

// Layer index of "blk.N...." names, -1 for the rest (sscanf semantics as llama.cpp's sort key).
int LayerOf(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1) layer = -1;
  return layer;
}

struct Options {
  const FileType* ftype = nullptr;
  bool has_token_embd_type = false;
  TypeId token_embd_type = TypeId::kF32;
  bool has_output_type = false;
  TypeId output_type = TypeId::kF32;
  bool pure = false;
  bool allow_requantize = false;
  bool leave_output = false;
};

// State of the mix rules (llama-quant.cpp's quantize_state_impl, the parts trine's types use).
struct MixState {
  bool tied_embeddings = true;  // until an output.weight is seen
  int n_attention_wv = 0;
  int i_attention_wv = 0;
  int n_layer = 0;
  int i_ffn_down = 0;
};

// Whether llama-quantize would convert this tensor at all: 2-D or more, a "*weight" that is not a
// norm (or one of the small special tensors llama.cpp keeps).
bool AllowsQuantization(const GgufTensorInfo& t, const Options& o) {
  if (EffectiveDims(t) < 2) return false;
  const std::string& n = t.name;
  if (!EndsWith(n, "weight")) return false;
  if (Contains(n, "_norm.weight")) return false;
  if (o.leave_output && n == "output.weight") return false;
  for (const char* skip : {"ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
                           "ssm_conv1d", "shortconv.conv.weight", "attn_rel_b.weight", "position_embd",
                           "token_types.weight"}) {
    if (Contains(n, skip)) return false;
  }
  return true;
}

bool UseMoreBits(int i_layer, int n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

// llama_tensor_get_type_impl for the file types trine writes.
TypeId MixType(MixState& qs, const Options& o, const GgufTensorInfo& t, Category cat, TypeId new_type) {
  const uint32_t ftype = o.ftype->ftype;
  if (cat == Category::kOutput || (qs.tied_embeddings && cat == Category::kTokenEmbd)) {
    if (o.has_output_type) return o.output_type;
    // trine's choice for I2_S files: a float embedding does not survive sign quantization, and
    // bitnet.cpp's own setup passes --token-embedding-type f16 (the official 2B4T file has F16).
    if (o.ftype->type == TypeId::kI2_S) return TypeId::kF16;
    if (t.ne[0] % GetTypeTraits(new_type).block_elems != 0) return TypeId::kQ8_0;
    return new_type != TypeId::kQ8_0 ? TypeId::kQ6_K : new_type;
  }
  if (cat == Category::kTokenEmbd) {
    if (o.has_token_embd_type) return o.token_embd_type;
    if (ftype == kFtypeTQ1_0 || ftype == kFtypeTQ2_0) return TypeId::kQ4_K;
    if (o.ftype->type == TypeId::kI2_S) return TypeId::kF16;
    return new_type;
  }
  if (IsAttnVLike(cat)) {
    if (ftype == kFtypeQ4_K_M && UseMoreBits(qs.i_attention_wv, qs.n_attention_wv)) new_type = TypeId::kQ6_K;
    ++qs.i_attention_wv;
    return new_type;
  }
  if (cat == Category::kFfnDown) {
    if (ftype == kFtypeQ4_K_M && UseMoreBits(qs.i_ffn_down, qs.n_layer)) new_type = TypeId::kQ6_K;
    ++qs.i_ffn_down;
    return new_type;
  }
  return new_type;
}

// tensor_type_fallback: a type whose block does not divide ne[0] falls back to a smaller block.
Status Fallback(const GgufTensorInfo& t, TypeId target, TypeId* out, std::string* note) {
  *out = target;
  const int64_t ncols = t.ne[0];
  if (ncols % GetTypeTraits(target).block_elems == 0) return Status::Ok();
  TypeId ret;
  switch (target) {
    case TypeId::kTQ1_0:
    case TypeId::kTQ2_0:
      ret = TypeId::kQ4_0;
      break;
    case TypeId::kQ6_K:
      ret = TypeId::kQ8_0;
      break;
    case TypeId::kI2_S:
      ret = TypeId::kF16;  // trine's choice; bitnet.cpp defines no fallback for I2_S
      break;
    case TypeId::kQ4_K:
      return Unsupported(t.name + ": ne[0] = " + std::to_string(ncols) +
                         " is not a multiple of 256; llama-quantize would fall back to q5_0, which trine does not write");
    default:
      return Unsupported(t.name + ": ne[0] = " + std::to_string(ncols) + " is not a multiple of " +
                         std::to_string(GetTypeTraits(target).block_elems) + " and no fallback is defined for " +
                         TypeName(target));
  }
  if (ncols % GetTypeTraits(ret).block_elems != 0) ret = TypeId::kF16;
  *note = std::string("ne[0] ") + std::to_string(ncols) + " not divisible by " +
          std::to_string(GetTypeTraits(target).block_elems) + ", falling back from " + TypeName(target) + " to " +
          TypeName(ret);
  *out = ret;
  return Status::Ok();
}

// llama_tensor_get_type: the type this tensor is written in.
Status ChooseType(MixState& qs, const Options& o, const GgufTensorInfo& t, TypeId* out, std::string* note) {
  *out = t.type;
  if (!AllowsQuantization(t, o)) return Status::Ok();
  const Category cat = CategoryOf(t.name);
  if (o.has_token_embd_type && cat == Category::kTokenEmbd) {
    *out = o.token_embd_type;
    return Status::Ok();
  }
  if (o.has_output_type && cat == Category::kOutput) {
    *out = o.output_type;
    return Status::Ok();
  }
  TypeId new_type = o.ftype->type;
  if (!GetTypeTraits(new_type).quantized) {
    *out = new_type;
    return Status::Ok();
  }
  if (!o.pure) new_type = MixType(qs, o, t, cat, new_type);
  return Fallback(t, new_type, out, note);
}

std::string ShapeOf(const GgufTensorInfo& t) {
  std::string s;
  for (int i = 0; i < EffectiveDims(t); ++i) s += (i ? ", " : "") + std::to_string(t.ne[i]);
  return s;
}

// Converts one tensor to `type`. Rows are independent, so they are split across threads; I2_S has
// one scale for the whole tensor and is done in one piece.
Status Convert(const GgufTensorInfo& t, TypeId type, std::vector<float>* f32, std::vector<uint8_t>* out) {
  const float* x = nullptr;
  if (t.type == TypeId::kF32) {
    x = reinterpret_cast<const float*>(t.data);
  } else {
    f32->resize(static_cast<size_t>(t.n_elems));
    TRINE_RETURN_IF_ERROR(DequantizeTensor(t.type, t.data, t.n_bytes, t.n_elems, f32->data()));
    x = f32->data();
  }
  if (GetTypeTraits(type).quantized) {
    bool finite = true;
    for (int64_t i = 0; i < t.n_elems; ++i) finite &= std::isfinite(x[i]);
    if (!finite) return InvalidFile(t.name + ": contains NaN or infinite values");
  }
  uint64_t bytes = 0;
  if (!TensorBytes(type, t.n_elems, &bytes) || t.ne[0] % GetTypeTraits(type).block_elems != 0) {
    return Unsupported(t.name + ": shape [" + ShapeOf(t) + "] cannot be stored as " + TypeName(type) +
                       " (ne[0] must be a multiple of " + std::to_string(GetTypeTraits(type).block_elems) + ")");
  }
  out->assign(bytes, 0);
  const int64_t row = t.ne[0];
  if (type == TypeId::kI2_S) return QuantizeTensor(type, x, t.n_elems, row, out->data());
  const int64_t rows = t.n_elems / row;
  const TypeTraits& tr = GetTypeTraits(type);
  const int64_t row_bytes = row / tr.block_elems * tr.block_bytes;
  const int64_t chunk = std::max<int64_t>(1, 16384 / row);  // rows per work item
  const int64_t n_chunks = (rows + chunk - 1) / chunk;
  bool ok = true;
#pragma omp parallel for schedule(dynamic) reduction(&& : ok)
  for (int64_t c = 0; c < n_chunks; ++c) {
    const int64_t r0 = c * chunk;
    const int64_t nr = std::min(chunk, rows - r0);
    ok = ok && QuantizeTensor(type, x + r0 * row, nr * row, row, out->data() + r0 * row_bytes).ok();
  }
  if (!ok) return Status(StatusCode::kInternal, t.name + ": quantization failed");
  return Status::Ok();
}

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

void PrintHelp() {
  std::printf(
      "usage: trine quantize [options] IN.gguf OUT.gguf TYPE [NTHREADS]\n\n"
      "Converts a model's weights, choosing each tensor's type as llama-quantize does (no imatrix);\n"
      "for the same input and options the output is byte-identical to llama-quantize's.\n\n"
      "options:\n"
      "  --token-embedding-type T  type of token_embd.weight (f32, f16, bf16, q8_0, q4_0, q4_K, q6_K, tq1_0, tq2_0)\n"
      "  --output-tensor-type T    type of output.weight (and of a tied token_embd.weight)\n"
      "  --pure                    no mix: every quantizable tensor gets TYPE (shape fallbacks still apply)\n"
      "  --allow-requantize        allow converting tensors that are already quantized\n"
      "  --leave-output-tensor     keep output.weight as it is\n"
      "  -h, --help                this help\n\n"
      "TYPE:\n");
  for (const auto& ft : kFileTypes) std::printf("  %-8s %s\n", ft.name, ft.help);
}

bool ParseTensorType(const std::string& s, TypeId* out) {
  if (!ParseTypeName(s, out)) return false;
  return *out != TypeId::kQ8_K;  // activation-only format
}

}  // namespace

int RunQuantize(int argc, char** argv) {
  cxxopts::Options opts("trine quantize", "Convert a GGUF model's weights to another type.");
  opts.add_options()("token-embedding-type", "", cxxopts::value<std::string>())(
      "output-tensor-type", "", cxxopts::value<std::string>())("pure", "")("allow-requantize", "")(
      "leave-output-tensor", "")("h,help", "")("positional", "", cxxopts::value<std::vector<std::string>>());
  cxxopts::ParseResult args;
  if (const int rc = ParseCommand("quantize", opts, argc, argv, &args, "positional", PrintHelp); rc >= 0) return rc;
  std::vector<std::string> pos;
  if (args.count("positional")) pos = args["positional"].as<std::vector<std::string>>();
  if (pos.size() < 3) return UsageError("quantize", "expected IN.gguf OUT.gguf TYPE");
  if (pos.size() > 4) return UsageError("quantize", "unexpected argument '" + pos[4] + "'");
  Options o;
  o.ftype = FindFileType(pos[2]);
  if (!o.ftype) return Fail("unknown TYPE '" + pos[2] + "' (see 'trine quantize --help')");
  int n_threads = 0;
  if (pos.size() == 4) {
    char* end = nullptr;
    const long v = std::strtol(pos[3].c_str(), &end, 10);
    if (!end || *end || v <= 0 || v > 1024) return Fail("NTHREADS must be a positive integer, got '" + pos[3] + "'");
    n_threads = static_cast<int>(v);
  }
  if (args.count("token-embedding-type")) {
    const std::string v = args["token-embedding-type"].as<std::string>();
    if (!ParseTensorType(v, &o.token_embd_type)) return Fail("unknown tensor type '" + v + "'");
    o.has_token_embd_type = true;
  }
  if (args.count("output-tensor-type")) {
    const std::string v = args["output-tensor-type"].as<std::string>();
    if (!ParseTensorType(v, &o.output_type)) return Fail("unknown tensor type '" + v + "'");
    o.has_output_type = true;
  }
  o.pure = args.count("pure") > 0;
  o.allow_requantize = args.count("allow-requantize") > 0;
  o.leave_output = args.count("leave-output-tensor") > 0;
  const std::string in_path = pos[0], out_path = pos[1];

  std::unique_ptr<GgufFile> in;
  Status st = GgufFile::Open(in_path, &in);
  if (!st.ok()) return Fail(st);
  {
    // Writing over the (mapped) input would corrupt it while it is being read.
    char* a = realpath(in_path.c_str(), nullptr);
    char* b = realpath(out_path.c_str(), nullptr);
    const bool same = a && b && std::string(a) == b;
    std::free(a);
    std::free(b);
    if (same) return Fail("output file is the input file: " + out_path);
    // Fail before minutes of conversion, not after, when the output cannot be created.
    const size_t slash = out_path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : out_path.substr(0, slash);
    if (::access(dir.c_str(), W_OK) != 0) {
      return Fail(out_path + ": cannot create: " + std::strerror(errno));
    }
  }
  const std::string& arch = in->architecture();
  const bool wants_i2s = o.ftype->type == TypeId::kI2_S || (o.has_token_embd_type && o.token_embd_type == TypeId::kI2_S) ||
                         (o.has_output_type && o.output_type == TypeId::kI2_S);
  if (wants_i2s && !IsBitnetCppArch(arch)) {
    return Fail("i2_s is bitnet.cpp's format and its type id (36) is only readable in bitnet-b1.58 / bitnet-25 files; " +
                in_path + " has architecture '" + arch + "'");
  }

  // Tensor order of llama-quantize: non-layer tensors by name, then layer by layer, by name.
  std::vector<const GgufTensorInfo*> order;
  for (const auto& t : in->tensors()) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const GgufTensorInfo* a, const GgufTensorInfo* b) {
    const int la = LayerOf(a->name), lb = LayerOf(b->name);
    if (la != lb) return la < lb;
    return a->name < b->name;
  });

  MixState qs;
  int max_layer = -1;
  for (const auto* t : order) {
    const Category c = CategoryOf(t->name);
    if (c == Category::kOutput) qs.tied_embeddings = false;
    if (IsAttnVLike(c)) ++qs.n_attention_wv;
    max_layer = std::max(max_layer, LayerOf(t->name));
  }
  int64_t block_count = 0;
  bool found = false;
  st = in->GetInt(arch + ".block_count", &block_count, &found);
  if (!st.ok()) return Fail(st);
  qs.n_layer = found ? static_cast<int>(block_count) : max_layer + 1;

  // Decide every tensor's type before writing anything, so a refusal leaves no partial file.
  std::vector<TypeId> types(order.size());
  std::vector<std::string> notes(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensorInfo& t = *order[i];
    st = ChooseType(qs, o, t, &types[i], &notes[i]);
    if (!st.ok()) return Fail(st);
    if (types[i] == TypeId::kI2_S && !IsBitnetCppArch(arch)) return Fail(t.name + ": i2_s needs a bitnet-b1.58 file");
    if (types[i] != t.type && GetTypeTraits(t.type).quantized && !o.allow_requantize) {
      return Fail(t.name + ": requantizing from type " + TypeName(t.type) + " to " + TypeName(types[i]) +
                  " is disabled (pass --allow-requantize; quality suffers)");
    }
  }

  GgufWriter w;
  w.SetAlignment(in->alignment());
  for (const auto& [key, value] : in->metadata()) w.Set(key, value);
  // llama-quantize re-sets these two, which moves them to the end, and drops the split keys.
  w.Remove("general.quantization_version");
  w.Set("general.quantization_version", GgufValue::U32(kQuantizationVersion));
  w.Remove("general.file_type");
  w.Set("general.file_type", GgufValue::U32(o.ftype->ftype));
  for (const char* k : {"split.no", "split.count", "split.tensors.count"}) w.Remove(k);

  if (n_threads > 0) omp_set_num_threads(n_threads);
  std::deque<std::vector<uint8_t>> converted;  // owns converted data until the file is written
  std::vector<float> f32;
  uint64_t size_in = 0, size_out = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const GgufTensorInfo& t = *order[i];
    const TypeId type = types[i];
    std::fprintf(stderr, "[%4zu/%4zu] %-36s - [%s], type = %6s, ", i + 1, order.size(), t.name.c_str(),
                 ShapeOf(t).c_str(), TypeName(t.type));
    if (!notes[i].empty()) std::fprintf(stderr, "(%s) ", notes[i].c_str());
    const void* data = t.data;
    size_t n_bytes = t.n_bytes;
    if (type == t.type) {
      std::fprintf(stderr, "size = %s\n", Mib(t.n_bytes).c_str());
    } else {
      std::fprintf(stderr, "converting to %s .. ", TypeName(type));
      converted.emplace_back();
      st = Convert(t, type, &f32, &converted.back());
      if (!st.ok()) {
        std::fprintf(stderr, "\n");
        return Fail(st);
      }
      data = converted.back().data();
      n_bytes = converted.back().size();
      std::fprintf(stderr, "size = %s -> %s\n", Mib(t.n_bytes).c_str(), Mib(n_bytes).c_str());
    }
    size_in += t.n_bytes;
    size_out += n_bytes;
    std::vector<int64_t> ne(t.ne, t.ne + EffectiveDims(t));
    st = w.AddTensor(t.name, type, ne, data, n_bytes, /*copy=*/false);
    if (!st.ok()) return Fail(st);
  }
  st = w.WriteFile(out_path);
  if (!st.ok()) return Fail(st);
  std::fprintf(stderr, "model size: %s -> %s (%s, general.file_type %u), written to %s\n", Mib(size_in).c_str(),
               Mib(size_out).c_str(), o.ftype->name, o.ftype->ftype, out_path.c_str());
  return kExitOk;
}

}  // namespace trine::cli
