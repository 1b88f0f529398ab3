// The TQ1_0 x16 layout as the x86 kernels read it (WeightView::interleave = 16, kernels/repack.h):
// no intrinsics here, only where each byte's trits belong and the lookup tables that decode them,
// shared by the AVX-512 VBMI decode kernel, the AMX prefill kernel and the fp32-activation kernel.
//
// A TQ1_0 block (256 values) is qs[48] + qh[4] + fp16 d. Byte q holds five base-3 digits as a
// fixed-point fraction: digit n is ((q * 3^n) mod 256) * 3 >> 8, in {0, 1, 2} for every byte
// value (the reference's decode, llama.cpp's too). In the x16 layout a block's 52 code bytes are
// 13 lines of 64 bytes: line l holds in dword lane i the bytes 4l .. 4l+3 of row i's block, so
// lines 0-11 are qs and line 12 is qh.
#pragma once

#include <array>
#include <cstdint>

namespace trine::kernels {

constexpr int kTq1Lines = 13;      // 64-byte lines per block of a 16-row group
constexpr int kTq1QsLines = 12;    // of which hold five digits per byte (qs); line 12 holds four (qh)

// Digit n (0..4) of a TQ1_0 byte, exactly the reference's formula.
constexpr uint8_t Tq1Digit(uint8_t q, int n) {
  uint8_t x = q;
  for (int i = 0; i < n; ++i) x = static_cast<uint8_t>(x * 3);
  return static_cast<uint8_t>((static_cast<unsigned>(x) * 3) >> 8);
}

// Block element of digit n of byte p (0..3) of line l's dword: qs[0..31] hold elements m + 32n,
// qs[32..47] elements 160 + m + 16n, qh[0..3] elements 240 + m + 4n (m = the byte's index there).
constexpr int Tq1Element(int l, int n, int p) {
  return l < 8 ? 32 * n + 4 * l + p : (l < kTq1QsLines ? 160 + 16 * n + 4 * (l - 8) + p : 240 + 4 * n + p);
}

// Byte -> digits 0..3 as 2-bit fields (digit n at bits 2n), the TQ2_0 code-byte form the
// int8-dot kernels consume in place under masks; and byte -> digit 4.
struct Tq1Tables {
  alignas(64) std::array<uint8_t, 256> digits0123;
  alignas(64) std::array<uint8_t, 256> digit4;
};

constexpr Tq1Tables MakeTq1Tables() {
  Tq1Tables t{};
  for (int q = 0; q < 256; ++q) {
    uint8_t packed = 0;
    for (int n = 0; n < 4; ++n) packed = static_cast<uint8_t>(packed | (Tq1Digit(static_cast<uint8_t>(q), n) << (2 * n)));
    t.digits0123[static_cast<size_t>(q)] = packed;
    t.digit4[static_cast<size_t>(q)] = Tq1Digit(static_cast<uint8_t>(q), 4);
  }
  return t;
}

inline constexpr Tq1Tables kTq1Tables = MakeTq1Tables();

}  // namespace trine::kernels
