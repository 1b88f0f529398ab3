// What the AVX2 Q4_0 kernels (file rows in quants_avx2.cc, x16 in gemm_q4_0_x16_avx2.cc) share:
// each token's per-block -8 * (activation sum) (the nibbles are w + 8) and fp32 scales, computed
// once per call. AVX2 translation units only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trine::kernels {

struct Q8_0ActInfo {
  std::vector<int32_t> corr;  // (n_tokens, nb): -8 * sum of the block's activations
  std::vector<float> d;       // (n_tokens, nb): fp32 block scale
};

// Grow-only per-thread scratch (the GemmFn contract has no workspace; OpenMP threads persist).
inline Q8_0ActInfo& GetQ8_0ActInfo() {
  thread_local Q8_0ActInfo s;
  return s;
}

// Fills *info for n_tokens Q8_0 activation rows of nb blocks (quants_avx2.cc).
void GatherQ8_0ActInfoAvx2(const uint8_t* xq, size_t act_stride, int n_tokens, int64_t nb, Q8_0ActInfo* info);

}  // namespace trine::kernels
