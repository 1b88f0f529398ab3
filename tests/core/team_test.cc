// core/team.h: the user-space team barrier and the static split that replace OpenMP's barrier and
// `omp for` in the layer steps. Teams of 3 and 4 threads on a 2-core machine make the waiting
// threads exhaust their spin budget and sleep in the futex, so both wait paths run.
#include "core/team.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace trine {
namespace {

// Every round each thread writes its slot, passes the barrier and must then see every slot of the
// round; a second barrier keeps the next round's writes from overtaking the checks.
TEST(TeamBarrier, EveryThreadSeesEveryWriteOfTheRound) {
  for (int threads : {1, 2, 3, 4}) {
    const int rounds = 2000;
    std::vector<std::atomic<int>> slot(static_cast<size_t>(threads));
    for (auto& s : slot) s.store(-1);
    std::atomic<int> wrong{0}, team_size{0};
    RunTeam(threads, [&] {
      const int id = omp_get_thread_num(), nt = omp_get_num_threads();
      if (id == 0) team_size.store(nt);
      for (int r = 0; r < rounds; ++r) {
        slot[static_cast<size_t>(id)].store(r, std::memory_order_relaxed);
        TeamSync();
        for (int j = 0; j < nt; ++j) {
          if (slot[static_cast<size_t>(j)].load(std::memory_order_relaxed) != r) wrong.fetch_add(1);
        }
        TeamSync();
      }
    });
    EXPECT_EQ(team_size.load(), threads);
    EXPECT_EQ(wrong.load(), 0) << threads << " threads";
  }
}

// A thread that arrives milliseconds late: the others give up spinning, sleep, and are woken.
TEST(TeamBarrier, WaitersSleepUntilALateThreadArrives) {
  for (int threads : {2, 3}) {
    std::vector<int> value(static_cast<size_t>(threads), 0);
    std::vector<int> seen(static_cast<size_t>(threads), 0);
    RunTeam(threads, [&] {
      const int id = omp_get_thread_num();
      for (int r = 1; r <= 3; ++r) {
        if (id == threads - 1) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          value[static_cast<size_t>(id)] = r;  // plain write: ordered by the barrier alone
        }
        TeamSync();
        seen[static_cast<size_t>(id)] += value[static_cast<size_t>(threads - 1)] == r;
        TeamSync();
      }
    });
    for (int id = 0; id < threads; ++id) EXPECT_EQ(seen[static_cast<size_t>(id)], 3) << "thread " << id;
  }
}

TEST(TeamBarrier, RunTeamWithoutParallelRunsOneThread) {
  int calls = 0, size = 0;
  RunTeam(4, [&] {
    ++calls;
    size = omp_get_num_threads();
    TeamSync();  // a team of one does not wait
  }, false);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(size, 1);
}

// TeamPart's parts are contiguous, in thread order, on `align` boundaries, and cover [0, n).
TEST(TeamPart, PartsTileTheRangeInThreadOrder) {
  for (int threads : {1, 2, 3, 4}) {
    for (int64_t n : {0, 1, 5, 16, 17, 100, 2560, 6913}) {
      for (int64_t align : {1, 16}) {
        std::vector<int64_t> lo(static_cast<size_t>(threads), -1), hi(static_cast<size_t>(threads), -1);
        RunTeam(threads, [&] {
          const size_t id = static_cast<size_t>(omp_get_thread_num());
          TeamPart(n, align, &lo[id], &hi[id]);
        });
        int64_t next = 0;
        for (int id = 0; id < threads; ++id) {
          const size_t i = static_cast<size_t>(id);
          EXPECT_EQ(lo[i], next) << "n " << n << " align " << align << " thread " << id << " of " << threads;
          EXPECT_LE(lo[i], hi[i]);
          if (hi[i] < n) {
            EXPECT_EQ(hi[i] % align, 0);
          }
          next = hi[i];
        }
        EXPECT_EQ(next, n) << "n " << n << " align " << align << ", " << threads << " threads";
      }
    }
  }
}

}  // namespace
}  // namespace trine
