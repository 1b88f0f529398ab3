// NEON kernels (AArch64 Advanced SIMD + the ARMv8.2 dot-product extension, `sdot`). Compiled with
// -march=armv8.2-a+dotprod in its own object library; reached only through the dispatch table when
// getauxval reports HWCAP_ASIMDDP (kernels/cpu_features.cc).
//
// Ternary weights are TQ2_0 blocks: byte 32h + m holds element 128h + 32n + m in bits 2n..2n+1
// (code c = t + 1). NEON shifts bytes individually, so a 16-byte load of a half, shifted right by
// 2n and masked with 3, gives the codes of 16 contiguous elements that line up with 16 contiguous
// activation bytes: no repacking is needed.
//
// Integer kernels form each block's integer sum exactly and combine blocks in GemmRef's float
// order (acc += float(sumi) * (d_w * d_a), then acc * tensor_scale * scale), so they are bit-identical
// to the reference. The F16 kernel accumulates in fp32 lanes (a different order: NMSE-bounded).
#include <arm_neon.h>

#include <vector>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

constexpr int kMaxTokens = 64;  // tokens per tile: one weight block is unpacked once per tile

inline const uint8_t* TokenAct(const uint8_t* xq, size_t act_stride, int t) {
  return xq + act_stride * static_cast<size_t>(t);
}

// The 16 code vectors of one TQ2_0 block, in activation order: v[k] holds codes of elements
// [16k, 16k + 16). Element 128h + 32n + 16p + j is in byte 32h + 16p + j, bits 2n..2n+1.
inline void UnpackTq2Codes(const BlockTQ2_0& b, uint8x16_t v[16]) {
  const uint8x16_t m3 = vdupq_n_u8(3);
  for (int h = 0; h < 2; ++h) {
    for (int p = 0; p < 2; ++p) {
      const uint8x16_t q = vld1q_u8(b.qs + 32 * h + 16 * p);
      v[8 * h + 0 + p] = vandq_u8(q, m3);
      v[8 * h + 2 + p] = vandq_u8(vshrq_n_u8(q, 2), m3);
      v[8 * h + 4 + p] = vandq_u8(vshrq_n_u8(q, 4), m3);
      v[8 * h + 6 + p] = vshrq_n_u8(q, 6);
    }
  }
}

// Ternary x Q8_K with sdot: the codes minus one are the signed weights {-1, 0, +1}, so
// sdot(w, a) over the 256 elements is the block's exact integer sum (|sum| <= 256 * 128), which
// equals the reference's sum(c * a) - sum(bsums).
void GemmTq2Q8kSdot(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const int8x16_t one = vdupq_n_s8(1);
  float acc[kMaxTokens];
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const BlockTQ2_0* wb = reinterpret_cast<const BlockTQ2_0*>(w.data + static_cast<size_t>(r) * w.row_bytes);
      for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        uint8x16_t c[16];
        UnpackTq2Codes(wb[b], c);
        int8x16_t wv[16];
        for (int k = 0; k < 16; ++k) wv[k] = vsubq_s8(vreinterpretq_s8_u8(c[k]), one);
        const float dw = Fp16ToFp32(wb[b].d);
        for (int t = 0; t < nt; ++t) {
          const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(TokenAct(xq, act_stride, t0 + t)) + b;
          int32x4_t s0 = vdupq_n_s32(0), s1 = vdupq_n_s32(0), s2 = vdupq_n_s32(0), s3 = vdupq_n_s32(0);
          for (int k = 0; k < 16; k += 4) {
            s0 = vdotq_s32(s0, wv[k + 0], vld1q_s8(a->qs + 16 * (k + 0)));
            s1 = vdotq_s32(s1, wv[k + 1], vld1q_s8(a->qs + 16 * (k + 1)));
            s2 = vdotq_s32(s2, wv[k + 2], vld1q_s8(a->qs + 16 * (k + 2)));
            s3 = vdotq_s32(s3, wv[k + 3], vld1q_s8(a->qs + 16 * (k + 3)));
          }
          const int32_t sumi = vaddvq_s32(vaddq_s32(vaddq_s32(s0, s1), vaddq_s32(s2, s3)));
          acc[t] += static_cast<float>(sumi) * (dw * a->d);
        }
      }
      for (int t = 0; t < nt; ++t) y[static_cast<int64_t>(t0 + t) * ldy + r] = acc[t] * w.tensor_scale * scale;
    }
  }
}

// Ternary x Q8_K without multiplications: the +1 (c == 2) and -1 (c == 0) planes become byte
// masks; the activations under each mask are selected with AND and pairwise-added into int16
// accumulators (vpadal: add-long, no multiply), and the block sum is plus - minus. Each int16
// lane sees 32 activations of |q| <= 128 per block (<= 4096), so nothing overflows.
void GemmTq2Q8kMulFree(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                       int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  const uint8x16_t two = vdupq_n_u8(2);
  float acc[kMaxTokens];
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const BlockTQ2_0* wb = reinterpret_cast<const BlockTQ2_0*>(w.data + static_cast<size_t>(r) * w.row_bytes);
      for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        uint8x16_t c[16];
        UnpackTq2Codes(wb[b], c);
        int8x16_t plus[16], minus[16];
        for (int k = 0; k < 16; ++k) {
          plus[k] = vreinterpretq_s8_u8(vceqq_u8(c[k], two));
          minus[k] = vreinterpretq_s8_u8(vceqzq_u8(c[k]));
        }
        const float dw = Fp16ToFp32(wb[b].d);
        for (int t = 0; t < nt; ++t) {
          const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(TokenAct(xq, act_stride, t0 + t)) + b;
          int16x8_t p0 = vdupq_n_s16(0), p1 = vdupq_n_s16(0), m0 = vdupq_n_s16(0), m1 = vdupq_n_s16(0);
          for (int k = 0; k < 16; k += 2) {
            const int8x16_t a0 = vld1q_s8(a->qs + 16 * k);
            const int8x16_t a1 = vld1q_s8(a->qs + 16 * (k + 1));
            p0 = vpadalq_s8(p0, vandq_s8(a0, plus[k]));
            m0 = vpadalq_s8(m0, vandq_s8(a0, minus[k]));
            p1 = vpadalq_s8(p1, vandq_s8(a1, plus[k + 1]));
            m1 = vpadalq_s8(m1, vandq_s8(a1, minus[k + 1]));
          }
          const int16x8_t d = vaddq_s16(vsubq_s16(p0, m0), vsubq_s16(p1, m1));  // |lane| <= 8192
          const int32_t sumi = vaddlvq_s16(d);
          acc[t] += static_cast<float>(sumi) * (dw * a->d);
        }
      }
      for (int t = 0; t < nt; ++t) y[static_cast<int64_t>(t0 + t) * ldy + r] = acc[t] * w.tensor_scale * scale;
    }
  }
}

// Per (token, block) fp32 scales of Q8_0 activations, converted once per call.
std::vector<float> GatherQ8_0Scales(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb) {
  std::vector<float> d(static_cast<size_t>(n_tokens) * static_cast<size_t>(nb));
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(TokenAct(xq, act_stride, t));
    for (int64_t b = 0; b < nb; ++b) d[static_cast<size_t>(t * nb + b)] = Fp16ToFp32(a[b].d);
  }
  return d;
}

// Q8_0 or Q4_0 weights x Q8_0 activations with sdot. Weights of a block are widened to signed
// int8 once per token tile (Q4_0: nibble - 8; low nibbles are elements 0..15, high 16..31).
template <bool kQ4>
void GemmQx0Q8_0Sdot(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y,
                     int64_t ldy, int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK8_0;
  const std::vector<float> ad = GatherQ8_0Scales(xq, act_stride, n_tokens, nb);
  const uint8x16_t m4 = vdupq_n_u8(0xF);
  const int8x16_t eight = vdupq_n_s8(8);
  float acc[kMaxTokens];
  for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
    const int nt = n_tokens - t0 < kMaxTokens ? n_tokens - t0 : kMaxTokens;
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* row = w.data + static_cast<size_t>(r) * w.row_bytes;
      for (int t = 0; t < nt; ++t) acc[t] = 0.0f;
      for (int64_t b = 0; b < nb; ++b) {
        int8x16_t w0, w1;
        float dw;
        if constexpr (kQ4) {
          const BlockQ4_0& blk = reinterpret_cast<const BlockQ4_0*>(row)[b];
          const uint8x16_t q = vld1q_u8(blk.qs);
          w0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), eight);
          w1 = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), eight);
          dw = Fp16ToFp32(blk.d);
        } else {
          const BlockQ8_0& blk = reinterpret_cast<const BlockQ8_0*>(row)[b];
          w0 = vld1q_s8(blk.qs);
          w1 = vld1q_s8(blk.qs + 16);
          dw = Fp16ToFp32(blk.d);
        }
        for (int t = 0; t < nt; ++t) {
          const int tt = t0 + t;
          const BlockQ8_0* a = reinterpret_cast<const BlockQ8_0*>(TokenAct(xq, act_stride, tt)) + b;
          int32x4_t s = vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(a->qs));
          s = vdotq_s32(s, w1, vld1q_s8(a->qs + 16));
          const int32_t sumi = vaddvq_s32(s);
          acc[t] += static_cast<float>(sumi) * (dw * ad[static_cast<size_t>(tt * nb + b)]);
        }
      }
      for (int t = 0; t < nt; ++t) y[static_cast<int64_t>(t0 + t) * ldy + r] = acc[t] * w.tensor_scale * scale;
    }
  }
}

// F16 weights x fp16-rounded activations: fcvtl to fp32, fp32 fma in 4 x 4 lanes.
void GemmF16(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
             int64_t r0, int64_t r1, float scale) {
  const int64_t n = w.cols;
  const int64_t n16 = n / 16 * 16;
  const int64_t n4 = n / 4 * 4;
  std::vector<float> xs(static_cast<size_t>(n) * static_cast<size_t>(n_tokens));
  for (int t = 0; t < n_tokens; ++t) {
    const uint16_t* a = reinterpret_cast<const uint16_t*>(TokenAct(xq, act_stride, t));
    float* xt = xs.data() + static_cast<size_t>(t) * static_cast<size_t>(n);
    int64_t i = 0;
    for (; i < n4; i += 4) vst1q_f32(xt + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(a + i))));
    for (; i < n; ++i) xt[i] = Fp16ToFp32(a[i]);
  }
  for (int64_t r = r0; r < r1; ++r) {
    const uint16_t* wr = reinterpret_cast<const uint16_t*>(w.data + static_cast<size_t>(r) * w.row_bytes);
    for (int t = 0; t < n_tokens; ++t) {
      const float* xt = xs.data() + static_cast<size_t>(t) * static_cast<size_t>(n);
      float32x4_t s0 = vdupq_n_f32(0.0f), s1 = s0, s2 = s0, s3 = s0;
      int64_t i = 0;
      for (; i < n16; i += 16) {
        const float16x8_t h0 = vreinterpretq_f16_u16(vld1q_u16(wr + i));
        const float16x8_t h1 = vreinterpretq_f16_u16(vld1q_u16(wr + i + 8));
        s0 = vfmaq_f32(s0, vcvt_f32_f16(vget_low_f16(h0)), vld1q_f32(xt + i));
        s1 = vfmaq_f32(s1, vcvt_high_f32_f16(h0), vld1q_f32(xt + i + 4));
        s2 = vfmaq_f32(s2, vcvt_f32_f16(vget_low_f16(h1)), vld1q_f32(xt + i + 8));
        s3 = vfmaq_f32(s3, vcvt_high_f32_f16(h1), vld1q_f32(xt + i + 12));
      }
      for (; i < n4; i += 4) {
        s0 = vfmaq_f32(s0, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(wr + i))), vld1q_f32(xt + i));
      }
      float acc = vaddvq_f32(vaddq_f32(vaddq_f32(s0, s1), vaddq_f32(s2, s3)));
      for (; i < n; ++i) acc += Fp16ToFp32(wr[i]) * xt[i];
      y[static_cast<int64_t>(t) * ldy + r] = acc * w.tensor_scale * scale;
    }
  }
}

}  // namespace

// Ternary table lookup on the lookup-table layout (gemm_lut_neon.cc).
void GemmTq2LutNeon(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale);

// Activation quantizers (quantize_act_neon.cc).
void QuantizeQ8KNeon(const float* src, void* dst, int64_t n);
void QuantizeQ8_0Neon(const float* src, void* dst, int64_t n);

const KernelTable& NeonTable() {
  // Filled by name, so entries added to KernelTable later stay null (GemmRef) until written here.
  static const KernelTable t = [] {
    KernelTable k;
    k.isa = Isa::kNeon;
    k.tq2_int8dot = GemmTq2Q8kSdot;
    k.tq2_mulfree = GemmTq2Q8kMulFree;
    k.tq2_lut = GemmTq2LutNeon;
    k.f16 = GemmF16;
    k.q8_0 = GemmQx0Q8_0Sdot<false>;
    k.q4_0 = GemmQx0Q8_0Sdot<true>;
    k.quantize_q8_K = QuantizeQ8KNeon;
    k.quantize_q8_0 = QuantizeQ8_0Neon;
    return k;
  }();
  return t;
}

}  // namespace trine::kernels
