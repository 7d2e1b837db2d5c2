// ThreadArena: exactly N threads, static ranges covering every item once.
#include "platform/thread_arena.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace kvedge {
namespace {

TEST(ThreadArenaTest, RejectsBadCounts) {
  for (int n : {0, -1, kMaxThreads + 1}) {
    auto a = ThreadArena::Create(n);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find("thread count"), std::string::npos);
  }
}

TEST(ThreadArenaTest, RangesCoverEveryItemOnce) {
  for (int threads : {1, 2, 3, 4}) {
    auto arena = ThreadArena::Create(threads);
    ASSERT_TRUE(arena.ok());
    for (size_t n : {0u, 1u, 2u, 3u, 7u, 100u, 1001u}) {
      std::vector<std::atomic<int>> hits(n);
      (*arena)->ParallelFor(n, [&](size_t begin, size_t end, int thread) {
        EXPECT_LT(thread, threads);
        EXPECT_GE(thread, 0);
        for (size_t i = begin; i < end; ++i) hits[i]++;
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads=" << threads << " n=" << n;
    }
  }
}

// N ranges that each wait for all N to start can only finish if N threads run
// them at once; thread indices must be exactly {0..N-1}.
void ExpectExactlyNThreads(int n) {
  auto arena = ThreadArena::Create(n);
  ASSERT_TRUE(arena.ok());
  std::atomic<int> started{0};
  std::mutex mu;
  std::set<int> indices;
  std::set<std::thread::id> ids;
  bool all_met = true;
  (*arena)->ParallelFor(static_cast<size_t>(n), [&](size_t, size_t, int thread) {
    started++;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (started.load() < n && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    std::lock_guard<std::mutex> lock(mu);
    if (started.load() < n) all_met = false;
    indices.insert(thread);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_TRUE(all_met);
  EXPECT_EQ(indices.size(), static_cast<size_t>(n));
  EXPECT_EQ(ids.size(), static_cast<size_t>(n));
  EXPECT_EQ(*indices.begin(), 0);
  EXPECT_EQ(*indices.rbegin(), n - 1);
}

TEST(ThreadArenaTest, UsesExactlyOneThread) { ExpectExactlyNThreads(1); }
TEST(ThreadArenaTest, UsesExactlyTwoThreads) { ExpectExactlyNThreads(2); }
TEST(ThreadArenaTest, UsesExactlyFourThreads) { ExpectExactlyNThreads(4); }

TEST(ThreadArenaTest, NeverMoreThanNThreads) {
  auto arena = ThreadArena::Create(2);
  ASSERT_TRUE(arena.ok());
  std::mutex mu;
  std::set<std::thread::id> ids;
  (*arena)->ParallelForEach(64, [&](size_t, int thread) {
    EXPECT_LT(thread, 2);
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_LE(ids.size(), 2u);
}

TEST(ThreadArenaTest, ForEachRunsEveryTaskOnce) {
  auto arena = ThreadArena::Create(3);
  ASSERT_TRUE(arena.ok());
  std::vector<std::atomic<int>> hits(257);
  (*arena)->ParallelForEach(hits.size(), [&](size_t t, int) { hits[t]++; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

}  // namespace
}  // namespace kvedge
