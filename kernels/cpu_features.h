// CPU feature detection, done once: CPUID + XGETBV (the OS must save the wide registers) on x86,
// getauxval(AT_HWCAP) on aarch64. Kernels never test features themselves.
#pragma once

#include <string>

namespace trine::kernels {

struct CpuFeatures {
  bool avx2 = false;       // AVX2 + FMA + F16C, OS-enabled YMM state
  bool avx512 = false;     // AVX-512 F/BW/VL/DQ + VNNI, OS-enabled ZMM/opmask state
  bool avx512_vbmi = false;
  bool avx512_bf16 = false;
  bool neon_dotprod = false;  // aarch64 ASIMD + SDOT
  std::string ToString() const;
};

const CpuFeatures& GetCpuFeatures();

}  // namespace trine::kernels
