// The system prompt pinned in the sink region: after 50k tokens through a
// 256-token cache its keys and values are still the bytes written at the
// start; budgets too small to hold it plus a window are refused with numbers.
#include "runtime/chat/system_prompt.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "runtime/engine/session.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/stories.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

const ModelWeights& Stories() { return testing::StoriesModel(); }

std::vector<int> RandomTokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(n);
  for (int& x : t) x = static_cast<int>(rng() % 512);
  return t;
}

// Every lane's sink keys and values, concatenated.
std::vector<float> SinkBytes(const KvCache& cache, int* count) {
  std::vector<float> out;
  const KvCachePlan& p = cache.plan();
  const size_t d = static_cast<size_t>(p.shape.head_dim);
  for (int l = 0; l < p.shape.n_layers; ++l) {
    for (int h = 0; h < p.shape.n_kv_heads; ++h) {
      const KvCache::SinkRows s = cache.Sinks(l, h);
      *count = s.count;
      out.insert(out.end(), s.keys, s.keys + s.count * d);
      out.insert(out.end(), s.values, s.values + s.count * d);
    }
  }
  return out;
}

void CheckPinned(EvictionPolicy policy, int capacity, int stream_tokens) {
  constexpr int kSystem = 100;
  SessionOptions o;
  o.kv.policy = policy;
  o.kv.key_format = KvFormat::kInt4;
  o.kv.value_format = KvFormat::kInt4;
  o.kv.capacity = capacity;
  auto plan = PinSystemPrompt(KvShapeOf(Stories().config), kSystem, o.threads, &o.kv);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->sinks, kSystem);
  auto s = Session::Create(Stories(), o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Session& session = **s;
  const std::vector<int> system = RandomTokens(kSystem, 1);
  ASSERT_TRUE(session.Feed(system.data(), system.size()).ok());
  int pinned = 0;
  const std::vector<float> at_start = SinkBytes(session.cache(), &pinned);
  EXPECT_EQ(pinned, kSystem);

  // The conversation: a long stream through the rest of the cache.
  const std::vector<int> chat = RandomTokens(static_cast<size_t>(stream_tokens), 2);
  ASSERT_TRUE(session.Feed(chat.data(), chat.size()).ok());
  const KvCacheStats st = session.cache().Stats();
  EXPECT_EQ(st.tokens_seen, static_cast<uint64_t>(kSystem + stream_tokens));
  EXPECT_GT(st.tokens_evicted, static_cast<uint64_t>(stream_tokens - capacity));

  const std::vector<float> now = SinkBytes(session.cache(), &pinned);
  EXPECT_EQ(pinned, kSystem);
  ASSERT_EQ(now.size(), at_start.size());
  EXPECT_EQ(0, std::memcmp(now.data(), at_start.data(), now.size() * sizeof(float)))
      << "the system prompt's keys/values changed";
  const KvCache::LaneContents c = session.cache().Contents(2, 1);
  for (int i = 0; i < kSystem; ++i) ASSERT_EQ(c.tokens[static_cast<size_t>(i)], i);
  if (policy == EvictionPolicy::kSinks) {  // h2o keeps old heavy hitters next
    EXPECT_GE(c.tokens[kSystem], static_cast<int64_t>(kSystem + stream_tokens - capacity));
  }
}

TEST(SystemPrompt, PinnedThrough50kTokensOfSinks) {
  CheckPinned(EvictionPolicy::kSinks, 256, testing::ScaledCount(50000, 1000));
}

TEST(SystemPrompt, PinnedThroughH2O) {
  CheckPinned(EvictionPolicy::kH2O, 320, testing::ScaledCount(10000, 1000));
}

TEST(SystemPrompt, TooSmallBudgetsAreRefusedWithNumbers) {
  const KvShape shape = KvShapeOf(Stories().config);
  KvCacheOptions o;
  o.policy = EvictionPolicy::kSinks;
  o.capacity = 120;  // 100 pinned + one block of 32 + the hot tail do not fit
  auto plan = PinSystemPrompt(shape, 100, 1, &o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("system prompt's 100 tokens"), std::string::npos)
      << plan.status().message();
  EXPECT_NE(plan.status().message().find("capacity 120 tokens is below the minimum"), std::string::npos)
      << plan.status().message();

  KvCacheOptions b;
  b.policy = EvictionPolicy::kSinks;
  b.budget_bytes = 20000;
  plan = PinSystemPrompt(shape, 500, 1, &b);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("needs at least"), std::string::npos) << plan.status().message();

  KvCacheOptions w;
  w.policy = EvictionPolicy::kWindow;
  w.capacity = 1024;
  EXPECT_EQ(PinSystemPrompt(shape, 10, 1, &w).status().code(), StatusCode::kInvalidArgument);
  KvCacheOptions big;
  big.capacity = 20000;
  EXPECT_EQ(PinSystemPrompt(shape, kMaxSinks + 1, 1, &big).status().code(), StatusCode::kInvalidArgument);
  KvCacheOptions full;
  full.policy = EvictionPolicy::kFull;
  full.capacity = 64;
  EXPECT_EQ(PinSystemPrompt(shape, 100, 1, &full).status().code(), StatusCode::kResourceExhausted);

  // Fewer prompt tokens than the default sinks keep the default.
  KvCacheOptions small;
  small.capacity = 256;
  plan = PinSystemPrompt(shape, 2, 1, &small);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->sinks, 4);
}

}  // namespace
}  // namespace kvedge
