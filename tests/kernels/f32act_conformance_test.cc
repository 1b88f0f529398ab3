// The fp32-activation kernels (KernelTable::f32_act, SelectGemmF32Act) against GemmDequantF32,
// the scalar reference, for every weight type the model can bind with f32 activations, plain and
// x16 layouts. Outputs are NaN-poisoned so unwritten or overwritten values fail. The kernels use
// FMA, so they are held to an NMSE limit against the reference; against themselves they must be
// bit-identical whatever the row split (ops::MatMul's 16-row chunks per thread, or any other) and
// whether tokens come as one batch or one at a time.
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

// Rows off multiples of 16 (and of 8), 1..40 tokens, one large batch.
const Shape kShapes[] = {{1, 256, 1},  {7, 256, 3},   {33, 512, 2},  {16, 2560, 1}, {37, 768, 5},
                         {50, 512, 13}, {23, 1024, 40}, {64, 768, 4},  {19, 512, 130}, {100, 256, 1}};
// Float weights also allow any column count.
const Shape kOddShapes[] = {{5, 100, 3}, {21, 33, 1}, {17, 1, 2}};

struct Case {
  TypeId type;
  bool x16 = false;
};


bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class F32ActConformance : public ::testing::TestWithParam<std::tuple<Isa, Case>> {};

// The ISA levels with an f32-activation kernel of their own that this CPU runs (the reference
// level's kernel is GemmDequantF32 itself, NEON has none): only those are instantiated, so no
// case is skipped.
std::vector<Isa> F32ActIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (IsaSupported(isa) && GetKernelTable(isa).f32_act != nullptr) out.push_back(isa);
  }
  return out;
}

TEST_P(F32ActConformance, MatchesReference) {
  const auto [isa, c] = GetParam();
  const bool is_float = c.type == TypeId::kF32 || c.type == TypeId::kF16 || c.type == TypeId::kBF16;
  std::vector<Shape> shapes(std::begin(kShapes), std::end(kShapes));
  if (is_float) shapes.insert(shapes.end(), std::begin(kOddShapes), std::end(kOddShapes));
  std::mt19937 rng(4321);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const GemmFn fn = SelectGemmF32Act(c.type, isa, nullptr);
  for (const Shape& s : shapes) {
    if (c.x16 && s.cols % X16BlockElems(c.type) != 0) continue;
    SCOPED_TRACE(::testing::Message() << TypeName(c.type) << (c.x16 ? " x16 " : " ") << s.rows << "x" << s.cols
                                      << " tokens " << s.n_tokens);
    const int64_t n = s.rows * s.cols;
    std::vector<float> wf(static_cast<size_t>(n));
    if (c.type == TypeId::kTQ2_0 || c.type == TypeId::kTQ1_0) {
      wf = RandomTernaryWeights(n, &rng, 0.037f);
    } else {
      for (auto& v : wf) v = nd(rng);
    }
    uint64_t bytes = 0;
    ASSERT_TRUE(TensorBytes(c.type, n, &bytes));
    std::vector<uint8_t> wq(bytes);
    ASSERT_TRUE(QuantizeTensor(c.type, wf.data(), n, s.cols, wq.data()).ok());
    WeightView w;
    w.type = c.type;
    w.rows = s.rows;
    w.cols = s.cols;
    w.data = wq.data();
    w.row_bytes = static_cast<size_t>(bytes / static_cast<uint64_t>(s.rows));
    w.f32_activations = true;
    w.tensor_scale = 1.25f;
    const WeightView plain = w;
    PageBuffer interleaved;
    if (c.x16) {
      ASSERT_TRUE(InterleaveX16(plain, &interleaved, &w).ok());
    }

    const size_t act = ActivationBytesFor(w);
    ASSERT_EQ(act, static_cast<size_t>(s.cols) * 4);
    std::vector<float> x(static_cast<size_t>(s.cols * s.n_tokens));
    for (auto& v : x) v = nd(rng);
    if (s.cols > 40) x[7] = 1e4f, x[40] = -3e3f;  // spikes
    const uint8_t* xq = reinterpret_cast<const uint8_t*>(x.data());
    const int64_t ldy = s.rows + 3;  // padding past rows must stay untouched
    std::vector<float> want(static_cast<size_t>(ldy * s.n_tokens), Nan());
    GemmDequantF32(plain, xq, act, s.n_tokens, want.data(), ldy, 0, s.rows, 0.75f);

    // Splits: one call; ops::MatMul's contiguous 16-row chunks for 2 and 3 threads; thirds off
    // 16-row boundaries. Each NaN-poisoned afresh.
    const int64_t chunks = (s.rows + 15) / 16;
    auto chunk_split = [&](int parts) {
      std::vector<int64_t> b;
      for (int p = 0; p <= parts; ++p) b.push_back(std::min<int64_t>(chunks * p / parts * 16, s.rows));
      return b;
    };
    const std::vector<std::vector<int64_t>> splits = {
        {0, s.rows}, chunk_split(2), chunk_split(3), {0, s.rows / 3, 2 * s.rows / 3, s.rows}};
    std::vector<float> first;
    for (const auto& b : splits) {
      std::vector<float> got(want.size(), Nan());
      for (size_t p = 0; p + 1 < b.size(); ++p) {
        fn(w, xq, act, s.n_tokens, got.data(), ldy, b[p], b[p + 1], 0.75f);
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
          err += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
          ref += want[i] * static_cast<double>(want[i]);
        }
      }
      const double rms = std::sqrt(ref / static_cast<double>(s.rows * s.n_tokens));
      EXPECT_LT(err / std::max(ref, 1e-30), 1e-10);
      for (int t = 0; t < s.n_tokens; ++t) {
        for (int64_t r = 0; r < s.rows; ++r) {
          const size_t i = static_cast<size_t>(t * ldy + r);
          ASSERT_LE(std::fabs(got[i] - want[i]), 1e-4 * std::max<double>(std::fabs(want[i]), rms))
              << "row " << r << " token " << t;
        }
      }
      if (first.empty()) {
        first = got;
      } else {
        ASSERT_TRUE(SameBits(first, got)) << "depends on the row split";
      }
    }
    // One token at a time (decode) gives the same bits as the batch (prefill).
    std::vector<float> single(want.size(), Nan());
    for (int t = 0; t < s.n_tokens; ++t) {
      fn(w, xq + act * static_cast<size_t>(t), act, 1, single.data() + t * ldy, ldy, 0, s.rows, 0.75f);
    }
    ASSERT_TRUE(SameBits(first, single)) << "depends on the token batching";
  }
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(F32ActConformance);  // CPUs with neither level
INSTANTIATE_TEST_SUITE_P(
    All, F32ActConformance,
    ::testing::Combine(::testing::ValuesIn(F32ActIsas()),
                       ::testing::Values(Case{TypeId::kF32}, Case{TypeId::kF16}, Case{TypeId::kBF16},
                                         Case{TypeId::kQ8_0}, Case{TypeId::kQ4_0}, Case{TypeId::kQ4_0, true},
                                         Case{TypeId::kQ4_K}, Case{TypeId::kQ4_K, true}, Case{TypeId::kQ6_K},
                                         Case{TypeId::kQ6_K, true},
                                         Case{TypeId::kTQ2_0},
                                         Case{TypeId::kTQ2_0, true}, Case{TypeId::kTQ1_0},
                                         Case{TypeId::kTQ1_0, true})),
    [](const ::testing::TestParamInfo<std::tuple<Isa, Case>>& pi) {
      const Case& c = std::get<1>(pi.param);
      return std::string(IsaName(std::get<0>(pi.param))) + "_" + TypeName(c.type) + (c.x16 ? "_x16" : "");
    });

TEST(F32ActDispatch, FallsBackToTheScalarReference) {
  EXPECT_EQ(SelectGemmF32Act(TypeId::kTQ2_0, Isa::kRef, nullptr), GemmDequantF32);
  EXPECT_EQ(SelectGemmF32Act(TypeId::kI2_S, ActiveIsa(), nullptr), GemmDequantF32);  // repacked at load
  std::string name;
  const GemmFn fn = SelectGemmF32Act(TypeId::kTQ2_0, ActiveIsa(), &name);
  EXPECT_FALSE(name.empty());
  if (ActiveIsa() == Isa::kAvx512 || ActiveIsa() == Isa::kAvx2) {
    EXPECT_NE(fn, GemmDequantF32) << name;
  }
}

}  // namespace
}  // namespace trine::kernels
