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

}  // namespace trine::kernels
