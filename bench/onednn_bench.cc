// oneDNN's matmul beside trine's hand-written kernels for the float-weight paths (issue: use the
// design card's packages where they serve): F32 and F16 weights times fp32 activations (the
// profiler's fp32 reference pass, KernelTable::f32_act) and F16 x F16 (an F16 model's default),
// at decode and prefill token counts on llama-1b shapes, one thread (trine calls a kernel once per
// team thread on its row range; oneDNN is held to one thread the same way).
//   ./build/bench/onednn_bench --benchmark_counters_tabular=true
// oneDNN's F16 weights are converted to BF16 here (its CPU matmul has no f16 path without
// AVX512-FP16): a speed reference with other rounding, not a drop-in replacement.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "ref/matmul_ref.h"
#include "tensor/dtype.h"

namespace {

using trine::TypeId;

struct Shape {
  const char* name;
  int64_t rows, cols;
};
constexpr Shape kShapes[] = {{"attn 2048x2048", 2048, 2048}, {"ffn 8192x2048", 8192, 2048}};

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.5f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

// trine: the bound kernel for `type` weights (f32_act: fp32 activations; else the type's own).
void Trine(benchmark::State& state, TypeId type, bool f32_act) {
  const Shape& s = kShapes[state.range(0)];
  const int n_tokens = static_cast<int>(state.range(1));
  const std::vector<float> wf = RandomFloats(static_cast<size_t>(s.rows * s.cols), 3);
  std::vector<uint8_t> wdata(static_cast<size_t>(s.rows * s.cols) * (type == TypeId::kF32 ? 4 : 2));
  if (type == TypeId::kF32) {
    std::memcpy(wdata.data(), wf.data(), wdata.size());
  } else {
    auto* h = reinterpret_cast<uint16_t*>(wdata.data());
    for (size_t i = 0; i < wf.size(); ++i) h[i] = trine::Fp32ToFp16(wf[i]);
  }
  trine::kernels::WeightView w;
  w.type = type;
  w.rows = s.rows;
  w.cols = s.cols;
  w.data = wdata.data();
  w.row_bytes = static_cast<size_t>(s.cols) * (type == TypeId::kF32 ? 4 : 2);
  w.f32_activations = f32_act;
  const trine::kernels::Isa isa = trine::kernels::ActiveIsa();
  std::string kname;
  const trine::kernels::GemmFn fn = f32_act ? trine::kernels::SelectGemmF32Act(type, isa, &kname)
                                            : trine::kernels::SelectGemm(type, isa, trine::kernels::TernaryVariant::kInt8Dot, &kname);
  const size_t act = trine::kernels::ActivationBytesFor(w);
  std::vector<uint8_t> xq(act * static_cast<size_t>(n_tokens));
  const std::vector<float> x = RandomFloats(static_cast<size_t>(s.cols * n_tokens), 5);
  for (int t = 0; t < n_tokens; ++t) {
    trine::kernels::QuantizeActivationsFor(w, x.data() + t * s.cols, xq.data() + act * static_cast<size_t>(t));
  }
  std::vector<float> y(static_cast<size_t>(s.rows * n_tokens));
  for (auto _ : state) {
    fn(w, xq.data(), act, n_tokens, y.data(), s.rows, 0, s.rows, 1.0f);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(kname);
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(s.rows * s.cols) * n_tokens *
                                                     static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// oneDNN matmul: dst (n_tokens x rows) = src (n_tokens x cols) * weights^T, weights stored as
// trine stores them (rows x cols, row-major), in `wt` (f32 or bf16); src f32 (bf16 for bf16).
void OneDnn(benchmark::State& state, dnnl::memory::data_type wt) {
  const Shape& s = kShapes[state.range(0)];
  const int64_t M = state.range(1), N = s.rows, K = s.cols;
  using dt = dnnl::memory::data_type;
  const dt src_t = wt == dt::bf16 ? dt::bf16 : dt::f32;
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream strm(eng);
  const dnnl::memory::desc src_md({M, K}, src_t, dnnl::memory::dims{K, 1});
  const dnnl::memory::desc wei_md({K, N}, wt, dnnl::memory::dims{1, K});  // (rows x cols) row-major, seen as K x N
  const dnnl::memory::desc dst_md({M, N}, dt::f32, dnnl::memory::dims{N, 1});
  dnnl::matmul::primitive_desc pd;
  try {
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src_md, wei_md, dst_md), eng);
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN has no matmul for this type here: ") + e.what()).c_str());
    return;
  }
  dnnl::matmul prim(pd);
  const std::vector<float> wf = RandomFloats(static_cast<size_t>(N * K), 3), xf = RandomFloats(static_cast<size_t>(M * K), 5);
  dnnl::memory src(src_md, eng), wei(wei_md, eng), dst(dst_md, eng);
  // Fill through reorders from f32 (bf16 conversion by oneDNN itself).
  const auto fill = [&](dnnl::memory& m, const dnnl::memory::desc& f32_md, const std::vector<float>& v) {
    dnnl::memory tmp(f32_md, eng, const_cast<float*>(v.data()));
    dnnl::reorder(tmp, m).execute(strm, tmp, m);
  };
  fill(src, dnnl::memory::desc({M, K}, dt::f32, dnnl::memory::dims{K, 1}), xf);
  fill(wei, dnnl::memory::desc({K, N}, dt::f32, dnnl::memory::dims{1, K}), wf);
  strm.wait();
  for (auto _ : state) {
    prim.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}});
    strm.wait();
  }
  state.SetLabel(std::string("oneDNN ") + (wt == dt::bf16 ? "bf16 x bf16" : "f32 x f32") + " (" +
                 pd.impl_info_str() + ")");
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * static_cast<double>(N * K * M) * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void Args(benchmark::internal::Benchmark* b) {
  for (int s = 0; s < 2; ++s) {
    for (int t : {1, 16, 64}) b->Args({s, t});
  }
  b->ArgNames({"shape", "tokens"});
}

BENCHMARK_CAPTURE(Trine, f32_weights_f32_act, TypeId::kF32, true)->Apply(Args);
BENCHMARK_CAPTURE(OneDnn, f32_weights_f32_act, dnnl::memory::data_type::f32)->Apply(Args);
BENCHMARK_CAPTURE(Trine, f16_weights_f32_act, TypeId::kF16, true)->Apply(Args);
BENCHMARK_CAPTURE(Trine, f16_weights_f16_act, TypeId::kF16, false)->Apply(Args);
BENCHMARK_CAPTURE(OneDnn, bf16_weights_bf16_act, dnnl::memory::data_type::bf16)->Apply(Args);

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);  // one thread for both sides (trine's kernels run one call per thread)
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
