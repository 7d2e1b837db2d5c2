// KV arena: policies against brute-force models, attention against naive
// attention over the kept tokens, positions, byte bounds, zero allocations.
#include "kvcache/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

#include "platform/alloc_counter.h"
#include "platform/thread_arena.h"
#include "tests/testing/test_data.h"
#include "simd/kv_kernels.h"
#include "simd/kv_kernels_ref.h"
#include "hwy/targets.h"

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

constexpr int G = kKvBlockTokens;

// Random per-token tensors for every layer: k, v [kv][D]; q [heads][D].
struct Stream {
  KvShape shape;
  std::vector<std::vector<float>> k, v, q;  // [token·layers + layer]
  Stream(const KvShape& s, int tokens, uint32_t seed, bool outliers = false) : shape(s) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, 1.0f);
    const int kvd = s.n_kv_heads * s.head_dim;
    for (int t = 0; t < tokens * s.n_layers; ++t) {
      std::vector<float> kk(kvd), vv(kvd), qq(static_cast<size_t>(s.n_heads) * s.head_dim);
      for (int i = 0; i < kvd; ++i) {
        kk[i] = n(rng) * ((outliers && i % s.head_dim == 3) ? 12.0f : 1.0f) + (outliers ? 0.5f : 0.0f);
        vv[i] = n(rng);
      }
      for (auto& x : qq) x = n(rng);
      k.push_back(std::move(kk));
      v.push_back(std::move(vv));
      q.push_back(std::move(qq));
    }
  }
  const float* K(int t, int l) const { return k[static_cast<size_t>(t) * shape.n_layers + l].data(); }
  const float* V(int t, int l) const { return v[static_cast<size_t>(t) * shape.n_layers + l].data(); }
  const float* Q(int t, int l) const { return q[static_cast<size_t>(t) * shape.n_layers + l].data(); }
};

// x rotated to position pos, in double, from the RoPE definition: pair i is
// (2i, 2i+1) (norm) or (i, i + rope_dim/2) (neox), turned by θ_i·pos with θ_i
// from rope_freqs or base^(−2i/rope_dim), the rotated channels scaled by
// rope_mscale.
std::vector<double> Rotate(const float* x, const KvShape& s, int64_t pos) {
  std::vector<double> out(x, x + s.head_dim);
  const int half = s.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = s.rope_freqs.empty() ? std::pow(s.rope_theta, -2.0 * i / s.rope_dim) : s.rope_freqs[i];
    const double a = theta * static_cast<double>(pos);
    const int i0 = s.rope_style == RopeStyle::kNeox ? i : 2 * i;
    const int i1 = s.rope_style == RopeStyle::kNeox ? i + half : 2 * i + 1;
    const double x0 = x[i0], x1 = x[i1], m = s.rope_mscale;
    out[i0] = m * (x0 * std::cos(a) - x1 * std::sin(a));
    out[i1] = m * (x0 * std::sin(a) + x1 * std::cos(a));
  }
  return out;
}

// Naive attention of one query head over tokens (stream indices) at
// positions; returns the output and (optionally) the softmax weights. Scale,
// soft-cap and the sliding window (by stream index) as KvShape defines them.
std::vector<double> NaiveAttention(const Stream& st, int layer, int head, int query_token,
                                   const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions,
                                   int64_t query_pos, std::vector<double>* probs) {
  const KvShape& s = st.shape;
  const int kvh = head / (s.n_heads / s.n_kv_heads);
  const auto q = Rotate(st.Q(query_token, layer) + static_cast<size_t>(head) * s.head_dim, s, query_pos);
  const double scale = s.attn_scale > 0 ? s.attn_scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  std::vector<double> scores(tokens.size());
  std::vector<bool> visible(tokens.size(), true);
  double mx = -1e300;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto k = Rotate(st.K(static_cast<int>(tokens[i]), layer) + static_cast<size_t>(kvh) * s.head_dim, s, positions[i]);
    double dot = 0;
    for (int c = 0; c < s.head_dim; ++c) dot += q[c] * k[c];
    scores[i] = dot * scale;
    if (s.attn_softcap > 0) scores[i] = s.attn_softcap * std::tanh(scores[i] / s.attn_softcap);
    visible[i] = !s.Windowed(layer) || query_token - tokens[i] < s.sliding_window;
    if (visible[i]) mx = std::max(mx, scores[i]);
  }
  double sum = 0;
  for (size_t i = 0; i < tokens.size(); ++i) sum += (scores[i] = visible[i] ? std::exp(scores[i] - mx) : 0.0);
  std::vector<double> out(s.head_dim, 0.0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    scores[i] /= sum;
    const float* v = st.V(static_cast<int>(tokens[i]), layer) + static_cast<size_t>(kvh) * s.head_dim;
    for (int c = 0; c < s.head_dim; ++c) out[c] += scores[i] * v[c];
  }
  if (probs != nullptr) *probs = scores;
  return out;
}

// Brute-force policy model for one lane: the kept stream indices in cache order.
struct PolicyModel {
  KvCachePlan plan;
  std::vector<int64_t> sinks;
  std::vector<std::pair<int64_t, double>> heavy;                  // (token, score), stream order
  std::deque<std::vector<std::pair<int64_t, double>>> ring;       // blocks
  std::vector<std::pair<int64_t, double>> tail;
  std::deque<int64_t> window;                                     // window/sinks/full: token-exact
  int64_t seen = 0;

  void Append() {
    const int64_t t = seen++;
    if (static_cast<int>(sinks.size()) < plan.sinks) {
      sinks.push_back(t);
      return;
    }
    if (plan.policy != EvictionPolicy::kH2O) {
      window.push_back(t);
      if (plan.policy != EvictionPolicy::kFull && static_cast<int>(window.size()) > plan.window) window.pop_front();
      return;
    }
    tail.push_back({t, 0.0});
    if (static_cast<int>(tail.size()) == G) {
      if (static_cast<int>(ring.size()) == plan.ring_blocks) {
        auto cand = heavy;
        for (auto& x : ring.front()) cand.push_back(x);
        ring.pop_front();
        // Rank: not expired first, then score (age: per query received).
        const auto rank = [&](const std::pair<int64_t, double>& x) {
          const double age = static_cast<double>(t - x.first);
          const bool expired = plan.h2o_lifetime > 0 && age > plan.h2o_lifetime;
          return std::pair<int, double>(expired ? 0 : 1,
                                        plan.h2o_score == H2OScore::kAge ? x.second / age : x.second);
        };
        std::stable_sort(cand.begin(), cand.end(), [&](const auto& a, const auto& b) {
          if (rank(a) != rank(b)) return rank(a) > rank(b);
          return a.first < b.first;
        });
        cand.resize(std::min<size_t>(cand.size(), static_cast<size_t>(plan.heavy)));
        std::sort(cand.begin(), cand.end());
        heavy = cand;
      }
      ring.push_back(tail);
      tail.clear();
    }
  }
  std::vector<int64_t> Kept() const {
    std::vector<int64_t> out = sinks;
    for (auto& x : heavy) out.push_back(x.first);
    for (auto& b : ring) for (auto& x : b) out.push_back(x.first);
    for (auto& x : tail) out.push_back(x.first);
    for (auto x : window) out.push_back(x);
    return out;
  }
  // Adds p (over Kept() order) to h2o scores: score = decay·score + p
  // (TOVA: score = p).
  void AddScores(const std::vector<double>& p) {
    size_t i = sinks.size();
    const double decay = plan.h2o_score == H2OScore::kTova ? 0.0 : plan.h2o_decay;
    for (auto& x : heavy) x.second = decay * x.second + p[i++];
    for (auto& b : ring) for (auto& x : b) x.second = decay * x.second + p[i++];
    for (auto& x : tail) x.second = decay * x.second + p[i++];
  }
};

KvCachePlan MakePlan(const KvShape& shape, EvictionPolicy policy, KvFormat f, int capacity, int sinks = -1,
                     int heavy = -1, PositionMode pos = PositionMode::kInCache, int threads = 1,
                     KvCacheOptions o = KvCacheOptions()) {
  o.policy = policy;
  o.key_format = f;
  o.value_format = f;
  o.capacity = capacity;
  o.sinks = sinks;
  o.heavy = heavy;
  o.positions = pos;
  auto plan = PlanKvCache(shape, o, threads);
  KVEDGE_CHECK(plan.ok());
  return *plan;
}

// Options with one variant set, for the tables below.
KvCacheOptions With(KeyRope rope, H2OScore score = H2OScore::kCumulative, int lifetime = 0, bool hot_tail = true) {
  KvCacheOptions o;
  o.key_rope = rope;
  o.h2o_score = score;
  o.h2o_lifetime = lifetime;
  o.hot_tail = hot_tail;
  return o;
}

double RelL2(const std::vector<double>& ref, const float* got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (ref[i] - got[i]) * (ref[i] - got[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct PolicyCase {
  EvictionPolicy policy;
  int capacity, sinks, heavy;
  PositionMode positions;
  KvCacheOptions variant = KvCacheOptions();
  int head_dim = 16;
  bool features = false;  // NEOX, partial rotary, frequencies, magnitude, scale, soft-cap, windowed layer 0
};

// The attention features of qwen2/phi3/gemma2 in one shape: 2 layers (layer 0
// windowed, layer 1 global), 4 query heads on 2 kv heads.
KvShape FeatureShape(int head_dim) {
  KvShape s = Shape(2, 4, 2, head_dim, head_dim - 8, 10000.0);
  s.rope_style = RopeStyle::kNeox;
  for (int i = 0; i < s.rope_dim / 2; ++i) {
    s.rope_freqs.push_back(std::pow(s.rope_theta, -2.0 * i / s.rope_dim) / (1.0 + 0.25 * i));
  }
  s.rope_mscale = 1.19f;
  s.attn_scale = 0.3f;
  s.attn_softcap = 5.0f;
  s.sliding_window = 40;
  s.swa_period = 2;
  return s;
}

class PolicyTest : public ::testing::TestWithParam<PolicyCase> {};

// Every step: the lane holds exactly what the brute-force model keeps, in the
// same order, at the expected positions, and f32 attention over the arena
// equals naive attention over those tokens.
TEST_P(PolicyTest, MatchesBruteForceAndNaiveAttention) {
  const PolicyCase pc = GetParam();
  const KvShape shape = pc.features ? FeatureShape(pc.head_dim) : Shape(2, 4, 2, pc.head_dim, pc.head_dim, 10000.0);
  const KvCachePlan plan =
      MakePlan(shape, pc.policy, KvFormat::kF32, pc.capacity, pc.sinks, pc.heavy, pc.positions, 1, pc.variant);
  auto cache = KvCache::Create(plan, nullptr);
  ASSERT_TRUE(cache.ok());
  const int tokens = pc.policy == EvictionPolicy::kFull ? pc.capacity : testing::ScaledCount(700, 320);
  const Stream st(shape, tokens, 7);
  PolicyModel prototype;
  prototype.plan = plan;
  std::vector<PolicyModel> models(static_cast<size_t>(shape.n_layers * shape.n_kv_heads), prototype);
  std::vector<float> out(static_cast<size_t>(shape.n_heads) * shape.head_dim);
  const int group = shape.n_heads / shape.n_kv_heads;
  double worst = 0;
  for (int t = 0; t < tokens; ++t) {
    ASSERT_TRUE((*cache)->CheckRoom().ok());
    for (int l = 0; l < shape.n_layers; ++l) {
      (*cache)->Append(l, st.K(t, l), st.V(t, l));
      (*cache)->Attend(l, st.Q(t, l), out.data(), nullptr);
      for (int h = 0; h < shape.n_kv_heads; ++h) {
        PolicyModel& m = models[static_cast<size_t>(l * shape.n_kv_heads + h)];
        m.Append();
        const auto kept = m.Kept();
        const auto got = (*cache)->Contents(l, h);
        ASSERT_EQ(got.tokens, kept) << "token " << t << " layer " << l << " lane " << h;
        std::vector<int64_t> positions(kept.size());
        for (size_t i = 0; i < kept.size(); ++i) {
          positions[i] = pc.positions == PositionMode::kAbsolute ? kept[i] : static_cast<int64_t>(i);
        }
        ASSERT_EQ(got.positions, positions);
        std::vector<double> psum(kept.size(), 0.0);
        for (int g = 0; g < group; ++g) {
          const int head = h * group + g;
          std::vector<double> p;
          const auto ref = NaiveAttention(st, l, head, t, kept, positions, positions.back(), &p);
          const double err = RelL2(ref, out.data() + static_cast<size_t>(head) * shape.head_dim);
          worst = std::max(worst, err);
          ASSERT_LT(err, 2e-5) << "token " << t << " head " << head;
          for (size_t i = 0; i < p.size(); ++i) psum[i] += p[i];
        }
        m.AddScores(psum);
      }
    }
  }
  const KvCacheStats s = (*cache)->Stats();
  EXPECT_EQ(s.tokens_seen, static_cast<uint64_t>(tokens));
  EXPECT_EQ(s.tokens_held + s.tokens_evicted, static_cast<uint64_t>(tokens));
  RecordProperty("worst_rel_l2", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(
    Policies, PolicyTest,
    ::testing::Values(PolicyCase{EvictionPolicy::kFull, 150, -1, -1, PositionMode::kInCache},
                      PolicyCase{EvictionPolicy::kWindow, 70, -1, -1, PositionMode::kInCache},
                      PolicyCase{EvictionPolicy::kWindow, 64, -1, -1, PositionMode::kAbsolute},
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache},
                      PolicyCase{EvictionPolicy::kSinks, 37, 1, -1, PositionMode::kAbsolute},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache},
                      PolicyCase{EvictionPolicy::kH2O, 200, 2, 70, PositionMode::kAbsolute},
                      PolicyCase{EvictionPolicy::kH2O, 100, 4, -1, PositionMode::kInCache},
                      // Key rotations, H2O rankings and the quantized-tail path
                      // (exact in f32) against the same brute force.
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache, With(KeyRope::kPost)},
                      PolicyCase{EvictionPolicy::kWindow, 64, -1, -1, PositionMode::kAbsolute, With(KeyRope::kPost)},
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache, With(KeyRope::kPre)},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache, With(KeyRope::kPre)},
                      PolicyCase{EvictionPolicy::kH2O, 200, 2, 70, PositionMode::kAbsolute, With(KeyRope::kPre)},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache,
                                 With(KeyRope::kInBlock, H2OScore::kTova)},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache,
                                 With(KeyRope::kInBlock, H2OScore::kAge)},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache,
                                 With(KeyRope::kInBlock, H2OScore::kCumulative, 150)},
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache,
                                 With(KeyRope::kInBlock, H2OScore::kCumulative, 0, false)},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache,
                                 With(KeyRope::kInBlock, H2OScore::kCumulative, 0, false)},
                      // Head sizes whose value groups straddle tokens, and the
                      // architecture features (sliding window with each policy).
                      PolicyCase{EvictionPolicy::kFull, 150, -1, -1, PositionMode::kInCache, {}, 48},
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache, {}, 80},
                      PolicyCase{EvictionPolicy::kFull, 150, -1, -1, PositionMode::kInCache, {}, 48, true},
                      PolicyCase{EvictionPolicy::kSinks, 100, 4, -1, PositionMode::kInCache, {}, 48, true},
                      PolicyCase{EvictionPolicy::kH2O, 140, 4, 40, PositionMode::kInCache, {}, 112, true},
                      PolicyCase{EvictionPolicy::kWindow, 64, -1, -1, PositionMode::kAbsolute, With(KeyRope::kPost), 24,
                                 true},
                      PolicyCase{EvictionPolicy::kH2O, 200, 2, 70, PositionMode::kAbsolute, With(KeyRope::kPre), 48,
                                 true}),
    [](const auto& info) {
      const PolicyCase& c = info.param;
      const KvCacheOptions& v = c.variant;
      std::string name = std::string(EvictionPolicyName(c.policy)) + "_c" + std::to_string(c.capacity) + "_" +
                         (c.positions == PositionMode::kAbsolute ? "abs" : "cache");
      if (v.key_rope != KeyRope::kInBlock) name += std::string("_rope_") + KeyRopeName(v.key_rope);
      if (v.h2o_score != H2OScore::kCumulative) name += std::string("_") + H2OScoreName(v.h2o_score);
      if (v.h2o_lifetime > 0) name += "_lifetime" + std::to_string(v.h2o_lifetime);
      if (!v.hot_tail) name += "_no_hot_tail";
      if (c.head_dim != 16) name += "_d" + std::to_string(c.head_dim);
      if (c.features) name += "_neox_scaled_softcap_swa";
      return name;
    });

TEST(KvCacheTest, FullPolicyRefusesPastCapacity) {
  const KvShape shape = Shape(1, 2, 1, 8, 8, 10000.0);
  auto cache = KvCache::Create(MakePlan(shape, EvictionPolicy::kFull, KvFormat::kInt8, 40), nullptr);
  ASSERT_TRUE(cache.ok());
  const Stream st(shape, 40, 1);
  std::vector<float> out(16);
  for (int t = 0; t < 40; ++t) {
    ASSERT_TRUE((*cache)->CheckRoom().ok()) << t;
    (*cache)->Append(0, st.K(t, 0), st.V(t, 0));
    (*cache)->Attend(0, st.Q(t, 0), out.data(), nullptr);
  }
  const Status s = (*cache)->CheckRoom();
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("context full"), std::string::npos);
}

// Mean relative L2 error of lane 0's heads (group of 4) against naive f32
// attention over the tokens the cache holds, sampled every `stride` tokens
// from `first` on, while `tokens` tokens stream through a cache of `plan`.
double MeanAttentionError(const Stream& st, const KvCachePlan& plan, int tokens, int first, int stride) {
  const KvShape& shape = st.shape;
  auto cache = KvCache::Create(plan, nullptr);
  KVEDGE_CHECK(cache.ok());
  std::vector<float> out(static_cast<size_t>(shape.n_heads) * shape.head_dim);
  double sum_err = 0;
  int n = 0;
  for (int t = 0; t < tokens; ++t) {
    (*cache)->Append(0, st.K(t, 0), st.V(t, 0));
    (*cache)->Attend(0, st.Q(t, 0), out.data(), nullptr);
    if (t < first || t % stride != 0) continue;
    const auto c = (*cache)->Contents(0, 0);
    for (int head = 0; head < 4; ++head) {  // heads of lane 0
      const auto ref = NaiveAttention(st, 0, head, t, c.tokens, c.positions, c.positions.back(), nullptr);
      sum_err += RelL2(ref, out.data() + static_cast<size_t>(head) * shape.head_dim);
      ++n;
    }
  }
  return sum_err / n;
}

// Quantized arenas: attention output error against naive f32 attention over
// the same kept tokens, on keys with an outlier channel.
TEST(KvCacheTest, QuantizedAttentionErrorIsBounded) {
  const KvShape shape = Shape(1, 8, 2, 64, 64, 10000.0);
  const int tokens = 400;
  const Stream st(shape, tokens, 11, /*outliers=*/true);
  for (KvFormat f : {KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
    const double mean = MeanAttentionError(st, MakePlan(shape, EvictionPolicy::kSinks, f, 260, 4), tokens, 0, 7);
    const double bound = f == KvFormat::kF16 ? 2e-3 : f == KvFormat::kInt8 ? 1e-2 : 0.15;
    EXPECT_LT(mean, bound) << KvFormatName(f);
    std::printf("[ info ] %s arena attention mean relative L2 error %.5f\n", KvFormatName(f), mean);
  }
}

// The quantized key paths against their definitions, restated here: keys
// carry R(c)·k with c the slot in the block (in-block), the stream index
// (post) or nothing (pre); a sealed block is one encode of its G keys,
// channel-wise or token-major in the value layout (token); without a hot tail
// the partial block is decode → add token → pad with it → encode per append.
// Values stay f32 (so the hot tail is f32 and exact); policy full, no eviction,
// so token i sits at position i.
struct AblationCase {
  KeyQuantAxis axis;
  KeyRope rope;
  bool hot_tail;
};

class AblationTest : public ::testing::TestWithParam<AblationCase> {};

TEST_P(AblationTest, AttentionEqualsNaiveOverDefinedKeys) {
  const AblationCase ac = GetParam();
  const KvShape shape = Shape(1, 4, 2, 16, 16, 10000.0);
  const int tokens = 150;
  KvCacheOptions o;
  o.policy = EvictionPolicy::kFull;
  o.key_format = KvFormat::kInt4;
  o.value_format = KvFormat::kF32;
  o.capacity = tokens;
  o.key_axis = ac.axis;
  o.key_rope = ac.rope;
  o.hot_tail = ac.hot_tail;
  auto plan = PlanKvCache(shape, o, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const Stream st(shape, tokens, 21, /*outliers=*/true);
  const int d = shape.head_dim;
  const bool token_major = ac.axis == KeyQuantAxis::kToken;
  const auto encode = [&](const std::vector<float>& cm, std::vector<uint8_t>& bytes) {  // cm: [D][G]
    if (!token_major) return ref::EncodeKeyBlock(KvFormat::kInt4, d, cm.data(), bytes.data());
    std::vector<float> tm(cm.size());
    for (int c = 0; c < d; ++c) for (int t = 0; t < G; ++t) tm[t * d + c] = cm[c * G + t];
    ref::EncodeValueBlock(KvFormat::kInt4, d, tm.data(), bytes.data());
  };
  const auto decode = [&](const std::vector<uint8_t>& bytes, std::vector<float>& cm) {
    if (!token_major) return ref::DecodeKeyBlock(KvFormat::kInt4, d, bytes.data(), cm.data());
    std::vector<float> tm(cm.size());
    ref::DecodeValueBlock(KvFormat::kInt4, d, bytes.data(), tm.data());
    for (int c = 0; c < d; ++c) for (int t = 0; t < G; ++t) cm[c * G + t] = tm[t * d + c];
  };
  std::vector<float> out(static_cast<size_t>(shape.n_heads) * d);
  // Every compiled target this CPU runs: the cache dispatches its kernels.
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    // f32 rounding: 1e-4. Where the GQA kernels quantize the folded query to
    // int16 (kv_kernels.h, AVX-512 VNNI; sealed int4 key blocks, the f32 hot
    // tail stays exact) the scores move by up to (δ/2)·Σ code, δ = max|q'|/32767:
    // an outlier channel 20x the rest costs the others ~4 of the 15 bits. Here
    // (D = 16, outlier keys) that measured up to 6.2e-4 (the f32 path: 2e-6),
    // beside ~10% for the int4 keys themselves (tests/simd TestAttentionErrorRealistic).
    const bool path_in_use = ac.axis == KeyQuantAxis::kChannel && ac.rope != KeyRope::kPre;
    const double tolerance = MultiKernelsQuantize() && path_in_use ? 1e-3 : 1e-4;
    double worst = 0.0;
    for (int h = 0; h < shape.n_kv_heads; ++h) {
      // Per lane: dequantized stored keys of sealed tokens, and the tail state.
      std::vector<std::vector<double>> keys;  // [token][D], rotated to the token's position
      std::vector<float> tail(static_cast<size_t>(G) * d);
      std::vector<uint8_t> tail_bytes(plan->key_block_bytes), block_bytes(plan->key_block_bytes);
      std::vector<float> decoded(tail.size());
      auto fresh = KvCache::Create(*plan, nullptr);
      ASSERT_TRUE(fresh.ok());
      for (int i = 0; i < tokens; ++i) {
        const int slot = i % G;
        const int64_t carried = ac.rope == KeyRope::kInBlock ? slot : ac.rope == KeyRope::kPost ? i : 0;
        const auto rk = Rotate(st.K(i, 0) + static_cast<size_t>(h) * d, shape, carried);
        if (ac.hot_tail) {
          for (int c = 0; c < d; ++c) tail[c * G + slot] = static_cast<float>(rk[c]);
          if (slot == G - 1) {
            encode(tail, block_bytes);
            decode(block_bytes, decoded);
          } else {
            decoded = tail;  // f32 hot tail
          }
        } else {
          if (slot > 0) decode(tail_bytes, tail);
          for (int t = slot; t < G; ++t) for (int c = 0; c < d; ++c) tail[c * G + t] = static_cast<float>(rk[c]);
          encode(tail, tail_bytes);
          decode(tail_bytes, decoded);
        }
        // Keys of the current block as stored now, moved to their positions.
        keys.resize(static_cast<size_t>(i / G * G));
        for (int t = 0; t <= slot; ++t) {
          std::vector<float> k(d);
          for (int c = 0; c < d; ++c) k[c] = decoded[c * G + t];
          const int64_t token = i / G * G + t;
          const int64_t carried_t = ac.rope == KeyRope::kInBlock ? t : ac.rope == KeyRope::kPost ? token : 0;
          keys.push_back(Rotate(k.data(), shape, token - carried_t));
        }
        (*fresh)->Append(0, st.K(i, 0), st.V(i, 0));
        (*fresh)->Attend(0, st.Q(i, 0), out.data(), nullptr);
        const int group = shape.n_heads / shape.n_kv_heads;
        for (int g = 0; g < group; ++g) {
          const int head = h * group + g;
          const auto q = Rotate(st.Q(i, 0) + static_cast<size_t>(head) * d, shape, i);
          std::vector<double> p(keys.size());
          double mx = -1e300, sum = 0;
          for (size_t j = 0; j < keys.size(); ++j) {
            double dot = 0;
            for (int c = 0; c < d; ++c) dot += q[c] * keys[j][c];
            mx = std::max(mx, p[j] = dot / std::sqrt(static_cast<double>(d)));
          }
          for (auto& x : p) sum += (x = std::exp(x - mx));
          std::vector<double> ref(d, 0.0);
          for (size_t j = 0; j < keys.size(); ++j) {
            const float* v = st.V(static_cast<int>(j), 0) + static_cast<size_t>(h) * d;
            for (int c = 0; c < d; ++c) ref[c] += p[j] / sum * v[c];
          }
          const double err = RelL2(ref, out.data() + static_cast<size_t>(head) * d);
          worst = std::max(worst, err);
          ASSERT_LT(err, tolerance) << "token " << i << " head " << head;
        }
      }
    }
    std::printf("[ info ] %s: largest attention rel L2 error vs the definition %.3g (tolerance %.0e)\n",
                hwy::TargetName(target), worst, tolerance);
  }
  hwy::SetSupportedTargetsForTest(0);
}

INSTANTIATE_TEST_SUITE_P(
    KeyPaths, AblationTest,
    ::testing::Values(AblationCase{KeyQuantAxis::kChannel, KeyRope::kInBlock, true},
                      AblationCase{KeyQuantAxis::kToken, KeyRope::kInBlock, true},
                      AblationCase{KeyQuantAxis::kChannel, KeyRope::kPre, true},
                      AblationCase{KeyQuantAxis::kChannel, KeyRope::kPost, true},
                      AblationCase{KeyQuantAxis::kChannel, KeyRope::kInBlock, false},
                      AblationCase{KeyQuantAxis::kToken, KeyRope::kPre, false}),
    [](const auto& info) {
      const AblationCase& c = info.param;
      std::string rope = KeyRopeName(c.rope);
      std::replace(rope.begin(), rope.end(), '-', '_');
      return std::string(KeyQuantAxisName(c.axis)) + "_" + rope + (c.hot_tail ? "" : "_no_hot_tail");
    });

// Token-wise INT4 keys must lose to channel-wise ones on keys with an outlier
// channel: the premise of KIVI/KVQuant that the evaluator measures on models.
TEST(KvCacheTest, TokenWiseKeysLoseToChannelWiseOnOutlierChannels) {
  const KvShape shape = Shape(1, 8, 2, 64, 64, 10000.0);
  const int tokens = 300;
  const Stream st(shape, tokens, 13, /*outliers=*/true);
  double mean[2] = {0, 0};
  for (KeyQuantAxis axis : {KeyQuantAxis::kChannel, KeyQuantAxis::kToken}) {
    KvCacheOptions o;
    o.key_axis = axis;
    auto cache = KvCache::Create(MakePlan(shape, EvictionPolicy::kSinks, KvFormat::kInt4, 260, 4, -1,
                                          PositionMode::kInCache, 1, o),
                                 nullptr);
    ASSERT_TRUE(cache.ok());
    std::vector<float> out(static_cast<size_t>(shape.n_heads) * shape.head_dim);
    int n = 0;
    for (int t = 0; t < tokens; ++t) {
      (*cache)->Append(0, st.K(t, 0), st.V(t, 0));
      (*cache)->Attend(0, st.Q(t, 0), out.data(), nullptr);
      if (t % 5 != 0) continue;
      const auto c = (*cache)->Contents(0, 0);
      const auto ref = NaiveAttention(st, 0, 0, t, c.tokens, c.positions, c.positions.back(), nullptr);
      mean[static_cast<int>(axis)] += RelL2(ref, out.data());
      ++n;
    }
    mean[static_cast<int>(axis)] /= n;
  }
  std::printf("[ info ] int4 keys, mean relative L2 error: channel-wise %.5f, token-wise %.5f\n", mean[0], mean[1]);
  EXPECT_LT(mean[0], mean[1]);
}

// H2O re-quantizes heavy hitters whenever a block leaves the window (decode,
// rotate to the new slot, encode again). The error that adds, measured: the
// attention error over the heavy-hitter part of an h2o cache against naive
// attention over the same tokens, beside a sinks cache of the same formats
// whose tokens were quantized once. Both print. Measured (x86, this data):
// int8 0.0073 → 0.0121, int4 0.122 → 0.237: re-forming blocks of tokens from
// different times widens channel ranges and repeats rounding, roughly doubling
// the error. The bound (2.5x) guards against regressions; keeping unchanged
// heavy blocks in place instead of re-forming all of them is the known fix.
TEST(KvCacheTest, HeavyHitterRequantizationErrorIsMeasuredAndBounded) {
  const KvShape shape = Shape(1, 8, 2, 64, 64, 10000.0);
  const int tokens = testing::ScaledCount(600, 320);
  const Stream st(shape, tokens, 17, /*outliers=*/true);
  for (KvFormat f : {KvFormat::kInt8, KvFormat::kInt4}) {
    double mean[2];
    int p = 0;
    for (EvictionPolicy policy : {EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
      // h2o has re-formed its heavy blocks several times by token 300.
      mean[p++] = MeanAttentionError(
          st, MakePlan(shape, policy, f, 260, 4, policy == EvictionPolicy::kH2O ? 128 : -1), tokens, 300, 5);
    }
    std::printf("[ info ] %s attention error: sinks (quantized once) %.5f, h2o (heavy hitters re-quantized) %.5f\n",
                KvFormatName(f), mean[0], mean[1]);
    EXPECT_LT(mean[1], 2.5 * mean[0]) << KvFormatName(f);
  }
}

TEST(KvCacheTest, ThreadedAttentionEqualsSingleThreaded) {
  const KvShape shape = Shape(2, 8, 4, 32, 32, 10000.0);
  const KvCachePlan plan = MakePlan(shape, EvictionPolicy::kH2O, KvFormat::kInt4, 200, 4, 60, PositionMode::kInCache, 2);
  auto a = KvCache::Create(plan, nullptr);
  auto b = KvCache::Create(plan, nullptr);
  auto threads = ThreadArena::Create(2);
  ASSERT_TRUE(a.ok() && b.ok() && threads.ok());
  const Stream st(shape, 300, 5);
  std::vector<float> oa(256), ob(256);
  for (int t = 0; t < 300; ++t) {
    for (int l = 0; l < 2; ++l) {
      (*a)->Append(l, st.K(t, l), st.V(t, l));
      (*b)->Append(l, st.K(t, l), st.V(t, l));
      (*a)->Attend(l, st.Q(t, l), oa.data(), nullptr);
      (*b)->Attend(l, st.Q(t, l), ob.data(), threads->get());
      ASSERT_EQ(oa, ob) << t;
    }
  }
  EXPECT_EQ((*a)->Contents(1, 3).tokens, (*b)->Contents(1, 3).tokens);
}

// Allocation-free appends and attention, constant arena, held ≤ arena at
// every step of a 100k-token stream.
TEST(KvCacheTest, LongStreamStaysInBudgetWithoutAllocating) {
  const KvShape shape = Shape(1, 2, 1, 8, 8, 10000.0);
  struct Variant {
    EvictionPolicy policy;
    KvCacheOptions options;
    int tokens;
  };
  std::vector<Variant> variants;
  for (EvictionPolicy p : {EvictionPolicy::kWindow, EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
    variants.push_back({p, KvCacheOptions(), 100000});
  }
  // Ablation and H2O-ranking paths: shorter streams, same guarantees.
  KvCacheOptions token_keys;
  token_keys.key_axis = KeyQuantAxis::kToken;
  variants.push_back({EvictionPolicy::kSinks, token_keys, 10000});
  variants.push_back({EvictionPolicy::kSinks, With(KeyRope::kPost), 10000});
  variants.push_back({EvictionPolicy::kSinks, With(KeyRope::kPre), 10000});
  variants.push_back({EvictionPolicy::kSinks, With(KeyRope::kInBlock, H2OScore::kCumulative, 0, false), 10000});
  variants.push_back({EvictionPolicy::kH2O, With(KeyRope::kPre, H2OScore::kTova), 10000});
  variants.push_back({EvictionPolicy::kH2O, With(KeyRope::kInBlock, H2OScore::kAge, 500), 10000});
  for (const Variant& var : variants) {
    KvCacheOptions o = var.options;
    o.policy = var.policy;
    o.budget_bytes = 24 << 10;
    auto plan = PlanKvCache(shape, o, 1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    MemoryBudget budget("test budget", o.budget_bytes);
    auto cache = KvCache::Create(*plan, &budget);
    ASSERT_TRUE(cache.ok());
    const Stream st(shape, 64, 3);
    std::vector<float> out(16);
    const uint64_t arena = (*cache)->Stats().arena_bytes;
    EXPECT_LE(budget.used(), o.budget_bytes);
    ScopedAllocationCounter allocations;
    const int tokens = testing::ScaledCount(var.tokens, 500);
    for (int t = 0; t < tokens; ++t) {
      (*cache)->Append(0, st.K(t % 64, 0), st.V(t % 64, 0));
      (*cache)->Attend(0, st.Q(t % 64, 0), out.data(), nullptr);
      const KvCacheStats s = (*cache)->Stats();
      ASSERT_LE(s.held_bytes, s.arena_bytes) << t;
      ASSERT_EQ(s.arena_bytes, arena);
      ASSERT_LE(s.tokens_held, static_cast<uint64_t>(plan->capacity));
    }
    EXPECT_EQ(allocations.count(), 0) << plan->Describe();
    EXPECT_EQ(budget.high_water(), budget.used());
    for (float x : out) EXPECT_TRUE(std::isfinite(x));
  }
}

}  // namespace
}  // namespace kvedge
