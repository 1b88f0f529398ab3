// Per (token, block) sums of Q8_K activations and their scales, gathered once per kernel call by
// the x86 ternary int8-dot kernels (the 2-bit codes are c = t + 1, so each block's product needs
// the block's activation sum subtracted). No intrinsics: shared by the per-ISA translation units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tensor/blocks.h"

namespace trine::kernels {

struct ActSums {
  std::vector<int32_t> qsum;  // (n_tokens, nb)
  std::vector<float> d;       // (n_tokens, nb)
};

// Grow-only per-thread scratch (the GemmFn contract has no workspace; OpenMP threads persist).
inline ActSums& GetActSums() {
  thread_local ActSums s;
  return s;
}

inline void GatherActSums(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb, ActSums* s) {
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(nb);
  if (s->qsum.size() < n) s->qsum.resize(n);
  if (s->d.size() < n) s->d.resize(n);
  for (int t = 0; t < n_tokens; ++t) {
    const BlockQ8_K* a = reinterpret_cast<const BlockQ8_K*>(xq + act_stride * static_cast<size_t>(t));
    for (int64_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (int j = 0; j < 16; ++j) sum += a[b].bsums[j];
      s->qsum[static_cast<size_t>(t * nb + b)] = sum;
      s->d[static_cast<size_t>(t * nb + b)] = a[b].d;
    }
  }
}

}  // namespace trine::kernels
