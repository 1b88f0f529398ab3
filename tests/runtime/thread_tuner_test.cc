// ThreadTuner against scripted pass times: it keeps the configured team on an idle machine (no
// probe at all), moves to one thread within a few passes when a neighbour makes the full team slow
// and its threads sleep waiting for each other, and moves back once a probe finds the full team
// fast again.
#include "runtime/thread_tuner.h"

#include <gtest/gtest.h>

#include <functional>

namespace trine {
namespace {

// Runs `passes` single-token passes; rate(team) gives the tokens/s a team size gets now. Returns
// how many passes ran on each size (index 1 and 2 for 1 and 2 threads).
// A team of 2 under contention sleeps 40 % of a pass; otherwise nothing sleeps.
std::vector<int> RunPasses(ThreadTuner* t, int passes, const std::function<double(int)>& rate, int* last = nullptr,
                           double slept_fraction = 0.0) {
  std::vector<int> used(3, 0);
  for (int i = 0; i < passes; ++i) {
    const int team = t->Pick(1);
    ++used[static_cast<size_t>(team)];
    t->Report(1, team, 1.0 / rate(team), team > 1 ? slept_fraction / rate(team) : 0.0);
    if (last) *last = team;
  }
  return used;
}

TEST(ThreadTuner, KeepsTheTeamOnAnIdleMachineAndLeavesItUnderContention) {
  ThreadTuner t(2, true);
  ASSERT_EQ(t.candidates(), (std::vector<int>{2, 1}));
  // Idle: 2 threads 60 tok/s, 1 thread 36.
  auto idle = [](int team) { return team == 2 ? 60.0 : 36.0; };
  std::vector<int> used = RunPasses(&t, 400, idle);
  EXPECT_EQ(used[2], 400) << "no probe on an idle machine";
  // A busy neighbour: 2 threads collapse to 8 tok/s, 1 thread keeps 33.
  auto busy = [](int team) { return team == 2 ? 8.0 : 33.0; };
  int last = 0;
  used = RunPasses(&t, 3, busy, &last, 0.4);
  EXPECT_EQ(last, 1) << "the pass after a slow one probes one thread, which wins";
  used = RunPasses(&t, 400, busy, &last, 0.4);
  EXPECT_GE(used[1], 390) << "a busy neighbour that stays costs a probe of the full team now and then";
  EXPECT_GE(used[2], 2) << "it does probe the full team";
  EXPECT_EQ(last, 1);
  // The neighbour leaves: a probe finds 2 threads fast again.
  used = RunPasses(&t, ThreadTuner::kMaxInterval + 2, idle, &last);
  EXPECT_EQ(last, 2);
  // A slow full-team pass without sleeping (the machine's bandwidth drifting) is no reason to probe.
  auto drift = [](int team) { return team == 2 ? 40.0 : 36.0; };
  used = RunPasses(&t, 200, drift, &last);
  EXPECT_EQ(used[2], 200);
}

TEST(ThreadTuner, FixedThreadsAndSingleThreadsNeverChange) {
  ThreadTuner fixed(4, false), one(1, true);
  EXPECT_EQ(fixed.candidates(), (std::vector<int>{4}));
  EXPECT_EQ(one.candidates(), (std::vector<int>{1}));
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(fixed.Pick(1), 4);
    fixed.Report(1, 4, i % 2 ? 1.0 : 0.001);
    EXPECT_EQ(one.Pick(7), 1);
  }
  ThreadTuner four(4, true);
  EXPECT_EQ(four.candidates(), (std::vector<int>{4, 3, 2, 1}));
}

// Batches of different sizes are measured apart: a fast batch of 8 does not make single-token
// passes look slow.
TEST(ThreadTuner, TokenCountsAreComparedWithinTheirGroup) {
  ThreadTuner t(2, true);
  for (int i = 0; i < 300; ++i) {
    const int n = i % 2 ? 8 : 1;
    const int team = t.Pick(n);
    // Per token, a batch of 8 runs 4x faster than a single token; 2 threads always win.
    const double per_token = (n == 8 ? 0.25 : 1.0) * (team == 2 ? 1.0 / 60 : 1.0 / 36);
    t.Report(n, team, per_token * n);
  }
  EXPECT_EQ(t.Pick(1), 2);
  EXPECT_EQ(t.Pick(8), 2);
}

}  // namespace
}  // namespace trine
