// CPU feature detection (x86: CPUID/XGETBV; aarch64: HWCAP).
#include "cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#endif

namespace trine::kernels {
namespace {

CpuFeatures Detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  unsigned xlo = 0, xhi = 0;
  __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
  (void)xhi;
  const bool ymm_os = (xlo & 0x6) == 0x6;
  const bool zmm_os = (xlo & 0xE6) == 0xE6;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
  const bool avx2 = (b >> 5) & 1;
  const bool avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1;
  const bool vnni = (c >> 11) & 1, vbmi = (c >> 1) & 1;
  const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1;
  const bool tile_os = (xlo & 0x60000) == 0x60000;  // XTILECFG (17) and XTILEDATA (18)
  f.avx2 = ymm_os && avx2 && fma && f16c;
  f.avx512 = f.avx2 && zmm_os && avx512f && avx512dq && avx512bw && avx512vl && vnni;
  f.avx512_vbmi = f.avx512 && vbmi;
  f.amx_int8 = f.avx512 && amx_tile && amx_int8 && tile_os;
  unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  if (__get_cpuid_count(7, 1, &a1, &b1, &c1, &d1)) f.avx512_bf16 = f.avx512 && ((a1 >> 5) & 1);
#elif defined(__aarch64__)
  const unsigned long hw = getauxval(AT_HWCAP);
  f.neon_dotprod = (hw & HWCAP_ASIMDDP) != 0;
#endif
  return f;
}

}  // namespace

std::string CpuFeatures::ToString() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += " ";
    s += name;
  };
  add(avx2, "avx2+fma+f16c");
  add(avx512, "avx512(f,bw,vl,dq,vnni)");
  add(avx512_vbmi, "vbmi");
  add(avx512_bf16, "bf16");
  add(amx_int8, "amx-int8");
  add(neon_dotprod, "neon+dotprod");
  return s.empty() ? "baseline" : s;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures f = Detect();
  return f;
}

bool AmxPermitted() {
  static const bool ok = [] {
    if (!GetCpuFeatures().amx_int8) return false;
#if defined(__x86_64__) && defined(__linux__)
    constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023;
    constexpr unsigned long kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
    unsigned long perm = 0;
    if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &perm) != 0) return false;
    return ((perm >> kXfeatureXtiledata) & 1) != 0;
#else
    return false;
#endif
  }();
  return ok;
}

}  // namespace trine::kernels
