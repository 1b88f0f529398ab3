// Q6_K x Q8_K on the x16 layout with AVX2 (no VNNI): the output head of most files and the Q6_K
// matrices of Q4_K_M files. Compiled with the AVX2 flags.
//
// A Q6_K block of a 16-row group is 52 lines of 64 bytes (WeightView::interleave = 16; line k holds
// bytes 4k .. 4k + 3 of each row's block: ql in lines 0-31, qh in 32-47, the 16 int8 scales in
// 48-51; d in the group's scale lines). The 32-byte half rh of a line is rows 8rh .. 8rh + 7 in the
// lanes. For value half h and quad m (values l = 4m .. 4m + 3 of that half) the lines A =
// ql[64h + l], B = ql[64h + 32 + l] and H = qh[32h + l] give the four 6-bit vectors q_s = w + 32
// of values 128h + 32s + l by masks and shifts (as the AVX-512 kernel, without its bit-select);
// vpmaddubsw against a broadcast of 4 activations, pairs of lines summed in int16 and widened by
// vpmaddwd; (sum - 32 * bsum_j) * scale_j joins the block's int32 sum: the reference's sumi, then
// its float order. Bit-identical to GemmRef.
#include <immintrin.h>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx2/x16_avx2.h"
#include "x86/x16_walk.h"

namespace trine::kernels {
namespace {

constexpr int kLines = 52;
constexpr size_t kBlockBytes = kLines * 64;
constexpr int kMaxPassTokens = 2;

// Rows 8rh .. 8rh + 7 of block b against T tokens: sumi[t] lane i = the reference's block sum of
// row 8rh + i. pf (the first row half only): the block's line prefetches beside the loads.
template <int T>
inline void Q6X16HalfBlock(const uint8_t* lines, int rh, const BlockQ8_K* const act[T], int64_t b,
                           const LinePrefetch* pf, __m256i sumi[T]) {
  const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), ones = _mm256_set1_epi16(1);
  auto line = [&](int k) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + 64 * k + 32 * rh)); };
  if (pf != nullptr) {
    for (int k = 48; k < kLines; ++k) pf->Line(k);
  }
  for (int t = 0; t < T; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
    for (int mh = 0; mh < 2; ++mh) {
      __m256i acc[4][T];
      for (int s = 0; s < 4; ++s) {
        for (int t = 0; t < T; ++t) acc[s][t] = _mm256_setzero_si256();
      }
      // Two lines per step: vpmaddubsw lanes of at most 2 * 63 * 128 = 16128, two of them 32256 <
      // 2^15 in int16, then widened.
#pragma GCC unroll 2
      for (int mp = 0; mp < 2; ++mp) {
        __m256i p[4][T];
#pragma GCC unroll 2
        for (int mo = 0; mo < 2; ++mo) {
          const int m = 4 * mh + 2 * mp + mo;
          if (pf != nullptr) {
            for (int k = 0; k < 3; ++k) pf->Line(3 * (8 * h + m) + k);
          }
          const __m256i A = line(16 * h + m), B = line(16 * h + 8 + m), H = line(32 + 8 * h + m);
          __m256i q[4];
          q[0] = _mm256_or_si256(_mm256_and_si256(A, m0f), _mm256_and_si256(_mm256_slli_epi16(H, 4), m30));
          q[1] = _mm256_or_si256(_mm256_and_si256(B, m0f), _mm256_and_si256(_mm256_slli_epi16(H, 2), m30));
          q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m0f), _mm256_and_si256(H, m30));
          q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 4), m0f), _mm256_and_si256(_mm256_srli_epi16(H, 2), m30));
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
#pragma GCC unroll 2
            for (int t = 0; t < T; ++t) {
              const __m256i v = _mm256_maddubs_epi16(q[s], BroadcastAct4(act[t][b].qs + 128 * h + 32 * s + 4 * m));
              p[s][t] = mo == 0 ? v : _mm256_add_epi16(p[s][t], v);
            }
          }
        }
        for (int s = 0; s < 4; ++s) {
          for (int t = 0; t < T; ++t) acc[s][t] = _mm256_add_epi32(acc[s][t], _mm256_madd_epi16(p[s][t], ones));
        }
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int j = 8 * h + 2 * s + mh;
        // Scale j of each row: byte j % 4 of line 48 + j / 4, sign-extended.
        const __m256i sc = _mm256_srai_epi32(_mm256_slli_epi32(line(48 + j / 4), 24 - 8 * (j % 4)), 24);
        for (int t = 0; t < T; ++t) {
          const __m256i u = _mm256_sub_epi32(acc[s][t], _mm256_set1_epi32(32 * act[t][b].bsums[j]));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(u, sc));
        }
      }
    }
  }
}

}  // namespace

// Every 16-row group of [r0, r1) is read from memory once: every pass of up to 2 tokens runs over
// it while it sits in L1/L2, block by block, each block's two row halves in turn.
void GemmQ6_KX16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ForX16GroupPassesAvx2<kMaxPassTokens>(w, n_tokens, y, ldy, r0, r1, scale, [&](auto tc, int t0, const uint8_t* gp, auto& out) {
    constexpr int T = decltype(tc)::value;
    const BlockQ8_K* act[T];
    for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
    for (int rh = 0; rh < 2; ++rh) {
      for (int t = 0; t < T; ++t) out[rh][t] = _mm256_setzero_ps();
    }
    // The near stream two blocks ahead, as the AVX-512 kernel.
    ForX16Blocks(gp, gp + w.group_bytes, nb, kBlockBytes, 2 * kBlockBytes, [&](int64_t b, const uint8_t* L, const LinePrefetch& pf) {
      const uint8_t* scales = gp + X16ScalesOffset(b, kBlockBytes);
      for (int rh = 0; rh < 2; ++rh) {
        __m256i sumi[T];
        Q6X16HalfBlock<T>(L, rh, act, b, rh == 0 ? &pf : nullptr, sumi);
        const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * rh)));
        for (int t = 0; t < T; ++t) {
          // Reference order: (d_w * d_a) * sumi.
          out[rh][t] = _mm256_add_ps(out[rh][t], _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(act[t][b].d)),
                                                               _mm256_cvtepi32_ps(sumi[t])));
        }
      }
    });
  });
}

}  // namespace trine::kernels
