// Cache planning: exact capacity from a budget, refusals with the minimum.
#include "kvcache/kv_cache_plan.h"

#include <gtest/gtest.h>

namespace kvedge {
namespace {

KvShape Stories() { return KvShape{5, 8, 4, 8, 8, 10000.0}; }
KvShape Llama() { return KvShape{22, 32, 4, 64, 64, 10000.0}; }

KvCacheOptions Opt(EvictionPolicy p, KvFormat k, KvFormat v, uint64_t budget) {
  KvCacheOptions o;
  o.policy = p;
  o.key_format = k;
  o.value_format = v;
  o.budget_bytes = budget;
  return o;
}

TEST(KvCachePlanTest, CapacityFromBudgetIsExact) {
  for (const KvShape& shape : {Stories(), Llama()}) {
    for (EvictionPolicy p : {EvictionPolicy::kFull, EvictionPolicy::kWindow, EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
      for (KvFormat f : {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
        for (uint64_t budget : {uint64_t{256} << 10, uint64_t{4} << 20, uint64_t{64} << 20}) {
          auto plan = PlanKvCache(shape, Opt(p, f, f, budget), 2);
          if (!plan.ok()) {
            EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted) << plan.status().ToString();
            continue;
          }
          EXPECT_LE(plan->arena_bytes, budget) << plan->Describe();
          EXPECT_EQ(plan->capacity, plan->sinks + plan->heavy + plan->window);
          // One more token no longer fits.
          KvCacheOptions more = Opt(p, f, f, 0);
          more.capacity = plan->capacity + 1;
          auto bigger = PlanKvCache(shape, more, 2);
          ASSERT_TRUE(bigger.ok()) << bigger.status().ToString();
          EXPECT_GT(bigger->arena_bytes, budget) << plan->Describe();
        }
      }
    }
  }
}

TEST(KvCachePlanTest, QuantizedHoldsMoreTokens) {
  const uint64_t budget = 16 << 20;
  auto f16 = PlanKvCache(Llama(), Opt(EvictionPolicy::kSinks, KvFormat::kF16, KvFormat::kF16, budget), 1);
  auto q8 = PlanKvCache(Llama(), Opt(EvictionPolicy::kSinks, KvFormat::kInt8, KvFormat::kInt8, budget), 1);
  auto q4 = PlanKvCache(Llama(), Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, budget), 1);
  ASSERT_TRUE(f16.ok() && q8.ok() && q4.ok());
  EXPECT_GT(q8->capacity, f16->capacity * 17 / 10);
  EXPECT_GT(q4->capacity, f16->capacity * 3);
}

TEST(KvCachePlanTest, TooSmallBudgetNamesTheMinimum) {
  auto plan = PlanKvCache(Llama(), Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, 1000), 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(plan.status().message().find("too small"), std::string::npos);
  EXPECT_NE(plan.status().message().find("needs at least"), std::string::npos);
  EXPECT_NE(plan.status().message().find("36 tokens per lane"), std::string::npos) << plan.status().message();
}

TEST(KvCachePlanTest, CapacityBelowMinimumRefused) {
  KvCacheOptions o = Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, 0);
  o.capacity = 20;
  auto plan = PlanKvCache(Stories(), o, 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("below the minimum 36"), std::string::npos) << plan.status().message();
}

TEST(KvCachePlanTest, PolicyDefaults) {
  KvCacheOptions o = Opt(EvictionPolicy::kH2O, KvFormat::kInt4, KvFormat::kInt4, 0);
  o.capacity = 256;
  auto plan = PlanKvCache(Stories(), o, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->sinks, 4);
  EXPECT_EQ(plan->heavy, 124);
  EXPECT_EQ(plan->window, 128);
  EXPECT_EQ(plan->ring_blocks, 3);  // ring + a full tail fill the window
  o.policy = EvictionPolicy::kSinks;
  plan = PlanKvCache(Stories(), o, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->window, 252);
  EXPECT_EQ(plan->ring_blocks, 8);
  EXPECT_EQ(plan->tail_format, KvFormat::kF16);
}

TEST(KvCachePlanTest, BadOptions) {
  KvCacheOptions o = Opt(EvictionPolicy::kWindow, KvFormat::kInt4, KvFormat::kInt4, 0);
  o.capacity = 128;
  o.sinks = 4;
  EXPECT_FALSE(PlanKvCache(Stories(), o, 1).ok());
  o.sinks = -1;
  EXPECT_FALSE(PlanKvCache(KvShape{5, 8, 3, 8, 8, 1e4}, o, 1).ok());   // heads % kv heads
  EXPECT_FALSE(PlanKvCache(KvShape{5, 8, 4, 12, 12, 1e4}, o, 1).ok());  // head dim 12
  EXPECT_FALSE(PlanKvCache(KvShape{5, 8, 4, 8, 10, 1e4}, o, 1).ok());   // rope dim > head dim
  KvCacheOptions none = Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, 0);
  auto p = PlanKvCache(Stories(), none, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-budget"), std::string::npos);
}

}  // namespace
}  // namespace kvedge
