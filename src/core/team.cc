#include "core/team.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <climits>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace trine {

namespace {

thread_local team_detail::Binding tls_binding;
thread_local std::vector<std::unique_ptr<Team>> tls_free_teams;  // teams this thread may reuse
thread_local int64_t tls_sleep_ns = 0;  // TeamSleepNanos
std::atomic<TeamClaimHook> g_claim_hook{nullptr};

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void SleepWhileEqual(std::atomic<uint32_t>* word, uint32_t value) {
#if defined(__linux__)
  // A timeout bounds the cost of any wake-up this protocol could miss (none is known).
  struct timespec ts = {0, 2000000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, value, &ts, nullptr, 0);
#else
  (void)word;
  (void)value;
  std::this_thread::yield();
#endif
}

void WakeAll(std::atomic<uint32_t>* word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

// How long a waiter spins before it gives its core away. A step's last items finish within a few
// microseconds of each other when every thread runs; a longer wait means the thread holding an
// item is not running, and spinning on would only keep it off this core.
constexpr auto kSpinFor = std::chrono::microseconds(20);

bool InTeam() {
  const team_detail::Binding& b = tls_binding;
  return b.team != nullptr && b.level == omp_get_level();
}

inline void Claimed(int64_t i, int64_t n) {
  if (i < n) {
    const TeamClaimHook hook = g_claim_hook.load(std::memory_order_relaxed);
    if (hook != nullptr) hook(omp_get_thread_num(), i);
  }
}

}  // namespace

Team::~Team() {
  for (auto& b : blocks_) delete[] b.load(std::memory_order_relaxed);
}

Team::Step& Team::step(int s) {
  const int b = s / kBlockSteps;
  if (b >= kMaxBlocks) {
    std::fprintf(stderr, "trine: internal error: a team region of more than %d steps\n", kBlockSteps * kMaxBlocks);
    std::abort();
  }
  Step* block = blocks_[b].load(std::memory_order_acquire);
  if (block == nullptr) {
    Step* fresh = new Step[kBlockSteps];
    if (blocks_[b].compare_exchange_strong(block, fresh, std::memory_order_acq_rel)) {
      block = fresh;
    } else {
      delete[] fresh;  // another thread allocated it first: `block` is theirs
    }
  }
  return block[s % kBlockSteps];
}

void Team::Reset(int used) {
  for (int s = 0; s < used; ++s) {
    Step* block = blocks_[s / kBlockSteps].load(std::memory_order_relaxed);
    if (block == nullptr) continue;
    Step& st = block[s % kBlockSteps];
    st.next.store(0, std::memory_order_relaxed);
    st.total.store(0, std::memory_order_relaxed);
    for (auto& lane : st.lanes) {
      lane.taken.store(0, std::memory_order_relaxed);
      lane.done.store(0, std::memory_order_relaxed);
    }
  }
}

void Team::Finish(int s, int thread) {
  Step& st = step(s);
  // Teams larger than kMaxRangeThreads count in the lanes modulo their number (still exact sums).
  st.lanes[thread % kMaxRangeThreads].done.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the sleeper's increment-then-check (both seq_cst): either it sees this item done,
  // or this load sees it and wakes it to look again.
  if (sleepers_.load(std::memory_order_seq_cst) != 0) {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    WakeAll(&epoch_);
  }
}

void Team::Wait(int s) {
  Step& st = step(s);
  const int64_t total = st.total.load(std::memory_order_acquire);
  auto complete = [&] {
    int64_t done = 0;
    for (const Lane& lane : st.lanes) done += lane.done.load(std::memory_order_seq_cst);
    return done >= total;
  };
  if (complete()) return;
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (complete()) return;
      CpuRelax();
    }
    if (std::chrono::steady_clock::now() - t0 > kSpinFor) break;
  }
  const auto slept_from = std::chrono::steady_clock::now();
  for (;;) {
    const uint32_t e = epoch_.load(std::memory_order_seq_cst);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool done = complete();
    if (!done) SleepWhileEqual(&epoch_, e);
    sleepers_.fetch_sub(1, std::memory_order_release);
    if (done || complete()) break;
  }
  sleep_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - slept_from)
                          .count(),
                      std::memory_order_relaxed);
}

namespace team_detail {
Binding& Current() { return tls_binding; }

Team* AcquireTeam() {
  if (tls_free_teams.empty()) return new Team();
  Team* t = tls_free_teams.back().release();
  tls_free_teams.pop_back();
  return t;
}

void ReleaseTeam(Team* team, int used_steps) {
  team->Reset(used_steps);
  tls_sleep_ns += team->TakeSleepNanos();
  tls_free_teams.emplace_back(team);
}
}  // namespace team_detail

namespace {

// Thread t's range [lo, hi) of n items among nt threads (the static split).
inline void RangeOf(int64_t n, int64_t nt, int64_t t, int64_t* lo, int64_t* hi) {
  *lo = n * t / nt;
  *hi = n * (t + 1) / nt;
}

// Takes one item of thread v's range: from the front when v is the caller, from the back
// otherwise. -1 when the range is used up.
int64_t TakeFrom(Team::Step& st, int64_t n, int64_t nt, int v, bool front) {
  int64_t lo, hi;
  RangeOf(n, nt, v, &lo, &hi);
  std::atomic<uint64_t>& w = st.lanes[v].taken;
  uint64_t cur = w.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t f = static_cast<int64_t>(cur >> 32), b = static_cast<int64_t>(cur & 0xFFFFFFFFu);
    if (lo + f >= hi - b) return -1;
    const uint64_t want = front ? cur + (uint64_t{1} << 32) : cur + 1;
    if (w.compare_exchange_weak(cur, want, std::memory_order_relaxed)) return front ? lo + f : hi - b - 1;
  }
}

// The next item for the calling thread in step b.step of n items (>= n: none left).
int64_t Claim(team_detail::Binding& b, int64_t n) {
  Team::Step& st = b.team->step(b.step);
  const int nt = omp_get_num_threads();
  int64_t i = n;
  if (nt > Team::kMaxRangeThreads || n >= (int64_t{1} << 31)) {
    i = st.next.fetch_add(1, std::memory_order_relaxed);
  } else {
    const int self = omp_get_thread_num();
    for (int k = 0; k < nt; ++k) {
      const int v = (b.victim + k) % nt;
      const int64_t got = TakeFrom(st, n, nt, v, v == self);
      if (got >= 0) {
        b.victim = v;
        i = got;
        break;
      }
    }
  }
  Claimed(i, n);
  return i;
}

}  // namespace

int64_t TeamFirst(int64_t n) {
  if (!InTeam()) return omp_get_thread_num();
  team_detail::Binding& b = tls_binding;
  if (omp_get_num_threads() == 1) return 0;  // a team of one: every item in order, nothing shared
  b.team->step(b.step).total.store(n, std::memory_order_relaxed);
  b.victim = omp_get_thread_num();
  return Claim(b, n);
}

int64_t TeamNext(int64_t n, int64_t i) {
  if (!InTeam()) return i + omp_get_num_threads();
  if (omp_get_num_threads() == 1) return i + 1;
  team_detail::Binding& b = tls_binding;
  b.team->Finish(b.step, omp_get_thread_num());
  return Claim(b, n);
}

void TeamSync() {
  if (!InTeam()) {
    if (omp_get_num_threads() > 1) {
#pragma omp barrier
    }
    return;
  }
  team_detail::Binding& b = tls_binding;
  if (omp_get_num_threads() > 1) b.team->Wait(b.step);
  ++b.step;
}

int64_t TeamUnit(int64_t n, int64_t align, int64_t items_per_thread) {
  // By default about 8 items per thread: a descheduled thread leaves at most an eighth of its
  // share behind.
  const int64_t kItemsPerThread = std::max<int64_t>(1, items_per_thread);
  const int64_t nt = omp_get_num_threads();
  if (nt == 1) return std::max<int64_t>(align, (n + align - 1) / align * align);  // one item: nothing to share
  const int64_t units = (n + align - 1) / align;
  const int64_t per_item = std::max<int64_t>(1, units / (nt * kItemsPerThread));
  return per_item * align;
}

int64_t TeamSleepNanos() { return tls_sleep_ns; }

void SetTeamClaimHook(TeamClaimHook hook) { g_claim_hook.store(hook, std::memory_order_relaxed); }

}  // namespace trine
