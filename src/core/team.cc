#include "core/team.h"

#include <algorithm>
#include <climits>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace trine {

namespace {

thread_local team_detail::Binding tls_team;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins before sleeping: ~0.5 ms of PAUSE on a current x86 core, longer than any wait between two
// decode steps. A team larger than the machine spins briefly: the thread it waits for may need
// this core to run.
int SpinBudget(int n) {
  static const int procs = omp_get_num_procs();
  return n > procs ? 64 : 1 << 15;
}

void SleepWhileEqual(std::atomic<uint32_t>* word, uint32_t value) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, value, nullptr, nullptr, 0);
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

}  // namespace

void TeamBarrier::Wait(int n) {
  if (n <= 1) return;
  // A thread can only reach this barrier after the previous one released it, so the generation
  // read here is the one this barrier will advance.
  const uint32_t gen = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint32_t>(n)) {
    arrived_.store(0, std::memory_order_relaxed);  // published by the release below
    generation_.store(gen + 1, std::memory_order_seq_cst);
    // Pairs with the sleeper's increment-then-check (both seq_cst): either it sees the new
    // generation and does not sleep, or this load sees it and wakes it.
    if (sleepers_.load(std::memory_order_seq_cst) != 0) WakeAll(&generation_);
    return;
  }
  const int budget = SpinBudget(n);
  for (int i = 0; i < budget; ++i) {
    if (generation_.load(std::memory_order_acquire) != gen) return;
    CpuRelax();
  }
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  while (generation_.load(std::memory_order_seq_cst) == gen) SleepWhileEqual(&generation_, gen);
  sleepers_.fetch_sub(1, std::memory_order_release);
}

namespace team_detail {
Binding Current() { return tls_team; }
void SetCurrent(Binding b) { tls_team = b; }
}  // namespace team_detail

void TeamSync() {
  const int n = omp_get_num_threads();
  if (n <= 1) return;
  if (tls_team.barrier != nullptr && tls_team.level == omp_get_level()) {
    tls_team.barrier->Wait(n);
  } else {
#pragma omp barrier
  }
}

void TeamPart(int64_t n, int64_t align, int64_t* lo, int64_t* hi) {
  const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
  const int64_t units = (n + align - 1) / align;
  *lo = std::min(n, units * id / nt * align);
  *hi = std::min(n, units * (id + 1) / nt * align);
}

}  // namespace trine
