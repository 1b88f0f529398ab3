// Ternary x Q8_K on the TQ2_0 x16 layout with AVX2 (no VNNI). Compiled with the AVX2 flags.
//
// The layout (WeightView::interleave = 16, kernels/README.md "x16 layout") holds, per 16-row group
// and block, 16 lines of 64 bytes whose dword lane i has 4 code bytes of row i: the 32-byte half h
// of a line is rows 8h .. 8h + 7. Without vpdpbusd, each half goes through vpmaddubsw (unsigned
// codes x signed activations -> int16 pairs) against a broadcast of the 4 activations its bytes
// meet, and the int16 sums are widened to int32 with one vpmaddwd every 8 lines. Every lane ends
// as one (row, block) sum: no horizontal reductions (the file-layout kernel spends a 3-step
// reduction and a scalar float step per row, token and block), and the float combination runs 8
// rows wide in the reference's order. Bit-identical to GemmRef.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/q8k_act_sums.h"
#include "x86/avx2/x16_avx2.h"
#include "x86/x16_walk.h"

namespace trine::kernels {
namespace {

constexpr size_t kTq2CodeBytes = 1024;  // 16 lines of 64 bytes per block
constexpr int kMaxPassTokens = 4;  // 3-4 tokens split the halves (t128 +10 % against passes of 2)
constexpr size_t kNearPrefetch = 4096;  // as the AVX-512 kernel (x16_groups_avx512.h)

// Rows 8h .. 8h + 7 of one block against T tokens: s[t] lane i = sum over the block's 256 elements
// of code * activation for row 8h + i (codes c = t + 1: the caller subtracts the activation sum);
// act(t, k, n) gives the activations line k's code n meets.
// Line k's byte holds element 128(k / 8) + 32n + 4(k % 8) + j in bits 2n..2n+1. Bound: a code is
// at most 3 (a file may hold the code no quantizer writes) and |a| <= 128, so a vpmaddubsw lane is
// at most 2 * 3 * 128 = 768 in magnitude (no saturation), a line adds 4 of them (3072) and 8 lines
// 24576 < 2^15: the int16 sums are widened before the ninth line.
template <int T, typename ActFn>
inline void Tq2X16Half(const uint8_t* lines, int h, ActFn&& act, const LinePrefetch* pf, __m256i s[T]) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc16[T], acc32[T];
  for (int t = 0; t < T; ++t) acc16[t] = acc32[t] = _mm256_setzero_si256();
  // Fully unrolled so that every accumulator stays in a register.
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    if (pf != nullptr) pf->Line(k);
    const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + 64 * k + 32 * h));
    const __m256i c0 = _mm256_and_si256(q, m3);
    const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(q, 2), m3);
    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(q, 4), m3);
    const __m256i c3 = _mm256_and_si256(_mm256_srli_epi16(q, 6), m3);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(c0, act(t, k, 0)), _mm256_maddubs_epi16(c1, act(t, k, 1)));
      const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(c2, act(t, k, 2)), _mm256_maddubs_epi16(c3, act(t, k, 3)));
      acc16[t] = _mm256_add_epi16(acc16[t], _mm256_add_epi16(p01, p23));
    }
    if ((k & 7) == 7) {
      for (int t = 0; t < T; ++t) {
        acc32[t] = _mm256_add_epi32(acc32[t], _mm256_madd_epi16(acc16[t], ones));
        acc16[t] = _mm256_setzero_si256();
      }
    }
  }
  for (int t = 0; t < T; ++t) s[t] = acc32[t];
}

// The activations of line k's code n for block b and token t: broadcast from the token's block
// (BroadcastAct) or read from a pass's BcastTile (TileAct).
struct BroadcastAct {
  const BlockQ8_K* const* act;
  __m256i operator()(int64_t b, int t, int k, int n) const {
    return BroadcastAct4(act[t][b].qs + 128 * (k / 8) + 4 * (k % 8) + 32 * n);
  }
};

// Tq2X16Half for one token and both halves of each line, with fewer operations per line (decode
// reads a block once and is bound by them): codes 1 and 3 are used in place under the mask 0x0C
// (4 x code), so one shift per line serves all four, and they go to their own int16 sums (acc4),
// widened every 4 lines (2 * 2 * 12 * 128 = 6144 per line, 24576 after 4); codes 0 and 2 (acc1,
// 1536 per line) are widened once, after 16 lines, times 4 by vpmaddwd. s[j] lane i = the block
// sum of row 8j + i, exact: the int32 sum is 4 x the sum, shifted out at the end.
inline void Tq2X16RowsDecode(const uint8_t* lines, const int8_t* a, const LinePrefetch& pf, __m256i s[2]) {
  const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12);
  const __m256i ones = _mm256_set1_epi16(1), fours = _mm256_set1_epi16(4);
  __m256i acc1[2], acc4[2], acc32[2];
  for (int j = 0; j < 2; ++j) acc1[j] = acc4[j] = acc32[j] = _mm256_setzero_si256();
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) {
    pf.Line(k);
    const int8_t* at = a + 128 * (k / 8) + 4 * (k % 8);
    const __m256i a0 = BroadcastAct4(at), a1 = BroadcastAct4(at + 32);
    const __m256i a2 = BroadcastAct4(at + 64), a3 = BroadcastAct4(at + 96);
#pragma GCC unroll 2
    for (int j = 0; j < 2; ++j) {
      const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(lines + 64 * k + 32 * j));
      const __m256i q4 = _mm256_srli_epi16(q, 4);
      acc1[j] = _mm256_add_epi16(acc1[j], _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, m3), a0),
                                                           _mm256_maddubs_epi16(_mm256_and_si256(q4, m3), a2)));
      acc4[j] = _mm256_add_epi16(acc4[j], _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(q, m12), a1),
                                                           _mm256_maddubs_epi16(_mm256_and_si256(q4, m12), a3)));
    }
    if ((k & 3) == 3) {
      for (int j = 0; j < 2; ++j) {
        acc32[j] = _mm256_add_epi32(acc32[j], _mm256_madd_epi16(acc4[j], ones));
        acc4[j] = _mm256_setzero_si256();
      }
    }
  }
  for (int j = 0; j < 2; ++j) {
    s[j] = _mm256_srai_epi32(_mm256_add_epi32(acc32[j], _mm256_madd_epi16(acc1[j], fours)), 2);
  }
}

// Prefill: the activation broadcasts of a token pass, built once per pass and chunk of groups
// instead of once per group (a broadcast from memory costs a vector-pipe uop besides its load on
// Zen, as much as the vpmaddubsw it feeds; from a tile the vpmaddubsw takes its operand from
// memory). Block b of token t: 64 vectors at (b * T + t) * 64 + 4k + n, the 4 activations line k's
// code n meets.
struct alignas(32) Bcast {
  int8_t b[32];
};
struct BcastTile {
  std::vector<Bcast> v;  // C++17 aligned new: 32-byte aligned
};

BcastTile& GetBcastTile() {
  thread_local BcastTile s;  // grow-only per thread (the GemmFn contract has no workspace)
  return s;
}

template <int T>
void BuildBcastTile(const BlockQ8_K* const act[T], int64_t nb, BcastTile* tile) {
  const size_t n = static_cast<size_t>(nb) * T * 64;
  if (tile->v.size() < n) tile->v.resize(n);
  Bcast* v = tile->v.data();
  for (int64_t b = 0; b < nb; ++b) {
    for (int t = 0; t < T; ++t) {
      const int8_t* a = act[t][b].qs;
      for (int k = 0; k < 16; ++k) {
        for (int c = 0; c < 4; ++c, ++v) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(v->b), BroadcastAct4(a + 128 * (k / 8) + 4 * (k % 8) + 32 * c));
        }
      }
    }
  }
}

struct TileAct {
  const Bcast* tile;
  int T;
  __m256i operator()(int64_t b, int t, int k, int n) const {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(tile[(static_cast<size_t>(b) * T + t) * 64 + 4 * k + n].b));
  }
};

// The float step of rows 8h .. 8h + 7 for block b: out[t] += (s[t] - activation sum) * (d_w * d_a).
template <int T>
inline void Tq2X16Combine(const uint8_t* scales, int h, int64_t b, int64_t nb, int t0, const ActSums& sums,
                          const __m256i s[T], __m256 out[T]) {
  const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
  for (int t = 0; t < T; ++t) {
    const size_t k = static_cast<size_t>((t0 + t) * nb + b);
    const __m256i sumi = _mm256_sub_epi32(s[t], _mm256_set1_epi32(sums.qsum[k]));
    const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(sums.d[k]));
    out[t] = _mm256_add_ps(out[t], _mm256_mul_ps(_mm256_cvtepi32_ps(sumi), d));
  }
}

// One 16-row group against tokens t0 .. t0 + T - 1: out[t][h] lane i = the reference's float
// accumulation for row 8h + i (acc += (sum - activation sum) * (d_w * d_a), block by block). One
// token reads both halves of each line together (Tq2X16RowsDecode); more go half by half (the
// second reads the block's lines from L1), so a line's codes serve up to 4 tokens. act(b, t, k, n):
// BroadcastAct or TileAct.
template <int T, typename ActAt>
inline void Tq2X16GroupAvx2(const uint8_t* g, const uint8_t* next, int64_t nb, int t0, const ActSums& sums,
                            const BlockQ8_K* const act[T], const ActAt& act_at, __m256 out[T][2]) {
  for (int t = 0; t < T; ++t) out[t][0] = out[t][1] = _mm256_setzero_ps();
  ForX16Blocks(g, next, nb, kTq2CodeBytes, kNearPrefetch, [&](int64_t b, const uint8_t* lines, const LinePrefetch& pf) {
    const uint8_t* scales = g + X16ScalesOffset(b, kTq2CodeBytes);
    __m256i s[2][T];
    if constexpr (T == 1) {
      __m256i both[2];
      Tq2X16RowsDecode(lines, act[0][b].qs, pf, both);
      s[0][0] = both[0], s[1][0] = both[1];
    }
    for (int h = 0; h < 2; ++h) {
      if constexpr (T > 1) {
        // One inlined copy for both halves (the prefetch pointer is tested per line): GCC then
        // keeps the block's activation broadcasts for the second half.
        Tq2X16Half<T>(lines, h, [&](int t, int k, int n) { return act_at(b, t, k, n); }, h == 0 ? &pf : nullptr, s[h]);
      }
      __m256 oh[T];
      for (int t = 0; t < T; ++t) oh[t] = out[t][h];
      Tq2X16Combine<T>(scales, h, b, nb, t0, sums, s[h], oh);
      for (int t = 0; t < T; ++t) out[t][h] = oh[t];
    }
  });
}

}  // namespace

// Decode and short batches (< kMaxPassTokens tokens): every 16-row group of [r0, r1) is read from
// memory once and every pass runs over it while it sits in L1 (as ForX16GroupsEachPass on
// AVX-512). Longer batches go by chunks of kChunkGroups groups: per chunk, each full pass builds
// its BcastTile once and runs over the chunk's groups (in L2), then the remainder pass.
constexpr int64_t kChunkGroups = 8;  // 8 groups of a 6912-column TQ2_0 matrix: 221 KB, tile 216 KB

void GemmTq2X16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ActSums& sums = GetActSums();
  GatherActSums(xq, act_stride, n_tokens, nb, &sums);
  const __m256 ts = _mm256_set1_ps(w.tensor_scale), sc = _mm256_set1_ps(scale);
  auto store = [&](int t, int64_t g, const __m256i mask[2], const __m256 out[2]) {
    for (int h = 0; h < 2; ++h) {
      _mm256_maskstore_ps(y + static_cast<int64_t>(t) * ldy + g * 16 + 8 * h, mask[h],
                          _mm256_mul_ps(_mm256_mul_ps(out[h], ts), sc));
    }
  };
  auto token_blocks = [&](int t) { return reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t)); };
  const int64_t g_end = (r1 + 15) / 16;
  const int64_t chunk = n_tokens >= kMaxPassTokens ? kChunkGroups : 1;
  for (int64_t c0 = r0 / 16; c0 < g_end; c0 += chunk) {
    const int64_t c1 = c0 + chunk < g_end ? c0 + chunk : g_end;
    ForTokenPasses<kMaxPassTokens>(n_tokens, [&](auto tc, int t0) {
      constexpr int T = decltype(tc)::value;
      const BlockQ8_K* act[T];
      for (int t = 0; t < T; ++t) act[t] = token_blocks(t0 + t);
      if constexpr (T == kMaxPassTokens) BuildBcastTile<T>(act, nb, &GetBcastTile());
      for (int64_t g = c0; g < c1; ++g) {
        const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
        const int64_t lo = g * 16 > r0 ? g * 16 : r0, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
        const __m256i mask[2] = {RowMask8(g * 16, lo, hi), RowMask8(g * 16 + 8, lo, hi)};
        __m256 out[T][2];
        if constexpr (T == kMaxPassTokens) {
          Tq2X16GroupAvx2<T>(gp, gp + w.group_bytes, nb, t0, sums, act, TileAct{GetBcastTile().v.data(), T}, out);
        } else {
          Tq2X16GroupAvx2<T>(gp, gp + w.group_bytes, nb, t0, sums, act, BroadcastAct{act}, out);
        }
        for (int t = 0; t < T; ++t) store(t0 + t, g, mask, out[t]);
      }
    });
  }
}

}  // namespace trine::kernels
