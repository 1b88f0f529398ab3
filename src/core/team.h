// The threads of one OpenMP parallel region as a team that shares each step's work dynamically,
// so that a thread the kernel has descheduled (a busy neighbour, a second context) does not hold
// up the others.
//
// A step is a list of n items. Every thread of the team runs the same code and claims items off a
// shared counter until none is left:
//
//   for (int64_t i = TeamFirst(n); i < n; i = TeamNext(n, i)) { ...item i... }
//   TeamSync();
//
// TeamSync returns once every item of the step is done, whoever did it; a thread is never waited
// for unless it holds an unfinished item. A thread that comes back late finds the items of the
// steps it missed claimed and done, and passes through them. So every write of shared data inside
// a team step must be part of an item (nothing is done "by each thread"), and a loop over items
// must not `break` (the item it holds would never count as done).
//
// Each thread first takes the items of its own contiguous range in order (as a static split would
// give them), then takes items from the far end of the others' ranges.
//
// Waiting: a thread waits only for items in progress elsewhere. It spins for a few microseconds,
// then sleeps in the kernel (futex), woken as items finish, so a descheduled partner can run on
// its core.
//
// Outside a RunTeam region (a plain `omp parallel`, or no region) the same loops run with a static
// round-robin split and TeamSync is OpenMP's barrier, so the Team operators stay correct anywhere.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace trine {

class Team {
 public:
  // Step counters are allocated in blocks of kBlockSteps as a region reaches them (a layer step
  // uses about 20 steps); a region may have up to kBlockSteps * kMaxBlocks steps.
  static constexpr int kBlockSteps = 64;
  static constexpr int kMaxBlocks = 1024;

  // Teams up to this size give each thread its own contiguous range of a step's items (the static
  // split, so each thread streams its part of a matrix in order) and let the others take items
  // from its far end once theirs are done; larger teams claim off one shared counter.
  static constexpr int kMaxRangeThreads = 16;

  // One thread's counters in a step, on a cache line of their own: the thread updates them per
  // item, the others read them only while waiting or taking from its range.
  struct alignas(64) Lane {
    // Items taken from the front of the thread's range (high 32 bits, by itself) and from the back
    // (low 32 bits, by the others). Zero for a step nobody reached: no set-up needed.
    std::atomic<uint64_t> taken{0};
    std::atomic<int64_t> done{0};  // items this thread finished
  };
  struct alignas(64) Step {
    std::atomic<int64_t> total{0};  // items of the step (set by every claimer; the same n)
    std::atomic<int64_t> next{0};   // items claimed (teams larger than kMaxRangeThreads)
    Lane lanes[kMaxRangeThreads];
  };
  Team() = default;
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  // Step s's counters (any thread; the first to reach a new block allocates it).
  Step& step(int s);
  // Zeroes the counters of steps [0, used) for the next region.
  void Reset(int used);
  // Marks one item of step s done by thread `thread` (and wakes any sleeper to look again).
  void Finish(int s, int thread);
  // Returns once step s has no unfinished item.
  void Wait(int s);
  // Nanoseconds the team's threads slept in Wait since the last call (and resets the count).
  int64_t TakeSleepNanos() { return sleep_ns_.exchange(0, std::memory_order_relaxed); }

 private:
  std::atomic<Step*> blocks_[kMaxBlocks] = {};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // futex word: bumped by an item's end while a thread sleeps
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<int64_t> sleep_ns_{0};
};

namespace team_detail {
// The calling thread's team, the region's nesting level (omp_get_level()) so a nested region does
// not use an outer team, and the thread's current step.
struct Binding {
  Team* team = nullptr;
  int level = -1;
  int step = 0;
  int victim = 0;  // the range this thread is taking items from in the current step
};
Binding& Current();
// A team for a region opened by this thread (reused: regions of one thread follow each other).
Team* AcquireTeam();
void ReleaseTeam(Team* team, int used_steps);

class Scope {
 public:
  explicit Scope(Team* t) : prev_(Current()) { Current() = {t, omp_get_level(), 0, 0}; }
  ~Scope() { Current() = prev_; }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  int steps() const { return Current().step; }

 private:
  Binding prev_;
};
}  // namespace team_detail

// Runs fn() on every thread of a new parallel region of n_threads (one thread when parallel is
// false), its Team steps shared as above.
template <class Fn>
void RunTeam(int n_threads, Fn&& fn, bool parallel = true) {
  Team* team = team_detail::AcquireTeam();
  int used = 0;
#pragma omp parallel num_threads(n_threads) if (parallel)
  {
    team_detail::Scope scope(team);
    fn();
    if (omp_get_thread_num() == 0) used = scope.steps();
  }
  team_detail::ReleaseTeam(team, used);
}

// Nanoseconds the threads of the regions this thread opened (RunTeam) have slept waiting for a
// partner's item, in total: the share of a pass lost to descheduled partners (ThreadTuner).
int64_t TeamSleepNanos();

// The first item this thread claims in the current step of n items (>= n: none).
int64_t TeamFirst(int64_t n);
// Finishes item i and claims the next (>= n: none left).
int64_t TeamNext(int64_t n, int64_t i);
// Ends the step: returns once all its items are done.
void TeamSync();

// Items of `unit` elements covering n elements: item i is [i * unit, min(n, (i + 1) * unit)).
// TeamUnit picks a unit (a multiple of align, at least align) giving each thread of the team
// about items_per_thread items, so a descheduled thread's share is small and is taken by the
// others (1 where every item repeats some work, as RMSNorm's slices recompute their row's scale).
int64_t TeamUnit(int64_t n, int64_t align, int64_t items_per_thread = 8);
inline int64_t TeamItems(int64_t n, int64_t unit) { return (n + unit - 1) / unit; }

// Test hook: when set, called by a thread right after it claims item `item` of a team step (e.g.
// to make one thread sleep mid-step). Not for production use.
using TeamClaimHook = void (*)(int thread, int64_t item);
void SetTeamClaimHook(TeamClaimHook hook);

}  // namespace trine
