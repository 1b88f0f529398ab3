// Kernel conformance: every kernel of every ISA this CPU has, against the scalar reference, on
// random and edge-case shapes. Outputs are NaN-poisoned first so unwritten values fail. Ternary
// kernels are integer-exact and must equal the reference bit for bit; float kernels are held to
// an NMSE limit.
#include <gtest/gtest.h>

#include <atomic>
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

const Shape kShapes[] = {{1, 256, 1}, {7, 256, 3}, {33, 512, 1}, {16, 2560, 2}, {5, 6912, 1}, {64, 768, 65},
                         {3, 1024, 130}, {50, 512, 7}, {37, 2560, 1}};

struct Case {
  TypeId file_type;  // type as stored (TQ1_0 / I2_S are repacked like the loader does)
  TernaryVariant variant;
  bool x16 = false;  // also interleave to the TQ2_0 x16 layout (where the ISA's kernel reads it)
};

std::vector<float> RandomActivations(int64_t n, std::mt19937* rng, bool edge) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = nd(*rng);
  if (edge) {
    // All-zero block, a spike, and large magnitudes.
    for (int64_t i = 0; i < std::min<int64_t>(n, 256); ++i) x[static_cast<size_t>(i)] = 0.0f;
    if (n > 300) x[300] = 1e4f;
    if (n > 600) x[600] = -1e4f;
  }
  return x;
}

class KernelConformance : public ::testing::TestWithParam<std::tuple<Isa, Case>> {};

TEST_P(KernelConformance, MatchesReference) {
  const auto [isa, c] = GetParam();
  std::mt19937 rng(1234);
  for (const Shape& s : kShapes) {
    for (bool edge : {false, true}) {
      SCOPED_TRACE(::testing::Message() << TypeName(c.file_type) << " " << s.rows << "x" << s.cols << " tokens "
                                        << s.n_tokens << (edge ? " edge" : ""));
      const int64_t n = s.rows * s.cols;
      const bool ternary = c.file_type == TypeId::kTQ2_0 || c.file_type == TypeId::kTQ1_0 ||
                           c.file_type == TypeId::kI2_S;
      std::vector<float> wf = ternary ? RandomTernaryWeights(n, &rng, 0.037f) : RandomActivations(n, &rng, false);
      uint64_t bytes = 0;
      ASSERT_TRUE(TensorBytes(c.file_type, n, &bytes));
      std::vector<uint8_t> wq(bytes);
      ASSERT_TRUE(QuantizeTensor(c.file_type, wf.data(), n, s.cols, wq.data()).ok());
      WeightView w;
      w.type = c.file_type;
      w.rows = s.rows;
      w.cols = s.cols;
      w.data = wq.data();
      w.row_bytes = static_cast<size_t>(bytes / static_cast<uint64_t>(s.rows));
      if (c.file_type == TypeId::kI2_S) {
        w.row_bytes = static_cast<size_t>(s.cols / 4);
        std::memcpy(&w.tensor_scale, wq.data() + n / 4, 4);
      }
      std::vector<uint8_t> repacked;
      if (NeedsTernaryRepack(w)) {
        ASSERT_TRUE(RepackToTq2(w, &repacked, &w).ok());
      }
      const WeightView plain = w;
      std::vector<uint8_t> interleaved;
      if (c.x16) {
        ASSERT_TRUE(InterleaveX16(plain, &interleaved, &w).ok());
        ASSERT_EQ(w.interleave, 16);
        ASSERT_EQ(reinterpret_cast<uintptr_t>(w.data) % 64, 0u);
        // RowData gives back every row exactly.
        std::vector<uint8_t> scratch(w.row_bytes);
        for (int64_t r = 0; r < s.rows; ++r) {
          ASSERT_EQ(std::memcmp(RowData(w, r, scratch.data()), plain.data + static_cast<size_t>(r) * plain.row_bytes,
                                plain.row_bytes), 0) << "row " << r;
        }
      }

      const size_t act = ActivationBytes(w.type, s.cols);
      std::vector<uint8_t> xq(act * static_cast<size_t>(s.n_tokens));
      for (int t = 0; t < s.n_tokens; ++t) {
        const std::vector<float> x = RandomActivations(s.cols, &rng, edge && t == 0);
        QuantizeActivations(w.type, x.data(), s.cols, xq.data() + act * static_cast<size_t>(t));
      }
      const int64_t ldy = s.rows + 3;  // a leading dimension wider than rows: padding must stay untouched
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::vector<float> want(static_cast<size_t>(ldy * s.n_tokens), nan), got = want;
      GemmRef(plain, xq.data(), act, s.n_tokens, want.data(), ldy, 0, s.rows, 0.75f);
      GemmFn fn = SelectGemm(w.type, isa, c.variant, nullptr);
      if (c.x16) {
        // The reference reads the interleaved layout too (the profiler's f32 path, tests).
        std::vector<float> ref2(want.size(), nan);
        GemmRef(w, xq.data(), act, s.n_tokens, ref2.data(), ldy, 0, s.rows, 0.75f);
        for (size_t i = 0; i < want.size(); ++i) {
          ASSERT_TRUE(std::memcmp(&ref2[i], &want[i], 4) == 0) << "GemmRef on the x16 layout, index " << i;
        }
      }
      // Row ranges as threads would split them: halves, then thirds (ranges off 16-row
      // boundaries), each pass NaN-poisoned afresh.
      for (int parts : {2, 3}) {
        SCOPED_TRACE(::testing::Message() << parts << " row ranges");
        std::fill(got.begin(), got.end(), nan);
        for (int p = 0; p < parts; ++p) {
          fn(w, xq.data(), act, s.n_tokens, got.data(), ldy, s.rows * p / parts, s.rows * (p + 1) / parts, 0.75f);
        }
        double err = 0.0, ref = 0.0;
        for (int t = 0; t < s.n_tokens; ++t) {
          for (int64_t r = 0; r < ldy; ++r) {
            const size_t i = static_cast<size_t>(t * ldy + r);
            if (r >= s.rows) {
              ASSERT_TRUE(std::isnan(got[i])) << "wrote outside its rows at " << r;
              continue;
            }
            ASSERT_FALSE(std::isnan(got[i])) << "row " << r << " token " << t << " not written";
            if (ternary) {
              ASSERT_EQ(got[i], want[i]) << "row " << r << " token " << t;
            }
            err += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
            ref += want[i] * static_cast<double>(want[i]);
          }
        }
        if (!ternary) {
          EXPECT_LT(err / std::max(ref, 1e-30), 1e-10);
        }
      }
    }
  }
}

// Every case on every available ISA level; the x16 cases only where that level's kernel reads
// the x16 layout (elsewhere the loader never builds it).
std::vector<std::tuple<Isa, Case>> ConformanceParams() {
  const Case cases[] = {{TypeId::kTQ2_0, TernaryVariant::kInt8Dot},       {TypeId::kTQ2_0, TernaryVariant::kMulFree},
                        {TypeId::kTQ1_0, TernaryVariant::kInt8Dot},       {TypeId::kTQ1_0, TernaryVariant::kMulFree},
                        {TypeId::kI2_S, TernaryVariant::kInt8Dot},        {TypeId::kTQ2_0, TernaryVariant::kInt8Dot, true},
                        {TypeId::kTQ1_0, TernaryVariant::kInt8Dot, true}, {TypeId::kI2_S, TernaryVariant::kInt8Dot, true},
                        {TypeId::kF16, TernaryVariant::kDefault},         {TypeId::kF32, TernaryVariant::kDefault}};
  std::vector<std::tuple<Isa, Case>> out;
  for (Isa isa : AvailableIsas()) {
    for (const Case& c : cases) {
      if (!c.x16 || WantsX16(TypeId::kTQ2_0, isa, c.variant)) out.emplace_back(isa, c);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    All, KernelConformance, ::testing::ValuesIn(ConformanceParams()),
    [](const ::testing::TestParamInfo<std::tuple<Isa, Case>>& pi) {
      const Case& c = std::get<1>(pi.param);
      std::string v = c.variant == TernaryVariant::kMulFree ? "_mulfree" : "";
      if (c.x16) v += "_x16";
      return std::string(IsaName(std::get<0>(pi.param))) + "_" + TypeName(c.file_type) + v;
    });

TEST(Dispatch, UnknownIsaNameIsReported) {
  // The process-wide selection is fixed at first use; here only the name table is checked.
  EXPECT_STREQ(IsaName(Isa::kAvx512), "avx512");
  EXPECT_TRUE(IsaSupported(Isa::kRef));
}

// InterleaveX16Rows (rows produced group by group, as a head requantization does) writes the same
// bytes as InterleaveX16 of the whole plain tensor, for TQ2_0 and Q4_0 and a ragged last group.
TEST(X16Layout, RowsByGroupEqualWholeTensor) {
  std::mt19937 rng(5);
  for (TypeId t : {TypeId::kTQ2_0, TypeId::kQ4_0}) {
    const TypeTraits& tr = GetTypeTraits(t);
    const int64_t rows = 37, cols = 512;
    const size_t row_bytes = static_cast<size_t>(cols / tr.block_elems * tr.block_bytes);
    std::vector<uint8_t> plain(row_bytes * rows);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> x = RandomTernaryWeights(cols, &rng, 0.5f + 0.01f * static_cast<float>(r));
      if (t == TypeId::kQ4_0) {
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& v : x) v = nd(rng);
      }
      tr.quantize_row(x.data(), plain.data() + static_cast<size_t>(r) * row_bytes, cols);
    }
    WeightView w;
    w.type = t;
    w.rows = rows;
    w.cols = cols;
    w.row_bytes = row_bytes;
    w.data = plain.data();
    std::vector<uint8_t> whole, by_group;
    WeightView a, b;
    ASSERT_TRUE(InterleaveX16(w, &whole, &a).ok());
    WeightView shape = w;
    shape.data = nullptr;
    std::atomic<int> calls{0};
    const X16RowSource fill = [&](int64_t r0, int n, uint8_t* out) {
      ++calls;
      std::memcpy(out, plain.data() + static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(n) * row_bytes);
    };
    ASSERT_TRUE(InterleaveX16Rows(shape, fill, &by_group, &b).ok());
    EXPECT_EQ(calls.load(), 3);  // 16 + 16 + 5 rows
    EXPECT_EQ(b.interleave, 16);
    ASSERT_EQ(a.group_bytes, b.group_bytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.group_bytes * 3), 0) << TypeName(t);
    // A plain-row shape of another type is refused with the same error as InterleaveX16.
    shape.type = TypeId::kQ8_0;
    EXPECT_FALSE(InterleaveX16Rows(shape, [](int64_t, int, uint8_t*) {}, &by_group, &b).ok());
  }
}

}  // namespace
}  // namespace trine::kernels
