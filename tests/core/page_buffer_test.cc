// PageBuffer: zeroed, aligned anonymous memory whose whole 2 MiB units carry the huge-page advice.
#include "core/page_buffer.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

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
  EXPECT_FALSE(z.huge_advised());
}

TEST(PageBuffer, SmallBufferIsZeroedPageAlignedAndNotAdvised) {
  PageBuffer b(5000);
  ASSERT_EQ(b.size(), 5000u);
  ASSERT_NE(b.data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_TRUE(AllZero(b.data(), b.size()));
  EXPECT_FALSE(b.huge_advised());
  b.data()[4999] = 7;  // writable to its last byte
  EXPECT_EQ(b.data()[4999], 7);
}

TEST(PageBuffer, LargeBufferAdvisesWholeHugePagesOnly) {
  const size_t n = 2 * PageBuffer::kHugePage + 12345;
  PageBuffer b(n);
  ASSERT_EQ(b.size(), n);
  EXPECT_TRUE(AllZero(b.data(), n));
  b.data()[n - 1] = 1;
  if (!HugePagesEnabled()) {
    EXPECT_FALSE(b.huge_advised());
    GTEST_SKIP() << "transparent huge pages are off here (or TRINE_HUGE_PAGES=0): only the plain path ran";
  }
  EXPECT_TRUE(b.huge_advised());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % PageBuffer::kHugePage, 0u);
  // The kernel splits the mapping at the advice's end: the 4 MiB carry the flag ("hg"), the tail not.
  const std::string head = VmFlagsAt(b.data());
  const std::string tail = VmFlagsAt(b.data() + 2 * PageBuffer::kHugePage);
  ASSERT_FALSE(head.empty());
  ASSERT_FALSE(tail.empty());
  EXPECT_NE(head.find(" hg"), std::string::npos) << head;
  EXPECT_EQ(tail.find(" hg"), std::string::npos) << tail;
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
