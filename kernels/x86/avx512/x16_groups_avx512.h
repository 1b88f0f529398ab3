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
#include "x86/x16_walk.h"

namespace trine::kernels {

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

// ForX16Groups over every token pass, group by group: each 16-row group is read from memory once
// and every pass of up to kMax tokens runs over it while it sits in L1 (a TQ2_0 group of a
// 2560-column matrix is 10 KB). With the passes outside (ForTokenPasses around ForX16Groups) the
// row range is streamed from memory once per pass: a batch of 8 decoded sequences read the weights
// twice, 16 of them four times. pass_group(tc, t0, gp, next, out) is ForX16Groups' group function
// for tokens t0 .. t0 + T - 1 (T = decltype(tc)::value). Each (row, token) is computed as before.
template <int kMax, typename PassGroupFn>
inline void ForX16GroupsEachPass(const WeightView& w, int n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1,
                                 float scale, PassGroupFn&& pass_group) {
  for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
    const int64_t lo = g * 16 > r0 ? g * 16 : r0, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
    ForTokenPasses<kMax>(n_tokens, [&](auto tc, int t0) {
      constexpr int T = decltype(tc)::value;
      ForX16Groups<T>(w, t0, y, ldy, lo, hi, scale,
                      [&](const uint8_t* gp, const uint8_t* next, __m512* out) { pass_group(tc, t0, gp, next, out); });
    });
  }
}

// One ternary x16 group (TQ2_0, TQ1_0) against tokens t0 .. t0 + T - 1: per block b,
// block(lines, b, pf, s) leaves in s[t] lane i the sum of code * activation for row i (codes
// t + 1), calling pf.Line(k) before it loads line k, and the reference's float combination
// follows 16 rows wide: acc += (s - block activation sum) * (d_w * d_a).
template <int T, typename BlockFn>
inline void TernaryX16Group(const uint8_t* g, const uint8_t* next, int64_t nb, size_t block_bytes,
                            size_t near_prefetch, int t0, const ActSums& sums, BlockFn&& block, __m512 out[T]) {
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  ForX16Blocks(g, next, nb, block_bytes, near_prefetch, [&](int64_t b, const uint8_t* lines, const LinePrefetch& pf) {
    __m512i s[T];
    block(lines, b, pf, s);
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(g + X16ScalesOffset(b, block_bytes))));
    for (int t = 0; t < T; ++t) {
      const size_t k = static_cast<size_t>((t0 + t) * nb + b);
      const __m512i sumi = _mm512_sub_epi32(s[t], _mm512_set1_epi32(sums.qsum[k]));
      const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(sums.d[k]));
      out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), d));
    }
  });
}

}  // namespace trine::kernels
