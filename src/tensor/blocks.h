// Block structs of every quantized format trine reads, byte-compatible with llama.cpp (ggml-common.h)
// and bitnet.cpp. Each comment gives bits per weight, element order and where the scale sits.
// Layouts are the on-disk ones on every ISA; kernels repack at load time, never here.
#pragma once

#include <cstdint>

namespace trine {

constexpr int kQK4_0 = 32;
constexpr int kQK8_0 = 32;
constexpr int kQK_K = 256;
constexpr int kQKI2S = 128;  // I2_S block (x86 layout of bitnet.cpp)

// Q4_0, 4.5 bpw: fp16 d FIRST, then 16 bytes; element j (0..15) = low nibble of qs[j],
// element j+16 = high nibble. w = (nib - 8) * d.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "block_q4_0 size");

// Q8_0, 8.5 bpw: fp16 d, 32 int8. w = q * d.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "block_q8_0 size");

// Q4_K, 4.5 bpw: fp16 d, fp16 dmin, 12 bytes of packed 6-bit scales/mins, 128 bytes of nibbles.
// 8 groups of 32: value = d*sc_j*q - dmin*m_j; groups 2i/2i+1 share qs[32i..32i+31] (low/high).
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "block_q4_K size");

// Q6_K, 6.5625 bpw: ql (low 4 bits), qh (high 2 bits), int8 scales per 16, fp16 d LAST.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "block_q6_K size");

// Q8_K (activations only), 9.125 bpw: fp32 d (negative when the signed max is positive),
// 256 int8, and bsums[j] = sum of qs[16j..16j+15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "block_q8_K size");

// TQ1_0, 1.6875 bpw: base-3 trits packed 5 per byte (qs: elements 0..239), 4 per byte (qh:
// 240..255), fp16 d at byte 52. Code c = t + 1 in {0,1,2}; w = (c - 1) * d.
struct BlockTQ1_0 {
  uint8_t qs[(kQK_K - 4 * kQK_K / 64) / 5];
  uint8_t qh[kQK_K / 64];
  uint16_t d;
};
static_assert(sizeof(BlockTQ1_0) == 54, "block_tq1_0 size");

// TQ2_0, 2.0625 bpw: 2-bit codes c = t + 1; byte qs[32h + m] holds element 128h + 32n + m in bits
// 2n..2n+1; fp16 d at byte 64. w = (c - 1) * d.
struct BlockTQ2_0 {
  uint8_t qs[kQK_K / 4];
  uint16_t d;
};
static_assert(sizeof(BlockTQ2_0) == 66, "block_tq2_0 size");

// I2_S (bitnet.cpp, x86 layout), 2 bpw + one fp32 scale per TENSOR: 128-weight blocks of 32 bytes;
// byte m of a block holds weights m, m+32, m+64, m+96 in bits 7-6, 5-4, 3-2, 1-0. Code c = t + 1
// (code 3 decodes as 0). The fp32 scale follows the codes at byte n/4; 32 tail bytes in all.
struct BlockI2S {
  uint8_t qs[kQKI2S / 4];
};
static_assert(sizeof(BlockI2S) == 32, "block_i2_s size");
constexpr int kI2STailBytes = 32;

}  // namespace trine
