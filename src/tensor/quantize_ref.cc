// Scalar reference quantize / dequantize. Formats are documented in blocks.h; quantizer behaviour
// (rounding modes, scale choice) follows llama.cpp's *_ref functions so outputs are byte-identical.
#include "tensor/quantize_ref.h"

#include <cmath>
#include <cstring>

#include "core/fp16.h"

namespace trine {

int NearestInt(float x) {
  float val = x + 12582912.f;
  int32_t i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

void DequantizeRowF32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}
void DequantizeRowF16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Fp16ToFp32(s[i]);
}
void DequantizeRowBF16(const void* src, float* dst, int64_t n) {
  const uint16_t* s = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFp32(s[i]);
}
void QuantizeRowF32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, static_cast<size_t>(n) * 4);
}
void QuantizeRowF16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToFp16(src[i]);
}
void QuantizeRowBF16(const float* src, void* dst, int64_t n) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = Fp32ToBf16(src[i]);
}

void DequantizeRowQ8_0(const void* src, float* dst, int64_t n) {
  const BlockQ8_0* b = static_cast<const BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK8_0; ++j) dst[i * kQK8_0 + j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

void DequantizeRowQ4_0(const void* src, float* dst, int64_t n) {
  const BlockQ4_0* b = static_cast<const BlockQ4_0*>(src);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      dst[i * kQK4_0 + j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      dst[i * kQK4_0 + j + kQK4_0 / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

// Unpacks the j-th 6-bit (scale, min) pair of a Q4_K block.
static void Q4KScaleMin(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void DequantizeRowQ4_K(const void* src, float* dst, int64_t n) {
  const BlockQ4_K* b = static_cast<const BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    const float dmin = Fp16ToFp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    float* y = dst + i * kQK_K;
    for (int g = 0; g < 8; g += 2) {
      uint8_t sc, m;
      Q4KScaleMin(g, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      Q4KScaleMin(g + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      y += 64;
    }
  }
}

void DequantizeRowQ6_K(const void* src, float* dst, int64_t n) {
  const BlockQ6_K* b = static_cast<const BlockQ6_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = b[i].ql + 64 * h;
      const uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* sc = b[i].scales + 8 * h;
      float* y = dst + i * kQK_K + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is + 0] * static_cast<float>(q1);
        y[l + 32] = d * sc[is + 2] * static_cast<float>(q2);
        y[l + 64] = d * sc[is + 4] * static_cast<float>(q3);
        y[l + 96] = d * sc[is + 6] * static_cast<float>(q4);
      }
    }
  }
}

void DequantizeRowQ8_K(const void* src, float* dst, int64_t n) {
  const BlockQ8_K* b = static_cast<const BlockQ8_K*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    for (int j = 0; j < kQK_K; ++j) dst[i * kQK_K + j] = b[i].d * static_cast<float>(b[i].qs[j]);
  }
}

void DequantizeRowTQ1_0(const void* src, float* dst, int64_t n) {
  static const uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
  const BlockTQ1_0* b = static_cast<const BlockTQ1_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    float* y = dst + i * kQK_K;
    int k = 0;
    // qs[0..31]: 5 trits per byte, element m + 32n; then qs[32..47]: element 160 + m + 16n.
    for (int base = 0, len = 32; base < 48; base += len, len = 16) {
      for (int t = 0; t < 5; ++t) {
        for (int m = 0; m < len; ++m) {
          const uint8_t q = static_cast<uint8_t>(b[i].qs[base + m] * kPow3[t]);
          const int16_t c = static_cast<int16_t>((static_cast<uint16_t>(q) * 3) >> 8);
          y[k++] = static_cast<float>(c - 1) * d;
        }
      }
    }
    for (int t = 0; t < 4; ++t) {
      for (int j = 0; j < 4; ++j) {
        const uint8_t q = static_cast<uint8_t>(b[i].qh[j] * kPow3[t]);
        const int16_t c = static_cast<int16_t>((static_cast<uint16_t>(q) * 3) >> 8);
        y[k++] = static_cast<float>(c - 1) * d;
      }
    }
  }
}

void DequantizeRowTQ2_0(const void* src, float* dst, int64_t n) {
  const BlockTQ2_0* b = static_cast<const BlockTQ2_0*>(src);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float d = Fp16ToFp32(b[i].d);
    float* y = dst + i * kQK_K;
    for (int h = 0; h < 2; ++h) {
      for (int s = 0; s < 4; ++s) {
        for (int m = 0; m < 32; ++m) {
          const int c = (b[i].qs[32 * h + m] >> (2 * s)) & 3;
          y[128 * h + 32 * s + m] = static_cast<float>(c - 1) * d;
        }
      }
    }
  }
}

void DecodeI2SCodes(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t blk = i / kQKI2S;
    const int j = static_cast<int>(i % kQKI2S);
    const uint8_t byte = src[blk * 32 + (j % 32)];
    const int c = (byte >> (6 - 2 * (j / 32))) & 3;
    dst[i] = c == 3 ? 0.0f : static_cast<float>(c - 1);
  }
}

void QuantizeRowQ8_0(const float* src, void* dst, int64_t n) {
  BlockQ8_0* b = static_cast<BlockQ8_0*>(dst);
  for (int64_t i = 0; i < n / kQK8_0; ++i) {
    const float* x = src + i * kQK8_0;
    float amax = 0.0f;
    for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK8_0; ++j) b[i].qs[j] = TruncToInt8(std::roundf(x[j] * id));
  }
}

void QuantizeRowQ4_0(const float* src, void* dst, int64_t n) {
  BlockQ4_0* b = static_cast<BlockQ4_0*>(dst);
  for (int64_t i = 0; i < n / kQK4_0; ++i) {
    const float* x = src + i * kQK4_0;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK4_0; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b[i].d = Fp32ToFp16(d);
    for (int j = 0; j < kQK4_0 / 2; ++j) {
      const float x0 = x[j] * id, x1 = x[j + kQK4_0 / 2] * id;
      int q0 = TruncToInt8(x0 + 8.5f), q1 = TruncToInt8(x1 + 8.5f);
      q0 = q0 < 15 ? q0 : 15;
      q1 = q1 < 15 ? q1 : 15;
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void QuantizeRowQ8_K(const float* src, void* dst, int64_t n) {
  BlockQ8_K* b = static_cast<BlockQ8_K*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      const int v = NearestInt(iscale * x[j]);
      b[i].qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
    }
    for (int j = 0; j < kQK_K / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b[i].qs[16 * j + l];
      b[i].bsums[j] = static_cast<int16_t>(sum);
    }
    b[i].d = 1.0f / iscale;
  }
}

// Shared amax/scale step of TQ1_0 and TQ2_0: d is the fp16 of amax, codes use 1/amax in fp32.
static float TernaryBlockScale(const float* x, float* id) {
  float amax = 0.0f;
  for (int j = 0; j < kQK_K; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  *id = amax != 0.0f ? 1.0f / amax : 0.0f;
  return amax;
}

static uint8_t TernaryCode(float x, float id) {
  return static_cast<uint8_t>(std::lroundf(x * id) + 1);
}

void QuantizeRowTQ2_0(const float* src, void* dst, int64_t n) {
  BlockTQ2_0* b = static_cast<BlockTQ2_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float id;
    const float d = TernaryBlockScale(x, &id);
    for (int h = 0; h < 2; ++h) {
      for (int m = 0; m < 32; ++m) {
        uint8_t q = 0;
        for (int s = 0; s < 4; ++s) q |= static_cast<uint8_t>(TernaryCode(x[128 * h + 32 * s + m], id) << (2 * s));
        b[i].qs[32 * h + m] = q;
      }
    }
    b[i].d = Fp32ToFp16(d);
  }
}

// Packs up to five trits (first trit most significant) into a byte as the fraction v/243.
static uint8_t PackTrits(const uint8_t* c, int count) {
  uint32_t v = 0;
  for (int t = 0; t < count; ++t) v = v * 3 + c[t];
  for (int t = count; t < 5; ++t) v *= 3;
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}

void QuantizeRowTQ1_0(const float* src, void* dst, int64_t n) {
  BlockTQ1_0* b = static_cast<BlockTQ1_0*>(dst);
  for (int64_t i = 0; i < n / kQK_K; ++i) {
    const float* x = src + i * kQK_K;
    float id;
    const float d = TernaryBlockScale(x, &id);
    uint8_t c[5];
    for (int m = 0; m < 32; ++m) {
      for (int t = 0; t < 5; ++t) c[t] = TernaryCode(x[m + 32 * t], id);
      b[i].qs[m] = PackTrits(c, 5);
    }
    for (int m = 0; m < 16; ++m) {
      for (int t = 0; t < 5; ++t) c[t] = TernaryCode(x[160 + m + 16 * t], id);
      b[i].qs[32 + m] = PackTrits(c, 5);
    }
    for (int j = 0; j < 4; ++j) {
      for (int t = 0; t < 4; ++t) c[t] = TernaryCode(x[240 + j + 4 * t], id);
      b[i].qh[j] = PackTrits(c, 4);
    }
    b[i].d = Fp32ToFp16(d);
  }
}

void QuantizeI2S(const float* src, uint8_t* dst, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(src[i]));
  std::memset(dst, 0, static_cast<size_t>(n / 4 + kI2STailBytes));
  for (int64_t i = 0; i < n; ++i) {
    // bitnet.cpp's quantize_i2_s (x86 ACT_PARALLEL layout): sign quantization against the tensor
    // max, with a dead zone |x| < 1e-6 (compared in double there; no float lies between 1e-6f and
    // 1e-6, so "> 1e-6f" here selects the same elements). Its max is taken in double and stored as
    // float, which is the float max itself. bitnet.cpp leaves the 28 bytes after the scale
    // unwritten; trine zeroes them.
    int c = 1;
    if (std::fabs(src[i]) > 1e-6f) c = src[i] > 0 ? 2 : 0;
    const int64_t blk = i / kQKI2S;
    const int j = static_cast<int>(i % kQKI2S);
    dst[blk * 32 + (j % 32)] |= static_cast<uint8_t>(c << (6 - 2 * (j / 32)));
  }
  std::memcpy(dst + n / 4, &amax, 4);
}

}  // namespace trine
