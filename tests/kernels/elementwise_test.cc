// SIMD element-wise kernels against their scalar definitions (kernels/ref/elementwise_ref.h, which
// src/runtime/ops.cc runs where no vector kernel is selected): bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "elementwise_cases.h"
#include "kernels.h"
#include "runtime/ops.h"

namespace trine::kernels {
namespace {

TEST(SwiGluVec, BitIdenticalToScalarExpfPolyLoop) {
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    const SwiGluVecFn fn = IsaSupported(isa) ? SelectElementwise(isa).swiglu : nullptr;
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

// The xsimd kernels (kernels/simd/elementwise_xsimd.h) of every ISA this machine runs: each member
// equals its scalar form bit for bit (tests/kernels/elementwise_cases.h; the NEON instance runs the
// same check under qemu, tests/neon).
TEST(Elementwise, XsimdKernelsBitIdenticalToScalarForms) {
  int isas = 0;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (!IsaSupported(isa)) continue;
    SCOPED_TRACE(IsaName(isa));
    const ElementwiseKernels& k = SelectElementwise(isa);
    if (k.rms_scale == nullptr) continue;  // a build without xsimd
    ++isas;
    EXPECT_NE(k.swiglu, nullptr);
    EXPECT_NE(k.scale_mul, nullptr);
    EXPECT_NE(k.relu_sqr_glu, nullptr);
    EXPECT_NE(k.rope_neox, nullptr);
    EXPECT_NE(k.rope_pairs, nullptr);
    int checked = 0;
    const std::vector<std::string> fails = CheckElementwise(k, &checked);
    EXPECT_GT(checked, 250);
    for (const std::string& f : fails) ADD_FAILURE() << f;
  }
  if (isas == 0) GTEST_SKIP() << "no xsimd kernels in this build or on this CPU";
}

// The reference ISA selects none: TRINE_ISA=ref runs the scalar forms.
TEST(Elementwise, RefSelectsNoVectorKernel) {
  const ElementwiseKernels& k = SelectElementwise(Isa::kRef);
  EXPECT_EQ(k.swiglu, nullptr);
  EXPECT_EQ(k.rms_scale, nullptr);
  EXPECT_EQ(k.rope_pairs, nullptr);
}

}  // namespace
}  // namespace trine::kernels
