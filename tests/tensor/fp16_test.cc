// fp16 / bf16 conversions (core/fp16.h): exhaustive over all 65536 halves, round-to-nearest-even
// on fp32 inputs, and (on x86 with F16C) agreement with the hardware conversion ggml uses.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/fp16.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "cpu_features.h"
#define TRINE_TEST_HAVE_F16C_ORACLE 1
#endif

namespace trine {
namespace {

bool HalfIsNan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }

// Value of a half computed independently of Fp16ToFp32 (double arithmetic on the fields).
double HalfValue(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 0x1F;
  const int mant = h & 0x3FF;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
  if (exp == 31) return mant ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024.0 + mant, exp - 25);
}

TEST(Fp16, AllHalvesDecodeExactlyAndRoundTrip) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    const float f = Fp16ToFp32(h);
    if (HalfIsNan(h)) {
      EXPECT_TRUE(std::isnan(f)) << std::hex << u;
      EXPECT_TRUE(HalfIsNan(Fp32ToFp16(f))) << std::hex << u;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), HalfValue(h)) << "half 0x" << std::hex << u;
    ASSERT_EQ(std::signbit(f), (h >> 15) != 0) << std::hex << u;
    ASSERT_EQ(Fp32ToFp16(f), h) << "round trip of half 0x" << std::hex << u;
  }
}

// Between every pair of adjacent finite halves: the exact midpoint goes to the even one, and one
// fp32 ulp either side of it goes to the nearer one.
TEST(Fp16, MidpointsRoundToNearestEven) {
  for (uint32_t u = 0; u < 0x7BFF; ++u) {  // positive finite halves below 65504
    for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
      const uint16_t lo = static_cast<uint16_t>(u | sign);
      const uint16_t hi = static_cast<uint16_t>((u + 1) | sign);
      const float a = Fp16ToFp32(lo), b = Fp16ToFp32(hi);
      const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);  // exact in fp32
      ASSERT_EQ(static_cast<double>(mid), (static_cast<double>(a) + b) / 2);
      const uint16_t even = (u & 1) ? hi : lo;
      ASSERT_EQ(Fp32ToFp16(mid), even) << "midpoint after half 0x" << std::hex << u;
      const float below = std::nextafter(mid, a), above = std::nextafter(mid, b);
      ASSERT_EQ(Fp32ToFp16(below), lo) << std::hex << u;
      ASSERT_EQ(Fp32ToFp16(above), hi) << std::hex << u;
    }
  }
}

TEST(Fp16, EdgeCases) {
  EXPECT_EQ(Fp32ToFp16(0.0f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1.0f), 0x3C00);
  EXPECT_EQ(Fp32ToFp16(-2.0f), 0xC000);
  EXPECT_EQ(Fp32ToFp16(65504.0f), 0x7BFF);                           // largest finite
  EXPECT_EQ(Fp32ToFp16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);     // just below the tie
  EXPECT_EQ(Fp32ToFp16(65520.0f), 0x7C00);                           // tie with 65536 -> even = inf
  EXPECT_EQ(Fp32ToFp16(-1e9f), 0xFC00);
  EXPECT_EQ(Fp32ToFp16(INFINITY), 0x7C00);
  EXPECT_EQ(Fp32ToFp16(-INFINITY), 0xFC00);
  EXPECT_TRUE(HalfIsNan(Fp32ToFp16(NAN)));
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -25)), 0x0000);             // tie with 0 -> even = 0
  EXPECT_EQ(Fp32ToFp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(3.0f, -25)), 0x0002);             // 1.5 ulp -> 2 (even)
  EXPECT_EQ(Fp32ToFp16(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(Fp32ToFp16(1e-30f), 0x0000);
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1.0f, -14)), 0x0400);             // smallest normal
  EXPECT_EQ(Fp32ToFp16(std::ldexp(1023.5f, -24)), 0x0400);          // subnormal tie rounds up into normal
  EXPECT_EQ(Fp32ToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);       // tie -> even (down)
  EXPECT_EQ(Fp32ToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);   // tie -> even (up)
  EXPECT_EQ(Fp32ToFp16(2047.5f), 0x6800);                            // rounds up to 2048 across a binade
  EXPECT_EQ(Fp32ToFp16(0.1f), 0x2E66);
}

#ifdef TRINE_TEST_HAVE_F16C_ORACLE
__attribute__((target("f16c"))) uint16_t HardwareFp16(float f) {
  // The vector form: clang 14's _cvtss_sh macro is not valid C++.
  return static_cast<uint16_t>(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}

// ggml's x86 CPU backend converts with F16C; trine's portable conversion must agree bit for bit
// (NaNs: both quiet, payloads may differ).
TEST(Fp16, MatchesF16cHardware) {
  // trine's avx2 level includes F16C (clang 14 has no "f16c" for __builtin_cpu_supports).
  if (!kernels::GetCpuFeatures().avx2) GTEST_SKIP() << "CPU has no F16C";
  auto check = [](float f) {
    const uint16_t want = HardwareFp16(f), got = Fp32ToFp16(f);
    if (HalfIsNan(want)) {
      ASSERT_TRUE(HalfIsNan(got)) << f;
    } else {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      ASSERT_EQ(got, want) << "fp32 bits 0x" << std::hex << bits;
    }
  };
  // Every fp32 whose exponent can reach fp16 (plus a margin on each side), sampled with a stride
  // that visits every low-bit pattern over the run, and random bit patterns.
  for (uint32_t bits = 0x32000000u; bits < 0x47900000u; bits += 97) {
    float f;
    std::memcpy(&f, &bits, 4);
    check(f);
    check(-f);
  }
  uint64_t s = 42;
  for (int i = 0; i < 200000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t bits = static_cast<uint32_t>(s >> 32);
    float f;
    std::memcpy(&f, &bits, 4);
    check(f);
  }
}
#endif

TEST(Bf16, RoundTripAndNearestEven) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const uint16_t h = static_cast<uint16_t>(u);
    const float f = Bf16ToFp32(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(Bf16ToFp32(Fp32ToBf16(f))));
      continue;
    }
    ASSERT_EQ(Fp32ToBf16(f), h) << std::hex << u;
  }
  EXPECT_EQ(Fp32ToBf16(1.0f), 0x3F80);
  EXPECT_EQ(Fp32ToBf16(Fp32FromBits(0x3F808000u)), 0x3F80);  // tie -> even (down)
  EXPECT_EQ(Fp32ToBf16(Fp32FromBits(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(Fp32ToBf16(Fp32FromBits(0x3F808001u)), 0x3F81);  // above the tie
  EXPECT_EQ(Fp32ToBf16(Fp32FromBits(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
}

}  // namespace
}  // namespace trine
