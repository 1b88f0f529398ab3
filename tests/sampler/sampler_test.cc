// Sampler behaviour: greedy is argmax with lowest-id ties, draws are seed-deterministic, each
// filter removes what it should, and sampled frequencies follow the softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sampler/sampler.h"

namespace trine {
namespace {

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  SamplerParams p;
  p.temp = 0.0f;
  Sampler s(p);
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits, 4), 1);
  EXPECT_EQ(ArgmaxLowestId(logits, 4), 1);
}

// OpenAI's presence and frequency penalties: a token seen c times loses c * frequency + presence.
// History 5, 5, 7; logits 5: 3.0, 7: 2.4, 9: 1.0 (others 0), greedy.
TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheWindow) {
  std::vector<float> logits(16, 0.0f);
  logits[5] = 3.0f;
  logits[7] = 2.4f;
  logits[9] = 1.0f;
  const auto pick = [&](float presence, float frequency) {
    SamplerParams p;
    p.temp = 0.0f;
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    EXPECT_TRUE(ValidateSamplerParams(p).ok());
    Sampler s(p);
    for (int t : {5, 5, 7}) s.Accept(t);
    return s.Sample(logits.data(), 16);
  };
  EXPECT_EQ(pick(0.0f, 0.0f), 5);
  EXPECT_EQ(pick(0.0f, 0.5f), 5);   // 5: 2.0, 7: 1.9
  EXPECT_EQ(pick(0.0f, 0.7f), 7);   // 5: 1.6, 7: 1.7: the count matters
  EXPECT_EQ(pick(1.0f, 0.0f), 5);   // 5: 2.0, 7: 1.4: presence alone keeps the order
  EXPECT_EQ(pick(0.5f, 1.0f), 9);   // 5: 0.5, 7: 0.9, 9: 1.0
  EXPECT_EQ(pick(-2.0f, 0.0f), 5);  // negative: seen tokens gain
  SamplerParams bad;
  bad.presence_penalty = 2.5f;
  EXPECT_FALSE(ValidateSamplerParams(bad).ok());
  bad.presence_penalty = 0.0f;
  bad.frequency_penalty = std::nanf("");
  EXPECT_FALSE(ValidateSamplerParams(bad).ok());
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> logits(100);
  for (int i = 0; i < 100; ++i) logits[i] = std::sin(static_cast<float>(i)) * 2.0f;
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  auto draw = [&](uint64_t seed) {
    p.seed = seed;
    Sampler s(p);
    std::vector<int> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.Sample(logits.data(), 100));
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplerParams p;
  p.temp = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  const float logits[] = {0.1f, 0.3f, 0.2f};
  for (int i = 0; i < 20; ++i) EXPECT_EQ(s.Sample(logits, 3), 1);
}

TEST(Sampler, TopPAndMinPCutTheTail) {
  // probabilities ~ 0.64, 0.24, 0.09, 0.03
  const float logits[] = {3.0f, 2.0f, 1.0f, 0.0f};
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.min_p = 0.0f;
  p.top_p = 0.7f;  // keeps the first two
  Sampler s(p);
  for (int i = 0; i < 200; ++i) EXPECT_LT(s.Sample(logits, 4), 2);
  SamplerParams q = p;
  q.top_p = 1.0f;
  q.min_p = 0.2f;  // keeps p >= 0.2 * 0.64: the first two
  Sampler s2(q);
  for (int i = 0; i < 200; ++i) EXPECT_LT(s2.Sample(logits, 4), 2);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  const float logits[] = {1.0f, 0.0f};
  SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 123;
  Sampler s(p);
  int zeros = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) zeros += s.Sample(logits, 2) == 0;
  const double expect = 1.0 / (1.0 + std::exp(-1.0));  // 0.731
  EXPECT_NEAR(static_cast<double>(zeros) / n, expect, 0.015);
}

TEST(Sampler, RepeatPenaltyDemotesSeenTokens) {
  SamplerParams p;
  p.temp = 0.0f;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  const float logits[] = {1.0f, 1.5f};
  EXPECT_EQ(s.Sample(logits, 2), 1);
  s.Accept(1);
  EXPECT_EQ(s.Sample(logits, 2), 0);  // 1.5 / 2 < 1.0
}

TEST(Sampler, ValidationRejectsBadValues) {
  SamplerParams p;
  p.temp = -1.0f;
  EXPECT_FALSE(ValidateSamplerParams(p).ok());
  p = SamplerParams();
  p.top_p = 0.0f;
  EXPECT_FALSE(ValidateSamplerParams(p).ok());
  p = SamplerParams();
  p.repeat_penalty = 0.0f;
  EXPECT_FALSE(ValidateSamplerParams(p).ok());
  EXPECT_TRUE(ValidateSamplerParams(SamplerParams()).ok());
}

}  // namespace
}  // namespace trine
