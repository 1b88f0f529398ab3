// Q4_0 x Q8_0 on the x16 layout with AVX2 (no VNNI). Compiled with the AVX2 flags.
//
// A Q4_0 block of a 16-row group is 4 lines of 64 bytes (WeightView::interleave = 16): dword lane i
// of line k holds quant bytes 4k .. 4k + 3 of row i, so the 32-byte half h of a line is rows
// 8h .. 8h + 7 in the lanes and one vpmaddubsw against a broadcast of 4 activations advances 8
// rows. The file-layout kernel (quants_avx2.cc, GemmQ4_0Rows8) builds that order per block with 8
// loads and 8 unpacks; here it is the layout. Bit-identical to GemmRef.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx2/q8_0_act_info_avx2.h"
#include "x86/avx2/x16_avx2.h"
#include "x86/x16_walk.h"

namespace trine::kernels {
namespace {

constexpr size_t kQ4CodeBytes = 256;  // 4 lines of 64 bytes per block
constexpr int kMaxPassTokens = 4;     // per half: 4 float sums + 4 int16 sums + 5 temporaries

// The int16 sum of one block's half against one token: 8 vpmaddubsw lanes of at most
// 2 * 15 * 128 = 3840 each, 30720 < 2^15 in all (exact).
inline __m256i Q4HalfBlock(const uint8_t* cb, int h, const int8_t* a) {
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  __m256i p = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(cb + 64 * k + 32 * h));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(q, m0f), BroadcastAct4(a + 4 * k)));
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m0f), BroadcastAct4(a + 16 + 4 * k)));
  }
  return p;
}

// Rows 8h .. 8h + 7 of one group over all blocks for tokens t0 .. t0 + T - 1 (out[t] lane i: row
// 8h + i): the reference's acc += sumi * (d_w * d_a), block by block.
template <int T>
inline void Q4X16HalfPass(const uint8_t* g, const uint8_t* next, int64_t nb, int h, const BlockQ8_0* const act[T],
                          const Q8_0ActInfo& info, int t0, __m256 out[T]) {
  const __m256i ones = _mm256_set1_epi16(1);
  for (int t = 0; t < T; ++t) out[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* cb = g + X16CodesOffset(b, kQ4CodeBytes);
    if (h == 0) {
      // The next group's block (and its scale line) into L2: one group ahead of the stream.
      PrefetchX16ScaleLine(next, b, kQ4CodeBytes);
      for (int k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(next + X16CodesOffset(b, kQ4CodeBytes) + 64 * k), _MM_HINT_T1);
    }
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(g + X16ScalesOffset(b, kQ4CodeBytes) + 16 * h)));
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const size_t k0 = static_cast<size_t>((t0 + t) * nb + b);
      const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(Q4HalfBlock(cb, h, act[t][b].qs), ones),
                                         _mm256_set1_epi32(info.corr[k0]));
      out[t] = _mm256_add_ps(out[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(info.d[k0]))));
    }
  }
}

// Decode: both halves of each line against one token (the group is read once, in order).
inline void Q4X16Decode(const uint8_t* g, const uint8_t* next, int64_t nb, const BlockQ8_0* act, const Q8_0ActInfo& info,
                        int t0, __m256 out[2]) {
  const __m256i ones = _mm256_set1_epi16(1);
  out[0] = out[1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* cb = g + X16CodesOffset(b, kQ4CodeBytes);
    PrefetchX16ScaleLine(next, b, kQ4CodeBytes);
    for (int k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(next + X16CodesOffset(b, kQ4CodeBytes) + 64 * k), _MM_HINT_T1);
    const size_t k0 = static_cast<size_t>(t0 * nb + b);
    const __m256 d = _mm256_set1_ps(info.d[k0]);
    const __m256i corr = _mm256_set1_epi32(info.corr[k0]);
    for (int h = 0; h < 2; ++h) {
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(g + X16ScalesOffset(b, kQ4CodeBytes) + 16 * h)));
      const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(Q4HalfBlock(cb, h, act[b].qs), ones), corr);
      out[h] = _mm256_add_ps(out[h], _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, d)));
    }
  }
}

}  // namespace

// Every 16-row group of [r0, r1) is read from memory once: for more than one token, each half's
// passes of up to 4 tokens run over the group while it sits in L1/L2.
void GemmQ4_0X16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK4_0;
  Q8_0ActInfo& info = GetQ8_0ActInfo();
  GatherQ8_0ActInfoAvx2(xq, act_stride, n_tokens, nb, &info);
  const __m256 ts = _mm256_set1_ps(w.tensor_scale), sc = _mm256_set1_ps(scale);
  auto store = [&](int t, int64_t row0, __m256i mask, __m256 v) {
    _mm256_maskstore_ps(y + static_cast<int64_t>(t) * ldy + row0, mask, _mm256_mul_ps(_mm256_mul_ps(v, ts), sc));
  };
  for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
    const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
    const uint8_t* next = gp + w.group_bytes;
    const int64_t lo = g * 16 > r0 ? g * 16 : r0, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
    const __m256i mask[2] = {RowMask8(g * 16, lo, hi), RowMask8(g * 16 + 8, lo, hi)};
    if (n_tokens == 1) {
      __m256 out[2];
      Q4X16Decode(gp, next, nb, reinterpret_cast<const BlockQ8_0*>(xq), info, 0, out);
      for (int h = 0; h < 2; ++h) store(0, g * 16 + 8 * h, mask[h], out[h]);
      continue;
    }
    for (int h = 0; h < 2; ++h) {
      ForTokenPasses<kMaxPassTokens>(n_tokens, [&](auto tc, int t0) {
        constexpr int T = decltype(tc)::value;
        const BlockQ8_0* act[T];
        for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t0 + t));
        __m256 out[T];
        Q4X16HalfPass<T>(gp, next, nb, h, act, info, t0, out);
        for (int t = 0; t < T; ++t) store(t0 + t, g * 16 + 8 * h, mask[h], out[t]);
      });
    }
  }
}

}  // namespace trine::kernels
