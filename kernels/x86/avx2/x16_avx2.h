// What the AVX2 kernels on the x16 layout share (TQ2_0 and Q4_0): an 8-row half of a 64-byte line
// is one ymm of rows in the lanes, multiplied against a broadcast of the 4 activation bytes its
// dwords meet, and stored under a mask of the rows in the caller's range. AVX2 translation units
// only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace trine::kernels {

inline __m256i BroadcastAct4(const int8_t* a) {
  int32_t v;
  std::memcpy(&v, a, 4);
  return _mm256_set1_epi32(v);
}

// Lanes of rows [lo, hi) among the 8 rows starting at row0, as a maskstore mask.
inline __m256i RowMask8(int64_t row0, int64_t lo, int64_t hi) {
  const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(row0)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i ge = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(static_cast<int>(lo) - 1));
  const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), idx);
  return _mm256_and_si256(ge, lt);
}

}  // namespace trine::kernels
