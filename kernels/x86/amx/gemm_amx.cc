// AMX-INT8 kernel for ternary prefill: TQ2_0 / TQ1_0 x16 weights x Q8_K activations with TDPBSUD.
// Compiled with its own flags (-mamx-tile -mamx-int8 plus the AVX-512 set); reached only through
// SelectGemm when the CPU has AMX-INT8 and Linux granted the tile-data permission (AmxPermitted).
//
// Tiles (all 16 rows x 64 bytes). TDPBSUD C[m][n] += sum_k sum_i A[m][4k+i] * B[k][4n+i] with A
// signed, B unsigned. B = one block's weight codes of a 16-row x16 group for one shift l: line k
// of the x16 layout holds in dword n the bytes qs[4k..4k+3] of row n, and (line >> 2l) & 3 are the
// codes of elements 32l + 4k + i (k < 8) and 128 + 32l + 4(k-8) + i (k >= 8). That is exactly the
// VNNI B layout (K/4 = 16 rows, 16 output columns of 4 K-consecutive bytes) once the 2-bit codes
// are spread to one per byte: an AVX-512 shift + mask per shift into a 4 KB L1 buffer. A = 16
// tokens x 64 activation bytes: per block and shift the token's x[32l .. 32l+31] ++
// x[128+32l .. 128+32l+31], built once per call (permuted copy of the activations, tokens padded
// to a multiple of 16 with zeros). C (16 tokens x 16 rows, int32) accumulates the 4 shifts of a
// block: sum over the block of code * x; minus the block's activation sum (bsums) that is the
// reference's exact sumi, and the float combination (acc += sumi * (d_w * d_a), block by block,
// then * tensor_scale * scale) runs 16 rows wide in the reference's order: bit-identical to GemmRef.
//
// TQ1_0 x16 (kernels/x86/tq1_x16.h, 13 lines per block) runs the same tiles: byte-table lookups
// spread each line's base-3 bytes into its 4 (qh: 4, qs: 5) digit planes, the 64 spread lines of a
// block fill the 4 B tiles (shift plane n: digit n of lines 0..12, then digit 4 of lines 3n ..
// 3n+2), and the activation copy is permuted to match (Tq1Quad).
//
// Loop order: a chunk of row groups x all blocks x all token tiles. For one block the chunk's
// groups reuse that block's activations (n_tokens x 256 bytes, L1/L2). A C tile's 4 products are
// a dependency chain (TDPBSUD's latency is ~3x its issue interval), so up to 4 token tiles run as
// interleaved chains (C in tmm0-3, A in tmm4/5, B in tmm6/7), and their float work overlaps the
// tile products of the next 4 (two stored C buffers).
#include <immintrin.h>

#include <cstring>
#include <vector>

#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx512/tq1_decode_vbmi.h"
#include "x86/tq1_x16.h"

namespace trine::kernels {

const KernelTable& Avx512Table();

namespace {

constexpr int kGroupChunk = 8;  // row groups (of 16 rows) that share one pass over the activations

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64, "ldtilecfg reads 64 bytes");

// Grow-only per-thread scratch (the GemmFn contract has no workspace; OpenMP threads persist).
struct Scratch {
  std::vector<uint8_t> a_raw;  // permuted activations [block][shift][token][64], 64-aligned inside
  std::vector<int32_t> qsum;   // [block][token]: the block's activation sum (bsums)
  std::vector<float> d;        // [block][token]: the block's Q8_K scale
  std::vector<float> acc;      // [group in chunk][token][16 rows]
  alignas(64) uint8_t codes[4][1024];  // one block of one group: codes of shift l, B layout
  alignas(64) int32_t c[2][4][16][16];  // stored C tiles (two sets of up to 4)
};

Scratch& GetScratch() {
  thread_local Scratch s;
  return s;
}

// Activation element of byte 0 of B-tile row kk in shift plane n, TQ1_0 x16 (see the top).
constexpr int Tq1Quad(int n, int kk) {
  return kk < kTq1Lines ? Tq1Element(kk, n, 0) : Tq1Element(3 * n + kk - kTq1Lines, 4, 0);
}

// A 64-byte plane row of TQ1_0 activations: byte 4kk + i = x[Tq1Quad(n, kk) + i], gathered from
// the 256-byte block by two vpermi2b (low and high 128 bytes) and a blend.
struct Tq1Gather {
  __m512i idx[4];
  __mmask64 high[4];
  Tq1Gather() {
    for (int n = 0; n < 4; ++n) {
      alignas(64) uint8_t ix[64];
      uint64_t m = 0;
      for (int kk = 0; kk < 16; ++kk) {
        for (int i = 0; i < 4; ++i) {
          const int e = Tq1Quad(n, kk) + i;
          ix[4 * kk + i] = static_cast<uint8_t>(e & 127);
          if (e >= 128) m |= uint64_t{1} << (4 * kk + i);
        }
      }
      idx[n] = _mm512_load_si512(ix);
      high[n] = m;
    }
  }
};

// The permuted activation copy, block sums and scales (tokens n_tokens .. tpad-1 are zero).
template <bool kTq1>
int8_t* PrepareActivations(const uint8_t* xq, size_t act_stride, int n_tokens, int tpad, int64_t nb, Scratch* s) {
  const size_t plane = static_cast<size_t>(tpad) * 64;  // one (block, shift): all tokens
  const size_t bytes = static_cast<size_t>(nb) * 4 * plane;
  if (s->a_raw.size() < bytes + 64) s->a_raw.resize(bytes + 64);
  const size_t nbt = static_cast<size_t>(nb) * static_cast<size_t>(tpad);
  if (s->qsum.size() < nbt) s->qsum.resize(nbt);
  if (s->d.size() < nbt) s->d.resize(nbt);
  int8_t* a = reinterpret_cast<int8_t*>(s->a_raw.data() + ((64 - reinterpret_cast<uintptr_t>(s->a_raw.data()) % 64) % 64));
  for (int t = 0; t < tpad; ++t) {
    const BlockQ8_K* x = t < n_tokens ? reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t))
                                      : nullptr;
    for (int64_t b = 0; b < nb; ++b) {
      int8_t* dst = a + static_cast<size_t>(b) * 4 * plane + static_cast<size_t>(t) * 64;
      const size_t k = static_cast<size_t>(b) * static_cast<size_t>(tpad) + static_cast<size_t>(t);
      if (x == nullptr) {
        for (int l = 0; l < 4; ++l) std::memset(dst + l * plane, 0, 64);
        s->qsum[k] = 0;
        s->d[k] = 0.0f;
        continue;
      }
      if (kTq1) {
        static const Tq1Gather gather;
        const __m512i* q = reinterpret_cast<const __m512i*>(x[b].qs);
        const __m512i q0 = _mm512_loadu_si512(q), q1 = _mm512_loadu_si512(q + 1);
        const __m512i q2 = _mm512_loadu_si512(q + 2), q3 = _mm512_loadu_si512(q + 3);
        for (int n = 0; n < 4; ++n) {
          const __m512i lo = _mm512_permutex2var_epi8(q0, gather.idx[n], q1);
          const __m512i hi = _mm512_permutex2var_epi8(q2, gather.idx[n], q3);
          _mm512_store_si512(dst + n * plane, _mm512_mask_blend_epi8(gather.high[n], lo, hi));
        }
      } else {
        for (int l = 0; l < 4; ++l) {
          std::memcpy(dst + l * plane, x[b].qs + 32 * l, 32);
          std::memcpy(dst + l * plane + 32, x[b].qs + 128 + 32 * l, 32);
        }
      }
      int32_t sum = 0;
      for (int j = 0; j < 16; ++j) sum += x[b].bsums[j];
      s->qsum[k] = sum;
      s->d[k] = x[b].d;
    }
  }
  return a;
}

// NC (1..4) token tiles of 16 tokens (at a, a + 1024, ..; shift planes `plane` bytes apart) x the
// 4 shift planes of one block's codes: C tiles tmm0..tmm(NC-1), A tiles alternate tmm4/tmm5, B
// tiles tmm6/tmm7. A C tile's 4 products form a dependency chain (TDPBSUD latency is ~3x its
// issue interval), so the NC chains are interleaved shift by shift; the C tiles go to out[j].
template <int NC>
inline void TokenTiles(const int8_t* a, size_t plane, const uint8_t (*codes)[1024], int32_t (*out)[16][16]) {
  _tile_zero(0);
  if (NC > 1) _tile_zero(1);
  if (NC > 2) _tile_zero(2);
  if (NC > 3) _tile_zero(3);
#define TRINE_AMX_STEP(l, B)                                          \
  do {                                                                \
    _tile_loadd(B, codes[l], 64);                                     \
    _tile_loadd(4, a + (l) * plane, 64);                              \
    _tile_dpbsud(0, 4, B);                                            \
    if (NC > 1) {                                                     \
      _tile_loadd(5, a + 1024 + (l) * plane, 64);                     \
      _tile_dpbsud(1, 5, B);                                          \
    }                                                                 \
    if (NC > 2) {                                                     \
      _tile_loadd(4, a + 2048 + (l) * plane, 64);                     \
      _tile_dpbsud(2, 4, B);                                          \
    }                                                                 \
    if (NC > 3) {                                                     \
      _tile_loadd(5, a + 3072 + (l) * plane, 64);                     \
      _tile_dpbsud(3, 5, B);                                          \
    }                                                                 \
  } while (0)
  TRINE_AMX_STEP(0, 6);
  TRINE_AMX_STEP(1, 7);
  TRINE_AMX_STEP(2, 6);
  TRINE_AMX_STEP(3, 7);
#undef TRINE_AMX_STEP
  _tile_stored(0, out[0], 64);
  if (NC > 1) _tile_stored(1, out[1], 64);
  if (NC > 2) _tile_stored(2, out[2], 64);
  if (NC > 3) _tile_stored(3, out[3], 64);
}

// Up to 4 token tiles from token tile tt on: the tiles' products into out.
inline int RunTokenTiles(const int8_t* ab, size_t plane, int tt, int ntt, const uint8_t (*codes)[1024],
                         int32_t (*out)[16][16]) {
  const int8_t* a = ab + static_cast<size_t>(tt) * 1024;
  switch (ntt - tt < 4 ? ntt - tt : 4) {
    case 1: TokenTiles<1>(a, plane, codes, out); return 1;
    case 2: TokenTiles<2>(a, plane, codes, out); return 2;
    case 3: TokenTiles<3>(a, plane, codes, out); return 3;
    default: TokenTiles<4>(a, plane, codes, out); return 4;
  }
}

// acc[t] (16 rows) += float(c[t] - qsum[t]) * (dw * d[t]) for the tile's real tokens.
inline void Combine(const int32_t (*c)[16], const int32_t* qsum, const float* d, __m512 dw, int nt, float* acc) {
  for (int i = 0; i < nt; ++i) {
    const __m512i sumi = _mm512_sub_epi32(_mm512_load_si512(c[i]), _mm512_set1_epi32(qsum[i]));
    const __m512 dd = _mm512_mul_ps(dw, _mm512_set1_ps(d[i]));
    float* ap = acc + 16 * i;
    _mm512_store_ps(ap, _mm512_add_ps(_mm512_load_ps(ap), _mm512_mul_ps(_mm512_cvtepi32_ps(sumi), dd)));
  }
}

// One block of a group's code lines -> the 4 B tiles (one byte per code, B layout).
inline void SpreadTq2(const uint8_t* cb, uint8_t (*codes)[1024]) {
  const __m512i m3 = _mm512_set1_epi8(3);
  for (int k = 0; k < 16; ++k) {
    const __m512i q = _mm512_load_si512(cb + 64 * k);
    _mm512_store_si512(codes[0] + 64 * k, _mm512_and_si512(q, m3));
    _mm512_store_si512(codes[1] + 64 * k, _mm512_and_si512(_mm512_srli_epi16(q, 2), m3));
    _mm512_store_si512(codes[2] + 64 * k, _mm512_and_si512(_mm512_srli_epi16(q, 4), m3));
    _mm512_store_si512(codes[3] + 64 * k, _mm512_and_si512(_mm512_srli_epi16(q, 6), m3));
  }
}

inline void SpreadTq1(const uint8_t* cb, uint8_t (*codes)[1024]) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const Tq1Tables tb = LoadTq1Tables();
  for (int l = 0; l < kTq1Lines; ++l) {
    const __m512i q = _mm512_load_si512(cb + 64 * l);
    const __m512i c = Tq1Digits0123(tb, q);
    _mm512_store_si512(codes[0] + 64 * l, _mm512_and_si512(c, m3));
    _mm512_store_si512(codes[1] + 64 * l, _mm512_and_si512(_mm512_srli_epi16(c, 2), m3));
    _mm512_store_si512(codes[2] + 64 * l, _mm512_and_si512(_mm512_srli_epi16(c, 4), m3));
    _mm512_store_si512(codes[3] + 64 * l, _mm512_and_si512(_mm512_srli_epi16(c, 6), m3));
    if (l < kTq1QsLines) {
      _mm512_store_si512(codes[l / 3] + 64 * (kTq1Lines + l % 3), Tq1Digit4(tb, q));
    }
  }
}

template <bool kTq1>
void GemmX16Amx(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1, float scale) {
  constexpr size_t kBlockBytes = kTq1 ? 64 * kTq1Lines : 1024;  // code bytes of one block of a group
  const int64_t nb = w.cols / kQK_K;
  const int tpad = (n_tokens + 15) / 16 * 16;
  const int ntt = tpad / 16;
  Scratch& s = GetScratch();
  const int8_t* act = PrepareActivations<kTq1>(xq, act_stride, n_tokens, tpad, nb, &s);
  const size_t plane = static_cast<size_t>(tpad) * 64;
  const size_t acc_floats = static_cast<size_t>(kGroupChunk) * static_cast<size_t>(tpad) * 16;
  if (s.acc.size() < acc_floats + 16) s.acc.resize(acc_floats + 16);
  float* acc_base = s.acc.data() + ((64 - reinterpret_cast<uintptr_t>(s.acc.data()) % 64) % 64) / 4;

  TileConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette_id = 1;
  for (int i = 0; i < 8; ++i) {
    cfg.colsb[i] = 64;
    cfg.rows[i] = 16;
  }
  _tile_loadconfig(&cfg);

  const int64_t gb = r0 / 16, ge = (r1 + 15) / 16;
  const __m512 ts = _mm512_set1_ps(w.tensor_scale), sc = _mm512_set1_ps(scale);
  for (int64_t g0 = gb; g0 < ge; g0 += kGroupChunk) {
    const int64_t g1 = g0 + kGroupChunk < ge ? g0 + kGroupChunk : ge;
    std::memset(acc_base, 0, static_cast<size_t>(g1 - g0) * static_cast<size_t>(tpad) * 16 * sizeof(float));
    for (int64_t b = 0; b < nb; ++b) {
      const int8_t* ab = act + static_cast<size_t>(b) * 4 * plane;
      const int32_t* qs = s.qsum.data() + static_cast<size_t>(b) * static_cast<size_t>(tpad);
      const float* ds = s.d.data() + static_cast<size_t>(b) * static_cast<size_t>(tpad);
      for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* gp = w.data + static_cast<size_t>(g) * w.group_bytes;
        const uint8_t* cb = gp + X16CodesOffset(b, kBlockBytes);
        // Next in line: the chunk's next group at this block, else its first group at the next block.
        const uint8_t* next = g + 1 < g1 ? cb + w.group_bytes
                                         : (b + 1 < nb ? w.data + static_cast<size_t>(g0) * w.group_bytes +
                                                             X16CodesOffset(b + 1, kBlockBytes)
                                                       : nullptr);
        if (next != nullptr) {
          for (size_t k = 0; k < kBlockBytes; k += 64) _mm_prefetch(reinterpret_cast<const char*>(next + k), _MM_HINT_T0);
        }
        if (kTq1) {
          SpreadTq1(cb, s.codes);
        } else {
          SpreadTq2(cb, s.codes);
        }
        // The tile-load asm has no memory clobber: keep the code stores before it.
        __asm__ __volatile__("" ::: "memory");
        const __m512 dw =
            _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(gp + X16ScalesOffset(b, kBlockBytes))));
        float* accg = acc_base + static_cast<size_t>(g - g0) * static_cast<size_t>(tpad) * 16;
        // Software pipeline: the next (up to) 4 token tiles' products are issued before the float
        // work of the previous ones (the C tiles alternate between two stored buffers).
        int tt = 0, n = RunTokenTiles(ab, plane, 0, ntt, s.codes, s.c[0]);
        for (int buf = 0; tt < ntt; buf ^= 1) {
          const int tt_next = tt + n;
          const int n_next = tt_next < ntt ? RunTokenTiles(ab, plane, tt_next, ntt, s.codes, s.c[buf ^ 1]) : 0;
          for (int j = 0; j < n; ++j) {
            const int t0 = (tt + j) * 16;
            const int nt = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
            Combine(s.c[buf][j], qs + t0, ds + t0, dw, nt, accg + static_cast<size_t>(t0) * 16);
          }
          tt = tt_next;
          n = n_next;
        }
      }
    }
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t lo = g * 16 > r0 ? g * 16 : r0;
      const int64_t hi = g * 16 + 16 < r1 ? g * 16 + 16 : r1;
      const __mmask16 mask = static_cast<__mmask16>(((1u << (hi - g * 16)) - 1) & ~((1u << (lo - g * 16)) - 1));
      const float* accg = acc_base + static_cast<size_t>(g - g0) * static_cast<size_t>(tpad) * 16;
      for (int t = 0; t < n_tokens; ++t) {
        const __m512 v = _mm512_load_ps(accg + static_cast<size_t>(t) * 16);
        _mm512_mask_storeu_ps(y + static_cast<int64_t>(t) * ldy + g * 16, mask, _mm512_mul_ps(_mm512_mul_ps(v, ts), sc));
      }
    }
  }
  _tile_release();
}

}  // namespace

int AmxMinTokens() { return 8; }

// TQ2_0 or TQ1_0 x16 weights and at least AmxMinTokens() tokens: the AMX kernel; anything else
// (decode, short batches, plain rows of streamed layers) goes to the AVX-512 int8-dot kernel.
void GemmTq2Amx(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                int64_t r0, int64_t r1, float scale) {
  if (w.interleave == 16 && n_tokens >= AmxMinTokens() && r0 < r1) {
    if (w.type == TypeId::kTQ2_0) {
      GemmX16Amx<false>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
      return;
    }
    if (w.type == TypeId::kTQ1_0) {  // built only where the CPU has VBMI (the lookups)
      GemmX16Amx<true>(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
      return;
    }
  }
  Avx512Table().tq2_int8dot(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
}

}  // namespace trine::kernels
