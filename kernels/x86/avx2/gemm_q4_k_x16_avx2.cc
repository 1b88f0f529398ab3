// Q4_K x Q8_K on the x16 layout with AVX2 (no VNNI). Compiled with the AVX2 flags.
//
// A Q4_K block of a 16-row group is 36 lines of 64 bytes (WeightView::interleave = 16; line k holds
// bytes 4k .. 4k + 3 of each row's 144-byte block: d and dmin in line 0, the 12 packed scale bytes
// in lines 1-3, qs in lines 4-35, chunk j = lines 4 + 8j .. 4 + 8j + 7 with sub-block 2j in the low
// nibbles and 2j + 1 in the high ones). The 32-byte half h of a line is rows 8h .. 8h + 7 in the
// lanes: the scales and mins of 8 rows unpack together with the reference's byte masks, and one
// vpmaddubsw per line and nibble against a broadcast of 4 activations advances 8 rows. The
// file-layout kernel (quants_avx2.cc) dots each row's block and reduces 8 rows with an hadd tree
// per block. Bit-identical to GemmRef: the reference's exact sumi and summ, then its float order.
#include <immintrin.h>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx2/x16_avx2.h"
#include "x86/x16_walk.h"

namespace trine::kernels {
namespace {

constexpr int kLines = 36;                       // lines per block
constexpr size_t kBlockBytes = kLines * 64;      // a block of 16 rows
constexpr int kMaxPassTokens = 2;                // per half: 5 vectors per token + temporaries

// The 6-bit scales and mins of 8 rows (half h of lines 1-3, the reference's byte masks): byte k of
// each dword of sc03 / sc47 / m03 / m47 belongs to sub-block k (sc03, m03) or 4 + k.
struct ScalesMins8 {
  __m256i sc03, sc47, m03, m47;
};

inline ScalesMins8 UnpackScalesMins8(const uint8_t* L, int h) {
  const __m256i m0f = _mm256_set1_epi8(0x0F), m3f = _mm256_set1_epi8(0x3F), m30 = _mm256_set1_epi8(0x30);
  auto line = [&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(L + 64 * k + 32 * h)); };
  const __m256i u0 = line(1), u1 = line(2), u2 = line(3);
  return {_mm256_and_si256(u0, m3f),
          _mm256_or_si256(_mm256_and_si256(u2, m0f), _mm256_and_si256(_mm256_srli_epi32(u0, 2), m30)),
          _mm256_and_si256(u1, m3f),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), m0f), _mm256_and_si256(_mm256_srli_epi32(u1, 2), m30))};
}

// Byte `byte` of each dword of v, in both int16 halves of the dword (a vpmaddwd multiplier).
inline __m256i ByteToPairs(__m256i v, int byte) {
  const __m256i b = _mm256_and_si256(_mm256_srli_epi32(v, 8 * byte), _mm256_set1_epi32(0xFF));
  return _mm256_or_si256(b, _mm256_slli_epi32(b, 16));
}

// Byte `byte` of each dword of v as an int32 (the low int16 of a vpmaddwd operand, high 0).
inline __m256i ByteToInt32(__m256i v, int byte) {
  return _mm256_and_si256(_mm256_srli_epi32(v, 8 * byte), _mm256_set1_epi32(0xFF));
}

// Rows 8h .. 8h + 7 of block b against T tokens: out[t] += d * sumi - dmin * summ (d = d_w * d_a,
// dmin = dmin_w * d_a), the reference's order.
// pf (the first half only): the block's line prefetches, issued beside the loads they run ahead of.
template <int T>
inline void Q4KX16HalfBlock(const uint8_t* L, int h, const BlockQ8_K* const act[T], int64_t b, const LinePrefetch* pf,
                            __m256 out[T]) {
  if (pf != nullptr) {
    for (int k = 0; k < 4; ++k) pf->Line(k);
  }
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  const ScalesMins8 sm = UnpackScalesMins8(L, h);
  __m256i sumi[T], summ[T];
  for (int t = 0; t < T; ++t) sumi[t] = summ[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    __m256i lo[T], hi[T];
    for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
    // 8 lines of vpmaddubsw lanes of at most 2 * 15 * 128 = 3840: 30720 < 2^15, exact in int16.
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      if (pf != nullptr) pf->Line(4 + 8 * j + k);
      const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(L + 64 * (4 + 8 * j + k) + 32 * h));
      const __m256i ql = _mm256_and_si256(q, m0f), qh = _mm256_and_si256(_mm256_srli_epi16(q, 4), m0f);
#pragma GCC unroll 2
      for (int t = 0; t < T; ++t) {
        lo[t] = _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(ql, BroadcastAct4(act[t][b].qs + 64 * j + 4 * k)));
        hi[t] = _mm256_add_epi16(hi[t], _mm256_maddubs_epi16(qh, BroadcastAct4(act[t][b].qs + 64 * j + 32 + 4 * k)));
      }
    }
    // Sub-blocks 2j and 2j + 1: scale bytes (2j) % 4 and (2j + 1) % 4 of sc03 (j < 2) or sc47. The
    // int16 sums times the scale (<= 63) by vpmaddwd: 2 * 30720 * 63 fits int32, exact.
    const __m256i scv = j < 2 ? sm.sc03 : sm.sc47, mv = j < 2 ? sm.m03 : sm.m47;
    const int b0 = (2 * j) % 4;
    const __m256i sc_lo = ByteToPairs(scv, b0), sc_hi = ByteToPairs(scv, b0 + 1);
    const __m256i m_lo = ByteToInt32(mv, b0), m_hi = ByteToInt32(mv, b0 + 1);
    for (int t = 0; t < T; ++t) {
      sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(_mm256_madd_epi16(lo[t], sc_lo), _mm256_madd_epi16(hi[t], sc_hi)));
      // m (<= 63) times a 32-value activation sum (|.| <= 4096): one vpmaddwd each (high halves 0).
      const int16_t* bs = act[t][b].bsums;
      const __m256i p_lo = _mm256_set1_epi32(bs[4 * j] + bs[4 * j + 1]);
      const __m256i p_hi = _mm256_set1_epi32(bs[4 * j + 2] + bs[4 * j + 3]);
      summ[t] = _mm256_add_epi32(summ[t], _mm256_add_epi32(_mm256_madd_epi16(m_lo, p_lo), _mm256_madd_epi16(m_hi, p_hi)));
    }
  }
  // Line 0: d in the low and dmin in the high half of each row's dword.
  const __m256i dd = _mm256_load_si256(reinterpret_cast<const __m256i*>(L + 32 * h));
  const __m256 dw = HalvesToFloat(dd, false), dmw = HalvesToFloat(dd, true);
  for (int t = 0; t < T; ++t) {
    const __m256 da = _mm256_set1_ps(act[t][b].d);
    const __m256 d = _mm256_mul_ps(dw, da), dmin = _mm256_mul_ps(dmw, da);
    out[t] = _mm256_add_ps(out[t], _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi[t])),
                                                 _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ[t]))));
  }
}

}  // namespace

// Every 16-row group of [r0, r1) is read from memory once: every pass of up to 2 tokens runs over
// it while it sits in L1/L2, block by block, each block's two halves in turn.
void GemmQ4_KX16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ForX16GroupPassesAvx2<kMaxPassTokens>(w, n_tokens, y, ldy, r0, r1, scale, [&](auto tc, int t0, const uint8_t* gp, auto& out) {
    constexpr int T = decltype(tc)::value;
    const BlockQ8_K* act[T];
    for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
    for (int h = 0; h < 2; ++h) {
      for (int t = 0; t < T; ++t) out[h][t] = _mm256_setzero_ps();
    }
    // The near stream two blocks (4.6 KB) ahead, as the AVX-512 kernel.
    ForX16Blocks(gp, gp + w.group_bytes, nb, kBlockBytes, 2 * kBlockBytes, [&](int64_t b, const uint8_t* L, const LinePrefetch& pf) {
      for (int h = 0; h < 2; ++h) Q4KX16HalfBlock<T>(L, h, act, b, h == 0 ? &pf : nullptr, out[h]);
    });
  });
}

}  // namespace trine::kernels
