// Inputs shared by the kernel conformance tests.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "kernels.h"

namespace trine::kernels {

// n weights in {-scale, 0, +scale}, uniformly.
inline std::vector<float> RandomTernaryWeights(int64_t n, std::mt19937* rng, float scale) {
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = static_cast<float>(static_cast<int>((*rng)() % 3) - 1) * scale;
  return w;
}

// The ISA levels this CPU and build run, for instantiating conformance tests (a level that is
// absent is not instantiated rather than skipped; NEON is tested by neon_kernels_qemu on x86).
inline std::vector<Isa> AvailableIsas() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::kRef, Isa::kAvx2, Isa::kAvx512, Isa::kNeon}) {
    if (IsaSupported(isa)) out.push_back(isa);
  }
  return out;
}

// The value output buffers are poisoned with before a kernel writes them.
inline float Nan() { return std::numeric_limits<float>::quiet_NaN(); }

}  // namespace trine::kernels
