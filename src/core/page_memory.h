// Page-level memory control of read-only file mappings (the model's weights): prefault,
// release, lock, and the process's resident-set figures. Depends on nothing but POSIX.
#pragma once

#include <cstddef>
#include <cstdint>

namespace trine {

// Page size of the system (cached).
size_t PageSize();

// Drops this process's mapping of every page overlapping [p, p + n) (rounded outwards) with
// MADV_DONTNEED, so the pages stop counting in its resident set; they refault from the page
// cache when touched again. Only for read-only (or private, unmodified) FILE mappings: on
// anonymous memory it would discard data. When a boundary page is locked (mlock'd neighbour) only
// the whole pages inside the range are released. Returns false when madvise fails.
bool ReleaseFilePages(const void* p, size_t n);

// MADV_WILLNEED, then reads one byte per page so that every page of [p, p + n) is mapped now.
void PrefaultPages(const void* p, size_t n);

// mlock of the whole pages inside [p, p + n); false when it fails (RLIMIT_MEMLOCK, EPERM).
bool LockPages(const void* p, size_t n);

// madvise with `advice` over the whole pages inside [p, p + n) (neighbours untouched).
bool AdvisePages(const void* p, size_t n, int advice);

// VmRSS and VmHWM of this process from /proc/self/status (0 when unavailable).
uint64_t ProcessRssBytes();
uint64_t ProcessPeakRssBytes();

}  // namespace trine
