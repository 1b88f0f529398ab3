// AVX2 kernels (AVX2 + FMA + F16C). Compiled with its own flags; reached only through the
// dispatch table when the CPU has these features. Layout notes as in the AVX-512 file: a 32-byte
// half of a TQ2_0 block, shifted by 2n and masked, gives the codes of 32 contiguous elements.
#include <immintrin.h>

#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

inline int32_t HsumEpi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

inline float HsumPs(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Ternary x Q8_K with maddubs (unsigned codes x signed activations -> int16 pairs, at most
// 2 * 2 * 127 each; eight of them summed stay within int16), then madd to int32. Exact integer
// block sums in the reference's combination order: bit-identical to GemmRef.
void GemmTq2Q8kMaddubs(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                       int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const __m256i mask3 = _mm256_set1_epi8(3);
  const __m256i ones16 = _mm256_set1_epi16(1);
  std::vector<int32_t> qsum(static_cast<size_t>(n_tokens * nb));
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
    for (int64_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < 16; ++j) sum += a[b].bsums[j];
      qsum[static_cast<size_t>(t * nb + b)] = sum;
    }
  }
  constexpr int kMaxTokens = 64;
  float acc[kMaxTokens];
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const BlockTQ2_0* wb = reinterpret_cast<const BlockTQ2_0*>(w.data + static_cast<size_t>(r) * w.row_bytes);
      for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        __m256i c[8];
        for (int h = 0; h < 2; ++h) {
          const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * h));
          for (int n = 0; n < 4; ++n) c[4 * h + n] = _mm256_and_si256(_mm256_srli_epi16(q, 2 * n), mask3);
        }
        const float dw = Fp16ToFp32(wb[b].d);
        for (int t = 0; t < nt; ++t) {
          const int tt = t0 + t;
          const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(tt)) + b;
          __m256i s16 = _mm256_setzero_si256();
          for (int k = 0; k < 8; ++k) {
            const __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a->qs + 32 * k));
            s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(c[k], av));
          }
          const size_t k = static_cast<size_t>(tt * nb + b);
          const int32_t sumi = HsumEpi32(_mm256_madd_epi16(s16, ones16)) - qsum[k];
          acc[t] += static_cast<float>(sumi) * (dw * a->d);
        }
      }
      for (int t = 0; t < nt; ++t) y[static_cast<int64_t>(t0 + t) * ldy + r] = acc[t] * w.tensor_scale * scale;
    }
  }
}

// F16 weights x fp16-rounded activations, fp32 accumulation in 8 lanes.
void GemmF16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  const int64_t nv = n / 8 * 8;
  std::vector<float> xs(static_cast<size_t>(n * n_tokens));
  const float* table = Fp16ToFp32Table();
  for (int t = 0; t < n_tokens; ++t) {
    const uint16_t* a = reinterpret_cast<const uint16_t*>(xq + act_stride * static_cast<size_t>(t));
    for (int64_t i = 0; i < n; ++i) xs[static_cast<size_t>(t * n + i)] = table[a[i]];
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* wr = reinterpret_cast<const uint16_t*>(w.data + static_cast<size_t>(r) * w.row_bytes);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = xs.data() + static_cast<size_t>(t) * static_cast<size_t>(n);
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 16 <= nv; i += 16) {
        const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + i)));
        const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + i + 8)));
        s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt + i), s0);
        s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + i + 8), s1);
      }
      for (; i < nv; i += 8) {
        const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wr + i)));
        s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt + i), s0);
      }
      float acc = HsumPs(_mm256_add_ps(s0, s1));
      for (; i < n; ++i) acc += table[wr[i]] * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

// F32 weights x fp32 activations: as GemmF16 without the conversions.
void GemmF32(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  const int64_t nv = n / 8 * 8;
  for (int64_t r = r0; r < r1; ++r) {
    const float* wr = reinterpret_cast<const float*>(w.data + static_cast<size_t>(r) * w.row_bytes);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = reinterpret_cast<const float*>(xq + act_stride * static_cast<size_t>(t));
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
      int64_t i = 0;
      for (; i + 16 <= nv; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(xt + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i + 8), _mm256_loadu_ps(xt + i + 8), s1);
      }
      for (; i < nv; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(xt + i), s0);
      float acc = HsumPs(_mm256_add_ps(s0, s1));
      for (; i < n; ++i) acc += wr[i] * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

}  // namespace

// TQ2_0 x16 (gemm_tq2_x16_avx2.cc).
void GemmTq2X16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

namespace {

// The ternary int8-dot entry: TQ2_0 x16 (what the loader builds, WantsX16) or TQ2_0 file rows
// (streamed layers, hand-built views). TQ1_0 is repacked to TQ2_0 before either on AVX2.
void GemmTq2Q8kAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (w.type != TypeId::kTQ2_0) {
    GemmRef(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else if (w.interleave == 16) {
    GemmTq2X16Avx2(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmTq2Q8kMaddubs(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

}  // namespace

// INT4/INT8/K-quant kernels (quants_avx2.cc).
void GemmQ8_0Avx2(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ4_0Avx2(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ4_KAvx2(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ6_KAvx2(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);

// gemm_f32act_avx2.cc
void GemmF32ActAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

// Ternary table lookup on the lookup-table layout (gemm_lut_avx2.cc).
void GemmTq2LutAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

// Activation quantizers (quantize_act_avx2.cc).
void QuantizeQ8KAvx2(const float* src, void* dst, int64_t n);
void QuantizeQ8_0Avx2(const float* src, void* dst, int64_t n);
void QuantizeF16Avx2(const float* src, void* dst, int64_t n);

const KernelTable& Avx2Table() {
  static const KernelTable t{Isa::kAvx2, GemmTq2Q8kAvx2, nullptr, GemmF16,
                             GemmQ8_0Avx2, GemmQ4_0Avx2, GemmQ4_KAvx2, GemmQ6_KAvx2, GemmF32,
                             GemmF32ActAvx2, QuantizeQ8KAvx2, QuantizeQ8_0Avx2, QuantizeF16Avx2,
                             nullptr, nullptr, GemmTq2LutAvx2};
  return t;
}

}  // namespace trine::kernels
