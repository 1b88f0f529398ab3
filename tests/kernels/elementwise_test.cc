// SIMD element-wise kernels against their scalar definitions in src/runtime/ops.cc: bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels.h"
#include "runtime/ops.h"

namespace trine::kernels {
namespace {

TEST(SwiGluVec, BitIdenticalToScalarExpfPolyLoop) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const SwiGluVecFn fn = IsaSupported(isa) ? SelectSwiGluVec(isa) : nullptr;
    if (fn == nullptr) continue;
    SCOPED_TRACE(IsaName(isa));
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 4.0f);
    const int64_t n = 16 * 400;
    std::vector<float> g(static_cast<size_t>(n)), u(static_cast<size_t>(n));
    for (auto& v : g) v = nd(rng);
    for (auto& v : u) v = nd(rng);
    // Edge values: saturation of the exponent (|n| > 192), subnormal results, signed zeros, inf, NaN.
    const float edges[] = {0.0f, -0.0f, 87.0f, -87.0f, 88.8f, -88.8f, 103.0f, -103.0f, 133.0f, -133.0f, 200.0f,
                           -200.0f, 1e30f, -1e30f, std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                           1e-30f, -1e-30f, 0.5f, -0.5f};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); ++i) g[i] = edges[i];
    for (int64_t i = 0; i < 64; ++i) g[static_cast<size_t>(100 + i)] = -80.0f - 0.37f * static_cast<float>(i);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> got(static_cast<size_t>(n + 16), nan);
    fn(g.data(), u.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float e = ops::ExpfPoly(-g[static_cast<size_t>(i)]);
      const float want = g[static_cast<size_t>(i)] / (1.0f + e) * u[static_cast<size_t>(i)];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got[static_cast<size_t>(i)])) << "index " << i;
        continue;
      }
      ASSERT_EQ(std::memcmp(&want, &got[static_cast<size_t>(i)], 4), 0)
          << "index " << i << " g " << g[static_cast<size_t>(i)] << " want " << want << " got " << got[static_cast<size_t>(i)];
    }
    for (int64_t i = n; i < n + 16; ++i) EXPECT_TRUE(std::isnan(got[static_cast<size_t>(i)])) << "wrote past n";
  }
}

}  // namespace
}  // namespace trine::kernels
