// Cache planning: exact capacity from a budget, refusals with the minimum.
#include "kvcache/kv_cache_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>
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

// The plan owns the arena's layout: for every policy × format × head size ×
// key path, every lane and scratch region lies inside its lane / scratch,
// no two overlap, each has the size its contents need, and the arena holds
// exactly the lanes, the RoPE table and one scratch per thread.
namespace layout {

std::vector<std::pair<const char*, Region>> LaneRegions(const LaneLayout& l) {
  return {{"sink_keys", l.sink_keys}, {"sink_values", l.sink_values}, {"block_keys", l.block_keys},
          {"block_values", l.block_values}, {"tail_keys", l.tail_keys}, {"tail_values", l.tail_values},
          {"scores", l.scores}, {"heavy_ids", l.heavy_ids}};
}

std::vector<std::pair<const char*, Region>> ScratchRegions(const ScratchLayout& s) {
  return {{"scores", s.scores}, {"block_angles", s.block_angles}, {"block_ptrs", s.block_ptrs},
          {"query", s.query}, {"reordered", s.reordered}, {"stage_keys", s.stage_keys}, {"stage_values", s.stage_values},
          {"stage_tmp", s.stage_tmp}, {"slow_keys", s.slow_keys}, {"candidates", s.candidates},
          {"cand_scores", s.cand_scores}, {"cand_ids", s.cand_ids}, {"cand_index", s.cand_index},
          {"cand_order", s.cand_order}};
}

// Inside [0, total), pairwise disjoint, 64-byte aligned (but `packed`).
void ExpectDisjointInside(const std::vector<std::pair<const char*, Region>>& regions, size_t total,
                          const std::string& where, const char* packed = "") {
  for (size_t i = 0; i < regions.size(); ++i) {
    const auto& [name, r] = regions[i];
    if (r.bytes == 0) continue;
    EXPECT_LE(r.end(), total) << where << " " << name;
    if (std::string(name) != packed) {
      EXPECT_EQ(r.offset % 64, 0u) << where << " " << name;
    }
    for (size_t j = i + 1; j < regions.size(); ++j) {
      const auto& [other, o] = regions[j];
      if (o.bytes == 0) continue;
      EXPECT_TRUE(r.end() <= o.offset || o.end() <= r.offset) << where << ": " << name << " overlaps " << other;
    }
  }
}

TEST(KvCachePlanTest, LayoutRegionsAreInsideAndDisjoint) {
  int plans = 0;
  for (int head_dim : {8, 16, 32, 48, 64, 80, 128, 256}) {
    if (!IsSupportedHeadDim(head_dim)) continue;
    KvShape shape;
    shape.n_layers = 2;
    shape.n_heads = 8;
    shape.n_kv_heads = 2;
    shape.head_dim = head_dim;
    shape.rope_dim = head_dim;
    for (EvictionPolicy p : {EvictionPolicy::kFull, EvictionPolicy::kWindow, EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
      for (KvFormat kf : {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
        for (KvFormat vf : {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
          for (int variant = 0; variant < 3; ++variant) {  // fast path, pre-RoPE keys (slow path), no hot tail
            KvCacheOptions o = Opt(p, kf, vf, 0);
            o.capacity = 200;
            if (variant == 1) o.key_rope = KeyRope::kPre;
            if (variant == 2) o.hot_tail = false;
            auto plan = PlanKvCache(shape, o, 3);
            ASSERT_TRUE(plan.ok()) << plan.status().ToString();
            const std::string where = plan->Describe() + " D=" + std::to_string(head_dim);
            const LaneLayout& l = plan->lane;
            const size_t blocks = static_cast<size_t>(plan->heavy_blocks + plan->ring_blocks);
            const size_t d = static_cast<size_t>(head_dim);
            EXPECT_EQ(l.sink_keys.bytes, static_cast<size_t>(plan->sinks) * d * sizeof(float)) << where;
            EXPECT_EQ(l.sink_values.bytes, l.sink_keys.bytes) << where;
            EXPECT_EQ(l.block_keys.bytes, blocks * plan->key_block_bytes) << where;
            EXPECT_EQ(l.block_values.bytes, blocks * plan->value_block_bytes) << where;
            EXPECT_EQ(l.tail_keys.bytes, plan->tail_key_bytes) << where;
            EXPECT_EQ(l.tail_values.bytes, plan->tail_value_bytes) << where;
            const bool h2o = p == EvictionPolicy::kH2O;
            EXPECT_EQ(l.scores.bytes, h2o ? (blocks + 1) * kKvBlockTokens * sizeof(float) : 0) << where;
            EXPECT_EQ(l.heavy_ids.bytes, h2o ? plan->heavy_blocks * kKvBlockTokens * sizeof(int64_t) : 0u) << where;
            EXPECT_EQ(l.bytes % 64, 0u);
            EXPECT_EQ(plan->lane_bytes, l.bytes);
            ExpectDisjointInside(LaneRegions(l), l.bytes, where, "sink_values");

            const ScratchLayout& s = plan->scratch;
            const size_t all = blocks + 1, merge = plan->heavy_blocks * kKvBlockTokens + kKvBlockTokens;
            const size_t group = 4;
            EXPECT_EQ(s.scores.bytes, (group + 1) * (plan->sinks + all * kKvBlockTokens) * sizeof(float)) << where;
            EXPECT_EQ(s.block_angles.bytes, all * static_cast<size_t>(head_dim) * sizeof(float)) << where;
            EXPECT_EQ(s.block_ptrs.bytes, 2 * all * sizeof(void*)) << where;
            EXPECT_EQ(s.reordered.bytes, (group + 1) * d * sizeof(float)) << where;
            EXPECT_EQ(s.stage_keys.bytes, kKvBlockTokens * d * sizeof(float)) << where;
            EXPECT_EQ(s.slow_keys.bytes, plan->SlowKeyPath() ? (all + 1) * kKvBlockTokens * d * sizeof(float) : 0u)
                << where;
            EXPECT_EQ(s.candidates.bytes, h2o ? 2 * merge * d * sizeof(float) : 0u) << where;
            EXPECT_EQ(s.cand_order.bytes, h2o ? merge * sizeof(int32_t) : 0u) << where;
            EXPECT_EQ(plan->scratch_bytes_per_thread, s.bytes);
            ExpectDisjointInside(ScratchRegions(s), s.bytes, where);

            EXPECT_EQ(plan->arena_bytes,
                      plan->lanes() * l.bytes + plan->rope_table_bytes + 3 * s.bytes) << where;
            ++plans;
          }
        }
      }
    }
  }
  EXPECT_GT(plans, 4 * 16 * 3);
}

}  // namespace layout

}  // namespace
}  // namespace kvedge
