// Page-level memory control (madvise / mlock) and /proc/self/status readers.
#include "core/page_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace trine {

size_t PageSize() {
  static const size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

namespace {

// Whole pages inside (inward) or every page touching (outward) [p, p + n).
bool PageRange(const void* p, size_t n, bool outward, void** addr, size_t* len) {
  if (p == nullptr || n == 0) return false;
  const uintptr_t page = PageSize();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uintptr_t b = outward ? a / page * page : (a + page - 1) / page * page;
  const uintptr_t e = outward ? (a + n + page - 1) / page * page : (a + n) / page * page;
  if (e <= b) return false;
  *addr = reinterpret_cast<void*>(b);
  *len = e - b;
  return true;
}

uint64_t StatusKb(const char* key) {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  const size_t n = std::strlen(key);
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
      kb = std::strtoull(line + n + 1, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

}  // namespace

bool ReleaseFilePages(const void* p, size_t n) {
  void* addr;
  size_t len;
  if (!PageRange(p, n, true, &addr, &len)) return true;
  if (::madvise(addr, len, MADV_DONTNEED) == 0) return true;
  // A boundary page shared with an mlock'd neighbour makes the whole call fail (EINVAL): release
  // the pages that are the range's own.
  if (!PageRange(p, n, false, &addr, &len)) return false;
  return ::madvise(addr, len, MADV_DONTNEED) == 0;
}

void PrefaultPages(const void* p, size_t n) {
  if (p == nullptr || n == 0) return;
  void* addr;
  size_t len;
  if (PageRange(p, n, false, &addr, &len)) (void)::madvise(addr, len, MADV_WILLNEED);
  const volatile uint8_t* b = static_cast<const uint8_t*>(p);
  const size_t page = PageSize();
  uint8_t sink = 0;
  for (size_t i = 0; i < n; i += page) sink = static_cast<uint8_t>(sink ^ b[i]);
  sink = static_cast<uint8_t>(sink ^ b[n - 1]);
  (void)sink;
}

bool LockPages(const void* p, size_t n) {
  void* addr;
  size_t len;
  if (!PageRange(p, n, false, &addr, &len)) return true;
  return ::mlock(addr, len) == 0;
}

bool AdvisePages(const void* p, size_t n, int advice) {
  void* addr;
  size_t len;
  if (!PageRange(p, n, false, &addr, &len)) return true;
  return ::madvise(addr, len, advice) == 0;
}

uint64_t ProcessRssBytes() { return StatusKb("VmRSS") * 1024; }
uint64_t ProcessPeakRssBytes() { return StatusKb("VmHWM") * 1024; }

}  // namespace trine
