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
// Two loop shapes:
//  * row lanes (any n_tokens, the decode path): a tile of 8 rows; each row's block is unpacked to
//    unsigned bytes and dotted with the token's int8 activations (vpdpbusd, or vpmaddubsw +
//    vpdpwssd where a per-16/32 scale applies), the 8 per-row int32 vectors are reduced together by
//    one transpose-add tree, and the float combination runs with one row per lane.
//  * token lanes (n_tokens >= kTokenLaneMin, the prefill path): activations of 16 tokens are
//    interleaved 4 bytes at a time (a transposed copy made once per call), each weight row is
//    unpacked once to bytes, and every 4 weights are broadcast against 16 tokens with one vpdpbusd:
//    no horizontal reductions at all; the float combination runs with one token per lane.
// Signed weights use the unsigned operand of vpdpbusd through a +bias (Q4_0: nibbles are already
// w + 8; Q8_0: w ^ 0x80 = w + 128; Q6_K: q = w + 32) and the bias times the activation sum is
// subtracted in int32, which is exact.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

constexpr int kTileRows = 8;

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
// Q4_0 x Q8_0.

// The nibbles of a Q4_0 block pair (36 bytes at p; only the first block when `one`), as unsigned
// bytes in activation order: [block b elements 0..31 | block b+1 elements 0..31].
inline __m512i UnpackQ4_0Pair(const uint8_t* p, bool one) {
  // Words: d0 = w0, qs0 = w1..w8, d1 = w9, qs1 = w10..w17.
  const __m512i idx = _mm512_set_epi16(17, 16, 15, 14, 13, 12, 11, 10, 17, 16, 15, 14, 13, 12, 11, 10,  //
                                       8, 7, 6, 5, 4, 3, 2, 1, 8, 7, 6, 5, 4, 3, 2, 1);
  const __m512i raw = _mm512_maskz_loadu_epi8(one ? 0x3FFFFull : 0xFFFFFFFFFull, p);
  const __m512i q = _mm512_permutexvar_epi16(idx, raw);
  // Lanes 1 and 3 take the high nibbles (elements 16..31).
  const __m512i hi = _mm512_mask_srli_epi16(q, 0xFF00FF00u, q, 4);
  return _mm512_and_si512(hi, _mm512_set1_epi8(0x0F));
}

void GemmQ4_0RowLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK4_0;
  constexpr int kTok = 4;  // tokens per pass over the row tile (weights stay in registers)
  const __m512i eight = _mm512_set1_epi8(8);
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const __m512i didx = _mm512_inserti64x4(_mm512_castsi256_si512(off),
                                            _mm256_add_epi32(off, _mm256_set1_epi32(sizeof(BlockQ4_0))), 1);
    for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
      const int nt = n_tokens - t0 < kTok ? n_tokens - t0 : kTok;
      __m256 acc[kTok];
      for (int t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; b += 2) {
        const bool one = b + 1 == nb;
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ4_0);
        __m512i wq[kTileRows];
        for (int i = 0; i < kTileRows; ++i) wq[i] = UnpackQ4_0Pair(rows[i] + boff, one);
        const __m512i dg = one ? _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0x00FF, didx, rows[0] + boff, 1)
                               : _mm512_i32gather_epi32(didx, rows[0] + boff, 1);
        const __m512 dw = HalvesToFloat(dg);
        for (int t = 0; t < nt; ++t) {
          const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t0 + t)) + b;
          const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs));
          const __m512i av = one ? _mm512_zextsi256_si512(a0)
                                 : _mm512_inserti64x4(_mm512_castsi256_si512(a0),
                                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)), 1);
          // Start every sum at -8 * (sum of the activations): the nibbles are w + 8.
          const __m512i init = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, av));
          __m512i s[kTileRows];
          for (int i = 0; i < kTileRows; ++i) s[i] = _mm512_dpbusd_epi32(init, wq[i], av);
          const __m512i sums = Reduce8x2(s);
          const __m256i da16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(a[0].d))),
                                                       _mm_set1_epi16(one ? 0 : static_cast<short>(a[1].d)), 1);
          const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, _mm512_cvtph_ps(da16)));
          acc[t] = _mm256_add_ps(acc[t], _mm512_castps512_ps256(p));
          if (!one) acc[t] = _mm256_add_ps(acc[t], _mm512_extractf32x8_ps(p, 1));
        }
      }
      for (int t = 0; t < nt; ++t) StoreRows(y + static_cast<int64_t>(t0 + t) * ldy + r, acc[t], w.tensor_scale, scale, nr);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0.

inline __m512i LoadQ8_0Pair(const uint8_t* p, bool one) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
  const __m512i v = one ? _mm512_zextsi256_si512(lo)
                        : _mm512_inserti64x4(_mm512_castsi256_si512(lo),
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 36)), 1);
  return _mm512_xor_si512(v, _mm512_set1_epi8(static_cast<char>(0x80)));  // w + 128, unsigned
}

void GemmQ8_0RowLanes(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK8_0;
  constexpr int kTok = 4;
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const __m512i didx = _mm512_inserti64x4(_mm512_castsi256_si512(off),
                                            _mm256_add_epi32(off, _mm256_set1_epi32(sizeof(BlockQ8_0))), 1);
    for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
      const int nt = n_tokens - t0 < kTok ? n_tokens - t0 : kTok;
      __m256 acc[kTok];
      for (int t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; b += 2) {
        const bool one = b + 1 == nb;
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ8_0);
        __m512i wq[kTileRows];
        for (int i = 0; i < kTileRows; ++i) wq[i] = LoadQ8_0Pair(rows[i] + boff, one);
        const __m512i dg = one ? _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0x00FF, didx, rows[0] + boff, 1)
                               : _mm512_i32gather_epi32(didx, rows[0] + boff, 1);
        const __m512 dw = HalvesToFloat(dg);
        for (int t = 0; t < nt; ++t) {
          const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t0 + t)) + b;
          const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs));
          const __m512i av = one ? _mm512_zextsi256_si512(a0)
                                 : _mm512_inserti64x4(_mm512_castsi256_si512(a0),
                                                      _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)), 1);
          const __m512i init = _mm512_sub_epi32(_mm512_setzero_si512(),
                                                _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, av));
          __m512i s[kTileRows];
          for (int i = 0; i < kTileRows; ++i) s[i] = _mm512_dpbusd_epi32(init, wq[i], av);
          const __m512i sums = Reduce8x2(s);
          const __m256i da16 = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16(static_cast<short>(a[0].d))),
                                                       _mm_set1_epi16(one ? 0 : static_cast<short>(a[1].d)), 1);
          const __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, _mm512_cvtph_ps(da16)));
          acc[t] = _mm256_add_ps(acc[t], _mm512_castps512_ps256(p));
          if (!one) acc[t] = _mm256_add_ps(acc[t], _mm512_extractf32x8_ps(p, 1));
        }
      }
      for (int t = 0; t < nt; ++t) StoreRows(y + static_cast<int64_t>(t0 + t) * ldy + r, acc[t], w.tensor_scale, scale, nr);
    }
  }
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
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        __m512i av[4];
        for (int v = 0; v < 4; ++v) av[v] = _mm512_loadu_si512(a[b].qs + 64 * v);
        const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ6_K);
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// GemmFn entries (referenced by the KernelTable in gemm_avx512.cc).

void GemmQ4_0Avx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  GemmQ4_0RowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

void GemmQ8_0Avx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  GemmQ8_0RowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

void GemmQ4_KAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  GemmQ4_KRowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

void GemmQ6_KAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  GemmQ6_KRowLanes(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

}  // namespace trine::kernels
