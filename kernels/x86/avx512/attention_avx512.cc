// AVX-512 fp16-cache attention: the same operations as AttnF16Ref, 16 lanes at a time (F16C
// conversions round to nearest even like Fp32ToFp16, and every lane does its own fused
// multiply-add), so the results are bit-identical.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/quantize_ref.h"
#include "ref/attention_ref.h"

namespace trine::kernels {

namespace {

inline float Hsum16Tree(__m512 a) {
  // a[l] + a[l+8], then + [l+4], then (c0 + c2) + (c1 + c3): the reference's tree.
  const __m256 b = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 c = _mm_add_ps(_mm256_castps256_ps128(b), _mm256_extractf128_ps(b, 1));
  const __m128 d = _mm_add_ps(c, _mm_movehl_ps(c, c));  // [c0 + c2, c1 + c3, ...]
  return _mm_cvtss_f32(_mm_add_ss(d, _mm_movehdup_ps(d)));
}

// K.Q of G fp16 query heads over one fp16 key row, hd % 64 == 0: DotF16Order's lanes and tree
// per head; each converted key chunk feeds every head.
template <int G>
inline void DotF16Heads(const uint16_t* kp, const float* const q[G], int hd, float s[G]) {
  __m512 a[G][4];
  for (int g = 0; g < G; ++g) a[g][0] = a[g][1] = a[g][2] = a[g][3] = _mm512_setzero_ps();
  for (int i = 0; i < hd; i += 64) {
    __m512 x[4];
    for (int c = 0; c < 4; ++c) {
      x[c] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kp + i + 16 * c)));
    }
    for (int g = 0; g < G; ++g) {
      for (int c = 0; c < 4; ++c) a[g][c] = _mm512_fmadd_ps(x[c], _mm512_loadu_ps(q[g] + i + 16 * c), a[g][c]);
    }
  }
  for (int g = 0; g < G; ++g) {
    s[g] = Hsum16Tree(_mm512_add_ps(_mm512_add_ps(a[g][0], a[g][2]), _mm512_add_ps(a[g][1], a[g][3])));
  }
}

// K.Q of an fp16 row, any head size: the 64-element body as above, the rest in double.
inline float DotF16Avx512(const uint16_t* kp, const float* q, int hd) {
  const int np = hd & ~63;
  double sumf = 0.0;
  if (np > 0) {
    const float* qs[1] = {q};
    float s;
    DotF16Heads<1>(kp, qs, np, &s);
    sumf = static_cast<double>(s);
  }
  const float* table = Fp16ToFp32Table();
  for (int i = np; i < hd; ++i) sumf += static_cast<double>(table[kp[i]] * q[i]);
  return static_cast<float>(sumf);
}

// Exact int32 dot of 32 signed bytes x (|x| <= 127) and y: |x| * sign(y, x) pairs (no int16
// saturation: 2 * 127 * 128 < 32768), widened and summed.
inline int DotI8x32(__m256i x, __m256i y) {
  const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
  const __m256i p32 = _mm256_madd_epi16(p16, _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p32), _mm256_extracti128_si256(p32, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// The 32 values of a Q4_0 block as signed bytes nibble - 8, in element order.
inline __m256i Q4Bytes(const BlockQ4_0* b) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs));
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, m), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m);
  return _mm256_sub_epi8(_mm256_set_m128i(hi, lo), _mm256_set1_epi8(8));
}

// Quantized K.Q in the reference's block order (attention_ref.h).
inline float DotQuantAvx512(KvRowType type, const uint8_t* k, const BlockQ8_0* q, int nb) {
  float sumf = 0.0f;
  for (int b = 0; b < nb; ++b) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q[b].qs));
    int sumi;
    float dk;
    if (type == KvRowType::kQ8_0) {
      const BlockQ8_0* kb = reinterpret_cast<const BlockQ8_0*>(k) + b;
      // Q8_0 values are in [-127, 127] (QuantizeRowQ8_0), so |x| fits the unsigned operand.
      sumi = DotI8x32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(kb->qs)), y);
      dk = Fp16ToFp32(kb->d);
    } else {
      const BlockQ4_0* kb = reinterpret_cast<const BlockQ4_0*>(k) + b;
      sumi = DotI8x32(Q4Bytes(kb), y);
      dk = Fp16ToFp32(kb->d);
    }
    sumf += static_cast<float>(sumi) * (dk * Fp16ToFp32(q[b].d));
  }
  return sumf;
}

// x rounded to the nearest fp16 and back: the reference's fp16 accumulator held in fp32 lanes, in
// registers across positions (the accumulator chain is the kernel's critical path; a store as fp16
// and a reload per position lengthened it).
inline __m512 RoundF16(__m512 x) {
  return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

// Positions go through in blocks: all scores of a block first (independent dot products the core
// overlaps), then the online-softmax bookkeeping in position order (max, expf, sum: they depend on
// the scores only), then V in position order. Each value goes through the reference's operations
// in the reference's order, so the bits are the same.
constexpr int kBlock = 16;

struct OnlineSoftmax {
  float max_s = -std::numeric_limits<float>::infinity();
  float sum = 0.0f;
  // ms[j]: the accumulator's rescale factor at position j (1 unless j is a new maximum), vs[j]:
  // position j's weight; the reference's expressions.
  void Step(float s, float* ms, float* vs) {
    *ms = 1.0f;
    *vs = 1.0f;
    if (s > max_s) {
      *ms = std::exp(max_s - s);
      max_s = s;
    } else {
      *vs = std::exp(s - max_s);
    }
    sum = std::fma(sum, *ms, *vs);
  }
};

// Positions 0..n_kv-1 in blocks of kBlock for G heads: score(p, s) fills position p's scaled K.Q
// of each head, add_v(p, ms, vs) takes its V row into each head's accumulator with the heads'
// factors; sm[g] ends with head g's softmax sum.
template <int G, typename Score, typename AddV>
void WalkPositions(Score score, AddV add_v, int n_kv, OnlineSoftmax sm[G]) {
  float s[kBlock][G], ms[kBlock][G], vs[kBlock][G];
  for (int p0 = 0; p0 < n_kv; p0 += kBlock) {
    const int n = n_kv - p0 < kBlock ? n_kv - p0 : kBlock;
    for (int j = 0; j < n; ++j) score(p0 + j, s[j]);
    for (int j = 0; j < n; ++j) {
      for (int g = 0; g < G; ++g) sm[g].Step(s[j][g], &ms[j][g], &vs[j][g]);
    }
    for (int j = 0; j < n; ++j) add_v(p0 + j, ms[j], vs[j]);
  }
}

// One head: score(p) -> position p's scaled K.Q, add_v(p, ms, vs); returns the softmax sum.
template <typename Score, typename AddV>
float WalkPositions(Score score, AddV add_v, int n_kv) {
  OnlineSoftmax sm[1];
  WalkPositions<1>([&](int p, float* s) { s[0] = score(p); },
                   [&](int p, const float* ms, const float* vs) { add_v(p, ms[0], vs[0]); }, n_kv, sm);
  return sm[0].sum;
}

// Chunk c (16 values) of an fp16 row, in fp32.
inline __m512 F16Chunk(const uint16_t* row, int c) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 16 * c)));
}

// The fp16 V accumulator of kC 16-lane chunks (kC = 0: hd / 16 of them, up to 32), kept in
// registers when kC is a constant. A rescale by ms == 1 is skipped: it is exact (the values are
// already fp16), so skipping it only where the reference has no new maximum changes nothing.
template <int kC>
struct F16Acc {
  __m512 a[kC == 0 ? 32 : kC];
  int n;
  explicit F16Acc(int hd) : n(kC == 0 ? hd / 16 : kC) {
    for (int c = 0; c < n; ++c) a[c] = _mm512_setzero_ps();
  }
  F16Acc() : F16Acc(16 * kC) { static_assert(kC > 0, "a size-less accumulator needs a constant kC"); }
  void Rescale(float ms) {
    if (ms != 1.0f) {
      const __m512 m = _mm512_set1_ps(ms);
      for (int c = 0; c < n; ++c) a[c] = RoundF16(_mm512_mul_ps(a[c], m));
    }
  }
  // Chunk c += x * w, rounded to fp16.
  void Accumulate(int c, __m512 x, __m512 w) { a[c] = RoundF16(_mm512_fmadd_ps(x, w, a[c])); }
  void Add(const uint16_t* vp, float ms, float vs) {
    Rescale(ms);
    const __m512 w = _mm512_set1_ps(vs);
    for (int c = 0; c < n; ++c) Accumulate(c, F16Chunk(vp, c), w);
  }
  void Store(float inv, float* out) const {
    const __m512 v = _mm512_set1_ps(inv);
    for (int c = 0; c < n; ++c) _mm512_storeu_ps(out + 16 * c, _mm512_mul_ps(a[c], v));
  }
};

// score(p) -> position p's scaled K.Q; the V rows are fp16.
template <int kC, typename Score>
void AttnF16V(Score score, const KvHead& v, int n_kv, int hd, float* out) {
  F16Acc<kC> acc(hd);
  const auto add_v = [&](int p, float ms, float vs) {
    acc.Add(reinterpret_cast<const uint16_t*>(KvRowAt(v, p)), ms, vs);
  };
  acc.Store(1.0f / WalkPositions(score, add_v, n_kv), out);
}

template <typename Score>
void AttnF16VAnyHd(Score score, const KvHead& v, int n_kv, int hd, float* out) {
  if (hd == 128) {
    AttnF16V<8>(score, v, n_kv, hd, out);
  } else if (hd == 64) {
    AttnF16V<4>(score, v, n_kv, hd, out);
  } else {
    AttnF16V<0>(score, v, n_kv, hd, out);
  }
}

// ---- GQA groups: G query heads over one KV head's fp16 K and V rows ----------------------------
//
// Each head keeps its own scores, softmax state and fp16 accumulator and goes through exactly the
// operations of a walk of its own (the same bits as AttnAvx512 per head). Walked together, each K
// and V row is loaded and converted once for the group, and the heads' accumulator chains sit
// side by side in the loop. kC (= hd / 16) x G accumulators stay in registers. Measured on the
// Zen 5 VM: llama-1b Q4_0 tg256 at 1 thread +3.4 %; in pp128 attention's share of the samples
// went from 7.9 to 6.8 % for bitnet-2b and stayed at 6.3 % for llama-1b (what remains is spread
// over the score reductions, the scalar softmax steps and the fp16 roundings of V).

template <int G, int kC>
void AttnF16Group(const float* const qh[G], const KvHead& k, const KvHead& v, int n_kv, int hd, float scale,
                  float* const out[G]) {
  F16Acc<kC> acc[G];
  const auto score = [&](int p, float* s) {
    DotF16Heads<G>(reinterpret_cast<const uint16_t*>(KvRowAt(k, p)), qh, hd, s);
    for (int g = 0; g < G; ++g) s[g] *= scale;
  };
  const auto add_v = [&](int p, const float* ms, const float* vs) {
    const uint16_t* vp = reinterpret_cast<const uint16_t*>(KvRowAt(v, p));
    __m512 w[G];
    for (int g = 0; g < G; ++g) {
      acc[g].Rescale(ms[g]);
      w[g] = _mm512_set1_ps(vs[g]);
    }
    for (int c = 0; c < kC; ++c) {
      const __m512 x = F16Chunk(vp, c);  // converted once for the group
      for (int g = 0; g < G; ++g) acc[g].Accumulate(c, x, w[g]);
    }
  };
  OnlineSoftmax sm[G];
  WalkPositions<G>(score, add_v, n_kv, sm);
  for (int g = 0; g < G; ++g) acc[g].Store(1.0f / sm[g].sum, out[g]);
}

}  // namespace

int AttnGroupWidthAvx512(KvRowType k, KvRowType v, int hd) {
  if (k != KvRowType::kF16 || v != KvRowType::kF16) return 1;
  return hd == 64 ? 4 : hd == 128 ? 2 : 1;
}

void AttnAvx512(const float* q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale, float* out);

void AttnGroupAvx512(const float* q, int n_q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale,
                     float* out) {
  const int width = AttnGroupWidthAvx512(k.type, v.type, hd);
  if (n_q < 2 || n_q > width) {
    for (int i = 0; i < n_q; ++i) {
      AttnAvx512(q + static_cast<size_t>(i) * hd, k, v, n_kv, hd, scale, out + static_cast<size_t>(i) * hd);
    }
    return;
  }
  // The query rounded to fp16 (AttnAvx512's qh), per head.
  alignas(64) float qh[4][128];
  const float* qp[4];
  float* op[4];
  for (int g = 0; g < n_q; ++g) {
    for (int i = 0; i < hd; i += 16) {
      _mm512_store_ps(qh[g] + i, RoundF16(_mm512_loadu_ps(q + static_cast<size_t>(g) * hd + i)));
    }
    qp[g] = qh[g];
    op[g] = out + static_cast<size_t>(g) * hd;
  }
  if (hd == 128) {
    AttnF16Group<2, 8>(qp, k, v, n_kv, hd, scale, op);
  } else if (n_q == 4) {
    AttnF16Group<4, 4>(qp, k, v, n_kv, hd, scale, op);
  } else if (n_q == 3) {
    AttnF16Group<3, 4>(qp, k, v, n_kv, hd, scale, op);
  } else {
    AttnF16Group<2, 4>(qp, k, v, n_kv, hd, scale, op);
  }
}

void AttnF16Avx512(const float* q, const uint16_t* k, const uint16_t* v, size_t stride, int n_kv, int hd,
                   float scale, float* out) {
  if (hd % 16 != 0 || hd > 512) {
    AttnF16Ref(q, k, v, stride, n_kv, hd, scale, out);
    return;
  }
  const auto score = [&](int p) { return DotF16Avx512(k + static_cast<size_t>(p) * stride, q, hd) * scale; };
  KvHead vh;
  vh.data = reinterpret_cast<const uint8_t*>(v);
  vh.stride = stride * sizeof(uint16_t);
  AttnF16VAnyHd(score, vh, n_kv, hd, out);
}

void AttnAvx512(const float* q, const KvHead& k, const KvHead& v, int n_kv, int hd, float scale, float* out) {
  const bool k_f16 = k.type == KvRowType::kF16, v_f16 = v.type == KvRowType::kF16;
  if (hd % 32 != 0 || hd > 512) {
    AttnRef(q, k, v, n_kv, hd, scale, out);
    return;
  }
  alignas(64) float qh[512];
  if (k_f16) {
    for (int i = 0; i < hd; i += 16) _mm512_store_ps(qh + i, RoundF16(_mm512_loadu_ps(q + i)));
  }
  const int nb = hd / kQK8_0;
  BlockQ8_0 q8[512 / kQK8_0];
  if (!k_f16) QuantizeRowQ8_0(q, q8, hd);
  const auto score = [&](int p) {
    const uint8_t* kp = KvRowAt(k, p);
    return (k_f16 ? DotF16Avx512(reinterpret_cast<const uint16_t*>(kp), qh, hd) : DotQuantAvx512(k.type, kp, q8, nb)) *
           scale;
  };
  if (v_f16) {
    AttnF16VAnyHd(score, v, n_kv, hd, out);
    return;
  }
  // Quantized V: an fp32 accumulator (attention_ref.h).
  alignas(64) float acc32[512];
  for (int i = 0; i < hd; ++i) acc32[i] = 0.0f;
  const __m128i m4 = _mm_set1_epi8(0x0F);
  const auto add_v = [&](int p, float ms, float vs) {
    const uint8_t* vp = KvRowAt(v, p);
    const __m512 vms = _mm512_set1_ps(ms), vvs = _mm512_set1_ps(vs);
    for (int b = 0; b < nb; ++b) {
      __m512 x0, x1;
      __m512 d;
      if (v.type == KvRowType::kQ8_0) {
        const BlockQ8_0* vb = reinterpret_cast<const BlockQ8_0*>(vp) + b;
        d = _mm512_set1_ps(Fp16ToFp32(vb->d));
        x0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs))));
        x1 = _mm512_cvtepi32_ps(
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs + 16))));
      } else {
        const BlockQ4_0* vb = reinterpret_cast<const BlockQ4_0*>(vp) + b;
        d = _mm512_set1_ps(Fp16ToFp32(vb->d));
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(vb->qs));
        const __m128i eight = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(raw, m4), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), eight);
        x0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo));
        x1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi));
      }
      // acc *= ms at every position: the reference rescales on a new maximum only, and ms is 1
      // elsewhere (x * 1 is exact).
      float* a = acc32 + b * 32;
      const __m512 a0 = _mm512_mul_ps(_mm512_load_ps(a), vms), a1 = _mm512_mul_ps(_mm512_load_ps(a + 16), vms);
      _mm512_store_ps(a, _mm512_fmadd_ps(_mm512_mul_ps(x0, d), vvs, a0));
      _mm512_store_ps(a + 16, _mm512_fmadd_ps(_mm512_mul_ps(x1, d), vvs, a1));
    }
  };
  const float inv = 1.0f / WalkPositions(score, add_v, n_kv);
  for (int i = 0; i < hd; ++i) out[i] = acc32[i] * inv;
}

}  // namespace trine::kernels
