// AVX2 GemmFn for f32 activations: the design of kernels/x86/avx512/gemm_f32act_avx512.cc with
// 8-row groups (one ymm of outputs). Rows are dequantized once per 256-column chunk into a k-major
// fp32 tile, then each token's accumulator gets tile_k * broadcast(x_t[k]) by FMA: one chain per
// output over k in order, so results do not depend on the thread split or the token blocking.
// The x16 layouts (AVX-512's, and TQ2_0 x16 of the AVX2 int8-dot kernel, WantsX16) fall back to
// GemmDequantF32 here: the profiler's fp32 rung on an AVX2 ternary layer is the scalar path.
#include <immintrin.h>

#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

constexpr int kKC = 256;    // columns per tile chunk
constexpr int kMaxNG = 4;   // row groups per pass in decode (<= 2 tokens: 8 accumulators)
constexpr int kMaxTB = 12;  // tokens per pass otherwise (12 accumulators of 16 ymm)

// One 8-row group: lanes [lo, hi) are wanted; others read row 8g + lo (valid, never stored).
struct Group {
  int64_t g = 0;
  int lo = 0, hi = 8;
  const uint8_t* base = nullptr;
  __m256i off;   // byte offset of lane i's row from base
  __m256i mask;  // all-ones in wanted lanes
};

Group MakeGroup(const WeightView& w, int64_t g, int64_t r0, int64_t r1) {
  Group G;
  G.g = g;
  G.lo = static_cast<int>((g * 8 > r0 ? g * 8 : r0) - g * 8);
  G.hi = static_cast<int>((g * 8 + 8 < r1 ? g * 8 + 8 : r1) - g * 8);
  G.base = w.data + static_cast<size_t>(g * 8 + G.lo) * w.row_bytes;
  alignas(32) int32_t off[8], m[8];
  for (int i = 0; i < 8; ++i) {
    const bool in = i >= G.lo && i < G.hi;
    off[i] = in ? static_cast<int32_t>((i - G.lo) * w.row_bytes) : 0;
    m[i] = in ? -1 : 0;
  }
  G.off = _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
  G.mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(m));
  return G;
}

inline __m256i Gather(const Group& G, const uint8_t* p) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(p), G.off, 1);
}

// 8 fp16 values, one per lane, from the low (hi = false) or high half of each dword.
inline __m256 HalvesToPs(__m256i dw, bool hi) {
  const __m256i h = hi ? _mm256_srli_epi32(dw, 16) : _mm256_and_si256(dw, _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

// TQ2_0: bytes 4l..4l+3 of 8 rows yield 16 tile vectors (see the AVX-512 file).
void FillTq2(const WeightView& /*w*/, const Group& G, int64_t k0, int /*kc*/, float* tile) {
  const uint8_t* blk = G.base + static_cast<size_t>(k0 / kQK_K) * sizeof(BlockTQ2_0);
  const __m256 d = HalvesToPs(Gather(G, blk + 62), true);  // d at bytes 64..65
  const __m256i m3 = _mm256_set1_epi32(3), one = _mm256_set1_epi32(1);
  for (int l = 0; l < 16; ++l) {
    const __m256i q = Gather(G, blk + 4 * l);
    const int e0 = 128 * (l >> 3) + 4 * (l & 7);
    for (int p = 0; p < 4; ++p) {
      for (int s = 0; s < 4; ++s) {
        const __m256i c = _mm256_and_si256(_mm256_srli_epi32(q, 8 * p + 2 * s), m3);
        _mm256_store_ps(tile + (e0 + 32 * s + p) * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c, one)), d));
      }
    }
  }
}

void FillQ4_0(const WeightView& /*w*/, const Group& G, int64_t k0, int kc, float* tile) {
  const __m256i m15 = _mm256_set1_epi32(15), eight = _mm256_set1_epi32(8);
  for (int j = 0; j < kc / kQK4_0; ++j, tile += kQK4_0 * 8) {
    const uint8_t* blk = G.base + static_cast<size_t>(k0 / kQK4_0 + j) * sizeof(BlockQ4_0);
    const __m256 d = HalvesToPs(Gather(G, blk), false);
    for (int l = 0; l < 4; ++l) {
      const __m256i q = Gather(G, blk + 2 + 4 * l);
      for (int p = 0; p < 4; ++p) {
        for (int h = 0; h < 2; ++h) {
          const __m256i c = _mm256_and_si256(_mm256_srli_epi32(q, 8 * p + 4 * h), m15);
          _mm256_store_ps(tile + (4 * l + p + 16 * h) * 8,
                          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(c, eight)), d));
        }
      }
    }
  }
}

void FillQ8_0(const WeightView& /*w*/, const Group& G, int64_t k0, int kc, float* tile) {
  for (int j = 0; j < kc / kQK8_0; ++j, tile += kQK8_0 * 8) {
    const uint8_t* blk = G.base + static_cast<size_t>(k0 / kQK8_0 + j) * sizeof(BlockQ8_0);
    const __m256 d = HalvesToPs(Gather(G, blk), false);
    for (int l = 0; l < 8; ++l) {
      const __m256i q = Gather(G, blk + 2 + 4 * l);
      for (int p = 0; p < 4; ++p) {
        const __m256i c = _mm256_srai_epi32(_mm256_slli_epi32(q, 24 - 8 * p), 24);
        _mm256_store_ps(tile + (4 * l + p) * 8, _mm256_mul_ps(_mm256_cvtepi32_ps(c), d));
      }
    }
  }
}

// F32, F16, BF16, Q4_K, Q6_K: scalar dequantize_row per row, transposed by gathers.
void FillGeneric(const WeightView& w, const Group& G, int64_t k0, int kc, float* tile) {
  const TypeTraits& tr = GetTypeTraits(w.type);
  alignas(32) static thread_local float rows[8 * kKC];
  const size_t src_off = static_cast<size_t>(k0 / tr.block_elems * tr.block_bytes);
  for (int i = 0; i < 8; ++i) {
    const int li = i >= G.lo && i < G.hi ? i : G.lo;
    tr.dequantize_row(G.base + static_cast<size_t>(li - G.lo) * w.row_bytes + src_off, rows + i * kKC, kc);
  }
  const __m256i idx = _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32(kKC));
  for (int k = 0; k < kc; ++k) _mm256_store_ps(tile + k * 8, _mm256_i32gather_ps(rows + k, idx, 4));
}

using FillFn = void (*)(const WeightView&, const Group&, int64_t, int, float*);

// acc[t * kMaxNG * 8 + g * 8 + i] += sum over k < kc of tile_g[k * 8 + i] * x_t[k] (k order).
template <int NG, int TB>
void Micro(float* const* tiles, int kc, const float* const* xs, float* acc, bool first) {
  __m256 a[NG][TB];
  for (int t = 0; t < TB; ++t) {
    for (int g = 0; g < NG; ++g) a[g][t] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + (t * kMaxNG + g) * 8);
  }
  for (int k = 0; k < kc; ++k) {
    __m256 wv[NG];
    for (int g = 0; g < NG; ++g) wv[g] = _mm256_load_ps(tiles[g] + k * 8);
    for (int t = 0; t < TB; ++t) {
      const __m256 x = _mm256_broadcast_ss(xs[t] + k);
      for (int g = 0; g < NG; ++g) a[g][t] = _mm256_fmadd_ps(wv[g], x, a[g][t]);
    }
  }
  for (int t = 0; t < TB; ++t) {
    for (int g = 0; g < NG; ++g) _mm256_storeu_ps(acc + (t * kMaxNG + g) * 8, a[g][t]);
  }
}

using MicroFn = void (*)(float* const*, int, const float* const*, float*, bool);
constexpr MicroFn kMicro1[kMaxTB + 1] = {nullptr,      Micro<1, 1>,  Micro<1, 2>, Micro<1, 3>, Micro<1, 4>,
                                         Micro<1, 5>,  Micro<1, 6>,  Micro<1, 7>, Micro<1, 8>, Micro<1, 9>,
                                         Micro<1, 10>, Micro<1, 11>, Micro<1, 12>};
constexpr MicroFn kMicro4[3] = {nullptr, Micro<4, 1>, Micro<4, 2>};

void Run(FillFn fill, const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
         int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int ng_max = n_tokens <= 2 ? kMaxNG : 1;
  const int tb_max = n_tokens <= 2 ? n_tokens : kMaxTB;
  alignas(32) static thread_local float tiles_mem[kMaxNG][kKC * 8];
  static thread_local std::vector<float> acc;
  acc.resize(static_cast<size_t>(n_tokens) * kMaxNG * 8);
  float* tiles[kMaxNG] = {tiles_mem[0], tiles_mem[1], tiles_mem[2], tiles_mem[3]};
  const __m256 ts = _mm256_set1_ps(w.tensor_scale), sc = _mm256_set1_ps(scale);
  const int64_t g_end = (r1 + 7) / 8;
  for (int64_t g0 = r0 / 8; g0 < g_end; g0 += ng_max) {
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
        float* a = acc.data() + static_cast<size_t>(t0) * kMaxNG * 8;
        if (ng == kMaxNG) {
          kMicro4[tb](tiles, kc, xs, a, k0 == 0);
        } else {
          for (int j = 0; j < ng; ++j) kMicro1[tb](tiles + j, kc, xs, a + j * 8, k0 == 0);
        }
      }
    }
    for (int t = 0; t < n_tokens; ++t) {
      for (int j = 0; j < ng; ++j) {
        const __m256 v = _mm256_loadu_ps(acc.data() + (static_cast<size_t>(t) * kMaxNG + j) * 8);
        _mm256_maskstore_ps(y + static_cast<int64_t>(t) * ldy + groups[j].g * 8, groups[j].mask,
                            _mm256_mul_ps(_mm256_mul_ps(v, ts), sc));
      }
    }
  }
}

}  // namespace

void GemmF32ActAvx2(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  FillFn fill = nullptr;
  switch (w.type) {
    case TypeId::kTQ2_0: fill = FillTq2; break;
    case TypeId::kQ4_0: fill = FillQ4_0; break;
    case TypeId::kQ8_0: fill = FillQ8_0; break;
    case TypeId::kF32:
    case TypeId::kF16:
    case TypeId::kBF16:
    case TypeId::kQ4_K:
    case TypeId::kQ6_K: fill = FillGeneric; break;
    default: break;
  }
  if (fill == nullptr || w.interleave != 0) {
    GemmDequantF32(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  if (r0 < r1 && n_tokens > 0) Run(fill, w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

}  // namespace trine::kernels
