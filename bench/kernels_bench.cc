// Kernel throughput: every GemmFn variant x ISA level x real projection shapes (BitNet b1.58 2B4T
// and Llama-3.2-1B), decode (1 token) and prefill (128 tokens), single-threaded, one call over all
// rows (src/runtime/ops.cc MatMul makes one call per thread). Counters: GB/s of weight bytes read (decode is
// bandwidth-bound) and GOPS (2 x rows x cols x tokens per second), both per CPU second (the
// machines are shared: CPU time is steadier than wall time for a single-threaded loop).
// Activations are quantized once, outside the timed loop, as the runtime does per matmul input.
//
// Run: ./build/bench/kernels_bench --benchmark_counters_tabular=true [--benchmark_filter=q6_K]
//      [--benchmark_out=k.json --benchmark_out_format=json]
// Name: quantize_act/<q8_K|q8_0|f16>/<isa>/<row length> (activation quantization, one row), or
// gemm/<weight type>[_mulfree|_x16|_x16_amx]/<isa>/<model>.<tensor>/t<tokens> (gemm_f32act/...:
// fp32 activations). The weights of one matrix
// are rebuilt only when the type or shape changes (the LM head is ~0.3 GB).
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels.h"
#include "repack.h"
#include "tensor/dtype.h"
#include "tensor/quantize_ref.h"

namespace {

using trine::TypeId;
using trine::kernels::Isa;
using trine::kernels::TernaryVariant;

struct Shape {
  const char* name;  // model.tensor
  int64_t rows;      // outputs (ne[1])
  int64_t cols;      // inputs (ne[0])
  bool output;       // the LM head: decode only, and only the embedding/head types
};

// BitNet b1.58 2B4T: E 2560, F 6912, KV 5 x 128, V 128256. Llama-3.2-1B: E 2048, F 8192, KV 8 x 64.
const Shape kShapes[] = {
    {"bitnet2b.attn_q", 2560, 2560, false},    {"bitnet2b.attn_kv", 640, 2560, false},
    {"bitnet2b.ffn_up", 6912, 2560, false},    {"bitnet2b.ffn_down", 2560, 6912, false},
    {"bitnet2b.output", 128256, 2560, true},   {"llama1b.attn_q", 2048, 2048, false},
    {"llama1b.attn_kv", 512, 2048, false},     {"llama1b.ffn_up", 8192, 2048, false},
    {"llama1b.ffn_down", 2048, 8192, false},   {"llama1b.output", 128256, 2048, true},
    // Larger than this VM's L3 for every head type: the DRAM-bound decode case (what a whole model's
    // weights are per token). 1.5M x 2560 is 1 GB in TQ2_0, 3.2 GB in Q6_K.
    {"dram.1g", 1536000, 2560, true},
};

struct Variant {
  const char* name;
  TypeId type;
  TernaryVariant variant;
  bool head_type;  // used for the output matrix in the reference model files (ternary: measured
                   // there too, as the memory-bound case of a matrix that does not fit the caches)
  bool x16 = false;  // the x16 interleaved layout (WeightView::interleave), where the ISA uses it
  bool amx = false;  // GemmTq2Amx (AMX-INT8 tiles, where the CPU/OS allow); tq2_0_x16 is then the
                     // AVX-512 kernel alone whatever TRINE_AMX says
};

const Variant kVariants[] = {
    {"tq2_0", TypeId::kTQ2_0, TernaryVariant::kInt8Dot, true},
    {"tq2_0_x16", TypeId::kTQ2_0, TernaryVariant::kInt8Dot, true, true},
    {"tq2_0_x16_amx", TypeId::kTQ2_0, TernaryVariant::kInt8Dot, false, true, true},
    {"tq2_0_mulfree", TypeId::kTQ2_0, TernaryVariant::kMulFree, false},
    {"tq2_0_lut", TypeId::kTQ2_0, TernaryVariant::kLut, true},
    {"tq1_0_x16", TypeId::kTQ1_0, TernaryVariant::kInt8Dot, true, true},  // read in place (VBMI)
    {"tq1_0_x16_amx", TypeId::kTQ1_0, TernaryVariant::kInt8Dot, false, true, true},
    {"q4_0", TypeId::kQ4_0, TernaryVariant::kDefault, true},
    {"q4_0_x16", TypeId::kQ4_0, TernaryVariant::kDefault, true, true},
    {"q8_0", TypeId::kQ8_0, TernaryVariant::kDefault, true},
    {"q4_K", TypeId::kQ4_K, TernaryVariant::kDefault, false},
    {"q4_K_x16", TypeId::kQ4_K, TernaryVariant::kDefault, true, true},
    {"q6_K", TypeId::kQ6_K, TernaryVariant::kDefault, true},
    {"q6_K_x16", TypeId::kQ6_K, TernaryVariant::kDefault, true, true},
    {"f16", TypeId::kF16, TernaryVariant::kDefault, false},
    {"f32", TypeId::kF32, TernaryVariant::kDefault, false},
};

// One weight matrix at a time (the LM head is ~0.3 GB): rebuilt only when the type or shape
// changes. A 32-row tile is quantized from random values and repeated, which keeps setup fast;
// the kernels' speed does not depend on the values.
struct WeightCache {
  TypeId type = TypeId::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> data;
  size_t row_bytes = 0;
};

WeightCache& Weights(TypeId type, int64_t rows, int64_t cols) {
  static WeightCache c;
  if (c.type == type && c.rows == rows && c.cols == cols && !c.data.empty()) return c;
  c.data.clear();
  c.data.shrink_to_fit();
  constexpr int64_t kTile = 32;
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  const bool ternary = type == TypeId::kTQ2_0 || type == TypeId::kTQ1_0;
  std::vector<float> wf(static_cast<size_t>(kTile * cols));
  for (auto& v : wf) v = ternary ? 0.02f * static_cast<float>(static_cast<int>(rng() % 3) - 1) : nd(rng);
  uint64_t tile_bytes = 0;
  trine::TensorBytes(type, kTile * cols, &tile_bytes);
  std::vector<uint8_t> tile(tile_bytes);
  if (!trine::QuantizeTensor(type, wf.data(), kTile * cols, cols, tile.data()).ok()) return c;
  c.row_bytes = static_cast<size_t>(tile_bytes / kTile);
  c.data.resize(c.row_bytes * static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; r += kTile) {
    const int64_t n = rows - r < kTile ? rows - r : kTile;
    std::memcpy(c.data.data() + static_cast<size_t>(r) * c.row_bytes, tile.data(), static_cast<size_t>(n) * c.row_bytes);
  }
  c.type = type;
  c.rows = rows;
  c.cols = cols;
  return c;
}

void BM_Gemm(benchmark::State& state, Variant v, Isa isa, Shape s, int n_tokens, bool f32act) {
  if (!trine::kernels::IsaSupported(isa)) {
    state.SkipWithError("ISA not available on this CPU/build");
    return;
  }
  WeightCache& wc = Weights(v.type, s.rows, s.cols);
  if (wc.data.empty()) {
    state.SkipWithError("quantization failed");
    return;
  }
  trine::kernels::WeightView w;
  w.type = v.type;
  w.rows = s.rows;
  w.cols = s.cols;
  w.data = wc.data.data();
  w.row_bytes = wc.row_bytes;
  trine::PageBuffer interleaved;
  if (v.x16 && !trine::kernels::InterleaveX16(w, &interleaved, &w).ok()) {
    state.SkipWithError("interleave failed");
    return;
  }
  // The lookup kernels' layout, as the loader builds it for TRINE_TERNARY=lut.
  if (!v.x16 && trine::kernels::WantsLutLayout(v.type, isa, v.variant) &&
      !trine::kernels::InterleaveLut(w, &interleaved, &w).ok()) {
    state.SkipWithError("lookup-table layout failed");
    return;
  }
  // The model's layouts end up on huge pages (Model::StartHugePagePromotion); so does this copy.
  for (size_t o = 0; o < interleaved.huge_bytes(); o += trine::PageBuffer::kHugePage) {
    trine::PromoteToHugePage(interleaved.data() + o);
  }
  std::string kname;
  w.f32_activations = f32act;
  trine::kernels::GemmFn fn = f32act ? trine::kernels::SelectGemmF32Act(v.type, isa, &kname)
                                     : trine::kernels::SelectGemm(v.type, isa, v.variant, &kname);
  if (!f32act && (v.type == TypeId::kTQ2_0 || v.type == TypeId::kTQ1_0) && v.variant == TernaryVariant::kInt8Dot) {
    // Pin the kernel: SelectGemm's avx512 entry is GemmTq2Amx where AMX is enabled.
    fn = v.amx ? trine::kernels::GemmTq2Amx : trine::kernels::GetKernelTable(isa).tq2_int8dot;
    kname = std::string(trine::TypeName(v.type)) + (v.amx ? ": amx-int8 tdpbsud (x16)" : ": int8 dot (") +
            (v.amx ? "" : std::string(trine::kernels::IsaName(isa)) + ")");
  }

  const size_t act = trine::kernels::ActivationBytesFor(w);
  std::vector<uint8_t> xq(act * static_cast<size_t>(n_tokens));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(s.cols));
  for (int t = 0; t < n_tokens; ++t) {
    for (auto& e : x) e = nd(rng);
    trine::kernels::QuantizeActivationsFor(w, x.data(), xq.data() + act * static_cast<size_t>(t));
  }
  std::vector<float> y(static_cast<size_t>(s.rows) * static_cast<size_t>(n_tokens));
  for (auto _ : state) {
    fn(w, xq.data(), act, n_tokens, y.data(), s.rows, 0, s.rows, 1.0f);  // one call per thread, as ops::MatMul
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(wc.data.size()) * it, benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
  state.counters["GOPS"] = benchmark::Counter(2.0 * static_cast<double>(s.rows) * static_cast<double>(s.cols) *
                                                  n_tokens * it,
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
  state.SetLabel(kname);
}

// One row of activations quantized (KernelTable::quantize_*; "ref" is the scalar reference,
// QuantizeActivationsRef's function): normal values, the row lengths of the BitNet 2B matmul
// inputs. Counter: GB/s of fp32 input read.
void BM_QuantizeAct(benchmark::State& state, Isa isa, int kind, int64_t n) {
  const trine::kernels::QuantizeActFn ref_fns[] = {trine::QuantizeRowQ8_K, trine::kernels::QuantizeRowQ8_0Act,
                                                   trine::QuantizeRowF16};
  const trine::kernels::QuantizeActFn table_fns[] = {trine::kernels::GetKernelTable(isa).quantize_q8_K,
                                                     trine::kernels::GetKernelTable(isa).quantize_q8_0,
                                                     trine::kernels::GetKernelTable(isa).quantize_f16};
  const trine::kernels::QuantizeActFn fn = isa == Isa::kRef ? ref_fns[kind] : table_fns[kind];
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);
  std::vector<uint8_t> dst(static_cast<size_t>(n) * 4);
  for (auto _ : state) {
    fn(x.data(), dst.data(), n);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * 4.0 * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// One query head attending over n_kv cached positions (KernelTable-independent: SelectAttn(isa),
// the kernel AttentionOverCache calls per head), head_dim 128 as in both reference models, the
// head inside a row of 5 KV heads (BitNet 2B's K/V width). Counter: GB/s of K and V bytes read.
void BM_Attn(benchmark::State& state, Isa isa, trine::kernels::KvRowType kt, trine::kernels::KvRowType vt,
             int n_kv) {
  using trine::kernels::KvRowType;
  constexpr int kHd = 128, kHeads = 5;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(kHd) * kHeads);
  auto fill = [&](KvRowType t, float spread, std::vector<uint8_t>* bytes) {
    const size_t stride = trine::kernels::KvRowBytes(t, kHd * kHeads);
    bytes->assign(stride * static_cast<size_t>(n_kv), 0);
    for (int p = 0; p < n_kv; ++p) {
      for (float& f : row) f = nd(rng) * spread;
      uint8_t* dst = bytes->data() + static_cast<size_t>(p) * stride;
      if (t == KvRowType::kQ8_0) {
        trine::QuantizeRowQ8_0(row.data(), dst, kHd * kHeads);
      } else if (t == KvRowType::kQ4_0) {
        trine::QuantizeRowQ4_0(row.data(), dst, kHd * kHeads);
      } else {
        trine::QuantizeRowF16(row.data(), dst, kHd * kHeads);
      }
    }
    return stride;
  };
  std::vector<uint8_t> kb, vb;
  trine::kernels::KvHead k, v;
  k.type = kt;
  k.stride = fill(kt, 2.0f, &kb);
  k.data = kb.data();
  v.type = vt;
  v.stride = fill(vt, 1.0f, &vb);
  v.data = vb.data();
  std::vector<float> q(kHd), out(kHd);
  for (float& f : q) f = nd(rng);
  const trine::kernels::AttnFn fn = trine::kernels::SelectAttn(isa);
  for (auto _ : state) {
    fn(q.data(), k, v, n_kv, kHd, 0.088f, out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double bytes = static_cast<double>(trine::kernels::KvRowBytes(kt, kHd) + trine::kernels::KvRowBytes(vt, kHd)) *
                       n_kv * static_cast<double>(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

}  // namespace

int main(int argc, char** argv) {
  // Activation quantization: quantize_act/<q8_K|q8_0|f16>/<isa>/<row length>.
  const char* const kinds[] = {"q8_K", "q8_0", "f16"};
  for (int kind = 0; kind < 3; ++kind) {
    for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
      if (!trine::kernels::IsaSupported(isa)) continue;
      const trine::kernels::KernelTable& t = trine::kernels::GetKernelTable(isa);
      const trine::kernels::QuantizeActFn e[] = {t.quantize_q8_K, t.quantize_q8_0, t.quantize_f16};
      if (isa != Isa::kRef && e[kind] == nullptr) continue;
      for (int64_t n : {int64_t{2560}, int64_t{6912}}) {
        const std::string name = std::string("quantize_act/") + kinds[kind] + "/" + trine::kernels::IsaName(isa) +
                                 "/" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), BM_QuantizeAct, isa, kind, n)->Unit(benchmark::kNanosecond);
      }
    }
  }
  // Attention over the KV cache: attn/<K type>_<V type>/<isa>/kv<positions>.
  {
    using trine::kernels::KvRowType;
    const std::pair<KvRowType, const char*> rows[] = {
        {KvRowType::kF16, "f16"}, {KvRowType::kQ8_0, "q8_0"}, {KvRowType::kQ4_0, "q4_0"}};
    for (const auto& kr : rows) {
      for (const auto& vr : rows) {
        if (kr.first != vr.first && kr.first != KvRowType::kF16) continue;  // f16 K with any V, and like pairs
        for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
          if (!trine::kernels::IsaSupported(isa)) continue;
          for (int n_kv : {256, 4096}) {
            const std::string name = std::string("attn/") + kr.second + "_" + vr.second + "/" +
                                     trine::kernels::IsaName(isa) + "/kv" + std::to_string(n_kv);
            benchmark::RegisterBenchmark(name.c_str(), BM_Attn, isa, kr.first, vr.first, n_kv)
                ->Unit(benchmark::kMicrosecond);
          }
        }
      }
    }
  }
  for (const Shape& s : kShapes) {
    for (const Variant& v : kVariants) {
      if (s.output && !v.head_type) continue;
      for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
        // Decode and a 128-token prompt everywhere; a token-count sweep on one shape (where the
        // kernels switch loop shapes, kernels/README.md).
        std::vector<int> toks = {1, 128};
        if (std::string(s.name) == "llama1b.ffn_down") toks = {1, 2, 4, 8, 16, 32, 128};
        // The AMX prefill kernel against the AVX-512 x16 one at prefill batch sizes.
        if (v.x16 && v.type != TypeId::kQ4_0 && std::string(s.name).rfind("bitnet2b.", 0) == 0) {
          toks = {1, 16, 64, 128};
        }
        // The lookup kernel against the file-layout int8-dot one at decode batch sizes too.
        if (!v.x16 && v.type == TypeId::kTQ2_0 && std::string(s.name).rfind("bitnet2b.", 0) == 0 &&
            (v.variant == TernaryVariant::kLut || v.variant == TernaryVariant::kInt8Dot)) {
          toks = {1, 4, 128};
        }
        if (v.amx && (isa != Isa::kAvx512 || !trine::kernels::AmxAvailable())) continue;
        for (int n_tokens : toks) {
          if (s.output && n_tokens > 1) continue;  // prefill computes logits of the last token only
          if (v.amx && n_tokens < trine::kernels::AmxMinTokens()) continue;  // the AVX-512 kernel runs
          // The scalar reference at 128 tokens takes seconds per call: only on the small K/V shape.
          if (isa == Isa::kRef && n_tokens > 1 && s.rows > 640) continue;
          if (isa == Isa::kRef && s.output) continue;
          if (!trine::kernels::IsaSupported(isa) && isa != Isa::kRef) continue;
          if (v.x16 && !trine::kernels::WantsX16(v.type, isa, v.variant)) continue;
          // A variant this ISA lacks falls back to another kernel: measured under that one's name.
          if ((v.variant == TernaryVariant::kMulFree || v.variant == TernaryVariant::kLut) &&
              trine::kernels::SelectGemm(v.type, isa, v.variant, nullptr) ==
                  trine::kernels::SelectGemm(v.type, isa, TernaryVariant::kInt8Dot, nullptr)) {
            continue;
          }
          const std::string name = std::string("gemm/") + v.name + "/" + trine::kernels::IsaName(isa) + "/" + s.name +
                                   "/t" + std::to_string(n_tokens);
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, v, isa, s, n_tokens, false)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  // fp32 activations (the profiler's 16/32-bit rung, KernelTable::f32_act): decode and a 64-token
  // batch on the BitNet shapes; "ref" is GemmDequantF32, the scalar reference.
  for (const Shape& s : kShapes) {
    if (std::string(s.name).rfind("bitnet2b.", 0) != 0 || s.output) continue;
    for (const Variant& v : kVariants) {
      if (v.variant == TernaryVariant::kMulFree || v.variant == TernaryVariant::kLut) continue;
      for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512}) {
        if (!trine::kernels::IsaSupported(isa)) continue;
        // x16 as the AVX-512 model binds it; the ref row is GemmDequantF32 on that same layout.
        if (v.x16 && isa == Isa::kAvx2) continue;
        for (int n_tokens : {1, 64}) {
          const std::string name = std::string("gemm_f32act/") + v.name + "/" + trine::kernels::IsaName(isa) + "/" +
                                   s.name + "/t" + std::to_string(n_tokens);
          benchmark::RegisterBenchmark(name.c_str(), BM_Gemm, v, isa, s, n_tokens, true)
              ->Unit(benchmark::kMillisecond);
        }
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
