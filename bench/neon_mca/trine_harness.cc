// Runs one of trine's NEON kernels once on a small synthetic matrix so that bench/neon_mca.sh can
// record, under qemu-aarch64, which instructions one loop iteration executes (the trace is then
// timed by llvm-mca; qemu's own speed is never measured). The kernel source is included as is: the
// wrappers only fix n_tokens, and `flatten` inlines the kernel so that n_tokens = 1 folds away as
// it would in a build specialised for decode.
//
//   trine_harness MODE      MODE: tq2_sdot_t1 tq2_sdot_tn tq2_mulfree_t1 tq2_mulfree_tn q4_0_t1
//
// Shape: one row of kCols weights; kTokens tokens in the _tn modes. neon_mca.sh takes the loop
// iteration between two executions of an instruction run (blocks) or (blocks * tokens) times.
#include "arm/neon/gemm_neon.cc"

#include <cstdio>
#include <cstring>
#include <vector>

namespace trine::kernels {
#define TRINE_MCA_WRAP(name, fn)                                                                          \
  __attribute__((flatten, noinline)) void mca_##name##_t1(const WeightView& w, const uint8_t* xq, size_t st, \
                                                          float* y, int64_t ldy, float s) {                  \
    fn(w, xq, st, 1, y, ldy, 0, 1, s);                                                                       \
  }                                                                                                          \
  __attribute__((noinline)) void mca_##name##_tn(const WeightView& w, const uint8_t* xq, size_t st, int n,   \
                                                 float* y, int64_t ldy, float s) {                           \
    fn(w, xq, st, n, y, ldy, 0, 1, s);                                                                       \
  }
TRINE_MCA_WRAP(tq2_sdot, GemmTq2Q8kSdot)
TRINE_MCA_WRAP(tq2_mulfree, GemmTq2Q8kMulFree)
TRINE_MCA_WRAP(q4_0, (GemmQx0Q8_0Sdot<true>))
}  // namespace trine::kernels

int main(int argc, char** argv) {
  using namespace trine;
  using namespace trine::kernels;
  constexpr int64_t kCols = 8 * kQK_K;  // 8 TQ2_0 blocks, 64 Q4_0 blocks
  constexpr int kTokens = 3;
  if (argc < 2) return 2;
  const char* mode = argv[1];
  uint32_t seed = 12345;
  auto rnd = [&seed]() { return seed = seed * 1664525u + 1013904223u, seed >> 8; };
  const bool q4 = std::strncmp(mode, "q4_0", 4) == 0;
  const size_t row_bytes = q4 ? kCols / kQK4_0 * sizeof(BlockQ4_0) : kCols / kQK_K * sizeof(BlockTQ2_0);
  const size_t act_stride = q4 ? kCols / kQK8_0 * sizeof(BlockQ8_0) : kCols / kQK_K * sizeof(BlockQ8_K);
  std::vector<uint8_t> wdata(row_bytes), act(act_stride * kTokens);
  for (auto& b : wdata) b = static_cast<uint8_t>(rnd());
  for (auto& b : act) b = static_cast<uint8_t>(rnd());
  // Normal fp16 / fp32 scales (the common path of a branchy conversion).
  if (q4) {
    for (size_t i = 0; i < row_bytes; i += sizeof(BlockQ4_0)) reinterpret_cast<BlockQ4_0*>(&wdata[i])->d = 0x2E66;
    for (size_t i = 0; i < act.size(); i += sizeof(BlockQ8_0)) reinterpret_cast<BlockQ8_0*>(&act[i])->d = 0x2A00;
  } else {
    for (size_t i = 0; i < row_bytes; i += sizeof(BlockTQ2_0)) reinterpret_cast<BlockTQ2_0*>(&wdata[i])->d = 0x2E66;
    for (size_t i = 0; i < act.size(); i += sizeof(BlockQ8_K)) reinterpret_cast<BlockQ8_K*>(&act[i])->d = 0.01f;
  }
  WeightView w;
  w.type = q4 ? TypeId::kQ4_0 : TypeId::kTQ2_0;
  w.rows = 1;
  w.cols = kCols;
  w.data = wdata.data();
  w.row_bytes = row_bytes;
  float y[kTokens] = {};
  const std::string m = mode;
  if (m == "tq2_sdot_t1") mca_tq2_sdot_t1(w, act.data(), act_stride, y, 1, 1.0f);
  else if (m == "tq2_sdot_tn") mca_tq2_sdot_tn(w, act.data(), act_stride, kTokens, y, 1, 1.0f);
  else if (m == "tq2_mulfree_t1") mca_tq2_mulfree_t1(w, act.data(), act_stride, y, 1, 1.0f);
  else if (m == "tq2_mulfree_tn") mca_tq2_mulfree_tn(w, act.data(), act_stride, kTokens, y, 1, 1.0f);
  else if (m == "q4_0_t1") mca_q4_0_t1(w, act.data(), act_stride, y, 1, 1.0f);
  else return 2;
  std::printf("%g\n", static_cast<double>(y[0]));
  return 0;
}
