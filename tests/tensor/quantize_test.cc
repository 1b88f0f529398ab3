// Reference quantizers (tensor/quantize_ref.h, quantize_kquants.cc): golden bytes and hashes
// produced by llama.cpp's own reference quantizers, Q8_K activation semantics, the I2_S layout,
// ternary losslessness and quantize -> dequantize error bounds per type family.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/fp16.h"
#include "tensor/blocks.h"
#include "tensor/dtype.h"
#include "tensor/quantize_ref.h"

namespace trine {
namespace {

// ---- Deterministic inputs -------------------------------------------------------------------
// Nine distributions of 4096 values (16 super-blocks). The golden hashes below were produced by
// feeding exactly these inputs to llama.cpp's quantize_row_*_ref (ggml-quants.c, upstream commit
// 41dcf20) compiled as ggml-base is (no -march flags) and hashing the output with FNV-1a.
constexpr int kGenDists = 9;
constexpr int kGenElems = 4096;
constexpr int kTinyScaleDist = 7;  // values ~1e-5: fp16 scales underflow (llama.cpp behaves the same)

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
// Uniform in [-1, 1) with 24 random bits; exact in fp32 on every platform.
float Uniform(uint64_t* s) { return static_cast<float>(SplitMix(s) >> 40) * (1.0f / 16777216.0f) * 2.0f - 1.0f; }

void GenInput(int dist, float* x) {
  uint64_t s = 1000 + static_cast<uint64_t>(dist);
  for (int i = 0; i < kGenElems; ++i) {
    float v = 0.0f;
    switch (dist) {
      case 0: v = Uniform(&s); break;  // uniform
      case 1: {                        // bell-shaped (sum of four uniforms)
        const float a = Uniform(&s), b = Uniform(&s), c = Uniform(&s), d = Uniform(&s);
        v = (a + b + c + d) * 0.5f;
        break;
      }
      case 2: v = Uniform(&s) + 0.7f; break;                                           // mostly positive
      case 3: v = (i % 37 == 5) ? 40.0f * Uniform(&s) : 0.02f * Uniform(&s); break;  // outliers
      case 4: v = static_cast<float>(static_cast<int>(SplitMix(&s) >> 60) - 8); break;  // integers -8..7
      case 5: v = (SplitMix(&s) & 1) ? 0.0f : Uniform(&s); break;                       // half zeros
      case 6: {                                                                         // all negative
        const float u = Uniform(&s);
        v = -((u < 0 ? -u : u) + 0.1f) * 3.0f;
        break;
      }
      case 7: v = Uniform(&s) * 1e-5f; break;  // tiny
      default: v = Uniform(&s) * 3e4f; break;  // large
    }
    x[i] = v;
  }
}

uint64_t Fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

std::vector<uint8_t> QuantizeRows(TypeId t, const float* x, int64_t n) {
  uint64_t bytes = 0;
  EXPECT_TRUE(TensorBytes(t, n, &bytes));
  std::vector<uint8_t> out(bytes, 0xCD);
  Status st = QuantizeTensor(t, x, n, n, out.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return out;
}

std::vector<float> Dequantize(TypeId t, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(static_cast<size_t>(n), NAN);
  Status st = DequantizeTensor(t, q.data(), q.size(), n, y.data());
  EXPECT_TRUE(st.ok()) << st.message();
  return y;
}

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  char buf[4];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", p[i]);
    s += buf;
  }
  return s;
}

// ---- Golden bytes ---------------------------------------------------------------------------

struct HashCase {
  TypeId type;
  int dist;
  uint64_t hash;
};
const HashCase kLlamaCppHashes[] = {
    {TypeId::kQ8_0, 0, 0xf83911c48b66e6efull},
    {TypeId::kQ8_0, 1, 0x9212e8759b8d0e12ull},
    {TypeId::kQ8_0, 2, 0x711d777262638eefull},
    {TypeId::kQ8_0, 3, 0x5f4d2dbf92653573ull},
    {TypeId::kQ8_0, 4, 0x1617895326a3962cull},
    {TypeId::kQ8_0, 5, 0xb09c9d0b037e3a0cull},
    {TypeId::kQ8_0, 6, 0xf79c3bc952393fe8ull},
    {TypeId::kQ8_0, 7, 0x25236855d055dddaull},
    {TypeId::kQ8_0, 8, 0x86765eefa14b6a7dull},
    {TypeId::kQ4_0, 0, 0x576f2ace66facaf4ull},
    {TypeId::kQ4_0, 1, 0x538c79a0babd6be2ull},
    {TypeId::kQ4_0, 2, 0x13ea776c76c40af7ull},
    {TypeId::kQ4_0, 3, 0x8931ab38dd1a30d3ull},
    {TypeId::kQ4_0, 4, 0x07e54246c5e04c96ull},
    {TypeId::kQ4_0, 5, 0xb15bd7878c9b0038ull},
    {TypeId::kQ4_0, 6, 0x9baf29a4c5e8e5b6ull},
    {TypeId::kQ4_0, 7, 0xf9f5b49282b742a1ull},
    {TypeId::kQ4_0, 8, 0x308642f81e4ae8b4ull},
    {TypeId::kQ4_K, 0, 0x410d22d24a3697d7ull},
    {TypeId::kQ4_K, 1, 0x65ad0bd8b6b9fdd7ull},
    {TypeId::kQ4_K, 2, 0x0ed31fa067a8967eull},
    {TypeId::kQ4_K, 3, 0x391f67517a29ff54ull},
    {TypeId::kQ4_K, 4, 0x917ab8c08ad745b7ull},
    {TypeId::kQ4_K, 5, 0xa97d43780b599d90ull},
    {TypeId::kQ4_K, 6, 0xb29b51ef04aac09cull},
    {TypeId::kQ4_K, 7, 0xa5bdb0af93f17983ull},
    {TypeId::kQ4_K, 8, 0x9a93cb32d652b98full},
    {TypeId::kQ6_K, 0, 0xb304dfefd9c2aa8full},
    {TypeId::kQ6_K, 1, 0xf139fbbacb9dc47full},
    {TypeId::kQ6_K, 2, 0xa7f811a5fe885afeull},
    {TypeId::kQ6_K, 3, 0x6d69f9e6c8b15989ull},
    {TypeId::kQ6_K, 4, 0x67c1212181284798ull},
    {TypeId::kQ6_K, 5, 0x1c498a22ddfcf3baull},
    {TypeId::kQ6_K, 6, 0xea82f76c12fb2fd6ull},
    {TypeId::kQ6_K, 7, 0x69abf0039fc1f2b7ull},
    {TypeId::kQ6_K, 8, 0xf8bce56205f8e80full},
    {TypeId::kTQ1_0, 0, 0x93eba9de9d89f7bdull},
    {TypeId::kTQ1_0, 1, 0xca4fa9c6d8578c43ull},
    {TypeId::kTQ1_0, 2, 0x496635fdb7232530ull},
    {TypeId::kTQ1_0, 3, 0xe8149a997d7974b3ull},
    {TypeId::kTQ1_0, 4, 0x1c7bbf33b3bcb4a3ull},
    {TypeId::kTQ1_0, 5, 0x778fadcaaee0d5baull},
    {TypeId::kTQ1_0, 6, 0x0d03b071f59f98beull},
    {TypeId::kTQ1_0, 7, 0x705f13830bcd5827ull},
    {TypeId::kTQ1_0, 8, 0xb87c1b2a12235eceull},
    {TypeId::kTQ2_0, 0, 0x98e1ddc4487f5928ull},
    {TypeId::kTQ2_0, 1, 0xcaf52772b3595c2eull},
    {TypeId::kTQ2_0, 2, 0xbbfa11d1e4c1d5d0ull},
    {TypeId::kTQ2_0, 3, 0xae3fc4ff0f07c2aaull},
    {TypeId::kTQ2_0, 4, 0x694ab16b479981d4ull},
    {TypeId::kTQ2_0, 5, 0x411e6e170370b5b7ull},
    {TypeId::kTQ2_0, 6, 0x2ef3b6ae16d00a68ull},
    {TypeId::kTQ2_0, 7, 0xe48b353ba94d9f0aull},
    {TypeId::kTQ2_0, 8, 0x0247debd97eb29e9ull},
    {TypeId::kQ8_K, 0, 0xd6943cc1625a5bc1ull},
    {TypeId::kQ8_K, 1, 0xc04ff10a4b9f4f3eull},
    {TypeId::kQ8_K, 2, 0x0d26b6164cc432e0ull},
    {TypeId::kQ8_K, 3, 0x90f1489ee9943348ull},
    {TypeId::kQ8_K, 4, 0x22ced03a19568c4full},
    {TypeId::kQ8_K, 5, 0x2f77b4a472a5f4c7ull},
    {TypeId::kQ8_K, 6, 0xec236b9f11b7cddbull},
    {TypeId::kQ8_K, 7, 0x1a7df485067234f0ull},
    {TypeId::kQ8_K, 8, 0x71fb623722e834a4ull},
};

TEST(QuantizeGolden, MatchesLlamaCppReferenceOnNineDistributions) {
  std::vector<float> x(kGenElems);
  for (const auto& c : kLlamaCppHashes) {
    GenInput(c.dist, x.data());
    const std::vector<uint8_t> q = QuantizeRows(c.type, x.data(), kGenElems);
    EXPECT_EQ(Fnv1a(q.data(), q.size()), c.hash) << TypeName(c.type) << ", distribution " << c.dist;
  }
}

// One hand-built block per type, bytes as llama.cpp's reference quantizer writes them.
const uint8_t kQ4_KGolden[144] = {0x4d, 0x18, 0xef, 0x20, 0xff, 0xfc, 0xff, 0xfc, 0xff, 0xfc, 0xff, 0xfc,
    0xff, 0xcc, 0xff, 0xcc, 0x80, 0x19, 0xa2, 0x3b, 0xd5, 0x6d, 0xf7, 0x81,
    0x29, 0xb3, 0x4c, 0xd5, 0x7e, 0x08, 0x91, 0x2a, 0xc4, 0x5c, 0xe6, 0x7f,
    0x18, 0xa2, 0x3b, 0xc4, 0x6d, 0xf7, 0x80, 0x19, 0xb3, 0x4b, 0xd5, 0x6e,
    0x80, 0x19, 0xa2, 0x3b, 0xd5, 0x6d, 0xf7, 0x81, 0x29, 0xb3, 0x4c, 0xd5,
    0x7e, 0x08, 0x91, 0x2a, 0xc4, 0x5c, 0xe6, 0x7f, 0x18, 0xa2, 0x3b, 0xc4,
    0x6d, 0xf7, 0x80, 0x19, 0xb3, 0x4b, 0xd5, 0x6e, 0x80, 0x19, 0xa2, 0x3b,
    0xd5, 0x6d, 0xf7, 0x81, 0x29, 0xb3, 0x4c, 0xd5, 0x7e, 0x08, 0x91, 0x2a,
    0xc4, 0x5c, 0xe6, 0x7f, 0x18, 0xa2, 0x3b, 0xc4, 0x6d, 0xf7, 0x80, 0x19,
    0xb3, 0x4b, 0xd5, 0x6e, 0x80, 0x19, 0xa2, 0x3b, 0xd5, 0x6d, 0xf7, 0x81,
    0x29, 0xb3, 0x4c, 0xd5, 0x7e, 0x08, 0x91, 0x2a, 0xc4, 0x5c, 0xe6, 0x7f,
    0x18, 0xa2, 0x3b, 0xc4, 0x6d, 0xf7, 0x80, 0x19, 0xb3, 0x4b, 0xd5, 0x6e};
const uint8_t kQ6_KGolden[210] = {0x21, 0xf3, 0xc6, 0x99, 0x6c, 0x3f, 0x02, 0xd5, 0xa8, 0x7b, 0x4e, 0x11,
    0xe4, 0xb7, 0x8a, 0x5d, 0x30, 0xf3, 0xd6, 0x99, 0x7c, 0x3f, 0x11, 0xd5,
    0xa7, 0x8b, 0x4d, 0x21, 0xe3, 0xc7, 0x89, 0x6d, 0xdf, 0x11, 0x36, 0x67,
    0x9c, 0xcd, 0xf2, 0x24, 0x58, 0x8a, 0xbe, 0xe0, 0x12, 0x46, 0x78, 0xac,
    0xd2, 0x0d, 0x3c, 0x67, 0x96, 0xc1, 0xff, 0x1e, 0x59, 0x77, 0xb3, 0xd1,
    0x1d, 0x3b, 0x77, 0x95, 0x9e, 0xff, 0x60, 0x16, 0x87, 0x3c, 0xad, 0x52,
    0x13, 0x79, 0xda, 0x9f, 0xf0, 0x61, 0x16, 0x87, 0xa3, 0xd2, 0x0d, 0x3c,
    0x67, 0x96, 0xc0, 0xff, 0x1e, 0x59, 0x78, 0xb3, 0xd2, 0x1c, 0x3b, 0x76,
    0x95, 0xe2, 0xff, 0x0c, 0x69, 0x76, 0xc3, 0xd0, 0x2d, 0x3a, 0x97, 0xa4,
    0xf1, 0x0e, 0x1b, 0x68, 0x94, 0x33, 0x3f, 0xcd, 0xc9, 0x67, 0x63, 0x01,
    0xfd, 0xfa, 0x98, 0x94, 0x22, 0x2e, 0xcc, 0xc8, 0x44, 0x12, 0xb8, 0x12,
    0xb8, 0x12, 0xbd, 0x47, 0xed, 0x47, 0xed, 0x48, 0x12, 0xb8, 0x12, 0xb8,
    0x1f, 0xe1, 0x4b, 0xe1, 0x4b, 0xe1, 0x44, 0x1e, 0xb4, 0x1e, 0xb4, 0x1f,
    0xe1, 0x4b, 0xe1, 0x4b, 0x6b, 0xd1, 0x54, 0x2e, 0x94, 0x2e, 0x94, 0x2f,
    0xc1, 0x6b, 0xd1, 0x6b, 0xd2, 0x94, 0x2e, 0x94, 0xed, 0x47, 0xf8, 0x12,
    0xb8, 0x12, 0xb8, 0x11, 0x47, 0xed, 0x47, 0xed, 0x47, 0xf8, 0x12, 0xb8,
    0xd6, 0xd7, 0xd8, 0x28, 0x2a, 0x2b, 0xd6, 0xd7, 0xd9, 0x27, 0x2a, 0x2b,
    0x80, 0xd7, 0xd9, 0x26, 0xa6, 0x98};
const uint8_t kTQ1_0Golden[54] = {0x31, 0xbb, 0x94, 0x31, 0xb8, 0x94, 0x31, 0xbb, 0x94, 0x31, 0xbb, 0x94,
    0x31, 0xbb, 0x94, 0x31, 0xbb, 0x94, 0x31, 0xbb, 0x94, 0x31, 0xbb, 0x94,
    0x31, 0xbb, 0x94, 0x31, 0xbb, 0x94, 0x31, 0xbb, 0xcf, 0x6c, 0x45, 0xcf,
    0x6c, 0x45, 0xcf, 0x6c, 0x45, 0xcf, 0x6c, 0x45, 0xcf, 0x6c, 0x45, 0xcf,
    0x43, 0xce, 0x6c, 0x43, 0x00, 0x3a};
const uint8_t kTQ2_0Golden[66] = {0x24, 0x92, 0x49, 0x24, 0x52, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49,
    0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49,
    0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49,
    0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49,
    0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49, 0x24, 0x92, 0x49,
    0x24, 0x92, 0x49, 0x24, 0x00, 0x3a};
const uint8_t kQ8_0Golden[34] = {0x00, 0x3c, 0x7f, 0x81, 0x03, 0xfd, 0x00, 0xff, 0x01, 0x02, 0x03, 0xfd,
    0x64, 0x9b, 0x00, 0x40, 0xc0, 0x08, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,
    0x07, 0x08, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8};
const uint8_t kQ4_0Golden[18] = {0x00, 0x3c, 0xc0, 0x4f, 0xdf, 0x38, 0x88, 0x89, 0x90, 0x7b, 0xac, 0x75,
    0xb9, 0x67, 0xfa, 0x06, 0x8e, 0x82};

void HandQ4K(float* x) {
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 37) % 64 - 20) * 0.03125f;
}
void HandQ6K(float* x) {
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 53) % 97 - 48) * 0.0625f;
  x[200] = -9.0f;  // the largest magnitude is negative
}
void HandTernary(float* x) {
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 5) % 3 - 1) * 0.75f;
  x[100] = 0.0f;
}
// d = 1: codes are round(x), half away from zero (roundf), clamped to +-127.
const float kHandQ8_0[32] = {127, -127, 2.5f, -2.5f, 0.49f, -0.5f, 0.5f, 1.5f, 3, -3, 100.4f, -100.6f, 0, 64, -64, 7.5f,
                             1,   2,    3,    4,     5,     6,     7,    8,    -1, -2, -3,     -4,      -5, -6, -7, -8};
// Signed max -8 -> d = 1; nib = min(15, (int8)(x + 8.5)).
const float kHandQ4_0[32] = {-8, 7,  7.4f, 0,     -0.5f, 0.5f, -7.6f, 3.49f, 3.5f,  -3.5f, 1,
                             -1, 2,  -2,   6,     -6,    4,    -4,    5,     -5,    0.25f, -0.25f,
                             0.75f, -0.75f, 1.5f, -1.5f, 2.5f, -2.5f, 7.9f, -7.9f, 0.1f,  -0.1f};

TEST(QuantizeGolden, HandBuiltBlocks) {
  float x[256];
  HandQ4K(x);
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kQ4_K, x, 256).data(), 144), Hex(kQ4_KGolden, 144));
  HandQ6K(x);
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kQ6_K, x, 256).data(), 210), Hex(kQ6_KGolden, 210));
  HandTernary(x);
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kTQ1_0, x, 256).data(), 54), Hex(kTQ1_0Golden, 54));
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kTQ2_0, x, 256).data(), 66), Hex(kTQ2_0Golden, 66));
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kQ8_0, kHandQ8_0, 32).data(), 34), Hex(kQ8_0Golden, 34));
  EXPECT_EQ(Hex(QuantizeRows(TypeId::kQ4_0, kHandQ4_0, 32).data(), 18), Hex(kQ4_0Golden, 18));
}

// The hand-built blocks decode as the format description says (formats.md), independently of the
// quantizers: checks of single elements against the layout rules.
TEST(QuantizeGolden, HandBuiltBlocksDecodeByLayout) {
  // Q8_0: d = 1.0 (fp16 0x3C00 first), then int8 codes.
  EXPECT_EQ(kQ8_0Golden[0], 0x00);
  EXPECT_EQ(kQ8_0Golden[1], 0x3C);
  EXPECT_EQ(static_cast<int8_t>(kQ8_0Golden[2 + 2]), 3);    // 2.5 -> 3 (half away from zero)
  EXPECT_EQ(static_cast<int8_t>(kQ8_0Golden[2 + 5]), -1);   // -0.5 -> -1
  // Q4_0: element j in the low nibble of qs[j], element j+16 in the high nibble; w = (nib - 8) d.
  EXPECT_EQ(kQ4_0Golden[2 + 0] & 0xF, 0);   // -8
  EXPECT_EQ(kQ4_0Golden[2 + 0] >> 4, 12);   // x[16] = 4
  EXPECT_EQ(kQ4_0Golden[2 + 2] & 0xF, 15);  // 7.4 -> 15 (clamped)
  // TQ2_0: qs[32h + m] holds element 128h + 32n + m at bits 2n; d at byte 64.
  float t[256];
  HandTernary(t);
  for (int e : {0, 1, 2, 37, 100, 130, 255}) {
    const int h = e / 128, n = (e % 128) / 32, m = e % 32;
    const int c = (kTQ2_0Golden[32 * h + m] >> (2 * n)) & 3;
    EXPECT_EQ(static_cast<float>(c - 1) * 0.75f, t[e]) << e;
  }
  EXPECT_EQ(kTQ2_0Golden[64] | (kTQ2_0Golden[65] << 8), 0x3A00);  // fp16(0.75)
  EXPECT_EQ(kTQ1_0Golden[52] | (kTQ1_0Golden[53] << 8), 0x3A00);
  // TQ1_0: qs[m] (m < 32) holds elements m + 32n, first trit most significant, as v/243.
  for (int m : {0, 5, 31}) {
    int v = 0;
    for (int n = 0; n < 5; ++n) v = v * 3 + static_cast<int>(t[m + 32 * n] / 0.75f) + 1;
    EXPECT_EQ(kTQ1_0Golden[m], (v * 256 + 242) / 243) << m;
  }
  // Q6_K: d (fp16) is the last field; the largest |scale| maps to -128 (its sign flips into d).
  const float d6 = Fp16ToFp32(static_cast<uint16_t>(kQ6_KGolden[208] | (kQ6_KGolden[209] << 8)));
  float y[256];
  DequantizeRowQ6_K(kQ6_KGolden, y, 256);
  float hq[256];
  HandQ6K(hq);
  EXPECT_NEAR(y[200], -9.0f, 0.02f * 9.0f);
  EXPECT_NE(d6, 0.0f);
  // Q4_K: decoded values stay within one step of the inputs.
  DequantizeRowQ4_K(kQ4_KGolden, y, 256);
  HandQ4K(hq);
  for (int j = 0; j < 256; ++j) EXPECT_NEAR(y[j], hq[j], 0.1f) << j;
}

// ---- Q8_K (activations of the TQ/K-quant dot products) -----------------------------------------

TEST(QuantizeQ8K, NegativeScaleHalfEvenAndBsums) {
  std::vector<float> x(256, 0.0f);
  x[0] = 127.0f;  // signed max is positive -> iscale = -1, d = -1
  x[1] = 2.5f;    // -2.5 rounds to -2 (half to even; roundf would give -3)
  x[2] = 3.5f;    // -> -4
  x[3] = -0.5f;   // 0.5 -> 0
  x[4] = -127.0f; // -> +127
  x[5] = -1.5f;   // 1.5 -> 2
  x[17] = 10.0f;
  x[255] = -3.0f;
  BlockQ8_K b;
  QuantizeRowQ8_K(x.data(), &b, 256);
  EXPECT_EQ(b.d, -1.0f);
  const int want[6] = {-127, -2, -4, 0, 127, 2};
  for (int j = 0; j < 6; ++j) EXPECT_EQ(b.qs[j], want[j]) << j;
  EXPECT_EQ(b.qs[17], -10);
  EXPECT_EQ(b.qs[255], 3);
  for (int j = 0; j < 16; ++j) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * j + l];
    EXPECT_EQ(b.bsums[j], sum) << j;
  }
  EXPECT_EQ(b.bsums[0], -127 - 2 - 4 + 0 + 127 + 2);
  EXPECT_EQ(b.bsums[1], -10);
  EXPECT_EQ(b.bsums[15], 3);
}

TEST(QuantizeQ8K, FirstLargestMagnitudeWinsAndZeroBlock) {
  std::vector<float> x(512, 0.0f);
  x[0] = -3.0f;  // ties with x[1]; the first one sets the sign of the scale
  x[1] = 3.0f;
  x[2] = 1.0f;
  BlockQ8_K b[2];
  std::memset(b, 0x5A, sizeof(b));
  QuantizeRowQ8_K(x.data(), b, 512);
  EXPECT_GT(b[0].d, 0.0f);  // iscale = -127 / -3 > 0
  EXPECT_EQ(b[0].qs[0], -127);
  EXPECT_EQ(b[0].qs[1], 127);
  EXPECT_EQ(b[0].qs[2], 42);  // 127/3 = 42.33
  EXPECT_FLOAT_EQ(b[0].d, 3.0f / 127.0f);
  // The second block is all zero: d = 0 and every code 0.
  EXPECT_EQ(b[1].d, 0.0f);
  for (int j = 0; j < 256; ++j) ASSERT_EQ(b[1].qs[j], 0);
  // Dequantization is q * d.
  std::vector<float> y(512);
  DequantizeRowQ8_K(b, y.data(), 512);
  EXPECT_FLOAT_EQ(y[1], 127.0f * b[0].d);
  EXPECT_EQ(y[300], 0.0f);
}

TEST(QuantizeQ8K, NearestIntIsHalfEven) {
  EXPECT_EQ(NearestInt(0.5f), 0);
  EXPECT_EQ(NearestInt(1.5f), 2);
  EXPECT_EQ(NearestInt(2.5f), 2);
  EXPECT_EQ(NearestInt(-0.5f), 0);
  EXPECT_EQ(NearestInt(-1.5f), -2);
  EXPECT_EQ(NearestInt(-2.5f), -2);
  EXPECT_EQ(NearestInt(2.4999998f), 2);
  EXPECT_EQ(NearestInt(127.0f), 127);
  EXPECT_EQ(NearestInt(-4194303.0f), -4194303);
}

// ---- I2_S (bitnet.cpp) ----------------------------------------------------------------------------

// bitnet.cpp's quantize_i2_s (x86, 128-weight blocks): scale = max|w| over the tensor; |w| < 1e-6
// gives code 1, otherwise the sign gives 2 or 0; byte 32b + (j % 32) holds weight 128b + j at bit
// shift 6 - 2 (j / 32); the fp32 scale follows the n/4 code bytes.
TEST(QuantizeI2S, LayoutScaleAndTail) {
  const float s = 0.75f;
  std::vector<float> x(256);
  const int t_block0[4] = {+1, 0, -1, +1};  // per 32-group of block 0
  const int t_block1[4] = {-1, -1, 0, +1};
  for (int j = 0; j < 128; ++j) {
    x[j] = s * static_cast<float>(t_block0[j / 32]);
    x[128 + j] = s * static_cast<float>(t_block1[j / 32]);
  }
  x[5] = 0.0f;      // group 0, byte 5: code 1 instead of 2
  x[7] = 5e-7f;     // below the 1e-6 dead zone: code 1
  x[8] = -2e-6f;    // above it: sign -> code 0
  std::vector<uint8_t> q(256 / 4 + 32, 0xAB);
  QuantizeI2S(x.data(), q.data(), 256);
  for (int m = 0; m < 32; ++m) {
    uint8_t want0 = 0x92;  // codes 2,1,0,2 -> 10 01 00 10
    if (m == 5 || m == 7) want0 = 0x52;
    if (m == 8) want0 = 0x12;
    EXPECT_EQ(q[m], want0) << m;
    EXPECT_EQ(q[32 + m], 0x06) << m;  // codes 0,0,1,2
  }
  float scale;
  std::memcpy(&scale, q.data() + 64, 4);
  EXPECT_EQ(scale, s);
  for (size_t i = 68; i < q.size(); ++i) EXPECT_EQ(q[i], 0) << i;

  std::vector<float> y(256);
  ASSERT_TRUE(DequantizeTensor(TypeId::kI2_S, q.data(), q.size(), 256, y.data()).ok());
  for (int i = 0; i < 256; ++i) {
    float want = x[i];
    if (i == 7) want = 0.0f;
    if (i == 8) want = -s;  // sign quantization is lossy off the ternary grid
    EXPECT_EQ(y[i], want) << i;
  }
  // Code 3 never comes out of the quantizer; it decodes as 0.
  std::vector<uint8_t> all3(64 + 32, 0xFF);
  std::memcpy(all3.data() + 64, &s, 4);
  ASSERT_TRUE(DequantizeTensor(TypeId::kI2_S, all3.data(), all3.size(), 256, y.data()).ok());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(y[i], 0.0f);
}

// ---- Round trips ------------------------------------------------------------------------------

struct Bound {
  TypeId type;
  double max_err_over_amax;  // per block: max |x - deq| / max |x| of the block
  double max_nrmse;          // whole input: rms(x - deq) / rms(x)
  double min_nrmse;          // two-sided: the uniform input must show at least this much error
};
// Q8_0: 0.5/127 + 2^-11 (fp16 rounding of d, times up to 127). Q4_0: one step |d| = amax/8 at the
// clamped end (+8 -> 7) plus 8 * 2^-11. Q8_K: 0.5/127 (fp32 d). TQ: 0.5 + 2^-11. K-quants: from
// measurements of llama.cpp's own output on these inputs (Q4_K 0.078, Q6_K 0.019) with margin.
const Bound kBounds[] = {
    {TypeId::kQ8_0, 0.5 / 127 + 1.0 / 2048, 0.006, 0.002},
    {TypeId::kQ4_0, 0.125 + 8.0 / 2048 / 8, 0.09, 0.03},
    {TypeId::kQ4_K, 0.1, 0.08, 0.02},
    {TypeId::kQ6_K, 0.025, 0.02, 0.005},
    {TypeId::kQ8_K, 0.5 / 127 * 1.0001, 0.007, 0.002},
    {TypeId::kTQ1_0, 0.5 + 1.0 / 2048, 0.8, 0.3},
    {TypeId::kTQ2_0, 0.5 + 1.0 / 2048, 0.8, 0.3},
    {TypeId::kF16, 1.0 / 2048, 1.0 / 2048, 1e-6},
    {TypeId::kBF16, 1.0 / 256, 1.0 / 256, 1e-4},
};

void CheckRoundTrip(const Bound& b, const float* x, int64_t n, const std::string& what, double* nrmse) {
  const std::vector<uint8_t> q = QuantizeRows(b.type, x, n);
  const std::vector<float> y = Dequantize(b.type, q, n);
  const int64_t blk = GetTypeTraits(b.type).block_elems == 1 ? 32 : GetTypeTraits(b.type).block_elems;
  double se = 0, sx = 0;
  for (int64_t i0 = 0; i0 < n; i0 += blk) {
    double amax = 0;
    for (int64_t i = i0; i < i0 + blk; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    for (int64_t i = i0; i < i0 + blk; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << TypeName(b.type) << " " << what << " element " << i;
      const double e = std::fabs(static_cast<double>(y[i]) - x[i]);
      if (b.type == TypeId::kF16 || b.type == TypeId::kBF16) {
        // Relative to the element itself; below fp16's normal range the step is 2^-24.
        const double tol = std::fmax(b.max_err_over_amax * std::fabs(x[i]), std::ldexp(1.0, -25));
        ASSERT_LE(e, tol) << TypeName(b.type) << " " << what << " element " << i;
      } else {
        ASSERT_LE(e, b.max_err_over_amax * amax) << TypeName(b.type) << " " << what << " element " << i;
      }
      se += e * e;
      sx += static_cast<double>(x[i]) * x[i];
    }
  }
  *nrmse = sx > 0 ? std::sqrt(se / sx) : std::sqrt(se);
}

TEST(QuantizeRoundTrip, ErrorBoundsOnRandomInputs) {
  std::vector<float> x(kGenElems);
  for (const Bound& b : kBounds) {
    for (int dist = 0; dist < kGenDists; ++dist) {
      if (dist == kTinyScaleDist) continue;
      GenInput(dist, x.data());
      double nrmse = 0;
      CheckRoundTrip(b, x.data(), kGenElems, "distribution " + std::to_string(dist), &nrmse);
      EXPECT_LE(nrmse, b.max_nrmse) << TypeName(b.type) << " distribution " << dist;
      if (dist == 0) {
        EXPECT_GE(nrmse, b.min_nrmse) << TypeName(b.type) << ": suspiciously exact";
      }
    }
  }
}

// Values around 1e-5 make the fp16 block scales of the K-quants underflow; llama.cpp produces the
// same bytes (see the golden hashes), so only finiteness is required here.
TEST(QuantizeRoundTrip, TinyValuesStayFinite) {
  std::vector<float> x(kGenElems);
  GenInput(kTinyScaleDist, x.data());
  for (const Bound& b : kBounds) {
    const std::vector<float> y = Dequantize(b.type, QuantizeRows(b.type, x.data(), kGenElems), kGenElems);
    for (int i = 0; i < kGenElems; ++i) ASSERT_TRUE(std::isfinite(y[i])) << TypeName(b.type) << " " << i;
  }
}

TEST(QuantizeRoundTrip, EdgeInputs) {
  const int64_t n = 512;  // two super-blocks
  for (const Bound& b : kBounds) {
    std::vector<float> zero(n, 0.0f);
    const std::vector<float> yz = Dequantize(b.type, QuantizeRows(b.type, zero.data(), n), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(yz[i], 0.0f) << TypeName(b.type) << " all-zero input, element " << i;

    double nrmse;
    for (float spike : {1.0f, -1.0f, 1000.0f, -0.0078125f}) {
      std::vector<float> x(n, 0.0f);
      x[37] = spike;
      x[300] = -spike * 0.5f;
      CheckRoundTrip(b, x.data(), n, "spike " + std::to_string(spike), &nrmse);
    }
    // The largest magnitude is negative in every block, with a positive runner-up.
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((i * 29) % 41 - 20) * 0.05f;
    for (int64_t i = 0; i < n; i += 32) x[i + 3] = -1.7f;
    CheckRoundTrip(b, x.data(), n, "negative max", &nrmse);
    // Constant blocks (max == min for the asymmetric K-quant search).
    std::vector<float> c(n, 0.3f);
    CheckRoundTrip(b, c.data(), n, "constant", &nrmse);
    std::vector<float> cn(n, -0.3f);
    CheckRoundTrip(b, cn.data(), n, "negative constant", &nrmse);
  }
}

// Ternary weights times one fp16-exact scale per block come back exactly from TQ1_0, TQ2_0 and
// I2_S (one scale per tensor), including all-zero blocks and subnormal scales.
TEST(QuantizeRoundTrip, TernaryTypesAreLosslessOnTernaryTimesScale) {
  const int64_t n = 256 * 8;
  uint64_t s = 7;
  for (float scale : {1.0f, 0.375f, 0.0478515625f, 3.0517578125e-05f, 1024.0f}) {
    ASSERT_EQ(Fp16ToFp32(Fp32ToFp16(scale)), scale);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = scale * static_cast<float>(static_cast<int>(SplitMix(&s) % 3) - 1);
    for (int64_t i = 256; i < 512; ++i) x[i] = 0.0f;                 // an all-zero block
    for (int64_t i = 512; i < 768; ++i) x[i] = (i % 2) ? scale : 0;  // no negative weights
    for (TypeId t : {TypeId::kTQ1_0, TypeId::kTQ2_0, TypeId::kI2_S}) {
      const std::vector<float> y = Dequantize(t, QuantizeRows(t, x.data(), n), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i]) << TypeName(t) << " scale " << scale << " element " << i;
    }
  }
}

// Q4_0 is not lossless on ternary weights: one sign lands on 8|d|, the other on 7|d|, so the
// relative error is exactly 1/8 (formats.md 2.4). Q8_0 stays within the fp16 rounding of s/127.
TEST(QuantizeRoundTrip, Q4_0AndQ8_0OnTernaryWeights) {
  const float s = 0.046875f;
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = s * static_cast<float>(i % 3 - 1);
  const std::vector<float> y4 = Dequantize(TypeId::kQ4_0, QuantizeRows(TypeId::kQ4_0, x.data(), 64), 64);
  const std::vector<float> y8 = Dequantize(TypeId::kQ8_0, QuantizeRows(TypeId::kQ8_0, x.data(), 64), 64);
  double max4 = 0, max8 = 0;
  for (int i = 0; i < 64; ++i) {
    if (x[i] == 0) {
      EXPECT_EQ(y4[i], 0.0f);
      EXPECT_EQ(y8[i], 0.0f);
      continue;
    }
    max4 = std::fmax(max4, std::fabs(y4[i] - x[i]) / std::fabs(x[i]));
    max8 = std::fmax(max8, std::fabs(y8[i] - x[i]) / std::fabs(x[i]));
  }
  EXPECT_DOUBLE_EQ(max4, 0.125);
  EXPECT_LE(max8, 4e-4);
}

}  // namespace
}  // namespace trine
