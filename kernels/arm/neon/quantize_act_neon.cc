// NEON activation quantizers: Q8_K and Q8_0, byte-identical to the scalar references
// (QuantizeRowQ8_K, QuantizeRowQ8_0Act) for every input, as compiled for AArch64. Reached through
// KernelTable::quantize_* (NeonTable in gemm_neon.cc).
//
//  * The block max skips NaN by compare-and-select (|x| > acc is false for NaN: the reference's
//    strict `>` scan, and fmax for quiet NaN); Q8_K takes the sign of the first element whose |x|
//    equals it.
//  * NearestInt is replayed as add/and/sub (AArch64 propagates a NaN operand's payload like the
//    scalar fadd), clamped to 127 and narrowed by truncation (xtn), like the int8 cast; bsums are
//    summed from the stored bytes.
//  * Q8_0: (int8_t)nearbyintf(v) is, on AArch64, frintx then fcvtzs (saturating: NaN -> 0,
//    +inf -> INT32_MAX) and the low byte; fcvtns (vcvtnq_s32_f32, round to nearest even,
//    the same saturation) then xtn gives the same bytes.
#include <arm_neon.h>

#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {
namespace {

// acc, or |x| where |x| > acc (NaN never replaces acc).
inline float32x4_t MaxAbs(float32x4_t acc, float32x4_t x) {
  const float32x4_t a = vabsq_f32(x);
  return vbslq_f32(vcgtq_f32(a, acc), a, acc);
}

inline int32x4_t NearestIntMin127(float32x4_t v) {
  const float32x4_t f = vaddq_f32(v, vdupq_n_f32(12582912.0f));
  const int32x4_t i = vsubq_s32(vandq_s32(vreinterpretq_s32_f32(f), vdupq_n_s32(0x007FFFFF)), vdupq_n_s32(0x00400000));
  return vminq_s32(i, vdupq_n_s32(127));
}

// Low bytes of 16 int32 values, in order.
inline int8x16_t LowBytes(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
  const int16x8_t ab = vcombine_s16(vmovn_s32(a), vmovn_s32(b));
  const int16x8_t cd = vcombine_s16(vmovn_s32(c), vmovn_s32(d));
  return vcombine_s8(vmovn_s16(ab), vmovn_s16(cd));
}

}  // namespace

void QuantizeQ8KNeon(const float* src, void* dst, int64_t n) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float32x4_t m0 = vdupq_n_f32(0.0f), m1 = m0, m2 = m0, m3 = m0;
    for (int j = 0; j < kQK_K; j += 16) {
      m0 = MaxAbs(m0, vld1q_f32(x + j));
      m1 = MaxAbs(m1, vld1q_f32(x + j + 4));
      m2 = MaxAbs(m2, vld1q_f32(x + j + 8));
      m3 = MaxAbs(m3, vld1q_f32(x + j + 12));
    }
    const float amax = vmaxvq_f32(vmaxq_f32(vmaxq_f32(m0, m1), vmaxq_f32(m2, m3)));  // no NaN lanes
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float32x4_t vamax = vdupq_n_f32(amax);
    int first = 0;
    for (int j = 0; j < kQK_K; j += 16) {
      const uint32x4_t eq = vorrq_u32(vorrq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + j)), vamax),
                                                vceqq_f32(vabsq_f32(vld1q_f32(x + j + 4)), vamax)),
                                      vorrq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + j + 8)), vamax),
                                                vceqq_f32(vabsq_f32(vld1q_f32(x + j + 12)), vamax)));
      if (vmaxvq_u32(eq) != 0) {
        first = j;
        while (std::fabs(x[first]) != amax) ++first;
        break;
      }
    }
    const float iscale = -127.0f / x[first];
    const float32x4_t vs = vdupq_n_f32(iscale);
    for (int g = 0; g < kQK_K / 16; ++g) {
      const float* xg = x + 16 * g;
      const int8x16_t q = LowBytes(NearestIntMin127(vmulq_f32(vs, vld1q_f32(xg))),
                                   NearestIntMin127(vmulq_f32(vs, vld1q_f32(xg + 4))),
                                   NearestIntMin127(vmulq_f32(vs, vld1q_f32(xg + 8))),
                                   NearestIntMin127(vmulq_f32(vs, vld1q_f32(xg + 12))));
      vst1q_s8(b[i].qs + 16 * g, q);
      b[i].bsums[g] = vaddlvq_s8(q);
    }
    b[i].d = 1.0f / iscale;
  }
}

void QuantizeQ8_0Neon(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;
    float32x4_t v[8];
    for (int k = 0; k < 8; ++k) v[k] = vld1q_f32(x + 4 * k);
    const float32x4_t zero = vdupq_n_f32(0.0f);
    const float32x4_t m01 = vmaxq_f32(MaxAbs(MaxAbs(zero, v[0]), v[1]), MaxAbs(MaxAbs(zero, v[2]), v[3]));
    const float32x4_t m23 = vmaxq_f32(MaxAbs(MaxAbs(zero, v[4]), v[5]), MaxAbs(MaxAbs(zero, v[6]), v[7]));
    const float amax = vmaxvq_f32(vmaxq_f32(m01, m23));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    b[i].d = Fp32ToFp16(d);
    const float32x4_t vid = vdupq_n_f32(id);
    int32x4_t q[8];
    for (int k = 0; k < 8; ++k) q[k] = vcvtnq_s32_f32(vmulq_f32(v[k], vid));
    vst1q_s8(b[i].qs, LowBytes(q[0], q[1], q[2], q[3]));
    vst1q_s8(b[i].qs + 16, LowBytes(q[4], q[5], q[6], q[7]));
  }
}

}  // namespace trine::kernels
