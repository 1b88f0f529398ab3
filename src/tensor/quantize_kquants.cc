// Q4_K and Q6_K reference quantizers, written from the algorithm of llama.cpp's
// quantize_row_q4_K_ref / quantize_row_q6_K_ref (no importance matrix), which is what
// llama-quantize runs for these types. Outputs are meant to be byte-identical, so every float
// expression below keeps ggml's evaluation order and precision (fp32 throughout, no fused
// multiply-add: ggml-base is built without -march flags, and this file must not contract either).
// Depends only on tensor/blocks.h, tensor/quantize_ref.h and core/fp16.h.
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "tensor/quantize_ref.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
// GCC contracts a*b+c into an FMA in GNU mode when the target has one; ISO mode (the project's
// -std=c++17) already turns that off, this keeps it off under any flags.
#pragma GCC optimize("fp-contract=off")
#endif

namespace trine {
namespace {

// Groups whose largest |x| is below this are treated as all zero (ggml's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (ggml's nearest_int; same as NearestInt, inlined here because it
// sits in the innermost loops).
inline int RoundHalfEven(float x) {
  const float val = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

inline int Clamp(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Symmetric search for a signed scale (ggml make_qx_quants with rmse_type 1, no weights):
// codes l in [-nmax, nmax-1], stored as l + nmax in L. Starts from iscale = -nmax/max, then tries
// iscale = -(nmax + 0.1*is)/max for is = -9..9 (is != 0), keeping a candidate when it raises
// (sum w*x*l)^2 / (sum w*l*l) with w = x^2; returns the least-squares scale of the kept codes.
// The candidates are independent of each other (only the comparison is sequential), so where ggml
// loops over the group once per candidate, one loop here updates every candidate's sums: each sum
// still adds the same fp32 terms in the same element order and the candidates are compared in the
// same order, so the result is bit-identical, without the serial dependency between additions.
// (make_qkx2_quants below cannot be interleaved: a kept candidate moves `min` for the next ones.)
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0.0f;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  constexpr int kCandidates = 19;  // the starting scale, then is = -9..-1, 1..9
  const float fnmax = static_cast<float>(nmax);
  float iscale[kCandidates];
  iscale[0] = -fnmax / max;
  for (int k = 1, is = -9; is <= 9; ++is) {
    if (is != 0) iscale[k++] = -(fnmax + 0.1f * static_cast<float>(is)) / max;
  }
  float sumlx[kCandidates] = {};
  float suml2[kCandidates] = {};
  for (int i = 0; i < n; ++i) {
    const float w = x[i] * x[i];
    const float wx = w * x[i];  // ggml's w*x[i]*l is (w*x[i])*l
    for (int k = 0; k < kCandidates; ++k) {
      const float fl = static_cast<float>(Clamp(RoundHalfEven(iscale[k] * x[i]), -nmax, nmax - 1));
      sumlx[k] += wx * fl;
      suml2[k] += w * fl * fl;
    }
  }
  float scale = suml2[0] != 0.0f ? sumlx[0] / suml2[0] : 0.0f;
  float best = scale * sumlx[0];
  int kept = 0;
  for (int k = 1; k < kCandidates; ++k) {
    if (suml2[k] > 0.0f && sumlx[k] * sumlx[k] > best * suml2[k]) {
      scale = sumlx[k] / suml2[k];
      best = scale * sumlx[k];
      kept = k;
    }
  }
  for (int i = 0; i < n; ++i) {
    L[i] = static_cast<int8_t>(nmax + Clamp(RoundHalfEven(iscale[kept] * x[i]), -nmax, nmax - 1));
  }
  return scale;
}

// Asymmetric search for (scale, min) of one group (ggml make_qkx2_quants): codes in [0, nmax],
// x ~ scale*L - the_min with the_min >= 0. Starts from the min/max grid, then tries
// iscale = (rmin + rdelta*is + nmax)/(max - min) for is = 0..nstep, solving the weighted least
// squares for (scale, min) each time and keeping the lowest weighted squared error. As in ggml, a
// kept candidate's min is used by the candidates after it (both in iscale and in x - min).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    int l = RoundHalfEven(iscale * (x[i] - min));
    l = l < 0 ? 0 : (l > nmax ? nmax : l);
    L[i] = static_cast<uint8_t>(l);
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + fnmax) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = RoundHalfEven(iscale * (x[i] - min));
      l = l < 0 ? 0 : (l > nmax ? nmax : l);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// The j-th 6-bit (scale, min) pair of a Q4_K block's packed scales[12].
void GetScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

}  // namespace

void QuantizeRowQ4_K(const float* src, void* dst, int64_t n) {
  BlockQ4_K* y = static_cast<BlockQ4_K*>(dst);
  uint8_t L[kQK_K];       // 4-bit codes of the block, element order
  uint8_t Laux[32];       // scratch codes of one 32-group
  float weights[32];      // per-element weights of one group: rms(group) + |x|
  float mins[kQK_K / 32]; // per-group offsets (>= 0), before 6-bit quantization
  float scales[kQK_K / 32];
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int j = 0; j < kQK_K / 32; ++j) {
      float sum_x2 = 0.0f;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32.0f);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = MakeQkx2Quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }

    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    std::memset(y[i].scales, 0, sizeof(y[i].scales));
    for (int j = 0; j < kQK_K / 32; ++j) {
      // ggml stores these through uint8_t before clamping; kept for identical wrap-around.
      uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
      uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
      ls = ls < 63 ? ls : 63;
      lm = lm < 63 ? lm : 63;
      if (j < 4) {
        y[i].scales[j] = ls;
        y[i].scales[j + 4] = lm;
      } else {
        y[i].scales[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        y[i].scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
        y[i].scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
      }
    }
    y[i].d = Fp32ToFp16(max_scale / 63.0f);
    y[i].dmin = Fp32ToFp16(max_min / 63.0f);

    // Re-derive the codes against the stored (6-bit, fp16) scales and mins.
    for (int j = 0; j < kQK_K / 32; ++j) {
      uint8_t sc, m;
      GetScaleMinK4(j, y[i].scales, &sc, &m);
      const float d = Fp16ToFp32(y[i].d) * static_cast<float>(sc);
      if (d == 0.0f) continue;
      const float dm = Fp16ToFp32(y[i].dmin) * static_cast<float>(m);
      for (int ii = 0; ii < 32; ++ii) {
        int l = RoundHalfEven((x[32 * j + ii] + dm) / d);
        l = l < 0 ? 0 : (l > 15 ? 15 : l);
        L[32 * j + ii] = static_cast<uint8_t>(l);
      }
    }

    uint8_t* q = y[i].qs;
    for (int j = 0; j < kQK_K; j += 64) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
      q += 32;
    }
  }
}

void QuantizeRowQ6_K(const float* src, void* dst, int64_t n) {
  BlockQ6_K* y = static_cast<BlockQ6_K*>(dst);
  int8_t L[kQK_K];           // 6-bit codes + 32 (0..63), element order
  float scales[kQK_K / 16];  // per-16 signed scales before int8 quantization
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float max_scale = 0.0f;
    float max_abs_scale = 0.0f;
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const float scale = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      const float abs_scale = std::fabs(scale);
      if (abs_scale > max_abs_scale) {
        max_abs_scale = abs_scale;
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[i], 0, sizeof(BlockQ6_K));
      continue;
    }

    const float iscale = -128.0f / max_scale;
    y[i].d = Fp32ToFp16(1.0f / iscale);
    for (int ib = 0; ib < kQK_K / 16; ++ib) {
      const int s = NearestInt(iscale * scales[ib]);
      y[i].scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
    }

    // Re-derive the codes against the stored int8 scales and fp16 d.
    for (int j = 0; j < kQK_K / 16; ++j) {
      const float d = Fp16ToFp32(y[i].d) * static_cast<float>(y[i].scales[j]);
      if (d == 0.0f) continue;
      for (int ii = 0; ii < 16; ++ii) {
        int l = RoundHalfEven(x[16 * j + ii] / d);
        l = l < -32 ? -32 : (l > 31 ? 31 : l);
        L[16 * j + ii] = static_cast<int8_t>(l + 32);
      }
    }

    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int j = 0; j < kQK_K; j += 128) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t c1 = static_cast<uint8_t>(L[j + l + 0]);
        const uint8_t c2 = static_cast<uint8_t>(L[j + l + 32]);
        const uint8_t c3 = static_cast<uint8_t>(L[j + l + 64]);
        const uint8_t c4 = static_cast<uint8_t>(L[j + l + 96]);
        ql[l + 0] = static_cast<uint8_t>((c1 & 0xF) | ((c3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((c2 & 0xF) | ((c4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((c1 >> 4) | ((c2 >> 4) << 2) | ((c3 >> 4) << 4) | ((c4 >> 4) << 6));
      }
      ql += 64;
      qh += 32;
    }
  }
}

}  // namespace trine
