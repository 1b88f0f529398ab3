// bench/neon_mca.sh's harness for the NEON lookup-table kernel (kernels/arm/neon/gemm_lut_neon.cc,
// included unchanged; modelled only where that file exists): one 16-row group of 8 TQ2_0 blocks
// in the lookup-table layout (WeightView::interleave = kInterleaveLut), 1 token (`flatten`, as in
// trine_harness.cc) or 3 tokens. The layout's bytes are arbitrary codes and normal fp16 scales: the
// kernel has no data-dependent branches, so only the shape matters for the trace.
//
//   lut_harness MODE      MODE: lut_t1 lut_tn
#include "arm/neon/gemm_lut_neon.cc"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace trine::kernels {
__attribute__((flatten, noinline)) void mca_lut_t1(const WeightView& w, const uint8_t* xq, size_t st, float* y,
                                                   int64_t ldy, float s) {
  GemmTq2LutNeon(w, xq, st, 1, y, ldy, 0, 16, s);
}
__attribute__((noinline)) void mca_lut_tn(const WeightView& w, const uint8_t* xq, size_t st, int n, float* y,
                                          int64_t ldy, float s) {
  GemmTq2LutNeon(w, xq, st, n, y, ldy, 0, 16, s);
}
}  // namespace trine::kernels

int main(int argc, char** argv) {
  using namespace trine;
  using namespace trine::kernels;
  constexpr int64_t kBlocks = 8;
  constexpr int kTokens = 3;
  if (argc < 2) return 2;
  uint32_t seed = 12345;
  auto rnd = [&seed]() { return seed = seed * 1664525u + 1013904223u, seed >> 8; };
  std::vector<uint8_t> group(kBlocks * kLutBlockBytes);
  for (auto& b : group) b = static_cast<uint8_t>(rnd());
  for (int64_t b = 0; b < kBlocks; ++b) {
    for (int r = 0; r < 16; ++r) {
      const uint16_t d = 0x2E66;
      std::memcpy(&group[LutScalesOffset(b) + 2 * r], &d, 2);
    }
  }
  const size_t act_stride = kBlocks * sizeof(BlockQ8_K);
  std::vector<uint8_t> act(act_stride * kTokens);
  for (auto& b : act) b = static_cast<uint8_t>(rnd());
  for (size_t i = 0; i < act.size(); i += sizeof(BlockQ8_K)) reinterpret_cast<BlockQ8_K*>(&act[i])->d = 0.01f;
  WeightView w;
  w.type = TypeId::kTQ2_0;
  w.rows = 16;
  w.cols = kBlocks * kQK_K;
  w.data = group.data();
  w.row_bytes = kBlocks * sizeof(BlockTQ2_0);
  w.interleave = kInterleaveLut;
  w.group_bytes = group.size();
  float y[16 * kTokens] = {};
  const std::string m = argv[1];
  if (m == "lut_t1") mca_lut_t1(w, act.data(), act_stride, y, 16, 1.0f);
  else if (m == "lut_tn") mca_lut_tn(w, act.data(), act_stride, kTokens, y, 16, 1.0f);
  else return 2;
  std::printf("%g\n", static_cast<double>(y[0]));
  return 0;
}
