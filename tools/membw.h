// Memory read bandwidth, measured the simple way: OpenMP threads each sum their static share of a
// large buffer (64-bit integer adds, several accumulators so the loads are the bottleneck). This
// is the figure `trine bench --membw` compares decode speed with (the "roofline" of peers.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trine::cli {

class MemoryBandwidth {
 public:
  // Allocates and fills `bytes` (rounded down to 64-byte lines) once.
  explicit MemoryBandwidth(size_t bytes);
  ~MemoryBandwidth();
  MemoryBandwidth(const MemoryBandwidth&) = delete;
  MemoryBandwidth& operator=(const MemoryBandwidth&) = delete;

  bool ok() const { return data_ != nullptr; }
  size_t bytes() const { return n_words_ * sizeof(uint64_t); }

  // One pass with `n_threads` threads; returns GB/s (1e9 bytes per second).
  double ReadOnce(int n_threads);
  // The best of `reps` passes after one warm-up pass, GB/s.
  double Measure(int n_threads, int reps);

 private:
  uint64_t* data_ = nullptr;
  size_t n_words_ = 0;
  volatile uint64_t sink_ = 0;
};

}  // namespace trine::cli
