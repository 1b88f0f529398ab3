// AVX-512 fp16-cache attention: the same operations as AttnF16Ref, 16 lanes at a time (F16C
// conversions round to nearest even like Fp32ToFp16, and every lane does its own fused
// multiply-add), so the results are bit-identical.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/fp16.h"
#include "ref/attention_ref.h"

namespace trine::kernels {

namespace {

inline float Hsum16Tree(__m512 a) {
  // a[l] + a[l+8], then + [l+4], then (c0 + c2) + (c1 + c3): the reference's tree.
  const __m256 b = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));  // [c0 + c2, c1 + c3, ...]
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

}  // namespace

void AttnF16Avx512(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int hd,
                   float scale, float* out) {
  if (hd % 16 != 0 || hd > 512) {
    AttnF16Ref(q, k, v, stride, n_kv, hd, scale, out);
    return;
  }
  const int np = hd & ~63;
  const float* table = Fp16ToFp32Table();
  alignas(64) uint16_t acc16[512];
  for (int i = 0; i < hd; ++i) acc16[i] = 0;
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  for (int p = 0; p < n_kv; ++p) {
    const uint16_t* kp = k + static_cast<size_t>(p) * stride;
    double sumf = 0.0;
    if (np > 0) {
      __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      for (int i = 0; i < np; i += 64) {
        a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + i))),
                             _mm512_loadu_ps(q + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + i + 16))),
                             _mm512_loadu_ps(q + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + i + 32))),
                             _mm512_loadu_ps(q + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + i + 48))),
                             _mm512_loadu_ps(q + i + 48), a3);
      }
      sumf = static_cast<double>(Hsum16Tree(_mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3))));
    }
    for (int i = np; i < hd; ++i) sumf += static_cast<double>(table[kp[i]] * q[i]);
    const float s = static_cast<float>(sumf) * scale;
    float ms = 1.0f, vs = 1.0f;
    if (s > max_s) {
      ms = std::exp(max_s - s);
      max_s = s;
      const __m512 vms = _mm512_set1_ps(ms);
      for (int i = 0; i < hd; i += 16) {
        const __m512 a = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(acc16 + i)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(acc16 + i),
                           _mm512_cvtps_ph(_mm512_mul_ps(a, vms), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      }
    } else {
      vs = std::exp(s - max_s);
    }
    const uint16_t* vp = v + static_cast<size_t>(p) * stride;
    const __m512 vvs = _mm512_set1_ps(vs);
    for (int i = 0; i < hd; i += 16) {
      const __m512 a = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(acc16 + i)));
      const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(vp + i)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(acc16 + i),
                         _mm512_cvtps_ph(_mm512_fmadd_ps(x, vvs, a), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    sum = std::fma(sum, ms, vs);
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < hd; ++i) out[i] = table[acc16[i]] * inv;
}

// SwiGLU's vector part, bit-identical to ops::SwiGlu (src/model/ops.cc) for n a multiple of 16:
// out = g / (1 + ExpfPoly(-g)) * u with ExpfPoly's exact operation sequence (its fused
// multiply-adds as vfmadd, ldexp as vscalefps: both one correctly rounded operation).
void SwiGluVecAvx512(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 shift = _mm512_set1_ps(0x1.8p23f), log2e = _mm512_set1_ps(0x1.715476p+0f);
  const __m512 ln2_hi = _mm512_set1_ps(0x1.62e4p-1f), ln2_lo = _mm512_set1_ps(0x1.7f7d1cp-20f);
  const __m512 c5 = _mm512_set1_ps(0x1.0e4020p-7f), c4 = _mm512_set1_ps(0x1.573e2ep-5f);
  const __m512 c3 = _mm512_set1_ps(0x1.555e66p-3f), c2 = _mm512_set1_ps(0x1.fffdb6p-2f);
  const __m512 c1 = _mm512_set1_ps(0x1.ffffecp-1f), one = _mm512_set1_ps(1.0f);
  const __m512 limit = _mm512_set1_ps(192.0f), zero = _mm512_setzero_ps(), inf = _mm512_set1_ps(INFINITY);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i + 16 <= n; i += 16) {
    const __m512 g = _mm512_loadu_ps(gate + i);
    const __m512 x = _mm512_xor_ps(g, sign);  // -g
    const __m512 z = _mm512_fmadd_ps(x, log2e, shift);
    const __m512 nn = _mm512_sub_ps(z, shift);
    const __m512 neg_n = _mm512_xor_ps(nn, sign);
    const __m512 b = _mm512_fmadd_ps(neg_n, ln2_lo, _mm512_fmadd_ps(neg_n, ln2_hi, x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_fmadd_ps(c5, b, c4), u, _mm512_fmadd_ps(c3, b, c2)), u,
                                     _mm512_fmadd_ps(c1, b, one));
    __m512 e = _mm512_scalef_ps(j, nn);
    // |n| > 192: 0 for n <= 0, +inf otherwise (NaN n compares false and keeps the scaled value).
    const __mmask16 over = _mm512_cmp_ps_mask(_mm512_abs_ps(nn), limit, _CMP_GT_OQ);
    const __mmask16 nonpos = _mm512_cmp_ps_mask(nn, zero, _CMP_LE_OQ);
    e = _mm512_mask_blend_ps(over, e, _mm512_mask_blend_ps(nonpos, inf, zero));
    const __m512 o = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_loadu_ps(up + i));
    _mm512_storeu_ps(out + i, o);
  }
}

}  // namespace trine::kernels
