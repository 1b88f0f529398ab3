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
  bool amx_int8 = false;      // AMX-TILE + AMX-INT8 with OS-enabled tile state (XCR0 bits 17, 18);
                              // Linux also wants a per-process permission request (AmxPermitted)
  bool neon_dotprod = false;  // aarch64 ASIMD + SDOT
  std::string ToString() const;
};

const CpuFeatures& GetCpuFeatures();

// amx_int8, and the OS granted this process the AMX tile data state (Linux: arch_prctl
// ARCH_REQ_XCOMP_PERM, requested once on the first call; the grant is per process, so it covers
// threads started before and after it). Tile instructions fault without it.
bool AmxPermitted();

}  // namespace trine::kernels
