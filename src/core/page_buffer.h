// Zeroed anonymous memory for weights the kernels stream (x16 interleaves, TQ2_0 repacks,
// requantized heads, the file's head when copied) and for the bandwidth probe that measures their
// roofline. Buffers of 2 MiB or more are aligned to 2 MiB and their whole 2 MiB units advised
// MADV_HUGEPAGE, so that transparent huge pages back them wherever the kernel allows ("madvise"
// or "always" in /sys/kernel/mm/transparent_hugepage/enabled).
//
// Why: decode reads every weight byte once per token, in long sequential streams. Behind 4 KiB
// pages each 4 KiB of the stream costs a TLB miss and a page walk; behind 2 MiB pages almost none.
// On the 2-core Xeon VM this project is measured on, bitnet-2b TQ2_0 decode went from 15.0 to
// 16.5 tok/s at one thread, and the --membw probe from 15.3 to 16.1 GB/s (kernels/README.md).
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

class PageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  PageBuffer() = default;
  // n zero bytes (fresh anonymous pages are zero). Throws std::bad_alloc when the mapping fails,
  // as std::vector does.
  explicit PageBuffer(size_t n) : size_(n) {
    if (n == 0) return;
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    map_bytes_ = (n + page - 1) / page * page;
    // Only the whole 2 MiB units are advised: a huge page is resident as soon as one byte of it
    // is touched, so a rounded-up tail would cost up to 2 MiB per tensor; the tail keeps small pages.
    const size_t huge_bytes = HugePagesEnabled() ? n / kHugePage * kHugePage : 0;
    // Over-map by one huge page when aligning, then unmap the unaligned head and the tail.
    const size_t over = huge_bytes > 0 ? map_bytes_ + kHugePage : map_bytes_;
    void* p = mmap(nullptr, over, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      size_ = map_bytes_ = 0;
      throw std::bad_alloc();
    }
    uint8_t* raw = static_cast<uint8_t*>(p);
    data_ = raw;
    if (huge_bytes > 0) {
      const uintptr_t a = reinterpret_cast<uintptr_t>(raw);
      data_ = reinterpret_cast<uint8_t*>((a + kHugePage - 1) / kHugePage * kHugePage);
      const size_t head = static_cast<size_t>(data_ - raw);
      if (head > 0) munmap(raw, head);
      const size_t tail = over - head - map_bytes_;
      if (tail > 0) munmap(data_ + map_bytes_, tail);
#ifdef MADV_HUGEPAGE
      huge_ = madvise(data_, huge_bytes, MADV_HUGEPAGE) == 0;
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
  // True when the buffer was advised MADV_HUGEPAGE and the advice accepted (its pages may still
  // be 4 KiB where no 2 MiB page was free).
  bool huge_advised() const { return huge_; }

  void Reset() {
    if (data_ != nullptr) munmap(data_, map_bytes_);
    data_ = nullptr;
    size_ = map_bytes_ = 0;
    huge_ = false;
  }

 private:
  void Take(PageBuffer& o) {
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    huge_ = std::exchange(o.huge_, false);
  }

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t map_bytes_ = 0;
  bool huge_ = false;
};

}  // namespace trine
