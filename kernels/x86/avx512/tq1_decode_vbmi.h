// Decode of a TQ1_0 x16 layout line (kernels/x86/tq1_x16.h, Tq1Codec) with AVX-512 VBMI, shared by
// the translation units built with -mavx512vbmi (the TQ1_0 decode kernel and the AMX kernel's
// TQ1_0 spread); only reached where the CPU has VBMI (Tq1X16Enabled, AmxAvailable).
#pragma once

#include <immintrin.h>

#include "x86/tq1_x16.h"

namespace trine::kernels {

// The code's tables in registers: digits 0-3 = low7[e & 0x7F] + (top bit ? top[e & 0x3F] : 0),
// digit 4 = digit4[e & 0x3F].
struct Tq1Tables {
  __m512i low7[2], top, digit4;
};

inline Tq1Tables LoadTq1Tables() {
  return {{_mm512_load_si512(kTq1Codec.low7.data()), _mm512_load_si512(kTq1Codec.low7.data() + 64)},
          _mm512_load_si512(kTq1Codec.top.data()),
          _mm512_load_si512(kTq1Codec.digit4.data())};
}

// Digits 0-3 of each layout byte of q as a TQ2_0 code byte (digit n at bits 2n): one vpermi2b, one
// zero-masked vpermb and a byte add (a 256-entry table would take two vpermi2b, 2 cycles of port 5
// each on Intel cores, and a blend).
inline __m512i Tq1Digits0123(const Tq1Tables& tb, __m512i q) {
  return _mm512_add_epi8(_mm512_permutex2var_epi8(tb.low7[0], q, tb.low7[1]),
                         _mm512_maskz_permutexvar_epi8(_mm512_movepi8_mask(q), q, tb.top));
}

// Digit 4 of each layout byte of q (vpermb reads the low 6 bits).
inline __m512i Tq1Digit4(const Tq1Tables& tb, __m512i q) { return _mm512_permutexvar_epi8(q, tb.digit4); }

}  // namespace trine::kernels
