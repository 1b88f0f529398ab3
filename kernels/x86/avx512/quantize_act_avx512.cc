// AVX-512 (F, BW, VL, DQ) activation quantizers: Q8_K (TQ/K-quant weights), Q8_0 (Q4_0/Q8_0
// weights) and F16, byte-identical to the scalar references (QuantizeRowQ8_K in
// src/tensor/quantize_ref.cc, QuantizeRowQ8_0Act and QuantizeRowF16) for every input, NaN, inf and
// denormals included. Compiled with its own flags; reached through KernelTable::quantize_*.
//
// How the reference's corner cases map onto vector instructions:
//  * Q8_K's block max is the first element with the largest |x| under a strict `>` scan, NaN never
//    winning: vmaxps(|x|, acc) returns acc when |x| is NaN, and the sign comes from the first lane
//    whose |x| equals that maximum (cmpeq is false for NaN).
//  * NearestInt (x + 1.5 * 2^23, mantissa bits - 2^22) is replayed as the same add/and/sub, so
//    NaN payloads, inf (an infinite iscale after a denormal max) and every other value give the
//    reference's int, which is clamped to 127 and stored by truncation (vpmovdb), like the int8
//    cast. bsums are summed from the stored bytes (vpsadbw on bytes ^ 0x80).
//  * Q8_0: fmax ignores NaN like vmaxps(|x|, acc); (int8_t)nearbyintf(v) is cvttss2si's int32
//    (INT_MIN for NaN / out of range) truncated to its low byte = vcvtps2dq (round to nearest even
//    under the default MXCSR) then vpmovdb.
//  * F16: vcvtps2ph rounds to nearest even like Fp32ToFp16 (subnormals and overflow included);
//    NaN lanes are replaced by Fp32ToFp16's canonical sign | 0x7E00.
#include <immintrin.h>

#include <cstring>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

inline __m512 Abs(__m512 v) { return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF))); }

// NearestInt (src/tensor/quantize_ref.cc) lane-wise, clamped to 127 as QuantizeRowQ8_K does.
inline __m512i NearestIntMin127(__m512 v) {
  const __m512 f = _mm512_add_ps(v, _mm512_set1_ps(12582912.0f));
  const __m512i i = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), _mm512_set1_epi32(0x007FFFFF)),
                                     _mm512_set1_epi32(0x00400000));
  return _mm512_min_epi32(i, _mm512_set1_epi32(127));
}

}  // namespace

void QuantizeQ8KAvx512(const float* src, void* dst, int64_t n) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  // Position of group g's sum in the vpmovdw result below (see the unpack / shift there).
  const __m256i order = _mm256_setr_epi16(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    __m512 m0 = _mm512_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    for (int j = 0; j < kQK_K; j += 64) {
      m0 = _mm512_max_ps(Abs(_mm512_loadu_ps(x + j)), m0);  // acc second: a NaN |x| keeps acc
      m1 = _mm512_max_ps(Abs(_mm512_loadu_ps(x + j + 16)), m1);
      m2 = _mm512_max_ps(Abs(_mm512_loadu_ps(x + j + 32)), m2);
      m3 = _mm512_max_ps(Abs(_mm512_loadu_ps(x + j + 48)), m3);
    }
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const __m512 vamax = _mm512_set1_ps(amax);
    int first = 0;
    for (int j = 0; j < kQK_K; j += 16) {
      const __mmask16 eq = _mm512_cmp_ps_mask(Abs(_mm512_loadu_ps(x + j)), vamax, _CMP_EQ_OQ);
      if (eq != 0) {
        first = j + __builtin_ctz(eq);
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const __m512 vs = _mm512_set1_ps(iscale);
    __m512i sums[4];
    for (int k = 0; k < 4; ++k) {
      const float* xk = x + 64 * k;
      __m512i q = _mm512_castsi128_si512(_mm512_cvtepi32_epi8(NearestIntMin127(_mm512_mul_ps(vs, _mm512_loadu_ps(xk)))));
      q = _mm512_inserti32x4(q, _mm512_cvtepi32_epi8(NearestIntMin127(_mm512_mul_ps(vs, _mm512_loadu_ps(xk + 16)))), 1);
      q = _mm512_inserti32x4(q, _mm512_cvtepi32_epi8(NearestIntMin127(_mm512_mul_ps(vs, _mm512_loadu_ps(xk + 32)))), 2);
      q = _mm512_inserti32x4(q, _mm512_cvtepi32_epi8(NearestIntMin127(_mm512_mul_ps(vs, _mm512_loadu_ps(xk + 48)))), 3);
      _mm512_storeu_si512(b[i].qs + 64 * k, q);
      // Per 8 bytes: sum of (q + 128); then qword 0 of each 128-bit lane = its 16 bytes' sum.
      const __m512i s = _mm512_sad_epu8(_mm512_xor_si512(q, bias), _mm512_setzero_si512());
      sums[k] = _mm512_add_epi64(s, _mm512_bsrli_epi128(s, 8));
    }
    // Lane l: dwords [g_l, g_{8+l}, g_{4+l}, g_{12+l}] (each < 2^16), narrowed, reordered, unbiased.
    const __m512i lo = _mm512_unpacklo_epi64(sums[0], sums[1]);
    const __m512i hi = _mm512_unpacklo_epi64(sums[2], sums[3]);
    const __m256i w = _mm512_cvtepi32_epi16(_mm512_or_si512(lo, _mm512_slli_epi64(hi, 32)));
    const __m256i bs = _mm256_sub_epi16(_mm256_permutexvar_epi16(order, w), _mm256_set1_epi16(16 * 128));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].bsums), bs);
    b[i].d = 1.0f / iscale;
  }
}

namespace {

// Lane j = the largest lane of m[j] (no NaN lanes: the callers' maxes ignore NaN already), by a
// reduction network over all 16 vectors at once: 15 vmaxps and 31 shuffles, where one
// _mm512_reduce_max_ps per vector spends 8 dependent operations. Reading the steps: after the
// first two, 128-bit lane L of b[k] holds 4 candidates of block 4k + L; after the last, element i
// of lane L holds block L + 4i, which the final permutation puts back in block order.
inline __m512 HorizontalMax16(const __m512 m[16]) {
  __m512 a[8], b[4], c[2];
  for (int k = 0; k < 8; ++k) {
    a[k] = _mm512_max_ps(_mm512_shuffle_f32x4(m[2 * k], m[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(m[2 * k], m[2 * k + 1], 0xEE));
  }
  for (int k = 0; k < 4; ++k) {
    b[k] = _mm512_max_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], 0xDD));
  }
  for (int k = 0; k < 2; ++k) {
    c[k] = _mm512_max_ps(_mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0x44),
                         _mm512_shuffle_ps(b[2 * k], b[2 * k + 1], 0xEE));
  }
  const __m512 e = _mm512_max_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xDD));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
}

// Block i of QuantizeRowQ8_0Act given its inverse scale `id` (the values' part).
inline void Q8_0Values(const float* x, float id, BlockQ8_0* b) {
  const __m512 vid = _mm512_set1_ps(id);
  const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), vid)));
  const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), vid)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(b->qs), _mm256_set_m128i(q1, q0));
}

}  // namespace

void QuantizeQ8_0Avx512(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  const int64_t nb = n / kQK8_0;
  int64_t i = 0;
  // 16 blocks at a time: their maxima in one vector, then scales and fp16 conversions 16 wide
  // (division and vcvtps2ph round like the scalar / and Fp32ToFp16).
  for (; i + 16 <= nb; i += 16) {
    const float* x = src + i * kQK8_0;
    __m512 m[16];
    for (int j = 0; j < 16; ++j) {
      m[j] = _mm512_max_ps(Abs(_mm512_loadu_ps(x + 32 * j + 16)),
                           _mm512_max_ps(Abs(_mm512_loadu_ps(x + 32 * j)), _mm512_setzero_ps()));
    }
    const __m512 amax = HorizontalMax16(m);
    const __m512 d = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
    const __m512 id = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ),
                                          _mm512_set1_ps(127.0f), amax);
    alignas(64) float ids[16];
    alignas(32) uint16_t dh[16];
    _mm512_store_ps(ids, id);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dh),
                       _mm512_cvtps_ph(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (int j = 0; j < 16; ++j) {
      b[i + j].d = dh[j];
      Q8_0Values(x + 32 * j, ids[j], &b[i + j]);
    }
  }
  for (; i < nb; ++i) {
    const __m512 x0 = _mm512_loadu_ps(src + i * kQK8_0);
    const __m512 x1 = _mm512_loadu_ps(src + i * kQK8_0 + 16);
    const __m512 m = _mm512_max_ps(Abs(x1), _mm512_max_ps(Abs(x0), _mm512_setzero_ps()));
    const float amax = _mm512_reduce_max_ps(m);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = Fp32ToFp16(d);
    Q8_0Values(src + i * kQK8_0, id, &b[i]);
  }
}

void QuantizeF16Avx512(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(src + i);
    const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m256i sign = _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(x), 16));
    const __m256i canon = _mm256_or_si256(_mm256_and_si256(sign, _mm256_set1_epi16(static_cast<short>(0x8000))),
                                          _mm256_set1_epi16(0x7E00));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_mask_blend_epi16(nan, h, canon));
  }
  for (; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
}

}  // namespace trine::kernels
