// vpdpbusd against 4 signed bytes in memory broadcast to every lane, with the broadcast embedded
// in the instruction ({1to16} memory operand). GCC 12 does not fold _mm512_set1_epi32 of a load
// into vpdpbusd: it emits a separate vpbroadcastd, which on Zen 5 competes with vpdpbusd for the
// vector pipes. Twelve independent chains: 4.45 G vpdpbusd/s with separate broadcasts, 6.70 G/s
// (2 per cycle) embedded. Included by AVX-512 VNNI translation units only.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace trine::kernels {

// acc + per lane dot(u8 lane bytes of `codes`, the 4 int8 at p), broadcast by a separate
// vpbroadcastd (what _mm512_set1_epi32 of a load compiles to).
inline __m512i DpbusdSet1(__m512i acc, __m512i codes, const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_dpbusd_epi32(acc, codes, _mm512_set1_epi32(v));
}

// The same sum with the broadcast embedded in the vpdpbusd.
inline __m512i DpbusdBcast(__m512i acc, __m512i codes, const void* p) {
#if defined(__GNUC__) || defined(__clang__)
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(codes), "m"(*static_cast<const int32_t*>(p)));
  return acc;
#else
  return DpbusdSet1(acc, codes, p);
#endif
}

// The form for a kernel pass over T tokens: embedded from 2 tokens on (prefill is bound by the
// vector pipes), the separate vpbroadcastd for one token. Decode streams its weights from DRAM,
// and there the embedded form measured slower: bitnet-2b TQ2_0 tg64 at 1 thread, four
// alternating rounds, 28.0-29.7 tok/s embedded against 29.8-30.8 separate. (The TQ1_0 kernel,
// bound by its lookups rather than DRAM, embeds at every T: gemm_tq1_vbmi.cc.)
template <int T>
inline __m512i DpbusdAct(__m512i acc, __m512i codes, const void* p) {
  if constexpr (T == 1) {
    return DpbusdSet1(acc, codes, p);
  } else {
    return DpbusdBcast(acc, codes, p);
  }
}

}  // namespace trine::kernels
