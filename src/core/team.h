// The threads of one OpenMP parallel region as a team, with a barrier that stays in user space.
//
// Why not `#pragma omp barrier` (or the implicit one ending an `omp for`): libgomp's barrier makes
// a futex-wake system call every time, also when no thread sleeps and in a team of one thread. A
// decoded BitNet-2B token passes ~18 barriers per layer, 544 futex calls per token at one thread,
// and on the VMs trine is measured on a system call costs about a microsecond: ~2 % of a token.
// TeamBarrier spins while the wait is short (a decode step's waits are microseconds), sleeps in
// the kernel only after a long wait, and makes the wake-up call only when a thread sleeps.
//
// Use: RunTeam(n, [&] { ...Team operators... }) opens the region; inside it, TeamSync() is the
// team's barrier, and TeamPart() splits a loop as `omp for schedule(static)` would. Outside a
// RunTeam region TeamSync() falls back to `#pragma omp barrier`, so Team operators stay correct
// in any region.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>

namespace trine {

class TeamBarrier {
 public:
  // Returns once all n threads of the team have called it (n == 1 returns at once). Every write a
  // thread made before it is visible to every thread after it.
  void Wait(int n);

 private:
  alignas(64) std::atomic<uint32_t> arrived_{0};
  alignas(64) std::atomic<uint32_t> generation_{0};  // the futex word
  std::atomic<uint32_t> sleepers_{0};                // threads in (or entering) the futex wait
};

namespace team_detail {
// The calling thread's team: its barrier and the region's nesting level (omp_get_level()), so a
// nested region inside the team does not take the outer team's barrier for its own.
struct Binding {
  TeamBarrier* barrier = nullptr;
  int level = -1;
};
Binding Current();
void SetCurrent(Binding b);

// Binds the calling thread to `b` for its lifetime (one per thread of the region).
class Scope {
 public:
  explicit Scope(TeamBarrier* b) : prev_(Current()) { SetCurrent({b, omp_get_level()}); }
  ~Scope() { SetCurrent(prev_); }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Binding prev_;
};
}  // namespace team_detail

// Runs fn() on every thread of a new parallel region of n_threads (one thread when
// parallel is false), with TeamSync() bound to a barrier of that region.
template <class Fn>
void RunTeam(int n_threads, Fn&& fn, bool parallel = true) {
  TeamBarrier barrier;
#pragma omp parallel num_threads(n_threads) if (parallel)
  {
    team_detail::Scope scope(&barrier);
    fn();
  }
}

// The barrier of the enclosing team (see above).
void TeamSync();

// The calling thread's part [lo, hi) of n items, boundaries on multiples of `align` (the last part
// ends at n): contiguous parts in thread order, as `omp for schedule(static)` splits a loop.
void TeamPart(int64_t n, int64_t align, int64_t* lo, int64_t* hi);

}  // namespace trine
