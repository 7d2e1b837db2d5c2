// Cache planning: exact capacity from a budget, refusals with the minimum.
#include "kvcache/kv_cache_plan.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kvedge {
namespace {

KvShape Shape(int layers, int heads, int kv_heads, int head_dim, int rope_dim, double theta) {
  KvShape s;
  s.n_layers = layers;
  s.n_heads = heads;
  s.n_kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.rope_dim = rope_dim;
  s.rope_theta = theta;
  return s;
}

KvShape Stories() { return Shape(5, 8, 4, 8, 8, 10000.0); }
KvShape Llama() { return Shape(22, 32, 4, 64, 64, 10000.0); }

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
  EXPECT_FALSE(PlanKvCache(Shape(5, 8, 3, 8, 8, 1e4), o, 1).ok());   // heads % kv heads
  EXPECT_FALSE(PlanKvCache(Shape(5, 8, 4, 12, 12, 1e4), o, 1).ok());  // head dim 12
  EXPECT_FALSE(PlanKvCache(Shape(5, 8, 4, 8, 10, 1e4), o, 1).ok());   // rope dim > head dim
  EXPECT_TRUE(PlanKvCache(Shape(5, 8, 4, 48, 48, 1e4), o, 1).ok());   // any multiple of 8
  EXPECT_FALSE(PlanKvCache(Shape(5, 8, 4, 264, 264, 1e4), o, 1).ok());  // above 256
  KvShape bad = Stories();
  bad.rope_freqs = {1.0, 0.5, 0.25};  // 4 pairs expected
  EXPECT_FALSE(PlanKvCache(bad, o, 1).ok());
  bad.rope_freqs = {1.0, 0.5, -0.25, 0.1};
  EXPECT_FALSE(PlanKvCache(bad, o, 1).ok());
  bad = Stories();
  bad.sliding_window = -1;
  EXPECT_FALSE(PlanKvCache(bad, o, 1).ok());
  bad = Stories();
  bad.attn_softcap = std::nanf("");
  EXPECT_FALSE(PlanKvCache(bad, o, 1).ok());
  KvCacheOptions none = Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, 0);
  auto p = PlanKvCache(Stories(), none, 1);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("--kv-budget"), std::string::npos);
}

// The ablation layouts cost what the formats say: token-wise INT4 keys at
// head_dim 8 take exactly the bytes of channel-wise ones (16 f16 scale/min
// pairs either way), and a quantized tail holds a block in the key/value formats.
TEST(KvCachePlanTest, AblationBytes) {
  KvCacheOptions o = Opt(EvictionPolicy::kSinks, KvFormat::kInt4, KvFormat::kInt4, 0);
  o.capacity = 260;
  auto channel = PlanKvCache(Stories(), o, 1);
  o.key_axis = KeyQuantAxis::kToken;
  auto token = PlanKvCache(Stories(), o, 1);
  ASSERT_TRUE(channel.ok() && token.ok());
  EXPECT_EQ(channel->key_block_bytes, KeyBlockBytes(KvFormat::kInt4, 8));
  EXPECT_EQ(token->key_block_bytes, ValueBlockBytes(KvFormat::kInt4, 8));
  EXPECT_EQ(token->key_block_bytes, channel->key_block_bytes);
  EXPECT_GT(token->scratch_bytes_per_thread, channel->scratch_bytes_per_thread);  // f32 decode of every block
  o.key_axis = KeyQuantAxis::kChannel;
  o.hot_tail = false;
  auto cold = PlanKvCache(Stories(), o, 1);
  ASSERT_TRUE(cold.ok());
  EXPECT_EQ(cold->tail_key_format(), KvFormat::kInt4);
  EXPECT_EQ(cold->tail_key_bytes, channel->key_block_bytes);
  EXPECT_EQ(cold->tail_value_bytes, channel->value_block_bytes);
  EXPECT_LT(cold->lane_bytes, channel->lane_bytes);
}

TEST(KvCachePlanTest, BadVariantOptions) {
  KvCacheOptions o = Opt(EvictionPolicy::kH2O, KvFormat::kInt4, KvFormat::kInt4, 0);
  o.capacity = 256;
  ASSERT_TRUE(PlanKvCache(Stories(), o, 1).ok());
  o.key_rope = KeyRope::kPost;  // heavy hitters would need per-token rotation
  EXPECT_FALSE(PlanKvCache(Stories(), o, 1).ok());
  o.key_rope = KeyRope::kPre;
  EXPECT_TRUE(PlanKvCache(Stories(), o, 1).ok());
  o.h2o_score = H2OScore::kTova;
  o.h2o_decay = 0.9f;  // decay belongs to the cumulative score
  EXPECT_FALSE(PlanKvCache(Stories(), o, 1).ok());
  o.h2o_decay = 1.0f;
  o.h2o_lifetime = -1;
  EXPECT_FALSE(PlanKvCache(Stories(), o, 1).ok());
  KeyRope r;
  H2OScore sc;
  KeyQuantAxis a;
  EXPECT_TRUE(ParseKeyRope("pre", &r) && r == KeyRope::kPre);
  EXPECT_TRUE(ParseH2OScore("age", &sc) && sc == H2OScore::kAge);
  EXPECT_TRUE(ParseKeyQuantAxis("token", &a) && a == KeyQuantAxis::kToken);
  EXPECT_FALSE(ParseKeyRope("rope", &r));
}

}  // namespace
}  // namespace kvedge
