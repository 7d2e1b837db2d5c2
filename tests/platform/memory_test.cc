// Aligned buffers, MemoryBudget accounting and refusal, size parsing.
#include "platform/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace kvedge {
namespace {

TEST(AlignedBufferTest, AlignedAndZeroed) {
  for (size_t n : {1u, 63u, 64u, 1000u, 1u << 20}) {
    auto b = AlignedBuffer::Allocate(n, "test");
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % kAlignment, 0u);
    EXPECT_EQ(b->size(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(b->data()[i], 0);
  }
}

// Page-mapped buffers: 2 MiB aligned, zeroed, writable to the last byte,
// moved without copying, unmapped on destruction.
TEST(AlignedBufferTest, PagesAlignedZeroedAndMovable) {
  constexpr size_t kBytes = (size_t{5} << 20) + 123;
  auto buf = AlignedBuffer::AllocatePages(kBytes, "test pages");
  ASSERT_TRUE(buf.ok()) << buf.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % (size_t{2} << 20), 0u);
  EXPECT_EQ(buf->size(), kBytes);
  for (size_t i = 0; i < kBytes; i += 4096) ASSERT_EQ(buf->data()[i], 0) << i;
  buf->data()[kBytes - 1] = 7;
  uint8_t* p = buf->data();
  AlignedBuffer moved = std::move(buf).value();
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(moved.data()[kBytes - 1], 7);
  AlignedBuffer other;
  other = std::move(moved);
  EXPECT_EQ(other.data(), p);
  EXPECT_EQ(moved.data(), nullptr);
  auto empty = AlignedBuffer::AllocatePages(0, "nothing");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->data(), nullptr);
}

// AllocateStreamed: small buffers from the heap, to the byte; big ones from
// huge pages reserving the whole 2 MiB-rounded mapping, or (sanitizer builds,
// or a budget without room for the rounding) from the heap to the byte.
// Every reservation goes back to the budget.
TEST(AlignedBufferTest, StreamedBuffersAccountWhatTheyMap) {
  constexpr size_t kBig = AlignedBuffer::kStreamedPagesBytes + 4097;
  constexpr size_t kRounded = RoundUp(kBig, AlignedBuffer::kHugePageBytes);
  MemoryBudget budget("streamed", kRounded + (size_t{1} << 20));
  {
    auto small = AlignedBuffer::AllocateStreamed(&budget, 1000, "small");
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(budget.used(), 1000u);
  }
  EXPECT_EQ(budget.used(), 0u);
  {
    auto big = AlignedBuffer::AllocateStreamed(&budget, kBig, "big");
    ASSERT_TRUE(big.ok()) << big.status().ToString();
    EXPECT_EQ(big->size(), kBig);
    big->data()[kBig - 1] = 1;
    if (budget.used() != kBig) {  // huge pages
      EXPECT_EQ(budget.used(), kRounded);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(big->data()) % AlignedBuffer::kHugePageBytes, 0u);
    }
  }
  EXPECT_EQ(budget.used(), 0u);
  {
    MemoryBudget tight("tight", kBig);  // no room for the rounding: the heap, to the byte
    auto big = AlignedBuffer::AllocateStreamed(&tight, kBig, "big");
    ASSERT_TRUE(big.ok()) << big.status().ToString();
    EXPECT_EQ(tight.used(), kBig);
    const auto refused = AlignedBuffer::AllocateStreamed(&tight, 1, "one more");
    EXPECT_FALSE(refused.ok());
  }
  auto unbudgeted = AlignedBuffer::AllocateStreamed(nullptr, kBig, "no budget");
  ASSERT_TRUE(unbudgeted.ok());
  EXPECT_EQ(unbudgeted->size(), kBig);
}

TEST(MemoryBudgetTest, ReservesReleasesAndTracksHighWater) {
  MemoryBudget budget("test budget", 1000);
  ASSERT_TRUE(budget.Reserve(600, "a").ok());
  ASSERT_TRUE(budget.Reserve(400, "b").ok());
  EXPECT_EQ(budget.used(), 1000u);
  EXPECT_EQ(budget.available(), 0u);
  budget.Release(700);
  EXPECT_EQ(budget.used(), 300u);
  EXPECT_EQ(budget.high_water(), 1000u);
}

TEST(MemoryBudgetTest, RefusesBeyondLimitWithClearMessage) {
  MemoryBudget budget("KV budget", 1024);
  ASSERT_TRUE(budget.Reserve(1000, "sinks").ok());
  const Status s = budget.Reserve(100, "window block");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "window block needs 100 B but KV budget has 24 B left of 1.00 KiB");
  EXPECT_EQ(budget.used(), 1000u);  // a refusal reserves nothing
}

TEST(MemoryBudgetTest, BufferReleasesToBudget) {
  MemoryBudget budget("b", 4096);
  {
    auto buf = AlignedBuffer::Allocate(budget, 3000, "arena");
    ASSERT_TRUE(buf.ok());
    EXPECT_EQ(budget.used(), 3000u);
    auto too_big = AlignedBuffer::Allocate(budget, 2000, "more");
    EXPECT_FALSE(too_big.ok());
    AlignedBuffer moved = std::move(buf).value();
    EXPECT_EQ(budget.used(), 3000u);
  }
  EXPECT_EQ(budget.used(), 0u);
  EXPECT_EQ(budget.high_water(), 3000u);
}

TEST(MemoryBudgetTest, ConcurrentReservationsNeverExceedLimit) {
  MemoryBudget budget("b", 10000);
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        if (budget.Reserve(7, "x").ok()) granted++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 10000 / 7);
  EXPECT_LE(budget.used(), budget.limit());
}

TEST(ParseByteSizeTest, AcceptsUnits) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("64KiB"), 64u * 1024);
  EXPECT_EQ(*ParseByteSize("64MiB"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("64M"), 64u << 20);
  EXPECT_EQ(*ParseByteSize("1.5GiB"), 3u << 29);
  EXPECT_EQ(*ParseByteSize("2 gb"), 2ull << 30);
}

TEST(ParseByteSizeTest, RejectsNonsense) {
  for (const char* bad : {"", "MiB", "-5MiB", "12parsecs", "1.2.3M", "1.5", ".", "99999999999999999999999999"}) {
    auto r = ParseByteSize(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
  EXPECT_FALSE(ParseByteSize("30000000TiB").ok());
}

TEST(FormatBytesTest, HumanUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(64u << 20), "64.0 MiB");
  EXPECT_EQ(FormatBytes(1536), "1.50 KiB");
}

TEST(StreamReadTest, SumsEveryWholeWord) {
  std::vector<uint64_t> w(1003);  // 125 rounds of 8 words, then 3 more
  uint64_t expected = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = (i + 1) * 0x9E3779B97F4A7C15ull;
    expected += w[i];
  }
  EXPECT_EQ(StreamRead(w.data(), w.size() * sizeof(uint64_t)), expected);
  // Bytes past the last whole word are not read.
  EXPECT_EQ(StreamRead(w.data(), 2 * sizeof(uint64_t) + 7), w[0] + w[1]);
  EXPECT_EQ(StreamRead(w.data(), 0), 0u);
  // Any alignment (tensors in a GGUF file are 4-byte aligned): the words
  // then straddle the stored ones.
  std::vector<unsigned char> bytes(8 * 9 + 3);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(i);
  uint64_t want = 0;
  for (size_t i = 0; i < 9; ++i) {
    uint64_t x;
    std::memcpy(&x, bytes.data() + 3 + 8 * i, sizeof(x));
    want += x;
  }
  EXPECT_EQ(StreamRead(bytes.data() + 3, 8 * 9), want);
}

TEST(RssTest, ReportsSomething) {
  EXPECT_GT(CurrentRssBytes(), 0u);
  EXPECT_GE(PeakRssBytes(), CurrentRssBytes() / 2);
}

}  // namespace
}  // namespace kvedge
