// A 256-entry byte table lookup with AVX-512 VBMI, shared by the translation units built with
// -mavx512vbmi (the TQ1_0 decode kernel and the AMX kernel's TQ1_0 spread); only reached where the
// CPU has VBMI (Tq1X16Enabled, AmxAvailable).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace trine::kernels {

// A 256-entry byte table as four 64-byte vectors.
struct Table256 {
  __m512i t[4];
};

inline Table256 LoadTable256(const uint8_t* table) {
  Table256 r;
  for (int i = 0; i < 4; ++i) r.t[i] = _mm512_loadu_si512(table + 64 * i);
  return r;
}

// table[q] for each byte q (top = the bytes' top bits, _mm512_movepi8_mask(q)): vpermi2b indexes
// 128 entries with the low 7 bits; the top bit picks the half.
inline __m512i Lookup256(const Table256& tb, __m512i q, __mmask64 top) {
  const __m512i lo = _mm512_permutex2var_epi8(tb.t[0], q, tb.t[1]);
  const __m512i hi = _mm512_permutex2var_epi8(tb.t[2], q, tb.t[3]);
  return _mm512_mask_blend_epi8(top, lo, hi);
}

}  // namespace trine::kernels
