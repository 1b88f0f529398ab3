// Zeroed anonymous memory for weights the kernels stream (x16 interleaves, TQ2_0 repacks,
// requantized heads, the file's head when copied) and for the bandwidth probe that measures their
// roofline. Buffers of 2 MiB or more are aligned to 2 MiB, and their whole 2 MiB units can be
// backed by transparent huge pages wherever the kernel allows them ("madvise" or "always" in
// /sys/kernel/mm/transparent_hugepage/enabled): at first touch, or promoted later (HugePages).
//
// Why: decode reads every weight byte once per token, in long sequential streams. Behind 4 KiB
// pages each 4 KiB of the stream costs a TLB miss and a page walk; behind 2 MiB pages almost none.
// On the 2-core Xeon VM this project is measured on (a TLB miss there walks guest and host page
// tables), bitnet-2b TQ2_0 decode went from 14.6-14.7 to 17.0-17.3 tok/s at one thread, and the
// --membw probe from 14.5-15.4 to 15.9-16.6 GB/s (kernels/README.md, "Huge pages").
// Where huge pages are unavailable the advice is ignored and the memory is ordinary pages.
// TRINE_HUGE_PAGES=0 turns the advice off (to measure the difference); HugePagesEnabled() says
// whether it is on.
//
// Header-only (mmap, madvise) so that the NEON cross build of the kernel checks, which compiles
// kernels/ without src/core/*.cc, can use it too.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

namespace trine {

// True when transparent huge pages can back advised memory ("[always]" or "[madvise]" in
// /sys/kernel/mm/transparent_hugepage/enabled) and TRINE_HUGE_PAGES is not 0. Read once.
inline bool HugePagesEnabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("TRINE_HUGE_PAGES");
    if (env != nullptr && std::strcmp(env, "0") == 0) return false;
    std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f == nullptr) return false;
    char line[128] = {0};
    const bool read = std::fgets(line, sizeof(line), f) != nullptr;
    std::fclose(f);
    return read && (std::strstr(line, "[always]") != nullptr || std::strstr(line, "[madvise]") != nullptr);
  }();
  return enabled;
}

// When 2 MiB units get huge pages: at their first touch (the page fault allocates a huge page),
// or later, when the owner calls PromoteToHugePage (MADV_COLLAPSE copies the filled 4 KiB pages
// into a huge page). Later is for weights: on VMs with free-page reporting (this project's Xeon
// VM) a fresh huge page costs the host milliseconds to back, which made bitnet-2b's load take
// 2.7-3.7 s instead of 0.5 s when the weights were faulted in as huge pages; filled as 4 KiB
// pages and promoted by a background thread (Model), it takes 0.6-0.9 s.
enum class HugePages { kLater, kAtFault };

class PageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  PageBuffer() = default;
  // n zero bytes (fresh anonymous pages are zero). Throws std::bad_alloc when the mapping fails,
  // as std::vector does.
  explicit PageBuffer(size_t n, HugePages when = HugePages::kLater) : size_(n) {
    if (n == 0) return;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (n + page - 1) / page * page;
    // Only the whole 2 MiB units can become huge pages: a huge page is resident as soon as one
    // byte of it is touched, so a rounded-up tail would cost up to 2 MiB per tensor; the tail
    // keeps small pages.
    huge_bytes_ = HugePagesEnabled() ? n / kHugePage * kHugePage : 0;
    // Over-map by one huge page when aligning, then unmap the unaligned head and the tail.
    const size_t over = huge_bytes_ > 0 ? map_bytes_ + kHugePage : map_bytes_;
    void* p = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      size_ = map_bytes_ = huge_bytes_ = 0;
      throw std::bad_alloc();
    }
    uint8_t* raw = static_cast<uint8_t*>(p);
    data_ = raw;
    if (huge_bytes_ > 0) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
      data_ = reinterpret_cast<uint8_t*>((a + kHugePage - 1) / kHugePage * kHugePage);
      const size_t head = static_cast<size_t>(data_ - raw);
      if (head > 0) munmap(raw, head);
      const size_t tail = over - head - map_bytes_;
      if (tail > 0) munmap(data_ + map_bytes_, tail);
#ifdef MADV_HUGEPAGE
      if (when == HugePages::kAtFault) (void)madvise(data_, huge_bytes_, MADV_HUGEPAGE);
#endif
    }
  }
  ~PageBuffer() { Reset(); }

  PageBuffer(PageBuffer&& o) noexcept { Take(o); }
  PageBuffer& operator=(PageBuffer&& o) noexcept {
    if (this != &o) {
      Reset();
      Take(o);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Bytes from data() that are whole 2 MiB units, 2 MiB-aligned (0: too small, or huge pages off).
  size_t huge_bytes() const { return huge_bytes_; }

  void Reset() {
    if (data_ != nullptr) munmap(data_, map_bytes_);  // a PageArena slice unmaps just its pages
    data_ = nullptr;
    size_ = map_bytes_ = huge_bytes_ = 0;
  }

 private:
  friend class PageArena;
  // A slice of a PageArena's mapping (owned from now on; no 2 MiB units of its own).
  PageBuffer(uint8_t* data, size_t n, size_t map_bytes) : data_(data), size_(n), map_bytes_(map_bytes) {}

  void Take(PageBuffer& o) {
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    huge_bytes_ = std::exchange(o.huge_bytes_, 0);
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t map_bytes_ = 0;
  size_t huge_bytes_ = 0;
};

// Consecutive PageBuffers carved from one 2 MiB-aligned reservation, so that buffers smaller than
// 2 MiB, and the tails of larger ones, share whole 2 MiB units that can become huge pages (the
// loader puts a model's kernel layouts in one: 21 % of bitnet-2b's decode bytes are in tensors
// under 2 MiB or in tails). Each slice is page-aligned and owns its pages (freeing it unmaps
// them); the arena's destructor unmaps what it never handed out. Units() lists the whole 2 MiB
// units handed out so far.
class PageArena {
 public:
  // Reserves `capacity` bytes of address space (MAP_NORESERVE: no memory until touched).
  explicit PageArena(size_t capacity) {
    if (!HugePagesEnabled() || capacity == 0) return;
    capacity_ = (capacity + PageBuffer::kHugePage - 1) / PageBuffer::kHugePage * PageBuffer::kHugePage;
    const size_t over = capacity_ + PageBuffer::kHugePage;
    void* p = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      capacity_ = 0;
      return;
    }
    uint8_t* raw = static_cast<uint8_t*>(p);
    const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
    begin_ = reinterpret_cast<uint8_t*>((a + PageBuffer::kHugePage - 1) / PageBuffer::kHugePage * PageBuffer::kHugePage);
    const size_t head = static_cast<size_t>(begin_ - raw);
    if (head > 0) munmap(raw, head);
    const size_t tail = over - head - capacity_;
    if (tail > 0) munmap(begin_ + capacity_, tail);
  }
  ~PageArena() {
    if (begin_ != nullptr && used_ < capacity_) munmap(begin_ + used_, capacity_ - used_);
  }
  PageArena(const PageArena&) = delete;
  PageArena& operator=(const PageArena&) = delete;

  // n zero bytes from the arena, or a PageBuffer of its own when the arena is full or absent.
  PageBuffer Allocate(size_t n) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t bytes = (n + page - 1) / page * page;
    if (begin_ == nullptr || n == 0 || bytes > capacity_ - used_) return PageBuffer(n);
    uint8_t* p = begin_ + used_;
    used_ += bytes;
    return PageBuffer(p, n, bytes);
  }

  // Start of every whole 2 MiB unit handed out so far.
  std::vector<uint8_t*> Units() const {
    std::vector<uint8_t*> units;
    for (size_t off = 0; off + PageBuffer::kHugePage <= used_; off += PageBuffer::kHugePage) units.push_back(begin_ + off);
    return units;
  }

 private:
  uint8_t* begin_ = nullptr;
  size_t capacity_ = 0, used_ = 0;
};

// Advises the 2 MiB unit at `unit` (2 MiB-aligned, inside a PageBuffer's huge_bytes()) and
// collapses its filled pages into a huge page now (MADV_COLLAPSE, Linux 6.1+). Contents are kept.
// False when the kernel refused (no MADV_COLLAPSE, no free huge page): the unit then stays on
// small pages, or khugepaged collapses it later since it is advised.
inline bool PromoteToHugePage(void* unit) {
#if defined(MADV_HUGEPAGE)
  if (madvise(unit, PageBuffer::kHugePage, MADV_HUGEPAGE) != 0) return false;
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // older headers; the kernel answers EINVAL where it does not know it
#endif
  return madvise(unit, PageBuffer::kHugePage, MADV_COLLAPSE) == 0;
#else
  (void)unit;
  return false;
#endif
}

}  // namespace trine
