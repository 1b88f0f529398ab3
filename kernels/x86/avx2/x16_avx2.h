// What the AVX2 kernels on the x16 layout share (TQ2_0, Q4_0, Q4_K, Q6_K): an 8-row half of a
// 64-byte line is one ymm of rows in the lanes, multiplied against a broadcast of the 4 activation
// bytes its dwords meet, and stored under a mask of the rows in the caller's range. AVX2
// translation units only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels.h"
#include "x86/x16_walk.h"

namespace trine::kernels {

inline __m256i BroadcastAct4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// fp16 values in the low (hi = false) or high 16 bits of each int32 lane, to fp32.
inline __m256 HalvesToFloat(__m256i v, bool hi) {
  const __m256i lo_ctl = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                          0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i hi_ctl = _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1,  //
                                          2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, hi ? hi_ctl : lo_ctl), 0x08);
  return _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
}

// Lanes of rows [lo, hi) among the 8 rows starting at row0, as a maskstore mask.
inline __m256i RowMask8(int64_t row0, int64_t lo, int64_t hi) {
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(row0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(static_cast<int>(lo) - 1));
  const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), idx);
  return _mm256_and_si256(ge, lt);
}

// For each 16-row group of [r0, r1), every pass of up to kMax tokens while the group sits in
// L1/L2: pass(tc, t0, gp, out) fills out[h][t] (rows 8h .. 8h + 7 of group gp, token t0 + t,
// T = decltype(tc)::value); the rows inside [r0, r1) are stored times tensor_scale, then scale.
template <int kMax, typename PassFn>
inline void ForX16GroupPassesAvx2(const WeightView& w, int n_tokens, float* y, int64_t ldy, int64_t r0, int64_t r1,
                                  float scale, PassFn&& pass) {
  const __m256 ts = _mm256_set1_ps(w.tensor_scale), sc = _mm256_set1_ps(scale);
  for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
    const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
    const int64_t lo = g * 16 > r0 ? g * 16 : r0, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
    const __m256i mask[2] = {RowMask8(g * 16, lo, hi), RowMask8(g * 16 + 8, lo, hi)};
    ForTokenPasses<kMax>(n_tokens, [&](auto tc, int t0) {
      constexpr int T = decltype(tc)::value;
      __m256 out[2][T];
      pass(tc, t0, gp, out);
      for (int t = 0; t < T; ++t) {
        for (int h = 0; h < 2; ++h) {
          _mm256_maskstore_ps(y + static_cast<int64_t>(t0 + t) * ldy + g * 16 + 8 * h, mask[h],
                              _mm256_mul_ps(_mm256_mul_ps(out[h][t], ts), sc));
        }
      }
    });
  }
}

}  // namespace trine::kernels
