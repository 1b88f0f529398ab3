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

// The layout does not keep the file's byte values: the loader recodes each byte (Tq1Codec) into
// a layout byte e = r | s << 6 | t << 7 whose digits are cheap to look up with AVX-512 VBMI, where
// vpermb (64 entries, 1 uop) is much cheaper than vpermi2b (128 entries; 3 uops, 2 cycles of
// port 5 on Intel cores):
//   digit 4          = digit4[r]                                  (one vpermb)
//   digits 0..3 code = low7[e & 0x7F] + (t ? top[r] : 0)          (one vpermi2b, one zero-masked
//                                                                  vpermb, one byte add)
// (digit n at bits 2n, the TQ2_0 code-byte form the int8-dot kernels consume in place under
// masks), against two vpermi2b and a blend for a 256-entry table plus one for digit 4 before.
// So each r (64 values) is a "group" of four layout bytes with one digit 4 and the digits-0..3
// tuples {a, c, a + Q, c + Q} (a = low7 of s = 0, c = of s = 1, Q = top[r]): the code needs the
// 81 tuples of each digit-4 value split into such groups. With 9 = the 3 x 3 square of two
// digits, its centre o aside, the 8 others are two groups: the corners {(0,0), (2,0), (0,2),
// (2,2)} (a = (0,0), c = (0,2), Q = (2,0)) and the edges {(1,0), (2,1), (0,1), (1,2)} (a = (1,0),
// c = (0,1), Q = (1,1)). Digits (0,1) x digits (2,3) = 81 = C x C + C x {o} + {o} x C + (o, o)
// (C = the 8 non-centre points): 8 x 2 groups {x} x G, 2 groups G x {o}, 2 groups {o} x G and the
// centre alone, 21 groups per digit-4 value, 63 of the 64 r (r = 63 repeats r = 20, unused).
// (Why this shape: each group's digit sums are even, and so are the square's once o is out.)
//
// recode maps file byte -> e (the lowest layout byte with its five digits); file_byte maps e ->
// the byte the quantizer writes for e's digits (RowData gives the file's rows back with it: every
// byte a quantizer writes comes back as itself, the 13 others as the byte of the same five
// digits). digits0123 is the same decode as one 256-entry table (for the compile-time check below
// and the tests); digit4 repeats its 64 entries in its upper half, so 6 or 7 index bits both work.
// The VBMI kernels decode with kernels/x86/avx512/tq1_decode_vbmi.h.
struct Tq1Codec {
  alignas(64) std::array<uint8_t, 256> digits0123;
  alignas(64) std::array<uint8_t, 128> digit4;
  alignas(64) std::array<uint8_t, 128> low7;
  alignas(64) std::array<uint8_t, 64> top;
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

// Digits (d0, d1, d2, d3) as the code byte d0 + 4 d1 + 16 d2 + 64 d3.
constexpr uint8_t Tq1Code(int d0, int d1, int d2, int d3) { return static_cast<uint8_t>(d0 | d1 << 2 | d2 << 4 | d3 << 6); }

constexpr Tq1Codec MakeTq1Codec() {
  Tq1Codec c{};
  // The 3 x 3 square's two groups as (a, c, Q), each point a digit pair (x, y).
  constexpr int kSquare[2][3][2] = {{{0, 0}, {0, 2}, {2, 0}}, {{1, 0}, {0, 1}, {1, 1}}};
  constexpr int kNonCentre[8][2] = {{0, 0}, {1, 0}, {2, 0}, {0, 1}, {2, 1}, {0, 2}, {1, 2}, {2, 2}};
  for (int r = 0; r < 64; ++r) {
    const int g = r < 63 ? r % 21 : 20;  // group within its digit-4 value
    int a[4] = {1, 1, 1, 1}, cc[4] = {1, 1, 1, 1}, q[4] = {0, 0, 0, 0};  // centre (g = 20)
    if (g < 16) {  // {x} x G: digits 0,1 fixed to x, the group in digits 2,3
      const int* x = kNonCentre[g / 2];
      const auto& G = kSquare[g % 2];
      a[0] = cc[0] = x[0];
      a[1] = cc[1] = x[1];
      a[2] = G[0][0], a[3] = G[0][1], cc[2] = G[1][0], cc[3] = G[1][1], q[2] = G[2][0], q[3] = G[2][1];
    } else if (g < 20) {  // G x {o} (g = 16, 17) or {o} x G (g = 18, 19)
      const auto& G = kSquare[g % 2];
      const int k = g < 18 ? 0 : 2;
      a[k] = G[0][0], a[k + 1] = G[0][1], cc[k] = G[1][0], cc[k + 1] = G[1][1], q[k] = G[2][0], q[k + 1] = G[2][1];
    }
    c.low7[static_cast<size_t>(r)] = Tq1Code(a[0], a[1], a[2], a[3]);
    c.low7[static_cast<size_t>(r + 64)] = Tq1Code(cc[0], cc[1], cc[2], cc[3]);
    c.top[static_cast<size_t>(r)] = Tq1Code(q[0], q[1], q[2], q[3]);
    c.digit4[static_cast<size_t>(r)] = c.digit4[static_cast<size_t>(r + 64)] = static_cast<uint8_t>(r < 63 ? r / 21 : 0);
  }
  // Layout byte -> its digits, and each five-digit value's lowest layout byte.
  std::array<int, 243> byte_of{};
  for (int v = 0; v < 243; ++v) byte_of[static_cast<size_t>(v)] = -1;
  for (int e = 0; e < 256; ++e) {
    const size_t lo = static_cast<size_t>(e & 0x7F), r = static_cast<size_t>(e & 0x3F);
    const uint8_t code = static_cast<uint8_t>(c.low7[lo] + (e >= 0x80 ? c.top[r] : 0));
    c.digits0123[static_cast<size_t>(e)] = code;
    int v = 0;
    for (int n = 0; n < 4; ++n) v = 3 * v + ((code >> (2 * n)) & 3);
    v = 3 * v + c.digit4[lo];
    if (byte_of[static_cast<size_t>(v)] < 0) byte_of[static_cast<size_t>(v)] = e;
    c.file_byte[static_cast<size_t>(e)] = Tq1QuantizerByte(v);
  }
  for (int q = 0; q < 256; ++q) {
    c.recode[static_cast<size_t>(q)] = static_cast<uint8_t>(byte_of[static_cast<size_t>(Tq1Value(static_cast<uint8_t>(q)))]);
  }
  return c;
}

inline constexpr Tq1Codec kTq1Codec = MakeTq1Codec();

// Every file byte's recoded byte decodes (digits0123, digit4) to the file byte's five digits: a
// broken group table fails the build, not only Tq1X16.CodecKeepsEveryByteValuesDigits.
constexpr bool Tq1CodecKeepsDigits() {
  for (int q = 0; q < 256; ++q) {
    const uint8_t b = static_cast<uint8_t>(q), e = kTq1Codec.recode[b];
    for (int n = 0; n < 4; ++n) {
      if (((kTq1Codec.digits0123[e] >> (2 * n)) & 3) != Tq1Digit(b, n)) return false;
    }
    if (kTq1Codec.digit4[e & 0x7F] != Tq1Digit(b, 4)) return false;
  }
  return true;
}
static_assert(Tq1CodecKeepsDigits(), "Tq1Codec must give every file byte's digits back");

}  // namespace trine::kernels
