// AVX-512 kernels (F, BW, VL, DQ, VNNI). Compiled with its own flags; reached only through the
// dispatch table when the CPU has these features.
//
// Ternary weights are TQ2_0 blocks: 64 bytes of 2-bit codes c = t + 1 where byte 32h + m holds
// element 128h + 32n + m in bits 2n..2n+1. One 64-byte load thus yields, after a shift by 2n and
// a mask, the codes of elements [32n, 32n+32) and [128+32n, 128+32n+32): contiguous runs that
// line up with contiguous activation bytes, so no repacking is needed.
#include <immintrin.h>

#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx512/dpbusd_bcast.h"
#include "x86/avx512/x16_groups_avx512.h"
#include "x86/q8k_act_sums.h"

namespace trine::kernels {
namespace {

inline __m512i LoadActPair(const int8_t* a, int n) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32 * n));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 128 + 32 * n));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// Sums each of 16 vectors' lanes: lane r of the result is the sum of v[r]'s 16 lanes. Integer
// adds, so the association order does not matter.
inline __m512i ReduceRows16(const __m512i* v) {
  __m512i w[8], x[4];
  for (int k = 0; k < 8; ++k) {
    w[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]),
                            _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]));
  }
  for (int k = 0; k < 4; ++k) {
    x[k] = _mm512_add_epi32(_mm512_unpacklo_epi64(w[2 * k], w[2 * k + 1]),
                            _mm512_unpackhi_epi64(w[2 * k], w[2 * k + 1]));
  }
  // x[k] holds rows 4k..4k+3 in every 128-bit lane; add the four lanes of each.
  const __m512i y0 = _mm512_add_epi32(_mm512_shuffle_i32x4(x[0], x[1], 0x88), _mm512_shuffle_i32x4(x[0], x[1], 0xDD));
  const __m512i y1 = _mm512_add_epi32(_mm512_shuffle_i32x4(x[2], x[3], 0x88), _mm512_shuffle_i32x4(x[2], x[3], 0xDD));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(y0, y1, 0x88), _mm512_shuffle_i32x4(y0, y1, 0xDD));
}

// Ternary x Q8_K with vpdpbusd (unsigned codes x signed activations), 16 rows at a time: the
// codes of a 16-row block column are unpacked once into L1 and reused for every token; the 16
// per-row integer sums land in one vector, so the float combination runs 16 rows wide in the
// reference's per-row order (acc += sumi * (d_w * d_a), block by block): bit-identical to GemmRef.
// One block of a TQ2_0 x16 group (16 lines of 64 bytes, WeightView::interleave) against T tokens
// Q8_K blocks: s[t] lane i = sum over the block of code * activation for row i (codes c = t + 1,
// the bias is subtracted by the caller). The codes of line k are used in place under the masks
// 0x03, 0x0C, 0x30, 0xC0, so code n (element 128(k/8) + 32n + 4(k%8) + byte) enters scaled by
// 4^n; each n has its own accumulator and the scale is shifted out once per block (exact: the
// accumulator is a multiple of 4^n, and |sum| < 2^31 with 64 products of <= 192 * 128 per lane).
// No shifts or horizontal reductions per line: 4 ANDs and 4 vpdpbusd per 64 bytes of weights.
template <int T>
inline void Tq2X16Block(const uint8_t* codes, const int8_t* const a[T], const LinePrefetch& pf, __m512i s[T]) {
  constexpr int kSets = T == 1 ? 2 : 1;  // two accumulator sets hide vpdpbusd latency at T = 1
  const __m512i m[4] = {_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C), _mm512_set1_epi8(0x30),
                        _mm512_set1_epi8(static_cast<char>(0xC0))};
  __m512i acc[kSets][4][T];
  for (int u = 0; u < kSets; ++u) {
    for (int n = 0; n < 4; ++n) {
      for (int t = 0; t < T; ++t) acc[u][n][t] = _mm512_setzero_si512();
    }
  }
  // Fully unrolled so that every accumulator index is a constant and stays in a register.
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    pf.Line(k);
    const __m512i q = _mm512_load_si512(codes + 64 * k);
    const int off = 128 * (k / 8) + 4 * (k % 8);
    const int u = kSets == 2 ? (k & 1) : 0;
#pragma GCC unroll 4
    for (int n = 0; n < 4; ++n) {
      const __m512i c = _mm512_and_si512(q, m[n]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[u][n][t] = DpbusdAct<T>(acc[u][n][t], c, a[t] + off + 32 * n);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    __m512i v[4];
    for (int n = 0; n < 4; ++n) v[n] = kSets == 2 ? _mm512_add_epi32(acc[0][n][t], acc[kSets - 1][n][t]) : acc[0][n][t];
    s[t] = _mm512_add_epi32(_mm512_add_epi32(v[0], _mm512_srai_epi32(v[1], 2)),
                            _mm512_add_epi32(_mm512_srai_epi32(v[2], 4), _mm512_srai_epi32(v[3], 6)));
  }
}

// Distance of the L1 prefetch stream ahead of the block being read (TernaryX16Group, LinePrefetch).
// 4 KB against 8 KB, decode in the model, alternating: llama-1b TQ2_0 (8 KB groups) 28.8-31.2 vs
// 27.9-29.0 tok/s at 1 thread, bitnet-2b TQ2_0 within noise (kernels/README.md).
constexpr size_t kNearPrefetch = 4096;

// Ternary x Q8_K on the TQ2_0 x16 layout, any token count (up to 4 tokens per pass over a group,
// every pass over a group before the next group).
void GemmTq2X16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ActSums& sums = GetActSums();
  GatherActSums(xq, act_stride, n_tokens, nb, &sums);
  ForX16GroupsEachPass<4>(w, n_tokens, y, ldy, r0, r1, scale,
                          [&](auto tc, int t0, const uint8_t* gp, const uint8_t* next, __m512* out) {
    constexpr int T = decltype(tc)::value;
    const BlockQ8_K* act[T];
    for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
    TernaryX16Group<T>(gp, next, nb, 1024, kNearPrefetch, t0, sums,
                       [&](const uint8_t* lines, int64_t b, const LinePrefetch& pf, __m512i* s) {
                         const int8_t* a[T];
                         for (int t = 0; t < T; ++t) a[t] = act[t][b].qs;
                         Tq2X16Block<T>(lines, a, pf, s);
                       },
                       out);
  });
}

}  // namespace

// TQ1_0 x16 (gemm_tq1_vbmi.cc; the loader builds that layout only where the CPU has VBMI).
void GemmTq1X16Vbmi(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

namespace {

// The ternary int8-dot entry: TQ1_0 x16, TQ2_0 x16 or TQ2_0 file rows.
void GemmTq2Q8kVnni(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (w.type == TypeId::kTQ1_0) {
    // Only the x16 layout enters the VBMI translation unit (plain TQ1_0 rows are repacked at load).
    if (w.interleave == 16) {
      GemmTq1X16Vbmi(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    } else {
      GemmRef(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    }
    return;
  }
  if (w.interleave == 16) {
    GemmTq2X16(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  const int64_t nb = w.cols / kQK_K;
  ActSums& sums = GetActSums();
  GatherActSums(xq, act_stride, n_tokens, nb, &sums);
  const __m512i mask3 = _mm512_set1_epi8(3);
  constexpr int kRows = 16;
  constexpr int kMaxTokens = 32;
  alignas(64) __m512i codes[kRows][4];
  alignas(64) __m512 acc[kMaxTokens];
  alignas(64) uint16_t dws[kRows];
  alignas(64) float out[kRows];
  for (int64_t r = r0; r < r1; r += kRows) {
    const int nr = r1 - r < kRows ? static_cast<int>(r1 - r) : kRows;
    if (n_tokens == 1 && nr == kRows) {
      // Decode: unpack and consume the codes in registers, no staging through L1.
      const uint8_t* rows[kRows];
      for (int i = 0; i < kRows; ++i) rows[i] = w.data + static_cast<size_t>(r + i) * w.row_bytes;
      __m512 acc1 = _mm512_setzero_ps();
      const BlockQ8_K* act = reinterpret_cast<const BlockQ8_K*>(xq);
      for (int64_t b = 0; b < nb; ++b) {
        const __m512i a0 = LoadActPair(act[b].qs, 0), a1 = LoadActPair(act[b].qs, 1);
        const __m512i a2 = LoadActPair(act[b].qs, 2), a3 = LoadActPair(act[b].qs, 3);
        __m512i s[kRows];
        for (int i = 0; i < kRows; ++i) {
          const BlockTQ2_0* wb = reinterpret_cast<const BlockTQ2_0*>(rows[i]) + b;
          const __m512i q = _mm512_loadu_si512(wb->qs);
          __m512i v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(q, mask3), a0);
          v = _mm512_dpbusd_epi32(v, _mm512_and_si512(_mm512_srli_epi16(q, 2), mask3), a1);
          v = _mm512_dpbusd_epi32(v, _mm512_and_si512(_mm512_srli_epi16(q, 4), mask3), a2);
          s[i] = _mm512_dpbusd_epi32(v, _mm512_and_si512(_mm512_srli_epi16(q, 6), mask3), a3);
          dws[i] = wb->d;
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dws)));
        const __m512i sumi = _mm512_sub_epi32(ReduceRows16(s), _mm512_set1_epi32(sums.qsum[static_cast<size_t>(b)]));
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(sums.d[static_cast<size_t>(b)]));
        acc1 = _mm512_add_ps(acc1, _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), d));
      }
      _mm512_store_ps(out, acc1);
      for (int i = 0; i < kRows; ++i) y[r + i] = out[i] * w.tensor_scale * scale;
      continue;
    }
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
      const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
      for (int t = 0; t < nt; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        for (int i = 0; i < kRows; ++i) {
          if (i < nr) {
            const BlockTQ2_0* wb =
                reinterpret_cast<const BlockTQ2_0*>(w.data + static_cast<size_t>(r + i) * w.row_bytes) + b;
            const __m512i q = _mm512_loadu_si512(wb->qs);
            codes[i][0] = _mm512_and_si512(q, mask3);
            codes[i][1] = _mm512_and_si512(_mm512_srli_epi16(q, 2), mask3);
            codes[i][2] = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask3);
            codes[i][3] = _mm512_and_si512(_mm512_srli_epi16(q, 6), mask3);
            dws[i] = wb->d;
          } else {
            codes[i][0] = codes[i][1] = codes[i][2] = codes[i][3] = _mm512_setzero_si512();
            dws[i] = 0;
          }
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(dws)));
        for (int t = 0; t < nt; ++t) {
          const int tt = t0 + t;
          const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(tt)) + b;
          const __m512i a0 = LoadActPair(a->qs, 0), a1 = LoadActPair(a->qs, 1);
          const __m512i a2 = LoadActPair(a->qs, 2), a3 = LoadActPair(a->qs, 3);
          __m512i s[kRows];
          for (int i = 0; i < kRows; ++i) {
            __m512i v = _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes[i][0], a0);
            v = _mm512_dpbusd_epi32(v, codes[i][1], a1);
            v = _mm512_dpbusd_epi32(v, codes[i][2], a2);
            s[i] = _mm512_dpbusd_epi32(v, codes[i][3], a3);
          }
          const size_t k = static_cast<size_t>(tt * nb + b);
          const __m512i sumi = _mm512_sub_epi32(ReduceRows16(s), _mm512_set1_epi32(sums.qsum[k]));
          const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(sums.d[k]));
          acc[t] = _mm512_add_ps(acc[t], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), d));
        }
      }
      for (int t = 0; t < nt; ++t) {
        _mm512_store_ps(out, acc[t]);
        for (int i = 0; i < nr; ++i) y[static_cast<int64_t>(t0 + t) * ldy + r + i] = out[i] * w.tensor_scale * scale;
      }
    }
  }
}

// Ternary x Q8_K without multiplications: the +1 and -1 bit-planes of each 64-code slice become
// k-masks, and int16-widened activations are added (mask +1) or subtracted (mask -1) into an
// int16 accumulator: sum((c - 1) * q) directly, no bsums needed.
void GemmTq2Q8kMulFree(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                       int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const __m512i mask3 = _mm512_set1_epi8(3);
  const __m512i two = _mm512_set1_epi8(2);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i ones16 = _mm512_set1_epi16(1);
  constexpr int kMaxTokens = 64;
  float acc[kMaxTokens];
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const BlockTQ2_0* wb = reinterpret_cast<const BlockTQ2_0*>(w.data + static_cast<size_t>(r) * w.row_bytes);
      for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        const __m512i q = _mm512_loadu_si512(wb[b].qs);
        __mmask64 plus[4], minus[4];
        for (int n = 0; n < 4; ++n) {
          const __m512i c = _mm512_and_si512(_mm512_srli_epi16(q, 2 * n), mask3);
          plus[n] = _mm512_cmpeq_epi8_mask(c, two);
          minus[n] = _mm512_cmpeq_epi8_mask(c, zero);
        }
        const float dw = Fp16ToFp32(wb[b].d);
        for (int t = 0; t < nt; ++t) {
          const int tt = t0 + t;
          const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(tt)) + b;
          __m512i lo = zero, hi = zero;  // 32 int16 lanes each
          for (int n = 0; n < 4; ++n) {
            const __m512i av = LoadActPair(a->qs, n);
            const __m512i a_lo = _mm512_cvtepi8_epi16(_mm512_castsi512_si256(av));
            const __m512i a_hi = _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(av, 1));
            const __mmask32 p_lo = static_cast<__mmask32>(plus[n]), p_hi = static_cast<__mmask32>(plus[n] >> 32);
            const __mmask32 m_lo = static_cast<__mmask32>(minus[n]), m_hi = static_cast<__mmask32>(minus[n] >> 32);
            lo = _mm512_mask_add_epi16(lo, p_lo, lo, a_lo);
            lo = _mm512_mask_sub_epi16(lo, m_lo, lo, a_lo);
            hi = _mm512_mask_add_epi16(hi, p_hi, hi, a_hi);
            hi = _mm512_mask_sub_epi16(hi, m_hi, hi, a_hi);
          }
          // |lane| <= 4 * 128, so int16 holds it; widen pairs to int32 for the reduction.
          const __m512i s = _mm512_add_epi32(_mm512_madd_epi16(lo, ones16), _mm512_madd_epi16(hi, ones16));
          const int32_t sumi = _mm512_reduce_add_epi32(s);
          acc[t] += static_cast<float>(sumi) * (dw * a->d);
        }
      }
      for (int t = 0; t < nt; ++t) y[static_cast<int64_t>(t0 + t) * ldy + r] = acc[t] * w.tensor_scale * scale;
    }
  }
}

// F16 weights x fp16-rounded activations, fp32 accumulation in 16 lanes.
void GemmF16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  const int64_t nv = n / 16 * 16;
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
      __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
      int64_t i = 0;
      for (; i + 32 <= nv; i += 32) {
        const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i)));
        const __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i + 16)));
        s0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt + i), s0);
        s1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xt + i + 16), s1);
      }
      for (; i < nv; i += 16) {
        const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wr + i)));
        s0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xt + i), s0);
      }
      float acc = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
      for (; i < n; ++i) acc += table[wr[i]] * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

// F32 weights x fp32 activations: as GemmF16 without the conversions.
void GemmF32(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  const int64_t nv = n / 16 * 16;
  for (int64_t r = r0; r < r1; ++r) {
    const float* wr = reinterpret_cast<const float*>(w.data + static_cast<size_t>(r) * w.row_bytes);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = reinterpret_cast<const float*>(xq + act_stride * static_cast<size_t>(t));
      __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
      int64_t i = 0;
      for (; i + 32 <= nv; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(wr + i), _mm512_loadu_ps(xt + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(wr + i + 16), _mm512_loadu_ps(xt + i + 16), s1);
      }
      for (; i < nv; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(wr + i), _mm512_loadu_ps(xt + i), s0);
      float acc = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
      for (; i < n; ++i) acc += wr[i] * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

}  // namespace

// INT4/INT8/K-quant kernels (quants_avx512.cc).
void GemmQ8_0Avx512(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ4_0Avx512(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ4_KAvx512(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);
void GemmQ6_KAvx512(const WeightView&, const uint8_t*, size_t, int, float*, int64_t, int64_t, int64_t, float);

// gemm_f32act_avx512.cc
void GemmF32ActAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale);

// Activation quantizers (quantize_act_avx512.cc).
void QuantizeQ8KAvx512(const float* src, void* dst, int64_t n);
void QuantizeQ8_0Avx512(const float* src, void* dst, int64_t n);
void QuantizeF16Avx512(const float* src, void* dst, int64_t n);
// Requantization row converters (requant_avx512.cc).
void DequantizeQ6_KAvx512(const void* src, float* dst, int64_t n);
void QuantizeQ4_0Avx512(const float* src, void* dst, int64_t n);

const KernelTable& Avx512Table() {
  static const KernelTable t{Isa::kAvx512, GemmTq2Q8kVnni, GemmTq2Q8kMulFree, GemmF16,
                             GemmQ8_0Avx512, GemmQ4_0Avx512, GemmQ4_KAvx512, GemmQ6_KAvx512, GemmF32,
                             GemmF32ActAvx512, QuantizeQ8KAvx512, QuantizeQ8_0Avx512, QuantizeF16Avx512,
                             DequantizeQ6_KAvx512, QuantizeQ4_0Avx512};
  return t;
}

}  // namespace trine::kernels
