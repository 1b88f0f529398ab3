// Memory read bandwidth, measured the simple way: OpenMP threads each sum their static share of a
// large buffer (64-bit integer adds with the widest vector loads the CPU has, four accumulators, so
// memory is the bottleneck, not the loop). This is the figure `trine bench --membw` compares
// decode speed with (the "roofline" of peers.md). The buffer is a PageBuffer, on huge pages where
// the system allows them like the weights' kernel layouts, so the roofline is the best the
// machine streams, not a 4 KiB-page figure the weights would beat.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/page_buffer.h"

namespace trine::cli {

class MemoryBandwidth {
 public:
  // Allocates and fills `bytes` (rounded down to 256 bytes) once.
  explicit MemoryBandwidth(size_t bytes);
  MemoryBandwidth(const MemoryBandwidth&) = delete;
  MemoryBandwidth& operator=(const MemoryBandwidth&) = delete;

  bool ok() const { return data_ != nullptr; }
  size_t bytes() const { return n_words_ * sizeof(uint64_t); }
  const std::string& loop() const { return loop_; }  // "avx512", "avx2", "sse2" or "portable"

  // One pass with `n_threads` threads; returns GB/s (1e9 bytes per second).
  double ReadOnce(int n_threads);
  // The best of `reps` passes after one warm-up pass, GB/s.
  double Measure(int n_threads, int reps);

 private:
  PageBuffer buf_;
  uint64_t* data_ = nullptr;
  size_t n_words_ = 0;
  std::string loop_ = "portable";
  volatile uint64_t sink_ = 0;
};

}  // namespace trine::cli
