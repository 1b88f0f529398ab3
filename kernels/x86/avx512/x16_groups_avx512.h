// The skeleton every AVX-512 kernel on the x16 layout (WeightView::interleave = 16: TQ2_0, TQ1_0,
// Q4_0, Q4_K) shares: token passes of up to kMax tokens, the 16-row groups of a row range with
// their outputs stored under the range's row mask, and (ternary types) the per-block loop of a
// group with its prefetches and the reference's float combination. Only the per-block integer
// work differs between the types. Included by AVX-512 translation units only; the lambdas make
// every instantiation local to its translation unit, whatever its flags.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels.h"
#include "x86/q8k_act_sums.h"

namespace trine::kernels {

namespace x16_detail {

template <int T, typename PassFn>
inline void RemainderPass(int rem, int t0, PassFn& pass) {
  if constexpr (T > 0) {
    if (rem == T) {
      pass(std::integral_constant<int, T>{}, t0);
      return;
    }
    RemainderPass<T - 1>(rem, t0, pass);
  }
}

}  // namespace x16_detail

// pass(std::integral_constant<int, T>{}, t0) for tokens t0 .. t0 + T - 1: passes of kMax tokens,
// then one pass with the rest (a group is a few tens of KB, so later passes read it from L1/L2).
template <int kMax, typename PassFn>
inline void ForTokenPasses(int n_tokens, PassFn&& pass) {
  int t0 = 0;
  for (; t0 + kMax <= n_tokens; t0 += kMax) pass(std::integral_constant<int, kMax>{}, t0);
  x16_detail::RemainderPass<kMax - 1>(n_tokens - t0, t0, pass);
}

// For each 16-row group covering rows [r0, r1): group(gp, next, out) fills out[t] (16 rows) for
// tokens t0 + t, t < T (next: the following group, for prefetching); the rows inside [r0, r1) are
// stored times tensor_scale, then times scale.
template <int T, typename GroupFn>
inline void ForX16Groups(const WeightView& w, int t0, float* y, int64_t ldy, int64_t r0, int64_t r1, float scale,
                         GroupFn&& group) {
  const __m512 ts = _mm512_set1_ps(w.tensor_scale), sc = _mm512_set1_ps(scale);
  for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
    const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
    __m512 out[T];
    group(gp, gp + w.group_bytes, out);
    const int64_t lo = g * 16 > r0 ? g * 16 : r0;
    const int64_t hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
    const __mmask16 mask = static_cast<__mmask16>(((1u << (hi - g * 16)) - 1) & ~((1u << (lo - g * 16)) - 1));
    for (int t = 0; t < T; ++t) {
      _mm512_mask_storeu_ps(y + static_cast<int64_t>(t0 + t) * ldy + g * 16, mask,
                            _mm512_mul_ps(_mm512_mul_ps(out[t], ts), sc));
    }
  }
}

// One ternary x16 group (TQ2_0, TQ1_0) against tokens t0 .. t0 + T - 1: per block b,
// block(lines, b, s) leaves in s[t] lane i the sum of code * activation for row i (codes t + 1),
// and the reference's float combination follows 16 rows wide: acc += (s - block activation sum)
// * (d_w * d_a). The group is one linear stream: each block step prefetches near_prefetch bytes
// ahead of itself into L1 (0: none) and then the next group's block into L2, in that order
// (kernels/README.md, "Prefetch").
template <int T, typename BlockFn>
inline void TernaryX16Group(const uint8_t* g, const uint8_t* next, int64_t nb, size_t block_bytes,
                            size_t near_prefetch, int t0, const ActSums& sums, BlockFn&& block, __m512 out[T]) {
  const size_t scale_bytes = X16ScaleBytes(nb);
  const uint8_t* codes = g + scale_bytes;
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  for (size_t o = 0; o < scale_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(next + o), _MM_HINT_T1);
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* lines = codes + static_cast<size_t>(b) * block_bytes;
    const uint8_t* pf = next + scale_bytes + static_cast<size_t>(b) * block_bytes;
    if (near_prefetch != 0) {
      for (size_t o = 0; o < block_bytes; o += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(lines + near_prefetch + o), _MM_HINT_T0);
      }
    }
    for (size_t o = 0; o < block_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(pf + o), _MM_HINT_T1);
    __m512i s[T];
    block(lines, b, s);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(g + 32 * b)));
    for (int t = 0; t < T; ++t) {
      const size_t k = static_cast<size_t>((t0 + t) * nb + b);
      const __m512i sumi = _mm512_sub_epi32(s[t], _mm512_set1_epi32(sums.qsum[k]));
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(sums.d[k]));
      out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), d));
    }
  }
}

}  // namespace trine::kernels
