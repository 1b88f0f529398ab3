// AVX2 (+FMA, F16C) kernels for the INT4/INT8/K-quant weight types: Q4_0 x Q8_0, Q8_0 x Q8_0,
// Q4_K x Q8_K, Q6_K x Q8_K, on the file's block layout (the x16 layouts of Q4_0, Q4_K and Q6_K
// are read by gemm_q4_0_x16_avx2.cc, gemm_q4_k_x16_avx2.cc and gemm_q6_k_x16_avx2.cc). Compiled with its own flags;
// reached only through the dispatch table. Must not depend on anything but the block structs,
// fp16 helpers and the GemmFn contract (kernels/ref/matmul_ref.h).
//
// Bit-exactness as in quants_avx512.cc: exact int32 sums per (row, token, block), then the
// reference's float operations in its order, lane-wise with one row per lane (tiles of 8 rows).
// Q4_0 transposes each block of 8 rows 4 bytes at a time so the rows sit in the lanes (no
// horizontal reduction, weights reused by up to 4 tokens); Q8_0, Q4_K and Q6_K dot each row's
// block with the token's activations and reduce the tile's 8 vectors with one hadd tree. Each
// tile prefetches the next one into L2.
// Integer products use vpmaddubsw (unsigned x signed bytes -> int16 pairs, saturating), so every
// kernel keeps its pairs below 2^15: unsigned weights of at most 6 bits (Q4_0 nibbles, Q4_K
// nibbles, Q6_K q = w + 32), and |w| x sign-transferred activations for Q8_0 (2 * 128 * 127).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx2/q8_0_act_info_avx2.h"
#include "x86/avx2/x16_avx2.h"

namespace trine::kernels {
namespace {

constexpr int kTileRows = 8;

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

// Software prefetch of the next row tile into L2 while the current one is computed (a tile's rows
// are contiguous and a thread walks consecutive tiles; see quants_avx512.cc).
inline void PrefetchNext(const uint8_t* p, size_t n) {
  for (size_t o = 0; o < n; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T1);
}

// Byte offsets of the tile's rows from rows[0] (for gathers).
inline __m256i RowOffsets(const uint8_t* const rows[kTileRows]) {
  alignas(32) int32_t off[kTileRows];
  for (int i = 0; i < kTileRows; ++i) off[i] = static_cast<int32_t>(rows[i] - rows[0]);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
}

// Horizontal sums of 8 vectors: lane i = sum of s[i].
inline __m256i Reduce8(const __m256i s[8]) {
  const __m256i h01 = _mm256_hadd_epi32(s[0], s[1]), h23 = _mm256_hadd_epi32(s[2], s[3]);
  const __m256i h45 = _mm256_hadd_epi32(s[4], s[5]), h67 = _mm256_hadd_epi32(s[6], s[7]);
  const __m256i g0 = _mm256_hadd_epi32(h01, h23), g1 = _mm256_hadd_epi32(h45, h67);
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x21), _mm256_blend_epi32(g0, g1, 0xF0));
}

// y[r + i] = acc[i] * tensor_scale * scale for the tile's valid rows.
inline void StoreRows(float* y, __m256 acc, float tensor_scale, float scale, int nr) {
  const __m256 v = _mm256_mul_ps(_mm256_mul_ps(acc, _mm256_set1_ps(tensor_scale)), _mm256_set1_ps(scale));
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  _mm256_maskstore_ps(y, mask, v);
}

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// ---------------------------------------------------------------------------------------------
// Q8_0 x Q8_0: one 32-element block is one vector, 8 rows per tile.

inline __m256i DotQ8_0Block(const uint8_t* blk, __m256i a) {
  const __m256i q = Load256(blk + 2);
  // |w| * (a * sign(w)) pairs <= 2 * 128 * 127.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(a, q)), _mm256_set1_epi16(1));
}

void GemmQ8_0(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
            int64_t r0, int64_t r1, float scale) {
  constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  const int64_t nb = w.cols / kQK8_0;
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const uint8_t* next = w.data + static_cast<size_t>(r + kTileRows) * w.row_bytes;
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t boff = static_cast<size_t>(b) * kBlockBytes;
        if (t == 0) PrefetchNext(next + kTileRows * boff, kTileRows * kBlockBytes);
        const __m256i av = Load256(a[b].qs);
        __m256i s[kTileRows];
        for (int i = 0; i < kTileRows; ++i) s[i] = DotQ8_0Block(rows[i] + boff, av);
        const __m256i sums = Reduce8(s);
        // d is the block's first 2 bytes: a 4-byte gather stays inside the block.
        const __m256 dw = HalvesToFloat(_mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + boff), off, 1), false);
        // Reference order: sumi * (d_w * d_a).
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, _mm256_set1_ps(Fp16ToFp32(a[b].d)))));
      }
      StoreRows(y + static_cast<int64_t>(t) * ldy + r, acc, w.tensor_scale, scale, nr);
    }
  }
}

// Q4_0 with 8 rows in the lanes: the 16 quant bytes of each row's block are transposed 4 bytes at
// a time (row i in dword lane i), so one vpmaddubsw against a broadcast of 4 activations advances
// all 8 rows; the 8 products of a block (each pair <= 2 * 15 * 127) add up exactly in int16
// (<= 30480), one vpmaddwd widens them, and each lane ends as one (row, block) sum: no horizontal
// reduction. Per call, each token's -8 * (block sum) and fp32 block scales are computed once.
}  // namespace

void GatherQ8_0ActInfoAvx2(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb, Q8_0ActInfo* info) {
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(nb);
  if (info->corr.size() < n) info->corr.resize(n);
  if (info->d.size() < n) info->d.resize(n);
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t));
    int32_t* corr = info->corr.data() + static_cast<size_t>(t) * static_cast<size_t>(nb);
    float* d = info->d.data() + static_cast<size_t>(t) * static_cast<size_t>(nb);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
      __m256i s[8];
      for (int i = 0; i < 8; ++i) s[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, Load256(a[b + i].qs)), ones16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(corr + b), _mm256_mullo_epi32(Reduce8(s), _mm256_set1_epi32(-8)));
    }
    for (; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < kQK8_0; ++j) sum += a[b].qs[j];
      corr[b] = -8 * sum;
    }
    for (b = 0; b < nb; ++b) d[b] = Fp16ToFp32(a[b].d);
  }
}

namespace {

void GemmQ4_0Rows8(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                   int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK4_0;
  Q8_0ActInfo& info = GetQ8_0ActInfo();
  GatherQ8_0ActInfoAvx2(xq, act_stride, n_tokens, nb, &info);
  constexpr int kTok = 4;  // tokens per pass over a block (the transposed weights stay in registers)
  const __m256i m0f = _mm256_set1_epi8(0x0F), ones16 = _mm256_set1_epi16(1);
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const uint8_t* next = w.data + static_cast<size_t>(r + kTileRows) * w.row_bytes;
    for (int t0 = 0; t0 < n_tokens; t0 += kTok) {
      const int nt = n_tokens - t0 < kTok ? n_tokens - t0 : kTok;
      __m256 acc[kTok];
      for (int t = 0; t < kTok; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ4_0);
        if (t0 == 0) PrefetchNext(next + kTileRows * boff, kTileRows * sizeof(BlockQ4_0));
        // z[g] = [row g | row 4 + g] quant bytes; a 4 x 4 dword transpose per 128-bit lane gives
        // q[k] dword lane i = dword k of row i.
        __m256i z[4];
        for (int g = 0; g < 4; ++g) {
          z[g] = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(rows[4 + g] + boff + 2),
                                     reinterpret_cast<const __m128i*>(rows[g] + boff + 2));
        }
        const __m256i t0v = _mm256_unpacklo_epi32(z[0], z[1]), t1v = _mm256_unpackhi_epi32(z[0], z[1]);
        const __m256i t2v = _mm256_unpacklo_epi32(z[2], z[3]), t3v = _mm256_unpackhi_epi32(z[2], z[3]);
        const __m256i q[4] = {_mm256_unpacklo_epi64(t0v, t2v), _mm256_unpackhi_epi64(t0v, t2v),
                              _mm256_unpacklo_epi64(t1v, t3v), _mm256_unpackhi_epi64(t1v, t3v)};
        __m256i lo[4], hi[4];
        for (int k = 0; k < 4; ++k) {
          lo[k] = _mm256_and_si256(q[k], m0f);                        // elements 4k..4k+3
          hi[k] = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m0f);  // elements 16+4k..16+4k+3
        }
        const __m256 dw = HalvesToFloat(_mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + boff), off, 1), false);
        for (int t = 0; t < nt; ++t) {
          const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(xq + act_stride * static_cast<size_t>(t0 + t)) + b;
          const size_t k0 = static_cast<size_t>(t0 + t) * static_cast<size_t>(nb) + static_cast<size_t>(b);
          __m256i p = _mm256_setzero_si256();
          for (int k = 0; k < 4; ++k) {
            int32_t a_lo, a_hi;
            std::memcpy(&a_lo, a->qs + 4 * k, 4);
            std::memcpy(&a_hi, a->qs + 16 + 4 * k, 4);
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(lo[k], _mm256_set1_epi32(a_lo)));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(hi[k], _mm256_set1_epi32(a_hi)));
          }
          const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(p, ones16), _mm256_set1_epi32(info.corr[k0]));
          // Reference order: sumi * (d_w * d_a).
          acc[t] = _mm256_add_ps(acc[t], _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(dw, _mm256_set1_ps(info.d[k0]))));
        }
      }
      for (int t = 0; t < nt; ++t) StoreRows(y + static_cast<int64_t>(t0 + t) * ldy + r, acc[t], w.tensor_scale, scale, nr);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Q6_K x Q8_K.

// int32 lanes summing to sum_j sc_j * sum_{group j} (q - 32) * a for one block; a = 256 int8.
inline __m256i DotQ6_KBlock(const BlockQ6_K* blk, const int8_t* a, __m256i bsums) {
  const __m256i m0f = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->scales)));
  // -32 * sum_j sc_j * bsum_j (|32 sc| <= 4096 fits int16).
  __m256i s = _mm256_madd_epi16(bsums, _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc, 5)));
  const __m256i sc_lo = _mm256_permute4x64_epi64(sc, 0x44);  // [sc0..7 | sc0..7]
  const __m256i sc_hi = _mm256_permute4x64_epi64(sc, 0xEE);  // [sc8..15 | sc8..15]
  for (int h = 0; h < 2; ++h) {
    const __m256i ql_a = Load256(blk->ql + 64 * h), ql_b = Load256(blk->ql + 64 * h + 32);
    const __m256i qh = Load256(blk->qh + 32 * h);
    __m256i q[4];
    q[0] = _mm256_or_si256(_mm256_and_si256(ql_a, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] = _mm256_or_si256(_mm256_and_si256(ql_b, m0f), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_a, 4), m0f), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql_b, 4), m0f),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    const __m256i scs = h == 0 ? sc_lo : sc_hi;
    for (int v = 0; v < 4; ++v) {
      // Vector v of this half covers groups 2v (low 128 bits) and 2v+1: broadcast those words.
      const __m256i ctl = _mm256_setr_epi8(
          static_cast<char>(4 * v), static_cast<char>(4 * v + 1), static_cast<char>(4 * v), static_cast<char>(4 * v + 1),
          static_cast<char>(4 * v), static_cast<char>(4 * v + 1), static_cast<char>(4 * v), static_cast<char>(4 * v + 1),
          static_cast<char>(4 * v), static_cast<char>(4 * v + 1), static_cast<char>(4 * v), static_cast<char>(4 * v + 1),
          static_cast<char>(4 * v), static_cast<char>(4 * v + 1), static_cast<char>(4 * v), static_cast<char>(4 * v + 1),
          static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3), static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3),
          static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3), static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3),
          static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3), static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3),
          static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3), static_cast<char>(4 * v + 2), static_cast<char>(4 * v + 3));
      // q * a pairs <= 2 * 63 * 127: no int16 saturation.
      const __m256i p = _mm256_maddubs_epi16(q[v], Load256(a + 128 * h + 32 * v));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_shuffle_epi8(scs, ctl)));
    }
  }
  return s;
}

void GemmQ6_K(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
              int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const uint8_t* next = w.data + static_cast<size_t>(r + kTileRows) * w.row_bytes;
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ6_K);
        if (t == 0) PrefetchNext(next + kTileRows * boff, kTileRows * sizeof(BlockQ6_K));
        const __m256i bs = Load256(a[b].bsums);
        __m256i s[kTileRows];
        for (int i = 0; i < kTileRows; ++i) s[i] = DotQ6_KBlock(reinterpret_cast<const BlockQ6_K*>(rows[i] + boff), a[b].qs, bs);
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

inline __m256i BroadcastWord(__m256i v, int j) {
  const char lo = static_cast<char>(2 * j), hi = static_cast<char>(2 * j + 1);
  return _mm256_shuffle_epi8(v, _mm256_setr_epi8(lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi,  //
                                                 lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi, lo, hi));
}

// sumi lanes (sum_g sc_g * sum q * a) and summ lanes (sum_g m_g * (bsum_2g + bsum_2g+1)).
inline void DotQ4_KBlock(const BlockQ4_K* blk, const int8_t* a, __m256i bsums, __m256i* sumi, __m256i* summ) {
  const __m256i sm = _mm256_cvtepu8_epi16(Q4_KScalesMins(blk->scales));  // [sc0..7 | m0..7] int16
  const __m256i sc = _mm256_permute4x64_epi64(sm, 0x44);
  const __m256i mins = _mm256_permute4x64_epi64(sm, 0xEE);
  // [m0, m0, m1, m1, m2, m2, m3, m3 | m4, m4, ..., m7, m7] lines up with the 16 bsums.
  const __m256i mctl = _mm256_setr_epi8(0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7,  //
                                        8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15);
  *summ = _mm256_madd_epi16(bsums, _mm256_shuffle_epi8(mins, mctl));
  const __m256i m0f = _mm256_set1_epi8(0x0F);
  __m256i s = _mm256_setzero_si256();
  for (int i = 0; i < 4; ++i) {
    const __m256i raw = Load256(blk->qs + 32 * i);
    // q * a pairs <= 2 * 15 * 127; sc <= 63.
    const __m256i p0 = _mm256_maddubs_epi16(_mm256_and_si256(raw, m0f), Load256(a + 64 * i));
    const __m256i p1 = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(raw, 4), m0f), Load256(a + 64 * i + 32));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(p0, BroadcastWord(sc, 2 * i)));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(p1, BroadcastWord(sc, 2 * i + 1)));
  }
  *sumi = s;
}

void GemmQ4_K(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
              int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const uint8_t* rows[kTileRows];
    const int nr = TileRows(w, r, r1, rows);
    const __m256i off = RowOffsets(rows);
    const uint8_t* next = w.data + static_cast<size_t>(r + kTileRows) * w.row_bytes;
    for (int t = 0; t < n_tokens; ++t) {
      const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
      __m256 acc = _mm256_setzero_ps();
      for (int64_t b = 0; b < nb; ++b) {
        const size_t boff = static_cast<size_t>(b) * sizeof(BlockQ4_K);
        if (t == 0) PrefetchNext(next + kTileRows * boff, kTileRows * sizeof(BlockQ4_K));
        const __m256i bs = Load256(a[b].bsums);
        __m256i s[kTileRows], m[kTileRows];
        for (int i = 0; i < kTileRows; ++i) {
          DotQ4_KBlock(reinterpret_cast<const BlockQ4_K*>(rows[i] + boff), a[b].qs, bs, &s[i], &m[i]);
        }
        const __m256i sumi = Reduce8(s);
        const __m256i summ = Reduce8(m);
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
// GemmFn entries (referenced by the KernelTable in gemm_avx2.cc).

// Q4_0 x16 (gemm_q4_0_x16_avx2.cc): what the loader builds (WantsX16); file rows for streamed layers.
void GemmQ4_0X16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale);

void GemmQ4_0Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, float scale) {
  if (w.interleave == 16) {
    GemmQ4_0X16Avx2(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmQ4_0Rows8(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

void GemmQ8_0Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, float scale) {
  GemmQ8_0(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

// Q4_K x16 (gemm_q4_k_x16_avx2.cc): what the loader builds (WantsX16); file rows for streamed layers.
void GemmQ4_KX16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale);

void GemmQ4_KAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, float scale) {
  if (w.interleave == 16) {
    GemmQ4_KX16Avx2(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmQ4_K(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

// Q6_K x16 (gemm_q6_k_x16_avx2.cc): what the loader builds (WantsX16); file rows for streamed layers.
void GemmQ6_KX16Avx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                     int64_t r0, int64_t r1, float scale);

void GemmQ6_KAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                  int64_t r0, int64_t r1, float scale) {
  if (w.interleave == 16) {
    GemmQ6_KX16Avx2(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  } else {
    GemmQ6_K(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
  }
}

}  // namespace trine::kernels
