// AVX-512 GemmFn for f32 activations (WeightView::f32_activations): the profiler's 16/32-bit
// activation rung, run over whole forward passes, so it has to be fast, not just correct.
//
// Per group of 16 rows (16-row aligned in absolute row index, whatever r0/r1 are) and per chunk
// of 256 columns, the rows are dequantized once into a k-major fp32 tile (tile[k * 16 + i] =
// W[16g + i][k]), then every token's accumulator gets tile_k * broadcast(x_t[k]) with an explicit
// FMA: 16 outputs per vector, no horizontal sums. Each output is one FMA chain running over k in
// order from 0, carried across chunks through a small buffer, so its value depends neither on the
// thread split nor on how tokens or groups are blocked. Decode (<= 3 tokens) works on four row
// groups at once so there are enough independent chains to hide the FMA latency; prefill on two
// groups x 12 tokens.
// Dequantized weights are exact (the reference's (q - z) * d); only the FMA rounding differs.
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/tq1_x16.h"

namespace trine::kernels {
namespace {

constexpr int kKC = 256;     // columns per tile chunk (one K-quant / TQ2_0 block, 8 Q4_0/Q8_0 blocks)
constexpr int kMaxNG = 4;    // row groups per pass in decode
constexpr int kMaxTB = 12;   // tokens per pass in prefill (12 accumulators + weight + broadcast)

// One 16-row group as a decoder reads it: lanes [lo, hi) are wanted; the other lanes read row
// 16g + lo instead (always valid memory; their outputs are never stored).
struct Group {
  int64_t g = 0;
  int lo = 0, hi = 16;
  const uint8_t* base = nullptr;  // plain layouts: row 16g + lo; x16: the group
  __m512i off;                    // plain layouts: byte offset of lane i's row from base
  __mmask16 mask = 0;
};

Group MakeGroup(const WeightView& w, int64_t g, int64_t r0, int64_t r1) {
  Group G;
  G.g = g;
  G.lo = static_cast<int>((g * 16 > r0 ? g * 16 : r0) - g * 16);
  G.hi = static_cast<int>((g * 16 + 16 < r1 ? g * 16 + 16 : r1) - g * 16);
  G.mask = static_cast<__mmask16>(((1u << G.hi) - 1) & ~((1u << G.lo) - 1));
  if (w.interleave == 16) {
    G.base = w.data + static_cast<size_t>(g) * w.group_bytes;
    G.off = _mm512_setzero_si512();
  } else {
    G.base = w.data + static_cast<size_t>(g * 16 + G.lo) * w.row_bytes;
    alignas(64) int32_t off[16];
    for (int i = 0; i < 16; ++i) off[i] = (i >= G.lo && i < G.hi) ? static_cast<int32_t>((i - G.lo) * w.row_bytes) : 0;
    G.off = _mm512_load_si512(off);
  }
  return G;
}

// 16 fp16 values, one per lane, taken from the low (hi = false) or high half of each dword.
inline __m512 HalvesToPs(__m512i dw, bool hi) {
  const __m512i h = hi ? _mm512_srli_epi32(dw, 16) : dw;
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
}

// TQ2_0: byte B of a block holds codes of elements 128(B/32) + 32s + B%32, s = 0..3 (2 bits each).
// A 16-lane dword vector of bytes 4l..4l+3 (lane i = row i) thus yields 16 tile vectors.
inline void Tq2Line(__m512i q, int l, __m512 d, float* tile) {
  // c * d - d in one rounding is exactly the reference's (c - 1) * d, one op cheaper.
  const __m512i m3 = _mm512_set1_epi32(3);
  const int e0 = 128 * (l >> 3) + 4 * (l & 7);
  for (int p = 0; p < 4; ++p) {
    for (int s = 0; s < 4; ++s) {
      const __m512i c = _mm512_and_si512(_mm512_srli_epi32(q, static_cast<unsigned>(8 * p + 2 * s)), m3);
      _mm512_store_ps(tile + (e0 + 32 * s + p) * 16, _mm512_fmsub_ps(_mm512_cvtepi32_ps(c), d, d));
    }
  }
}

void FillTq2(const WeightView& w, const Group& G, int64_t k0, int /*kc*/, float* tile) {
  const int64_t b = k0 / kQK_K;
  if (w.interleave == 16) {
    const __m512 d =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(G.base + X16ScalesOffset(b, 1024))));
    const uint8_t* lines = G.base + X16CodesOffset(b, 1024);
    for (int l = 0; l < 16; ++l) Tq2Line(_mm512_load_si512(lines + 64 * l), l, d, tile);
    return;
  }
  const uint8_t* blk = G.base + static_cast<size_t>(b) * sizeof(BlockTQ2_0);
  // d sits in bytes 64..65: read the dword at 62 (in bounds) and take its high half.
  const __m512 d = HalvesToPs(_mm512_i32gather_epi32(G.off, blk + 62, 1), true);
  for (int l = 0; l < 16; ++l) Tq2Line(_mm512_i32gather_epi32(G.off, blk + 4 * l, 1), l, d, tile);
}

// GCC 12 reports the intrinsics' own undefined pass-through operands (`__Y = __Y` in
// avx512fintrin.h) as used uninitialized once they are inlined into the TQ1_0 and Q6_K loop
// nests; a false positive, silenced for the decoders from here to FillQ6_K (src/CMakeLists.txt
// silences the maybe- variant).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

// TQ1_0 x16 (kernels/x86/tq1_x16.h): the layout's bytes go back to the file's first (this
// translation unit has no VBMI for the codec's lookups); digit n of file byte x is
// ((x * 3^n) mod 256) * 3 >> 8; each step multiplies by 3 (x + 2x), the part above 8 bits is the
// digit and the low 8 bits carry on.
inline void Tq1Line(const uint8_t* line, int l, __m512 d, float* tile) {
  alignas(64) uint8_t file_bytes[64];
  for (int j = 0; j < 64; ++j) file_bytes[j] = kTq1Codec.file_byte[line[j]];
  const __m512i q = _mm512_load_si512(file_bytes);
  const __m512i m255 = _mm512_set1_epi32(255);
  const int digits = l < kTq1QsLines ? 5 : 4;
  for (int p = 0; p < 4; ++p) {
    __m512i x = _mm512_and_si512(_mm512_srli_epi32(q, static_cast<unsigned>(8 * p)), m255);
    for (int n = 0; n < digits; ++n) {
      const __m512i x3 = _mm512_add_epi32(x, _mm512_slli_epi32(x, 1));
      const __m512i c = _mm512_srli_epi32(x3, 8);
      _mm512_store_ps(tile + Tq1Element(l, n, p) * 16, _mm512_fmsub_ps(_mm512_cvtepi32_ps(c), d, d));
      x = _mm512_and_si512(x3, m255);
    }
  }
}

// x16 only: plain TQ1_0 rows never reach a kernel (the loader repacks them to TQ2_0).
void FillTq1(const WeightView& w, const Group& G, int64_t k0, int /*kc*/, float* tile) {
  const int64_t b = k0 / kQK_K;
  constexpr size_t kCodeBytes = 64 * kTq1Lines;
  const __m512 d =
      _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(G.base + X16ScalesOffset(b, kCodeBytes))));
  const uint8_t* lines = G.base + X16CodesOffset(b, kCodeBytes);
  for (int l = 0; l < kTq1Lines; ++l) Tq1Line(lines + 64 * l, l, d, tile);
}

// Q4_0: byte m of a block holds element m (low nibble) and m + 16 (high), minus 8, times d.
inline void Q4Line(__m512i q, int l, __m512 d, float* tile) {
  const __m512i m15 = _mm512_set1_epi32(15);
  const __m512 d8 = _mm512_mul_ps(d, _mm512_set1_ps(8.0f));  // c * d - 8d: exactly (c - 8) * d
  for (int p = 0; p < 4; ++p) {
    for (int h = 0; h < 2; ++h) {
      const __m512i c = _mm512_and_si512(_mm512_srli_epi32(q, static_cast<unsigned>(8 * p + 4 * h)), m15);
      _mm512_store_ps(tile + (4 * l + p + 16 * h) * 16,
                      _mm512_fmsub_ps(_mm512_cvtepi32_ps(c), d, d8));
    }
  }
}

void FillQ4_0(const WeightView& w, const Group& G, int64_t k0, int kc, float* tile) {
  for (int j = 0; j < kc / kQK4_0; ++j, tile += kQK4_0 * 16) {
    const int64_t b = k0 / kQK4_0 + j;
    if (w.interleave == 16) {
      const __m512 d =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(G.base + X16ScalesOffset(b, 256))));
      const uint8_t* lines = G.base + X16CodesOffset(b, 256);
      for (int l = 0; l < 4; ++l) Q4Line(_mm512_load_si512(lines + 64 * l), l, d, tile);
    } else {
      const uint8_t* blk = G.base + static_cast<size_t>(b) * sizeof(BlockQ4_0);
      const __m512 d = HalvesToPs(_mm512_i32gather_epi32(G.off, blk, 1), false);
      for (int l = 0; l < 4; ++l) Q4Line(_mm512_i32gather_epi32(G.off, blk + 2 + 4 * l, 1), l, d, tile);
    }
  }
}

void FillQ8_0(const WeightView& /*w*/, const Group& G, int64_t k0, int kc, float* tile) {
  for (int j = 0; j < kc / kQK8_0; ++j, tile += kQK8_0 * 16) {
    const uint8_t* blk = G.base + static_cast<size_t>(k0 / kQK8_0 + j) * sizeof(BlockQ8_0);
    const __m512 d = HalvesToPs(_mm512_i32gather_epi32(G.off, blk, 1), false);
    for (int l = 0; l < 8; ++l) {
      const __m512i q = _mm512_i32gather_epi32(G.off, blk + 2 + 4 * l, 1);
      for (int p = 0; p < 4; ++p) {
        const __m512i c = _mm512_srai_epi32(_mm512_slli_epi32(q, static_cast<unsigned>(24 - 8 * p)), 24);
        _mm512_store_ps(tile + (4 * l + p) * 16, _mm512_mul_ps(_mm512_cvtepi32_ps(c), d));
      }
    }
  }
}

// Q6_K (one 256-value block per chunk): value 128h + 32q + l (q, l < 32) has its low 4 bits in
// ql[64h + 32(q & 1) + l] (low nibble for q < 2, high for q >= 2), its top 2 bits at bits 2q of
// qh[32h + l], and the scale scales[8h + l / 16 + 2q]; it is (d * scale) * (bits - 32), the
// reference's order. Each dword gather brings 4 consecutive l of every row.
void FillQ6_K(const WeightView& w, const Group& G, int64_t k0, int /*kc*/, float* tile) {
  const int64_t b = k0 / kQK_K;
  // The dword at byte o of each row's block: gathered from the plain rows, or line o / 4 of the
  // block in the x16 layout (52 lines; the d values sit in the group's scale lines).
  const bool x16 = w.interleave == 16;
  const uint8_t* blk = x16 ? G.base + X16CodesOffset(b, 52 * 64) : G.base + static_cast<size_t>(b) * sizeof(BlockQ6_K);
  auto lanes = [&](int o) { return x16 ? _mm512_load_si512(blk + 16 * o) : _mm512_i32gather_epi32(G.off, blk + o, 1); };
  // d * scale per row and sub-block, in scalar code (256 products per 4096 values).
  alignas(64) int32_t off[16];
  _mm512_store_si512(off, G.off);
  alignas(64) float dsm[16][16];
  for (int i = 0; i < 16; ++i) {
    if (x16) {
      uint16_t h;
      std::memcpy(&h, G.base + X16ScalesOffset(b, 52 * 64) + 2 * i, 2);
      const float d = Fp16ToFp32(h);
      for (int s = 0; s < 16; ++s) {
        dsm[s][i] = d * static_cast<float>(static_cast<int8_t>(blk[64 * (48 + s / 4) + 4 * i + s % 4]));
      }
    } else {
      const BlockQ6_K* q = reinterpret_cast<const BlockQ6_K*>(blk + off[i]);
      const float d = Fp16ToFp32(q->d);
      for (int s = 0; s < 16; ++s) dsm[s][i] = d * static_cast<float>(q->scales[s]);
    }
  }
  __m512 ds[16];
  for (int s = 0; s < 16; ++s) ds[s] = _mm512_load_ps(dsm[s]);
  const __m512i m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3), b32 = _mm512_set1_epi32(32);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 8; ++j) {
      const __m512i lo = lanes(64 * h + 4 * j);
      const __m512i hi = lanes(64 * h + 32 + 4 * j);
      const __m512i qh = lanes(128 + 32 * h + 4 * j);
      for (int p = 0; p < 4; ++p) {
        const int l = 4 * j + p;
        const __m512i a = _mm512_srli_epi32(lo, static_cast<unsigned>(8 * p));
        const __m512i bh = _mm512_srli_epi32(hi, static_cast<unsigned>(8 * p));
        const __m512i e = _mm512_srli_epi32(qh, static_cast<unsigned>(8 * p));
        for (int q = 0; q < 4; ++q) {
          const __m512i nib = _mm512_and_si512(_mm512_srli_epi32(q & 1 ? bh : a, q < 2 ? 0u : 4u), m15);
          const __m512i top = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(e, 2u * q), m3), 4);
          const __m512i v = _mm512_sub_epi32(_mm512_or_si512(nib, top), b32);
          _mm512_store_ps(tile + (128 * h + 32 * q + l) * 16,
                          _mm512_mul_ps(ds[8 * h + l / 16 + 2 * q], _mm512_cvtepi32_ps(v)));
        }
      }
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Every other type (F32, F16, BF16, Q4_K incl. its x16 layout): the scalar dequantize_row of each row's chunk,
// then a transpose by gathers. Chunks start on block boundaries (256 is a multiple of every
// block size) and the last one is a whole number of blocks because cols is.
void FillGeneric(const WeightView& w, const Group& G, int64_t k0, int kc, float* tile) {
  const TypeTraits& tr = GetTypeTraits(w.type);
  alignas(64) static thread_local float rows[16 * kKC];
  const size_t src_off = static_cast<size_t>(k0 / tr.block_elems * tr.block_bytes);
  // x16 Q4_K keeps whole blocks as lines (dword lane i = row i): gather the chunk's blocks of a row.
  alignas(64) static thread_local uint8_t blocks[kKC / 32 * 144];
  const size_t line_bytes = tr.block_bytes / 4 * 64;
  for (int i = 0; i < 16; ++i) {
    const int li = i >= G.lo && i < G.hi ? i : G.lo;
    const uint8_t* src = G.base + static_cast<size_t>(li - G.lo) * w.row_bytes + src_off;
    if (w.interleave == 16) {
      const int64_t bb = static_cast<int64_t>(tr.block_bytes);
      for (int64_t b = 0; b < kc / tr.block_elems; ++b) {
        const uint8_t* lines = G.base + X16CodesOffset(k0 / tr.block_elems + b, line_bytes);
        for (int64_t k = 0; k < bb / 4; ++k) std::memcpy(blocks + b * bb + 4 * k, lines + 64 * k + 4 * li, 4);
      }
      src = blocks;
    }
    tr.dequantize_row(src, rows + i * kKC, kc);
  }
  const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                         _mm512_set1_epi32(kKC));
  for (int k = 0; k < kc; ++k) _mm512_store_ps(tile + k * 16, _mm512_i32gather_ps(idx, rows + k, 4));
}

using FillFn = void (*)(const WeightView&, const Group&, int64_t, int, float*);

// acc[t * kMaxNG * 16 + g * 16 + i] += sum over k < kc of tile_g[k * 16 + i] * x_t[k], one FMA
// chain per (t, g, i) in k order.
template <int NG, int TB>
void Micro(float* const* tiles, int kc, const float* const* xs, float* acc, bool first) {
  __m512 a[NG][TB];
  for (int t = 0; t < TB; ++t) {
    for (int g = 0; g < NG; ++g) a[g][t] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + (t * kMaxNG + g) * 16);
  }
  for (int k = 0; k < kc; ++k) {
    __m512 wv[NG];
    for (int g = 0; g < NG; ++g) wv[g] = _mm512_load_ps(tiles[g] + k * 16);
    for (int t = 0; t < TB; ++t) {
      const __m512 x = _mm512_set1_ps(xs[t][k]);
      for (int g = 0; g < NG; ++g) a[g][t] = _mm512_fmadd_ps(wv[g], x, a[g][t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    for (int g = 0; g < NG; ++g) _mm512_storeu_ps(acc + (t * kMaxNG + g) * 16, a[g][t]);
  }
}

using MicroFn = void (*)(float* const*, int, const float* const*, float*, bool);
constexpr MicroFn kMicro1[kMaxTB + 1] = {nullptr,      Micro<1, 1>,  Micro<1, 2>, Micro<1, 3>, Micro<1, 4>,
                                         Micro<1, 5>,  Micro<1, 6>,  Micro<1, 7>, Micro<1, 8>, Micro<1, 9>,
                                         Micro<1, 10>, Micro<1, 11>, Micro<1, 12>};
constexpr MicroFn kMicro2[kMaxTB + 1] = {nullptr,      Micro<2, 1>,  Micro<2, 2>, Micro<2, 3>, Micro<2, 4>,
                                         Micro<2, 5>,  Micro<2, 6>,  Micro<2, 7>, Micro<2, 8>, Micro<2, 9>,
                                         Micro<2, 10>, Micro<2, 11>, Micro<2, 12>};
constexpr MicroFn kMicro4[4] = {nullptr, Micro<4, 1>, Micro<4, 2>, Micro<4, 3>};

void Run(FillFn fill, const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
         int64_t ldy, int64_t r0, int64_t r1, float scale) {
  // Prefill: two row groups per pass, so each broadcast of x_t[k] feeds two FMAs (24
  // accumulators, 2 weight and 12 broadcast loads per 24 FMAs; one group is load-bound).
  const int ng_max = n_tokens <= 3 ? kMaxNG : 2;
  const int tb_max = n_tokens <= 3 ? n_tokens : kMaxTB;
  alignas(64) static thread_local float tiles_mem[kMaxNG][kKC * 16];
  static thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(n_tokens) * kMaxNG * 16);
  float* tiles[kMaxNG] = {tiles_mem[0], tiles_mem[1], tiles_mem[2], tiles_mem[3]};
  const __m512 ts = _mm512_set1_ps(w.tensor_scale), sc = _mm512_set1_ps(scale);
  const int64_t g_end = (r1 + 15) / 16;
  for (int64_t g0 = r0 / 16; g0 < g_end; g0 += ng_max) {
    const int ng = static_cast<int>(g_end - g0 < ng_max ? g_end - g0 : ng_max);
    Group groups[kMaxNG];
    for (int j = 0; j < ng; ++j) groups[j] = MakeGroup(w, g0 + j, r0, r1);
    for (int64_t k0 = 0; k0 < w.cols; k0 += kKC) {
      const int kc = static_cast<int>(w.cols - k0 < kKC ? w.cols - k0 : kKC);
      for (int j = 0; j < ng; ++j) fill(w, groups[j], k0, kc, tiles[j]);
      for (int t0 = 0; t0 < n_tokens; t0 += tb_max) {
        const int tb = n_tokens - t0 < tb_max ? n_tokens - t0 : tb_max;
        const float* xs[kMaxTB];
        for (int t = 0; t < tb; ++t) {
          xs[t] = reinterpret_cast<const float*>(xq + act_stride * static_cast<size_t>(t0 + t)) + k0;
        }
        float* a = acc.data() + static_cast<size_t>(t0) * kMaxNG * 16;
        if (ng == kMaxNG) {
          kMicro4[tb](tiles, kc, xs, a, k0 == 0);
        } else if (ng == 2) {
          kMicro2[tb](tiles, kc, xs, a, k0 == 0);
        } else {
          for (int j = 0; j < ng; ++j) kMicro1[tb](tiles + j, kc, xs, a + j * 16, k0 == 0);
        }
      }
    }
    for (int t = 0; t < n_tokens; ++t) {
      for (int j = 0; j < ng; ++j) {
        const __m512 v = _mm512_loadu_ps(acc.data() + (static_cast<size_t>(t) * kMaxNG + j) * 16);
        _mm512_mask_storeu_ps(y + static_cast<int64_t>(t) * ldy + groups[j].g * 16, groups[j].mask,
                              _mm512_mul_ps(_mm512_mul_ps(v, ts), sc));
      }
    }
  }
}

}  // namespace

void GemmF32ActAvx512(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, float scale) {
  FillFn fill = nullptr;
  switch (w.type) {
    case TypeId::kTQ2_0: fill = FillTq2; break;
    case TypeId::kTQ1_0: fill = w.interleave ? FillTq1 : nullptr; break;
    case TypeId::kQ4_0: fill = FillQ4_0; break;
    case TypeId::kQ8_0: fill = w.interleave ? nullptr : FillQ8_0; break;
    case TypeId::kF32:
    case TypeId::kF16:
    case TypeId::kBF16: fill = w.interleave ? nullptr : FillGeneric; break;
    case TypeId::kQ4_K: fill = FillGeneric; break;  // x16: whole blocks as lines
    case TypeId::kQ6_K: fill = FillQ6_K; break;
    default: break;
  }
  if (fill == nullptr || r0 >= r1 || n_tokens <= 0) {
    if (fill == nullptr) GemmDequantF32(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  Run(fill, w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

}  // namespace trine::kernels
