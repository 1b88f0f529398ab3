// Edge cases of the element-wise operations in src/model/ops.cc that real models reach only with
// broken weights: NaN and infinite activations must propagate as NaN/inf (never undefined
// behaviour: the sanitizer build runs these too), and SiLU's saturation ends stay exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/ops.h"

namespace trine {
namespace {

TEST(Ops, ExpfPolyNonFiniteInputs) {
  EXPECT_TRUE(std::isnan(ops::ExpfPoly(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(ops::ExpfPoly(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ops::ExpfPoly(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(ops::ExpfPoly(1000.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(ops::ExpfPoly(-1000.0f), 0.0f);
  EXPECT_NEAR(ops::ExpfPoly(1.0f), std::exp(1.0f), 1e-6f);
}

TEST(Ops, SwiGluPropagatesNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // 40 lanes: covers the 16-wide body and the tail.
  std::vector<float> gate(40, 1.0f), up(40, 2.0f), out(40, 0.0f);
  gate[3] = nan;
  gate[37] = nan;
  up[5] = nan;
  ops::SwiGlu(gate.data(), up.data(), out.data(), 1, 40);
  EXPECT_TRUE(std::isnan(out[3]));
  EXPECT_TRUE(std::isnan(out[37]));
  EXPECT_TRUE(std::isnan(out[5]));
  EXPECT_NEAR(out[0], 2.0f / (1.0f + std::exp(-1.0f)), 1e-5f);
}

}  // namespace
}  // namespace trine
