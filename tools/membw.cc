// Streaming read bandwidth (see membw.h).
#include "membw.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

namespace trine::cli {

MemoryBandwidth::MemoryBandwidth(size_t bytes) {
  n_words_ = bytes / 64 * 8;
  if (n_words_ == 0) return;
  void* p = nullptr;
  if (posix_memalign(&p, 64, n_words_ * sizeof(uint64_t)) != 0) {
    n_words_ = 0;
    return;
  }
  data_ = static_cast<uint64_t*>(p);
  const int64_t n = static_cast<int64_t>(n_words_);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) data_[i] = static_cast<uint64_t>(i);
}

MemoryBandwidth::~MemoryBandwidth() { std::free(data_); }

double MemoryBandwidth::ReadOnce(int n_threads) {
  const int64_t n_lines = static_cast<int64_t>(n_words_ / 8);
  const uint64_t* d = data_;
  uint64_t total = 0;
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static) num_threads(n_threads) reduction(+ : total)
  for (int64_t l = 0; l < n_lines; ++l) {
    const uint64_t* p = d + l * 8;
    total += (p[0] + p[1]) + (p[2] + p[3]) + (p[4] + p[5]) + (p[6] + p[7]);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sink_ = sink_ + total;
  return static_cast<double>(bytes()) / secs / 1e9;
}

double MemoryBandwidth::Measure(int n_threads, int reps) {
  if (!ok()) return 0.0;
  ReadOnce(n_threads);
  double best = 0.0;
  for (int r = 0; r < std::max(1, reps); ++r) best = std::max(best, ReadOnce(n_threads));
  return best;
}

}  // namespace trine::cli
