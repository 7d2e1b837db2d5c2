// The allocation counter sees operator new and kvedge's aligned buffers.
#include "platform/alloc_counter.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "platform/memory.h"

namespace kvedge {
namespace {

TEST(AllocCounterTest, HookIsInstalledInTests) { EXPECT_TRUE(AllocationHookInstalled()); }

TEST(AllocCounterTest, CountsNewAndAlignedBuffers) {
  ScopedAllocationCounter counter;
  auto p = std::make_unique<int>(3);
  std::vector<int> v(100);
  auto b = AlignedBuffer::Allocate(256, "t");
  ASSERT_TRUE(b.ok());
  EXPECT_GE(counter.count(), 3);
}

TEST(AllocCounterTest, QuietRegionCountsZero) {
  std::vector<float> buf(1024);
  ScopedAllocationCounter counter;
  float s = 0;
  for (int i = 0; i < 1000; ++i) {
    buf[i % buf.size()] += 1.0f;
    s += buf[(i * 7) % buf.size()];
  }
  EXPECT_GT(s, 0.0f);
  EXPECT_EQ(counter.count(), 0);
}

}  // namespace
}  // namespace kvedge
