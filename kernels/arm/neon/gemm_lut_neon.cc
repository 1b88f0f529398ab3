// Ternary x Q8_K by table lookup on NEON (KernelTable::tq2_lut; kernels/README.md, "Ternary
// lookup-table kernels"), the AVX2 kernel's scheme (kernels/x86/avx2/gemm_lut_avx2.cc) with
// 16-byte vectors: a line of the lookup-table layout (WeightView::interleave = kInterleaveLut) is
// one TQ2_0 code byte for 16 rows, each nibble one `tbl` lookup per byte plane of its table for
// this token; vzip1/vzip2 put the planes back together as int16. No multiplication in the inner
// loop.
//
// Exactness as on AVX2: |entry| <= 2 * 3 * 128 = 768 (codes 0..3, activations in [-128, 127]);
// an int16 lane gets two entries per line and is widened to int32 every 16 lines, so
// |sum| <= 32 * 768 = 24576 < 2^15; the int32 block sums are exact and the float steps are
// GemmRef's, in its order (acc += float(sumi) * (d_w * d_a); acc * tensor_scale * scale).
#include <arm_neon.h>

#include <algorithm>
#include <vector>

#include "kernels.h"
#include "tensor/blocks.h"

namespace trine::kernels {

const KernelTable& NeonTable();

namespace {

constexpr int kTableBytes = 4096;  // one token's tables for one block: 64 lines x 2 nibbles x 32
constexpr int kChunkTokens = 16;   // tokens whose tables are built together

// The tables of one (token, block): for line j and nibble s (0: codes n = 0, 1; 1: n = 2, 3), 32
// bytes at (2j + s) * 32, the low bytes of the 16 int16 entries then the high bytes. Line
// j = 32h + m holds elements 128h + 32n + m; entry c0 + 4 c1 is c0 * a[128h + 64s + m] +
// c1 * a[128h + 64s + 32 + m]. (Built once per token and block: its multiplies are outside the
// inner loop.)
void BuildTables(const BlockQ8_K& a, uint8_t* out) {
  const int16x8_t c0 = {0, 1, 2, 3, 0, 1, 2, 3};
  const int16x8_t c1lo = {0, 0, 0, 0, 1, 1, 1, 1};
  const int16x8_t c1hi = {2, 2, 2, 2, 3, 3, 3, 3};
  for (int j = 0; j < 64; ++j) {
    const int h = j / 32, m = j % 32;
    for (int s = 0; s < 2; ++s) {
      const int e0 = 128 * h + 64 * s + m;
      const int16x8_t x0 = vmulq_n_s16(c0, a.qs[e0]);
      const uint8x16_t v0 = vreinterpretq_u8_s16(vaddq_s16(x0, vmulq_n_s16(c1lo, a.qs[e0 + 32])));
      const uint8x16_t v1 = vreinterpretq_u8_s16(vaddq_s16(x0, vmulq_n_s16(c1hi, a.qs[e0 + 32])));
      uint8_t* t = out + (2 * j + s) * 32;
      vst1q_u8(t, vuzp1q_u8(v0, v1));       // low bytes (little-endian int16: the even bytes)
      vst1q_u8(t + 16, vuzp2q_u8(v0, v1));  // high bytes
    }
  }
}

// One block of one 16-row group against one token's tables, into acc[0..15] in GemmRef's order.
inline void GroupBlock(const uint8_t* group, int64_t b, const uint8_t* tab, int32_t asum, float da, float* acc) {
  const uint8_t* codes = group + LutCodesOffset(b);
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  int32x4_t s32[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
  for (int quarter = 0; quarter < 4; ++quarter) {
    int16x8_t a0 = vdupq_n_s16(0), a1 = vdupq_n_s16(0);  // rows 0-7, 8-15
    for (int j = 16 * quarter; j < 16 * quarter + 16; ++j) {
      const uint8x16_t q = vld1q_u8(codes + 16 * j);
      const uint8x16_t il = vandq_u8(q, m4);
      const uint8x16_t ih = vshrq_n_u8(q, 4);
      const uint8_t* tp = tab + 64 * j;
      const uint8x16_t l0 = vqtbl1q_u8(vld1q_u8(tp), il);
      const uint8x16_t h0 = vqtbl1q_u8(vld1q_u8(tp + 16), il);
      const uint8x16_t l1 = vqtbl1q_u8(vld1q_u8(tp + 32), ih);
      const uint8x16_t h1 = vqtbl1q_u8(vld1q_u8(tp + 48), ih);
      a0 = vaddq_s16(a0, vaddq_s16(vreinterpretq_s16_u8(vzip1q_u8(l0, h0)), vreinterpretq_s16_u8(vzip1q_u8(l1, h1))));
      a1 = vaddq_s16(a1, vaddq_s16(vreinterpretq_s16_u8(vzip2q_u8(l0, h0)), vreinterpretq_s16_u8(vzip2q_u8(l1, h1))));
    }
    s32[0] = vaddw_s16(s32[0], vget_low_s16(a0));
    s32[1] = vaddw_high_s16(s32[1], a0);
    s32[2] = vaddw_s16(s32[2], vget_low_s16(a1));
    s32[3] = vaddw_high_s16(s32[3], a1);
  }
  const float16x8_t dh0 = vreinterpretq_f16_u8(vld1q_u8(group + LutScalesOffset(b)));
  const float16x8_t dh1 = vreinterpretq_f16_u8(vld1q_u8(group + LutScalesOffset(b) + 16));
  const float32x4_t dw[4] = {vcvt_f32_f16(vget_low_f16(dh0)), vcvt_high_f32_f16(dh0), vcvt_f32_f16(vget_low_f16(dh1)),
                             vcvt_high_f32_f16(dh1)};
  const int32x4_t bs = vdupq_n_s32(asum);
  for (int k = 0; k < 4; ++k) {
    const float32x4_t f = vmulq_f32(vcvtq_f32_s32(vsubq_s32(s32[k], bs)), vmulq_n_f32(dw[k], da));
    vst1q_f32(acc + 4 * k, vaddq_f32(vld1q_f32(acc + 4 * k), f));
  }
}

}  // namespace

// TQ2_0 x Q8_K on the lookup-table layout; plain rows (streamed layers) go to the sdot kernel.
// Tables of a chunk of blocks (about 24 KiB) stay in L1 while every 16-row group of [r0, r1)
// reads its lines for those blocks, once per token (from L1 after the first).
void GemmTq2LutNeon(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  if (w.interleave != kInterleaveLut) {
    NeonTable().tq2_int8dot(w, xq, act_stride, n_tokens, y, ldy, r0, r1, scale);
    return;
  }
  if (r0 >= r1) return;
  const int64_t nb = w.cols / kQK_K;
  const int64_t g0 = r0 / 16, g1 = (r1 + 15) / 16;
  thread_local std::vector<uint8_t> tables;
  thread_local std::vector<float> accs;
  for (int t0 = 0; t0 < n_tokens; t0 += kChunkTokens) {
    const int nt = std::min(kChunkTokens, n_tokens - t0);
    const int64_t kb = std::max<int64_t>(1, std::min<int64_t>(nb, (int64_t{24} << 10) / (int64_t{nt} * kTableBytes)));
    tables.resize(static_cast<size_t>(nt * kb * kTableBytes));
    accs.assign(static_cast<size_t>((g1 - g0) * nt * 16), 0.0f);
    for (int64_t b0 = 0; b0 < nb; b0 += kb) {
      const int64_t b1 = std::min(nb, b0 + kb);
      for (int t = 0; t < nt; ++t) {
        const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
        for (int64_t b = b0; b < b1; ++b) BuildTables(a[b], tables.data() + ((b - b0) * nt + t) * kTableBytes);
      }
      for (int64_t g = g0; g < g1; ++g) {
        const uint8_t* group = w.data + static_cast<size_t>(g) * w.group_bytes;
        float* acc = accs.data() + (g - g0) * nt * 16;
        for (int64_t b = b0; b < b1; ++b) {
          for (int t = 0; t < nt; ++t) {
            const BlockQ8_K& a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t))[b];
            int32_t asum = 0;
            for (int j = 0; j < 16; ++j) asum += a.bsums[j];
            GroupBlock(group, b, tables.data() + ((b - b0) * nt + t) * kTableBytes, asum, a.d, acc + 16 * t);
          }
        }
      }
    }
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t ra = std::max(r0, 16 * g), rb = std::min(r1, 16 * g + 16);
      const float* acc = accs.data() + (g - g0) * nt * 16;
      for (int t = 0; t < nt; ++t) {
        float* yt = y + static_cast<int64_t>(t0 + t) * ldy;
        for (int64_t r = ra; r < rb; ++r) yt[r] = acc[t * 16 + (r - 16 * g)] * w.tensor_scale * scale;
      }
    }
  }
}

}  // namespace trine::kernels
