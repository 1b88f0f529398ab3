// Edge cases of the element-wise operations in src/runtime/ops.cc that real models reach only with
// broken weights: NaN and infinite activations must propagate as NaN/inf (never undefined
// behaviour: the sanitizer build runs these too), and SiLU's saturation ends stay exact. Also the
// Team forms inside a parallel region: the same bits as one thread, for any team size.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/team.h"
#include "runtime/ops.h"

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

std::vector<float> RandomRow(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The element-wise steps of a layer, as the layer functions chain them inside one region: norm into
// a new buffer, norm in place, SwiGLU, ReLU^2, residual add. Fewer rows than threads (decode) take
// the sliced paths, more rows the row-split ones; dims 40 and 2080 leave ragged 16-lane slices.
// The region is opened by RunTeam (the team's own barrier, as the layers run) or by a plain
// `omp parallel` (the operators fall back to OpenMP's barrier).
std::vector<float> TeamPipeline(int n_threads, int n_tokens, int dim, bool run_team = true) {
  const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(dim);
  std::vector<float> x = RandomRow(n, 1), up = RandomRow(n, 2), w = RandomRow(static_cast<size_t>(dim), 3);
  std::vector<float> xb(n), h(n), r(n);
  auto steps = [&] {
    ops::RmsNormTeam(x.data(), w.data(), xb.data(), n_tokens, dim, 1e-5f);
    ops::RmsNormTeam(xb.data(), w.data(), xb.data(), n_tokens, dim, 1e-5f);  // in place
    ops::SwiGluTeam(xb.data(), up.data(), h.data(), n_tokens, dim);
    ops::ReluSqrGluTeam(xb.data(), up.data(), r.data(), static_cast<int64_t>(n));
    ops::AddInPlaceTeam(h.data(), r.data(), static_cast<int64_t>(n));
    ops::AddInPlaceTeam(x.data(), h.data(), static_cast<int64_t>(n));
  };
  if (run_team) {
    RunTeam(n_threads, steps);
  } else {
#pragma omp parallel num_threads(n_threads)
    steps();
  }
  return x;
}

TEST(Ops, TeamFormsGiveTheSameBitsForAnyTeamSize) {
  for (int dim : {40, 2080}) {
    for (int n_tokens : {1, 2, 3, 5}) {
      const std::vector<float> one = TeamPipeline(1, n_tokens, dim);
      // The one-thread result against the standalone operators (their own regions).
      const size_t n = static_cast<size_t>(n_tokens) * static_cast<size_t>(dim);
      std::vector<float> x = RandomRow(n, 1), up = RandomRow(n, 2), w = RandomRow(static_cast<size_t>(dim), 3);
      std::vector<float> xb(n), h(n), r(n);
      ops::RmsNorm(x.data(), w.data(), xb.data(), n_tokens, dim, 1e-5f, 2);
      ops::RmsNorm(xb.data(), w.data(), xb.data(), n_tokens, dim, 1e-5f, 2);
      ops::SwiGlu(xb.data(), up.data(), h.data(), n_tokens, dim, 2);
      ops::ReluSqrGlu(xb.data(), up.data(), r.data(), static_cast<int64_t>(n), 2);
      ops::AddInPlace(h.data(), r.data(), static_cast<int64_t>(n), 2);
      ops::AddInPlace(x.data(), h.data(), static_cast<int64_t>(n), 2);
      EXPECT_TRUE(SameBits(one, x)) << "standalone operators, dim " << dim << ", " << n_tokens << " tokens";
      for (int threads : {2, 3, 4}) {
        EXPECT_TRUE(SameBits(one, TeamPipeline(threads, n_tokens, dim)))
            << threads << " threads, dim " << dim << ", " << n_tokens << " tokens";
        EXPECT_TRUE(SameBits(one, TeamPipeline(threads, n_tokens, dim, false)))
            << threads << " threads in a plain omp region, dim " << dim << ", " << n_tokens << " tokens";
      }
    }
  }
}

}  // namespace
}  // namespace trine
