// The ISA-neutral parts of the walk over an x16 layout (WeightView::interleave = 16) that the
// AVX-512 and AVX2 kernels share: token passes, the line prefetches of a block step and the block
// walk of one 16-row group. Only SSE prefetches here, so any x86 translation unit may include it.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels.h"

namespace trine::kernels {
// Internal linkage: the AVX2 and AVX-512 translation units are compiled with different flags, and
// one shared inline copy picked by the linker could carry the other's instructions.
namespace {

namespace x16_detail {

template <int T, typename PassFn>
inline void RemainderPass(int rem, int t0, PassFn& pass) {
  if constexpr (T > 0) {
    if (rem == T) {
      pass(std::integral_constant<int, T>{}, t0);
      return;
    }
    RemainderPass<T - 1>(rem, t0, pass);
  }
}

}  // namespace x16_detail

// pass(std::integral_constant<int, T>{}, t0) for tokens t0 .. t0 + T - 1: passes of kMax tokens,
// then one pass with the rest (a group is a few tens of KB, so later passes read it from L1/L2).
template <int kMax, typename PassFn>
inline void ForTokenPasses(int n_tokens, PassFn&& pass) {
  int t0 = 0;
  for (; t0 + kMax <= n_tokens; t0 += kMax) pass(std::integral_constant<int, kMax>{}, t0);
  x16_detail::RemainderPass<kMax - 1>(n_tokens - t0, t0, pass);
}

// The prefetches of one block step, issued by the block's own line loop (Line(k) just before
// line k is loaded): `near` is this stream `near_prefetch` bytes ahead, into L1 (nullptr: none),
// `far` the next group's block, into L2, each one line per line read. Issued as one burst at the
// start of the block step instead, the prefetches queued ahead of the step's loads, which then
// waited on them: llama-1b TQ2_0 decode read 11.7-12.6 GB/s in its TQ2_0 matrices that way,
// 14.5-16.8 spread out (kernels/README.md, "Prefetch").
struct LinePrefetch {
  const uint8_t* near = nullptr;
  const uint8_t* far = nullptr;
  void Line(int k) const {
    // As volatile asm: the compiler keeps them in place between the lines' loads. Left to it, the
    // _mm_prefetch builtins of a fully unrolled block were scheduled together at its start,
    // which is the burst again (bitnet-2b TQ2_0 decode 15.3-16.1 tok/s instead of 17.3-17.8).
    if (near != nullptr) asm volatile("prefetcht0 %0" : : "m"(near[64 * k]));
    asm volatile("prefetcht1 %0" : : "m"(far[64 * k]));
  }
};

// The next group's scale line that holds block b's scales, into L2: once per pair of blocks (b
// even; block b + 1's scales share the line, X16ScalesOffset).
inline void PrefetchX16ScaleLine(const uint8_t* next, int64_t b, size_t block_bytes) {
  if ((b & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(next + X16ScalesOffset(b, block_bytes)), _MM_HINT_T1);
}

// The block walk of one x16 group, shared by the group kernels (TernaryX16Group, Q4_K and Q6_K):
// block(b, lines, pf) runs for each block b with its code lines and their LinePrefetch:
// `near_prefetch` bytes ahead in this stream (0: none) and the next group's block b (its scale
// line too, once per pair of blocks). The group is one linear stream (X16CodesOffset).
template <typename BlockFn>
inline void ForX16Blocks(const uint8_t* g, const uint8_t* next, int64_t nb, size_t block_bytes, size_t near_prefetch,
                         BlockFn&& block) {
  for (int64_t b = 0; b < nb; ++b) {
    PrefetchX16ScaleLine(next, b, block_bytes);
    const uint8_t* lines = g + X16CodesOffset(b, block_bytes);
    LinePrefetch pf;
    pf.near = near_prefetch != 0 ? lines + near_prefetch : nullptr;
    pf.far = next + X16CodesOffset(b, block_bytes);
    block(b, lines, pf);
  }
}

}  // namespace
}  // namespace trine::kernels
