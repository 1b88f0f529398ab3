// Ternary x Q8_K by table lookup on AVX2 (KernelTable::tq2_lut; kernels/README.md, "Ternary
// lookup-table kernels"). Weights are in the lookup-table layout (WeightView::interleave =
// kInterleaveLut): 16-byte lines of one TQ2_0 code byte for 16 rows. Two lines make one 32-byte
// load; each of its nibbles indexes, per 128-bit lane, the 16-entry table of that line's two
// elements for this token, so a vpshufb gives 16 rows x 2 lines of table bytes. The inner loop has
// no multiplication: lookups, byte unpacks and int16 adds.
//
// Exactness: a table entry is c0 * a0 + c1 * a1 for the nibble's codes c0, c1 in 0..3 (code 3 too,
// which no quantizer writes but a file may hold) and Q8_K activations a in [-128, 127], so |entry|
// <= 2 * 3 * 128 = 768 and it is stored as int16 split into a low-byte and a high-byte plane
// (unpacked back to int16 after the two lookups). An int16 lane gets two entries per line pair (the
// two nibbles), and is widened to int32 every 16 line pairs: |sum| <= 32 * 768 = 24576 < 2^15. So
// each (row, token, block) int32 sum is the reference's sum(c * a) exactly; minus the activation
// block sum it is GemmRef's sumi, and the float steps are the reference's, in its order: the
// results are GemmRef's bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {

const KernelTable& Avx2Table();

namespace {

constexpr int kTableBytes = 4096;  // one token's tables for one block: 32 line pairs x 2 nibbles x 64
constexpr int kSubTokens = 4;      // tokens whose int16 accumulators share one pass over a block's lines
constexpr int kChunkTokens = 16;   // tokens whose tables are built together (prefill)
constexpr int kPrefetchAhead = 2048;  // bytes of the weight stream prefetched ahead of the loads

// The tables of one (token, block): for line pair p (lines 2p, 2p + 1) and nibble s (0: codes
// n = 0, 1 of the byte; 1: n = 2, 3), 64 bytes at (2p + s) * 64: the low bytes of line 2p's 16
// entries, those of line 2p + 1, then the two high-byte planes. Line j = 32h + m holds elements
// 128h + 32n + m; entry c0 + 4 c1 of nibble s is c0 * a[128h + 64s + m] + c1 * a[128h + 64s + 32 + m].
// (Built once per token and block, shared by all rows: the multiplies here are outside the inner loop.)
void BuildTables(const BlockQ8_K& a, uint8_t* out) {
  const __m256i c0 = _mm256_setr_epi16(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
  const __m256i c1 = _mm256_setr_epi16(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  // Per lane: the 8 low bytes, then the 8 high bytes, of its 8 int16 entries.
  const __m256i split = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12,
                                         14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int j = 0; j < 64; ++j) {
    const int h = j / 32, m = j % 32;
    for (int s = 0; s < 2; ++s) {
      const int e0 = 128 * h + 64 * s + m;
      const __m256i v = _mm256_add_epi16(_mm256_mullo_epi16(c0, _mm256_set1_epi16(a.qs[e0])),
                                         _mm256_mullo_epi16(c1, _mm256_set1_epi16(a.qs[e0 + 32])));
      // [lo 0-7, hi 0-7 | lo 8-15, hi 8-15] -> [lo 0-15 | hi 0-15]
      const __m256i planes = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xD8);
      uint8_t* t = out + ((j / 2) * 2 + s) * 64 + (j % 2) * 16;
      _mm_store_si128(reinterpret_cast<__m128i*>(t), _mm256_castsi256_si128(planes));
      _mm_store_si128(reinterpret_cast<__m128i*>(t + 32), _mm256_extracti128_si256(planes, 1));
    }
  }
}

// The int32 sums of one block of one 16-row group for T tokens: s32[2t] rows 0-7, s32[2t + 1]
// rows 8-15, of sum(c * a) (the bound is in the file comment).
template <int T>
inline void BlockSums(const uint8_t* codes, const uint8_t* const* tab, __m256i* s32) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int t = 0; t < 2 * T; ++t) s32[t] = _mm256_setzero_si256();
  for (int half = 0; half < 2; ++half) {
    __m256i a0[T], a1[T];
    for (int t = 0; t < T; ++t) a0[t] = a1[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int p = 16 * half; p < 16 * half + 16; ++p) {
      // The group's bytes are one stream (decode): keep it ahead of the loads.
      if (p % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(codes + 32 * p + kPrefetchAhead), _MM_HINT_T0);
      const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 32 * p));
      const __m256i il = _mm256_and_si256(q, m4);
      const __m256i ih = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      for (int t = 0; t < T; ++t) {
        const __m256i* tp = reinterpret_cast<const __m256i*>(tab[t] + 128 * p);
        const __m256i l0 = _mm256_shuffle_epi8(_mm256_load_si256(tp + 0), il);
        const __m256i h0 = _mm256_shuffle_epi8(_mm256_load_si256(tp + 1), il);
        const __m256i l1 = _mm256_shuffle_epi8(_mm256_load_si256(tp + 2), ih);
        const __m256i h1 = _mm256_shuffle_epi8(_mm256_load_si256(tp + 3), ih);
        // Lane k of a0: rows 0-7 of line 2p + k; a1: rows 8-15.
        a0[t] = _mm256_add_epi16(a0[t], _mm256_add_epi16(_mm256_unpacklo_epi8(l0, h0), _mm256_unpacklo_epi8(l1, h1)));
        a1[t] = _mm256_add_epi16(a1[t], _mm256_add_epi16(_mm256_unpackhi_epi8(l0, h0), _mm256_unpackhi_epi8(l1, h1)));
      }
    }
    for (int t = 0; t < T; ++t) {
      const __m256i w0 = _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(a0[t])),
                                          _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a0[t], 1)));
      const __m256i w1 = _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm256_castsi256_si128(a1[t])),
                                          _mm256_cvtepi16_epi32(_mm256_extracti128_si256(a1[t], 1)));
      s32[2 * t] = _mm256_add_epi32(s32[2 * t], w0);
      s32[2 * t + 1] = _mm256_add_epi32(s32[2 * t + 1], w1);
    }
  }
}

// One group's block for T tokens into their float accumulators acc[t * 16 ..] in GemmRef's
// order: acc += float(sumi) * (d_w * d_a), sumi = sum(c * a) - (activation block sum).
template <int T>
inline void GroupBlock(const uint8_t* group, int64_t b, const uint8_t* const* tab, const int32_t* asum,
                       const float* da, float* acc) {
  __m256i s32[2 * T];
  BlockSums<T>(group + LutCodesOffset(b), tab, s32);
  const __m128i* sc = reinterpret_cast<const __m128i*>(group + LutScalesOffset(b));
  const __m256 dw0 = _mm256_cvtph_ps(_mm_load_si128(sc));
  const __m256 dw1 = _mm256_cvtph_ps(_mm_load_si128(sc + 1));
  for (int t = 0; t < T; ++t) {
    const __m256i bs = _mm256_set1_epi32(asum[t]);
    const __m256 d = _mm256_set1_ps(da[t]);
    float* at = acc + 16 * t;
    const __m256 f0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s32[2 * t], bs)), _mm256_mul_ps(dw0, d));
    const __m256 f1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(s32[2 * t + 1], bs)), _mm256_mul_ps(dw1, d));
    _mm256_storeu_ps(at, _mm256_add_ps(_mm256_loadu_ps(at), f0));
    _mm256_storeu_ps(at + 8, _mm256_add_ps(_mm256_loadu_ps(at + 8), f1));
  }
}

void GroupBlockN(int n, const uint8_t* group, int64_t b, const uint8_t* const* tab, const int32_t* asum,
                 const float* da, float* acc) {
  switch (n) {
    case 1: GroupBlock<1>(group, b, tab, asum, da, acc); break;
    case 2: GroupBlock<2>(group, b, tab, asum, da, acc); break;
    case 3: GroupBlock<3>(group, b, tab, asum, da, acc); break;
    default: GroupBlock<4>(group, b, tab, asum, da, acc); break;
  }
}

}  // namespace

// TQ2_0 x Q8_K on the lookup-table layout; plain rows (streamed layers) go to the int8-dot kernel.
// Tokens go in chunks whose tables are built once per call; the tables of a chunk of blocks stay
// in L1 (decode: up to 4 tokens) or L2 (prefill) while every 16-row group of [r0, r1) reads its
// lines for those blocks; each group's block is read once per 4 tokens (from L1 after the first).
void GemmTq2LutAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (w.interleave != kInterleaveLut) {
    Avx2Table().tq2_int8dot(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  if (r0 >= r1) return;
  const int64_t nb = w.cols / kQK_K;
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  struct alignas(32) Line {
    uint8_t b[32];
  };
  thread_local std::vector<Line> tables;  // 32-byte aligned (the aligned loads)
  thread_local std::vector<float> accs;
  thread_local std::vector<int32_t> asums;
  thread_local std::vector<float> das;
  for (int t0 = 0; t0 < n_tokens; t0 += kChunkTokens) {
    const int nt = std::min(kChunkTokens, n_tokens - t0);
    // Decode reads each group's blocks front to back, all of them (tables of every block, in L2
    // for long rows): chunks of a few blocks per group made the weights many short runs, which
    // the hardware prefetchers did not follow from DRAM. Prefill keeps a chunk of blocks' tables
    // in L2 and reuses each group's block (in L1) for every 4 tokens of the chunk.
    const int64_t kb = nt <= kSubTokens ? nb
                                        : std::max<int64_t>(1, std::min<int64_t>(nb, (192 << 10) / (int64_t{nt} * kTableBytes)));
    tables.resize(static_cast<size_t>(nt * kb * kTableBytes / 32));
    accs.assign(static_cast<size_t>((g1 - g0) * nt * 16), 0.0f);
    asums.resize(static_cast<size_t>(nt * nb));
    das.resize(static_cast<size_t>(nt * nb));
    for (int t = 0; t < nt; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
      for (int64_t b = 0; b < nb; ++b) {
        int32_t s = 0;
        for (int j = 0; j < 16; ++j) s += a[b].bsums[j];
        // Block-major, so a sub-chunk's tokens of one block are adjacent.
        asums[static_cast<size_t>(b * nt + t)] = s;
        das[static_cast<size_t>(b * nt + t)] = a[b].d;
      }
    }
    uint8_t* tab_base = reinterpret_cast<uint8_t*>(tables.data());
    for (int64_t b0 = 0; b0 < nb; b0 += kb) {
      const int64_t b1 = std::min(nb, b0 + kb);
      for (int t = 0; t < nt; ++t) {
        const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
        for (int64_t b = b0; b < b1; ++b) BuildTables(a[b], tab_base + ((b - b0) * nt + t) * kTableBytes);
      }
      for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* group = w.data + static_cast<size_t>(g) * w.group_bytes;
        float* acc = accs.data() + (g - g0) * nt * 16;
        for (int64_t b = b0; b < b1; ++b) {
          for (int s0 = 0; s0 < nt; s0 += kSubTokens) {
            const int n = std::min(kSubTokens, nt - s0);
            const uint8_t* tab[kSubTokens];
            for (int i = 0; i < n; ++i) tab[i] = tab_base + ((b - b0) * nt + s0 + i) * kTableBytes;
            const size_t k = static_cast<size_t>(b * nt + s0);
            GroupBlockN(n, group, b, tab, asums.data() + k, das.data() + k, acc + s0 * 16);
          }
        }
      }
    }
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t ra = std::max(r0, 16 * g), rb = std::min(r1, 16 * g + 16);
      const float* acc = accs.data() + (g - g0) * nt * 16;
      for (int t = 0; t < nt; ++t) {
        float* yt = y + static_cast<int64_t>(t0 + t) * ldy;
        for (int64_t r = ra; r < rb; ++r) yt[r] = acc[t * 16 + (r - 16 * g)] * w.tensor_scale * scale;
      }
    }
  }
}

}  // namespace trine::kernels
