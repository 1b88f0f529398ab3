// AVX2 attention over F16 / Q8_0 / Q4_0 K and V rows: AttnRef's operations 8 lanes at a time, so
// the results are bit-identical (the fp16 K.Q keeps DotF16Order's 4 x 16 lanes as pairs of 8-lane
// registers and its reduction tree; F16C rounds to nearest even like Fp32ToFp16; every lane does
// its own fused multiply-add; quantized K.Q block sums are exact integers).
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/fp16.h"
#include "ref/attention_ref.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"

namespace trine::kernels {

namespace {

inline __m256 LoadPh8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

inline __m128i ToPh8(__m256 x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

// DotF16Order on an fp16 row: lanes l and l + 8 of each 16-lane accumulator are (lo, hi) pairs.
inline float DotF16Avx2(const uint16_t* kp, const float* q, int hd) {
  const int np = hd & ~63;
  double sumf = 0.0;
  if (np > 0) {
    __m256 lo[4], hi[4];
    for (int j = 0; j < 4; ++j) lo[j] = hi[j] = _mm256_setzero_ps();
    for (int i = 0; i < np; i += 64) {
      for (int j = 0; j < 4; ++j) {
        const int o = i + 16 * j;
        lo[j] = _mm256_fmadd_ps(LoadPh8(kp + o), _mm256_loadu_ps(q + o), lo[j]);
        hi[j] = _mm256_fmadd_ps(LoadPh8(kp + o + 8), _mm256_loadu_ps(q + o + 8), hi[j]);
      }
    }
    // a[l] = (acc0 + acc2) + (acc1 + acc3); b[l] = a[l] + a[l + 8]; c[l] = b[l] + b[l + 4];
    // (c0 + c2) + (c1 + c3).
    const __m256 a_lo = _mm256_add_ps(_mm256_add_ps(lo[0], lo[2]), _mm256_add_ps(lo[1], lo[3]));
    const __m256 a_hi = _mm256_add_ps(_mm256_add_ps(hi[0], hi[2]), _mm256_add_ps(hi[1], hi[3]));
    const __m256 b = _mm256_add_ps(a_lo, a_hi);
    const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
    const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));  // [c0 + c2, c1 + c3, ...]
    sumf = static_cast<double>(_mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d))));
  }
  const float* table = Fp16ToFp32Table();
  for (int i = np; i < hd; ++i) sumf += static_cast<double>(table[kp[i]] * q[i]);
  return static_cast<float>(sumf);
}

// Exact int32 dot of 32 signed bytes x (|x| <= 127) and y (see attention_avx512.cc).
inline int DotI8x32(__m256i x, __m256i y) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p32), _mm256_extracti128_si256(p32, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float DotQuantAvx2(KvRowType type, const uint8_t* k, const BlockQ8_0* q, int nb) {
  float sumf = 0.0f;
  const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int b = 0; b < nb; ++b) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[b].qs));
    int sumi;
    float dk;
    if (type == KvRowType::kQ8_0) {
      const BlockQ8_0* kb = reinterpret_cast<const BlockQ8_0*>(k) + b;
      sumi = DotI8x32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kb->qs)), y);
      dk = Fp16ToFp32(kb->d);
    } else {
      const BlockQ4_0* kb = reinterpret_cast<const BlockQ4_0*>(k) + b;
      const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kb->qs));
      const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
      const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
      sumi = DotI8x32(_mm256_set_m128i(hi, lo), y);
      dk = Fp16ToFp32(kb->d);
    }
    sumf += static_cast<float>(sumi) * (dk * Fp16ToFp32(q[b].d));
  }
  return sumf;
}

}  // namespace

void AttnAvx2(const float* q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale, float* out) {
  if (hd % 32 != 0 || hd > 512) {
    AttnRef(q, k, v, n_kv, hd, scale, out);
    return;
  }
  const bool k_f16 = k.type == KvRowType::kF16, v_f16 = v.type == KvRowType::kF16;
  alignas(32) float qh[512];
  if (k_f16) {
    for (int i = 0; i < hd; i += 8) _mm256_store_ps(qh + i, _mm256_cvtph_ps(ToPh8(_mm256_loadu_ps(q + i))));
  }
  const int nb = hd / kQK8_0;
  BlockQ8_0 q8[512 / kQK8_0];
  if (!k_f16) QuantizeRowQ8_0(q, q8, hd);
  alignas(32) uint16_t acc16[512];
  alignas(32) float acc32[512];
  for (int i = 0; i < hd; ++i) {
    acc16[i] = 0;
    acc32[i] = 0.0f;
  }
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  for (int p = 0; p < n_kv; ++p) {
    const uint8_t* kp = KvRowAt(k, p);
    const float s =
        (k_f16 ? DotF16Avx2(reinterpret_cast<const uint16_t*>(kp), qh, hd) : DotQuantAvx2(k.type, kp, q8, nb)) * scale;
    float ms = 1.0f, vs = 1.0f;
    const bool new_max = s > max_s;
    if (new_max) {
      ms = std::exp(max_s - s);
      max_s = s;
    } else {
      vs = std::exp(s - max_s);
    }
    const uint8_t* vp = KvRowAt(v, p);
    const __m256 vms = _mm256_set1_ps(ms), vvs = _mm256_set1_ps(vs);
    if (v_f16) {
      const uint16_t* v16 = reinterpret_cast<const uint16_t*>(vp);
      for (int i = 0; i < hd; i += 8) {
        __m256 a = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(acc16 + i)));
        if (new_max) a = _mm256_cvtph_ps(ToPh8(_mm256_mul_ps(a, vms)));
        _mm_store_si128(reinterpret_cast<__m128i*>(acc16 + i), ToPh8(_mm256_fmadd_ps(LoadPh8(v16 + i), vvs, a)));
      }
    } else {
      for (int b = 0; b < nb; ++b) {
        __m128i bytes_lo, bytes_hi;  // elements 0..15 and 16..31 as signed bytes
        float dv;
        if (v.type == KvRowType::kQ8_0) {
          const BlockQ8_0* vb = reinterpret_cast<const BlockQ8_0*>(vp) + b;
          dv = Fp16ToFp32(vb->d);
          bytes_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs));
          bytes_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs + 16));
        } else {
          const BlockQ4_0* vb = reinterpret_cast<const BlockQ4_0*>(vp) + b;
          dv = Fp16ToFp32(vb->d);
          const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs));
          bytes_lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
          bytes_hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
        }
        const __m256 d = _mm256_set1_ps(dv);
        const __m256 x[4] = {
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes_lo)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes_lo, 8))),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes_hi)),
            _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(bytes_hi, 8))),
        };
        float* a = acc32 + b * 32;
        for (int j = 0; j < 4; ++j) {
          __m256 acc = _mm256_load_ps(a + 8 * j);
          if (new_max) acc = _mm256_mul_ps(acc, vms);
          _mm256_store_ps(a + 8 * j, _mm256_fmadd_ps(_mm256_mul_ps(x[j], d), vvs, acc));
        }
      }
    }
    sum = std::fma(sum, ms, vs);
  }
  const float inv = 1.0f / sum;
  if (v_f16) {
    const float* table = Fp16ToFp32Table();
    for (int i = 0; i < hd; ++i) out[i] = table[acc16[i]] * inv;
  } else {
    for (int i = 0; i < hd; ++i) out[i] = acc32[i] * inv;
  }
}

}  // namespace trine::kernels
