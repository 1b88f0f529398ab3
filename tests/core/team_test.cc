// core/team.h: steps whose items are claimed dynamically. Every item runs exactly once; after
// TeamSync every thread sees every item's writes; a thread made to sleep while it holds an item
// leaves the rest of its share to the others and the results stay right; outside a RunTeam region
// the same loops split statically. Teams of 3 and 4 threads on a 2-core machine make waiters sleep.
#include "core/team.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace trine {
namespace {

// Rounds of two steps: each item of the first writes its slot; in the second, each item checks
// that every slot of the round is written (the first step's TeamSync made them visible).
TEST(Team, EveryItemRunsOnceAndIsSeenAfterTheSync) {
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 7, 64}) {
      const int rounds = 300;
      std::vector<std::atomic<int>> slot(static_cast<size_t>(n));
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      for (auto& s : slot) s.store(-1);
      for (auto& r : runs) r.store(0);
      std::atomic<int> wrong{0}, team_size{0};
      RunTeam(threads, [&] {
        if (omp_get_thread_num() == 0) team_size.store(omp_get_num_threads());
        for (int r = 0; r < rounds; ++r) {
          for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
            slot[static_cast<size_t>(i)].store(r, std::memory_order_relaxed);
            runs[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
          }
          TeamSync();
          for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
            for (int64_t j = 0; j < n; ++j) {
              if (slot[static_cast<size_t>(j)].load(std::memory_order_relaxed) != r) wrong.fetch_add(1);
            }
          }
          TeamSync();
        }
      });
      EXPECT_EQ(team_size.load(), threads);
      EXPECT_EQ(wrong.load(), 0) << threads << " threads, " << n << " items";
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[static_cast<size_t>(i)].load(), rounds) << "item " << i;
    }
  }
}

std::atomic<int> g_sleeps{0};

// Thread 1 sleeps 30 ms right after claiming its first item of each step: a descheduled thread.
void SleepOnThread1(int thread, int64_t item) {
  if (thread == 1 && item >= 0 && g_sleeps.fetch_add(1) % 1000 == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
}

// While thread 1 sleeps holding one item, the others do every other item of the step, then wait
// for that one only; results are complete and each item ran once.
TEST(Team, ASleepingThreadsShareIsDoneByTheOthers) {
  for (int threads : {2, 3}) {
    const int64_t n = 200;
    std::vector<int> out(static_cast<size_t>(n), 0), out2(out), by(static_cast<size_t>(n), -1);
    g_sleeps.store(0);
    SetTeamClaimHook(SleepOnThread1);
    RunTeam(threads, [&] {
      for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
        out[static_cast<size_t>(i)] += static_cast<int>(i) * 3;
        by[static_cast<size_t>(i)] = omp_get_thread_num();
      }
      TeamSync();
      // A second step reads the first's results: all present whoever wrote them.
      for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) {
        out2[static_cast<size_t>(i)] = out[static_cast<size_t>(i)] + out[static_cast<size_t>((i + 1) % n)];
      }
      TeamSync();
    });
    SetTeamClaimHook(nullptr);
    int by_sleeper = 0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(out2[static_cast<size_t>(i)], static_cast<int>(i) * 3 + static_cast<int>((i + 1) % n) * 3) << "item " << i;
      by_sleeper += by[static_cast<size_t>(i)] == 1;
    }
    // Thread 1 slept 30 ms on its first claim; the others ran the rest of the 200 items meanwhile.
    EXPECT_LE(by_sleeper, 2) << threads << " threads";
  }
}

TEST(Team, RunTeamWithoutParallelRunsOneThread) {
  int calls = 0, size = 0, items = 0;
  RunTeam(4, [&] {
    ++calls;
    size = omp_get_num_threads();
    for (int64_t i = TeamFirst(5); i < 5; i = TeamNext(5, i)) ++items;
    TeamSync();  // a team of one does not wait
  }, false);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(size, 1);
  EXPECT_EQ(items, 5);
}

// In a plain `omp parallel` region the loops split round-robin and TeamSync is OpenMP's barrier.
TEST(Team, PlainOpenMpRegionsSplitStatically) {
  for (int threads : {1, 2, 3}) {
    std::vector<std::atomic<int>> runs(17);
    for (auto& r : runs) r.store(0);
#pragma omp parallel num_threads(threads)
    {
      for (int64_t i = TeamFirst(17); i < 17; i = TeamNext(17, i)) runs[static_cast<size_t>(i)].fetch_add(1);
      TeamSync();
    }
    for (auto& r : runs) EXPECT_EQ(r.load(), 1) << threads << " threads";
  }
}

// TeamUnit's items cover [0, n) on align boundaries, several per thread for large n.
TEST(Team, UnitsTileTheRange) {
  for (int threads : {1, 2, 4}) {
    for (int64_t n : {1, 5, 16, 17, 100, 2560, 6913}) {
      for (int64_t align : {1, 16}) {
        int64_t unit = 0;
        RunTeam(threads, [&] {
          if (omp_get_thread_num() == 0) unit = TeamUnit(n, align);
        });
        ASSERT_GT(unit, 0);
        EXPECT_EQ(unit % align, 0);
        EXPECT_GE(TeamItems(n, unit) * unit, n);
        EXPECT_LT((TeamItems(n, unit) - 1) * unit, n);
        if (threads == 1) {
          EXPECT_EQ(TeamItems(n, unit), 1) << "a team of one shares nothing";
        } else if (n / align >= 8 * threads) {
          EXPECT_GE(TeamItems(n, unit), 8 * threads) << "n " << n << " align " << align;
        }
      }
    }
  }
}

}  // namespace
}  // namespace trine
