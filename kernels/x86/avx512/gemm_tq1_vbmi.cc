// TQ1_0 read in place: ternary x Q8_K on the TQ1_0 x16 layout (kernels/x86/tq1_x16.h), AVX-512
// with VBMI. Compiled with its own flags (the AVX-512 set plus -mavx512vbmi); reached only for
// views the loader built, which it does only when the CPU has VBMI (WantsX16).
//
// Why: repacking TQ1_0 (1.6875 bits per weight) to TQ2_0 (2.0625) costs 22 % more resident
// memory and 22 % more bytes read per decoded token. Decoding base-3 bytes costs more instructions
// than TQ2_0's masks; decode is then bound by memory and these instructions at once.
//
// Decode of a 64-byte line (16 rows x 4 recoded bytes, Tq1Codec): one vpermi2b on the low 7 bits
// plus a zero-masked vpermb under the top bit and a byte add turn every byte into the TQ2_0
// code-byte form of its digits 0..3 (digit n at bits 2n); one vpermb on the low 6 bits gives
// digit 4 (on Intel cores vpermi2b costs two cycles of port 5, vpermb one). The code byte is then
// used exactly like a TQ2_0 line: under the masks 0x03, 0x0C, 0x30, 0xC0, one vpdpbusd per digit
// against the broadcast 4 activation bytes of the matching elements, one accumulator per digit
// position with the 4^n scale shifted out once per block (exact). Per 64 bytes (320 weights):
// 1 vpermi2b, 2 vpermb, 1 add, 1 mask move, 4 ANDs and 5 vpdpbusd per token, no horizontal
// reductions.
// Integer sums are exact, and the float combination per block is the reference's
// (acc += sumi * (d_w * d_a)), 16 rows wide: bit-identical to GemmRef.
#include <immintrin.h>

#include "kernels.h"
#include "tensor/blocks.h"
#include "x86/avx512/dpbusd_bcast.h"
#include "x86/avx512/tq1_decode_vbmi.h"
#include "x86/avx512/x16_groups_avx512.h"
#include "x86/q8k_act_sums.h"
#include "x86/tq1_x16.h"

namespace trine::kernels {
namespace {

// Lines decoded ahead (Tq1X16Block): three at 1 and 2 tokens, one at 3 (what its 15
// accumulators leave registers for; not measured on its own), none at 4: with 20 accumulators it
// spilled (t4 -10 %).
template <int T>
constexpr int kTq1Ahead = T <= 2 ? 3 : (T == 3 ? 1 : 0);

// The decoded lines in flight between blocks of a group: slot l holds line l of the next block.
template <int T>
struct Tq1Pipe {
  __m512i c[kTq1Ahead<T> + 1], c4[kTq1Ahead<T> + 1];
};

// One block of a TQ1_0 x16 group (13 lines) against T tokens' Q8_K blocks: s[t] lane i = sum over
// the block of digit * activation for row i (digits are t + 1; the caller subtracts the bias).
// pipe: this block's first kTq1Ahead lines, already decoded (first: not yet, decode them here);
// on return, the next block's (next_lines: its code lines, nullptr when the group has none; right
// after this block's lines, or after a scale line: X16CodesOffset).
template <int T>
inline void Tq1X16Block(const uint8_t* lines, const uint8_t* next_lines, const Tq1Tables& tb,
                        const int8_t* const a[T], const LinePrefetch& pf, bool first, Tq1Pipe<T>& pipe,
                        __m512i s[T]) {
  const bool has_next = next_lines != nullptr;
  // Five accumulators per token (digits 0..3 at 4^n, digit 4 at 1): each chain gets one vpdpbusd
  // per line, enough independent chains to hide its latency without a second set at T = 1.
  // The activation broadcasts are embedded in the vpdpbusd at every T, decode included (unlike
  // DpbusdAct<1>): the lookups keep the vector pipes busy, so a separate vpbroadcastd per
  // vpdpbusd costs here. bitnet2b.ffn_up/t1 in cache 39.9 -> 42.1 GB/s; bitnet-2b TQ1_0 tg64 at 1
  // thread, six alternating rounds: the embedded form ahead in five, by 1.5 % on average.
  const __m512i m[4] = {_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C), _mm512_set1_epi8(0x30),
                        _mm512_set1_epi8(static_cast<char>(0xC0))};
  __m512i acc[5][T];
  for (int n = 0; n < 5; ++n) {
    for (int t = 0; t < T; ++t) acc[n][t] = _mm512_setzero_si512();
  }
  // Fully unrolled: the activation offsets are constants and the accumulators stay in registers.
  // Software-pipelined across the group's blocks: line l + kAhead's load and lookups are issued
  // before line l's vpdpbusd, so a line's long load -> lookup -> blend -> AND chain overlaps
  // earlier lines' products instead of queueing behind them, and the group's lines load at an
  // even pace over block boundaries. Alternating against the plain line order (kernels/README.md):
  // llama1b.attn_kv/t1 (L2) 46 -> 51-53 GB/s, dram.1g/t1 25-27 -> 28-35; tg64 at 1 / 2 threads,
  // bitnet-2b TQ1_0 39-41 / 67-71 vs 34-37 / 60-65 tok/s, llama-1b TQ1_0 69-73 / 123-127 vs
  // 54-58 / 99-107.
  // decode(l): line l of this block (l >= kTq1Lines: line l - kTq1Lines of the next one).
  const auto decode = [&](int l, __m512i* c, __m512i* c4) {
    pf.Line(l);
    const __m512i q = _mm512_load_si512(l < kTq1Lines ? lines + 64 * l : next_lines + 64 * (l - kTq1Lines));
    *c = Tq1Digits0123(tb, q);
    if (l % kTq1Lines < kTq1QsLines) *c4 = Tq1Digit4(tb, q);
  };
  constexpr int kAhead = kTq1Ahead<T>;
  constexpr int kSlots = kAhead + 1;
  __m512i cq[kSlots], c4q[kSlots];
  for (int i = 0; i < kSlots; ++i) {
    cq[i] = pipe.c[i];
    c4q[i] = pipe.c4[i];
  }
  if (first) {
    for (int i = 0; i < kAhead; ++i) decode(i, &cq[i], &c4q[i]);
  }
#pragma GCC unroll 13
  for (int l = 0; l < kTq1Lines; ++l) {
    if (l + kAhead < kTq1Lines || has_next) decode(l + kAhead, &cq[(l + kAhead) % kSlots], &c4q[(l + kAhead) % kSlots]);
    const __m512i c = cq[l % kSlots], c4 = c4q[l % kSlots];
#pragma GCC unroll 4
    for (int n = 0; n < 4; ++n) {
      const __m512i cn = _mm512_and_si512(c, m[n]);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[n][t] = DpbusdBcast(acc[n][t], cn, a[t] + Tq1Element(l, n, 0));
      }
    }
    if (l < kTq1QsLines) {  // qs bytes carry a fifth digit
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        acc[4][t] = DpbusdBcast(acc[4][t], c4, a[t] + Tq1Element(l, 4, 0));
      }
    }
  }
  for (int i = 0; i < kAhead; ++i) {
    pipe.c[i] = cq[(kTq1Lines + i) % kSlots];
    pipe.c4[i] = c4q[(kTq1Lines + i) % kSlots];
  }
  for (int t = 0; t < T; ++t) {
    s[t] = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(acc[0][t], acc[4][t]), _mm512_srai_epi32(acc[1][t], 2)),
                            _mm512_add_epi32(_mm512_srai_epi32(acc[2][t], 4), _mm512_srai_epi32(acc[3][t], 6)));
  }
}

}  // namespace

// Distance of the L1 prefetch stream ahead of the block being read, as in the TQ2_0 x16 kernel.
// 4 KB against 8 KB with the prefetches a line at a time (LinePrefetch), bitnet-2b TQ1_0 decode,
// alternating: 83-84 % vs 80-81 % of --membw at 1 thread, 82-91 % vs 75-78 % at 2.
constexpr size_t kTq1NearPrefetch = 4096;

// Ternary x Q8_K on the TQ1_0 x16 layout (the caller checks the layout), any token count (up to 4
// tokens per pass over a group).
void GemmTq1X16Vbmi(const WeightView& w, const uint8_t* xq, size_t act_stride, int n_tokens, float* y, int64_t ldy,
                    int64_t r0, int64_t r1, float scale) {
  const int64_t nb = w.cols / kQK_K;
  ActSums& sums = GetActSums();
  GatherActSums(xq, act_stride, n_tokens, nb, &sums);
  const Tq1Tables tb = LoadTq1Tables();
  ForTokenPasses<4>(n_tokens, [&](auto tc, int t0) {
    constexpr int T = decltype(tc)::value;
    const BlockQ8_K* act[T];
    for (int t = 0; t < T; ++t) act[t] = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t0 + t));
    ForX16Groups<T>(w, t0, y, ldy, r0, r1, scale, [&](const uint8_t* gp, const uint8_t* next, __m512* out) {
      Tq1Pipe<T> pipe;
      for (int i = 0; i <= kTq1Ahead<T>; ++i) pipe.c[i] = pipe.c4[i] = _mm512_setzero_si512();
      TernaryX16Group<T>(gp, next, nb, 64 * kTq1Lines, kTq1NearPrefetch, t0, sums,
                         [&](const uint8_t* lines, int64_t b, const LinePrefetch& pf, __m512i* s) {
                           const int8_t* a[T];
                           for (int t = 0; t < T; ++t) a[t] = act[t][b].qs;
                           const uint8_t* next_lines =
                               b + 1 < nb ? gp + X16CodesOffset(b + 1, 64 * kTq1Lines) : nullptr;
                           Tq1X16Block<T>(lines, next_lines, tb, a, pf, b == 0, pipe, s);
                         },
                         out);
    });
  });
}

}  // namespace trine::kernels
