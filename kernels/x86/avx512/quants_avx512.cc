// AVX-512 (F, BW, VL, DQ, VNNI) kernels for the INT4/INT8/K-quant weight types: Q4_0 x Q8_0,
// Q8_0 x Q8_0, Q4_K x Q8_K, Q6_K x Q8_K, on the file's block layout (no repack). Compiled with its
// own flags; reached only through the dispatch table. Must not depend on anything but the block
// structs, fp16 helpers and the GemmFn contract (kernels/ref/matmul_ref.h).
//
// Bit-exactness: every kernel computes the reference's exact int32 sum per (row, token, block)
// and then applies the reference's float operations (kernels/ref/matmul_ref.cc, DotQ*) in the same
// order, lane-wise, with the rows of a tile in the float lanes. Vector float mul/add/convert round
// exactly like their scalar counterparts and -ffp-contract=off forbids fused multiply-adds, so the
// results equal GemmRef bit for bit.
//
// Loop shapes (measured choices in kernels/README.md):
//  * Q4_0 / Q8_0, all token counts: 16 rows in the lanes. The 16 quant bytes of each row's block
//    are transposed 4 bytes at a time (row i in dword lane i), so one vpdpbusd against a broadcast
//    of 4 activations advances all 16 rows and every lane ends as one (row, block) sum: no
//    horizontal reduction. Up to 4 tokens reuse the transposed block from registers; larger
//    batches stage the transposed tile once per call and run 16 tokens per pass over it.
//  * Q4_K / Q6_K below kTokenLaneMin tokens (decode): a tile of 8 rows; each row's block is
//    unpacked to unsigned bytes and dotted with the token's activations (vpmaddubsw, then
//    vpdpwssd against the per-16/32 scales), the 8 per-row int32 vectors are reduced together by
//    one transpose-add tree, and the float combination runs with one row per lane.
//  * Q4_K on the x16 layout from kTokenLaneMin tokens (prefill): 16 rows in the lanes, 8 tokens
//    per pass over a group while it is in L1/L2 (GemmQ4_KX16Prefill).
//  * Q4_K (file rows) / Q6_K from kTokenLaneMin tokens (prefill): token lanes. Activations of 16 tokens are
//    interleaved 4 bytes at a time (a transposed copy made once per call), each weight row is
//    unpacked once to bytes, and every 4 weights are broadcast against 16 tokens with one vpdpbusd;
//    the float combination runs with one token per lane.
// Signed weights use the unsigned operand of vpdpbusd / vpmaddubsw through a +bias (Q4_0: nibbles
// are already w + 8; Q8_0: w ^ 0x80 = w + 128; Q6_K: q = w + 32), and the bias times the
// activation sum is subtracted in int32, which is exact.
// Decode is bound by memory: each tile prefetches the next one (PrefetchNext).
#include <immintrin.h>

#include <cstring>
#include <utility>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx512/dpbusd_bcast.h"
#include "x86/avx512/x16_groups_avx512.h"

namespace trine::kernels {
namespace {

constexpr int kTileRows = 8;
// Token count from which the token-lane path is used (below it the row-lane path is faster; see
// kernels/README.md for the measurement).
constexpr int kTokenLaneMin = 8;
// Q6_K on the x16 layout (the tied output head) keeps the x16 walk up to this many tokens: the
// token-lane path fills 16 token lanes and unpacks every row, so a batched decode of 8 sequences
// paid for 16 tokens there.
constexpr int kQ6TokenLaneMin = 16;

// ---------------------------------------------------------------------------------------------
// Shared helpers.

// Row pointers of a tile starting at row r; rows past r1 repeat the last valid row (they are
// computed but never stored).
inline int TileRows(const WeightView& w, int64_t r, int64_t r1, const uint8_t* rows[kTileRows]) {
  const int nr = r1 - r < kTileRows ? static_cast<int>(r1 - r) : kTileRows;
  for (int i = 0; i < kTileRows; ++i) {
    const int64_t rr = i < nr ? r + i : r1 - 1;
    rows[i] = w.data + static_cast<size_t>(rr) * w.row_bytes;
  }
  return nr;
}

// Software prefetch of the next row tile while the current one is computed. A tile's rows are
// contiguous in memory and a thread's calls walk consecutive tiles, so the weights are one linear
// stream: each block step prefetches the same number of bytes of the following tile (one tile
// ahead, into L2; into L1 measured ~10 % slower, two to eight tiles ahead no different). Without
// it the hardware prefetchers, seeing 8-16 short interleaved row streams, leave decode at
// ~1/(1/compute + 1/bandwidth) instead of the slower of the two.
inline void PrefetchNext(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
}

// Byte offsets of the tile's rows from rows[0] (for gathers).
inline __m256i RowOffsets(const uint8_t* const rows[kTileRows]) {
  alignas(32) int32_t off[kTileRows];
  for (int i = 0; i < kTileRows; ++i) off[i] = static_cast<int32_t>(rows[i] - rows[0]);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
}

// Per 128-bit lane k: [sum a[k], sum b[k], sum c[k], sum d[k]] (each the sum of that lane's 4 int32).
inline __m512i Hadd4(__m512i a, __m512i b, __m512i c, __m512i d) {
  const __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
  const __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
  return _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
}

// Full horizontal sums of 8 vectors: lane i = sum of s[i].
inline __m256i Reduce8(const __m512i s[8]) {
  const __m512i x = Hadd4(s[0], s[1], s[2], s[3]);
  const __m512i y = Hadd4(s[4], s[5], s[6], s[7]);
  // [x0+x2, x1+x3, y0+y2, y1+y3] -> [x02, y02, x13, y13] -> halves added.
  const __m512i t = _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x44), _mm512_shuffle_i64x2(x, y, 0xEE));
  const __m512i u = _mm512_shuffle_i64x2(t, t, 0xD8);
  return _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
}

// Each s[i] holds two blocks (128-bit lanes 0-1: block b, 2-3: block b+1). Returns
// [row 0..7 of block b, row 0..7 of block b+1].
inline __m512i Reduce8x2(const __m512i s[8]) {
  const __m512i x = Hadd4(s[0], s[1], s[2], s[3]);
  const __m512i y = Hadd4(s[4], s[5], s[6], s[7]);
  const __m512i t = _mm512_add_epi32(_mm512_shuffle_i64x2(x, y, 0x88), _mm512_shuffle_i64x2(x, y, 0xDD));
  return _mm512_shuffle_i64x2(t, t, 0xD8);
}

// Horizontal sums of 8 256-bit vectors: lane i = sum of s[i].
inline __m256i Reduce8x256(const __m256i s[8]) {
  const __m256i h01 = _mm256_hadd_epi32(s[0], s[1]), h23 = _mm256_hadd_epi32(s[2], s[3]);
  const __m256i h45 = _mm256_hadd_epi32(s[4], s[5]), h67 = _mm256_hadd_epi32(s[6], s[7]);
  const __m256i g0 = _mm256_hadd_epi32(h01, h23), g1 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x21), _mm256_blend_epi32(g0, g1, 0xF0));
}

// fp16 in the low (hi = false) or high 16 bits of each int32 lane, to fp32.
inline __m256 HalvesToFloat(__m256i v, bool hi) {
  if (hi) v = _mm256_srli_epi32(v, 16);
  return _mm256_cvtph_ps(_mm256_cvtepi32_epi16(v));
}
inline __m512 HalvesToFloat(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

// y[t * ldy + r + i] = acc[i] * tensor_scale * scale for the tile's valid rows.
inline void StoreRows(float* y, __m256 acc, float tensor_scale, float scale, int nr) {
  const __m256 v = _mm256_mul_ps(_mm256_mul_ps(acc, _mm256_set1_ps(tensor_scale)), _mm256_set1_ps(scale));
  _mm256_mask_storeu_ps(y, static_cast<__mmask8>((1u << nr) - 1), v);
}

// ---------------------------------------------------------------------------------------------
// Q4_0 x Q8_0 and Q8_0 x Q8_0.

// Per call, each token's -bias * (block sum) and fp32 block scales, computed once and shared by
// all rows.
struct Q8_0ActInfo {
  std::vector<int32_t> corr;  // (n_tokens, nb): -bias * sum of the block's activations
  std::vector<float> d;       // (n_tokens, nb): fp32 block scale
};

Q8_0ActInfo& GetActInfo() {
  thread_local Q8_0ActInfo s;
  return s;
}

void GatherQ8_0ActInfo(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb, int bias, Q8_0ActInfo* info) {
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(nb);
  if (info->corr.size() < n) info->corr.resize(n);
  if (info->d.size() < n) info->d.resize(n);
  const __m512i ones = _mm512_set1_epi8(1);
  // Reduce8x2 leaves block 2j in lane j and block 2j+1 in lane 8+j.
  const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  const __m512i doff = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(sizeof(BlockQ8_0)));
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t));
    int32_t* corr = info->corr.data() + static_cast<size_t>(t) * static_cast<size_t>(nb);
    float* d = info->d.data() + static_cast<size_t>(t) * static_cast<size_t>(nb);
    int64_t b = 0;
    for (; b + 16 <= nb; b += 16) {
      __m512i s[8];
      for (int i = 0; i < 8; ++i) {
        const __m512i v = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 2 * i].qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b + 2 * i + 1].qs)), 1);
        s[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, v);
      }
      const __m512i sums = _mm512_permutexvar_epi32(order, Reduce8x2(s));
      _mm512_storeu_si512(corr + b, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-bias)));
      // d is the first 2 bytes of each 34-byte block: a 4-byte gather stays inside the blocks.
      _mm512_storeu_ps(d + b, HalvesToFloat(_mm512_i32gather_epi32(doff, &a[b], 1)));
    }
    for (; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < kQK8_0; ++j) sum += a[b].qs[j];
      corr[b] = -bias * sum;
      d[b] = Fp16ToFp32(a[b].d);
    }
  }
}

// The 16 bytes at byte offset `off` of 16 rows, transposed: q[k] dword lane i = dword k of row i.
inline void LoadTransposed16(const uint8_t* const rows[16], size_t off, __m512i q[4]) {
  // z[g] 128-bit lane L = the 16 bytes of row 4L + g.
  __m512i z[4];
  for (int g = 0; g < 4; ++g) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[g] + off)));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[4 + g] + off)), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[8 + g] + off)), 2);
    z[g] = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[12 + g] + off)), 3);
  }
  // 4 x 4 dword transpose inside each 128-bit lane.
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  q[0] = _mm512_unpacklo_epi64(t0, t2);
  q[1] = _mm512_unpackhi_epi64(t0, t2);
  q[2] = _mm512_unpacklo_epi64(t1, t3);
  q[3] = _mm512_unpackhi_epi64(t1, t3);
}

// One block of 16 rows, transposed and unpacked: v[k] (k < 4) holds elements 4k..4k+3 and v[4 + k]
// elements 16+4k..16+4k+3 of each row as unsigned bytes (w + 8 or w + 128), one row per dword lane.
template <bool kQ4>
inline void UnpackRows16(const uint8_t* const rows[16], size_t qoff, __m512i v[8]) {
  LoadTransposed16(rows, qoff, v);
  if constexpr (kQ4) {
    const __m512i m0f = _mm512_set1_epi8(0x0F);
    for (int k = 0; k < 4; ++k) {
      v[4 + k] = _mm512_and_si512(_mm512_srli_epi16(v[k], 4), m0f);
      v[k] = _mm512_and_si512(v[k], m0f);
    }
  } else {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    LoadTransposed16(rows, qoff + 16, v + 4);
    for (int k = 0; k < 8; ++k) v[k] = _mm512_xor_si512(v[k], flip);
  }
}

// acc += (sum of the block) * (d_w * d_a) for one token, 16 rows wide.
inline __m512 Q0BlockToken(const __m512i v[8], __m512 dw, const int8_t* aq, int32_t corr, float da, __m512 acc) {
  __m512i s = _mm512_set1_epi32(corr);
  for (int k = 0; k < 4; ++k) {
    int32_t a_lo, a_hi;
    std::memcpy(&a_lo, aq + 4 * k, 4);
    std::memcpy(&a_hi, aq + 16 + 4 * k, 4);
    s = _mm512_dpbusd_epi32(s, v[k], _mm512_set1_epi32(a_lo));
    s = _mm512_dpbusd_epi32(s, v[4 + k], _mm512_set1_epi32(a_hi));
  }
  // Reference order: sumi * (d_w * d_a).
  return _mm512_add_ps(acc, _mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_set1_ps(da))));
}

// Per-thread staging of a transposed 16-row tile for batches (64-byte aligned lines).
struct alignas(64) Line64 {
  uint8_t b[64];
};
struct Q0Stage {
  std::vector<Line64> v;   // (nb, 8): UnpackRows16 output per block
  std::vector<Line64> dw;  // (nb): fp32 block scales of the 16 rows
};

Q0Stage& GetQ0Stage() {
  thread_local Q0Stage s;
  return s;
}

// Q4_0 / Q8_0 weights x Q8_0 activations with 16 rows in the lanes; any number of tokens. Up to 4
// tokens reuse each block from registers; larger batches stage the whole tile once (16 rows x cols
// bytes, in L1/L2) and run kBatchTok (16) tokens per pass over it.
template <bool kQ4>
void GemmQ0Rows16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, float scale) {
  constexpr size_t kBlockBytes = kQ4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0);
  const int64_t nb = w.cols / kQK8_0;
  Q8_0ActInfo& info = GetActInfo();
  // The unsigned weights are w + 8 (Q4_0 nibbles) or w ^ 0x80 = w + 128 (Q8_0).
  GatherQ8_0ActInfo(xq, act_stride, n_tokens, nb, kQ4 ? 8 : 128, &info);
  constexpr int kDecodeTok = 4, kBatchTok = 16;
  const bool staged = n_tokens > kDecodeTok;
  Q0Stage& st = GetQ0Stage();
  if (staged && st.v.size() < static_cast<size_t>(nb) * 8) {
    st.v.resize(static_cast<size_t>(nb) * 8);
    st.dw.resize(static_cast<size_t>(nb));
  }
  const float out_scale = w.tensor_scale;
  for (int64_t r = r0; r < r1; r += 16) {
    const int nr = r1 - r < 16 ? static_cast<int>(r1 - r) : 16;
    const uint8_t* rows[16];
    alignas(64) int32_t off[16];
    for (int i = 0; i < 16; ++i) {
      rows[i] = w.data + static_cast<size_t>(i < nr ? r + i : r1 - 1) * w.row_bytes;
      off[i] = static_cast<int32_t>(rows[i] - rows[0]);
    }
    const __m512i voff = _mm512_load_si512(off);
    const uint8_t* next = w.data + static_cast<size_t>(r + 16) * w.row_bytes;
    const __mmask16 store_mask = static_cast<__mmask16>((1u << nr) - 1);
    auto store = [&](int t, __m512 acc) {
      const __m512 v = _mm512_mul_ps(_mm512_mul_ps(acc, _mm512_set1_ps(out_scale)), _mm512_set1_ps(scale));
      _mm512_mask_storeu_ps(y + static_cast<int64_t>(t) * ldy + r, store_mask, v);
    };
    auto token = [&](int t, int64_t b) {
      const size_t k0 = static_cast<size_t>(t) * static_cast<size_t>(nb) + static_cast<size_t>(b);
      const int8_t* aq = (reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t)) + b)->qs;
      return std::make_pair(aq, k0);
    };
    if (!staged) {
      __m512 acc[kDecodeTok];
      for (int t = 0; t < kDecodeTok; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t qoff = static_cast<size_t>(b) * kBlockBytes + 2;
        PrefetchNext(next + 16 * (qoff - 2), 16 * kBlockBytes);
        __m512i v[8];
        UnpackRows16<kQ4>(rows, qoff, v);
        const __m512 dw = HalvesToFloat(_mm512_i32gather_epi32(voff, rows[0] + qoff - 2, 1));
        for (int t = 0; t < n_tokens; ++t) {
          const auto [aq, k0] = token(t, b);
          acc[t] = Q0BlockToken(v, dw, aq, info.corr[k0], info.d[k0], acc[t]);
        }
      }
      for (int t = 0; t < n_tokens; ++t) store(t, acc[t]);
      continue;
    }
    for (int64_t b = 0; b < nb; ++b) {
      const size_t qoff = static_cast<size_t>(b) * kBlockBytes + 2;
      PrefetchNext(next + 16 * (qoff - 2), 16 * kBlockBytes);
      __m512i v[8];
      UnpackRows16<kQ4>(rows, qoff, v);
      for (int k = 0; k < 8; ++k) _mm512_store_si512(st.v[static_cast<size_t>(b) * 8 + static_cast<size_t>(k)].b, v[k]);
      _mm512_store_ps(st.dw[static_cast<size_t>(b)].b, HalvesToFloat(_mm512_i32gather_epi32(voff, rows[0] + qoff - 2, 1)));
    }
    for (int t0 = 0; t0 < n_tokens; t0 += kBatchTok) {
      const int nt = n_tokens - t0 < kBatchTok ? n_tokens - t0 : kBatchTok;
      __m512 acc[kBatchTok];
      for (int t = 0; t < kBatchTok; ++t) acc[t] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        __m512i v[8];
        for (int k = 0; k < 8; ++k) v[k] = _mm512_load_si512(st.v[static_cast<size_t>(b) * 8 + static_cast<size_t>(k)].b);
        const __m512 dw = _mm512_load_ps(st.dw[static_cast<size_t>(b)].b);
        for (int t = 0; t < nt; ++t) {
          const auto [aq, k0] = token(t0 + t, b);
          acc[t] = Q0BlockToken(v, dw, aq, info.corr[k0], info.d[k0], acc[t]);
        }
      }
      for (int t = 0; t < nt; ++t) store(t0 + t, acc[t]);
    }
  }
}

// The Q8_0 activations of one token pass regrouped for the x16 kernel: block b of the pass's
// token t sits at index b * T + t (qs: 32 bytes each; corr and d alike). A block step then
// reaches its T tokens from one pointer at constant offsets: with T token pointers and
// (t0 + t) * nb + b index arithmetic the pass ran out of general registers and spilled in its
// inner loop. Built per pass, just before it (T x cols bytes, in L1/L2 when the pass reads it);
// one tile for the whole call wrote megabytes that went out to L3 first.
struct Q8_0PassTile {
  std::vector<int8_t> qs;
  std::vector<int32_t> corr;
  std::vector<float> d;
};

Q8_0PassTile& GetPassTile() {
  thread_local Q8_0PassTile s;
  return s;
}

// Tokens t0 .. t0 + T - 1 into `tile` (corr and d from the call's token-major `info`).
void GatherQ8_0PassTile(const uint8_t* xq, size_t act_stride, int t0, int T, int64_t nb, const Q8_0ActInfo& info,
                        Q8_0PassTile* tile) {
  const size_t n = static_cast<size_t>(T) * static_cast<size_t>(nb);
  if (tile->corr.size() < n) {
    tile->qs.resize(n * kQK8_0);
    tile->corr.resize(n);
    tile->d.resize(n);
  }
  for (int t = 0; t < T; ++t) {
    const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t0 + t));
    const size_t src = static_cast<size_t>(t0 + t) * static_cast<size_t>(nb);
    for (int64_t b = 0; b < nb; ++b) {
      const size_t dst = static_cast<size_t>(b * T + t);
      std::memcpy(tile->qs.data() + dst * kQK8_0, a[b].qs, kQK8_0);
      tile->corr[dst] = info.corr[src + static_cast<size_t>(b)];
      tile->d[dst] = info.d[src + static_cast<size_t>(b)];
    }
  }
}

// Q4_0 x Q8_0 on the x16 layout (WeightView::interleave; built at load time): each block of 16
// rows is 4 lines of 64 bytes already in rows-in-lanes order, so there is no transpose and no
// gather. A line costs 2 vpdpbusd per token, each against a broadcast of 4 activation bytes
// (DpbusdAct). qs, corr and da: the pass's Q8_0PassTile.
//
// The high nibbles: at T < kQ4ShiftMinTokens (decode) they are used in place under 0xF0 (16 x q,
// their own accumulator, shifted out once per block: exact), 2 ANDs a line. From kQ4ShiftMinTokens
// tokens on they are shifted down once per line (shared by the T tokens) and go into the same
// accumulator as the low nibbles, which saves a shift and an add per token and block. Prefill is
// bound by the two vector pipes that run both vpdpbusd and the float multiplies of the block
// epilogue (Zen 5: 8 vpdpbusd + 2 vmulps per token and block), so every other op per token counts.
constexpr int kQ4ShiftMinTokens = 4;
// Tokens per pass over a group (GemmQ4_0X16). The token loop below must unroll fully, or the
// accumulators go to memory (220 GOPS instead of ~580); its pragma covers up to 16.
constexpr int kQ4PassTokens = 12;
static_assert(kQ4PassTokens <= 16, "Q4X16Group's token-loop unroll pragma must cover a whole pass");

template <int T>
inline void Q4X16Group(const uint8_t* g, const uint8_t* next, int64_t nb, const int8_t* qs, const int32_t* corr,
                       const float* da, __m512 out[T]) {
  constexpr bool kShift = T >= kQ4ShiftMinTokens;
  const __m512i m_lo = _mm512_set1_epi8(0x0F), m_hi = _mm512_set1_epi8(static_cast<char>(0xF0));
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, qs += T * kQK8_0, corr += T, da += T) {
    // The next group's same block (and its scale line) into L2: one group ahead of the stream.
    const uint8_t* cb = g + X16CodesOffset(b, 256);
    const uint8_t* pf = next + X16CodesOffset(b, 256);
    PrefetchX16ScaleLine(next, b, 256);
    for (int k = 0; k < 4; ++k) _mm_prefetch(reinterpret_cast<const char*>(pf + 64 * k), _MM_HINT_T1);
    __m512i lo[T], hi[T];
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm512_set1_epi32(corr[t]);
      hi[t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i q = _mm512_load_si512(cb + 64 * k);
      const __m512i ql = _mm512_and_si512(q, m_lo);
      const __m512i qh = kShift ? _mm512_and_si512(_mm512_srli_epi16(q, 4), m_lo) : _mm512_and_si512(q, m_hi);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        lo[t] = DpbusdAct<T>(lo[t], ql, qs + t * kQK8_0 + 4 * k);
        // One chain of 8 per token when shifted: the T chains and the next block's (independent)
        // hide the latency; two chains and an add per block measured no faster.
        __m512i& h = kShift ? lo[t] : hi[t];
        h = DpbusdAct<T>(h, qh, qs + t * kQK8_0 + 16 + 4 * k);
      }
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(g + X16ScalesOffset(b, 256))));
    for (int t = 0; t < T; ++t) {
      const __m512i sumi = kShift ? lo[t] : _mm512_add_epi32(lo[t], _mm512_srai_epi32(hi[t], 4));
      // Reference order: sumi * (d_w * d_a).
      out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), _mm512_mul_ps(dw, _mm512_set1_ps(da[t]))));
    }
  }
}

void GemmQ4_0X16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                 int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK4_0;
  Q8_0ActInfo& info = GetActInfo();
  GatherQ8_0ActInfo(xq, act_stride, n_tokens, nb, 8, &info);
  Q8_0PassTile& tile = GetPassTile();
  // Up to 12 tokens per pass over a group (24 accumulators: one int32 chain and one float sum per
  // token, since the high nibbles share the low ones' chain from 4 tokens on); a group (16 rows x
  // cols / 2 bytes) stays in L1/L2 for the next pass. 12 against 8: the per-line loads, masks and
  // shifts are shared by more tokens; llama-1b Q4_0 pp128, three alternating rounds, 244-246 vs
  // 227-236 tok/s at 1 thread and 424-472 vs 420-450 at 2.
  ForTokenPasses<kQ4PassTokens>(n_tokens, [&](auto tc, int t0) {
    constexpr int T = decltype(tc)::value;
    GatherQ8_0PassTile(xq, act_stride, t0, T, nb, info, &tile);
    ForX16Groups<T>(w, t0, y, ldy, r0, r1, scale, [&](const uint8_t* gp, const uint8_t* next, __m512* out) {
      Q4X16Group<T>(gp, next, nb, tile.qs.data(), tile.corr.data(), tile.d.data(), out);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Q6_K x Q8_K.

// The 256 6-bit values of a Q6_K block as unsigned bytes q = w + 32, in activation order.
inline void UnpackQ6_K(const BlockQ6_K* blk, __m512i q[4]) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  // Elements 0..31 take qh bits 0-1 (<< 4), 32..63 bits 2-3 (<< 2); 64..95 bits 4-5, 96..127 bits 6-7 (>> 2).
  const __m512i shl = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                       4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m512i shr = _mm512_set_epi16(2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,  //
                                       0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int h = 0; h < 2; ++h) {
    const __m512i ql = _mm512_loadu_si512(blk->ql + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qh + 32 * h)));
    const __m512i ha = _mm512_and_si512(_mm512_sllv_epi16(qh, shl), m30);
    const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, shr), m30);
    // (x & 0x0F) | h
    q[2 * h] = _mm512_ternarylogic_epi32(ql, m0f, ha, 0xEA);
    q[2 * h + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), m0f, hb, 0xEA);
  }
}

// Word-lane index vectors: vector v (elements 64v..64v+63) takes scale 4v + lane / 8.
inline __m512i ScaleIdx16(int v) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(4 * v + l / 8);
  return _mm512_load_si512(idx);
}

// int32 lanes whose sum is sum_j sc_j * sum_{16 elements of group j} (q - 32) * a.
inline __m512i DotQ6_KBlock(const BlockQ6_K* blk, const __m512i a[4], __m256i bsums, const __m512i sidx[4]) {
  __m512i q[4];
  UnpackQ6_K(blk, q);
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
  // -32 * sum_j sc_j * bsum_j (|32 sc| <= 4096 fits int16).
  const __m256i scm = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 5));
  __m512i s = _mm512_zextsi256_si512(_mm256_madd_epi16(bsums, scm));
  const __m512i scz = _mm512_castsi256_si512(sc);
  for (int v = 0; v < 4; ++v) {
    // q * a pairs <= 2 * 63 * 127: no int16 saturation.
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q[v], a[v]), _mm512_permutexvar_epi16(sidx[v], scz));
  }
  return s;
}

void GemmQ6_KRowLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const __m512i sidx[4] = {ScaleIdx16(0), ScaleIdx16(1), ScaleIdx16(2), ScaleIdx16(3)};
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const uint8_t* next = w.data + static_cast<size_t>(r + kTileRows) * w.row_bytes;
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        __m512i av[4];
        for (int v = 0; v < 4; ++v) av[v] = _mm512_loadu_si512(a[b].qs + 64 * v);
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ6_K);
        // Each row's block two blocks ahead into L1 first, then the next tile into L2 (the order
        // matters, as for the x16 kernels): 12.5 -> 13.1-13.7 GB/s on a 1 GB matrix.
        for (int i = 0; i < kTileRows; ++i) {
          for (size_t o = 0; o < sizeof(BlockQ6_K) + 63; o += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(rows[i] + boff + 2 * sizeof(BlockQ6_K) + o), _MM_HINT_T0);
          }
        }
        PrefetchNext(next + kTileRows * boff, kTileRows * sizeof(BlockQ6_K));
        __m512i s[kTileRows];
        for (int i = 0; i < kTileRows; ++i) {
          s[i] = DotQ6_KBlock(reinterpret_cast<const BlockQ6_K*>(rows[i] + boff), av, bs, sidx);
        }
        const __m256i sums = Reduce8(s);
        // d sits at byte 208; read bytes 206..209 (never past the block) and take the high half.
        const __m256 dw = HalvesToFloat(_mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + boff + 206), off, 1), true);
        // Reference order: (d_w * d_a) * sumi.
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dw, _mm256_set1_ps(a[b].d)), _mm256_cvtepi32_ps(sums)));
      }
      StoreRows(y + static_cast<int64_t>(t) * ldy + r, acc, w.tensor_scale, scale, nr);
    }
  }
}

// Q6_K x Q8_K on the x16 layout (WeightView::interleave; built at load time): a block of 16 rows
// is 52 lines of 64 bytes in rows-in-lanes order, line k holding bytes 4k..4k+3 of each row's
// block: ql in lines 0-31, qh in 32-47, the 16 int8 scales in 48-51 (d in the group header). For
// half h and quad m (values l = 4m..4m+3 of that half) the lines A = ql[64h + l],
// B = ql[64h + 32 + l] and H = qh[32h + l] give the four 6-bit vectors q_s = w + 32 of values
// 128h + 32s + l (low nibble from A / B, their high nibble for s >= 2, top bits from H's bits
// 2s..2s+1) by one bit-select and one AND each: no transpose, gather or horizontal reduction. The
// 4 quads of a 16-value scale group j = 8h + 2s + m/4 accumulate with vpdpbusd against broadcast
// activations; (sum - 32 * bsum_j) * scale_j joins the block's int32 sum: the reference's sumi.
template <int T>
inline void Q6X16Group(const uint8_t* g, const uint8_t* next, int64_t nb, const uint8_t* xq, size_t act_stride,
                       int t0, __m512 out[T]) {
  constexpr int kLines = 52;
  const __m512i m0f = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F);
  const BlockQ8_K* act[T];
  for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  // The near stream two blocks ahead (Q4KX16Group); the scale lines' prefetches here, three
  // lines' per quad below.
  ForX16Blocks(g, next, nb, kLines * 64, 2 * kLines * 64, [&](int64_t b, const uint8_t* lines, const LinePrefetch& pf) {
    const __m512i* L = reinterpret_cast<const __m512i*>(lines);
    for (int k = 48; k < kLines; ++k) pf.Line(k);
    __m512i sumi[T];
    for (int t = 0; t < T; ++t) sumi[t] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 2
      for (int mh = 0; mh < 2; ++mh) {
        __m512i acc[4][T];
        for (int q = 0; q < 4; ++q) {
          for (int t = 0; t < T; ++t) acc[q][t] = _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int mm = 0; mm < 4; ++mm) {
          const int m = 4 * mh + mm;
          for (int k = 0; k < 3; ++k) pf.Line(3 * (8 * h + m) + k);
          const __m512i A = _mm512_load_si512(L + 16 * h + m), B = _mm512_load_si512(L + 16 * h + 8 + m);
          const __m512i H = _mm512_load_si512(L + 32 + 8 * h + m);
          // (x & 0x0F) | (y & 0x30): select by the 0x0F mask (0xCA: a ? b : c), then clear bits 6-7.
          __m512i q[4];
          q[0] = _mm512_and_si512(_mm512_ternarylogic_epi32(m0f, A, _mm512_slli_epi16(H, 4), 0xCA), m3f);
          q[1] = _mm512_and_si512(_mm512_ternarylogic_epi32(m0f, B, _mm512_slli_epi16(H, 2), 0xCA), m3f);
          q[2] = _mm512_and_si512(_mm512_ternarylogic_epi32(m0f, _mm512_srli_epi16(A, 4), H, 0xCA), m3f);
          q[3] = _mm512_and_si512(_mm512_ternarylogic_epi32(m0f, _mm512_srli_epi16(B, 4), _mm512_srli_epi16(H, 2), 0xCA),
                                  m3f);
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              acc[s][t] = DpbusdAct<T>(acc[s][t], q[s], act[t][b].qs + 128 * h + 32 * s + 4 * m);
            }
          }
        }
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          const int j = 8 * h + 2 * s + mh;
          // Scale j of each row: byte j % 4 of line 48 + j / 4, sign-extended.
          const __m512i sc = _mm512_srai_epi32(
              _mm512_slli_epi32(_mm512_load_si512(L + 48 + j / 4), static_cast<unsigned>(24 - 8 * (j % 4))), 24);
          for (int t = 0; t < T; ++t) {
            const __m512i u = _mm512_sub_epi32(acc[s][t], _mm512_set1_epi32(32 * act[t][b].bsums[j]));
            sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(u, sc));
          }
        }
      }
    }
    const __m512 dw = _mm512_cvtph_ps(
        _mm256_load_si256(reinterpret_cast<const __m256i*>(g + X16ScalesOffset(b, kLines * 64))));
    for (int t = 0; t < T; ++t) {
      // Reference order: (d_w * d_a) * sumi.
      out[t] = _mm512_add_ps(out[t], _mm512_mul_ps(_mm512_mul_ps(dw, _mm512_set1_ps(act[t][b].d)),
                                                   _mm512_cvtepi32_ps(sumi[t])));
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Q4_K x Q8_K.

// The eight 6-bit scales and mins of a Q4_K block as bytes [sc0..sc7, m0..m7] (llama.cpp's
// kmask unpacking of the 12 packed bytes).
inline __m128i Q4_KScalesMins(const uint8_t* s12) {
  uint32_t u[4];
  std::memcpy(u, s12, 12);
  constexpr uint32_t kM1 = 0x3f3f3f3f, kM2 = 0x0f0f0f0f, kM3 = 0x03030303;
  u[3] = ((u[2] >> 4) & kM2) | (((u[1] >> 6) & kM3) << 4);
  const uint32_t mins_lo = u[1] & kM1;
  u[1] = (u[2] & kM2) | (((u[0] >> 6) & kM3) << 4);
  u[2] = mins_lo;
  u[0] &= kM1;
  return _mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]), static_cast<int>(u[1]),
                       static_cast<int>(u[0]));
}

// Word-lane index vectors: pair i (elements 64i..64i+63) takes scale 2i (lanes 0..15) and 2i+1.
inline __m512i PairScaleIdx16(int i) {
  alignas(64) int16_t idx[32];
  for (int l = 0; l < 32; ++l) idx[l] = static_cast<int16_t>(2 * i + l / 16);
  return _mm512_load_si512(idx);
}

// sumi lanes (sum_g sc_g * sum q * a) and summ lanes (sum_g m_g * (bsum_2g + bsum_2g+1)).
inline void DotQ4_KBlock(const BlockQ4_K* blk, const __m512i a[4], __m256i bsums, const __m512i pidx[4],
                         __m256i midx, __m512i* sumi, __m256i* summ) {
  const __m256i sm = _mm256_cvtepu8_epi16(Q4_KScalesMins(blk->scales));  // [sc0..7, m0..7] int16
  *summ = _mm256_madd_epi16(bsums, _mm256_permutexvar_epi16(midx, sm));
  const __m512i smz = _mm512_castsi256_si512(sm);
  const __m512i m0f = _mm512_set1_epi8(0x0F);
  __m512i s = _mm512_setzero_si512();
  for (int i = 0; i < 4; ++i) {
    const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * i)));
    const __m512i q = _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), m0f);
    // q * a pairs <= 2 * 15 * 127; sc <= 63.
    s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(q, a[i]), _mm512_permutexvar_epi16(pidx[i], smz));
  }
  *sumi = s;
}

// The 6-bit scales and mins of a Q4_K x16 block's 16 rows (lines 1-3 at L + 64, the reference's
// byte masks): byte k of sc03 / sc47 / m03 / m47 belongs to sub-block k / 4 + k.
struct Q4KX16ScalesMins {
  __m512i sc03, sc47, m03, m47;
};

inline Q4KX16ScalesMins UnpackQ4KX16ScalesMins(const uint8_t* L) {
  const __m512i m0f = _mm512_set1_epi8(0x0F), m3f = _mm512_set1_epi8(0x3F), m30 = _mm512_set1_epi8(0x30);
  const __m512i u0 = _mm512_load_si512(L + 64), u1 = _mm512_load_si512(L + 128), u2 = _mm512_load_si512(L + 192);
  return {_mm512_and_si512(u0, m3f),
          _mm512_or_si512(_mm512_and_si512(u2, m0f), _mm512_and_si512(_mm512_srli_epi32(u0, 2), m30)),
          _mm512_and_si512(u1, m3f),
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), m0f), _mm512_and_si512(_mm512_srli_epi32(u1, 2), m30))};
}

// The block's float step for T tokens: d and dmin are the low and high halves of line 0's dwords;
// reference order acc += d * sumi - dmin * summ, with d = d_w * d_a.
template <int T>
inline void Q4KX16BlockOut(const uint8_t* L, const BlockQ8_K* const act[T], int64_t b, const __m512i sumi[T],
                           const __m512i summ[T], __m512 out[T]) {
  const __m512i dd = _mm512_load_si512(L);
  const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  const __m512 dmw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
  for (int t = 0; t < T; ++t) {
    const __m512 da = _mm512_set1_ps(act[t][b].d);
    const __m512 d = _mm512_mul_ps(dw, da), dmin = _mm512_mul_ps(dmw, da);
    out[t] = _mm512_add_ps(out[t], _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[t])),
                                                 _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ[t]))));
  }
}

// Q4_K x Q8_K on the x16 layout (WeightView::interleave; built at load time): a block of 16 rows
// is 36 lines of 64 bytes in rows-in-lanes order, line k holding bytes 4k..4k+3 of each row's
// 144-byte block: d and dmin in line 0, the 12 packed scale bytes in lines 1-3, qs in lines 4-35
// (chunk j = lines 4 + 8j .. 4 + 8j + 7: low nibbles are sub-block 2j, high nibbles 2j + 1). The
// 6-bit scales and mins of all 16 rows are unpacked together with the reference's byte masks,
// nibbles are used in place under 0x0F / 0xF0 (the high ones as 16 x q, their own accumulator,
// shifted out per sub-block: exact), one vpdpbusd per line and nibble against a broadcast of 4
// activations, and each sub-block's sum joins sumi times its scale: the reference's exact sumi and
// summ, then its float order (acc += d * sumi - dmin * summ), 16 rows wide.
template <int T>
inline void Q4KX16Group(const uint8_t* g, const uint8_t* next, int64_t nb, const uint8_t* xq, size_t act_stride,
                        int t0, __m512 out[T]) {
  constexpr int kLines = 36;
  const __m512i m0f = _mm512_set1_epi8(0x0F), mf0 = _mm512_set1_epi8(static_cast<char>(0xF0));
  const __m512i mff = _mm512_set1_epi32(0xFF);
  const BlockQ8_K* act[T];
  for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  // The near stream two blocks (4.6 KB) ahead: on a matrix larger than the caches that lifted
  // this kernel from ~78 % to ~98 % of the streaming bandwidth (kernels/README.md). Lines 0-3's
  // prefetches here, the rest below.
  ForX16Blocks(g, next, nb, kLines * 64, 2 * kLines * 64, [&](int64_t b, const uint8_t* L, const LinePrefetch& pf) {
    for (int k = 0; k < 4; ++k) pf.Line(k);
    const Q4KX16ScalesMins sm = UnpackQ4KX16ScalesMins(L);
    __m512i sumi[T], summ[T];
    for (int t = 0; t < T; ++t) sumi[t] = summ[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i lo[T], hi[T];
      for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        pf.Line(4 + 8 * j + k);
        const __m512i q = _mm512_load_si512(L + 64 * (4 + 8 * j + k));
        const __m512i ql = _mm512_and_si512(q, m0f), qh = _mm512_and_si512(q, mf0);
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          lo[t] = DpbusdAct<T>(lo[t], ql, act[t][b].qs + 64 * j + 4 * k);
          hi[t] = DpbusdAct<T>(hi[t], qh, act[t][b].qs + 64 * j + 32 + 4 * k);
        }
      }
      // Sub-blocks 2j and 2j + 1: scale bytes k = (2j) % 4 and (2j + 1) % 4 of sc03 (j < 2) or sc47.
      const __m512i scv = j < 2 ? sm.sc03 : sm.sc47, mv = j < 2 ? sm.m03 : sm.m47;
      const unsigned sh0 = static_cast<unsigned>(8 * ((2 * j) % 4)), sh1 = sh0 + 8;
      const __m512i sc_lo = _mm512_and_si512(_mm512_srli_epi32(scv, sh0), mff);
      const __m512i sc_hi = _mm512_and_si512(_mm512_srli_epi32(scv, sh1), mff);
      const __m512i m_lo = _mm512_and_si512(_mm512_srli_epi32(mv, sh0), mff);
      const __m512i m_hi = _mm512_and_si512(_mm512_srli_epi32(mv, sh1), mff);
      for (int t = 0; t < T; ++t) {
        sumi[t] = _mm512_add_epi32(sumi[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], sc_lo),
                                                             _mm512_mullo_epi32(_mm512_srai_epi32(hi[t], 4), sc_hi)));
        // m (<= 63) times a 32-value activation sum (|.| <= 4096): one vpmaddwd each (high halves 0).
        const int16_t* bs = act[t][b].bsums;
        const __m512i p_lo = _mm512_set1_epi32(bs[4 * j] + bs[4 * j + 1]);
        const __m512i p_hi = _mm512_set1_epi32(bs[4 * j + 2] + bs[4 * j + 3]);
        summ[t] = _mm512_add_epi32(summ[t], _mm512_add_epi32(_mm512_madd_epi16(m_lo, p_lo), _mm512_madd_epi16(m_hi, p_hi)));
      }
    }
    Q4KX16BlockOut<T>(L, act, b, sumi, summ, out);
  });
}

// Q4_K x Q8_K prefill on the x16 layout: the lines of Q4KX16Group, used by kQ4KPassTokens tokens
// at a time, with three changes that only pay off when many tokens share each line:
//  * the high nibbles are shifted down once per line (shared by the tokens) instead of used in
//    place under 0xF0 and shifted out per token;
//  * the sub-block scale step is exact fp32 (one vcvtdq2ps and one vfmadd per sub-block and
//    token, a float sum per 4 sub-blocks: |s| <= 32 * 15 * 128 and sc <= 63, so every product and
//    every sum of 4 is an integer below 2^24) instead of a vpmulld (2 uops on Intel's port 0);
//  * the min term runs once per block and token, 4 vpdpwssd of the rows' packed (m_2q, m_2q+1)
//    against the token's packed 32-value sums (`pairs`, Q4KBsumPairs).
// The reference's sumi and summ, then its float order, 16 rows wide: bit-identical to GemmRef.
template <int T>
inline void Q4KX16PrefillGroup(const uint8_t* g, int64_t nb, const BlockQ8_K* const act[T], const int32_t* const pairs[T],
                               __m512 out[T]) {
  constexpr int kLines = 36;
  const __m512i m0f = _mm512_set1_epi8(0x0F), mff = _mm512_set1_epi32(0xFF), mff00 = _mm512_set1_epi32(0xFF00);
  for (int t = 0; t < T; ++t) out[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* L = g + X16CodesOffset(b, kLines * 64);
    __m512 fsum[T];
    for (int t = 0; t < T; ++t) fsum[t] = _mm512_setzero_ps();
    alignas(64) int32_t half[T][16];  // sumi of sub-blocks 0-3 (the first two j)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      __m512i lo[T], hi[T];
      for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i q = _mm512_load_si512(L + 64 * (4 + 8 * j + k));
        const __m512i ql = _mm512_and_si512(q, m0f), qh = _mm512_and_si512(_mm512_srli_epi16(q, 4), m0f);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          lo[t] = DpbusdAct<T>(lo[t], ql, act[t][b].qs + 64 * j + 4 * k);
          hi[t] = DpbusdAct<T>(hi[t], qh, act[t][b].qs + 64 * j + 32 + 4 * k);
        }
      }
      // Sub-blocks 2j and 2j + 1: scale bytes (2j) % 4 and (2j + 1) % 4 of sc03 (j < 2) or sc47,
      // unpacked per j from lines 1-3 to keep registers for the sums.
      const Q4KX16ScalesMins sm = UnpackQ4KX16ScalesMins(L);
      const __m512i scv = j < 2 ? sm.sc03 : sm.sc47;
      const unsigned sh0 = static_cast<unsigned>(8 * ((2 * j) % 4));
      const __m512 sc_lo = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(scv, sh0), mff));
      const __m512 sc_hi = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(scv, sh0 + 8), mff));
      for (int t = 0; t < T; ++t) {
        fsum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lo[t]), sc_lo, fsum[t]);
        fsum[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(hi[t]), sc_hi, fsum[t]);
      }
      if (j == 1) {
        for (int t = 0; t < T; ++t) {
          _mm512_store_si512(half[t], _mm512_cvtps_epi32(fsum[t]));
          fsum[t] = _mm512_setzero_ps();
        }
      }
    }
    // The mins as int16 pairs (m_2q, m_2q + 1) per dword lane: q = 0, 1 from m03, 2, 3 from m47.
    const Q4KX16ScalesMins sm = UnpackQ4KX16ScalesMins(L);
    const auto pair = [&](__m512i v) { return _mm512_or_si512(_mm512_and_si512(v, mff), _mm512_slli_epi32(_mm512_and_si512(v, mff00), 8)); };
    const __m512i mp[4] = {pair(sm.m03), pair(_mm512_srli_epi32(sm.m03, 16)), pair(sm.m47), pair(_mm512_srli_epi32(sm.m47, 16))};
    __m512i sumi[T], summ[T];
    for (int t = 0; t < T; ++t) {
      sumi[t] = _mm512_add_epi32(_mm512_load_si512(half[t]), _mm512_cvtps_epi32(fsum[t]));
      summ[t] = _mm512_setzero_si512();
      for (int q = 0; q < 4; ++q) summ[t] = _mm512_dpwssd_epi32(summ[t], mp[q], _mm512_set1_epi32(pairs[t][4 * b + q]));
    }
    Q4KX16BlockOut<T>(L, act, b, sumi, summ, out);
  }
}

// Tokens per pass of GemmQ4_KX16Prefill.
constexpr int kQ4KPassTokens = 8;

// Each token's 32-value activation sums of a block, packed as int16 pairs of sub-blocks (2q, 2q + 1)
// (|sum| <= 32 * 128 fits): pairs[(t * nb + b) * 4 + q].
std::vector<int32_t>& Q4KBsumPairs(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb) {
  thread_local std::vector<int32_t> pairs;
  pairs.resize(static_cast<size_t>(n_tokens) * static_cast<size_t>(nb) * 4);
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
    for (int64_t b = 0; b < nb; ++b) {
      for (int q = 0; q < 4; ++q) {
        const int16_t* bs = a[b].bsums + 4 * q;
        const int32_t p0 = bs[0] + bs[1], p1 = bs[2] + bs[3];
        pairs[(static_cast<size_t>(t) * static_cast<size_t>(nb) + static_cast<size_t>(b)) * 4 + static_cast<size_t>(q)] =
            static_cast<int32_t>((static_cast<uint32_t>(p0) & 0xFFFFu) | (static_cast<uint32_t>(p1) << 16));
      }
    }
  }
  return pairs;
}

// Q4_K prefill on the x16 layout: group by group, every pass of kQ4KPassTokens tokens over the group
// while it is in L1/L2 (a group is 16 rows x cols * 9 / 16 bytes).
void GemmQ4_KX16Prefill(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                        int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const std::vector<int32_t>& pairs = Q4KBsumPairs(xq, act_stride, n_tokens, nb);
  for (int64_t g = r0 / 16; g * 16 < r1; ++g) {
    const int64_t lo = g * 16 > r0 ? g * 16 : r0, hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
    ForTokenPasses<kQ4KPassTokens>(n_tokens, [&](auto tc, int t0) {
      constexpr int T = decltype(tc)::value;
      const BlockQ8_K* act[T];
      const int32_t* pt[T];
      for (int t = 0; t < T; ++t) {
        act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
        pt[t] = pairs.data() + static_cast<size_t>(t0 + t) * static_cast<size_t>(nb) * 4;
      }
      ForX16Groups<T>(w, t0, y, ldy, lo, hi, scale, [&](const uint8_t* gp, const uint8_t*, __m512* out) {
        Q4KX16PrefillGroup<T>(gp, nb, act, pt, out);
      });
    });
  }
}

// The K-quant x16 layouts (Q4_K, Q6_K) below kTokenLaneMin tokens: up to 4 tokens per pass over a
// group (a group stays in L2).
template <TypeId kType>
void GemmKQuantX16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ForX16GroupsEachPass<4>(w, n_tokens, y, ldy, r0, r1, scale,
                          [&](auto tc, int t0, const uint8_t* gp, const uint8_t* next, __m512* out) {
    constexpr int T = decltype(tc)::value;
    if constexpr (kType == TypeId::kQ6_K) {
      Q6X16Group<T>(gp, next, nb, xq, act_stride, t0, out);
    } else {
      Q4KX16Group<T>(gp, next, nb, xq, act_stride, t0, out);
    }
  });
}

void GemmQ4_KRowLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const __m512i pidx[4] = {PairScaleIdx16(0), PairScaleIdx16(1), PairScaleIdx16(2), PairScaleIdx16(3)};
  const __m256i midx = _mm256_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8);
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        __m512i av[4];
        for (int v = 0; v < 4; ++v) av[v] = _mm512_loadu_si512(a[b].qs + 64 * v);
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ4_K);
        __m512i s[kTileRows];
        __m256i m[kTileRows];
        for (int i = 0; i < kTileRows; ++i) {
          DotQ4_KBlock(reinterpret_cast<const BlockQ4_K*>(rows[i] + boff), av, bs, pidx, midx, &s[i], &m[i]);
        }
        const __m256i sumi = Reduce8(s);
        const __m256i summ = Reduce8x256(m);
        // d (low half) and dmin (high half) of each row's block.
        const __m256i g = _mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + boff), off, 1);
        const __m256 da = _mm256_set1_ps(a[b].d);
        const __m256 d = _mm256_mul_ps(HalvesToFloat(g, false), da);
        const __m256 dmin = _mm256_mul_ps(HalvesToFloat(g, true), da);
        // Reference order: acc += d * sumi - dmin * summ.
        acc = _mm256_add_ps(acc, _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(sumi)),
                                               _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
      }
      StoreRows(y + static_cast<int64_t>(t) * ldy + r, acc, w.tensor_scale, scale, nr);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Token lanes (the prefill path): one int32/float lane per token, weights broadcast 4 at a time.

constexpr int kGroup = 16;  // tokens per group

// Per-thread grow-only scratch: the GemmFn contract has no workspace, and OpenMP's threads persist,
// so each thread allocates once instead of on every call (large blocks would be mmap'ed and
// page-faulted afresh each time).
struct TokenLaneScratch {
  std::vector<int8_t> act;    // (n_groups, cols / 4, 16 tokens, 4 bytes): transposed activations
  std::vector<int32_t> isum;  // (n_groups, n_blocks, k, 16 tokens): per-block activation sums
  std::vector<float> dact;    // (n_groups, n_blocks, 16 tokens): activation block scales
  std::vector<uint8_t> w;     // (8 rows, cols): unpacked unsigned weight bytes, activation order
  std::vector<int32_t> wsc;   // (8 rows, n_blocks, k): per-group integer scales (K-quants)
  std::vector<float> wd;      // (8 rows, n_blocks, 2): weight block scales (d, dmin)
  std::vector<uint8_t> plain;  // (8 rows, row_bytes): x16 rows gathered back one by one (RowData)
  std::vector<uint8_t> group_rows;  // (16 rows, row_bytes): one x16 group gathered back (Q4_K, Q6_K)
  int64_t group_rows_of = -1;       // the group in `group_rows` (-1: none; reset at each call's entry)
};

TokenLaneScratch& GetScratch() {
  thread_local TokenLaneScratch s;
  return s;
}

template <typename T>
T* Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) v->resize(n);
  return v->data();
}

// out[k] lane j = dword k of r[j] (16 x 16 transpose of 32-bit elements).
inline void Transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // s[4i + c], 128-bit lane L = column 4L + c of rows 4i..4i+3.
  __m512i s[16];
  for (int i = 0; i < 16; i += 4) {
    s[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    s[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    s[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    s[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i a = _mm512_shuffle_i64x2(s[c], s[4 + c], 0x88);
    const __m512i b = _mm512_shuffle_i64x2(s[8 + c], s[12 + c], 0x88);
    const __m512i e = _mm512_shuffle_i64x2(s[c], s[4 + c], 0xDD);
    const __m512i f = _mm512_shuffle_i64x2(s[8 + c], s[12 + c], 0xDD);
    r[c] = _mm512_shuffle_i64x2(a, b, 0x88);
    r[8 + c] = _mm512_shuffle_i64x2(a, b, 0xDD);
    r[4 + c] = _mm512_shuffle_i64x2(e, f, 0x88);
    r[12 + c] = _mm512_shuffle_i64x2(e, f, 0xDD);
  }
}

// Row r of an x16 Q4_K / Q6_K view in the file's layout (the Q6_K token-lanes path unpacks plain rows).
// RowData's mapping (X16FormatOf: the code lines, then d from the group's scale lines), a whole
// group at once: line k of a block holds bytes 4k..4k+3 of the 16 rows' blocks, so 16 lines are
// one 16 x 16 dword transpose away from 64 bytes of each row. The group is kept in
// sc->group_rows for its other rows (the two 8-row tiles that read it); ~10x fewer instructions
// than RowData's 4-byte copies. Not for TQ1_0, whose x16 bytes are recoded.
const uint8_t* X16PlainRow(const WeightView& w, int64_t r, TokenLaneScratch* sc) {
  const int64_t g = r / 16;
  uint8_t* plain = Grow(&sc->group_rows, 16 * w.row_bytes);
  if (sc->group_rows_of != g) {
    const X16Format f = X16FormatOf(w.type);
    const size_t lines = f.qs_bytes / 4;
    const int64_t nb = w.cols / kQK_K;
    const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* L = gp + X16CodesOffset(b, lines * 64);
      uint8_t* out = plain + static_cast<size_t>(b) * f.block_bytes;
      for (size_t k0 = 0; k0 < lines; k0 += 16) {
        const size_t n = lines - k0 < 16 ? lines - k0 : 16;
        __m512i v[16];
        for (size_t k = 0; k < 16; ++k) v[k] = k < n ? _mm512_load_si512(L + 64 * (k0 + k)) : _mm512_setzero_si512();
        Transpose16(v);  // v[i]: row i's bytes 4 * k0 .. 4 * (k0 + n) - 1
        const __mmask64 m = n == 16 ? ~uint64_t{0} : (uint64_t{1} << (4 * n)) - 1;
        for (int i = 0; i < 16; ++i) {
          _mm512_mask_storeu_epi8(out + static_cast<size_t>(i) * w.row_bytes + f.qs_off + 4 * k0, m, v[i]);
        }
      }
      const uint8_t* d = gp + X16ScalesOffset(b, lines * 64);
      for (int i = 0; i < 16; ++i) std::memcpy(out + static_cast<size_t>(i) * w.row_bytes + f.d_off, d + 2 * i, 2);
    }
    sc->group_rows_of = g;
  }
  return plain + static_cast<size_t>(r % 16) * w.row_bytes;
}

// The x16 rows of an 8-row tile [r, r + 8): gathered a group at a time when the tile lies in one
// group (r a multiple of 8, as ops::MatMul's 16-row chunks give), else row by row (RowData).
inline void X16TileRows(const WeightView& w, int64_t r, int64_t r1, int nr, TokenLaneScratch* sc,
                        const uint8_t* rows[kTileRows]) {
  if (r % kTileRows == 0) {
    for (int i = 0; i < kTileRows; ++i) rows[i] = X16PlainRow(w, i < nr ? r + i : r1 - 1, sc);
    return;
  }
  uint8_t* plain = Grow(&sc->plain, kTileRows * w.row_bytes);
  for (int i = 0; i < kTileRows; ++i) rows[i] = RowData(w, i < nr ? r + i : r1 - 1, plain + i * w.row_bytes);
}

// Stores rows [r, r + nr) x tokens [t0, t0 + nt) of the 8 per-row token vectors.
inline void StoreTokenLanes(const __m512 acc[kTileRows], float* y, int64_t ldy, int64_t r, int nr, int t0, int nt,
                            float tensor_scale, float scale) {
  alignas(64) float v[kGroup];
  for (int i = 0; i < nr; ++i) {
    _mm512_store_ps(v, _mm512_mul_ps(_mm512_mul_ps(acc[i], _mm512_set1_ps(tensor_scale)), _mm512_set1_ps(scale)));
    for (int j = 0; j < nt; ++j) y[static_cast<int64_t>(t0 + j) * ldy + r + i] = v[j];
  }
}

// Q8_K activations of all tokens, transposed per group of 16; isum holds the 16 bsums per block
// (int32, token lanes) and dact the block scales.
void TransposeQ8_KActs(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb, TokenLaneScratch* sc) {
  const int n_groups = (n_tokens + kGroup - 1) / kGroup;
  int8_t* act = Grow(&sc->act, static_cast<size_t>(n_groups * nb) * kQK_K * kGroup);
  int32_t* isum = Grow(&sc->isum, static_cast<size_t>(n_groups * nb) * 16 * kGroup);
  float* dact = Grow(&sc->dact, static_cast<size_t>(n_groups * nb) * kGroup);
  for (int g = 0; g < n_groups; ++g) {
    const int nt = n_tokens - g * kGroup < kGroup ? n_tokens - g * kGroup : kGroup;
    const BlockQ8_K* a[kGroup];
    for (int j = 0; j < kGroup; ++j) {
      a[j] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(g * kGroup + (j < nt ? j : 0)));
    }
    for (int64_t b = 0; b < nb; ++b) {
      const size_t base = static_cast<size_t>(g * nb + b);
      __m512i r[16];
      for (int u = 0; u < 4; ++u) {
        for (int j = 0; j < kGroup; ++j) r[j] = j < nt ? _mm512_loadu_si512(a[j][b].qs + 64 * u) : _mm512_setzero_si512();
        Transpose16(r);
        for (int k = 0; k < 16; ++k) _mm512_storeu_si512(act + (base * 64 + static_cast<size_t>(16 * u + k)) * 64, r[k]);
      }
      for (int j = 0; j < kGroup; ++j) {
        r[j] = j < nt ? _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[j][b].bsums)))
                      : _mm512_setzero_si512();
      }
      Transpose16(r);
      for (int k = 0; k < 16; ++k) _mm512_storeu_si512(isum + (base * 16 + static_cast<size_t>(k)) * kGroup, r[k]);
      for (int j = 0; j < kGroup; ++j) dact[base * kGroup + static_cast<size_t>(j)] = j < nt ? a[j][b].d : 0.0f;
    }
  }
}

// Q6_K x Q8_K, token lanes.
void GemmQ6_KTokenLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                        int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const int64_t cols = nb * kQK_K;
  TokenLaneScratch& sc = GetScratch();
  TransposeQ8_KActs(xq, act_stride, n_tokens, nb, &sc);
  uint8_t* wb = Grow(&sc.w, static_cast<size_t>(kTileRows * cols));
  int32_t* ws = Grow(&sc.wsc, static_cast<size_t>(kTileRows * nb * 16));
  float* wd = Grow(&sc.wd, static_cast<size_t>(kTileRows * nb));
  const int n_groups = (n_tokens + kGroup - 1) / kGroup;
  sc.group_rows_of = -1;  // a new call: the group X16PlainRow kept may be another matrix's
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    if (w.interleave == 16) X16TileRows(w, r, r1, nr, &sc, rows);
    for (int i = 0; i < kTileRows; ++i) {
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ6_K* blk = reinterpret_cast<const BlockQ6_K*>(rows[i] + static_cast<size_t>(b) * sizeof(BlockQ6_K));
        __m512i q[4];
        UnpackQ6_K(blk, q);
        uint8_t* dst = wb + static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(b) * kQK_K;
        for (int v = 0; v < 4; ++v) _mm512_storeu_si512(dst + 64 * v, q[v]);
        _mm512_storeu_si512(ws + (i * nb + b) * 16, _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales))));
        wd[i * nb + b] = Fp16ToFp32(blk->d);
      }
    }
    for (int g = 0; g < n_groups; ++g) {
      const int nt = n_tokens - g * kGroup < kGroup ? n_tokens - g * kGroup : kGroup;
      __m512 acc[kTileRows];
      for (int i = 0; i < kTileRows; ++i) acc[i] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t base = static_cast<size_t>(g * nb + b);
        const int8_t* av = sc.act.data() + base * 64 * 64;
        __m512i blk[kTileRows];
        for (int i = 0; i < kTileRows; ++i) blk[i] = _mm512_setzero_si512();
        for (int j = 0; j < 16; ++j) {
          // Start each 16-element group at -32 * bsum_j: q = w + 32.
          const __m512i init = _mm512_slli_epi32(
              _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_loadu_si512(sc.isum.data() + (base * 16 + static_cast<size_t>(j)) * kGroup)), 5);
          __m512i s[kTileRows];
          for (int i = 0; i < kTileRows; ++i) s[i] = init;
          for (int k = 0; k < 4; ++k) {
            const __m512i a = _mm512_loadu_si512(av + 64 * (4 * j + k));
            for (int i = 0; i < kTileRows; ++i) {
              int32_t q4;
              std::memcpy(&q4, wb + static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(b) * kQK_K + 16 * j + 4 * k, 4);
              s[i] = _mm512_dpbusd_epi32(s[i], _mm512_set1_epi32(q4), a);
            }
          }
          for (int i = 0; i < kTileRows; ++i) {
            blk[i] = _mm512_add_epi32(blk[i], _mm512_mullo_epi32(s[i], _mm512_set1_epi32(ws[(i * nb + b) * 16 + j])));
          }
        }
        const __m512 da = _mm512_loadu_ps(sc.dact.data() + base * kGroup);
        for (int i = 0; i < kTileRows; ++i) {
          // Reference order: (d_w * d_a) * sumi.
          acc[i] = _mm512_add_ps(acc[i], _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(wd[i * nb + b]), da), _mm512_cvtepi32_ps(blk[i])));
        }
      }
      StoreTokenLanes(acc, y, ldy, r, nr, g * kGroup, nt, w.tensor_scale, scale);
    }
  }
}

// Q4_K x Q8_K, token lanes.
void GemmQ4_KTokenLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                        int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const int64_t cols = nb * kQK_K;
  TokenLaneScratch& sc = GetScratch();
  TransposeQ8_KActs(xq, act_stride, n_tokens, nb, &sc);
  uint8_t* wb = Grow(&sc.w, static_cast<size_t>(kTileRows * cols));
  int32_t* ws = Grow(&sc.wsc, static_cast<size_t>(kTileRows * nb * 16));  // 8 fp32 scales, 4 min pairs
  float* wd = Grow(&sc.wd, static_cast<size_t>(kTileRows * nb * 2));       // d, dmin
  const int n_groups = (n_tokens + kGroup - 1) / kGroup;
  const __m512i m0f = _mm512_set1_epi8(0x0F);
  // File rows only: the x16 layout has its own prefill kernel (GemmQ4_KX16Prefill).
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    for (int i = 0; i < kTileRows; ++i) {
      for (int64_t b = 0; b < nb; ++b) {
        const BlockQ4_K* blk = reinterpret_cast<const BlockQ4_K*>(rows[i] + static_cast<size_t>(b) * sizeof(BlockQ4_K));
        uint8_t* dst = wb + static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(b) * kQK_K;
        for (int p = 0; p < 4; ++p) {
          const __m512i raw = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk->qs + 32 * p)));
          _mm512_storeu_si512(dst + 64 * p, _mm512_and_si512(_mm512_mask_srli_epi16(raw, 0xFFFF0000u, raw, 4), m0f));
        }
        int32_t* e = ws + (i * nb + b) * 16;
        _mm512_storeu_si512(e, _mm512_cvtepu8_epi32(Q4_KScalesMins(blk->scales)));
        // The scales as fp32 bits in e[0..7] and the mins as int16 pairs (m_2q, m_2q+1) in e[8 + q],
        // for the kernel below (in place: e[8 + q] reads e[8 + 2q] and e[9 + 2q], never an entry
        // already overwritten).
        for (int j = 0; j < 8; ++j) {
          const float f = static_cast<float>(e[j]);
          std::memcpy(&e[j], &f, 4);
        }
        for (int q = 0; q < 4; ++q) e[8 + q] = e[8 + 2 * q] | (e[9 + 2 * q] << 16);
        wd[(i * nb + b) * 2] = Fp16ToFp32(blk->d);
        wd[(i * nb + b) * 2 + 1] = Fp16ToFp32(blk->dmin);
      }
    }
    for (int g = 0; g < n_groups; ++g) {
      const int nt = n_tokens - g * kGroup < kGroup ? n_tokens - g * kGroup : kGroup;
      __m512 acc[kTileRows];
      for (int i = 0; i < kTileRows; ++i) acc[i] = _mm512_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t base = static_cast<size_t>(g * nb + b);
        const int8_t* av = sc.act.data() + base * 64 * 64;
        const int32_t* bs = sc.isum.data() + base * 16 * kGroup;
        __m512i sumi[kTileRows];
        for (int i = 0; i < kTileRows; ++i) sumi[i] = _mm512_setzero_si512();
        // sum_j sc_j * s_j in fp32, exactly: |s_j| <= 32 * 15 * 128 and sc_j <= 63, so each
        // product is an integer below 2^24 and so is any sum of 4 of them (<= 15.5M); two halves
        // of 4 sub-blocks, each converted back, give the reference's int32 sumi. A vcvtdq2ps and a
        // vfmadd per sub-block where vpmulld was 2 uops on Intel's port 0 (FMA also issues on 5).
        __m512 fsum[kTileRows];
        for (int i = 0; i < kTileRows; ++i) fsum[i] = _mm512_setzero_ps();
        for (int j = 0; j < 8; ++j) {
          __m512i s[kTileRows];
          for (int i = 0; i < kTileRows; ++i) s[i] = _mm512_setzero_si512();
          for (int k = 0; k < 8; ++k) {
            const __m512i a = _mm512_loadu_si512(av + 64 * (8 * j + k));
            for (int i = 0; i < kTileRows; ++i) {
              int32_t q4;
              std::memcpy(&q4, wb + static_cast<size_t>(i) * static_cast<size_t>(cols) + static_cast<size_t>(b) * kQK_K + 32 * j + 4 * k, 4);
              s[i] = _mm512_dpbusd_epi32(s[i], _mm512_set1_epi32(q4), a);
            }
          }
          for (int i = 0; i < kTileRows; ++i) {
            const __m512 scf = _mm512_castsi512_ps(_mm512_set1_epi32(ws[(i * nb + b) * 16 + j]));
            fsum[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), scf, fsum[i]);
          }
          if (j % 4 == 3) {
            for (int i = 0; i < kTileRows; ++i) {
              sumi[i] = _mm512_add_epi32(sumi[i], _mm512_cvtps_epi32(fsum[i]));
              fsum[i] = _mm512_setzero_ps();
            }
          }
        }
        // summ = sum_j m_j * (bsum_2j + bsum_2j+1): the 32-value sums (|.| <= 4096) packed as
        // int16 pairs of sub-blocks (2q, 2q + 1), one vpdpwssd per pair against the row's packed
        // mins (<= 63): 4 ops per row and block where a vpmulld per sub-block was 8 (2 uops each
        // on Intel cores). Same integers.
        __m512i pp[4];
        for (int q = 0; q < 4; ++q) {
          const __m512i p0 = _mm512_add_epi32(_mm512_loadu_si512(bs + (4 * q) * kGroup), _mm512_loadu_si512(bs + (4 * q + 1) * kGroup));
          const __m512i p1 = _mm512_add_epi32(_mm512_loadu_si512(bs + (4 * q + 2) * kGroup), _mm512_loadu_si512(bs + (4 * q + 3) * kGroup));
          pp[q] = _mm512_or_si512(_mm512_and_si512(p0, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(p1, 16));
        }
        __m512i summ[kTileRows];
        for (int i = 0; i < kTileRows; ++i) {
          summ[i] = _mm512_setzero_si512();
          for (int q = 0; q < 4; ++q) summ[i] = _mm512_dpwssd_epi32(summ[i], pp[q], _mm512_set1_epi32(ws[(i * nb + b) * 16 + 8 + q]));
        }
        const __m512 da = _mm512_loadu_ps(sc.dact.data() + base * kGroup);
        for (int i = 0; i < kTileRows; ++i) {
          const __m512 d = _mm512_mul_ps(_mm512_set1_ps(wd[(i * nb + b) * 2]), da);
          const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(wd[(i * nb + b) * 2 + 1]), da);
          // Reference order: acc += d * sumi - dmin * summ.
          acc[i] = _mm512_add_ps(acc[i], _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sumi[i])),
                                                       _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ[i]))));
        }
      }
      StoreTokenLanes(acc, y, ldy, r, nr, g * kGroup, nt, w.tensor_scale, scale);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// GemmFn entries (referenced by the KernelTable in gemm_avx512.cc).

void GemmQ4_0Avx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (w.interleave == 16) {
    GemmQ4_0X16(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  GemmQ0Rows16<true>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

void GemmQ8_0Avx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  GemmQ0Rows16<false>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

void GemmQ4_KAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (n_tokens >= kTokenLaneMin && w.interleave == 16) {
    GemmQ4_KX16Prefill(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else if (n_tokens >= kTokenLaneMin) {
    GemmQ4_KTokenLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else if (w.interleave == 16) {
    GemmKQuantX16<TypeId::kQ4_K>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmQ4_KRowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

void GemmQ6_KAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (n_tokens >= kQ6TokenLaneMin || (n_tokens >= kTokenLaneMin && w.interleave != 16)) {
    GemmQ6_KTokenLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);  // gathers x16 rows itself
  } else if (w.interleave == 16) {
    GemmKQuantX16<TypeId::kQ6_K>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmQ6_KRowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

}  // namespace trine::kernels
