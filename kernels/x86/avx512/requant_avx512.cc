// AVX-512 row converters for load-time requantization of the output head (Model::SetOutputType):
// Q6_K rows to fp32 and fp32 rows to Q4_0, byte-identical to the scalar DequantizeRowQ6_K and
// QuantizeRowQ4_0 (src/tensor/quantize_ref.cc). Requantizing a 128256 x 2560 Q6_K head to Q4_0
// is 328M values: the scalar pair takes ~0.6 s of every load that applies such a plan.
// Compiled with its own flags; reached through KernelTable::dequantize_q6_K / quantize_q4_0.
#include <immintrin.h>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {

// Value 128h + 32q + l (l < 32) of a block: low 4 bits from ql[64h + 32(q & 1) + l] (low nibble
// for q < 2, high for q >= 2), top 2 bits at bit 2q of qh[32h + l]; it is
// (d * scales[8h + l / 16 + 2q]) * (bits - 32), the reference's order of operations.
void DequantizeQ6_KAvx512(const void* src, float* dst, int64_t n) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3), b32 = _mm512_set1_epi32(32);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      for (int l0 = 0; l0 < 32; l0 += 16) {
        const __m512i qh = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qh + 32 * h + l0)));
        for (int q = 0; q < 4; ++q) {
          const __m512i ql = _mm512_cvtepu8_epi32(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].ql + 64 * h + 32 * (q & 1) + l0)));
          const __m512i nib = _mm512_and_si512(q < 2 ? ql : _mm512_srli_epi32(ql, 4), m15);
          const __m512i top = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 2u * q), m3), 4);
          const __m512i v = _mm512_sub_epi32(_mm512_or_si512(nib, top), b32);
          const float ds = d * static_cast<float>(b[i].scales[8 * h + l0 / 16 + 2 * q]);
          _mm512_storeu_ps(dst + i * kQK_K + 128 * h + 32 * q + l0, _mm512_mul_ps(_mm512_set1_ps(ds), _mm512_cvtepi32_ps(v)));
        }
      }
    }
  }
}

// Per block of 32: the reference's max is the first element with the largest |x| (strict `<`
// scan; a NaN never wins, as vmaxps(|x|, acc) keeps acc); d = max / -8, id = 1 / d (0 when d is
// 0); each value is (int8_t)(x * id + 8.5f) (vcvttps2dq, then its low byte sign-extended, as the
// cast does on x86), capped at 15, and two nibbles are packed as (q0 | q1 << 4) truncated.
void QuantizeQ4_0Avx512(const float* src, void* dst, int64_t n) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* x = src + i * kQK4_0;
    const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
    const __m512 a0 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x0), abs_mask));
    const __m512 a1 = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x1), abs_mask));
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(a1, _mm512_max_ps(a0, _mm512_setzero_ps())));
    float max = 0.0f;
    if (amax > 0.0f) {
      const __m512 va = _mm512_set1_ps(amax);
      const __mmask16 e0 = _mm512_cmp_ps_mask(a0, va, _CMP_EQ_OQ), e1 = _mm512_cmp_ps_mask(a1, va, _CMP_EQ_OQ);
      max = e0 != 0 ? x[__builtin_ctz(e0)] : x[16 + __builtin_ctz(e1)];
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    const __m512 vid = _mm512_set1_ps(id), half = _mm512_set1_ps(8.5f);
    const __m512i m15 = _mm512_set1_epi32(15);
    auto code = [&](__m512 v) {
      const __m512i t = _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v, vid), half));
      return _mm512_min_epi32(_mm512_srai_epi32(_mm512_slli_epi32(t, 24), 24), m15);
    };
    const __m512i packed = _mm512_or_si512(code(x0), _mm512_slli_epi32(code(x1), 4));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].qs), _mm512_cvtepi32_epi8(packed));
  }
}

}  // namespace trine::kernels
