// Reference dequantization throughput per type on a BitNet-2B-shaped row (2560 inputs).
// Run: ./build/bench/quantize_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "tensor/dtype.h"

namespace {

void BM_DequantizeRow(benchmark::State& state) {
  const trine::TypeId type = static_cast<trine::TypeId>(state.range(0));
  const int64_t n = 2560 * 16;
  std::vector<float> src(n);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (auto& v : src) v = dist(rng);
  uint64_t bytes = 0;
  trine::TensorBytes(type, n, &bytes);
  std::vector<uint8_t> q(bytes);
  if (!trine::QuantizeTensor(type, src.data(), n, 2560, q.data()).ok()) {
    state.SkipWithError("quantize failed");
    return;
  }
  std::vector<float> out(n);
  for (auto _ : state) {
    benchmark::DoNotOptimize(trine::DequantizeTensor(type, q.data(), q.size(), n, out.data()).ok());
  }
  state.SetLabel(trine::TypeName(type));
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

}  // namespace

BENCHMARK(BM_DequantizeRow)->DenseRange(0, static_cast<int>(trine::TypeId::kCount) - 1);
BENCHMARK_MAIN();
