// Streaming read bandwidth (see membw.h). The read loop uses the widest loads the CPU has
// (AVX-512, AVX2, SSE2 on x86; plain 64-bit adds elsewhere) with four independent accumulators:
// on this project's 2-core Zen 4 a scalar or SSE2 loop caps one thread at 10-12 GB/s, below what
// memory delivers (~14.5 GB/s with 32- or 64-byte loads), so the loop form matters. Each wide
// variant is one function with a `target` attribute, chosen at run time, so the binary runs on
// any x86-64 CPU (no global -march).
#include "membw.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define TRINE_MEMBW_X86 1
#endif

namespace trine::cli {
namespace {

// Each sums words [begin, end) of d (a multiple of 32 words apart) with four independent
// accumulators. The OpenMP region lives in ParallelSum, outside these functions: clang does not
// carry a `target` attribute into the function it outlines for a parallel region.
using RangeSum = uint64_t (*)(const uint64_t* d, int64_t begin, int64_t end);

#if TRINE_MEMBW_X86
// GCC 12's AVX-512 headers trip a false uninitialized warning on lanes they leave undefined by
// design (see src/CMakeLists.txt for the kernels' equivalent).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) uint64_t SumAvx512(const uint64_t* d, int64_t begin, int64_t end) {
  __m512i a = _mm512_setzero_si512(), b = a, c = a, e = a;
  for (int64_t i = begin; i < end; i += 32) {
    a = _mm512_add_epi64(a, _mm512_load_si512(d + i));
    b = _mm512_add_epi64(b, _mm512_load_si512(d + i + 8));
    c = _mm512_add_epi64(c, _mm512_load_si512(d + i + 16));
    e = _mm512_add_epi64(e, _mm512_load_si512(d + i + 24));
  }
  return static_cast<uint64_t>(_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, e))));
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

__attribute__((target("avx2"))) uint64_t SumAvx2(const uint64_t* d, int64_t begin, int64_t end) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, e = a;
  for (int64_t i = begin; i < end; i += 16) {
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(d + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(d + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(d + i + 8)));
    e = _mm256_add_epi64(e, _mm256_load_si256(reinterpret_cast<const __m256i*>(d + i + 12)));
  }
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, e)));
  return t[0] + t[1] + t[2] + t[3];
}

uint64_t SumSse2(const uint64_t* d, int64_t begin, int64_t end) {
  __m128i a = _mm_setzero_si128(), b = a, c = a, e = a;
  for (int64_t i = begin; i < end; i += 8) {
    a = _mm_add_epi64(a, _mm_load_si128(reinterpret_cast<const __m128i*>(d + i)));
    b = _mm_add_epi64(b, _mm_load_si128(reinterpret_cast<const __m128i*>(d + i + 2)));
    c = _mm_add_epi64(c, _mm_load_si128(reinterpret_cast<const __m128i*>(d + i + 4)));
    e = _mm_add_epi64(e, _mm_load_si128(reinterpret_cast<const __m128i*>(d + i + 6)));
  }
  alignas(16) uint64_t t[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(t), _mm_add_epi64(_mm_add_epi64(a, b), _mm_add_epi64(c, e)));
  return t[0] + t[1];
}
#else
uint64_t SumPortable(const uint64_t* d, int64_t begin, int64_t end) {
  uint64_t a = 0, b = 0, c = 0, e = 0;
  for (int64_t i = begin; i < end; i += 4) {
    a += d[i];
    b += d[i + 1];
    c += d[i + 2];
    e += d[i + 3];
  }
  return a + b + c + e;
}
#endif

// Static partition of [0, n) in 32-word steps: each thread reads one contiguous range.
uint64_t ParallelSum(RangeSum sum, const uint64_t* d, int64_t n, int n_threads) {
  uint64_t total = 0;
  const int64_t steps = n / 32;
#pragma omp parallel num_threads(n_threads) reduction(+ : total)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t begin = steps * t / nt * 32, end = steps * (t + 1) / nt * 32;
    total += sum(d, begin, end);
  }
  return total;
}

}  // namespace

MemoryBandwidth::MemoryBandwidth(size_t bytes) {
  n_words_ = bytes / 256 * 32;  // whole 256-byte steps of the widest loop
  if (n_words_ == 0) return;
  try {
    buf_ = PageBuffer(n_words_ * sizeof(uint64_t), HugePages::kAtFault);
  } catch (const std::bad_alloc&) {
    n_words_ = 0;
    return;
  }
  data_ = reinterpret_cast<uint64_t*>(buf_.data());
  const int64_t n = static_cast<int64_t>(n_words_);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data_[i] = static_cast<uint64_t>(i);
#if TRINE_MEMBW_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    loop_ = "avx512";
  } else if (__builtin_cpu_supports("avx2")) {
    loop_ = "avx2";
  } else {
    loop_ = "sse2";
  }
#endif
}


double MemoryBandwidth::ReadOnce(int n_threads) {
  const int64_t n = static_cast<int64_t>(n_words_);
  const auto t0 = std::chrono::steady_clock::now();
#if TRINE_MEMBW_X86
  const RangeSum sum = loop_ == "avx512" ? SumAvx512 : loop_ == "avx2" ? SumAvx2 : SumSse2;
#else
  const RangeSum sum = SumPortable;
#endif
  const uint64_t total = ParallelSum(sum, data_, n, n_threads);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink_ = sink_ + total;
  return static_cast<double>(bytes()) / secs / 1e9;
}

double MemoryBandwidth::Measure(int n_threads, int reps) {
  if (!ok()) return 0.0;
  ReadOnce(n_threads);
  double best = 0.0;
  for (int r = 0; r < std::max(1, reps); ++r) best = std::max(best, ReadOnce(n_threads));
  return best;
}

}  // namespace trine::cli
