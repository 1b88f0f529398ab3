// PageBuffer: zeroed, aligned anonymous memory whose whole 2 MiB units carry the huge-page advice.
#include "core/page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace trine {
namespace {

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// VmFlags of the mapping of this process that contains `addr` ("" when none does).
std::string VmFlagsAt(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(' ') != std::string::npos &&
        line.find(':') > line.find(' ')) {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(PageBuffer, EmptyHasNoMemory) {
  PageBuffer b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.data(), nullptr);
  PageBuffer z(0);
  EXPECT_TRUE(z.empty());
  EXPECT_EQ(z.data(), nullptr);
  EXPECT_EQ(z.huge_bytes(), 0u);
}

TEST(PageBuffer, SmallBufferIsZeroedPageAlignedAndNotAdvised) {
  PageBuffer b(5000);
  ASSERT_EQ(b.size(), 5000u);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  EXPECT_EQ(b.huge_bytes(), 0u);  // under 2 MiB: no whole unit
  b.data()[4999] = 7;  // writable to its last byte
  EXPECT_EQ(b.data()[4999], 7);
}

// kAtFault: the whole 2 MiB units carry the advice from the start ("hg"), the tail does not.
TEST(PageBuffer, AtFaultAdvisesWholeUnitsOnly) {
  const size_t n = 2 * PageBuffer::kHugePage + 12345;
  PageBuffer b(n, HugePages::kAtFault);
  ASSERT_EQ(b.size(), n);
  EXPECT_TRUE(AllZero(b.data(), n));
  b.data()[n - 1] = 1;
  if (!HugePagesEnabled()) {
    EXPECT_EQ(b.huge_bytes(), 0u);
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): only the plain path ran";
  }
  EXPECT_EQ(b.huge_bytes(), 2 * PageBuffer::kHugePage);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % PageBuffer::kHugePage, 0u);
  const std::string head = VmFlagsAt(b.data());
  const std::string tail = VmFlagsAt(b.data() + 2 * PageBuffer::kHugePage);
  ASSERT_FALSE(head.empty());
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(head.find(" hg"), std::string::npos) << head;
  EXPECT_EQ(tail.find(" hg"), std::string::npos) << tail;
}

// kLater (weights): no advice until PromoteToHugePage, which keeps the contents.
TEST(PageBuffer, LaterPromotesOneUnitKeepingItsBytes) {
  const size_t n = 2 * PageBuffer::kHugePage + 4096;
  PageBuffer b(n);
  for (size_t i = 0; i < n; ++i) b.data()[i] = static_cast<uint8_t>(i * 7 + 3);
  if (!HugePagesEnabled()) {
    EXPECT_EQ(b.huge_bytes(), 0u);
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): only the plain path ran";
  }
  ASSERT_EQ(b.huge_bytes(), 2 * PageBuffer::kHugePage);
  EXPECT_EQ(VmFlagsAt(b.data()).find(" hg"), std::string::npos);
  const bool collapsed = PromoteToHugePage(b.data() + PageBuffer::kHugePage);
  std::printf("[ page_buffer ] MADV_COLLAPSE of one unit: %s\n", collapsed ? "done" : "refused by the kernel");
  // The advice sticks either way; only the promoted unit has it.
  EXPECT_EQ(VmFlagsAt(b.data()).find(" hg"), std::string::npos);
  EXPECT_NE(VmFlagsAt(b.data() + PageBuffer::kHugePage).find(" hg"), std::string::npos);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(b.data()[i], static_cast<uint8_t>(i * 7 + 3)) << "byte " << i;
  }
}

// Slices of one reservation: consecutive and page-aligned, zeroed, each freed on its own; whole
// 2 MiB units listed for promotion; a request past the capacity gets a buffer of its own.
TEST(PageArena, SlicesShareUnitsAndFreeIndependently) {
  if (!HugePagesEnabled()) {
    PageArena off(8u << 20);
    PageBuffer b = off.Allocate(5000);  // without huge pages the arena hands out plain buffers
    EXPECT_EQ(b.size(), 5000u);
    EXPECT_TRUE(off.Units().empty());
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): the arena is not used";
  }
  PageArena arena(3 * PageBuffer::kHugePage);
  PageBuffer a = arena.Allocate(1500000);  // 1.43 MiB
  PageBuffer b = arena.Allocate(1000000);  // crosses the first 2 MiB boundary
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % PageBuffer::kHugePage, 0u);
  EXPECT_EQ(b.data(), a.data() + (1500000 + 4095) / 4096 * 4096);
  EXPECT_TRUE(AllZero(a.data(), a.size()));
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  EXPECT_EQ(a.huge_bytes(), 0u);  // the arena's units are promoted, not the slices'
  std::memset(a.data(), 1, a.size());
  std::memset(b.data(), 2, b.size());
  const std::vector<uint8_t*> units = arena.Units();
  ASSERT_EQ(units.size(), 1u);  // 2.43 MiB handed out: one whole unit
  EXPECT_EQ(units[0], a.data());
  (void)PromoteToHugePage(units[0]);  // the kernel may refuse; the bytes must stay either way
  EXPECT_EQ(a.data()[a.size() - 1], 1);
  EXPECT_EQ(b.data()[0], 2);
  a.Reset();  // unmaps a's pages only
  EXPECT_EQ(b.data()[b.size() - 1], 2);
  PageBuffer too_big = arena.Allocate(2 * PageBuffer::kHugePage);  // 0.57 MiB of room left
  ASSERT_EQ(too_big.size(), 2 * PageBuffer::kHugePage);
  EXPECT_EQ(too_big.huge_bytes(), 2 * PageBuffer::kHugePage);  // a buffer of its own
  EXPECT_TRUE(AllZero(too_big.data(), too_big.size()));
}

TEST(PageBuffer, MoveTransfersOwnership) {
  PageBuffer a(3 * 4096);
  uint8_t* p = a.data();
  p[0] = 42;
  PageBuffer b(std::move(a));
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[0], 42);
  PageBuffer c(4096);
  c = std::move(b);  // frees c's own pages, takes b's
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 3u * 4096);
  c.Reset();
  EXPECT_TRUE(c.empty());
}

}  // namespace
}  // namespace trine
