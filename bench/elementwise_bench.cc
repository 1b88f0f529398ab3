// The element-wise kernels A/B: the xsimd kernels (kernels/simd/elementwise_xsimd.h, one source
// per ISA) beside what they replace: the scalar forms (kernels/ref/elementwise_ref.cc, built with
// the project's baseline flags and vectorized by the compiler where it can; RoPE's with a
// target_clones FMA clone); and the operators that call them (op/..., on TRINE_ISA's kernels).
// Single-threaded, one call per iteration on one row (RoPE: one token's Q heads), ns per call.
//
// Run: ./build/bench/elementwise_bench --benchmark_repetitions=5
//        --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// Name: <op>/<impl>/<isa>/<size>, impl = xsimd | scalar; op/<op>/<active isa>/<size>.
#include <benchmark/benchmark.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels.h"
#include "ref/elementwise_ref.h"
#include "runtime/ops.h"


namespace {

using trine::kernels::ElementwiseKernels;
using trine::kernels::Isa;

std::vector<float> Random(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(rng);
  return v;
}

void Add(const std::string& name, std::function<void(benchmark::State&)> fn) {
  benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kNanosecond)->MeasureProcessCPUTime();
}

void RegisterRowOps(const std::string& isa, const char* impl, const ElementwiseKernels& k) {
  for (int64_t n : {2048, 2560, 6912}) {
    const std::string sz = "/" + isa + "/" + std::to_string(n);
    Add(std::string("swiglu/") + impl + sz, [n, f = k.swiglu](benchmark::State& st) {
      const auto g = Random(static_cast<size_t>(n), 3.0f, 1), u = Random(static_cast<size_t>(n), 1.0f, 2);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        f(g.data(), u.data(), o.data(), n);
        benchmark::DoNotOptimize(o.data());
      }
    });
    Add(std::string("rmsnorm/") + impl + sz, [n, rs = k.rms_scale, sm = k.scale_mul](benchmark::State& st) {
      const auto x = Random(static_cast<size_t>(n), 3.0f, 3), w = Random(static_cast<size_t>(n), 1.0f, 4);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        sm(x.data(), rs(x.data(), n, 1e-5f), w.data(), o.data(), n);
        benchmark::DoNotOptimize(o.data());
      }
    });
    Add(std::string("relu2/") + impl + sz, [n, f = k.relu_sqr_glu](benchmark::State& st) {
      const auto g = Random(static_cast<size_t>(n), 3.0f, 5), u = Random(static_cast<size_t>(n), 1.0f, 6);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        f(g.data(), u.data(), o.data(), n);
        benchmark::DoNotOptimize(o.data());
      }
    });
  }
  // One token's Q: Llama-3.2-1B 32 x 64, BitNet b1.58 2B4T 20 x 128 (the rotation only; the
  // cos/sin cache ops::Rope builds per call is the same for both).
  struct Q {
    const char* name;
    int heads, dim;
  };
  for (const Q q : {Q{"llama1b.q", 32, 64}, Q{"bitnet2b.q", 20, 128}}) {
    for (bool neox : {false, true}) {
      const std::string name = std::string("rope_") + (neox ? "neox/" : "normal/") + impl + "/" + isa + "/" + q.name;
      Add(name, [q, neox, k](benchmark::State& st) {
        const int half = q.dim / 2;
        auto x = Random(static_cast<size_t>(q.heads * q.dim), 1.0f, 7);
        std::vector<float> cs(static_cast<size_t>(half)), sn(cs.size()), m1(2 * cs.size()), m2(2 * cs.size());
        for (int i = 0; i < half; ++i) {
          cs[static_cast<size_t>(i)] = std::cos(0.1f * static_cast<float>(i));
          sn[static_cast<size_t>(i)] = std::sin(0.1f * static_cast<float>(i));
          m1[static_cast<size_t>(2 * i)] = cs[static_cast<size_t>(i)];
          m1[static_cast<size_t>(2 * i + 1)] = sn[static_cast<size_t>(i)];
          m2[static_cast<size_t>(2 * i)] = sn[static_cast<size_t>(i)];
          m2[static_cast<size_t>(2 * i + 1)] = cs[static_cast<size_t>(i)];
        }
        for (auto _ : st) {
          if (k.rope_neox == nullptr) {
            trine::kernels::RotatePairsRef(x.data(), q.heads, q.dim, half, neox, cs.data(), sn.data());
          } else if (neox) {
            k.rope_neox(x.data(), q.heads, q.dim, half, cs.data(), sn.data());
          } else {
            k.rope_pairs(x.data(), q.heads, q.dim, half, m1.data(), m2.data());
          }
          benchmark::DoNotOptimize(x.data());
        }
      });
    }
  }
}

// The operators as the forward pass calls them (src/runtime/ops.cc, one thread), on the kernels
// of the active ISA: run under TRINE_ISA=ref, avx2 and avx512 to compare whole steps (RoPE's
// includes its cos/sin cache and, for the vector normal mode, the interleaved factors).
void RegisterOps() {
  const std::string isa = trine::kernels::IsaName(trine::kernels::ActiveIsa());
  for (int n : {2048, 2560, 6912}) {
    Add("op/rmsnorm/" + isa + "/" + std::to_string(n), [n](benchmark::State& st) {
      const auto x = Random(static_cast<size_t>(n), 3.0f, 3), w = Random(static_cast<size_t>(n), 1.0f, 4);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        trine::ops::RmsNorm(x.data(), w.data(), o.data(), 1, n, 1e-5f);
        benchmark::DoNotOptimize(o.data());
      }
    });
    Add("op/swiglu/" + isa + "/" + std::to_string(n), [n](benchmark::State& st) {
      const auto g = Random(static_cast<size_t>(n), 3.0f, 1), u = Random(static_cast<size_t>(n), 1.0f, 2);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        trine::ops::SwiGlu(g.data(), u.data(), o.data(), 1, n);
        benchmark::DoNotOptimize(o.data());
      }
    });
    Add("op/relu2/" + isa + "/" + std::to_string(n), [n](benchmark::State& st) {
      const auto g = Random(static_cast<size_t>(n), 3.0f, 5), u = Random(static_cast<size_t>(n), 1.0f, 6);
      std::vector<float> o(static_cast<size_t>(n));
      for (auto _ : st) {
        trine::ops::ReluSqrGlu(g.data(), u.data(), o.data(), n);
        benchmark::DoNotOptimize(o.data());
      }
    });
  }
  struct Q {
    const char* name;
    int heads, dim;
  };
  for (const Q q : {Q{"llama1b.q", 32, 64}, Q{"bitnet2b.q", 20, 128}}) {
    for (bool neox : {false, true}) {
      Add(std::string("op/rope_") + (neox ? "neox/" : "normal/") + isa + "/" + q.name, [q, neox](benchmark::State& st) {
        auto x = Random(static_cast<size_t>(q.heads * q.dim), 1.0f, 7);
        trine::ops::RopeParams p;
        p.n_rot = q.dim;
        p.neox = neox;
        int pos = 0;
        for (auto _ : st) {
          trine::ops::Rope(x.data(), q.heads, q.dim, 1 + (pos++ & 1023), p);
          benchmark::DoNotOptimize(x.data());
        }
      });
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  ElementwiseKernels scalar;
  scalar.swiglu = trine::kernels::SwiGluVecRef;
  scalar.rms_scale = trine::kernels::RmsScaleRef;
  scalar.scale_mul = trine::kernels::ScaleMulRef;
  scalar.relu_sqr_glu = trine::kernels::ReluSqrGluRef;
  RegisterRowOps("any", "scalar", scalar);
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!trine::kernels::IsaSupported(isa)) continue;
    const ElementwiseKernels& k = trine::kernels::SelectElementwise(isa);
    if (k.rms_scale != nullptr) RegisterRowOps(trine::kernels::IsaName(isa), "xsimd", k);
  }
  RegisterOps();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
