// AVX2 (+F16C) activation quantizers: Q8_K, Q8_0 and F16, byte-identical to the scalar references
// (QuantizeRowQ8_K, QuantizeRowQ8_0Act, QuantizeRowF16) for every input. The corner-case mapping
// is kernels/x86/avx512/quantize_act_avx512.cc's: vmaxps(|x|, acc) skips NaN like the reference's
// `>` / fmax, NearestInt is replayed as add/and/sub, conversions to int8 keep the low byte of the
// int32 (sign-extended by shifts before the saturating packs, which are then exact), and bsums
// are summed from those bytes.
#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

inline __m256 Abs(__m256 v) { return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))); }

inline float HMax(__m256 v) {  // no NaN lanes here
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// The int8 the reference stores for an int32 value: its low byte, sign-extended.
inline __m256i LowByte(__m256i i) { return _mm256_srai_epi32(_mm256_slli_epi32(i, 24), 24); }

// NearestInt (src/tensor/quantize_ref.cc) lane-wise, clamped to 127, as the stored int8.
inline __m256i Q8KValue(__m256 v) {
  const __m256 f = _mm256_add_ps(v, _mm256_set1_ps(12582912.0f));
  const __m256i i = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), _mm256_set1_epi32(0x007FFFFF)),
                                     _mm256_set1_epi32(0x00400000));
  return LowByte(_mm256_min_epi32(i, _mm256_set1_epi32(127)));
}

// 32 int32 values in [-128, 127] (a, b, c, d in element order) as 32 bytes in order.
inline __m256i PackBytes(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void QuantizeQ8KAvx2(const float* src, void* dst, int64_t n) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    for (int j = 0; j < kQK_K; j += 32) {
      m0 = _mm256_max_ps(Abs(_mm256_loadu_ps(x + j)), m0);  // acc second: a NaN |x| keeps acc
      m1 = _mm256_max_ps(Abs(_mm256_loadu_ps(x + j + 8)), m1);
      m2 = _mm256_max_ps(Abs(_mm256_loadu_ps(x + j + 16)), m2);
      m3 = _mm256_max_ps(Abs(_mm256_loadu_ps(x + j + 24)), m3);
    }
    const float amax = HMax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const __m256 vamax = _mm256_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < kQK_K; j += 8) {
      const int eq = _mm256_movemask_ps(_mm256_cmp_ps(Abs(_mm256_loadu_ps(x + j)), vamax, _CMP_EQ_OQ));
      if (eq != 0) {
        first = j + __builtin_ctz(static_cast<unsigned>(eq));
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m256 vs = _mm256_set1_ps(iscale);
    __m256i half[2];  // per 8 groups: group sums over elements 0-3 (low lane) and 4-7 (high lane)
    for (int h = 0; h < 2; ++h) {
      __m256i pair[2];
      for (int p = 0; p < 2; ++p) {
        __m256i g[4];
        const float* xg = x + 128 * h + 64 * p;
        __m256i v[8];
        for (int k = 0; k < 8; ++k) v[k] = Q8KValue(_mm256_mul_ps(vs, _mm256_loadu_ps(xg + 8 * k)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 128 * h + 64 * p), PackBytes(v[0], v[1], v[2], v[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 128 * h + 64 * p + 32),
                            PackBytes(v[4], v[5], v[6], v[7]));
        for (int k = 0; k < 4; ++k) g[k] = _mm256_add_epi32(v[2 * k], v[2 * k + 1]);
        pair[p] = _mm256_hadd_epi32(_mm256_hadd_epi32(g[0], g[1]), _mm256_hadd_epi32(g[2], g[3]));
      }
      half[h] = _mm256_add_epi32(_mm256_permute2x128_si256(pair[0], pair[1], 0x20),
                                 _mm256_permute2x128_si256(pair[0], pair[1], 0x31));
    }
    const __m256i bs = _mm256_permute4x64_epi64(_mm256_packs_epi32(half[0], half[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].bsums), bs);
    b[i].d = 1.0f / iscale;
  }
}

void QuantizeQ8_0Avx2(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;
    const __m256 x0 = _mm256_loadu_ps(x), x1 = _mm256_loadu_ps(x + 8);
    const __m256 x2 = _mm256_loadu_ps(x + 16), x3 = _mm256_loadu_ps(x + 24);
    const __m256 zero = _mm256_setzero_ps();
    const __m256 m = _mm256_max_ps(_mm256_max_ps(Abs(x0), zero), _mm256_max_ps(Abs(x1), zero));
    const __m256 m2 = _mm256_max_ps(_mm256_max_ps(Abs(x2), zero), _mm256_max_ps(Abs(x3), zero));
    const float amax = HMax(_mm256_max_ps(m, m2));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = Fp32ToFp16(d);
    const __m256 vid = _mm256_set1_ps(id);
    const __m256i q = PackBytes(LowByte(_mm256_cvtps_epi32(_mm256_mul_ps(x0, vid))),
                                LowByte(_mm256_cvtps_epi32(_mm256_mul_ps(x1, vid))),
                                LowByte(_mm256_cvtps_epi32(_mm256_mul_ps(x2, vid))),
                                LowByte(_mm256_cvtps_epi32(_mm256_mul_ps(x3, vid))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs), q);
  }
}

void QuantizeF16Avx2(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(src + i);
    const __m128i h = _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
    const __m128i nan = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    const __m256i hi32 = _mm256_srli_epi32(_mm256_castps_si256(x), 16);
    const __m128i hi = _mm_packus_epi32(_mm256_castsi256_si128(hi32), _mm256_extracti128_si256(hi32, 1));
    const __m128i canon = _mm_or_si128(_mm_and_si128(hi, _mm_set1_epi16(static_cast<short>(0x8000))),
                                       _mm_set1_epi16(0x7E00));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_blendv_epi8(h, canon, nan));
  }
  for (; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
}

}  // namespace trine::kernels
