// Conformance of the INT4/INT8/K-quant kernels (Q4_0, Q8_0, Q4_K, Q6_K) of every ISA this CPU has
// against the scalar reference GemmRef: random non-ternary weights, outputs NaN-poisoned first,
// row ranges split as two threads would, ragged row tiles and token counts 1..130, and exact
// equality (the kernels compute the reference's integer block sums and combine them in its float
// order, so they must match bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels.h"
#include "repack.h"
#include "tensor/dtype.h"

namespace trine::kernels {
namespace {

struct Shape {
  int64_t rows, cols;
  int n_tokens;
};

// cols must be a multiple of 256 for the K-quants; 32-multiples (odd block counts included) are
// added for Q4_0/Q8_0 below. Row counts cover 1, below and above a tile of 8, and non-multiples.
const Shape kShapes[] = {{1, 256, 1},  {7, 256, 3},   {9, 512, 1},    {33, 512, 2},  {16, 2560, 1}, {17, 2560, 4},
                         {5, 6912, 1}, {64, 768, 65}, {3, 1024, 130}, {24, 256, 16}, {13, 512, 9},  {40, 2048, 8},
                         // Batched decodes of 13-24 sequences (two token passes of the x16 Q4_0 kernel).
                         {35, 512, 13}, {48, 1024, 20}, {17, 256, 24}};
const Shape kQ0Shapes[] = {{5, 32, 1}, {11, 96, 2}, {8, 160, 17}, {9, 224, 130}, {12, 2080, 3}};

std::vector<float> RandomWeights(int64_t n, std::mt19937* rng) {
  // Mostly normal values, with an outlier every few hundred so block scales vary widely.
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(n));
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = nd(*rng);
    if ((*rng)() % 397 == 0) w[i] *= 40.0f;
  }
  return w;
}

std::vector<float> RandomActivations(int64_t n, std::mt19937* rng, bool edge) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(*rng);
  if (edge) {
    // An all-zero block, a spike, large magnitudes and a saturated run.
    for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) x[static_cast<size_t>(i)] = 0.0f;
    if (n > 300) x[300] = 1e4f;
    if (n > 600) x[600] = -1e4f;
    for (int64_t i = 320; i < std::min<int64_t>(n, 352); ++i) x[static_cast<size_t>(i)] = (i % 2) ? 7.0f : -7.0f;
  }
  return x;
}

// Weights whose quantized values hit the extremes of each format (all-max / all-min blocks).
void ExtremeWeights(std::vector<float>* w, int64_t cols) {
  for (int64_t i = 0; i < std::min<int64_t>(cols, 256); ++i) (*w)[static_cast<size_t>(i)] = 1.0f;
  if (static_cast<int64_t>(w->size()) >= 2 * cols) {
    for (int64_t i = 0; i < std::min<int64_t>(cols, 256); ++i) (*w)[static_cast<size_t>(cols + i)] = (i % 2) ? -1.0f : 0.5f;
  }
}

// x16: run the kernel on the 16-row interleaved layout (InterleaveX16) instead of the file's rows.
void CheckShape(Isa isa, TypeId type, const Shape& s, bool edge, std::mt19937* rng, bool x16 = false) {
  SCOPED_TRACE(::testing::Message() << IsaName(isa) << " " << TypeName(type) << " " << s.rows << "x" << s.cols
                                    << " tokens " << s.n_tokens << (edge ? " edge" : "") << (x16 ? " x16" : ""));
  const int64_t n = s.rows * s.cols;
  std::vector<float> wf = RandomWeights(n, rng);
  if (edge) ExtremeWeights(&wf, s.cols);
  uint64_t bytes = 0;
  ASSERT_TRUE(TensorBytes(type, n, &bytes));
  std::vector<uint8_t> wq(bytes);
  ASSERT_TRUE(QuantizeTensor(type, wf.data(), n, s.cols, wq.data()).ok());
  WeightView w;
  w.type = type;
  w.rows = s.rows;
  w.cols = s.cols;
  w.data = wq.data();
  w.row_bytes = static_cast<size_t>(bytes / static_cast<uint64_t>(s.rows));
  w.tensor_scale = edge ? 0.5f : 1.0f;

  const size_t act = ActivationBytes(type, s.cols);
  std::vector<uint8_t> xq(act * static_cast<size_t>(s.n_tokens));
  for (int t = 0; t < s.n_tokens; ++t) {
    const std::vector<float> x = RandomActivations(s.cols, rng, edge && t % 3 == 0);
    QuantizeActivations(type, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
  }
  const int64_t ldy = s.rows + 3;  // padding past the rows must stay untouched
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> want(static_cast<size_t>(ldy * s.n_tokens), nan), got = want;
  GemmRef(w, xq.data(), act, s.n_tokens, want.data(), ldy, 0, s.rows, 0.75f);
  PageBuffer interleaved;
  if (x16) {
    const WeightView plain = w;
    ASSERT_TRUE(InterleaveX16(plain, &interleaved, &w).ok());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(w.data) % 64, 0u);
    std::vector<uint8_t> scratch(w.row_bytes);
    for (int64_t r = 0; r < s.rows; ++r) {
      ASSERT_EQ(std::memcmp(RowData(w, r, scratch.data()), plain.data + static_cast<size_t>(r) * plain.row_bytes,
                            plain.row_bytes), 0) << "RowData row " << r;
    }
  }
  std::string name;
  GemmFn fn = SelectGemm(type, isa, TernaryVariant::kDefault, &name);
  SCOPED_TRACE(name);
  if (isa == Isa::kAvx2 || isa == Isa::kAvx512) {
    ASSERT_NE(fn, GemmRef) << "no specialised kernel";
  }
  // Two row ranges, as two threads would split them (the split is not a multiple of a tile).
  const int64_t mid = s.rows / 2 - (s.rows > 4 ? 1 : 0);
  fn(w, xq.data(), act, s.n_tokens, got.data(), ldy, 0, mid, 0.75f);
  fn(w, xq.data(), act, s.n_tokens, got.data(), ldy, mid, s.rows, 0.75f);
  for (int t = 0; t < s.n_tokens; ++t) {
    for (int64_t r = 0; r < ldy; ++r) {
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (r >= s.rows) {
        ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its rows at " << r;
        continue;
      }
      ASSERT_FALSE(std::isnan(got[i])) << "row " << r << " token " << t << " not written";
      ASSERT_FALSE(std::isnan(want[i]));
      // Bit-identical (also distinguishes -0 from +0).
      uint32_t gb, wb;
      std::memcpy(&gb, &got[i], 4);
      std::memcpy(&wb, &want[i], 4);
      ASSERT_EQ(gb, wb) << "row " << r << " token " << t << ": " << got[i] << " vs " << want[i];
    }
  }
}

class QuantsConformance : public ::testing::TestWithParam<std::tuple<Isa, TypeId>> {};

TEST_P(QuantsConformance, BitIdenticalToReference) {
  const auto [isa, type] = GetParam();
  std::mt19937 rng(20260807u + static_cast<unsigned>(type));
  for (const Shape& s : kShapes) {
    for (bool edge : {false, true}) CheckShape(isa, type, s, edge, &rng);
  }
  if (type == TypeId::kQ4_0 || type == TypeId::kQ8_0) {
    for (const Shape& s : kQ0Shapes) {
      for (bool edge : {false, true}) CheckShape(isa, type, s, edge, &rng);
    }
  }
  if (WantsX16(type, isa, TernaryVariant::kDefault)) {
    for (const Shape& s : kShapes) {
      for (bool edge : {false, true}) CheckShape(isa, type, s, edge, &rng, true);
    }
    if (type == TypeId::kQ4_0) {  // 32-column shapes: Q4_0 only (K-quants need 256)
      for (const Shape& s : kQ0Shapes) {
        for (bool edge : {false, true}) CheckShape(isa, type, s, edge, &rng, true);
      }
    }
  }
}

// Every token count 1..130 on one ragged shape (tile and token-group edges, both code paths).
TEST_P(QuantsConformance, EveryTokenCount) {
  const auto [isa, type] = GetParam();
  std::mt19937 rng(7u + static_cast<unsigned>(type));
  for (int nt = 1; nt <= 130; ++nt) CheckShape(isa, type, Shape{11, 512, nt}, nt % 5 == 0, &rng);
  if (WantsX16(type, isa, TernaryVariant::kDefault)) {
    for (int nt = 1; nt <= 130; ++nt) CheckShape(isa, type, Shape{37, 512, nt}, nt % 5 == 0, &rng, true);
  }
}

// Real model shapes (BitNet-2B / Llama-1B projections and output matrix slices), one token and a
// prefill batch.
TEST_P(QuantsConformance, ModelShapes) {
  const auto [isa, type] = GetParam();
  std::mt19937 rng(99u + static_cast<unsigned>(type));
  for (const Shape& s : {Shape{40, 2560, 1}, Shape{24, 6912, 2}, Shape{32, 2048, 1}, Shape{16, 8192, 33},
                         Shape{48, 2560, 128}}) {
    CheckShape(isa, type, s, false, &rng);
    if (WantsX16(type, isa, TernaryVariant::kDefault)) CheckShape(isa, type, s, false, &rng, true);
  }
}

INSTANTIATE_TEST_SUITE_P(All, QuantsConformance,
                         ::testing::Combine(::testing::ValuesIn(AvailableIsas()),
                                            ::testing::Values(TypeId::kQ4_0, TypeId::kQ8_0, TypeId::kQ4_K,
                                                              TypeId::kQ6_K)),
                         [](const ::testing::TestParamInfo<std::tuple<Isa, TypeId>>& pi) {
                           return std::string(IsaName(std::get<0>(pi.param))) + "_" +
                                  TypeName(std::get<1>(pi.param));
                         });

}  // namespace
}  // namespace trine::kernels
