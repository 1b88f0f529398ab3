// IEEE binary16 and bfloat16 conversions, exact and portable (no F16C needed), matching ggml:
// fp32 -> fp16 rounds to nearest even; fp32 -> bf16 rounds to nearest even and keeps NaNs quiet.
#pragma once

#include <cstdint>
#include <cstring>

namespace trine {

inline float Fp32FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t BitsFromFp32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return Fp32FromBits(sign | 0x7F800000u | (mant << 13));  // inf / nan
  if (exp == 0) {
    if (mant == 0) return Fp32FromBits(sign);
    // subnormal: value = mant * 2^-24
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return Fp32FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
}

// Table form of Fp16ToFp32 (256 KiB, built on first use) for hot loops.
inline const float* Fp16ToFp32Table() {
  static const float* table = [] {
    static float t[65536];
    for (uint32_t i = 0; i < 65536; ++i) t[i] = Fp16ToFp32(static_cast<uint16_t>(i));
    return t;
  }();
  return table;
}

inline uint16_t Fp32ToFp16(float f) {
  uint32_t x = BitsFromFp32(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x7F800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7C00u | (x > 0x7F800000u ? 0x200u : 0u));
  }
  if (x >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to inf
  if (x < 0x38800000u) {  // result is subnormal or zero in fp16
    if (x < 0x33000000u) return sign;  // < 2^-25 rounds to zero
    const uint32_t e = x >> 23;
    const uint32_t m = (x & 0x7FFFFFu) | 0x800000u;
    const uint32_t shift = 126u - e;  // shift so that result is in units of 2^-24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  // normal: rebias exponent and round mantissa from 23 to 10 bits, nearest even
  uint32_t r = x - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t rem = r & 0x1FFFu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline float Bf16ToFp32(uint16_t h) { return Fp32FromBits(static_cast<uint32_t>(h) << 16); }

inline uint16_t Fp32ToBf16(float f) {
  uint32_t u = BitsFromFp32(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 64u);  // quiet nan
  return static_cast<uint16_t>((u + (0x7FFFu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace trine
