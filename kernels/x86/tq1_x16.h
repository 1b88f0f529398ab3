// The TQ1_0 x16 layout as the x86 kernels read it (WeightView::interleave = 16, kernels/repack.h):
// no intrinsics here, only where each byte's trits belong and the lookup tables that decode them,
// shared by the AVX-512 VBMI decode kernel, the AMX prefill kernel, the fp32-activation kernel,
// the loader (repack.cc recodes the bytes) and RowData (which maps them back).
//
// A TQ1_0 block (256 values) is qs[48] + qh[4] + fp16 d. Byte q holds five base-3 digits as a
// fixed-point fraction: digit n is ((q * 3^n) mod 256) * 3 >> 8, in {0, 1, 2} for every byte
// value (the reference's decode, llama.cpp's too). In the x16 layout a block's 52 code bytes are
// 13 lines of 64 bytes: line l holds in dword lane i the bytes 4l .. 4l+3 of row i's block
// (recoded, Tq1Codec below), so lines 0-11 are qs and line 12 is qh.
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

// The layout does not keep the file's byte values: the loader recodes each byte (Tq1Codec) so
// that digit 4 is a function of the byte's low 7 bits. vpermi2b indexes 128 entries with those
// bits, so digit 4 costs one lookup instead of a 256-entry lookup's two plus a blend (digits 0-3
// still take the 256-entry lookup: no code lets four digits depend on 7 bits). It works because 243
// digit tuples fit in 128 pairs of bytes (b, b | 0x80) that share digit 4: each of the three
// digit-4 classes has 81 tuples, 40 pairs and a single, 123 pairs in all.
//
// Layout byte e -> digits 0..3 as 2-bit fields (digit n at bits 2n, the TQ2_0 code-byte form the
// int8-dot kernels consume in place under masks); e & 0x7F -> digit 4; file byte -> e; and e -> the
// byte the quantizer writes for e's digits (RowData gives the file's rows back with it: every byte
// a quantizer writes comes back as itself, the 13 others as the byte of the same five digits).
struct Tq1Codec {
  alignas(64) std::array<uint8_t, 256> digits0123;
  alignas(64) std::array<uint8_t, 128> digit4;
  std::array<uint8_t, 256> recode;
  std::array<uint8_t, 256> file_byte;
};

// The five digits of file byte q as one base-3 number, digit 0 the most significant: the value
// the quantizer packed, which writes q = ceil(v * 256 / 243) (Tq1QuantizerByte).
constexpr int Tq1Value(uint8_t q) {
  int v = 0;
  for (int n = 0; n < 5; ++n) v = 3 * v + Tq1Digit(q, n);
  return v;
}

constexpr uint8_t Tq1QuantizerByte(int v) { return static_cast<uint8_t>((v * 256 + 242) / 243); }

constexpr Tq1Codec MakeTq1Codec() {
  Tq1Codec c{};
  // Layout byte of each value v (0..242): the values with digit 4 = d (v % 3 == d) take slots in
  // order, two values per slot (layout bytes s and s | 0x80), slot s's digit 4 being d.
  std::array<uint8_t, 243> byte_of{};
  int slot = 0;
  for (int d = 0; d < 3; ++d) {
    for (int k = 0; k < 81; ++k) {
      const int v = 3 * k + d;
      byte_of[static_cast<size_t>(v)] = static_cast<uint8_t>(slot + (k % 2 == 0 ? 0 : 0x80));
      c.digit4[static_cast<size_t>(slot)] = static_cast<uint8_t>(d);
      if (k % 2 == 1 || k == 80) ++slot;
    }
  }
  for (int v = 0; v < 243; ++v) {
    const uint8_t e = byte_of[static_cast<size_t>(v)], q = Tq1QuantizerByte(v);
    uint8_t packed = 0;
    for (int n = 0; n < 4; ++n) packed = static_cast<uint8_t>(packed | (Tq1Digit(q, n) << (2 * n)));
    c.digits0123[e] = packed;
    c.file_byte[e] = q;
  }
  for (int q = 0; q < 256; ++q) c.recode[static_cast<size_t>(q)] = byte_of[static_cast<size_t>(Tq1Value(static_cast<uint8_t>(q)))];
  return c;
}

inline constexpr Tq1Codec kTq1Codec = MakeTq1Codec();

}  // namespace trine::kernels
