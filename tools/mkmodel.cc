// `trine mkmodel`: writes a random-weight GGUF with the exact shapes and metadata of a real model
// (BitNet b1.58 2B4T, Llama-3.2-1B, or a tiny one for tests), so that benchmarks and tests run on
// real shapes without shipping weights. Every 2-D weight is exactly ternary ({-1, 0, +1}) times a
// per-tensor fp16 scale, so TQ1_0/TQ2_0/I2_S store it losslessly; norms are close to 1; the
// vocabulary (tokens, types, merges, special ids) is copied from a vocab GGUF.
//
// Memory stays bounded: the file is first written with zero-filled tensor data (the GgufWriter
// reads a zero mapping, which takes no memory), then each tensor is generated and quantized in
// slabs of rows and written in place with pwrite. The output appears under its final name only
// when complete (written as OUT.tmp, then renamed).
#include <cxxopts.hpp>

#include <fcntl.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli_args.h"
#include "cli_common.h"
#include "commands.h"
#include "core/fp16.h"
#include "gguf/gguf_reader.h"
#include "gguf/gguf_writer.h"
#include "model_options.h"
#include "tensor/dtype.h"

namespace trine::cli {
namespace {

// Dimensions of a preset (real models' values from their config.json / converted GGUFs).
struct Preset {
  const char* name;
  const char* arch;       // default general.architecture
  const char* vocab;      // default vocabulary file under models/vocab/
  const char* model_name; // general.name prefix
  int n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  float rope_theta, rms_eps;
  bool llama3_rope;       // write rope_freqs.weight (Llama-3.1+ long-context factors)
};

const Preset kPresets[] = {
    // BitNet b1.58 2B4T (microsoft/bitnet-b1.58-2B-4T): head_dim 128, tied embedding.
    {"bitnet-2b", "bitnet", "ggml-vocab-llama-bpe.gguf", "BitNet b1.58 2B4T shape", 2560, 30, 20, 5, 6912, 4096,
     500000.0f, 1e-5f, false},
    // Llama-3.2-1B: head_dim 64, tied embedding, llama3 rope scaling (factor 32, original ctx 8192).
    {"llama-1b", "llama", "ggml-vocab-llama-bpe.gguf", "Llama-3.2-1B shape", 2048, 16, 32, 8, 8192, 131072,
     500000.0f, 1e-5f, true},
    // Small dims for tests: every row length a multiple of 256 so every weight type applies.
    {"tiny", "bitnet", "ggml-vocab-llama-spm.gguf", "tiny test shape", 256, 2, 4, 2, 512, 512, 10000.0f, 1e-5f,
     false},
};

const Preset* FindPreset(const std::string& name) {
  for (const auto& p : kPresets) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

// llama_ftype written to general.file_type for a uniform weight type (pure mixes: Q4_K is
// Q4_K_S); bitnet.cpp's numbering for I2_S, as tools/quantize.cc writes it.
uint32_t FileTypeOf(TypeId t) {
  switch (t) {
    case TypeId::kF32: return 0;
    case TypeId::kF16: return 1;
    case TypeId::kQ4_0: return 2;
    case TypeId::kQ8_0: return 7;
    case TypeId::kQ4_K: return 14;
    case TypeId::kQ6_K: return 18;
    case TypeId::kBF16: return 32;
    case TypeId::kTQ1_0: return 36;
    case TypeId::kTQ2_0: return 37;
    case TypeId::kI2_S: return 40;
    default: return 0;
  }
}

bool IsBitnetCppArch(const std::string& arch) { return arch == "bitnet-b1.58" || arch == "bitnet-25"; }

// Deterministic counter-based randomness, so any thread count gives the same bytes.
uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t HashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, then mixed with the seed
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return SplitMix64(h ^ SplitMix64(seed));
}

// Uniform in [0, 1) from a 64-bit hash.
double Unit(uint64_t h) { return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0); }

enum class Fill {
  kTernary,   // t * scale, t uniform in {-1, 0, +1}
  kNorm,      // 1 + uniform(-0.1, 0.1)
  kRopeFreq,  // Llama-3 rope factors (computed, not random)
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] = row length
  TypeId type = TypeId::kF32;
  Fill fill = Fill::kTernary;
  float scale = 1.0f;  // kTernary: the per-tensor fp16 scale
  uint64_t seed = 0;
  uint64_t n_bytes = 0;
  uint64_t file_offset = 0;
  int64_t n_elems() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
  }
  int64_t rows() const { return n_elems() / ne[0]; }
};

// Llama-3 rope frequency factors (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors) for
// factor 32, low/high frequency factors 1/4, original context 8192 (Llama-3.2's rope_scaling).
std::vector<float> Llama3RopeFactors(int head_dim, float theta) {
  const double factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, old_ctx = 8192.0;
  const double low_freq_wavelen = old_ctx / low_freq_factor, high_freq_wavelen = old_ctx / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < head_dim; i += 2) {
    const double freq = 1.0 / std::pow(static_cast<double>(theta), static_cast<double>(i) / head_dim);
    const double wavelen = 2.0 * 3.14159265358979323846 / freq;
    if (wavelen < high_freq_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_freq_wavelen) {
      out.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return out;
}

// Fills values [i0, i0 + n) of a tensor (row-major over ne) as fp32.
void FillValues(const TensorSpec& t, const std::vector<float>& rope, int64_t i0, int64_t n, float* dst) {
  switch (t.fill) {
    case Fill::kTernary: {
      // One hash gives eight elements, a byte each: (byte * 3) >> 8 is 0, 1 or 2 with
      // probabilities 86/256, 85/256, 85/256.
      uint64_t group = ~0ull, h = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t idx = static_cast<uint64_t>(i0 + i);
        if ((idx >> 3) != group) {
          group = idx >> 3;
          h = SplitMix64(t.seed + group);
        }
        const int v = static_cast<int>((((h >> ((idx & 7) * 8)) & 0xff) * 3) >> 8) - 1;
        dst[i] = static_cast<float>(v) * t.scale;
      }
      break;
    }
    case Fill::kNorm:
      for (int64_t i = 0; i < n; ++i) {
        dst[i] = static_cast<float>(1.0 + 0.2 * (Unit(SplitMix64(t.seed + static_cast<uint64_t>(i0 + i))) - 0.5));
      }
      break;
    case Fill::kRopeFreq:
      for (int64_t i = 0; i < n; ++i) dst[i] = rope[static_cast<size_t>(i0 + i)];
      break;
  }
}

Status PwriteAll(int fd, const uint8_t* p, size_t n, uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(off));
    if (w < 0) {
      if (errno == EINTR) continue;
      return IoError(path + ": write failed: " + std::strerror(errno));
    }
    p += w;
    n -= static_cast<size_t>(w);
    off += static_cast<uint64_t>(w);
  }
  return Status::Ok();
}

// Generates and converts one tensor, writing it at t.file_offset. Row-wise types go in slabs of
// about 64 MiB of output, rows split across threads; I2_S (one scale per tensor) in one piece.
Status WriteTensor(int fd, const std::string& path, const TensorSpec& t, const std::vector<float>& rope) {
  const TypeTraits& tr = GetTypeTraits(t.type);
  const int64_t row = t.ne[0], rows = t.rows();
  if (t.type == TypeId::kI2_S) {
    std::vector<float> x(static_cast<size_t>(t.n_elems()));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) FillValues(t, rope, r * row, row, x.data() + r * row);
    std::vector<uint8_t> out(t.n_bytes);
    TRINE_RETURN_IF_ERROR(QuantizeTensor(t.type, x.data(), t.n_elems(), row, out.data()));
    return PwriteAll(fd, out.data(), out.size(), t.file_offset, path);
  }
  const uint64_t row_bytes = t.n_bytes / static_cast<uint64_t>(rows);
  const int64_t slab_rows = std::max<int64_t>(1, static_cast<int64_t>((64ull << 20) / row_bytes));
  std::vector<uint8_t> out(static_cast<size_t>(std::min(rows, slab_rows)) * row_bytes);
  for (int64_t r0 = 0; r0 < rows; r0 += slab_rows) {
    const int64_t nr = std::min(slab_rows, rows - r0);
    bool ok = true;
#pragma omp parallel reduction(&& : ok)
    {
      std::vector<float> x(static_cast<size_t>(row));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < nr; ++r) {
        FillValues(t, rope, (r0 + r) * row, row, x.data());
        uint8_t* dst = out.data() + static_cast<size_t>(r) * row_bytes;
        if (t.type == TypeId::kF32) {
          std::memcpy(dst, x.data(), static_cast<size_t>(row_bytes));
        } else {
          ok = ok && QuantizeTensor(t.type, x.data(), row, row, dst).ok();
        }
      }
    }
    if (!ok) return Status(StatusCode::kInternal, t.name + ": conversion to " + tr.name + " failed");
    TRINE_RETURN_IF_ERROR(PwriteAll(fd, out.data(), static_cast<size_t>(nr) * row_bytes,
                                    t.file_offset + static_cast<uint64_t>(r0) * row_bytes, path));
  }
  return Status::Ok();
}


std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string ShapeOf(const std::vector<int64_t>& ne) {
  std::string s;
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s;
}

bool ParseWeightType(const std::string& s, TypeId* out) {
  return ParseTypeName(s, out) && *out != TypeId::kQ8_K;  // Q8_K is an activation format
}

struct Options {
  const Preset* preset = nullptr;
  std::string out_path, arch, vocab_path;
  TypeId type = TypeId::kTQ2_0;
  TypeId embd_type = TypeId::kQ6_K;
  uint64_t seed = 42;
  int n_layer = 0, n_ctx = 0;
};

// The tied token embedding (also the output matrix) follows llama-quantize's default mix: Q6_K,
// except Q8_0 for a Q8_0 model and the type itself for unquantized models.
TypeId DefaultEmbeddingType(TypeId type) {
  if (type == TypeId::kQ8_0) return TypeId::kQ8_0;
  if (!GetTypeTraits(type).quantized) return type;
  return TypeId::kQ6_K;
}

void PrintHelp() {
  std::printf(
      "usage: trine mkmodel -o OUT.gguf --preset NAME [options]\n\n"
      "Writes a random-weight GGUF with the exact shapes and metadata of a real model: every 2-D weight\n"
      "is ternary {-1, 0, +1} x a per-tensor fp16 scale (lossless in tq1_0/tq2_0/i2_s), norms ~1, the\n"
      "token embedding tied to the output (Q6_K by default, like llama-quantize), and the vocabulary\n"
      "copied from a vocab GGUF. Same options and seed give the same bytes.\n\n"
      "presets:\n"
      "  bitnet-2b   BitNet b1.58 2B4T: E 2560, 30 layers, 20 heads (5 KV), F 6912, ctx 4096, arch bitnet\n"
      "  llama-1b    Llama-3.2-1B: E 2048, 16 layers, 32 heads (8 KV), F 8192, ctx 131072, arch llama\n"
      "  tiny        E 256, 2 layers, 4 heads (2 KV), F 512, ctx 512, arch bitnet, SPM vocabulary\n\n"
      "options:\n"
      "  -o, --output FILE             output GGUF (required)\n"
      "  --preset NAME                 bitnet-2b, llama-1b or tiny (required)\n"
      "  --type T                      type of the layer weights: tq2_0 (default), tq1_0, i2_s, q4_0, q4_k,\n"
      "                                q6_k, q8_0, f16, bf16, f32\n"
      "  --token-embedding-type T      type of the tied token embedding (default q6_k; q8_0 for q8_0,\n"
      "                                the type itself for f16/bf16/f32)\n"
      "  --output-tensor-type T        same tensor (the output matrix is the tied embedding)\n"
      "  --arch A                      llama, bitnet or bitnet-b1.58 (bitnet.cpp's; needed for i2_s)\n"
      "  --vocab FILE                  vocabulary GGUF (default models/vocab/ggml-vocab-llama-bpe.gguf,\n"
      "                                ggml-vocab-llama-spm.gguf for tiny); its size sets n_vocab\n"
      "  --seed N                      random seed (default 42)\n"
      "  --layers N                    number of layers instead of the preset's\n"
      "  --ctx N                       context_length written to the file instead of the preset's\n"
      "  -t, --threads N               threads for generation and quantization (default: all cores)\n"
      "  -h, --help                    this help\n");
}

}  // namespace

int RunMkmodel(int argc, char** argv) {
  cxxopts::Options opts("trine mkmodel", "Write a random-weight GGUF with a real model's shapes.");
  opts.add_options()("o,output", "", cxxopts::value<std::string>())("preset", "", cxxopts::value<std::string>())(
      "type", "", cxxopts::value<std::string>()->default_value("tq2_0"))(
      "token-embedding-type", "", cxxopts::value<std::string>())("output-tensor-type", "",
                                                                 cxxopts::value<std::string>())(
      "arch", "", cxxopts::value<std::string>())("vocab", "", cxxopts::value<std::string>())(
      "seed", "", cxxopts::value<int64_t>()->default_value("42"))("layers", "", cxxopts::value<int>())(
      "ctx", "", cxxopts::value<int>())("t,threads", "", cxxopts::value<int>()->default_value("0"))("h,help", "");
  cxxopts::ParseResult a;
  if (const int rc = ParseCommand("mkmodel", opts, argc, argv, &a, "", PrintHelp); rc >= 0) return rc;
  if (!a.count("output")) return UsageError("mkmodel", "missing -o OUT.gguf");
  if (!a.count("preset")) return UsageError("mkmodel", "missing --preset (bitnet-2b, llama-1b or tiny)");

  Options o;
  o.out_path = a["output"].as<std::string>();
  o.preset = FindPreset(a["preset"].as<std::string>());
  if (!o.preset) {
    return Fail("unknown preset '" + a["preset"].as<std::string>() +
                                     "' (bitnet-2b, llama-1b or tiny)");
  }
  const std::string type_name = a["type"].as<std::string>();
  if (!ParseWeightType(type_name, &o.type)) return Fail("unknown --type '" + type_name + "'");
  o.embd_type = DefaultEmbeddingType(o.type);
  for (const char* key : {"output-tensor-type", "token-embedding-type"}) {  // the latter wins, as in quantize
    if (!a.count(key)) continue;
    const std::string v = a[key].as<std::string>();
    if (!ParseWeightType(v, &o.embd_type)) return Fail(std::string("unknown --") + key + " '" + v + "'");
  }
  o.arch = a.count("arch") ? a["arch"].as<std::string>() : o.preset->arch;
  if (o.arch != "llama" && o.arch != "bitnet" && o.arch != "bitnet-b1.58") {
    return Fail("unknown --arch '" + o.arch + "' (llama, bitnet or bitnet-b1.58)");
  }
  const int64_t seed = a["seed"].as<int64_t>();
  if (seed < 0) return Fail("--seed must be >= 0, got " + std::to_string(seed));
  o.seed = static_cast<uint64_t>(seed);
  o.n_layer = a.count("layers") ? a["layers"].as<int>() : o.preset->n_layer;
  if (o.n_layer < 1 || o.n_layer > 512) return Fail("--layers must be in [1, 512], got " + std::to_string(o.n_layer));
  o.n_ctx = a.count("ctx") ? a["ctx"].as<int>() : o.preset->n_ctx;
  if (o.n_ctx < 1 || o.n_ctx > (1 << 24)) return Fail("--ctx must be in [1, 16777216], got " + std::to_string(o.n_ctx));
  const int n_threads = a["threads"].as<int>();
  if (n_threads < 0 || n_threads > 1024) return Fail("-t must be in [0, 1024], got " + std::to_string(n_threads));
  if (n_threads > 0) omp_set_num_threads(n_threads);
  if (o.type == TypeId::kI2_S && !IsBitnetCppArch(o.arch)) {
    return Fail("i2_s is bitnet.cpp's format, readable only in bitnet-b1.58 files: add --arch bitnet-b1.58");
  }
  if (o.embd_type == TypeId::kI2_S) return Fail("the token embedding cannot be i2_s (no row access)");
  o.vocab_path = a.count("vocab") ? a["vocab"].as<std::string>() : ResolveBundledPath(std::string("vocab/") + o.preset->vocab);

  // Vocabulary: every tokenizer.* key of the vocab file, verbatim.
  std::unique_ptr<GgufFile> vocab;
  Status st = GgufFile::Open(o.vocab_path, &vocab);
  if (!st.ok()) return Fail(st);
  const GgufValue* tokens = vocab->Find("tokenizer.ggml.tokens");
  if (!tokens || !tokens->is_array() || tokens->elem_type() != GgufType::kString || tokens->count() == 0) {
    return Fail(o.vocab_path + ": no tokenizer.ggml.tokens array (not a vocabulary GGUF)");
  }
  const int64_t V = static_cast<int64_t>(tokens->count());

  const Preset& p = *o.preset;
  const int64_t E = p.n_embd, F = p.n_ff, hd = p.n_embd / p.n_head;
  const int64_t q_dim = static_cast<int64_t>(p.n_head) * hd, kv_dim = static_cast<int64_t>(p.n_head_kv) * hd;
  const bool bitnet = o.arch != "llama";
  const std::string ak = o.arch + ".";

  GgufWriter w;
  w.Set("general.architecture", GgufValue::String(o.arch));
  w.Set("general.name", GgufValue::String(std::string(p.model_name) + " (trine mkmodel, random weights, seed " +
                                          std::to_string(o.seed) + ")"));
  w.Set(ak + "vocab_size", GgufValue::U32(static_cast<uint32_t>(V)));
  w.Set(ak + "context_length", GgufValue::U32(static_cast<uint32_t>(o.n_ctx)));
  w.Set(ak + "embedding_length", GgufValue::U32(static_cast<uint32_t>(E)));
  w.Set(ak + "block_count", GgufValue::U32(static_cast<uint32_t>(o.n_layer)));
  w.Set(ak + "feed_forward_length", GgufValue::U32(static_cast<uint32_t>(F)));
  w.Set(ak + "rope.dimension_count", GgufValue::U32(static_cast<uint32_t>(hd)));
  w.Set(ak + "attention.head_count", GgufValue::U32(static_cast<uint32_t>(p.n_head)));
  w.Set(ak + "attention.head_count_kv", GgufValue::U32(static_cast<uint32_t>(p.n_head_kv)));
  w.Set(ak + "rope.freq_base", GgufValue::F32(p.rope_theta));
  w.Set(ak + "attention.layer_norm_rms_epsilon", GgufValue::F32(p.rms_eps));
  if (!bitnet) {
    w.Set(ak + "attention.key_length", GgufValue::U32(static_cast<uint32_t>(hd)));
    w.Set(ak + "attention.value_length", GgufValue::U32(static_cast<uint32_t>(hd)));
  } else {
    // convert_hf_to_gguf.py's BitnetModel writes linear rope scaling with factor 1.
    w.Set(ak + "rope.scaling.type", GgufValue::String("linear"));
    w.Set(ak + "rope.scaling.factor", GgufValue::F32(1.0f));
  }
  w.Set("general.file_type", GgufValue::U32(FileTypeOf(o.type)));
  w.Set("general.quantization_version", GgufValue::U32(2));
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) == 0) w.Set(key, value);
  }

  // Tensors in llama-quantize's order: non-layer tensors by name, then layer by layer, by name.
  std::vector<TensorSpec> ts;
  auto add = [&](const std::string& name, std::vector<int64_t> ne, TypeId type, Fill fill) {
    TensorSpec t;
    t.name = name;
    t.ne = std::move(ne);
    t.type = type;
    t.fill = fill;
    t.seed = HashName(name, o.seed);
    // Scale ~ 1/sqrt(fan-in * 2/3) keeps activations O(1); a +-10% jitter per tensor; fp16-exact.
    const double jitter = 0.9 + 0.2 * Unit(SplitMix64(t.seed ^ 0x5ca1eull));
    t.scale = Fp16ToFp32(Fp32ToFp16(static_cast<float>(jitter / std::sqrt(static_cast<double>(t.ne[0]) * 2.0 / 3.0))));
    ts.push_back(std::move(t));
  };
  add("output_norm.weight", {E}, TypeId::kF32, Fill::kNorm);
  const std::vector<float> rope = p.llama3_rope ? Llama3RopeFactors(static_cast<int>(hd), p.rope_theta) : std::vector<float>();
  if (p.llama3_rope && !bitnet) add("rope_freqs.weight", {hd / 2}, TypeId::kF32, Fill::kRopeFreq);
  add("token_embd.weight", {E, V}, o.embd_type, Fill::kTernary);
  for (int l = 0; l < o.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_k.weight", {E, kv_dim}, o.type, Fill::kTernary);
    add(b + "attn_norm.weight", {E}, TypeId::kF32, Fill::kNorm);
    add(b + "attn_output.weight", {q_dim, E}, o.type, Fill::kTernary);
    add(b + "attn_q.weight", {E, q_dim}, o.type, Fill::kTernary);
    if (bitnet) add(b + "attn_sub_norm.weight", {E}, TypeId::kF32, Fill::kNorm);
    add(b + "attn_v.weight", {E, kv_dim}, o.type, Fill::kTernary);
    add(b + "ffn_down.weight", {F, E}, o.type, Fill::kTernary);
    add(b + "ffn_gate.weight", {E, F}, o.type, Fill::kTernary);
    add(b + "ffn_norm.weight", {E}, TypeId::kF32, Fill::kNorm);
    if (bitnet) add(b + "ffn_sub_norm.weight", {F}, TypeId::kF32, Fill::kNorm);
    add(b + "ffn_up.weight", {E, F}, o.type, Fill::kTernary);
  }

  uint64_t max_bytes = 0, total = 0;
  for (auto& t : ts) {
    if (t.ne[0] % GetTypeTraits(t.type).block_elems != 0 || !TensorBytes(t.type, t.n_elems(), &t.n_bytes)) {
      return Fail(t.name + ": shape [" + ShapeOf(t.ne) + "] cannot be stored as " + TypeName(t.type) +
                  " (rows must be a multiple of " + std::to_string(GetTypeTraits(t.type).block_elems) + ")");
    }
    max_bytes = std::max(max_bytes, t.n_bytes);
    total += t.n_bytes;
  }

  // Pass 1: the whole file with zero tensor data, read from an untouched anonymous mapping.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string tmp_path = o.out_path + ".tmp";
  void* zeros = mmap(nullptr, max_bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (zeros == MAP_FAILED) return Fail(std::string("cannot map ") + Mib(max_bytes) + ": " + std::strerror(errno));
  for (const auto& t : ts) {
    st = w.AddTensor(t.name, t.type, t.ne, zeros, t.n_bytes, /*copy=*/false);
    if (!st.ok()) break;
  }
  if (st.ok()) st = w.WriteFile(tmp_path);
  munmap(zeros, max_bytes);
  if (!st.ok()) {
    unlink(tmp_path.c_str());
    return Fail(st);
  }
  // The data offsets, as a reader sees them.
  {
    std::unique_ptr<GgufFile> f;
    st = GgufFile::Open(tmp_path, &f);
    if (!st.ok()) {
      unlink(tmp_path.c_str());
      return Fail(st);
    }
    for (auto& t : ts) t.file_offset = f->FindTensor(t.name)->file_offset;
  }

  // Pass 2: generate, quantize and write each tensor in place.
  const int fd = ::open(tmp_path.c_str(), O_WRONLY);
  if (fd < 0) {
    unlink(tmp_path.c_str());
    return Fail(tmp_path + ": cannot open for writing: " + std::strerror(errno));
  }
  std::fprintf(stderr, "mkmodel: preset %s, arch %s, %d layers, n_vocab %lld (%s), weights %s, embedding %s, seed %llu\n",
               p.name, o.arch.c_str(), o.n_layer, static_cast<long long>(V), o.vocab_path.c_str(), TypeName(o.type),
               TypeName(o.embd_type), static_cast<unsigned long long>(o.seed));
  for (size_t i = 0; i < ts.size() && st.ok(); ++i) {
    const TensorSpec& t = ts[i];
    const double at = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[%4zu/%4zu] %6.1fs %-28s [%s] %-6s %s\n", i + 1, ts.size(), at, t.name.c_str(),
                 ShapeOf(t.ne).c_str(), TypeName(t.type), Mib(t.n_bytes).c_str());
    st = WriteTensor(fd, tmp_path, t, rope);
  }
  if (::close(fd) != 0 && st.ok()) st = IoError(tmp_path + ": close failed: " + std::strerror(errno));
  if (st.ok() && std::rename(tmp_path.c_str(), o.out_path.c_str()) != 0) {
    st = IoError(o.out_path + ": cannot rename from " + tmp_path + ": " + std::strerror(errno));
  }
  if (!st.ok()) {
    unlink(tmp_path.c_str());
    return Fail(st);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "mkmodel: wrote %s: %zu tensors, %s of tensor data in %.1f s\n", o.out_path.c_str(), ts.size(),
               Mib(total).c_str(), secs);
  return kExitOk;
}

}  // namespace trine::cli
