// The allocation counter sees operator new, kvedge's aligned buffers and, in
// release builds, the C allocation functions, on every thread of the process.
#include "platform/alloc_counter.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "platform/memory.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVEDGE_TEST_SANITIZED 1  // the sanitizer owns malloc: only operator new is counted
#else
#define KVEDGE_TEST_SANITIZED 0
#endif

namespace kvedge {
namespace {

// Keeps the compiler from eliding malloc/free pairs.
void* volatile g_sink = nullptr;

TEST(AllocCounterTest, HookIsInstalledInTests) {
  EXPECT_TRUE(AllocationHookInstalled());
  EXPECT_EQ(AllocationHookCountsMalloc(), !KVEDGE_TEST_SANITIZED);
}

TEST(AllocCounterTest, CountsNewAndAlignedBuffers) {
  ScopedAllocationCounter counter;
  auto p = std::make_unique<int>(3);
  std::vector<int> v(100);
  auto b = AlignedBuffer::Allocate(256, "t");
  ASSERT_TRUE(b.ok());
  EXPECT_GE(counter.count(), 3);
}

TEST(AllocCounterTest, CountsTheCAllocators) {
  if (!AllocationHookCountsMalloc()) GTEST_SKIP() << "sanitizer build: malloc belongs to the sanitizer";
  ScopedAllocationCounter counter;
  void* p = std::malloc(40);
  g_sink = p;
  p = std::realloc(p, 4000);
  g_sink = p;
  std::free(p);
  g_sink = std::calloc(3, 8);
  std::free(g_sink);
  g_sink = std::aligned_alloc(64, 128);
  std::free(g_sink);
  void* q = nullptr;
  ASSERT_EQ(posix_memalign(&q, 64, 100), 0);
  g_sink = q;
  std::free(q);
  char* copy = strdup("inside glibc");  // a shared library's own malloc call
  g_sink = copy;
  std::free(copy);
  EXPECT_EQ(counter.count(), 6);
}

TEST(AllocCounterTest, CountsOtherThreads) {
  std::atomic<bool> go{false}, done{false};
  std::thread worker([&] {
    while (!go.load()) std::this_thread::yield();
    for (int i = 0; i < 100; ++i) {
      auto p = std::make_unique<int>(i);
      g_sink = p.get();
    }
    done.store(true);
  });
  ScopedAllocationCounter counter;  // after the thread exists: its start-up is not counted
  go.store(true);
  while (!done.load()) std::this_thread::yield();
  EXPECT_GE(counter.count(), 100);
  worker.join();
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
